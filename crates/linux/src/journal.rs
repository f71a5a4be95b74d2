//! The journal of every change cachesched makes to a thread's scheduling settings, and
//! how they are put back.
//!
//! A [`Journal`] records a thread's original settings before its first change and the
//! value cachesched set after every change. Restoring puts an original back only where
//! the thread still has the value cachesched set: a setting the program changed itself
//! meanwhile (`taskset`, `renice`, its own calls) is the program's, and is left as it is.
//!
//! With a file ([`Journal::with_file`], `cachesched run --journal FILE`), each change is
//! appended to the file before it is made, so that [`restore_file`] (`cachesched restore
//! FILE`) can undo what a killed daemon left changed. The file is created by the journal
//! (never an existing one, mode 0600) and rewritten compactly when it has grown to twice
//! what its threads need, so its size is bounded by the threads it covers. A journal file
//! is trusted only if it is a regular file owned by the user restoring it (or by root)
//! and writable by nobody else, and each of its entries is applied only to a thread that
//! runs as the file's owner (any thread, if root wrote it), has the same id and start
//! time, and still has the value the file says cachesched set.

use crate::procfs::Pid;
use crate::sched::{
    affinity, attr, may_lower_nice_to, nice, set_affinity, set_nice, set_slice, SchedError,
    Settings, Tid,
};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The largest journal file [`restore_file`] reads. A journal is rewritten compactly when
/// it reaches twice what its threads need (about 200 bytes per changed setting), so only
/// a journal of hundreds of thousands of threads comes near it.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The values cachesched set on a thread (`None`: that setting was not changed).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetTo {
    /// The CPUs it was restricted to, as the kernel reported them after the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Vec<usize>>,
    /// The fair-class slice request in ns, as read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_ns: Option<u64>,
    /// The nice value, as read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
}

impl SetTo {
    fn any(&self) -> bool {
        self.affinity.is_some() || self.slice_ns.is_some() || self.nice.is_some()
    }

    /// Only `which` of these values.
    fn get(&self, which: Which) -> SetTo {
        match which {
            Which::Affinity => SetTo {
                affinity: self.affinity.clone(),
                ..SetTo::default()
            },
            Which::Slice => SetTo {
                slice_ns: self.slice_ns,
                ..SetTo::default()
            },
            Which::Nice => SetTo {
                nice: self.nice,
                ..SetTo::default()
            },
        }
    }

    /// Takes `which` from `v`.
    fn put(&mut self, which: Which, v: &SetTo) {
        match which {
            Which::Affinity => self.affinity = v.affinity.clone(),
            Which::Slice => self.slice_ns = v.slice_ns,
            Which::Nice => self.nice = v.nice,
        }
    }

    /// Whether `which` is the same here and in `v`.
    fn same(&self, which: Which, v: &SetTo) -> bool {
        match which {
            Which::Affinity => self.affinity == v.affinity,
            Which::Slice => self.slice_ns == v.slice_ns,
            Which::Nice => self.nice == v.nice,
        }
    }
}

/// One of the three settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Affinity,
    Slice,
    Nice,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Affinity => "affinity",
            Which::Slice => "slice",
            Which::Nice => "nice",
        }
    }

    fn parse(s: &str) -> Option<Which> {
        match s {
            "affinity" => Some(Which::Affinity),
            "slice" => Some(Which::Slice),
            "nice" => Some(Which::Nice),
            _ => None,
        }
    }
}

/// A journaled thread: its original settings and what cachesched set.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    orig: Settings,
    /// The thread's start time (clock ticks after boot), naming it across tid reuse.
    start: Option<u64>,
    /// Its process (id and start time), where known: `restore --pid` looks for threads
    /// of the same process that were born after the journal's last line.
    process: Option<(Pid, u64)>,
    set: SetTo,
    /// For an entry read from a file of an earlier build, which recorded no values: the
    /// settings changed, to be restored whatever their current value.
    legacy: [bool; 3],
}

/// One line of a journal file: a thread (tid and start time), its original settings, the
/// setting changed and the value it was (or is about to be) set to.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLine {
    tid: Tid,
    start: u64,
    orig: Settings,
    changed: String,
    /// The thread's process, where the writer knew it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process: Option<Pid>,
    /// That process's start time (clock ticks after boot), naming it across id reuse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process_start: Option<u64>,
    /// Absent in journals written before values were recorded.
    #[serde(default)]
    set: Option<SetTo>,
}

/// What restoring did.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Threads with at least one setting put back.
    pub restored: usize,
    /// Threads that had exited (nothing to restore).
    pub gone: usize,
    /// Settings left as they are because the program changed them after cachesched did
    /// (their current value is no longer the one cachesched set).
    pub kept: usize,
    /// Failures, per thread.
    pub failed: Vec<(Tid, SchedError)>,
    /// Threads still being created when a stop gave up rescanning for them (their
    /// inherited settings may stay changed).
    pub unsettled: usize,
}

impl RestoreReport {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: RestoreReport) {
        self.restored += other.restored;
        self.gone += other.gone;
        self.kept += other.kept;
        self.failed.extend(other.failed);
        self.unsettled += other.unsettled;
    }
}

/// How one setting's restore went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// The original is back.
    Yes,
    /// cachesched had not changed it.
    Unchanged,
    /// The program changed it since: left as the program set it.
    Kept,
}

/// The open journal file and how many lines it holds.
#[derive(Debug)]
struct JournalFile {
    file: std::fs::File,
    path: PathBuf,
    lines: usize,
    /// A write failed part way (a full disk): the next line starts on a line of its own.
    torn: bool,
}

