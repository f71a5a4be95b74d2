//! The timeslice paper's analysis over a scenario's mixes (`analyses = ["timeslice"]`,
//! paper 5). What it reports depends on the scenario's variants and records:
//!
//! - **Figure 1** (variants `solo` and others, threads labelled `main`): each mix is one
//!   program; its slowdown under each other variant is `100 · (1 − IPC / IPC solo)`,
//!   paired by seed.
//! - **Figures 5–8 and 10** (a variant labelled `cfs` and others): each mix is a set of
//!   programs; a program's *runtime* for fixed work is the inverse of its instructions
//!   per ms on a CPU times the run's mean CPU share over the measured window (its
//!   progress with the equal long-run share; the window's own shares are quantized by
//!   long slices, see `rate`); a variant's *improvement* is
//!   `100 · (1 − geomean over every program of every mix of runtime(variant) /
//!   runtime(cfs))`, per seed, then mean and 95% interval over seeds (the spread over
//!   the programs is shown too, as the paper's error bars are); LLC misses for the same
//!   work are compared through misses per instruction, in all and per program; the
//!   fairness is each variant's CPU-share coefficient of variation in the window and
//!   the largest lag, the most CPU time any thread had behind the mean share (long-run
//!   fairness holds while it stays within a slice). The slice column gives the dynamic
//!   variant's chosen slices. Figure 9 is the per-program improvement (mean over the
//!   mixes a program is in). The window must
//!   hold rounds of the longest slice: the fewest slices any thread of each variant
//!   began in a measured window is shown (the general window check fails below the
//!   scenario's `min_quanta` in any variant).
//! - **Slice profiles** (`kernel.slice_profile_ms`): Figure 2 (LLC lines filled while a
//!   `main` thread was off the CPU, as a share of the LLC), Figure 3 (LLC misses per ms
//!   in each bin of a slice, averaged over runs, per program), and Figure 11 (the miss
//!   rate at the fifth bin of a run against its first, α, and the paper's estimate of
//!   what ideal partitioning would add beyond slices of five bins, `(1 − α) / (1 +
//!   4α)` per run, averaged; beside it, each variant with a partitioned LLC against
//!   the same variant unpartitioned: misses avoided and runtime improvement per
//!   program).
//! - **Across files** ([`across_files`]): the files reproduced together that can be
//!   compared ([`compared`]) side by side, improvement per slice length, with Figure
//!   8's plot of programs per core.
//!
//! Measures (the `metric` of the scenario's paper values; `variant` the variant, and
//! `program` a mix label where the measure is per mix): `improvement_pct`,
//! `llc_miss_change_pct` (misses per instruction of all the programs, against `cfs`),
//! `llc_miss_geomean_change_pct` (the geometric mean over programs of their own),
//! `slowdown_pct` (Figure 1, mean over programs), `slowdown_max_pct` (the largest
//! program's mean), `offcpu_fill_pct` (Figure 2, the median over the `main` thread's
//! runs of one mix, counting the fills Intel's "LLC Misses" event counts, with which the
//! paper measured it: demand and first-level prefetch fills, not the L2 streamer's).

pub mod host;

use crate::scenario::MixRuns;
use cachesched_policies::TimesliceStats;

use crate::metrics::metric;

use crate::scenario::Scenario;

use crate::error::Result;
use crate::files::write_file;
use crate::report::agreement;
use crate::scenario::PaperValue;
use crate::stats::{geomean, quantile};
use crate::stats::{over_seeds, plain, show};
use crate::svg::{bar_chart, line_chart, Marks, Series, XAxis};
use cachesched_core::num::ratio;
use cachesched_policies::PolicySpec;
use cachesched_sim::RunResult;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The measures the analysis reports, as a paper value's `metric`.
pub const MEASURES: &[&str] = &[
    "improvement_pct",
    "llc_miss_change_pct",
    "llc_miss_geomean_change_pct",
    "slowdown_pct",
    "slowdown_max_pct",
    "offcpu_fill_pct",
];

/// Checks a paper value of a `timeslice` scenario: one of [`MEASURES`], a known
/// variant (not the baseline for a comparison with it), a value range, and a program
/// that is a mix label.
pub fn validate_paper_value(pv: &PaperValue, sc: &Scenario) -> Result<(), String> {
    pv.check_over_mixes(sc, "timeslice", MEASURES, false)?;
    let what = &pv.what;
    let compares = pv.metric != "offcpu_fill_pct";
    if compares && (pv.variant == "cfs" || pv.variant == "solo") {
        return Err(format!(
            "paper value '{what}': {} compares a variant with the baseline, so its \
             variant cannot be the baseline",
            pv.metric
        ));
    }
    if let Some(p) = &pv.program {
        if !sc.mixes.iter().any(|m| &m.label == p) {
            return Err(format!("paper value '{what}': no mix labelled '{p}'"));
        }
    }
    Ok(())
}

/// What the analysis measured, for the paper table: (measure, variant label, mix or
/// program if the measure is per program) → mean and 95% half-width (NaN: none).
type Measured = BTreeMap<(String, String, Option<String>), (f64, f64)>;

/// Per mix (in order): its label and, per variant, per seed, the run.
struct Data<'a> {
    mixes: Vec<String>,
    runs: Vec<Vec<BTreeMap<u64, &'a RunResult>>>,
}

impl<'a> Data<'a> {
    fn new(sc: &Scenario, done: &'a [MixRuns]) -> Data<'a> {
        let nv = sc.variants.len();
        let mut d = Data {
            mixes: Vec::new(),
            runs: Vec::new(),
        };
        for (mix, _, jobs, runs) in done {
            let mut per = vec![BTreeMap::new(); nv];
            for (j, r) in jobs.iter().zip(runs) {
                per[j.variant].insert(j.seed, r);
            }
            d.mixes.push(mix.clone().unwrap_or_default());
            d.runs.push(per);
        }
        d
    }

    /// The seeds every mix ran under both variant `v` and `base`: a measure taken per
    /// seed over every mix (a geometric mean over all programs) is taken over the same
    /// mixes at each seed, although seeds added one at a time ([`crate::seeds`]) give
    /// mixes different seeds.
    fn common_seeds(&self, (v, base): (usize, usize)) -> Vec<u64> {
        let Some(first) = self.runs.first() else {
            return Vec::new();
        };
        first[v]
            .keys()
            .copied()
            .filter(|s| {
                self.runs
                    .iter()
                    .all(|m| m[v].contains_key(s) && m[base].contains_key(s))
            })
            .collect()
    }

    /// Per seed, `f` over every (mix, thread index) pair of variant `v` against `base`,
    /// for the pairs where both values are finite.
    fn pairs(&self, seed: u64, vb: (usize, usize), f: &ThreadMeasure) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        self.each_pair(Some(seed), vb, f, &mut |_, x, y| out.push((x, y)));
        out
    }

    /// Per program (thread name), `f` of variant `v` against `base` over every mix and
    /// seed, where both values are finite and positive.
    fn by_program(
        &self,
        vb: (usize, usize),
        f: &ThreadMeasure,
    ) -> BTreeMap<String, Vec<(f64, f64)>> {
        let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        self.each_pair(None, vb, f, &mut |name, x, y| {
            out.entry(name.to_string()).or_default().push((x, y))
        });
        out
    }

    /// Calls `visit` with each thread's name and its `f` under variant `v` and under
    /// `base` in the same mix and seed (every seed, or `seed` only), where both values
    /// are finite and positive.
    fn each_pair(
        &self,
        seed: Option<u64>,
        (v, base): (usize, usize),
        f: &ThreadMeasure,
        visit: &mut dyn FnMut(&str, f64, f64),
    ) {
        for m in &self.runs {
            for (s, a) in &m[v] {
                if seed.is_some_and(|x| x != *s) {
                    continue;
                }
                let Some(b) = m[base].get(s) else {
                    continue;
                };
                for (ta, tb) in a.threads.iter().zip(&b.threads) {
                    let (x, y) = (f(ta, a), f(tb, b));
                    if x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0 {
                        visit(&ta.name, x, y);
                    }
                }
            }
        }
    }
}

/// A measure of a thread in its run, such as [`rate`] or [`mpi`].
type ThreadMeasure = dyn Fn(&cachesched_sim::result::ThreadResult, &RunResult) -> f64;

/// A thread's rate of progress for fixed work, instructions per ms: its instructions
/// per ms on a CPU times the run's mean CPU share (the time on a CPU that each thread
/// gets in the long run, when shares are equal, less what context switches take).
/// Not its instructions over the window: a window of a few rounds of long slices gives
/// some threads one slice more than others (shares 280 against 240 ms in a 900 ms
/// window of 70 ms slices among four), which would move a program's rate by up to a
/// sixth, a quantization of the window that a run of fixed work does not have.
fn rate(t: &cachesched_sim::result::ThreadResult, r: &RunResult) -> f64 {
    fair_rate(
        t.counters.instructions,
        t.cpu_share,
        &running_shares(r),
        r.measured_ms,
    )
}

/// The CPU shares of the threads of run `r` still running at its end.
fn running_shares(r: &RunResult) -> Vec<f64> {
    r.threads
        .iter()
        .filter(|t| !t.exited)
        .map(|t| t.cpu_share)
        .collect()
}

