//! `cachesched reproduce`: a paper's evaluation from its scenario files, run on the
//! simulated machine (the work is `cachesched_lab::reproduce`'s).

use anyhow::Result;
use cachesched_lab::papers;
use cachesched_lab::papers::casc::sensitivity;
use cachesched_lab::reproduce::{papers_in, reproduce_papers, Options};
use cachesched_lab::runner::parse_jobs;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// What to reproduce: a paper by name (the papers of `cachesched_lab::papers::PAPERS`,
/// listed by `cachesched reproduce --help`), every paper, or CASC's sensitivity study.
#[derive(Subcommand, Debug)]
pub enum ReproduceCommand {
    /// Every paper that has scenario files (every directory under `experiments/`).
    All(Box<PaperArgs>),
    /// How far CASC's headline (768 KB: L2 miss ratio and throughput against TS) moves
    /// when each parameter of the art, twolf and Berkeley DB profiles moves by ±25%.
    CascSensitivity(SensitivityArgs),
    /// A paper, by name: `cachesched reproduce PAPER [OPTIONS]` (the papers are listed
    /// below; `cachesched reproduce PAPER --help` gives the options).
    #[command(external_subcommand)]
    Paper(Vec<String>),
}

/// `cachesched reproduce PAPER`, parsed from the words after `reproduce`.
#[derive(Parser, Debug)]
#[command(
    name = "cachesched reproduce",
    about = "Reproduce one paper's evaluation"
)]
struct PaperCommand {
    /// The paper: one of the names `cachesched reproduce --help` lists.
    #[arg(value_parser = paper_name)]
    paper: String,
    #[command(flatten)]
    args: PaperArgs,
}

/// Parses a paper's name: one of the table's.
fn paper_name(s: &str) -> Result<String, String> {
    match papers::find(s) {
        Some(p) => Ok(p.name().to_string()),
        None => Err(format!(
            "no paper '{s}'; the papers: {}",
            papers::names().join(", ")
        )),
    }
}

/// The papers, one line each, for `cachesched reproduce --help`.
pub fn papers_help() -> String {
    let mut s = String::from("Papers (`cachesched reproduce PAPER`):\n");
    for p in papers::PAPERS {
        s += &format!("  {:<12} {}\n", p.name(), p.about());
    }
    s
}

/// Arguments of `cachesched reproduce PAPER`.
#[derive(Args, Debug)]
pub struct PaperArgs {
    /// Output directory; each paper writes to DIR/PAPER.
    #[arg(long, value_name = "DIR", default_value = "results")]
    out: PathBuf,
    /// Directory of the scenario files (one subdirectory per paper).
    #[arg(long, value_name = "DIR", default_value = "experiments")]
    experiments: PathBuf,
    /// Parallel runs, 1 to 1,024 (default: number of CPUs; never more than the runs).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
    #[command(flatten)]
    exec: super::cluster::ExecutorArgs,
    /// The reduced version: each file's `quick` seeds and windows (default: its first
    /// two seeds); every report says it is reduced.
    #[arg(long)]
    quick: bool,
    /// Only these scenario files (names without `.toml`).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    only: Vec<String>,
    /// Replace every file's seeds (for exploration; the report names the override).
    #[arg(long, value_delimiter = ',', value_name = "SEEDS")]
    seeds: Vec<u64>,
    /// Replace every file's simulated time per run, ms.
    #[arg(long, value_name = "MS")]
    duration_ms: Option<f64>,
    /// Replace every file's warm-up, ms.
    #[arg(long, value_name = "MS")]
    warmup_ms: Option<f64>,
    /// Replace every file's LLC sizes (KiB).
    #[arg(long, value_delimiter = ',', value_name = "KIB")]
    l2_kb: Vec<u64>,
    /// In files of several mixes, only the mixes of these labels (for a decomposition
    /// or an exploration of a few mixes; the report names the override).
    #[arg(long, value_delimiter = ',', value_name = "LABELS")]
    mixes: Vec<String>,
    /// Write each scenario file's section of the paper-against-measured report into
    /// DIR/PAPER.md, between its markers `<!-- reproduce PAPER/NAME: begin -->` and
    /// `<!-- reproduce PAPER/NAME: end -->` (checked before anything runs).
    #[arg(long, value_name = "DIR")]
    docs: Option<PathBuf>,
    /// Let --docs take the sections of a reduced or overridden run (--quick, --seeds,
    /// --duration-ms, --warmup-ms, --l2-kb, --mixes), which it otherwise refuses: the
    /// documents' blocks hold the full reproduction.
    #[arg(long, requires = "docs")]
    docs_from_reduced: bool,
    /// Run nothing: rebuild every report (and with --docs the documents) from the
    /// results a previous run of the same scenario files, with the same options, left
    /// in --out. Refuses when a file or an option differs from that run.
    #[arg(long)]
    from_results: bool,
    /// Run nothing: print every file's runs, those the run cache holds, the simulated
    /// seconds of the rest and their estimated worker-time, from a rate measured now on
    /// this host for each machine (a short calibration run of each).
    #[arg(long, conflicts_with = "from_results")]
    plan: bool,
    /// Run nothing: move the runs of these files that a build from before model
    /// versions made (its run-cache keys continued from the hash of its sources,
    /// HASH, 16 hex digits) to their keys under this build's model version. Only for
    /// runs of a build whose results this build's golden tests reproduce.
    #[arg(long, value_name = "HASH", conflicts_with_all = ["from_results", "plan"])]
    rekey_from: Option<String>,
}

