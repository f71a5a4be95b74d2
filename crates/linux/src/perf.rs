//! Per-thread counters through `perf_event_open`: hardware events where the machine
//! has a PMU (instructions, cycles, LLC references and misses), software events with
//! kernel counting everywhere (task clock, context switches, migrations).
//!
//! [`probe`] says which counters this host provides and, for those it does not, the
//! likely reason (no PMU, as in most VMs; `perf_event_paranoid`), so that a policy that
//! needs a missing counter can refuse to start with that reason instead of running
//! blind.
//!
//! The attr and the system call are shared with [`crate::sampling`], which opens
//! sampling events with a ring buffer on the same `struct perf_event_attr`.

use crate::events::EventMap;
use cachesched_core::CounterKind;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use thiserror::Error;

/// Why a counter could not be opened or read.
#[derive(Debug, Error)]
pub enum PerfError {
    /// The kernel or CPU has no such event.
    #[error("{} is not supported here (perf_event_open: {}): no hardware PMU is exposed (typical in a VM) or the event does not exist on this CPU", .kind.name(), errno(.source))]
    Unsupported {
        /// The counter.
        kind: CounterKind,
        /// The error.
        source: io::Error,
    },
    /// Not permitted.
    #[error("{} is not permitted (perf_event_open: {}): /proc/sys/kernel/perf_event_paranoid is {paranoid}; run as root, grant CAP_PERFMON, or lower it (e.g. to 1)", .kind.name(), errno(.source))]
    Denied {
        /// The counter.
        kind: CounterKind,
        /// The paranoid level, if readable.
        paranoid: String,
        /// The error.
        source: io::Error,
    },
    /// The thread no longer exists.
    #[error("thread {tid} is gone")]
    Gone {
        /// The thread.
        tid: i32,
    },
    /// This counter has no perf event mapping.
    #[error("{} has no perf event in cachesched's Linux backend: it is model-specific; name the event for this CPU with `--counter-event {}=PMU/TERMS/` (from the CPU's documentation or `perf list`)", .0.name(), .0.name())]
    NoMapping(CounterKind),
    /// Any other failure.
    #[error("perf_event_open/read for {} failed: {}", .kind.name(), errno(.source))]
    Os {
        /// The counter.
        kind: CounterKind,
        /// The error.
        source: io::Error,
    },
}

impl PerfError {
    /// The message without the counter's name in front (`not supported here (…): …`), for
    /// lines that name the counter already or group counters by reason; a message that
    /// does not begin with the name is whole.
    pub fn reason(&self) -> String {
        let msg = self.to_string();
        let kind = match self {
            PerfError::Unsupported { kind, .. }
            | PerfError::Denied { kind, .. }
            | PerfError::Os { kind, .. }
            | PerfError::NoMapping(kind) => *kind,
            PerfError::Gone { .. } => return msg,
        };
        let name = kind.name();
        msg.strip_prefix(&format!("{name} is "))
            .or_else(|| msg.strip_prefix(&format!("{name} ")))
            .unwrap_or(&msg)
            .to_string()
    }
}

/// An OS error as its errno name where it is one perf_event_open gives (`ENOENT`), else
/// as the OS describes it: what a user can look up in perf_event_open(2).
pub(crate) fn errno(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(1) => "EPERM",
        Some(2) => "ENOENT",
        Some(3) => "ESRCH",
        Some(13) => "EACCES",
        Some(16) => "EBUSY",
        Some(22) => "EINVAL",
        Some(24) => "EMFILE",
        Some(95) => "EOPNOTSUPP",
        _ => return e.to_string(),
    };
    name.to_string()
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;

/// The perf event (type, config) behind a counter.
pub fn event_of(kind: CounterKind) -> Option<(u32, u64)> {
    Some(match kind {
        CounterKind::Cycles => (PERF_TYPE_HARDWARE, 0),
        CounterKind::Instructions => (PERF_TYPE_HARDWARE, 1),
        CounterKind::LlcRefs => (PERF_TYPE_HARDWARE, 2),
        CounterKind::LlcMisses => (PERF_TYPE_HARDWARE, 3),
        CounterKind::CpuTimeNs => (PERF_TYPE_SOFTWARE, 1), // task clock
        CounterKind::ContextSwitches => (PERF_TYPE_SOFTWARE, 3),
        CounterKind::Migrations => (PERF_TYPE_SOFTWARE, 4),
        _ => return None,
    })
}

