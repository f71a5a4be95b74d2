//! The CASC paper (co-scheduling by partial-cache miss rates): its experiment's
//! threads, and its own measures over a reproduction's runs (classification, the cache
//! illusion, time to steady state).

pub mod sensitivity;

use crate::results::Table;
use crate::scenario::{Class, Job, Scenario, Sweep, Variant};
use cachesched_policies::CascStats;

use crate::error::{invalid, Result};
use crate::stats::plain;
use cachesched_policies::PolicySpec;
use cachesched_sim::workload::LocalityModel;
use cachesched_sim::{Baseline, KernelConfig, MachineSpec, RunResult, ThreadGroup};
use std::fmt::Write as _;

/// The paper's change of the L2 miss ratio, CASC against TS, in percent (§5.3): its
/// range over the five cache sizes.
pub const PAPER_MISS_CHANGE: (f64, f64) = (-46.0, -15.0);
/// The paper's change of throughput (instructions per second), CASC against TS, in
/// percent (§5.3): its range over the five cache sizes.
pub const PAPER_IPS_CHANGE: (f64, f64) = (28.0, 50.0);
/// The paper's three programs, arriving in this order.
pub const PROFILES: [&str; 3] = ["art", "twolf", "bdb"];

/// The paper's 18 threads, 6 of each profile arriving interleaved; with `replace`, the
/// named profile's threads run the given model instead (labelled with the profile's
/// name, so per-thread results keep it).
pub fn casc_threads(replace: Option<(&str, &LocalityModel)>) -> Vec<ThreadGroup> {
    (0..18)
        .map(|i| {
            let p = PROFILES[i % 3];
            match replace {
                Some((w, m)) if w == p => ThreadGroup {
                    label: Some(p.to_string()),
                    ..ThreadGroup::custom(m.clone(), 1)
                },
                _ => ThreadGroup::of(p, 1),
            }
        })
        .collect()
}

/// The paper's experiment on niagara-2c under the Solaris-TS-like baseline, sampled
/// every 10 ms, with these variants and L2 sizes.
pub fn casc_experiment(
    name: &str,
    description: String,
    timing: (f64, f64, &[u64]),
    variants: Vec<Variant>,
    l2_kb: Vec<u64>,
    metrics: &[&str],
) -> Scenario {
    let (warmup_ms, duration_ms, seeds) = timing;
    Scenario {
        name: name.into(),
        description,
        machine: MachineSpec::Preset("niagara-2c".into()),
        threads: casc_threads(None),
        mixes: Vec::new(),
        kernel: KernelConfig {
            baseline: Baseline::Ts,
            ..Default::default()
        },
        duration_ms,
        warmup_ms,
        sample_ms: 10.0,
        stop_after_segments: false,
        stop_after_quanta: None,
        seeds: seeds.to_vec(),
        // every seed at once: the sensitivity study compares single parameters
        min_seeds: Some(seeds.len()),
        variants,
        sweep: Some(Sweep { llc_kb: l2_kb }),
        metrics: metrics.iter().map(|m| m.to_string()).collect(),
        paper: Vec::new(),
        min_quanta: 0,
        quick: None,
        classes: Default::default(),
        analyses: Vec::new(),
        references: Vec::new(),
    }
}

