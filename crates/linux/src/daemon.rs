//! The daemon: one [`Policy`] driving real threads.
//!
//! [`Daemon`] implements the policy API's kernel side on Linux. It follows the managed
//! threads through `/proc` (a launched command and its descendants, given processes, or
//! a cgroup), shows them to the policy as [`ThreadView`]s with `perf_event_open`
//! counters, and carries out the policy's directives with `sched_setaffinity`,
//! `sched_setattr` and `setpriority` through a [`Journal`], so that every change can be
//! undone: [`Daemon::finish`] — and, if it is never called (an error, a panic unwinding
//! the stack), dropping the daemon — restores every setting it changed on the threads
//! still alive. The caller owns the loop: it sleeps until [`Daemon::next_due`], calls
//! [`Daemon::poll`], and asks for [`Daemon::stats`] when it wants a line.
//!
//! Mapping of directives:
//! - `SetMask` → `sched_setaffinity` (dense CPU numbers mapped to the OS's); `None` puts
//!   the original mask back.
//! - `SetSlice` → `sched_setattr` with the thread's policy and nice kept (a request the
//!   kernel honours for fair threads since 6.12); `None` puts the original back.
//! - `SetNice` → `setpriority` on the thread id; `None` puts the original back.
//! - `Boost` → the nice value lowered by [`DaemonConfig::boost_nice`] while boosted.
//! - `SetTickPeriod` → the period of [`Policy::tick`].
//! - `SetSamplingPeriod` → a [`SampledEvent`] per managed thread (and per thread that
//!   appears later) with that period, on the host's precise memory-load event
//!   ([`sampling::memory_sampling_events`]) or the event chosen with
//!   [`SamplingEventChoice`]; `None` closes them all. Where no event exists, a policy
//!   that [requires](Policy::requires_address_samples) samples refuses to start
//!   ([`DaemonError::MissingSampling`]); for any other policy the directive is reported
//!   as a warning, once, and ignored.
//!
//! While sampling is on, every thread's rings are drained before each tick, before a
//! thread's exit is reported, and at least every [`SAMPLE_DRAIN_MS`] ms; their samples
//! go to [`Policy::address_sample`] in one hook call per drain, as
//! [`AddressSample`]s (`is_write` false: the events sample loads). Samples of a
//! memory-load event are kept only when their data source says another cache served
//! them ([`sampling::is_remote_cache_hit`]); the rest are counted as filtered, and
//! samples the kernel had no room for as lost ([`SampleStats`]).
//!
//! Counters in a [`ThreadView`] count from when the daemon started watching the thread,
//! and are refreshed before each tick (when the policy requires counters) and for each
//! stats line. A policy whose counters the machine lacks refuses to start, naming each
//! ([`DaemonError::MissingCounters`]), before anything is changed.
//!
//! Co-run segments ([`crate::corun`]) are built at each tick for a policy that wants
//! them, from every thread's task clock, migrations and last CPU (re-read for all
//! threads at each tick, whatever the state budget): a cache instance yields a segment
//! over the tick interval when every thread that ran on its CPUs ran throughout it. A
//! policy that requires segments (CASC, cache-fair) needs those two software counters
//! as well; one that only wants them is warned where they are missing.
//!
//! Threads get their class ([`cachesched_core::ThreadInfo::class`]) from
//! [`DaemonConfig::classes`] when they are taken over ([`crate::classes`]).

use crate::claim::{claim, Claim, ClaimError};
use crate::classes::{ClassRule, Classifier};
use crate::corun::{Sample, SegmentBuilder};
use crate::events::EventMap;
use crate::journal::{Journal, RestoreReport};
use crate::perf::{self, Counter, PerfError};
use crate::procfs::{self, Pid, ProcError, Stat, StatFile};
use crate::sampling::{self, EventSpec, SampledEvent, SamplingError};
use crate::sched::{SchedError, Settings, Tid};
use crate::sysfs::HostTopology;
use cachesched_core::{
    policy::KernelView, Addr, AddressSample, CounterKind, Counters, CpuId, Cpumask, Ctx, Directive,
    Nanos, Policy, SimRng, ThreadId, ThreadInfo, ThreadView, Topology,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Which threads the daemon manages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// Every descendant of this process: the command it launched, that command's
    /// children, and orphans reparented to it (see [`become_subreaper`]).
    Descendants,
    /// These processes, and with `children` their descendants as they appear.
    Processes {
        /// The processes.
        pids: Vec<Pid>,
        /// Whether to follow their children.
        children: bool,
    },
    /// Every thread of a cgroup (v1 `tasks` or v2 `cgroup.threads`).
    Cgroup(PathBuf),
}

impl Target {
    /// Whether what it names exists: every process, the cgroup's thread list. Checked
    /// by [`Daemon::start`]; a command line may check first, before it prints anything.
    pub fn check(&self) -> Result<(), DaemonError> {
        match self {
            Target::Processes { pids, .. } => {
                for &pid in pids {
                    if procfs::process_stat(pid).is_err() {
                        return Err(DaemonError::NoSuchProcess { pid });
                    }
                }
            }
            Target::Cgroup(dir) => {
                procfs::cgroup_threads(dir).map_err(|e| DaemonError::Cgroup {
                    path: dir.display().to_string(),
                    reason: format!(
                        "{e} (give the cgroup's directory, e.g. /sys/fs/cgroup/cpu/mygroup)"
                    ),
                })?;
            }
            Target::Descendants => {}
        }
        Ok(())
    }
}

/// A thread runs throughout a sampling interval, or not at all, within this fraction
/// of it ([`SegmentBuilder`]).
const SEGMENT_TOLERANCE: f64 = 0.1;

/// While sampling is on, the rings are drained at least this often, ms (and before
/// every tick). With [`SAMPLE_DATA_PAGES`] pages a thread can take ~50,000 samples per
/// second (56-byte records of memory-load events) before the kernel drops some.
pub const SAMPLE_DRAIN_MS: u64 = 10;

/// Data pages of each thread's sampling ring (32 KiB with 4 KiB pages; plus a header
/// page). Without privilege, perf buffers beyond `perf_event_mlock_kb` (516 KiB per
/// user by default) count against RLIMIT_MEMLOCK.
pub const SAMPLE_DATA_PAGES: usize = 8;

/// Data addresses at or above this are kernel addresses (x86-64 and arm64), dropped from
/// events that also sample kernel mode (AMD IBS).
const KERNEL_HALF: u64 = 1 << 63;

/// Which event the daemon samples addresses with when a policy sets a sampling period.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SamplingEventChoice {
    /// The host's precise memory-load events, found in sysfs
    /// ([`sampling::memory_sampling_events`]); none in a VM without a PMU (the default).
    #[default]
    Discover,
    /// As [`SamplingEventChoice::Discover`], under another directory standing for
    /// `/sys/bus/event_source/devices` (for tests).
    DiscoverAt(PathBuf),
    /// Software page faults ([`EventSpec::page_faults`]): for testing the path on hosts
    /// without a PMU; page faults are not remote-cache accesses.
    PageFaults,
}

impl SamplingEventChoice {
    /// The events chosen, each opened once on the calling thread to see that the kernel
    /// lets it be sampled, or why there are none.
    fn resolve(&self) -> Result<Vec<EventSpec>, String> {
        let specs = match self {
            SamplingEventChoice::Discover => sampling::memory_sampling_events(),
            SamplingEventChoice::DiscoverAt(root) => sampling::memory_sampling_events_at(root),
            SamplingEventChoice::PageFaults => Ok(vec![EventSpec::page_faults()]),
        }
        .map_err(|e| e.to_string())?;
        let tid = crate::process::current_tid();
        let mut why = Vec::new();
        let usable: Vec<EventSpec> = specs
            .into_iter()
            .filter(|spec| match SampledEvent::open(tid, spec, 1_000_000, 1) {
                Ok(_) => true,
                Err(e) => {
                    why.push(e.to_string());
                    false
                }
            })
            .collect();
        if usable.is_empty() {
            return Err(why.join("; "));
        }
        Ok(usable)
    }
}

