//! The simulated machine: caches, coherence, memory bus, core timing, PMU counters, an
//! OS kernel with baseline scheduling classes, workloads and the discrete-event engine.
//! Deterministic: one seed drives everything.

pub mod config;
pub mod engine;
pub mod fenwick;
pub mod hw;
pub mod kernel;
pub mod result;
pub mod trace;
pub mod workload;

pub use config::{
    Baseline, GroupAssignment, KernelConfig, MachineSpec, PagePlacement, Pin, SimConfig,
    ThreadGroup, TraceStart, WorkSegment,
};
pub use engine::{build_chain, simulate, simulate_with, SimError, Simulation};
pub use hw::machine::{MachineConfig, PAPER_MIXES, PRESETS};
pub use result::RunResult;
