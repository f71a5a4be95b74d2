//! `cachesched bench`: speed measured side by side with a reference, reported as ratios.

use crate::cmd::replay::{replay_file, CgCaches};
use anyhow::{bail, Context, Result};
use cachesched_lab::traces::{record_window, Window};
use cachesched_sim::{simulate, SimConfig, ThreadGroup, PAPER_MIXES};
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
    /// How the engine's cost grows with threads and CPUs: Niagara-like machines of 8,
    /// 64 and 256 CPUs running 18, 100 and 1,000 threads.
    Scaling(ScalingBenchArgs),
    /// Workload generators' accesses per second against the cache model's (the
    /// niagara-2c memory system fed the same operations) and the whole simulated
    /// machine's.
    Workloads(WorkloadBenchArgs),
    /// CASC's decision cost: the PCMR linear solve and the bucketization at 18, 100 and
    /// 1,000 threads, against the 10 ms slice the scheduler decides for.
    Casc(CascBenchArgs),
    /// The Linux daemon's own CPU time and decision latency with 10, 100 and 1,000
    /// managed threads.
    Daemon(crate::cmd::bench_daemon::DaemonBenchArgs),
    /// The cache-fair scheduler's decision cost per co-run segment, reconnaissance and
    /// calibration at 10, 100 and 1,000 threads, against its 10 ms tick.
    Cachefair(crate::cmd::bench_cachefair::CacheFairBenchArgs),
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
        "CASC decision cost (median of {} runs); share = cost / a 10 ms slice; the solve is\n\
         of an (n+1)x(n+1) system (niagara-2c: n = 8, as on its CPUs; all: n = threads - 1)\n",
        a.repeat
    );
    println!(
        "{:>7} {:<10} {:>5} {:>14} {:>11} {:>5} {:>14} {:>11}",
        "threads", "case", "n", "solve us", "share", "CPUs", "bucketize us", "share"
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
        for (label, n) in [("niagara-2c", 8usize), ("all", threads - 1)] {
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
                "{threads:>7} {label:<10} {n:>5} {:>14.1} {:>10.3}% {cpus:>5} {:>14.1} {:>10.3}%",
                solve * 1e6,
                100.0 * solve / slice,
                buck * 1e6,
                100.0 * buck / slice
            );
        }
    }
    Ok(())
}

/// Arguments of `cachesched bench workloads`.
#[derive(Args, Debug)]
pub struct WorkloadBenchArgs {
    /// Accesses per profile for the generator and the cache model.
    #[arg(long, default_value_t = 2_000_000)]
    accesses: usize,
    /// Timed repetitions of the generator and the cache model (the best is kept).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Simulated milliseconds per profile for the whole machine (0: skip).
    #[arg(long, default_value_t = 10.0)]
    machine_ms: f64,
    /// Only these profiles (comma-separated; default all).
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    profiles: Vec<String>,
}

