//! Per-thread scheduling controls — CPU affinity (`sched_setaffinity`), the fair-class
//! slice (`sched_setattr`'s `sched_runtime`, honoured for SCHED_OTHER since Linux 6.12)
//! and the nice value (`setpriority` on a thread id) — and a [`Journal`] that records
//! each thread's original settings before the first change and puts them back.
//!
//! A thread that exits between two calls is normal for a daemon watching other
//! processes: it shows up as [`SchedError::Gone`], and restoring skips it.

use std::collections::BTreeMap;
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

/// A thread's scheduling settings: what [`Journal`] restores.
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

/// A journaled thread: its original settings and which of them cachesched changed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    orig: Settings,
    /// The thread's start time (clock ticks after boot), naming it across tid reuse.
    start: Option<u64>,
    affinity: bool,
    slice: bool,
    nice: bool,
}

/// One line of a journal file: a thread (tid and start time), its original settings and
/// one setting that was changed. The file is appended to before each first change of a
/// setting, so that it always covers what was changed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct FileLine {
    tid: Tid,
    start: u64,
    orig: Settings,
    changed: String,
}

/// What [`Journal::restore_all`] did.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Threads whose settings were put back.
    pub restored: usize,
    /// Threads that had exited (nothing to restore).
    pub gone: usize,
    /// Failures, per thread.
    pub failed: Vec<(Tid, SchedError)>,
}

/// Every change made to threads, with the original values to restore. Changes go
/// through the journal so that nothing is changed without its original being recorded
/// first, and only what was changed is put back.
///
/// Originals are normally read from the thread before the first change. A thread
/// created by a thread that cachesched had already changed inherits the changed values,
/// so its true original is its creator's: [`Journal::track`] records that explicitly.
#[derive(Debug, Default)]
pub struct Journal {
    entries: BTreeMap<Tid, Entry>,
    file: Option<(std::fs::File, std::path::PathBuf)>,
}

impl Journal {
    /// An empty journal.
    pub fn new() -> Journal {
        Journal::default()
    }

    /// Threads with recorded originals.
    pub fn threads(&self) -> Vec<Tid> {
        self.entries.keys().copied().collect()
    }

