//! `cachesched bench replay`: the trace replay's speed against cachegrind itself on the
//! same program and caches, with identical counts.

use crate::error::{Error, Result};
use crate::traces::{record_window, replay_file, CacheSpecs, Counting, Traced, Window};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// What `bench replay` measures.
#[derive(Debug, Clone)]
pub struct ReplayBench {
    /// The caches of both sides.
    pub caches: CacheSpecs,
    /// Timed repetitions of each side (the best is kept).
    pub repeat: u32,
    /// The program to trace and run under cachegrind.
    pub command: Vec<String>,
}

/// Runs `cmd` under cachegrind with `caches`, its output in `out`: (wall seconds, its
/// summary counts).
pub(crate) fn cachegrind(
    caches: &CacheSpecs,
    cmd: &[String],
    out: &Path,
) -> Result<(f64, Vec<u64>)> {
    let t = Instant::now();
    let st = crate::traces::run_valgrind(
        Command::new("valgrind")
            .args(["-q", "--tool=cachegrind", "--cache-sim=yes"])
            .arg(format!("--I1={}", caches.i1))
            .arg(format!("--D1={}", caches.d1))
            .arg(format!("--LL={}", caches.ll))
            .arg(format!("--cachegrind-out-file={}", out.display()))
            .args(cmd)
            .stdin(Stdio::null()),
    )?;
    let secs = t.elapsed().as_secs_f64();
    if !st.success() {
        return Err(Error::Tool(format!("cachegrind failed on {cmd:?}")));
    }
    let text = std::fs::read_to_string(out).map_err(Error::io("cannot read", out))?;
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .ok_or_else(|| Error::Tool("cachegrind wrote no summary".into()))?;
    Ok((
        secs,
        summary
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect(),
    ))
}

/// Records `a.command`'s trace, then runs it under cachegrind and replays the trace,
/// `a.repeat` times each (the best counts); the counts must be identical.
pub fn run(a: &ReplayBench) -> Result<()> {
    let scratch = super::Scratch::new()?;
    let dir = scratch.path();
    let trace = dir.join("trace.cst");
    let rec = record_window(
        &Traced::plain(&a.command),
        &trace,
        Window::ALL,
        Counting::Events,
        &mut |_| {},
    )?;
    let (events, bytes) = (rec.events, rec.bytes);
    println!("program: {}", a.command.join(" "));
    println!("trace: {events} events, {bytes} bytes");
    let mut best_cg = f64::MAX;
    let mut best_us = f64::MAX;
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..a.repeat.max(1) {
        let (s, v) = cachegrind(&a.caches, &a.command, &dir.join("cg.out"))?;
        best_cg = best_cg.min(s);
        theirs = v;
        let t = Instant::now();
        let mut sim = a.caches.sim()?;
        replay_file(
            &mut sim,
            trace
                .to_str()
                .ok_or(Error::Internal("a temporary path that is not UTF-8"))?,
        )?;
        best_us = best_us.min(t.elapsed().as_secs_f64());
        ours = sim.counts.as_array().to_vec();
    }
    if ours != theirs {
        return Err(Error::Bench(format!(
            "counters differ: ours {ours:?}, cachegrind {theirs:?}"
        )));
    }
    println!("counters identical: {ours:?}");
    println!(
        "cachegrind {best_cg:.3} s, cachesched replay {best_us:.3} s: ratio {:.2}x",
        best_cg / best_us
    );
    Ok(())
}
