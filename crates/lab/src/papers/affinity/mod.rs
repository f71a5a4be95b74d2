//! The cache-affinity paper's analysis over a scenario's mixes (`analyses =
//! ["affinity"]`, paper 4): each mix is one program whose threads labelled `main` are
//! measured (IPC and misses per instruction over the measured window, summed over the
//! main threads), and the analysis compares variants in pairs, low affinity against
//! high, paired by seed.
//!
//! Which variants are compared follows the labels of the paper's two experiments:
//! - a variant labelled `bound` (§3: main copies bound to their cores) is the high
//!   affinity every other variant is compared with;
//! - otherwise `high` and `high+l2` (§2: the program beside BV_0, without and with
//!   BV_L2) are: a variant whose label ends in `+l2` is compared with `high+l2`, any
//!   other with `high`.
//!
//! Measures (the `metric` of the scenario's paper values; `variant` is the low side,
//! `against` the high side; without `program`, the mean over the mixes, taken per seed
//! before the interval):
//! - `ipc_change_pct`: `100 · (low / high − 1)` of the main threads' IPC;
//! - `l1d_mpi_change_pct`, `l1i_mpi_change_pct`, `l2_mpi_change_pct`: the same of their
//!   L1D, L1I and L2 misses per instruction;
//! - `l2_mpi_ratio`: low / high of their L2 misses per instruction;
//! - `work_change_pct`: the same as `ipc_change_pct` of their instructions per ms of the
//!   window (IPC times the CPU time they got), which a policy can change by moving CPU
//!   time as well as by keeping caches warm.

pub mod host;

use crate::scenario::MixRuns;

use crate::scenario::Scenario;

use crate::error::{invalid, Result};
use crate::files::write_file;
use crate::report::agreement;
use crate::scenario::PaperValue;
use crate::stats::{over_seeds, plain, show};
use crate::svg::{bar_chart, Marks, Series};
use cachesched_core::num::ratio;
use cachesched_sim::RunResult;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The measures the analysis reports, as a paper value's `metric`.
pub const MEASURES: &[&str] = &[
    "ipc_change_pct",
    "l1d_mpi_change_pct",
    "l1i_mpi_change_pct",
    "l2_mpi_change_pct",
    "l2_mpi_ratio",
    "work_change_pct",
];

/// The label of the threads whose performance is measured.
pub const MAIN: &str = "main";

/// Checks a paper value of an `affinity` scenario: one of [`MEASURES`], two different
/// known variants (`variant` the low side, `against` the high side), a value range,
/// and a program that has a mix.
pub fn validate_paper_value(pv: &PaperValue, sc: &Scenario) -> Result<(), String> {
    pv.check_over_mixes(sc, "affinity", MEASURES, true)?;
    let what = &pv.what;
    let Some(against) = &pv.against else {
        return Err(format!(
            "paper value '{what}': give `against`, the high-affinity variant"
        ));
    };
    if !sc.variants.iter().any(|x| &x.label == against) {
        return Err(format!(
            "paper value '{what}': no variant labelled '{against}'"
        ));
    }
    if &pv.variant == against {
        return Err(format!(
            "paper value '{what}': `variant` and `against` are the same"
        ));
    }
    if let Some(p) = &pv.program {
        if !sc.mixes.iter().any(|m| &m.label == p) {
            return Err(format!("paper value '{what}': no mix labelled '{p}'"));
        }
    }
    Ok(())
}

/// The pairs (low, high) of variant indices the analysis compares (module
/// documentation), or an error naming the labels it needs.
pub fn pairs(sc: &Scenario) -> Result<Vec<(usize, usize)>> {
    let at = |l: &str| sc.variants.iter().position(|v| v.label == l);
    if let Some(b) = at("bound") {
        return Ok((0..sc.variants.len())
            .filter(|&v| v != b)
            .map(|v| (v, b))
            .collect());
    }
    let (Some(h), hl2) = (at("high"), at("high+l2")) else {
        return Err(invalid!(
            "the affinity analysis compares with a variant labelled `bound` (§3) or `high` \
             (and `high+l2`, §2); this scenario has neither"
        ));
    };
    let mut v = Vec::new();
    for (i, x) in sc.variants.iter().enumerate() {
        if Some(i) == Some(h) || Some(i) == hl2 {
            continue;
        }
        if x.label.ends_with("+l2") {
            let Some(hl2) = hl2 else {
                return Err(invalid!(
                    "variant '{}' needs a variant labelled `high+l2`",
                    x.label
                ));
            };
            v.push((i, hl2));
        } else {
            v.push((i, h));
        }
    }
    Ok(v)
}

