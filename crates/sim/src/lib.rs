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
    Baseline, GroupAssignment, KernelConfig, MachineSpec, PagePlacement, Pin, QuantaStop,
    RangeError, SimConfig, ThreadGroup, TraceStart, WorkSegment,
};
pub use engine::{build_chain, simulate, simulate_with, SimError, Simulation};
pub use hw::machine::{MachineConfig, PAPER_MIXES, PRESETS};
pub use result::RunResult;

/// The version of the model: what the simulator computes, not its source text.
///
/// Every cached run is keyed by its configuration and this number (the run cache of the
/// command-line tool), so a refactoring or a speed-up that keeps every result keeps
/// every run already made, and a change that alters results must raise it. The golden
/// results (`crates/sim/tests/sim/golden.rs` and the reproductions' cases in
/// `crates/lab/src/golden.rs`) guard it: they record the version they were made with
/// and fail when a result changes, until this number is raised in the same commit, the
/// tables are regenerated and `docs/model.md`'s table of model versions says why.
pub const MODEL_VERSION: u32 = 1;