/// Settings of the daemon loop. Defaults are documented per field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DaemonConfig {
    /// How often `/proc` is scanned for threads that started or exited, ms (default 20).
    pub scan_ms: f64,
    /// At most this share of one CPU, in percent, is spent re-reading thread states
    /// (runnable, last CPU: one `/proc` file per thread, ~5 µs each) before the ticks
    /// of a policy that reads them (default 0.4, so that the whole daemon stays under 1%
    /// of a CPU at 1,000 threads: `cachesched bench daemon`). Each tick re-reads the
    /// states read longest ago until its share of the tick period is spent, so with
    /// many threads a state is re-read less often than every tick (about every second
    /// at 1,000 threads; the stats line shows how often).
    pub state_budget_pct: f64,
    /// How much a boost lowers a thread's nice value (default 10).
    pub boost_nice: i32,
    /// Open per-thread counters for stats (context switches, migrations, CPU time, and
    /// instructions/LLC misses where the PMU has them) even when the policy needs none
    /// (default true).
    pub stats_counters: bool,
    /// Seed of the policy's random number generator (default 1).
    pub seed: u64,
    /// A journal file recording every change before it is made, for `cachesched
    /// restore` if the daemon is killed without restoring (default none).
    pub journal: Option<PathBuf>,
    /// Rules giving threads a class ([`crate::classes`]), first match wins (default
    /// none: no thread has a class).
    pub classes: Vec<ClassRule>,
    /// perf events for counters, tried before the built-in mapping: the model-specific
    /// ones (remote-cache accesses and stalls) have none built in (default: none).
    pub counter_events: EventMap,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            scan_ms: 20.0,
            state_budget_pct: 0.4,
            boost_nice: 10,
            stats_counters: true,
            seed: 1,
            journal: None,
            classes: Vec::new(),
            counter_events: EventMap::new(),
        }
    }
}

/// Why the daemon could not start or had to stop.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// The policy requires counters this machine does not provide.
    #[error("policy '{policy}' needs counters this machine does not provide, so it will not start:\n{}", missing.iter().map(|(k, why)| format!("  {}: {why}", k.name())).collect::<Vec<_>>().join("\n"))]
    MissingCounters {
        /// The policy.
        policy: String,
        /// Each missing counter and why (the task clock and migrations included for a
        /// policy that requires co-run segments, which are built from them).
        missing: Vec<(CounterKind, String)>,
    },
    /// The policy requires address samples, which this machine cannot take (and perhaps
    /// counters it does not provide as well).
    #[error("policy '{policy}' needs data-address samples{} this machine does not provide, so it will not start:\n  address samples: {events}{}", if .counters.is_empty() { "" } else { " and counters" }, .counters.iter().map(|(k, why)| format!("\n  {}: {why}", k.name())).collect::<String>())]
    MissingSampling {
        /// The policy.
        policy: String,
        /// Why there is no sampling event (what is missing).
        events: String,
        /// Each counter it requires that is missing too, and why (as in
        /// [`DaemonError::MissingCounters`]).
        counters: Vec<(CounterKind, String)>,
    },
    /// A managed process does not exist.
    #[error("process {pid} does not exist (check the --pid value)")]
    NoSuchProcess {
        /// The process.
        pid: Pid,
    },
    /// The kernel refused a change for lack of privilege.
    #[error("not permitted to change thread {tid}: {source}\n  run cachesched as root or with CAP_SYS_NICE (raising priority or changing other users' threads needs it); every change made so far has been undone")]
    Permission {
        /// The thread.
        tid: Tid,
        /// The refused call.
        source: SchedError,
    },
    /// The journal file cannot be created.
    #[error(transparent)]
    Journal(SchedError),
    /// A process is managed by another daemon, or cannot be claimed.
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// Out of file descriptors for counters.
    #[error("cannot open more performance counters ({source}): each managed thread needs {per_thread} descriptor(s); raise the limit with `ulimit -n` or pass --no-stats-counters")]
    TooManyFiles {
        /// Descriptors per thread.
        per_thread: usize,
        /// The error.
        source: PerfError,
    },
    /// Reading `/proc` or a cgroup failed.
    #[error(transparent)]
    Proc(#[from] ProcError),
    /// A class rule is not usable.
    #[error(transparent)]
    Class(crate::classes::ClassError),
    /// The cgroup directory is not usable.
    #[error("cannot use cgroup {path}: {reason}")]
    Cgroup {
        /// The directory.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// One managed thread.
#[derive(Debug)]
struct Tracked {
    pid: Pid,
    info: ThreadInfo,
    stat: Stat,
    stat_file: StatFile,
    perf: Vec<Counter>,
    counters: Counters,
    /// Its sampling events while sampling is on, each with its index in
    /// [`Sampling::events`].
    samplers: Vec<(usize, SampledEvent)>,
    /// Dense CPUs it may use.
    mask: Cpumask,
    /// The nice value the policy asked for (`None`: the original).
    policy_nice: Option<i32>,
    /// Its original nice value.
    orig_nice: i32,
    boosted: bool,
}

impl Tracked {
    /// Re-reads the thread's state (one exited is left as it was, for the next scan).
    fn reread_state(&mut self) {
        if let Ok(s) = self.stat_file.read() {
            self.stat = s;
        }
    }
}

/// What the policy sees: the managed threads and the host.
struct State {
    host: HostTopology,
    start: Instant,
    threads: BTreeMap<Tid, Tracked>,
    kinds: Vec<CounterKind>,
}

impl State {
    fn dense_mask(&self, os_cpus: &[usize]) -> Cpumask {
        Cpumask::from_cpus(
            self.host
                .os_cpu
                .iter()
                .enumerate()
                .filter(|(_, &os)| os_cpus.contains(&(os as usize)))
                .map(|(i, _)| CpuId(i as u32)),
        )
    }

    fn os_cpus(&self, mask: &Cpumask) -> Vec<usize> {
        mask.iter()
            .filter_map(|c| self.host.os_cpu.get(c.index()).map(|&os| os as usize))
            .collect()
    }
}

impl KernelView for State {
    fn now(&self) -> Nanos {
        Nanos(self.start.elapsed().as_nanos() as u64)
    }
    fn topology(&self) -> &Topology {
        &self.host.topology
    }
    fn live_threads(&self) -> Vec<ThreadId> {
        self.threads.keys().map(|&t| ThreadId(t as u32)).collect()
    }
    fn thread(&self, t: ThreadId) -> Option<ThreadView> {
        let tr = self.threads.get(&(t.0 as Tid))?;
        let cpu = self
            .host
            .os_cpu
            .iter()
            .position(|&os| os == tr.stat.processor)
            .map(|i| CpuId(i as u32));
        Some(ThreadView {
            id: t,
            info: tr.info.clone(),
            counters: tr.counters,
            running_on: None, // /proc cannot tell running from waiting
            last_cpu: cpu,
            runnable: tr.stat.runnable(),
            mask: tr.mask.clone(),
            nice: tr.policy_nice.unwrap_or(tr.orig_nice),
        })
    }
    fn runnable(&self, t: ThreadId) -> Option<bool> {
        self.threads.get(&(t.0 as Tid)).map(|tr| tr.stat.runnable())
    }
    fn available_counters(&self) -> &[CounterKind] {
        &self.kinds
    }
}

/// A managed process.
#[derive(Debug, Clone, Default)]
struct Proc {
    /// The original settings of its first managed thread: what a thread it creates
    /// would have had without cachesched.
    template: Option<Settings>,
    /// Which settings cachesched changed on any of its threads.
    touched: Touched,
    /// For a process created by a managed process: the creator's template and touches.
    inherited: Option<(Settings, Touched)>,
    /// Its threads being tracked.
    tracked: usize,
}

/// Which settings were changed on some thread of a process.
#[derive(Debug, Clone, Copy, Default)]
struct Touched {
    affinity: bool,
    slice: bool,
    nice: bool,
}

impl Touched {
    /// The original settings of a thread that has `actual` now and was created by a
    /// thread whose originals were `creator`: a setting cachesched changed on the
    /// creator's process was inherited, so the creator's original is the thread's
    /// original; any other setting is the thread's own.
    fn original(self, creator: &Settings, actual: Settings) -> Settings {
        Settings {
            affinity: if self.affinity {
                creator.affinity.clone()
            } else {
                actual.affinity
            },
            slice_ns: if self.slice {
                creator.slice_ns
            } else {
                actual.slice_ns
            },
            nice: if self.nice { creator.nice } else { actual.nice },
        }
    }
}

/// The three settings a directive can change.
#[derive(Debug, Clone, Copy)]
enum Setting {
    Affinity,
    Slice,
    Nice,
}

/// Address samples taken, over a run or a stats interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SampleStats {
    /// Samples given to the policy.
    pub delivered: u64,
    /// Samples dropped by the daemon: a memory-load event's samples whose data source is
    /// not another cache ([`sampling::is_remote_cache_hit`]), kernel addresses.
    pub filtered: u64,
    /// Samples the kernel dropped because a thread's ring was full (PERF_RECORD_LOST).
    /// The kernel reports a loss with the next record that fits, so it is counted at the
    /// drain after the one that made room.
    pub lost: u64,
}

impl SampleStats {
    /// The counts since `before`.
    fn since(&self, before: &SampleStats) -> SampleStats {
        SampleStats {
            delivered: self.delivered - before.delivered,
            filtered: self.filtered - before.filtered,
            lost: self.lost - before.lost,
        }
    }
}

/// Address sampling: the events, the period the policy set, the drain schedule.
#[derive(Debug)]
struct Sampling {
    /// The events opened on every thread, or why there are none.
    events: Result<Vec<EventSpec>, String>,
    /// The sampling period the policy set (`None`: off).
    period: Option<u64>,
    /// When the rings are next drained (while sampling is on).
    next_drain: Option<Instant>,
    /// Samples read from the rings, reused between drains.
    raw: Vec<sampling::Sample>,
    /// Totals over the run.
    totals: SampleStats,
}

/// Totals over a run, and per stats interval.
#[derive(Debug, Clone, Default)]
struct Totals {
    started: u64,
    exited: u64,
    directives: u64,
    failures: u64,
    /// Counters of threads that exited, final values.
    exited_counters: Counters,
    decisions: u64,
    decision_ns_sum: u64,
    decision_ns_max: u64,
    /// Thread states re-read before ticks.
    states_read: u64,
}

/// One stats line.
#[derive(Debug, Clone, Serialize)]
pub struct StatsRecord {
    /// Seconds since start.
    pub t_s: f64,
    /// Length of the interval this line covers, seconds.
    pub interval_s: f64,
    /// Managed processes now.
    pub processes: usize,
    /// Managed threads now.
    pub threads: usize,
    /// Managed threads runnable now.
    pub runnable: usize,
    /// How often each thread's state was re-read before the policy's ticks over the
    /// interval, ms (threads × interval / states re-read; `None` when the policy reads
    /// no states). Longer than the tick period when the state budget
    /// ([`DaemonConfig::state_budget_pct`]) cannot cover every thread at every tick.
    pub state_every_ms: Option<f64>,
    /// Threads started since the last line.
    pub started: u64,
    /// Threads exited since the last line.
    pub exited: u64,
    /// Threads with at least one setting changed by cachesched now.
    pub changed_threads: usize,
    /// Directives carried out since the last line.
    pub directives: u64,
    /// Directives that failed since the last line (other than vanished threads).
    pub failures: u64,
    /// CPUs kept busy by managed threads over the interval (task clock).
    pub managed_cpus_busy: Option<f64>,
    /// Context switches of managed threads per second.
    pub context_switches_per_s: Option<f64>,
    /// Migrations of managed threads per second.
    pub migrations_per_s: Option<f64>,
    /// LLC misses per 1000 instructions of managed threads (where the PMU has both).
    pub llc_mpki: Option<f64>,
    /// The daemon's own CPU time over the interval, percent of one CPU.
    pub daemon_cpu_pct: f64,
    /// Policy decisions (a hook and its directives) in the interval.
    pub decisions: u64,
    /// Mean decision latency, µs.
    pub decision_us_mean: f64,
    /// Longest decision, µs.
    pub decision_us_max: f64,
    /// Co-run segments given to the policy since the last line, and cache-instance
    /// intervals that yielded none because some thread ran only part of them (`None`:
    /// the policy wants no segments).
    pub segments: Option<(u64, u64)>,
    /// Address samples since the last line (`None`: the policy samples no addresses).
    pub address_samples: Option<SampleStats>,
    /// The policy's own statistics.
    pub policy: BTreeMap<String, f64>,
}

impl StatsRecord {
    /// The one-line human form.
    pub fn line(&self) -> String {
        let opt = |v: Option<f64>, unit: &str| v.map_or("n/a".into(), |v| format!("{v:.1}{unit}"));
        let mut s = format!(
            "[{:7.1}s] threads {} ({} runnable, {} changed) +{} -{}{} | busy {} cpus | cs {} | migr {} | mpki {} | directives {} ({} failed) | daemon {:.2}% cpu, decision {:.0}/{:.0} us mean/max",
            self.t_s,
            self.threads,
            self.runnable,
            self.changed_threads,
            self.started,
            self.exited,
            self.state_every_ms
                .map_or(String::new(), |ms| format!(" | states every {ms:.0} ms")),
            opt(self.managed_cpus_busy, ""),
            opt(self.context_switches_per_s, "/s"),
            opt(self.migrations_per_s, "/s"),
            opt(self.llc_mpki, ""),
            self.directives,
            self.failures,
            self.daemon_cpu_pct,
            self.decision_us_mean,
            self.decision_us_max,
        );
        if let Some((n, u)) = self.segments {
            s += &format!(" | segments {n} ({u} uncertain)");
        }
        if let Some(a) = self.address_samples {
            s += &format!(
                " | samples {} ({} filtered, {} lost)",
                a.delivered, a.filtered, a.lost
            );
        }
        if !self.policy.is_empty() {
            s += " |";
            for (k, v) in &self.policy {
                s += &format!(" {k}={v:.4}");
            }
        }
        s
    }
}

/// Decision latencies, µs (for benchmarks): the most recent ones, so that a daemon
/// running for weeks does not grow.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    /// Recent decisions' latencies, µs, oldest first (at most [`Latencies::KEEP`]).
    pub us: Vec<f64>,
    /// Decisions recorded in all (including those no longer kept).
    pub total: u64,
}