fn run_workloads(a: WorkloadBenchArgs) -> Result<()> {
    use cachesched_core::{Counters, SimRng};
    use cachesched_sim::config::PagePlacement;
    use cachesched_sim::hw::memory::MemorySystem;
    use cachesched_sim::workload::{fetch_accesses, profiles, LocalityThread, Op, Workload};
    const MACHINE: &str = "niagara-2c";
    let m = cachesched_sim::MachineConfig::preset(MACHINE)?;
    let topo = m.topology()?;
    let ipath_shift = topo.fetch_line_shift();
    let pages = PagePlacement::default();
    println!(
        "gen: generation as the engine fetches it (boxed workload, batches of 32), {n} accesses,\n  \
         best of {rep}\n\
         cache model: the {MACHINE} memory system (L1I, L1D, shared L2, coherence, bus) fed the\n  \
         same operations as the engine feeds it (an instruction fetch when the pc enters a new\n  \
         line, the data access, page placement), {n} accesses, best of {rep}\n\
         machine: the whole simulated machine, one thread of the profile per CPU ({cpus}),\n  \
         {ms} ms simulated, data accesses per wall-clock second (generation included)\n",
        n = a.accesses,
        rep = a.repeat.max(1),
        cpus = topo.nr_cpus(),
        ms = a.machine_ms,
    );
    println!(
        "{:<13} {:>10} {:>12} {:>7} {:>10} {:>7}",
        "profile", "gen acc/s", "cache acc/s", "ratio", "machine", "ratio"
    );
    let mut all: Vec<(String, cachesched_sim::workload::LocalityModel)> = profiles()
        .into_iter()
        .map(|(n, _, m)| (n.to_string(), m))
        .collect();
    all.extend(
        cachesched_sim::workload::benchmarks::benchmarks()
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
    let (mut cache_ratios, mut machine_ratios) = (Vec::new(), Vec::new());
    for (name, model) in all {
        // timed passes: generation alone, through dynamic dispatch like the engine
        let gen = (0..a.repeat.max(1))
            .map(|_| {
                let mut t: Box<dyn Workload> =
                    Box::new(LocalityThread::new(model.clone(), 0, 0, SimRng::new(1)));
                let t0 = Instant::now();
                let n = fetch_accesses(t.as_mut(), a.accesses as u64, |addr| {
                    std::hint::black_box(addr);
                });
                t0.elapsed().as_secs_f64() / n as f64
            })
            .fold(f64::INFINITY, f64::min);
        // the same operations again, stored, then fed to the memory system
        let mut t = LocalityThread::new(model, 0, 0, SimRng::new(1));
        let mut ops = Vec::with_capacity(a.accesses);
        while ops.len() < a.accesses {
            if let Op::Access {
                addr, write, pc, ..
            } = t.next_op()
            {
                ops.push((addr, write, pc));
            }
        }
        let mut cache = f64::INFINITY;
        for _ in 0..a.repeat.max(1) {
            let mut mem = MemorySystem::new(&m, &topo)?;
            let mut ctr = Counters::default();
            let mut last_line = u64::MAX;
            let t1 = Instant::now();
            for (i, &(addr, write, pc)) in ops.iter().enumerate() {
                let now = i as u64 * 4;
                if pc >> ipath_shift != last_line {
                    last_line = pc >> ipath_shift;
                    std::hint::black_box(mem.instr_fetch(0, 1, pages.translate(pc), now, &mut ctr));
                }
                std::hint::black_box(mem.data_access(
                    0,
                    1,
                    pages.translate(addr),
                    pc,
                    write,
                    now,
                    &mut ctr,
                ));
            }
            cache = cache.min(t1.elapsed().as_secs_f64() / a.accesses as f64);
        }
        let cache_ratio = cache / gen;
        cache_ratios.push(cache_ratio);
        let machine = if a.machine_ms > 0.0 {
            let mut cfg = SimConfig::new(
                MACHINE,
                ThreadGroup::parse_mix(&format!("{name}:{}", topo.nr_cpus()))?,
            );
            cfg.duration_ms = a.machine_ms;
            let t2 = Instant::now();
            let r = simulate(&cfg)?;
            let per = t2.elapsed().as_secs_f64() / r.totals.l1d_refs.max(1) as f64;
            machine_ratios.push(per / gen);
            format!("{:>10.3e} {:>6.1}x", 1.0 / per, per / gen)
        } else {
            format!("{:>10} {:>7}", "-", "-")
        };
        println!(
            "{name:<13} {:>10.3e} {:>12.3e} {:>6.1}x {machine}",
            1.0 / gen,
            1.0 / cache,
            cache_ratio,
        );
    }
    let summary = |what: &str, r: &mut Vec<f64>| {
        if r.is_empty() {
            return;
        }
        r.sort_by(f64::total_cmp);
        println!(
            "{what}: min {:.1}x, median {:.1}x, max {:.1}x",
            r[0],
            r[r.len() / 2],
            r[r.len() - 1]
        );
    };
    println!("\ngeneration's rate against (target: at least 10x)");
    summary("  the cache model", &mut cache_ratios);
    summary("  the whole machine", &mut machine_ratios);
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
    /// A reference build of cachesched (its binary): every preset is run by it and by
    /// this build side by side, interleaved, `--repeat` times each, and the best times
    /// compared; their results must be identical (the same model version).
    #[arg(long, value_name = "BINARY")]
    against: Option<std::path::PathBuf>,
    /// Runs of each build per preset with `--against` (the best counts).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Only these presets (default: every preset).
    #[arg(long, value_delimiter = ',', value_name = "PRESET")]
    only: Vec<String>,
    /// Reference program for cachegrind's simulated instructions per second (optional).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// One run of `simulate` by `binary` on `preset`'s paper mix `mix` for `ms` simulated
/// milliseconds: (its wall seconds, process start included, its result's JSON).
fn timed_simulate(
    binary: &std::path::Path,
    preset: &str,
    mix: &str,
    ms: f64,
    json: &std::path::Path,
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
        .with_context(|| format!("cannot run '{}'", binary.display()))?;
    if !out.status.success() {
        bail!(
            "'{}' failed on {preset}: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let wall = t.elapsed().as_secs_f64();
    let result = std::fs::read_to_string(json)
        .with_context(|| format!("cannot read '{}'", json.display()))?;
    Ok((wall, result))
}

/// `bench engine --against`: every preset's paper mix run by `reference` and by this
/// build, interleaved, best of `repeat` each.
fn engine_against(a: &EngineBenchArgs, reference: &std::path::Path) -> Result<()> {
    let me = std::env::current_exe().context("cannot find this build's binary")?;
    let dir = std::env::temp_dir().join(format!("cachesched-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
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
            let (w, j) = timed_simulate(&me, name, mix, a.duration_ms, &dir.join("me.json"))?;
            best_me = best_me.min(w);
            my_json = j;
        }
        let r: cachesched_sim::RunResult = serde_json::from_str(&my_json)?;
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
    let _ = std::fs::remove_dir_all(&dir);
    let gm = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len().max(1) as f64).exp();
    println!(
        "speed-up: min {:.2}x, geometric mean {gm:.2}x",
        ratios.iter().copied().fold(f64::INFINITY, f64::min)
    );
    Ok(())
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
    let rec = record_window(&a.command, &[], &trace, Window::ALL)?;
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
    if let Some(r) = &a.against {
        return engine_against(&a, r);
    }
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

/// Arguments of `cachesched bench scaling`.
#[derive(Args, Debug)]
pub struct ScalingBenchArgs {
    /// Simulated milliseconds per run.
    #[arg(long, default_value_t = 2.0)]
    duration_ms: f64,
    /// CPU counts (multiples of 4: cores of 4 hardware threads), comma-separated.
    #[arg(
        long,
        value_name = "N,…",
        default_value = "8,64,256",
        value_delimiter = ','
    )]
    cpus: Vec<u32>,
    /// Thread counts, comma-separated (a third each of art, twolf and bdb).
    #[arg(
        long,
        value_name = "N,…",
        default_value = "18,100,1000",
        value_delimiter = ','
    )]
    threads: Vec<u32>,
}

/// A Niagara-like machine of `cpus` hardware threads: niagara-8c's cores (4 threads
/// each, its L1s) on one chip, with its 3 MB 12-way L2 and its memory bandwidth scaled
/// by the number of cores (384 KB per core).
fn niagara_like(cpus: u32) -> Result<cachesched_sim::MachineConfig> {
    if cpus == 0 || !cpus.is_multiple_of(4) {
        bail!("--cpus takes multiples of 4 (cores of 4 hardware threads), not {cpus}");
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

fn run_scaling(a: ScalingBenchArgs) -> Result<()> {
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

/// Dispatches `cachesched bench …`.
pub fn run(c: BenchCommand) -> Result<()> {
    match c {
        BenchCommand::Replay(a) => run_replay(a),
        BenchCommand::Engine(a) => run_engine(a),
        BenchCommand::Scaling(a) => run_scaling(a),
        BenchCommand::Workloads(a) => run_workloads(a),
        BenchCommand::Casc(a) => run_casc(a),
        BenchCommand::Daemon(a) => crate::cmd::bench_daemon::run(a),
        BenchCommand::Cachefair(a) => crate::cmd::bench_cachefair::run(a),
    }
}
