//! Scheduling policies, one module per scheduler, and their composition.
//!
//! Every policy implements [`cachesched_core::Policy`] and is pure logic: the same value
//! runs in the simulator and in the Linux daemon.

pub mod affinity;
pub mod cachefair;
pub mod casc;
pub mod chain;
pub mod demo;
pub mod registry;
pub mod timeslice;

pub use affinity::{Affinity, AffinityConfig};
pub use cachefair::{CacheFair, CacheFairConfig};
pub use casc::{Casc, CascConfig};
pub use chain::Chain;
pub use demo::Demo;
pub use registry::{build_policy, PolicyError, PolicySpec, POLICY_NAMES};
pub use timeslice::{Timeslice, TimesliceConfig};
