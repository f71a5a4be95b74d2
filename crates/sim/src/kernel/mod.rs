//! The simulated operating-system kernel: threads, per-CPU run queues, the dispatcher,
//! slices, context switches, sleep/wake, CPU masks, load balancing, guardrails, the
//! per-thread PMU counters and the directives policies give.
//!
//! Per-CPU run queues ordered by the baseline [`Class`]; a thread's slice is checked at
//! every chunk boundary; context switches cost `context_switch_us` of CPU time. Under
//! CFS and RR, waking threads go to an idle allowed CPU (preferring the last one,
//! unless `affinity_oblivious`), else the least loaded; a periodic balancer pulls
//! queued, cache-cold threads to less loaded CPUs and an idle CPU pulls immediately.
//! The Solaris classes (TS, FX) are placed by the Solaris dispatcher's own rules
//! (`solaris.rs`): cache warmth, the lowest-priority CPU, run-queue matching with a
//! neighbour, idle stealing, no periodic balancer.
//! Guardrails: an empty effective mask falls back to the thread's binding (counted); the watchdog
//! fails the run when a runnable thread waits past `starvation_limit_ms`. Co-run
//! segments are kept per shared cache ([`segments`]).

pub mod class;
pub mod profile;
pub mod segments;
mod solaris;
pub mod solaris_tables;

use crate::config::{Baseline, KernelConfig};
use crate::engine::SimError;
use crate::hw::core::{ContextState, CoreTiming};
use crate::hw::memory::MemorySystem;
use crate::result::KernelStats;
use crate::workload::{Op, Workload};
use cachesched_core::policy::KernelView;
use cachesched_core::{
    AddressSample, CoRunSegment, CounterKind, Counters, CpuId, Cpumask, Directive, Nanos, SimRng,
    ThreadId, ThreadInfo, ThreadView, Topology,
};
use class::{Class, SchedEntity};
use segments::Domain;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Waiting,
    Runnable,
    Running(usize),
    Sleeping,
    Exited,
}

pub(crate) struct Thread {
    pub(crate) id: ThreadId,
    pub(crate) info: ThreadInfo,
    pub(crate) workload: Box<dyn Workload>,
    /// Operations generated ahead ([`Workload::fill`]), consumed from `op_pos`, all at
    /// base CPI `op_cpi`.
    pub(crate) ops: Vec<Op>,
    pub(crate) op_pos: usize,
    pub(crate) op_cpi: f64,
    pub(crate) state: State,
    pub(crate) ctr: Counters,
    pub(crate) policy_mask: Option<Cpumask>,
    /// The CPUs the thread is bound to (its group's `cpus`, else all).
    pub(crate) bound: Cpumask,
    pub(crate) mask: Cpumask,
    pub(crate) orig_nice: i32,
    pub(crate) se: SchedEntity,
    pub(crate) last_cpu: Option<usize>,
    pub(crate) last_ran: u64,
    pub(crate) wait_since: u64,
    pub(crate) dispatched_at: u64,
    pub(crate) ctr_at_dispatch: Counters,
    /// Core-timing state: phase, pending access, misses and stores in flight.
    pub(crate) timing: ContextState,
    pub(crate) base_ctr: Counters,
    /// Slices (quanta) the thread was given: one per dispatch, including a fresh slice
    /// on the same CPU when its previous one ran out.
    pub(crate) slices: u64,
    /// `slices` when the measured window began.
    pub(crate) base_slices: u64,
    /// Ground truth for scoring clusterings: the sharing group within the process.
    pub(crate) sharing_group: Option<u32>,
    /// Its work segment's timing.
    pub(crate) segment: SegmentTimer,
    /// Its instruction count when the run's segment window opened and closed.
    pub(crate) window_instructions: [Option<u64>; 2],
}

/// The timing of a thread's work segment ([`crate::config::WorkSegment`]): the cycles
/// at which it passed the segment's first and last instruction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentTimer {
    /// The instruction count at which the next mark is passed (`u64::MAX`: none left,
    /// so the hot loop's check never fires for a thread without a segment).
    pub(crate) next: u64,
    /// The instruction count that ends the segment.
    end_instructions: u64,
    /// The cycle at which the segment began.
    pub(crate) started: Option<u64>,
    /// The cycle at which it ended.
    pub(crate) ended: Option<u64>,
}

