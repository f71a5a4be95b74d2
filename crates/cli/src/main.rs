//! `cachesched`: cache-aware scheduling on a simulated machine or a real Linux host.

mod cmd;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Cache-aware operating-system scheduling for multicore processors: simulate the
/// papers' machines and schedulers, run experiments, replay traces, and run the same
/// policies on real Linux processes.
#[derive(Parser, Debug)]
#[command(name = "cachesched", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Simulate a workload mix on a simulated machine under a baseline and policies.
    Simulate(cmd::simulate::SimulateArgs),
    /// Run an experiment scenario (TOML): many runs in parallel, results, plots, report.
    Experiment(cmd::experiment::ExperimentArgs),
    /// List the built-in machine presets and their shapes.
    Machines,
    /// Show this host's topology (from sysfs), or a preset's with --machine.
    Topology(cmd::info::TopologyArgs),
    /// List the built-in workload profiles.
    Workloads,
    /// List the policies and the statistics each reports, with what each measures.
    Policies,
    /// Replay a valgrind lackey trace through an I1/D1/LL hierarchy with cachegrind's
    /// rules and print cachegrind's `events:`/`summary:` lines.
    Replay(cmd::replay::ReplayArgs),
    /// Miss-ratio curve of a profile or trace: exact LRU stack distances and a
    /// SHARDS-sampled estimate, with its error.
    Mrc(cmd::mrc::MrcArgs),
    /// Why a change between two sets of finished runs has its size: the events each
    /// program has per instruction (a), what each costs (b), and who ran, paired by seed.
    Decompose(cmd::decompose::DecomposeArgs),
    /// Reproduce a paper's result on the simulated machine: runs, plots and a
    /// paper-against-measured table.
    #[command(subcommand)]
    Reproduce(cmd::reproduce::ReproduceCommand),
    /// Record program traces.
    #[command(subcommand)]
    Trace(cmd::replay::TraceCommand),
    /// The real-program suite (`--mix real:NAME`): list it, record its traces.
    #[command(subcommand)]
    Real(cmd::real::RealCommand),
    /// Run policies on real Linux threads: a launched command, --pid or --cgroup;
    /// everything changed is restored at exit.
    ///
    /// Manages a command it launches (`-- CMD…`) and its children, existing processes
    /// (`--pid`) or a cgroup (`--cgroup`).
    ///
    /// Every CPU mask, slice and nice value it changes is put back on the threads still
    /// alive when it ends: when the command exits, on Ctrl-C, SIGTERM or SIGHUP (which it
    /// passes on to the command it launched), and on an internal error or panic. Only
    /// SIGKILL leaves changes behind (with --journal FILE, `cachesched restore FILE` undoes
    /// them). Stats lines go to stderr; the command keeps stdout.
    /// Exit code: the command's (128+N if signal N killed it); with --pid or --cgroup, 0
    /// after a clean stop.
    ///
    /// Policies that work without hardware counters: `timeslice` (static 45 ms slices,
    /// `timeslice:slice_ms=30`), `affinity` (home LLC domain; `affinity:home=core`),
    /// `demo` (pins round robin; `demo:slice_ms=10,nice=5`). `timeslice:mode=dynamic`
    /// needs LLC-miss counters and refuses to start without them. `cachefair` takes
    /// threads' classes from `--class` rules (`--class cache-fair=comm:mcf*
    /// --class best-effort=cgroup:/sys/fs/cgroup/cpu/batch`), compensates through
    /// weights (nice values), and needs cycles, instructions, LLC-miss and stall
    /// counters: it refuses to start, naming what is missing. Co-run segments (CASC,
    /// cachefair) are sampled at each tick from the task clock and migrations.
    Run(cmd::run::RunArgs),
    /// Undo what a killed `cachesched run --journal FILE` left changed.
    Restore(cmd::run::RestoreArgs),
    /// A CPU-bound load with a known shape, to try `run` on.
    Burn(cmd::burn::BurnArgs),
    /// Make the runs of one Slurm array task into the run cache (what `--executor
    /// slurm` submits; not for use by hand).
    #[command(hide = true)]
    RunBatch(cmd::cluster::RunBatchArgs),
    /// Speed benchmarks, reported as ratios against a reference run side by side.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// The papers' effects measured on this real machine by time, with real processes
    /// under several conditions side by side, interleaved and repeated.
    #[command(subcommand)]
    Study(cmd::study::StudyCommand),
}

fn main() {
    cachesched_linux::default_sigpipe();
    // `reproduce --help` lists the papers of the lab's table
    let command =
        Cli::command().mut_subcommand("reproduce", |c| c.after_help(cmd::reproduce::papers_help()));
    let cli = Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    let res: Result<i32> = match cli.command {
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Experiment(a) => cmd::experiment::run(a),
        Command::Machines => cmd::info::machines().map(|_| 0),
        Command::Topology(a) => cmd::info::topology(a).map(|_| 0),
        Command::Workloads => cmd::info::workloads().map(|_| 0),
        Command::Policies => cmd::info::policies().map(|_| 0),
        Command::Replay(a) => cmd::replay::run(a).map(|_| 0),
        Command::Mrc(a) => cmd::mrc::run(a).map(|_| 0),
        Command::Decompose(a) => cmd::decompose::run(a).map(|_| 0),
        Command::Reproduce(c) => cmd::reproduce::run(c),
        Command::Trace(c) => cmd::replay::trace(c).map(|_| 0),
        Command::Real(c) => cmd::real::run(c).map(|_| 0),
        Command::Run(a) => cmd::run::run(a),
        Command::Restore(a) => cmd::run::restore(a),
        Command::Burn(a) => cmd::burn::run(a).map(|_| 0),
        Command::RunBatch(a) => cmd::cluster::run_batch(a),
        Command::Bench(c) => cmd::bench::run(c).map(|_| 0),
        Command::Study(c) => cmd::study::run(c),
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            std::process::exit(2);
        }
    }
}

/// An error and its causes on one line, leaving out a cause whose text the message
/// already contains (many errors here name their cause in their own message).
fn describe(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg += &format!(": {c}");
        }
    }
    msg
}
