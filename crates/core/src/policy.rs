//! The policy API: how a scheduler observes a kernel and tells it what to do.
//!
//! A policy is pure logic. It never performs I/O, reads a clock or keeps global state; it
//! sees time, topology, threads and their counters through a [`Ctx`], and answers with
//! [`Directive`]s (CPU mask, time slice, nice/weight, priority boost, sampling and tick
//! periods). The same policy value runs unchanged on the simulated kernel and on the
//! Linux daemon. The kernel keeps doing the actual scheduling with its baseline class
//! (CFS-like, Solaris-TS-like, round robin); directives only constrain and tune it.
//!
//! # Call protocol
//!
//! Every hook is optional (default methods do nothing). The kernel calls them on one
//! thread, never concurrently, in this order:
//!
//! 1. [`Policy::init`] once, before any thread runs. Request a periodic tick here with
//!    [`Ctx::set_tick_period`] and an address-sampling period with
//!    [`Ctx::set_sampling_period`].
//! 2. [`Policy::thread_started`] for every thread that exists at start (in thread-id
//!    order) and for every thread created later, before it first runs.
//! 3. While the run proceeds, in time order:
//!    - [`Policy::corun_segment`] when a *co-run segment* closes: an interval in which
//!      the set of threads running on the CPUs sharing one cache instance stayed
//!      constant, closed when the set changes or when it has lasted a kernel-defined
//!      maximum (so that measurements keep coming while nothing changes). Delivered only if [`Policy::wants_corun_segments`] is true. Segments of
//!      different cache instances interleave in time order of their end.
//!    - [`Policy::address_sample`] for every sampled remote-cache access, if a sampling
//!      period is set.
//!    - [`Policy::tick`] every tick period, if one is set.
//! 4. [`Policy::thread_exited`] once per thread, after it ran for the last time. No hook
//!    mentions that thread afterwards.
//!
//! Directives issued in a hook take effect when the hook returns: a new mask migrates a
//! running thread off a CPU that the mask excludes at its next scheduling point; a new
//! slice applies from the thread's next dispatch. The kernel never trusts a policy to
//! keep threads runnable: a mask that leaves a runnable thread without an online CPU is
//! replaced by all CPUs and the fallback is counted, and a watchdog fails the run with a
//! classified error when a runnable thread starves past a limit.
//!
//! # How the five papers map onto this API
//!
//! - **CASC** (co-scheduling by partial-cache miss rates): consumes `corun_segment`s of
//!   the shared L2 to estimate each thread's PCMR from group miss rates (the assignment
//!   matrix is enforced with CPU masks and [`Directive::Boost`] while measuring), then
//!   answers with per-thread CPU masks (the "buckets" of MAX_PCMR).
//! - **Cache-fair**: consumes `corun_segment`s (its miss rate against its co-runners')
//!   and `tick`s every ~10M instructions, answers with temporary [`Directive::SetSlice`]
//!   adjustments of cache-fair threads, offset on best-effort threads.
//! - **Thread clustering**: watches remote-stall counters on `tick`, switches on
//!   address sampling with [`Ctx::set_sampling_period`], builds shMaps from
//!   `address_sample`s and answers with per-thread CPU masks spanning one chip.
//! - **Cache affinity**: on `tick`, keeps each thread's mask on a home core or LLC
//!   domain, rebalancing rarely.
//! - **Timeslice aggregation**: sets [`Directive::SetSlice`] per thread, statically or
//!   from LLC misses per timeslice read from thread counters on `tick`.
//!
//! Policies compose: `cachesched_policies::Chain` runs several in order and merges
//! their directives (masks intersect; for slices, nice values and sampling periods the
//! later policy wins; a boost from any policy holds).

use crate::counters::{CounterKind, Counters};
use crate::cpumask::Cpumask;
use crate::rng::SimRng;
use crate::topology::Topology;
use crate::types::{Addr, CpuId, Nanos, ThreadId};
use serde::{Deserialize, Serialize};

