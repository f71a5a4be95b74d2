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
use cachesched_sim::workload::{profile, LocalityThread, Op, Workload};
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
        /// Whether instruction fetches count, as the simulated machine makes them: an
        /// access's `gap` instructions and its own are fetched from its PC's line
        /// (the engine fetches one line per operation), so that line is offered
        /// `gap + 1` times, one per instruction, as a trace offers each of its
        /// instructions.
        instructions: bool,
        /// Whether data accesses count (off with `instructions` on: the instruction
        /// side's curve alone, an L1I's).
        data: bool,
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
            instructions,
            data,
        } => {
            let rng = SimRng::new(spec.seed).fork(1000);
            let mut t = LocalityThread::new(profile(name)?, 0, 0, rng);
            let (instructions, data) = (*instructions, *data);
            let draw = |t: &mut LocalityThread, n: u64, curves: &mut _| {
                let mut drawn = 0;
                while drawn < n {
                    match t.next_op() {
                        Op::Access { gap, addr, pc, .. } => {
                            if instructions {
                                for _ in 0..=gap {
                                    offer(curves, pc >> shift);
                                }
                            }
                            if data {
                                offer(curves, addr >> shift);
                            }
                            drawn += 1;
                        }
                        Op::Sleep(_) => {}
                        Op::Exit => break,
                    }
                }
            };
            draw(&mut t, *warmup, &mut curves);
            curves.0.reset_counts();
            curves.1.reset_counts();
            draw(&mut t, *accesses, &mut curves);
            let what = match (instructions, data) {
                (true, false) => ", instruction fetches",
                (true, true) => ", instruction fetches and data accesses",
                _ => "",
            };
            if *warmup > 0 {
                format!("profile {name}{what} (warm: measured after {warmup} accesses)")
            } else {
                format!("profile {name}{what} (cold: first touches count as misses)")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The curve of 200,000 of gzip's profile's accesses after as many of warm-up,
    /// counting its instruction fetches and/or its data accesses.
    fn spec(instructions: bool, data: bool) -> MrcSpec {
        MrcSpec {
            source: Source::Profile {
                name: "gzip".into(),
                accesses: 200_000,
                warmup: 200_000,
                instructions,
                data,
            },
            line_bytes: 64,
            sample_rate: 0.1,
            seed: 1,
        }
    }

    /// The exact miss ratio of `c` at `bytes`.
    fn at(c: &Curve, bytes: u64) -> f64 {
        c.points
            .iter()
            .find(|p| p.size_bytes == bytes)
            .map(|p| p.exact_miss_ratio)
            .unwrap()
    }

    /// A profile's instruction side, as the simulated machine fetches it: gzip's
    /// profile runs 8 KB of code, so its warm curve is 0 from 8 KB up and not below;
    /// it offers one fetch per instruction (the gap's and the access's own), so it
    /// counts about `gap_mean + 1` fetches per data access; and its data curve is the
    /// one drawn access by access (`feed_accesses`), as before instruction fetches
    /// could be asked for. Fails if a fetch is offered per operation instead of per
    /// instruction (one per access), if the fetches use the data address, or if the
    /// data-only curve changes.
    #[test]
    fn a_profiles_instruction_side_is_its_code_fetched_per_instruction() {
        let model = profile("gzip").unwrap();
        assert_eq!(model.code_kb, 8);
        let i = measure(&spec(true, false)).unwrap();
        assert_eq!(i.distinct_lines, 8 << 10 >> 6);
        assert_eq!(at(&i, 8 << 10), 0.0);
        assert!(at(&i, 4 << 10) > 0.001, "{}", at(&i, 4 << 10));
        let per_access = i.accesses as f64 / 200_000.0;
        assert!(
            (per_access / (model.gap_mean + 1.0) - 1.0).abs() < 0.05,
            "{per_access} fetches per access, gap_mean {}",
            model.gap_mean
        );
        let d = measure(&spec(false, true)).unwrap();
        assert_eq!(d.accesses, 200_000);
        let mut t = LocalityThread::new(model, 0, 0, SimRng::new(1).fork(1000));
        let mut sd = StackDistances::new();
        t.feed_accesses(200_000, |a, _| {
            sd.access(a >> 6);
        });
        sd.reset_counts();
        t.feed_accesses(200_000, |a, _| {
            sd.access(a >> 6);
        });
        for p in &d.points {
            assert_eq!(p.exact_miss_ratio, sd.miss_ratio(p.size_bytes >> 6));
        }
    }
}
