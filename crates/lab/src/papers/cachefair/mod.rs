//! The cache-fair paper's analysis over a scenario's mixes (`analyses = ["cachefair"]`):
//! each program runs as the *principal* (the thread of class `cache-fair`) in a fast
//! and a slow schedule (mixes labelled `PROGRAM-fast` and `PROGRAM-slow`); the
//! principal's completion time of its work segment is compared between the two
//! schedules under every variant (Figures 6-8), and the best-effort thread's progress
//! under each policy variant against the baseline (§5.4).
//!
//! Measures (the `metric` of the scenario's paper values):
//! - `variability_pct`: how much longer the principal takes in the slow schedule than
//!   in the fast one, `100 · (slow − fast) / fast`, per seed, then mean and interval;
//! - `variability_reduction`: the baseline's mean variability over a variant's;
//! - `be_slowdown_pct`: how much less the best-effort thread progresses (its
//!   instructions per ms while the principal runs its work segment) under a variant
//!   than under the baseline in the same mix and seed, `100 · (1 − variant /
//!   baseline)`; without a program, the worst mix.
//!
//! With a variant running the `cachefair` policy and a variant with a partitioned cache
//! and no policy (§5.5's equal partitioning, reported in the variability table like any
//! variant), the section also has Figure 4: the fair miss rate the policy estimated for
//! each principal against the principal's miss rate with the cache equally
//! partitioned.
//!
//! Beside the section, `per-seed.md` in the scenario's directory has one row per mix and
//! seed: the principal's work segment (start and length) under every variant, and each
//! cache-fair variant's last fair-miss-rate estimate, fallback, CPU time moved, capped
//! adjustments and phase changes, the numbers the means above are made of.

use crate::scenario::MixRuns;
use cachesched_core::policy_stats::PolicyStats;
use cachesched_policies::CacheFairStats;

use crate::scenario::{Job, Scenario};

use crate::error::{invalid, Result};
use crate::files::write_file;
use crate::report::agreement;
use crate::scenario::PaperValue;
use crate::stats::{over_seeds, plain, show};
use crate::svg::{bar_chart, Marks, Series};
use cachesched_core::num::ratio;
use cachesched_core::ThreadClass;
use cachesched_policies::PolicySpec;
use cachesched_sim::RunResult;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The measures the analysis reports, as a paper value's `metric`.
pub const MEASURES: &[&str] = &[
    "variability_pct",
    "variability_reduction",
    "be_slowdown_pct",
];

/// Checks a paper value of a scenario of several mixes: a measure of this analysis, a
/// known variant other than the baseline where the measure compares with it, a program
/// that has mixes, a value (not a change).
pub fn validate_paper_value(pv: &PaperValue, sc: &Scenario) -> Result<(), String> {
    pv.check_over_mixes(sc, "cache-fair", MEASURES, false)?;
    let what = &pv.what;
    let first = sc.variants.first().map(|v| v.label.as_str());
    if first == Some(pv.variant.as_str()) && pv.metric != "variability_pct" {
        return Err(format!(
            "paper value '{what}': {} compares a variant with the baseline (the first \
             variant), so its variant cannot be the baseline",
            pv.metric
        ));
    }
    if let Some(p) = &pv.program {
        if !sc.mixes.iter().any(|m| program_of(&m.label).0 == p) {
            return Err(format!("paper value '{what}': no mix of program '{p}'"));
        }
    }
    Ok(())
}

/// `PROGRAM-fast` → (`PROGRAM`, Some(true)), `PROGRAM-slow` → (`PROGRAM`, Some(false)),
/// anything else → (label, None).
fn program_of(label: &str) -> (&str, Option<bool>) {
    if let Some(p) = label.strip_suffix("-fast") {
        (p, Some(true))
    } else if let Some(p) = label.strip_suffix("-slow") {
        (p, Some(false))
    } else {
        (label, None)
    }
}

/// The index of the first thread of class `class` in a run of `sc`.
fn thread_of(sc: &Scenario, class: ThreadClass) -> Option<usize> {
    crate::caches::solo::group_of_threads(&sc.threads)
        .into_iter()
        .position(|g| sc.threads[g].class == Some(class))
}

/// Per seed, a value of each run of variant `v`.
fn by_seed(
    jobs: &[Job],
    runs: &[RunResult],
    v: usize,
    f: impl Fn(&RunResult) -> f64,
) -> BTreeMap<u64, f64> {
    crate::results::Table::new(jobs, runs)
        .of_variant(v)
        .map(|(j, r)| (j.seed, f(r)))
        .collect()
}

