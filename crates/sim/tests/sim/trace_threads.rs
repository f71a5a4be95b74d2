//! A recorded trace replayed as a thread of the simulated machine meets the same L1D
//! behaviour that cachegrind's rules (`cachesched replay`) give the same trace at the
//! same cache shape.

use cachesched_core::SimRng;
use cachesched_sim::hw::prefetch::PrefetchConfig;
use cachesched_sim::trace::replay::{parse_cg_cache, CgSim, TraceEvent};
use cachesched_sim::trace::TraceWriter;
use cachesched_sim::{simulate, MachineConfig, MachineSpec, SimConfig, ThreadGroup, TraceStart};

/// Loads and stores (one in four), three instructions of a 64-byte loop before each:
/// three in five to random 8-byte words of 48 KB, two in five walking 36 KB line by
/// line (nine lines per set of a 32 KB 8-way cache: LRU misses all of those, other
/// replacement policies fewer).
fn events() -> Vec<TraceEvent> {
    let mut rng = SimRng::new(5);
    let mut v = Vec::new();
    let mut pc = 0x40_1000u64;
    let mut walk = 0u64;
    for i in 0..60_000u64 {
        for _ in 0..3 {
            v.push(TraceEvent::Instr { addr: pc, size: 4 });
            pc = if pc >= 0x40_103c { 0x40_1000 } else { pc + 4 };
        }
        let addr = if i % 5 < 2 {
            walk = (walk + 64) % (36 * 1024);
            0x7f00_1000_0000 + walk
        } else {
            0x7f00_0000_0000 + rng.below(48 * 1024 / 8) * 8
        };
        v.push(if i % 4 == 0 {
            TraceEvent::Store { addr, size: 8 }
        } else {
            TraceEvent::Load { addr, size: 8 }
        });
    }
    v
}

