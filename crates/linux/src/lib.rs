//! The Linux backend: the only crate of cachesched that talks to the kernel.
//!
//! It provides the host topology read from sysfs ([`sysfs`]), processes and threads
//! from `/proc` ([`procfs`]), per-thread counters through `perf_event_open` ([`perf`]),
//! data-address sampling through its ring buffer ([`sampling`]), per-thread scheduling
//! controls (sched_setaffinity, sched_setattr slices, setpriority: [`sched`]) behind a
//! journal that restores them ([`journal`]), thread classes assigned by rules
//! ([`classes`]), claims that keep two daemons off one process ([`claim`]), the daemon
//! that runs a policy on real threads with all of these ([`daemon`]), a managed run
//! from start to stop around it ([`session`]), and the load program of
//! `cachesched burn` ([`load`]).

pub mod claim;
pub mod classes;
pub mod corun;
pub mod daemon;
pub mod events;
pub mod journal;
pub mod load;
pub mod mmap;
pub mod perf;
pub mod process;
pub mod procfs;
pub mod sampling;
pub mod sched;
pub mod session;
pub mod sysfs;
#[cfg(test)]
mod testdir;

pub use daemon::{Daemon, DaemonConfig, DaemonError, StatsRecord, Target};

pub use mmap::Mapped;
pub use sysfs::{read_host_topology, HostTopology, SysfsError};

/// Restores the default SIGPIPE action, so that `cachesched … | head` ends quietly
/// instead of failing on a closed pipe (Rust ignores SIGPIPE by default).
pub fn default_sigpipe() {
    // SAFETY: signal() with SIG_DFL installs no handler code; called once at start-up,
    // before any thread is spawned.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
