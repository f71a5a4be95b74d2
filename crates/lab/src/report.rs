//! A scenario's outputs: `results.json` and `results.csv` (and reading them back),
//! the resolved scenario, SVG plots and `report.md` with the paper-against-measured
//! table.
//!
//! A paper value is either a *change* of a metric of one variant against another
//! (paired by seed, in percent: "CASC lowers the L2 miss ratio by 15–46%") or a
//! *value* of a metric of one variant ("the default scheduler's CPU-share deviation /
//! mean is 43%"), as a range `[low, high]` (a single published number is a range of
//! width zero), at every sweep point or the ones listed.

use crate::checks::checks;
use crate::error::{invalid, Error, Result, ResultExt};
use crate::files::write_file;
use crate::metrics::METRICS;
use crate::metrics::SOLO_METRICS;
use crate::metrics::{metric, metric_label};
use crate::scenario::{Job, PaperValue, Scenario};
use crate::stats::{over_seeds, paired_change, plain, verdict};
use crate::svg::{line_chart, Series, XAxis};
use cachesched_sim::RunResult;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Serialize)]
struct Row<'a> {
    variant: &'a str,
    llc_kb: Option<u64>,
    seed: u64,
    result: &'a RunResult,
}

/// One run of `results.json`, read back.
#[derive(Deserialize)]
pub struct SavedRun {
    /// The variant's label.
    pub variant: String,
    /// The sweep point (LLC size, KiB), if the scenario sweeps.
    pub llc_kb: Option<u64>,
    /// The seed.
    pub seed: u64,
    /// What the run measured.
    pub result: RunResult,
}

/// The runs a scenario's `results.json` at `path` holds, in its order.
pub fn read_saved(path: &std::path::Path) -> Result<Vec<SavedRun>> {
    let text = std::fs::read_to_string(path).map_err(Error::io("cannot read", path))?;
    serde_json::from_str(&text).map_err(|source| Error::ParseResults {
        path: path.to_path_buf(),
        source,
    })
}

/// The jobs of `sc` ([`Scenario::jobs`]) with the results a previous run of the same
/// scenario left in `out` (`results.json`), without running anything, and the outputs
/// rewritten from them (report, CSV, plots: for changes of the reports). Refuses when
/// `out` holds no results, or results of a scenario that differs from `sc` in any
/// resolved field (file edited, overrides changed, `--quick` or not).
pub fn load_results(
    sc: &Scenario,
    jobs: Vec<Job>,
    out: &std::path::Path,
) -> Result<(Vec<Job>, Vec<RunResult>)> {
    let resolved = out.join("scenario.resolved.toml");
    let saved = std::fs::read_to_string(&resolved).map_err(|source| Error::NoResults {
        dir: out.to_path_buf(),
        file: resolved.clone(),
        source,
    })?;
    if saved != toml::to_string(sc)? {
        return Err(invalid!(
            "the results in '{}' were made from a different scenario than '{}' resolves to now \
             (the file or the command-line overrides changed since, or --quick differs; compare \
             with '{}'): rerun it without --from-results",
            out.display(),
            sc.name,
            resolved.display()
        ));
    }
    let path = out.join("results.json");
    let rows = read_saved(&path)?;
    // each row is one of the jobs, in the jobs' order (seeds added one at a time leave
    // some out)
    let mut found = std::collections::HashMap::new();
    let mut next = 0;
    for row in rows {
        let Some(i) = (next..jobs.len()).find(|&i| {
            let j = &jobs[i];
            row.variant == sc.variants[j.variant].label
                && row.llc_kb == j.llc_kb
                && row.seed == j.seed
        }) else {
            return Err(invalid!(
                "'{}' does not list the scenario's runs in its order (found {} / {:?} KiB / \
                 seed {}): rerun it without --from-results",
                path.display(),
                row.variant,
                row.llc_kb,
                row.seed
            ));
        };
        found.insert(i, row.result);
        next = i + 1;
    }
    let keep = if sc.sequential() {
        crate::seeds::check_loaded(sc, &jobs, &found)
            .within(|| format!("in '{}': rerun it without --from-results", path.display()))?
    } else if found.len() == jobs.len() {
        (0..jobs.len()).collect()
    } else {
        return Err(invalid!(
            "'{}' has {} runs where the scenario has {}: rerun it without --from-results",
            path.display(),
            found.len(),
            jobs.len()
        ));
    };
    let mut runs = Vec::with_capacity(keep.len());
    let mut kept = Vec::with_capacity(keep.len());
    let mut keep = keep.into_iter().peekable();
    for (i, j) in jobs.into_iter().enumerate() {
        if keep.next_if_eq(&i).is_some() {
            runs.push(found.remove(&i).expect("kept runs are found"));
            kept.push(j);
        }
    }
    write_outputs(sc, &kept, &runs, out)?;
    Ok((kept, runs))
}