    /// Threads with at least one setting changed.
    pub fn changed(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.affinity || e.slice || e.nice)
            .count()
    }

    /// The recorded original settings of `tid`.
    pub fn original(&self, tid: Tid) -> Option<&Settings> {
        self.entries.get(&tid).map(|e| &e.orig)
    }

    /// A journal that also appends every first change to `path`, so that
    /// [`restore_file`] can undo the changes if this process dies without restoring
    /// (SIGKILL, power loss of the daemon's host aside). Refuses an existing file: it is
    /// the journal of a run that did not finish, to be restored first.
    pub fn with_file(path: &std::path::Path) -> Result<Journal, SchedError> {
        let err = |source| SchedError::JournalFile {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    err(io::Error::new(
                        e.kind(),
                        "it exists: a run that did not finish left it; run `cachesched restore` on it first",
                    ))
                } else {
                    err(e)
                }
            })?;
        Ok(Journal {
            entries: BTreeMap::new(),
            file: Some((file, path.to_path_buf())),
        })
    }

    /// Records `orig` as `tid`'s original settings (replacing nothing already recorded).
    pub fn track(&mut self, tid: Tid, orig: Settings) {
        self.track_started(tid, orig, None);
    }

    /// [`Journal::track`] with the thread's start time (from `/proc/…/stat`), which a
    /// journal file needs to tell the thread from a later one with the same id.
    pub fn track_started(&mut self, tid: Tid, orig: Settings, start: Option<u64>) {
        self.entries.entry(tid).or_insert(Entry {
            orig,
            start,
            affinity: false,
            slice: false,
            nice: false,
        });
    }

    fn entry(&mut self, tid: Tid) -> Result<&mut Entry, SchedError> {
        if !self.entries.contains_key(&tid) {
            self.track(tid, Settings::read(tid)?);
        }
        Ok(self.entries.get_mut(&tid).expect("tracked above"))
    }

    fn flag<'a>(e: &'a mut Entry, which: &str) -> &'a mut bool {
        match which {
            "affinity" => &mut e.affinity,
            "slice" => &mut e.slice,
            _ => &mut e.nice,
        }
    }

    /// Makes a change of `which` setting of `tid` with `change`: marks the setting
    /// changed and, on its first change, appends it to the journal file before the
    /// change is made. A change the kernel refused leaves the setting unmarked.
    fn change(
        &mut self,
        tid: Tid,
        which: &'static str,
        change: impl FnOnce() -> Result<(), SchedError>,
    ) -> Result<(), SchedError> {
        let first = !*Self::flag(self.entry(tid)?, which);
        if first {
            self.log(tid, which)?;
        }
        *Self::flag(self.entries.get_mut(&tid).expect("entry"), which) = true;
        let r = change();
        if r.is_err() && first {
            *Self::flag(self.entries.get_mut(&tid).expect("entry"), which) = false;
        }
        r
    }

    /// Appends `tid`'s originals and the setting about to change to the journal file.
    fn log(&mut self, tid: Tid, which: &'static str) -> Result<(), SchedError> {
        let Some((file, path)) = self.file.as_mut() else {
            return Ok(());
        };
        let e = &self.entries[&tid];
        let start = match e.start {
            Some(s) => s,
            None => match crate::procfs::thread_stat(tid, tid) {
                Ok(st) => st.starttime,
                Err(_) => return Err(SchedError::Gone { tid }),
            },
        };
        let line = FileLine {
            tid,
            start,
            orig: e.orig.clone(),
            changed: which.to_string(),
        };
        use std::io::Write;
        let text = serde_json::to_string(&line).expect("plain data") + "\n";
        file.write_all(text.as_bytes())
            .map_err(|source| SchedError::JournalFile {
                path: path.display().to_string(),
                source,
            })
    }

    /// Restricts `tid` to `cpus` (OS numbers), recording its original first.
    pub fn set_affinity(&mut self, tid: Tid, cpus: &[usize]) -> Result<(), SchedError> {
        self.change(tid, "affinity", || set_affinity(tid, cpus))
    }

    /// Sets `tid`'s slice (`None`: the kernel's default), recording its original first.
    pub fn set_slice(&mut self, tid: Tid, slice_ns: Option<u64>) -> Result<(), SchedError> {
        self.change(tid, "slice", || set_slice(tid, slice_ns))
    }

    /// Sets `tid`'s nice value, recording its original first.
    /// Refuses ([`SchedError::Irreversible`]) a value above the original that this
    /// process could not lower back.
    pub fn set_nice(&mut self, tid: Tid, value: i32) -> Result<(), SchedError> {
        let from = self.entry(tid)?.orig.nice;
        if value > from && !may_lower_nice_to(from) {
            return Err(SchedError::Irreversible {
                tid,
                from,
                to: value,
            });
        }
        self.change(tid, "nice", || set_nice(tid, value))
    }

    /// Puts `tid`'s original affinity back, if it was changed.
    pub fn restore_affinity(&mut self, tid: Tid) -> Result<(), SchedError> {
        match self.entries.get_mut(&tid) {
            Some(e) if e.affinity => {
                e.affinity = false;
                set_affinity(tid, &e.orig.affinity)
            }
            _ => Ok(()),
        }
    }

    /// Puts `tid`'s original slice back, if it was changed.
    pub fn restore_slice(&mut self, tid: Tid) -> Result<(), SchedError> {
        match self.entries.get_mut(&tid) {
            Some(e) if e.slice => {
                e.slice = false;
                set_slice(tid, (e.orig.slice_ns > 0).then_some(e.orig.slice_ns))
            }
            _ => Ok(()),
        }
    }

    /// Puts `tid`'s original nice value back, if it was changed.
    pub fn restore_nice(&mut self, tid: Tid) -> Result<(), SchedError> {
        match self.entries.get_mut(&tid) {
            Some(e) if e.nice => {
                e.nice = false;
                set_nice(tid, e.orig.nice)
            }
            _ => Ok(()),
        }
    }

    /// Forgets a thread that exited.
    pub fn forget(&mut self, tid: Tid) {
        self.entries.remove(&tid);
    }

    /// Puts every changed setting back (nice first, so that a restored slice is set at
    /// the original priority) and empties the journal; a journal file is removed when
    /// nothing failed.
    pub fn restore_all(&mut self) -> RestoreReport {
        let mut rep = RestoreReport::default();
        for tid in self.threads() {
            let changed = self.entries[&tid].clone();
            if !(changed.affinity || changed.slice || changed.nice) {
                continue;
            }
            let res = self
                .restore_nice(tid)
                .and_then(|_| self.restore_slice(tid))
                .and_then(|_| self.restore_affinity(tid));
            match res {
                Ok(()) => rep.restored += 1,
                Err(SchedError::Gone { .. }) => rep.gone += 1,
                Err(e) => rep.failed.push((tid, e)),
            }
        }
        self.entries.clear();
        if rep.failed.is_empty() {
            if let Some((_, path)) = self.file.take() {
                let _ = std::fs::remove_file(path);
            }
        }
        rep
    }
}

