//! `cachesched reproduce casc-sensitivity`: how far CASC's headline moves when one
//! parameter of the art, twolf or Berkeley DB profile moves by ±25%.
//!
//! The headline is the paper's base configuration (§5.3): niagara-2c with a 768 KB L2
//! (`--l2-kb`), 6 + 6 + 6 threads of the three profiles arriving interleaved, CASC as
//! published against the Solaris-TS-like baseline; its two numbers are the change of the
//! L2 miss ratio and of aggregate instructions per second, CASC against the baseline,
//! paired by seed. Every parameter a profile sets for itself is moved, one at a time,
//! to (1 − s) and (1 + s) times its value (s = `--scale`, 0.25): each region's size,
//! its access weight (relative to the other regions; the model normalises the weights)
//! and a scan's stride; the mean gap between memory accesses, the store fraction, the
//! executed code size and the short-reuse probability. Integer parameters are rounded.
//! The model's shared defaults (stack and next-word accesses, base CPI, ILP) are not
//! profile parameters and stay put. Every perturbed workload runs under both the
//! baseline and CASC, so each row is a paired comparison of its own.

use super::{casc_experiment, casc_threads, pct, PAPER_IPS_CHANGE, PAPER_MISS_CHANGE, PROFILES};
use crate::error::{invalid, Error, Result};
use crate::experiment::run_scenario;
use crate::files::write_file;
use crate::metrics::metric;
use crate::reproduce::write_report;
use crate::scenario::Variant;
use crate::stats::mean_ci95;
use crate::svg::{range_chart, RangeRow};
use cachesched_policies::casc::CascConfig;
use cachesched_policies::PolicySpec;
use cachesched_sim::workload::{profile, LocalityModel, Pattern};
use cachesched_sim::ThreadGroup;
use std::fmt::Write as _;
use std::path::PathBuf;

/// What `cachesched reproduce casc-sensitivity` runs (its command-line arguments).
#[derive(Debug, Clone)]
pub struct Options {
    /// Output directory.
    pub out: PathBuf,
    /// Parallel runs, 1 to 1,024 (default: number of CPUs; never more than the runs).
    pub jobs: Option<usize>,
    /// Seeds; every workload runs under the baseline and CASC once per seed.
    pub seeds: Vec<u64>,
    /// L2 size in KiB (the paper's base configuration: 768).
    pub l2_kb: u64,
    /// Relative move of each parameter, both ways (0 < s < 1).
    pub scale: f64,
    /// Move only the parameters whose name contains one of these (comma-separated, e.g.
    /// `art,twolf.code`); `none` runs only the unperturbed workload (default: all).
    pub only: Vec<String>,
    /// Warm-up before measuring, ms of simulated time (as `reproduce casc`).
    pub warmup_ms: f64,
    /// Total simulated time per run, ms (as `reproduce casc`).
    pub duration_ms: f64,
}

/// A parameter of a locality model that a profile sets for itself.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Knob {
    /// Region i's size in KiB.
    Kb(usize),
    /// Region i's access weight.
    Weight(usize),
    /// Region i's scan stride in bytes.
    Stride(usize),
    /// Mean instructions between memory accesses.
    Gap,
    /// Store fraction.
    Writes,
    /// Executed code, KiB.
    Code,
    /// Short-reuse probability.
    Recent,
}

impl Knob {
    /// Every knob of `m`.
    fn all(m: &LocalityModel) -> Vec<Knob> {
        let mut v = Vec::new();
        for (i, r) in m.regions.iter().enumerate() {
            v.push(Knob::Kb(i));
            if m.regions.len() > 1 {
                v.push(Knob::Weight(i));
            }
            if matches!(r.pattern, Pattern::Stream { .. }) {
                v.push(Knob::Stride(i));
            }
        }
        v.extend([Knob::Gap, Knob::Writes, Knob::Code, Knob::Recent]);
        v
    }