/// What one run says about its main threads.
#[derive(Debug, Clone, Copy)]
struct Main {
    ipc: f64,
    l1d_mpi: f64,
    l1i_mpi: f64,
    l2_mpi: f64,
    /// Instructions per ms of the measured window.
    work: f64,
    /// The run's CPU-share coefficient of variation (every thread).
    cv: f64,
    migrations: f64,
}

impl Main {
    fn of(r: &RunResult) -> Option<Main> {
        r.counters_of(MAIN).map(|c| Main {
            ipc: c.ipc(),
            l1d_mpi: ratio(c.l1d_misses, c.instructions),
            l1i_mpi: ratio(c.l1i_misses, c.instructions),
            l2_mpi: ratio(c.l2_misses, c.instructions),
            work: c.instructions as f64 / r.measured_ms.max(1e-9),
            cv: r.cpu_share_cv,
            migrations: c.migrations as f64,
        })
    }

    /// The value a measure compares: (quantity, as a ratio rather than a change).
    fn quantity(&self, measure: &str) -> (f64, bool) {
        match measure {
            "ipc_change_pct" => (self.ipc, false),
            "l1d_mpi_change_pct" => (self.l1d_mpi, false),
            "l1i_mpi_change_pct" => (self.l1i_mpi, false),
            "l2_mpi_change_pct" => (self.l2_mpi, false),
            "l2_mpi_ratio" => (self.l2_mpi, true),
            "work_change_pct" => (self.work, false),
            _ => (f64::NAN, false),
        }
    }
}

/// Per mix (in the scenario's order), per variant, per seed.
struct Data {
    programs: Vec<String>,
    runs: Vec<Vec<BTreeMap<u64, Main>>>,
}

impl Data {
    /// Per seed, `measure` of variant `low` against `high` in mix `p`.
    fn per_seed(&self, p: usize, (low, high): (usize, usize), measure: &str) -> BTreeMap<u64, f64> {
        let (h, l) = (&self.runs[p][high], &self.runs[p][low]);
        l.iter()
            .filter_map(|(s, lo)| {
                let hi = h.get(s)?;
                let ((a, as_ratio), (b, _)) = (lo.quantity(measure), hi.quantity(measure));
                let r = a / b;
                r.is_finite()
                    .then_some((*s, if as_ratio { r } else { 100.0 * (r - 1.0) }))
            })
            .collect()
    }

    /// `measure` of `low` against `high`: in mix `p`, or the mean over the mixes taken
    /// per seed; mean and 95% half-width over seeds.
    fn measure(&self, p: Option<usize>, pair: (usize, usize), measure: &str) -> (f64, f64) {
        let xs: Vec<f64> = match p {
            Some(p) => self.per_seed(p, pair, measure).into_values().collect(),
            None => {
                let per: Vec<BTreeMap<u64, f64>> = (0..self.programs.len())
                    .map(|p| self.per_seed(p, pair, measure))
                    .collect();
                let seeds: Vec<u64> = per
                    .first()
                    .map_or(Vec::new(), |m| m.keys().copied().collect());
                seeds
                    .iter()
                    .filter_map(|s| {
                        let v: Vec<f64> = per.iter().filter_map(|m| m.get(s).copied()).collect();
                        (v.len() == per.len()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                    })
                    .collect()
            }
        };
        over_seeds(&xs)
    }

    /// A field of variant `v` in mix `p` over seeds.
    fn abs(&self, p: usize, v: usize, f: impl Fn(&Main) -> f64) -> (f64, f64) {
        over_seeds(&self.runs[p][v].values().map(f).collect::<Vec<f64>>())
    }
}

/// `*` when a change's interval excludes zero (or a ratio's excludes 1).
fn clear((m, h): (f64, f64), at: f64) -> &'static str {
    if h.is_finite() && (m - h > at || m + h < at) {
        " *"
    } else {
        ""
    }
}

/// Which miss counts a pair is about: the L1 its base vector displaces (§2), else the L2.
fn pair_caches(low_label: &str) -> &'static [(&'static str, &'static str)] {
    if low_label.contains("l1i") {
        &[("l1i_mpi_change_pct", "L1I")]
    } else if low_label.contains("l1d") {
        &[("l1d_mpi_change_pct", "L1D")]
    } else {
        &[("l2_mpi_ratio", "L2")]
    }
}