/// Every change made to threads, with the original values to restore. Changes go
/// through the journal so that nothing is changed without its original being recorded
/// first, and only what was changed, and not changed again by the program since, is put
/// back.
///
/// Originals are normally read from the thread before the first change. A thread
/// created by a thread that cachesched had already changed inherits the changed values,
/// so its true original is its creator's: [`Journal::track_inherited`] records that, and
/// records the inherited values as changes to undo.
#[derive(Debug, Default)]
pub struct Journal {
    entries: BTreeMap<Tid, Entry>,
    file: Option<JournalFile>,
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
            .filter(|e| e.set.any() || e.legacy.iter().any(|&b| b))
            .count()
    }

    /// The recorded original settings of `tid`.
    pub fn original(&self, tid: Tid) -> Option<&Settings> {
        self.entries.get(&tid).map(|e| &e.orig)
    }

    /// What cachesched set on `tid`.
    pub fn set_values(&self, tid: Tid) -> Option<&SetTo> {
        self.entries.get(&tid).map(|e| &e.set)
    }

    /// A journal that also appends every change to `path`, so that [`restore_file`] can
    /// undo the changes if this process dies without restoring (SIGKILL; power loss ends
    /// the threads too). The file is created here (mode 0600, never through a symbolic
    /// link); an existing file is refused: if it is a journal this user may restore, it
    /// is one a run did not finish, to be restored first, and otherwise it is not
    /// cachesched's to touch.
    pub fn with_file(path: &Path) -> Result<Journal, SchedError> {
        let file = create_private(path).map_err(|e| {
            let reason = if e.kind() == io::ErrorKind::AlreadyExists {
                match std::fs::symlink_metadata(path)
                    .map_err(|e| e.to_string())
                    .and_then(|m| trusted(&m))
                {
                    Ok(()) => "it exists: a run that did not finish left it; run `cachesched restore` on it first".to_string(),
                    Err(why) => format!(
                        "it exists and is not a journal you may restore ({why}); it is left alone: choose another path"
                    ),
                }
            } else {
                e.to_string()
            };
            SchedError::JournalFile {
                path: path.display().to_string(),
                source: io::Error::new(e.kind(), reason),
            }
        })?;
        Ok(Journal {
            entries: BTreeMap::new(),
            file: Some(JournalFile {
                file,
                path: path.to_path_buf(),
                lines: 0,
                torn: false,
            }),
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
            process: None,
            set: SetTo::default(),
            legacy: [false; 3],
        });
    }

    /// Tracks a thread that inherited settings cachesched changed on its creator: `orig`
    /// are its originals (its creator's, where changed), `actual` what it has now. Each
    /// setting where the two differ is recorded, and journalled, as a change cachesched
    /// made to `actual`'s value, so that it is undone like one.
    pub fn track_inherited(
        &mut self,
        tid: Tid,
        process: Option<(Pid, u64)>,
        orig: Settings,
        start: Option<u64>,
        actual: &Settings,
    ) -> Result<(), SchedError> {
        let inherited = SetTo {
            affinity: (actual.affinity != orig.affinity).then(|| actual.affinity.clone()),
            slice_ns: (actual.slice_ns != orig.slice_ns).then_some(actual.slice_ns),
            nice: (actual.nice != orig.nice).then_some(actual.nice),
        };
        self.track_started(tid, orig, start);
        if let Some(e) = self.entries.get_mut(&tid) {
            e.process = e.process.or(process);
        }
        if let Some(v) = inherited.affinity {
            self.record(tid, Which::Affinity, SetTo::affinity_of(v))?;
        }
        if let Some(v) = inherited.slice_ns {
            self.record(tid, Which::Slice, SetTo::slice_of(v))?;
        }
        if let Some(v) = inherited.nice {
            self.record(tid, Which::Nice, SetTo::nice_of(v))?;
        }
        Ok(())
    }

    fn entry(&mut self, tid: Tid) -> Result<&mut Entry, SchedError> {
        if !self.entries.contains_key(&tid) {
            self.track(tid, Settings::read(tid)?);
        }
        Ok(self.entries.get_mut(&tid).expect("tracked above"))
    }

    /// Records that `which` of `tid` now has the value in `v` (only that field set),
    /// appending it to the file if it differs from what was recorded.
    fn record(&mut self, tid: Tid, which: Which, v: SetTo) -> Result<(), SchedError> {
        if self.entry(tid)?.set.same(which, &v) {
            return Ok(());
        }
        self.log(tid, which, &v)?;
        self.entries
            .get_mut(&tid)
            .expect("entry")
            .set
            .put(which, &v);
        self.compact_if_grown()
    }

    /// Makes a change of `which` setting of `tid` to `want` with `change`: the value is
    /// journalled before the change (a SIGKILL between the two must find it in the
    /// file) and recorded as read back by `read` after it (the kernel may clamp it),
    /// journalled again if that differs. A refused change leaves the record as it was.
    fn change(
        &mut self,
        tid: Tid,
        which: Which,
        want: SetTo,
        change: impl FnOnce() -> Result<(), SchedError>,
        read: impl FnOnce() -> Result<SetTo, SchedError>,
    ) -> Result<(), SchedError> {
        let prev = self.entry(tid)?.set.get(which);
        self.record(tid, which, want.clone())?;
        if let Err(e) = change() {
            if prev.any() {
                // the thread keeps the value set before: the file says so again
                self.record(tid, which, prev)?;
            } else {
                // never changed: nothing to restore (a file line saying `want` is
                // harmless, the thread's value is not `want`)
                self.entries
                    .get_mut(&tid)
                    .expect("entry")
                    .set
                    .put(which, &prev);
            }
            return Err(e);
        }
        match read() {
            Ok(got) => self.record(tid, which, got),
            Err(SchedError::Gone { tid }) => Err(SchedError::Gone { tid }),
            Err(_) => Ok(()),
        }
    }

    /// Appends `tid`'s originals and the value `which` is set to, to the journal file.
    fn log(&mut self, tid: Tid, which: Which, v: &SetTo) -> Result<(), SchedError> {
        let Some(start) = self.start_of(tid)? else {
            return Ok(());
        };
        let e = &self.entries[&tid];
        let line = FileLine {
            tid,
            start,
            orig: e.orig.clone(),
            changed: which.name().to_string(),
            process: e.process.map(|p| p.0),
            process_start: e.process.map(|p| p.1),
            set: Some(v.clone()),
        };
        let f = self.file.as_mut().expect("start_of found a file");
        let mut text = if f.torn {
            "\n".to_string()
        } else {
            String::new()
        };
        text += &(serde_json::to_string(&line).expect("plain data") + "\n");
        if let Err(source) = f.file.write_all(text.as_bytes()) {
            f.torn = true;
            return Err(SchedError::JournalFile {
                path: f.path.display().to_string(),
                source,
            });
        }
        f.torn = false;
        f.lines += 1;
        Ok(())
    }

    /// The start time of `tid` for its file line (`None` without a file), read from
    /// `/proc` when it was not given.
    fn start_of(&mut self, tid: Tid) -> Result<Option<u64>, SchedError> {
        if self.file.is_none() {
            return Ok(None);
        }
        let e = self.entries.get_mut(&tid).expect("entry");
        if e.start.is_none() {
            match crate::procfs::thread_stat(tid, tid) {
                Ok(st) => e.start = Some(st.starttime),
                Err(_) => return Err(SchedError::Gone { tid }),
            }
        }
        Ok(e.start)
    }

    /// The file lines that describe the journal as it is now.
    fn lines_now(&self) -> Vec<FileLine> {
        let mut out = Vec::new();
        for (&tid, e) in &self.entries {
            let Some(start) = e.start else { continue };
            let mut push = |which: Which, v: SetTo| {
                out.push(FileLine {
                    tid,
                    start,
                    orig: e.orig.clone(),
                    changed: which.name().to_string(),
                    process: e.process.map(|p| p.0),
                    process_start: e.process.map(|p| p.1),
                    set: Some(v),
                })
            };
            if let Some(v) = &e.set.affinity {
                push(Which::Affinity, SetTo::affinity_of(v.clone()));
            }
            if let Some(v) = e.set.slice_ns {
                push(Which::Slice, SetTo::slice_of(v));
            }
            if let Some(v) = e.set.nice {
                push(Which::Nice, SetTo::nice_of(v));
            }
        }
        out
    }

    /// Rewrites the file with one line per changed setting once it holds more than
    /// twice that (and 1,024 lines): written to a new private file beside it, then
    /// renamed over it, so that the file is whole at every moment.
    fn compact_if_grown(&mut self) -> Result<(), SchedError> {
        let Some(f) = &self.file else { return Ok(()) };
        let needed: usize = self
            .entries
            .values()
            .map(|e| {
                e.set.affinity.is_some() as usize
                    + e.set.slice_ns.is_some() as usize
                    + e.set.nice.is_some() as usize
            })
            .sum();
        if f.lines <= 1024 + 2 * needed {
            return Ok(());
        }
        let path = f.path.clone();
        let err = |source| SchedError::JournalFile {
            path: path.display().to_string(),
            source,
        };
        let lines = self.lines_now();
        let mut text = String::new();
        for l in &lines {
            text += &(serde_json::to_string(l).expect("plain data") + "\n");
        }
        let (mut file, tmp) = create_beside(&path).map_err(err)?;
        if let Err(e) = file
            .write_all(text.as_bytes())
            .and_then(|_| file.sync_data())
        {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        self.file = Some(JournalFile {
            file,
            path,
            lines: lines.len(),
            torn: false,
        });
        Ok(())
    }

    /// Restricts `tid` to `cpus` (OS numbers), recording its original first.
    pub fn set_affinity(&mut self, tid: Tid, cpus: &[usize]) -> Result<(), SchedError> {
        let mut want: Vec<usize> = cpus.to_vec();
        want.sort_unstable();
        want.dedup();
        self.change(
            tid,
            Which::Affinity,
            SetTo::affinity_of(want),
            || set_affinity(tid, cpus),
            || affinity(tid).map(SetTo::affinity_of),
        )
    }

    /// Sets `tid`'s slice (`None`: the kernel's default), recording its original first.
    pub fn set_slice(&mut self, tid: Tid, slice_ns: Option<u64>) -> Result<(), SchedError> {
        self.change(
            tid,
            Which::Slice,
            SetTo::slice_of(slice_ns.unwrap_or(0)),
            || set_slice(tid, slice_ns),
            || attr(tid).map(|a| SetTo::slice_of(a.slice_ns)),
        )
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
        self.change(
            tid,
            Which::Nice,
            SetTo::nice_of(value.clamp(-20, 19)),
            || set_nice(tid, value),
            || nice(tid).map(SetTo::nice_of),
        )
    }

    /// Puts `tid`'s original affinity back, if cachesched changed it and the program has
    /// not changed it since.
    pub fn restore_affinity(&mut self, tid: Tid) -> Result<Restored, SchedError> {
        self.restore_one(tid, Which::Affinity)
    }

    /// Puts `tid`'s original slice back, as [`Journal::restore_affinity`].
    pub fn restore_slice(&mut self, tid: Tid) -> Result<Restored, SchedError> {
        self.restore_one(tid, Which::Slice)
    }

    /// Puts `tid`'s original nice value back, as [`Journal::restore_affinity`].
    pub fn restore_nice(&mut self, tid: Tid) -> Result<Restored, SchedError> {
        self.restore_one(tid, Which::Nice)
    }

    fn restore_one(&mut self, tid: Tid, which: Which) -> Result<Restored, SchedError> {
        let Some(e) = self.entries.get_mut(&tid) else {
            return Ok(Restored::Unchanged);
        };
        let orig = Val::of(&e.orig, which);
        let r = restore_setting(tid, e, which)?;
        if r == Restored::Yes {
            // the file says so: the value cachesched set is the original now, so that a
            // restore after a kill leaves a later change of the program's alone
            self.log(tid, which, &orig.as_set(which))?;
        }
        Ok(r)
    }

    /// Forgets a thread that exited.
    pub fn forget(&mut self, tid: Tid) {
        self.entries.remove(&tid);
    }

    /// Puts every changed setting back (nice first, so that a restored slice is set at
    /// the original priority) where the program has not changed it since, and empties
    /// the journal; a journal file is removed when nothing failed.
    pub fn restore_all(&mut self) -> RestoreReport {
        let rep = self.restore_all_keeping_file();
        if rep.failed.is_empty() {
            self.remove_file();
        }
        rep
    }

    /// [`Journal::restore_all`], keeping the journal file (for changes found later).
    pub fn restore_all_keeping_file(&mut self) -> RestoreReport {
        let mut rep = RestoreReport::default();
        for (tid, mut e) in std::mem::take(&mut self.entries) {
            restore_entry(tid, &mut e, &mut rep);
        }
        rep
    }

    /// Removes the journal file, once everything it records has been restored.
    pub fn remove_file(&mut self) {
        if let Some(f) = self.file.take() {
            let _ = std::fs::remove_file(f.path);
        }
    }
}

