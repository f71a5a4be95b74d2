//! The discrete-event engine: the event loop over the kernel's timers and CPUs, the
//! core timing model of one chunk (the hot path), address sampling and the calls into
//! the policy.
//!
//! # Time
//!
//! The engine counts core cycles and always advances what happens first: the earliest
//! timer, or else the CPU whose running thread is ready first. A thread's memory
//! requests are made at its ready time (see [`crate::hw::core`]), so the shared caches
//! and the memory bus see every request in simulated-time order.

use crate::config::{GroupAssignment, Partition, Pin, SimConfig, Source, TraceStart};
use crate::hw::core::{charge_stall, ContextState, CoreTiming, Phase};
use crate::hw::machine::{MachineConfig, MachineError};
use crate::hw::memory::{BusStats, MemorySystem, ServedBy};
use crate::hw::prefetch::PrefetchStats;
use crate::kernel::class::{Class, SchedEntity};
use crate::kernel::segments::Domain;
use crate::kernel::{Cpu, Kernel, PolicyEvent, SegmentTimer, State, Thread, Timer};
use crate::result::{
    mean_std, CacheOccupancy, CpuResult, KernelStats, RunResult, ThreadResult, TimelinePoint,
};
use crate::trace::TraceThread;
use crate::workload::{LocalityThread, Op, PhasedThread, Workload, WorkloadError};
use cachesched_core::{
    Addr, AddressSample, CacheKind, CounterKind, Counters, CpuId, Cpumask, Ctx, Policy, SimRng,
    ThreadId, ThreadInfo,
};
use cachesched_policies::{build_policy, Chain};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
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

impl Kernel {
    /// Each thread's occupancy of every shared data cache now.
    fn occupancy(&self) -> Vec<CacheOccupancy> {
        self.domains
            .iter()
            .map(|d| CacheOccupancy {
                level: self.topo.caches[d.level].level,
                instance: d.instance as u32,
                kib: (0..self.threads.len())
                    .map(|t| (self.mem.occupancy_bytes(d.level, d.instance, t as u32) >> 10) as u32)
                    .collect(),
            })
            .collect()
    }

    /// Sets when the thread running on CPU `c` steps next.
    #[inline(always)]
    fn set_ready(&mut self, c: usize, at: u64) {
        self.cpus[c].ready = at;
        self.next_step[c] = at;
    }

    /// Advances the thread on CPU `c` at the CPU's ready time, which is the engine's
    /// current time: performs its pending memory access, then (if it need not wait for
    /// it) fetches and dispatches its next chunk. See [`crate::hw::core`].
    #[inline]
    fn step(&mut self, c: usize) {
        let now = self.cpus[c].ready;
        self.now = self.now.max(now);
        let t = self.cpus[c].current.expect("step on a busy CPU");
        if self.threads[t].timing.phase == Phase::Access {
            let ready = self.access(c, t, now);
            self.set_ready(c, ready);
            if ready > now {
                return;
            }
        }
        if now >= self.cpus[c].slice_end || self.cpus[c].need_resched {
            let expired = now >= self.cpus[c].slice_end;
            self.schedule(c, now, expired);
            return;
        }
        self.issue(c, t, now);
    }

