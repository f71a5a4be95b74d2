//! Core timing: how a hardware context turns its thread's operations into time.
//!
//! A thread's operations are *chunks*: `gap` non-memory instructions, then one memory
//! instruction. A context alternates two phases, each taking place at the context's
//! ready time, which is always the engine's current time — so every request reaches
//! the shared caches and the memory bus in simulated-time order:
//!
//! - **Issue.** First the context waits for every outstanding miss that is a full
//!   window (`rob_entries` instructions) older than the chunk's last instruction: the
//!   reorder buffer cannot hold more, and the front end stops with it. Then, if the
//!   chunk's code lies in a new instruction-cache line, the line is fetched and the
//!   context waits for it (a fetch miss is never overlapped: the front end has nothing
//!   to dispatch). Then the chunk's instructions are dispatched. The core dispatches at
//!   most `issue_width` instructions per cycle, shared by its contexts (booked in order
//!   of request), and a thread no faster than its own rate: its base CPI on an
//!   in-order core, or `max(1 / width, 1 / ilp)` on an out-of-order one. The context is
//!   ready again when its memory instruction reaches the memory system.
//! - **Access.** The memory instruction accesses the hierarchy. A load that misses the
//!   L1 occupies one of `load_misses` miss registers until its data returns; it stalls
//!   nothing by itself — later chunks stall only when the window above is full (or no
//!   miss register is free). A *dependent* load (pointer chasing: its address comes
//!   from the previous dependent load) waits for that load's data first. A store goes
//!   to the store buffer, which commits in order (`serial_stores`: one store in flight
//!   at a time, as the UltraSPARC T1 waits for each store's L2 acknowledgement); a full
//!   buffer stalls the context.
//!
//! An in-order core is the special case of a one-instruction window and one miss
//! register: a load miss stalls its context until the data returns, while the core's
//! other contexts keep the pipeline busy (fine-grained multithreading hides L1 misses,
//! not DRAM latency). This is the first-order interval model of out-of-order cores
//! (Karkhanis & Smith, ISCA 2004; Genbrugge, Eyerman & Eeckhout, HPCA 2010): steady
//! dispatch between miss events, serialising instruction-fetch misses, and long data
//! misses that overlap when they fall within one window of each other.
//!
//! Every cycle a context waits is charged to what it waited for: data or instruction
//! fetches served by an L2, an L3, another chip's cache or DRAM, or the store buffer.

use crate::hw::machine::CoreModel;
use crate::hw::memory::ServedBy;
use cachesched_core::Counters;
use std::collections::VecDeque;

/// What a context does at its next ready time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Fetch (if needed) and dispatch the next chunk.
    Issue,
    /// Perform the pending memory access.
    Access,
}

/// The timing parameters of a core, resolved from its [`CoreModel`].
#[derive(Debug, Clone, Copy)]
pub struct CoreTiming {
    /// Instructions dispatched per cycle by the whole core.
    pub width: u64,
    /// log2 of `width` when it is a power of two (then [`CoreTiming::slot_cycle`]
    /// shifts instead of dividing).
    width_log2: Option<u32>,
    /// Out-of-order: thread rates come from `ilp`, not the in-order base CPI.
    pub out_of_order: bool,
    /// Instructions in flight behind an outstanding miss (1 for in-order cores).
    pub window: u64,
    /// Outstanding L1 data-load misses per context.
    pub load_misses: usize,
    /// Store-buffer entries per context.
    pub store_buffer: usize,
    /// One store in flight at a time.
    pub serial_stores: bool,
}

impl CoreTiming {
    /// The timing of `core` with `store_buffer` entries per context.
    pub fn new(core: &CoreModel, store_buffer: u32) -> CoreTiming {
        let ooo = core.out_of_order;
        CoreTiming {
            width: core.issue_width as u64,
            width_log2: (core.issue_width as u64)
                .is_power_of_two()
                .then(|| core.issue_width.trailing_zeros()),
            out_of_order: ooo,
            window: if ooo { core.rob_entries as u64 } else { 1 },
            load_misses: if ooo { core.load_misses as usize } else { 1 },
            store_buffer: store_buffer as usize,
            serial_stores: core.serial_stores,
        }
    }

