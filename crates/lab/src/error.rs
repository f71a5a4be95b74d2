//! The laboratory's errors: [`Error`], one variant per kind of failure, and
//! [`Result`].
//!
//! An error's message is its own text followed by its causes' ([`std::error::Error::source`]),
//! the way the command-line tool prints it: a variant that wraps a cause (a file's I/O
//! error, a parse error, an error of the simulator) does not repeat the cause's text in
//! its own. [`chain`] gives the whole message on one line; [`ResultExt::within`] adds
//! a layer saying where an error happened ("in scenario file 'x'").

use std::path::PathBuf;

/// [`std::result::Result`] with the laboratory's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why something of the laboratory failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read, written, created or removed.
    #[error("{action} '{}'{hint}", path.display())]
    Io {
        /// What could not be done, before the path: "cannot write".
        action: String,
        /// The file or directory.
        path: PathBuf,
        /// What to do about it, after the path (empty if the message says nothing
        /// more): "; give another --out".
        hint: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `--from-results` found no results of a previous run to rebuild the reports from.
    #[error(
        "no results to rebuild from in '{}' (cannot read '{}'): run without --from-results first",
        dir.display(),
        file.display()
    )]
    NoResults {
        /// The output directory that should hold them.
        dir: PathBuf,
        /// The file of theirs that could not be read.
        file: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A scenario file is not TOML, or not a scenario.
    #[error("in scenario file '{}'", path.display())]
    ParseScenario {
        /// The scenario file.
        path: PathBuf,
        /// The TOML parser's error (with its line and column).
        #[source]
        source: toml::de::Error,
    },
    /// A results file (`results.json`) is not one of this version.
    #[error("'{}' is not a results file of this version", path.display())]
    ParseResults {
        /// The results file.
        path: PathBuf,
        /// The JSON parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A file of a study on the real host (`study.json`, a line of `runs.jsonl`) is not
    /// one this version wrote.
    #[error("'{}' is not a study's file of this version{}", path.display(), line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    ParseStudy {
        /// The file.
        path: PathBuf,
        /// The line, in a file of one record per line.
        line: Option<usize>,
        /// The JSON parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// Input that cannot be used: a scenario, an option, a document, results on disk
    /// or the environment. The message says what is wrong and what to do.
    #[error("{0}")]
    Invalid(String),
    /// An external program (valgrind, a program of the real-program suite) is not
    /// installed or did not do what it was asked to.
    #[error("{0}")]
    Tool(String),
    /// An external program could not be started.
    #[error("{what}")]
    Spawn {
        /// What could not be run, and what to do: "cannot run valgrind: install it …".
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A trace being recorded could not be written, or its traced program not waited
    /// for.
    #[error(transparent)]
    TraceIo(std::io::Error),
    /// A batch of runs (`run-batch`) was stopped by a signal: Slurm's cancel or time
    /// limit, or Ctrl-C.
    #[error(
        "stopped by a signal after {made} run(s) of the task; those are kept in the run cache"
    )]
    BatchStopped {
        /// Runs made and stored before the signal.
        made: usize,
    },
    /// Runs of a Slurm job did not land in the run cache (a task failed, was cancelled
    /// or timed out); `tasks` names each such task with its state and log.
    #[error(
        "{missing} run(s) of Slurm job {job} did not land in the run cache:\n{tasks}\n\
         run the same command again to submit only those"
    )]
    RunsNotLanded {
        /// The job id.
        job: String,
        /// Runs missing.
        missing: usize,
        /// One line per task with runs missing.
        tasks: String,
    },
    /// A recording was interrupted (Ctrl-C or SIGTERM) and nothing was kept.
    #[error("interrupted after {instructions} instructions; nothing was kept")]
    Interrupted {
        /// The instructions traced before it stopped.
        instructions: u64,
    },
    /// Something the laboratory itself got wrong (not its input).
    #[error("{0}")]
    Internal(&'static str),
    /// A benchmark did not measure what it set out to: its setup did not drive the code
    /// it times, or two sides that must agree did not.
    #[error("{0}")]
    Bench(String),
    /// A policy's specification is not one of a known policy with valid settings.
    #[error(transparent)]
    Policy(#[from] cachesched_policies::PolicyError),
    /// The Linux daemon failed.
    #[error(transparent)]
    Daemon(#[from] cachesched_linux::DaemonError),
    /// The host's topology could not be read from sysfs.
    #[error(transparent)]
    Sysfs(#[from] cachesched_linux::SysfsError),
    /// A run of the simulator failed.
    #[error(transparent)]
    Sim(#[from] cachesched_sim::SimError),
    /// A machine could not be built.
    #[error(transparent)]
    Machine(#[from] cachesched_sim::hw::machine::MachineError),
    /// A configuration value is out of its range.
    #[error(transparent)]
    Range(#[from] cachesched_sim::RangeError),
    /// A workload (a program's locality model) is invalid.
    #[error(transparent)]
    Workload(#[from] cachesched_sim::workload::WorkloadError),
    /// A trace of lackey's could not be read.
    #[error(transparent)]
    Replay(#[from] cachesched_sim::trace::replay::ReplayError),
    /// A value could not be written as JSON.
    #[error(transparent)]
    WriteJson(#[from] serde_json::Error),
    /// A value could not be written as TOML.
    #[error(transparent)]
    WriteToml(#[from] toml::ser::Error),
    /// An error and where it happened ([`ResultExt::within`]).
    #[error("{context}")]
    Context {
        /// Where: "in scenario file 'x'", "in mix 'm'", "recording real:xz failed".
        context: String,
        /// The error.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// The [`Error::Io`] of `action` on `path`, for `map_err`:
    /// `std::fs::read(p).map_err(Error::io("cannot read", p))`.
    pub fn io(
        action: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        Error::io_hint(action, path, "")
    }

    /// [`Error::io`] with a hint after the path.
    pub fn io_hint(
        action: impl Into<String>,
        path: impl Into<PathBuf>,
        hint: &'static str,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let (action, path) = (action.into(), path.into());
        move |source| Error::Io {
            action,
            path,
            hint,
            source,
        }
    }

    /// The error below every [`Error::Context`] layer: the failure itself.
    pub fn root(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root(),
            e => e,
        }
    }
}

/// Adding where an error happened to a [`Result`] (or to a result whose error becomes
/// an [`Error`]).
pub trait ResultExt<T> {
    /// The error, if any, within [`Error::Context`] `context()`: "in scenario file 'x'".
    fn within<C: Into<String>>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T, E: Into<Error>> ResultExt<T> for std::result::Result<T, E> {
    fn within<C: Into<String>>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| Error::Context {
            context: context().into(),
            source: Box::new(e.into()),
        })
    }
}

/// An [`Error::Invalid`] of a message formatted as by `format!`.
macro_rules! invalid {
    ($($arg:tt)*) => {
        $crate::error::Error::Invalid(format!($($arg)*))
    };
}
pub(crate) use invalid;

/// `e` and its causes on one line, joined by ": ", every one of them (for warnings and
/// messages that go on after the error; the command-line tool leaves out a cause its
/// message already says).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s += ": ";
        s += &c.to_string();
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer's text and its cause's come apart, as the command-line tool and
    /// [`chain`] put them together again.
    #[test]
    fn layers_keep_their_causes_apart() {
        let e: Result<()> = Err(std::io::Error::other("disk full"))
            .map_err(Error::io_hint(
                "cannot write",
                "out/x",
                "; give another --out",
            ))
            .within(|| "in mix 'm'");
        let e = e.unwrap_err();
        assert_eq!(e.to_string(), "in mix 'm'");
        assert_eq!(
            chain(&e),
            "in mix 'm': cannot write 'out/x'; give another --out: disk full"
        );
        assert!(matches!(e.root(), Error::Io { .. }));
    }
}