/// The header of a results table: variant, the sweep's size when there is one, and one
/// column per reported metric.
fn table_header(sc: &Scenario) -> String {
    let sweep = sc.sweep.is_some();
    let mut h = String::from("| variant |");
    if sweep {
        h += " LLC size (KiB) |";
    }
    for m in &sc.metrics {
        h += &format!(" {} |", metric_label(m));
    }
    h += "\n|---|";
    if sweep {
        h += "---|";
    }
    h += &"---|".repeat(sc.metrics.len());
    h + "\n"
}

/// Writes a scenario's results beside each other in `out`: every run (JSON, CSV), the
/// resolved scenario, and the report (tables of means and paired changes).
pub fn write_outputs(
    sc: &Scenario,
    jobs: &[Job],
    runs: &[RunResult],
    out: &std::path::Path,
) -> Result<()> {
    let rows: Vec<Row<'_>> = jobs
        .iter()
        .zip(runs)
        .map(|(j, r)| Row {
            variant: &sc.variants[j.variant].label,
            llc_kb: j.llc_kb,
            seed: j.seed,
            result: r,
        })
        .collect();
    write_file(
        &out.join("results.json"),
        &(serde_json::to_string_pretty(&rows)? + "\n"),
    )?;
    write_file(&out.join("scenario.resolved.toml"), &toml::to_string(sc)?)?;
    let mut csv = String::from("variant,llc_kb,seed");
    for (m, _, _) in METRICS {
        csv += &format!(",{m}");
    }
    csv += "\n";
    for row in &rows {
        csv += &format!(
            "{},{},{}",
            row.variant,
            row.llc_kb.map(|k| k.to_string()).unwrap_or_default(),
            row.seed
        );
        for (m, _, _) in METRICS {
            csv += &format!(",{}", metric(row.result, m).expect("known metric"));
        }
        csv += "\n";
    }
    write_file(&out.join("results.csv"), &csv)?;
    // Means over seeds per (variant, sweep point).
    let points: Vec<Option<u64>> = match &sc.sweep {
        Some(s) => s.llc_kb.iter().map(|&k| Some(k)).collect(),
        None => vec![None],
    };
    let stat = |vi: usize, p: Option<u64>, m: &str| -> (f64, f64) {
        over_seeds(&crate::results::Table::new(jobs, runs).values(vi, p, m))
    };
    let mut md = format!("# {}\n\n{}\n\n", sc.name, sc.description);
    md += &format!(
        "Machine `{}`, {} ms per run ({} ms warm-up), {}. {}\n\n",
        sc.machine.resolve()?.name,
        sc.duration_ms,
        sc.warmup_ms,
        crate::seeds::rule_sentence(sc),
        if sc.seeds.len() > 1 {
            "Mean over seeds ± the half-width of its 95% confidence interval (Student's t)."
        } else {
            "One seed: single runs, no interval."
        }
    );
    md += &crate::seeds::outcomes_md(sc, jobs, runs);
    let (check_md, _) = checks(sc, jobs, runs);
    if !check_md.is_empty() {
        md += &format!("Checks of the measured windows:\n\n{check_md}\n");
    }
    md += &table_header(sc);
    for &p in &points {
        for (vi, v) in sc.variants.iter().enumerate() {
            md += &format!("| {} |", v.label);
            if let Some(k) = p {
                md += &format!(" {k} |");
            }
            for m in &sc.metrics {
                // one seed has no interval (NaN)
                let (mean, h) = stat(vi, p, m);
                md += &if h.is_finite() {
                    format!(" {} ± {} |", plain(mean), plain(h))
                } else {
                    format!(" {} |", plain(mean))
                };
            }
            md += "\n";
        }
    }
    md += "\n";
    if sc.variants.len() > 1 {
        md += &format!(
            "Against `{}`, paired by seed: the mean change in percent of the baseline ± the \
             half-width of its 95% interval; better or worse only when the interval excludes \
             zero.\n\n",
            sc.variants[0].label
        );
        md += &table_header(sc);
        for &p in &points {
            for (vi, v) in sc.variants.iter().enumerate().skip(1) {
                md += &format!("| {} |", v.label);
                if let Some(k) = p {
                    md += &format!(" {k} |");
                }
                for m in &sc.metrics {
                    let c = paired_change(jobs, runs, (0, vi), p, m);
                    md += &if c.1.is_finite() {
                        format!(" {:+.1}% ± {:.1} ({}) |", c.0, c.1, verdict(m, c))
                    } else {
                        format!(" {:+.1}% ({}) |", c.0, verdict(m, c))
                    };
                }
                md += "\n";
            }
        }
        md += "\n";
    }
    let paper_md = crate::report::table(sc, jobs, runs);
    if !paper_md.is_empty() {
        md += &format!(
            "## Paper against measured\n\n{paper_md}\n\"inside\": the measured mean is in the \
             paper's range; \"interval overlaps\": it is not, but its 95% interval reaches the \
             range.\n\n"
        );
        for (file, svg) in crate::report::change_plots(sc, jobs, runs) {
            write_file(&out.join(&file), &svg)?;
            md += &format!("![{file}]({file})\n\n");
        }
    }
    if sc
        .metrics
        .iter()
        .any(|m| SOLO_METRICS.contains(&m.as_str()))
    {
        md += "STP, ANTT, worst slowdown and Jain's index compare each thread with its \
               program running alone on the same machine, kernel, window and seed (solo \
               runs, `solo_ips` in results.json).\n\n";
    }
    for m in &sc.metrics {
        let (xl, labels): (String, Option<Vec<String>>) = match &sc.sweep {
            Some(_) => ("LLC size".into(), None),
            None => (
                "variant".into(),
                Some(sc.variants.iter().map(|v| v.label.clone()).collect()),
            ),
        };
        let series: Vec<Series> = if sc.sweep.is_some() {
            sc.variants
                .iter()
                .enumerate()
                .map(|(vi, v)| {
                    let xs: Vec<_> = points
                        .iter()
                        .map(|&p| (p.unwrap_or(0) as f64, stat(vi, p, m)))
                        .collect();
                    Series::with_intervals(v.label.clone(), &xs)
                })
                .collect()
        } else {
            let xs: Vec<_> = (0..sc.variants.len())
                .map(|vi| (vi as f64, stat(vi, None, m)))
                .collect();
            vec![Series::with_intervals(metric_label(m).into(), &xs)]
        };
        let file = format!("{m}.svg");
        // the paper's value of this metric, where it gives one (not a change)
        let paper = sc
            .paper
            .iter()
            .find(|pv| &pv.metric == m && pv.value.is_some())
            .map(|pv| (pv.range(), format!("paper ({})", pv.source)));
        let axis = match &labels {
            Some(l) => XAxis::Categories(l),
            None => XAxis::Kib,
        };
        write_file(
            &out.join(&file),
            &line_chart(
                &format!("{}: {}", sc.name, metric_label(m)),
                &xl,
                metric_label(m),
                &series,
                axis,
                paper
                    .as_ref()
                    .map(|([a, b], l)| (a.min(*b), a.max(*b), l.as_str())),
            ),
        )?;
        md += &format!("![{m}]({file})\n\n");
    }
    write_file(&out.join("report.md"), &md)?;
    println!(
        "wrote results.json, results.csv, scenario.resolved.toml, report.md and {} plot(s) to {}",
        sc.metrics.len(),
        out.display()
    );
    print!(
        "{}",
        md.lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    Ok(())
}

impl PaperValue {
    /// The measured counterpart at point `p`: mean and 95% half-width, in percent for
    /// a change.
    pub fn measured(
        &self,
        sc: &Scenario,
        jobs: &[Job],
        runs: &[RunResult],
        p: Option<u64>,
    ) -> (f64, f64) {
        let v = Self::index(sc, &self.variant);
        if self.change_pct.is_some() {
            let base = self.against.as_deref().map_or(0, |a| Self::index(sc, a));
            paired_change(jobs, runs, (base, v), p, &self.metric)
        } else {
            over_seeds(&crate::results::Table::new(jobs, runs).values(v, p, &self.metric))
        }
    }
}

/// How a measured mean and interval stand against a published range.
pub fn agreement(range: [f64; 2], (mean, half): (f64, f64)) -> &'static str {
    let (lo, hi) = (range[0].min(range[1]), range[0].max(range[1]));
    if !mean.is_finite() {
        return "not measured";
    }
    if (lo..=hi).contains(&mean) {
        return "inside";
    }
    if half.is_finite() && mean - half <= hi && mean + half >= lo {
        return "interval overlaps";
    }
    if mean < lo {
        "below"
    } else {
        "above"
    }
}

