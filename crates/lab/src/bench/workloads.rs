//! `cachesched bench workloads`: the workload generators' accesses per second against
//! the cache model's (the niagara-2c memory system fed the same operations) and the
//! whole simulated machine's.

use crate::error::{invalid, Result};
use cachesched_sim::{simulate, SimConfig, ThreadGroup};
use std::time::Instant;

/// What `bench workloads` measures.
#[derive(Debug, Clone)]
pub struct WorkloadBench {
    /// Accesses per profile for the generator and the cache model.
    pub accesses: usize,
    /// Timed repetitions of the generator and the cache model (the best is kept).
    pub repeat: u32,
    /// Simulated milliseconds per profile for the whole machine (0: skip).
    pub machine_ms: f64,
    /// Only these profiles (empty: all).
    pub profiles: Vec<String>,
}

/// Measures every profile (or those `a` names) and prints a row each, then the
/// ratios' summary.
pub fn run(a: &WorkloadBench) -> Result<()> {
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
            return Err(invalid!(
                "unknown profile '{bad}' (see `cachesched workloads`)"
            ));
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