/// [`rate`] from its parts: `instructions` retired in `share` of a `window_ms` window,
/// among threads whose shares are `shares`.
fn fair_rate(instructions: u64, share: f64, shares: &[f64], window_ms: f64) -> f64 {
    let mean_share = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    instructions as f64 / (share * window_ms).max(1e-9) * mean_share
}

/// The most CPU time, ms, that a thread still running had behind the mean of the
/// running threads in run `r`'s measured window (every CPU runs as many threads in the
/// timeslice scenarios, so the mean is each one's fair share).
fn largest_lag_ms(r: &RunResult) -> f64 {
    lag_ms(&running_shares(r), r.measured_ms)
}

/// [`largest_lag_ms`] from its parts: the threads' `shares` of a `window_ms` window.
fn lag_ms(shares: &[f64], window_ms: f64) -> f64 {
    let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    shares
        .iter()
        .map(|s| (mean - s) * window_ms)
        .fold(f64::NAN, f64::max)
}

/// A thread's LLC misses per instruction.
fn mpi(t: &cachesched_sim::result::ThreadResult, _r: &RunResult) -> f64 {
    ratio(t.counters.llc_misses, t.counters.instructions)
}

/// The share of a thread's cycles stalled waiting for data or instructions from
/// beyond the L1 (the store buffer's stalls not included).
fn stall_share(t: &cachesched_sim::result::ThreadResult, _r: &RunResult) -> f64 {
    ratio(t.counters.mem_stall_cycles, t.counters.cycles)
}

/// The slice length of a variant's timeslice policy, ms (0 for the baseline; `None`
/// for anything else, such as a partitioned LLC).
fn slice_of(sc: &Scenario, v: usize) -> Option<f64> {
    let var = &sc.variants[v];
    if var.partition.is_some() {
        return None;
    }
    if var.label == "cfs" {
        return Some(0.0);
    }
    static_slice(var)
}

/// The slice of a variant's static timeslice policy, ms, if it has one.
fn static_slice(var: &crate::scenario::Variant) -> Option<f64> {
    var.policies.iter().find_map(|p| match p {
        PolicySpec::Timeslice(c) if c.mode == cachesched_policies::timeslice::Mode::Static => {
            Some(c.slice_ms)
        }
        _ => None,
    })
}

/// Whether a paper value is a variant's runtime improvement over all its programs.
fn whole_improvement(pv: &PaperValue) -> bool {
    pv.metric == "improvement_pct" && pv.program.is_none()
}

/// `x` with `unit`, or "–" where it is not a number (nothing to measure).
fn finite(x: f64, unit: &str) -> String {
    if x.is_finite() {
        format!("{}{unit}", plain(x))
    } else {
        "–".to_string()
    }
}

/// Per program of every mix of seed `s`, its runtime under variant `v` over its runtime
/// under `cfs` (the inverse ratio of their [`rate`]s).
fn runtime_ratios(data: &Data<'_>, s: u64, v: usize, cfs: usize) -> Vec<f64> {
    data.pairs(s, (v, cfs), &rate)
        .iter()
        .map(|(x, y)| y / x)
        .collect()
}

/// The runtime improvement of runtime `ratios` (variant over CFS), %:
/// `100 · (1 − geomean)`.
fn improvement(ratios: &[f64]) -> f64 {
    100.0 * (1.0 - geomean(ratios.iter().copied()))
}

/// The analysis section; plots are written to `out`.
pub fn analysis(sc: &Scenario, done: &[MixRuns], out: &Path) -> Result<String> {
    let data = Data::new(sc, done);
    let at = |l: &str| sc.variants.iter().position(|v| v.label == l);
    let mut md = String::new();
    let mut measured = Measured::new();
    if let Some(solo) = at("solo") {
        md += &slowdowns(sc, &data, solo, &mut measured, out)?;
    }
    if let Some(cfs) = at("cfs") {
        if sc.variants.len() > 1 {
            md += &improvements(sc, &data, cfs, &mut measured, out)?;
        }
    }
    for r in sc.references.iter().filter_map(|r| at(r)) {
        // a diagnostic's comparison: its values are not the paper's measure
        md += &improvements(sc, &data, r, &mut Measured::new(), out)?;
    }
    md += &profiles(sc, &data, &mut measured, out)?;
    md += &paper_table(sc, &measured);
    Ok(md)
}

/// The slice column of variant `v`'s row: its static slice, "CFS's own" for a variant
/// without policies under the CFS baseline (with the CPUs online it scales by, where
/// the variant sets them), or for the dynamic variant the mean over runs of the slices
/// it had set when each run ended ("–" when no run set one).
fn slice_cell(sc: &Scenario, data: &Data<'_>, v: usize) -> String {
    let var = &sc.variants[v];
    if let Some(ms) = static_slice(var) {
        return plain(ms);
    }
    if var.policies.is_empty()
        && var.baseline.unwrap_or(sc.kernel.baseline) == cachesched_sim::Baseline::Cfs
    {
        return match var.cfs_online_cpus {
            Some(n) => format!("CFS's own, {n} CPUs online"),
            None => "CFS's own".to_string(),
        };
    }
    let chosen: Vec<f64> = data
        .runs
        .iter()
        .flat_map(|m| m[v].values())
        // a run whose policy set no slice reports a mean of 0
        .filter_map(|r| r.stats_of::<TimesliceStats>())
        .filter(|s| s.threads_with_slice > 0)
        .map(|s| s.mean_slice_ms)
        .collect();
    if chosen.is_empty() {
        "–".to_string()
    } else {
        format!(
            "{} (chosen, mean)",
            plain(chosen.iter().sum::<f64>() / chosen.len() as f64)
        )
    }
}

/// The fewest slices any thread still running began in a measured window of variant
/// `v`, over every mix and seed (`None` without runs).
fn fewest_slices(data: &Data<'_>, v: usize) -> Option<u64> {
    data.runs
        .iter()
        .flat_map(|m| m[v].values())
        .filter_map(|r| crate::metrics::fewest_slices(r).map(|t| t.slices))
        .min()
}

/// Figure 1: per program (mix) the `main` threads' IPC slowdown under each variant
/// against `solo`.
fn slowdowns(
    sc: &Scenario,
    data: &Data<'_>,
    solo: usize,
    measured: &mut Measured,
    out: &Path,
) -> Result<String> {
    let ipc = |r: &RunResult| r.counters_of("main").unwrap_or_default().ipc();
    let others: Vec<usize> = (0..sc.variants.len()).filter(|&v| v != solo).collect();
    let mut md = String::from(
        "**Slowdown against running alone** (Figure 1): the program's IPC, `100 · (1 − IPC / \
         IPC alone)` paired by seed; means over seeds ± 95% half-width.\n\n| program | IPC alone |",
    );
    for &v in &others {
        let _ = write!(md, " slowdown: {} |", sc.variants[v].label);
    }
    md += "\n|---|---|";
    md += &"---|".repeat(others.len());
    md += "\n";
    // per variant, per seed, per program
    let mut per: Vec<BTreeMap<u64, Vec<f64>>> = vec![BTreeMap::new(); sc.variants.len()];
    let mut series: Vec<Series> = Vec::new();
    let mut means: Vec<Vec<(f64, (f64, f64))>> = vec![Vec::new(); sc.variants.len()];
    for (p, m) in data.mixes.iter().enumerate() {
        let base: Vec<f64> = data.runs[p][solo].values().map(|r| ipc(r)).collect();
        let _ = write!(md, "| {m} | {} |", show(over_seeds(&base), ""));
        for &v in &others {
            let xs: Vec<f64> = data.runs[p][v]
                .iter()
                .filter_map(|(s, r)| {
                    let b = ipc(data.runs[p][solo].get(s)?);
                    let x = 100.0 * (1.0 - ipc(r) / b);
                    per[v].entry(*s).or_default().push(x);
                    x.is_finite().then_some(x)
                })
                .collect();
            let st = over_seeds(&xs);
            means[v].push((p as f64, st));
            let _ = write!(md, " {} |", show(st, "%"));
        }
        md += "\n";
    }
    let _ = write!(md, "| mean | |");
    for &v in &others {
        // the mean over programs at the seeds every program ran under both
        let common = data.common_seeds((v, solo));
        let xs: Vec<f64> = per[v]
            .iter()
            .filter(|(s, _)| common.contains(s))
            .map(|(_, x)| x.iter().sum::<f64>() / x.len().max(1) as f64)
            .collect();
        let st = over_seeds(&xs);
        let worst = means[v]
            .iter()
            .map(|&(_, (m, _))| m)
            .fold(f64::NEG_INFINITY, f64::max);
        let label = sc.variants[v].label.clone();
        measured.insert(("slowdown_pct".into(), label.clone(), None), st);
        measured.insert(
            ("slowdown_max_pct".into(), label.clone(), None),
            (worst, f64::NAN),
        );
        let _ = write!(md, " {} (largest {}) |", show(st, "%"), plain(worst));
        series.push(Series::with_intervals(label, &means[v]));
    }
    md += "\n\nA program slowed by at least 3% by the microkernel on its core counts as \
           memory-intensive (§4.1).\n\n";
    let marks = Marks {
        label: "paper: average 8%".into(),
        points: (0..data.mixes.len()).map(|i| (i, 8.0, 8.0)).collect(),
    };
    write_file(
        &out.join("fig1-slowdown.svg"),
        &bar_chart(
            &format!("{}: slowdown against running alone", sc.name),
            "program",
            "IPC slowdown (%)",
            &data.mixes,
            &series,
            Some(&marks),
        ),
    )?;
    md += "Plot: `fig1-slowdown.svg`.\n\n";
    Ok(md)
}

