//! Processes and threads from `/proc`: who exists, who is whose parent, what a thread is
//! doing, and the kernel's own per-thread switch and migration counts.
//!
//! Everything here races with threads exiting; a thread or process that vanished between
//! listing and reading is reported as [`ProcError::Gone`], which callers treat as normal.

use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A process id (thread-group id).
pub type Pid = i32;

/// Why a `/proc` (or cgroup) read failed.
#[derive(Debug, Error)]
pub enum ProcError {
    /// The process or thread no longer exists.
    #[error("{path} is gone")]
    Gone {
        /// The file or directory.
        path: String,
    },
    /// A file could not be read for another reason.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A file's content is not what the kernel documents.
    #[error("malformed {path}: {content:?}")]
    Malformed {
        /// The file.
        path: String,
        /// What it contained (first line).
        content: String,
    },
}

fn read(path: &Path) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|e| gone_or(path, e))
}

fn gone_or(path: &Path, e: io::Error) -> ProcError {
    let path = path.display().to_string();
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => ProcError::Gone { path },
        _ => ProcError::Read { path, source: e },
    }
}

fn malformed(path: &Path, s: &str) -> ProcError {
    ProcError::Malformed {
        path: path.display().to_string(),
        content: s.lines().next().unwrap_or("").chars().take(200).collect(),
    }
}

/// The fields of `/proc/…/stat` that cachesched uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// The id in the first field (process or thread).
    pub id: i32,
    /// The command name (without parentheses; may contain spaces and parentheses).
    pub comm: String,
    /// State letter: `R` running or runnable, `S`/`D` sleeping, `Z` zombie, `T` stopped…
    pub state: char,
    /// Parent process id.
    pub ppid: Pid,
    /// Threads in the process.
    pub num_threads: u32,
    /// Start time in clock ticks after boot: with the id, it names a thread uniquely.
    pub starttime: u64,
    /// The CPU it last ran on.
    pub processor: u32,
}

impl Stat {
    /// Whether the thread is running or waiting for a CPU.
    pub fn runnable(&self) -> bool {
        self.state == 'R'
    }

    /// Whether it has exited (zombie or dead) but is not yet reaped.
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses the content of a `stat` file. The command name is everything between the
/// first `(` and the last `)`, so that names containing `) ` parse correctly.
pub fn parse_stat(s: &str) -> Option<Stat> {
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    if close < open {
        return None;
    }
    let id = s[..open].trim().parse().ok()?;
    let comm = s[open + 1..close].to_string();
    // fields after the name, numbered from 3 (state) as in proc(5); one pass, no
    // allocation (the daemon parses this for every managed thread at every tick)
    let mut it = s[close + 1..].split_ascii_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    let num_threads = it.nth(20 - 5)?.parse().ok()?;
    let starttime = it.nth(22 - 21)?.parse().ok()?;
    let processor = it.nth(39 - 23)?.parse().ok()?;
    Some(Stat {
        id,
        comm,
        state,
        ppid,
        num_threads,
        starttime,
        processor,
    })
}

fn stat_at(path: &Path) -> Result<Stat, ProcError> {
    let s = read(path)?;
    parse_stat(&s).ok_or_else(|| malformed(path, &s))
}

fn task_dir(pid: Pid, tid: i32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/task/{tid}"))
}

/// A thread's `stat` file kept open: re-reading it costs a quarter of opening it anew,
/// and it fails with [`ProcError::Gone`] once the thread has exited.
#[derive(Debug)]
pub struct StatFile {
    file: std::fs::File,
    path: PathBuf,
}

impl StatFile {
    /// Opens `/proc/PID/task/TID/stat`.
    pub fn open(pid: Pid, tid: i32) -> Result<StatFile, ProcError> {
        let path = task_dir(pid, tid).join("stat");
        let file = std::fs::File::open(&path).map_err(|e| gone_or(&path, e))?;
        Ok(StatFile { file, path })
    }

    /// Reads the current content.
    pub fn read(&self) -> Result<Stat, ProcError> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 1024];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| gone_or(&self.path, e))?;
        // a command name may hold any bytes; only the rare invalid one pays for a copy
        let s = match std::str::from_utf8(&buf[..n]) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(&buf[..n]),
        };
        parse_stat(&s).ok_or_else(|| malformed(&self.path, &s))
    }
}

/// `/proc/loadavg` kept open, for the id of the most recently created process or
/// thread (its last field): while it stays the same, nothing was created anywhere.
/// The daemon asks at every scan; re-reading an open file costs a fraction of opening
/// it anew.
#[derive(Debug)]
pub struct LastPid {
    file: std::fs::File,
}

impl LastPid {
    const PATH: &'static str = "/proc/loadavg";