    /// The cycle by which dispatch slot `slot` (cycle × width + position) has gone:
    /// `slot.div_ceil(width)`, with a shift where the width allows (a 64-bit division
    /// costs tens of cycles, on every chunk dispatched).
    #[inline(always)]
    pub fn slot_cycle(&self, slot: u64) -> u64 {
        match self.width_log2 {
            Some(s) => (slot >> s) + u64::from(slot & ((1 << s) - 1) != 0),
            None => slot.div_ceil(self.width),
        }
    }

    /// Cycles per instruction of a thread's non-memory work on this core.
    pub fn thread_cpi(&self, base_cpi: f64, ilp: f64) -> f64 {
        if self.out_of_order {
            (1.0 / self.width as f64).max(1.0 / ilp)
        } else {
            base_cpi
        }
    }
}

/// A load miss in flight.
#[derive(Debug, Clone, Copy)]
pub struct Miss {
    /// Index of the memory instruction in the thread's instruction stream.
    pub instr: u64,
    /// Cycle at which its data returns.
    pub done: u64,
    /// Where it is served.
    pub source: ServedBy,
}

/// Per-thread timing state (it travels with the thread across context switches).
#[derive(Debug, Clone)]
pub struct ContextState {
    /// What happens at the next ready time.
    pub phase: Phase,
    /// The pending access (valid in [`Phase::Access`]): address, store, dependent.
    pub addr: u64,
    /// The pending access is a store.
    pub write: bool,
    /// The pending access depends on the previous dependent load.
    pub dependent: bool,
    /// Address of the pending access's instruction (for the IP-stride prefetcher).
    pub pc: u64,
    /// The instruction-cache line of the last fetch (`u64::MAX`: none since the thread
    /// was last switched in).
    pub last_pc_line: u64,
    /// Instructions dispatched so far.
    pub instr: u64,
    /// Load misses in flight, oldest first.
    pub misses: VecDeque<Miss>,
    /// The last dependent load, while its data has not returned.
    pub chain: Option<Miss>,
    /// Commit times of the stores in the store buffer, oldest first.
    pub stores: VecDeque<u64>,
}

impl Default for ContextState {
    fn default() -> Self {
        ContextState {
            phase: Phase::Issue,
            addr: 0,
            write: false,
            dependent: false,
            pc: 0,
            last_pc_line: u64::MAX,
            instr: 0,
            misses: VecDeque::new(),
            chain: None,
            stores: VecDeque::new(),
        }
    }
}

/// Charges `cycles` of waiting on `source` to `ctr` (instruction fetches when `fetch`).
#[inline]
pub fn charge_stall(ctr: &mut Counters, source: ServedBy, fetch: bool, cycles: u64) {
    if cycles == 0 {
        return;
    }
    ctr.mem_stall_cycles += cycles;
    let c = match (fetch, source) {
        (false, ServedBy::L1 | ServedBy::L2) => &mut ctr.data_stall_l2_cycles,
        (false, ServedBy::L3) => &mut ctr.data_stall_l3_cycles,
        (false, ServedBy::Remote) => &mut ctr.data_stall_remote_cycles,
        (false, ServedBy::Dram) => &mut ctr.data_stall_dram_cycles,
        (true, ServedBy::L1 | ServedBy::L2 | ServedBy::Remote) => &mut ctr.instr_stall_l2_cycles,
        (true, ServedBy::L3) => &mut ctr.instr_stall_l3_cycles,
        (true, ServedBy::Dram) => &mut ctr.instr_stall_dram_cycles,
    };
    *c += cycles;
}