    /// The pending access of thread `t` on CPU `c` at `now`; returns when the thread
    /// can go on (later than `now` if it must first wait for a miss register, the data
    /// of the load its address depends on, or a store-buffer entry, in which case the
    /// access is made then; or later than `now` after the access is made, when it was
    /// sampled and the sample's handler occupies the CPU for `sample_cost_cycles`).
    #[inline]
    fn access(&mut self, c: usize, t: usize, now: u64) -> u64 {
        let ct = &self.core_timing;
        let th = &mut self.threads[t];
        let (addr, write, pc) = (th.timing.addr, th.timing.write, th.timing.pc);
        let phys = self.pages.translate(addr);
        let wait = if write {
            th.timing.store_buffer_wait(ct, now, &mut th.ctr)
        } else {
            let mut w = now;
            if th.timing.dependent {
                w = th.timing.chain_wait(now, &mut th.ctr);
            }
            if w == now && th.timing.misses.len() >= ct.load_misses && !self.mem.l1d_holds(c, phys)
            {
                w = th.timing.miss_register_wait(ct, now, &mut th.ctr);
            }
            w
        };
        if wait > now {
            return wait;
        }
        let out = self
            .mem
            .data_access(c, t as u32, phys, pc, write, now, &mut th.ctr);
        let latency = out.stall_cycles as u64;
        let mut handler = 0;
        if out.source == ServedBy::Remote {
            if let Some(p) = self.sampling_period {
                self.sample_countdown = self.sample_countdown.saturating_sub(1);
                if self.sample_countdown == 0 {
                    self.sample_countdown = p;
                    // the overflow interrupt: the CPU runs the handler, not the thread
                    handler = self.kcfg.sample_cost_cycles;
                    self.stats.sample_cost_cycles += handler;
                    self.events.push(PolicyEvent::Sample(AddressSample {
                        thread: th.id,
                        cpu: CpuId(c as u32),
                        addr: Addr(addr),
                        is_write: write,
                    }));
                }
            }
        }
        if write {
            th.timing.store(ct, now, latency);
        } else {
            th.timing.load(now, latency, out.source);
        }
        th.timing.phase = Phase::Issue;
        now + handler
    }

    /// Thread `t` on CPU `c` at `now` fetches (if its code moved to a new line) and
    /// dispatches its next operation's instructions, or sleeps or exits.
    #[inline]
    fn issue(&mut self, c: usize, t: usize, now: u64) {
        let ct = &self.core_timing;
        let th = &mut self.threads[t];
        if th.op_pos == th.ops.len() {
            th.ops.clear();
            th.op_pos = 0;
            th.op_cpi = ct.thread_cpi(th.workload.base_cpi(), th.workload.ilp());
            th.workload.fill(&mut th.ops, crate::workload::FETCH_BATCH);
        }
        match th.ops[th.op_pos] {
            Op::Access {
                gap,
                addr,
                write,
                pc,
                dep,
            } => {
                // a full window stops the front end too: wait first, then fetch
                let n = gap as u64 + 1;
                let wait = th
                    .timing
                    .window_wait(ct, th.timing.instr + n - 1, now, &mut th.ctr);
                if wait > now {
                    self.set_ready(c, wait);
                    return;
                }
                let line = pc >> self.ipath_shift;
                if line != th.timing.last_pc_line {
                    th.timing.last_pc_line = line;
                    let f = self.mem.instr_fetch(
                        c,
                        t as u32,
                        self.pages.translate(pc),
                        now,
                        &mut th.ctr,
                    );
                    if f.stall_cycles > 0 {
                        let s = f.stall_cycles as u64;
                        charge_stall(&mut th.ctr, f.source, true, s);
                        // dispatch waits for the line; the operation is not consumed
                        self.set_ready(c, now + s);
                        return;
                    }
                }
                th.op_pos += 1;
                // the core's dispatch bandwidth is booked in order of request; the
                // thread itself goes no faster than its own rate
                let core = self.cpus[c].core;
                let first = self.slots[core].max(now * ct.width);
                self.slots[core] = first + n;
                let own = if th.op_cpi == 1.0 {
                    n
                } else {
                    cachesched_core::num::ceil_u64(n as f64 * th.op_cpi)
                };
                let end = ct.slot_cycle(first + n).max(now + own);
                th.ctr.instructions += n;
                let mark = th.ctr.instructions >= th.segment.next;
                th.timing.instr += n;
                th.timing.addr = addr;
                th.timing.write = write;
                th.timing.dependent = dep;
                th.timing.pc = pc;
                th.timing.phase = Phase::Access;
                if mark {
                    self.pass_segment_mark(t, now);
                }
                self.set_ready(c, end);
            }
            Op::Sleep(d) => {
                th.op_pos += 1;
                self.account_running(c, now);
                self.threads[t].state = State::Sleeping;
                let at = now + self.cycles(d.0).max(1);
                self.add_timer(at, Timer::Wake(t));
                self.schedule(c, now, false);
            }
            Op::Exit => {
                th.op_pos += 1;
                let short = self
                    .quanta_stop
                    .is_some_and(|n| th.slices - th.base_slices < n);
                self.account_running(c, now);
                self.threads[t].state = State::Exited;
                if short {
                    self.quanta_reached(now);
                }
                self.events.push(PolicyEvent::Exited(self.threads[t].id));
                self.schedule(c, now, false);
            }
        }
    }
}

