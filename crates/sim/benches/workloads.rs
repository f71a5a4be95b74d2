//! Criterion benchmarks of the workload generators as the engine fetches them (batches of
//! 32 through `Workload::fill`), after a warm-up that fills reuse regions' stacks:
//! random, stream and chase regions, and `Pattern::Reuse` at three sizes and means.
//! `cachesched bench workloads` reports the named profiles against the cache model and
//! the whole machine.

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use cachesched_core::SimRng;
use cachesched_sim::workload::{fetch_accesses, profile, LocalityModel, LocalityThread, Pattern};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Accesses per timed iteration.
const BATCH: u64 = 1 << 16;

fn reuse(kb: u64, mean_lines: f64) -> LocalityModel {
    LocalityModel::single(kb, Pattern::Reuse { mean_lines }, 4.0)
}

fn generators(c: &mut Criterion) {
    let mut g = c.benchmark_group("generator");
    g.sample_size(20);
    g.throughput(Throughput::Elements(BATCH));
    let models = [
        ("compute", profile("compute").unwrap()),
        ("art", profile("art").unwrap()),
        ("mcf", profile("mcf").unwrap()),
        ("reuse-4MB-mean-100", reuse(4 << 10, 100.0)),
        ("reuse-64MB-mean-1000", reuse(64 << 10, 1000.0)),
        ("reuse-64MB-mean-100000", reuse(64 << 10, 100_000.0)),
    ];
    for (name, model) in models {
        let mut t = LocalityThread::new(model, 0, 0, SimRng::new(1));
        t.feed_accesses(3_000_000, |_, _| {});
        g.bench_function(name, |b| {
            b.iter(|| {
                fetch_accesses(&mut t, BATCH, |addr| {
                    std::hint::black_box(addr);
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, generators);
criterion_main!(benches);
