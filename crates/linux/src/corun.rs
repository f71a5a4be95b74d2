//! Co-run segments on Linux, built from periodic samples.
//!
//! A co-run segment is an interval in which the same threads ran on the CPUs sharing a
//! cache instance, with each thread's counters over it ([`CoRunSegment`]). The kernel
//! knows when that set changes; a process outside it does not. [`SegmentBuilder`]
//! builds segments from what it can read at every sample (the daemon samples at its
//! policy's ticks): each managed thread's counters — its CPU time (task clock) and
//! migrations among them — and the CPU it was last on. Over the interval between two
//! samples a thread
//! - *ran throughout* if its CPU time grew by at least `1 − tolerance` of the interval,
//!   it did not migrate, and it was on the same CPU at both samples;
//! - *did not run* if its CPU time grew by at most `tolerance` of the interval;
//! - otherwise ran *part* of it, on a CPU it may have shared with others in turn.
//!
//! A cache instance yields a segment for the interval when every thread that ran on its
//! CPUs ran throughout: the members are those threads, their deltas the interval's. An
//! instance where some thread ran only part of the time, a thread appeared or exited,
//! or a thread's CPU is unknown, yields none for that interval (counted as
//! *uncertain*): its co-runners changed inside the interval, when is not known. So a
//! CPU shared by several runnable threads in slices shorter than the sampling period
//! rarely yields segments; a thread that has a CPU to itself (or long slices) does.
//!
//! Only managed threads are seen: a thread of another process running on the cache's
//! CPUs is invisible and its misses are not in the segment. Manage every thread that
//! shares the cache (a cgroup holding the whole workload, for example) for segments
//! that tell the truth.

use cachesched_core::{
    CoRunMember, CoRunSegment, Counters, CpuId, Cpumask, Nanos, ThreadId, Topology,
};
use std::collections::BTreeMap;

/// One thread at a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The thread.
    pub thread: ThreadId,
    /// The CPU it was last on (dense numbering), if known.
    pub cpu: Option<CpuId>,
    /// Its counters since the daemon started watching it (CPU time and migrations
    /// needed).
    pub counters: Counters,
}

/// How many segments were built and how many instance-intervals were uncertain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentCounts {
    /// Segments delivered.
    pub segments: u64,
    /// Intervals of a cache instance that yielded no segment because some thread's
    /// co-running there was not known throughout.
    pub uncertain: u64,
}

/// Builds co-run segments from samples. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct SegmentBuilder {
    /// The shared cache levels (index in the topology) and their instances.
    levels: Vec<(usize, Vec<Cpumask>)>,
    tolerance: f64,
    prev: BTreeMap<ThreadId, (Option<CpuId>, Counters)>,
    prev_at: Option<Nanos>,
    /// Totals so far.
    pub counts: SegmentCounts,
}

impl SegmentBuilder {
    /// A builder for the cache levels of `topo` shared by more than one CPU; a thread
    /// runs throughout or not at all within `tolerance` (a fraction of the interval).
    pub fn new(topo: &Topology, tolerance: f64) -> SegmentBuilder {
        let levels = topo
            .caches
            .iter()
            .enumerate()
            .filter(|(_, c)| c.instances.iter().any(|i| i.weight() > 1))
            .map(|(l, c)| (l, c.instances.clone()))
            .collect();
        SegmentBuilder {
            levels,
            tolerance,
            prev: BTreeMap::new(),
            prev_at: None,
            counts: SegmentCounts::default(),
        }
    }

