//! The daemon's address-sampling path on a real child process: a policy that sets a
//! sampling period receives [`AddressSample`]s from the child's threads, with the
//! addresses they touched, also from a thread that appears later; `None` closes the
//! events; a policy that requires samples refuses to start where there is no event.
//!
//! The sampling event is software page faults ([`SamplingEventChoice::PageFaults`]),
//! which every Linux host has: the same rings, parser and delivery as a memory-load
//! event, with addresses the test knows in advance. The child is this test binary run
//! again as the ignored test `faulter_child`: each of its worker threads writes one
//! known offset of every page of its own region, gives the pages back
//! (MADV_DONTNEED) and starts over, so each write is one page fault at a known address.

use cachesched_core::{AddressSample, CounterKind, Ctx, Nanos, Policy, ThreadId};
use cachesched_linux::daemon::{DaemonError, SamplingEventChoice, Target};
use cachesched_linux::sched::Settings;
use cachesched_linux::{procfs, read_host_topology, Daemon, DaemonConfig};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Set in the child's environment: run as the fault generator.
const CHILD_ENV: &str = "CACHESCHED_TEST_FAULTER";
/// Pages in each worker's region.
const REGION_PAGES: usize = 64;

/// One worker thread of the child, as it reports itself.
#[derive(Debug, Clone, Copy)]
struct Worker {
    /// Its thread id.
    tid: i32,
    /// Its region's first byte.
    start: u64,
    /// One past its region's last byte.
    end: u64,
    /// The offset it writes in every page.
    offset: u64,
}

/// The page size.
fn page_size() -> u64 {
    cachesched_linux::sampling::page_size() as u64
}

