//! `cachesched burn`: a CPU-bound load with a known shape, to try `cachesched run` on and
//! to test and benchmark it: N threads that each compute for a while and optionally
//! sleep, repeatedly, for a given time, then report what the kernel did to them.
//!
//! The work is arithmetic by default, or memory-bound over a private working set of a
//! given size per thread: a pointer chase through a random cyclic permutation of its
//! 64-byte lines (every load depends on the one before, so the time per step is the
//! latency of wherever the line is cached: the cache-sensitive program of the affinity
//! and timeslice studies) or a line-by-line sweep (a base vector: it fills a cache).
//! Work is counted in steps (chase or sweep loads, or arithmetic rounds of 1,000
//! operations); with `--steps` each thread stops after that many and reports how long
//! it took (fixed work), else all stop after `--ms` (fixed time).

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
}

/// The work a thread does.
#[derive(Debug, Clone, Copy)]
enum Work {
    /// Arithmetic rounds of 1,000 multiply-adds.
    Arith,
    /// A pointer chase over this many bytes.
    Chase(usize),
    /// A line-by-line sweep over this many bytes.
    Sweep(usize),
}

/// Bytes per cache line the memory work is laid out in.
const LINE: usize = 64;

/// Memory steps between two looks at the clock or the step count (arithmetic work
/// looks after every step of 1,000 operations).
const CHUNK: u64 = 1024;

/// A working set of `bytes` (at least one line): for a chase, each line's first word
/// holds the index of the next line's first word in a random cyclic order (Sattolo's
/// algorithm, seeded by `seed`); for a sweep, zeros.
fn working_set(work: Work, seed: u64) -> Vec<u64> {
    let (bytes, chase) = match work {
        Work::Arith => return Vec::new(),
        Work::Chase(b) => (b, true),
        Work::Sweep(b) => (b, false),
    };
    let lines = (bytes / LINE).max(1);
    let words = LINE / 8;
    let mut buf = vec![0u64; lines * words];
    if chase {
        let mut order: Vec<usize> = (0..lines).collect();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for i in (1..lines).rev() {
            // xorshift64*
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let j = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) % i as u64) as usize;
            order.swap(i, j);
        }
        for k in 0..lines {
            buf[order[k] * words] = (order[(k + 1) % lines] * words) as u64;
        }
    }
    buf
}

/// Steps `work` does between two looks at the clock.
fn chunk_steps(work: Work) -> u64 {
    match work {
        Work::Arith => 1,
        _ => CHUNK,
    }
}

/// Does [`chunk_steps`] steps of `work` over `buf` from position `at`; returns the
/// next position (the chase's current line, the sweep's next line).
#[inline(never)]
fn chunk(work: Work, buf: &[u64], mut at: usize, acc: &mut u64) -> usize {
    match work {
        Work::Arith => {
            let mut x = *acc | 1;
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            *acc = x;
        }
        Work::Chase(_) => {
            for _ in 0..CHUNK {
                at = buf[at] as usize;
            }
            *acc = acc.wrapping_add(at as u64);
        }
        Work::Sweep(_) => {
            let words = LINE / 8;
            let mut sum = 0u64;
            for _ in 0..CHUNK {
                sum = sum.wrapping_add(buf[at]);
                at += words;
                if at >= buf.len() {
                    at = 0;
                }
            }
            *acc = acc.wrapping_add(std::hint::black_box(sum));
        }
    }
    at
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
    /// Steps done (`rounds` × 1,000 arithmetic operations for arithmetic work).
    steps: u64,
    /// Wall time from the common start to this thread's last step, ms.
    wall_ms: f64,
    /// Steps per second of wall time.
    steps_per_s: f64,
    /// The OS CPU the thread was pinned to, if it was.
    pinned_to: Option<usize>,
}

/// What one thread did: rounds, steps, wall time.
struct Done {
    rounds: u64,
    steps: u64,
    wall: Duration,
}