    /// A readable name: the region by its pattern and unperturbed size.
    fn name(self, m: &LocalityModel) -> String {
        let region = |i: usize| {
            let r = &m.regions[i];
            let kind = match r.pattern {
                Pattern::Random => "random",
                Pattern::Stream { .. } => "scan",
                Pattern::Chase => "chase",
                Pattern::Reuse { .. } => "reuse",
            };
            format!("{kind} {} KB", r.kb)
        };
        match self {
            Knob::Kb(i) => format!("{} size", region(i)),
            Knob::Weight(i) => format!("{} weight", region(i)),
            Knob::Stride(i) => format!("{} stride", region(i)),
            Knob::Gap => "gap_mean".into(),
            Knob::Writes => "write_fraction".into(),
            Knob::Code => "code_kb".into(),
            Knob::Recent => "recent".into(),
        }
    }

    fn get(self, m: &LocalityModel) -> f64 {
        match self {
            Knob::Kb(i) => m.regions[i].kb as f64,
            Knob::Weight(i) => m.regions[i].weight,
            Knob::Stride(i) => match m.regions[i].pattern {
                Pattern::Stream { stride } => stride as f64,
                _ => f64::NAN,
            },
            Knob::Gap => m.gap_mean,
            Knob::Writes => m.write_fraction,
            Knob::Code => m.code_kb as f64,
            Knob::Recent => m.recent,
        }
    }

    /// `m` with this knob at `v` (integers rounded, at least 1); the value set.
    fn set(self, m: &LocalityModel, v: f64) -> (LocalityModel, f64) {
        let int = |v: f64| (v.round() as u64).max(1);
        let mut m = m.clone();
        let set = match self {
            Knob::Kb(i) => {
                m.regions[i].kb = int(v);
                m.regions[i].kb as f64
            }
            Knob::Weight(i) => {
                m.regions[i].weight = v;
                v
            }
            Knob::Stride(i) => {
                m.regions[i].pattern = Pattern::Stream { stride: int(v) };
                int(v) as f64
            }
            Knob::Gap => {
                m.gap_mean = v;
                v
            }
            Knob::Writes => {
                m.write_fraction = v.min(1.0);
                m.write_fraction
            }
            Knob::Code => {
                m.code_kb = int(v);
                m.code_kb as f64
            }
            Knob::Recent => {
                m.recent = v.min(1.0);
                m.recent
            }
        };
        (m, set)
    }
}

