//! Program traces recorded with valgrind's lackey: a command's memory references
//! streamed, or a window of its run written as a binary trace; and a trace file
//! replayed through cachegrind's cache rules ([`replay_file`]).

use crate::error::{Error, Result, ResultExt};
use cachesched_sim::trace::replay::{parse_cg_cache, CgSim, LackeyReader, TraceEvent};
use cachesched_sim::trace::{
    is_binary_trace, replay_binary, replay_binary_slice, verify, TraceWriter,
};
use std::io::{BufRead, BufReader, BufWriter};
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

/// The caches of a replay, each as cachegrind writes them: `size_bytes,ways,line_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSpecs {
    /// The first-level instruction cache (cachegrind's `--I1`).
    pub i1: String,
    /// The first-level data cache (`--D1`).
    pub d1: String,
    /// The last-level cache (`--LL`).
    pub ll: String,
}

impl Default for CacheSpecs {
    /// 32 KB 8-way L1s and an 8 MB 16-way last level, 64-byte lines.
    fn default() -> CacheSpecs {
        CacheSpecs {
            i1: "32768,8,64".into(),
            d1: "32768,8,64".into(),
            ll: "8388608,16,64".into(),
        }
    }
}

impl CacheSpecs {
    /// A cold simulator of these caches.
    pub fn sim(&self) -> Result<CgSim> {
        Ok(CgSim::new(
            parse_cg_cache("I1", &self.i1)?,
            parse_cg_cache("D1", &self.d1)?,
            parse_cg_cache("LL", &self.ll)?,
        )?)
    }
}

/// Replays a trace file into `sim`: binary or lackey text, told apart by its first
/// bytes; `-` reads standard input. A binary file is memory-mapped rather than read,
/// and checked whole first (end record, hash): a damaged one is refused, not replayed
/// in part.
pub fn replay_file(sim: &mut CgSim, path: &str) -> Result<()> {
    if path != "-" {
        let map = cachesched_linux::Mapped::open(Path::new(path))
            .map_err(Error::io("cannot open trace file", path))?;
        if is_binary_trace(&map) {
            verify(&map).within(|| format!("in trace '{path}'"))?;
            replay_binary_slice(sim, &map).within(|| format!("in trace '{path}'"))?;
            return Ok(());
        }
    }
    let mut input: Box<dyn BufRead> = if path == "-" {
        Box::new(BufReader::with_capacity(1 << 20, std::io::stdin().lock()))
    } else {
        let f = std::fs::File::open(path).map_err(Error::io("cannot open trace file", path))?;
        Box::new(BufReader::with_capacity(1 << 20, f))
    };
    let binary = is_binary_trace(input.fill_buf().map_err(Error::io("cannot read", path))?);
    if binary {
        replay_binary(sim, input).within(|| format!("in trace '{path}'"))?;
    } else {
        let mut reader = LackeyReader::new(input);
        while let Some(ev) = reader
            .next_event()
            .within(|| format!("in trace '{path}'"))?
        {
            sim.event(ev);
        }
    }
    Ok(())
}
