//! `cachesched mrc`: miss-ratio curves of a workload profile or a trace, exact and
//! SHARDS-sampled, with the sampling error, as a table, CSV, JSON and an SVG plot.

use anyhow::{bail, Context, Result};
use cachesched_core::SimRng;
use cachesched_lab::files::write_file;
use cachesched_lab::svg::{line_chart, Series, XAxis};
use cachesched_sim::trace::mrc::{curve_sizes, Shards, StackDistances};
use cachesched_sim::trace::replay::{LackeyReader, TraceEvent};
use cachesched_sim::trace::{is_binary_trace, TraceReader};
use cachesched_sim::workload::{profile, LocalityThread};
use clap::Args;
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

/// Arguments of `cachesched mrc`.
#[derive(Args, Debug)]
pub struct MrcArgs {
    /// A workload profile (see `cachesched workloads`).
    #[arg(long, value_name = "NAME", conflicts_with = "trace")]
    profile: Option<String>,
    /// A trace file (binary from `cachesched trace record`, or lackey text).
    #[arg(long, value_name = "FILE")]
    trace: Option<String>,
    /// Data accesses to draw from a profile and measure.
    #[arg(long, default_value_t = 2_000_000)]
    accesses: u64,
    /// Data accesses drawn from a profile before measuring, so that its curve is warm
    /// as `cachesched workloads` reports it (0: first touches count as misses, as
    /// they do for a trace, which is measured from its start).
    #[arg(long, default_value_t = 2_000_000)]
    warmup: u64,
    /// Cache line size in bytes.
    #[arg(long, default_value_t = 64)]
    line_bytes: u64,
    /// SHARDS sampling rate.
    #[arg(long, default_value_t = 0.01)]
    sample_rate: f64,
    /// Include instruction fetches (traces only).
    #[arg(long)]
    instructions: bool,
    /// Seed for profile generation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory for mrc.csv, mrc.json and mrc.svg (default: none, the table on
    /// standard output only).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Serialize)]
struct Point {
    size_bytes: u64,
    exact_miss_ratio: f64,
    /// `None` below the smallest size the sample can estimate.
    sampled_miss_ratio: Option<f64>,
}

#[derive(Serialize)]
struct Curve {
    source: String,
    seed: u64,
    line_bytes: u64,
    accesses: u64,
    distinct_lines: u64,
    sample_rate: f64,
    sampled_accesses: u64,
    mean_abs_error: f64,
    max_abs_error: f64,
    points: Vec<Point>,
}

/// Offers line `block` to both curves.
fn offer(curves: &mut (StackDistances, Shards), block: u64) {
    curves.0.access(block);
    curves.1.access(block);
}

/// `cachesched mrc`.
pub fn run(a: MrcArgs) -> Result<()> {
    if !a.line_bytes.is_power_of_two() {
        bail!("--line-bytes must be a power of two");
    }
    if !(a.sample_rate > 0.0 && a.sample_rate <= 1.0) {
        bail!("--sample-rate must be within (0, 1]");
    }
    let shift = a.line_bytes.trailing_zeros();
    let mut curves = (StackDistances::new(), Shards::new(a.sample_rate));
    let source = match (&a.profile, &a.trace) {
        (Some(p), None) => {
            let mut t = LocalityThread::new(profile(p)?, 0, 0, SimRng::new(a.seed).fork(1000));
            t.feed_accesses(a.warmup, |addr, _| offer(&mut curves, addr >> shift));
            curves.0.reset_counts();
            curves.1.reset_counts();
            t.feed_accesses(a.accesses, |addr, _| offer(&mut curves, addr >> shift));
            if a.warmup > 0 {
                format!("profile {p} (warm: measured after {} accesses)", a.warmup)
            } else {
                format!("profile {p} (cold: first touches count as misses)")
            }
        }
        (None, Some(path)) => {
            let mut feed = |addr: u64| offer(&mut curves, addr >> shift);
            let f = std::fs::File::open(path)
                .with_context(|| format!("cannot open trace file '{path}'"))?;
            let mut input = BufReader::with_capacity(1 << 20, f);
            let mut last_i = 0u64;
            let mut on = |e: TraceEvent| match e {
                TraceEvent::Instr { addr, .. } if a.instructions => {
                    last_i = addr;
                    feed(addr);
                }
                TraceEvent::HitRun { count, .. } if a.instructions => {
                    for _ in 0..count {
                        feed(last_i);
                    }
                }
                TraceEvent::Load { addr, .. }
                | TraceEvent::Store { addr, .. }
                | TraceEvent::Modify { addr, .. } => feed(addr),
                _ => {}
            };
            if is_binary_trace(input.fill_buf()?) {
                let mut r = TraceReader::new(input)?;
                while let Some(e) = r
                    .next_event()
                    .with_context(|| format!("in trace '{path}'"))?
                {
                    on(e);
                }
            } else {
                let mut r = LackeyReader::new(input);
                while let Some(e) = r
                    .next_event()
                    .with_context(|| format!("in trace '{path}'"))?
                {
                    on(e);
                }
            }
            format!("trace {path} (from its start: first touches count as misses)")
        }
        _ => bail!("give exactly one of --profile NAME or --trace FILE"),
    };
    let (exact, shards) = curves;
    let distinct = exact.distinct();
    let points: Vec<Point> = curve_sizes(distinct)
        .into_iter()
        .map(|lines| Point {
            size_bytes: lines << shift,
            exact_miss_ratio: exact.miss_ratio(lines),
            sampled_miss_ratio: (lines >= shards.min_lines()).then(|| shards.miss_ratio(lines)),
        })
        .collect();
    let errs: Vec<f64> = points
        .iter()
        .filter_map(|p| p.sampled_miss_ratio.map(|s| (p.exact_miss_ratio - s).abs()))
        .collect();
    let curve = Curve {
        source,
        seed: a.seed,
        line_bytes: a.line_bytes,
        accesses: exact.accesses,
        distinct_lines: distinct,
        sample_rate: a.sample_rate,
        sampled_accesses: shards.sampled(),
        mean_abs_error: errs.iter().sum::<f64>() / errs.len().max(1) as f64,
        max_abs_error: errs.iter().copied().fold(0.0, f64::max),
        points,
    };
    println!("seed {}", curve.seed);
    println!(
        "{}: {} accesses, {} distinct {}-byte lines; SHARDS at rate {} tracked {} accesses, mean |error| {:.4}, max {:.4}",
        curve.source,
        curve.accesses,
        curve.distinct_lines,
        curve.line_bytes,
        curve.sample_rate,
        curve.sampled_accesses,
        curve.mean_abs_error,
        curve.max_abs_error
    );
    println!("{:>12} {:>10} {:>10}", "size", "exact", "sampled");
    for p in &curve.points {
        let sampled = p
            .sampled_miss_ratio
            .map(|s| format!("{s:.4}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:>12} {:>10.4} {:>10}",
            cachesched_core::topology::human_bytes(p.size_bytes),
            p.exact_miss_ratio,
            sampled
        );
    }
    if let Some(out) = &a.out {
        let mut csv = String::from("size_bytes,exact_miss_ratio,sampled_miss_ratio\n");
        for p in &curve.points {
            let sampled = p
                .sampled_miss_ratio
                .map(|s| s.to_string())
                .unwrap_or_default();
            csv += &format!("{},{},{}\n", p.size_bytes, p.exact_miss_ratio, sampled);
        }
        write_file(&out.join("mrc.csv"), &csv)?;
        write_file(
            &out.join("mrc.json"),
            &(serde_json::to_string_pretty(&curve)? + "\n"),
        )?;
        let kb = |p: &Point| p.size_bytes as f64 / 1024.0;
        let series = vec![
            Series {
                label: "exact".into(),
                points: curve
                    .points
                    .iter()
                    .map(|p| (kb(p), p.exact_miss_ratio))
                    .collect(),
                errors: Vec::new(),
            },
            Series {
                label: format!("SHARDS {}", curve.sample_rate),
                points: curve
                    .points
                    .iter()
                    .filter_map(|p| p.sampled_miss_ratio.map(|s| (kb(p), s)))
                    .collect(),
                errors: Vec::new(),
            },
        ];
        let svg = line_chart(
            &format!("miss-ratio curve: {}", curve.source),
            "cache size (log scale), fully associative LRU",
            "miss ratio",
            &series,
            XAxis::Kib,
            None,
        );
        write_file(&out.join("mrc.svg"), &svg)?;
        println!("wrote mrc.csv, mrc.json and mrc.svg to {}", out.display());
    }
    Ok(())
}