impl SetTo {
    fn affinity_of(v: Vec<usize>) -> SetTo {
        SetTo {
            affinity: Some(v),
            ..SetTo::default()
        }
    }

    fn slice_of(v: u64) -> SetTo {
        SetTo {
            slice_ns: Some(v),
            ..SetTo::default()
        }
    }

    fn nice_of(v: i32) -> SetTo {
        SetTo {
            nice: Some(v),
            ..SetTo::default()
        }
    }
}

/// Restores one setting of a journaled thread: the original goes back if cachesched
/// changed the setting and its current value is still the one cachesched set.
fn restore_setting(tid: Tid, e: &mut Entry, which: Which) -> Result<Restored, SchedError> {
    let unconditional = e.legacy[which as usize];
    let set = Val::set(&e.set, which);
    if set.is_none() && !unconditional {
        return Ok(Restored::Unchanged);
    }
    let orig = Val::of(&e.orig, which);
    let r = match set {
        Some(set) if Val::current(tid, which)? != set => Restored::Kept,
        _ => {
            orig.apply(tid, which)?;
            Restored::Yes
        }
    };
    // done (or the program's now): forgotten only once it is, so that a failed restore
    // can be tried again
    e.legacy[which as usize] = false;
    e.set.put(which, &SetTo::default());
    Ok(r)
}