/// The analysis section: per pair a table of the main threads' IPC and misses per
/// instruction, high against low affinity, per program and over all; the policies'
/// share of binding's gain where the scenario has `bound` and `oblivious`; the paper's
/// values against the measured; plots written to `out`.
pub fn analysis(sc: &Scenario, done: &[MixRuns], out: &Path) -> Result<String> {
    let pairs = pairs(sc)?;
    let nv = sc.variants.len();
    let mut data = Data {
        programs: Vec::new(),
        runs: Vec::new(),
    };
    for (mix, _, jobs, runs) in done {
        let label = mix.clone().unwrap_or_default();
        let mut per = vec![BTreeMap::new(); nv];
        for (j, r) in jobs.iter().zip(runs) {
            let Some(m) = Main::of(r) else {
                return Err(invalid!(
                    "mix '{label}': no thread labelled `{MAIN}` to measure"
                ));
            };
            per[j.variant].insert(j.seed, m);
        }
        data.programs.push(label);
        data.runs.push(per);
    }
    let np = data.programs.len();
    let label = |v: usize| sc.variants[v].label.as_str();
    let mut md = String::from(
        "The main threads' IPC and misses per 1,000 instructions (MPKI) over the measured \
         window, means over seeds ± 95% half-width; changes low against high affinity paired \
         by seed (`*`: the interval excludes no change); the last row is the mean over the \
         programs, taken per seed.\n\n",
    );
    for &(lo, hi) in &pairs {
        let caches = pair_caches(label(lo));
        let _ = write!(
            md,
            "**{} against {}**\n\n| program | IPC ({}) | IPC ({}) | IPC change |",
            label(lo),
            label(hi),
            label(hi),
            label(lo)
        );
        for (_, c) in caches {
            let _ = write!(
                md,
                " {c} MPKI ({}) | {c} MPKI ({}) | {c} misses per instruction |",
                label(hi),
                label(lo)
            );
        }
        md += " main migrations per run |\n|---|---|---|---|";
        md += &"---|---|---|".repeat(caches.len());
        md += "---|\n";
        for p in (0..np).map(Some).chain([None]) {
            let name = p.map_or("mean", |p| data.programs[p].as_str());
            let ipc = data.measure(p, (lo, hi), "ipc_change_pct");
            let absv = |v: usize, f: &dyn Fn(&Main) -> f64| match p {
                Some(p) => show(data.abs(p, v, f), ""),
                None => "".into(),
            };
            let _ = write!(
                md,
                "| {name} | {} | {} | {}{} |",
                absv(hi, &|m| m.ipc),
                absv(lo, &|m| m.ipc),
                show(ipc, "%"),
                clear(ipc, 0.0)
            );
            for (measure, c) in caches {
                let f = |m: &Main| {
                    1000.0
                        * match *c {
                            "L1I" => m.l1i_mpi,
                            "L1D" => m.l1d_mpi,
                            _ => m.l2_mpi,
                        }
                };
                let ch = data.measure(p, (lo, hi), measure);
                let shown = if measure.ends_with("ratio") {
                    format!("×{}{}", show(ch, ""), clear(ch, 1.0))
                } else {
                    format!("{}{}", show(ch, "%"), clear(ch, 0.0))
                };
                let _ = write!(md, " {} | {} | {shown} |", absv(hi, &f), absv(lo, &f));
            }
            let _ = writeln!(md, " {} |", absv(lo, &|m| m.migrations));
        }
        md += "\n";
    }
    md += &policies(sc, &data, &pairs);
    md += &paper_table(sc, &data)?;
    md += &plots(sc, &data, &pairs, out)?;
    Ok(md)
}

