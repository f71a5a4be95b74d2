//! `cachesched replay`.

use anyhow::{bail, Context, Result};
use cachesched_sim::replay::{parse_cg_cache, CgSim, LackeyReader};
use clap::Args;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// Arguments of `cachesched replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// I1 cache as size_bytes,ways,line_bytes (cachegrind's --I1 syntax).
    #[arg(long = "I1", value_name = "SIZE,ASSOC,LINE", default_value = "32768,8,64")]
    i1: String,
    /// D1 cache as size_bytes,ways,line_bytes.
    #[arg(long = "D1", value_name = "SIZE,ASSOC,LINE", default_value = "32768,8,64")]
    d1: String,
    /// Last-level cache as size_bytes,ways,line_bytes.
    #[arg(long = "LL", value_name = "SIZE,ASSOC,LINE", default_value = "8388608,16,64")]
    ll: String,
    /// Lackey trace file (text from `valgrind --tool=lackey --trace-mem=yes`); `-` reads
    /// standard input. Omit it and give a command after `--` to trace that command live.
    #[arg(long, value_name = "FILE")]
    trace: Option<String>,
    /// Command to run under valgrind lackey (its standard output goes to /dev/null).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Runs `cachesched replay`.
pub fn run(a: ReplayArgs) -> Result<()> {
    let mut sim = CgSim::new(
        parse_cg_cache("I1", &a.i1)?,
        parse_cg_cache("D1", &a.d1)?,
        parse_cg_cache("LL", &a.ll)?,
    )?;
    let cmd_name;
    match (&a.trace, a.command.is_empty()) {
        (Some(_), false) => bail!("give either --trace FILE or a command after --, not both"),
        (None, true) => bail!("nothing to replay: give --trace FILE (or - for stdin) or a command after --"),
        (Some(path), true) => {
            cmd_name = path.clone();
            let input: Box<dyn BufRead> = if path == "-" {
                Box::new(BufReader::with_capacity(1 << 20, std::io::stdin().lock()))
            } else {
                let f = std::fs::File::open(path)
                    .with_context(|| format!("cannot open trace file '{path}'"))?;
                Box::new(BufReader::with_capacity(1 << 20, f))
            };
            replay_stream(&mut sim, input)?;
        }
        (None, false) => {
            cmd_name = a.command.join(" ");
            let mut child = Command::new("valgrind")
                .args(["-q", "--tool=lackey", "--trace-mem=yes", "--log-fd=2"])
                .args(&a.command)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .context("cannot run valgrind: install it (e.g. `apt-get install valgrind`)")?;
            let err = child.stderr.take().expect("stderr is piped");
            let res = replay_stream(&mut sim, BufReader::with_capacity(1 << 20, err));
            let status = child.wait()?;
            res?;
            if !status.success() {
                bail!("traced command exited with {status}");
            }
        }
    }
    let mut out = std::io::stdout().lock();
    out.write_all(sim.report(&cmd_name).as_bytes())?;
    Ok(())
}

fn replay_stream(sim: &mut CgSim, input: impl BufRead) -> Result<()> {
    let mut reader = LackeyReader::new(input);
    while let Some(ev) = reader.next_event()? {
        sim.event(ev);
    }
    Ok(())
}
