//! `cachesched decompose`: why a change between two sets of finished runs has the size
//! it has — how much of it comes from how many costly events (LLC misses, L1 misses,
//! remote accesses) each program has per instruction, how much from what each event
//! costs, how much from who ran (issue 80, part 3).
//!
//! The decomposition is the laboratory's (`cachesched_lab::decompose`); this is its
//! arguments.

use anyhow::Result;
use cachesched_lab::decompose::{run as decompose, Event, Side};
use clap::Args;
use std::path::PathBuf;

/// Arguments of `cachesched decompose`.
#[derive(Args, Debug)]
pub struct DecomposeArgs {
    /// The output directory of a scenario, or of one mix of it, holding `results.json`
    /// (e.g. `results/casc/fig5-7`, `results/cachefair/heldout/gap-fast`): side A. A
    /// scenario of several mixes (e.g. `results/timeslice/fig7-2c4m`) pools its mixes'
    /// runs, paired by mix and seed.
    dir: PathBuf,
    /// Side A's variant (its label in the scenario file).
    #[arg(long, value_name = "VARIANT")]
    from: String,
    /// Side B's variant.
    #[arg(long, value_name = "VARIANT")]
    to: String,
    /// Side B's directory, when it is another one than A's (another mix of the same
    /// scenario: the cache-fair paper's slow schedule against its fast one).
    #[arg(long, value_name = "DIR")]
    to_dir: Option<PathBuf>,
    /// The sweep point (LLC size, KiB) of a scenario that sweeps it.
    #[arg(long, value_name = "KIB")]
    kb: Option<u64>,
    /// The costly event: `llc` (LLC misses, priced by the stalls on DRAM and other
    /// chips), `l1` (L1 misses, priced by every stall beyond the L1), `remote`
    /// (accesses served by another chip's cache).
    #[arg(long, value_name = "EVENT", default_value = "llc")]
    event: Event,
    /// Only these programs in the table (default: every program both sides run).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    only: Vec<String>,
}

/// Runs `cachesched decompose`: prints the report.
pub fn run(a: DecomposeArgs) -> Result<()> {
    let from = Side {
        dir: a.dir.clone(),
        variant: a.from,
    };
    let to = Side {
        dir: a.to_dir.unwrap_or(a.dir),
        variant: a.to,
    };
    print!("{}", decompose(&from, &to, a.kb, a.event, &a.only)?);
    Ok(())
}