impl Latencies {
    /// Latencies kept at most.
    pub const KEEP: usize = 100_000;

    fn push(&mut self, us: f64) {
        if self.us.len() == Self::KEEP {
            self.us.drain(..Self::KEEP / 2);
        }
        self.us.push(us);
        self.total += 1;
    }

    /// The latencies of the decisions after the first `from` of the run, as far as
    /// they are still kept.
    pub fn since(&self, from: u64) -> &[f64] {
        let dropped = self.total - self.us.len() as u64;
        &self.us[(from.saturating_sub(dropped) as usize).min(self.us.len())..]
    }
}

/// Distinct warnings given at most; the last says that further ones are suppressed.
const MAX_WARNINGS: usize = 1000;

/// The daemon. See the [module documentation](self).
pub struct Daemon {
    state: State,
    classifier: Classifier,
    /// Builds co-run segments at each tick, for a policy that wants them.
    segments: Option<SegmentBuilder>,
    /// The segment counts at the last stats line.
    last_segments: crate::corun::SegmentCounts,
    /// Address sampling.
    sampling: Sampling,
    /// The sample counts at the last stats line.
    last_samples: SampleStats,
    policy: Box<dyn Policy>,
    rng: SimRng,
    journal: Journal,
    config: DaemonConfig,
    target: Target,
    me: Pid,
    procs: BTreeMap<Pid, Proc>,
    /// This daemon's claims on the processes whose threads it manages, with each
    /// process's start time.
    claims: BTreeMap<Pid, (u64, Claim)>,
    /// Processes (id, start time) of the target that another daemon manages: left to it.
    claimed_by_others: BTreeSet<(Pid, u64)>,
    /// Processes seen and found unmanaged (not re-read while they exist).
    others: BTreeSet<Pid>,
    /// `/proc/loadavg`'s last pid at the previous scan.
    last_pid: Option<Pid>,
    /// `/proc/loadavg` kept open for `last_pid` (`None` if it could not be opened:
    /// then every scan lists the processes).
    loadavg: Option<procfs::LastPid>,
    tick_period: Option<Nanos>,
    next_tick: Option<Instant>,
    next_scan: Instant,
    /// The thread whose state the last tick re-read last (the next tick goes on after it).
    state_cursor: Option<Tid>,
    totals: Totals,
    last_stats: (Instant, Totals, Counters, Duration),
    latencies: Latencies,
    /// Warnings not yet taken by [`Daemon::take_warnings`].
    warnings: Vec<String>,
    /// Every warning given so far (at most [`MAX_WARNINGS`]), so that each is given once.
    warned: BTreeSet<String>,
    finished: bool,
    initial_scan: bool,
}

/// The counters this host provides, with the reason for each one it does not.
pub fn available_counters() -> Vec<(CounterKind, Result<bool, PerfError>)> {
    perf::probe()
}

/// This process's CPU time (user + system).
pub fn own_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Makes orphaned descendants of this process reparent to it rather than to init, so
/// that [`Target::Descendants`] keeps them (the caller must reap them).
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: plain prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the soft open-file limit to the hard limit (each counter is a descriptor);
/// returns the new soft limit.
pub fn raise_fd_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit on a local struct.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        if rl.rlim_cur < rl.rlim_max {
            let want = libc::rlimit {
                rlim_cur: rl.rlim_max,
                rlim_max: rl.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                rl = want;
            }
        }
    }
    rl.rlim_cur
}