    /// The segments of the interval since the previous sample, ending `now` with
    /// `samples` (every managed thread). The first call only records.
    pub fn interval(&mut self, now: Nanos, samples: &[Sample]) -> Vec<CoRunSegment> {
        let start = self.prev_at.replace(now);
        let prev = std::mem::replace(
            &mut self.prev,
            samples
                .iter()
                .map(|s| (s.thread, (s.cpu, s.counters)))
                .collect(),
        );
        let Some(start) = start else {
            return Vec::new();
        };
        let dt = now.0.saturating_sub(start.0) as f64;
        if dt <= 0.0 {
            return Vec::new();
        }
        let mut uncertain = Cpumask::new();
        let mut all_uncertain = false;
        let mut mark = |cpu: Option<CpuId>, uncertain: &mut Cpumask| match cpu {
            Some(c) => uncertain.set(c),
            None => all_uncertain = true,
        };
        let mut full: Vec<(CpuId, ThreadId, Counters)> = Vec::new();
        for s in samples {
            let Some((pcpu, pc)) = prev.get(&s.thread) else {
                // appeared inside the interval: when it ran is not known
                if s.counters.cpu_time_ns > 0 {
                    mark(s.cpu, &mut uncertain);
                }
                continue;
            };
            let d = s.counters.delta(pc);
            let ran = d.cpu_time_ns as f64 / dt;
            if ran <= self.tolerance {
                continue;
            }
            match s.cpu {
                Some(c) if ran >= 1.0 - self.tolerance && d.migrations == 0 && *pcpu == s.cpu => {
                    full.push((c, s.thread, d));
                }
                _ => {
                    mark(*pcpu, &mut uncertain);
                    mark(s.cpu, &mut uncertain);
                }
            }
        }
        // exited inside the interval: it may have run until then
        for (t, (pcpu, _)) in &prev {
            if !samples.iter().any(|s| s.thread == *t) {
                mark(*pcpu, &mut uncertain);
            }
        }
        // two threads cannot both have run throughout on one CPU
        full.sort_by_key(|f| (f.0, f.1));
        for w in full.windows(2) {
            if w[0].0 == w[1].0 {
                uncertain.set(w[0].0);
            }
        }
        let mut out = Vec::new();
        for (level, instances) in &self.levels {
            for (instance, mask) in instances.iter().enumerate() {
                let members: Vec<CoRunMember> = full
                    .iter()
                    .filter(|f| mask.contains(f.0))
                    .map(|&(cpu, thread, delta)| CoRunMember { thread, cpu, delta })
                    .collect();
                if all_uncertain || mask.intersects(&uncertain) {
                    self.counts.uncertain += 1;
                    continue;
                }
                if members.is_empty() {
                    continue;
                }
                self.counts.segments += 1;
                out.push(CoRunSegment {
                    cache_level: *level,
                    instance,
                    start,
                    end: now,
                    members,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_core::topology::{CacheKind, CacheScope, CacheSpec};

    /// Four CPUs on two chips: private L2s, an L3 per chip.
    fn topo() -> Topology {
        let spec = |level: u8, scope: CacheScope| CacheSpec {
            level,
            kind: CacheKind::Unified,
            size_bytes: 1 << 20,
            ways: 8,
            line_bytes: 64,
            latency_cycles: 10,
            scope,
            write_policy: Default::default(),
            banks: 0,
        };
        Topology::symmetric(
            "t",
            1000,
            2,
            2,
            1,
            &[spec(2, CacheScope::Core), spec(3, CacheScope::Chip)],
        )
        .unwrap()
    }

    fn sample(t: u32, cpu: u32, cpu_ms: u64, migrations: u64) -> Sample {
        Sample {
            thread: ThreadId(t),
            cpu: Some(CpuId(cpu)),
            counters: Counters {
                cpu_time_ns: cpu_ms * 1_000_000,
                migrations,
                instructions: cpu_ms * 1000,
                ..Default::default()
            },
        }
    }

    #[test]
    fn threads_running_throughout_make_segments_of_their_cache() {
        let mut b = SegmentBuilder::new(&topo(), 0.1);
        let first = [sample(1, 0, 0, 0), sample(2, 1, 0, 0), sample(3, 2, 0, 0)];
        assert!(b.interval(Nanos::from_ms(0), &first).is_empty());
        // 1 and 2 ran the whole 10 ms on CPUs 0 and 1; 3 slept
        let now = [sample(1, 0, 10, 0), sample(2, 1, 10, 0), sample(3, 2, 0, 0)];
        let segs = b.interval(Nanos::from_ms(10), &now);
        assert_eq!(segs.len(), 1, "{segs:?}");
        let s = &segs[0];
        assert_eq!((s.cache_level, s.instance), (1, 0));
        assert_eq!((s.start, s.end), (Nanos::from_ms(0), Nanos::from_ms(10)));
        let m: Vec<(u32, u32, u64)> = s
            .members
            .iter()
            .map(|m| (m.thread.0, m.cpu.0, m.delta.instructions))
            .collect();
        assert_eq!(m, vec![(1, 0, 10_000), (2, 1, 10_000)]);
        assert_eq!(
            b.counts,
            SegmentCounts {
                segments: 1,
                uncertain: 0
            }
        );
    }

    #[test]
    fn a_part_time_thread_a_migration_or_a_newcomer_leaves_its_cache_uncertain() {
        let mut b = SegmentBuilder::new(&topo(), 0.1);
        b.interval(
            Nanos::from_ms(0),
            &[sample(1, 0, 0, 0), sample(2, 1, 0, 0), sample(3, 2, 0, 0)],
        );
        // 1 ran half the time (it shared CPU 0); 3 ran throughout on CPU 2
        let segs = b.interval(
            Nanos::from_ms(10),
            &[sample(1, 0, 5, 0), sample(2, 1, 10, 0), sample(3, 2, 10, 0)],
        );
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].instance, 1);
        assert_eq!(b.counts.uncertain, 1);
        // 3 migrated from CPU 2 to CPU 3 (and back: same CPU, but a migration counted)
        let segs = b.interval(
            Nanos::from_ms(20),
            &[
                sample(1, 0, 15, 0),
                sample(2, 1, 20, 0),
                sample(3, 2, 20, 2),
            ],
        );
        assert_eq!(segs.len(), 1, "{segs:?}");
        assert_eq!(segs[0].instance, 0);
        // a thread that appeared on CPU 1 with CPU time: that cache is uncertain
        let segs = b.interval(
            Nanos::from_ms(30),
            &[
                sample(1, 0, 25, 0),
                sample(2, 1, 30, 0),
                sample(3, 2, 30, 2),
                sample(4, 1, 3, 0),
            ],
        );
        assert_eq!(segs.len(), 1, "{segs:?}");
        assert_eq!(segs[0].instance, 1);
        // thread 4 exited: CPU 1's cache uncertain once more
        let segs = b.interval(
            Nanos::from_ms(40),
            &[
                sample(1, 0, 35, 0),
                sample(2, 1, 40, 0),
                sample(3, 2, 40, 2),
            ],
        );
        assert_eq!(segs.iter().map(|s| s.instance).collect::<Vec<_>>(), vec![1]);
        // an unknown CPU: nothing can be said anywhere
        let mut lost = sample(1, 0, 45, 0);
        lost.cpu = None;
        let segs = b.interval(
            Nanos::from_ms(50),
            &[lost, sample(2, 1, 50, 0), sample(3, 2, 50, 2)],
        );
        assert!(segs.is_empty());
    }
}