/// A range as the table shows it.
fn show_range(r: [f64; 2], pct: bool) -> String {
    let f = |x: f64| {
        if pct {
            format!("{x:+.0}%")
        } else {
            plain(x)
        }
    };
    if r[0] == r[1] {
        f(r[0])
    } else {
        format!("{} to {}", f(r[0]), f(r[1]))
    }
}

/// A measured mean and interval as the table shows it.
fn show_measured((m, h): (f64, f64), pct: bool) -> String {
    match (pct, h.is_finite()) {
        (true, true) => format!("{m:+.1}% ± {h:.1}"),
        (true, false) => format!("{m:+.1}%"),
        (false, true) => format!("{} ± {}", plain(m), plain(h)),
        (false, false) => plain(m),
    }
}

/// The paper-against-measured table of `sc`'s paper values (Markdown; empty if none).
pub fn table(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> String {
    if sc.paper.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "| paper | source | variant | LLC | paper value | measured (mean ± 95% CI) | measured against the paper |\n|---|---|---|---|---|---|---|\n",
    );
    for pv in &sc.paper {
        let pct = pv.change_pct.is_some();
        let who = match (&pv.against, pct) {
            (Some(a), true) => format!("{} vs {a}", pv.variant),
            (None, true) => format!("{} vs {}", pv.variant, sc.variants[0].label),
            _ => pv.variant.clone(),
        };
        for p in pv.points(sc) {
            let m = pv.measured(sc, jobs, runs, p);
            let _ = writeln!(
                md,
                "| {} | {} | {who} | {} | {} | {} | {} |",
                pv.what,
                pv.source,
                p.map_or("-".into(), |k| format!("{k} KB")),
                show_range(pv.range(), pct),
                show_measured(m, pct),
                agreement(pv.range(), m)
            );
        }
    }
    md
}

