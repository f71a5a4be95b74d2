//! Performance counters, per thread or per CPU.
//!
//! The same struct carries simulated PMU values and values read from Linux
//! `perf_event_open`. Which counters a backend can actually provide is a set of
//! [`CounterKind`]s; policies check it before relying on a counter.

use crate::num::ratio;
use serde::{Deserialize, Serialize};

macro_rules! counters {
    ($( $(#[$doc:meta])* $field:ident => $kind:ident ),* $(,)?) => {
        /// A set of event counts. Cumulative (since a thread started) or a delta,
        /// depending on where it comes from.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Counters {
            $( $(#[$doc])* pub $field: u64, )*
        }

        /// Names one counter of [`Counters`], e.g. to say which ones a backend provides.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum CounterKind {
            $( $(#[$doc])* $kind, )*
        }

        impl CounterKind {
            /// Every counter kind.
            pub const ALL: &'static [CounterKind] = &[$(CounterKind::$kind),*];

            /// The field name of this counter in [`Counters`].
            pub fn name(self) -> &'static str {
                match self { $(CounterKind::$kind => stringify!($field),)* }
            }
        }

        impl Counters {
            /// The value of one counter.
            pub fn get(&self, kind: CounterKind) -> u64 {
                match kind { $(CounterKind::$kind => self.$field,)* }
            }

            /// Mutable access to one counter.
            pub fn get_mut(&mut self, kind: CounterKind) -> &mut u64 {
                match kind { $(CounterKind::$kind => &mut self.$field,)* }
            }

            /// `self - earlier`, saturating at zero per counter.
            pub fn delta(&self, earlier: &Counters) -> Counters {
                Counters { $( $field: self.$field.saturating_sub(earlier.$field), )* }
            }

            /// Adds `other` into `self`.
            pub fn accumulate(&mut self, other: &Counters) {
                $( self.$field += other.$field; )*
            }
        }
    };
}

counters! {
    /// Instructions retired.
    instructions => Instructions,
    /// Core cycles while the thread was on a CPU (or the CPU was busy).
    cycles => Cycles,
    /// L1 data cache references.
    l1d_refs => L1dRefs,
    /// L1 data cache misses.
    l1d_misses => L1dMisses,
    /// L1 instruction cache references.
    l1i_refs => L1iRefs,
    /// L1 instruction cache misses.
    l1i_misses => L1iMisses,
    /// L2 references (L1 misses reaching the L2).
    l2_refs => L2Refs,
    /// L2 misses.
    l2_misses => L2Misses,
    /// Last-level cache references (equal to the L2's on two-level machines).
    llc_refs => LlcRefs,
    /// Last-level cache misses.
    llc_misses => LlcMisses,
    /// Cycles stalled waiting for data or instructions from beyond the L1 (the sum of
    /// the seven breakdown counters below; store-buffer stalls are separate).
    mem_stall_cycles => MemStallCycles,
    /// Cycles stalled waiting for data served by an L2 cache.
    data_stall_l2_cycles => DataStallL2Cycles,
    /// Cycles stalled waiting for data served by an L3 cache.
    data_stall_l3_cycles => DataStallL3Cycles,
    /// Cycles stalled waiting for data served by another chip's cache (including
    /// cross-chip upgrades of a shared line before a store).
    data_stall_remote_cycles => DataStallRemoteCycles,
    /// Cycles stalled waiting for data served by DRAM.
    data_stall_dram_cycles => DataStallDramCycles,
    /// Cycles stalled fetching instructions served by an L2 cache.
    instr_stall_l2_cycles => InstrStallL2Cycles,
    /// Cycles stalled fetching instructions served by an L3 cache.
    instr_stall_l3_cycles => InstrStallL3Cycles,
    /// Cycles stalled fetching instructions served by DRAM.
    instr_stall_dram_cycles => InstrStallDramCycles,
    /// Cycles stalled because the store buffer was full.
    store_buffer_stall_cycles => StoreBufferStallCycles,
    /// Accesses served by another chip's cache, and stores that had to invalidate a
    /// shared line on another chip.
    remote_accesses => RemoteAccesses,
    /// Context switches (the thread was switched out).
    context_switches => ContextSwitches,
    /// Migrations to another CPU.
    migrations => Migrations,
    /// Time on CPU in nanoseconds (task-clock).
    cpu_time_ns => CpuTimeNs,
}

impl Counters {
    /// Cycles per instruction (0 if no instruction retired).
    pub fn cpi(&self) -> f64 {
        ratio(self.cycles, self.instructions)
    }

    /// Instructions per cycle.
    pub fn ipc(&self) -> f64 {
        ratio(self.instructions, self.cycles)
    }

    /// L2 misses per L2 reference.
    pub fn l2_miss_ratio(&self) -> f64 {
        ratio(self.l2_misses, self.l2_refs)
    }

    /// LLC misses per LLC reference.
    pub fn llc_miss_ratio(&self) -> f64 {
        ratio(self.llc_misses, self.llc_refs)
    }

    /// L2 misses per 1000 instructions.
    pub fn l2_mpki(&self) -> f64 {
        1000.0 * ratio(self.l2_misses, self.instructions)
    }

    /// LLC misses per 1000 instructions.
    pub fn llc_mpki(&self) -> f64 {
        1000.0 * ratio(self.llc_misses, self.instructions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_accumulate_and_rates() {
        let a = Counters {
            instructions: 1000,
            cycles: 2500,
            l2_refs: 100,
            l2_misses: 25,
            ..Default::default()
        };
        let mut b = a;
        b.accumulate(&a);
        assert_eq!(b.delta(&a), a);
        assert_eq!(a.delta(&b).instructions, 0);
        assert_eq!(a.cpi(), 2.5);
        assert_eq!(a.l2_miss_ratio(), 0.25);
        assert_eq!(a.l2_mpki(), 25.0);
        assert_eq!(Counters::default().cpi(), 0.0);
        assert_eq!(a.get(CounterKind::L2Misses), 25);
        assert_eq!(CounterKind::L2Misses.name(), "l2_misses");
        assert_eq!(CounterKind::ALL.len(), 23);
    }
}