/// Figures 5–10: every variant's runtime improvement, LLC misses and fairness against
/// variant `base` (the baseline, `cfs`, or one of the scenario's `references`), and the
/// per-program improvement of the variant with the 45 ms slices (or the nearest).
/// Against a reference, the plots' names end in `-vs-<reference>` and the paper's
/// values are left out (they are against CFS).
fn improvements(
    sc: &Scenario,
    data: &Data<'_>,
    base: usize,
    measured: &mut Measured,
    out: &Path,
) -> Result<String> {
    let base_label = &sc.variants[base].label;
    let is_cfs = base_label == "cfs";
    // the base's name in prose, and the suffix of its plots' names
    let (name, suffix) = if is_cfs {
        ("CFS".to_string(), String::new())
    } else {
        (base_label.clone(), format!("-vs-{base_label}"))
    };
    let mut md = if is_cfs {
        String::from("**Runtime improvement against CFS** (Figures 5–8, 10)")
    } else {
        format!(
            "**Runtime improvement against {base_label}** (a diagnostic's reference, not the \
             paper's baseline; the paper's values are against CFS and are not shown)"
        )
    };
    md += &format!(
        ": per seed, `100 · (1 − \
         geomean over the programs of runtime / runtime under {base_label})` (runtime: the inverse \
         of a program's instructions per ms on a CPU times the run's mean CPU share, its \
         progress with an equal share; the window's own shares vary with where it cut the \
         rounds of long slices); spread: the standard \
         deviation of the per-program improvements (the paper's error bars); slice: the \
         variant's, or for the dynamic variant the mean over runs of the slices it had set \
         when the run ended; LLC misses for \
         the same work (misses per instruction) in all and per program (geometric mean); \
         CPU-share CV: the spread of the threads' shares of CPU time in the window; largest \
         lag: the most CPU time any thread had behind the threads' mean in a window, over \
         every run (long-run fairness holds while it stays within a slice: the shares then \
         converge as the window grows); fewest slices: the \
         fewest slices any thread began in a measured window (the window's rounds of the \
         variant's slices). Means over seeds ± 95% half-width.\n\n| variant | slice (ms) \
         | improvement | spread over programs | LLC misses, all | LLC misses, per program \
         | CPU-share CV | largest lag (ms) | context switches per s | fewest slices |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut bars: Vec<(String, (f64, f64))> = Vec::new();
    for v in 0..sc.variants.len() {
        let label = sc.variants[v].label.clone();
        let cv: Vec<f64> = data
            .runs
            .iter()
            .flat_map(|m| m[v].values().map(|r| r.cpu_share_cv))
            .collect();
        let cs: Vec<f64> = data
            .runs
            .iter()
            .flat_map(|m| {
                // a rate: windows that end by their quanta differ between variants
                m[v].values()
                    .map(|r| metric(r, "context_switches_per_s").expect("known metric"))
            })
            .collect();
        let lag = data
            .runs
            .iter()
            .flat_map(|m| m[v].values().map(|r| largest_lag_ms(r)))
            .fold(f64::NAN, f64::max);
        let lag = finite(lag, "");
        let fewest = fewest_slices(data, v).map_or("–".to_string(), |f| f.to_string());
        // the variant's slice, the base's included
        let slice = slice_cell(sc, data, v);
        if v == base {
            let _ = writeln!(
                md,
                "| {label} | {slice} | – | – | – | – | {} | {lag} | {} | {fewest} |",
                show(over_seeds(&cv), ""),
                show(over_seeds(&cs), "")
            );
            continue;
        }
        let mut imp = Vec::new();
        let mut spread = Vec::new();
        let mut all = Vec::new();
        let mut per = Vec::new();
        for s in data.common_seeds((v, base)) {
            let ratios = runtime_ratios(data, s, v, base);
            if ratios.is_empty() {
                continue;
            }
            imp.push(improvement(&ratios));
            let each: Vec<f64> = ratios.iter().map(|q| 100.0 * (1.0 - q)).collect();
            let mean = each.iter().sum::<f64>() / each.len() as f64;
            spread.push(
                (each.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
                    / (each.len().max(2) - 1) as f64)
                    .sqrt(),
            );
            // misses for the same work: totals over programs, and per program
            let m = data.pairs(s, (v, base), &mpi);
            let (mut mv, mut mb, mut iv, mut ib) = (0.0, 0.0, 0.0, 0.0);
            for mix in &data.runs {
                let (Some(a), Some(b)) = (mix[v].get(&s), mix[base].get(&s)) else {
                    continue;
                };
                mv += a.totals.llc_misses as f64;
                iv += a.totals.instructions as f64;
                mb += b.totals.llc_misses as f64;
                ib += b.totals.instructions as f64;
            }
            all.push(100.0 * ((mv / iv) / (mb / ib) - 1.0));
            per.push(100.0 * (geomean(m.iter().map(|(x, y)| x / y)) - 1.0));
        }
        let (imp, spread, all, per) = (
            over_seeds(&imp),
            over_seeds(&spread),
            over_seeds(&all),
            over_seeds(&per),
        );
        measured.insert(("improvement_pct".into(), label.clone(), None), imp);
        measured.insert(("llc_miss_change_pct".into(), label.clone(), None), all);
        measured.insert(
            ("llc_miss_geomean_change_pct".into(), label.clone(), None),
            per,
        );
        let _ = writeln!(
            md,
            "| {label} | {slice} | {} | {} | {} | {} | {} | {lag} | {} | {fewest} |",
            show(imp, "%"),
            show(spread, " pp"),
            show(all, "%"),
            show(per, "%"),
            show(over_seeds(&cv), ""),
            show(over_seeds(&cs), "")
        );
        bars.push((label, imp));
    }
    md += "\n";
    // the improvement per variant, with the paper's values
    let cats: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let series = vec![Series::with_intervals(
        "measured".into(),
        &bars
            .iter()
            .enumerate()
            .map(|(i, b)| (i as f64, b.1))
            .collect::<Vec<_>>(),
    )];
    let marks = Marks {
        label: "paper".into(),
        points: sc
            .paper
            .iter()
            .filter(|pv| is_cfs && whole_improvement(pv))
            .filter_map(|pv| {
                let i = cats.iter().position(|c| *c == pv.variant)?;
                let r = pv.range();
                Some((i, r[0], r[1]))
            })
            .collect(),
    };
    write_file(
        &out.join(format!("improvement{suffix}.svg")),
        &bar_chart(
            &format!("{}: runtime improvement against {name}", sc.name),
            "variant",
            "runtime improvement, geometric mean (%)",
            &cats,
            &series,
            (!marks.points.is_empty()).then_some(&marks),
        ),
    )?;
    // Figure 9: per program, at the static slice nearest to 45 ms (not CFS's own)
    let detail = (0..sc.variants.len())
        .filter(|&v| v != base)
        .filter_map(|v| slice_of(sc, v).filter(|&s| s > 0.0).map(|s| (v, s)))
        .min_by(|a, b| (a.1 - 45.0).abs().total_cmp(&(b.1 - 45.0).abs()));
    if let Some((v, s)) = detail {
        let by_prog: BTreeMap<String, Vec<f64>> = data
            .by_program((v, base), &rate)
            .into_iter()
            .map(|(p, xy)| (p, xy.iter().map(|(x, y)| 100.0 * (1.0 - y / x)).collect()))
            .collect();
        let misses = data.by_program((v, base), &mpi);
        let stalls = data.by_program((v, base), &stall_share);
        let _ = write!(
            md,
            "**Per program at {ms} ms**{fig}: runtime improvement against {name}, mean \
             over every mix and seed the program ran in ± 95% half-width; beside it, what \
             the improvement comes from, geometric means over the same runs: its LLC \
             misses per 1,000 instructions and the share of its cycles stalled on memory, \
             under {name} and under {label}.\n\n| program | improvement | runs | LLC misses \
             per 1,000 instructions, {name} | at {ms} ms | memory-stall share of cycles, \
             {name} | at {ms} ms |\n|---|---|---|---|---|---|---|\n",
            ms = plain(s),
            label = sc.variants[v].label,
            fig = if is_cfs { " (Figure 9)" } else { "" },
        );
        // a program's geometric means under the base and under the variant, scaled
        let both = |m: &BTreeMap<String, Vec<(f64, f64)>>, p: &str, scale: f64| {
            let xy = m.get(p).map_or(&[][..], Vec::as_slice);
            (
                finite(scale * geomean(xy.iter().map(|(_, y)| *y)), ""),
                finite(scale * geomean(xy.iter().map(|(x, _)| *x)), ""),
            )
        };
        let mut pts = Vec::new();
        let mut cats = Vec::new();
        for (i, (p, xs)) in by_prog.iter().enumerate() {
            let st = over_seeds(xs);
            let (m_cfs, m_v) = both(&misses, p, 1000.0);
            let (s_cfs, s_v) = both(&stalls, p, 1.0);
            let _ = writeln!(
                md,
                "| {p} | {} | {} | {m_cfs} | {m_v} | {s_cfs} | {s_v} |",
                show(st, "%"),
                xs.len()
            );
            pts.push((i as f64, st));
            cats.push(p.clone());
        }
        write_file(
            &out.join(format!("fig9-per-program{suffix}.svg")),
            &bar_chart(
                &format!(
                    "{}: per-program improvement at {} ms{}",
                    sc.name,
                    plain(s),
                    if is_cfs {
                        String::new()
                    } else {
                        format!(" against {name}")
                    }
                ),
                "program",
                &format!("runtime improvement against {name} (%)"),
                &cats,
                &[Series::with_intervals(sc.variants[v].label.clone(), &pts)],
                None,
            ),
        )?;
        md += "\n";
    }
    let _ = writeln!(
        md,
        "Plots: `improvement{suffix}.svg`, `fig9-per-program{suffix}.svg`.\n"
    );
    Ok(md)
}

/// Figures 2, 3 and 11 from the runs' slice profiles.
fn profiles(sc: &Scenario, data: &Data<'_>, measured: &mut Measured, out: &Path) -> Result<String> {
    let any = data.runs.iter().any(|m| {
        m.iter().any(|v| {
            v.values()
                .any(|r| r.threads.iter().any(|t| !t.slice_profile.is_empty()))
        })
    });
    if !any {
        return Ok(String::new());
    }
    let bin_ms = sc.kernel.slice_profile_ms.unwrap_or(1.0);
    let mut md = String::new();
    // Figure 2: the main thread's off-CPU fills, per mix and variant
    let has_main = data.runs.iter().any(|m| {
        m.iter().any(|v| {
            v.values()
                .any(|r| r.threads.iter().any(|t| t.name == "main"))
        })
    });
    if has_main {
        md += "**LLC lines filled while the program is off the CPU** (Figure 2): per run of \
               the `main` thread after its first, the LLC's fills since it was switched out, \
               as a share of the LLC's lines (over 100%: more fills than lines), and the \
               share of its own lines that were gone when it came back; over every run of \
               every seed. *Event* counts what the paper's counter (Intel's architectural \
               LLC Misses event) counts: demand fills and the first-level prefetchers' (the \
               event may exclude the other prefetchers'); *all* adds the L2 streamer's \
               prefetch fills.\n\n| mix | variant | runs | median, event | mean, event | \
               90th percentile, event | median, all | own lines lost (mean) |\n\
               |---|---|---|---|---|---|---|---|\n";
        for (p, m) in data.mixes.iter().enumerate() {
            for (v, runs) in data.runs[p].iter().enumerate() {
                let mut event = Vec::new();
                let mut all = Vec::new();
                let mut lost = Vec::new();
                for r in runs.values() {
                    for t in r.threads.iter().filter(|t| t.name == "main") {
                        for run in &t.slice_profile {
                            if let Some(o) = run.off_cpu {
                                let lines = o.llc_lines.max(1) as f64;
                                all.push(100.0 * o.fills as f64 / lines);
                                event.push(100.0 * (o.fills - o.streamer_fills) as f64 / lines);
                                if o.own_lines_left > 0 {
                                    lost.push(
                                        100.0
                                            * (1.0
                                                - o.own_lines_back as f64
                                                    / o.own_lines_left as f64),
                                    );
                                }
                            }
                        }
                    }
                }
                if event.is_empty() {
                    continue;
                }
                let median = quantile(&mut event, 0.5);
                measured.insert(
                    (
                        "offcpu_fill_pct".into(),
                        sc.variants[v].label.clone(),
                        Some(m.clone()),
                    ),
                    (median, f64::NAN),
                );
                let _ = writeln!(
                    md,
                    "| {m} | {} | {} | {}% | {}% | {}% | {}% | {}% |",
                    sc.variants[v].label,
                    event.len(),
                    plain(median),
                    plain(event.iter().sum::<f64>() / event.len() as f64),
                    plain(quantile(&mut event, 0.9)),
                    plain(quantile(&mut all, 0.5)),
                    plain(lost.iter().sum::<f64>() / lost.len().max(1) as f64)
                );
            }
        }
        md += "\n";
    }
    // Figure 3: misses per ms per bin, per program, in the variant with the longest
    // static slices
    let longest = (0..sc.variants.len())
        .filter_map(|v| slice_of(sc, v).map(|s| (v, s)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((v, s)) = longest.filter(|&(_, s)| s > 0.0) {
        let mut curves: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
        let mut alphas: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for mix in &data.runs {
            for r in mix[v].values() {
                for t in &r.threads {
                    for run in &t.slice_profile {
                        // full bins only (the last is partial)
                        let full = run.llc_misses.len().saturating_sub(1);
                        let c = curves.entry(t.name.clone()).or_default();
                        for (i, &x) in run.llc_misses[..full].iter().enumerate() {
                            if c.len() <= i {
                                c.push(Vec::new());
                            }
                            c[i].push(x as f64 / bin_ms);
                        }
                        if full >= 5 && run.llc_misses[0] > 0 {
                            let a = (run.llc_misses[4] as f64 / run.llc_misses[0] as f64)
                                .clamp(0.0, 1.0);
                            alphas.entry(t.name.clone()).or_default().push(a);
                        }
                    }
                }
            }
        }
        let _ = write!(
            md,
            "**LLC misses per ms inside a {} ms slice** (Figure 3), in {} ms bins from the \
             slice's start, mean over every run of every seed of `{}`:\n\n| program | runs |",
            plain(s),
            plain(bin_ms),
            sc.variants[v].label
        );
        let nb = curves.values().map(Vec::len).max().unwrap_or(0).min(12);
        for i in 0..nb {
            let _ = write!(
                md,
                " {}–{} ms |",
                plain(i as f64 * bin_ms),
                plain((i + 1) as f64 * bin_ms)
            );
        }
        md += "\n|---|---|";
        md += &"---|".repeat(nb);
        md += "\n";
        let mut series = Vec::new();
        for (p, c) in &curves {
            let runs = c.first().map_or(0, Vec::len);
            let _ = write!(md, "| {p} | {runs} |");
            let mut pts = Vec::new();
            for (i, bin) in c.iter().take(nb).enumerate() {
                let mean = bin.iter().sum::<f64>() / bin.len().max(1) as f64;
                let _ = write!(md, " {} |", plain(mean));
                pts.push(((i as f64 + 1.0) * bin_ms, mean));
            }
            md += "\n";
            series.push(Series {
                label: p.clone(),
                points: pts,
                errors: Vec::new(),
            });
        }
        write_file(
            &out.join("fig3-misses-in-slice.svg"),
            &line_chart(
                &format!(
                    "{}: LLC misses per ms inside a {} ms slice",
                    sc.name,
                    plain(s)
                ),
                "time from the slice's start, end of bin (ms)",
                "LLC misses per ms",
                &series,
                XAxis::Categories(
                    &(0..nb)
                        .map(|i| plain((i as f64 + 1.0) * bin_ms))
                        .collect::<Vec<_>>(),
                ),
                None,
            ),
        )?;
        // Figure 11: α and the estimate, beside the partitioned runs where there are
        if !alphas.is_empty() && nb >= 5 {
            let parts = partitioned(sc, data);
            let _ = write!(
                md,
                "\n**Ideal partitioning beyond {} ms slices** (Figure 11): per run of `{}`, α \
                 = the misses of its fifth {} ms bin over its first; the paper's estimate of \
                 the misses ideal partitioning would avoid beyond slices of five bins, `(1 − \
                 α) / (1 + 4α)`, averaged over runs.",
                plain(5.0 * bin_ms),
                sc.variants[v].label,
                plain(bin_ms)
            );
            if !parts.is_empty() {
                md += " Measured: the LLC equally way-partitioned among the threads against \
                       the same variant unpartitioned, per program, the LLC misses per \
                       instruction avoided and the runtime improvement (geometric means over \
                       the program's runs in every mix and seed; a partition also takes \
                       capacity from the programs whose data outgrow it).";
            }
            md += "\n\n| program | runs | α: 25th | median | 75th | estimated misses avoided |";
            for (pv, bv, _) in &parts {
                let (pl, bl) = (&sc.variants[*pv].label, &sc.variants[*bv].label);
                let _ = write!(
                    md,
                    " `{pl}` against `{bl}`: misses avoided | runtime improvement |"
                );
            }
            md += "\n|---|---|---|---|---|---|";
            md += &"---|---|".repeat(parts.len());
            md += "\n";
            let mut cdf = Vec::new();
            for (p, a) in &mut alphas {
                // sorted first: the CDF below is drawn from the sorted values
                let q25 = quantile(a, 0.25);
                let gain: f64 =
                    a.iter().map(|x| (1.0 - x) / (1.0 + 4.0 * x)).sum::<f64>() / a.len() as f64;
                let _ = write!(
                    md,
                    "| {p} | {} | {} | {} | {} | {}% |",
                    a.len(),
                    plain(q25),
                    plain(quantile(a, 0.5)),
                    plain(quantile(a, 0.75)),
                    plain(100.0 * gain)
                );
                for (_, _, by) in &parts {
                    let (m, r) = by.get(p.as_str()).copied().unwrap_or((f64::NAN, f64::NAN));
                    let _ = write!(md, " {} | {} |", finite(m, "%"), finite(r, "%"));
                }
                md += "\n";
                cdf.push(Series {
                    label: p.clone(),
                    points: a
                        .iter()
                        .enumerate()
                        .map(|(i, &x)| (x, (i + 1) as f64 / a.len() as f64))
                        .collect(),
                    errors: Vec::new(),
                });
            }
            write_file(
                &out.join("fig11-alpha-cdf.svg"),
                &line_chart(
                    &format!("{}: miss-rate drop within a slice (CDF of α)", sc.name),
                    "α: misses in the fifth bin / misses in the first",
                    "fraction of slices",
                    &cdf,
                    XAxis::Linear,
                    None,
                ),
            )?;
            md += "\nPlots: `fig3-misses-in-slice.svg`, `fig11-alpha-cdf.svg`.\n\n";
        } else {
            md += "\nPlot: `fig3-misses-in-slice.svg`.\n\n";
        }
    }
    Ok(md)
}

/// Per program: LLC misses per instruction avoided and runtime improvement, %.
type PerProgram = BTreeMap<String, (f64, f64)>;

/// Each variant with a partitioned LLC, its sibling without (the same policies,
/// baseline and threads), and per program: the LLC misses per instruction it avoids
/// against the sibling and its runtime improvement, % (from geometric means of the
/// ratios over every run of the program in every mix and seed).
fn partitioned(sc: &Scenario, data: &Data<'_>) -> Vec<(usize, usize, PerProgram)> {
    let mut out = Vec::new();
    for (pv, p) in sc.variants.iter().enumerate() {
        if p.partition.is_none() {
            continue;
        }
        // the same variant in every other respect
        let bare = |x: &crate::scenario::Variant| crate::scenario::Variant {
            label: String::new(),
            partition: None,
            ..x.clone()
        };
        let Some(bv) = sc
            .variants
            .iter()
            .position(|b| b.partition.is_none() && bare(b) == bare(p))
        else {
            continue;
        };
        let misses = data.by_program((pv, bv), &mpi);
        let mut per = PerProgram::new();
        for (name, xy) in data.by_program((pv, bv), &rate) {
            // runtime ratio partitioned over not: rate(bv) / rate(pv)
            let runtime: Vec<f64> = xy.iter().map(|(x, y)| y / x).collect();
            let avoided = misses.get(&name).map_or(f64::NAN, |m| {
                improvement(&m.iter().map(|(x, y)| x / y).collect::<Vec<_>>())
            });
            per.insert(name, (avoided, improvement(&runtime)));
        }
        out.push((pv, bv, per));
    }
    out
}

/// How a scenario's mixes sit on the machine, for the comparison across files: the
/// number of CPUs its programs are bound to and the programs per CPU, when it has the
/// timeslice analysis, a `cfs` variant and a static slice variant, no `references`
/// (a diagnostic repeats another file's layout), only the paper's programs (no real
/// program: a real variant is read beside its figure, not pooled with it), and every
/// mix binds the same number of single-CPU programs to each of the same number of
/// CPUs (`None` otherwise). A held-out mix of profiles is compared as a file of its
/// own.
pub fn layout(sc: &Scenario) -> Option<(usize, usize)> {
    let has = |f: &dyn Fn(usize) -> bool| (0..sc.variants.len()).any(f);
    let real = sc
        .mixes
        .iter()
        .flat_map(|m| &m.threads)
        .chain(&sc.threads)
        .any(|g| g.real.is_some());
    if !sc.analyses.iter().any(|a| a == "timeslice")
        || real
        || !sc.references.is_empty()
        || !has(&|v| sc.variants[v].label == "cfs")
        || !has(&|v| sc.variants[v].label != "cfs" && slice_of(sc, v).is_some())
    {
        return None;
    }
    let per_cpu = |threads: &[cachesched_sim::config::ThreadGroup]| {
        let mut n: BTreeMap<u32, usize> = BTreeMap::new();
        for t in threads {
            match t.cpus.as_deref() {
                Some([c]) => *n.entry(*c).or_default() += t.count as usize,
                _ => return None,
            }
        }
        Some(n)
    };
    let first = per_cpu(&sc.mixes.first()?.threads)?;
    let (cpus, per_core) = (first.len(), *first.values().next()?);
    sc.mixes
        .iter()
        .all(|m| {
            per_cpu(&m.threads)
                .is_some_and(|n| n.len() == cpus && n.values().all(|&k| k == per_core))
        })
        .then_some((cpus, per_core))
}

/// Whether the comparison across files applies to these scenarios (two or more of
/// them have a [`layout`]), so that `reproduce` knows before running whether it will
/// write that section.
pub fn compared(scs: &[&Scenario]) -> bool {
    scs.iter().filter(|sc| layout(sc).is_some()).count() >= 2
}

/// One file's runtime improvement against CFS per static slice length, for the
/// comparison across files.
pub struct Curve {
    /// The scenario file's stem.
    stem: String,
    /// The machine preset its runs ran on.
    machine: String,
    /// The CPUs its programs are bound to.
    cpus: usize,
    /// Programs per CPU.
    per_core: usize,
    /// (slice ms, improvement over seeds: mean, 95% half-width).
    points: Vec<(f64, (f64, f64))>,
    /// The paper's improvement values: (slice ms, low, high).
    paper: Vec<(f64, f64, f64)>,
}

impl Curve {
    /// The scenario file's stem.
    pub fn stem(&self) -> &str {
        &self.stem
    }
}

/// The [`Curve`] of scenario file `stem` from its runs (`None` where it has no
/// [`layout`]).
pub fn curve(stem: &str, sc: &Scenario, done: &[MixRuns]) -> Option<Curve> {
    let (cpus, per_core) = layout(sc)?;
    let data = Data::new(sc, done);
    let cfs = sc.variants.iter().position(|v| v.label == "cfs")?;
    let statics: Vec<(usize, f64)> = (0..sc.variants.len())
        .filter(|&v| v != cfs)
        .filter_map(|v| slice_of(sc, v).map(|ms| (v, ms)))
        .collect();
    let mut points: Vec<(f64, (f64, f64))> = statics
        .iter()
        .map(|&(v, ms)| {
            let imp: Vec<f64> = data
                .common_seeds((v, cfs))
                .into_iter()
                .map(|s| runtime_ratios(&data, s, v, cfs))
                .filter(|r| !r.is_empty())
                .map(|r| improvement(&r))
                .collect();
            (ms, over_seeds(&imp))
        })
        .collect();
    // in slice order, as the plot's lines are drawn
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let paper = sc
        .paper
        .iter()
        .filter(|pv| whole_improvement(pv))
        .filter_map(|pv| {
            let &(_, ms) = statics
                .iter()
                .find(|(v, _)| sc.variants[*v].label == pv.variant)?;
            let r = pv.range();
            Some((ms, r[0], r[1]))
        })
        .collect();
    let machine = done
        .iter()
        .flat_map(|d| d.3.first())
        .map(|r| r.machine.clone())
        .next()
        .unwrap_or_default();
    Some(Curve {
        stem: stem.to_string(),
        machine,
        cpus,
        per_core,
        points,
        paper,
    })
}

/// The comparison across files (Figures 5–8 side by side): a table of each file's
/// improvement per slice length with the paper's values, `across-files.svg`
/// (improvement against slice length, one line per file and one per file's paper
/// values) and, where files on one machine differ only in programs per core, Figure 8
/// (`fig8-per-core.svg`). `command` made it; plots go to `out`.
pub fn across_files(curves: &[Curve], command: &str, out: &Path) -> Result<String> {
    let mut slices: Vec<f64> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .collect();
    slices.sort_by(f64::total_cmp);
    slices.dedup();
    let mut md = format!(
        "## Across files: runtime improvement against slice length\n\nGenerated by \
         `{command}`, from the files' own sections: each file's runtime improvement \
         against CFS per aggregated slice length (means over seeds ± 95% half-width; the \
         paper's value in brackets), side by side, as the paper compares the LLC's size \
         on two cores (its Figures 5 and 7), two against four cores (Figures 5 and 6) and \
         the programs per core on one machine (Figure 8).\n\n| file | machine | cores | \
         programs per core |"
    );
    for ms in &slices {
        let _ = write!(md, " {} ms |", plain(*ms));
    }
    md += "\n|---|---|---|---|";
    md += &"---|".repeat(slices.len());
    md += "\n";
    for c in curves {
        let _ = write!(
            md,
            "| {} | {} | {} | {} |",
            c.stem, c.machine, c.cpus, c.per_core
        );
        for ms in &slices {
            let cell = c
                .points
                .iter()
                .find(|p| p.0 == *ms)
                .map_or("–".to_string(), |p| show(p.1, "%"));
            let paper =
                c.paper
                    .iter()
                    .find(|p| p.0 == *ms)
                    .map_or(String::new(), |&(_, lo, hi)| {
                        if lo == hi {
                            format!(" [{}%]", plain(lo))
                        } else {
                            format!(" [{}–{}%]", plain(lo), plain(hi))
                        }
                    });
            let _ = write!(md, " {cell}{paper} |");
        }
        md += "\n";
    }
    // one line per file, and one per file's paper values (a range as its interval)
    let mut series = Vec::new();
    for c in curves {
        series.push(Series::with_intervals(c.stem.clone(), &c.points));
        if !c.paper.is_empty() {
            let pts: Vec<(f64, (f64, f64))> = c
                .paper
                .iter()
                .map(|&(ms, lo, hi)| (ms, ((lo + hi) / 2.0, (hi - lo) / 2.0)))
                .collect();
            series.push(Series::with_intervals(format!("{} (paper)", c.stem), &pts));
        }
    }
    write_file(
        &out.join("across-files.svg"),
        &line_chart(
            "Longer timeslices: runtime improvement against CFS, per file",
            "aggregated slice length (ms)",
            "runtime improvement, geometric mean (%)",
            &series,
            XAxis::Linear,
            None,
        ),
    )?;
    let mut plots = vec!["across-files.svg"];
    // Figure 8: files on one machine and the same CPUs that differ in programs per core
    let mut same: BTreeMap<(&str, usize), Vec<&Curve>> = BTreeMap::new();
    for c in curves {
        same.entry((&c.machine, c.cpus)).or_default().push(c);
    }
    if let Some(((machine, cpus), mut group)) = same
        .into_iter()
        .filter(|(_, g)| {
            let mut k: Vec<usize> = g.iter().map(|c| c.per_core).collect();
            k.sort_unstable();
            k.dedup();
            k.len() >= 2 && k.len() == g.len()
        })
        .max_by_key(|(_, g)| g.len())
    {
        group.sort_by_key(|c| c.per_core);
        let cats: Vec<f64> = slices
            .iter()
            .copied()
            .filter(|ms| group.iter().all(|c| c.points.iter().any(|p| p.0 == *ms)))
            .collect();
        let names: Vec<String> = cats.iter().map(|ms| format!("{} ms", plain(*ms))).collect();
        let bars: Vec<Series> = group
            .iter()
            .map(|c| {
                let pts: Vec<(f64, (f64, f64))> = cats
                    .iter()
                    .enumerate()
                    .filter_map(|(i, ms)| Some((i as f64, c.points.iter().find(|p| p.0 == *ms)?.1)))
                    .collect();
                Series::with_intervals(format!("{} per core ({})", c.per_core, c.stem), &pts)
            })
            .collect();
        let marks = Marks {
            label: "paper".into(),
            // the files' values, each once (the paper gives most of them for all three)
            points: group
                .iter()
                .flat_map(|c| c.paper.iter())
                .filter_map(|&(ms, lo, hi)| Some((cats.iter().position(|c| *c == ms)?, lo, hi)))
                .fold(Vec::new(), |mut v, m| {
                    if !v.contains(&m) {
                        v.push(m);
                    }
                    v
                }),
        };
        write_file(
            &out.join("fig8-per-core.svg"),
            &bar_chart(
                &format!(
                    "Figure 8: programs per core, {machine} ({cpus} core{})",
                    if cpus == 1 { "" } else { "s" }
                ),
                "aggregated slice length",
                "runtime improvement against CFS (%)",
                &names,
                &bars,
                (!marks.points.is_empty()).then_some(&marks),
            ),
        )?;
        plots.push("fig8-per-core.svg");
    }
    let _ = writeln!(md, "\n{}", crate::svg::plots_line(&plots));
    Ok(md)
}

/// The paper's values against the measured.
fn paper_table(sc: &Scenario, measured: &Measured) -> String {
    if sc.paper.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "| paper | source | variant | mix | paper value | measured (mean ± 95% CI) | measured \
         against the paper |\n|---|---|---|---|---|---|---|\n",
    );
    for pv in &sc.paper {
        let m = measured
            .get(&(pv.metric.clone(), pv.variant.clone(), pv.program.clone()))
            .copied()
            .unwrap_or((f64::NAN, f64::NAN));
        let r = pv.range();
        let v = if r[0] == r[1] {
            format!("{}%", plain(r[0]))
        } else {
            format!("{}% to {}%", plain(r[0]), plain(r[1]))
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {v} | {} | {} |",
            pv.what,
            pv.source,
            pv.variant,
            pv.program.as_deref().unwrap_or("all"),
            show(m, "%"),
            agreement(r, m)
        );
    }
    md + "\n"
}

/// The timeslice-aggregation paper (`docs/timeslice.md`).
pub struct Timeslice;

impl crate::paper::Paper for Timeslice {
    fn name(&self) -> &'static str {
        "timeslice"
    }
    fn about(&self) -> &'static str {
        "longer timeslices (paper 5): Figure 1's slowdowns, Figures 2-3 and 11's slice profiles, Figures 5-10's slices against CFS"
    }
    fn validate_mixes_value(&self, pv: &PaperValue, sc: &Scenario) -> Option<Result<(), String>> {
        Some(validate_paper_value(pv, sc))
    }
    fn mixes_section(&self, sc: &Scenario, done: &[MixRuns], out: &Path) -> Result<String> {
        analysis(sc, done, out)
    }
    fn across_files(&self, scs: &[&Scenario]) -> Option<Box<dyn crate::paper::AcrossFiles>> {
        compared(scs).then(|| Box::new(Curves(Vec::new())) as Box<dyn crate::paper::AcrossFiles>)
    }
}