impl Daemon {
    /// Starts `policy` on the threads of `target`: checks that the policy's counters
    /// (and, if it requires address samples, a memory-sampling event) exist,
    /// initialises it and takes over the threads that exist now. On error nothing stays
    /// changed. Addresses are sampled with the host's precise memory-load event
    /// ([`SamplingEventChoice::Discover`]; see [`Daemon::start_with`]).
    pub fn start(
        host: HostTopology,
        policy: Box<dyn Policy>,
        target: Target,
        config: DaemonConfig,
    ) -> Result<Daemon, DaemonError> {
        Self::start_with(host, policy, target, config, SamplingEventChoice::Discover)
    }

    /// [`Daemon::start`] with the address-sampling event chosen (software page faults
    /// test the sampling path on a host without a PMU).
    pub fn start_with(
        host: HostTopology,
        policy: Box<dyn Policy>,
        target: Target,
        config: DaemonConfig,
        sampling_event: SamplingEventChoice,
    ) -> Result<Daemon, DaemonError> {
        let probe = perf::probe_mapped(&config.counter_events);
        let have = |k: CounterKind| probe.iter().any(|(p, r)| *p == k && r.is_ok());
        // co-run segments are built from every thread's task clock and migrations
        const SEGMENT_COUNTERS: [CounterKind; 2] =
            [CounterKind::CpuTimeNs, CounterKind::Migrations];
        let mut required = policy.required_counters();
        if policy.requires_corun_segments() {
            required.extend(SEGMENT_COUNTERS);
        }
        required.sort();
        required.dedup();
        let missing: Vec<(CounterKind, String)> = required
            .into_iter()
            .filter(|&k| !have(k))
            .map(|k| {
                let why = probe
                    .iter()
                    .find(|(p, _)| *p == k)
                    .and_then(|(_, r)| r.as_ref().err().map(PerfError::reason))
                    .unwrap_or_else(|| PerfError::NoMapping(k).reason());
                (k, why)
            })
            .collect();
        let events = sampling_event.resolve();
        if policy.requires_address_samples() {
            if let Err(why) = &events {
                return Err(DaemonError::MissingSampling {
                    policy: policy.name().to_string(),
                    events: why.clone(),
                    counters: missing,
                });
            }
        }
        if !missing.is_empty() {
            return Err(DaemonError::MissingCounters {
                policy: policy.name().to_string(),
                missing,
            });
        }
        let mut kinds = policy.required_counters();
        let segments = policy.wants_corun_segments() && SEGMENT_COUNTERS.iter().all(|&k| have(k));
        if segments {
            kinds.extend(SEGMENT_COUNTERS);
        }
        if config.stats_counters {
            kinds.extend([
                CounterKind::CpuTimeNs,
                CounterKind::ContextSwitches,
                CounterKind::Migrations,
                CounterKind::Instructions,
                CounterKind::LlcMisses,
            ]);
        }
        kinds.retain(|&k| have(k));
        kinds.sort();
        kinds.dedup();
        if !kinds.is_empty() {
            raise_fd_limit();
        }
        target.check()?;
        for r in &config.classes {
            r.check().map_err(DaemonError::Class)?;
        }
        let mut warnings = Vec::new();
        if policy.wants_corun_segments() && !segments {
            warnings.push(format!(
                "policy '{}' asks for co-run segments, which are built from the task clock and migration counters this machine does not provide; it will receive none",
                policy.name()
            ));
        }
        let builder = segments.then(|| SegmentBuilder::new(&host.topology, SEGMENT_TOLERANCE));
        let now = Instant::now();
        let mut procs = BTreeMap::new();
        if let Target::Processes { pids, .. } = &target {
            for &pid in pids {
                procs.insert(pid, Proc::default());
            }
        }
        let mut d = Daemon {
            state: State {
                host,
                start: now,
                threads: BTreeMap::new(),
                kinds,
            },
            segments: builder,
            last_segments: Default::default(),
            sampling: Sampling {
                events,
                period: None,
                next_drain: None,
                raw: Vec::new(),
                totals: SampleStats::default(),
            },
            last_samples: SampleStats::default(),
            policy,
            classifier: Classifier::new(config.classes.clone()),
            rng: SimRng::new(config.seed),
            journal: match &config.journal {
                Some(p) => Journal::with_file(p).map_err(DaemonError::Journal)?,
                None => Journal::new(),
            },
            me: std::process::id() as Pid,
            procs,
            claims: BTreeMap::new(),
            claimed_by_others: BTreeSet::new(),
            others: BTreeSet::new(),
            last_pid: None,
            loadavg: procfs::LastPid::open().ok(),
            tick_period: None,
            next_tick: None,
            state_cursor: None,
            // the start scans; the next scan is one period later
            next_scan: now + Duration::from_secs_f64(config.scan_ms / 1e3),
            totals: Totals::default(),
            last_stats: (now, Totals::default(), Counters::default(), own_cpu_time()),
            latencies: Latencies::default(),
            warned: warnings.iter().cloned().collect(),
            warnings,
            finished: false,
            initial_scan: true,
            config,
            target,
        };
        // from here on, an error drops `d`, which restores whatever was changed
        d.hook(|p, ctx| p.init(ctx))?;
        d.scan()?;
        d.initial_scan = false;
        Ok(d)
    }

    /// Warnings for the operator collected so far (each given once), draining them.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The counters opened per thread.
    pub fn counter_kinds(&self) -> &[CounterKind] {
        &self.state.kinds
    }

    /// The events addresses are sampled with (empty: none on this host; see
    /// [`Daemon::start_with`]).
    pub fn sampling_events(&self) -> &[EventSpec] {
        self.sampling.events.as_deref().unwrap_or(&[])
    }

    /// Managed threads with sampling events open now.
    pub fn sampled_threads(&self) -> usize {
        self.state
            .threads
            .values()
            .filter(|t| !t.samplers.is_empty())
            .count()
    }

    /// Address samples over the run so far.
    pub fn sample_totals(&self) -> SampleStats {
        self.sampling.totals
    }

    /// Managed threads now.
    pub fn threads(&self) -> usize {
        self.state.threads.len()
    }

    /// Managed processes now (for [`Target::Cgroup`], the processes of its threads).
    pub fn processes(&self) -> usize {
        self.state
            .threads
            .values()
            .map(|t| t.pid)
            .collect::<BTreeSet<_>>()
            .len()
            .max(self.procs.len())
    }

    /// Recent decision latencies.
    pub fn latencies(&self) -> &Latencies {
        &self.latencies
    }

    /// When [`Daemon::poll`] next has work (a scan, a tick, draining sample rings).
    pub fn next_due(&self) -> Instant {
        [self.next_tick, self.sampling.next_drain]
            .into_iter()
            .flatten()
            .fold(self.next_scan, Instant::min)
    }

    /// Does what is due: a scan for threads that started or exited, the policy's tick
    /// (after the samples taken since the last drain), draining sample rings.
    pub fn poll(&mut self) -> Result<(), DaemonError> {
        let now = Instant::now();
        if now >= self.next_scan {
            self.scan()?;
            self.next_scan = now + Duration::from_secs_f64(self.config.scan_ms / 1e3);
        }
        let tick_due = self.next_tick.is_some_and(|t| now >= t);
        if !tick_due && self.sampling.next_drain.is_some_and(|t| now >= t) {
            self.deliver_samples()?;
        }
        if let Some(t) = self.next_tick {
            if now >= t {
                let t0 = Instant::now();
                if self.segments.is_some() {
                    // every thread's CPU and counters, then the interval's segments
                    self.refresh_states();
                    self.refresh_counters();
                    self.deliver_segments()?;
                } else {
                    if self.policy.needs_thread_states() {
                        let period = self.tick_period.map_or(0, |p| p.0) as f64;
                        let budget = period * self.config.state_budget_pct / 100.0;
                        self.refresh_states_within(Duration::from_nanos(budget as u64));
                    }
                    if !self.policy.required_counters().is_empty() {
                        self.refresh_counters();
                    }
                }
                self.deliver_samples()?;
                self.hook_timed(t0, |p, ctx| p.tick(ctx))?;
                // the next tick one period after this one, never in a burst after a stall
                let period = Duration::from_nanos(self.tick_period.map_or(0, |p| p.0));
                self.next_tick = self.tick_period.map(|_| (t + period).max(now));
            }
        }
        Ok(())
    }

