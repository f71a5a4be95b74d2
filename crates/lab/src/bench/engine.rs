//! `cachesched bench engine` and `bench scaling`: the whole engine's simulated
//! instructions per wall-clock second, per preset, against cachegrind's rate on a
//! reference program or against another build run side by side; and how its cost
//! grows with threads and CPUs on Niagara-like machines.

use super::replay::cachegrind;
use crate::error::{invalid, Error, Result};
use crate::traces::CacheSpecs;
use cachesched_sim::{simulate, SimConfig, ThreadGroup, PAPER_MIXES};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// What `bench engine` measures.
#[derive(Debug, Clone)]
pub struct EngineBench {
    /// Simulated milliseconds per preset.
    pub duration_ms: f64,
    /// A reference build of cachesched (its binary): every preset is run by it and by
    /// [`EngineBench::exe`] side by side, interleaved, [`EngineBench::repeat`] times
    /// each, and the best times compared; their results must be identical (the same
    /// model version).
    pub against: Option<PathBuf>,
    /// Runs of each build per preset with [`EngineBench::against`] (the best counts).
    pub repeat: u32,
    /// Only these presets (empty: every preset).
    pub only: Vec<String>,
    /// Reference program for cachegrind's simulated instructions per second (empty:
    /// none).
    pub command: Vec<String>,
    /// This build's binary, run against [`EngineBench::against`].
    pub exe: PathBuf,
}

/// What `bench scaling` measures.
#[derive(Debug, Clone)]
pub struct ScalingBench {
    /// Simulated milliseconds per run.
    pub duration_ms: f64,
    /// CPU counts (multiples of 4: cores of 4 hardware threads).
    pub cpus: Vec<u32>,
    /// Thread counts (a third each of art, twolf and bdb).
    pub threads: Vec<u32>,
}

/// One run of `simulate` by `binary` on `preset`'s paper mix `mix` for `ms` simulated
/// milliseconds: (its wall seconds, process start included, its result's JSON).
fn timed_simulate(
    binary: &Path,
    preset: &str,
    mix: &str,
    ms: f64,
    json: &Path,
) -> Result<(f64, String)> {
    let t = Instant::now();
    let out = Command::new(binary)
        .args([
            "simulate",
            "--machine",
            preset,
            "--mix",
            mix,
            "--seed",
            "1",
            "--quiet",
        ])
        .arg("--duration-ms")
        .arg(ms.to_string())
        .arg("--json")
        .arg(json)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            what: format!("cannot run '{}'", binary.display()),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "'{}' failed on {preset}: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let wall = t.elapsed().as_secs_f64();
    let result = std::fs::read_to_string(json).map_err(Error::io("cannot read", json))?;
    Ok((wall, result))
}

/// `bench engine --against`: every preset's paper mix run by `reference` and by this
/// build, interleaved, best of `repeat` each.
fn engine_against(a: &EngineBench, reference: &Path) -> Result<()> {
    let me = &a.exe;
    let scratch = super::Scratch::new()?;
    let dir = scratch.path();
    println!(
        "{} ms per preset, best of {} interleaved runs of each build; reference {}",
        a.duration_ms,
        a.repeat,
        reference.display()
    );
    println!(
        "{:<16} {:>12} {:>12} {:>14} {:>8} {:>10}",
        "preset", "ref wall s", "this wall s", "sim instr/s", "speed-up", "results"
    );
    let mut ratios = Vec::new();
    for (name, mix) in PAPER_MIXES {
        if !a.only.is_empty() && !a.only.iter().any(|o| o == name) {
            continue;
        }
        let (mut best_ref, mut best_me) = (f64::MAX, f64::MAX);
        let (mut ref_json, mut my_json) = (String::new(), String::new());
        for _ in 0..a.repeat.max(1) {
            let (w, j) =
                timed_simulate(reference, name, mix, a.duration_ms, &dir.join("ref.json"))?;
            best_ref = best_ref.min(w);
            ref_json = j;
            let (w, j) = timed_simulate(me, name, mix, a.duration_ms, &dir.join("me.json"))?;
            best_me = best_me.min(w);
            my_json = j;
        }
        let r: cachesched_sim::RunResult =
            serde_json::from_str(&my_json).map_err(|source| Error::ParseResults {
                path: dir.join("me.json"),
                source,
            })?;
        let same = if ref_json == my_json {
            "identical"
        } else {
            "DIFFER"
        };
        let ratio = best_ref / best_me;
        ratios.push(ratio);
        println!(
            "{name:<16} {best_ref:>12.2} {best_me:>12.2} {:>14.3e} {ratio:>7.2}x {same:>10}",
            r.totals.instructions as f64 / best_me
        );
    }
    let gm = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len().max(1) as f64).exp();
    println!(
        "speed-up: min {:.2}x, geometric mean {gm:.2}x",
        ratios.iter().copied().fold(f64::INFINITY, f64::min)
    );
    Ok(())
}

