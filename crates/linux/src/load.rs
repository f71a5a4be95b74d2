//! A CPU-bound load with a known shape, the program behind `cachesched burn`: to try
//! `cachesched run` on, and to test and benchmark it. N threads each compute for a while
//! and optionally sleep, repeatedly, for a given time, then report what the kernel did
//! to them.
//!
//! The work is arithmetic by default, or memory-bound over a private working set of a
//! given size per thread: a pointer chase through a random cyclic permutation of its
//! 64-byte lines (every load depends on the one before, so the time per step is the
//! latency of wherever the line is cached: the cache-sensitive program of the affinity
//! and timeslice studies) or a line-by-line sweep (a base vector: it fills a cache).
//! Work is counted in steps (chase or sweep loads, or arithmetic rounds of 1,000
//! operations); with [`Load::steps`] each thread stops after that many and reports how
//! long it took (fixed work), else all stop after [`Load::ms`] (fixed time).
//!
//! With [`Load::profile_bin_us`], each thread also records how fast it goes from the
//! start of each run on a CPU: a gap of over [`GAP`] between two looks at the clock
//! means the thread was switched out (or slept), and the steps of the run that follows
//! go into bins of that width from its start — the real machine's version of the longer
//! timeslices paper's Figure 3 (a cold cache at the start of every slice), measured by
//! progress where there are no miss counters.

