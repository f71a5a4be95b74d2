//! `cachesched bench replay`: the trace replay's speed against cachegrind itself on the
//! same program and caches, with identical counts; `cachesched bench skip`: reading
//! lackey's output event by event against passing over it, beside lackey's own time.

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

/// What `bench skip` measures.
#[derive(Debug, Clone)]
pub struct SkipBench {
    /// Timed repetitions of each reader, interleaved (the median is kept).
    pub repeat: usize,
    /// The program whose lackey output is read.
    pub command: Vec<String>,
}

/// Lackey's output for `a.command` read two ways, side by side and interleaved: every
/// event parsed ([`LackeyReader::next_event`], how a window's events are read) and
/// passed over ([`LackeyReader::skip_until`], how a recording goes through the
/// instructions before its window), each against the time lackey took to write it,
/// which is what a recording's reader runs beside; then live from lackey's pipe, read
/// eagerly and in batches ([`crate::traces::Batched`]), wall and reader's CPU time.
///
/// [`LackeyReader::next_event`]: cachesched_sim::trace::replay::LackeyReader::next_event
/// [`LackeyReader::skip_until`]: cachesched_sim::trace::replay::LackeyReader::skip_until
pub fn skip(a: &SkipBench) -> Result<()> {
    use cachesched_sim::trace::replay::LackeyReader;
    use std::io::BufReader;
    let scratch = super::Scratch::new()?;
    let log = scratch.path().join("lackey.txt");
    let t0 = Instant::now();
    let st = crate::traces::run_valgrind(
        Command::new("valgrind")
            .args(["-q", "--tool=lackey", "--trace-mem=yes"])
            .arg(format!("--log-file={}", log.display()))
            .args(&a.command)
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    )?;
    let lackey_s = t0.elapsed().as_secs_f64();
    if !st.success() {
        return Err(Error::Tool(format!("lackey failed on {:?}", a.command)));
    }
    let text = std::fs::read(&log).map_err(Error::io("cannot read", &log))?;
    // a recording reads lackey's pipe through a 1 MiB buffer
    let reader = || LackeyReader::new(BufReader::with_capacity(1 << 20, &text[..]));
    let (mut every, mut skipped) = (Vec::new(), Vec::new());
    let (mut events, mut instructions) = (0u64, 0u64);
    for _ in 0..a.repeat.max(1) {
        let t = Instant::now();
        let mut r = reader();
        events = 0;
        while r.next_event()?.is_some() {
            events += 1;
        }
        every.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut r = reader();
        instructions = 0;
        r.skip_until(|_| {
            instructions += 1;
            false
        })?;
        skipped.push(t.elapsed().as_secs_f64());
    }
    let (every, skipped) = (super::median(every), super::median(skipped));
    let mb = text.len() as f64 / 1e6;
    println!("program: {}", a.command.join(" "));
    println!(
        "lackey's output: {mb:.1} MB, {events} events, {instructions} instructions, written in {lackey_s:.2} s"
    );
    println!(
        "| reader | s (median of {}) | MB/s | share of lackey's time |",
        a.repeat.max(1)
    );
    println!("|---|---:|---:|---:|");
    for (name, s) in [
        ("every event parsed", every),
        ("passed over (skip_until)", skipped),
    ] {
        println!(
            "| {name} | {s:.3} | {:.0} | {:.1}% |",
            mb / s,
            100.0 * s / lackey_s
        );
    }
    println!(
        "passing over is {:.1}x as fast as parsing every event",
        every / skipped
    );
    // the same, live: lackey writing into the pipe a recording reads, read eagerly (every
    // read as soon as anything is there) and in batches (crate::traces::Batched)
    let live = |batched: bool| -> Result<(f64, f64)> {
        let (mut child, log) = crate::traces::spawn_lackey(&a.command, &[], None)?;
        let (t, cpu) = (Instant::now(), cachesched_linux::daemon::own_cpu_time());
        let passed = if batched {
            let b = BufReader::with_capacity(1 << 20, crate::traces::Batched::new(log));
            LackeyReader::new(b).skip_until(|_| false)
        } else {
            LackeyReader::new(BufReader::with_capacity(1 << 20, log)).skip_until(|_| false)
        };
        let (wall, cpu) = (
            t.elapsed().as_secs_f64(),
            (cachesched_linux::daemon::own_cpu_time() - cpu).as_secs_f64(),
        );
        let st = child.wait().map_err(Error::TraceIo)?;
        passed?;
        if !st.success() {
            return Err(Error::Tool(format!("lackey failed on {:?}", a.command)));
        }
        Ok((wall, cpu))
    };
    let (mut eager, mut batched) = (Vec::new(), Vec::new());
    for _ in 0..a.repeat.max(1) {
        eager.push(live(false)?);
        batched.push(live(true)?);
    }
    println!();
    println!("lackey writing into the recording's pipe, passed over as it comes (median of {}, interleaved):", a.repeat.max(1));
    println!("| reader | wall s | reader's CPU s | reader's CPU per wall s |");
    println!("|---|---:|---:|---:|");
    let med =
        |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| super::median(v.iter().map(f).collect());
    let mut rows = Vec::new();
    for (name, v) in [("eager", &eager), ("batched", &batched)] {
        let (wall, cpu) = (med(v, |x| x.0), med(v, |x| x.1));
        println!("| {name} | {wall:.2} | {cpu:.2} | {:.2} |", cpu / wall);
        rows.push((wall, cpu));
    }
    println!(
        "batched against eager: wall {:.2}x, the reader's CPU {:.2}x",
        rows[1].0 / rows[0].0,
        rows[1].1 / rows[0].1
    );
    Ok(())
}
