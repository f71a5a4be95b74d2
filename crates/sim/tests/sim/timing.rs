//! Core timing: what the CASC paper's Figures 2 and 3 show emerges from the model —
//! fine-grained multithreading hides L1-miss latency but not L2-miss latency.

use cachesched_sim::hw::machine::CoreKind;
use cachesched_sim::workload::{LocalityModel, Pattern, Region, Scope};
use cachesched_sim::*;

struct Point {
    l1_miss: f64,
    l2_miss: f64,
    ipc_per_core: f64,
}

fn model(hot_kb: u64, warm_kb: u64) -> LocalityModel {
    let r = |kb, weight| Region {
        kb,
        weight,
        pattern: Pattern::Random,
        scope: Scope::Private,
        write_fraction: None,
    };
    LocalityModel {
        regions: vec![r(hot_kb, 0.8), r(warm_kb, 0.2)],
        gap_mean: 2.0,
        write_fraction: 0.1,
        code_kb: 2,
        // the other fields as `single` sets them for every generic profile: base CPI 1,
        // the default ILP, no stack, spatial or recent accesses, always runnable, endless
        ..LocalityModel::single(4, Pattern::Random, 1.0)
    }
}

fn run(m: MachineConfig, threads: u32, model: LocalityModel) -> Point {
    let g = ThreadGroup::custom(model, threads);
    let freq = m.freq_mhz as f64;
    let cores = (m.chips * m.cores_per_chip) as f64;
    let mut cfg = SimConfig::new("niagara-2c", vec![g]);
    cfg.machine = MachineSpec::Custom(Box::new(m));
    cfg.duration_ms = 40.0;
    cfg.warmup_ms = 10.0;
    let r = simulate(&cfg).unwrap();
    let c = r.totals;
    Point {
        l1_miss: c.l1d_misses as f64 / c.l1d_refs as f64,
        l2_miss: c.l2_miss_ratio(),
        ipc_per_core: c.instructions as f64 / (r.measured_ms * 1e3 * freq * cores),
    }
}

fn spread(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = v.clone().fold(f64::MIN, f64::max);
    let min = v.fold(f64::MAX, f64::min);
    max / min
}

fn niagara(l1d_kb: u64, l2_kb: u64) -> MachineConfig {
    let mut m = MachineConfig::preset("niagara-2c").unwrap();
    m.caches[1].size_bytes = l1d_kb << 10;
    m.caches[2].size_bytes = l2_kb << 10;
    m
}

#[test]
fn multithreading_hides_l1_misses_but_not_l2_misses() {
    // Figure 2: sweep the L1D (the L2 holds everything): the L1 miss ratio changes by
    // an order of magnitude, throughput barely moves.
    let l1: Vec<Point> = [8, 16, 32, 64, 128]
        .iter()
        .map(|&kb| run(niagara(kb, 768), 8, model(1, 24)))
        .collect();
    let l1_miss_spread = spread(l1.iter().map(|p| p.l1_miss));
    let l1_ipc_spread = spread(l1.iter().map(|p| p.ipc_per_core));
    assert!(
        l1_miss_spread > 4.0,
        "L1 sweep must vary the L1 miss ratio: {l1_miss_spread}"
    );
    assert!(l1.iter().all(|p| p.l2_miss < 0.3));
    assert!(
        l1_ipc_spread < 1.2,
        "L1 misses should be hidden: IPC spread {l1_ipc_spread}"
    );

    // Figure 3: sweep the L2 (the CASC paper's sizes): the L2 miss ratio drives IPC.
    let l2: Vec<Point> = [48, 96, 192, 384, 768]
        .iter()
        .map(|&kb| run(niagara(8, kb), 8, model(1, 128)))
        .collect();
    let l2_miss_spread = spread(l2.iter().map(|p| p.l2_miss));
    let l2_ipc_spread = spread(l2.iter().map(|p| p.ipc_per_core));
    assert!(l2_miss_spread > 3.0, "{l2_miss_spread}");
    assert!(
        l2_ipc_spread > 1.6,
        "L2 misses must not be hidden: IPC spread {l2_ipc_spread}"
    );
    for w in l2.windows(2) {
        assert!(w[1].l2_miss < w[0].l2_miss && w[1].ipc_per_core > w[0].ipc_per_core);
    }

    // Control: the same per-core L1 pressure on single-threaded cores is not hidden.
    let single = |l1d_kb: u64| {
        let mut m = niagara(l1d_kb, 768);
        m.threads_per_core = 1;
        m.core.kind = CoreKind::Single;
        m
    };
    let st: Vec<Point> = [2, 4, 8, 16, 32]
        .iter()
        .map(|&kb| run(single(kb), 2, model(1, 24)))
        .collect();
    let st_ipc_spread = spread(st.iter().map(|p| p.ipc_per_core));
    assert!(spread(st.iter().map(|p| p.l1_miss)) > 4.0);
    assert!(
        st_ipc_spread > l1_ipc_spread * 1.5,
        "single-threaded cores must feel L1 misses: {st_ipc_spread} vs {l1_ipc_spread}"
    );
}
