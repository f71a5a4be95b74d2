//! The memory system of a simulated machine: every cache instance, the path from each
//! hardware context through its cache levels, coherence, and the memory bus.
//!
//! - **Hierarchy.** A data access walks the data/unified levels innermost first and
//!   stops at the first hit; every level it missed is filled (write-allocate, neither
//!   inclusive nor exclusive). An instruction fetch walks the instruction/unified levels.
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

use crate::hw::cache::{Cache, CacheGeometry, CORE_EXCLUSIVE, DIRTY, EXCLUSIVE};
use crate::hw::machine::{MachineConfig, MachineError};
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
type Targets = Vec<Vec<(usize, usize)>>;

#[derive(Debug, Clone, Copy)]
struct PathLevel {
    /// Index of the level in the topology's cache list.
    level: usize,
    /// What serves an access that hits here.
    source: ServedBy,
    instance: usize,
    shift: u32,
    latency: u32,
    private: bool,
    counts_l2: bool,
    counts_llc: bool,
}

/// All caches, paths, coherence state and the bus. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct MemorySystem {
    caches: Vec<Vec<Cache>>,
    shifts: Vec<u32>,
    dpath: Vec<Vec<PathLevel>>,
    ipath: Vec<Vec<PathLevel>>,
    /// Per CPU: other cores' private data caches on the same chip.
    siblings: Targets,
    /// Per CPU: data caches on other chips.
    remote: Targets,
    coherent: bool,
    /// Index of the last-level data cache in the topology's list.
    llc: Option<usize>,
    mem_latency: u32,
    remote_latency: u32,
    transfer_cycles: f64,
    bus_free: f64,
    /// The bus's statistics so far.
    pub bus: BusStats,
    /// Number of invalidations sent to other caches.
    pub invalidations: u64,
}

