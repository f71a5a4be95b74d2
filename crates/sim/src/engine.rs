//! The discrete-event engine: the simulated kernel (threads, per-CPU run queues,
//! dispatcher, slices, context switches, sleep/wake, masks, load balancing, guardrails),
//! the core timing model, the PMU (per-thread and per-CPU counters, co-run segments,
//! address sampling) and the calls into the policy.
//!
//! # Time and timing
//!
//! The engine counts core cycles. Each running thread executes *chunks*: `gap`
//! non-memory instructions then one memory access. A core owns `issue_width` pipelines
//! shared by its hardware contexts; a chunk occupies a pipeline for
//! `instructions × base CPI` cycles starting when both the thread and a pipeline are
//! ready. A miss then stalls only its own thread (stall cycles / MLP), leaving the
//! pipeline to the core's other contexts — so a fine-grained multithreaded core hides
//! short (L1-miss) latencies behind other threads but not long DRAM latencies. Stores
//! that miss go through a per-context store buffer and stall only when it is full.
//! The engine always advances the context whose thread is ready first, so shared
//! caches and the memory bus see accesses in (nearly) global time order.
//!
//! # Kernel
//!
//! Per-CPU run queues ordered by the baseline [`Class`]; a thread's slice is checked at
//! every chunk boundary; context switches cost `context_switch_us` of CPU time; waking
//! threads go to an idle allowed CPU (preferring the last one, unless
//! `affinity_oblivious`), else the least loaded; a periodic balancer pulls queued,
//! cache-cold threads to less loaded CPUs and an idle CPU pulls immediately.
//! Guardrails: an empty effective mask falls back to all CPUs (counted); the watchdog
//! fails the run when a runnable thread waits past `starvation_limit_ms`.

use crate::config::{Baseline, KernelConfig, SimConfig, Source};
use crate::hw::machine::{CoreKind, MachineConfig, MachineError};
use crate::hw::memory::{MemorySystem, Served};
use crate::kernel::class::{Class, SchedEntity};
use crate::result::{mean_std, CpuResult, KernelStats, RunResult, ThreadResult, TimelinePoint};
use crate::trace::TraceThread;
use crate::workload::{LocalityThread, Op, PhasedThread, Workload, WorkloadError};
use cachesched_core::policy::KernelView;
use cachesched_core::{
    Addr, AddressSample, CacheKind, CoRunMember, CoRunSegment, CounterKind, Counters, CpuId,
    Cpumask, Ctx, Directive, Nanos, Policy, SimRng, ThreadId, ThreadInfo, ThreadView, Topology,
};
use cachesched_policies::{build_policy, Chain};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use thiserror::Error;