/// What the analysis computes for one program.
struct Program {
    name: String,
    /// Per variant: the principal's completion times (ms) per seed, fast and slow.
    fast: Vec<BTreeMap<u64, f64>>,
    slow: Vec<BTreeMap<u64, f64>>,
    /// Per variant other than the baseline, per schedule: the best-effort slowdown per
    /// seed, %.
    be_slowdown: Vec<[BTreeMap<u64, f64>; 2]>,
    /// Figure 4, per schedule and seed: the fair miss rate the policy estimated and the
    /// principal's miss rate with the cache equally partitioned, misses per cycle.
    fair_estimated: [BTreeMap<u64, f64>; 2],
    fair_actual: [BTreeMap<u64, f64>; 2],
}

impl Program {
    /// The best-effort thread's slowdown under variant `v` in the worse of the two
    /// schedules, % (mean and 95% half-width over seeds).
    fn be_worst(&self, v: usize) -> (f64, f64) {
        let (f, s) = (
            stats(&self.be_slowdown[v][0]),
            stats(&self.be_slowdown[v][1]),
        );
        if f.0 >= s.0 || !s.0.is_finite() {
            f
        } else {
            s
        }
    }

    /// The variability of variant `v`, % (mean and 95% half-width over seeds).
    fn variability(&self, v: usize) -> (f64, f64) {
        let d: Vec<f64> = self.fast[v]
            .iter()
            .filter_map(|(s, f)| self.slow[v].get(s).map(|sl| 100.0 * (sl - f) / f))
            .collect();
        over_seeds(&d)
    }
}

/// Mean and interval of a seed map's values.
fn stats(m: &BTreeMap<u64, f64>) -> (f64, f64) {
    over_seeds(&m.values().copied().collect::<Vec<f64>>())
}