/// One workload of the study: the unperturbed mix, or one parameter of one profile moved.
struct Case {
    /// Row label, unique.
    label: String,
    /// Profile and parameter moved, and the values before and after (none for the base).
    moved: Option<(&'static str, String, f64, f64)>,
    /// The 18 threads.
    threads: Vec<ThreadGroup>,
}

fn cases(a: &Options) -> Result<Vec<Case>> {
    let mut v = vec![Case {
        label: "unperturbed".into(),
        moved: None,
        threads: casc_threads(None),
    }];
    let wanted = |name: &str| {
        a.only.is_empty()
            || a.only
                .iter()
                .any(|p| p != "none" && name.contains(p.as_str()))
    };
    for p in PROFILES {
        let base = profile(p)?;
        for k in Knob::all(&base) {
            let name = format!("{p}.{}", k.name(&base));
            if !wanted(&name) {
                continue;
            }
            let x = k.get(&base);
            for (sign, f) in [("-", 1.0 - a.scale), ("+", 1.0 + a.scale)] {
                let (m, set) = k.set(&base, x * f);
                m.validate()?;
                v.push(Case {
                    label: format!("{name} {sign}{:.0}%", a.scale * 100.0),
                    moved: Some((p, k.name(&base), x, set)),
                    threads: casc_threads(Some((p, &m))),
                });
            }
        }
    }
    Ok(v)
}

/// `cachesched reproduce casc-sensitivity`.
pub fn run(a: Options) -> Result<i32> {
    if !(a.scale > 0.0 && a.scale < 1.0) {
        return Err(invalid!(
            "--scale must be between 0 and 1 (exclusive), got {}",
            a.scale
        ));
    }
    if a.seeds.is_empty() {
        return Err(invalid!("give at least one seed (--seeds)"));
    }
    let cases = cases(&a)?;
    let mut variants = Vec::new();
    for c in &cases {
        variants.push(Variant {
            label: format!("{} / ts", c.label),
            threads: Some(c.threads.clone()),
            ..Default::default()
        });
        variants.push(Variant {
            label: format!("{} / casc", c.label),
            policies: vec![PolicySpec::Casc(CascConfig::default())],
            threads: Some(c.threads.clone()),
            ..Default::default()
        });
    }
    let sc = casc_experiment(
        "casc-sensitivity",
        format!(
            "CASC's headline at {} KB (niagara-2c, 6 art + 6 twolf + 6 bdb, TS baseline vs CASC) \
             with one profile parameter moved by ±{:.0}% at a time",
            a.l2_kb,
            a.scale * 100.0
        ),
        (a.warmup_ms, a.duration_ms, &a.seeds),
        variants,
        vec![a.l2_kb],
        &["l2_miss_ratio", "ips"],
    );
    crate::papers::validate(&sc)?;
    let Some((jobs, runs)) = run_scenario(&sc, sc.jobs()?, &a.out, a.jobs)? else {
        return Ok(crate::runner::halt_code());
    };
    // per case and seed: the change, CASC against TS on the same workload and seed
    let per_seed = |ci: usize, m: &str| -> Vec<f64> {
        a.seeds
            .iter()
            .map(|&s| {
                let get = |v: usize| {
                    jobs.iter()
                        .zip(&runs)
                        .find(|(j, _)| j.variant == v && j.seed == s)
                        .and_then(|(_, r)| metric(r, m))
                        .expect("every run present")
                };
                pct(get(2 * ci + 1), get(2 * ci))
            })
            .collect()
    };
    let change = |ci: usize, m: &str| mean_ci95(&per_seed(ci, m));
    // how far a case's miss-ratio change lies from the unperturbed one, paired by seed
    // (points)
    let base_seeds = per_seed(0, "l2_miss_ratio");
    let against_base = |ci: usize| {
        let d: Vec<f64> = per_seed(ci, "l2_miss_ratio")
            .iter()
            .zip(&base_seeds)
            .map(|(x, b)| x - b)
            .collect();
        mean_ci95(&d)
    };
    let fmt = |v| with_interval(v, "%");
    let (base_miss, base_ips) = (change(0, "l2_miss_ratio"), change(0, "ips"));
    let mut md = String::new();
    let _ = writeln!(md, "# CASC's headline against the profiles' parameters\n");
    let _ = writeln!(
        md,
        "niagara-2c, {} KB L2, 18 threads (6 art, 6 twolf, 6 bdb, interleaved), {} ms per run, \
         the first {} ms not measured; seeds {:?}. Each row moves one parameter of one profile \
         to (1 ∓ {}) × its value and runs the whole mix under the TS-like baseline and under \
         CASC; Δ = CASC against TS on the same workload and seed{}. Paper (§5.3, 48–768 KB): \
         L2 miss ratio {:+.0}% to {:+.0}%, throughput {:+.0}% to {:+.0}%.\n",
        a.l2_kb,
        a.duration_ms,
        a.warmup_ms,
        a.seeds,
        a.scale,
        if a.seeds.len() > 1 {
            ", mean ± 95% confidence half-width over seeds"
        } else {
            " (one seed: no interval)"
        },
        PAPER_MISS_CHANGE.0,
        PAPER_MISS_CHANGE.1,
        PAPER_IPS_CHANGE.0,
        PAPER_IPS_CHANGE.1
    );
    let _ = writeln!(
        md,
        "Unperturbed: Δ L2 miss ratio {}, Δ throughput {}.\n",
        fmt(base_miss),
        fmt(base_ips)
    );
    let _ = writeln!(
        md,
        "| profile | parameter | value | low | Δ miss | Δ throughput | high | Δ miss | Δ throughput | Δ miss against unperturbed, low / high (points, paired by seed) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
    let mut miss_rows = Vec::new();
    let mut ips_rows = Vec::new();
    // the perturbed cases come in pairs, low then high, after the unperturbed one
    for (k, pair) in cases[1..].chunks(2).enumerate() {
        let ci = 1 + 2 * k;
        let [lo, hi] = pair else {
            return Err(Error::Internal("perturbations come in pairs"));
        };
        let (Some((p, name, x, xl)), Some((_, _, _, xh))) = (&lo.moved, &hi.moved) else {
            return Err(Error::Internal("perturbations come in pairs"));
        };
        let (ml, mh) = (change(ci, "l2_miss_ratio"), change(ci + 1, "l2_miss_ratio"));
        let (il, ih) = (change(ci, "ips"), change(ci + 1, "ips"));
        let moved = format!(
            "{} / {}",
            with_interval(against_base(ci), ""),
            with_interval(against_base(ci + 1), "")
        );
        let num = |v: f64| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        };
        let _ = writeln!(
            md,
            "| {p} | {name} | {} | {} | {} | {} | {} | {} | {} | {moved} |",
            num(*x),
            num(*xl),
            fmt(ml),
            fmt(il),
            num(*xh),
            fmt(mh),
            fmt(ih)
        );
        let label = format!("{p}: {name}");
        miss_rows.push(RangeRow {
            label: label.clone(),
            low: ml.0,
            high: mh.0,
        });
        ips_rows.push(RangeRow {
            label,
            low: il.0,
            high: ih.0,
        });
    }
    let _ = writeln!(md);
    for (file, title, rows, base, band) in [
        (
            "sensitivity-miss.svg",
            "Δ L2 miss ratio, CASC vs TS (%)",
            &miss_rows,
            base_miss.0,
            PAPER_MISS_CHANGE,
        ),
        (
            "sensitivity-throughput.svg",
            "Δ throughput, CASC vs TS (%)",
            &ips_rows,
            base_ips.0,
            PAPER_IPS_CHANGE,
        ),
    ] {
        write_file(
            &a.out.join(file),
            &range_chart(
                &format!(
                    "CASC at {} KB: each parameter ±{:.0}%",
                    a.l2_kb,
                    a.scale * 100.0
                ),
                title,
                rows,
                base,
                Some((band.0, band.1, "paper, 48–768 KB")),
            ),
        )?;
        let _ = writeln!(md, "![{title}]({file})\n");
    }
    write_report(&a.out.join("sensitivity.md"), &md)?;
    Ok(0)
}

/// A mean with `unit` and, when there is one, its 95% half-width: `-35.8% ± 6.8`.
fn with_interval((m, h): (f64, f64), unit: &str) -> String {
    if h.is_finite() {
        format!("{m:+.1}{unit} ± {h:.1}")
    } else {
        format!("{m:+.1}{unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_parameter_is_moved_both_ways() {
        let art = profile("art").unwrap();
        let knobs = Knob::all(&art);
        // 5 regions: size and weight each, two sweep strides; gap, writes, code, recent
        assert_eq!(knobs.len(), 5 * 2 + 2 + 4, "{knobs:?}");
        let (m, set) = Knob::Stride(0).set(&art, 16.0 * 0.75);
        assert_eq!(set, 12.0);
        assert_eq!(m.regions[0].pattern, Pattern::Stream { stride: 12 });
        assert_eq!(m.regions[1], art.regions[1], "only the knob moves");
        let (m, set) = Knob::Kb(2).set(&art, 16.0 * 1.25);
        assert_eq!((m.regions[2].kb, set), (20, 20.0));
        let a = Options {
            out: PathBuf::new(),
            jobs: None,
            seeds: vec![1],
            l2_kb: 768,
            scale: 0.25,
            only: vec!["twolf.code".into()],
            warmup_ms: 700.0,
            duration_ms: 1300.0,
        };
        let c = cases(&a).unwrap();
        assert_eq!(c.len(), 3, "the base and code_kb of twolf, both ways");
        let twolf = |c: &Case| {
            c.threads
                .iter()
                .find(|t| t.name() == "twolf")
                .and_then(|t| t.model.clone())
                .unwrap()
        };
        assert_eq!((twolf(&c[1]).code_kb, twolf(&c[2]).code_kb), (12, 20));
        assert!(c[1].threads.iter().filter(|t| t.model.is_some()).count() == 6);
        let none = Options {
            only: vec!["none".into()],
            ..a
        };
        assert_eq!(cases(&none).unwrap().len(), 1);
    }
}
