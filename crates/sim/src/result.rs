//! What a simulation run reports.

use crate::hw::prefetch::PrefetchStats;
use cachesched_core::policy_stats::PolicyStats;
pub use cachesched_core::stats::{mean_ci95, mean_std};
use cachesched_core::Counters;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One thread's result over the measured window (after warm-up).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadResult {
    /// Thread id.
    pub id: u32,
    /// Workload label.
    pub name: String,
    /// Process id.
    pub process: u32,
    /// Counter deltas over the measured window.
    pub counters: Counters,
    /// Share of the measured window spent on a CPU.
    pub cpu_share: f64,
    /// Whether the thread exited.
    pub exited: bool,
    /// Ground-truth sharing group within its process (server workloads), for scoring
    /// clusterings; never shown to policies.
    pub sharing_group: Option<u32>,
    /// Slices (scheduling quanta) the kernel gave the thread that began in the measured
    /// window: one per dispatch, including a fresh slice on the same CPU when the
    /// previous one ran out (a slice already running when the window began is not
    /// counted).
    #[serde(default)]
    pub slices: u64,
    /// The thread's instructions per second of simulated time when its program runs
    /// alone on the same machine (same machine, kernel, window and seed; no other
    /// thread, no policy). Filled in by experiments that report slowdowns, STP, ANTT
    /// or Jain's index; `None` (and absent from JSON) otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solo_ips: Option<f64>,
    /// When the thread began its work segment ([`crate::config::WorkSegment`]), ms of
    /// simulated time from the start of the run; `None` (and absent from JSON) for a
    /// thread without one or that never reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_start_ms: Option<f64>,
    /// How long the thread took to complete its work segment, ms of simulated time;
    /// `None` (and absent from JSON) for a thread without one or that did not complete
    /// it before the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_ms: Option<f64>,
    /// Instructions the thread retired while the run's first work segment ran (from
    /// the first thread's segment start to that thread's segment end): every thread's
    /// progress during the principal's segment. `None` (and absent from JSON) when no
    /// segment completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_window_instructions: Option<u64>,
    /// The thread's runs on a CPU that began in the measured window and ended before
    /// the run did, with `kernel.slice_profile_ms` (empty, and absent from JSON,
    /// otherwise): [`crate::kernel::profile`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slice_profile: Vec<crate::kernel::profile::SliceRecord>,
}

/// One CPU's result over the measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuResult {
    /// CPU id.
    pub id: u32,
    /// Counter deltas over the measured window.
    pub counters: Counters,
    /// Fraction of the window a thread was on this CPU.
    pub busy_fraction: f64,
}

/// Kernel mechanism statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelStats {
    /// Context switches.
    pub context_switches: u64,
    /// Migrations (a thread ran on a different CPU than last time).
    pub migrations: u64,
    /// Threads moved by the load balancer.
    pub balance_moves: u64,
    /// Masks that would have left a thread without a CPU and were replaced by all CPUs.
    pub mask_fallbacks: u64,
    /// Directives naming a thread that no longer exists.
    pub stale_directives: u64,
    /// Policy ticks delivered.
    pub policy_ticks: u64,
    /// Co-run segments delivered.
    pub corun_segments: u64,
    /// Address samples delivered.
    pub address_samples: u64,
    /// CPU cycles spent taking address samples (`kernel.sample_cost_cycles` each).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sample_cost_cycles: u64,
    /// Runs the slice profile did not record because a thread had
    /// [`crate::kernel::profile::MAX_RUNS_PER_THREAD`] already.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slice_profile_dropped: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// One point of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// End of the interval, ms of simulated time.
    pub t_ms: f64,
    /// Instructions per second over the interval (all threads).
    pub ips: f64,
    /// L2 miss ratio over the interval.
    pub l2_miss_ratio: f64,
    /// LLC misses per 1000 instructions over the interval.
    pub llc_mpki: f64,
    /// How much of each shared cache each thread holds at the end of the interval.
    pub occupancy: Vec<CacheOccupancy>,
}

