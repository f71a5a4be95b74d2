//! `cachesched bench`: speed measured side by side with a reference, reported as ratios.
//! The benchmarks are the laboratory's (`cachesched_lab::bench`); this is their
//! arguments.

use crate::cmd::replay::CgCaches;
use anyhow::{Context, Result};
use cachesched_lab::bench;
use clap::{Args, Subcommand};

/// `cachesched bench …`.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Replay speed against cachegrind itself on the same program and caches.
    Replay(ReplayBenchArgs),
    /// Reading lackey's output event by event against passing over it (how a
    /// recording goes through the instructions before its window), beside the time
    /// lackey took to write it.
    Skip(SkipBenchArgs),
    /// Simulated instructions per wall-clock second of the whole engine, per preset,
    /// side by side with cachegrind's rate on a reference program.
    Engine(EngineBenchArgs),
    /// How the engine's cost grows with threads and CPUs: Niagara-like machines of 8,
    /// 64 and 256 CPUs running 18, 100 and 1,000 threads.
    Scaling(ScalingBenchArgs),
    /// Workload generators' accesses per second against the cache model's (the
    /// niagara-2c memory system fed the same operations) and the whole simulated
    /// machine's.
    Workloads(WorkloadBenchArgs),
    /// CASC's decision cost: the PCMR linear solve and the bucketization at 18, 100 and
    /// 1,000 threads, against the 10 ms slice the scheduler decides for.
    Casc(CascBenchArgs),
    /// The Linux daemon's own CPU time and decision latency with 10, 100 and 1,000
    /// managed threads.
    Daemon(DaemonBenchArgs),
    /// The cache-fair scheduler's decision cost per co-run segment, reconnaissance and
    /// calibration at 10, 100 and 1,000 threads, against its 10 ms tick.
    Cachefair(CacheFairBenchArgs),
}

/// Arguments of `cachesched bench casc`.
#[derive(Args, Debug)]
pub struct CascBenchArgs {
    /// Timed repetitions of each measurement (the median is kept).
    #[arg(long, default_value_t = 21)]
    repeat: usize,
}

/// Arguments of `cachesched bench workloads`.
#[derive(Args, Debug)]
pub struct WorkloadBenchArgs {
    /// Accesses per profile for the generator and the cache model.
    #[arg(long, default_value_t = 2_000_000)]
    accesses: usize,
    /// Timed repetitions of the generator and the cache model (the best is kept).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Simulated milliseconds per profile for the whole machine (0: skip).
    #[arg(long, default_value_t = 10.0)]
    machine_ms: f64,
    /// Only these profiles (comma-separated; default all).
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    profiles: Vec<String>,
}

/// Arguments of `cachesched bench skip`.
#[derive(Args, Debug)]
pub struct SkipBenchArgs {
    /// Timed repetitions of each reader, interleaved (the median is kept).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// The program whose lackey output is read (e.g. `gzip -9 -c FILE`).
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Arguments of `cachesched bench replay`.
#[derive(Args, Debug)]
pub struct ReplayBenchArgs {
    #[command(flatten)]
    caches: CgCaches,
    /// Timed repetitions of each side (the best is kept).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// The program to trace and run under cachegrind.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Arguments of `cachesched bench engine`.
#[derive(Args, Debug)]
pub struct EngineBenchArgs {
    /// Simulated milliseconds per preset.
    #[arg(long, default_value_t = 50.0)]
    duration_ms: f64,
    /// A reference build of cachesched (its binary): every preset is run by it and by
    /// this build side by side, interleaved, `--repeat` times each, and the best times
    /// compared; their results must be identical (the same model version).
    #[arg(long, value_name = "BINARY")]
    against: Option<std::path::PathBuf>,
    /// Runs of each build per preset with `--against` (the best counts).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Only these presets (default: every preset).
    #[arg(long, value_delimiter = ',', value_name = "PRESET")]
    only: Vec<String>,
    /// Reference program for cachegrind's simulated instructions per second (optional).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Arguments of `cachesched bench scaling`.
#[derive(Args, Debug)]
pub struct ScalingBenchArgs {
    /// Simulated milliseconds per run.
    #[arg(long, default_value_t = 2.0)]
    duration_ms: f64,
    /// CPU counts (multiples of 4: cores of 4 hardware threads), comma-separated.
    #[arg(
        long,
        value_name = "N,…",
        default_value = "8,64,256",
        value_delimiter = ','
    )]
    cpus: Vec<u32>,
    /// Thread counts, comma-separated (a third each of art, twolf and bdb).
    #[arg(
        long,
        value_name = "N,…",
        default_value = "18,100,1000",
        value_delimiter = ','
    )]
    threads: Vec<u32>,
}

