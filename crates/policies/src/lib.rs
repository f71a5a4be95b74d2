//! Scheduling policies, one module per scheduler, and their composition: the five
//! papers' schedulers under [`papers`], the extras (a demonstration policy and two
//! comparison points) under [`extras`], each registered by one
//! row of [`registry`].
//!
//! Every policy implements [`cachesched_core::Policy`] and is pure logic: the same value
//! runs in the simulator and in the Linux daemon.

pub mod chain;
pub mod drift;
pub mod extras;
pub mod papers;
pub mod registry;

pub use extras::{demo, migrate, process_llc};
pub use papers::{affinity, cachefair, casc, clustering, timeslice};

pub use affinity::{Affinity, AffinityConfig, AffinityStats};
pub use cachefair::{CacheFair, CacheFairConfig, CacheFairStats};
pub use casc::{Casc, CascConfig, CascStats};
pub use chain::Chain;
pub use clustering::{ClusteringConfig, ClusteringStats, ThreadClustering};
pub use demo::{Demo, DemoStats};
pub use migrate::{Migrate, MigrateConfig, MigrateStats};
pub use process_llc::{ProcessLlc, ProcessLlcConfig, ProcessLlcStats};
pub use registry::{build_policy, PolicyError, PolicySpec, POLICY_NAMES};
pub use timeslice::{Timeslice, TimesliceConfig, TimesliceStats};

/// Checks that a configuration value `v` of `key` lies in `[lo, hi]`; the error names
/// the key, its range and the value (NaN is out of every range).
pub(crate) fn within(key: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(format!("{key} must be between {lo} and {hi} (got {v})"))
    }
}