impl From<PaperArgs> for Options {
    fn from(a: PaperArgs) -> Options {
        Options {
            out: a.out,
            experiments: a.experiments,
            jobs: a.jobs,
            quick: a.quick,
            only: a.only,
            seeds: a.seeds,
            duration_ms: a.duration_ms,
            warmup_ms: a.warmup_ms,
            l2_kb: a.l2_kb,
            mixes: a.mixes,
            docs: a.docs,
            docs_from_reduced: a.docs_from_reduced,
            from_results: a.from_results,
            plan: a.plan,
            rekey_from: a.rekey_from,
        }
    }
}

/// Arguments of `cachesched reproduce casc-sensitivity`.
#[derive(Args, Debug)]
pub struct SensitivityArgs {
    /// Output directory.
    #[arg(long, value_name = "DIR", default_value = "results/casc-sensitivity")]
    out: PathBuf,
    /// Parallel runs, 1 to 1,024 (default: number of CPUs; never more than the runs).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
    /// Seeds; every workload runs under the baseline and CASC once per seed.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    seeds: Vec<u64>,
    /// L2 size in KiB (the paper's base configuration: 768).
    #[arg(long, value_name = "KIB", default_value_t = 768)]
    l2_kb: u64,
    /// Relative move of each parameter, both ways (0 < s < 1).
    #[arg(long, value_name = "S", default_value_t = 0.25)]
    scale: f64,
    /// Move only the parameters whose name contains one of these (comma-separated, e.g.
    /// `art,twolf.code`); `none` runs only the unperturbed workload (default: all).
    #[arg(long, value_delimiter = ',', value_name = "PATTERNS")]
    only: Vec<String>,
    /// Warm-up before measuring, ms of simulated time (as `reproduce casc`).
    #[arg(long, value_name = "MS", default_value_t = 700.0)]
    warmup_ms: f64,
    /// Total simulated time per run, ms (as `reproduce casc`).
    #[arg(long, value_name = "MS", default_value_t = 1300.0)]
    duration_ms: f64,
}

impl From<SensitivityArgs> for sensitivity::Options {
    fn from(a: SensitivityArgs) -> sensitivity::Options {
        sensitivity::Options {
            out: a.out,
            jobs: a.jobs,
            seeds: a.seeds,
            l2_kb: a.l2_kb,
            scale: a.scale,
            only: a.only,
            warmup_ms: a.warmup_ms,
            duration_ms: a.duration_ms,
        }
    }
}

/// `cachesched reproduce`.
pub fn run(c: ReproduceCommand) -> Result<i32> {
    match c {
        ReproduceCommand::Paper(words) => {
            let cmd = PaperCommand::try_parse_from(
                std::iter::once("cachesched reproduce".to_string()).chain(words),
            )
            .unwrap_or_else(|e| e.exit());
            cmd.args.exec.apply()?;
            Ok(reproduce_papers(&[cmd.paper], &cmd.args.into())?)
        }
        ReproduceCommand::All(a) => {
            a.exec.apply()?;
            let papers = papers_in(&a.experiments)?;
            Ok(reproduce_papers(&papers, &(*a).into())?)
        }
        ReproduceCommand::CascSensitivity(a) => Ok(sensitivity::run(a.into())?),
    }
}
