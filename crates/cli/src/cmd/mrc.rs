//! `cachesched mrc`: miss-ratio curves of a workload profile or a trace, exact and
//! SHARDS-sampled, with the sampling error, as a table, CSV, JSON and an SVG plot.

//!
//! The curves are the laboratory's (`cachesched_lab::mrc`); this is their arguments.

use anyhow::{bail, Result};
use cachesched_lab::mrc::{measure, MrcSpec, Source};
use clap::Args;
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
    /// Include instruction fetches (a profile's as the simulated machine makes them:
    /// each access's instructions from its PC's line).
    #[arg(long)]
    instructions: bool,
    /// Instruction fetches alone, no data accesses: the instruction side's curve, an
    /// L1I's.
    #[arg(long, conflicts_with = "instructions")]
    instructions_only: bool,
    /// Seed for profile generation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory for mrc.csv, mrc.json and mrc.svg (default: none, the table on
    /// standard output only).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `cachesched mrc`.
pub fn run(a: MrcArgs) -> Result<()> {
    let source = match (a.profile, a.trace) {
        (Some(name), None) => Source::Profile {
            name,
            accesses: a.accesses,
            warmup: a.warmup,
            instructions: a.instructions || a.instructions_only,
            data: !a.instructions_only,
        },
        (None, Some(path)) => Source::Trace {
            path,
            instructions: a.instructions || a.instructions_only,
            data: !a.instructions_only,
        },
        _ => bail!("give exactly one of --profile NAME or --trace FILE"),
    };
    let curve = measure(&MrcSpec {
        source,
        line_bytes: a.line_bytes,
        sample_rate: a.sample_rate,
        seed: a.seed,
    })?;
    print!("{}", curve.table());
    if let Some(out) = &a.out {
        curve.write(out)?;
        println!("wrote mrc.csv, mrc.json and mrc.svg to {}", out.display());
    }
    Ok(())
}