/// A class a user assigns to a thread the way a priority is assigned (per thread group
/// in a scenario; on Linux by process, command-name pattern or cgroup), for policies
/// that treat classes differently. A thread of no class keeps the kernel's default
/// treatment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadClass {
    /// The cache-fair scheduler's protected class: the thread should progress as if the
    /// shared cache were divided equally (paper 2).
    CacheFair,
    /// The class whose CPU time the cache-fair scheduler uses to compensate the
    /// cache-fair class (paper 2).
    BestEffort,
}

impl ThreadClass {
    /// Parses `cache-fair` or `best-effort`.
    pub fn parse(s: &str) -> Option<ThreadClass> {
        match s {
            "cache-fair" => Some(ThreadClass::CacheFair),
            "best-effort" => Some(ThreadClass::BestEffort),
            _ => None,
        }
    }

    /// The name [`ThreadClass::parse`] accepts.
    pub fn name(self) -> &'static str {
        match self {
            ThreadClass::CacheFair => "cache-fair",
            ThreadClass::BestEffort => "best-effort",
        }
    }
}

/// What a kernel tells a policy about one of its threads when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// Thread name (workload profile name in the simulator, `comm` on Linux).
    pub name: String,
    /// Process (address space) the thread belongs to.
    pub process: u32,
    /// The class its user assigned (`None`: no class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ThreadClass>,
}

/// A snapshot of one live thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadView {
    /// The thread.
    pub id: ThreadId,
    /// Its start-time information.
    pub info: ThreadInfo,
    /// Counters accumulated since the thread started.
    pub counters: Counters,
    /// The CPU it is running on now, if any.
    pub running_on: Option<CpuId>,
    /// The CPU it last ran on, if it has run.
    pub last_cpu: Option<CpuId>,
    /// Whether it is runnable (running or waiting for a CPU), as opposed to sleeping.
    pub runnable: bool,
    /// The CPUs it may currently use.
    pub mask: Cpumask,
    /// Its nice value: the original one, or what [`Directive::SetNice`] made it
    /// (boosts not included).
    pub nice: i32,
}

/// One member of a co-run segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoRunMember {
    /// The thread.
    pub thread: ThreadId,
    /// The CPU it ran on during the segment.
    pub cpu: CpuId,
    /// Its counter deltas over the segment.
    pub delta: Counters,
}

/// An interval in which the set of threads running on the CPUs sharing one cache
/// instance was constant (closed when the set changes, or after a kernel-defined
/// maximum length).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoRunSegment {
    /// Index of the cache level in [`Topology::caches`].
    pub cache_level: usize,
    /// Instance of that level.
    pub instance: usize,
    /// Start of the interval.
    pub start: Nanos,
    /// End of the interval.
    pub end: Nanos,
    /// The threads that ran throughout the interval, in CPU order.
    pub members: Vec<CoRunMember>,
}

impl CoRunSegment {
    /// Length of the interval.
    pub fn duration(&self) -> Nanos {
        self.end.saturating_sub(self.start)
    }

    /// The sum of the members' counter deltas.
    pub fn total(&self) -> Counters {
        let mut c = Counters::default();
        for m in &self.members {
            c.accumulate(&m.delta);
        }
        c
    }
}

/// A sampled access served by another chip's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressSample {
    /// The thread that made the access.
    pub thread: ThreadId,
    /// The CPU it ran on.
    pub cpu: CpuId,
    /// The data address.
    pub addr: Addr,
    /// Whether it was a store.
    pub is_write: bool,
}

/// An instruction from a policy to the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Directive {
    /// Restrict a thread to `mask` (`None`: all CPUs again).
    SetMask {
        /// The thread.
        thread: ThreadId,
        /// Allowed CPUs.
        mask: Option<Cpumask>,
    },
    /// Give a thread a time slice (`None`: the baseline's default again).
    SetSlice {
        /// The thread.
        thread: ThreadId,
        /// Slice length.
        slice: Option<Nanos>,
    },
    /// Set a thread's nice value, −20..=19 (`None`: its original value again).
    SetNice {
        /// The thread.
        thread: ThreadId,
        /// Nice value.
        nice: Option<i32>,
    },
    /// Boost (or stop boosting) a thread's priority above unboosted threads.
    Boost {
        /// The thread.
        thread: ThreadId,
        /// Whether boosted.
        on: bool,
    },
    /// Sample one in `period` remote-cache accesses (`None`: stop sampling).
    SetSamplingPeriod {
        /// Sampling period in accesses.
        period: Option<u64>,
    },
    /// Call [`Policy::tick`] every `period` (`None`: no ticks).
    SetTickPeriod {
        /// Tick period.
        period: Option<Nanos>,
    },
}