/// Mean of metric `m` over the runs of variant `v` at size `kb`.
fn mean_at(jobs: &[Job], runs: &[RunResult], v: usize, kb: u64, m: &str) -> f64 {
    let xs = Table::new(jobs, runs).values(v, Some(kb), m);
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The cache size at which `curve` (size, miss ratio; sizes ascending, the ratio
/// falling) reaches `target`, interpolated in log2(size); `None` if outside.
pub fn illusion_size(curve: &[(u64, f64)], target: f64) -> Option<f64> {
    curve.windows(2).find_map(|w| {
        let ((s0, m0), (s1, m1)) = (w[0], w[1]);
        if m0 >= target && target >= m1 && m0 > m1 {
            let f = (m0 - target) / (m0 - m1);
            let l = (s0 as f64).log2() + f * ((s1 as f64).log2() - (s0 as f64).log2());
            Some(l.exp2())
        } else {
            None
        }
    })
}

/// Solo miss rate (LLC misses per 100 data references, fully associative LRU, from the
/// profile's model curve) of the program named `name` at `kb` KiB; `None` for a thread
/// that is not a built-in profile (a real program or a trace).
fn solo_rate(name: &str, kb: u64) -> Option<f64> {
    let m = cachesched_sim::workload::profile(name).ok()?;
    let sd = cachesched_sim::trace::mrc::model_curve(&m, 1, 500_000, 500_000);
    Some(100.0 * sd.miss_ratio(kb * 1024 / 64))
}

/// Threads CASC classes as the truth does: CASC's class of a thread is greedy when its
/// PCMR is above the mean PCMR of the run's threads; `truth(name)` is the thread's true
/// class (`true`: greedy), `None` when unknown (the thread is left out). Right and
/// scored counts; `None` if the run reports no PCMRs.
fn classification(
    r: &RunResult,
    stats: &CascStats,
    truth: &dyn Fn(&str) -> Option<bool>,
) -> Option<(usize, usize)> {
    let pcmr: Vec<(f64, &str)> = r
        .threads
        .iter()
        .map(|t| stats.pcmr.get(&t.id).map(|&p| (p, t.name.as_str())))
        .collect::<Option<_>>()?;
    if pcmr.is_empty() {
        return None;
    }
    let mean = pcmr.iter().map(|x| x.0).sum::<f64>() / pcmr.len() as f64;
    let scored: Vec<bool> = pcmr
        .iter()
        .filter_map(|(p, n)| truth(n).map(|g| (*p > mean) == g))
        .collect();
    Some((scored.iter().filter(|&&x| x).count(), scored.len()))
}

/// Relative change from `old` to `new`, in percent.
pub fn pct(new: f64, old: f64) -> f64 {
    100.0 * (new - old) / old
}

/// CASC's own measures for every CASC variant: the cache illusion (the baseline's
/// size with the same miss ratio), classification against the paper's classes and
/// against each program's own curve at the per-context share, and when its
/// measurements were done.
pub fn casc_analysis(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> Result<String> {
    let Some(sweep) = &sc.sweep else {
        return Err(invalid!("the casc analysis needs a sweep over L2 sizes"));
    };
    let machine = sc.machine.resolve()?;
    let sharing = (machine.cores_per_chip * machine.threads_per_core).max(1) as u64;
    let mut sizes = sweep.llc_kb.clone();
    sizes.sort_unstable();
    let base = &sc.variants[0].label;
    let ts_curve: Vec<(u64, f64)> = sizes
        .iter()
        .map(|&kb| (kb, mean_at(jobs, runs, 0, kb, "l2_miss_ratio")))
        .collect();
    let mut md = format!(
        "CASC's own measures. Illusion: the `{base}` cache size with the CASC variant's L2 \
         miss ratio (interpolated in log size). Classes: CASC calls a thread greedy when its \
         PCMR is above the run's mean PCMR; scored against the paper's classes ({}) and \
         against each program's own model curve (greedy when its solo miss rate at the \
         per-context share, size / {sharing}, is above the threads' mean). Steady: when the \
         last PCMR was known, ms (the warm-up must cover it).\n\n\
         | L2 | variant | L2 miss ratio (vs {base}) | illusion | classed right (paper classes) | classed right (own curve) | steady at ms (latest) |\n\
         |---|---|---|---|---|---|---|\n",
        if sc.classes.is_empty() {
            "none given".to_string()
        } else {
            sc.classes
                .iter()
                .map(|(n, c)| format!("{n} {}", if *c == Class::Greedy { "greedy" } else { "frugal" }))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    for (vi, v) in sc.variants.iter().enumerate() {
        if !v.policies.iter().any(|p| matches!(p, PolicySpec::Casc(_))) {
            continue;
        }
        for &kb in &sizes {
            let mr = mean_at(jobs, runs, vi, kb, "l2_miss_ratio");
            let bmr = mean_at(jobs, runs, 0, kb, "l2_miss_ratio");
            let illusion = match illusion_size(&ts_curve, mr) {
                Some(s) => format!("{s:.0} KB ({:.1}×)", s / kb as f64),
                None if mr < ts_curve.last().expect("sizes").1 => {
                    format!("> {} KB", ts_curve.last().expect("sizes").0)
                }
                None => "none (no lower)".into(),
            };
            // the own-curve truth: above the mean solo rate of the run's threads
            let names: Vec<String> = sc.threads.iter().map(|g| g.name()).collect();
            let share = (kb / sharing).max(1);
            let rates: Vec<Option<f64>> = names.iter().map(|n| solo_rate(n, share)).collect();
            let known: Vec<f64> = rates.iter().flatten().copied().collect();
            let mean_rate = known.iter().sum::<f64>() / known.len().max(1) as f64;
            let own = |n: &str| {
                let i = names.iter().position(|x| *x == n)?;
                rates[i].map(|r| r > mean_rate)
            };
            let paper = |n: &str| sc.classes.get(n).map(|c| *c == Class::Greedy);
            let (mut pr, mut pn, mut or, mut on) = (0, 0, 0, 0);
            let mut latest = f64::NEG_INFINITY;
            let mut never = 0;
            for r in Table::new(jobs, runs).at(vi, Some(kb)) {
                let stats = r.stats_of::<CascStats>();
                if let Some(stats) = &stats {
                    if let Some((k, n)) = classification(r, stats, &paper) {
                        pr += k;
                        pn += n;
                    }
                    if let Some((k, n)) = classification(r, stats, &own) {
                        or += k;
                        on += n;
                    }
                }
                match stats.and_then(|s| s.steady_ms) {
                    Some(s) => latest = latest.max(s),
                    None => never += 1,
                }
            }
            let frac = |k: usize, n: usize| {
                if n == 0 {
                    "n/a".to_string()
                } else {
                    format!("{k}/{n} ({:.0}%)", 100.0 * k as f64 / n as f64)
                }
            };
            let _ = writeln!(
                md,
                "| {kb} KB | {} | {} ({}) {:+.1}% | {illusion} | {} | {} | {}{} |",
                v.label,
                plain(mr),
                plain(bmr),
                pct(mr, bmr),
                frac(pr, pn),
                frac(or, on),
                if latest.is_finite() {
                    format!("{latest:.0}")
                } else {
                    "-".into()
                },
                if never > 0 {
                    format!(", {never} run(s) never")
                } else {
                    String::new()
                }
            );
        }
    }
    md.push('\n');
    md += &casc_programs(sc, jobs, runs, &sizes);
    Ok(md)
}

/// Where CASC put each program, per L2 size and CASC variant: the program's mean CPU
/// share under the baseline and under CASC (over its threads and the seeds), the range
/// of the PCMRs CASC estimated for its threads, the range of the CPUs' final MAX_PCMRs,
/// and in how many runs some CPU ended with a MAX_PCMR at or below some thread's PCMR
/// (CASC kept a thread off a CPU).
fn casc_programs(sc: &Scenario, jobs: &[Job], runs: &[RunResult], sizes: &[u64]) -> String {
    let mut programs: Vec<String> = Vec::new();
    for g in &sc.threads {
        if !programs.contains(&g.name()) {
            programs.push(g.name());
        }
    }
    let base = &sc.variants[0].label;
    let share = |vi: usize, kb: u64, p: &str| -> Option<f64> {
        let per_run: Vec<f64> = Table::new(jobs, runs)
            .at(vi, Some(kb))
            .filter_map(|r| {
                let s: Vec<f64> = r
                    .threads
                    .iter()
                    .filter(|t| t.name == p)
                    .map(|t| t.cpu_share)
                    .collect();
                (!s.is_empty()).then(|| s.iter().sum::<f64>() / s.len() as f64)
            })
            .collect();
        (!per_run.is_empty()).then(|| per_run.iter().sum::<f64>() / per_run.len() as f64)
    };
    let range = |xs: &[f64]| match (
        xs.iter().copied().reduce(f64::min),
        xs.iter().copied().reduce(f64::max),
    ) {
        (Some(a), Some(b)) => format!("{a:.1}–{b:.1}"),
        _ => "-".into(),
    };
    let mut md =
        format!(
        "Where CASC put each program: its mean CPU share (over its threads and the seeds) under \
         `{base}` → under CASC, and the range of the PCMRs CASC estimated for its threads \
         (`pcmr.N` in `results.json`); the range of the CPUs' final MAX_PCMRs, and the runs in \
         which some CPU ended with a MAX_PCMR at or below some thread's PCMR (a thread runs \
         only where its PCMR is below the cap: one was kept off a CPU).\n\n\
         | L2 | variant |{} MAX_PCMR | runs restricting |\n|---|---|{}---|---|\n",
        programs.iter().map(|p| format!(" {p}: share, PCMR |")).collect::<String>(),
        "---|".repeat(programs.len())
    );
    for (vi, v) in sc.variants.iter().enumerate() {
        if !v.policies.iter().any(|p| matches!(p, PolicySpec::Casc(_))) {
            continue;
        }
        for &kb in sizes {
            let these: Vec<&RunResult> = Table::new(jobs, runs).at(vi, Some(kb)).collect();
            // each run's CASC statistics (default where CASC reported none)
            let stats: Vec<CascStats> = these
                .iter()
                .map(|r| r.stats_of().unwrap_or_default())
                .collect();
            let mut row = format!("| {kb} KB | {} |", v.label);
            for p in &programs {
                let pcmrs: Vec<f64> = these
                    .iter()
                    .zip(&stats)
                    .flat_map(|(r, s)| {
                        r.threads
                            .iter()
                            .filter(|t| &t.name == p)
                            .filter_map(|t| s.pcmr.get(&t.id).copied())
                    })
                    .collect();
                let sh = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
                row += &format!(
                    " {} → {}, {} |",
                    sh(share(0, kb, p)),
                    sh(share(vi, kb, p)),
                    range(&pcmrs)
                );
            }
            let mut caps = Vec::new();
            let mut restricting = 0;
            for stats in &stats {
                let mine: Vec<f64> = stats.max_pcmr.values().copied().collect();
                let top = stats
                    .pcmr
                    .values()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max);
                if mine.iter().any(|&c| c <= top) {
                    restricting += 1;
                }
                caps.extend(mine);
            }
            row += &format!(" {} | {}/{} |\n", range(&caps), restricting, these.len());
            md += &row;
        }
    }
    md + "\n"
}

/// The CASC paper (Fedorova et al.; `docs/casc.md`).
pub struct Casc;

impl crate::paper::Paper for Casc {
    fn name(&self) -> &'static str {
        "casc"
    }
    fn about(&self) -> &'static str {
        "CASC co-scheduling (paper 1): Figures 5-7 on niagara-2c, variants, a real-program mix, mixes where CASC cannot help"
    }
    fn section(
        &self,
        sc: &Scenario,
        jobs: &[Job],
        runs: &[RunResult],
        _out: &std::path::Path,
    ) -> Result<String> {
        casc_analysis(sc, jobs, runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn illusion_interpolates_in_log_size() {
        let curve = [(48, 0.5), (96, 0.3), (192, 0.2)];
        assert_eq!(illusion_size(&curve, 0.3), Some(96.0));
        let s = illusion_size(&curve, 0.25).unwrap();
        assert!((s - (96.0 * 2f64.sqrt())).abs() < 1e-9, "{s}");
        assert_eq!(illusion_size(&curve, 0.1), None);
        assert_eq!(illusion_size(&curve, 0.6), None);
    }
}
