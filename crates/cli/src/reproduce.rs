//! `cachesched reproduce`: one command per paper result, run on the simulated machine,
//! written with plots and a paper-against-measured table.
//!
//! `reproduce casc` — Figures 5, 6 and 7 of the CASC paper: niagara-2c with L2 sizes
//! 48–768 KB (and 1.5 MB for the baseline's side of the "cache illusion"); 18 threads,
//! 6 art-like, 6 twolf-like, 6 Berkeley-DB-like, arriving interleaved; the Solaris-TS-like
//! baseline against CASC as published (secondary measurement by Formula 2), CASC with
//! calibrated secondary measurements and CASC with strict bucketization; each measured after a warm-up long enough for
//! every PCMR to be known (checked and reported).

use crate::experiment::{metric, paired_change, run_scenario, Job, Scenario, Sweep, Variant};
use crate::simulate_cmd::write_file;
use crate::svg::{line_chart, Series, XAxis};
use anyhow::{bail, Result};
use cachesched_policies::casc::{CascConfig, Secondary};
use cachesched_policies::PolicySpec;
use cachesched_sim::workload::LocalityModel;
use cachesched_sim::{Baseline, KernelConfig, MachineSpec, RunResult, ThreadGroup};
use clap::{Args, Subcommand};
use std::fmt::Write as _;
use std::path::PathBuf;

/// What to reproduce.
#[derive(Subcommand, Debug)]
pub enum ReproduceCommand {
    /// CASC (paper 1): L2 miss rate, throughput and fairness against the TS baseline
    /// over L2 sizes (Figures 5, 6, 7), the cache illusion, classification accuracy,
    /// time to steady state.
    Casc(CascArgs),
    /// How far CASC's headline (768 KB: L2 miss ratio and throughput against TS) moves
    /// when each parameter of the art, twolf and Berkeley DB profiles moves by ±25%.
    CascSensitivity(crate::sensitivity::SensitivityArgs),
}

/// Arguments of `cachesched reproduce casc`.
#[derive(Args, Debug)]
pub struct CascArgs {
    /// Output directory.
    #[arg(long, value_name = "DIR", default_value = "results/casc")]
    out: PathBuf,
    /// Parallel runs (default: number of CPUs).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Seeds; every configuration runs once per seed.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    seeds: Vec<u64>,
    /// L2 sizes in KiB (the paper's five, plus 1536 for the illusion).
    #[arg(long, value_delimiter = ',', default_value = "48,96,192,384,768,1536")]
    l2_kb: Vec<u64>,
    /// Warm-up before measuring, ms of simulated time: must cover CASC's measurements.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 700.0,
        allow_negative_numbers = true
    )]
    warmup_ms: f64,
    /// Total simulated time per run, ms (the measured window is this minus the warm-up).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 1300.0,
        allow_negative_numbers = true
    )]
    duration_ms: f64,
}

/// The paper's numbers (§5.3): ranges over the five cache sizes.
pub(crate) const PAPER_MISS_CHANGE: (f64, f64) = (-46.0, -15.0);
pub(crate) const PAPER_IPS_CHANGE: (f64, f64) = (28.0, 50.0);
const PAPER_CV: (f64, f64) = (0.43, 0.90);
pub(crate) const PROFILES: [&str; 3] = ["art", "twolf", "bdb"];

/// The paper's 18 threads, 6 of each profile arriving interleaved; with `replace`, the
/// named profile's threads run the given model instead (labelled with the profile's
/// name, so per-thread results keep it).
pub(crate) fn casc_threads(replace: Option<(&str, &LocalityModel)>) -> Vec<ThreadGroup> {
    (0..18)
        .map(|i| {
            let p = PROFILES[i % 3];
            match replace {
                Some((w, m)) if w == p => ThreadGroup {
                    profile: None,
                    model: Some(m.clone()),
                    label: Some(p.to_string()),
                    ..ThreadGroup::of(p, 1)
                },
                _ => ThreadGroup::of(p, 1),
            }
        })
        .collect()
}

