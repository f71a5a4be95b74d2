//! Miss-ratio curves (`cachesched mrc`) of a workload profile or a trace: exact (stack
//! distances) and SHARDS-sampled, with the sampling error, as a table, CSV, JSON and an
//! SVG plot.

use crate::error::{invalid, Error, Result, ResultExt};
use crate::files::write_file;
use crate::svg::{line_chart, Series, XAxis};
use cachesched_core::SimRng;
use cachesched_sim::trace::mrc::{curve_sizes, Shards, StackDistances};
use cachesched_sim::trace::replay::{LackeyReader, TraceEvent};
use cachesched_sim::trace::{is_binary_trace, TraceReader};
use cachesched_sim::workload::{profile, LocalityThread};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::Path;

/// Where the accesses come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A workload profile's generator.
    Profile {
        /// The profile (see `cachesched workloads`).
        name: String,
        /// Data accesses drawn and measured.
        accesses: u64,
        /// Data accesses drawn before measuring (0: first touches count as misses).
        warmup: u64,
    },
    /// A trace file (binary from `cachesched trace record`, or lackey text), from its
    /// start.
    Trace {
        /// The file.
        path: String,
        /// Whether instruction fetches count.
        instructions: bool,
        /// Whether data accesses count (off with `instructions` on: the instruction
        /// side's curve alone, an L1I's).
        data: bool,
    },
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct MrcSpec {
    /// The accesses.
    pub source: Source,
    /// Cache line size, bytes (a power of two).
    pub line_bytes: u64,
    /// SHARDS sampling rate, within (0, 1].
    pub sample_rate: f64,
    /// Seed of a profile's generator (kept in the curve whatever the source).
    pub seed: u64,
}

/// One size of the curve.
#[derive(Debug, Serialize)]
pub struct Point {
    /// Cache size, bytes.
    pub size_bytes: u64,
    /// The miss ratio of a fully associative LRU cache of that size.
    pub exact_miss_ratio: f64,
    /// SHARDS' estimate of it; `None` below the smallest size the sample can estimate.
    pub sampled_miss_ratio: Option<f64>,
}

/// A measured curve, as `mrc.json` has it.
#[derive(Debug, Serialize)]
pub struct Curve {
    /// Where the accesses came from, in words.
    pub source: String,
    /// The generator's seed (a profile's).
    pub seed: u64,
    /// Cache line size, bytes.
    pub line_bytes: u64,
    /// Accesses measured.
    pub accesses: u64,
    /// Distinct lines among them.
    pub distinct_lines: u64,
    /// SHARDS sampling rate.
    pub sample_rate: f64,
    /// Accesses SHARDS tracked.
    pub sampled_accesses: u64,
    /// Mean absolute error of the sampled curve against the exact one.
    pub mean_abs_error: f64,
    /// Largest absolute error of the sampled curve.
    pub max_abs_error: f64,
    /// The curve, by size.
    pub points: Vec<Point>,
}

/// Offers line `block` to both curves.
fn offer(curves: &mut (StackDistances, Shards), block: u64) {
    curves.0.access(block);
    curves.1.access(block);
}