/// The analysis section: variability table and plots (written to `out`), best-effort
/// slowdowns, the paper's values against the measured, and the policy's mechanism
/// counts.
pub fn analysis(sc: &Scenario, done: &[MixRuns], out: &Path) -> Result<String> {
    let nv = sc.variants.len();
    let mut programs: Vec<Program> = Vec::new();
    let mut missing = 0usize;
    let mut mech: BTreeMap<String, f64> = BTreeMap::new();
    let mut calibrating = (0usize, 0usize);
    let mut per_seed = per_seed_header(sc);
    // Figure 4: the cache-fair variant's estimates against a partitioned baseline's
    let fig4 = (
        (0..nv).position(|v| runs_cachefair(sc, v)),
        sc.variants
            .iter()
            .position(|v| v.partition.is_some() && v.policies.is_empty()),
    );
    for (mix, sub, jobs, runs) in done {
        let label = mix.as_deref().unwrap_or("");
        let (name, fast) = program_of(label);
        let Some(fast) = fast else {
            return Err(invalid!(
                "the cachefair analysis needs mixes labelled PROGRAM-fast and PROGRAM-slow; \
                 got '{label}'"
            ));
        };
        let Some(principal) = thread_of(sub, ThreadClass::CacheFair) else {
            return Err(invalid!(
                "mix '{label}': no thread group of class cache-fair (the principal)"
            ));
        };
        let be = thread_of(sub, ThreadClass::BestEffort);
        per_seed_rows(sc, label, jobs, runs, principal, &mut per_seed);
        let i = match programs.iter().position(|p| p.name == name) {
            Some(i) => i,
            None => {
                programs.push(Program {
                    name: name.to_string(),
                    fast: vec![BTreeMap::new(); nv],
                    slow: vec![BTreeMap::new(); nv],
                    be_slowdown: (0..nv).map(|_| Default::default()).collect(),
                    fair_estimated: Default::default(),
                    fair_actual: Default::default(),
                });
                programs.len() - 1
            }
        };
        let seg_start = sub.threads.iter().find_map(|g| g.segment);
        // the best-effort thread's progress while the principal ran its segment
        let be_rate = |r: &RunResult| match (
            be.and_then(|b| r.threads[b].segment_window_instructions),
            r.threads[principal].segment_ms,
        ) {
            (Some(i), Some(ms)) if ms > 0.0 => i as f64 / ms,
            _ => f64::NAN,
        };
        let be_base = by_seed(jobs, runs, 0, be_rate);
        if let (Some(ev), Some(pv)) = (fig4.0, fig4.1) {
            let p = &mut programs[i];
            p.fair_estimated[usize::from(!fast)] = by_seed(jobs, runs, ev, |r| {
                r.stats_of::<CacheFairStats>()
                    .and_then(|s| s.fair_mpc.get(&(principal as u32)).copied())
                    .unwrap_or(f64::NAN)
            });
            p.fair_actual[usize::from(!fast)] = by_seed(jobs, runs, pv, |r| {
                let c = &r.threads[principal].counters;
                ratio(c.llc_misses, c.cycles)
            });
        }
        for v in 0..nv {
            let times = by_seed(jobs, runs, v, |r| {
                r.threads[principal].segment_ms.unwrap_or(f64::NAN)
            });
            missing += times.values().filter(|t| !t.is_finite()).count();
            let p = &mut programs[i];
            let times: BTreeMap<u64, f64> =
                times.into_iter().filter(|(_, t)| t.is_finite()).collect();
            if fast {
                p.fast[v] = times;
            } else {
                p.slow[v] = times;
            }
            if v == 0 {
                continue;
            }
            p.be_slowdown[v][usize::from(!fast)] = by_seed(jobs, runs, v, be_rate)
                .into_iter()
                .filter_map(|(s, x)| be_base.get(&s).map(|b| (s, 100.0 * (1.0 - x / b))))
                .filter(|(_, d)| d.is_finite())
                .collect();
            for (_, r) in crate::results::Table::new(jobs, runs).of_variant(v) {
                let Some(stats) = r.stats_of::<CacheFairStats>() else {
                    continue;
                };
                // the mechanism's counts: every field but the per-thread ones
                for (k, x) in stats.to_record() {
                    if !k.contains('.') {
                        *mech
                            .entry(format!("{}: {k}", sc.variants[v].label))
                            .or_default() += x;
                    }
                }
                let end = stats.recon_end_instructions.get(&(principal as u32));
                if let (Some(&end), Some(seg)) = (end, seg_start) {
                    calibrating.1 += 1;
                    calibrating.0 += usize::from(end <= seg.start_instructions);
                }
            }
        }
    }
    let mut md = String::new();
    // the variability table (Figures 6-7) and raw completion times (Figure 8)
    let _ = write!(md, "| program |");
    for v in &sc.variants {
        let _ = write!(
            md,
            " {0}: fast (ms) | {0}: slow (ms) | {0}: variability |",
            v.label
        );
    }
    for v in sc.variants.iter().skip(1) {
        let _ = write!(md, " reduction ({} vs {}) |", v.label, sc.variants[0].label);
    }
    md += " paper |\n|---|";
    md += &"---|".repeat(3 * nv + nv.saturating_sub(1) + 1);
    md += "\n";
    let paper_of = |program: &str, metric: &str, variant: &str| -> Option<&PaperValue> {
        sc.paper.iter().find(|pv| {
            pv.metric == metric && pv.variant == variant && pv.program.as_deref() == Some(program)
        })
    };
    for p in &programs {
        let _ = write!(md, "| {} |", p.name);
        for v in 0..nv {
            let _ = write!(
                md,
                " {} | {} | {} |",
                show(stats(&p.fast[v]), ""),
                show(stats(&p.slow[v]), ""),
                show(p.variability(v), "%")
            );
        }
        let base = p.variability(0).0;
        for v in 1..nv {
            let _ = write!(md, " {} |", plain(base / p.variability(v).0));
        }
        let said: Vec<String> = sc
            .variants
            .iter()
            .filter_map(|v| {
                paper_of(&p.name, "variability_pct", &v.label)
                    .map(|pv| format!("{}: {}", v.label, range_text(pv.range(), "%")))
            })
            .collect();
        let _ = writeln!(
            md,
            " {} |",
            if said.is_empty() {
                "-".into()
            } else {
                said.join("; ")
            }
        );
    }
    md += "\nVariability: how much longer the principal takes to complete its work segment \
           in the slow schedule than in the fast one, per seed, then mean ± 95% interval. \
           Reduction: the baseline's mean variability over the variant's.\n\n";
    if missing > 0 {
        let _ = writeln!(
            md,
            "**{missing} run(s) ended before the principal completed its segment** and are left \
             out: raise `duration_ms`.\n"
        );
    }
    // best-effort slowdowns (§5.4)
    for v in 1..nv {
        let mut worst: Option<(String, (f64, f64))> = None;
        let mut rows = String::new();
        for p in &programs {
            for (k, sched) in ["fast", "slow"].iter().enumerate() {
                let s = stats(&p.be_slowdown[v][k]);
                if !s.0.is_finite() {
                    continue;
                }
                let _ = write!(rows, " {} {sched} {};", p.name, show(s, "%"));
                if worst.as_ref().is_none_or(|w| s.0 > w.1 .0) {
                    worst = Some((format!("{}-{sched}", p.name), s));
                }
            }
        }
        if let Some((mix, s)) = worst {
            let _ = writeln!(
                md,
                "Best-effort thread under `{}` against `{}` (slowdown of its instructions per \
                 ms while the principal ran its segment, paired by seed; negative: it gained): worst mix `{mix}`, {}. Every \
                 mix:{}\n",
                sc.variants[v].label,
                sc.variants[0].label,
                show(s, "%"),
                rows.trim_end_matches(';')
            );
        }
    }
    // the paper's values against the measured
    if !sc.paper.is_empty() {
        md += "| paper | source | variant | program | paper value | measured (mean ± 95% CI) | measured against the paper |\n|---|---|---|---|---|---|---|\n";
        for pv in &sc.paper {
            let v = PaperValue::index(sc, &pv.variant);
            let selected: Vec<&Program> = programs
                .iter()
                .filter(|p| pv.program.as_ref().is_none_or(|n| *n == p.name))
                .collect();
            let rows: Vec<(String, (f64, f64))> = selected
                .iter()
                .map(|p| {
                    let m = match pv.metric.as_str() {
                        "variability_pct" => p.variability(v),
                        "variability_reduction" => {
                            (p.variability(0).0 / p.variability(v).0, f64::NAN)
                        }
                        _ => p.be_worst(v),
                    };
                    (p.name.clone(), m)
                })
                .collect();
            // without a program: the worst (largest) over programs
            let shown: Vec<(String, (f64, f64))> = if pv.program.is_some() {
                rows
            } else {
                rows.into_iter()
                    .filter(|r| r.1 .0.is_finite())
                    .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
                    .map(|(n, m)| vec![(format!("worst: {n}"), m)])
                    .unwrap_or_default()
            };
            for (name, m) in shown {
                let unit = if pv.metric == "variability_reduction" {
                    "×"
                } else {
                    "%"
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {name} | {} | {} | {} |",
                    pv.what,
                    pv.source,
                    pv.variant,
                    range_text(pv.range(), unit),
                    show(m, unit),
                    agreement(pv.range(), m)
                );
            }
        }
        md += "\n";
    }
    if calibrating.1 > 0 {
        let _ = writeln!(
            md,
            "The principal had ended its first reconnaissance before its work segment began \
             (so the segment ran in the calibration phase, as the paper's did) in {} of {} \
             cache-fair runs.\n",
            calibrating.0, calibrating.1
        );
    }
    if !mech.is_empty() {
        md += "Mechanism counts, summed over all mixes and seeds: ";
        let parts: Vec<String> = mech
            .iter()
            .map(|(k, x)| format!("{k} {}", plain(*x)))
            .collect();
        md += &parts.join("; ");
        md += ".\n\n";
    }
    write_file(&out.join("per-seed.md"), &per_seed)?;
    md += "Per seed, each mix's principal (its work segment's start and length under every \
           variant; each cache-fair variant's last fair-miss-rate estimate, whether it fell \
           back, the CPU time it moved and its phase changes): `per-seed.md`.\n\n";
    let cats: Vec<String> = programs.iter().map(|p| p.name.clone()).collect();
    if let (Some(ev), Some(pv)) = fig4 {
        md += &fair_miss_rates(
            &programs,
            &sc.variants[ev].label,
            &sc.variants[pv].label,
            &cats,
            out,
        )?;
    }
    // plots
    for (v, variant) in sc.variants.iter().enumerate() {
        let series = vec![Series::with_intervals(
            format!("{} (measured)", variant.label),
            &programs
                .iter()
                .enumerate()
                .map(|(i, p)| (i as f64, p.variability(v)))
                .collect::<Vec<_>>(),
        )];
        let marks = Marks {
            label: "paper (value or range)".into(),
            points: programs
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    paper_of(&p.name, "variability_pct", &variant.label)
                        .map(|pv| (i, pv.range()[0], pv.range()[1]))
                })
                .collect(),
        };
        let name = format!("variability-{}.svg", variant.label);
        write_file(
            &out.join(&name),
            &bar_chart(
                &format!(
                    "Completion time, slow against fast schedule, under {}",
                    variant.label
                ),
                "principal program",
                "slow vs fast completion time (%)",
                &cats,
                &series,
                Some(&marks),
            ),
        )?;
        let _ = writeln!(md, "Plot: `{name}`.");
    }
    let mut raw = Vec::new();
    for (v, variant) in sc.variants.iter().enumerate() {
        for (sched, get) in [("fast", 0usize), ("slow", 1)] {
            raw.push(Series::with_intervals(
                format!("{} {sched}", variant.label),
                &programs
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        (
                            i as f64,
                            stats(if get == 0 { &p.fast[v] } else { &p.slow[v] }),
                        )
                    })
                    .collect::<Vec<_>>(),
            ));
        }
    }
    write_file(
        &out.join("completion-times.svg"),
        &bar_chart(
            "Completion time of the principal's work segment",
            "principal program",
            "completion time (ms of simulated time)",
            &cats,
            &raw,
            None,
        ),
    )?;
    md += "Plot: `completion-times.svg`.\n";
    Ok(md)
}