/// Where the scenario has `bound` and `oblivious` (§3): every other variant's IPC and
/// work against `bound`, the share of binding's IPC gain it recovers, and the CPU-share
/// spread (fairness) of each variant.
fn policies(sc: &Scenario, data: &Data, pairs: &[(usize, usize)]) -> String {
    let at = |l: &str| sc.variants.iter().position(|v| v.label == l);
    let (Some(b), Some(o)) = (at("bound"), at("oblivious")) else {
        return String::new();
    };
    let loss = data.measure(None, (o, b), "ipc_change_pct").0;
    let mut md = format!(
        "**Policies against binding** (means over the {} programs, per seed; recovered: the \
         share of the IPC that `oblivious` loses against `bound` that the variant wins back, \
         1 − its loss / oblivious's loss; CPU-share CV: the spread of every thread's share \
         of CPU time, mean over programs and seeds)\n\n| variant | IPC against bound | \
         recovered | work against bound | CPU-share CV |\n|---|---|---|---|---|\n",
        data.programs.len()
    );
    let cv = |v: usize| {
        let xs: Vec<f64> = data
            .runs
            .iter()
            .flat_map(|p| p[v].values().map(|m| m.cv))
            .collect();
        over_seeds(&xs)
    };
    let _ = writeln!(md, "| bound | – | – | – | {} |", show(cv(b), ""));
    for &(v, _) in pairs {
        let ipc = data.measure(None, (v, b), "ipc_change_pct");
        let rec = if loss < 0.0 {
            plain(1.0 - ipc.0 / loss)
        } else {
            "n/a".into()
        };
        let work = data.measure(None, (v, b), "work_change_pct");
        let _ = writeln!(
            md,
            "| {} | {}{} | {rec} | {}{} | {} |",
            sc.variants[v].label,
            show(ipc, "%"),
            clear(ipc, 0.0),
            show(work, "%"),
            clear(work, 0.0),
            show(cv(v), "")
        );
    }
    md + "\n"
}

/// The paper's values against the measured.
fn paper_table(sc: &Scenario, data: &Data) -> Result<String> {
    if sc.paper.is_empty() {
        return Ok(String::new());
    }
    let mut md = String::from(
        "| paper | source | low | high | program | paper value | measured (mean ± 95% CI) | \
         measured against the paper |\n|---|---|---|---|---|---|---|---|\n",
    );
    let at = |l: &str| sc.variants.iter().position(|v| v.label == l);
    for pv in &sc.paper {
        let (Some(lo), Some(hi)) = (at(&pv.variant), pv.against.as_deref().and_then(at)) else {
            return Err(invalid!("paper value '{}': unknown variants", pv.what));
        };
        let p = match &pv.program {
            Some(name) => match data.programs.iter().position(|x| x == name) {
                Some(i) => Some(i),
                None => return Err(invalid!("paper value '{}': no mix '{name}'", pv.what)),
            },
            None => None,
        };
        let m = data.measure(p, (lo, hi), &pv.metric);
        let r = pv.range();
        let unit = if pv.metric.ends_with("pct") { "%" } else { "" };
        let range = |x: f64| {
            if x.is_infinite() {
                if x > 0.0 { "∞" } else { "−∞" }.to_string()
            } else {
                format!("{}{unit}", plain(x))
            }
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            pv.what,
            pv.source,
            pv.variant,
            pv.against.as_deref().unwrap_or(""),
            pv.program.as_deref().unwrap_or("mean of all"),
            if r[0] == r[1] {
                range(r[0])
            } else {
                format!("{} to {}", range(r[0]), range(r[1]))
            },
            show(m, unit),
            agreement(r, m)
        );
    }
    Ok(md + "\n")
}

