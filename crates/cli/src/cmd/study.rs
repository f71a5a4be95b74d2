//! `cachesched study`: the papers' effects measured on this real machine, by time (no
//! hardware counters needed), with real processes: `cachesched burn` threads chasing
//! pointers through private working sets of a given size, under several conditions run
//! side by side, interleaved and repeated, so that a noisy shared machine affects every
//! condition alike.
//!
//! - `study affinity` (paper 4, §3 on this host): as many chasing threads as CPUs,
//!   bound one per core, moved between the cores every 2 or 10 ms by the `migrate`
//!   policy (forced low affinity), left to Linux, and under `cachesched run --policy
//!   affinity:home=core`; work per second against bound, per working-set size.
//! - `study timeslice` (paper 5 on this host): two chasing threads sharing CPU 0, each
//!   doing a fixed amount of work, under Linux's default slices and under `cachesched
//!   run --policy timeslice:slice_ms=N`; completion time against the default, per
//!   working-set size, and each thread alone for reference.
//!
//! Every run is one child process (`cachesched burn`, under `cachesched run` where a
//! policy applies); each repeat runs every (size, condition) pair once, in an order
//! drawn from `--seed`. Runs are appended to `runs.jsonl` in `--out` as they finish; the
//! report (`report.md`, `results.json`, SVG plots) is made from them at the end, or
//! again with `--from-runs` without running anything. Ctrl-C stops after killing the
//! current run (whose `cachesched run` restores what it changed); the runs finished so
//! far stay in `runs.jsonl`.
//!
//! The studies themselves live in the laboratory, each in its paper's folder
//! (`cachesched_lab::papers::affinity::host`, `…::timeslice::host`, with what they
//! share in `cachesched_lab::host_study`); this is their arguments.

use anyhow::{Context, Result};
use cachesched_lab::host_study::{Outcome, Settings};
use cachesched_lab::papers::{affinity, timeslice};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Which study.
#[derive(Subcommand, Debug)]
pub enum StudyCommand {
    /// Cache affinity (paper 4) on this host: chasing threads bound, forced to migrate
    /// every 2 or 10 ms, left to Linux, and under the affinity policy; work per second
    /// against bound, by working-set size.
    Affinity(AffinityArgs),
    /// Longer timeslices (paper 5) on this host: two chasing threads sharing CPU 0
    /// under Linux's slices and under the timeslice policy's; completion time of fixed
    /// work against the default, by working-set size.
    Timeslice(TimesliceArgs),
}

/// Options every study shares.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Working-set sizes per thread, KiB.
    #[arg(long, value_name = "KIB", value_delimiter = ',')]
    kb: Option<Vec<u64>>,
    /// Times every (size, condition) pair runs, interleaved.
    #[arg(long, value_name = "N", default_value_t = 5)]
    repeats: usize,
    /// Seed of the order runs are made in.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Output directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run nothing: rebuild the report from `runs.jsonl` in --out.
    #[arg(long)]
    from_runs: bool,
    /// Also write the report's block into this document, between its markers
    /// `<!-- study NAME: begin -->` and `<!-- study NAME: end -->`.
    #[arg(long, value_name = "FILE")]
    docs: Option<PathBuf>,
}

/// `cachesched study affinity`.
#[derive(Args, Debug)]
pub struct AffinityArgs {
    #[command(flatten)]
    common: Common,
    /// Length of each run, ms.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    ms: u64,
    /// Chasing threads (default: one per CPU this process may use).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

/// `cachesched study timeslice`.
#[derive(Args, Debug)]
pub struct TimesliceArgs {
    #[command(flatten)]
    common: Common,
    /// Slice lengths of the timeslice policy, ms.
    #[arg(long, value_name = "MS", value_delimiter = ',', default_values_t = [3.0, 5.0, 15.0, 30.0, 45.0])]
    slices: Vec<f64>,
    /// Work per thread, as the time one thread alone takes for it, ms (calibrated per
    /// size at the start).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    solo_ms: u64,
}

/// `cachesched study`.
pub fn run(c: StudyCommand) -> Result<i32> {
    let outcome = match c {
        StudyCommand::Affinity(a) => affinity::host::run(
            &settings(&a.common, "affinity")?,
            &affinity::host::AffinityStudy {
                ms: a.ms,
                threads: a.threads,
            },
        )?,
        StudyCommand::Timeslice(a) => timeslice::host::run(
            &settings(&a.common, "timeslice")?,
            &timeslice::host::TimesliceStudy {
                slices: a.slices,
                solo_ms: a.solo_ms,
            },
        )?,
    };
    Ok(match outcome {
        Outcome::Reported => 0,
        Outcome::Interrupted => 130,
    })
}

/// The laboratory's settings of a study from its options: the output directory
/// (`results/study/NAME` unless given), this executable to run the loads, and this
/// command line for the report.
fn settings(c: &Common, study: &str) -> Result<Settings> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    Ok(Settings {
        sizes_kb: c.kb.clone(),
        repeats: c.repeats,
        seed: c.seed,
        out: c
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("results/study").join(study)),
        from_runs: c.from_runs,
        docs: c.docs.clone(),
        exe: std::env::current_exe()
            .context("cannot locate the cachesched executable to run loads with")?,
        command: format!("cachesched {}", args.join(" ")),
    })
}