/// Whether variant `v` of `sc` runs the cache-fair policy.
fn runs_cachefair(sc: &Scenario, v: usize) -> bool {
    sc.variants[v]
        .policies
        .iter()
        .any(|p| matches!(p, PolicySpec::Cachefair(_)))
}

/// The per-seed table's columns for variant `v` of `sc`: start and segment, and six
/// more for a variant running cache-fair ([`per_seed_header`] names them).
fn per_seed_columns(sc: &Scenario, v: usize) -> usize {
    if runs_cachefair(sc, v) {
        8
    } else {
        2
    }
}

/// The per-seed table's title, explanation and header row.
fn per_seed_header(sc: &Scenario) -> String {
    let mut md = format!(
        "# Per seed: {}\n\nEach mix's principal, per seed. Start and segment: when its work \
         segment began and how long it took (ms of simulated time). For each variant running \
         cache-fair, from the policy's statistics at the run's end: the principal's last \
         estimated fair miss rate (L2 misses per 1,000 cycles, `fair_mpc`) and whether it \
         was a fallback rather than Equation 1's crossing (`fair_fallback`); the CPU time \
         given to the principal, negative where taken from it (`given_ms`, ms); \
         adjustments capped at what the best-effort thread could give (`capped`); \
         reconnaissances started on a phase change (`phase_changes`) and the largest window \
         change seen, as a fraction of the reference (`max_phase_drift`).\n\n| mix | seed |",
        sc.name
    );
    for (v, variant) in sc.variants.iter().enumerate() {
        let _ = write!(md, " {0}: start | {0}: segment |", variant.label);
        if runs_cachefair(sc, v) {
            let _ = write!(
                md,
                " {0}: fair miss rate | {0}: fallback | {0}: given | {0}: capped | {0}: phase \
                 changes | {0}: largest change |",
                variant.label
            );
        }
    }
    let cols: usize = (0..sc.variants.len())
        .map(|v| per_seed_columns(sc, v))
        .sum();
    md += "\n|---|---|";
    md += &"---|".repeat(cols);
    md += "\n";
    md
}