/// Figures 5-8's improvement curves, one per scenario file that has one ([`curve`]).
struct Curves(Vec<Curve>);

impl crate::paper::AcrossFiles for Curves {
    fn add(&mut self, stem: &str, sc: &Scenario, done: &[MixRuns]) {
        self.0.extend(curve(stem, sc, done));
    }
    fn stems(&self) -> Vec<String> {
        self.0.iter().map(|c| c.stem().to_string()).collect()
    }
    fn section(&self, command: &str, out: &Path) -> Result<String> {
        across_files(&self.0, command, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four threads of one speed (1,000 instructions per ms on a CPU) whose window
    /// gave one of them a slice less progress at the same rate, and a slower one: the
    /// window's shares do not move a rate, the speed on the CPU does, and time lost to
    /// context switches (shares summing below one) lowers every rate alike. Fails if the
    /// rate is taken over the window (the short-changed thread would be 15% slower).
    #[test]
    fn rates_do_not_depend_on_where_the_window_cut_the_rounds() {
        let shares = [0.26, 0.26, 0.26, 0.22];
        let full = fair_rate(260_000, 0.26, &shares, 1000.0);
        let cut = fair_rate(220_000, 0.22, &shares, 1000.0);
        assert!((full - cut).abs() < 1e-9, "{full} {cut}");
        assert!((full - 250.0).abs() < 1e-9, "{full}");
        let slow = fair_rate(130_000, 0.26, &shares, 1000.0);
        assert!((slow / full - 0.5).abs() < 1e-12);
        let switching = [0.24; 4];
        assert!((fair_rate(240_000, 0.24, &switching, 1000.0) - 240.0).abs() < 1e-9);
    }

    /// Which shipped files the comparison across files takes, and how their programs
    /// sit: fails if a figure's file drops out of it (or Figure 1's solo runs, Figure
    /// 2's CFS-only runs, Figure 3's profiled slices or the diagnostic with its
    /// reference come in) or its layout is misread.
    #[test]
    fn shipped_files_compared_across_are_figures_5_to_8() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/timeslice");
        let mut got = Vec::new();
        for e in std::fs::read_dir(&dir).unwrap() {
            let f = e.unwrap().path();
            let sc = crate::experiment::parse(&f).unwrap();
            let stem = f.file_stem().unwrap().to_str().unwrap().to_string();
            got.push((stem, layout(&sc)));
        }
        got.sort();
        let want = [
            ("diag-fig5-cfs-2cpu", None),
            ("diag-fig8-2-at-4.5ms", None),
            ("fig1-slowdown", None),
            ("fig1-slowdown-real", None),
            ("fig2-offcpu", None),
            ("fig3-coldstart", None),
            ("fig5-2c16m", Some((2, 4))),
            ("fig6-4c16m", Some((4, 4))),
            ("fig6-4c16m-real", None),
            ("fig7-2c4m", Some((2, 4))),
            ("fig8-2-per-core", Some((4, 2))),
            ("fig8-8-per-core", Some((4, 8))),
            ("heldout", Some((2, 4))),
        ];
        let want: Vec<(String, Option<(usize, usize)>)> =
            want.iter().map(|(s, l)| (s.to_string(), *l)).collect();
        assert_eq!(got, want);
    }

    /// A window that gave one of four threads a 70 ms slice less than the others (as a
    /// 900 ms window of 70 ms rounds can) leaves it 52.5 ms behind the mean; equal
    /// shares leave none. Fails if the lag is taken against the largest share or
    /// without the window's length.
    #[test]
    fn lag_is_behind_the_mean_share() {
        let (a, b) = (280.0 / 900.0, 210.0 / 900.0);
        assert!((lag_ms(&[a, a, a, b], 900.0) - 52.5).abs() < 1e-9);
        assert!(lag_ms(&[0.25; 4], 900.0).abs() < 1e-12);
        assert!(lag_ms(&[], 900.0).is_nan());
    }

    /// Three files on one machine with 2, 4 and 8 programs per core and one on
    /// another: the table has every slice length once, in order, "–" where a file did
    /// not run it and the paper's value in brackets; Figure 8 is drawn for the three,
    /// with a paper value they share marked once. Fails if a slice column is missing
    /// or repeated, the files of another machine join Figure 8, or a shared paper value
    /// is marked once per file.
    #[test]
    fn files_compared_across_share_slice_columns_and_figure_8() {
        let c = |stem: &str, machine: &str, per_core, points: &[(f64, f64)], paper| Curve {
            stem: stem.into(),
            machine: machine.into(),
            cpus: 4,
            per_core,
            points: points.iter().map(|&(ms, x)| (ms, (x, 0.5))).collect(),
            paper,
        };
        let curves = [
            c(
                "two",
                "m4",
                2,
                &[(15.0, 5.0), (70.0, 9.0)],
                vec![(15.0, 15.0, 15.0)],
            ),
            c(
                "four",
                "m4",
                4,
                &[(15.0, 6.0), (45.0, 10.0), (70.0, 11.0)],
                vec![(15.0, 15.0, 15.0)],
            ),
            c(
                "eight",
                "m4",
                8,
                &[(15.0, 7.0), (45.0, 12.0), (70.0, 13.0)],
                vec![(15.0, 12.0, 15.0)],
            ),
            c("small", "m2", 4, &[(5.0, 1.0)], Vec::new()),
        ];
        let out = std::env::temp_dir().join(format!("cachesched-across-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let md = across_files(&curves, "cmd", &out).unwrap();
        assert!(
            md.contains("| programs per core | 5.00 ms | 15.0 ms | 45.0 ms | 70.0 ms |\n"),
            "{md}"
        );
        assert!(
            md.contains("| two | m4 | 4 | 2 | – | 5.00% ± 0.500 [15.0%] | – | 9.00% ± 0.500 |"),
            "{md}"
        );
        assert!(
            md.contains("| eight | m4 | 4 | 8 | – | 7.00% ± 0.500 [12.0–15.0%] | 12.0% ± 0.500 |"),
            "{md}"
        );
        assert!(md.contains("`fig8-per-core.svg`"), "{md}");
        let svg = std::fs::read_to_string(out.join("fig8-per-core.svg")).unwrap();
        assert!(svg.contains("2 per core (two)") && svg.contains("8 per core (eight)"));
        assert!(
            !svg.contains("small"),
            "another machine's file is not in Figure 8"
        );
        // the slices all three ran: 15 and 70 ms ("two" has no 45 ms)
        assert!(
            svg.contains(">15.0 ms<") && svg.contains(">70.0 ms<") && !svg.contains(">45.0 ms<")
        );
        // 15% at 15 ms from "two" and "four" is one diamond (and the legend's one)
        assert_eq!(svg.matches(r##"Z" fill="#000"/>"##).count(), 2, "{svg}");
        std::fs::remove_dir_all(&out).unwrap();
    }

    /// A fixture run of two threads alike but in instructions: "hot" retires `hot`,
    /// "other" 1,000,000 ([`fixture_run`]).
    fn hot_and_other(seed: u64, hot: u64) -> RunResult {
        fixture_run(
            seed,
            &[
                ("hot", hot, 1_000, 1_000_000, 300_000),
                ("other", 1_000_000, 1_000, 1_000_000, 300_000),
            ],
        )
    }

    /// A run of fixture threads `(name, instructions, LLC misses, cycles, memory-stall
    /// cycles)`, each with half of a 1,200 ms window on a CPU.
    fn fixture_run(seed: u64, threads: &[(&str, u64, u64, u64, u64)]) -> RunResult {
        let threads: Vec<(&str, cachesched_core::Counters)> = threads
            .iter()
            .map(
                |&(name, instructions, llc_misses, cycles, mem_stall_cycles)| {
                    let counters = cachesched_core::Counters {
                        instructions,
                        llc_misses,
                        cycles,
                        mem_stall_cycles,
                        ..Default::default()
                    };
                    (name, counters)
                },
            )
            .collect();
        crate::results::fixture::run(seed, 1200.0, &threads)
    }

    /// Seeds added one at a time give mixes different seeds: here mix `a` (its "hot"
    /// program 1.25 times as fast at 45 ms as under CFS) has seeds 1–4 and mix `b`
    /// (no change) seeds 1–3. The improvement is taken per seed over every program of
    /// every mix, so only seeds 1–3 count: `1 − 0.8^(1/4)` = 5.43% at each, with no
    /// interval, in the table and in the curve across files. Fails if seed 4, which
    /// only mix `a` has, counts (10.6% that seed, a mean of 6.71% with an interval), or
    /// if a ragged mix breaks the table.
    #[test]
    fn a_seed_only_some_mixes_have_is_left_out_of_measures_over_every_mix() {
        let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/timeslice/fig5-2c16m.toml");
        let sc = crate::experiment::parse(&f).unwrap();
        let at = |l: &str| sc.variants.iter().position(|v| v.label == l).unwrap();
        let (cfs, s45) = (at("cfs"), at("slice-45ms"));
        let mut done = Vec::new();
        for (mix, (label, sub)) in sc.per_mix().into_iter().take(2).enumerate() {
            let seeds = if mix == 0 { 4 } else { 3 };
            let mut jobs = sub.jobs().unwrap();
            jobs.retain(|j| (j.variant == cfs || j.variant == s45) && j.seed <= seeds);
            let runs: Vec<RunResult> = jobs
                .iter()
                .map(|j| {
                    let hot = if mix == 0 && j.variant == s45 {
                        1_250_000
                    } else {
                        1_000_000
                    };
                    hot_and_other(j.seed, hot)
                })
                .collect();
            assert_eq!(runs.len(), 2 * seeds as usize);
            done.push((label, sub, jobs, runs));
        }
        let data = Data::new(&sc, &done);
        assert_eq!(data.common_seeds((s45, cfs)), [1, 2, 3]);
        let out = std::env::temp_dir().join(format!("cachesched-ragged-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let md = improvements(&sc, &data, cfs, &mut Measured::new(), &out).unwrap();
        std::fs::remove_dir_all(&out).unwrap();
        assert!(md.contains("| slice-45ms | 45.0 | 5.43% |"), "{md}");
        let c = curve("fig5-2c16m", &sc, &done).unwrap();
        let p45 = c.points.iter().find(|p| p.0 == 45.0).unwrap();
        assert!(
            (p45.1 .0 - 5.43).abs() < 0.01 && p45.1 .1.is_nan(),
            "{:?}",
            p45.1
        );
    }

    /// Figure 9's row for a program that runs 1.25 times faster at 45 ms than under
    /// CFS in both seeds (a 20% improvement) with LLC misses per 1,000 instructions 8
    /// and 2 under CFS, 1 and 4 at 45 ms, and memory-stall shares 0.4 and 0.4 against
    /// 0.1 and 0.4: the columns are the geometric means, 4 and 2, 0.4 and 0.2. Fails
    /// if a column takes the arithmetic mean (5 and 2.5, 0.25), swaps CFS and the
    /// slice, or scales misses per instruction by anything but 1,000.
    #[test]
    fn figure_9_shows_each_programs_misses_and_stalls_under_both() {
        let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/timeslice/fig5-2c16m.toml");
        let sc = crate::experiment::parse(&f).unwrap();
        let at = |l: &str| sc.variants.iter().position(|v| v.label == l).unwrap();
        let (cfs, s45) = (at("cfs"), at("slice-45ms"));
        let planned = sc.plan().unwrap().remove(0);
        let (mut jobs, mut runs) = (Vec::new(), Vec::new());
        for j in planned.jobs {
            // (instructions, misses, stall cycles) of "hot" per variant and seed
            let hot = match (j.variant, j.seed) {
                (v, 1) if v == cfs => (1_000_000, 8_000, 400_000),
                (v, 2) if v == cfs => (1_000_000, 2_000, 400_000),
                (v, 1) if v == s45 => (1_250_000, 1_250, 100_000),
                (v, 2) if v == s45 => (1_250_000, 5_000, 400_000),
                _ => continue,
            };
            let r = fixture_run(
                j.seed,
                &[
                    ("hot", hot.0, hot.1, 1_000_000, hot.2),
                    ("other", 1_000_000, 1_000, 1_000_000, 300_000),
                ],
            );
            jobs.push(j);
            runs.push(r);
        }
        assert_eq!(runs.len(), 4);
        let done = vec![(planned.mix, planned.sc, jobs, runs)];
        let data = Data::new(&sc, &done);
        let out = std::env::temp_dir().join(format!("cachesched-fig9-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let md = improvements(&sc, &data, cfs, &mut Measured::new(), &out).unwrap();
        std::fs::remove_dir_all(&out).unwrap();
        assert!(
            md.contains("| hot | 20.0% | 2 | 4.00 | 2.00 | 0.400 | 0.200 |\n"),
            "{md}"
        );
        assert!(
            md.contains("| other | 0% | 2 | 1.00 | 1.00 | 0.300 | 0.300 |\n"),
            "{md}"
        );
    }

    /// The diagnostic's reference: with "hot" 20% slower at 4.5 ms than under CFS and
    /// at 45 ms, and "other" the same in all three, 45 ms and CFS each gain
    /// `1 − sqrt(0.8)` = 10.6% against the 4.5 ms reference, and 45 ms gains 0% against
    /// CFS, each in its own section with its own plots. Fails if the reference's
    /// section is missing, compares against CFS instead, shows the paper's values, or
    /// overwrites the baseline's plots; or if a reference naming `cfs` or no variant,
    /// or without the timeslice analysis, is accepted.
    #[test]
    fn a_reference_gets_its_own_comparison() {
        let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/timeslice/diag-fig8-2-at-4.5ms.toml");
        let mut sc = crate::experiment::parse(&f).unwrap();
        assert_eq!(sc.references, ["slice-4.5ms"]);
        // fig8-2's paper value (against CFS), which the reference's plot must not show
        let fig8 = crate::experiment::parse(&f.with_file_name("fig8-2-per-core.toml")).unwrap();
        sc.paper = fig8.paper.clone();
        assert_eq!(sc.paper.len(), 1);
        let at = |l: &str| sc.variants.iter().position(|v| v.label == l).unwrap();
        let short = at("slice-4.5ms");
        let (label, sub) = sc.per_mix().remove(0);
        let jobs: Vec<crate::scenario::Job> = sub
            .jobs()
            .unwrap()
            .into_iter()
            .filter(|j| j.seed <= 2)
            .collect();
        let runs: Vec<RunResult> = jobs
            .iter()
            .map(|j| {
                let hot = if j.variant == short {
                    800_000
                } else {
                    1_000_000
                };
                hot_and_other(j.seed, hot)
            })
            .collect();
        assert_eq!(runs.len(), 6);
        let done = vec![(label, sub, jobs, runs)];
        let out = std::env::temp_dir().join(format!("cachesched-ref-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let md = analysis(&sc, &done, &out).unwrap();
        let plots: Vec<String> = [
            "improvement.svg",
            "improvement-vs-slice-4.5ms.svg",
            "fig9-per-program.svg",
            "fig9-per-program-vs-slice-4.5ms.svg",
        ]
        .iter()
        .map(|p| std::fs::read_to_string(out.join(p)).unwrap_or_default())
        .collect();
        std::fs::remove_dir_all(&out).unwrap();
        assert!(
            plots.iter().all(|p| p.starts_with("<svg")),
            "every plot written"
        );
        assert!(plots[0].contains(">paper<") && plots[0].contains("against CFS"));
        assert!(!plots[1].contains(">paper<") && plots[1].contains("against slice-4.5ms"));
        let (against_cfs, against_ref) = md
            .split_once("**Runtime improvement against slice-4.5ms**")
            .expect("the reference's section");
        assert!(
            against_cfs.contains("**Runtime improvement against CFS**"),
            "{md}"
        );
        assert!(against_cfs.contains("| slice-45ms | 45.0 | 0% "), "{md}");
        assert!(
            against_cfs.contains("| slice-4.5ms | 4.50 | -11.8% "),
            "{md}"
        );
        assert!(against_ref.contains("| cfs | CFS's own | 10.6% "), "{md}");
        assert!(against_ref.contains("| slice-4.5ms | 4.50 | – |"), "{md}");
        assert!(against_ref.contains("| slice-45ms | 45.0 | 10.6% "), "{md}");
        assert!(against_ref.contains("| hot | 20.0% | 2 |"), "{md}");
        assert!(
            against_ref.contains("`improvement-vs-slice-4.5ms.svg`"),
            "{md}"
        );
        // the paper's table, after the sections, holds the value against CFS
        let (_, paper) = against_ref.split_once("| paper |").expect("paper table");
        assert!(
            paper.contains("| slice-45ms | all | 15.0% | 0% "),
            "{paper}"
        );
        let err = |s: &Scenario| crate::papers::validate(s).unwrap_err().to_string();
        let mut bad = sc.clone();
        bad.references = vec!["cfs".into()];
        assert!(err(&bad).contains("always the baseline"));
        bad.references = vec!["nosuch".into()];
        assert!(err(&bad).contains(
            "'nosuch', which is not a variant's label; the variants: cfs, slice-4.5ms, slice-45ms"
        ));
        bad.references = vec!["slice-45ms".into(), "slice-45ms".into()];
        assert!(err(&bad).contains("twice"));
        bad.references = vec!["slice-45ms".into()];
        bad.analyses.clear();
        bad.paper.clear();
        assert!(
            err(&bad).contains("only the timeslice analysis"),
            "{}",
            err(&bad)
        );
    }

    /// The sorted run-cache keys of the runs of `sc`'s variants labelled `labels`, over
    /// every mix and seed.
    fn run_keys(sc: &Scenario, labels: &[&str]) -> Vec<u64> {
        let mut v = Vec::new();
        for (_, sub) in sc.per_mix() {
            for j in sub.jobs().unwrap() {
                if labels.contains(&sc.variants[j.variant].label.as_str()) {
                    v.push(crate::caches::config_key(&j.cfg).unwrap());
                }
            }
        }
        v.sort_unstable();
        v
    }

    /// A shipped scenario file of `experiments/timeslice/`.
    fn shipped(file: &str) -> Scenario {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/timeslice");
        crate::experiment::parse(&dir.join(file)).unwrap()
    }

    /// The diagnostic's `cfs` and `slice-45ms` runs are fig8-2-per-core's, run for
    /// run (the same simulations, so the run cache shares them and the comparison is
    /// paired with that file's): fails if the two files' mixes, windows, seeds or
    /// machine drift apart.
    #[test]
    fn the_diagnostic_repeats_fig8_2s_runs() {
        let both = ["cfs", "slice-45ms"];
        let shared = run_keys(&shipped("diag-fig8-2-at-4.5ms.toml"), &both);
        assert_eq!(shared.len(), 60);
        assert_eq!(shared, run_keys(&shipped("fig8-2-per-core.toml"), &both));
    }

    /// The diagnostic of fig5's baseline runs nothing but its sensitivity that fig5
    /// does not, or did not before its baseline changed: its `cfs` and static slices
    /// are fig5's runs, its `cfs-2cpu` is fig5's `cfs` without `cfs_online_cpus`, as
    /// the file was until 2026-12-01 (so those 80 runs are the ones its results were
    /// read from), and only `cfs-8cpu` is new. Fails if the two files' mixes, windows,
    /// seeds or kernel settings drift apart; an edit made to both alike would pass,
    /// and would leave the former runs behind with fig5's.
    #[test]
    fn the_fig5_baseline_diagnostic_repeats_fig5s_runs() {
        let keys = run_keys;
        let diag = shipped("diag-fig5-cfs-2cpu.toml");
        let fig5 = shipped("fig5-2c16m.toml");
        let slices = [
            "slice-5ms",
            "slice-15ms",
            "slice-30ms",
            "slice-45ms",
            "slice-70ms",
        ];
        let mut both = slices.to_vec();
        both.push("cfs");
        let shared = keys(&diag, &both);
        assert_eq!(shared.len(), 16 * 5 * 6);
        assert_eq!(shared, keys(&fig5, &both));
        let mut former = fig5.clone();
        let cfs = former
            .variants
            .iter_mut()
            .find(|v| v.label == "cfs")
            .unwrap();
        assert_eq!(cfs.cfs_online_cpus, Some(4));
        cfs.cfs_online_cpus = None;
        let old = keys(&diag, &["cfs-2cpu"]);
        assert_eq!(old.len(), 80);
        assert_eq!(old, keys(&former, &["cfs"]));
        assert!(old.iter().all(|k| !shared.contains(k)));
        // the sensitivity to eight CPUs online is its own runs
        let eight = keys(&diag, &["cfs-8cpu"]);
        assert_eq!(eight.len(), 80);
        assert!(eight
            .iter()
            .all(|k| !shared.contains(k) && !old.contains(k)));
        assert_eq!(diag.variants.len(), 8);
    }

    #[test]
    fn shipped_paper_values_validate() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/timeslice");
        for f in ["fig1-slowdown.toml", "fig2-offcpu.toml", "fig5-2c16m.toml"] {
            let sc = crate::experiment::parse(&dir.join(f)).unwrap();
            for pv in &sc.paper {
                validate_paper_value(pv, &sc).unwrap();
            }
            let mut bad = sc.paper[0].clone();
            bad.metric = "ips".into();
            assert!(validate_paper_value(&bad, &sc).is_err());
        }
    }
}