/// Restores every setting of one thread (nice, slice, affinity) into `rep`.
fn restore_entry(tid: Tid, e: &mut Entry, rep: &mut RestoreReport) {
    let mut any = false;
    let mut failed = None;
    for which in [Which::Nice, Which::Slice, Which::Affinity] {
        match restore_setting(tid, e, which) {
            Ok(Restored::Yes) => any = true,
            Ok(Restored::Kept) => rep.kept += 1,
            Ok(Restored::Unchanged) => {}
            Err(SchedError::Gone { .. }) => {
                rep.gone += 1;
                return;
            }
            // the other settings are still restored
            Err(err) => failed = failed.or(Some(err)),
        }
    }
    match failed {
        Some(err) => rep.failed.push((tid, err)),
        None if any => rep.restored += 1,
        None => {}
    }
}

/// Creates `path` for writing: new (never an existing file, nor through a symbolic
/// link), mode 0600.
fn create_private(path: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create_new(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Creates a new private file beside `path` (same directory, so that a rename replaces
/// `path` atomically), trying other names if one is taken.
fn create_beside(path: &Path) -> io::Result<(std::fs::File, PathBuf)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut last = None;
    for i in 0..100u32 {
        let tmp = dir.join(format!(".{name}.{}.{i}.tmp", std::process::id()));
        match create_private(&tmp) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("tried"))
}

/// Whether a journal file with this metadata may be trusted by this process: a regular
/// file, owned by this user or root, writable by no one else. `Err` says why not.
fn trusted(m: &std::fs::Metadata) -> Result<(), String> {
    if m.file_type().is_symlink() {
        return Err("it is a symbolic link, which a journal never is".into());
    }
    if !m.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me && m.uid() != 0 {
        return Err(format!(
            "it belongs to uid {}, not to you (uid {me}) or root: only its writer may restore it",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "its mode {:o} lets others write it (`cachesched run` creates journals with mode 600)",
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Why a journal file could not be restored at all.
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
    /// It is not a file this user may restore.
    #[error("journal file {path} is refused: {reason}; nothing was changed")]
    Untrusted {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// It is larger than any journal cachesched writes.
    #[error("journal file {path} has more than {limit} bytes, more than any journal cachesched writes; nothing was changed")]
    TooLarge {
        /// The file.
        path: String,
        /// [`MAX_FILE_BYTES`].
        limit: u64,
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
    /// Lines that are not journal entries: line number (1-based) and what is wrong.
    pub invalid: Vec<(usize, String)>,
    /// Entries not applied because their thread may not be changed from this journal.
    pub refused: Vec<(Tid, String)>,
    /// Whether the last line was cut short (the writer died writing it, before making the
    /// change it announced) and was ignored.
    pub cut_last_line: bool,
    /// Whether the file was removed: only when every entry was valid and restored, kept
    /// or gone.
    pub removed: bool,
    /// Threads the file did not name that were reset by the sweep of `restore --pid` or
    /// `--cgroup`.
    pub swept: usize,
}

/// One setting's value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Val {
    Cpus(Vec<usize>),
    Num(i64),
}

impl Val {
    fn of(s: &Settings, which: Which) -> Val {
        match which {
            Which::Affinity => Val::Cpus(s.affinity.clone()),
            Which::Slice => Val::Num(s.slice_ns as i64),
            Which::Nice => Val::Num(s.nice as i64),
        }
    }

    fn set(s: &SetTo, which: Which) -> Option<Val> {
        match which {
            Which::Affinity => s.affinity.clone().map(Val::Cpus),
            Which::Slice => s.slice_ns.map(|v| Val::Num(v as i64)),
            Which::Nice => s.nice.map(|v| Val::Num(v as i64)),
        }
    }

    /// This value of `which` as [`SetTo`].
    fn as_set(&self, which: Which) -> SetTo {
        match (which, self) {
            (Which::Affinity, Val::Cpus(c)) => SetTo::affinity_of(c.clone()),
            (Which::Slice, Val::Num(n)) => SetTo::slice_of(*n as u64),
            (Which::Nice, Val::Num(n)) => SetTo::nice_of(*n as i32),
            _ => SetTo::default(),
        }
    }

    /// `tid`'s current value of `which`.
    fn current(tid: Tid, which: Which) -> Result<Val, SchedError> {
        Ok(match which {
            Which::Affinity => Val::Cpus(affinity(tid)?),
            Which::Slice => Val::Num(attr(tid)?.slice_ns as i64),
            Which::Nice => Val::Num(nice(tid)? as i64),
        })
    }

    /// Gives `tid` this value of `which`.
    fn apply(&self, tid: Tid, which: Which) -> Result<(), SchedError> {
        match (which, self) {
            (Which::Affinity, Val::Cpus(c)) => set_affinity(tid, c),
            (Which::Slice, Val::Num(n)) => set_slice(tid, (*n > 0).then_some(*n as u64)),
            (Which::Nice, Val::Num(n)) => set_nice(tid, *n as i32),
            _ => Ok(()),
        }
    }
}

/// What a journal says cachesched set on each process's threads, and the originals it
/// recorded there, per setting.
#[derive(Debug, Default)]
struct Known {
    set: BTreeMap<((Pid, u64), usize), std::collections::BTreeSet<Val>>,
    orig: BTreeMap<((Pid, u64), usize), std::collections::BTreeSet<Val>>,
}

impl Known {
    fn of<'a>(entries: impl Iterator<Item = &'a Entry>) -> Known {
        let mut k = Known::default();
        for e in entries {
            let Some(pid) = e.process else { continue };
            for w in [Which::Affinity, Which::Slice, Which::Nice] {
                if let Some(v) = Val::set(&e.set, w) {
                    k.set.entry((pid, w as usize)).or_default().insert(v);
                    k.orig
                        .entry((pid, w as usize))
                        .or_default()
                        .insert(Val::of(&e.orig, w));
                }
            }
        }
        k
    }

    /// The original to give back to a thread of `process` (id and start time: not a
    /// process that took the id since) whose `which` is `now`: only if cachesched set
    /// `now` on a thread of that process and recorded one original there.
    fn original_if_set(&self, process: (Pid, u64), which: Which, now: &Val) -> Option<Val> {
        let key = (process, which as usize);
        if !self.set.get(&key)?.contains(now) {
            return None;
        }
        let origs = self.orig.get(&key)?;
        (origs.len() == 1 && !origs.contains(now)).then(|| origs.iter().next().cloned())?
    }
}

/// Restores what a journal file says cachesched changed, on the threads still alive
/// (the same id and start time) that run as the file's owner (any, if root owns it),
/// where the value is still the one cachesched set. Every valid entry is restored; each
/// invalid line and each refused entry is reported; the file is removed only when every
/// entry was restored (or found gone or changed by its program). A last line cut short
/// by the writer's death is ignored: the change it announced was not made.
///
/// With `sweep` (listing the threads of the processes or cgroup `cachesched run`
/// managed, as `(tid, process)`), threads the file does not name — born after its last
/// line, when the daemon was killed before it saw them — are reset too, setting by
/// setting, where the thread has a value cachesched set on another thread of its
/// process and every journalled thread of that process had the same original, which it
/// gets back. A thread created while its creator was being reset may have inherited the
/// changed value: the threads are listed again until a listing shows none not seen
/// (at most [`SWEEPS`] times).
pub fn restore_file(
    path: &Path,
    sweep: Option<&dyn Fn() -> Vec<(Tid, Pid)>>,
) -> Result<FileRestoreReport, JournalFileError> {
    let shown = path.display().to_string();
    let read_err = |source| JournalFileError::Read {
        path: shown.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                JournalFileError::Untrusted {
                    path: shown.clone(),
                    reason: "it is a symbolic link, which a journal never is".into(),
                }
            } else {
                read_err(e)
            }
        })?;
    let meta = file.metadata().map_err(read_err)?;
    let owner = meta.uid();
    trusted(&meta).map_err(|reason| JournalFileError::Untrusted {
        path: shown.clone(),
        reason,
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(JournalFileError::TooLarge {
            path: shown,
            limit: MAX_FILE_BYTES,
        });
    }
    let mut out = FileRestoreReport::default();
    let entries = parse(&bytes, &mut out);
    let known = Known::of(entries.values());
    let named: std::collections::BTreeSet<Tid> = entries.keys().map(|k| k.0).collect();
    let may_change = |tid: Tid, out: &mut FileRestoreReport| -> bool {
        if owner == 0 {
            return true;
        }
        match crate::procfs::thread_uids(tid) {
            Ok((real, eff)) if real == owner && eff == owner => true,
            Ok((real, eff)) => {
                out.refused.push((
                    tid,
                    format!("the thread runs as uid {real} (effective {eff}), the journal belongs to uid {owner}"),
                ));
                false
            }
            Err(_) => false,
        }
    };
    for ((tid, start), mut e) in entries {
        match crate::procfs::thread_stat(tid, tid) {
            Ok(st) if st.starttime == start => {}
            Ok(_) => {
                out.reused += 1;
                out.report.gone += 1;
                continue;
            }
            Err(_) => {
                out.report.gone += 1;
                continue;
            }
        }
        if !may_change(tid, &mut out) {
            continue;
        }
        restore_entry(tid, &mut e, &mut out.report);
    }
    let mut seen = named;
    for _ in 0..SWEEPS {
        let Some(list) = sweep else { break };
        let fresh: Vec<(Tid, Pid)> = list()
            .into_iter()
            .filter(|(t, _)| seen.insert(*t))
            .collect();
        if fresh.is_empty() {
            break;
        }
        sweep_threads(&fresh, &known, &mut out, &may_change);
    }

    if out.invalid.is_empty() && out.refused.is_empty() && out.report.failed.is_empty() {
        // only the file that was read: not one put in its place meanwhile
        let same = std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        out.removed = same && std::fs::remove_file(path).is_ok();
    }
    Ok(out)
}

/// How many times [`restore_file`] lists the threads to sweep.
pub const SWEEPS: usize = 20;

/// Resets the threads of `fresh` the journal did not name (see [`restore_file`]).
fn sweep_threads(
    fresh: &[(Tid, Pid)],
    known: &Known,
    out: &mut FileRestoreReport,
    may_change: &dyn Fn(Tid, &mut FileRestoreReport) -> bool,
) {
    for &(tid, pid) in fresh {
        let (Ok(now), Ok(st)) = (Settings::read(tid), crate::procfs::process_stat(pid)) else {
            continue;
        };
        let process = (pid, st.starttime);
        let resets: Vec<(Which, Val)> = [Which::Nice, Which::Slice, Which::Affinity]
            .into_iter()
            .filter_map(|w| {
                known
                    .original_if_set(process, w, &Val::of(&now, w))
                    .map(|o| (w, o))
            })
            .collect();
        if resets.is_empty() || !may_change(tid, out) {
            continue;
        }
        match resets.iter().try_for_each(|(w, o)| o.apply(tid, *w)) {
            Ok(()) => out.swept += 1,
            Err(SchedError::Gone { .. }) => {}
            Err(e) => out.report.failed.push((tid, e)),
        }
    }
}

/// Whether `text`, a last line without its newline, is the start of an entry the writer
/// did not finish (as far as it goes, it reads as one).
fn is_cut_entry(text: &str) -> bool {
    const HEAD: &str = "{\"tid\":";
    text.starts_with(HEAD) || HEAD.starts_with(text)
}

/// The entries of a journal file's bytes, by thread id and start time (a tid reused by
/// a later thread is a separate entry); invalid lines and a cut last line go to `out`.
fn parse(bytes: &[u8], out: &mut FileRestoreReport) -> BTreeMap<(Tid, u64), Entry> {
    let mut entries: BTreeMap<(Tid, u64), Entry> = BTreeMap::new();
    let ends_whole = bytes.last().is_none_or(|&b| b == b'\n');
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let n = lines.len();
    for (i, raw) in lines.into_iter().enumerate() {
        let last = i + 1 == n;
        if last && raw.is_empty() {
            break;
        }
        let text = match std::str::from_utf8(raw) {
            Ok(t) if !t.contains('\0') => t,
            _ => {
                out.invalid
                    .push((i + 1, "not text (NUL or non-UTF-8 bytes)".into()));
                continue;
            }
        };
        let line: FileLine = match serde_json::from_str(text) {
            Ok(l) => l,
            Err(_) if last && !ends_whole && is_cut_entry(text) => {
                out.cut_last_line = true;
                break;
            }
            Err(e) => {
                out.invalid.push((i + 1, e.to_string()));
                continue;
            }
        };
        let Some(which) = Which::parse(&line.changed) else {
            out.invalid
                .push((i + 1, format!("unknown setting '{}'", line.changed)));
            continue;
        };
        let e = entries.entry((line.tid, line.start)).or_insert(Entry {
            orig: line.orig,
            start: Some(line.start),
            process: line.process.zip(line.process_start),
            set: SetTo::default(),
            legacy: [false; 3],
        });
        match line.set {
            // the last value a line gives for the setting is what cachesched set
            Some(v) if v.get(which).any() => e.set.put(which, &v),
            Some(_) => out.invalid.push((
                i + 1,
                format!(
                    "the line changes '{}' but gives no value for it",
                    line.changed
                ),
            )),
            None => e.legacy[which as usize] = true,
        }
    }
    entries
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

    fn tmp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cachesched-journal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn journal_changes_and_restores_a_real_process() {
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let before_attr = attr(tid).unwrap();
        let mut j = Journal::new();
        j.set_affinity(tid, &[0]).unwrap();
        assert_eq!(affinity(tid).unwrap(), vec![0]);
        j.set_nice(tid, before.nice + 3).unwrap();
        assert_eq!(nice(tid).unwrap(), before.nice + 3);
        j.set_slice(tid, Some(8_000_000)).unwrap();
        let during = attr(tid).unwrap();
        assert_eq!(
            during.nice,
            before.nice + 3,
            "the slice keeps the nice value"
        );
        if crate::sched::kernel_honours_slices() == Some(true) {
            assert_eq!(during.slice_ns, 8_000_000);
        }
        // a second change keeps the first original
        j.set_affinity(tid, &[0]).unwrap();
        assert_eq!(j.set_values(tid).unwrap().affinity, Some(vec![0]));
        let rep = j.restore_all();
        assert_eq!(
            (rep.restored, rep.gone, rep.kept),
            (1, 0, 0),
            "{:?}",
            rep.failed
        );
        assert_eq!(Settings::read(tid).unwrap(), before);
        assert_eq!(attr(tid).unwrap().policy, before_attr.policy);
        c.kill().unwrap();
        c.wait().unwrap();
    }

    #[test]
    fn what_the_program_changed_itself_is_left_as_it_set_it() {
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let mut j = Journal::new();
        j.set_nice(tid, before.nice + 2).unwrap();
        j.set_affinity(tid, &[0]).unwrap();
        // the program renices itself while managed: not ours to undo
        set_nice(tid, before.nice + 5).unwrap();
        let rep = j.restore_all();
        assert_eq!((rep.restored, rep.kept), (1, 1), "{:?}", rep.failed);
        assert_eq!(nice(tid).unwrap(), before.nice + 5, "the program's value");
        assert_eq!(affinity(tid).unwrap(), before.affinity, "ours, restored");
        // one it pinned itself: the same
        set_nice(tid, before.nice).unwrap();
        let mut j = Journal::new();
        j.set_affinity(tid, &[0]).unwrap();
        let all: Vec<usize> = before.affinity.clone();
        set_affinity(tid, &all[all.len() - 1..]).unwrap();
        let rep = j.restore_all();
        assert_eq!((rep.restored, rep.kept), (0, 1));
        assert_eq!(affinity(tid).unwrap(), all[all.len() - 1..].to_vec());
        set_affinity(tid, &before.affinity).unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// A setting put back during the run is journalled as back: a restore after a
    /// later kill leaves a value the program set afterwards alone, even the one
    /// cachesched had used. Fails if the file still says cachesched's value is set.
    #[test]
    fn a_restore_during_the_run_is_journalled() {
        let dir = tmp("in-run");
        let (mut c, tid) = child();
        let n = nice(tid).unwrap();
        let path = dir.join("j");
        let mut j = Journal::with_file(&path).unwrap();
        j.set_nice(tid, n + 3).unwrap();
        assert_eq!(j.restore_nice(tid).unwrap(), Restored::Yes);
        assert_eq!(nice(tid).unwrap(), n);
        set_nice(tid, n + 3).unwrap(); // the program's own choice
        std::mem::forget(j);
        let r = restore_file(&path, None).unwrap();
        assert!(r.report.failed.is_empty(), "{r:?}");
        assert_eq!(nice(tid).unwrap(), n + 3, "the program's value was undone");
        c.kill().unwrap();
        c.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn inherited_settings_are_undone_like_changes() {
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        // the thread "inherited" a pinned mask and a raised nice value from its creator
        set_affinity(tid, &[0]).unwrap();
        set_nice(tid, before.nice + 4).unwrap();
        let actual = Settings::read(tid).unwrap();
        let mut j = Journal::new();
        j.track_inherited(tid, None, before.clone(), None, &actual)
            .unwrap();
        assert_eq!(j.changed(), 1);
        assert_eq!(j.original(tid), Some(&before));
        let rep = j.restore_all();
        assert_eq!(rep.restored, 1, "{:?}", rep.failed);
        assert_eq!(Settings::read(tid).unwrap(), before);
        c.kill().unwrap();
        c.wait().unwrap();
    }

    #[test]
    fn a_journal_file_restores_only_the_same_thread_and_tolerates_a_cut_last_line() {
        let dir = tmp("same");
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let start = crate::procfs::thread_stat(tid, tid).unwrap().starttime;
        // the same thread: restored; a cut last line (the writer died mid-line): ignored
        let path = dir.join("a");
        let mut j = Journal::with_file(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        j.track_started(tid, before.clone(), Some(start));
        j.set_nice(tid, before.nice + 3).unwrap();
        std::mem::forget(j); // "killed": nothing restored
        let mut text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        text += "{\"tid\": 1, \"sta";
        std::fs::write(&path, &text).unwrap();
        let e = Journal::with_file(&path).unwrap_err().to_string();
        assert!(e.contains("run `cachesched restore` on it first"), "{e}");
        let r = restore_file(&path, None).unwrap();
        assert_eq!((r.report.restored, r.reused, r.cut_last_line), (1, 0, true));
        assert!(r.invalid.is_empty() && r.removed, "{r:?}");
        assert_eq!(Settings::read(tid).unwrap(), before);
        assert!(!path.exists());
        // an id that now names another thread (other start time) is left alone
        let path = dir.join("b");
        let mut j = Journal::with_file(&path).unwrap();
        j.track_started(tid, before.clone(), Some(start + 1));
        j.set_nice(tid, before.nice + 3).unwrap();
        std::mem::forget(j);
        let r = restore_file(&path, None).unwrap();
        assert_eq!((r.report.restored, r.reused), (0, 1));
        assert_eq!(nice(tid).unwrap(), before.nice + 3);
        set_nice(tid, before.nice).unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_lines_are_reported_the_rest_restored_and_the_file_kept() {
        let dir = tmp("bad");
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let path = dir.join("j");
        let mut j = Journal::with_file(&path).unwrap();
        j.set_nice(tid, before.nice + 3).unwrap();
        j.set_affinity(tid, &[0]).unwrap();
        std::mem::forget(j);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        // a bad line in the middle, and a whole file of NUL bytes
        lines.insert(1, "garbage");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let r = restore_file(&path, None).unwrap();
        assert_eq!(r.invalid.len(), 1, "{r:?}");
        assert_eq!(r.invalid[0].0, 2);
        assert_eq!(r.report.restored, 1, "both valid entries restored");
        assert_eq!(Settings::read(tid).unwrap(), before);
        assert!(
            !r.removed && path.exists(),
            "kept: not every entry was valid"
        );
        std::fs::write(&path, [0u8; 4096]).unwrap();
        let r = restore_file(&path, None).unwrap();
        assert_eq!((r.invalid.len(), r.removed), (1, false), "{r:?}");
        assert!(r.invalid[0].1.contains("NUL"), "{r:?}");
        assert!(path.exists());
        c.kill().unwrap();
        c.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_journal_anyone_else_could_have_written_is_refused_and_nothing_changes() {
        let dir = tmp("trust");
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let start = crate::procfs::thread_stat(tid, tid).unwrap().starttime;
        let line = serde_json::to_string(&FileLine {
            tid,
            start,
            orig: Settings {
                nice: before.nice + 7,
                ..before.clone()
            },
            changed: "nice".into(),
            process: None,
            process_start: None,
            set: Some(SetTo::nice_of(before.nice)),
        })
        .unwrap()
            + "\n";
        // writable by others
        let path = dir.join("open");
        std::fs::write(&path, &line).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        let e = restore_file(&path, None).unwrap_err().to_string();
        assert!(e.contains("lets others write it"), "{e}");
        // a symbolic link to a journal
        let good = dir.join("good");
        std::fs::write(&good, &line).unwrap();
        std::fs::set_permissions(&good, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let e = restore_file(&link, None).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // owned by another user (as root only: nobody else can give a file away)
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&good, Some(65534), Some(65534)).unwrap();
            let e = restore_file(&good, None).unwrap_err().to_string();
            assert!(e.contains("belongs to uid 65534"), "{e}");
            // and `run` does not ask to restore it either
            let e = Journal::with_file(&good).unwrap_err().to_string();
            assert!(e.contains("not a journal you may restore"), "{e}");
        }
        assert_eq!(Settings::read(tid).unwrap(), before, "nothing changed");
        assert!(good.exists());
        c.kill().unwrap();
        c.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_file_stays_bounded_and_says_what_was_set_last() {
        let dir = tmp("compact");
        let (mut c, tid) = child();
        let before = Settings::read(tid).unwrap();
        let path = dir.join("j");
        let mut j = Journal::with_file(&path).unwrap();
        let n = before.nice;
        for i in 0..5_000 {
            j.set_nice(tid, n + 1 + (i % 3)).unwrap();
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 1026, "{lines} lines for one changed setting");
        // the last value set is the file's: restore after a "kill" puts the original back
        std::mem::forget(j);
        let r = restore_file(&path, None).unwrap();
        assert_eq!((r.report.restored, r.report.kept), (1, 0), "{r:?}");
        assert_eq!(nice(tid).unwrap(), before.nice);
        c.kill().unwrap();
        c.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    use proptest::prelude::*;

    /// A journal line: valid (of a thread id no thread can have: above the largest
    /// pid_max, 4,194,304), or one with a field garbled, cut or missing.
    fn journal_line() -> impl Strategy<Value = String> {
        let which = prop_oneof![Just("nice"), Just("slice"), Just("affinity"), Just("bogus")];
        (
            4_200_000i32..i32::MAX,
            any::<u64>(),
            -25i32..25,
            which,
            0usize..6,
            any::<bool>(),
        )
            .prop_map(|(tid, start, nice, which, cut, legacy)| {
                let set = if legacy {
                    String::new()
                } else {
                    format!(", \"set\": {{\"nice\": {nice}, \"affinity\": [0, 1]}}")
                };
                let line = format!(
                    "{{\"tid\": {tid}, \"start\": {start}, \"orig\": {{\"affinity\": [0], \"slice_ns\": 0, \"nice\": {nice}}}, \"changed\": \"{which}\"{set}}}"
                );
                match cut {
                    0 => line[..line.len() / 2].to_string(),
                    1 => line.replace("\"orig\"", "\"orig2\""),
                    _ => line,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Arbitrary bytes: every line is an entry or reported as invalid, with its number.
        #[test]
        fn journal_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let mut out = FileRestoreReport::default();
            let lines = bytes.split(|&b| b == b'\n').count();
            let _ = parse(&bytes, &mut out);
            prop_assert!(out.invalid.iter().all(|(n, _)| *n >= 1 && *n <= lines));
        }

        /// Journal-like files go through the whole restore, trust checks included, and
        /// change nothing (no thread has their ids); the file is kept when a line was bad.
        #[test]
        fn journal_files_never_panic(lines in proptest::collection::vec(journal_line(), 0..12)) {
            let dir = tmp("fuzz");
            let path = dir.join("j");
            let text = lines.join("\n") + "\n";
            let mut f = create_private(&path).unwrap();
            f.write_all(text.as_bytes()).unwrap();
            drop(f);
            let r = restore_file(&path, None).unwrap();
            prop_assert_eq!(r.report.restored, 0);
            prop_assert_eq!(r.removed, r.invalid.is_empty() && r.refused.is_empty());
            let _ = std::fs::remove_dir_all(&dir);
        }
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