/// Why a run failed.
#[derive(Debug, Error)]
pub enum SimError {
    /// The machine description is invalid.
    #[error(transparent)]
    Machine(#[from] MachineError),
    /// The workload description is invalid.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// Configuration values out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Liveness failure: a runnable thread starved.
    #[error("liveness: runnable thread {thread} waited {waited_ms:.1} ms for a CPU (limit {limit_ms:.1} ms) at {at_ms:.1} ms")]
    Starvation {
        /// The starving thread.
        thread: ThreadId,
        /// How long it waited.
        waited_ms: f64,
        /// The limit.
        limit_ms: f64,
        /// When it was detected.
        at_ms: f64,
    },
    /// The policy needs counters the kernel cannot provide.
    #[error("policy '{policy}' needs counters this kernel lacks: {missing}")]
    MissingCounters {
        /// Policy name.
        policy: String,
        /// The missing counters.
        missing: String,
    },
    /// The run was interrupted.
    #[error("interrupted")]
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Waiting,
    Runnable,
    Running(usize),
    Sleeping,
    Exited,
}

struct Thread {
    id: ThreadId,
    info: ThreadInfo,
    workload: Box<dyn Workload>,
    /// Operations generated ahead ([`Workload::fill`]), consumed from `op_pos`, all at
    /// base CPI `op_cpi`.
    ops: Vec<Op>,
    op_pos: usize,
    op_cpi: f64,
    state: State,
    ctr: Counters,
    policy_mask: Option<Cpumask>,
    mask: Cpumask,
    orig_nice: i32,
    se: SchedEntity,
    last_cpu: Option<usize>,
    last_ran: u64,
    wait_since: u64,
    dispatched_at: u64,
    ctr_at_dispatch: Counters,
    store_buffer: VecDeque<u64>,
    last_pc_line: u64,
    base_ctr: Counters,
    /// Ground truth for scoring clusterings: the sharing group within the process.
    sharing_group: Option<u32>,
}

struct Cpu {
    current: Option<usize>,
    rq: Vec<usize>,
    ready: u64,
    slice_end: u64,
    need_resched: bool,
    core: usize,
    ctr: Counters,
    base_ctr: Counters,
    busy_cycles: u64,
    base_busy: u64,
    balance_failed: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Start(usize),
    Wake(usize),
    Balance,
    PolicyTick(u64),
    Sample,
    WarmupEnd,
}

struct Domain {
    level: usize,
    instance: usize,
    cpus: Vec<usize>,
    start: u64,
    members: Vec<(usize, usize, Counters)>,
}

enum PolicyEvent {
    Segment(CoRunSegment),
    Sample(AddressSample),
    Exited(ThreadId),
}

/// The kernel and machine state (everything but the policy).
struct Kernel {
    topo: Topology,
    mem: MemorySystem,
    class: Class,
    kcfg: KernelConfig,
    freq_mhz: u64,
    mlp: f64,
    sb_entries: usize,
    ctx_switch_cycles: u64,
    migration_cost_cycles: u64,
    starvation_cycles: u64,
    threads: Vec<Thread>,
    cpus: Vec<Cpu>,
    pipes: Vec<Vec<u64>>,
    ipath_shift: u32,
    now: u64,
    timers: BinaryHeap<Reverse<(u64, u64, Timer)>>,
    timer_seq: u64,
    enqueue_seq: u64,
    rng: SimRng,
    domains: Vec<Domain>,
    cpu_domains: Vec<Vec<usize>>,
    track_segments: bool,
    /// Longest co-run segment before it is cut.
    segment_max_cycles: u64,
    /// Virtual-to-physical page placement applied before the memory system.
    pages: crate::config::PagePlacement,
    sampling_period: Option<u64>,
    sample_countdown: u64,
    tick_period: Option<u64>,
    tick_gen: u64,
    events: Vec<PolicyEvent>,
    stats: KernelStats,
    all_mask: Cpumask,
    available: Vec<CounterKind>,
}

impl Kernel {
    fn ns(&self, cycles: u64) -> u64 {
        (cycles as u128 * 1000 / self.freq_mhz as u128) as u64
    }

    fn cycles(&self, ns: u64) -> u64 {
        (ns as u128 * self.freq_mhz as u128 / 1000) as u64
    }

