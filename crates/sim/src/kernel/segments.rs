//! Co-run segments: per shared cache instance, the intervals during which the same set
//! of threads ran on its CPUs, with each member's counter deltas — what CASC and the
//! cache-fair scheduler measure from.

use super::{Kernel, PolicyEvent};
use cachesched_core::{CoRunMember, CoRunSegment, Counters, CpuId, Nanos};

/// A shared cache instance and the segment open on it.
pub(crate) struct Domain {
    pub(crate) level: usize,
    pub(crate) instance: usize,
    pub(crate) cpus: Vec<usize>,
    pub(crate) start: u64,
    pub(crate) members: Vec<(usize, usize, Counters)>,
}

impl Kernel {
    /// The set of threads on `c`'s shared caches changed: close and reopen segments.
    pub(crate) fn corun_change(&mut self, c: usize, now: u64) {
        if !self.track_segments {
            return;
        }
        for di in 0..self.cpu_domains[c].len() {
            let d = self.cpu_domains[c][di];
            self.reopen_segment(d, now);
        }
    }

    /// Cuts every segment that has lasted `segment_max_cycles` (see
    /// `KernelConfig::corun_segment_max_ms`).
    pub(crate) fn cut_long_segments(&mut self, now: u64) {
        if !self.track_segments {
            return;
        }
        for d in 0..self.domains.len() {
            let dom = &self.domains[d];
            if !dom.members.is_empty() && now.saturating_sub(dom.start) >= self.segment_max_cycles {
                self.reopen_segment(d, now);
            }
        }
    }

    /// Closes domain `d`'s open segment (delivering it) and opens one with the threads
    /// running on its CPUs now.
    pub(crate) fn reopen_segment(&mut self, d: usize, now: u64) {
        let cpus = self.domains[d].cpus.clone();
        for &x in &cpus {
            self.account_running(x, now);
        }
        let dom = &self.domains[d];
        if !dom.members.is_empty() && now > dom.start {
            let members: Vec<CoRunMember> = dom
                .members
                .iter()
                .map(|&(t, cpu, snap)| CoRunMember {
                    thread: self.threads[t].id,
                    cpu: CpuId(cpu as u32),
                    delta: self.threads[t].ctr.delta(&snap),
                })
                .collect();
            let seg = CoRunSegment {
                cache_level: dom.level,
                instance: dom.instance,
                start: Nanos(self.ns(dom.start)),
                end: Nanos(self.ns(now)),
                members,
            };
            self.events.push(PolicyEvent::Segment(seg));
        }
        let members: Vec<(usize, usize, Counters)> = cpus
            .iter()
            .filter_map(|&x| self.cpus[x].current.map(|t| (t, x, self.threads[t].ctr)))
            .collect();
        let dom = &mut self.domains[d];
        dom.members = members;
        dom.start = now;
    }
}
