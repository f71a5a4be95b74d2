//! The thread-clustering paper's own measures (paper 3), added to `cachesched reproduce`'s
//! report of a scenario that asks for the `clustering` analysis: how well the clusters
//! found match the workload's ground-truth sharing groups (adjusted Rand index), what
//! detection cost and how long it took, and Figure 5's picture of the sharing maps.

use crate::experiment::{over_seeds, plain, Job, Scenario};
use crate::simulate_cmd::write_file;
use crate::svg::{heatmap, HeatRow};
use anyhow::Result;
use cachesched_policies::clustering::cluster::adjusted_rand_index;
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
/// by cluster, one column per slot non-zero somewhere (globally shared slots removed),
/// each row marked with its ground-truth group; `None` without a clustering.
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
        255.0,
        &cats,
        &breaks,
    ))
}

/// Policy statistics reported per clustering variant: (key, column heading).
const STATS: &[(&str, &str)] = &[
    ("max_remote_stall_share", "max window remote-stall share"),
    ("rounds", "rounds"),
    ("timeouts", "timeouts"),
    ("first_clustered_ms", "first placement (ms)"),
    ("detect_ms", "detection (ms)"),
    ("samples", "samples"),
    ("clusters", "clusters"),
    ("loose_threads", "loose threads"),
    ("global_slots", "global slots"),
    ("threads_moved", "threads moved"),
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
        if !v.policies.iter().any(|p| p.name() == "clustering") {
            continue;
        }
        any = true;
        let rs: Vec<&RunResult> = jobs
            .iter()
            .zip(runs)
            .filter(|(j, _)| j.variant == vi)
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
        for (k, _) in STATS {
            let xs: Vec<f64> = rs
                .iter()
                .filter_map(|r| {
                    r.policy_stats
                        .iter()
                        .find(|(n, _)| n.strip_prefix("clustering.").unwrap_or(n) == *k)
                        .map(|(_, &x)| x)
                })
                .collect();
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
                let _ = writeln!(
                    notes,
                    "\nFigure 5 for `{}`, seed {}: `{name}` (rows: threads ordered by the \
                     cluster found, red rules between clusters; bar left of each row: its true \
                     group).\n",
                    v.label, first.seed
                );
            }
        }
    }
    Ok(if any {
        md + &notes + "\n"
    } else {
        String::new()
    })
}
