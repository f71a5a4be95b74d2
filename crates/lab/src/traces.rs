//! Program traces recorded with valgrind's lackey: a command's memory references
//! streamed, or a window of its run written as a binary trace.

use crate::error::{Error, Result};
use cachesched_sim::trace::replay::{LackeyReader, TraceEvent};
use cachesched_sim::trace::TraceWriter;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Starts `valgrind --tool=lackey` on `cmd` (with `env` added) with the trace on a pipe
/// of its own (valgrind's descriptor 3), so that whatever the program writes to its
/// stderr cannot mix into the trace; returns the child and the pipe.
pub fn spawn_lackey(cmd: &[String], env: &[(&str, &str)]) -> Result<(Child, std::fs::File)> {
    let mut c = Command::new("valgrind");
    c.args(["-q", "--tool=lackey", "--trace-mem=yes", "--log-fd=3"])
        .args(cmd)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cachesched_linux::process::spawn_with_fd3_pipe(&mut c).map_err(|source| Error::Spawn {
        what: "cannot run valgrind: install it (e.g. `apt-get install valgrind`)".into(),
        source,
    })
}

/// Streams the events of lackey running `cmd` (with `env` added to its environment)
/// into `f`, until the command ends or `f` answers `false` (then the command is killed:
/// a window of its run is all that was wanted).
pub fn trace_command(
    cmd: &[String],
    env: &[(&str, &str)],
    mut f: impl FnMut(TraceEvent) -> Result<bool>,
) -> Result<()> {
    let (mut child, log) = spawn_lackey(cmd, env)?;
    let mut reader = LackeyReader::new(BufReader::with_capacity(1 << 20, log));
    let res: Result<bool> = (|| {
        while let Some(ev) = reader.next_event()? {
            if !f(ev)? {
                return Ok(false);
            }
        }
        Ok(true)
    })();
    if !matches!(res, Ok(true)) {
        let _ = child.kill();
    }
    let status = child.wait().map_err(Error::TraceIo)?;
    let finished = res?;
    if finished && !status.success() {
        return Err(Error::Tool(format!("traced command exited with {status}")));
    }
    Ok(())
}

/// Which part of a run to record, in instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Instructions executed before recording starts.
    pub skip: u64,
    /// Instructions recorded (`u64::MAX`: to the end).
    pub length: u64,
}

impl Window {
    /// The whole run.
    pub const ALL: Window = Window {
        skip: 0,
        length: u64::MAX,
    };
}

/// What a recording wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recording {
    /// Events written.
    pub events: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Instructions written (less than the window's length if the program ended
    /// first).
    pub instructions: u64,
}

/// Records `cmd`'s events within `window` into a binary trace at `out`, `env` added to
/// its environment. The command is stopped once the window is recorded. A failed or
/// interrupted recording leaves no half-written trace behind.
pub fn record_window(
    cmd: &[String],
    env: &[(&str, &str)],
    out: &Path,
    window: Window,
) -> Result<Recording> {
    record_into(cmd, env, out, window).inspect_err(|_| {
        let _ = std::fs::remove_file(out);
    })
}

/// [`record_window`]'s work, leaving the file as it is on error.
fn record_into(
    cmd: &[String],
    env: &[(&str, &str)],
    out: &Path,
    window: Window,
) -> Result<Recording> {
    let f = std::fs::File::create(out).map_err(Error::io("cannot create", out))?;
    let mut w = TraceWriter::new(BufWriter::new(f)).map_err(Error::TraceIo)?;
    let end = window.skip.saturating_add(window.length);
    let mut instructions = 0u64;
    let stop = crate::interrupt::interrupt_flag();
    trace_command(cmd, env, |e| {
        if let TraceEvent::Instr { .. } = e {
            instructions += 1;
            // Ctrl-C or SIGTERM: stop the traced command too, not only ourselves
            if instructions.is_multiple_of(1 << 20)
                && stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                return Err(Error::Interrupted { instructions });
            }
            if instructions > end {
                return Ok(false);
            }
        }
        if instructions > window.skip {
            w.write(e).map_err(Error::TraceIo)?;
        }
        Ok(true)
    })?;
    if instructions <= window.skip {
        return Err(Error::Tool(format!(
            "'{}' ended after {instructions} instructions, before the {} to skip",
            cmd.join(" "),
            window.skip
        )));
    }
    let rec = Recording {
        events: w.events,
        bytes: w.bytes,
        instructions: instructions.min(end) - window.skip,
    };
    w.finish().map_err(Error::TraceIo)?;
    Ok(rec)
}
