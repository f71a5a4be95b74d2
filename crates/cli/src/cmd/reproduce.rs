//! `cachesched reproduce`: a paper's evaluation from its scenario files, run on the
//! simulated machine (the work is `cachesched_lab::reproduce`'s).

use anyhow::Result;
use cachesched_lab::papers::casc::sensitivity;
use cachesched_lab::reproduce::{papers_in, reproduce_papers, Options};
use cachesched_lab::runner::parse_jobs;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// What to reproduce.
#[derive(Subcommand, Debug)]
pub enum ReproduceCommand {
    /// CASC (paper 1): the scenario files of `experiments/casc/` (Figures 5-7 with the
    /// paper's values, variants beyond the paper, a real-program mix, mixes where CASC
    /// cannot help), with CASC's classification, cache illusion and time to steady state.
    Casc(PaperArgs),
    /// The cache-fair scheduler (paper 2): the scenario files of `experiments/cachefair/`
    /// (Table 2's fast and slow schedules: completion-time variability under the
    /// fixed-priority baseline and under cache-fair, Figures 6-8; best-effort
    /// slowdowns), with the policy's fair-miss-rate estimates and mechanism counts.
    Cachefair(PaperArgs),
    /// Sharing-aware thread clustering (paper 3): the scenario files of
    /// `experiments/clustering/` (the four placements of the server workloads on the
    /// 2-chip Power5, Figures 5-8, the 8-chip machine), with the clusters' accuracy
    /// against the ground truth and Figure 5's sharing maps.
    Clustering(PaperArgs),
    /// Cache affinity (paper 4): the scenario files of `experiments/affinity/` (§2: L1
    /// affinity on a multicore uniprocessor, Table 2's six experiments on the T2000 and
    /// one Clovertown chip at 2, 10 and 200 ms quanta; §3: L2 affinity on the Clovertown
    /// as a multicore and as a unicore multiprocessor, Table 3's mixes bound against
    /// affinity-oblivious, and the affinity policy), with IPC and misses per instruction
    /// low against high affinity.
    Affinity(PaperArgs),
    /// Longer timeslices (paper 5): the scenario files of `experiments/timeslice/`
    /// (Figure 1's slowdowns with a cache-aggressive microkernel; Figures 2, 3 and 11
    /// from slice profiles; Figures 5-10: runtime improvement of aggregated slices
    /// against CFS on 2 and 4 cores with 16 MB and on 2 cores with 4 MB, 2/4/8 programs
    /// per core, LLC misses, fairness; the dynamic variant and a partitioned LLC).
    Timeslice(PaperArgs),
    /// Every paper that has scenario files (every directory under `experiments/`).
    All(PaperArgs),
    /// How far CASC's headline (768 KB: L2 miss ratio and throughput against TS) moves
    /// when each parameter of the art, twolf and Berkeley DB profiles moves by ±25%.
    CascSensitivity(SensitivityArgs),
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
    /// Write each scenario file's section of the paper-against-measured report into
    /// DIR/PAPER.md, between its markers `<!-- reproduce PAPER/NAME: begin -->` and
    /// `<!-- reproduce PAPER/NAME: end -->` (checked before anything runs).
    #[arg(long, value_name = "DIR")]
    docs: Option<PathBuf>,
    /// Let --docs take the sections of a reduced or overridden run (--quick, --seeds,
    /// --duration-ms, --warmup-ms, --l2-kb), which it otherwise refuses: the
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
    let one = |p: &str, a: PaperArgs| reproduce_papers(&[p.to_string()], &a.into());
    match c {
        ReproduceCommand::Casc(a) => one("casc", a),
        ReproduceCommand::Cachefair(a) => one("cachefair", a),
        ReproduceCommand::Clustering(a) => one("clustering", a),
        ReproduceCommand::Affinity(a) => one("affinity", a),
        ReproduceCommand::Timeslice(a) => one("timeslice", a),
        ReproduceCommand::All(a) => {
            let papers = papers_in(&a.experiments)?;
            reproduce_papers(&papers, &a.into())
        }
        ReproduceCommand::CascSensitivity(a) => sensitivity::run(a.into()),
    }
}