/// Why a journal file could not be restored.
#[derive(Debug, Error)]
pub enum JournalFileError {
    /// It cannot be read.
    #[error("cannot read journal file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// A line is not a journal entry.
    #[error("{path}:{line}: not a cachesched journal line ({reason})")]
    Malformed {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// What [`restore_file`] did.
#[derive(Debug, Default)]
pub struct FileRestoreReport {
    /// As for a journal in memory; `gone` also counts threads whose id now names a
    /// different thread (start time differs), which are left alone.
    pub report: RestoreReport,
    /// Of `gone`, threads whose id was reused.
    pub reused: usize,
}

/// Restores what a journal file says was changed, on the threads still alive (the same
/// id and start time), and removes the file when nothing failed. A last line cut short
/// by the writer's death is ignored.
pub fn restore_file(path: &std::path::Path) -> Result<FileRestoreReport, JournalFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| JournalFileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let lines: Vec<&str> = text.lines().collect();
    let mut j = Journal::new();
    let mut starts: BTreeMap<Tid, u64> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let line: FileLine = match serde_json::from_str(l) {
            Ok(v) => v,
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => {
                return Err(JournalFileError::Malformed {
                    path: path.display().to_string(),
                    line: i + 1,
                    reason: e.to_string(),
                })
            }
        };
        starts.insert(line.tid, line.start);
        j.track_started(line.tid, line.orig, Some(line.start));
        let e = j.entries.get_mut(&line.tid).expect("tracked");
        match line.changed.as_str() {
            "affinity" => e.affinity = true,
            "slice" => e.slice = true,
            "nice" => e.nice = true,
            other => {
                return Err(JournalFileError::Malformed {
                    path: path.display().to_string(),
                    line: i + 1,
                    reason: format!("unknown setting '{other}'"),
                })
            }
        }
    }
    // a thread whose id now belongs to another thread must not be touched
    let mut reused = 0;
    for (tid, start) in starts {
        match crate::procfs::thread_stat(tid, tid) {
            Ok(st) if st.starttime == start => {}
            Ok(_) => {
                reused += 1;
                j.forget(tid);
            }
            Err(_) => {}
        }
    }
    let mut report = j.restore_all();
    report.gone += reused;
    if report.failed.is_empty() {
        let _ = std::fs::remove_file(path);
    }
    Ok(FileRestoreReport { report, reused })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    fn child() -> (Child, Tid) {
        let c = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let tid = c.id() as Tid;
        (c, tid)
    }