    /// Opens `/proc/loadavg`.
    pub fn open() -> Result<LastPid, ProcError> {
        let path = Path::new(Self::PATH);
        let file = std::fs::File::open(path).map_err(|e| gone_or(path, e))?;
        Ok(LastPid { file })
    }

    /// The id of the most recently created process or thread now.
    pub fn read(&self) -> Result<Pid, ProcError> {
        use std::os::unix::fs::FileExt;
        let path = Path::new(Self::PATH);
        let mut buf = [0u8; 256];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| gone_or(path, e))?;
        let s = String::from_utf8_lossy(&buf[..n]);
        s.split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| malformed(path, &s))
    }
}

/// The id of the most recently created process or thread (last field of
/// `/proc/loadavg`); see [`LastPid`] to ask repeatedly.
pub fn last_pid() -> Result<Pid, ProcError> {
    LastPid::open()?.read()
}

/// `/proc/PID/stat` of a process.
pub fn process_stat(pid: Pid) -> Result<Stat, ProcError> {
    stat_at(Path::new(&format!("/proc/{pid}/stat")))
}

/// `/proc/PID/task/TID/stat` of a thread.
pub fn thread_stat(pid: Pid, tid: i32) -> Result<Stat, ProcError> {
    stat_at(&task_dir(pid, tid).join("stat"))
}

fn numeric_entries(dir: &Path) -> Result<Vec<i32>, ProcError> {
    let rd = std::fs::read_dir(dir).map_err(|e| gone_or(dir, e))?;
    let mut v: Vec<i32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Every process id in `/proc`, ascending.
pub fn pids() -> Result<Vec<Pid>, ProcError> {
    numeric_entries(Path::new("/proc"))
}

/// The thread ids of process `pid`, ascending.
pub fn tasks(pid: Pid) -> Result<Vec<i32>, ProcError> {
    numeric_entries(Path::new(&format!("/proc/{pid}/task")))
}

/// The process (thread group) a thread id belongs to, from `/proc/TID/status`.
pub fn tgid_of(tid: i32) -> Result<Pid, ProcError> {
    let path = PathBuf::from(format!("/proc/{tid}/status"));
    let s = read(&path)?;
    status_field(&s, "Tgid")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(&path, &s))
}

/// A thread's real and effective user ids, from `/proc/TID/status`.
pub fn thread_uids(tid: i32) -> Result<(u32, u32), ProcError> {
    let path = PathBuf::from(format!("/proc/{tid}/status"));
    let s = read(&path)?;
    let mut ids = status_field(&s, "Uid")
        .unwrap_or("")
        .split_whitespace()
        .map(|v| v.parse::<u32>().ok());
    match (ids.next().flatten(), ids.next().flatten()) {
        (Some(real), Some(effective)) => Ok((real, effective)),
        _ => Err(malformed(&path, &s)),
    }
}

fn status_field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    s.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

/// A thread's context switches as the kernel counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Switches {
    /// The thread blocked or yielded.
    pub voluntary: u64,
    /// The thread was preempted (its slice ended or a waking thread took the CPU).
    pub involuntary: u64,
}

/// Parses the switch counts out of a `status` file.
pub fn parse_switches(s: &str) -> Option<Switches> {
    Some(Switches {
        voluntary: status_field(s, "voluntary_ctxt_switches")?.parse().ok()?,
        involuntary: status_field(s, "nonvoluntary_ctxt_switches")?
            .parse()
            .ok()?,
    })
}

/// Context switches of thread `tid` of process `pid`.
pub fn thread_switches(pid: Pid, tid: i32) -> Result<Switches, ProcError> {
    let path = task_dir(pid, tid).join("status");
    let s = read(&path)?;
    parse_switches(&s).ok_or_else(|| malformed(&path, &s))
}

/// Migrations of thread `tid` (`se.nr_migrations` in `/proc/…/sched`); `None` where
/// the kernel does not expose the scheduler's debug file.
pub fn thread_migrations(pid: Pid, tid: i32) -> Result<Option<u64>, ProcError> {
    let path = task_dir(pid, tid).join("sched");
    let s = match read(&path) {
        Ok(s) => s,
        Err(ProcError::Gone { .. }) if task_dir(pid, tid).exists() => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(s.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "se.nr_migrations").then(|| v.trim().parse().ok())?
    }))
}

/// Time thread `tid` spent on a CPU, ns (`/proc/…/schedstat`, first field).
pub fn thread_cpu_ns(pid: Pid, tid: i32) -> Result<u64, ProcError> {
    let path = task_dir(pid, tid).join("schedstat");
    let s = read(&path)?;
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(&path, &s))
}

