//! A managed run from start to stop, as `cachesched run` makes it: launch the command
//! (if there is one), poll the [`Daemon`] until the command exits, the managed processes
//! exit, a duration passes or a stop signal arrives, report stats on a cadence, then
//! restore every thread and pass a stop signal on to the command.
//!
//! The caller builds the policy and the [`Daemon`]; [`prepare`] installs what the run
//! needs in this process before the daemon starts, and [`run`] is the loop.

use crate::daemon::{self, Daemon, DaemonError, StatsRecord, Target};
use crate::journal::RestoreReport;
use crate::process::{self, exit_code, reap};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a session could not start or stopped early.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The stop-signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    /// This process cannot become the subreaper of the command's descendants.
    #[error("prctl(PR_SET_CHILD_SUBREAPER) failed")]
    Subreaper(#[source] std::io::Error),
    /// The command cannot be launched.
    #[error("cannot launch `{program}`")]
    Launch {
        /// The program named first in the command.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The daemon failed while polling (everything it changed is restored).
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    /// The caller's handler of a stats record failed (everything is restored).
    #[error("cannot write a stats record")]
    Output(#[source] std::io::Error),
}

/// How a session runs: what it launches, how long, how often it reports.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The command to launch and manage (with [`Target::Descendants`]); empty for an
    /// existing process or cgroup.
    pub command: Vec<String>,
    /// Stop after this long (the command keeps running, no longer managed).
    pub duration: Option<Duration>,
    /// Report a stats record this often.
    pub stats_every: Option<Duration>,
    /// Testing aid: panic after this long, to check that a panic restores threads.
    pub panic_after: Option<Duration>,
}

/// What happened during a session, for the caller to print.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A periodic stats record.
    Stats(&'a StatsRecord),
    /// A warning from the daemon.
    Warning(&'a str),
}

/// How a session ended.
#[derive(Debug)]
pub struct Ending {
    /// The stats record taken just before restoring.
    pub last: StatsRecord,
    /// What restoring did.
    pub report: RestoreReport,
    /// What stopped the run: `signal N`, `command exited`, `duration` or `managed
    /// processes exited`.
    pub stopped_by: String,
    /// The command's exit code in the shell's terms (128+N for signal N); 0 without a
    /// command or when it keeps running.
    pub exit_code: i32,
    /// The command's process id when the duration ended the run and the command keeps
    /// running, no longer managed.
    pub left_running: Option<i32>,
}

/// Installs what a session needs in this process before its daemon starts: stop-signal
/// handlers (SIGINT, SIGTERM, SIGHUP set a flag instead of killing), and for
/// [`Target::Descendants`] the subreaper role, so that the command's orphaned
/// descendants stay visible.
pub fn prepare(target: &Target) -> Result<(), SessionError> {
    process::install_stop_handlers().map_err(SessionError::Signals)?;
    if *target == Target::Descendants {
        daemon::become_subreaper().map_err(SessionError::Subreaper)?;
    }
    Ok(())
}

/// Runs a session with daemon `d` managing `target`; `on` hears every stats record and
/// warning. Returns how it ended after restoring every thread. On an error the daemon is
/// dropped, which restores too.
pub fn run(
    mut d: Daemon,
    target: &Target,
    s: &Session,
    mut on: impl FnMut(Event<'_>) -> std::io::Result<()>,
) -> Result<Ending, SessionError> {
    let cmd_pid = if *target == Target::Descendants && !s.command.is_empty() {
        let child = std::process::Command::new(&s.command[0])
            .args(&s.command[1..])
            .spawn()
            .map_err(|source| SessionError::Launch {
                program: s.command[0].clone(),
                source,
            })?;
        Some(child.id() as i32)
    } else {
        None
    };
    let start = Instant::now();
    let deadline = s.duration.map(|p| start + p);
    let mut next_stats = s.stats_every.map(|p| start + p);
    let panic_at = s.panic_after.map(|p| start + p);
    let mut cmd_status = None;
    let stopped_by: String = loop {
        if let Some(sig) = process::stop_signal() {
            break format!("signal {sig}");
        }
        if let Some(pid) = cmd_pid {
            if let Some(st) = reap(pid) {
                cmd_status = Some(st);
                break "command exited".into();
            }
        }
        if deadline.is_some_and(|t| Instant::now() >= t) {
            break "duration".into();
        }
        if panic_at.is_some_and(|t| Instant::now() >= t) {
            panic!("--debug-panic-after-ms: deliberate panic to test restoring");
        }
        d.poll()?;
        if let (Some(t), Some(p)) = (next_stats, s.stats_every) {
            if Instant::now() >= t {
                let rec = d.stats();
                on(Event::Stats(&rec)).map_err(SessionError::Output)?;
                // the next record one period after this one, never a burst after a
                // stall (SIGSTOP, a suspended host)
                next_stats = Some((t + p).max(Instant::now()));
            }
        }
        for w in d.take_warnings() {
            on(Event::Warning(&w)).map_err(SessionError::Output)?;
        }
        if matches!(target, Target::Processes { .. }) && !d.any_alive() {
            break "managed processes exited".into();
        }
        let mut wake = d.next_due();
        for t in [deadline, next_stats, panic_at].into_iter().flatten() {
            wake = wake.min(t);
        }
        // short naps so that the command's exit and signals are noticed promptly
        let nap = wake
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(10));
        std::thread::sleep(nap);
    };
    let last = d.stats();
    let report = d.finish();
    let mut left_running = None;
    let exit_code = match (cmd_pid, process::stop_signal()) {
        (Some(pid), Some(sig)) if cmd_status.is_none() => {
            process::send(pid, sig);
            wait_for(pid)
        }
        (Some(pid), None) if cmd_status.is_none() => {
            // the duration ended the run: the command keeps running unmanaged
            left_running = Some(pid);
            0
        }
        (Some(_), _) => exit_code(cmd_status.expect("checked")),
        (None, _) => 0,
    };
    Ok(Ending {
        last,
        report,
        stopped_by,
        exit_code,
        left_running,
    })
}

/// Waits for the command after passing a stop signal on: up to 5 s, then SIGKILL.
fn wait_for(cmd_pid: i32) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(st) = reap(cmd_pid) {
            return exit_code(st);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            process::send(cmd_pid, process::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One line on which counters this host offers and why the others are missing, grouped
/// by reason.
pub fn counter_line() -> String {
    let probe = daemon::available_counters();
    let have: Vec<String> = probe
        .iter()
        .filter_map(|(k, r)| match r {
            Ok(false) => Some(k.name().to_string()),
            Ok(true) => Some(format!("{} (user mode only)", k.name())),
            Err(_) => None,
        })
        .collect();
    let mut s = format!(
        "counters: {} available",
        if have.is_empty() {
            "none".into()
        } else {
            have.join(", ")
        }
    );
    // missing counters grouped by reason ("X is not supported here (…)" → one clause)
    let mut why: Vec<(String, Vec<&str>)> = Vec::new();
    for (k, r) in &probe {
        if let Err(e) = r {
            let reason = e.reason();
            match why.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, ks)) => ks.push(k.name()),
                None => why.push((reason, vec![k.name()])),
            }
        }
    }
    for (reason, ks) in why {
        s += &format!("; {} missing: {reason}", ks.join(", "));
    }
    s
}

/// What a restore left, after its counts, as a clause to append to a sentence: settings
/// the program had changed itself, threads a stop could not wait for, failures.
pub fn restore_notes(rep: &RestoreReport) -> String {
    let mut s = String::new();
    if rep.kept > 0 {
        s += &format!(
            "; {} setting(s) the program had changed itself were left as it set them",
            rep.kept
        );
    }
    if rep.unsettled > 0 {
        s += &format!(
            "; {} thread(s) were still being created after {} rescans and may keep inherited settings",
            rep.unsettled,
            Daemon::STOP_RESCANS
        );
    }
    if !rep.failed.is_empty() {
        s += &format!(", {} FAILED", rep.failed.len());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_notes_name_what_was_left() {
        let mut rep = RestoreReport::default();
        assert_eq!(restore_notes(&rep), "");
        rep.kept = 2;
        rep.unsettled = 1;
        let s = restore_notes(&rep);
        assert!(s.starts_with("; 2 setting(s) the program had changed itself"));
        assert!(s.contains(&format!(
            "; 1 thread(s) were still being created after {} rescans",
            Daemon::STOP_RESCANS
        )));
        assert!(!s.contains("FAILED"));
    }
}