    #[test]
    fn journal_changes_and_restores_a_real_process() {
        let (mut c, tid) = child();
        let before_aff = affinity(tid).unwrap();
        let before = attr(tid).unwrap();
        let before_nice = nice(tid).unwrap();
        let mut j = Journal::new();
        j.set_affinity(tid, &[0]).unwrap();
        assert_eq!(affinity(tid).unwrap(), vec![0]);
        j.set_nice(tid, before_nice + 3).unwrap();
        assert_eq!(nice(tid).unwrap(), before_nice + 3);
        j.set_slice(tid, Some(8_000_000)).unwrap();
        let during = attr(tid).unwrap();
        assert_eq!(
            during.nice,
            before_nice + 3,
            "the slice keeps the nice value"
        );
        if kernel_honours_slices() == Some(true) {
            assert_eq!(during.slice_ns, 8_000_000);
        }
        // a second change keeps the first original
        j.set_affinity(tid, &[0]).unwrap();
        let rep = j.restore_all();
        assert_eq!((rep.restored, rep.gone), (1, 0), "{:?}", rep.failed);
        assert_eq!(affinity(tid).unwrap(), before_aff);
        assert_eq!(nice(tid).unwrap(), before_nice);
        let after = attr(tid).unwrap();
        assert_eq!((after.policy, after.nice), (before.policy, before.nice));
        if kernel_honours_slices() == Some(true) {
            assert_eq!(after.slice_ns, before.slice_ns);
        }
        c.kill().unwrap();
        c.wait().unwrap();
    }

    #[test]
    fn only_what_was_changed_is_put_back_and_tracked_originals_win() {
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let mut j = Journal::new();
        j.set_nice(tid, before.nice + 2).unwrap();
        // the program pins itself meanwhile: not ours to undo
        set_affinity(tid, &[0]).unwrap();
        let rep = j.restore_all();
        assert_eq!(rep.restored, 1);
        assert_eq!(nice(tid).unwrap(), before.nice);
        assert_eq!(affinity(tid).unwrap(), vec![0]);
        // a thread that inherited changed settings is given its creator's originals
        let mut j = Journal::new();
        j.track(tid, before.clone());
        j.set_nice(tid, before.nice + 4).unwrap();
        j.set_affinity(tid, &[0]).unwrap();
        assert_eq!(j.original(tid), Some(&before));
        assert_eq!(j.changed(), 1);
        j.restore_all();
        assert_eq!(Settings::read(tid).unwrap(), before);
        c.kill().unwrap();
        c.wait().unwrap();
    }

    #[test]
    fn a_journal_file_restores_only_the_same_thread_and_tolerates_a_cut_last_line() {
        let dir = std::env::temp_dir().join(format!("cachesched-jf-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let start = crate::procfs::thread_stat(tid, tid).unwrap().starttime;
        // the same thread: restored; a cut last line (the writer died mid-line): ignored
        let path = dir.join("a");
        let mut j = Journal::with_file(&path).unwrap();
        j.track_started(tid, before.clone(), Some(start));
        j.set_nice(tid, before.nice + 3).unwrap();
        drop(j); // "killed": nothing restored
        let mut text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        text += "{\"tid\": 1, \"sta";
        std::fs::write(&path, &text).unwrap();
        assert!(
            Journal::with_file(&path).is_err(),
            "an unfinished journal is refused"
        );
        let r = restore_file(&path).unwrap();
        assert_eq!((r.report.restored, r.reused), (1, 0));
        assert_eq!(Settings::read(tid).unwrap(), before);
        assert!(!path.exists());
        // an id that now names another thread (other start time) is left alone
        let path = dir.join("b");
        let mut j = Journal::with_file(&path).unwrap();
        j.track_started(tid, before.clone(), Some(start + 1));
        j.set_nice(tid, before.nice + 3).unwrap();
        drop(j);
        let r = restore_file(&path).unwrap();
        assert_eq!((r.report.restored, r.reused), (0, 1));
        assert_eq!(nice(tid).unwrap(), before.nice + 3);
        set_nice(tid, before.nice).unwrap();
        // a malformed line is named
        std::fs::write(&path, "garbage\n").unwrap();
        let e = restore_file(&path).unwrap_err().to_string();
        assert!(e.contains(":1: not a cachesched journal line"), "{e}");
        c.kill().unwrap();
        c.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_vanished_thread_is_gone_not_an_error() {
        let (mut c, tid) = child();
        let mut j = Journal::new();
        j.set_affinity(tid, &[0]).unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(matches!(
            set_affinity(tid, &[0]),
            Err(SchedError::Gone { .. })
        ));
        assert!(matches!(nice(tid), Err(SchedError::Gone { .. })));
        let rep = j.restore_all();
        assert_eq!((rep.restored, rep.gone, rep.failed.len()), (0, 1, 0));
    }
}