/// Per-thread occupancy of one shared cache instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheOccupancy {
    /// Cache level (2 for an L2).
    pub level: u8,
    /// Which instance of that level.
    pub instance: u32,
    /// KiB held by each thread, indexed by thread id (rounded down).
    pub kib: Vec<u32>,
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The seed.
    pub seed: u64,
    /// Machine name.
    pub machine: String,
    /// Baseline class.
    pub baseline: String,
    /// Policy (chain) name, or `none`.
    pub policy: String,
    /// Measured window in ms of simulated time.
    pub measured_ms: f64,
    /// Sum of all threads' counters over the window.
    pub totals: Counters,
    /// Instructions per second of simulated time (all threads).
    pub ips: f64,
    /// Aggregate L2 miss ratio.
    pub l2_miss_ratio: f64,
    /// Aggregate LLC misses per 1000 instructions.
    pub llc_mpki: f64,
    /// Standard deviation of threads' CPU shares divided by their mean.
    pub cpu_share_cv: f64,
    /// Memory-bus utilisation over the measured window.
    pub bus_utilization: f64,
    /// Line transfers on the memory bus over the window (fills and write-backs).
    pub bus_transfers: u64,
    /// Hardware prefetches over the window: issued, found by a demand access after
    /// arriving (useful) and before (late).
    pub prefetches: PrefetchStats,
    /// Cycles one transfer occupies the bus (line size / bandwidth).
    pub bus_transfer_cycles: f64,
    /// Mean cycles a transfer waited for the bus (queueing delay) over the window.
    pub bus_mean_wait_cycles: f64,
    /// Per-thread results.
    pub threads: Vec<ThreadResult>,
    /// Per-CPU results.
    pub cpus: Vec<CpuResult>,
    /// Kernel statistics.
    pub kernel: KernelStats,
    /// Policy statistics.
    pub policy_stats: BTreeMap<String, f64>,
    /// Policy vectors ([`cachesched_core::Policy::vectors`]), e.g. the sharing maps of
    /// thread clustering.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_vectors: BTreeMap<String, Vec<f64>>,
    /// Timeline.
    pub timeline: Vec<TimelinePoint>,
}

/// Threads listed in [`RunResult::summary`]; the rest are counted.
pub const SUMMARY_ROWS: usize = 40;

impl RunResult {
    /// The run's statistics of the policy `S` reports (`CascStats`, …), read from
    /// [`policy_stats`](RunResult::policy_stats): bare when it ran alone, under `NAME.`
    /// when it ran in a chain (NAME: one of [`PolicyStats::POLICIES`]); `None` when it
    /// did not run.
    pub fn stats_of<S: PolicyStats>(&self) -> Option<S> {
        let member = self.policy.split('+').find(|p| S::POLICIES.contains(p))?;
        if member == self.policy {
            S::from_record(&self.policy_stats)
        } else {
            S::from_record_prefixed(&self.policy_stats, &format!("{member}."))
        }
    }

    /// The summed counters of the threads named `name` (a group's label), or `None`
    /// if no thread has that name.
    pub fn counters_of(&self, name: &str) -> Option<Counters> {
        let mut c = Counters::default();
        let mut any = false;
        for t in self.threads.iter().filter(|t| t.name == name) {
            c.accumulate(&t.counters);
            any = true;
        }
        any.then_some(c)
    }

    /// A thread's instructions per second of simulated time over the measured window.
    pub fn thread_ips(&self, t: &ThreadResult) -> f64 {
        t.counters.instructions as f64 / (self.measured_ms / 1e3).max(1e-12)
    }

    /// The multiprogram metrics, or `None` unless every thread still running has a
    /// solo reference (a positive [`ThreadResult::solo_ips`]). A thread that made no
    /// progress in the window (it never ran) has an infinite slowdown, and so ANTT and
    /// the worst slowdown are infinite; Jain's index is NaN if no thread progressed.
    pub fn multiprogram(&self) -> Option<Multiprogram> {
        let progress: Vec<f64> = self
            .threads
            .iter()
            .filter(|t| !t.exited)
            .map(|t| match t.solo_ips {
                Some(solo) if solo > 0.0 => Some(self.thread_ips(t) / solo),
                _ => None,
            })
            .collect::<Option<_>>()?;
        if progress.is_empty() {
            return None;
        }
        let n = progress.len() as f64;
        let sum: f64 = progress.iter().sum();
        let squares: f64 = progress.iter().map(|x| x * x).sum();
        Some(Multiprogram {
            stp: sum,
            antt: progress.iter().map(|x| 1.0 / x).sum::<f64>() / n,
            max_slowdown: progress.iter().map(|x| 1.0 / x).fold(0.0, f64::max),
            jain: sum * sum / (n * squares),
        })
    }