/// The paper's experiment on niagara-2c under the Solaris-TS-like baseline, sampled
/// every 10 ms, with these variants and L2 sizes.
pub(crate) fn casc_experiment(
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
        kernel: KernelConfig {
            baseline: Baseline::Ts,
            ..Default::default()
        },
        duration_ms,
        warmup_ms,
        sample_ms: 10.0,
        seeds: seeds.to_vec(),
        variants,
        sweep: Some(Sweep { llc_kb: l2_kb }),
        metrics: metrics.iter().map(|m| m.to_string()).collect(),
    }
}

fn casc_scenario(a: &CascArgs) -> Scenario {
    let calibrated = CascConfig {
        secondary: Secondary::Calibrated,
        ..Default::default()
    };
    casc_experiment(
        "casc",
        "CASC paper, Figures 5-7: niagara-2c, 6 art + 6 twolf + 6 Berkeley DB (interleaved arrival), Solaris-TS-like baseline vs CASC".into(),
        (a.warmup_ms, a.duration_ms, &a.seeds),
        vec![
            Variant {
                label: "ts".into(),
                ..Default::default()
            },
            Variant {
                label: "casc".into(),
                policies: vec![PolicySpec::Casc(CascConfig::default())],
                ..Default::default()
            },
            Variant {
                label: "casc-calibrated".into(),
                policies: vec![PolicySpec::Casc(calibrated)],
                ..Default::default()
            },
            Variant {
                label: "casc-strict".into(),
                policies: vec![PolicySpec::Casc(CascConfig {
                    literal_bucketization: false,
                    ..Default::default()
                })],
                ..Default::default()
            },
        ],
        a.l2_kb.clone(),
        &["l2_miss_ratio", "ips", "cpu_share_cv", "llc_mpki"],
    )
}

