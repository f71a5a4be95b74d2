//! Per-thread scheduling controls — CPU affinity (`sched_setaffinity`), the fair-class
//! slice (`sched_setattr`'s `sched_runtime`, honoured for SCHED_OTHER since Linux 6.12)
//! and the nice value (`setpriority` on a thread id). Changes to other processes' threads
//! go through [`crate::journal::Journal`], which records each original before the first
//! change and puts it back.
//!
//! A thread that exits between two calls is normal for a daemon watching other
//! processes: it shows up as [`SchedError::Gone`], and restoring skips it.

use std::io;
use thiserror::Error;

/// A kernel thread id (the `pid` of a single-threaded process).
pub type Tid = i32;

/// Why a scheduling call failed.
#[derive(Debug, Error)]
pub enum SchedError {
    /// The thread no longer exists.
    #[error("thread {tid} is gone")]
    Gone {
        /// The thread.
        tid: Tid,
    },
    /// The kernel refused the call.
    #[error("{call} on thread {tid} failed: {source}{}", hint(call, source))]
    Os {
        /// The system call.
        call: &'static str,
        /// The thread.
        tid: Tid,
        /// The error.
        source: io::Error,
    },
    /// The journal file could not be written.
    #[error("cannot write the journal file {path}: {source}")]
    JournalFile {
        /// The file.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// The thread is not in a fair class (SCHED_OTHER/BATCH/IDLE); real-time threads are
    /// never touched.
    #[error("thread {tid} runs in scheduling policy {policy}, not a fair class; left alone")]
    NotFair {
        /// The thread.
        tid: Tid,
        /// Its policy number.
        policy: u32,
    },
    /// Raising the nice value would be irreversible: this process may not lower it back.
    #[error("not raising thread {tid}'s nice value from {from} to {to}: without CAP_SYS_NICE (or an RLIMIT_NICE allowing {from}) it could not be restored; left alone")]
    Irreversible {
        /// The thread.
        tid: Tid,
        /// Its original nice value.
        from: i32,
        /// The nice value asked for.
        to: i32,
    },
}

/// Whether this process may set a nice value as low as `nice` (root or CAP_SYS_NICE,
/// or RLIMIT_NICE allowing it).
pub fn may_lower_nice_to(nice: i32) -> bool {
    // SAFETY: geteuid/getrlimit on a local struct.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let cap_sys_nice = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 23) != 0);
    if cap_sys_nice {
        return true;
    }
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut rl) } != 0 {
        return false;
    }
    // RLIMIT_NICE r allows nice values down to 20 - r
    20 - (rl.rlim_cur.min(40) as i32) <= nice
}

/// What to check after a refused call.
fn hint(call: &str, e: &io::Error) -> &'static str {
    match (call, e.raw_os_error()) {
        (_, Some(libc::EPERM | libc::EACCES)) => {
            " (needs root or CAP_SYS_NICE for other users' threads or a lower nice value)"
        }
        ("sched_setaffinity", Some(libc::EINVAL)) => {
            " (none of the CPUs is allowed: they may be outside the thread's cpuset cgroup or offline)"
        }
        _ => "",
    }
}

fn os(call: &'static str, tid: Tid) -> SchedError {
    let source = io::Error::last_os_error();
    if source.raw_os_error() == Some(libc::ESRCH) {
        SchedError::Gone { tid }
    } else {
        SchedError::Os { call, tid, source }
    }
}

/// The CPUs `tid` may run on.
pub fn affinity(tid: Tid) -> Result<Vec<usize>, SchedError> {
    // SAFETY: cpu_set_t is plain data; the kernel writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(os("sched_getaffinity", tid));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Restricts `tid` to `cpus`.
pub fn set_affinity(tid: Tid, cpus: &[usize]) -> Result<(), SchedError> {
    // SAFETY: as above; CPU_SET only writes within the set for indices < CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(os("sched_setaffinity", tid));
    }
    Ok(())
}