#[test]
fn trace_thread_misses_the_l1d_as_replay_does() {
    let ev = events();
    // cachegrind's rules at 32 KB 8-way 64-byte lines: the third pass, warm
    let g = |n: &str, v: &str| parse_cg_cache(n, v).unwrap();
    let mut cg = CgSim::new(
        g("I1", "32768,8,64"),
        g("D1", "32768,8,64"),
        g("LL", "4194304,16,64"),
    )
    .unwrap();
    for _ in 0..2 {
        ev.iter().for_each(|&e| cg.event(e));
    }
    let before = cg.counts;
    ev.iter().for_each(|&e| cg.event(e));
    let c = cg.counts;
    let replay = (c.d1mr + c.d1mw - before.d1mr - before.d1mw) as f64
        / (c.dr + c.dw - before.dr - before.dw) as f64;
    assert!((0.4..0.9).contains(&replay), "{replay}");

    // the same trace as a thread on clovertown-2x2 (32 KB 8-way 64-byte L1D, LRU), its
    // prefetchers off; it loops the 60,000 accesses many times in the 30 ms measured
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    ev.iter().for_each(|&e| w.write(e).unwrap());
    let dir = std::env::temp_dir().join(format!("cachesched-tt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("random48k.cst");
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    let mut m = MachineConfig::preset("clovertown-2x2").unwrap();
    m.prefetch = PrefetchConfig::default();
    let mut cfg = SimConfig::new(
        "clovertown-2x2",
        ThreadGroup::parse_mix(&format!("{}:1", path.display())).unwrap(),
    );
    cfg.machine = MachineSpec::Custom(Box::new(m));
    cfg.duration_ms = 40.0;
    cfg.warmup_ms = 10.0;
    let r = simulate(&cfg).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let t = &r.threads[0].counters;
    assert!(t.l1d_refs > 3 * ev.len() as u64 / 4, "{t:?}");
    let thread = t.l1d_misses as f64 / t.l1d_refs as f64;
    eprintln!("L1D miss ratio: thread {thread:.4}, replay {replay:.4}");
    // same cache shape, same replacement: within 2% of each other
    assert!(
        (thread / replay - 1.0).abs() < 0.02,
        "thread {thread} vs replay {replay}"
    );
}

/// A two-phase program, three instructions before each access: 300,000 accesses looping
/// over 32 KB (more than t1-dual's 8 KB L1D, well inside its L2), then 200,000
/// streaming through 64 MB (each access a new line). Each phase lasts several 3 ms
/// windows on t1-dual.
fn two_phase_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let mut pc = 0x40_1000u64;
    for i in 0..500_000u64 {
        for _ in 0..3 {
            w.write(TraceEvent::Instr { addr: pc, size: 4 }).unwrap();
            pc = if pc >= 0x40_103c { 0x40_1000 } else { pc + 4 };
        }
        let addr = if i < 300_000 {
            0x7f00_0000_0000 + (i * 64) % (32 << 10)
        } else {
            0x7f10_0000_0000 + i * 64 * 5
        };
        w.write(TraceEvent::Load { addr, size: 8 }).unwrap();
    }
    let path = dir.join("twophase.cst");
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    path
}

/// Threads of a trace start at a seeded offset: over eight seeds a window much shorter
/// than the trace lands in both phases of a two-phase program, and two threads of one
/// run start apart; with `trace_start = "beginning"` every seed gives the same run.
/// Fails if the start ignores the seed (all eight alike), if the offset is not spread
/// over the trace (one phase only), or if `beginning` still depends on the seed.
#[test]
fn seeded_trace_starts_spread_over_the_program() {
    let dir = std::env::temp_dir().join(format!("cachesched-ts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = two_phase_trace(&dir);
    let run = |seed: u64, start: TraceStart| {
        let mut groups = ThreadGroup::parse_mix(&format!("{}:2", path.display())).unwrap();
        groups[0].trace_start = start;
        let mut cfg = SimConfig::new("t1-dual", groups);
        cfg.seed = seed;
        cfg.duration_ms = 3.0;
        cfg.warmup_ms = 0.5;
        simulate(&cfg).unwrap()
    };
    let mut ratios = Vec::new();
    for seed in 1..=8 {
        let r = run(seed, TraceStart::Seeded);
        let c: Vec<_> = r.threads.iter().map(|t| t.counters).collect();
        // far less than one pass of the 2,000,000-instruction trace
        assert!(c[0].instructions < 1_000_000, "{:?}", c[0]);
        ratios.push((c[0].l2_miss_ratio(), c[1].l2_miss_ratio()));
    }
    eprintln!("L2 miss ratios (thread 0, thread 1) by seed: {ratios:.3?}");
    // the 32 KB loop hits in the L2, the stream misses every line; inside one phase two starts look alike, so "apart" is seen as
    // a run with one thread in each phase (half the runs, when starts are independent)
    let all = || ratios.iter().flat_map(|&(a, b)| [a, b]);
    assert!(all().any(|m| m < 0.2), "{ratios:?}");
    assert!(all().any(|m| m > 0.8), "{ratios:?}");
    let split = ratios
        .iter()
        .filter(|&&(a, b)| a.min(b) < 0.2 && a.max(b) > 0.8)
        .count();
    assert!(
        split >= 2,
        "threads of one run in different phases in {split} of 8"
    );
    let first = run(1, TraceStart::Beginning);
    assert_eq!(run(2, TraceStart::Beginning).threads, first.threads);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run prepared apart ([`Simulation::prepare`], which `--plan`'s calibration times as
/// set-up: trace threads decode up to their seeded starts), even twice, is the run
/// `simulate` makes in one go, and [`Simulation::is_prepared`] tells whether it was
/// prepared. Fails if preparing apart changes the run (a thread's state prepared, then
/// changed again by `run`), or if the flag does not follow `prepare`. (Decoding a
/// second time would not fail it: a trace thread already at its start point has
/// nothing left to decode.)
///
/// [`Simulation::prepare`]: cachesched_sim::Simulation::prepare
/// [`Simulation::is_prepared`]: cachesched_sim::Simulation::is_prepared
#[test]
fn a_run_prepared_apart_is_the_run_made_in_one_go() {
    let dir = std::env::temp_dir().join(format!("cachesched-prep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = two_phase_trace(&dir);
    let groups = ThreadGroup::parse_mix(&format!("{}:2", path.display())).unwrap();
    let mut cfg = SimConfig::new("t1-dual", groups);
    cfg.seed = 3;
    cfg.duration_ms = 3.0;
    cfg.warmup_ms = 0.5;
    let whole = simulate(&cfg).unwrap();
    let mut sim = cachesched_sim::Simulation::new(&cfg, cachesched_sim::build_chain(&cfg)).unwrap();
    assert!(!sim.is_prepared());
    sim.prepare();
    sim.prepare();
    assert!(sim.is_prepared());
    let apart = sim.run(&mut |_| true).unwrap();
    assert_eq!(apart, whole);
    std::fs::remove_dir_all(&dir).unwrap();
}