impl MemorySystem {
    /// Builds cold caches for `machine` with topology `topo`.
    pub fn new(machine: &MachineConfig, topo: &Topology) -> Result<MemorySystem, MachineError> {
        let mut caches = Vec::new();
        let mut shifts = Vec::new();
        for l in &topo.caches {
            let g = CacheGeometry {
                size_bytes: l.size_bytes,
                ways: l.ways,
                line_bytes: l.line_bytes,
            };
            let mut v = Vec::new();
            for _ in &l.instances {
                v.push(Cache::new(g).map_err(|e| MachineError::Invalid {
                    name: machine.name.clone(),
                    reason: e.to_string(),
                })?);
            }
            caches.push(v);
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
        let mut dpath = Vec::new();
        let mut ipath = Vec::new();
        let mut siblings = Vec::new();
        let mut remote = Vec::new();
        for cpu in &topo.cpus {
            let mk = |want: &dyn Fn(CacheKind) -> bool| -> Vec<PathLevel> {
                let mut p: Vec<PathLevel> = topo
                    .caches
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| want(l.kind))
                    .map(|(i, l)| PathLevel {
                        level: i,
                        source: match l.level {
                            0 | 1 => ServedBy::L1,
                            2 => ServedBy::L2,
                            _ => ServedBy::L3,
                        },
                        instance: topo.cache_instance(i, cpu.id),
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
                        Some(ch) if ch != cpu.chip => rem.push((i, inst)),
                        Some(_) if matches!(l.scope, CacheScope::Context | CacheScope::Core) => {
                            sib.push((i, inst))
                        }
                        _ => {}
                    }
                }
            }
            siblings.push(sib);
            remote.push(rem);
        }
        let coherent = siblings.iter().chain(remote.iter()).any(|v| !v.is_empty());
        let line = topo.llc().map(|i| topo.caches[i].line_bytes).unwrap_or(64) as f64;
        Ok(MemorySystem {
            llc,
            caches,
            shifts,
            dpath,
            ipath,
            siblings,
            remote,
            coherent,
            mem_latency: machine.memory.latency_cycles,
            remote_latency: machine.memory.remote_latency_cycles,
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
        &self.caches[level][instance]
    }

    /// Empties every cache.
    pub fn flush(&mut self) {
        self.caches.iter_mut().flatten().for_each(Cache::flush);
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
        (start - now as f64 + self.transfer_cycles).ceil() as u32
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
            let (l, inst) = targets_of(self)[cpu][k];
            let block = addr >> self.shifts[l];
            let c = &mut self.caches[l][inst];
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
        if let Some(ev) = self.caches[pl.level][pl.instance].fill(block, owner, flags) {
            if ev.flags & DIRTY != 0 {
                let ev_addr = ev.block << pl.shift;
                let kept = outer.is_some_and(|o| {
                    self.caches[o.level][o.instance].update_flags(ev_addr >> o.shift, DIRTY, 0)
                });
                if !kept {
                    self.bus_transfer(now);
                }
            }
        }
    }

    /// A data access by `owner` on `cpu` at cycle `now`; updates `ctr` (references and
    /// misses per level, remote accesses).
    #[inline]
    pub fn data_access(
        &mut self,
        cpu: usize,
        owner: u32,
        addr: u64,
        write: bool,
        now: u64,
        ctr: &mut Counters,
    ) -> AccessOutcome {
        let npath = self.dpath[cpu].len();
        let wflag = if write { DIRTY } else { 0 };
        let mut hit: Option<(usize, u8)> = None;
        for i in 0..npath {
            let pl = self.dpath[cpu][i];
            if i == 0 {
                ctr.l1d_refs += 1;
            }
            ctr.l2_refs += pl.counts_l2 as u64;
            ctr.llc_refs += pl.counts_llc as u64;
            if let Some(f) = self.caches[pl.level][pl.instance].lookup(addr >> pl.shift, wflag) {
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
                let found = self.probe(|m| &m.remote, cpu, addr, write, EXCLUSIVE);
                if found {
                    source = ServedBy::Remote;
                    stall = self.remote_latency;
                    ctr.remote_accesses += 1;
                }
                if write || !found {
                    excl |= EXCLUSIVE;
                }
            } else if write && excl & EXCLUSIVE == 0 {
                // an upgrade: the copies on other chips are invalidated across the
                // interconnect before the store completes
                if self.probe(|m| &m.remote, cpu, addr, true, EXCLUSIVE) {
                    stall += self.remote_latency;
                    source = ServedBy::Remote;
                    ctr.remote_accesses += 1;
                }
                excl |= EXCLUSIVE;
            }
        }
        if source == ServedBy::Dram {
            stall = self.mem_latency + self.bus_transfer(now);
        }
        for i in (0..fill_upto).rev() {
            self.fill(cpu, i, owner, addr, excl | wflag, true, now);
        }
        if let Some((k, f)) = hit {
            if self.coherent && f & both != excl {
                let pl = self.dpath[cpu][k];
                self.caches[pl.level][pl.instance].update_flags(
                    addr >> pl.shift,
                    excl,
                    both & !excl,
                );
            }
        }
        AccessOutcome {
            stall_cycles: stall,
            source,
        }
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
        for i in 0..npath {
            let pl = self.ipath[cpu][i];
            if i == 0 {
                ctr.l1i_refs += 1;
            }
            ctr.l2_refs += pl.counts_l2 as u64;
            ctr.llc_refs += pl.counts_llc as u64;
            if self.caches[pl.level][pl.instance]
                .lookup(addr >> pl.shift, 0)
                .is_some()
            {
                for j in (0..i).rev() {
                    self.fill(cpu, j, owner, addr, 0, false, now);
                }
                return AccessOutcome {
                    stall_cycles: if i == 0 { 0 } else { pl.latency },
                    source: pl.source,
                };
            }
            if i == 0 {
                ctr.l1i_misses += 1;
            }
            ctr.l2_misses += pl.counts_l2 as u64;
            ctr.llc_misses += pl.counts_llc as u64;
        }
        let stall = self.mem_latency + self.bus_transfer(now);
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
        let ways = self.caches[l][0].geometry().ways as usize;
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
        for c in &mut self.caches[l] {
            c.set_partition(&parts).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Puts `owner`'s fills of the last-level cache instance `instance` into partition
    /// class `class`.
    pub fn set_llc_class(&mut self, instance: usize, owner: u32, class: u16) {
        if let Some(l) = self.llc {
            self.caches[l][instance].set_owner_class(owner, class);
        }
    }

    /// Whether `cpu`'s first-level data cache holds the line of `addr` (no LRU update):
    /// whether a load there would hit.
    #[inline]
    pub fn l1d_holds(&self, cpu: usize, addr: u64) -> bool {
        let pl = self.dpath[cpu][0];
        self.caches[pl.level][pl.instance].contains(addr >> pl.shift)
    }

    /// Bytes of cache instance (`level`, `instance`) owned by thread `owner`.
    pub fn occupancy_bytes(&self, level: usize, instance: usize, owner: u32) -> u64 {
        self.caches[level][instance].occupancy_bytes(owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::machine::MachineConfig;

    fn sys(name: &str) -> (MemorySystem, Topology) {
        let m = MachineConfig::preset(name).unwrap();
        let t = m.topology().unwrap();
        (MemorySystem::new(&m, &t).unwrap(), t)
    }

    #[test]
    fn hits_after_fill_and_l2_serves_l1_misses() {
        let (mut m, _) = sys("t1-dual");
        let mut c = Counters::default();
        let a = m.data_access(0, 1, 0x10_000, false, 0, &mut c);
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
        let b = m.data_access(0, 1, 0x10_004, false, 1000, &mut c);
        assert_eq!(
            b,
            AccessOutcome {
                stall_cycles: 0,
                source: ServedBy::L1
            }
        );
        // the other core misses its L1 but hits the shared L2
        let d = m.data_access(1, 2, 0x10_000, false, 2000, &mut c);
        assert_eq!(d.source, ServedBy::L2);
        assert_eq!(d.stall_cycles, 23);
    }

    #[test]
    fn writes_invalidate_other_cores_private_copies() {
        let (mut m, _) = sys("t1-dual");
        let mut c = Counters::default();
        m.data_access(0, 1, 0x4000, false, 0, &mut c);
        m.data_access(1, 2, 0x4000, false, 0, &mut c);
        assert!(m.cache(1, 1).contains(0x4000 >> 4));
        m.data_access(0, 1, 0x4000, true, 0, &mut c);
        assert!(
            !m.cache(1, 1).contains(0x4000 >> 4),
            "core 1's L1D copy must be invalidated"
        );
        // core 1 reads again: L1 miss, served by the shared L2
        let r = m.data_access(1, 2, 0x4000, false, 0, &mut c);
        assert_eq!(r.source, ServedBy::L2);
    }

    #[test]
    fn cross_chip_sharing_is_remote_and_counted() {
        let (mut m, t) = sys("power5-2x2x2");
        let far = t.chip_cpus(1).first().unwrap().index();
        let mut c0 = Counters::default();
        let mut c1 = Counters::default();
        m.data_access(0, 1, 0x8000, true, 0, &mut c0);
        let r = m.data_access(far, 2, 0x8000, false, 100, &mut c1);
        assert_eq!(r.source, ServedBy::Remote);
        assert_eq!(r.stall_cycles, 160);
        assert_eq!(c1.remote_accesses, 1);
        // chip 1 now holds a shared copy; a write there invalidates chip 0's copies: an
        // upgrade across chips, counted and timed as remote
        let up = m.data_access(far, 2, 0x8000, true, 200, &mut c1);
        assert_eq!(up.source, ServedBy::Remote);
        assert_eq!(
            up.stall_cycles, 160,
            "an L1 hit, then the remote invalidation"
        );
        assert_eq!(c1.remote_accesses, 2);
        // writing again finds the line exclusive: a plain local hit
        let again_w = m.data_access(far, 2, 0x8000, true, 250, &mut c1);
        assert_eq!(again_w.source, ServedBy::L1);
        assert_eq!(c1.remote_accesses, 2);
        let again = m.data_access(0, 1, 0x8000, false, 300, &mut c0);
        assert_eq!(again.source, ServedBy::Remote);
        assert_eq!(c0.remote_accesses, 1);
        assert!(m.invalidations >= 3);
        // a private line of chip 0 never goes remote
        let p = m.data_access(0, 1, 0x9_0000, false, 400, &mut c0);
        assert_eq!(p.source, ServedBy::Dram);
    }

    #[test]
    fn bus_queues_back_to_back_misses() {
        let (mut m, _) = sys("t1-dual");
        let mut c = Counters::default();
        let mut stalls = Vec::new();
        for i in 0..20u64 {
            stalls.push(
                m.data_access(0, 1, 0x100_0000 + i * 4096, false, 0, &mut c)
                    .stall_cycles,
            );
        }
        assert!(stalls[19] > stalls[0] + 100, "{stalls:?}");
        assert_eq!(m.bus.transfers, 20);
    }
}