/// `struct sched_attr` (SCHED_ATTR_SIZE_VER1, 56 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct RawAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// What `sched_getattr` reports about a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Scheduling policy (0 = SCHED_OTHER, 3 = BATCH, 5 = IDLE; others are real time).
    pub policy: u32,
    /// Nice value.
    pub nice: i32,
    /// Requested slice in ns for fair threads (0: the kernel's default).
    pub slice_ns: u64,
}

fn get_raw(tid: Tid) -> Result<RawAttr, SchedError> {
    let mut a = RawAttr::default();
    let size = std::mem::size_of::<RawAttr>() as u32;
    // SAFETY: the kernel writes at most `size` bytes into `a`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut RawAttr,
            size,
            0u32,
        )
    };
    if r != 0 {
        return Err(os("sched_getattr", tid));
    }
    Ok(a)
}

/// The thread's scheduling attributes.
pub fn attr(tid: Tid) -> Result<Attr, SchedError> {
    let a = get_raw(tid)?;
    Ok(Attr {
        policy: a.policy,
        nice: a.nice,
        slice_ns: a.runtime,
    })
}

fn is_fair(policy: u32) -> bool {
    matches!(
        policy as i32,
        libc::SCHED_OTHER | libc::SCHED_BATCH | libc::SCHED_IDLE
    )
}

/// Sets the fair-class slice of `tid` (`None`: the kernel's default), keeping its policy
/// and nice value. The kernel clamps a slice to 0.1–100 ms; kernels before 6.12 accept
/// and ignore it (see [`kernel_honours_slices`]).
pub fn set_slice(tid: Tid, slice_ns: Option<u64>) -> Result<(), SchedError> {
    let mut a = get_raw(tid)?;
    if !is_fair(a.policy) {
        return Err(SchedError::NotFair {
            tid,
            policy: a.policy,
        });
    }
    a.size = std::mem::size_of::<RawAttr>() as u32;
    a.flags = 0;
    a.runtime = slice_ns.unwrap_or(0);
    a.deadline = 0;
    a.period = 0;
    // SAFETY: `a` is a valid, fully initialised sched_attr of the declared size.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const RawAttr, 0u32) };
    if r != 0 {
        return Err(os("sched_setattr", tid));
    }
    Ok(())
}

/// The nice value of thread `tid`.
pub fn nice(tid: Tid) -> Result<i32, SchedError> {
    // getpriority returns -1 both as a value and as an error: errno tells them apart
    unsafe { *libc::__errno_location() = 0 };
    let v = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
    if v == -1 && io::Error::last_os_error().raw_os_error().unwrap_or(0) != 0 {
        return Err(os("getpriority", tid));
    }
    Ok(v)
}

/// Sets the nice value of thread `tid` (Linux applies PRIO_PROCESS to one thread).
pub fn set_nice(tid: Tid, value: i32) -> Result<(), SchedError> {
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, value) };
    if r != 0 {
        return Err(os("setpriority", tid));
    }
    Ok(())
}

/// Whether this kernel honours per-task fair slices (Linux ≥ 6.12); `None` if the
/// release string cannot be read.
pub fn kernel_honours_slices() -> Option<bool> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    let major: u32 = it.next()?.parse().ok()?;
    let minor: u32 = it.next()?.parse().ok()?;
    Some((major, minor) >= (6, 12))
}

/// A thread's scheduling settings: what [`crate::journal::Journal`] restores.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    /// OS CPU numbers it may run on.
    pub affinity: Vec<usize>,
    /// Fair-class slice request in ns (0: the kernel's default).
    pub slice_ns: u64,
    /// Nice value.
    pub nice: i32,
}

impl Settings {
    /// Reads a thread's current settings.
    pub fn read(tid: Tid) -> Result<Settings, SchedError> {
        Ok(Settings {
            affinity: affinity(tid)?,
            slice_ns: attr(tid)?.slice_ns,
            nice: nice(tid)?,
        })
    }
}