/// A worker: maps its region, reports itself on stdout, then faults its pages in over
/// and over (a round of 64 faults every 2 ms).
fn worker(index: usize) {
    let ps = page_size() as usize;
    let len = REGION_PAGES * ps;
    // SAFETY: a fresh anonymous mapping; checked below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    // SAFETY: advice on the mapping just made (one fault per page, no huge pages).
    unsafe { libc::madvise(base, len, libc::MADV_NOHUGEPAGE) };
    let offset = 8 + 16 * index;
    println!(
        "worker {index} {} {} {} {offset}",
        cachesched_linux::process::current_tid(),
        base as u64,
        base as u64 + len as u64
    );
    std::io::stdout().flush().unwrap();
    loop {
        for i in 0..REGION_PAGES {
            // SAFETY: inside the mapping, which is writable.
            unsafe { std::ptr::write_volatile((base as *mut u8).add(i * ps + offset), 1) };
        }
        // SAFETY: gives the region's pages back, so the next writes fault again.
        unsafe { libc::madvise(base, len, libc::MADV_DONTNEED) };
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The child process (run by the tests below with [`CHILD_ENV`] set; does nothing
/// otherwise): starts worker 0, a second worker when a line arrives on stdin, and exits
/// at the end of stdin.
#[test]
#[ignore]
fn faulter_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    std::thread::spawn(|| worker(0));
    let mut lines = std::io::stdin().lock().lines();
    if lines.next().is_some() {
        std::thread::spawn(|| worker(1));
    }
    while lines.next().is_some() {}
    std::process::exit(0);
}

/// The child, its stdin and its stdout's lines.
struct Faulter {
    /// The process.
    child: Child,
    /// Its stdin (a line starts worker 1; closing it ends the child).
    stdin: Option<ChildStdin>,
    /// Its stdout.
    stdout: BufReader<ChildStdout>,
}

impl Faulter {
    /// Starts the child and waits for worker 0.
    fn start() -> (Faulter, Worker) {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "faulter_child", "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut f = Faulter {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        let w = f.next_worker();
        (f, w)
    }

    /// The next worker line of the child's stdout (other output is the test harness's).
    fn next_worker(&mut self) -> Worker {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the child ended before reporting a worker");
            // the harness's "test faulter_child ... " may precede it on the line
            let Some(at) = line.find("worker ") else {
                continue;
            };
            let f: Vec<&str> = line[at..].split_whitespace().collect();
            if f.len() == 6 {
                let num = |i: usize| f[i].parse::<u64>().unwrap();
                return Worker {
                    tid: num(2) as i32,
                    start: num(3),
                    end: num(4),
                    offset: num(5),
                };
            }
        }
    }

    /// Starts worker 1 and waits for it.
    fn more(&mut self) -> Worker {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"more\n").unwrap();
        stdin.flush().unwrap();
        self.next_worker()
    }

    /// The process id.
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Faulter {
    fn drop(&mut self) {
        self.stdin.take(); // end of stdin: the child exits
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the test policy saw, shared with the test.
#[derive(Default)]
struct Seen {
    /// Every address sample, in delivery order.
    samples: Vec<AddressSample>,
    /// Threads reported started.
    started: Vec<ThreadId>,
}

/// A policy that turns on page-fault sampling with period 1 and a 10 ms tick, records
/// every sample, and turns sampling off at the first tick after `stop` is set.
struct Collector {
    /// What it saw.
    seen: Arc<Mutex<Seen>>,
    /// Set by the test to stop sampling.
    stop: Arc<AtomicBool>,
    /// Whether it requires address samples.
    requires: bool,
    /// Counters it requires.
    counters: Vec<CounterKind>,
    /// Whether it turned sampling off.
    stopped: bool,
}

impl Collector {
    /// A collector and what it will see.
    fn new(requires: bool) -> (Collector, Arc<Mutex<Seen>>, Arc<AtomicBool>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let c = Collector {
            seen: seen.clone(),
            stop: stop.clone(),
            requires,
            counters: Vec::new(),
            stopped: false,
        };
        (c, seen, stop)
    }
}

impl Policy for Collector {
    fn name(&self) -> &str {
        "collector"
    }
    fn required_counters(&self) -> Vec<CounterKind> {
        self.counters.clone()
    }
    fn requires_address_samples(&self) -> bool {
        self.requires
    }
    fn init(&mut self, ctx: &mut Ctx<'_>) {
        ctx.set_tick_period(Some(Nanos(10_000_000)));
        ctx.set_sampling_period(Some(1));
    }
    fn thread_started(&mut self, _ctx: &mut Ctx<'_>, thread: ThreadId) {
        self.seen.lock().unwrap().started.push(thread);
    }
    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if !self.stopped && self.stop.load(Ordering::SeqCst) {
            ctx.set_sampling_period(None);
            self.stopped = true;
        }
    }
    fn address_sample(&mut self, _ctx: &mut Ctx<'_>, sample: &AddressSample) {
        self.seen.lock().unwrap().samples.push(*sample);
    }
}

/// Samples of thread `tid` seen so far.
fn count_of(seen: &Mutex<Seen>, tid: i32) -> usize {
    let s = seen.lock().unwrap();
    s.samples
        .iter()
        .filter(|a| a.thread.0 == tid as u32)
        .count()
}

/// Polls the daemon until `done` or 5 s have passed (then fails with `what`).
fn poll_until(d: &mut Daemon, what: &str, mut done: impl FnMut(&Daemon) -> bool) {
    let t0 = Instant::now();
    while !done(d) {
        assert!(t0.elapsed() < Duration::from_secs(5), "timed out: {what}");
        std::thread::sleep(d.next_due().saturating_duration_since(Instant::now()));
        d.poll().unwrap();
    }
}

/// A daemon on `pid` alone, without stats counters.
fn start(policy: Collector, pid: i32, choice: SamplingEventChoice) -> Result<Daemon, DaemonError> {
    let config = DaemonConfig {
        stats_counters: false,
        ..DaemonConfig::default()
    };
    let target = Target::Processes {
        pids: vec![pid],
        children: false,
    };
    Daemon::start_with(
        read_host_topology().unwrap(),
        Box::new(policy),
        target,
        config,
        choice,
    )
}

/// A policy that sets a sampling period gets samples from the child's threads with
/// exactly the addresses those threads wrote (each worker's region, at its own offset
/// in the page), also from a worker that started after sampling was turned on; samples
/// the kernel dropped from a ring left undrained show in the stats as lost; after the
/// policy sets the period to `None`, every event is closed and nothing more arrives.
/// Fails if the daemon never opens events (no samples), opens none for a thread that
/// appears later, attributes a sample to the wrong thread, mangles addresses, drops the
/// LOST counts, or keeps events open (or delivering) after `None`.
#[test]
fn a_policy_setting_a_sampling_period_gets_the_childs_addresses() {
    let (mut child, w0) = Faulter::start();
    let (policy, seen, stop) = Collector::new(true);
    let mut d = match start(policy, child.pid(), SamplingEventChoice::PageFaults) {
        Ok(d) => d,
        Err(DaemonError::MissingSampling { events, .. }) if events.contains("not permitted") => {
            eprintln!("skipped: perf_event_open is denied here: {events}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(d.sampling_events().len(), 1);
    assert_eq!(d.sampled_threads(), d.threads(), "an event on every thread");
    // well over three rounds of worker 0's region
    poll_until(&mut d, "samples of worker 0", |_| {
        count_of(&seen, w0.tid) >= 200
    });
    let w1 = child.more();
    poll_until(&mut d, "samples of the later worker", |_| {
        count_of(&seen, w1.tid) >= 200
    });
    assert!(d.threads() >= 3, "{} threads managed", d.threads());
    assert_eq!(d.sampled_threads(), d.threads());
    // left undrained for 150 ms, each worker's ring (8 pages: 819 records of 40 bytes)
    // fills with ~4,800 faults; the kernel reports the loss in a LOST record written
    // with the next record that fits, after the drain: it reaches the statistics
    let before = d.sample_totals();
    d.stats();
    std::thread::sleep(Duration::from_millis(150));
    poll_until(&mut d, "lost samples reported", |d| {
        d.sample_totals().lost > before.lost
    });
    let rec = d.stats();
    eprintln!("{}", rec.line());
    let interval = rec.address_samples.expect("sampling is on");
    assert!(interval.lost > 0, "{interval:?}");
    assert!(
        interval.delivered >= 2 * 819,
        "both full rings read whole: {interval:?}"
    );
    stop.store(true, Ordering::SeqCst);
    poll_until(&mut d, "events closed", |d| d.sampled_threads() == 0);
    let after_stop = seen.lock().unwrap().samples.len();
    let totals = d.sample_totals();
    // a few more drains' worth of time: nothing may arrive
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(60) {
        std::thread::sleep(Duration::from_millis(5));
        d.poll().unwrap();
    }
    let tasks = procfs::tasks(child.pid()).unwrap();
    d.finish();
    let (n0, n1) = (count_of(&seen, w0.tid), count_of(&seen, w1.tid));
    let s = seen.lock().unwrap();
    assert_eq!(
        s.samples.len(),
        after_stop,
        "samples after sampling stopped"
    );
    assert_eq!(totals.delivered as usize, s.samples.len());
    assert_eq!(
        totals.filtered, 0,
        "page faults carry no data source to filter on"
    );
    eprintln!(
        "delivered {} samples ({} lost); worker 0: {n0}, worker 1: {n1}",
        totals.delivered, totals.lost
    );
    assert!(s.started.contains(&ThreadId(w1.tid as u32)));
    let ps = page_size();
    let cpus = read_host_topology().unwrap().os_cpu.len();
    for a in &s.samples {
        assert!(
            tasks.contains(&(a.thread.0 as i32)),
            "sample of thread {} not of the child ({tasks:?})",
            a.thread.0
        );
        for w in [w0, w1] {
            if a.thread.0 == w.tid as u32 {
                assert!(
                    (w.start..w.end).contains(&a.addr.0) && (a.addr.0 - w.start) % ps == w.offset,
                    "worker {w:?} sampled at {:#x}",
                    a.addr.0
                );
            }
        }
        assert!(a.cpu.index() < cpus && !a.is_write);
    }
}

/// A policy that requires address samples refuses to start where no sampling event
/// exists (an empty sysfs tree here, so that this holds on any host), naming the policy,
/// the missing events and, in the same message, any counter it requires that is
/// missing; nothing is changed on the target. The same policy without the requirement
/// starts, and its sampling period is reported as a warning and ignored. Fails if the
/// daemon starts a requiring policy blind, gives two errors for one refusal, or drops
/// the counters from the message.
#[test]
fn without_a_sampling_event_a_policy_that_requires_samples_refuses() {
    let mut sleeper = Command::new("sleep").arg("10").spawn().unwrap();
    let pid = sleeper.id() as i32;
    let before = Settings::read(pid).unwrap();
    let empty = std::env::temp_dir().join(format!("cachesched-no-pmu-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let none = SamplingEventChoice::DiscoverAt(empty.clone());

    let (mut policy, _, _) = Collector::new(true);
    policy.counters = vec![CounterKind::LlcMisses];
    let llc_missing = cachesched_linux::daemon::available_counters()
        .iter()
        .any(|(k, r)| *k == CounterKind::LlcMisses && r.is_err());
    let err = start(policy, pid, none.clone()).err().expect("must refuse");
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(
        matches!(err, DaemonError::MissingSampling { .. }),
        "{err:?}"
    );
    assert!(
        msg.starts_with("policy 'collector' needs data-address samples"),
        "{msg}"
    );
    let e = empty.display();
    assert!(
        msg.contains(&format!(
            "no precise memory-load event: {e}/cpu/events/mem-loads and {e}/ibs_op do not exist"
        )),
        "{msg}"
    );
    assert_eq!(
        msg.contains(
            "
  llc_misses: "
        ),
        llc_missing,
        "{msg}"
    );
    assert_eq!(Settings::read(pid).unwrap(), before, "nothing changed");

    // without the requirement: started, warned, no events
    let (policy, seen, _) = Collector::new(false);
    let mut d = start(policy, pid, none).unwrap();
    let warnings = d.take_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("asked for address sampling") && w.contains("mem-loads")),
        "{warnings:?}"
    );
    assert_eq!(d.sampled_threads(), 0);
    d.poll().unwrap();
    assert!(seen.lock().unwrap().samples.is_empty());
    d.finish();

    // this host's own sysfs: a refusal exactly where discovery finds nothing
    let (policy, _, _) = Collector::new(true);
    let host = cachesched_linux::sampling::memory_sampling_events();
    match (start(policy, pid, SamplingEventChoice::Discover), host) {
        (Err(DaemonError::MissingSampling { events, .. }), Err(e)) => {
            assert!(events.starts_with(&e.to_string()), "{events}")
        }
        (Err(DaemonError::MissingSampling { events, .. }), Ok(_)) => {
            assert!(events.contains("not permitted"), "{events}")
        }
        (Ok(d), Ok(_)) => drop(d),
        (r, h) => panic!("start: {:?}, host events: {h:?}", r.err()),
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let _ = std::fs::remove_dir_all(&empty);
}