    fn add_timer(&mut self, at: u64, t: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, t)));
    }

    fn nr(&self, c: usize) -> usize {
        self.cpus[c].rq.len() + self.cpus[c].current.is_some() as usize
    }

    fn min_vruntime(&self, c: usize) -> Option<u64> {
        let cpu = &self.cpus[c];
        cpu.rq
            .iter()
            .chain(cpu.current.iter())
            .map(|&t| self.threads[t].se.vruntime)
            .min()
    }

    /// Brings a running thread's cycle and CPU-time accounting up to `now`.
    fn account_running(&mut self, c: usize, now: u64) {
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

    fn effective_mask(&mut self, t: usize) {
        let m = match &self.threads[t].policy_mask {
            None => self.all_mask.clone(),
            Some(p) => {
                let m = p.and(&self.all_mask);
                if m.is_empty() {
                    self.stats.mask_fallbacks += 1;
                    self.all_mask.clone()
                } else {
                    m
                }
            }
        };
        self.threads[t].mask = m;
    }

    /// Chooses a CPU for a thread becoming runnable.
    fn select_cpu(&mut self, t: usize) -> usize {
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
            if let (Some(last), Some(llc)) = (th.last_cpu, self.topo.llc()) {
                let dom = self.topo.cache_instance(llc, CpuId(last as u32));
                if let Some(&c) = idle
                    .iter()
                    .find(|&&c| self.topo.cache_instance(llc, CpuId(c as u32)) == dom)
                {
                    return c;
                }
            }
            // spread: the idle CPU on the least loaded chip, then the least loaded core
            let load = |k: &Kernel, on: &dyn Fn(&cachesched_core::CpuInfo) -> bool| -> usize {
                k.topo
                    .cpus
                    .iter()
                    .filter(|ci| on(ci))
                    .map(|ci| k.nr(ci.id.index()))
                    .sum()
            };
            return *idle
                .iter()
                .min_by_key(|&&c| {
                    let me = self.topo.cpus[c];
                    let chip = load(self, &|ci| ci.chip == me.chip);
                    let core = load(self, &|ci| ci.core == me.core);
                    (chip, core, c)
                })
                .expect("non-empty");
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

    /// Puts runnable thread `t` on CPU `c`'s queue, dispatching if `c` is idle.
    fn enqueue(&mut self, t: usize, c: usize, now: u64) {
        self.enqueue_seq += 1;
        let th = &mut self.threads[t];
        th.se.enqueue_seq = self.enqueue_seq;
        th.state = State::Runnable;
        th.wait_since = now;
        self.cpus[c].rq.push(t);
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
    fn wake(&mut self, t: usize, now: u64) {
        let c = self.select_cpu(t);
        let minv = self.min_vruntime(c);
        self.class.woke(&mut self.threads[t].se, minv);
        self.enqueue(t, c, now);
    }

    /// Reschedules CPU `c` at `now`. `expired`: the current thread used its slice.
    fn schedule(&mut self, c: usize, now: u64, expired: bool) {
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
                if self.threads[p].mask.contains(CpuId(c as u32)) {
                    self.enqueue_seq += 1;
                    self.threads[p].se.enqueue_seq = self.enqueue_seq;
                    self.threads[p].state = State::Runnable;
                    self.threads[p].wait_since = now;
                    self.cpus[c].rq.push(p);
                } else {
                    let to = self.select_cpu(p);
                    let (fm, tm) = (self.min_vruntime(c), self.min_vruntime(to));
                    let v = self
                        .class
                        .migrate_vruntime(self.threads[p].se.vruntime, fm, tm);
                    self.threads[p].se.vruntime = v;
                    self.threads[p].state = State::Runnable;
                    self.enqueue(p, to, now);
                }
            }
        }
        self.cpus[c].current = None;
        if self.cpus[c].rq.is_empty() {
            self.pull(c, now, true);
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
        th.state = State::Running(c);
        th.dispatched_at = start;
        th.ctr_at_dispatch = th.ctr;
        self.cpus[c].current = Some(t);
        self.cpus[c].slice_end = start + slice_cycles;
        if switched {
            self.corun_change(c, now);
        }
    }

    fn switched_out(&mut self, p: usize, c: usize, now: u64) {
        let th = &mut self.threads[p];
        th.ctr.context_switches += 1;
        th.last_ran = now;
        self.stats.context_switches += 1;
        self.charge_cpu(p, c);
    }

    /// Adds thread `t`'s counters since its last charge to CPU `c`'s counters.
    fn charge_cpu(&mut self, t: usize, c: usize) {
        let th = &mut self.threads[t];
        let d = th.ctr.delta(&th.ctr_at_dispatch);
        th.ctr_at_dispatch = th.ctr;
        self.cpus[c].ctr.accumulate(&d);
    }

    /// Pulls one queued thread to CPU `c` from the busiest CPU. With `idle`, from any
    /// CPU that has a queued thread.
    fn pull(&mut self, c: usize, now: u64, idle: bool) -> bool {
        let none = vec![false; self.cpus.len()];
        self.pull_from(c, now, idle, &none).is_some()
    }

    /// [`Kernel::pull`], skipping `excluded` sources; returns the source CPU.
    fn pull_from(&mut self, c: usize, now: u64, idle: bool, excluded: &[bool]) -> Option<usize> {
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
        let (fm, tm) = (self.min_vruntime(b), self.min_vruntime(c));
        self.threads[t].se.vruntime =
            self.class
                .migrate_vruntime(self.threads[t].se.vruntime, fm, tm);
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

    fn balance(&mut self, now: u64) -> Result<(), SimError> {
        // One pass: each CPU pulls at most once, and a CPU that gained or lost a thread
        // in this pass is neither source nor destination again (no ping-pong).
        let mut touched = vec![false; self.cpus.len()];
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
        // Watchdog and TS aging.
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
                if waited > self.cycles(1_000_000_000) {
                    self.class.starving(&mut self.threads[t].se);
                }
            }
        }
        Ok(())
    }

    /// The set of threads on `c`'s shared caches changed: close and reopen segments.
    fn corun_change(&mut self, c: usize, now: u64) {
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
    fn cut_long_segments(&mut self, now: u64) {
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
    fn reopen_segment(&mut self, d: usize, now: u64) {
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

    /// Executes one chunk of the thread on CPU `c`.
    #[inline]
    fn step(&mut self, c: usize) {
        let now = self.cpus[c].ready;
        self.now = self.now.max(now);
        if now >= self.cpus[c].slice_end || self.cpus[c].need_resched {
            let expired = now >= self.cpus[c].slice_end;
            self.schedule(c, now, expired);
            return;
        }
        let t = self.cpus[c].current.expect("step on a busy CPU");
        let th = &mut self.threads[t];
        if th.op_pos == th.ops.len() {
            th.ops.clear();
            th.op_pos = 0;
            th.op_cpi = th.workload.base_cpi();
            th.workload.fill(&mut th.ops, crate::workload::FETCH_BATCH);
        }
        let op = th.ops[th.op_pos];
        th.op_pos += 1;
        match op {
            Op::Access {
                gap,
                addr,
                write,
                pc,
            } => {
                let instr = gap as u64 + 1;
                let cpi = self.threads[t].op_cpi;
                let core = self.cpus[c].core;
                let (pi, pfree) = self.pipes[core]
                    .iter()
                    .copied()
                    .enumerate()
                    .min_by_key(|&(_, f)| f)
                    .expect("a core has a pipeline");
                let start = now.max(pfree);
                let issue = if cpi == 1.0 {
                    instr
                } else {
                    (instr as f64 * cpi).ceil() as u64
                };
                let mut end = start + issue;
                self.pipes[core][pi] = end;
                let owner = t as u32;
                let th = &mut self.threads[t];
                let ctr = &mut th.ctr;
                ctr.instructions += instr;
                let line = pc >> self.ipath_shift;
                if line != th.last_pc_line {
                    th.last_pc_line = line;
                    let f = self
                        .mem
                        .instr_fetch(c, owner, self.pages.translate(pc), start, ctr);
                    if f.stall_cycles > 0 {
                        let s = (f.stall_cycles as f64 / self.mlp) as u64;
                        ctr.mem_stall_cycles += s;
                        end += s;
                    }
                }
                let out =
                    self.mem
                        .data_access(c, owner, self.pages.translate(addr), write, end, ctr);
                let mut stall = (out.stall_cycles as f64 / self.mlp) as u64;
                if out.served == Served::Remote {
                    ctr.remote_stall_cycles += stall;
                    if let Some(p) = self.sampling_period {
                        self.sample_countdown = self.sample_countdown.saturating_sub(1);
                        if self.sample_countdown == 0 {
                            self.sample_countdown = p;
                            self.events.push(PolicyEvent::Sample(AddressSample {
                                thread: th.id,
                                cpu: CpuId(c as u32),
                                addr: Addr(addr),
                                is_write: write,
                            }));
                        }
                    }
                }
                if write && stall > 0 {
                    let sb = &mut th.store_buffer;
                    while sb.front().is_some_and(|&f| f <= end) {
                        sb.pop_front();
                    }
                    let mut wait = 0;
                    if sb.len() >= self.sb_entries {
                        wait = sb.pop_front().expect("full buffer").saturating_sub(end);
                    }
                    sb.push_back(end + wait + stall);
                    ctr.store_buffer_stall_cycles += wait;
                    stall = wait;
                } else {
                    ctr.mem_stall_cycles += stall;
                }
                self.cpus[c].ready = end + stall;
            }
            Op::Sleep(d) => {
                self.account_running(c, now);
                self.threads[t].state = State::Sleeping;
                let at = now + self.cycles(d.0).max(1);
                self.add_timer(at, Timer::Wake(t));
                self.schedule(c, now, false);
            }
            Op::Exit => {
                self.account_running(c, now);
                self.threads[t].state = State::Exited;
                self.events.push(PolicyEvent::Exited(self.threads[t].id));
                self.schedule(c, now, false);
            }
        }
    }

    fn apply(&mut self, directives: Vec<Directive>, now: u64) {
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
                                let to = self.select_cpu(t);
                                let (fm, tm) = (self.min_vruntime(c), self.min_vruntime(to));
                                self.threads[t].se.vruntime = self.class.migrate_vruntime(
                                    self.threads[t].se.vruntime,
                                    fm,
                                    tm,
                                );
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

    fn live(&mut self, thread: ThreadId) -> Option<usize> {
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
        })
    }
    fn available_counters(&self) -> &[CounterKind] {
        &self.available
    }
}

/// A configured simulation, ready to run. See the [module documentation](self).
pub struct Simulation {
    k: Kernel,
    policy: Option<Box<dyn Policy>>,
    policy_rng: SimRng,
    cfg: SimConfig,
    machine: MachineConfig,
    end: u64,
    warmup: u64,
    sample_every: u64,
    timeline: Vec<TimelinePoint>,
    last_sample: (u64, Counters),
    base_time: u64,
    base_bus: f64,
}

impl Simulation {
    /// Builds a simulation of `cfg` with `policy` (if any) on top of the baseline; see
    /// [`build_chain`] for the configured policies.
    pub fn new(cfg: &SimConfig, policy: Option<Box<dyn Policy>>) -> Result<Simulation, SimError> {
        let machine = cfg.machine.resolve()?;
        let topo = machine.topology()?;
        let mem = MemorySystem::new(&machine, &topo)?;
        let k = &cfg.kernel;
        let positive = [
            ("duration_ms", cfg.duration_ms),
            ("sample_ms", cfg.sample_ms),
            ("kernel.cfs_latency_ms", k.cfs_latency_ms),
            ("kernel.cfs_min_granularity_ms", k.cfs_min_granularity_ms),
            ("kernel.rr_quantum_ms", k.rr_quantum_ms),
            ("kernel.balance_interval_ms", k.balance_interval_ms),
            ("kernel.starvation_limit_ms", k.starvation_limit_ms),
            ("kernel.corun_segment_max_ms", k.corun_segment_max_ms),
        ];
        for (name, v) in positive {
            if !(v > 0.0 && v.is_finite()) {
                return Err(SimError::Config(format!(
                    "{name} must be a positive number (got {v})"
                )));
            }
        }
        for (name, v) in [
            ("warmup_ms", cfg.warmup_ms),
            ("kernel.context_switch_us", k.context_switch_us),
            ("kernel.migration_cost_us", k.migration_cost_us),
            (
                "kernel.cfs_wakeup_granularity_ms",
                k.cfs_wakeup_granularity_ms,
            ),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(SimError::Config(format!(
                    "{name} must be non-negative (got {v})"
                )));
            }
        }
        if cfg.warmup_ms >= cfg.duration_ms {
            return Err(SimError::Config(
                "warmup_ms must be shorter than duration_ms".into(),
            ));
        }
        if cfg.threads.is_empty() {
            return Err(SimError::Config(
                "no threads: give at least one thread group".into(),
            ));
        }
        for p in &cfg.policies {
            p.validate().map_err(|e| SimError::Config(e.to_string()))?;
        }
        let freq = machine.freq_mhz as u64;
        let cyc = |ms: f64| (ms * 1e3 * freq as f64) as u64;
        let rng = SimRng::new(cfg.seed);
        let mut threads = Vec::new();
        let mut starts = Vec::new();
        let mut process = 0u32;
        for g in &cfg.threads {
            let (source, label) = g.resolve()?;
            for i in 0..g.count {
                let idx = threads.len();
                let proc_id = if g.same_process { process } else { process + i };
                let index_in_proc = if g.same_process { i } else { 0 };
                let sharing_group = i % g.sharing_groups();
                let w: Box<dyn Workload> = match &source {
                    Source::Model(model) => Box::new(LocalityThread::in_group(
                        model.clone(),
                        proc_id,
                        index_in_proc,
                        sharing_group,
                        rng.fork(1000 + idx as u64),
                    )),
                    Source::Trace(bytes, cpi) => {
                        Box::new(TraceThread::new(bytes.clone(), proc_id, *cpi).map_err(|e| {
                            SimError::Config(format!("trace of group '{label}': {e}"))
                        })?)
                    }
                    Source::Phased(phases) => Box::new(PhasedThread::new(
                        phases,
                        proc_id,
                        index_in_proc,
                        sharing_group,
                        &rng.fork(1000 + idx as u64),
                    )),
                };
                threads.push(Thread {
                    id: ThreadId(idx as u32),
                    info: ThreadInfo {
                        name: label.clone(),
                        process: proc_id,
                    },
                    workload: w,
                    ops: Vec::with_capacity(crate::workload::FETCH_BATCH),
                    op_pos: 0,
                    op_cpi: 1.0,
                    state: State::Waiting,
                    ctr: Counters::default(),
                    policy_mask: None,
                    mask: topo.all_cpus(),
                    orig_nice: g.nice,
                    se: SchedEntity::new(g.nice),
                    last_cpu: None,
                    last_ran: 0,
                    wait_since: 0,
                    dispatched_at: 0,
                    ctr_at_dispatch: Counters::default(),
                    store_buffer: VecDeque::new(),
                    last_pc_line: u64::MAX,
                    base_ctr: Counters::default(),
                    sharing_group: (g.same_process && g.sharing_groups() > 1)
                        .then_some(sharing_group),
                });
                starts.push((cyc(g.start_ms), idx));
            }
            process += if g.same_process { 1 } else { g.count };
        }
        let cpus: Vec<Cpu> = topo
            .cpus
            .iter()
            .map(|ci| Cpu {
                current: None,
                rq: Vec::new(),
                ready: 0,
                slice_end: 0,
                need_resched: false,
                core: ci.core as usize,
                ctr: Counters::default(),
                base_ctr: Counters::default(),
                busy_cycles: 0,
                base_busy: 0,
                balance_failed: 0,
            })
            .collect();
        let issue_width = match machine.core.kind {
            CoreKind::FineGrained | CoreKind::Single => 1,
            CoreKind::Smt => machine.core.issue_width as usize,
        };
        let track_segments = policy.as_ref().is_some_and(|p| p.wants_corun_segments());
        let mut domains = Vec::new();
        let mut cpu_domains = vec![Vec::new(); topo.nr_cpus()];
        for (li, l) in topo.caches.iter().enumerate() {
            if l.kind == CacheKind::Instruction {
                continue;
            }
            for (ii, span) in l.instances.iter().enumerate() {
                if span.weight() > 1 {
                    let cpus: Vec<usize> = span.iter().map(|c| c.index()).collect();
                    for &c in &cpus {
                        cpu_domains[c].push(domains.len());
                    }
                    domains.push(Domain {
                        level: li,
                        instance: ii,
                        cpus,
                        start: 0,
                        members: Vec::new(),
                    });
                }
            }
        }
        let ipath_shift = topo.fetch_line_shift();
        let ncores = topo.nr_cores();
        let kern = Kernel {
            class: Class::new(&cfg.kernel, topo.nr_cpus()),
            kcfg: cfg.kernel.clone(),
            freq_mhz: freq,
            mlp: machine.core.mlp,
            sb_entries: machine.memory.store_buffer_entries as usize,
            ctx_switch_cycles: (cfg.kernel.context_switch_us * freq as f64) as u64,
            migration_cost_cycles: (cfg.kernel.migration_cost_us * freq as f64) as u64,
            starvation_cycles: cyc(cfg.kernel.starvation_limit_ms),
            segment_max_cycles: cyc(cfg.kernel.corun_segment_max_ms),
            threads,
            cpus,
            pipes: vec![vec![0; issue_width]; ncores],
            ipath_shift,
            now: 0,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            enqueue_seq: 0,
            rng: rng.fork(1),
            domains,
            cpu_domains,
            track_segments,
            pages: cfg.kernel.page_placement,
            sampling_period: None,
            sample_countdown: 0,
            tick_period: None,
            tick_gen: 0,
            events: Vec::new(),
            stats: KernelStats::default(),
            all_mask: topo.all_cpus(),
            available: CounterKind::ALL.to_vec(),
            mem,
            topo,
        };
        let mut sim = Simulation {
            policy_rng: rng.fork(2),
            k: kern,
            policy,
            end: cyc(cfg.duration_ms),
            warmup: cyc(cfg.warmup_ms),
            sample_every: cyc(cfg.sample_ms).max(1),
            timeline: Vec::new(),
            last_sample: (0, Counters::default()),
            base_time: 0,
            base_bus: 0.0,
            machine,
            cfg: cfg.clone(),
        };
        if let Some(p) = &sim.policy {
            let missing: Vec<&str> = p
                .required_counters()
                .into_iter()
                .filter(|c| !sim.k.available.contains(c))
                .map(|c| c.name())
                .collect();
            if !missing.is_empty() {
                return Err(SimError::MissingCounters {
                    policy: p.name().to_string(),
                    missing: missing.join(", "),
                });
            }
        }
        for (at, idx) in starts {
            sim.k.add_timer(at, Timer::Start(idx));
        }
        let bal = sim
            .k
            .cycles((cfg.kernel.balance_interval_ms * 1e6) as u64)
            .max(1);
        sim.k.add_timer(bal, Timer::Balance);
        sim.k.add_timer(sim.sample_every, Timer::Sample);
        if sim.warmup > 0 {
            sim.k.add_timer(sim.warmup, Timer::WarmupEnd);
        }
        Ok(sim)
    }

    /// The resolved machine.
    pub fn machine(&self) -> &MachineConfig {
        &self.machine
    }

    /// Calls `f` on the policy with a fresh context, then applies its directives.
    fn with_policy(&mut self, f: &mut dyn FnMut(&mut dyn Policy, &mut Ctx<'_>)) {
        let Some(p) = self.policy.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        {
            let mut ctx = Ctx::new(&self.k, &mut self.policy_rng, &mut out);
            f(p.as_mut(), &mut ctx);
        }
        if !out.is_empty() {
            let now = self.k.now;
            self.k.apply(out, now);
        }
    }

    fn deliver_events(&mut self) {
        while !self.k.events.is_empty() {
            let evs = std::mem::take(&mut self.k.events);
            for e in evs {
                match e {
                    PolicyEvent::Segment(s) => {
                        self.k.stats.corun_segments += 1;
                        self.with_policy(&mut |p, c| p.corun_segment(c, &s));
                    }
                    PolicyEvent::Sample(s) => {
                        self.k.stats.address_samples += 1;
                        self.with_policy(&mut |p, c| p.address_sample(c, &s));
                    }
                    PolicyEvent::Exited(t) => self.with_policy(&mut |p, c| p.thread_exited(c, t)),
                }
            }
        }
    }

    fn snapshot_totals(&mut self, now: u64) -> Counters {
        for c in 0..self.k.cpus.len() {
            self.k.account_running(c, now);
        }
        let mut tot = Counters::default();
        for t in &self.k.threads {
            tot.accumulate(&t.ctr);
        }
        tot
    }

    fn handle_timer(&mut self, at: u64, timer: Timer) -> Result<(), SimError> {
        self.k.now = self.k.now.max(at);
        match timer {
            Timer::Start(t) => {
                let id = self.k.threads[t].id;
                self.k.threads[t].state = State::Sleeping;
                self.with_policy(&mut |p, c| p.thread_started(c, id));
                if self.k.threads[t].state == State::Sleeping {
                    self.k.wake(t, at);
                }
            }
            Timer::Wake(t) => {
                if self.k.threads[t].state == State::Sleeping {
                    self.k.wake(t, at);
                }
            }
            Timer::Balance => {
                self.k.cut_long_segments(at);
                self.k.balance(at)?;
                let bal = self
                    .k
                    .cycles((self.cfg.kernel.balance_interval_ms * 1e6) as u64)
                    .max(1);
                self.k.add_timer(at + bal, Timer::Balance);
            }
            Timer::PolicyTick(g) => {
                if g == self.k.tick_gen {
                    if let Some(p) = self.k.tick_period {
                        self.k.add_timer(at + p, Timer::PolicyTick(g));
                    }
                    self.k.stats.policy_ticks += 1;
                    self.with_policy(&mut |p, c| p.tick(c));
                }
            }
            Timer::Sample => {
                let tot = self.snapshot_totals(at);
                let (t0, c0) = self.last_sample;
                let d = tot.delta(&c0);
                let secs = self.k.ns(at - t0) as f64 / 1e9;
                self.timeline.push(TimelinePoint {
                    t_ms: self.k.ns(at) as f64 / 1e6,
                    ips: d.instructions as f64 / secs.max(1e-12),
                    l2_miss_ratio: d.l2_miss_ratio(),
                    llc_mpki: d.llc_mpki(),
                });
                self.last_sample = (at, tot);
                self.k.add_timer(at + self.sample_every, Timer::Sample);
            }
            Timer::WarmupEnd => {
                self.snapshot_totals(at);
                self.base_time = at;
                self.base_bus = self.k.mem.bus_busy_cycles;
                for th in &mut self.k.threads {
                    th.base_ctr = th.ctr;
                }
                for c in 0..self.k.cpus.len() {
                    if let Some(t) = self.k.cpus[c].current {
                        self.k.charge_cpu(t, c);
                    }
                    self.k.cpus[c].base_ctr = self.k.cpus[c].ctr;
                    self.k.cpus[c].base_busy = self.k.cpus[c].busy_cycles;
                }
            }
        }
        Ok(())
    }

    /// Runs to the configured duration. `progress` is called now and then with the
    /// fraction done; returning false interrupts the run.
    pub fn run(mut self, progress: &mut dyn FnMut(f64) -> bool) -> Result<RunResult, SimError> {
        self.with_policy(&mut |p, c| p.init(c));
        let ncpu = self.k.cpus.len();
        let mut steps: u64 = 0;
        loop {
            // earliest busy CPU
            let mut best = u64::MAX;
            let mut bc = usize::MAX;
            for c in 0..ncpu {
                let cpu = &self.k.cpus[c];
                if cpu.current.is_some() && cpu.ready < best {
                    best = cpu.ready;
                    bc = c;
                }
            }
            let next_timer = self.k.timers.peek().map(|r| r.0 .0).unwrap_or(u64::MAX);
            let t = best.min(next_timer);
            if t >= self.end {
                break;
            }
            if next_timer <= best {
                let Reverse((at, _, timer)) = self.k.timers.pop().expect("peeked");
                self.handle_timer(at, timer)?;
            } else {
                self.k.step(bc);
            }
            if !self.k.events.is_empty() {
                self.deliver_events();
            }
            steps += 1;
            if steps.is_multiple_of(1 << 16) && !progress(t as f64 / self.end as f64) {
                return Err(SimError::Interrupted);
            }
        }
        progress(1.0);
        Ok(self.finish())
    }

    fn finish(mut self) -> RunResult {
        let end = self.end;
        self.snapshot_totals(end);
        for c in 0..self.k.cpus.len() {
            if let Some(t) = self.k.cpus[c].current {
                self.k.charge_cpu(t, c);
            }
        }
        let window = end - self.base_time;
        let window_ns = self.k.ns(window).max(1);
        let threads: Vec<ThreadResult> = self
            .k
            .threads
            .iter()
            .map(|t| {
                let d = t.ctr.delta(&t.base_ctr);
                ThreadResult {
                    id: t.id.0,
                    name: t.info.name.clone(),
                    process: t.info.process,
                    counters: d,
                    cpu_share: d.cpu_time_ns as f64 / window_ns as f64,
                    exited: t.state == State::Exited,
                    sharing_group: t.sharing_group,
                }
            })
            .collect();
        let cpus: Vec<CpuResult> = self
            .k
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| CpuResult {
                id: i as u32,
                counters: c.ctr.delta(&c.base_ctr),
                busy_fraction: (c.busy_cycles - c.base_busy) as f64 / window.max(1) as f64,
            })
            .collect();
        let mut totals = Counters::default();
        for t in &threads {
            totals.accumulate(&t.counters);
        }
        let shares: Vec<f64> = threads
            .iter()
            .filter(|t| !t.exited)
            .map(|t| t.cpu_share)
            .collect();
        let (m, sd) = mean_std(&shares);
        let policy_stats: BTreeMap<String, f64> = self
            .policy
            .as_ref()
            .map(|p| p.stats().into_iter().collect())
            .unwrap_or_default();
        RunResult {
            seed: self.cfg.seed,
            machine: self.machine.name.clone(),
            baseline: self.cfg.kernel.baseline.name().to_string(),
            policy: self
                .policy
                .as_ref()
                .map(|p| p.name().to_string())
                .unwrap_or_else(|| "none".into()),
            measured_ms: window_ns as f64 / 1e6,
            ips: totals.instructions as f64 / (window_ns as f64 / 1e9),
            l2_miss_ratio: totals.l2_miss_ratio(),
            llc_mpki: totals.llc_mpki(),
            cpu_share_cv: if m > 0.0 { sd / m } else { 0.0 },
            bus_utilization: (self.k.mem.bus_busy_cycles - self.base_bus) / window.max(1) as f64,
            totals,
            threads,
            cpus,
            kernel: self.k.stats.clone(),
            policy_stats,
            timeline: self.timeline,
        }
    }
}

/// Builds the policy chain `cfg.policies` describes (`None` if empty).
pub fn build_chain(cfg: &SimConfig) -> Option<Box<dyn Policy>> {
    match cfg.policies.len() {
        0 => None,
        1 => Some(build_policy(&cfg.policies[0])),
        _ => Some(Box::new(Chain::new(
            cfg.policies.iter().map(build_policy).collect(),
        ))),
    }
}

/// Runs `cfg` (with its configured policies) to completion, without progress reporting.
pub fn simulate(cfg: &SimConfig) -> Result<RunResult, SimError> {
    Simulation::new(cfg, build_chain(cfg))?.run(&mut |_| true)
}

/// Runs `cfg` with `policy` instead of the configured policies.
pub fn simulate_with(cfg: &SimConfig, policy: Box<dyn Policy>) -> Result<RunResult, SimError> {
    Simulation::new(cfg, Some(policy))?.run(&mut |_| true)
}