/// Plots: per measured quantity, the main threads' value per program under every
/// variant (`ipc.svg`, `mpki-CACHE.svg`), and the IPC change of each pair per program
/// with the paper's values marked (`ipc-change.svg`).
fn plots(sc: &Scenario, data: &Data, pairs: &[(usize, usize)], out: &Path) -> Result<String> {
    let cats = data.programs.clone();
    let np = cats.len();
    let all = |f: &dyn Fn(&Main) -> f64| -> Vec<Series> {
        (0..sc.variants.len())
            .map(|v| {
                let xs: Vec<(f64, (f64, f64))> =
                    (0..np).map(|p| (p as f64, data.abs(p, v, f))).collect();
                Series::with_intervals(sc.variants[v].label.clone(), &xs)
            })
            .collect()
    };
    let title = |what: &str| format!("{}: {what} of the main program", sc.name);
    let mut files = Vec::new();
    write_file(
        &out.join("ipc.svg"),
        &bar_chart(
            &title("IPC"),
            "program",
            "IPC (instructions per cycle on CPU)",
            &cats,
            &all(&|m| m.ipc),
            None,
        ),
    )?;
    files.push("ipc.svg".to_string());
    let mut caches: Vec<&str> = pairs
        .iter()
        .flat_map(|&(lo, _)| pair_caches(&sc.variants[lo].label).iter().map(|c| c.1))
        .collect();
    caches.sort();
    caches.dedup();
    for c in caches {
        let f = move |m: &Main| {
            1000.0
                * match c {
                    "L1I" => m.l1i_mpi,
                    "L1D" => m.l1d_mpi,
                    _ => m.l2_mpi,
                }
        };
        let name = format!("mpki-{}.svg", c.to_lowercase());
        write_file(
            &out.join(&name),
            &bar_chart(
                &title(&format!("{c} misses")),
                "program",
                &format!("{c} misses per 1,000 instructions"),
                &cats,
                &all(&f),
                None,
            ),
        )?;
        files.push(name);
    }
    let series: Vec<Series> = pairs
        .iter()
        .map(|&(lo, hi)| {
            let xs: Vec<(f64, (f64, f64))> = (0..np)
                .map(|p| (p as f64, data.measure(Some(p), (lo, hi), "ipc_change_pct")))
                .collect();
            Series::with_intervals(
                format!("{} vs {}", sc.variants[lo].label, sc.variants[hi].label),
                &xs,
            )
        })
        .collect();
    let points: Vec<(usize, f64, f64)> = sc
        .paper
        .iter()
        .filter(|pv| pv.metric == "ipc_change_pct")
        .filter_map(|pv| {
            let i = cats.iter().position(|c| Some(c) == pv.program.as_ref())?;
            let r = pv.range();
            Some((i, r[0].max(-100.0), r[1].min(100.0)))
        })
        .collect();
    let marks = Marks {
        label: "paper".into(),
        points,
    };
    write_file(
        &out.join("ipc-change.svg"),
        &bar_chart(
            &title("IPC change, low against high affinity"),
            "program",
            "IPC change (%)",
            &cats,
            &series,
            (!marks.points.is_empty()).then_some(&marks),
        ),
    )?;
    files.push("ipc-change.svg".to_string());
    Ok(crate::svg::plots_line(&files))
}

/// The cache-affinity paper (`docs/affinity.md`).
pub struct Affinity;

impl crate::paper::Paper for Affinity {
    fn name(&self) -> &'static str {
        "affinity"
    }
    fn about(&self) -> &'static str {
        "cache affinity (paper 4): L1 affinity on the T2000 and Clovertown at 2/10/200 ms quanta; L2 affinity on MMP and UMP"
    }
    fn validate_mixes_value(&self, pv: &PaperValue, sc: &Scenario) -> Option<Result<(), String>> {
        Some(validate_paper_value(pv, sc))
    }
    fn mixes_section(&self, sc: &Scenario, done: &[MixRuns], out: &Path) -> Result<String> {
        analysis(sc, done, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Variant;

    fn sc(labels: &[&str]) -> Scenario {
        let mut s: Scenario = toml::from_str(
            r#"
name = "t"
machine = "t2000"
[[mixes]]
label = "art"
threads = [{ profile = "art", label = "main", cpus = [0] }]
"#,
        )
        .unwrap();
        s.variants = labels
            .iter()
            .map(|l| Variant {
                label: l.to_string(),
                ..Default::default()
            })
            .collect();
        s
    }

    #[test]
    fn pairs_follow_the_papers_labels() {
        let s = sc(&[
            "high",
            "low-l1d",
            "low-l1i",
            "high+l2",
            "low-l1d+l2",
            "low-l1i+l2",
        ]);
        assert_eq!(pairs(&s).unwrap(), vec![(1, 0), (2, 0), (4, 3), (5, 3)]);
        let s = sc(&["bound", "oblivious", "default", "affinity-core"]);
        assert_eq!(pairs(&s).unwrap(), vec![(1, 0), (2, 0), (3, 0)]);
        assert!(pairs(&sc(&["a", "b"])).is_err());
        assert!(pairs(&sc(&["high", "low+l2"])).is_err());
    }

    #[test]
    fn paper_values_need_against_and_a_known_program() {
        let mut s = sc(&["bound", "oblivious"]);
        let pv = |program: Option<&str>, against: Option<&str>| PaperValue {
            what: "w".into(),
            source: "s".into(),
            metric: "ipc_change_pct".into(),
            variant: "oblivious".into(),
            against: against.map(String::from),
            change_pct: None,
            value: Some([-45.0, -45.0]),
            llc_kb: None,
            program: program.map(String::from),
        };
        s.paper = vec![pv(Some("art"), Some("bound"))];
        assert!(validate_paper_value(&s.paper[0], &s).is_ok());
        assert!(validate_paper_value(&pv(Some("mcf"), Some("bound")), &s).is_err());
        assert!(validate_paper_value(&pv(None, None), &s).is_err());
        assert!(validate_paper_value(&pv(None, Some("oblivious")), &s).is_err());
    }
}
