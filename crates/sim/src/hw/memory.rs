//! The memory system of a simulated machine: every cache instance, the path from each
//! hardware context through its cache levels, coherence, and the memory bus.
//!
//! - **Hierarchy.** A data access walks the data/unified levels innermost first and
//!   stops at the first hit; every level it missed is filled (write-allocate, neither
//!   inclusive nor exclusive), except that a store to a write-through first level
//!   (the T1's L1D) goes on to the next level and fills nothing there. An instruction fetch walks the instruction/unified levels.
//! - **Coherence.** Two line flags keep writes coherent without probing on every write:
//!   [`EXCLUSIVE`] (no other chip holds the block) and [`CORE_EXCLUSIVE`] (no other core's
//!   private cache on this chip holds it). A miss that reaches a shared level probes the
//!   other cores' private caches on the chip; a miss in every local level probes the
//!   other chips' caches, and if one holds the block the access is *remote*: served from
//!   that cache with the remote latency and counted by the PMU. A write invalidates the
//!   copies elsewhere (an upgrade across chips costs the remote latency); a read clears
//!   the exclusive flags of the copies it found.
//! - **Memory.** DRAM latency plus a bandwidth-limited bus shared by the whole machine:
//!   each line transfer (fill or dirty write-back from the last level) occupies the bus;
//!   requests queue behind it.
//! - **Prefetchers** ([`crate::hw::prefetch`]): after a demand access, the machine's
//!   prefetchers may fetch more lines into the L1D or the L2 the same way (reading
//!   only, never across chips), marked with their arrival time.

use crate::hw::cache::{Cache, CacheGeometry, CORE_EXCLUSIVE, DIRTY, EXCLUSIVE, PREFETCHED};
use crate::hw::machine::{MachineConfig, MachineError};
use crate::hw::prefetch::{same_page, PrefetchConfig, PrefetchStats, Prefetcher};
use cachesched_core::topology::WritePolicy;
use cachesched_core::{CacheKind, CacheScope, Counters, Topology};

/// Where an access was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedBy {
    /// The first-level cache.
    L1,
    /// A level-2 cache.
    L2,
    /// A level-3 (or outer) cache.
    L3,
    /// Another chip's cache (or, for a store hitting a shared line, the local cache
    /// after invalidating the copies on other chips).
    Remote,
    /// DRAM.
    Dram,
}

/// Result of one access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessOutcome {
    /// Cycles beyond an L1 hit until the data (or the store's completion) is there.
    pub stall_cycles: u32,
    /// Where it was served.
    pub source: ServedBy,
}

/// Memory-bus statistics (cumulative; subtract two snapshots for an interval).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BusStats {
    /// Cycles the bus was transferring.
    pub busy_cycles: f64,
    /// Cycles transfers waited for the bus (queueing delay).
    pub wait_cycles: f64,
    /// Line transfers (fills and write-backs).
    pub transfers: u64,
}

impl BusStats {
    /// `self - earlier`.
    pub fn since(&self, earlier: &BusStats) -> BusStats {
        BusStats {
            busy_cycles: self.busy_cycles - earlier.busy_cycles,
            wait_cycles: self.wait_cycles - earlier.wait_cycles,
            transfers: self.transfers - earlier.transfers,
        }
    }
}

/// Per CPU, a list of (cache level, instance) pairs.
/// Per CPU, caches to probe: (index in [`MemorySystem::caches`], line shift).
type Targets = Vec<Vec<(usize, u32)>>;

#[derive(Debug, Clone, Copy)]
struct PathLevel {
    /// Index of the level in the topology's cache list.
    level: usize,
    /// Index of the instance in [`MemorySystem::caches`].
    cache: usize,
    /// What serves an access that hits here.
    source: ServedBy,
    shift: u32,
    latency: u32,
    private: bool,
    counts_l2: bool,
    counts_llc: bool,
    /// Banks of this instance (0: not modelled).
    banks: u32,
    /// Where this instance's banks start in [`MemorySystem::bank_free`].
    bank_base: usize,
}

/// All caches, paths, coherence state and the bus. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct MemorySystem {
    /// Every cache instance, level by level (one flat array: a lookup indexes once).
    caches: Vec<Cache>,
    /// Per level of the topology's cache list, the index of its first instance in
    /// `caches`.
    first_instance: Vec<usize>,
    dpath: Vec<Vec<PathLevel>>,
    ipath: Vec<Vec<PathLevel>>,
    /// Per CPU: other cores' private data caches on the same chip.
    siblings: Targets,
    /// Per CPU: data caches on other chips, those of the CPU's node first.
    remote: Targets,
    /// Per CPU: how many of `remote` are on its node (all of them without nodes).
    near_remote: Vec<usize>,
    coherent: bool,
    /// Index of the last-level data cache in the topology's list.
    llc: Option<usize>,
    mem_latency: u32,
    remote_latency: u32,
    /// Latency of a cache on another node (`remote_latency` without nodes).
    far_latency: u32,
    transfer_cycles: f64,
    bus_free: f64,
    /// The bus's statistics so far.
    pub bus: BusStats,
    /// Which prefetchers the cores have.
    prefetch: PrefetchConfig,
    /// Per CPU: its prefetchers' state (empty without prefetchers).
    prefetchers: Vec<Prefetcher>,
    /// Per CPU: the index of its level-2 cache in its data path.
    l2_index: Vec<Option<usize>>,
    /// The prefetchers' counts so far.
    pub prefetches: PrefetchStats,
    /// Per cache instance (index into `caches`): lines the L2 streamer's prefetches
    /// filled there so far (of the instance's [`Cache::fills`]).
    streamer_fills: Vec<u64>,
    /// The first data level is write-through, no-write-allocate.
    l1_write_through: bool,
    /// Per bank of every banked cache instance: the cycle it takes its next request.
    bank_free: Vec<u64>,
    /// Cycles requests waited for a busy cache bank so far.
    pub bank_wait_cycles: u64,
    /// Number of invalidations sent to other caches.
    pub invalidations: u64,
}

