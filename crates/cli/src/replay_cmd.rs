//! `cachesched replay` and `cachesched trace record`.

use anyhow::{bail, Context, Result};
use cachesched_sim::trace::replay::{parse_cg_cache, CgSim, LackeyReader, TraceEvent};
use cachesched_sim::trace::{replay_binary, replay_binary_slice, TraceWriter, MAGIC};
use clap::{Args, Subcommand};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Cache options shared by the commands that replay traces.
#[derive(Args, Debug, Clone)]
pub struct CgCaches {
    /// I1 cache as size_bytes,ways,line_bytes (cachegrind's --I1 syntax).
    #[arg(
        long = "I1",
        value_name = "SIZE,ASSOC,LINE",
        default_value = "32768,8,64"
    )]
    pub i1: String,
    /// D1 cache as size_bytes,ways,line_bytes.
    #[arg(
        long = "D1",
        value_name = "SIZE,ASSOC,LINE",
        default_value = "32768,8,64"
    )]
    pub d1: String,
    /// Last-level cache as size_bytes,ways,line_bytes.
    #[arg(
        long = "LL",
        value_name = "SIZE,ASSOC,LINE",
        default_value = "8388608,16,64"
    )]
    pub ll: String,
}

impl CgCaches {
    /// A cold simulator of these caches.
    pub fn sim(&self) -> Result<CgSim> {
        Ok(CgSim::new(
            parse_cg_cache("I1", &self.i1)?,
            parse_cg_cache("D1", &self.d1)?,
            parse_cg_cache("LL", &self.ll)?,
        )?)
    }
}

/// Arguments of `cachesched replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    caches: CgCaches,
    /// Trace file: lackey text (`valgrind --tool=lackey --trace-mem=yes`) or a binary
    /// trace from `cachesched trace record`; `-` reads standard input. Omit it and give
    /// a command after `--` to trace that command live.
    #[arg(long, value_name = "FILE")]
    trace: Option<String>,
    /// Command to run under valgrind lackey (its standard output goes to /dev/null).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `cachesched trace …`.
#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Run a command under valgrind lackey and write its memory trace in the compact
    /// binary form, converted on the fly.
    Record(RecordArgs),
}

/// Arguments of `cachesched trace record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Output file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The command to trace (its standard output goes to /dev/null).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Starts `valgrind --tool=lackey` on `cmd` with the trace on a pipe.
pub fn spawn_lackey(cmd: &[String]) -> Result<Child> {
    Command::new("valgrind")
        .args(["-q", "--tool=lackey", "--trace-mem=yes", "--log-fd=2"])
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run valgrind: install it (e.g. `apt-get install valgrind`)")
}

/// Streams the events of lackey running `cmd` into `f`.
pub fn trace_command(cmd: &[String], mut f: impl FnMut(TraceEvent) -> Result<()>) -> Result<()> {
    let mut child = spawn_lackey(cmd)?;
    let err = child.stderr.take().expect("stderr is piped");
    let mut reader = LackeyReader::new(BufReader::with_capacity(1 << 20, err));
    let res: Result<()> = (|| {
        while let Some(ev) = reader.next_event()? {
            f(ev)?;
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = child.kill();
    }
    let status = child.wait()?;
    res?;
    if !status.success() {
        bail!("traced command exited with {status}");
    }
    Ok(())
}

/// Replays a trace file (binary or lackey text, detected by its first bytes). A binary
/// file is memory-mapped rather than read.
pub fn replay_file(sim: &mut CgSim, path: &str) -> Result<()> {
    if path != "-" {
        let map = cachesched_linux::Mapped::open(std::path::Path::new(path))
            .with_context(|| format!("cannot open trace file '{path}'"))?;
        if map.starts_with(MAGIC) {
            replay_binary_slice(sim, &map).with_context(|| format!("in trace '{path}'"))?;
            return Ok(());
        }
    }
    let mut input: Box<dyn BufRead> = if path == "-" {
        Box::new(BufReader::with_capacity(1 << 20, std::io::stdin().lock()))
    } else {
        let f = std::fs::File::open(path)
            .with_context(|| format!("cannot open trace file '{path}'"))?;
        Box::new(BufReader::with_capacity(1 << 20, f))
    };
    let binary = input.fill_buf()?.starts_with(MAGIC);
    if binary {
        replay_binary(sim, input).with_context(|| format!("in trace '{path}'"))?;
    } else {
        let mut reader = LackeyReader::new(input);
        while let Some(ev) = reader
            .next_event()
            .with_context(|| format!("in trace '{path}'"))?
        {
            sim.event(ev);
        }
    }
    Ok(())
}

/// `cachesched replay`.
pub fn run(a: ReplayArgs) -> Result<()> {
    let mut sim = a.caches.sim()?;
    let cmd_name = match (&a.trace, a.command.is_empty()) {
        (Some(_), false) => bail!("give either --trace FILE or a command after --, not both"),
        (None, true) => {
            bail!("nothing to replay: give --trace FILE (or - for stdin) or a command after --")
        }
        (Some(path), true) => {
            replay_file(&mut sim, path)?;
            path.clone()
        }
        (None, false) => {
            trace_command(&a.command, |e| {
                sim.event(e);
                Ok(())
            })?;
            a.command.join(" ")
        }
    };
    std::io::stdout()
        .lock()
        .write_all(sim.report(&cmd_name).as_bytes())?;
    Ok(())
}

/// `cachesched trace record`.
pub fn record(a: &RecordArgs) -> Result<(u64, u64)> {
    let f = std::fs::File::create(&a.out)
        .with_context(|| format!("cannot create '{}'", a.out.display()))?;
    let mut w = TraceWriter::new(BufWriter::new(f))?;
    trace_command(&a.command, |e| Ok(w.write(e)?))?;
    let (events, bytes) = (w.events, w.bytes);
    w.finish()?;
    Ok((events, bytes))
}

/// Dispatches `cachesched trace …`.
pub fn trace(c: TraceCommand) -> Result<()> {
    match c {
        TraceCommand::Record(a) => {
            let (events, bytes) = record(&a)?;
            println!(
                "wrote {} events in {} bytes ({:.2} bytes/event) to {}",
                events,
                bytes,
                bytes as f64 / events.max(1) as f64,
                a.out.display()
            );
            Ok(())
        }
    }
}
