//! Core vocabulary of cachesched: typed identifiers and units, CPU masks, machine
//! topology, performance counters, the seeded random number generator and the
//! [`Policy`] trait through which every scheduler talks to a kernel (simulated or real).
//!
//! Nothing in this crate performs I/O or reads a clock: it is shared verbatim by the
//! simulator and the Linux backend.

pub mod counters;
pub mod cpumask;
pub mod hash;
pub mod num;
pub mod policy;
pub mod policy_stats;
pub mod rng;
pub mod stats;
pub mod topology;
pub mod types;

pub use counters::{CounterKind, Counters};
pub use cpumask::Cpumask;
pub use policy::{
    AddressSample, CoRunMember, CoRunSegment, Ctx, Directive, Policy, ThreadClass, ThreadInfo,
    ThreadView,
};
pub use rng::SimRng;
pub use topology::{CacheKind, CacheLevel, CacheScope, CpuInfo, Topology, TopologyError};
pub use types::{Addr, CpuId, Cycles, Nanos, ThreadId};