/// Measures the curve `spec` asks for.
pub fn measure(spec: &MrcSpec) -> Result<Curve> {
    if !spec.line_bytes.is_power_of_two() {
        return Err(invalid!("--line-bytes must be a power of two"));
    }
    if !(spec.sample_rate > 0.0 && spec.sample_rate <= 1.0) {
        return Err(invalid!("--sample-rate must be within (0, 1]"));
    }
    let shift = spec.line_bytes.trailing_zeros();
    let mut curves = (StackDistances::new(), Shards::new(spec.sample_rate));
    let source = match &spec.source {
        Source::Profile {
            name,
            accesses,
            warmup,
        } => {
            let rng = SimRng::new(spec.seed).fork(1000);
            let mut t = LocalityThread::new(profile(name)?, 0, 0, rng);
            t.feed_accesses(*warmup, |addr, _| offer(&mut curves, addr >> shift));
            curves.0.reset_counts();
            curves.1.reset_counts();
            t.feed_accesses(*accesses, |addr, _| offer(&mut curves, addr >> shift));
            if *warmup > 0 {
                format!("profile {name} (warm: measured after {warmup} accesses)")
            } else {
                format!("profile {name} (cold: first touches count as misses)")
            }
        }
        Source::Trace {
            path,
            instructions,
            data,
        } => {
            let (instructions, data) = (*instructions, *data);
            let mut feed = |addr: u64| offer(&mut curves, addr >> shift);
            let mut input = cachesched_sim::trace::open_trace(Path::new(path))
                .map_err(Error::io("cannot open trace file", path.as_str()))?;
            let mut last_i = 0u64;
            let mut on = |e: TraceEvent| match e {
                TraceEvent::Instr { addr, .. } if instructions => {
                    last_i = addr;
                    feed(addr);
                }
                TraceEvent::HitRun { count, .. } if instructions => {
                    for _ in 0..count {
                        feed(last_i);
                    }
                }
                TraceEvent::Load { addr, .. }
                | TraceEvent::Store { addr, .. }
                | TraceEvent::Modify { addr, .. }
                    if data =>
                {
                    feed(addr)
                }
                _ => {}
            };
            let head = input
                .fill_buf()
                .map_err(Error::io("cannot read", path.as_str()))?;
            if is_binary_trace(head) {
                let mut r = TraceReader::new(input).within(|| format!("in trace '{path}'"))?;
                while let Some(e) = r.next_event().within(|| format!("in trace '{path}'"))? {
                    on(e);
                }
            } else {
                let mut r = LackeyReader::new(input);
                while let Some(e) = r.next_event().within(|| format!("in trace '{path}'"))? {
                    on(e);
                }
            }
            format!("trace {path} (from its start: first touches count as misses)")
        }
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
    Ok(Curve {
        source,
        seed: spec.seed,
        line_bytes: spec.line_bytes,
        accesses: exact.accesses,
        distinct_lines: distinct,
        sample_rate: spec.sample_rate,
        sampled_accesses: shards.sampled(),
        mean_abs_error: errs.iter().sum::<f64>() / errs.len().max(1) as f64,
        max_abs_error: errs.iter().copied().fold(0.0, f64::max),
        points,
    })
}

impl Curve {
    /// The curve as the table `cachesched mrc` prints.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "seed {}", self.seed);
        let _ = writeln!(
            t,
            "{}: {} accesses, {} distinct {}-byte lines; SHARDS at rate {} tracked {} accesses, mean |error| {:.4}, max {:.4}",
            self.source,
            self.accesses,
            self.distinct_lines,
            self.line_bytes,
            self.sample_rate,
            self.sampled_accesses,
            self.mean_abs_error,
            self.max_abs_error
        );
        let _ = writeln!(t, "{:>12} {:>10} {:>10}", "size", "exact", "sampled");
        for p in &self.points {
            let sampled = p
                .sampled_miss_ratio
                .map(|s| format!("{s:.4}"))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                t,
                "{:>12} {:>10.4} {:>10}",
                cachesched_core::topology::human_bytes(p.size_bytes),
                p.exact_miss_ratio,
                sampled
            );
        }
        t
    }

    /// Writes `mrc.csv`, `mrc.json` and `mrc.svg` into `out`.
    pub fn write(&self, out: &Path) -> Result<()> {
        let mut csv = String::from("size_bytes,exact_miss_ratio,sampled_miss_ratio\n");
        for p in &self.points {
            let sampled = p
                .sampled_miss_ratio
                .map(|s| s.to_string())
                .unwrap_or_default();
            let _ = writeln!(csv, "{},{},{}", p.size_bytes, p.exact_miss_ratio, sampled);
        }
        write_file(&out.join("mrc.csv"), &csv)?;
        write_file(
            &out.join("mrc.json"),
            &(serde_json::to_string_pretty(self)? + "\n"),
        )?;
        let kb = |p: &Point| p.size_bytes as f64 / 1024.0;
        let series = vec![
            Series {
                label: "exact".into(),
                points: self
                    .points
                    .iter()
                    .map(|p| (kb(p), p.exact_miss_ratio))
                    .collect(),
                errors: Vec::new(),
            },
            Series {
                label: format!("SHARDS {}", self.sample_rate),
                points: self
                    .points
                    .iter()
                    .filter_map(|p| p.sampled_miss_ratio.map(|s| (kb(p), s)))
                    .collect(),
                errors: Vec::new(),
            },
        ];
        let svg = line_chart(
            &format!("miss-ratio curve: {}", self.source),
            "cache size (log scale), fully associative LRU",
            "miss ratio",
            &series,
            XAxis::Kib,
            None,
        );
        write_file(&out.join("mrc.svg"), &svg)
    }
}