use crate::procfs::{self, ProcError};
use crate::sched::SchedError;
use serde::Serialize;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a load could not run.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A setting is out of range; the message names the option and what to give.
    #[error("{0}")]
    Invalid(String),
    /// Pinning failed.
    #[error(transparent)]
    Sched(#[from] SchedError),
    /// A thread's counts could not be read from /proc.
    #[error(transparent)]
    Proc(#[from] ProcError),
    /// A thread could not be started.
    #[error("{what}")]
    Spawn {
        /// Which thread, and what to do.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Most threads a load starts, working or sleeping (each has a stack; the kernel's and
/// the user's thread limits are usually far above this).
pub const MAX_THREADS: usize = 4096;

/// A load's shape. The names of the checks' messages are `cachesched burn`'s options.
#[derive(Debug, Clone)]
pub struct Load {
    /// Working threads, 1 to [`MAX_THREADS`].
    pub threads: usize,
    /// How long to run, milliseconds (with `steps`, a limit).
    pub ms: u64,
    /// Busy time per round, microseconds (at least 1).
    pub work_us: u64,
    /// Sleep per round, microseconds (0: never sleep).
    pub sleep_us: u64,
    /// Make one [`ThreadReport`] per thread.
    pub report: bool,
    /// Pin the whole process to this OS CPU first.
    pub cpu: Option<usize>,
    /// Pin thread i to the i-th CPU (mod their number) of the CPUs the process may use.
    pub pin_threads: bool,
    /// What each thread does.
    pub work: Work,
    /// Fixed work: each thread stops after this many steps.
    pub steps: Option<u64>,
    /// Wait this long after the threads are ready before they start together, ms.
    pub delay_ms: u64,
    /// Record each thread's steps per bin of this many microseconds from the start of
    /// every run on a CPU; 50 to 1,000,000, memory work and `report` only.
    pub profile_bin_us: Option<u64>,
    /// Besides the working threads, start a new thread every this many milliseconds
    /// (at most [`MAX_THREADS`] in all) that sleeps until the end.
    pub spawn_every_ms: Option<u64>,
}

/// What a load did.
#[derive(Debug)]
pub struct LoadOutcome {
    /// Busy rounds, summed over threads.
    pub rounds: u64,
    /// One report per thread, in thread order, when [`Load::report`] was set.
    pub reports: Vec<ThreadReport>,
}

impl Load {
    /// The profile's bin width, after checking every setting.
    fn check(&self) -> Result<Option<Duration>, LoadError> {
        let bad = |m: String| Err(LoadError::Invalid(m));
        if self.threads == 0 || self.work_us == 0 {
            return bad("--threads and --work-us must be at least 1".into());
        }
        if self.spawn_every_ms == Some(0) {
            return bad("--spawn-every-ms must be at least 1".into());
        }
        if self.threads > MAX_THREADS {
            return bad(format!(
                "--threads {} is too many: burn starts at most {MAX_THREADS} threads",
                self.threads
            ));
        }
        if matches!(self.work, Work::Chase(0) | Work::Sweep(0)) {
            return bad("--chase-kb and --sweep-kb need at least 1 KiB".into());
        }
        match self.profile_bin_us {
            None => Ok(None),
            Some(_) if matches!(self.work, Work::Arith) => {
                bad("--profile-bin-us needs memory work (--chase-kb or --sweep-kb)".into())
            }
            Some(us) if !(50..=1_000_000).contains(&us) => bad(format!(
                "--profile-bin-us {us} is out of range: give 50 to 1,000,000 microseconds"
            )),
            Some(_) if !self.report => {
                bad("--profile-bin-us is reported with --report: add it".into())
            }
            Some(us) => Ok(Some(Duration::from_micros(us))),
        }
    }

    /// Runs the load in this process and waits for every thread.
    pub fn run(&self) -> Result<LoadOutcome, LoadError> {
        let profile = self.check()?;
        let me = crate::process::current_tid;
        if let Some(c) = self.cpu {
            crate::sched::set_affinity(me(), &[c])?;
        }
        let work = self.work;
        let cpus = if self.pin_threads {
            crate::sched::affinity(me())?
        } else {
            Vec::new()
        };
        let busy = Duration::from_micros(self.work_us);
        let sleep = Duration::from_micros(self.sleep_us);
        let want = self.report;
        // every thread builds its working set, then all start together
        let gate = std::sync::Arc::new(Gate::default());
        let start = std::sync::Arc::new(std::sync::OnceLock::<Instant>::new());
        let (limit, steps) = (Duration::from_millis(self.ms), self.steps);
        let mut handles = Vec::with_capacity(self.threads);
        for i in 0..self.threads {
            let (g, start) = (gate.clone(), start.clone());
            let pin = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
            let h = std::thread::Builder::new()
                .spawn(move || -> Result<(u64, Option<ThreadReport>), LoadError> {
                    let pinned = match pin {
                        Some(c) => crate::sched::set_affinity(me(), &[c]).map(|_| Some(c)),
                        None => Ok(None),
                    };
                    let buf = working_set(work, i as u64 + 1);
                    // first touch, so that page faults are not timed
                    let mut acc = 0u64;
                    let _ = chunk(work, &buf, 0, &mut acc);
                    if !g.arrive() {
                        return Ok((0, None));
                    }
                    let pinned = pinned?;
                    let until = *start.get().expect("start set before the gate opens") + limit;
                    let d = spin(work, &buf, (busy, sleep), until, steps, profile);
                    // the report reads this thread's own counters, so it is made here
                    let r = if want {
                        Some(report(&d, pinned)?)
                    } else {
                        None
                    };
                    Ok((d.rounds, r))
                })
                .map_err(|source| LoadError::Spawn {
                    what: format!(
                        "could not start thread {} of {}: lower --threads or raise the \
                         process's thread limit (ulimit -u)",
                        i + 1,
                        self.threads
                    ),
                    source,
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // the threads started wait at the gate: send them home first
                    gate.call_off();
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(self.delay_ms));
        start.set(Instant::now()).expect("set once");
        gate.open(self.threads);
        let until = *start.get().expect("set above") + limit;
        let mut spawned = Vec::new();
        let mut failed = None;
        if let Some(every) = self.spawn_every_ms {
            while Instant::now() < until && spawned.len() < MAX_THREADS {
                match std::thread::Builder::new().spawn(move || {
                    std::thread::sleep(until.saturating_duration_since(Instant::now()))
                }) {
                    Ok(h) => spawned.push(h),
                    Err(source) => {
                        failed = Some(LoadError::Spawn {
                            what: "could not start a sleeping thread for --spawn-every-ms \
                                   (ulimit -u)"
                                .into(),
                            source,
                        });
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(every));
            }
        }
        for h in spawned {
            h.join().expect("a sleeping thread cannot panic");
        }
        let mut out = LoadOutcome {
            rounds: 0,
            reports: Vec::new(),
        };
        for h in handles {
            let (n, r) = h.join().expect("burn thread panicked")?;
            out.rounds += n;
            out.reports.extend(r);
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// Where the threads wait until all are ready and the start is given, or called off.
#[derive(Default)]
struct Gate {
    /// Threads ready, and the verdict: `None` waiting, `Some(true)` go, `Some(false)`
    /// called off.
    state: std::sync::Mutex<(usize, Option<bool>)>,
    cv: std::sync::Condvar,
}

impl Gate {
    /// A thread is ready; waits for the verdict and returns whether to go.
    fn arrive(&self) -> bool {
        let mut s = self.state.lock().expect("gate lock");
        s.0 += 1;
        self.cv.notify_all();
        loop {
            if let Some(go) = s.1 {
                return go;
            }
            s = self.cv.wait(s).expect("gate lock");
        }
    }

    /// Waits until `n` threads are ready, then lets them go.
    fn open(&self, n: usize) {
        let mut s = self.state.lock().expect("gate lock");
        while s.0 < n {
            s = self.cv.wait(s).expect("gate lock");
        }
        s.1 = Some(true);
        self.cv.notify_all();
    }

    /// Calls the start off: waiting threads return without working.
    fn call_off(&self) {
        self.state.lock().expect("gate lock").1 = Some(false);
        self.cv.notify_all();
    }
}

/// The work a thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
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

/// A longer pause than this between two looks at the clock (one chunk of 1,024 memory
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
#[derive(Debug, Clone, Serialize)]
pub struct RunProfile {
    /// Bin width, microseconds.
    pub bin_us: u64,
    /// Runs that began after a gap and lasted at least one bin.
    pub runs: u64,
    /// Per bin from a run's start: steps per millisecond, the mean over the runs that
    /// covered the bin whole.
    pub steps_per_ms: Vec<f64>,
    /// Per bin: how many runs covered it whole.
    pub runs_per_bin: Vec<u64>,
}

/// What one thread reports.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    /// The process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Voluntary context switches, as the kernel counted them.
    pub voluntary_switches: u64,
    /// Involuntary context switches (preemptions).
    pub involuntary_switches: u64,
    /// Migrations between CPUs, where the kernel reports them (schedstats).
    pub migrations: Option<u64>,
    /// CPU time, milliseconds.
    pub cpu_ms: f64,
    /// Busy rounds done.
    pub rounds: u64,
    /// Steps done (`rounds` × 1,000 arithmetic operations for arithmetic work).
    pub steps: u64,
    /// Wall time from the common start to this thread's last step, ms.
    pub wall_ms: f64,
    /// Steps per second of wall time.
    pub steps_per_s: f64,
    /// The OS CPU the thread was pinned to, if it was.
    pub pinned_to: Option<usize>,
    /// With --profile-bin-us: progress from the start of each run on a CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_profile: Option<RunProfile>,
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

/// What this thread did, with the kernel's counts for it (read here, by the thread).
fn report(d: &Done, pinned_to: Option<usize>) -> Result<ThreadReport, LoadError> {
    let pid = std::process::id() as i32;
    let tid = crate::process::current_tid();
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

    #[test]
    fn settings_out_of_range_are_refused_naming_the_option() {
        let ok = Load {
            threads: 2,
            ms: 10,
            work_us: 1000,
            sleep_us: 0,
            report: true,
            cpu: None,
            pin_threads: false,
            work: Work::Chase(64 << 10),
            steps: None,
            delay_ms: 0,
            profile_bin_us: Some(100),
            spawn_every_ms: None,
        };
        assert_eq!(ok.check().unwrap(), Some(Duration::from_micros(100)));
        let refused = |l: Load, opt: &str| {
            let e = l.check().unwrap_err().to_string();
            assert!(e.contains(opt), "{e}");
        };
        refused(
            Load {
                threads: 0,
                ..ok.clone()
            },
            "--threads",
        );
        refused(
            Load {
                threads: MAX_THREADS + 1,
                ..ok.clone()
            },
            "--threads",
        );
        refused(
            Load {
                work: Work::Sweep(0),
                ..ok.clone()
            },
            "--sweep-kb",
        );
        refused(
            Load {
                work: Work::Arith,
                ..ok.clone()
            },
            "memory work",
        );
        refused(
            Load {
                profile_bin_us: Some(10),
                ..ok.clone()
            },
            "50 to 1,000,000",
        );
        refused(
            Load {
                report: false,
                ..ok.clone()
            },
            "--report",
        );
        refused(
            Load {
                spawn_every_ms: Some(0),
                ..ok
            },
            "--spawn-every-ms",
        );
    }

    #[test]
    fn a_short_load_reports_every_thread_with_its_steps() {
        let l = Load {
            threads: 3,
            ms: 30,
            work_us: 1000,
            sleep_us: 0,
            report: true,
            cpu: None,
            pin_threads: false,
            work: Work::Sweep(16 << 10),
            steps: Some(4 * CHUNK),
            delay_ms: 0,
            profile_bin_us: None,
            spawn_every_ms: None,
        };
        let out = l.run().unwrap();
        assert_eq!(out.reports.len(), 3);
        let mut tids: Vec<i32> = out.reports.iter().map(|r| r.tid).collect();
        tids.sort_unstable();
        tids.dedup();
        assert_eq!(
            tids.len(),
            3,
            "one report per thread, each by its own thread"
        );
        for r in &out.reports {
            assert_eq!(r.steps, 4 * CHUNK, "fixed work stops at the step count");
            assert_eq!(r.pid, std::process::id() as i32);
        }
    }
}
