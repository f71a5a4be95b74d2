//! A recorded trace replayed as a thread of the simulated machine meets the same L1D
//! behaviour that cachegrind's rules (`cachesched replay`) give the same trace at the
//! same cache shape.

use cachesched_core::SimRng;
use cachesched_sim::hw::prefetch::PrefetchConfig;
use cachesched_sim::trace::replay::{parse_cg_cache, CgSim, TraceEvent};
use cachesched_sim::trace::TraceWriter;
use cachesched_sim::{simulate, MachineConfig, MachineSpec, SimConfig, ThreadGroup};

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
