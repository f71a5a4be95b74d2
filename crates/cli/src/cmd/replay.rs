//! `cachesched replay` and `cachesched trace record`.

use anyhow::{bail, Result};
use cachesched_lab::tracer::Tracer;
use cachesched_lab::traces::{
    record_window_with, replay_file, trace_command, CacheSpecs, Counting, Progress, Recording,
    Traced, Window,
};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;

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
    /// The laboratory's form of these caches.
    pub fn specs(&self) -> CacheSpecs {
        CacheSpecs {
            i1: self.i1.clone(),
            d1: self.d1.clone(),
            ll: self.ll.clone(),
        }
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
    /// Command to run under valgrind lackey (its standard output and errors go to
    /// /dev/null).
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
    /// Output file; a name ending in `.zst` is written zstd-compressed (every command
    /// that reads traces reads both).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Instructions to run before recording starts (start-up, reading the input).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub skip_instructions: u64,
    /// Instructions to record, then stop the command (default: the whole run).
    #[arg(long, value_name = "N")]
    pub instructions: Option<u64>,
    /// The Valgrind tool that records: `fast` (cstrace, built on first use: it counts
    /// the skipped instructions instead of printing them and writes what lackey
    /// writes), `lackey`, or `auto` (cstrace where it builds, else lackey). Default:
    /// `$CACHESCHED_TRACER`, else auto.
    #[arg(long, value_name = "auto|fast|lackey")]
    pub tracer: Option<cachesched_lab::tracer::Tracer>,
    /// The command to trace (its standard output and errors go to /dev/null).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `cachesched replay`.
pub fn run(a: ReplayArgs) -> Result<()> {
    let mut sim = a.caches.specs().sim()?;
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
            trace_command(&Traced::plain(&a.command), |e| {
                sim.event(e);
                Ok(true)
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
pub fn record(a: &RecordArgs) -> Result<Recording> {
    if a.instructions == Some(0) {
        bail!("--instructions must be at least 1 (leave it out to record the whole run)");
    }
    let window = Window {
        skip: a.skip_instructions,
        length: a.instructions.unwrap_or(u64::MAX),
    };
    let mut progress = Progress::new(a.out.display().to_string(), window);
    let tracer = match a.tracer {
        Some(t) => t,
        None => Tracer::from_env()?,
    }
    .resolve()?;
    Ok(record_window_with(
        &tracer,
        &Traced::plain(&a.command),
        &a.out,
        window,
        Counting::Events,
        &mut |n| progress.update(n),
    )?)
}

/// Dispatches `cachesched trace …`.
pub fn trace(c: TraceCommand) -> Result<()> {
    match c {
        TraceCommand::Record(a) => {
            let r = record(&a)?;
            println!(
                "wrote {} events ({} instructions) in {} bytes ({:.2} bytes/event) to {}",
                r.events,
                r.instructions,
                r.bytes,
                r.bytes as f64 / r.events.max(1) as f64,
                a.out.display()
            );
            Ok(())
        }
    }
}