/// `struct perf_event_attr` up to PERF_ATTR_SIZE_VER1 (72 bytes: VER0's 64 and
/// `config2`), the part both counting ([`Counter`]) and sampling
/// ([`crate::sampling`]) use. The kernel treats the fields a larger attr would add as
/// zero.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RawAttr {
    /// `type`: the PMU (PERF_TYPE_* or a dynamic PMU's number from sysfs).
    pub(crate) kind: u32,
    /// `size`: `size_of::<RawAttr>()`.
    pub(crate) size: u32,
    /// `config`: the event on that PMU.
    pub(crate) config: u64,
    /// `sample_period` (`sample_freq` with the freq bit, which we never set).
    pub(crate) sample_period: u64,
    /// `sample_type`: the PERF_SAMPLE_* fields of each sample record.
    pub(crate) sample_type: u64,
    /// `read_format`: what `read(2)` returns.
    pub(crate) read_format: u64,
    /// The bit field from `disabled` to `sigtrap` (the `ATTR_*` constants).
    pub(crate) flags: u64,
    /// `wakeup_events` (or `wakeup_watermark` with the watermark bit).
    pub(crate) wakeup_events: u32,
    /// `bp_type` (breakpoints only).
    pub(crate) bp_type: u32,
    /// `config1` (`bp_addr` for breakpoints): e.g. Intel's load-latency threshold.
    pub(crate) config1: u64,
    /// `config2` (`bp_len` for breakpoints), added in PERF_ATTR_SIZE_VER1.
    pub(crate) config2: u64,
}

/// PERF_ATTR_SIZE_VER1.
const PERF_ATTR_SIZE_VER1: usize = 72;
const _: () = assert!(std::mem::size_of::<RawAttr>() == PERF_ATTR_SIZE_VER1);
// the offsets of include/uapi/linux/perf_event.h
const _: () = assert!(std::mem::offset_of!(RawAttr, flags) == 40);
const _: () = assert!(std::mem::offset_of!(RawAttr, config1) == 56);
const _: () = assert!(std::mem::offset_of!(RawAttr, config2) == 64);

impl RawAttr {
    /// An attr of the right size for event (`kind`, `config`) with everything else zero.
    pub(crate) fn new(kind: u32, config: u64) -> RawAttr {
        RawAttr {
            kind,
            size: std::mem::size_of::<RawAttr>() as u32,
            config,
            ..RawAttr::default()
        }
    }
}

/// Calls `perf_event_open(attr, tid, cpu -1 (any), group_fd, FD_CLOEXEC)`: a new event on
/// thread `tid`, in the group of `group_fd` (-1: its own group).
pub(crate) fn open_event(attr: &RawAttr, tid: i32, group_fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid, initialised perf_event_attr whose `size` field is its
    // size; the kernel only reads it. The call returns a new file descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const RawAttr,
            tid,
            -1i32,
            group_fd,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `/proc/sys/kernel/perf_event_paranoid`, trimmed (or "unreadable"), for messages.
pub(crate) fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unreadable".into())
}

/// `perf_event_open` flag: close the descriptor on exec.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `read_format`: the time the event was enabled, then the time it was counting.
const READ_TIMES: u64 = 1 | 2;

/// Bit of `flags`: the event starts disabled (enabled later by ioctl).
pub(crate) const ATTR_DISABLED: u64 = 1 << 0;
/// Bit of `flags`: don't count in the kernel.
pub(crate) const EXCLUDE_KERNEL: u64 = 1 << 5;
/// Bit of `flags`: don't count in the hypervisor.
pub(crate) const EXCLUDE_HV: u64 = 1 << 6;
/// Bit of `flags`: non-sample records (PERF_RECORD_LOST …) carry the sample's id
/// fields (`sample_id_all`).
pub(crate) const ATTR_SAMPLE_ID_ALL: u64 = 1 << 18;

/// The `precise_ip` bits (15–16) of `flags` for skid level `level` (0: arbitrary skid …
/// 3: zero skid); levels above 3 are taken as 3.
pub(crate) fn attr_precise_ip(level: u8) -> u64 {
    u64::from(level.min(3)) << 15
}

/// One open counter on one thread, counting from when it was opened.
#[derive(Debug)]
pub struct Counter {
    fd: OwnedFd,
    kind: CounterKind,
    user_only: bool,
}

impl Counter {
    /// Opens `kind` on thread `tid` (any CPU), counting in user and kernel mode; where
    /// `perf_event_paranoid` forbids kernel counting, falls back to user mode only (see
    /// [`Counter::user_only`]).
    pub fn open(tid: i32, kind: CounterKind) -> Result<Counter, PerfError> {
        Self::open_mapped(tid, kind, &EventMap::new())
    }