    /// A short human-readable summary (at most [`SUMMARY_ROWS`] thread rows).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "seed {}  machine {}  baseline {}  policy {}\n",
            self.seed, self.machine, self.baseline, self.policy
        );
        s += &format!(
            "measured {:.1} ms: {:.3e} instr/s, L2 miss ratio {:.4}, LLC MPKI {:.3}, CPU-share CV {:.3}, bus {:.1}% (mean wait {:.1} cycles per {:.1}-cycle transfer)\n",
            self.measured_ms,
            self.ips,
            self.l2_miss_ratio,
            self.llc_mpki,
            self.cpu_share_cv,
            self.bus_utilization * 100.0,
            self.bus_mean_wait_cycles,
            self.bus_transfer_cycles
        );
        let pf = &self.prefetches;
        if pf.issued > 0 {
            s += &format!(
                "prefetches: {} issued, {:.1}% found arrived, {:.1}% found on their way\n",
                pf.issued,
                pf.useful as f64 * 100.0 / pf.issued as f64,
                pf.late as f64 * 100.0 / pf.issued as f64
            );
        }
        s += &format!(
            "kernel: {} context switches, {} migrations, {} balance moves, {} mask fallbacks\n",
            self.kernel.context_switches,
            self.kernel.migrations,
            self.kernel.balance_moves,
            self.kernel.mask_fallbacks
        );
        s += "  thread name            cpu%     IPC   L1D-miss  L2-miss  LLC-MPKI  remote\n";
        for t in self.threads.iter().take(SUMMARY_ROWS) {
            let c = &t.counters;
            s += &format!(
                "  {:>6} {:<14} {:>6.1} {:>7.3} {:>9.4} {:>8.4} {:>9.3} {:>7}\n",
                t.id,
                t.name,
                t.cpu_share * 100.0,
                c.ipc(),
                if c.l1d_refs > 0 {
                    c.l1d_misses as f64 / c.l1d_refs as f64
                } else {
                    0.0
                },
                c.l2_miss_ratio(),
                c.llc_mpki(),
                c.remote_accesses
            );
        }
        if self.threads.len() > SUMMARY_ROWS {
            s += &format!(
                "  … and {} more threads (every thread is in the JSON result)\n",
                self.threads.len() - SUMMARY_ROWS
            );
        }
        // in the order people count (pcmr.2 before pcmr.10); counts as they are, other
        // values to three significant digits
        let mut stats: Vec<(&String, &f64)> = self.policy_stats.iter().collect();
        stats.sort_by(|a, b| cachesched_core::num::natural_cmp(a.0, b.0));
        for (k, &v) in stats {
            let v = if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v}")
            } else {
                cachesched_core::num::plain(v)
            };
            s += &format!("  policy {k} = {v}\n");
        }
        s
    }
}

/// The standard multiprogram metrics of a run, from each thread's progress against
/// running alone (Eyerman and Eeckhout, IEEE Micro 2008; Jain, Chiu and Hawe, DEC TR
/// 301, 1984). A thread's *normalized progress* is its instructions per second in the
/// run over its instructions per second alone ([`ThreadResult::solo_ips`]); its
/// *slowdown* is the inverse. Threads that exited are left out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Multiprogram {
    /// System throughput (weighted speedup): the sum of normalized progress; higher
    /// is better, at most the number of threads.
    pub stp: f64,
    /// Average normalized turnaround time: the mean slowdown; lower is better, at
    /// least 1.
    pub antt: f64,
    /// The largest slowdown of any thread.
    pub max_slowdown: f64,
    /// Jain's fairness index of normalized progress, (Σx)² / (n Σx²): 1 when every
    /// thread is slowed alike, 1/n when one thread gets all the progress.
    pub jain: f64,
}