impl MemorySystem {
    /// Builds cold caches for `machine` with topology `topo`.
    pub fn new(machine: &MachineConfig, topo: &Topology) -> Result<MemorySystem, MachineError> {
        let mut caches = Vec::new();
        let mut first_instance = Vec::new();
        let mut shifts = Vec::new();
        for l in &topo.caches {
            first_instance.push(caches.len());
            let g = CacheGeometry {
                size_bytes: l.size_bytes,
                ways: l.ways,
                line_bytes: l.line_bytes,
            };
            for _ in &l.instances {
                caches.push(Cache::new(g).map_err(|e| MachineError::Invalid {
                    name: machine.name.clone(),
                    reason: e.to_string(),
                })?);
            }
            shifts.push(l.line_bytes.trailing_zeros());
        }
        let llc = topo.llc();
        let chip_of_instance = |level: usize, inst: usize| -> Option<u32> {
            let l = &topo.caches[level];
            if l.scope == CacheScope::Machine {
                return None;
            }
            l.instances[inst].first().map(|c| topo.cpus[c.index()].chip)
        };
        // banks of every instance of every banked level, laid out level by level
        let mut bank_bases = Vec::new();
        let mut nbanks = 0usize;
        for l in &topo.caches {
            bank_bases.push(nbanks);
            nbanks += l.banks as usize * l.instances.len();
        }
        let mut dpath = Vec::new();
        let mut ipath = Vec::new();
        let mut siblings = Vec::new();
        let mut remote = Vec::new();
        let mut near_remote = Vec::new();
        // the level and the instance within it of an index into `caches`
        let instance_of = |c: usize| -> (usize, usize) {
            let level = first_instance
                .iter()
                .rposition(|&f| f <= c)
                .expect("level 0 starts at 0");
            (level, c - first_instance[level])
        };
        for cpu in &topo.cpus {
            let mk = |want: &dyn Fn(CacheKind) -> bool| -> Vec<PathLevel> {
                let mut p: Vec<PathLevel> = topo
                    .caches
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| want(l.kind))
                    .map(|(i, l)| PathLevel {
                        banks: l.banks,
                        bank_base: bank_bases[i]
                            + topo.cache_instance(i, cpu.id) * l.banks as usize,
                        level: i,
                        cache: first_instance[i] + topo.cache_instance(i, cpu.id),
                        source: match l.level {
                            0 | 1 => ServedBy::L1,
                            2 => ServedBy::L2,
                            _ => ServedBy::L3,
                        },
                        shift: shifts[i],
                        latency: l.latency_cycles,
                        private: matches!(l.scope, CacheScope::Context | CacheScope::Core),
                        counts_l2: l.level == 2,
                        counts_llc: Some(i) == llc,
                    })
                    .collect();
                p.sort_by_key(|pl| topo.caches[pl.level].level);
                p
            };
            dpath.push(mk(&|k| k != CacheKind::Instruction));
            ipath.push(mk(&|k| k != CacheKind::Data));
            let mut sib = Vec::new();
            let mut rem = Vec::new();
            for (i, l) in topo.caches.iter().enumerate() {
                if l.kind == CacheKind::Instruction {
                    continue;
                }
                let mine = topo.cache_instance(i, cpu.id);
                for inst in 0..l.instances.len() {
                    if inst == mine {
                        continue;
                    }
                    match chip_of_instance(i, inst) {
                        Some(ch) if ch != cpu.chip => {
                            rem.push((first_instance[i] + inst, shifts[i]))
                        }
                        Some(_) if matches!(l.scope, CacheScope::Context | CacheScope::Core) => {
                            sib.push((first_instance[i] + inst, shifts[i]))
                        }
                        _ => {}
                    }
                }
            }
            // the CPU's node first: a read is served by the nearest copy
            let per_node = machine.memory.chips_per_node.max(1);
            let node = |inst_chip: u32| inst_chip / per_node;
            let near = |&(c, _): &(usize, u32)| -> bool {
                let (level, inst) = instance_of(c);
                chip_of_instance(level, inst).map(node) == Some(node(cpu.chip))
                    || machine.memory.chips_per_node == 0
            };
            let (mut n, f): (Vec<_>, Vec<_>) = rem.into_iter().partition(near);
            near_remote.push(n.len());
            n.extend(f);
            siblings.push(sib);
            remote.push(n);
        }
        let coherent = siblings.iter().chain(remote.iter()).any(|v| !v.is_empty());
        let line = topo.llc().map(|i| topo.caches[i].line_bytes).unwrap_or(64) as f64;
        let l2_index = dpath
            .iter()
            .map(|p: &Vec<PathLevel>| p.iter().position(|pl| pl.counts_l2))
            .collect();
        let prefetchers = if machine.prefetch.any() {
            vec![Prefetcher::default(); topo.cpus.len()]
        } else {
            Vec::new()
        };
        let l1_write_through = dpath
            .first()
            .and_then(|p: &Vec<PathLevel>| p.first())
            .is_some_and(|pl| topo.caches[pl.level].write_policy == WritePolicy::WriteThrough);
        Ok(MemorySystem {
            bank_free: vec![0; nbanks],
            bank_wait_cycles: 0,
            l1_write_through,
            prefetch: machine.prefetch,
            prefetchers,
            l2_index,
            prefetches: PrefetchStats::default(),
            streamer_fills: vec![0; caches.len()],
            llc,
            caches,
            first_instance,
            dpath,
            ipath,
            siblings,
            remote,
            near_remote,
            coherent,
            mem_latency: machine.memory.latency_cycles,
            remote_latency: machine.memory.remote_latency_cycles,
            far_latency: if machine.memory.chips_per_node > 0 {
                machine.memory.far_latency_cycles
            } else {
                machine.memory.remote_latency_cycles
            },
            transfer_cycles: line / machine.memory.bus_bytes_per_cycle,
            bus_free: 0.0,
            bus: BusStats::default(),
            invalidations: 0,
        })
    }

    /// Cycles one line transfer occupies the bus.
    pub fn transfer_cycles(&self) -> f64 {
        self.transfer_cycles
    }

    /// The cache instance `instance` of level `level`.
    pub fn cache(&self, level: usize, instance: usize) -> &Cache {
        &self.caches[self.first_instance[level] + instance]
    }

    /// Empties every cache.
    pub fn flush(&mut self) {
        self.caches.iter_mut().for_each(Cache::flush);
    }

    /// One line transfer requested at `now`, served first come, first served (the
    /// engine makes every request at its current time, so in simulated-time order);
    /// returns the cycles until it completes.
    fn bus_transfer(&mut self, now: u64) -> u32 {
        let start = self.bus_free.max(now as f64);
        self.bus_free = start + self.transfer_cycles;
        self.bus.busy_cycles += self.transfer_cycles;
        self.bus.wait_cycles += start - now as f64;
        self.bus.transfers += 1;
        cachesched_core::num::ceil_u64(start - now as f64 + self.transfer_cycles) as u32
    }

    /// A request at `now` to the bank of `pl`'s instance that holds `addr`, occupying
    /// it `occupancy` cycles: the cycles it waits for the bank.
    #[inline]
    fn bank(&mut self, pl: PathLevel, addr: u64, now: u64, occupancy: u64) -> u32 {
        let b = pl.bank_base + ((addr >> pl.shift) % pl.banks as u64) as usize;
        let start = self.bank_free[b].max(now);
        self.bank_free[b] = start + occupancy;
        let wait = start - now;
        self.bank_wait_cycles += wait;
        wait as u32
    }

    /// Probes `targets` for the block containing `addr`; if `invalidate`, removes the
    /// copies, else clears `clear` from their flags. Returns whether any held it.
    fn probe(
        &mut self,
        targets_of: fn(&MemorySystem) -> &Targets,
        cpu: usize,
        addr: u64,
        invalidate: bool,
        clear: u8,
    ) -> bool {
        let n = targets_of(self)[cpu].len();
        let mut found = false;
        for k in 0..n {
            let (i, shift) = targets_of(self)[cpu][k];
            let block = addr >> shift;
            let c = &mut self.caches[i];
            if invalidate {
                if c.invalidate(block).is_some() {
                    found = true;
                    self.invalidations += 1;
                }
            } else if c.update_flags(block, 0, clear) {
                found = true;
            }
        }
        found
    }

    /// Probes the caches of other chips for `addr` as [`MemorySystem::probe`] does
    /// (invalidating the copies for a store, clearing their exclusivity for a load) and
    /// returns the latency of the answer, 0 when no other chip holds the line. A load is
    /// served by the nearest copy (a chip of the CPU's node when one holds it); a store
    /// waits for the farthest invalidation.
    fn probe_remote(&mut self, cpu: usize, addr: u64, invalidate: bool) -> u32 {
        let near = self.near_remote[cpu];
        let (mut in_node, mut beyond) = (false, false);
        for k in 0..self.remote[cpu].len() {
            let (i, shift) = self.remote[cpu][k];
            let block = addr >> shift;
            let c = &mut self.caches[i];
            let found = if invalidate {
                let hit = c.invalidate(block).is_some();
                self.invalidations += hit as u64;
                hit
            } else {
                c.update_flags(block, 0, EXCLUSIVE)
            };
            if k < near {
                in_node |= found;
            } else {
                beyond |= found;
            }
        }
        match (in_node, beyond) {
            (_, true) if invalidate || !in_node => self.far_latency,
            (true, _) => self.remote_latency,
            _ => 0,
        }
    }

    #[allow(clippy::too_many_arguments)] // the hot path passes scalars, not a struct
    fn fill(
        &mut self,
        cpu: usize,
        i: usize,
        owner: u32,
        addr: u64,
        flags: u8,
        data: bool,
        now: u64,
    ) {
        let path = if data {
            &self.dpath[cpu]
        } else {
            &self.ipath[cpu]
        };
        let pl = path[i];
        let outer = path.get(i + 1).copied();
        let block = addr >> pl.shift;
        if let Some(ev) = self.caches[pl.cache].fill(block, owner, flags) {
            if ev.flags & DIRTY != 0 {
                let ev_addr = ev.block << pl.shift;
                let kept = outer.is_some_and(|o| {
                    self.caches[o.cache].update_flags(ev_addr >> o.shift, DIRTY, 0)
                });
                if !kept {
                    self.bus_transfer(now);
                }
            }
        }
    }

    /// A data access by `owner` on `cpu` at cycle `now`, made by the instruction at
    /// `pc`; updates `ctr` (references and misses per level, remote accesses).
    ///
    /// Most accesses hit the first-level cache with nothing to tell other caches: this
    /// handles those here (the same outcome the whole walk below would give) and
    /// leaves the rest to the general walk (`data_access_walk`).
    #[allow(clippy::too_many_arguments)] // the hot path passes scalars, not a struct
    #[inline]
    pub fn data_access(
        &mut self,
        cpu: usize,
        owner: u32,
        addr: u64,
        pc: u64,
        write: bool,
        now: u64,
        ctr: &mut Counters,
    ) -> AccessOutcome {
        let pl = self.dpath[cpu][0];
        if (write && self.l1_write_through) || pl.banks > 0 {
            return self.data_access_walk(cpu, owner, addr, pc, write, now, ctr, None);
        }
        ctr.l1d_refs += 1;
        ctr.l2_refs += pl.counts_l2 as u64;
        ctr.llc_refs += pl.counts_llc as u64;
        let wflag = if write { DIRTY } else { 0 };
        let first = self.caches[pl.cache].lookup(addr >> pl.shift, wflag);
        if let Some(f) = first {
            // a hit that needs no probe and changes no coherence flag (see the walk)
            let both = EXCLUSIVE | CORE_EXCLUSIVE;
            if !self.coherent || (pl.private && (!write || f & both == both)) {
                let stall = self.after_demand(cpu, owner, addr, pc, write, Some((0, f)), now);
                return AccessOutcome {
                    stall_cycles: stall,
                    source: ServedBy::L1,
                };
            }
        }
        self.data_access_walk(cpu, owner, addr, pc, write, now, ctr, Some(first))
    }

    /// [`MemorySystem::data_access`] walking the whole path: `first_level` is the
    /// outcome of the first level's lookup if `data_access` made it (its references
    /// are then counted already).
    #[allow(clippy::too_many_arguments)]
    fn data_access_walk(
        &mut self,
        cpu: usize,
        owner: u32,
        addr: u64,
        pc: u64,
        write: bool,
        now: u64,
        ctr: &mut Counters,
        first_level: Option<Option<u8>>,
    ) -> AccessOutcome {
        let npath = self.dpath[cpu].len();
        let wflag = if write { DIRTY } else { 0 };
        let mut hit: Option<(usize, u8)> = None;
        // a store to a write-through, no-write-allocate L1D updates the line if it is
        // there (it stays clean) and is performed at the next level either way
        let first = if write && self.l1_write_through {
            let pl = self.dpath[cpu][0];
            ctr.l1d_refs += 1;
            if self.caches[pl.cache].lookup(addr >> pl.shift, 0).is_none() {
                ctr.l1d_misses += 1;
            }
            1
        } else {
            0
        };
        let mut bank_wait = 0;
        for i in first..npath {
            let pl = self.dpath[cpu][i];
            let found = match (i, first_level) {
                (0, Some(found)) => found,
                _ => {
                    if i == 0 {
                        ctr.l1d_refs += 1;
                    }
                    if pl.banks > 0 {
                        bank_wait += self.bank(pl, addr, now, 1);
                    }
                    ctr.l2_refs += pl.counts_l2 as u64;
                    ctr.llc_refs += pl.counts_llc as u64;
                    self.caches[pl.cache].lookup(addr >> pl.shift, wflag)
                }
            };
            if let Some(f) = found {
                hit = Some((i, f));
                break;
            }
            if i == 0 {
                ctr.l1d_misses += 1;
            }
            ctr.l2_misses += pl.counts_l2 as u64;
            ctr.llc_misses += pl.counts_llc as u64;
        }
        let both = EXCLUSIVE | CORE_EXCLUSIVE;
        let (mut stall, mut source, fill_upto, mut excl) = match hit {
            Some((0, f)) => (0, ServedBy::L1, 0, f & both),
            Some((k, f)) => {
                let pl = self.dpath[cpu][k];
                (pl.latency, pl.source, k, f & both)
            }
            None => (0, ServedBy::Dram, npath, 0),
        };
        if !self.coherent {
            excl = both;
        } else {
            let private_hit = matches!(hit, Some((k, _)) if self.dpath[cpu][k].private);
            // Other cores' private caches on this chip.
            if !private_hit || (write && excl & CORE_EXCLUSIVE == 0) {
                let found = self.probe(|m| &m.siblings, cpu, addr, write, CORE_EXCLUSIVE);
                if write || !found {
                    excl |= CORE_EXCLUSIVE;
                } else {
                    excl &= !CORE_EXCLUSIVE;
                }
            }
            // Other chips.
            if hit.is_none() {
                let found = self.probe_remote(cpu, addr, write);
                if found > 0 {
                    source = ServedBy::Remote;
                    stall = found;
                    ctr.remote_accesses += 1;
                }
                if write || found == 0 {
                    excl |= EXCLUSIVE;
                }
            } else if write && excl & EXCLUSIVE == 0 {
                // an upgrade: the copies on other chips are invalidated across the
                // interconnect before the store completes
                let found = self.probe_remote(cpu, addr, true);
                if found > 0 {
                    stall += found;
                    source = ServedBy::Remote;
                    ctr.remote_accesses += 1;
                }
                excl |= EXCLUSIVE;
            }
        }
        if source == ServedBy::Dram {
            stall = self.mem_latency + self.bus_transfer(now);
        }
        stall += bank_wait;
        for i in (first..fill_upto).rev() {
            self.fill(cpu, i, owner, addr, excl | wflag, true, now);
        }
        if let Some((k, f)) = hit {
            if self.coherent && f & both != excl {
                let pl = self.dpath[cpu][k];
                self.caches[pl.cache].update_flags(addr >> pl.shift, excl, both & !excl);
            }
        }
        stall = stall.max(self.after_demand(cpu, owner, addr, pc, write, hit, now));
        AccessOutcome {
            stall_cycles: stall,
            source,
        }
    }

    /// What the prefetchers do after a demand access that hit at (path level, flags)
    /// `hit` (`None`: every cache missed): the cycles until a prefetched line it found
    /// arrives (0 if none or arrived), after training on the access.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn after_demand(
        &mut self,
        cpu: usize,
        owner: u32,
        addr: u64,
        pc: u64,
        write: bool,
        hit: Option<(usize, u8)>,
        now: u64,
    ) -> u32 {
        if self.prefetchers.is_empty() {
            return 0;
        }
        let mut wait = 0;
        if let Some((k, f)) = hit {
            if f & PREFETCHED != 0 {
                wait = self.prefetched_found(cpu, k, addr, now);
            }
        }
        self.train(cpu, owner, addr, pc, write, hit.map(|(k, _)| k), now);
        wait
    }

    /// A demand access found the prefetched line holding `addr` at path level `k` of
    /// `cpu`: the mark is cleared and the cycles until the line arrives returned (0 if
    /// it has).
    #[cold]
    fn prefetched_found(&mut self, cpu: usize, k: usize, addr: u64, now: u64) -> u32 {
        let pl = self.dpath[cpu][k];
        self.caches[pl.cache].update_flags(addr >> pl.shift, 0, PREFETCHED);
        let at = self.prefetchers[cpu].arrival(addr, pl.shift);
        if at > now {
            self.prefetches.late += 1;
            (at - now) as u32
        } else {
            self.prefetches.useful += 1;
            0
        }
    }

    /// Shows the prefetchers of `cpu` a demand access by `owner` to `addr` by the
    /// instruction at `pc` that hit at path level `hit` (`None`: missed every cache)
    /// and issues what they ask for (on `owner`'s behalf).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn train(
        &mut self,
        cpu: usize,
        owner: u32,
        addr: u64,
        pc: u64,
        write: bool,
        hit: Option<usize>,
        now: u64,
    ) {
        let cfg = self.prefetch;
        if cfg.l1_next_line && (!write || cfg.next_line_on_stores) {
            let shift = self.dpath[cpu][0].shift;
            if let Some(a) = self.prefetchers[cpu].next_line(addr, shift) {
                self.prefetch_line(cpu, owner, a, 0, now);
            }
        }
        if cfg.l1_ip_stride && !write {
            if let Some(a) = self.prefetchers[cpu].ip_stride(pc, addr) {
                self.prefetch_line(cpu, owner, a, 0, now);
            }
        }
        if cfg.l2_streamer && hit != Some(0) {
            self.stream_train(cpu, owner, addr, now);
        }
    }

    /// The L2 streamer of `cpu` sees the L1D ask the L2 for the line holding `addr`
    /// (a demand miss or an L1 prefetch) and fetches the lines it asks for into the
    /// L2.
    fn stream_train(&mut self, cpu: usize, owner: u32, addr: u64, now: u64) {
        let Some(l2) = self.l2_index[cpu] else {
            return;
        };
        let shift = self.dpath[cpu][l2].shift;
        let degree = self.prefetch.l2_degree;
        if let Some((first, dir, n)) =
            self.prefetchers[cpu].stream(addr >> shift, 1 << shift, degree)
        {
            let base = addr >> shift << shift;
            for k in 0..n as i64 {
                let line = first as i64 + dir * k;
                match same_page(base, (line << shift) - base as i64) {
                    Some(a) => self.prefetch_line(cpu, owner, a, l2, now),
                    None => break,
                }
            }
        }
    }

    /// Fetches the line holding `addr` into path level `target` of `cpu` (and the
    /// levels between it and where the line is), unless it is there already; on a
    /// machine with other chips, never a line another chip holds. The line is marked
    /// [`PREFETCHED`] with its arrival time and belongs to `owner`.
    #[inline]
    fn prefetch_line(&mut self, cpu: usize, owner: u32, addr: u64, target: usize, now: u64) {
        let t = self.dpath[cpu][target];
        if !self.caches[t.cache].contains(addr >> t.shift) {
            self.prefetch_absent(cpu, owner, addr, target, now);
        }
    }

    /// [`MemorySystem::prefetch_line`] of a line not at path level `target`: kept out
    /// of line, so that the common case (the line is there) is a lookup where it is
    /// asked for.
    #[inline(never)]
    fn prefetch_absent(&mut self, cpu: usize, owner: u32, addr: u64, target: usize, now: u64) {
        let npath = self.dpath[cpu].len();
        let t = self.dpath[cpu][target];
        if target == 0 && self.prefetch.l2_streamer {
            // the L1's request is an L2 lookup the streamer sees
            self.stream_train(cpu, owner, addr, now);
        }
        let mut from = npath;
        let mut ready = 0;
        for j in target + 1..npath {
            let pl = self.dpath[cpu][j];
            if let Some(f) = self.caches[pl.cache].flags(addr >> pl.shift) {
                from = j;
                ready = now + pl.latency as u64;
                if f & PREFETCHED != 0 {
                    // still on its way there, perhaps
                    ready = ready.max(self.prefetchers[cpu].arrival(addr, pl.shift));
                }
                break;
            }
        }
        let mut excl = EXCLUSIVE | CORE_EXCLUSIVE;
        if self.coherent {
            if from == npath && self.probe(|m| &m.remote, cpu, addr, false, EXCLUSIVE) {
                return;
            }
            if self.probe(|m| &m.siblings, cpu, addr, false, CORE_EXCLUSIVE) {
                excl &= !CORE_EXCLUSIVE;
            }
        }
        if from == npath {
            ready = now + (self.mem_latency + self.bus_transfer(now)) as u64;
        }
        for j in (target..from).rev() {
            let flags = if j == target { excl | PREFETCHED } else { excl };
            self.fill(cpu, j, owner, addr, flags, true, now);
            if target > 0 {
                // only the L2 streamer prefetches into a level beyond the first
                self.streamer_fills[self.dpath[cpu][j].cache] += 1;
            }
        }
        self.prefetchers[cpu].record(addr, t.shift, ready);
        self.prefetches.issued += 1;
    }

    /// An instruction fetch of the line holding `addr`.
    #[inline]
    pub fn instr_fetch(
        &mut self,
        cpu: usize,
        owner: u32,
        addr: u64,
        now: u64,
        ctr: &mut Counters,
    ) -> AccessOutcome {
        let npath = self.ipath[cpu].len();
        let mut bank_wait = 0;
        for i in 0..npath {
            let pl = self.ipath[cpu][i];
            if i == 0 {
                ctr.l1i_refs += 1;
            }
            if pl.banks > 0 {
                bank_wait += self.bank(pl, addr, now, 2);
            }
            ctr.l2_refs += pl.counts_l2 as u64;
            ctr.llc_refs += pl.counts_llc as u64;
            if self.caches[pl.cache].lookup(addr >> pl.shift, 0).is_some() {
                for j in (0..i).rev() {
                    self.fill(cpu, j, owner, addr, 0, false, now);
                }
                return AccessOutcome {
                    stall_cycles: if i == 0 { 0 } else { pl.latency + bank_wait },
                    source: pl.source,
                };
            }
            if i == 0 {
                ctr.l1i_misses += 1;
            }
            ctr.l2_misses += pl.counts_l2 as u64;
            ctr.llc_misses += pl.counts_llc as u64;
        }
        let stall = self.mem_latency + self.bus_transfer(now) + bank_wait;
        for j in (0..npath).rev() {
            self.fill(cpu, j, owner, addr, 0, false, now);
        }
        AccessOutcome {
            stall_cycles: stall,
            source: ServedBy::Dram,
        }
    }

    /// Divides the ways of every instance of the last-level cache equally among
    /// `classes` partition classes (class *i* gets the *i*-th run of ways; the first
    /// `ways mod classes` classes one more). Fails if there are fewer ways than classes.
    pub fn partition_llc(&mut self, classes: usize) -> Result<(), String> {
        let Some(l) = self.llc else {
            return Err("the machine has no last-level data cache".into());
        };
        let first = self.first_instance[l];
        let ways = self.caches[first].geometry().ways as usize;
        if classes == 0 || classes > ways {
            return Err(format!(
                "cannot divide {ways} ways among {classes} (at most one class per way)"
            ));
        }
        let mut parts = Vec::new();
        let mut w = 0u32;
        for i in 0..classes {
            let n = (ways / classes + usize::from(i < ways % classes)) as u32;
            parts.push((w..w + n).collect::<Vec<u32>>());
            w += n;
        }
        let end = self
            .first_instance
            .get(l + 1)
            .copied()
            .unwrap_or(self.caches.len());
        for c in &mut self.caches[first..end] {
            c.set_partition(&parts).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Puts `owner`'s fills of the last-level cache instance `instance` into partition
    /// class `class`.
    pub fn set_llc_class(&mut self, instance: usize, owner: u32, class: u16) {
        if let Some(l) = self.llc {
            self.caches[self.first_instance[l] + instance].set_owner_class(owner, class);
        }
    }

    /// Whether `cpu`'s first-level data cache holds the line of `addr` (no LRU update):
    /// whether a load there would hit.
    #[inline]
    pub fn l1d_holds(&self, cpu: usize, addr: u64) -> bool {
        let pl = self.dpath[cpu][0];
        self.caches[pl.cache].contains(addr >> pl.shift)
    }

    /// The last-level cache instance `cpu`'s data path ends in (`None` without one).
    pub fn llc_instance(&self, cpu: usize) -> Option<usize> {
        let l = self.llc?;
        let (first, end) = (
            self.first_instance[l],
            self.first_instance
                .get(l + 1)
                .copied()
                .unwrap_or(self.caches.len()),
        );
        self.dpath[cpu]
            .iter()
            .map(|p| p.cache)
            .find(|&c| (first..end).contains(&c))
            .map(|c| c - first)
    }

    /// Lines last-level cache instance `instance` has filled so far, and how many of
    /// them the L2 streamer's prefetches filled.
    pub fn llc_fills(&self, instance: usize) -> (u64, u64) {
        self.llc.map_or((0, 0), |l| {
            let c = self.first_instance[l] + instance;
            (self.caches[c].fills(), self.streamer_fills[c])
        })
    }

    /// Lines of last-level cache instance `instance` and how many of them `owner`
    /// holds.
    pub fn llc_lines(&self, instance: usize, owner: u32) -> (u64, u64) {
        self.llc.map_or((0, 0), |l| {
            let c = &self.caches[self.first_instance[l] + instance];
            let g = c.geometry();
            (g.size_bytes / g.line_bytes as u64, c.occupancy_lines(owner))
        })
    }

    /// Bytes of cache instance (`level`, `instance`) owned by thread `owner`.
    pub fn occupancy_bytes(&self, level: usize, instance: usize, owner: u32) -> u64 {
        self.caches[self.first_instance[level] + instance].occupancy_bytes(owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::machine::MachineConfig;
    use crate::hw::prefetch::PrefetchConfig;

    fn sys(name: &str) -> (MemorySystem, Topology) {
        let m = MachineConfig::preset(name).unwrap();
        let t = m.topology().unwrap();
        (MemorySystem::new(&m, &t).unwrap(), t)
    }

    #[test]
    fn hits_after_fill_and_l2_serves_l1_misses() {
        let (mut m, _) = sys("t1-dual");
        let mut c = Counters::default();
        let a = m.data_access(0, 1, 0x10_000, 0, false, 0, &mut c);
        assert_eq!(a.source, ServedBy::Dram);
        // the DRAM latency plus a 64-byte transfer at 4.03 B/cycle
        let dram = MachineConfig::preset("t1-dual")
            .unwrap()
            .memory
            .latency_cycles;
        assert!(a.stall_cycles >= dram + 15, "{} vs {dram}", a.stall_cycles);
        assert_eq!(
            (
                c.l1d_refs,
                c.l1d_misses,
                c.l2_refs,
                c.l2_misses,
                c.llc_misses
            ),
            (1, 1, 1, 1, 1)
        );
        let b = m.data_access(0, 1, 0x10_004, 0, false, 1000, &mut c);
        assert_eq!(
            b,
            AccessOutcome {
                stall_cycles: 0,
                source: ServedBy::L1
            }
        );
        // the other core misses its L1 but hits the shared L2
        let d = m.data_access(1, 2, 0x10_000, 0, false, 2000, &mut c);
        assert_eq!(d.source, ServedBy::L2);
        assert_eq!(d.stall_cycles, 23);
    }

    #[test]
    fn writes_invalidate_other_cores_private_copies() {
        let (mut m, _) = sys("t1-dual");
        let mut c = Counters::default();
        m.data_access(0, 1, 0x4000, 0, false, 0, &mut c);
        m.data_access(1, 2, 0x4000, 0, false, 0, &mut c);
        assert!(m.cache(1, 1).contains(0x4000 >> 4));
        m.data_access(0, 1, 0x4000, 0, true, 0, &mut c);
        assert!(
            !m.cache(1, 1).contains(0x4000 >> 4),
            "core 1's L1D copy must be invalidated"
        );
        // core 1 reads again: L1 miss, served by the shared L2
        let r = m.data_access(1, 2, 0x4000, 0, false, 0, &mut c);
        assert_eq!(r.source, ServedBy::L2);
    }

    #[test]
    fn cross_chip_sharing_is_remote_and_counted() {
        let (mut m, t) = sys("power5-2x2x2");
        let far = t.chip_cpus(1).first().unwrap().index();
        let mut c0 = Counters::default();
        let mut c1 = Counters::default();
        m.data_access(0, 1, 0x8000, 0, true, 0, &mut c0);
        let r = m.data_access(far, 2, 0x8000, 0, false, 100, &mut c1);
        assert_eq!(r.source, ServedBy::Remote);
        assert_eq!(r.stall_cycles, 160);
        assert_eq!(c1.remote_accesses, 1);
        // chip 1 now holds a shared copy; a write there invalidates chip 0's copies: an
        // upgrade across chips, counted and timed as remote
        let up = m.data_access(far, 2, 0x8000, 0, true, 200, &mut c1);
        assert_eq!(up.source, ServedBy::Remote);
        assert_eq!(
            up.stall_cycles, 160,
            "an L1 hit, then the remote invalidation"
        );
        assert_eq!(c1.remote_accesses, 2);
        // writing again finds the line exclusive: a plain local hit
        let again_w = m.data_access(far, 2, 0x8000, 0, true, 250, &mut c1);
        assert_eq!(again_w.source, ServedBy::L1);
        assert_eq!(c1.remote_accesses, 2);
        let again = m.data_access(0, 1, 0x8000, 0, false, 300, &mut c0);
        assert_eq!(again.source, ServedBy::Remote);
        assert_eq!(c0.remote_accesses, 1);
        assert!(m.invalidations >= 3);
        // a private line of chip 0 never goes remote
        let p = m.data_access(0, 1, 0x9_0000, 0, false, 400, &mut c0);
        assert_eq!(p.source, ServedBy::Dram);
    }

    #[test]
    fn a_copy_on_another_node_costs_the_far_latency() {
        // power5-8chip: chips 0 and 1 form a node, chips 2..8 are other nodes
        let (mut m, t) = sys("power5-8chip");
        let on_chip = |chip: u32| t.chip_cpus(chip).first().unwrap().index();
        let (a, near, far) = (on_chip(0), on_chip(1), on_chip(5));
        let mut c = Counters::default();
        // a line written on chip 5, read on chip 0: served from the other node
        m.data_access(far, 1, 0x8000, 0, true, 0, &mut c);
        let r = m.data_access(a, 1, 0x8000, 0, false, 100, &mut c);
        assert_eq!((r.source, r.stall_cycles), (ServedBy::Remote, 240));
        // chips 0 and 5 hold it; chip 1 is served by chip 0, its node's copy
        let r = m.data_access(near, 1, 0x8000, 0, false, 200, &mut c);
        assert_eq!((r.source, r.stall_cycles), (ServedBy::Remote, 160));
        // a store on chip 0 must invalidate chip 5's copy too: it waits for the far one
        let up = m.data_access(a, 1, 0x8000, 0, true, 300, &mut c);
        assert_eq!((up.source, up.stall_cycles), (ServedBy::Remote, 240));
        // with chip 0 the only holder, chip 1 is served near and a store there
        // invalidates only near copies
        let r = m.data_access(near, 1, 0x8000, 0, false, 400, &mut c);
        assert_eq!(r.stall_cycles, 160);
        let up = m.data_access(near, 1, 0x8000, 0, true, 500, &mut c);
        assert_eq!(up.stall_cycles, 160);
        assert_eq!(c.remote_accesses, 5);
    }

    #[test]
    fn bus_queues_back_to_back_misses() {
        let (mut m, _) = sys("t1-dual");
        let mut c = Counters::default();
        let mut stalls = Vec::new();
        for i in 0..20u64 {
            stalls.push(
                m.data_access(0, 1, 0x100_0000 + i * 4096, 0, false, 0, &mut c)
                    .stall_cycles,
            );
        }
        assert!(stalls[19] > stalls[0] + 100, "{stalls:?}");
        assert_eq!(m.bus.transfers, 20);
    }

    /// Total stall cycles, L1D misses and prefetch counts of `n` loads by one
    /// instruction on CPU 0 of clovertown-2x2, `step(i)` giving the i-th address, one
    /// load every 10 cycles, with or without the preset's prefetchers.
    fn stream_cost(
        prefetch: bool,
        n: u64,
        step: impl Fn(u64) -> u64,
    ) -> (u64, u64, PrefetchStats, u64) {
        let mut mc = MachineConfig::preset("clovertown-2x2").unwrap();
        if !prefetch {
            mc.prefetch = PrefetchConfig::default();
        }
        let t = mc.topology().unwrap();
        let mut m = MemorySystem::new(&mc, &t).unwrap();
        let mut c = Counters::default();
        let mut now = 0;
        let mut stall = 0;
        for i in 0..n {
            let a = m.data_access(0, 1, step(i), 0x400, false, now, &mut c);
            stall += a.stall_cycles as u64;
            now += 10 + a.stall_cycles as u64;
        }
        (stall, c.l1d_misses, m.prefetches, m.bus.transfers)
    }

    /// A sequential scan: the prefetchers turn nearly every L1D miss into a hit and
    /// hide most of the memory latency (the streamer runs up to 20 lines ahead), each
    /// line crossing the bus once; random loads get almost nothing from them.
    #[test]
    fn prefetchers_hide_a_sequential_scan_not_random_loads() {
        let seq = |i: u64| 0x100_0000 + i * 64;
        let (s_off, m_off, _, b_off) = stream_cost(false, 20_000, seq);
        let (s_on, m_on, p, b_on) = stream_cost(true, 20_000, seq);
        assert!(
            m_on * 20 < m_off,
            "L1D misses {m_on} with prefetching, {m_off} without"
        );
        assert!(
            s_on * 4 < s_off,
            "stall {s_on} with prefetching, {s_off} without, {p:?}"
        );
        // one L1 and one L2 prefetch per line, each line over the bus once
        assert!(p.useful + p.late > 18_000 && p.issued < 41_000, "{p:?}");
        assert!(b_on <= b_off + 100, "bus transfers {b_on} vs {b_off}");
        // random lines over 256 MB: nearly every prefetch is wasted
        let rnd = |i: u64| 0x100_0000 + (crate::trace::mrc::hash64(i) % (1 << 22)) * 64;
        let (r_off, _, _, _) = stream_cost(false, 20_000, rnd);
        let (r_on, _, p, _) = stream_cost(true, 20_000, rnd);
        assert!(r_on as f64 > 0.95 * r_off as f64, "{r_on} vs {r_off}");
        assert!(p.useful + p.late <= p.issued / 20, "{p:?}");
    }

    /// Intel's first-level next-line prefetcher is "triggered by load operations": on
    /// clovertown a load that ascends within the line of the previous load fetches the
    /// next line, a store doing the same fetches nothing; with `next_line_on_stores`
    /// (the POWER5 presets) stores train it as loads do. Pairs of accesses to the
    /// first and second word of 1,000 random lines; fails if stores train Intel's
    /// prefetcher or loads stop training it.
    #[test]
    fn intel_next_line_prefetcher_is_trained_by_loads_only() {
        let issued = |write: bool, on_stores: bool| {
            let mut mc = MachineConfig::preset("clovertown-2x2").unwrap();
            mc.prefetch = PrefetchConfig {
                l1_next_line: true,
                next_line_on_stores: on_stores,
                ..PrefetchConfig::default()
            };
            let t = mc.topology().unwrap();
            let mut m = MemorySystem::new(&mc, &t).unwrap();
            let mut c = Counters::default();
            let mut now = 0;
            for i in 0..1000 {
                let line = 0x100_0000 + (crate::trace::mrc::hash64(i) % (1 << 22)) * 64;
                for a in [line, line + 8] {
                    let o = m.data_access(0, 1, a, 0x400, write, now, &mut c);
                    now += 10 + o.stall_cycles as u64;
                }
            }
            m.prefetches.issued
        };
        // the last line of a page (1 in 64) has no next line to fetch
        assert!(issued(false, false) > 950, "{}", issued(false, false));
        assert_eq!(issued(true, false), 0);
        assert_eq!(issued(true, true), issued(false, false));
        assert!(
            MachineConfig::preset("power5-2x2x2")
                .unwrap()
                .prefetch
                .next_line_on_stores
        );
    }

    /// The LLC's fills are counted with those the L2 streamer made among them: on a
    /// sequential scan of clovertown's shared L2 the streamer, running ahead, makes most
    /// of them; with the streamer off, none. Fails if streamer fills are not counted,
    /// or counted for fills it did not make.
    #[test]
    fn llc_fills_count_the_streamers_among_them() {
        let fills = |streamer: bool| {
            let mut mc = MachineConfig::preset("clovertown-2x2").unwrap();
            mc.prefetch.l2_streamer = streamer;
            let t = mc.topology().unwrap();
            let mut m = MemorySystem::new(&mc, &t).unwrap();
            let mut c = Counters::default();
            let mut now = 0;
            for i in 0..20_000 {
                let o = m.data_access(0, 1, 0x100_0000 + i * 64, 0x400, false, now, &mut c);
                now += 10 + o.stall_cycles as u64;
            }
            m.llc_fills(0)
        };
        let (all, streamer) = fills(true);
        assert!((20_000..20_200).contains(&all), "{all}");
        assert!(
            streamer > all * 3 / 4 && streamer <= all,
            "{streamer} of {all}"
        );
        let (all, streamer) = fills(false);
        assert!((20_000..20_200).contains(&all), "{all}");
        assert_eq!(streamer, 0);
    }

    /// The T1's L1D is write-through, no-write-allocate: a store that misses leaves
    /// the L1D as it was and is performed in the L2 (whose line becomes dirty); a store
    /// that hits keeps the L1D line clean and still waits for the L2. A write-back
    /// L1D (clovertown) allocates and dirties the line instead.
    #[test]
    fn t1_l1d_is_write_through_no_write_allocate() {
        let (mut m, _) = sys("t1-dual");
        let (l1d, l2) = (1, 2);
        let mut c = Counters::default();
        let line = |a: u64| a >> 4;
        let st = m.data_access(0, 1, 0x2_0000, 0, true, 0, &mut c);
        assert_eq!((c.l1d_refs, c.l1d_misses), (1, 1));
        assert_eq!(st.source, ServedBy::Dram);
        assert!(!m.cache(l1d, 0).contains(line(0x2_0000)));
        assert_eq!(
            m.cache(l2, 0).flags(0x2_0000 >> 6).map(|f| f & DIRTY),
            Some(DIRTY)
        );
        // a load allocates; a store hitting it keeps it clean and goes to the L2
        let ld = m.data_access(0, 1, 0x2_0000, 0, false, 1000, &mut c);
        assert_eq!(ld.source, ServedBy::L2);
        let st = m.data_access(0, 1, 0x2_0008, 0, true, 2000, &mut c);
        assert_eq!((st.source, st.stall_cycles), (ServedBy::L2, 23));
        assert_eq!(
            m.cache(l1d, 0).flags(line(0x2_0000)).map(|f| f & DIRTY),
            Some(0)
        );
        assert_eq!((c.l1d_refs, c.l1d_misses), (3, 2));
        // write-back, write-allocate
        let (mut w, _) = sys("clovertown-2x2");
        let mut c = Counters::default();
        w.data_access(0, 1, 0x3_0000, 0, true, 0, &mut c);
        let f = w.cache(1, 0).flags(0x3_0000 >> 6);
        assert_eq!(f.map(|f| f & DIRTY), Some(DIRTY));
    }

    /// t1-dual's L2 has four banks, lines interleaved, each taking one request per
    /// cycle: eight simultaneous L2 hits to one bank queue 0..7 cycles, to four banks
    /// 0 or 1.
    #[test]
    fn l2_banks_queue_simultaneous_requests() {
        let waits = |stride: u64| {
            let (mut m, _) = sys("t1-dual");
            let mut c = Counters::default();
            for i in 0..8 {
                m.data_access(0, 1, 0x4_0000 + i * stride, 0, false, 10 * i, &mut c);
            }
            let t = 10_000;
            (0..8)
                .map(|i| m.data_access(1, 2, 0x4_0000 + i * stride, 0, false, t, &mut c))
                .map(|a| {
                    assert_eq!(a.source, ServedBy::L2);
                    a.stall_cycles - 23
                })
                .collect::<Vec<u32>>()
        };
        assert_eq!(waits(4 * 64), (0..8).collect::<Vec<u32>>());
        assert_eq!(waits(64), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    }
}
