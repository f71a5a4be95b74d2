//! `cachesched bench`: speed measured side by side with a reference, reported as ratios.

use crate::replay_cmd::{record, replay_file, CgCaches, RecordArgs};
use anyhow::{bail, Context, Result};
use cachesched_sim::machine::PRESETS;
use cachesched_sim::{simulate, SimConfig, ThreadGroup};
use clap::{Args, Subcommand};
use std::process::{Command, Stdio};
use std::time::Instant;

/// `cachesched bench …`.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Replay speed against cachegrind itself on the same program and caches.
    Replay(ReplayBenchArgs),
    /// Simulated instructions per wall-clock second of the whole engine, per preset,
    /// side by side with cachegrind's rate on a reference program.
    Engine(EngineBenchArgs),
    /// Workload generators' accesses per second against the cache model's (the
    /// niagara-2c memory system) on the same accesses.
    Workloads(WorkloadBenchArgs),
    /// CASC's decision cost: the PCMR linear solve and the bucketization at 18, 100 and
    /// 1,000 threads, against the 10 ms slice the scheduler decides for.
    Casc(CascBenchArgs),
    /// The Linux daemon's own CPU time and decision latency with 10, 100 and 1,000
    /// managed threads.
    Daemon(crate::bench_daemon::DaemonBenchArgs),
}

/// Arguments of `cachesched bench casc`.
#[derive(Args, Debug)]
pub struct CascBenchArgs {
    /// Timed repetitions of each measurement (the median is kept).
    #[arg(long, default_value_t = 21)]
    repeat: usize,
}

/// Median wall time of `f` over `repeat` calls, in seconds.
fn median_secs(repeat: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..repeat.max(1))
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn run_casc(a: CascBenchArgs) -> Result<()> {
    use cachesched_core::SimRng;
    use cachesched_policies::casc::bucket::{bucketize, BucketParams};
    use cachesched_policies::casc::solve::{all_but_one, solve_pcmrs};
    let params = BucketParams {
        threshold: 15.0,
        growth: 1.25,
        min_threads_per_cpu: 1,
        step: 1.0,
        literal: true,
    };
    let slice = 10e-3;
    println!(
        "CASC decision cost (median of {} runs); share = cost / a 10 ms slice\n",
        a.repeat
    );
    println!(
        "{:>8} {:>26} {:>14} {:>26} {:>14}",
        "threads", "solve (n+1)x(n+1)", "share", "bucketize", "share"
    );
    for threads in [18usize, 100, 1000] {
        // a third greedy, the rest frugal, with spread
        let mut rng = SimRng::new(threads as u64);
        let pcmrs: Vec<f64> = (0..threads)
            .map(|i| {
                if i % 3 == 0 {
                    25.0 + 10.0 * rng.unit()
                } else {
                    5.0 + 15.0 * rng.unit()
                }
            })
            .collect();
        for (label, n) in [
            ("niagara-2c, n = 8", 8usize),
            ("n = threads - 1", threads - 1),
        ] {
            let rates: Vec<f64> = (0..=n)
                .map(|i| {
                    let s: f64 = (0..=n).filter(|&j| j != i).map(|j| pcmrs[j]).sum();
                    s / n as f64
                })
                .collect();
            let eqs = all_but_one(n, &rates);
            let solve = median_secs(a.repeat, || {
                std::hint::black_box(solve_pcmrs(n + 1, &eqs).expect("square system"));
            });
            let cpus = n.min(64);
            let buck = median_secs(a.repeat, || {
                std::hint::black_box(bucketize(&pcmrs, cpus, &params));
            });
            println!(
                "{threads:>8} {:>26} {:>13.4}% {:>26} {:>13.4}%",
                format!("{label}: {:.1} us", solve * 1e6),
                100.0 * solve / slice,
                format!("{cpus} CPUs: {:.1} us", buck * 1e6),
                100.0 * buck / slice
            );
        }
    }
    Ok(())
}