/// Appends to `md` one row per seed of the mix `label`: the principal (thread
/// `principal`) under every variant of `sc`, and each cache-fair variant's estimate and
/// corrections (the columns of [`per_seed_header`]); `-` where a variant has no run of
/// that seed or the run lacks the value.
fn per_seed_rows(
    sc: &Scenario,
    label: &str,
    jobs: &[Job],
    runs: &[RunResult],
    principal: usize,
    md: &mut String,
) {
    let cell = |x: Option<f64>, digits: usize| match x {
        Some(x) if x.is_finite() => {
            let s = format!("{x:.digits$}");
            // no "-0": a value that rounds to zero is shown unsigned
            match s.strip_prefix('-') {
                Some(u) if u.chars().all(|c| c == '0' || c == '.') => u.to_string(),
                _ => s,
            }
        }
        _ => "-".to_string(),
    };
    // per variant: its columns' count and its cells per seed
    let mut by_variant: Vec<(usize, BTreeMap<u64, Vec<String>>)> = Vec::new();
    for v in 0..sc.variants.len() {
        let cf = runs_cachefair(sc, v);
        let mut cells = BTreeMap::new();
        for (j, r) in crate::results::Table::new(jobs, runs).of_variant(v) {
            let t = &r.threads[principal];
            let mut c = vec![cell(t.segment_start_ms, 0), cell(t.segment_ms, 0)];
            if cf {
                let s = r.stats_of::<CacheFairStats>();
                let s = s.as_ref();
                let p = principal as u32;
                c.push(cell(
                    s.and_then(|s| s.fair_mpc.get(&p)).map(|m| 1000.0 * m),
                    3,
                ));
                c.push(
                    match s.and_then(|s| s.fair_fallback.get(&p)) {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "-",
                    }
                    .to_string(),
                );
                c.push(cell(s.map(|s| s.given_ms), 1));
                c.push(cell(s.map(|s| s.capped as f64), 0));
                c.push(cell(s.map(|s| s.phase_changes as f64), 0));
                c.push(cell(s.map(|s| s.max_phase_drift), 2));
            }
            cells.insert(j.seed, c);
        }
        by_variant.push((per_seed_columns(sc, v), cells));
    }
    let seeds: std::collections::BTreeSet<u64> = by_variant
        .iter()
        .flat_map(|(_, c)| c.keys().copied())
        .collect();
    for seed in seeds {
        let row: Vec<String> = by_variant
            .iter()
            .flat_map(|(width, c)| {
                c.get(&seed)
                    .cloned()
                    .unwrap_or_else(|| vec!["-".to_string(); *width])
            })
            .collect();
        let _ = writeln!(md, "| {label} | {seed} | {} |", row.join(" | "));
    }
}