/// Busy rounds of `busy` time each (or of `CHUNK` steps for memory work), followed by
/// `sleep`, until `until` or, with `steps`, until that many steps are done.
fn spin(
    work: Work,
    buf: &[u64],
    (busy, sleep): (Duration, Duration),
    until: Instant,
    steps: Option<u64>,
) -> Done {
    let start = Instant::now();
    let mut done = Done {
        rounds: 0,
        steps: 0,
        wall: Duration::ZERO,
    };
    let (mut at, mut acc) = (0usize, 0u64);
    let per_chunk = chunk_steps(work);
    'run: while Instant::now() < until {
        let t0 = Instant::now();
        while t0.elapsed() < busy {
            if steps.is_some_and(|n| done.steps >= n) {
                break 'run;
            }
            at = chunk(work, buf, at, &mut acc);
            done.steps += per_chunk;
        }
        done.rounds += 1;
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
    }
    std::hint::black_box(acc);
    done.wall = start.elapsed();
    done
}

fn report(d: &Done, pinned_to: Option<usize>) -> Result<ThreadReport> {
    let pid = std::process::id() as i32;
    let tid = cachesched_linux::process::current_tid();
    let sw = procfs::thread_switches(pid, tid)?;
    let wall_s = d.wall.as_secs_f64();
    Ok(ThreadReport {
        pid,
        tid,
        voluntary_switches: sw.voluntary,
        involuntary_switches: sw.involuntary,
        migrations: procfs::thread_migrations(pid, tid)?,
        cpu_ms: procfs::thread_cpu_ns(pid, tid)? as f64 / 1e6,
        rounds: d.rounds,
        steps: d.steps,
        wall_ms: wall_s * 1e3,
        steps_per_s: if wall_s > 0.0 {
            d.steps as f64 / wall_s
        } else {
            0.0
        },
        pinned_to,
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
    let work = match (a.chase_kb, a.sweep_kb) {
        (Some(kb), _) => Work::Chase((kb as usize) << 10),
        (_, Some(kb)) => Work::Sweep((kb as usize) << 10),
        _ => Work::Arith,
    };
    if matches!(work, Work::Chase(0) | Work::Sweep(0)) {
        bail!("--chase-kb and --sweep-kb need at least 1 KiB");
    }
    let cpus = if a.pin_threads {
        cachesched_linux::sched::affinity(cachesched_linux::process::current_tid())?
    } else {
        Vec::new()
    };
    let busy = Duration::from_micros(a.work_us);
    let sleep = Duration::from_micros(a.sleep_us);
    let want = a.report;
    // every thread builds its working set, then all start together
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(a.threads + 1));
    let start = std::sync::Arc::new(std::sync::OnceLock::<Instant>::new());
    let (limit, steps) = (Duration::from_millis(a.ms), a.steps);
    let mut handles = Vec::with_capacity(a.threads);
    for i in 0..a.threads {
        let (barrier, start) = (barrier.clone(), start.clone());
        let pin = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let h = std::thread::Builder::new()
            .spawn(move || -> Result<(u64, Option<ThreadReport>)> {
                let pinned = match pin {
                    Some(c) => cachesched_linux::sched::set_affinity(
                        cachesched_linux::process::current_tid(),
                        &[c],
                    )
                    .map(|_| Some(c)),
                    None => Ok(None),
                };
                let buf = working_set(work, i as u64 + 1);
                // first touch, so that page faults are not timed
                let mut acc = 0u64;
                let _ = chunk(work, &buf, 0, &mut acc);
                barrier.wait();
                let pinned = pinned?;
                let until = *start.get().expect("start set before the barrier") + limit;
                let d = spin(work, &buf, (busy, sleep), until, steps);
                // the report reads this thread's own counters, so it is made here
                let r = if want {
                    Some(report(&d, pinned)?)
                } else {
                    None
                };
                Ok((d.rounds, r))
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
    std::thread::sleep(Duration::from_millis(a.delay_ms));
    start.set(Instant::now()).expect("set once");
    barrier.wait();
    let mut rounds = 0;
    for h in handles {
        let (n, r) = h.join().expect("burn thread panicked")?;
        rounds += n;
        if let Some(r) = r {
            println!("{}", serde_json::to_string(&r)?);
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