/// Arguments of `cachesched bench workloads`.
#[derive(Args, Debug)]
pub struct WorkloadBenchArgs {
    /// Accesses per profile.
    #[arg(long, default_value_t = 2_000_000)]
    accesses: usize,
    /// Only these profiles (comma-separated; default all).
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    profiles: Vec<String>,
}

fn run_workloads(a: WorkloadBenchArgs) -> Result<()> {
    use cachesched_core::{Counters, SimRng};
    use cachesched_sim::memory::MemorySystem;
    use cachesched_sim::workload::{profiles, LocalityThread, Op, Workload};
    let m = cachesched_sim::MachineConfig::preset("niagara-2c")?;
    let topo = m.topology()?;
    println!(
        "generation as the engine fetches it (boxed workload, batches of 32) against the niagara-2c\n\
         memory system (L1 + shared L2 + coherence + bus) fed the same accesses, {} per profile\n",
        a.accesses
    );
    println!(
        "{:<13} {:>14} {:>16} {:>8}",
        "profile", "gen access/s", "cache access/s", "ratio"
    );
    let mut all: Vec<(String, cachesched_sim::workload::LocalityModel)> = profiles()
        .into_iter()
        .map(|(n, _, m)| (n.to_string(), m))
        .collect();
    all.extend(
        cachesched_sim::benchmarks::benchmarks()
            .into_iter()
            .map(|b| (b.name.to_string(), b.model)),
    );
    if !a.profiles.is_empty() {
        if let Some(bad) = a
            .profiles
            .iter()
            .find(|p| !all.iter().any(|(n, _)| n == *p))
        {
            bail!("unknown profile '{bad}' (see `cachesched workloads`)");
        }
        all.retain(|(n, _)| a.profiles.contains(n));
    }
    let mut ratios = Vec::new();
    for (name, model) in all {
        // timed pass: generation alone, through dynamic dispatch like the engine
        let mut t: Box<dyn Workload> =
            Box::new(LocalityThread::new(model.clone(), 0, 0, SimRng::new(1)));
        let mut buf = Vec::with_capacity(32);
        let t0 = Instant::now();
        let mut n = 0;
        while n < a.accesses {
            buf.clear();
            t.fill(&mut buf, 32);
            for op in std::hint::black_box(&buf) {
                if let Op::Access { addr, .. } = op {
                    std::hint::black_box(addr);
                    n += 1;
                }
            }
        }
        let gen = t0.elapsed().as_secs_f64();
        // the same accesses again, stored for the cache model
        let mut t = LocalityThread::new(model, 0, 0, SimRng::new(1));
        let mut ops = Vec::with_capacity(a.accesses);
        t.feed_accesses(a.accesses as u64, |addr, write| ops.push((addr, write)));
        let mut mem = MemorySystem::new(&m, &topo)?;
        let mut ctr = Counters::default();
        let t1 = Instant::now();
        for (i, &(addr, write)) in ops.iter().enumerate() {
            std::hint::black_box(mem.data_access(0, 1, addr, write, i as u64 * 4, &mut ctr));
        }
        let model_s = t1.elapsed().as_secs_f64();
        let n = n as f64;
        let ratio = (model_s / a.accesses as f64) / (gen / n);
        ratios.push(ratio);
        println!(
            "{name:<13} {:>14.3e} {:>16.3e} {:>7.1}x",
            n / gen,
            a.accesses as f64 / model_s,
            ratio
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "\nratio: min {:.1}x, median {:.1}x (target: generation at least 10x the memory system)",
        ratios[0],
        ratios[ratios.len() / 2]
    );
    Ok(())
}

/// Arguments of `cachesched bench replay`.
#[derive(Args, Debug)]
pub struct ReplayBenchArgs {
    #[command(flatten)]
    caches: CgCaches,
    /// Timed repetitions of each side (the best is kept).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// The program to trace and run under cachegrind.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Arguments of `cachesched bench engine`.
#[derive(Args, Debug)]
pub struct EngineBenchArgs {
    /// Simulated milliseconds per preset.
    #[arg(long, default_value_t = 50.0)]
    duration_ms: f64,
    /// Reference program for cachegrind's simulated instructions per second (optional).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

fn cachegrind(caches: &CgCaches, cmd: &[String], out: &std::path::Path) -> Result<(f64, Vec<u64>)> {
    let t = Instant::now();
    let st = Command::new("valgrind")
        .args(["-q", "--tool=cachegrind", "--cache-sim=yes"])
        .arg(format!("--I1={}", caches.i1))
        .arg(format!("--D1={}", caches.d1))
        .arg(format!("--LL={}", caches.ll))
        .arg(format!("--cachegrind-out-file={}", out.display()))
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("cannot run valgrind: install it (e.g. `apt-get install valgrind`)")?;
    let secs = t.elapsed().as_secs_f64();
    if !st.success() {
        bail!("cachegrind failed on {cmd:?}");
    }
    let text = std::fs::read_to_string(out)?;
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .context("cachegrind wrote no summary")?;
    Ok((
        secs,
        summary
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect(),
    ))
}

fn run_replay(a: ReplayBenchArgs) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("cachesched-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let trace = dir.join("trace.cst");
    let (events, bytes) = record(&RecordArgs {
        out: trace.clone(),
        command: a.command.clone(),
    })?;
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
        replay_file(&mut sim, trace.to_str().context("temporary path is UTF-8")?)?;
        best_us = best_us.min(t.elapsed().as_secs_f64());
        ours = sim.counts.as_array().to_vec();
    }
    let _ = std::fs::remove_dir_all(&dir);
    if ours != theirs {
        bail!("counters differ: ours {ours:?}, cachegrind {theirs:?}");
    }
    println!("counters identical: {ours:?}");
    println!(
        "cachegrind {best_cg:.3} s, cachesched replay {best_us:.3} s: ratio {:.2}x",
        best_cg / best_us
    );
    Ok(())
}

fn run_engine(a: EngineBenchArgs) -> Result<()> {
    let mut reference = None;
    if !a.command.is_empty() {
        let dir = std::env::temp_dir().join(format!("cachesched-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let caches = CgCaches {
            i1: "32768,8,64".into(),
            d1: "32768,8,64".into(),
            ll: "8388608,16,64".into(),
        };
        let (s, v) = cachegrind(&caches, &a.command, &dir.join("cg.out"))?;
        let _ = std::fs::remove_dir_all(&dir);
        let rate = v[0] as f64 / s;
        println!(
            "reference: cachegrind on {}: {:.3e} instructions/s",
            a.command.join(" "),
            rate
        );
        reference = Some(rate);
    }
    println!(
        "{:<16} {:>7} {:>14} {:>10}",
        "preset", "threads", "sim instr/s", "vs ref"
    );
    for (name, _) in PRESETS {
        let m = cachesched_sim::MachineConfig::preset(name)?;
        let n = m.chips * m.cores_per_chip * m.threads_per_core;
        let per = (n * 3).div_ceil(4).max(1);
        let mix = format!("large:{per},medium:{per},small:{per}");
        let mut cfg = SimConfig::new(name, ThreadGroup::parse_mix(&mix)?);
        cfg.duration_ms = a.duration_ms;
        let t = Instant::now();
        let r = simulate(&cfg)?;
        let rate = r.totals.instructions as f64 / t.elapsed().as_secs_f64();
        let vs = reference
            .map(|x| format!("{:.3}", rate / x))
            .unwrap_or_else(|| "-".into());
        println!("{name:<16} {:>7} {rate:>14.3e} {vs:>10}", 3 * per);
    }
    Ok(())
}

/// Dispatches `cachesched bench …`.
pub fn run(c: BenchCommand) -> Result<()> {
    match c {
        BenchCommand::Replay(a) => run_replay(a),
        BenchCommand::Engine(a) => run_engine(a),
        BenchCommand::Workloads(a) => run_workloads(a),
        BenchCommand::Casc(a) => run_casc(a),
        BenchCommand::Daemon(a) => crate::bench_daemon::run(a),
    }
}
