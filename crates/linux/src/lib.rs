//! The Linux backend: the only crate of cachesched that talks to the kernel.
//!
//! This module set currently provides the host topology read from sysfs; enforcement
//! (perf_event_open, sched_setaffinity, sched_setattr, setpriority) builds on it.

pub mod sysfs;

pub use sysfs::{read_host_topology, HostTopology, SysfsError};
