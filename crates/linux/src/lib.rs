//! The Linux backend: the only crate of cachesched that talks to the kernel.
//!
//! It provides the host topology read from sysfs and per-thread scheduling controls
//! (sched_setaffinity, sched_setattr slices, setpriority) behind a journal that restores
//! them; counters (perf_event_open) and the daemon loop are still to come.

pub mod mmap;
pub mod perf;
pub mod sched;
pub mod sysfs;

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