/// Read access to the kernel's state, implemented by each kernel.
pub trait KernelView {
    /// Current time.
    fn now(&self) -> Nanos;
    /// The machine.
    fn topology(&self) -> &Topology;
    /// Live threads, in ascending id order.
    fn live_threads(&self) -> Vec<ThreadId>;
    /// A snapshot of one live thread (`None` if it does not exist or exited).
    fn thread(&self, t: ThreadId) -> Option<ThreadView>;
    /// Whether live thread `t` is runnable (`None` if it does not exist or exited): what
    /// [`KernelView::thread`] says, without building the whole snapshot (a balancing
    /// policy asks this of every thread at every tick).
    fn runnable(&self, t: ThreadId) -> Option<bool> {
        self.thread(t).map(|v| v.runnable)
    }
    /// The counters this kernel can provide.
    fn available_counters(&self) -> &[CounterKind];
    /// Whether a longer slice gives a thread a larger share of its CPU: true for
    /// quantum-based round-robin classes (Solaris FX and TS, RR), where equal-priority
    /// threads take turns of one quantum each; false (the default) for weighted fair
    /// classes (CFS/EEVDF), where a slice only sets how long a thread runs at a time and
    /// its share follows its weight.
    fn slice_is_share(&self) -> bool {
        false
    }
}

/// Everything a policy hook may look at, and where its directives go.
pub struct Ctx<'a> {
    view: &'a dyn KernelView,
    rng: &'a mut SimRng,
    out: &'a mut Vec<Directive>,
}

impl<'a> Ctx<'a> {
    /// A context over `view`, drawing randomness from `rng` and collecting directives
    /// into `out`.
    pub fn new(view: &'a dyn KernelView, rng: &'a mut SimRng, out: &'a mut Vec<Directive>) -> Self {
        Ctx { view, rng, out }
    }

    /// Current time.
    pub fn now(&self) -> Nanos {
        self.view.now()
    }
    /// The machine.
    pub fn topology(&self) -> &Topology {
        self.view.topology()
    }
    /// Live threads in ascending id order.
    pub fn threads(&self) -> Vec<ThreadId> {
        self.view.live_threads()
    }
    /// A snapshot of a live thread.
    pub fn thread(&self, t: ThreadId) -> Option<ThreadView> {
        self.view.thread(t)
    }
    /// Whether a live thread is runnable (`None` if it does not exist or exited); the
    /// cheap form of `thread(t).map(|v| v.runnable)`.
    pub fn runnable(&self, t: ThreadId) -> Option<bool> {
        self.view.runnable(t)
    }
    /// Cumulative counters of a live thread.
    pub fn counters(&self, t: ThreadId) -> Option<Counters> {
        self.view.thread(t).map(|v| v.counters)
    }
    /// Whether a longer slice gives a thread a larger share of its CPU on this kernel
    /// ([`KernelView::slice_is_share`]).
    pub fn slice_is_share(&self) -> bool {
        self.view.slice_is_share()
    }
    /// Whether the kernel provides counter `kind`.
    pub fn has_counter(&self, kind: CounterKind) -> bool {
        self.view.available_counters().contains(&kind)
    }
    /// The seeded random number generator of this run.
    pub fn rng(&mut self) -> &mut SimRng {
        self.rng
    }
    /// The kernel view, for composing policies.
    pub fn view(&self) -> &'a dyn KernelView {
        self.view
    }

    /// Issues a raw directive.
    pub fn directive(&mut self, d: Directive) {
        self.out.push(d);
    }
    /// Restricts `thread` to `mask` (`None`: all CPUs).
    pub fn set_mask(&mut self, thread: ThreadId, mask: Option<Cpumask>) {
        self.directive(Directive::SetMask { thread, mask });
    }
    /// Sets the slice of `thread` (`None`: baseline default).
    pub fn set_slice(&mut self, thread: ThreadId, slice: Option<Nanos>) {
        self.directive(Directive::SetSlice { thread, slice });
    }
    /// Sets the nice value of `thread` (`None`: original).
    pub fn set_nice(&mut self, thread: ThreadId, nice: Option<i32>) {
        self.directive(Directive::SetNice { thread, nice });
    }
    /// Boosts `thread` or ends its boost.
    pub fn boost(&mut self, thread: ThreadId, on: bool) {
        self.directive(Directive::Boost { thread, on });
    }
    /// Samples one in `period` remote accesses (`None`: off).
    pub fn set_sampling_period(&mut self, period: Option<u64>) {
        self.directive(Directive::SetSamplingPeriod { period });
    }
    /// Requests [`Policy::tick`] every `period` (`None`: off).
    pub fn set_tick_period(&mut self, period: Option<Nanos>) {
        self.directive(Directive::SetTickPeriod { period });
    }
}

