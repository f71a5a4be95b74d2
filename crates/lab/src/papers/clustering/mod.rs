//! The thread-clustering paper's own measures (paper 3), added to `cachesched reproduce`'s
//! report of a scenario that asks for the `clustering` analysis: how well the clusters
//! found match the workload's ground-truth sharing groups (adjusted Rand index), what
//! detection cost and how long it took, and Figure 5's picture of the sharing maps.

use crate::metrics::metric;
use cachesched_policies::ClusteringStats;

use crate::results::Table;
use crate::scenario::{Job, Scenario};

use crate::error::Result;
use crate::files::write_file;
use crate::stats::{over_seeds, paired_change, plain};
use crate::svg::{heatmap, line_chart, HeatRow, Series, XAxis};
use cachesched_policies::clustering::cluster::adjusted_rand_index;
use cachesched_policies::PolicySpec;
use cachesched_sim::RunResult;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// A vector of a run's policy by its name without a chain's `policy.` prefix.
fn vectors<'a>(r: &'a RunResult, name: &str) -> Vec<(&'a str, &'a Vec<f64>)> {
    r.policy_vectors
        .iter()
        .filter_map(|(k, v)| {
            let k = k.strip_prefix("clustering.").unwrap_or(k);
            k.starts_with(name).then_some((k, v))
        })
        .collect()
}

/// The clusters of a run's last clustering (thread ids), in the clustering's order.
pub fn clusters(r: &RunResult) -> Vec<Vec<u32>> {
    vectors(r, "cluster.")
        .into_iter()
        .map(|(_, v)| v.iter().map(|&x| x as u32).collect())
        .collect()
}

/// The adjusted Rand index of a run's last clustering against its threads' ground-truth
/// sharing groups, over the threads that have one (a thread in no cluster counts as a
/// part of its own); `None` without a clustering or a ground truth.
pub fn accuracy(r: &RunResult) -> Option<f64> {
    let cl = clusters(r);
    if cl.is_empty() {
        return None;
    }
    let mut of: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, c) in cl.iter().enumerate() {
        for &t in c {
            of.insert(t, i);
        }
    }
    let (mut found, mut truth) = (Vec::new(), Vec::new());
    for t in &r.threads {
        let Some(g) = t.sharing_group else { continue };
        truth.push(g as usize);
        found.push(of.get(&t.id).copied().unwrap_or(1_000_000 + t.id as usize));
    }
    (truth.len() >= 2).then(|| adjusted_rand_index(&truth, &found))
}

/// Figure 5: the sharing maps of a run's last clustering, one row per thread ordered
/// by cluster (in thread order when the detection found none), one column per slot
/// non-zero somewhere (globally shared slots removed), each row marked with its
/// ground-truth group; `None` when the policy exported no maps.
pub fn figure5(r: &RunResult, title: &str) -> Option<String> {
    let maps: BTreeMap<u32, &Vec<f64>> = vectors(r, "shmap.t")
        .into_iter()
        .filter_map(|(k, v)| k.strip_prefix("shmap.t")?.parse().ok().map(|t| (t, v)))
        .collect();
    if maps.is_empty() {
        return None;
    }
    let global: Vec<usize> = vectors(r, "global_slots")
        .first()
        .map(|(_, v)| v.iter().map(|&x| x as usize).collect())
        .unwrap_or_default();
    let entries = maps.values().map(|v| v.len()).max().unwrap_or(0);
    let cols: Vec<usize> = (0..entries)
        .filter(|e| {
            !global.contains(e)
                && maps
                    .values()
                    .any(|v| v.get(*e).copied().unwrap_or(0.0) > 0.0)
        })
        .collect();
    let cl = clusters(r);
    let mut order: Vec<u32> = cl.iter().flatten().copied().collect();
    let mut breaks = Vec::new();
    let mut at = 0;
    for c in &cl {
        if at > 0 {
            breaks.push(at);
        }
        at += c.len();
    }
    let rest: Vec<u32> = maps
        .keys()
        .copied()
        .filter(|t| !order.contains(t))
        .collect();
    if !rest.is_empty() && at > 0 {
        breaks.push(at);
    }
    order.extend(rest);
    let group: BTreeMap<u32, Option<u32>> =
        r.threads.iter().map(|t| (t.id, t.sharing_group)).collect();
    let rows: Vec<HeatRow> = order
        .iter()
        .filter_map(|t| {
            let v = maps.get(t)?;
            Some(HeatRow {
                label: format!("thread {t}"),
                cells: cols
                    .iter()
                    .map(|&e| v.get(e).copied().unwrap_or(0.0))
                    .collect(),
                category: group.get(t).copied().flatten().map(|g| g as usize),
            })
        })
        .collect();
    let ngroups = r
        .threads
        .iter()
        .filter_map(|t| t.sharing_group)
        .max()
        .map_or(0, |g| g + 1);
    let cats: Vec<String> = (0..ngroups).map(|g| format!("true group {g}")).collect();
    Some(heatmap(
        title,
        &format!(
            "shMap slot ({} of {entries} used; {} globally shared removed)",
            cols.len(),
            global.len()
        ),
        "thread (ordered by cluster found)",
        &rows,
        // counters saturate at 255 (or less with scaled detection): shade by the largest
        rows.iter()
            .flat_map(|r| r.cells.iter().copied())
            .fold(1.0, f64::max),
        &cats,
        &breaks,
    ))
}

