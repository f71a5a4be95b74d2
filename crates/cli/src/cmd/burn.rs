//! `cachesched burn`: the load of [`cachesched_linux::load`] from the command line.

use anyhow::Result;
use cachesched_linux::load::{Load, Work};
use clap::Args;

/// A CPU-bound load: THREADS threads computing (WORK_US busy, then SLEEP_US asleep,
/// repeatedly) for MS milliseconds; with --report, one JSON line per thread at the end
/// with its context switches, migrations and CPU time as the kernel counted them.
#[derive(Args, Debug)]
pub struct BurnArgs {
    /// Threads to run, 1 to 4096.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// How long to run, milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    ms: u64,
    /// Busy time per round, microseconds.
    #[arg(long, value_name = "US", default_value_t = 10_000)]
    work_us: u64,
    /// Sleep per round, microseconds (0: never sleep).
    #[arg(long, value_name = "US", default_value_t = 0)]
    sleep_us: u64,
    /// Print one JSON line per thread at the end.
    #[arg(long)]
    report: bool,
    /// Pin the whole process to this OS CPU first (default: not pinned).
    #[arg(long, value_name = "CPU")]
    cpu: Option<usize>,
    /// Pin thread i to the i-th CPU (mod their number) of the CPUs the process may
    /// use (default: not pinned; conflicts with --cpu).
    #[arg(long, conflicts_with = "cpu")]
    pin_threads: bool,
    /// Each thread chases pointers through its own working set of this many KiB
    /// (default: arithmetic work).
    #[arg(long, value_name = "KIB", conflicts_with = "sweep_kb")]
    chase_kb: Option<u64>,
    /// Each thread sweeps its own working set of this many KiB line by line.
    #[arg(long, value_name = "KIB")]
    sweep_kb: Option<u64>,
    /// Fixed work: each thread stops after this many steps (--ms is then a limit).
    #[arg(long, value_name = "N")]
    steps: Option<u64>,
    /// Wait this long after the threads are ready before they start together, ms
    /// (default 0), e.g. for `cachesched run` to find them first.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    delay_ms: u64,
    /// Record each thread's steps per bin of this many microseconds from the start of
    /// every run on a CPU (after a switch-out or a sleep), reported with --report as
    /// `run_profile`; 50 to 1,000,000 (memory work only).
    #[arg(long, value_name = "US")]
    profile_bin_us: Option<u64>,
    /// Besides the working threads, start a new thread every this many milliseconds
    /// (at most 4,096 in all) that sleeps until the end: a program whose threads come
    /// and go while `cachesched run` manages it (default: none).
    #[arg(long, value_name = "MS")]
    spawn_every_ms: Option<u64>,
}

/// `cachesched burn`.
pub fn run(a: BurnArgs) -> Result<()> {
    let work = match (a.chase_kb, a.sweep_kb) {
        (Some(kb), _) => Work::Chase((kb as usize) << 10),
        (_, Some(kb)) => Work::Sweep((kb as usize) << 10),
        _ => Work::Arith,
    };
    let load = Load {
        threads: a.threads,
        ms: a.ms,
        work_us: a.work_us,
        sleep_us: a.sleep_us,
        report: a.report,
        cpu: a.cpu,
        pin_threads: a.pin_threads,
        work,
        steps: a.steps,
        delay_ms: a.delay_ms,
        profile_bin_us: a.profile_bin_us,
        spawn_every_ms: a.spawn_every_ms,
    };
    let out = load.run()?;
    for r in &out.reports {
        println!("{}", serde_json::to_string(r)?);
    }
    if !a.report {
        eprintln!(
            "burn: {} thread(s) ran {} ms, {} round(s) of {} us of work and {} us of sleep in all \
             (--report: one JSON line per thread)",
            a.threads, a.ms, out.rounds, a.work_us, a.sleep_us
        );
    }
    Ok(())
}
