//! Checks of a scenario's measured windows: that every run's window held enough
//! scheduling for its statistics to mean something (quanta, slices, segments).

use crate::metrics::fewest_slices;
use crate::scenario::{Job, Scenario};
use crate::stats::{mean_ci95, plain};
use cachesched_policies::CascStats;
use cachesched_sim::RunResult;

/// The checks of a scenario's measured windows, as a Markdown list, and whether they
/// passed: every thread of every variant got at least `min_quanta` quanta; every
/// policy that reports when its measurements were done (`steady_ms`) was steady before
/// the warm-up ended; and, reported for judgement, how the first variant's L2 miss
/// ratio moves from the first to the second half of the window (a cold cache still
/// warming shows as a fall).
pub fn checks(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> (String, bool) {
    let mut md = String::new();
    let mut ok = true;
    let base: Vec<(&Job, &RunResult)> = crate::results::Table::new(jobs, runs)
        .of_variant(0)
        .collect();
    if sc.min_quanta > 0 {
        // Every variant is counted: the first is often the baseline with the shortest
        // slices, and a window long enough for it can hold no slice of a longer one.
        let per_variant: Vec<(usize, u64, &String, &Job)> = (0..sc.variants.len())
            .filter_map(|v| {
                crate::results::Table::new(jobs, runs)
                    .of_variant(v)
                    .filter_map(|(j, r)| fewest_slices(r).map(|t| (v, t.slices, &t.name, j)))
                    .min_by_key(|a| a.1)
            })
            .collect();
        if let Some(&(v, q, name, j)) = per_variant.iter().min_by_key(|a| a.1) {
            let short: Vec<String> = per_variant
                .iter()
                .filter(|a| a.1 < u64::from(sc.min_quanta))
                .map(|a| format!("`{}`", sc.variants[a.0].label))
                .collect();
            ok &= short.is_empty();
            md += &format!(
                "- Window length: the fewest quanta any thread of any variant received in a \
                 measured window is {q} (`{}`, {name}, seed {}{}), against at least {} \
                 required: {}. (Counted by the kernel: slices begun in the window, one per \
                 dispatch.)\n",
                sc.variants[v].label,
                j.seed,
                j.llc_kb.map_or(String::new(), |k| format!(", {k} KB")),
                sc.min_quanta,
                if short.is_empty() {
                    "long enough".to_string()
                } else {
                    format!("**TOO SHORT** for {}", short.join(", "))
                }
            );
        }
    }
    if sc.seeds.len() > 1 {
        let same = base.iter().all(|(j, r)| {
            base.iter()
                .filter(|(k, _)| k.llc_kb == j.llc_kb)
                .all(|(_, o)| o.totals == r.totals)
        });
        if same {
            ok = false;
            md += &format!(
                "- Seeds: **every run of `{}` is identical across the seeds** (the workload has \
                 no seeded randomness, as recorded traces have none): each point is one run, \
                 shown without an interval.\n",
                sc.variants[0].label
            );
        }
    }
    // CASC's time to a steady state (None: never steady at the end)
    let steady: Vec<Option<f64>> = runs
        .iter()
        .filter_map(|r| r.stats_of::<CascStats>().map(|s| s.steady_ms))
        .collect();
    if !steady.is_empty() {
        let late = steady
            .iter()
            .filter(|s| s.is_none_or(|s| s > sc.warmup_ms))
            .count();
        ok &= late == 0;
        let latest = steady
            .iter()
            .flatten()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        md += &format!(
            "- Policies' measurements: {} of {} runs were steady (every measurement done) \
             within the {} ms warm-up; {}{}.\n",
            steady.len() - late,
            steady.len(),
            sc.warmup_ms,
            if latest.is_finite() {
                format!("the latest at {} ms", plain(latest))
            } else {
                "none was ever steady".into()
            },
            if late > 0 {
                "; **the others measured inside the window**"
            } else {
                ""
            }
        );
    }
    let drift: Vec<f64> = base
        .iter()
        .filter_map(|(_, r)| {
            let w: Vec<f64> = r
                .timeline
                .iter()
                .filter(|p| p.t_ms > sc.warmup_ms + 1e-9)
                .map(|p| p.l2_miss_ratio)
                .collect();
            if w.len() < 4 {
                return None;
            }
            let (a, b) = w.split_at(w.len() / 2);
            let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
            let (a, b) = (mean(a), mean(b));
            (a > 0.0).then(|| 100.0 * (b - a) / a)
        })
        .collect();
    if !drift.is_empty() {
        let (m, h) = mean_ci95(&drift);
        md += &format!(
            "- Warm cache: `{}`'s L2 miss ratio moves by {m:+.1}%{} from the first to the \
             second half of the measured window (over {} runs; a cache still warming up \
             would show a clear fall).\n",
            sc.variants[0].label,
            if h.is_finite() {
                format!(" ± {h:.1}")
            } else {
                String::new()
            },
            drift.len()
        );
    }
    (md, ok)
}