/// The policy's statistics in the table, per clustering variant: a reader and the
/// column heading.
type StatColumn = (fn(&ClusteringStats) -> Option<f64>, &'static str);

const STATS: &[StatColumn] = &[
    (
        |s| Some(s.max_remote_stall_share),
        "max window remote-stall share",
    ),
    (|s| Some(s.rounds as f64), "rounds"),
    (|s| Some(s.timeouts as f64), "timeouts"),
    (|s| s.first_clustered_ms, "first placement (ms)"),
    (|s| Some(s.detect_ms), "detection (ms)"),
    (|s| Some(s.samples as f64), "samples"),
    (|s| Some(s.clusters as f64), "clusters"),
    (|s| Some(s.loose_threads as f64), "loose threads"),
    (|s| Some(s.global_slots as f64), "global slots"),
    (|s| Some(s.threads_moved as f64), "threads moved"),
];

/// The analysis section: per variant with a clustering policy, accuracy and the
/// policy's statistics over seeds; Figure 5 of each such variant's first seed written
/// to `out` as `fig5-VARIANT.svg`.
pub fn analysis(sc: &Scenario, jobs: &[Job], runs: &[RunResult], out: &Path) -> Result<String> {
    let mut md = String::from(
        "Thread clustering's own measures, per variant that runs it: accuracy is the \
         adjusted Rand index of the last clustering against the workload's ground-truth \
         sharing groups (1: the same partition; about 0: no better than chance; a thread in \
         no cluster counts as a group of its own), which the policy never sees. Means over \
         seeds ± 95% half-width.\n\n",
    );
    let _ = write!(md, "| variant | accuracy (ARI) | runs clustered |");
    for (_, h) in STATS {
        let _ = write!(md, " {h} |");
    }
    md += "\n|---|---|---|";
    md += &"---|".repeat(STATS.len());
    md += "\n";
    let mut any = false;
    let mut notes = String::new();
    for (vi, v) in sc.variants.iter().enumerate() {
        if !v.policies.iter().any(|p| p.name() == "clustering") || detect_only_period(v).is_some() {
            continue;
        }
        any = true;
        let rs: Vec<&RunResult> = Table::new(jobs, runs)
            .of_variant(vi)
            .map(|(_, r)| r)
            .collect();
        let aris: Vec<f64> = rs.iter().filter_map(|r| accuracy(r)).collect();
        let fmt = |(m, h): (f64, f64)| {
            if h.is_finite() {
                format!("{} ± {}", plain(m), plain(h))
            } else {
                plain(m)
            }
        };
        let ari = if aris.is_empty() {
            "no clustering".to_string()
        } else {
            fmt(over_seeds(&aris))
        };
        let _ = write!(
            md,
            "| {} | {ari} | {} of {} |",
            v.label,
            aris.len(),
            rs.len()
        );
        let stats: Vec<ClusteringStats> = rs.iter().filter_map(|r| r.stats_of()).collect();
        for (read, _) in STATS {
            let xs: Vec<f64> = stats.iter().filter_map(read).collect();
            let cell = if xs.is_empty() {
                "–".into()
            } else {
                fmt(over_seeds(&xs))
            };
            let _ = write!(md, " {cell} |");
        }
        md += "\n";
        if let Some(first) = rs.first() {
            let name = format!(
                "fig5-{}.svg",
                v.label
                    .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
            );
            if let Some(svg) = figure5(
                first,
                &format!(
                    "Figure 5: shMaps, {} ({}, seed {})",
                    sc.name, v.label, first.seed
                ),
            ) {
                write_file(&out.join(&name), &svg)?;
                let rows = if clusters(first).is_empty() {
                    "the last detection found no cluster: rows in thread order"
                } else {
                    "rows: threads ordered by the cluster found, red rules between clusters"
                };
                let _ = writeln!(
                    notes,
                    "\nFigure 5 for `{}`, seed {}: `{name}` ({rows}; bar left of each row: \
                     its true group).\n",
                    v.label, first.seed
                );
            }
        }
    }
    let fig8 = figure8(sc, jobs, runs, out)?;
    Ok(if any {
        md + &notes + "\n" + &fig8
    } else {
        fig8
    })
}

/// The sampling period of variant `v` if it runs the policy without placing (detection
/// measured alone).
fn detect_only_period(v: &crate::scenario::Variant) -> Option<u64> {
    v.policies.iter().find_map(|p| match p {
        PolicySpec::Clustering(c) if !c.place => Some(c.period),
        _ => None,
    })
}

/// `(mean, half-width)` as "mean ± half" (the mean alone without an interval).
fn pm((m, h): (f64, f64)) -> String {
    if h.is_finite() {
        format!("{} ± {}", plain(m), plain(h))
    } else {
        plain(m)
    }
}

/// Figure 8: per detect-only variant (the policy sampling all run long without
/// placing), the share of remote accesses sampled, the overhead (throughput lost
/// against the scenario's first variant, paired by seed) and the time to collect the
/// paper's million samples at the measured rate; plots written to `out`.
fn figure8(sc: &Scenario, jobs: &[Job], runs: &[RunResult], out: &Path) -> Result<String> {
    let mut rows: Vec<(u64, usize)> = sc
        .variants
        .iter()
        .enumerate()
        .filter_map(|(i, v)| detect_only_period(v).map(|p| (p, i)))
        .collect();
    if rows.is_empty() {
        return Ok(String::new());
    }
    rows.sort();
    let machine = sc.machine.resolve()?;
    let giga_cycles = |ms: f64| ms * machine.freq_mhz as f64 * 1e3 / 1e9;
    let base = &sc.variants[0].label;
    let mut md = format!(
        "Figure 8: sampling one in N remote accesses, detection only (the policy samples \
         throughout and never moves a thread); each sample costs the sampled CPU {} cycles \
         (`kernel.sample_cost_cycles`). Overhead: throughput lost against `{base}`, paired \
         by seed. Time to collect 10^6 samples (the paper's count for SPECjbb) at the \
         run's sampling rate, in ms and in billions of cycles at {} MHz.\n\n\
         | sampled | overhead (%) | samples per ms | time to 10^6 samples (ms) | (10^9 cycles) |\n\
         |---|---|---|---|---|\n",
        sc.kernel.sample_cost_cycles, machine.freq_mhz
    );
    let (mut over, mut time) = (Vec::new(), Vec::new());
    for (i, &(period, vi)) in rows.iter().enumerate() {
        let (m, h) = paired_change(jobs, runs, (0, vi), None, "ips");
        let rates: Vec<f64> = Table::new(jobs, runs)
            .of_variant(vi)
            .filter_map(|(_, r)| metric(r, "samples_per_ms"))
            .collect();
        let to_ms: Vec<f64> = rates.iter().map(|r| 1e6 / r.max(1e-9)).collect();
        let (t, th) = over_seeds(&to_ms);
        md += &format!(
            "| 1 in {period} ({}%) | {} | {} | {} | {} |\n",
            plain(100.0 / period as f64),
            pm((-m, h)),
            pm(over_seeds(&rates)),
            pm((t, th)),
            pm((giga_cycles(t), giga_cycles(th)))
        );
        over.push((i as f64, (-m, h)));
        time.push((i as f64, (giga_cycles(t), giga_cycles(th))));
    }
    let labels: Vec<String> = rows.iter().map(|(p, _)| format!("1 in {p}")).collect();
    for (file, title, y, series) in [
        (
            "fig8-overhead.svg",
            "sampling overhead",
            "throughput lost (%)",
            &over,
        ),
        (
            "fig8-collection.svg",
            "time to collect 10^6 samples",
            "time to collect (10^9 cycles)",
            &time,
        ),
    ] {
        let svg = line_chart(
            &format!("Figure 8: {title} ({})", sc.name),
            "share of remote accesses sampled",
            y,
            &[Series::with_intervals(title.into(), series)],
            XAxis::Categories(&labels),
            None,
        );
        write_file(&out.join(file), &svg)?;
    }
    md += "\nPlots: `fig8-overhead.svg`, `fig8-collection.svg`.\n\n";
    Ok(md)
}

/// The sharing-aware thread clustering paper (Tam et al.; `docs/clustering.md`).
pub struct Clustering;

impl crate::paper::Paper for Clustering {
    fn name(&self) -> &'static str {
        "clustering"
    }
    fn about(&self) -> &'static str {
        "sharing-aware thread clustering (paper 3): the server workloads' four placements on the Power5, Figures 5-8, 8 chips"
    }
    fn section(
        &self,
        sc: &Scenario,
        jobs: &[Job],
        runs: &[RunResult],
        out: &Path,
    ) -> Result<String> {
        analysis(sc, jobs, runs, out)
    }
}