/// The threads in a cgroup directory: `cgroup.threads` (v2) or `tasks` (v1).
pub fn cgroup_threads(dir: &Path) -> Result<Vec<i32>, ProcError> {
    let v2 = dir.join("cgroup.threads");
    let file = if v2.exists() { v2 } else { dir.join("tasks") };
    let s = std::fs::read_to_string(&file).map_err(|e| ProcError::Read {
        path: file.display().to_string(),
        source: e,
    })?;
    let mut v = Vec::new();
    for l in s.lines().filter(|l| !l.trim().is_empty()) {
        v.push(l.trim().parse().map_err(|_| malformed(&file, l))?);
    }
    v.sort_unstable();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon's identity check (issue 77, item 6): a thread's id and start tick can
    /// be reused (ns_last_pid), but a stat file kept open names its own thread and fails
    /// once that thread is gone, whoever has the id now. Root only (ns_last_pid); other
    /// processes creating tasks at the same moment can take the id, so a few tries.
    #[test]
    fn an_open_stat_file_fails_when_its_id_is_reused() {
        use std::process::Command;
        if std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/sys/kernel/ns_last_pid")
            .is_err()
        {
            eprintln!("cannot write ns_last_pid (not root); skipped");
            return;
        }
        for _ in 0..20 {
            let mut old = Command::new("sleep").arg("30").spawn().unwrap();
            let pid = old.id() as Pid;
            let f = StatFile::open(pid, pid).unwrap();
            assert!(f.read().is_ok());
            old.kill().unwrap();
            old.wait().unwrap();
            std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
            let mut new = Command::new("sleep").arg("30").spawn().unwrap();
            let reused = new.id() as Pid == pid;
            if reused {
                assert!(process_stat(pid).is_ok(), "the id names the new process");
                assert!(
                    matches!(f.read(), Err(ProcError::Gone { .. })),
                    "the old thread's open stat file must fail: {:?}",
                    f.read()
                );
            }
            new.kill().unwrap();
            new.wait().unwrap();
            if reused {
                return;
            }
        }
        panic!("the id was never reused in 20 tries");
    }

    #[test]
    fn stat_parses_names_with_spaces_and_parentheses() {
        let line = "42 (a) b (c)) S 7 42 7 0 -1 4194304 98 0 1 0 0 0 0 0 20 0 1 0 2479519 \
                    3133440 406 18446744073709551615 1 2 3 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.id, 42);
        assert_eq!(s.comm, "a) b (c)");
        assert_eq!(
            (s.state, s.ppid, s.starttime, s.processor),
            ('S', 7, 2479519, 1)
        );
        assert!(parse_stat("42 (x) S 7").is_none(), "truncated");
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn reads_this_process_and_its_threads() {
        let me = std::process::id() as Pid;
        assert_eq!(process_stat(me).unwrap().id, me);
        let mine = unsafe { libc::gettid() };
        let st = thread_stat(me, mine).unwrap();
        assert_eq!(st.id, mine);
        assert!(st.runnable(), "this thread is running: {st:?}");
        assert!(pids().unwrap().contains(&me));
        let h = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(300)));
        let tids = tasks(me).unwrap();
        assert!(tids.len() >= 2, "{tids:?}");
        for &t in &tids {
            assert_eq!(tgid_of(t).unwrap(), me);
        }
        thread_switches(me, mine).unwrap();
        // a kept-open stat file re-reads, and says Gone once its thread exited
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = wait.recv();
        });
        let tid = rx.recv().unwrap();
        let f = StatFile::open(me, tid).unwrap();
        assert_eq!(f.read().unwrap().id, tid);
        assert_eq!(f.read().unwrap().id, tid, "re-readable");
        go.send(()).unwrap();
        t.join().unwrap();
        let t0 = std::time::Instant::now();
        while f.read().is_ok() {
            assert!(t0.elapsed().as_secs() < 5, "exited thread still readable");
        }
        assert!(
            matches!(f.read(), Err(ProcError::Gone { .. })),
            "{:?}",
            f.read()
        );
        let before = last_pid().unwrap();
        std::thread::spawn(|| ()).join().unwrap();
        assert_ne!(
            last_pid().unwrap(),
            before,
            "creating a thread moves last_pid"
        );
        assert!(thread_cpu_ns(me, mine).unwrap() > 0);
        h.join().unwrap();
        assert!(matches!(
            process_stat(i32::MAX),
            Err(ProcError::Gone { .. })
        ));
        assert!(matches!(tasks(i32::MAX), Err(ProcError::Gone { .. })));
    }

    #[test]
    fn switch_counts_parse() {
        let s = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(
            parse_switches(s),
            Some(Switches {
                voluntary: 12,
                involuntary: 3
            })
        );
        assert_eq!(parse_switches("Name:\tx\n"), None);
    }
}