    /// [`Counter::open`] with the operator's events (`map`) tried before the built-in
    /// mapping.
    pub fn open_mapped(tid: i32, kind: CounterKind, map: &EventMap) -> Result<Counter, PerfError> {
        match Self::open_with(tid, kind, EXCLUDE_HV, map) {
            Err(PerfError::Denied { .. }) => {
                let mut c = Self::open_with(tid, kind, EXCLUDE_HV | EXCLUDE_KERNEL, map)?;
                c.user_only = true;
                Ok(c)
            }
            r => r,
        }
    }

    fn open_with(
        tid: i32,
        kind: CounterKind,
        flags: u64,
        map: &EventMap,
    ) -> Result<Counter, PerfError> {
        let (t, config) = match map.get(&kind) {
            Some(e) => (e.pmu_type, e.config),
            None => {
                let (t, c) = event_of(kind).ok_or(PerfError::NoMapping(kind))?;
                (t, [c, 0, 0])
            }
        };
        let attr = RawAttr {
            flags,
            read_format: READ_TIMES,
            config1: config[1],
            config2: config[2],
            ..RawAttr::new(t, config[0])
        };
        let fd = match open_event(&attr, tid, -1) {
            Ok(fd) => fd,
            Err(e) => {
                return Err(match e.raw_os_error() {
                    Some(libc::ESRCH) => PerfError::Gone { tid },
                    Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => {
                        PerfError::Unsupported { kind, source: e }
                    }
                    Some(libc::EACCES | libc::EPERM) => PerfError::Denied {
                        kind,
                        paranoid: paranoid(),
                        source: e,
                    },
                    _ => PerfError::Os { kind, source: e },
                })
            }
        };
        Ok(Counter {
            fd,
            kind,
            user_only: false,
        })
    }

    /// The counter's kind.
    pub fn kind(&self) -> CounterKind {
        self.kind
    }

    /// Whether it counts user mode only (kernel counting was not permitted).
    pub fn user_only(&self) -> bool {
        self.user_only
    }

    /// The count so far.
    pub fn read(&self) -> Result<u64, PerfError> {
        let mut v = [0u64; 3];
        // SAFETY: reads at most 24 bytes into `v`.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), v.as_mut_ptr() as *mut libc::c_void, 24) };
        if n != 24 {
            return Err(PerfError::Os {
                kind: self.kind,
                source: io::Error::last_os_error(),
            });
        }
        Ok(scale(v[0], v[1], v[2]))
    }
}

/// A count scaled up for the time the event was not on the PMU: when more hardware
/// events are open than the PMU has counters, the kernel rotates them, and each counts
/// only part of the time (`running` of `enabled` ns).
pub fn scale(value: u64, enabled: u64, running: u64) -> u64 {
    if running == 0 || running >= enabled {
        value
    } else {
        (value as u128 * enabled as u128 / running as u128) as u64
    }
}

/// Every counter kind the Linux backend can open.
pub const KINDS: [CounterKind; 7] = [
    CounterKind::Instructions,
    CounterKind::Cycles,
    CounterKind::LlcRefs,
    CounterKind::LlcMisses,
    CounterKind::CpuTimeNs,
    CounterKind::ContextSwitches,
    CounterKind::Migrations,
];

/// Which counters this host provides, trying each on the calling thread (`Ok(true)`:
/// user-mode counting only).
pub fn probe() -> Vec<(CounterKind, Result<bool, PerfError>)> {
    probe_mapped(&EventMap::new())
}