/// For every paper change, a plot of each other variant's paired change against the
/// same baseline over the sweep, with 95% error bars and the paper's range shaded:
/// (file name, SVG). Only scenarios with a sweep get these.
pub fn change_plots(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> Vec<(String, String)> {
    let Some(sweep) = &sc.sweep else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for pv in sc.paper.iter().filter(|p| p.change_pct.is_some()) {
        let base = pv
            .against
            .as_deref()
            .map_or(0, |a| PaperValue::index(sc, a));
        let series: Vec<Series> = sc
            .variants
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != base)
            .map(|(vi, v)| {
                let xs: Vec<(f64, (f64, f64))> = sweep
                    .llc_kb
                    .iter()
                    .map(|&k| {
                        (
                            k as f64,
                            paired_change(jobs, runs, (base, vi), Some(k), &pv.metric),
                        )
                    })
                    .collect();
                Series::with_intervals(v.label.clone(), &xs)
            })
            .collect();
        let r = pv.range();
        let file = format!("change_{}_vs_{}.svg", pv.metric, sc.variants[base].label);
        if out.iter().any(|(f, _)| *f == file) {
            continue;
        }
        let band_label = format!("paper ({})", pv.source);
        let svg = line_chart(
            &format!(
                "{}: change in {} against {} (mean over seeds, 95% CI, paired)",
                sc.name,
                metric_label(&pv.metric),
                sc.variants[base].label
            ),
            "LLC size (log scale)",
            &format!(
                "change in {} against {} (%)",
                metric_label(&pv.metric),
                sc.variants[base].label
            ),
            &series,
            XAxis::Kib,
            Some((r[0].min(r[1]), r[0].max(r[1]), &band_label)),
        );
        out.push((file, svg));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_names_where_the_measurement_stands() {
        assert_eq!(agreement([-46.0, -15.0], (-20.0, 3.0)), "inside");
        assert_eq!(agreement([-15.0, -46.0], (-20.0, 3.0)), "inside");
        assert_eq!(agreement([-46.0, -15.0], (-13.0, 3.0)), "interval overlaps");
        assert_eq!(agreement([-46.0, -15.0], (-10.0, 3.0)), "above");
        assert_eq!(agreement([-46.0, -15.0], (-50.0, f64::NAN)), "below");
        assert_eq!(agreement([0.43, 0.43], (0.43, f64::NAN)), "inside");
        assert_eq!(agreement([1.0, 2.0], (f64::NAN, f64::NAN)), "not measured");
    }

    #[test]
    fn ranges_and_measurements_read_plainly() {
        assert_eq!(show_range([-46.0, -15.0], true), "-46% to -15%");
        assert_eq!(show_range([0.43, 0.43], false), "0.430");
        assert_eq!(show_measured((-23.14, 2.04), true), "-23.1% ± 2.0");
        assert_eq!(show_measured((0.151, 0.012), false), "0.151 ± 0.0120");
        assert_eq!(show_measured((6.0e8, f64::NAN), false), "6.00e8");
    }
}
