//! Criterion benchmarks of the simulator's hot paths: the cache model, trace replay and
//! the whole engine per preset. `cachesched bench` reports the same rates as ratios
//! against cachegrind run side by side.

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use cachesched_core::SimRng;
use cachesched_sim::hw::cache::{Cache, CacheGeometry};
use cachesched_sim::trace::replay::{parse_cg_cache, CgSim, TraceEvent};
use cachesched_sim::trace::{replay_binary, TraceWriter};
use cachesched_sim::{simulate, SimConfig, ThreadGroup, PRESETS};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn cache_access(c: &mut Criterion) {
    let mut g = c.benchmark_group("cache");
    let mut cache = Cache::new(CacheGeometry {
        size_bytes: 768 << 10,
        ways: 12,
        line_bytes: 64,
    })
    .unwrap();
    let mut rng = SimRng::new(1);
    let blocks: Vec<u64> = (0..1 << 16).map(|_| rng.below(1 << 15)).collect();
    g.throughput(Throughput::Elements(blocks.len() as u64));
    g.bench_function("random-access-768k-12way", |b| {
        b.iter(|| {
            for &blk in &blocks {
                std::hint::black_box(cache.access(blk, 0, 0));
            }
        })
    });
    g.finish();
}

fn replay(c: &mut Criterion) {
    let mut rng = SimRng::new(2);
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let mut pc = 0x400000u64;
    let mut n = 0u64;
    for i in 0..1_000_000u64 {
        let size = 2 + rng.below(4);
        w.write(TraceEvent::Instr { addr: pc, size }).unwrap();
        pc += size;
        if rng.chance(0.1) {
            pc = 0x400000 + rng.below(1 << 14);
        }
        if i % 3 == 0 {
            w.write(TraceEvent::Load {
                addr: 0x7000_0000 + rng.below(1 << 16) * 8,
                size: 8,
            })
            .unwrap();
            n += 1;
        }
        n += 1;
    }
    let bytes = w.finish().unwrap();
    let g1 = parse_cg_cache("I1", "32768,8,64").unwrap();
    let ll = parse_cg_cache("LL", "1048576,16,64").unwrap();
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(n));
    g.bench_function("binary-trace-1.33M-events", |b| {
        b.iter(|| {
            let mut sim = CgSim::new(g1, g1, ll).unwrap();
            replay_binary(&mut sim, &bytes[..]).unwrap();
            std::hint::black_box(sim.counts)
        })
    });
    g.finish();
}

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    for (name, _) in PRESETS {
        let mut cfg = SimConfig::new(
            name,
            ThreadGroup::parse_mix("large:4,medium:4,small:4").unwrap(),
        );
        cfg.duration_ms = 5.0;
        let instr = simulate(&cfg).unwrap().totals.instructions;
        g.throughput(Throughput::Elements(instr));
        g.bench_function(*name, |b| {
            b.iter(|| std::hint::black_box(simulate(&cfg).unwrap().ips))
        });
    }
    g.finish();
}

criterion_group!(benches, cache_access, replay, engine);
criterion_main!(benches);