impl ContextState {
    /// Before dispatching a chunk whose last instruction has index `last` at cycle
    /// `now`: the cycle until which the window is full (`now` if it is not), charging
    /// the wait to the miss that ends it.
    #[inline]
    pub fn window_wait(&mut self, t: &CoreTiming, last: u64, now: u64, ctr: &mut Counters) -> u64 {
        match self.misses.front() {
            None => return now,
            // misses are in instruction order: none is a window old yet
            Some(m) if m.instr + t.window > last => return now,
            _ => {}
        }
        let mut until = now;
        let mut source = ServedBy::L1;
        self.misses.retain(|m| {
            if m.done <= now {
                return false;
            }
            if m.instr + t.window <= last {
                if m.done > until {
                    until = m.done;
                    source = m.source;
                }
                return false;
            }
            true
        });
        charge_stall(ctr, source, false, until - now);
        until
    }

    /// Before a load that will miss the L1 at `now`: the cycle at which a miss register
    /// is free, charging the wait.
    #[inline]
    pub fn miss_register_wait(&mut self, t: &CoreTiming, now: u64, ctr: &mut Counters) -> u64 {
        self.misses.retain(|m| m.done > now);
        if self.misses.len() < t.load_misses {
            return now;
        }
        let first = self
            .misses
            .iter()
            .min_by_key(|m| m.done)
            .copied()
            .expect("registers are in use");
        charge_stall(ctr, first.source, false, first.done - now);
        first.done
    }

    /// Before a dependent load at `now`: the cycle at which its address is known.
    #[inline]
    pub fn chain_wait(&mut self, now: u64, ctr: &mut Counters) -> u64 {
        match self.chain.take() {
            Some(m) if m.done > now => {
                charge_stall(ctr, m.source, false, m.done - now);
                m.done
            }
            _ => now,
        }
    }

    /// Before a store at `now`: the cycle at which the store buffer has a free entry.
    #[inline]
    pub fn store_buffer_wait(&mut self, t: &CoreTiming, now: u64, ctr: &mut Counters) -> u64 {
        while self.stores.front().is_some_and(|&d| d <= now) {
            self.stores.pop_front();
        }
        if self.stores.len() < t.store_buffer {
            return now;
        }
        let d = self.stores[0];
        ctr.store_buffer_stall_cycles += d - now;
        d
    }

    /// A store accessed the hierarchy at `now` and completes `latency` cycles later
    /// (after the stores ahead of it when they are serialised).
    #[inline]
    pub fn store(&mut self, t: &CoreTiming, now: u64, latency: u64) {
        let last = self.stores.back().copied().unwrap_or(0);
        let done = if t.serial_stores {
            now.max(last) + latency
        } else {
            (now + latency).max(last)
        };
        if done > now {
            self.stores.push_back(done);
        }
    }