impl SegmentTimer {
    /// The timer of `segment` (none: a timer that never fires).
    pub(crate) fn new(segment: Option<crate::config::WorkSegment>) -> SegmentTimer {
        let (next, end) = segment.map_or((u64::MAX, u64::MAX), |s| {
            (
                s.start_instructions,
                s.start_instructions.saturating_add(s.instructions),
            )
        });
        SegmentTimer {
            next,
            end_instructions: end,
            started: None,
            ended: None,
        }
    }

    /// The thread passed the next mark at cycle `now`; returns whether that completed
    /// the segment.
    #[cold]
    pub(crate) fn pass(&mut self, now: u64) -> bool {
        if self.started.is_none() {
            self.started = Some(now);
            self.next = self.end_instructions;
            false
        } else {
            self.ended = Some(now);
            self.next = u64::MAX;
            true
        }
    }
}

pub(crate) struct Cpu {
    pub(crate) current: Option<usize>,
    pub(crate) rq: Vec<usize>,
    pub(crate) ready: u64,
    pub(crate) slice_end: u64,
    pub(crate) need_resched: bool,
    pub(crate) core: usize,
    pub(crate) ctr: Counters,
    pub(crate) base_ctr: Counters,
    pub(crate) busy_cycles: u64,
    pub(crate) base_busy: u64,
    pub(crate) balance_failed: u32,
}

impl Kernel {
    /// Opens the measured window's count of quanta at `now`: every thread that has not
    /// exited is yet to begin its slices; `floor`: the window's minimum length is
    /// already met.
    pub(crate) fn open_quanta_window(&mut self, now: u64, floor: bool) {
        let left = self
            .threads
            .iter()
            .filter(|t| t.state != State::Exited)
            .count();
        self.quanta_left = Some((left, floor));
        self.stop_if_quanta_done(now);
    }

    /// A thread began its last required slice of the measured window, or exited
    /// short of it, at `now` ([`crate::config::SimConfig::stop_after_quanta`]).
    pub(crate) fn quanta_reached(&mut self, now: u64) {
        if let Some((left, _)) = self.quanta_left.as_mut() {
            *left = left.saturating_sub(1);
        }
        self.stop_if_quanta_done(now);
    }

    /// The measured window has lasted its floor at `now`.
    pub(crate) fn quanta_floor_reached(&mut self, now: u64) {
        if let Some((_, floor)) = self.quanta_left.as_mut() {
            *floor = true;
        }
        self.stop_if_quanta_done(now);
    }