/// Runs every preset's paper mix and prints its simulated instructions per second
/// (against cachegrind's on the reference program if given), or with
/// [`EngineBench::against`] compares two builds side by side.
pub fn run(a: &EngineBench) -> Result<()> {
    if let Some(r) = &a.against {
        return engine_against(a, r);
    }
    let mut reference = None;
    if !a.command.is_empty() {
        let scratch = super::Scratch::new()?;
        let dir = scratch.path();
        let caches = CacheSpecs::default();
        let (s, v) = cachegrind(&caches, &a.command, &dir.join("cg.out"))?;
        let rate = v[0] as f64 / s;
        println!(
            "reference: cachegrind on {}: {:.3e} instructions/s",
            a.command.join(" "),
            rate
        );
        reference = Some(rate);
    }
    println!(
        "{:<16} {:<40} {:>7} {:>9} {:>14} {:>10}",
        "preset", "paper workload", "threads", "L1D miss", "sim instr/s", "vs ref"
    );
    for (name, mix) in PAPER_MIXES {
        let groups = ThreadGroup::parse_mix(mix)?;
        let threads: u32 = groups.iter().map(|g| g.count).sum();
        let mut cfg = SimConfig::new(name, groups);
        cfg.duration_ms = a.duration_ms;
        let t = Instant::now();
        let r = simulate(&cfg)?;
        let rate = r.totals.instructions as f64 / t.elapsed().as_secs_f64();
        let l1d = r.totals.l1d_misses as f64 / r.totals.l1d_refs.max(1) as f64;
        let vs = reference
            .map(|x| format!("{:.3}", rate / x))
            .unwrap_or_else(|| "-".into());
        println!("{name:<16} {mix:<40} {threads:>7} {l1d:>9.3} {rate:>14.3e} {vs:>10}");
    }
    Ok(())
}

/// A Niagara-like machine of `cpus` hardware threads: niagara-8c's cores (4 threads
/// each, its L1s) on one chip, with its 3 MB 12-way L2 and its memory bandwidth scaled
/// by the number of cores (384 KB per core).
fn niagara_like(cpus: u32) -> Result<cachesched_sim::MachineConfig> {
    if cpus == 0 || !cpus.is_multiple_of(4) {
        return Err(invalid!(
            "--cpus takes multiples of 4 (cores of 4 hardware threads), not {cpus}"
        ));
    }
    let mut m = cachesched_sim::MachineConfig::preset("niagara-8c")?;
    let cores = cpus / 4;
    let scale = cores as f64 / m.cores_per_chip as f64;
    m.name = format!("niagara-like-{cpus}");
    m.cores_per_chip = cores;
    let l2 = m.caches.last_mut().expect("niagara-8c has an L2");
    l2.size_bytes = (384 << 10) * cores as u64;
    m.memory.bus_bytes_per_cycle *= scale;
    Ok(m)
}

/// The process's peak resident memory so far (`VmHWM`), in MB.
fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Runs every (CPUs, threads) pair in order of size and prints a row each.
pub fn scaling(a: &ScalingBench) -> Result<()> {
    println!(
        "Niagara-like machines (niagara-8c's cores, L2 384 KB per core), art/twolf/bdb in\n\
         thirds, {} simulated ms per run, in order of size; cost = host ns per simulated\n\
         instruction, relative to the first run; peak = the process's peak resident memory\n\
         so far",
        a.duration_ms
    );
    println!(
        "{:>5} {:>8} {:>8} {:>14} {:>10} {:>7} {:>8}",
        "CPUs", "threads", "thr/CPU", "sim instr/s", "ns/instr", "cost", "peak MB"
    );
    let mut first = None;
    for &cpus in &a.cpus {
        let m = niagara_like(cpus)?;
        for &n in &a.threads {
            let (x, y) = (n / 3, n / 3);
            let mix = format!("art:{},twolf:{x},bdb:{y}", n - x - y);
            let mut cfg = SimConfig::new("niagara-8c", ThreadGroup::parse_mix(&mix)?);
            cfg.machine = cachesched_sim::MachineSpec::Custom(Box::new(m.clone()));
            cfg.duration_ms = a.duration_ms;
            let t = Instant::now();
            let r = simulate(&cfg)?;
            let secs = t.elapsed().as_secs_f64();
            let ns = secs * 1e9 / r.totals.instructions.max(1) as f64;
            let base = *first.get_or_insert(ns);
            println!(
                "{cpus:>5} {n:>8} {:>8.2} {:>14.3e} {ns:>10.1} {:>7.2} {:>8.0}",
                n as f64 / cpus as f64,
                r.totals.instructions as f64 / secs,
                ns / base,
                peak_rss_mb().unwrap_or(f64::NAN)
            );
        }
    }
    Ok(())
}