    /// Builds the co-run segments of the interval since the last tick from the threads'
    /// fresh states and counters, and gives each to the policy.
    fn deliver_segments(&mut self) -> Result<(), DaemonError> {
        let Some(b) = self.segments.as_mut() else {
            return Ok(());
        };
        let samples: Vec<Sample> = self
            .state
            .threads
            .iter()
            .map(|(&tid, tr)| Sample {
                thread: ThreadId(tid as u32),
                cpu: self
                    .state
                    .host
                    .os_cpu
                    .iter()
                    .position(|&os| os == tr.stat.processor)
                    .map(|i| CpuId(i as u32)),
                counters: tr.counters,
            })
            .collect();
        for seg in b.interval(self.state.now(), &samples) {
            self.hook(|p, ctx| p.corun_segment(ctx, &seg))?;
        }
        Ok(())
    }

    /// Turns address sampling on with period `p` on every managed thread, or changes
    /// the period of the events open.
    fn start_sampling(&mut self, p: u64) {
        let Ok(specs) = &self.sampling.events else {
            return;
        };
        if self.sampling.period == Some(p) {
            return; // nothing changes
        }
        if self.sampling.period.replace(p).is_none() {
            self.sampling.next_drain =
                Some(Instant::now() + Duration::from_millis(SAMPLE_DRAIN_MS));
        }
        let mut errors = Vec::new();
        for (&tid, tr) in self.state.threads.iter_mut() {
            if tr.samplers.is_empty() {
                let (evs, errs) = open_samplers(tid, specs, p);
                tr.samplers = evs;
                errors.extend(errs.into_iter().map(|e| (tid, e)));
            } else {
                for (i, ev) in &mut tr.samplers {
                    if let Err(e) = ev.set_period(specs[*i].period_for(p)) {
                        errors.push((tid, e));
                    }
                }
            }
        }
        self.sampling_failed(errors);
    }

    /// Closes every sampling event; samples still in their rings are not delivered.
    fn stop_sampling(&mut self) {
        self.sampling.period = None;
        self.sampling.next_drain = None;
        for tr in self.state.threads.values_mut() {
            tr.samplers.clear();
        }
    }

    /// Counts and reports (once per kind) sampling events that failed on threads.
    fn sampling_failed(&mut self, errors: Vec<(Tid, SamplingError)>) {
        for (tid, e) in errors {
            self.totals.failures += 1;
            let kind = match &e {
                SamplingError::Denied { .. } => "denied",
                SamplingError::Unsupported { .. } => "unsupported",
                SamplingError::Mmap { .. } => "mmap",
                SamplingError::Corrupt { .. } => "corrupt",
                _ => "other",
            };
            self.warn_once_per(
                format!("sampling {kind}"),
                format!("address sampling failed on thread {tid}: {e} (failures like this are counted in the stats, not repeated)"),
            );
        }
    }

    /// Drains the sample rings of every managed thread (or only of `only`) and gives
    /// the samples kept to the policy in one hook call; schedules the next drain.
    fn deliver_samples_of(&mut self, only: Option<Tid>) -> Result<(), DaemonError> {
        if self.sampling.period.is_none() {
            return Ok(());
        }
        if only.is_none() {
            self.sampling.next_drain =
                Some(Instant::now() + Duration::from_millis(SAMPLE_DRAIN_MS));
        }
        let mut raw = std::mem::take(&mut self.sampling.raw);
        let mut out = Vec::new();
        let mut errors = Vec::new();
        let State { threads, host, .. } = &mut self.state;
        let mut drain = |tid: Tid, tr: &mut Tracked| {
            for (_, ev) in &mut tr.samplers {
                raw.clear();
                match ev.drain(&mut raw) {
                    Ok(c) => self.sampling.totals.lost += c.lost,
                    Err(e) => errors.push((tid, e)), // samples before the bad record are kept
                }
                for s in &raw {
                    let cpu = s
                        .cpu
                        .and_then(|c| host.os_cpu.iter().position(|&os| os == c))
                        .or_else(|| host.os_cpu.iter().position(|&os| os == tr.stat.processor));
                    let keep = s.addr < KERNEL_HALF
                        && s.data_src.is_none_or(sampling::is_remote_cache_hit);
                    match cpu {
                        Some(cpu) if keep => {
                            out.push(AddressSample {
                                // a per-thread event samples that thread only
                                thread: ThreadId(tid as u32),
                                cpu: CpuId(cpu as u32),
                                addr: Addr(s.addr),
                                is_write: false,
                            });
                            self.sampling.totals.delivered += 1;
                        }
                        _ => self.sampling.totals.filtered += 1,
                    }
                }
            }
        };
        match only {
            Some(tid) => {
                if let Some(tr) = threads.get_mut(&tid) {
                    drain(tid, tr);
                }
            }
            None => threads.iter_mut().for_each(|(&tid, tr)| drain(tid, tr)),
        }
        raw.clear();
        self.sampling.raw = raw;
        self.sampling_failed(errors);
        if out.is_empty() {
            return Ok(());
        }
        self.hook(|p, ctx| {
            for s in &out {
                p.address_sample(ctx, s);
            }
        })
    }

    /// [`Daemon::deliver_samples_of`] every thread.
    fn deliver_samples(&mut self) -> Result<(), DaemonError> {
        self.deliver_samples_of(None)
    }

    /// Whether any managed process is still alive (meaningful for
    /// [`Target::Processes`]; a cgroup may be empty for a while).
    pub fn any_alive(&self) -> bool {
        !self.state.threads.is_empty() || !self.procs.is_empty()
    }

