//! `cachesched burn`: a CPU-bound load with a known shape, to try `cachesched run` on and
//! to test and benchmark it: N threads that each compute for a while and optionally
//! sleep, repeatedly, for a given time, then report what the kernel did to them.

use anyhow::{bail, Context, Result};
use cachesched_linux::procfs;
use clap::Args;
use serde::Serialize;
use std::time::{Duration, Instant};

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
}

/// What one thread reports.
#[derive(Debug, Serialize)]
struct ThreadReport {
    pid: i32,
    tid: i32,
    voluntary_switches: u64,
    involuntary_switches: u64,
    migrations: Option<u64>,
    cpu_ms: f64,
    rounds: u64,
}

fn spin(work: Duration, sleep: Duration, until: Instant) -> u64 {
    let mut rounds = 0;
    let mut x = 1u64;
    while Instant::now() < until {
        let t0 = Instant::now();
        while t0.elapsed() < work {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        rounds += 1;
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
    }
    rounds
}

fn report(rounds: u64) -> Result<ThreadReport> {
    let pid = std::process::id() as i32;
    let tid = cachesched_linux::process::current_tid();
    let sw = procfs::thread_switches(pid, tid)?;
    Ok(ThreadReport {
        pid,
        tid,
        voluntary_switches: sw.voluntary,
        involuntary_switches: sw.involuntary,
        migrations: procfs::thread_migrations(pid, tid)?,
        cpu_ms: procfs::thread_cpu_ns(pid, tid)? as f64 / 1e6,
        rounds,
    })
}

/// Most threads `burn` starts (each has a stack; the kernel's and the user's thread
/// limits are usually far above this).
const MAX_BURN_THREADS: usize = 4096;

/// `cachesched burn`.
pub fn run(a: BurnArgs) -> Result<()> {
    if a.threads == 0 || a.work_us == 0 {
        bail!("--threads and --work-us must be at least 1");
    }
    if a.threads > MAX_BURN_THREADS {
        bail!(
            "--threads {} is too many: burn starts at most {MAX_BURN_THREADS} threads",
            a.threads
        );
    }
    if let Some(c) = a.cpu {
        cachesched_linux::sched::set_affinity(cachesched_linux::process::current_tid(), &[c])?;
    }
    let until = Instant::now() + Duration::from_millis(a.ms);
    let work = Duration::from_micros(a.work_us);
    let sleep = Duration::from_micros(a.sleep_us);
    let want = a.report;
    let mut handles = Vec::with_capacity(a.threads);
    for i in 0..a.threads {
        let h = std::thread::Builder::new()
            .spawn(move || {
                let rounds = spin(work, sleep, until);
                (rounds, want.then(|| report(rounds)))
            })
            .with_context(|| {
                format!(
                    "could not start thread {} of {}: lower --threads or raise the \
                     process's thread limit (ulimit -u)",
                    i + 1,
                    a.threads
                )
            })?;
        handles.push(h);
    }
    let mut rounds = 0;
    for h in handles {
        let (n, r) = h.join().expect("burn thread panicked");
        rounds += n;
        if let Some(r) = r {
            println!("{}", serde_json::to_string(&r?)?);
        }
    }
    if !want {
        eprintln!(
            "burn: {} thread(s) ran {} ms, {} round(s) of {} us of work and {} us of sleep in all \
             (--report: one JSON line per thread)",
            a.threads, a.ms, rounds, a.work_us, a.sleep_us
        );
    }
    Ok(())
}