/// Figure 4's table and plot: per program, over the seeds of both schedules, the fair
/// miss rate the policy estimated (variant `est`) against the principal's miss rate
/// with the cache equally partitioned (variant `part`).
fn fair_miss_rates(
    programs: &[Program],
    est: &str,
    part: &str,
    cats: &[String],
    out: &Path,
) -> Result<String> {
    // both schedules' seeds as one sample (a seed's two runs are different mixes)
    let pooled = |m: &[BTreeMap<u64, f64>; 2]| -> (f64, f64) {
        let v: Vec<f64> = m
            .iter()
            .flat_map(|s| s.values().map(|x| 1000.0 * x))
            .filter(|x| x.is_finite())
            .collect();
        over_seeds(&v)
    };
    let mut md = format!(
        "Figure 4: the fair miss rate `{est}` estimated for the principal (its last \
         reconnaissance's Equation 2, `fair_mpc`) against the principal's miss rate with the \
         L2 equally partitioned between the cores (`{part}`), L2 misses per 1,000 cycles, \
         mean ± 95% interval over the runs of both schedules.\n\n\
         | program | estimated fair ({est}) | actual, equal partitions ({part}) | estimated / actual |\n\
         |---|---|---|---|\n"
    );
    let (mut e_series, mut a_series) = (Vec::new(), Vec::new());
    for (i, p) in programs.iter().enumerate() {
        let (e, a) = (pooled(&p.fair_estimated), pooled(&p.fair_actual));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            p.name,
            show(e, ""),
            show(a, ""),
            plain(e.0 / a.0)
        );
        e_series.push((i as f64, e));
        a_series.push((i as f64, a));
    }
    write_file(
        &out.join("fair-miss-rate.svg"),
        &bar_chart(
            "Estimated against actual fair miss rate (Figure 4)",
            "principal program",
            "L2 misses per 1,000 cycles",
            cats,
            &[
                Series::with_intervals(format!("estimated ({est})"), &e_series),
                Series::with_intervals(format!("actual, equal partitions ({part})"), &a_series),
            ],
            None,
        ),
    )?;
    md += "\nPlot: `fair-miss-rate.svg`.\n\n";
    Ok(md)
}

/// A published range in words.
fn range_text(r: [f64; 2], unit: &str) -> String {
    if r[0] == r[1] {
        format!("{}{unit}", plain(r[0]))
    } else {
        format!("{}{unit} to {}{unit}", plain(r[0]), plain(r[1]))
    }
}

/// The cache-fair scheduler's paper (Fedorova et al.; `docs/cachefair.md`).
pub struct Cachefair;

impl crate::paper::Paper for Cachefair {
    fn name(&self) -> &'static str {
        "cachefair"
    }
    fn about(&self) -> &'static str {
        "the cache-fair scheduler (paper 2): Table 2's schedules under FX and cache-fair, Figures 6-8, an idle cache, real programs"
    }
    fn mixes_section(&self, sc: &Scenario, done: &[MixRuns], out: &Path) -> Result<String> {
        analysis(sc, done, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_labels_name_program_and_schedule() {
        assert_eq!(program_of("vortex-fast"), ("vortex", Some(true)));
        assert_eq!(program_of("gzip-slow"), ("gzip", Some(false)));
        assert_eq!(program_of("gzip"), ("gzip", None));
    }
}