    /// A load accessed the hierarchy at `now`, served by `source` `latency` cycles
    /// beyond an L1 hit.
    #[inline]
    pub fn load(&mut self, now: u64, latency: u64, source: ServedBy) {
        if latency == 0 {
            if self.dependent {
                self.chain = None;
            }
            return;
        }
        let m = Miss {
            instr: self.instr - 1,
            done: now + latency,
            source,
        };
        self.misses.push_back(m);
        if self.dependent {
            self.chain = Some(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::machine::CoreKind;

    fn ooo() -> CoreTiming {
        CoreTiming::new(
            &CoreModel {
                kind: CoreKind::Single,
                issue_width: 4,
                out_of_order: true,
                rob_entries: 96,
                load_misses: 8,
                serial_stores: false,
            },
            8,
        )
    }

    #[test]
    fn in_order_waits_for_every_miss_out_of_order_only_for_a_full_window() {
        let inorder = CoreModel {
            kind: CoreKind::Single,
            issue_width: 1,
            out_of_order: false,
            rob_entries: 96,
            load_misses: 8,
            serial_stores: false,
        };
        let io = CoreTiming::new(&inorder, 8);
        assert_eq!((io.window, io.load_misses), (1, 1));
        let mut c = Counters::default();
        let mut s = ContextState {
            instr: 10,
            ..Default::default()
        };
        s.load(100, 200, ServedBy::Dram);
        // the very next chunk waits for the data
        assert_eq!(s.window_wait(&io, 13, 100, &mut c), 300);
        assert_eq!(c.data_stall_dram_cycles, 200);
        assert_eq!(c.mem_stall_cycles, 200);
        // an out-of-order core keeps dispatching until the window is full
        let o = ooo();
        let mut s = ContextState {
            instr: 10,
            ..Default::default()
        };
        s.load(100, 200, ServedBy::Dram);
        let mut c = Counters::default();
        assert_eq!(s.window_wait(&o, 50, 100, &mut c), 100);
        // a second miss 40 instructions later overlaps the first
        s.instr = 50;
        s.load(120, 200, ServedBy::Dram);
        assert_eq!(
            s.window_wait(&o, 104, 140, &mut c),
            140,
            "not yet a window apart"
        );
        assert_eq!(
            s.window_wait(&o, 105, 140, &mut c),
            300,
            "first miss blocks"
        );
        assert_eq!(s.window_wait(&o, 145, 300, &mut c), 320, "then the second");
        assert_eq!(c.data_stall_dram_cycles, 160 + 20);
    }

    #[test]
    fn slot_cycle_is_div_ceil_for_every_width() {
        for width in 1..=8 {
            let t = CoreTiming::new(
                &CoreModel {
                    issue_width: width,
                    ..CoreModel {
                        kind: CoreKind::Single,
                        issue_width: 1,
                        out_of_order: true,
                        rob_entries: 96,
                        load_misses: 8,
                        serial_stores: false,
                    }
                },
                8,
            );
            for slot in (0..2000).chain([u64::MAX / 2, u64::MAX - 7]) {
                assert_eq!(
                    t.slot_cycle(slot),
                    slot.div_ceil(width as u64),
                    "{width} {slot}"
                );
            }
        }
    }

    #[test]
    fn miss_registers_chains_and_store_buffers() {
        let o = ooo();
        let mut c = Counters::default();
        let mut s = ContextState::default();
        for i in 0..8 {
            s.instr = i + 1;
            s.load(10 * i, 100, ServedBy::L3);
        }
        // eight in flight: the ninth waits for the first to return
        assert_eq!(s.miss_register_wait(&o, 75, &mut c), 100);
        assert_eq!(c.data_stall_l3_cycles, 25);
        // a dependent load waits for its predecessor's data
        s.dependent = true;
        s.instr = 20;
        s.load(200, 50, ServedBy::L2);
        assert_eq!(s.chain_wait(210, &mut c), 250);
        assert_eq!(s.chain_wait(210, &mut c), 210, "consumed");
        // serial stores complete one after another; a full buffer stalls
        let t1 = CoreTiming {
            serial_stores: true,
            store_buffer: 2,
            ..o
        };
        let mut s = ContextState::default();
        s.store(&t1, 0, 23);
        s.store(&t1, 1, 23);
        assert_eq!(s.stores, [23, 46]);
        assert_eq!(s.store_buffer_wait(&t1, 5, &mut c), 23);
        assert_eq!(c.store_buffer_stall_cycles, 18);
        assert_eq!(s.store_buffer_wait(&t1, 30, &mut c), 30);
        // parallel stores commit in order but overlap
        let mut s = ContextState::default();
        s.store(&o, 0, 100);
        s.store(&o, 1, 10);
        assert_eq!(s.stores, [100, 100]);
        s.store(&o, 200, 0);
        assert_eq!(
            s.stores,
            [100, 100],
            "an L1 hit with nothing ahead commits at once"
        );
    }
}