    /// Runs `f` on the policy with a fresh context and carries out its directives.
    fn hook(&mut self, f: impl FnOnce(&mut dyn Policy, &mut Ctx<'_>)) -> Result<(), DaemonError> {
        self.hook_timed(Instant::now(), f)
    }

    fn hook_timed(
        &mut self,
        t0: Instant,
        f: impl FnOnce(&mut dyn Policy, &mut Ctx<'_>),
    ) -> Result<(), DaemonError> {
        let mut out = Vec::new();
        {
            let mut ctx = Ctx::new(&self.state, &mut self.rng, &mut out);
            f(self.policy.as_mut(), &mut ctx);
        }
        let r = self.apply(out);
        let ns = t0.elapsed().as_nanos() as u64;
        self.totals.decisions += 1;
        self.totals.decision_ns_sum += ns;
        self.totals.decision_ns_max = self.totals.decision_ns_max.max(ns);
        self.latencies.push(ns as f64 / 1e3);
        r
    }

    fn warn_once(&mut self, w: String) {
        self.warn_once_per(w.clone(), w);
    }

    /// Gives warning `w` unless one with the same `kind` was given (a failure that
    /// repeats on many threads is reported once, with the first thread's details; the
    /// stats count all of them).
    fn warn_once_per(&mut self, kind: String, w: String) {
        if self.warned.len() == MAX_WARNINGS {
            return;
        }
        if self.warned.insert(kind) {
            self.warnings.push(if self.warned.len() == MAX_WARNINGS {
                format!("{w} (further warnings are suppressed)")
            } else {
                w
            });
        }
    }

    fn apply(&mut self, out: Vec<Directive>) -> Result<(), DaemonError> {
        // a policy may re-arm its sampling period after every sample (thread clustering
        // jitters it so, as the paper's handler does): only a batch's last period counts,
        // so that one drain costs at most one period change per event, not one per sample
        let last_period = out
            .iter()
            .rposition(|d| matches!(d, Directive::SetSamplingPeriod { .. }));
        for (i, d) in out.into_iter().enumerate() {
            if matches!(d, Directive::SetSamplingPeriod { .. }) && Some(i) != last_period {
                continue;
            }
            // the thread the policy means must still be the one its id named: a thread
            // that exited since the last scan may have left its id to an unrelated
            // thread (the open stat file fails once its own thread is gone)
            if let Some(t) = directive_thread(&d) {
                if !self.state.threads.get(&t).is_some_and(Tracked::still_there) {
                    continue;
                }
            }
            let (tid, kind, res) = match d {
                Directive::SetTickPeriod { period } => {
                    self.tick_period = period.filter(|p| p.0 > 0);
                    self.next_tick = self
                        .tick_period
                        .map(|p| Instant::now() + Duration::from_nanos(p.0));
                    continue;
                }
                Directive::SetSamplingPeriod { period } => {
                    match (period.filter(|&p| p > 0), &self.sampling.events) {
                        (Some(_), Err(why)) => {
                            // only a policy that does not require samples gets here
                            let w = format!(
                                "policy '{}' asked for address sampling, which this machine does not provide ({why}); ignored",
                                self.policy.name()
                            );
                            self.warn_once(w);
                        }
                        (Some(p), Ok(_)) => self.start_sampling(p),
                        (None, _) => self.stop_sampling(),
                    }
                    continue;
                }
                Directive::SetMask { thread, mask } => {
                    let tid = thread.0 as Tid;
                    if !self.state.threads.contains_key(&tid) {
                        continue;
                    }
                    let res = match mask {
                        Some(m) => {
                            let os = self.state.os_cpus(&m);
                            if os.is_empty() {
                                self.warn_once(format!(
                                    "policy '{}' gave a thread a CPU mask with no CPU of this host; ignored",
                                    self.policy.name()
                                ));
                                continue;
                            }
                            self.journal.set_affinity(tid, &os).map(|_| m)
                        }
                        None => self.journal.restore_affinity(tid).and_then(|_| {
                            crate::sched::affinity(tid).map(|a| self.state.dense_mask(&a))
                        }),
                    };
                    match res {
                        Ok(m) => {
                            if let Some(tr) = self.state.threads.get_mut(&tid) {
                                tr.mask = m;
                            }
                            (tid, Setting::Affinity, Ok(()))
                        }
                        Err(e) => (tid, Setting::Affinity, Err(e)),
                    }
                }
                Directive::SetSlice { thread, slice } => {
                    let tid = thread.0 as Tid;
                    if !self.state.threads.contains_key(&tid) {
                        continue;
                    }
                    let res = match slice {
                        Some(s) => self.journal.set_slice(tid, Some(s.0)),
                        None => self.journal.restore_slice(tid).map(|_| ()),
                    };
                    (tid, Setting::Slice, res)
                }
                Directive::SetNice { thread, nice } => {
                    let tid = thread.0 as Tid;
                    let Some(tr) = self.state.threads.get_mut(&tid) else {
                        continue;
                    };
                    tr.policy_nice = nice.map(|n| n.clamp(-20, 19));
                    (tid, Setting::Nice, self.set_effective_nice(tid))
                }
                Directive::Boost { thread, on } => {
                    let tid = thread.0 as Tid;
                    let Some(tr) = self.state.threads.get_mut(&tid) else {
                        continue;
                    };
                    tr.boosted = on;
                    (tid, Setting::Nice, self.set_effective_nice(tid))
                }
            };
            self.totals.directives += 1;
            match res {
                Ok(()) => {
                    let pid = self.state.threads.get(&tid).map(|t| t.pid);
                    if let Some(p) = pid.and_then(|pid| self.procs.get_mut(&pid)) {
                        match kind {
                            Setting::Affinity => p.touched.affinity = true,
                            Setting::Slice => p.touched.slice = true,
                            Setting::Nice => p.touched.nice = true,
                        }
                    }
                }
                Err(SchedError::Gone { .. }) => {}
                Err(SchedError::Os { source, call, tid })
                    if source.raw_os_error() == Some(libc::EPERM) =>
                {
                    return Err(DaemonError::Permission {
                        tid,
                        source: SchedError::Os { call, tid, source },
                    });
                }
                Err(e) => {
                    self.totals.failures += 1;
                    let kind = match &e {
                        SchedError::Os { call, source, .. } => format!("{call}: {source}"),
                        SchedError::NotFair { policy, .. } => format!("policy {policy}"),
                        SchedError::Irreversible { .. } => "irreversible nice".into(),
                        other => other.to_string(),
                    };
                    let msg = match &e {
                        SchedError::NotFair { .. } | SchedError::Irreversible { .. } => {
                            e.to_string()
                        }
                        _ => format!("a directive failed on thread {tid}: {e}"),
                    };
                    self.warn_once_per(
                        kind,
                        msg + " (failures like this are counted in the stats, not repeated)",
                    );
                }
            }
        }
        Ok(())
    }

    /// Sets the nice value the policy's SetNice and Boost directives add up to.
    fn set_effective_nice(&mut self, tid: Tid) -> Result<(), SchedError> {
        let tr = &self.state.threads[&tid];
        let (policy_nice, boosted) = (tr.policy_nice, tr.boosted);
        if policy_nice.is_none() && !boosted {
            return self.journal.restore_nice(tid).map(|_| ());
        }
        let base = match policy_nice {
            Some(n) => n,
            None => match self.journal.original(tid) {
                Some(o) => o.nice,
                None => crate::sched::nice(tid)?,
            },
        };
        let n = if boosted {
            (base - self.config.boost_nice).clamp(-20, 19)
        } else {
            base
        };
        self.journal.set_nice(tid, n)
    }

    /// The threads that exist now, with their processes; `None` when nothing changed
    /// since the last scan.
    fn current(&mut self) -> Result<Option<BTreeMap<Tid, Pid>>, DaemonError> {
        let mut now = BTreeMap::new();
        match self.target.clone() {
            Target::Cgroup(dir) => {
                let tids = procfs::cgroup_threads(&dir).map_err(|e| DaemonError::Cgroup {
                    path: dir.display().to_string(),
                    reason: e.to_string(),
                })?;
                for tid in tids {
                    let pid = match self.state.threads.get(&tid) {
                        Some(t) => t.pid,
                        None => match procfs::tgid_of(tid) {
                            Ok(p) => p,
                            Err(ProcError::Gone { .. }) => continue,
                            Err(e) => return Err(e.into()),
                        },
                    };
                    now.insert(tid, pid);
                }
            }
            Target::Descendants | Target::Processes { .. } => {
                // nothing was created anywhere while the last pid stays the same: then
                // only exits can have happened, which the processes' thread counts show
                let last = self.loadavg.as_ref().and_then(|f| f.read().ok());
                let created = last.is_none() || last != self.last_pid;
                self.last_pid = last;
                if created {
                    self.discover_processes()?;
                } else if self.counts_unchanged()? {
                    return Ok(None);
                }
                let pids: Vec<Pid> = self.procs.keys().copied().collect();
                for pid in pids {
                    match procfs::tasks(pid) {
                        Ok(tids) => {
                            for tid in tids {
                                now.insert(tid, pid);
                            }
                        }
                        Err(ProcError::Gone { .. }) => {
                            self.procs.remove(&pid);
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Ok(Some(now))
    }

    /// Whether every managed process still has exactly the threads tracked for it (read
    /// from its leader thread's `stat`: the process's would sum over all its threads).
    fn counts_unchanged(&self) -> Result<bool, DaemonError> {
        for (&pid, p) in &self.procs {
            // the leader's stat file is open when the leader is managed
            let stat = match self.state.threads.get(&pid) {
                Some(tr) => tr.stat_file.read(),
                None => procfs::thread_stat(pid, pid),
            };
            match stat {
                Ok(st) if st.num_threads as usize == p.tracked && !st.exited() => {}
                Ok(_) | Err(ProcError::Gone { .. }) => return Ok(false),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    /// Adds processes whose parent is managed (or, for [`Target::Descendants`], this
    /// daemon).
    fn discover_processes(&mut self) -> Result<(), DaemonError> {
        let follow = match &self.target {
            Target::Descendants => true,
            Target::Processes { children, .. } => *children,
            Target::Cgroup(_) => false,
        };
        if !follow {
            return Ok(());
        }
        let all = procfs::pids()?;
        let live: BTreeSet<Pid> = all.iter().copied().collect();
        self.others.retain(|p| live.contains(p));
        let mut fresh: Vec<(Pid, Pid)> = Vec::new();
        for pid in all {
            if pid == self.me || self.procs.contains_key(&pid) || self.others.contains(&pid) {
                continue;
            }
            // the leader's stat: the process's would sum over all its threads
            match procfs::thread_stat(pid, pid) {
                Ok(st) => fresh.push((pid, st.ppid)),
                Err(ProcError::Gone { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // parents before children, whatever the pid order
        loop {
            let before = fresh.len();
            fresh.retain(|&(pid, ppid)| {
                let managed = self.procs.contains_key(&ppid)
                    || (ppid == self.me && self.target == Target::Descendants);
                if managed {
                    let inherited = self
                        .procs
                        .get(&ppid)
                        .and_then(|p| Some((p.template.clone()?, p.touched)));
                    self.procs.insert(
                        pid,
                        Proc {
                            inherited,
                            ..Proc::default()
                        },
                    );
                }
                !managed
            });
            if fresh.len() == before {
                break;
            }
        }
        self.others.extend(fresh.into_iter().map(|(p, _)| p));
        Ok(())
    }

    /// Follows threads that started or exited since the last scan.
    fn scan(&mut self) -> Result<(), DaemonError> {
        let Some(now) = self.current()? else {
            return Ok(());
        };
        if !self.classifier.is_empty() && now.keys().any(|t| !self.state.threads.contains_key(t)) {
            self.classifier.refresh();
        }
        let gone: Vec<Tid> = self
            .state
            .threads
            .keys()
            .filter(|t| !now.contains_key(t))
            .copied()
            .collect();
        for tid in gone {
            self.exited(tid)?;
        }
        for (&tid, &pid) in &now {
            if !self.state.threads.contains_key(&tid) {
                self.started(tid, pid)?;
            }
        }
        // claims of processes that ended are released
        let live: BTreeSet<Pid> = now.values().copied().collect();
        self.claims.retain(|p, _| live.contains(p));
        self.claimed_by_others.retain(|(p, _)| live.contains(p));
        Ok(())
    }

    fn exited(&mut self, tid: Tid) -> Result<(), DaemonError> {
        if let Some(tr) = self.state.threads.get_mut(&tid) {
            // a counter stays readable after its thread exits: keep the final counts
            read_counters(tr);
            self.totals.exited_counters.accumulate(&tr.counters);
            // its last samples, before the policy hears that it exited
            self.deliver_samples_of(Some(tid))?;
            self.hook(|p, ctx| p.thread_exited(ctx, ThreadId(tid as u32)))?;
            if let Some(tr) = self.state.threads.remove(&tid) {
                if let Some(p) = self.procs.get_mut(&tr.pid) {
                    p.tracked = p.tracked.saturating_sub(1);
                }
            }
        }
        self.journal.forget(tid);
        self.totals.exited += 1;
        Ok(())
    }

    /// Claims process `pid` for this daemon before its first thread is taken over:
    /// `false` if another daemon manages it (an error at the start, a warning later).
    /// A process is named by its id and start time: an id that another process took
    /// since (the claimed one ended) is not the claimed process, and is not managed.
    fn claim_process(&mut self, pid: Pid) -> Result<bool, DaemonError> {
        let start = match procfs::process_stat(pid) {
            Ok(st) => st.starttime,
            Err(ProcError::Gone { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if let Some((claimed, _)) = self.claims.get(&pid) {
            return Ok(*claimed == start);
        }
        if self.claimed_by_others.contains(&(pid, start)) {
            return Ok(false);
        }
        match claim(pid, start) {
            Ok(c) => {
                self.claims.insert(pid, (start, c));
                Ok(true)
            }
            Err(e @ ClaimError::Held { .. }) if !self.initial_scan => {
                self.claimed_by_others.insert((pid, start));
                self.warn_once_per(
                    format!("claimed {pid}"),
                    format!("{e}; its threads are left to it"),
                );
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Takes over a new thread; `false` if it vanished first.
    fn started(&mut self, tid: Tid, pid: Pid) -> Result<bool, DaemonError> {
        if !self.claim_process(pid)? {
            return Ok(false);
        }
        let stat_file = match StatFile::open(pid, tid) {
            Ok(f) => f,
            Err(ProcError::Gone { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let stat = match stat_file.read() {
            Ok(s) if !s.exited() => s,
            Ok(_) | Err(ProcError::Gone { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let actual = match Settings::read(tid) {
            Ok(s) => s,
            Err(SchedError::Gone { .. }) => return Ok(false),
            Err(e) => {
                self.warn_once_per(
                    "settings".into(),
                    format!("cannot read thread {tid}'s settings: {e}; left alone (reported once)"),
                );
                return Ok(false);
            }
        };
        let orig = match self.track_new(tid, pid, &actual, stat.starttime) {
            Ok(o) => o,
            Err(SchedError::Gone { .. }) => return Ok(false),
            Err(e) => return Err(DaemonError::Journal(e)),
        };
        let mask = self.state.dense_mask(&orig.affinity);
        let orig_nice = orig.nice;
        let mut perf = Vec::with_capacity(self.state.kinds.len());
        for k in self.state.kinds.clone() {
            match Counter::open_mapped(tid, k, &self.config.counter_events) {
                Ok(c) => perf.push(c),
                Err(PerfError::Gone { .. }) => {
                    self.journal.forget(tid);
                    return Ok(false);
                }
                Err(PerfError::Os { source, .. })
                    if source.raw_os_error() == Some(libc::EMFILE) =>
                {
                    return Err(DaemonError::TooManyFiles {
                        per_thread: self.state.kinds.len(),
                        source: PerfError::Os { kind: k, source },
                    });
                }
                Err(e) => {
                    self.warn_once_per(
                        format!("counter {k:?}"),
                        format!("counter for thread {tid}: {e} (reported once)"),
                    );
                }
            }
        }
        let class = if self.classifier.is_empty() {
            None
        } else {
            let process_comm = if pid == tid {
                stat.comm.clone()
            } else {
                procfs::process_stat(pid)
                    .map(|s| s.comm)
                    .unwrap_or_default()
            };
            self.classifier
                .class_of(tid, pid, &stat.comm, &process_comm)
        };
        let samplers = match (self.sampling.period, &self.sampling.events) {
            (Some(p), Ok(specs)) => {
                let (evs, errs) = open_samplers(tid, specs, p);
                self.sampling_failed(errs.into_iter().map(|e| (tid, e)).collect());
                evs
            }
            _ => Vec::new(),
        };
        let tr = Tracked {
            pid,
            samplers,
            info: ThreadInfo {
                name: stat.comm.clone(),
                process: pid as u32,
                class,
            },
            stat,
            stat_file,
            perf,
            counters: Counters::default(),
            mask,
            policy_nice: None,
            orig_nice,
            boosted: false,
        };
        self.state.threads.insert(tid, tr);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.tracked += 1;
        }
        self.totals.started += 1;
        self.hook(|p, ctx| p.thread_started(ctx, ThreadId(tid as u32)))?;
        Ok(true)
    }

    /// Journals a thread seen for the first time, which has `actual` settings now, and
    /// returns its originals. A thread created after the start was created by a managed
    /// thread of its process (or, for a new process, of its parent): settings
    /// cachesched changed there were inherited, so the creator's originals are its
    /// originals, and the inherited values are journalled as changes to undo.
    fn track_new(
        &mut self,
        tid: Tid,
        pid: Pid,
        actual: &Settings,
        start: u64,
    ) -> Result<Settings, SchedError> {
        let creator = match self.procs.get(&pid) {
            _ if self.initial_scan => None,
            Some(p) => match &p.template {
                Some(t) => Some((t.clone(), p.touched)),
                None => p.inherited.clone(),
            },
            None => None,
        };
        let orig = match creator {
            Some((tpl, touched)) => touched.original(&tpl, actual.clone()),
            None => actual.clone(),
        };
        if let Some(p) = self.procs.get_mut(&pid) {
            if p.template.is_none() {
                p.template = Some(orig.clone());
                if let Some((_, touched)) = p.inherited {
                    // what the creator had changed, this process carries too
                    p.touched = touched;
                }
            }
        }
        self.journal.track_inherited(
            tid,
            self.claims.get(&pid).map(|(s, _)| (pid, *s)),
            orig.clone(),
            Some(start),
            actual,
        )?;
        Ok(orig)
    }

    /// At a stop, after the policy's last change: threads created since the last scan
    /// carry the settings they inherited, and a thread created while its creator was
    /// being restored may too. Rescans until a scan finds no thread it has not seen,
    /// journalling each new one's inherited settings (no policy hears of it) and
    /// restoring them; a process that creates threads faster than a scan ends is cut
    /// off after [`Daemon::STOP_RESCANS`] rounds, which the report's `unsettled` says.
    fn restore_with_newcomers(&mut self) -> RestoreReport {
        // a thread that ended since the last scan is not restored: its id may name
        // another thread by now
        let ended: Vec<Tid> = self
            .state
            .threads
            .iter()
            .filter(|(_, tr)| !tr.still_there())
            .map(|(&t, _)| t)
            .collect();
        for t in ended {
            self.journal.forget(t);
        }
        let mut rep = self.journal.restore_all_keeping_file();
        let mut seen: BTreeSet<Tid> = self.state.threads.keys().copied().collect();
        for round in 0..=Self::STOP_RESCANS {
            // the leader's counts may look unchanged while threads came and went
            self.last_pid = None;
            let now = match self.current() {
                Ok(Some(now)) => now,
                Ok(None) => break,
                Err(_) => break,
            };
            let new: Vec<(Tid, Pid)> = now.into_iter().filter(|(t, _)| !seen.contains(t)).collect();
            if new.is_empty() {
                break;
            }
            if round == Self::STOP_RESCANS {
                rep.unsettled = new.len();
                break;
            }
            for (tid, pid) in new {
                seen.insert(tid);
                // only threads of processes this daemon claims (the same process, not
                // one that took its id, nor one another daemon manages)
                if !self.claim_process(pid).unwrap_or(false) {
                    continue;
                }
                let (Ok(st), Ok(actual)) = (procfs::thread_stat(pid, tid), Settings::read(tid))
                else {
                    continue;
                };
                if let Err(e) = self.track_new(tid, pid, &actual, st.starttime) {
                    if !matches!(e, SchedError::Gone { .. }) {
                        rep.failed.push((tid, e));
                    }
                }
            }
            rep.add(self.journal.restore_all_keeping_file());
        }
        // the file stays while threads may keep inherited settings: `restore --pid`
        // needs what it records
        if rep.failed.is_empty() && rep.unsettled == 0 {
            self.journal.remove_file();
        }
        rep
    }

    /// Re-reads every thread's state (runnable, last CPU); a thread found exited is
    /// left for the next scan.
    fn refresh_states(&mut self) {
        self.state
            .threads
            .values_mut()
            .for_each(Tracked::reread_state);
    }

    /// Re-reads thread states, those read longest ago first, until `budget` is spent
    /// (at least one; all of them if the budget allows).
    fn refresh_states_within(&mut self, budget: Duration) {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let t0 = Instant::now();
        let n = self.state.threads.len();
        let mut read = 0;
        let mut cursor = self.state_cursor;
        // the threads after the cursor, then from the first up to the cursor
        let halves = [
            (self.state_cursor.map_or(Unbounded, Excluded), Unbounded),
            (Unbounded, self.state_cursor.map_or(Unbounded, Included)),
        ];
        'rounds: for half in halves {
            for (&tid, tr) in self.state.threads.range_mut(half) {
                if read == n || (read > 0 && t0.elapsed() >= budget) {
                    break 'rounds;
                }
                tr.reread_state();
                read += 1;
                cursor = Some(tid);
            }
        }
        self.state_cursor = cursor;
        self.totals.states_read += read as u64;
    }

    fn refresh_counters(&mut self) {
        for tr in self.state.threads.values_mut() {
            read_counters(tr);
        }
    }

    /// Counters of all managed threads since they were taken over, exited ones included.
    fn total_counters(&self) -> Counters {
        let mut c = self.totals.exited_counters;
        for tr in self.state.threads.values() {
            c.accumulate(&tr.counters);
        }
        c
    }

    /// A stats line covering the time since the previous one.
    pub fn stats(&mut self) -> StatsRecord {
        self.refresh_states();
        self.refresh_counters();
        let now = Instant::now();
        let cpu = own_cpu_time();
        let counters = self.total_counters();
        let (t_prev, tot_prev, c_prev, cpu_prev) = &self.last_stats;
        let dt = now.duration_since(*t_prev).as_secs_f64().max(1e-9);
        let d = counters.delta(c_prev);
        let t = &self.totals;
        let has = |k| self.state.kinds.contains(&k);
        let decisions = t.decisions - tot_prev.decisions;
        let rec = StatsRecord {
            t_s: now.duration_since(self.state.start).as_secs_f64(),
            interval_s: dt,
            processes: self.processes(),
            threads: self.state.threads.len(),
            runnable: self
                .state
                .threads
                .values()
                .filter(|t| t.stat.runnable())
                .count(),
            state_every_ms: (self.policy.needs_thread_states()
                && t.states_read > tot_prev.states_read)
                .then(|| {
                    self.state.threads.len() as f64 * dt * 1e3
                        / (t.states_read - tot_prev.states_read) as f64
                }),
            started: t.started - tot_prev.started,
            exited: t.exited - tot_prev.exited,
            changed_threads: self.journal.changed(),
            directives: t.directives - tot_prev.directives,
            failures: t.failures - tot_prev.failures,
            managed_cpus_busy: has(CounterKind::CpuTimeNs).then(|| d.cpu_time_ns as f64 / 1e9 / dt),
            context_switches_per_s: has(CounterKind::ContextSwitches)
                .then(|| d.context_switches as f64 / dt),
            migrations_per_s: has(CounterKind::Migrations).then(|| d.migrations as f64 / dt),
            llc_mpki: (has(CounterKind::LlcMisses) && has(CounterKind::Instructions))
                .then(|| d.llc_mpki()),
            daemon_cpu_pct: 100.0 * cpu.saturating_sub(*cpu_prev).as_secs_f64() / dt,
            decisions,
            decision_us_mean: if decisions == 0 {
                0.0
            } else {
                (t.decision_ns_sum - tot_prev.decision_ns_sum) as f64 / decisions as f64 / 1e3
            },
            decision_us_max: t.decision_ns_max as f64 / 1e3,
            segments: self.segments.as_ref().map(|b| {
                let (c, p) = (b.counts, self.last_segments);
                (c.segments - p.segments, c.uncertain - p.uncertain)
            }),
            address_samples: (self.sampling.period.is_some()
                || self.sampling.totals != self.last_samples)
                .then(|| self.sampling.totals.since(&self.last_samples)),
            policy: self.policy.stats().into_iter().collect(),
        };
        self.last_samples = self.sampling.totals;
        if let Some(b) = &self.segments {
            self.last_segments = b.counts;
        }
        let mut reset = self.totals.clone();
        self.totals.decision_ns_max = 0;
        reset.decision_ns_max = 0;
        self.last_stats = (now, reset, counters, cpu);
        rec
    }

    /// Restores every setting the daemon changed on threads still alive and stops.
    pub fn finish(mut self) -> RestoreReport {
        self.restore()
    }

    fn restore(&mut self) -> RestoreReport {
        self.finished = true;
        self.restore_with_newcomers()
    }

    /// How many times a stop rescans for threads created meanwhile.
    pub const STOP_RESCANS: usize = 20;
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if !self.finished {
            let rep = self.restore();
            if !rep.failed.is_empty() {
                eprintln!(
                    "cachesched: could not restore {} thread(s): {:?}",
                    rep.failed.len(),
                    rep.failed
                );
            }
        }
    }
}

/// Opens every event of `specs` on thread `tid` with period `p` (as each event's rules
/// allow): the events opened, with their indices in `specs`, and the errors of those
/// that failed (none for a thread that vanished).
fn open_samplers(
    tid: Tid,
    specs: &[EventSpec],
    p: u64,
) -> (Vec<(usize, SampledEvent)>, Vec<SamplingError>) {
    let mut evs = Vec::with_capacity(specs.len());
    let mut errs = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        match SampledEvent::open(tid, spec, p, SAMPLE_DATA_PAGES) {
            Ok(ev) => evs.push((i, ev)),
            Err(SamplingError::Gone { .. }) => return (Vec::new(), Vec::new()),
            Err(e) => errs.push(e),
        }
    }
    (evs, errs)
}

impl Tracked {
    /// Whether the thread taken over is still there: its `stat` file, kept open, fails
    /// once that thread has ended, even if another thread now has its id (and start
    /// tick).
    fn still_there(&self) -> bool {
        self.stat_file.read().is_ok_and(|st| !st.exited())
    }
}

/// The thread a directive changes, if it changes one.
fn directive_thread(d: &Directive) -> Option<Tid> {
    match d {
        Directive::SetMask { thread, .. }
        | Directive::SetSlice { thread, .. }
        | Directive::SetNice { thread, .. }
        | Directive::Boost { thread, .. } => Some(thread.0 as Tid),
        _ => None,
    }
}

/// Reads a thread's counters into its [`Counters`].
fn read_counters(tr: &mut Tracked) {
    for c in &tr.perf {
        if let Ok(v) = c.read() {
            *tr.counters.get_mut(c.kind()) = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherited_settings_take_the_creators_originals_only_where_changed() {
        let creator = Settings {
            affinity: vec![0, 1, 2, 3],
            slice_ns: 0,
            nice: 0,
        };
        // the new thread inherited a changed mask and nice; its slice is its own
        let actual = Settings {
            affinity: vec![2],
            slice_ns: 7_000_000,
            nice: 5,
        };
        let t = Touched {
            affinity: true,
            slice: false,
            nice: true,
        };
        assert_eq!(
            t.original(&creator, actual.clone()),
            Settings {
                affinity: vec![0, 1, 2, 3],
                slice_ns: 7_000_000,
                nice: 0
            }
        );
        assert_eq!(
            Touched::default().original(&creator, actual.clone()),
            actual
        );
    }

    #[test]
    fn latencies_stay_bounded_and_since_counts_from_the_start() {
        let mut l = Latencies::default();
        let n = Latencies::KEEP as u64 + 10;
        for i in 0..n {
            l.push(i as f64);
        }
        assert!(l.us.len() <= Latencies::KEEP);
        assert_eq!(l.total, n);
        assert_eq!(
            l.since(n - 3),
            &[(n - 3) as f64, (n - 2) as f64, (n - 1) as f64]
        );
        assert_eq!(l.since(0).first(), l.us.first(), "older ones are gone");
    }
}