/// Arguments of `cachesched bench daemon`.
#[derive(Args, Debug)]
pub struct DaemonBenchArgs {
    /// Managed thread counts, comma-separated.
    #[arg(
        long,
        value_name = "N,…",
        default_value = "10,100,1000",
        value_delimiter = ','
    )]
    threads: Vec<usize>,
    /// Seconds measured per run (after the start-up, which is reported apart).
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    seconds: f64,
    /// Policies to measure, each as name or name:key=value,….
    #[arg(
        long = "policy",
        value_name = "SPEC",
        default_values_t = ["affinity:home=core".to_string(), "timeslice".to_string()]
    )]
    policies: Vec<String>,
    /// Also read every thread's state and counters for a stats line this often, as
    /// `run --stats SECS` does (0: never, as `run` does by default).
    #[arg(long = "stats", value_name = "SECS", default_value_t = 0.0)]
    stats_s: f64,
}

/// Arguments of `cachesched bench cachefair`.
#[derive(Args, Debug)]
pub struct CacheFairBenchArgs {
    /// Timed repetitions of each measurement (the median is kept).
    #[arg(long, default_value_t = 21)]
    repeat: usize,
}

/// This executable, which runs the benchmarks' loads and is the build measured.
fn this_exe() -> Result<std::path::PathBuf> {
    std::env::current_exe().context("cannot locate the cachesched executable")
}

/// Dispatches `cachesched bench …`.
pub fn run(c: BenchCommand) -> Result<()> {
    match c {
        BenchCommand::Replay(a) => bench::replay::run(&bench::replay::ReplayBench {
            caches: a.caches.specs(),
            repeat: a.repeat,
            command: a.command,
        })?,
        BenchCommand::Skip(a) => bench::replay::skip(&bench::replay::SkipBench {
            repeat: a.repeat,
            command: a.command,
        })?,
        BenchCommand::Engine(a) => bench::engine::run(&bench::engine::EngineBench {
            duration_ms: a.duration_ms,
            against: a.against,
            repeat: a.repeat,
            only: a.only,
            command: a.command,
            exe: this_exe()?,
        })?,
        BenchCommand::Scaling(a) => bench::engine::scaling(&bench::engine::ScalingBench {
            duration_ms: a.duration_ms,
            cpus: a.cpus,
            threads: a.threads,
        })?,
        BenchCommand::Workloads(a) => bench::workloads::run(&bench::workloads::WorkloadBench {
            accesses: a.accesses,
            repeat: a.repeat,
            machine_ms: a.machine_ms,
            profiles: a.profiles,
        })?,
        BenchCommand::Casc(a) => bench::casc::run(a.repeat)?,
        BenchCommand::Daemon(a) => bench::daemon::run(&bench::daemon::DaemonBench {
            threads: a.threads,
            seconds: a.seconds,
            policies: a.policies,
            stats_s: a.stats_s,
            exe: this_exe()?,
        })?,
        BenchCommand::Cachefair(a) => bench::cachefair::run(a.repeat)?,
    }
    Ok(())
}
