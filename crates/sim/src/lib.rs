//! The simulated machine: caches, coherence, memory bus, core timing, PMU counters, an
//! OS kernel with baseline scheduling classes, workloads and the discrete-event engine.
//! Deterministic: one seed drives everything.

pub mod cache;
pub mod machine;
pub mod memory;
pub mod replay;
