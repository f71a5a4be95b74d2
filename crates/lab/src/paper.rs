//! A paper's reported values in a scenario file, and the paper-against-measured table
//! and plots that compare them with a scenario's runs.
//!
//! A value is either a *change* of a metric of one variant against another (paired by
//! seed, in percent: "CASC lowers the L2 miss ratio by 15–46%") or a *value* of a metric
//! of one variant ("the default scheduler's CPU-share deviation / mean is 43%"), as a
//! range `[low, high]` (a single published number is a range of width zero), at every
//! sweep point or the ones listed.

use crate::experiment::{metric, metric_label, over_seeds, paired_change, plain, Job, Scenario};
use crate::svg::{line_chart, Series, XAxis};
use cachesched_sim::RunResult;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One value a paper reports for the figure a scenario reproduces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperValue {
    /// What the value is, as the paper says it (shown in the table).
    pub what: String,
    /// Where in the paper (section, figure, table).
    pub source: String,
    /// The metric (one of the scenario metrics' names).
    pub metric: String,
    /// The variant the value is about.
    pub variant: String,
    /// For a change: the variant it is measured against (default: the scenario's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    /// The change in percent, `[low, high]` (exactly one of `change_pct` and `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<[f64; 2]>,
    /// The metric's value, `[low, high]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<[f64; 2]>,
    /// Sweep points (LLC KiB) the value applies to (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_kb: Option<Vec<u64>>,
    /// In a scenario of several mixes, the program the value is about (default: all of
    /// them); such values are measures of the scenario's analysis
    /// ([`crate::papers::cachefair::MEASURES`]), not per-run metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

impl PaperValue {
    /// The checks every analysis over mixes makes of its paper values: the metric is
    /// one of `measures` (the measures of the analysis named `analysis`), the variant
    /// exists, and the value is a `value` range with no `change_pct` or `llc_kb` (nor
    /// `against`, unless `with_against`), which apply to single runs' metrics only.
    pub fn check_over_mixes(
        &self,
        sc: &Scenario,
        analysis: &str,
        measures: &[&str],
        with_against: bool,
    ) -> Result<(), String> {
        let what = &self.what;
        if !measures.contains(&self.metric.as_str()) {
            return Err(format!(
                "paper value '{what}': in a scenario of several mixes the metric is one of \
                 the {analysis} analysis's measures: {}",
                measures.join(", ")
            ));
        }
        if !sc.variants.iter().any(|v| v.label == self.variant) {
            return Err(format!(
                "paper value '{what}': no variant labelled '{}'",
                self.variant
            ));
        }
        let against = self.against.is_some() && !with_against;
        if self.value.is_none() || self.change_pct.is_some() || against || self.llc_kb.is_some() {
            let extra = if with_against { "" } else { ", against" };
            return Err(format!(
                "paper value '{what}': give `value` (a range) only; change_pct{extra} and \
                 llc_kb do not apply to a measure over mixes"
            ));
        }
        Ok(())
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

impl PaperValue {
    /// Checks the value against its scenario: known metric and variants, one kind,
    /// points inside the sweep.
    pub fn validate(&self, sc: &Scenario) -> Result<(), String> {
        if !sc.mixes.is_empty() {
            return crate::papers::validate_mixes_value(self, sc);
        }
        if self.program.is_some() {
            return Err(format!(
                "paper value '{}': 'program' applies to scenarios of several mixes only",
                self.what
            ));
        }
        if !sc.metrics.contains(&self.metric) {
            return Err(format!(
                "paper value '{}': metric '{}' is not among the scenario's metrics",
                self.what, self.metric
            ));
        }
        for v in std::iter::once(&self.variant).chain(self.against.as_ref()) {
            if !sc.variants.iter().any(|x| &x.label == v) {
                return Err(format!(
                    "paper value '{}': no variant labelled '{v}'",
                    self.what
                ));
            }
        }
        if self.change_pct.is_some() == self.value.is_some() {
            return Err(format!(
                "paper value '{}': give exactly one of change_pct and value",
                self.what
            ));
        }
        if self.value.is_some() && self.against.is_some() {
            return Err(format!(
                "paper value '{}': 'against' applies to change_pct only",
                self.what
            ));
        }
        if let Some(ks) = &self.llc_kb {
            let sweep: &[u64] = sc.sweep.as_ref().map_or(&[], |s| &s.llc_kb);
            if let Some(k) = ks.iter().find(|k| !sweep.contains(k)) {
                return Err(format!(
                    "paper value '{}': {k} KiB is not a sweep point",
                    self.what
                ));
            }
        }
        Ok(())
    }

    /// The sweep points the value applies to.
    pub fn points(&self, sc: &Scenario) -> Vec<Option<u64>> {
        match (&self.llc_kb, &sc.sweep) {
            (Some(ks), _) => ks.iter().map(|&k| Some(k)).collect(),
            (None, Some(s)) => s.llc_kb.iter().map(|&k| Some(k)).collect(),
            (None, None) => vec![None],
        }
    }

    /// The index of the variant labelled `label` in `sc` (validated to exist).
    pub fn index(sc: &Scenario, label: &str) -> usize {
        sc.variants
            .iter()
            .position(|v| v.label == label)
            .expect("validated")
    }

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
            let xs: Vec<f64> = jobs
                .iter()
                .zip(runs)
                .filter(|(j, _)| j.variant == v && j.llc_kb == p)
                .map(|(_, r)| metric(r, &self.metric).expect("known metric"))
                .collect();
            over_seeds(&xs)
        }
    }

    /// The paper's range: its change in percent, else its value.
    pub fn range(&self) -> [f64; 2] {
        self.change_pct.or(self.value).expect("validated")
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