impl Kernel {
    /// Thread `t` passed a mark of its work segment at `now`. The first segment to
    /// begin opens the run's segment window and closes it when it ends: every thread's
    /// instruction count is noted at both ends, for its progress while that segment ran.
    #[cold]
    fn pass_segment_mark(&mut self, t: usize, now: u64) {
        let done = self.threads[t].segment.pass(now);
        if done {
            self.segments_open -= 1;
            if self.segments_open == 0 && self.stop_after_segments {
                self.add_timer(now, Timer::Stop);
            }
        }
        let side = match (self.window_owner, done) {
            (None, false) => 0,
            (Some(o), true) if o == t => 1,
            _ => return,
        };
        self.window_owner = Some(t);
        for th in &mut self.threads {
            th.window_instructions[side] = Some(th.ctr.instructions);
        }
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
    base_bus: BusStats,
    /// The prefetch counts when the warm-up ended.
    base_prefetches: PrefetchStats,
    /// Whether every thread's work before the run ([`Simulation::prepare`]) is done.
    prepared: bool,
}

/// The most memory one run may use, bytes (4 GiB: runs go in parallel, one per core).
pub const MAX_RUN_BYTES: u64 = 4 << 30;

/// Host memory for the cache models' lines: one entry per line of every instance.
fn cache_bytes(topo: &cachesched_core::Topology) -> u64 {
    topo.caches
        .iter()
        .map(|c| {
            let lines = c.size_bytes / c.line_bytes.max(1) as u64;
            lines
                .saturating_mul(c.instances.len() as u64)
                .saturating_mul(crate::hw::cache::LINE_BYTES_IN_HOST)
        })
        .fold(0u64, u64::saturating_add)
}

/// Host memory for the timeline: one point per `sample_ms` of the run.
fn timeline_bytes(cfg: &SimConfig) -> u64 {
    let points = (cfg.duration_ms / cfg.sample_ms).ceil() as u64 + 1;
    points.saturating_mul(std::mem::size_of::<TimelinePoint>() as u64)
}

/// The memory a run of `cfg` needs, estimated before anything is allocated: the cache
/// lines and the timeline, which grow with the configuration (threads and CPUs are
/// bounded to kilobytes each).
fn memory_estimate(cfg: &SimConfig, topo: &cachesched_core::Topology) -> u64 {
    cache_bytes(topo).saturating_add(timeline_bytes(cfg))
}

impl Simulation {
    /// Builds a simulation of `cfg` with `policy` (if any) on top of the baseline; see
    /// [`build_chain`] for the configured policies.
    pub fn new(cfg: &SimConfig, policy: Option<Box<dyn Policy>>) -> Result<Simulation, SimError> {
        cfg.check_ranges()
            .map_err(|e| SimError::Config(e.message))?;
        let machine = cfg.machine.resolve()?;
        let topo = machine.topology()?;
        let need = memory_estimate(cfg, &topo);
        if need > MAX_RUN_BYTES {
            return Err(SimError::Config(format!(
                "this run would need about {} MiB of memory (caches {} MiB, timeline {} MiB), \
                 more than the {} MiB a run may use: give smaller caches, fewer CPUs, a \
                 shorter run or a longer sample_ms",
                need >> 20,
                cache_bytes(&topo) >> 20,
                timeline_bytes(cfg) >> 20,
                MAX_RUN_BYTES >> 20
            )));
        }
        let mut mem = MemorySystem::new(&machine, &topo)?;
        if let Some(q) = cfg.stop_after_quanta {
            if !(1..=1_000_000).contains(&q.quanta) {
                return Err(SimError::Config(format!(
                    "stop_after_quanta.quanta must be 1 to 1000000 (got {})",
                    q.quanta
                )));
            }
            if !(q.min_ms >= 0.0 && cfg.warmup_ms + q.min_ms < cfg.duration_ms) {
                return Err(SimError::Config(format!(
                    "stop_after_quanta.min_ms must be at least 0 and end before duration_ms \
                     ({} ms warm-up + {} ms > {} ms): shorten it or lengthen the run",
                    cfg.warmup_ms, q.min_ms, cfg.duration_ms
                )));
            }
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
        // CPUs of each chip in id order, and how many threads `Pin::ByGroup` put on each
        let chip_cpus: Vec<Vec<u32>> = (0..topo.nr_chips() as u32)
            .map(|c| topo.chip_cpus(c).iter().map(|x| x.0).collect())
            .collect();
        let mut chip_fill = vec![0usize; chip_cpus.len()];
        let mut files = crate::config::TraceFiles::default();
        for (gi, g) in cfg.threads.iter().enumerate() {
            let (source, label) = g.resolve_in(&mut files)?;
            let bound = match &g.cpus {
                None => topo.all_cpus(),
                Some(list) => {
                    if let Some(bad) = list.iter().find(|&&c| c as usize >= topo.nr_cpus()) {
                        return Err(SimError::Config(format!(
                            "thread group '{label}' is bound to CPU {bad}, but {} has CPUs 0-{}",
                            machine.name,
                            topo.nr_cpus() - 1
                        )));
                    }
                    Cpumask::from_cpus(list.iter().map(|&c| CpuId(c)))
                }
            };
            let groups = g.sharing_groups();
            let group_of: Vec<u32> = match g.group_assignment {
                GroupAssignment::Interleaved => (0..g.count).map(|i| i % groups).collect(),
                GroupAssignment::Seeded => {
                    let mut perm: Vec<u32> = (0..g.count).collect();
                    let mut r = rng.fork(7000 + gi as u64);
                    for k in (1..perm.len()).rev() {
                        perm.swap(k, r.below(k as u64 + 1) as usize);
                    }
                    perm.iter().map(|&p| p % groups).collect()
                }
            };
            // the CPU each thread is pinned to, if the group is pinned
            let pins: Vec<Option<u32>> = match g.pin {
                None => vec![None; g.count as usize],
                Some(Pin::RoundRobin) => (0..g.count as usize)
                    .map(|i| Some(((threads.len() + i) % topo.nr_cpus()) as u32))
                    .collect(),
                Some(Pin::Spread) => {
                    // the chips' first CPUs, then their second ones, and so on
                    let most = chip_cpus.iter().map(Vec::len).max().unwrap_or(0);
                    let order: Vec<u32> = (0..most)
                        .flat_map(|k| chip_cpus.iter().filter_map(move |c| c.get(k).copied()))
                        .collect();
                    (0..g.count as usize)
                        .map(|i| Some(order[(threads.len() + i) % order.len()]))
                        .collect()
                }
                Some(Pin::ByGroup) => {
                    let mut out = Vec::with_capacity(g.count as usize);
                    for &grp in &group_of {
                        let chip = grp as usize % chip_cpus.len();
                        let cpus = &chip_cpus[chip];
                        out.push(Some(cpus[chip_fill[chip] % cpus.len()]));
                        chip_fill[chip] += 1;
                    }
                    out
                }
            };
            for i in 0..g.count {
                let idx = threads.len();
                let proc_id = if g.same_process { process } else { process + i };
                let index_in_proc = if g.same_process { i } else { 0 };
                let sharing_group = group_of[i as usize];
                let bound = match pins[i as usize] {
                    None => bound.clone(),
                    Some(cpu) => {
                        if !bound.contains(CpuId(cpu)) {
                            return Err(SimError::Config(format!(
                                "thread group '{label}': its pin puts a thread on CPU {cpu}, outside its cpus; drop one of `pin` and `cpus`"
                            )));
                        }
                        Cpumask::from_cpus([CpuId(cpu)])
                    }
                };
                let w: Box<dyn Workload> = match &source {
                    Source::Model(model) => Box::new(LocalityThread::in_group(
                        model.clone(),
                        proc_id,
                        index_in_proc,
                        sharing_group,
                        rng.fork(1000 + idx as u64),
                    )),
                    Source::Trace(bytes, cpi, start) => {
                        let mut t =
                            TraceThread::new(bytes.clone(), proc_id, *cpi).map_err(|e| {
                                SimError::Config(format!("trace of group '{label}': {e}"))
                            })?;
                        if *start == TraceStart::Seeded {
                            // over the records only (not a trace's end record)
                            let len = crate::trace::records_end(bytes) as u64;
                            t.start_at_byte_when_run(rng.fork(3000 + idx as u64).below(len.max(1)));
                        }
                        Box::new(t)
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
                        class: g.class,
                    },
                    workload: w,
                    ops: Vec::with_capacity(crate::workload::FETCH_BATCH),
                    op_pos: 0,
                    op_cpi: 1.0,
                    state: State::Waiting,
                    ctr: Counters::default(),
                    policy_mask: None,
                    mask: bound.clone(),
                    bound: bound.clone(),
                    orig_nice: g.nice,
                    se: SchedEntity::new(g.nice, g.fx_priority as i32),
                    last_cpu: None,
                    last_ran: 0,
                    wait_since: 0,
                    dispatched_at: 0,
                    ctr_at_dispatch: Counters::default(),
                    timing: ContextState::default(),
                    base_ctr: Counters::default(),
                    slices: 0,
                    base_slices: 0,
                    sharing_group: (g.same_process && g.sharing_groups() > 1)
                        .then_some(sharing_group),
                    segment: SegmentTimer::new(g.segment),
                    window_instructions: [None; 2],
                });
                let jitter = match cyc(g.start_jitter_ms) {
                    0 => 0,
                    j => rng.fork(5000 + idx as u64).below(j),
                };
                starts.push((cyc(g.start_ms) + jitter, idx));
            }
            process += if g.same_process { 1 } else { g.count };
        }
        let per_core_partition: Option<Vec<(usize, u16)>> = match cfg.partition {
            None => None,
            Some(Partition::PerThread) => {
                mem.partition_llc(threads.len())
                    .map_err(|e| SimError::Config(format!("partition per thread: {e}")))?;
                let instances = topo.llc().map_or(0, |l| topo.caches[l].instances.len());
                for t in 0..threads.len() {
                    for i in 0..instances {
                        mem.set_llc_class(i, t as u32, t as u16);
                    }
                }
                None
            }
            Some(Partition::PerCore) => {
                let l = topo.llc().expect("validated machines have a data cache");
                let cores = |i: usize| -> Vec<u32> {
                    let set: std::collections::BTreeSet<u32> = topo.caches[l].instances[i]
                        .iter()
                        .map(|c| topo.cpus[c.index()].core)
                        .collect();
                    set.into_iter().collect()
                };
                mem.partition_llc(cores(0).len())
                    .map_err(|e| SimError::Config(format!("partition per core: {e}")))?;
                let classes = topo
                    .cpus
                    .iter()
                    .map(|ci| {
                        let i = topo.cache_instance(l, ci.id);
                        let rank = cores(i).iter().position(|&k| k == ci.core).unwrap_or(0);
                        (i, rank as u16)
                    })
                    .collect();
                Some(classes)
            }
        };
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
        let threads_with_segments = threads
            .iter()
            .filter(|t| t.segment.next != u64::MAX)
            .count();
        if cfg.stop_after_segments && threads_with_segments == 0 {
            return Err(SimError::Config(
                "stop_after_segments is set but no thread group has a segment: give one a \
                 `segment = { start_instructions = ..., instructions = ... }` or drop the setting"
                    .into(),
            ));
        }
        let kern = Kernel {
            class: Class::new(&cfg.kernel, topo.nr_cpus()),
            kcfg: cfg.kernel.clone(),
            freq_mhz: freq,
            core_timing: CoreTiming::new(&machine.core, machine.memory.store_buffer_entries),
            ctx_switch_cycles: (cfg.kernel.context_switch_us * freq as f64) as u64,
            migration_cost_cycles: (cfg.kernel.migration_cost_us * freq as f64) as u64,
            starvation_cycles: cyc(cfg.kernel.starvation_limit_ms),
            segment_max_cycles: cyc(cfg.kernel.corun_segment_max_ms),
            threads,
            next_step: vec![u64::MAX; cpus.len()],
            cpus,
            slots: vec![0; ncores],
            ipath_shift,
            now: 0,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            enqueue_seq: 1 << 62,
            front_seq: 1 << 62,
            rechoose_cycles: cyc(cfg.kernel.rechoose_interval_ms),
            nosteal_cycles: (cfg.kernel.nosteal_us * freq as f64) as u64,
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
            available: CounterKind::ALL.to_vec(),
            segments_open: threads_with_segments,
            stop_after_segments: cfg.stop_after_segments,
            window_owner: None,
            quanta_stop: cfg.stop_after_quanta.map(|q| u64::from(q.quanta)),
            quanta_left: None,
            profile: None,
            mem,
            llc_class_of_cpu: per_core_partition,
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
            base_bus: BusStats::default(),
            base_prefetches: PrefetchStats::default(),
            prepared: false,
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
        if let Some(ms) = cfg.kernel.slice_profile_ms {
            let n = sim.k.threads.len();
            sim.k.profile = Some(crate::kernel::profile::SliceProfiler::new(
                n,
                cyc(ms),
                sim.warmup == 0,
            ));
        }
        for (at, idx) in starts {
            sim.k.add_timer(at, Timer::Start(idx));
        }
        let bal = sim
            .k
            .cycles((cfg.kernel.balance_interval_ms * 1e6) as u64)
            .max(1);
        sim.k.add_timer(bal, Timer::Balance);
        if cfg.kernel.baseline == crate::config::Baseline::Ts {
            let second = sim.k.cycles(1_000_000_000);
            sim.k.add_timer(second, Timer::TsUpdate);
        }
        sim.k.add_timer(sim.sample_every, Timer::Sample);
        if sim.warmup > 0 {
            sim.k.add_timer(sim.warmup, Timer::WarmupEnd);
        }
        if let Some(q) = cfg.stop_after_quanta {
            if q.min_ms > 0.0 {
                let at = sim.warmup + cyc(q.min_ms);
                sim.k.add_timer(at, Timer::WindowFloor);
            }
            if sim.warmup == 0 {
                sim.k.open_quanta_window(0, q.min_ms == 0.0);
            }
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
            Timer::Steal(c) => {
                if self.k.cpus[c].current.is_none() && self.k.steal(c, at) {
                    self.k.schedule(c, at, false);
                }
            }
            Timer::TsUpdate => {
                self.k.ts_update(at);
                let second = self.k.cycles(1_000_000_000);
                self.k.add_timer(at + second, Timer::TsUpdate);
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
                    occupancy: self.k.occupancy(),
                });
                self.last_sample = (at, tot);
                self.k.add_timer(at + self.sample_every, Timer::Sample);
            }
            Timer::Stop => {
                // every work segment is complete, or every thread had its quanta: the
                // run ends here
                self.end = at.max(1);
            }
            Timer::WindowFloor => self.k.quanta_floor_reached(at),
            Timer::SliceBin(t, g) => self.k.profile_bin(t, g, at),
            Timer::WarmupEnd => {
                self.snapshot_totals(at);
                self.base_time = at;
                self.base_bus = self.k.mem.bus;
                self.base_prefetches = self.k.mem.prefetches;
                for th in &mut self.k.threads {
                    th.base_ctr = th.ctr;
                    th.base_slices = th.slices;
                }
                if let Some(p) = self.k.profile.as_mut() {
                    p.on = true;
                }
                if self.k.quanta_stop.is_some() {
                    let floor = self.cfg.stop_after_quanta.is_some_and(|q| q.min_ms == 0.0);
                    self.k.open_quanta_window(at, floor);
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

    /// Does every thread's work before its first operation ([`Workload::prepare`]: a
    /// trace thread decodes its trace up to its start point, seconds for a real
    /// program's); [`Simulation::run`] does it when not done yet. Separate so that what
    /// a run costs before its first simulated instant can be timed apart from the
    /// simulation (`reproduce --plan`'s calibration). Doing it twice does nothing more.
    ///
    /// [`Workload::prepare`]: crate::workload::Workload::prepare
    pub fn prepare(&mut self) {
        if self.prepared {
            return;
        }
        for th in &mut self.k.threads {
            th.workload.prepare();
        }
        self.prepared = true;
    }

    /// Whether [`Simulation::prepare`] is done.
    pub fn is_prepared(&self) -> bool {
        self.prepared
    }

    /// Runs to the configured duration (after [`Simulation::prepare`], if not done).
    /// `progress` is called now and then with the fraction done; returning false
    /// interrupts the run.
    pub fn run(mut self, progress: &mut dyn FnMut(f64) -> bool) -> Result<RunResult, SimError> {
        self.prepare();
        self.with_policy(&mut |p, c| p.init(c));
        let mut steps: u64 = 0;
        loop {
            // earliest busy CPU
            let mut best = u64::MAX;
            let mut bc = usize::MAX;
            for (c, &r) in self.k.next_step.iter().enumerate() {
                if r < best {
                    best = r;
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
        let bus = self.k.mem.bus.since(&self.base_bus);
        let pf = self.k.mem.prefetches.since(&self.base_prefetches);
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
                    slices: t.slices - t.base_slices,
                    solo_ips: None,
                    segment_start_ms: t.segment.started.map(|c| self.k.ns(c) as f64 / 1e6),
                    segment_ms: t
                        .segment
                        .started
                        .zip(t.segment.ended)
                        .map(|(a, b)| self.k.ns(b - a) as f64 / 1e6),
                    segment_window_instructions: match t.window_instructions {
                        [Some(a), Some(b)] => Some(b - a),
                        _ => None,
                    },
                    slice_profile: self
                        .k
                        .profile
                        .as_ref()
                        .map(|p| p.runs(t.id.0 as usize).to_vec())
                        .unwrap_or_default(),
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
        let policy_vectors: BTreeMap<String, Vec<f64>> = self
            .policy
            .as_ref()
            .map(|p| p.vectors().into_iter().collect())
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
            bus_utilization: bus.busy_cycles / window.max(1) as f64,
            bus_transfers: bus.transfers,
            prefetches: pf,
            bus_transfer_cycles: self.k.mem.transfer_cycles(),
            bus_mean_wait_cycles: if bus.transfers > 0 {
                bus.wait_cycles / bus.transfers as f64
            } else {
                0.0
            },
            totals,
            threads,
            cpus,
            kernel: KernelStats {
                slice_profile_dropped: self.k.profile.as_ref().map_or(0, |p| p.dropped),
                ..self.k.stats.clone()
            },
            policy_stats,
            policy_vectors,
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