/// [`probe`] with the operator's events: the built-in kinds and every mapped one.
pub fn probe_mapped(map: &EventMap) -> Vec<(CounterKind, Result<bool, PerfError>)> {
    let tid = unsafe { libc::gettid() };
    let mut kinds: Vec<CounterKind> = KINDS.to_vec();
    kinds.extend(map.keys().copied().filter(|k| !KINDS.contains(k)));
    kinds
        .into_iter()
        .map(|k| (k, Counter::open_mapped(tid, k, map).map(|c| c.user_only())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_counters_count_a_real_thread_and_missing_ones_say_why() {
        let report = probe();
        for (k, r) in &report {
            eprintln!(
                "{k:?}: {}",
                r.as_ref()
                    .map_or_else(|e| e.to_string(), |_| "available".into())
            );
            if let Err(e) = r {
                let msg = e.to_string();
                assert!(
                    msg.contains("PMU") || msg.contains("paranoid"),
                    "{k:?}: unhelpful error {msg}"
                );
            }
        }
        // the task clock of this thread advances while it spins
        let tid = unsafe { libc::gettid() };
        let c = match Counter::open(tid, CounterKind::CpuTimeNs) {
            Ok(c) => c,
            Err(PerfError::Denied { .. }) => return, // unprivileged CI: reported above
            Err(e) => panic!("task clock: {e}"),
        };
        // spin until the kernel's own clock of this thread's CPU time has advanced
        // 20 ms (not 20 ms of wall time: on a busy host the thread gets a fraction of
        // it), read between the counter's two readings. CLOCK_THREAD_CPUTIME_ID, not
        // procfs::thread_cpu_ns: schedstat shows a running thread's runtime as of its
        // last tick or switch, up to a tick behind, beyond the 1 ms allowed below
        let thread_cpu_ns = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid timespec for the call to fill
            let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            assert_eq!(r, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let wall0 = std::time::Instant::now();
        let before = thread_cpu_ns();
        let a = c.read().unwrap();
        let cpu0 = thread_cpu_ns();
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while thread_cpu_ns() - cpu0 < 20_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(60),
                "this thread got less than 20 ms of CPU in 60 s"
            );
        }
        let b = c.read().unwrap();
        let after = thread_cpu_ns();
        let wall = wall0.elapsed().as_nanos() as u64;
        // the two clocks of the thread's CPU time differ by some microseconds either way
        // on a quiet host (-35 to +25 us measured here), but not on a busy VM: the
        // thread's CPU clock runs on the scheduler's task clock, which leaves out time
        // stolen by the hypervisor and spent in interrupts, and the perf task clock
        // does not (21.8 ms against 20.0 ms, 2026-12-07, a test build beside it). So:
        // at least what the thread ran, less 1 ms, and at most the wall time between
        // the reads
        assert!(
            (19_000_000..=wall + 1_000_000).contains(&(b - a)),
            "task clock advanced {} ns while the thread ran 20 ms ({} ns of its CPU clock, \
             {} ns of wall time between the reads)",
            b - a,
            after - before,
            wall
        );
        assert_eq!(scale(100, 10, 5), 200, "counted half the time");
        assert_eq!(scale(100, 10, 10), 100);
        assert_eq!(scale(100, 0, 0), 100, "never scheduled: as read");
        assert!(matches!(
            Counter::open(tid, CounterKind::L1dRefs),
            Err(PerfError::NoMapping(_))
        ));
    }

    #[test]
    fn an_operator_event_opens_a_counter_the_backend_has_no_mapping_for() {
        // remote_accesses mapped to the software PMU's page faults (config 2), resolved
        // through this host's sysfs as an operator's --counter-event would be
        let pmus = crate::events::sysfs_pmus();
        if !pmus.join("software").is_dir() {
            eprintln!("no {}/software: skipped", pmus.display());
            return;
        }
        let (kind, ev) =
            crate::events::parse_mapping("remote_accesses=software/config=2/", &pmus).unwrap();
        assert_eq!(
            (kind, ev.pmu_type, ev.config),
            (CounterKind::RemoteAccesses, 1, [2, 0, 0])
        );
        let map: EventMap = [(kind, ev)].into_iter().collect();
        let tid = unsafe { libc::gettid() };
        assert!(matches!(
            Counter::open(tid, kind),
            Err(PerfError::NoMapping(_))
        ));
        let c = match Counter::open_mapped(tid, kind, &map) {
            Ok(c) => c,
            Err(PerfError::Denied { .. }) => return, // unprivileged CI
            Err(e) => panic!("mapped page faults: {e}"),
        };
        let before = c.read().unwrap();
        // touch 64 fresh pages: each a page fault (a mapping of their own: memory from
        // the allocator may be pages other tests of this process already touched)
        let pages = 64;
        let len = pages * 4096;
        // SAFETY: a fresh anonymous mapping, checked, written within, unmapped below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        for i in 0..pages {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile((base as *mut u8).add(i * 4096), 1) };
        }
        let faults = c.read().unwrap() - before;
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(base, len) };
        assert!(
            faults >= pages as u64 / 2,
            "{faults} faults counted for {pages} pages"
        );
        let report = probe_mapped(&map);
        assert!(
            report.iter().any(|(k, r)| *k == kind && r.is_ok()),
            "{report:?}"
        );
    }
}