    /// Stops the run at `now` once the window is open, no thread is left short of its
    /// quanta and the window has lasted its floor.
    fn stop_if_quanta_done(&mut self, now: u64) {
        if self.quanta_left == Some((0, true)) {
            self.add_timer(now, Timer::Stop);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    Start(usize),
    Wake(usize),
    Balance,
    /// Solaris: idle CPU tries to steal again (a protected thread became stealable).
    Steal(usize),
    /// Solaris TS: the once-a-second `ts_update`.
    TsUpdate,
    PolicyTick(u64),
    Sample,
    WarmupEnd,
    /// Every work segment is complete, or every thread has had its quanta in the
    /// window, and the run was asked to stop then.
    Stop,
    /// The measured window has lasted [`crate::config::QuantaStop::min_ms`].
    WindowFloor,
    /// The slice profile's bin of (thread, run generation) ends.
    SliceBin(usize, u64),
}

pub(crate) enum PolicyEvent {
    Segment(CoRunSegment),
    Sample(AddressSample),
    Exited(ThreadId),
}

/// The kernel and machine state (everything but the policy).
pub(crate) struct Kernel {
    pub(crate) topo: Topology,
    pub(crate) mem: MemorySystem,
    pub(crate) class: Class,
    pub(crate) kcfg: KernelConfig,
    pub(crate) freq_mhz: u64,
    pub(crate) core_timing: CoreTiming,
    pub(crate) ctx_switch_cycles: u64,
    pub(crate) migration_cost_cycles: u64,
    pub(crate) starvation_cycles: u64,
    pub(crate) threads: Vec<Thread>,
    pub(crate) cpus: Vec<Cpu>,
    /// Per CPU, the cycle at which its running thread steps next (its `ready`), or
    /// `u64::MAX` when it runs none: the array the engine scans for the earliest CPU,
    /// kept beside the CPUs so that the scan reads one small contiguous slice.
    pub(crate) next_step: Vec<u64>,
    /// Per core: the dispatch slot (cycle × issue width) from which the core's
    /// dispatch bandwidth is free.
    pub(crate) slots: Vec<u64>,
    pub(crate) ipath_shift: u32,
    pub(crate) now: u64,
    pub(crate) timers: BinaryHeap<Reverse<(u64, u64, Timer)>>,
    pub(crate) timer_seq: u64,
    pub(crate) enqueue_seq: u64,
    /// Sequence numbers for the front of a queue (`setfrontdq`), counting down below
    /// every back-of-queue number.
    pub(crate) front_seq: u64,
    /// Solaris `rechoose_interval` in cycles.
    pub(crate) rechoose_cycles: u64,
    /// Solaris `nosteal_nsec` in cycles.
    pub(crate) nosteal_cycles: u64,
    pub(crate) rng: SimRng,
    pub(crate) domains: Vec<Domain>,
    pub(crate) cpu_domains: Vec<Vec<usize>>,
    pub(crate) track_segments: bool,
    /// Longest co-run segment before it is cut.
    pub(crate) segment_max_cycles: u64,
    /// Virtual-to-physical page placement applied before the memory system.
    pub(crate) pages: crate::config::PagePlacement,
    pub(crate) sampling_period: Option<u64>,
    pub(crate) sample_countdown: u64,
    pub(crate) tick_period: Option<u64>,
    pub(crate) tick_gen: u64,
    pub(crate) events: Vec<PolicyEvent>,
    pub(crate) stats: KernelStats,
    /// Per CPU, with the LLC partitioned per core: its LLC instance and the partition
    /// class of its core, which a thread's fills take while it runs there.
    pub(crate) llc_class_of_cpu: Option<Vec<(usize, u16)>>,
    pub(crate) available: Vec<CounterKind>,
    /// Threads whose work segment has not completed yet.
    pub(crate) segments_open: usize,
    /// Whether the run ends when the last work segment completes
    /// ([`crate::config::SimConfig::stop_after_segments`]).
    pub(crate) stop_after_segments: bool,
    /// The thread whose segment opened the run's segment window (the first to begin
    /// one).
    pub(crate) window_owner: Option<usize>,
    /// With [`crate::config::SimConfig::stop_after_quanta`]: the slices each thread
    /// must begin in the measured window.
    pub(crate) quanta_stop: Option<u64>,
    /// Once the measured window is open (`None` before), the threads yet to begin
    /// their `quanta_stop` slices in it, and whether the window has lasted its floor.
    pub(crate) quanta_left: Option<(usize, bool)>,
    /// The slice profile, if configured ([`KernelConfig::slice_profile_ms`]).
    pub(crate) profile: Option<profile::SliceProfiler>,
}

impl Kernel {
    pub(crate) fn ns(&self, cycles: u64) -> u64 {
        (cycles as u128 * 1000 / self.freq_mhz as u128) as u64
    }

    pub(crate) fn cycles(&self, ns: u64) -> u64 {
        (ns as u128 * self.freq_mhz as u128 / 1000) as u64
    }

    pub(crate) fn add_timer(&mut self, at: u64, t: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, t)));
    }

    pub(crate) fn nr(&self, c: usize) -> usize {
        self.cpus[c].rq.len() + self.cpus[c].current.is_some() as usize
    }

    pub(crate) fn min_vruntime(&self, c: usize) -> Option<u64> {
        let cpu = &self.cpus[c];
        cpu.rq
            .iter()
            .chain(cpu.current.iter())
            .map(|&t| self.threads[t].se.vruntime)
            .min()
    }

    /// Brings a running thread's cycle and CPU-time accounting up to `now`.
    pub(crate) fn account_running(&mut self, c: usize, now: u64) {
        if let Some(t) = self.cpus[c].current {
            let th = &mut self.threads[t];
            let delta = now.saturating_sub(th.dispatched_at);
            if delta == 0 {
                return;
            }
            th.dispatched_at = now;
            th.ctr.cycles += delta;
            let ns = (delta as u128 * 1000 / self.freq_mhz as u128) as u64;
            th.ctr.cpu_time_ns += ns;
            self.class.charge(&mut th.se, ns);
            self.cpus[c].busy_cycles += delta;
        }
    }

    pub(crate) fn effective_mask(&mut self, t: usize) {
        let bound = &self.threads[t].bound;
        let m = match &self.threads[t].policy_mask {
            None => bound.clone(),
            Some(p) => {
                let m = p.and(bound);
                if m.is_empty() {
                    self.stats.mask_fallbacks += 1;
                    bound.clone()
                } else {
                    m
                }
            }
        };
        self.threads[t].mask = m;
    }

    /// Chooses a CPU for a thread becoming runnable.
    pub(crate) fn select_cpu(&mut self, t: usize) -> usize {
        let th = &self.threads[t];
        let allowed: Vec<usize> = th.mask.iter().map(|c| c.index()).collect();
        let idle: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|&c| self.nr(c) == 0)
            .collect();
        if self.kcfg.affinity_oblivious {
            let pool: Vec<usize> = if !idle.is_empty() {
                idle
            } else {
                let min = allowed.iter().map(|&c| self.nr(c)).min().unwrap_or(0);
                allowed
                    .iter()
                    .copied()
                    .filter(|&c| self.nr(c) == min)
                    .collect()
            };
            return pool[self.rng.below(pool.len() as u64) as usize];
        }
        if let Some(last) = th.last_cpu {
            if idle.contains(&last) {
                return last;
            }
        }
        if !idle.is_empty() {
            // prefer an idle CPU sharing the last-level cache with the last CPU
            if let Some(last) = th.last_cpu {
                if let Some(&c) = idle.iter().find(|&&c| self.share_llc(c, last)) {
                    return c;
                }
            }
            return self.spread_idle(&idle);
        }
        let min = allowed.iter().map(|&c| self.nr(c)).min().unwrap_or(0);
        if let Some(last) = th.last_cpu {
            if allowed.contains(&last) && self.nr(last) == min {
                return last;
            }
        }
        *allowed
            .iter()
            .find(|&&c| self.nr(c) == min)
            .expect("mask is never empty")
    }

    /// Of the idle CPUs `idle`, the one on the least loaded chip, then the least loaded
    /// core (then the lowest number).
    pub(crate) fn spread_idle(&self, idle: &[usize]) -> usize {
        let load = |on: &dyn Fn(&cachesched_core::CpuInfo) -> bool| -> usize {
            self.topo
                .cpus
                .iter()
                .filter(|ci| on(ci))
                .map(|ci| self.nr(ci.id.index()))
                .sum()
        };
        *idle
            .iter()
            .min_by_key(|&&c| {
                let me = self.topo.cpus[c];
                let chip = load(&|ci| ci.chip == me.chip);
                let core = load(&|ci| ci.core == me.core);
                (chip, core, c)
            })
            .expect("non-empty")
    }

    /// Marks thread `t` runnable at `now` in CPU `c`'s queue, at its back or (`front`,
    /// Solaris `setfrontdq`) ahead of every thread of equal priority; nothing else.
    fn queue(&mut self, t: usize, c: usize, now: u64, front: bool) {
        let seq = if front {
            self.front_seq -= 1;
            self.front_seq
        } else {
            self.enqueue_seq += 1;
            self.enqueue_seq
        };
        let th = &mut self.threads[t];
        th.se.enqueue_seq = seq;
        th.state = State::Runnable;
        th.wait_since = now;
        self.cpus[c].rq.push(t);
    }

    /// Re-bases thread `t`'s vruntime from CPU `from`'s queue to CPU `to`'s.
    fn move_vruntime(&mut self, t: usize, from: usize, to: usize) {
        let (fm, tm) = (self.min_vruntime(from), self.min_vruntime(to));
        self.threads[t].se.vruntime =
            self.class
                .migrate_vruntime(self.threads[t].se.vruntime, fm, tm);
    }

    /// Puts runnable thread `t` on CPU `c`'s queue, dispatching if `c` is idle.
    pub(crate) fn enqueue(&mut self, t: usize, c: usize, now: u64) {
        self.queue(t, c, now, false);
        match self.cpus[c].current {
            None => self.schedule(c, now, false),
            Some(cur) => {
                if self
                    .class
                    .preempts(&self.threads[cur].se, &self.threads[t].se)
                {
                    self.cpus[c].need_resched = true;
                }
            }
        }
    }

    /// Wakes (or starts) thread `t`.
    pub(crate) fn wake(&mut self, t: usize, now: u64) {
        if self.class.solaris() {
            self.class.woke(&mut self.threads[t].se, None);
            let c = self.setbackdq_cpu(t, now, false);
            self.enqueue(t, c, now);
            return;
        }
        let c = self.select_cpu(t);
        let minv = self.min_vruntime(c);
        self.class.woke(&mut self.threads[t].se, minv);
        self.enqueue(t, c, now);
    }

    /// Reschedules CPU `c` at `now`. `expired`: the current thread used its slice.
    pub(crate) fn schedule(&mut self, c: usize, now: u64, expired: bool) {
        self.cpus[c].need_resched = false;
        let prev = self.cpus[c].current;
        if let Some(p) = prev {
            self.account_running(c, now);
            if expired {
                self.class.slice_expired(&mut self.threads[p].se);
            }
        }
        // Requeue prev if still runnable.
        if let Some(p) = prev {
            if self.threads[p].state == State::Running(c) {
                self.cpus[c].current = None;
                self.threads[p].last_ran = now;
                self.requeue(p, c, now, expired);
            }
        }
        self.cpus[c].current = None;
        self.next_step[c] = u64::MAX;
        if self.cpus[c].rq.is_empty() {
            if self.class.solaris() {
                self.steal(c, now);
            } else {
                self.pull(c, now, true);
            }
        }
        let next = self.cpus[c]
            .rq
            .iter()
            .enumerate()
            .min_by_key(|(_, &t)| self.class.key(&self.threads[t].se))
            .map(|(i, _)| i);
        let Some(i) = next else {
            if let Some(p) = prev {
                self.switched_out(p, c, now);
                self.corun_change(c, now);
            }
            return;
        };
        let t = self.cpus[c].rq.swap_remove(i);
        self.class.dispatched(&mut self.threads[t].se);
        if let Some(classes) = &self.llc_class_of_cpu {
            let (inst, class) = classes[c];
            self.mem.set_llc_class(inst, t as u32, class);
        }
        let nr = self.cpus[c].rq.len() + 1;
        let total_w: u64 = self.cpus[c]
            .rq
            .iter()
            .map(|&q| self.threads[q].se.weight() as u64)
            .sum::<u64>()
            + self.threads[t].se.weight() as u64;
        let slice_ns = self.class.slice_ns(&self.threads[t].se, nr, total_w);
        let switched = prev != Some(t);
        let mut start = now;
        if switched {
            if let Some(p) = prev {
                self.switched_out(p, c, now);
            }
            start += self.ctx_switch_cycles;
            self.cpus[c].ready = start;
        } else {
            self.cpus[c].ready = self.cpus[c].ready.max(now);
        }
        let slice_cycles = self.cycles(slice_ns);
        let th = &mut self.threads[t];
        if th.last_cpu.is_some_and(|l| l != c) {
            th.ctr.migrations += 1;
            self.stats.migrations += 1;
        }
        th.last_cpu = Some(c);
        th.slices += 1;
        if self.quanta_stop == Some(th.slices - th.base_slices) {
            self.quanta_reached(now);
        }
        let th = &mut self.threads[t];
        th.state = State::Running(c);
        th.dispatched_at = start;
        th.ctr_at_dispatch = th.ctr;
        self.cpus[c].current = Some(t);
        self.next_step[c] = self.cpus[c].ready;
        self.cpus[c].slice_end = start + slice_cycles;
        if switched {
            self.corun_change(c, now);
            self.profile_in(t, c, start);
        }
    }

    /// The slice profile: thread `t` switched in on CPU `c`, running from `start`.
    fn profile_in(&mut self, t: usize, c: usize, start: u64) {
        if self.profile.is_none() {
            return;
        }
        let m = self.moment(t, c, start);
        let p = self.profile.as_mut().expect("checked");
        let bin = p.bin_cycles;
        if let Some(g) = p.switched_in(t, &m) {
            self.add_timer(start + bin, Timer::SliceBin(t, g));
        }
    }

    /// What the slice profile reads of thread `t` on CPU `c` at `now`.
    fn moment(&self, t: usize, c: usize, now: u64) -> profile::Moment {
        let inst = self.mem.llc_instance(c);
        let ((fills, streamer_fills), (lines, own)) = inst.map_or(((0, 0), (0, 0)), |i| {
            (self.mem.llc_fills(i), self.mem.llc_lines(i, t as u32))
        });
        profile::Moment {
            ms: self.ns(now) as f64 / 1e6,
            llc_misses: self.threads[t].ctr.llc_misses,
            inst,
            fills,
            streamer_fills,
            own,
            lines,
        }
    }

    /// The slice profile: a bin of thread `t`'s run of generation `gen` ends at `at`.
    pub(crate) fn profile_bin(&mut self, t: usize, gen: u64, at: u64) {
        let misses = self.threads[t].ctr.llc_misses;
        if let Some(p) = self.profile.as_mut() {
            if p.bin(t, gen, misses) {
                let next = at + p.bin_cycles;
                self.add_timer(next, Timer::SliceBin(t, gen));
            }
        }
    }

    /// Puts thread `p`, just switched out of CPU `c` at `now` and still runnable, back
    /// on a queue: `expired` if its slice ran out (else it was preempted or its mask
    /// changed).
    fn requeue(&mut self, p: usize, c: usize, now: u64, expired: bool) {
        let here = self.threads[p].mask.contains(CpuId(c as u32));
        if self.class.solaris() {
            if !expired && here {
                // setfrontdq: the front of its own queue
                self.queue(p, c, now, true);
            } else {
                let to = self.setbackdq_cpu(p, now, here);
                self.push_back(p, c, to, now);
            }
            return;
        }
        let to = if !here {
            self.select_cpu(p)
        } else if expired && self.kcfg.affinity_oblivious {
            // any CPU that is not busier than this one
            let mine = self.nr(c);
            let pool: Vec<usize> = self.threads[p]
                .mask
                .iter()
                .map(|x| x.index())
                .filter(|&x| self.nr(x) <= mine)
                .collect();
            pool[self.rng.below(pool.len() as u64) as usize]
        } else {
            c
        };
        if to != c {
            self.move_vruntime(p, c, to);
        }
        self.push_back(p, c, to, now);
    }

    /// Puts runnable thread `p`, switched out of CPU `from` (being rescheduled), at the
    /// back of CPU `to`'s queue (dispatching there if `to` is another, idle CPU).
    fn push_back(&mut self, p: usize, from: usize, to: usize, now: u64) {
        if to != from {
            self.enqueue(p, to, now);
        } else {
            self.queue(p, from, now, false);
        }
    }

    pub(crate) fn switched_out(&mut self, p: usize, c: usize, now: u64) {
        if self.profile.is_some() {
            let m = self.moment(p, c, now);
            if let Some(pr) = self.profile.as_mut() {
                pr.switched_out(p, &m);
            }
        }
        let th = &mut self.threads[p];
        // the front end refetches when the thread runs again
        th.timing.last_pc_line = u64::MAX;
        th.ctr.context_switches += 1;
        th.last_ran = now;
        self.stats.context_switches += 1;
        self.charge_cpu(p, c);
    }

    /// Adds thread `t`'s counters since its last charge to CPU `c`'s counters.
    pub(crate) fn charge_cpu(&mut self, t: usize, c: usize) {
        let th = &mut self.threads[t];
        let d = th.ctr.delta(&th.ctr_at_dispatch);
        th.ctr_at_dispatch = th.ctr;
        self.cpus[c].ctr.accumulate(&d);
    }

    /// Pulls one queued thread to CPU `c` from the busiest CPU. With `idle`, from any
    /// CPU that has a queued thread.
    pub(crate) fn pull(&mut self, c: usize, now: u64, idle: bool) -> bool {
        let none = vec![false; self.cpus.len()];
        self.pull_from(c, now, idle, &none).is_some()
    }

    /// [`Kernel::pull`], skipping `excluded` sources; returns the source CPU.
    pub(crate) fn pull_from(
        &mut self,
        c: usize,
        now: u64,
        idle: bool,
        excluded: &[bool],
    ) -> Option<usize> {
        let here = self.nr(c);
        let mut sources: Vec<usize> = Vec::new();
        for (b, &skip) in excluded.iter().enumerate() {
            if b == c || skip || self.cpus[b].rq.is_empty() {
                continue;
            }
            let nb = self.nr(b);
            // Move when the imbalance is at least two threads, or (CFS, like Linux's
            // imbalance_pct) when the busier CPU carries over 25% more threads: the
            // thread that moves alternates, which evens out CPU shares over time.
            let cfs_imbalance =
                self.class.baseline() == Baseline::Cfs && nb > here && nb * 4 > here * 5;
            if !idle && nb < here + 2 && !cfs_imbalance {
                continue;
            }
            sources.push(b);
        }
        // busiest first; when none of its queued threads may run here, the next busiest
        // (Linux retries without the all-pinned busiest CPU; Solaris' idle CPUs scan
        // every queue)
        sources.sort_by_key(|&b| (std::cmp::Reverse(self.nr(b)), b));
        let cpu_c = CpuId(c as u32);
        let mut found = None;
        for b in sources {
            let ignore_hot = self.kcfg.affinity_oblivious || self.cpus[b].balance_failed > 2;
            let cand = self.cpus[b].rq.iter().position(|&t| {
                let th = &self.threads[t];
                th.mask.contains(cpu_c)
                    && (ignore_hot || now.saturating_sub(th.last_ran) > self.migration_cost_cycles)
            });
            match cand {
                Some(i) => {
                    found = Some((b, i));
                    break;
                }
                None => self.cpus[b].balance_failed += 1,
            }
        }
        let (b, i) = found?;
        self.cpus[b].balance_failed = 0;
        let t = self.cpus[b].rq.remove(i);
        self.move_vruntime(t, b, c);
        self.stats.balance_moves += 1;
        self.cpus[c].rq.push(t);
        if let Some(cur) = self.cpus[c].current {
            if self
                .class
                .preempts(&self.threads[cur].se, &self.threads[t].se)
            {
                self.cpus[c].need_resched = true;
            }
        }
        Some(b)
    }

    pub(crate) fn balance(&mut self, now: u64) -> Result<(), SimError> {
        // One pass: each CPU pulls at most once, and a CPU that gained or lost a thread
        // in this pass is neither source nor destination again (no ping-pong). Solaris
        // has no balancer.
        let mut touched = vec![self.class.solaris(); self.cpus.len()];
        for c in 0..self.cpus.len() {
            if touched[c] {
                continue;
            }
            if let Some(b) = self.pull_from(c, now, false, &touched) {
                touched[c] = true;
                touched[b] = true;
                if self.cpus[c].current.is_none() {
                    self.schedule(c, now, false);
                }
            }
        }
        // Solaris idle CPUs poll the other queues in their idle loop (here: at every
        // balancing tick, as well as when they go idle).
        if self.class.solaris() {
            for c in 0..self.cpus.len() {
                if self.cpus[c].current.is_none() && self.steal(c, now) {
                    self.schedule(c, now, false);
                }
            }
        }
        // Watchdog.
        for t in 0..self.threads.len() {
            if self.threads[t].state == State::Runnable {
                let waited = now.saturating_sub(self.threads[t].wait_since);
                if waited > self.starvation_cycles {
                    return Err(SimError::Starvation {
                        thread: self.threads[t].id,
                        waited_ms: self.ns(waited) as f64 / 1e6,
                        limit_ms: self.kcfg.starvation_limit_ms,
                        at_ms: self.ns(now) as f64 / 1e6,
                    });
                }
            }
        }
        Ok(())
    }

    pub(crate) fn apply(&mut self, directives: Vec<Directive>, now: u64) {
        for d in directives {
            match d {
                Directive::SetSamplingPeriod { period } => {
                    self.sampling_period = period.filter(|&p| p > 0);
                    self.sample_countdown = self.sampling_period.unwrap_or(0);
                }
                Directive::SetTickPeriod { period } => {
                    self.tick_gen += 1;
                    self.tick_period = period.filter(|p| p.0 > 0).map(|p| self.cycles(p.0).max(1));
                    if let Some(p) = self.tick_period {
                        let g = self.tick_gen;
                        self.add_timer(now + p, Timer::PolicyTick(g));
                    }
                }
                Directive::SetMask { thread, mask } => {
                    let Some(t) = self.live(thread) else { continue };
                    self.threads[t].policy_mask = mask;
                    self.effective_mask(t);
                    let mask = self.threads[t].mask.clone();
                    match self.threads[t].state {
                        State::Running(c) if !mask.contains(CpuId(c as u32)) => {
                            self.cpus[c].need_resched = true
                        }
                        State::Runnable => {
                            let c = self
                                .cpus
                                .iter()
                                .position(|cpu| cpu.rq.contains(&t))
                                .expect("queued");
                            if !mask.contains(CpuId(c as u32)) {
                                self.cpus[c].rq.retain(|&x| x != t);
                                let to = if self.class.solaris() {
                                    self.setbackdq_cpu(t, now, false)
                                } else {
                                    self.select_cpu(t)
                                };
                                self.move_vruntime(t, c, to);
                                self.enqueue(t, to, now);
                            }
                        }
                        _ => {}
                    }
                }
                Directive::SetSlice { thread, slice } => {
                    if let Some(t) = self.live(thread) {
                        self.threads[t].se.custom_slice_ns = slice.map(|s| s.0);
                    }
                }
                Directive::SetNice { thread, nice } => {
                    if let Some(t) = self.live(thread) {
                        let n = nice.unwrap_or(self.threads[t].orig_nice).clamp(-20, 19);
                        self.threads[t].se.nice = n;
                    }
                }
                Directive::Boost { thread, on } => {
                    if let Some(t) = self.live(thread) {
                        self.threads[t].se.boosted = on;
                        if on {
                            if let State::Runnable = self.threads[t].state {
                                let c = self
                                    .cpus
                                    .iter()
                                    .position(|cpu| cpu.rq.contains(&t))
                                    .expect("queued");
                                if let Some(cur) = self.cpus[c].current {
                                    if !self.threads[cur].se.boosted {
                                        self.cpus[c].need_resched = true;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    pub(crate) fn live(&mut self, thread: ThreadId) -> Option<usize> {
        let t = thread.index();
        match self.threads.get(t).map(|th| th.state) {
            Some(State::Exited) | None => {
                self.stats.stale_directives += 1;
                None
            }
            _ => Some(t),
        }
    }
}

impl KernelView for Kernel {
    fn now(&self) -> Nanos {
        Nanos(self.ns(self.now))
    }
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn live_threads(&self) -> Vec<ThreadId> {
        self.threads
            .iter()
            .filter(|t| !matches!(t.state, State::Exited | State::Waiting))
            .map(|t| t.id)
            .collect()
    }
    fn thread(&self, t: ThreadId) -> Option<ThreadView> {
        let th = self.threads.get(t.index())?;
        if matches!(th.state, State::Exited) {
            return None;
        }
        Some(ThreadView {
            id: th.id,
            info: th.info.clone(),
            counters: th.ctr,
            running_on: match th.state {
                State::Running(c) => Some(CpuId(c as u32)),
                _ => None,
            },
            last_cpu: th.last_cpu.map(|c| CpuId(c as u32)),
            runnable: matches!(th.state, State::Running(_) | State::Runnable),
            mask: th.mask.clone(),
            nice: th.se.nice,
        })
    }
    fn runnable(&self, t: ThreadId) -> Option<bool> {
        let th = self.threads.get(t.index())?;
        match th.state {
            State::Exited => None,
            s => Some(matches!(s, State::Running(_) | State::Runnable)),
        }
    }
    fn slice_is_share(&self) -> bool {
        self.class.baseline() != Baseline::Cfs
    }
    fn available_counters(&self) -> &[CounterKind] {
        &self.available
    }
}