/// A scheduling policy. See the [module documentation](self) for the call protocol and
/// how each paper's scheduler maps onto these hooks.
pub trait Policy: Send {
    /// Short name, used in reports.
    fn name(&self) -> &str;

    /// Counters the policy cannot work without. A kernel that lacks one refuses to start
    /// the policy and names the missing counters.
    fn required_counters(&self) -> Vec<CounterKind> {
        Vec::new()
    }

    /// Whether the policy reads threads' scheduling states ([`ThreadView::runnable`],
    /// [`ThreadView::last_cpu`]) in its tick: a kernel that must fetch them (the Linux
    /// daemon reads one `/proc` file per thread) refreshes them before each tick only
    /// for a policy that says so.
    fn needs_thread_states(&self) -> bool {
        false
    }

    /// Whether [`Policy::corun_segment`] should be called (segments cost time to build).
    fn wants_corun_segments(&self) -> bool {
        false
    }

    /// Whether the policy cannot work without co-run segments (it waits for them before
    /// deciding, as CASC's measurements do). A kernel that does not build them refuses
    /// to start such a policy; one that merely [wants](Policy::wants_corun_segments)
    /// them is started with a warning.
    fn requires_corun_segments(&self) -> bool {
        false
    }

    /// Whether the policy cannot work without [address samples](Policy::address_sample)
    /// of remote-cache accesses (thread clustering's shMaps are built from nothing
    /// else). A kernel that cannot sample data addresses of such accesses refuses to
    /// start the policy and names the missing events.
    fn requires_address_samples(&self) -> bool {
        false
    }

    /// Called once before any thread runs.
    fn init(&mut self, _ctx: &mut Ctx<'_>) {}

    /// A thread appeared (or existed at start).
    fn thread_started(&mut self, _ctx: &mut Ctx<'_>, _thread: ThreadId) {}

    /// A thread exited; it will not be mentioned again.
    fn thread_exited(&mut self, _ctx: &mut Ctx<'_>, _thread: ThreadId) {}

    /// A co-run segment of a shared cache instance closed.
    fn corun_segment(&mut self, _ctx: &mut Ctx<'_>, _segment: &CoRunSegment) {}

    /// The periodic tick requested with [`Ctx::set_tick_period`].
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    /// A sampled remote-cache access.
    fn address_sample(&mut self, _ctx: &mut Ctx<'_>, _sample: &AddressSample) {}

    /// The policy's statistics in their stored form: its typed statistics struct's
    /// [`to_record`](crate::policy_stats::PolicyStats::to_record) (see
    /// [`policy_stats!`](crate::policy_stats!)).
    fn stats(&self) -> crate::policy_stats::StatsRecord {
        Vec::new()
    }

    /// The fields of the policy's statistics, with what each measures (its typed
    /// struct's [`FIELDS`](crate::policy_stats::PolicyStats::FIELDS)).
    fn stat_fields(&self) -> &'static [crate::policy_stats::StatField] {
        &[]
    }

    /// Policy-specific vectors for reports (e.g. the sharing maps a clustering was made
    /// from), as (name, values) pairs.
    fn vectors(&self) -> Vec<(String, Vec<f64>)> {
        Vec::new()
    }
}
