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
//!
//! With `--profile-bin-us`, each thread also records how fast it goes from the start of
//! each run on a CPU: a gap of over [`GAP`] between two looks at the clock means the
//! thread was switched out (or slept), and the steps of the run that follows go into
//! bins of that width from its start — the real machine's version of the longer
//! timeslices paper's Figure 3 (a cold cache at the start of every slice), measured by
//! progress where there are no miss counters.

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

/// A longer pause than this between two looks at the clock (one [`CHUNK`] of memory
/// steps: tens of microseconds) means the thread was off its CPU.
pub const GAP: Duration = Duration::from_micros(500);

/// Steps per bin from the start of each run on a CPU, summed over runs.
#[derive(Debug, Clone)]
struct Profile {
    bin: Duration,
    /// The run in progress: its start (`None` before the first gap: the thread's first
    /// run is not a return to a CPU) and its steps per bin.
    start: Option<Instant>,
    cur: Vec<u64>,
    /// Per bin: steps summed over the runs that covered it whole, and how many did.
    sums: Vec<u64>,
    counts: Vec<u64>,
    runs: u64,
}

impl Profile {
    fn new(bin: Duration) -> Profile {
        Profile {
            bin,
            start: None,
            cur: Vec::new(),
            sums: Vec::new(),
            counts: Vec::new(),
            runs: 0,
        }
    }

    /// A chunk of `steps` ended at `now`, the previous one at `last`.
    fn chunk(&mut self, last: Instant, now: Instant, steps: u64) {
        if now - last > GAP {
            self.close(last);
            // the chunk that spans the gap is not counted: most of it ran after it
            self.start = Some(now);
            return;
        }
        if let Some(s) = self.start {
            let i = ((now - s).as_nanos() / self.bin.as_nanos()) as usize;
            if self.cur.len() <= i {
                self.cur.resize(i + 1, 0);
            }
            self.cur[i] += steps;
        }
    }

    /// The run in progress ended at `end`: its whole bins are counted.
    fn close(&mut self, end: Instant) {
        let Some(s) = self.start.take() else { return };
        let whole = ((end - s).as_nanos() / self.bin.as_nanos()) as usize;
        if whole == 0 {
            self.cur.clear();
            return;
        }
        self.runs += 1;
        if self.sums.len() < whole {
            self.sums.resize(whole, 0);
            self.counts.resize(whole, 0);
        }
        for i in 0..whole {
            self.sums[i] += self.cur.get(i).copied().unwrap_or(0);
            self.counts[i] += 1;
        }
        self.cur.clear();
    }

    fn report(&self) -> RunProfile {
        let per_ms = 1e-3 / self.bin.as_secs_f64();
        RunProfile {
            bin_us: self.bin.as_micros() as u64,
            runs: self.runs,
            steps_per_ms: self
                .sums
                .iter()
                .zip(&self.counts)
                .map(|(&s, &n)| s as f64 / n as f64 * per_ms)
                .collect(),
            runs_per_bin: self.counts.clone(),
        }
    }
}

/// A thread's progress from the start of its runs on a CPU.
#[derive(Debug, Serialize)]
struct RunProfile {
    /// Bin width, microseconds.
    bin_us: u64,
    /// Runs that began after a gap and lasted at least one bin.
    runs: u64,
    /// Per bin from a run's start: steps per millisecond, the mean over the runs that
    /// covered the bin whole.
    steps_per_ms: Vec<f64>,
    /// Per bin: how many runs covered it whole.
    runs_per_bin: Vec<u64>,
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
    /// With --profile-bin-us: progress from the start of each run on a CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    run_profile: Option<RunProfile>,
}

/// What one thread did: rounds, steps, wall time, and its run profile if asked for.
struct Done {
    rounds: u64,
    steps: u64,
    wall: Duration,
    profile: Option<Profile>,
}

/// Busy rounds of `busy` time each (or of `CHUNK` steps for memory work), followed by
/// `sleep`, until `until` or, with `steps`, until that many steps are done.
fn spin(
    work: Work,
    buf: &[u64],
    (busy, sleep): (Duration, Duration),
    until: Instant,
    steps: Option<u64>,
    profile: Option<Duration>,
) -> Done {
    let start = Instant::now();
    let mut done = Done {
        rounds: 0,
        steps: 0,
        wall: Duration::ZERO,
        profile: profile.map(Profile::new),
    };
    let (mut at, mut acc) = (0usize, 0u64);
    let per_chunk = chunk_steps(work);
    let mut last = start;
    'run: while Instant::now() < until {
        let t0 = Instant::now();
        loop {
            let now = Instant::now();
            if let Some(p) = done.profile.as_mut() {
                p.chunk(last, now, per_chunk);
            }
            last = now;
            if now - t0 >= busy {
                break;
            }
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
    if let Some(p) = done.profile.as_mut() {
        p.close(last);
    }
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
        run_profile: d.profile.as_ref().map(Profile::report),
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
    if a.spawn_every_ms == Some(0) {
        bail!("--spawn-every-ms must be at least 1");
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
    let profile = match a.profile_bin_us {
        None => None,
        Some(_) if matches!(work, Work::Arith) => {
            bail!("--profile-bin-us needs memory work (--chase-kb or --sweep-kb)")
        }
        Some(us) if !(50..=1_000_000).contains(&us) => {
            bail!("--profile-bin-us {us} is out of range: give 50 to 1,000,000 microseconds")
        }
        Some(_) if !a.report => bail!("--profile-bin-us is reported with --report: add it"),
        Some(us) => Some(Duration::from_micros(us)),
    };
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
                let d = spin(work, &buf, (busy, sleep), until, steps, profile);
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
    let until = *start.get().expect("set above") + limit;
    let mut spawned = Vec::new();
    if let Some(every) = a.spawn_every_ms {
        while Instant::now() < until && spawned.len() < MAX_BURN_THREADS {
            let h = std::thread::Builder::new()
                .spawn(move || std::thread::sleep(until.saturating_duration_since(Instant::now())))
                .context("could not start a sleeping thread for --spawn-every-ms (ulimit -u)")?;
            spawned.push(h);
            std::thread::sleep(Duration::from_millis(every));
        }
    }
    for h in spawned {
        h.join().expect("a sleeping thread cannot panic");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs separated by gaps are binned from their starts; the first run (not a
    /// return to the CPU) and a run's last partial bin are not counted.
    #[test]
    fn profile_bins_runs_from_their_starts() {
        let us = Duration::from_micros;
        let t = Instant::now();
        let mut p = Profile::new(us(1000));
        // first run: chunks every 100 us for 2 ms, not counted
        let mut last = t;
        for k in 1..=20 {
            let now = t + us(100 * k);
            p.chunk(last, now, 10);
            last = now;
        }
        // two returns after 5 ms away, each 2.5 ms long: slow first bin, fast second
        for r in 0..2u64 {
            let back = last + us(5000);
            p.chunk(last, back, 10);
            last = back;
            for k in 1..=25u64 {
                let now = back + us(100 * k);
                p.chunk(last, now, if k <= 10 { 5 } else { 20 });
                last = now;
            }
            assert_eq!(p.runs, r, "a run is counted when it closes");
        }
        p.close(last);
        let r = p.report();
        assert_eq!(r.runs, 2);
        assert_eq!(
            r.runs_per_bin,
            vec![2, 2],
            "the half bin at the end is dropped"
        );
        // bin 0: chunks ending at 100..=900 us (9 x 5) plus the one at 1000 us, which
        // falls in bin 1 with the next nine fast ones
        assert_eq!(r.steps_per_ms, vec![45.0, 5.0 + 9.0 * 20.0]);
    }
}