/// Mean of metric `m` over the runs of variant `v` at size `kb`.
fn mean_at(jobs: &[Job], runs: &[RunResult], v: usize, kb: u64, m: &str) -> f64 {
    let xs: Vec<f64> = jobs
        .iter()
        .zip(runs)
        .filter(|(j, _)| j.variant == v && j.llc_kb == Some(kb))
        .map(|(_, r)| metric(r, m).expect("known metric"))
        .collect();
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

/// Solo miss rates (LLC misses per 100 data references, fully associative LRU) of the
/// three profiles at `kb` KiB: the ground truth for greedy/frugal.
fn solo_rates(kb: u64) -> Result<Vec<(String, f64)>> {
    PROFILES
        .iter()
        .map(|&p| {
            let m = cachesched_sim::workload::profile(p)?;
            let sd = cachesched_sim::trace::mrc::model_curve(&m, 1, 500_000, 500_000);
            Ok((p.to_string(), 100.0 * sd.miss_ratio(kb * 1024 / 64)))
        })
        .collect()
}

/// Threads whose greedy/frugal class (above or below the mean) by PCMR matches the class
/// by their program's solo miss rate at the per-context share of the cache.
fn classification(r: &RunResult, truth: &[(String, f64)]) -> Option<(usize, usize)> {
    let mut pairs = Vec::new();
    for t in &r.threads {
        let p = *r.policy_stats.get(&format!("pcmr.{}", t.id))?;
        let s = truth.iter().find(|(n, _)| *n == t.name)?.1;
        pairs.push((p, s));
    }
    let mp = pairs.iter().map(|x| x.0).sum::<f64>() / pairs.len() as f64;
    let ms = pairs.iter().map(|x| x.1).sum::<f64>() / pairs.len() as f64;
    let right = pairs.iter().filter(|(p, s)| (p > &mp) == (s > &ms)).count();
    Some((right, pairs.len()))
}

/// Relative change from `old` to `new`, in percent.
pub(crate) fn pct(new: f64, old: f64) -> f64 {
    100.0 * (new - old) / old
}

/// `cachesched reproduce`.
pub fn run(c: ReproduceCommand) -> Result<i32> {
    match c {
        ReproduceCommand::Casc(a) => casc(a),
        ReproduceCommand::CascSensitivity(a) => crate::sensitivity::run(a),
    }
}

fn casc(a: CascArgs) -> Result<i32> {
    if a.l2_kb.len() < 2 || a.seeds.is_empty() {
        bail!("give at least two L2 sizes (--l2-kb) and one seed (--seeds)");
    }
    let sc = casc_scenario(&a);
    sc.validate()?;
    let Some((jobs, runs)) = run_scenario(&sc, &a.out, a.jobs)? else {
        return Ok(130);
    };
    let mut sizes = a.l2_kb.clone();
    sizes.sort_unstable();
    let ts_curve: Vec<(u64, f64)> = sizes
        .iter()
        .map(|&kb| (kb, mean_at(&jobs, &runs, 0, kb, "l2_miss_ratio")))
        .collect();
    let n_ctx = 8;
    let mut md = String::new();
    writeln!(md, "# CASC reproduction: paper against measured\n")?;
    writeln!(
        md,
        "niagara-2c (2 cores × 4 contexts, 992 MHz, shared 12-way L2), 18 threads: 6 art, 6 twolf, \
         6 bdb (interleaved arrival), Solaris-TS-like baseline. {} ms per run, the first {} ms \
         not measured (CASC's measurements must finish within them: see \"steady\"). Seeds {:?}; \
         means over seeds. `casc` is the paper's algorithm (Formula 2 secondary measurements); \
         `casc-calibrated` estimates secondary PCMRs from the thread's own rate calibrated by its \
         co-runners, `casc-strict` refuses bucket decrements that would leave a CPU unable to run \
         m threads (both beyond the paper).\n",
        a.duration_ms, a.warmup_ms, a.seeds
    )?;
    writeln!(
        md,
        "Paper (§5.3): L2 miss rate {:+.0}% to {:+.0}%, throughput {:+.0}% to {:+.0}%, CPU-share \
         standard deviation / mean {:.0}% (default) → up to {:.0}% (CASC, worst case), 12–16 of 18 \
         threads classed correctly, CASC at size S matching the default scheduler at ≥ 2S.\n",
        PAPER_MISS_CHANGE.0,
        PAPER_MISS_CHANGE.1,
        PAPER_IPS_CHANGE.0,
        PAPER_IPS_CHANGE.1,
        PAPER_CV.0 * 100.0,
        PAPER_CV.1 * 100.0
    )?;
    writeln!(
        md,
        "| L2 | variant | L2 miss ratio | Δ miss | instr/s | Δ throughput | CPU-share CV (ts → variant) | illusion (ts size with this miss ratio) | classed right | steady at ms |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|")?;
    let mut summary: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    // each variant's changes against TS at every size, for the plots against the paper
    let mut change_miss: Vec<Series> = Vec::new();
    let mut change_ips: Vec<Series> = Vec::new();
    let mut unsteady = 0;
    for (vi, v) in sc.variants.iter().enumerate().skip(1) {
        let mut dm = Vec::new();
        let mut di = Vec::new();
        let (mut pm, mut pi) = (Vec::new(), Vec::new());
        for &kb in &sizes {
            let mr = mean_at(&jobs, &runs, vi, kb, "l2_miss_ratio");
            let ips = mean_at(&jobs, &runs, vi, kb, "ips");
            let cv = mean_at(&jobs, &runs, vi, kb, "cpu_share_cv");
            let (bmr, bips, bcv) = (
                mean_at(&jobs, &runs, 0, kb, "l2_miss_ratio"),
                mean_at(&jobs, &runs, 0, kb, "ips"),
                mean_at(&jobs, &runs, 0, kb, "cpu_share_cv"),
            );
            let truth = solo_rates((kb / n_ctx).max(1))?;
            let mut right = 0;
            let mut total = 0;
            let mut steady = Vec::new();
            for (j, r) in jobs.iter().zip(&runs) {
                if j.variant == vi && j.llc_kb == Some(kb) {
                    if let Some((k, n)) = classification(r, &truth) {
                        right += k;
                        total += n;
                    }
                    let st = r.policy_stats.get("steady_ms").copied().unwrap_or(-1.0);
                    if st < 0.0 || st > a.warmup_ms {
                        unsteady += 1;
                    }
                    steady.push(st);
                }
            }
            let illusion = match illusion_size(&ts_curve, mr) {
                Some(s) => format!("{s:.0} KB ({:.1}×)", s / kb as f64),
                None if mr < ts_curve.last().expect("sizes").1 => {
                    format!("> {} KB", ts_curve.last().expect("sizes").0)
                }
                None => "none (no lower)".into(),
            };
            let steady_s: Vec<String> = steady
                .iter()
                .map(|s| {
                    if *s < 0.0 {
                        "never".into()
                    } else {
                        format!("{s:.0}")
                    }
                })
                .collect();
            if kb <= 768 {
                dm.push(pct(mr, bmr));
                di.push(pct(ips, bips));
            }
            pm.push((
                kb as f64,
                paired_change(&jobs, &runs, (0, vi), Some(kb), "l2_miss_ratio"),
            ));
            pi.push((
                kb as f64,
                paired_change(&jobs, &runs, (0, vi), Some(kb), "ips"),
            ));
            writeln!(
                md,
                "| {kb} KB | {} | {mr:.4} (ts {bmr:.4}) | {:+.1}% | {ips:.3e} | {:+.1}% | {:.0}% → {:.0}% | {illusion} | {right}/{total} | {} |",
                v.label,
                pct(mr, bmr),
                pct(ips, bips),
                bcv * 100.0,
                cv * 100.0,
                steady_s.join(", ")
            )?;
        }
        summary.push((v.label.clone(), dm, di));
        change_miss.push(Series::with_intervals(v.label.clone(), &pm));
        change_ips.push(Series::with_intervals(v.label.clone(), &pi));
    }
    for (file, what, ser, paper) in [
        (
            "miss_change.svg",
            "L2 miss ratio",
            &change_miss,
            PAPER_MISS_CHANGE,
        ),
        (
            "ips_change.svg",
            "throughput (instr/s)",
            &change_ips,
            PAPER_IPS_CHANGE,
        ),
    ] {
        write_file(
            &a.out.join(file),
            &line_chart(
                &format!("CASC against TS: change in {what} (mean over seeds, 95% CI, paired)"),
                "L2 size (log scale)",
                &format!("change in {what} against TS (%)"),
                ser,
                XAxis::Kib,
                Some((paper.0, paper.1, "paper, 48-768 KB")),
            ),
        )?;
    }
    writeln!(md)?;
    if unsteady > 0 {
        writeln!(
            md,
            "**Warning:** in {unsteady} CASC run(s) not every PCMR was known by the end of the \
             warm-up; their measured window includes measurement time (raise --warmup-ms).\n"
        )?;
    }
    writeln!(md, "## Summary over the paper's sizes (48–768 KB)\n")?;
    writeln!(
        md,
        "| | paper | {} |",
        summary
            .iter()
            .map(|s| s.0.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    writeln!(md, "|---|---|{}", "---|".repeat(summary.len()))?;
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:+.1}% to {hi:+.1}%")
    };
    writeln!(
        md,
        "| L2 miss ratio change | {:+.0}% to {:+.0}% | {} |",
        PAPER_MISS_CHANGE.0,
        PAPER_MISS_CHANGE.1,
        summary
            .iter()
            .map(|s| range(&s.1))
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    writeln!(
        md,
        "| throughput change | {:+.0}% to {:+.0}% | {} |",
        PAPER_IPS_CHANGE.0,
        PAPER_IPS_CHANGE.1,
        summary
            .iter()
            .map(|s| range(&s.2))
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    writeln!(
        md,
        "\nGround truth for \"classed right\": a thread is greedy when its program's solo miss rate \
         (LLC misses per 100 data references, fully associative LRU) at the per-context share of the \
         L2 (size / 8) is above the mean over the 18 threads; CASC classes it greedy when its PCMR is \
         above the mean PCMR. Plots: `miss_change.svg` and `ips_change.svg` (each variant's change \
         against TS by size, paired by seed, with 95% intervals where there are seeds, the paper's \
         range shaded), `l2_miss_ratio.svg` (Fig. 5), `ips.svg` (Fig. 6), \
         `cpu_share_cv.svg` (Fig. 7, as one number per run), `llc_mpki.svg`; per-thread CPU shares \
         and PCMRs are in `results.json`. Decision cost: `cachesched bench casc`."
    )?;
    write_report(&a.out.join("paper-vs-measured.md"), &md)?;
    Ok(0)
}

/// Writes a reproduction's report to `path` and prints it.
pub(crate) fn write_report(path: &std::path::Path, md: &str) -> Result<()> {
    write_file(path, md)?;
    println!("\n{md}");
    println!("wrote {}", path.display());
    Ok(())
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
