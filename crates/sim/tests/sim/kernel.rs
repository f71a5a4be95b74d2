//! The simulated kernel: baseline classes, directives, guardrails, PMU observations and
//! determinism, each checked by running the real simulation.

use cachesched_core::{AddressSample, CoRunSegment, CpuId, Cpumask, Ctx, Nanos, Policy, ThreadId};
use cachesched_sim::workload::{LocalityModel, Pattern, Region, Scope};
use cachesched_sim::*;
use std::sync::{Arc, Mutex};

fn cfg(machine: &str, mix: &str, ms: f64) -> SimConfig {
    let mut c = SimConfig::new(machine, ThreadGroup::parse_mix(mix).unwrap());
    c.duration_ms = ms;
    c
}

/// Applies fixed per-thread wishes at thread start.
#[derive(Default)]
struct Fixed {
    mask: Option<Cpumask>,
    slice: Option<Nanos>,
    boost_first: bool,
    sampling: Option<u64>,
    segments: Arc<Mutex<Vec<CoRunSegment>>>,
    samples: Arc<Mutex<Vec<AddressSample>>>,
}

impl Policy for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }
    fn wants_corun_segments(&self) -> bool {
        true
    }
    fn init(&mut self, ctx: &mut Ctx<'_>) {
        ctx.set_sampling_period(self.sampling);
    }
    fn thread_started(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
        if let Some(m) = &self.mask {
            ctx.set_mask(t, Some(m.clone()));
        }
        if self.slice.is_some() {
            ctx.set_slice(t, self.slice);
        }
        if self.boost_first && t == ThreadId(0) {
            ctx.boost(t, true);
        }
    }
    fn corun_segment(&mut self, _ctx: &mut Ctx<'_>, s: &CoRunSegment) {
        self.segments.lock().unwrap().push(s.clone());
    }
    fn address_sample(&mut self, _ctx: &mut Ctx<'_>, s: &AddressSample) {
        self.samples.lock().unwrap().push(*s);
    }
}

fn cpu0() -> Option<Cpumask> {
    Some(Cpumask::from_cpus([CpuId(0)]))
}

#[test]
fn same_seed_same_bytes_different_seed_differs() {
    let c = cfg("niagara-2c", "large:3,small:3,compute:3", 30.0);
    let a = serde_json::to_string(&simulate(&c).unwrap()).unwrap();
    let b = serde_json::to_string(&simulate(&c).unwrap()).unwrap();
    assert_eq!(a, b);
    let mut c2 = c.clone();
    c2.seed = 2;
    let d = serde_json::to_string(&simulate(&c2).unwrap()).unwrap();
    assert_ne!(a, d);
}

#[test]
fn cfs_is_fair_and_weighted() {
    let r = simulate(&cfg("t1-dual", "compute:4", 300.0)).unwrap();
    for t in &r.threads {
        assert!((t.cpu_share - 0.5).abs() < 0.08, "share {}", t.cpu_share);
    }
    // nice 0 against nice 5 on one CPU: shares follow the weights 1024:335
    let mut c = cfg("t1-dual", "compute:2", 300.0);
    c.threads[0].count = 1;
    let mut low = c.threads[0].clone();
    low.nice = 5;
    c.threads.push(low);
    let p = Fixed {
        mask: cpu0(),
        ..Default::default()
    };
    let r = simulate_with(&c, Box::new(p)).unwrap();
    let ratio = r.threads[0].cpu_share / r.threads[1].cpu_share;
    assert!((ratio - 1024.0 / 335.0).abs() < 0.4, "weight ratio {ratio}");
    assert!(r.cpus[1].busy_fraction < 0.01, "CPU 1 must stay idle");
}

#[test]
fn custom_slices_cut_context_switches() {
    let base = cfg("t1-dual", "compute:2", 400.0);
    let pin = |slice| Fixed {
        mask: cpu0(),
        slice,
        ..Default::default()
    };
    let short = simulate_with(&base, Box::new(pin(None))).unwrap();
    let long = simulate_with(&base, Box::new(pin(Some(Nanos::from_ms(45))))).unwrap();
    assert!(
        short.kernel.context_switches > 4 * long.kernel.context_switches,
        "{} vs {}",
        short.kernel.context_switches,
        long.kernel.context_switches
    );
    assert!(long.kernel.context_switches >= 6);
    // the same through a chain: the pin from one policy, the slice from the `timeslice`
    // policy; both directives must hold (both threads on CPU 0, 45 ms slices)
    let spec = cachesched_policies::PolicySpec::parse("timeslice:slice_ms=45").unwrap();
    let chain = cachesched_policies::Chain::new(vec![
        Box::new(pin(None)),
        cachesched_policies::build_policy(&spec),
    ]);
    let chained = simulate_with(&base, Box::new(chain)).unwrap();
    assert!(
        short.kernel.context_switches > 4 * chained.kernel.context_switches,
        "{} vs {}",
        short.kernel.context_switches,
        chained.kernel.context_switches
    );
    assert!(chained.cpus[1].busy_fraction < 0.01, "{:?}", chained.cpus);
}

#[test]
fn ts_and_rr_baselines_run_and_rr_priority_starves_with_watchdog() {
    for b in [Baseline::Ts, Baseline::Rr] {
        let mut c = cfg("niagara-2c", "compute:12", 300.0);
        c.kernel.baseline = b;
        let r = simulate(&c).unwrap();
        assert_eq!(r.baseline, b.name());
        assert!(r.threads.iter().all(|t| t.cpu_share > 0.2), "{b:?}");
    }
    // fixed priority: a higher-priority CPU hog pinned beside a lower one starves it
    let mut c = cfg("t1-dual", "compute:1", 500.0);
    c.kernel.baseline = Baseline::Rr;
    c.kernel.starvation_limit_ms = 100.0;
    c.threads[0].nice = -5;
    c.threads.push(ThreadGroup::of("compute", 1));
    let err = simulate_with(
        &c,
        Box::new(Fixed {
            mask: cpu0(),
            ..Default::default()
        }),
    )
    .unwrap_err();
    match err {
        SimError::Starvation {
            thread, limit_ms, ..
        } => {
            assert_eq!(thread, ThreadId(1));
            assert_eq!(limit_ms, 100.0);
        }
        e => panic!("expected a liveness failure, got {e}"),
    }
}

#[test]
fn empty_mask_falls_back_and_is_counted() {
    let p = Fixed {
        mask: Some(Cpumask::from_cpus([CpuId(99)])),
        ..Default::default()
    };
    let r = simulate_with(&cfg("t1-dual", "compute:2", 50.0), Box::new(p)).unwrap();
    assert_eq!(r.kernel.mask_fallbacks, 2);
    assert!(r.threads.iter().all(|t| t.cpu_share > 0.9));
}

#[test]
fn boost_wins_the_cpu() {
    let p = Fixed {
        mask: cpu0(),
        boost_first: true,
        ..Default::default()
    };
    let r = simulate_with(&cfg("t1-dual", "compute:2", 100.0), Box::new(p)).unwrap();
    assert!(r.threads[0].cpu_share > 0.95 && r.threads[1].cpu_share < 0.05);
}

#[test]
fn corun_segments_describe_who_shared_the_cache() {
    let segs = Arc::new(Mutex::new(Vec::new()));
    let p = Fixed {
        segments: segs.clone(),
        ..Default::default()
    };
    let r = simulate_with(&cfg("niagara-2c", "small:10", 100.0), Box::new(p)).unwrap();
    let segs = segs.lock().unwrap();
    assert!(segs.len() > 20, "{} segments", segs.len());
    let l2: Vec<&CoRunSegment> = segs.iter().filter(|s| s.cache_level == 2).collect();
    let mut covered = 0u64;
    for s in &l2 {
        assert!(s.end > s.start && !s.members.is_empty() && s.members.len() <= 8);
        let mut ids: Vec<u32> = s.members.iter().map(|m| m.thread.0).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(
            ids.len(),
            s.members.len(),
            "a thread appears once per segment"
        );
        covered += s.duration().0;
    }
    // L2 segments tile the run (one instance covering all 8 CPUs): no gap, no overlap
    for w in l2.windows(2) {
        assert_eq!(w[0].end, w[1].start);
    }
    assert!(covered > 50_000_000 && covered <= 100_000_000, "{covered}");
    let seg_instr: u64 = l2.iter().map(|s| s.total().instructions).sum();
    assert!(seg_instr as f64 > 0.5 * r.totals.instructions as f64);
    assert!(seg_instr <= r.totals.instructions);
    assert_eq!(r.kernel.corun_segments as usize, segs.len());
}

#[test]
fn a_segment_that_never_changes_is_still_delivered_in_pieces() {
    // 8 CPU-bound threads on 8 CPUs, one per CPU: nothing ever changes on the L2
    struct PinRecord(Arc<Mutex<Vec<CoRunSegment>>>);
    impl Policy for PinRecord {
        fn name(&self) -> &str {
            "pin-record"
        }
        fn wants_corun_segments(&self) -> bool {
            true
        }
        fn thread_started(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
            ctx.set_mask(t, Some(Cpumask::from_cpus([CpuId(t.0)])));
        }
        fn corun_segment(&mut self, _ctx: &mut Ctx<'_>, s: &CoRunSegment) {
            self.0.lock().unwrap().push(s.clone());
        }
    }
    let segs = Arc::new(Mutex::new(Vec::new()));
    let p = PinRecord(segs.clone());
    simulate_with(&cfg("niagara-2c", "small:8", 100.0), Box::new(p)).unwrap();
    let segs = segs.lock().unwrap();
    let l2: Vec<&CoRunSegment> = segs
        .iter()
        .filter(|s| s.cache_level == 2 && s.members.len() == 8)
        .collect();
    // cut at the first balancing tick (every 4 ms) after 10 ms: 10-14 ms each
    assert!(l2.len() >= 6, "{} full segments in 100 ms", l2.len());
    for s in &l2[..l2.len() - 1] {
        let ms = s.duration().as_ms_f64();
        assert!((10.0..=14.0).contains(&ms), "a segment of {ms} ms");
    }
    for w in l2.windows(2) {
        assert_eq!(w[0].end, w[1].start, "pieces tile the interval");
    }
}

fn sharing(threads: u32, write_fraction: f64) -> ThreadGroup {
    let model = LocalityModel {
        regions: vec![
            Region {
                kb: 4,
                weight: 0.6,
                pattern: Pattern::Random,
                scope: Scope::Private,
                write_fraction: None,
            },
            Region {
                kb: 64,
                weight: 0.4,
                pattern: Pattern::Random,
                scope: Scope::Process,
                write_fraction: None,
            },
        ],
        gap_mean: 3.0,
        write_fraction,
        code_kb: 2,
        // the other fields as `single` sets them for every generic profile: base CPI 1,
        // the default ILP, no stack, spatial or recent accesses, always runnable, endless
        ..LocalityModel::single(4, Pattern::Random, 1.0)
    };
    let mut g = ThreadGroup::custom(model, threads);
    g.same_process = true;
    g
}

#[test]
fn cross_chip_sharing_is_remote_and_sampled() {
    let mut c = SimConfig::new("power5-2x2x2", vec![sharing(4, 0.3)]);
    c.duration_ms = 40.0;
    let samples = Arc::new(Mutex::new(Vec::new()));
    // spread over both chips (4 threads on 8 CPUs: the kernel spreads them)
    let p = Fixed {
        sampling: Some(50),
        samples: samples.clone(),
        ..Default::default()
    };
    let spread = simulate_with(&c, Box::new(p)).unwrap();
    // all on chip 0
    let chip0 = Cpumask::parse_list("0-3").unwrap();
    let together = simulate_with(
        &c,
        Box::new(Fixed {
            mask: Some(chip0),
            ..Default::default()
        }),
    )
    .unwrap();
    let rs = spread.totals.remote_accesses;
    let rt = together.totals.remote_accesses;
    assert!(
        rs > 1000 && rt == 0,
        "remote accesses: spread {rs}, together {rt}"
    );
    assert!(spread.totals.data_stall_remote_cycles > 0);
    assert!(
        together.ips > spread.ips * 1.1,
        "co-locating sharers must pay off"
    );
    let n = samples.lock().unwrap().len() as u64;
    assert!(
        n.abs_diff(rs / 50) <= 1,
        "{n} samples for {rs} remote accesses"
    );
    assert!(samples.lock().unwrap().iter().all(|s| s.addr.0 >> 44 == 1));
}

/// Three `small` threads on clovertown-2x2, each computing 0.5 ms and sleeping 0.3 ms,
/// for `ms`.
fn bursty_threads(ms: f64) -> SimConfig {
    let mut m = cachesched_sim::workload::profile("small").unwrap();
    m.run_ms = Some(0.5);
    m.sleep_ms = Some(0.3);
    let g = ThreadGroup::custom(m, 3);
    let mut c = SimConfig::new("clovertown-2x2", vec![g]);
    c.duration_ms = ms;
    c
}

#[test]
fn affinity_oblivious_mode_migrates_more() {
    let mut c = bursty_threads(100.0);
    let aware = simulate(&c).unwrap();
    c.kernel.affinity_oblivious = true;
    let oblivious = simulate(&c).unwrap();
    assert!(
        oblivious.kernel.migrations > 3 * aware.kernel.migrations.max(1),
        "{} vs {}",
        oblivious.kernel.migrations,
        aware.kernel.migrations
    );
    // sleeping threads use less than a whole CPU
    assert!(aware
        .threads
        .iter()
        .all(|t| t.cpu_share > 0.2 && t.cpu_share < 0.9));
}

#[test]
fn bad_configuration_is_named() {
    let mut c = cfg("t1-dual", "compute:1", 10.0);
    c.warmup_ms = 20.0;
    assert!(simulate(&c).unwrap_err().to_string().contains("warmup_ms"));
    let c = cfg("no-such-machine", "compute:1", 10.0);
    assert!(simulate(&c)
        .unwrap_err()
        .to_string()
        .contains("no-such-machine"));
    assert!(ThreadGroup::parse_mix("compute:x")
        .unwrap_err()
        .to_string()
        .contains("count"));
    assert!(ThreadGroup::parse_mix("nosuch:1")
        .unwrap_err()
        .to_string()
        .contains("nosuch"));
    let text = "machine = \"t1-dual\"\nthreads = []\nbogus_key = 3\n";
    let e = toml::from_str::<SimConfig>(text).unwrap_err().to_string();
    assert!(e.contains("bogus_key"), "{e}");
}

/// Every size and rate has a range checked before anything is allocated (issue 77, item
/// 13): a 1e-9 ms timeline interval (a 6 GB timeline), a 1e-9 ms quantum, a 1e15 ms run,
/// a 12 TB cache and a machine whose caches would take more than a run's memory limit are
/// refused, each naming the key and its range (or the estimate), within milliseconds.
/// Fails if any of them is accepted (the test would then allocate or run for minutes).
#[test]
fn sizes_and_rates_are_refused_before_anything_is_allocated() {
    let t0 = std::time::Instant::now();
    let mut c = cfg("t1-dual", "compute:1", 10.0);
    c.sample_ms = 1e-9;
    let e = simulate(&c).unwrap_err().to_string();
    assert!(
        e.contains("sample_ms = 0.000000001 is out of range: give 0.01 to 60000"),
        "{e}"
    );
    let mut c = cfg("t1-dual", "compute:1", 10.0);
    c.kernel.ts_quantum_ms = Some(1e-9);
    let e = simulate(&c).unwrap_err().to_string();
    assert!(e.contains("kernel.ts_quantum_ms"), "{e}");
    let c = cfg("t1-dual", "compute:1", 1e15);
    let e = simulate(&c).unwrap_err().to_string();
    assert!(
        e.contains("duration_ms = 1000000000000000 is out of range"),
        "{e}"
    );
    let mut c = cfg("t1-dual", "compute:1", 10.0);
    c.machine = MachineSpec::Resized {
        preset: "t1-dual".into(),
        llc_kb: 12_000_000_000,
    };
    let e = simulate(&c).unwrap_err().to_string();
    assert!(e.contains("a cache has at most 1 GiB"), "{e}");
    // each cache at its largest, on 16 cores: within every bound, over the memory limit
    let mut m = MachineSpec::Preset("power5-8chip".into())
        .resolve()
        .unwrap();
    for cache in &mut m.caches {
        let set = cache.ways as u64 * cache.line_bytes as u64;
        cache.size_bytes = (1 << 30) / set * set;
    }
    let mut c = cfg("t1-dual", "compute:1", 10.0);
    c.machine = MachineSpec::Custom(Box::new(m));
    let e = simulate(&c).unwrap_err().to_string();
    assert!(
        e.contains("this run would need about") && e.contains("more than the 4096 MiB"),
        "{e}"
    );
    assert!(
        t0.elapsed().as_secs() < 30,
        "refused only after {:?}",
        t0.elapsed()
    );
}

#[test]
fn recorded_traces_replay_as_threads() {
    use cachesched_sim::trace::replay::TraceEvent;
    use cachesched_sim::trace::TraceWriter;
    // a synthetic "program": a loop over 16 KB with a small code footprint
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let mut pc = 0x401000u64;
    for i in 0..50_000u64 {
        for _ in 0..3 {
            w.write(TraceEvent::Instr { addr: pc, size: 4 }).unwrap();
            pc = if pc >= 0x401100 { 0x401000 } else { pc + 4 };
        }
        let addr = 0x7f00_0000_0000 + (i * 64) % (16 << 10);
        let ev = if i % 4 == 0 {
            TraceEvent::Store { addr, size: 8 }
        } else {
            TraceEvent::Load { addr, size: 8 }
        };
        w.write(ev).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("cachesched-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("loop.cst");
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    let mix = format!("{}:2,small:2", path.display());
    // a damaged copy is refused whole before the run, not replayed in part
    let mut bad = std::fs::read(&path).unwrap();
    for k in 0..200 {
        let i = 16 + k * (bad.len() - 40) / 200;
        bad[i] ^= 1;
    }
    let bad_path = dir.join("damaged.cst");
    std::fs::write(&bad_path, &bad).unwrap();
    let bad_mix = format!("{}:2", bad_path.display());
    let e = ThreadGroup::parse_mix(&bad_mix)
        .map_err(|e| e.to_string())
        .and_then(|g| {
            let mut c = SimConfig::new("t1-dual", g);
            c.duration_ms = 5.0;
            simulate(&c).map(|_| ()).map_err(|e| e.to_string())
        })
        .unwrap_err();
    assert!(e.contains("damaged.cst"), "{e}");
    let mut c = SimConfig::new("t1-dual", ThreadGroup::parse_mix(&mix).unwrap());
    c.duration_ms = 30.0;
    let r = simulate(&c).unwrap();
    let trace_threads: Vec<_> = r.threads.iter().filter(|t| t.name == "loop").collect();
    assert_eq!(trace_threads.len(), 2);
    for t in &trace_threads {
        // the 200k-instruction trace loops several times in 30 ms
        assert!(
            t.counters.instructions > 600_000,
            "{}",
            t.counters.instructions
        );
        // a 16 KB loop: thrashes the 8 KB L1D (16 B lines), lives in the 256 KB L2
        let c = &t.counters;
        assert!(c.l1d_misses as f64 > 0.9 * c.l1d_refs as f64, "{c:?}");
        assert!(c.l2_miss_ratio() < 0.05, "{c:?}");
    }
    assert_eq!(simulate(&c).unwrap(), r, "deterministic");
    // a file that is not a binary trace is refused with a hint
    std::fs::write(dir.join("bad.cst"), "I  0401000,3\n").unwrap();
    let bad = ThreadGroup::parse_mix(&format!("{}:1", dir.join("bad.cst").display())).unwrap();
    let e = simulate(&SimConfig::new("t1-dual", bad))
        .unwrap_err()
        .to_string();
    assert!(e.contains("trace record"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Places thread `i` on chip `(i % groups) % 2`: sharing groups together.
struct GroupsOnChips {
    groups: u32,
}

impl Policy for GroupsOnChips {
    fn name(&self) -> &str {
        "groups-on-chips"
    }
    fn thread_started(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
        let chip = (t.0 % self.groups) % 2;
        let mask = ctx.topology().chip_cpus(chip);
        ctx.set_mask(t, Some(mask));
    }
}

#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn server_workloads_share_within_groups() {
    let mut c = SimConfig::new(
        "power5-2x2x2",
        ThreadGroup::parse_mix("scoreboard:16").unwrap(),
    );
    c.duration_ms = 40.0;
    assert_eq!(c.threads[0].sharing_groups(), 4);
    let naive = simulate(&c).unwrap();
    let groups: Vec<Option<u32>> = naive.threads.iter().map(|t| t.sharing_group).collect();
    assert_eq!(groups[..5], [Some(0), Some(1), Some(2), Some(3), Some(0)]);
    let clustered = simulate_with(&c, Box::new(GroupsOnChips { groups: 4 })).unwrap();
    let (rn, rc) = (
        naive.totals.remote_accesses,
        clustered.totals.remote_accesses,
    );
    assert!(
        rn > 1000,
        "interleaved groups must share across chips: {rn}"
    );
    assert!(rc * 20 < rn, "clustered groups share on-chip: {rc} vs {rn}");
    // other server workloads build and share
    for (w, groups) in [("chat:12", 3), ("appserver:12", 3), ("database:16", 2)] {
        let mut c = SimConfig::new("power5-2x2x2", ThreadGroup::parse_mix(w).unwrap());
        c.duration_ms = 40.0;
        let r = simulate(&c).unwrap();
        let mut seen: Vec<u32> = r.threads.iter().map(|t| t.sharing_group.unwrap()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), groups, "{w}");
        assert!(r.threads.iter().all(|t| t.counters.instructions > 0), "{w}");
    }
}

/// Pins thread i to CPU `cpus[i]`.
struct PinEach {
    cpus: Vec<u32>,
}

impl Policy for PinEach {
    fn name(&self) -> &str {
        "pin-each"
    }
    fn thread_started(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
        ctx.set_mask(t, Some(Cpumask::from_cpus([CpuId(self.cpus[t.index()])])));
    }
}

#[test]
fn base_vectors_displace_cache_state_as_in_the_affinity_paper() {
    // L1 affinity: an L1-resident benchmark sharing CPU 0 with BV_L1D loses its L1
    // state every quantum; with BV_0 it keeps it.
    let run = |mix: &str, cpus: Vec<u32>, machine: &str| {
        let mut c = SimConfig::new(machine, ThreadGroup::parse_mix(mix).unwrap());
        c.duration_ms = 100.0;
        c.warmup_ms = 10.0;
        simulate_with(&c, Box::new(PinEach { cpus }))
            .unwrap()
            .threads[0]
            .counters
    };
    let high = run("compute:1,bv0:1", vec![0, 0], "clovertown-2x2");
    let low = run("compute:1,bv-l1d:1", vec![0, 0], "clovertown-2x2");
    assert!(
        high.l1d_misses * 10 < low.l1d_misses,
        "{} vs {}",
        high.l1d_misses,
        low.l1d_misses
    );
    // L2 retention: BV_L2 on the other core of the shared L2 displaces the
    // benchmark's L2 state while it waits for its quantum.
    let kept = run("large:1,bv0:1", vec![0, 0], "core2-4m");
    let lost = run("large:1,bv0:1,bv-l2:1", vec![0, 0, 1], "core2-4m");
    assert!(
        kept.l2_misses * 3 < lost.l2_misses,
        "{} vs {}",
        kept.l2_misses,
        lost.l2_misses
    );
}

#[test]
fn phased_threads_change_behaviour_over_time() {
    let text = r#"
machine = "t1-dual"
duration_ms = 200
sample_ms = 5
[[threads]]
count = 2
phases = [{ profile = "compute", instructions = 10_000_000 }, { profile = "huge", instructions = 2_000_000 }]
"#;
    let c: SimConfig = toml::from_str(text).unwrap();
    let r = simulate(&c).unwrap();
    let mpki: Vec<f64> = r.timeline.iter().map(|p| p.llc_mpki).collect();
    let lo = mpki.iter().copied().fold(f64::MAX, f64::min);
    let hi = mpki.iter().copied().fold(0.0, f64::max);
    assert!(
        lo < 1.0 && hi > 50.0,
        "phases must show in the timeline: {mpki:?}"
    );
    assert_eq!(r.threads[0].name, "phased");
}

/// The dynamic variant of paper 5's policy: every thread gets a slice within the
/// bounds, set from its own miss rate. (The static slices' gain, saturation and miss
/// reduction are `tests/sim/timeslice.rs`.)
#[test]
fn dynamic_timeslices_follow_each_threads_miss_rate() {
    let mut d = SimConfig::new(
        "xeon-e5-16m",
        // random misses (a sequential stream would not do: the Xeon's prefetchers
        // turn its demand misses into hits, so its counters no longer show how fast
        // it fills the LLC)
        ThreadGroup::parse_mix("huge:2,compute:2").unwrap(),
    );
    // (40 ms: every thread has its slice by then, and missing threads are slow to
    // simulate)
    d.duration_ms = 40.0;
    d.policies =
        vec![cachesched_policies::PolicySpec::parse("timeslice:mode=\"dynamic\"").unwrap()];
    let r = simulate(&d).unwrap();
    assert_eq!(r.policy, "timeslice-dynamic");
    // threads missing at random fill the LLC fast: the shortest slice (4 ms);
    // L1-resident ones do not miss: the longest (100 ms)
    assert_eq!(
        r.policy_stats["threads_with_slice"], 4.0,
        "{:?}",
        r.policy_stats
    );
    let mean = r.policy_stats["mean_slice_ms"];
    assert!((50.0..=54.0).contains(&mean), "mean slice {mean} ms");
}

#[test]
fn thread_groups_can_be_bound_to_cpus() {
    let mut c = cfg("niagara-2c", "compute:3", 50.0);
    c.threads[0].cpus = Some(vec![5]);
    let r = simulate(&c).unwrap();
    let busy: Vec<f64> = r.cpus.iter().map(|c| c.busy_fraction).collect();
    assert!(busy[5] > 0.99, "{busy:?}");
    assert!(
        busy.iter().enumerate().all(|(i, &b)| i == 5 || b < 0.01),
        "{busy:?}"
    );
    // a policy mask outside the binding falls back to the binding, counted
    let p = Fixed {
        mask: cpu0(),
        ..Default::default()
    };
    let r = simulate_with(&c, Box::new(p)).unwrap();
    assert_eq!(r.kernel.mask_fallbacks, 3);
    assert!(r.cpus[5].busy_fraction > 0.99 && r.cpus[0].busy_fraction < 0.01);
    c.threads[0].cpus = Some(vec![8]);
    let e = simulate(&c).unwrap_err().to_string();
    assert!(e.contains("CPU 8"), "{e}");
}

#[test]
fn the_llc_can_be_partitioned_equally_and_occupancy_is_recorded() {
    // a streaming thread beside a 96 KB working set on t1-dual (256 KB, 8 ways)
    let held = |partition| {
        let mut c = cfg("t1-dual", "interferer:1,medium:1", 60.0);
        c.threads[1] = ThreadGroup::custom(LocalityModel::single(96, Pattern::Random, 2.0), 1);
        c.partition = partition;
        let r = simulate(&c).unwrap();
        let last = r.timeline.last().expect("sampled");
        assert_eq!(last.occupancy.len(), 1, "one shared cache");
        let o = &last.occupancy[0];
        assert_eq!((o.level, o.kib.len()), (2, 2));
        assert!(o.kib.iter().sum::<u32>() <= 256);
        (o.kib[0], o.kib[1])
    };
    let (stream, _) = held(None);
    assert!(
        stream > 128,
        "the streamer takes over half of a shared cache: {stream} KB"
    );
    // each thread fills only its 4 ways
    let (stream_p, small_p) = held(Some(config::Partition::PerThread));
    assert!(
        stream_p <= 128 && small_p <= 128,
        "{stream_p} + {small_p} KB"
    );
    assert!(
        stream_p >= 120,
        "the streamer fills its half: {stream_p} KB"
    );
    // per core: the niagara-2c L2's 12 ways, 6 per core; streamers bound to core 0,
    // 256 KB working sets to core 1
    let streamers = |partition| {
        let mut c = cfg("niagara-2c", "interferer:4,medium:4", 40.0);
        c.threads[0].cpus = Some(vec![0, 1, 2, 3]);
        c.threads[1].cpus = Some(vec![4, 5, 6, 7]);
        c.partition = partition;
        let r = simulate(&c).unwrap();
        // the L1Ds, shared by each core's four contexts, are recorded too
        let last = r.timeline.last().unwrap();
        assert_eq!(last.occupancy.len(), 3);
        let l2 = last.occupancy.iter().find(|o| o.level == 2).unwrap();
        l2.kib[..4].iter().sum::<u32>()
    };
    let (shared, split) = (streamers(None), streamers(Some(config::Partition::PerCore)));
    assert!(
        shared > 384,
        "core 0's streamers hold {shared} KB of a shared L2"
    );
    assert!(
        split <= 384 && split > 350,
        "and {split} KB of a partitioned one"
    );
    // too many classes for the ways
    let mut c = cfg("t1-dual", "compute:9", 10.0);
    c.partition = Some(config::Partition::PerThread);
    let e = simulate(&c).unwrap_err().to_string();
    assert!(e.contains("8 ways among 9"), "{e}");
}

/// At every tick, asks each thread whether it is runnable both ways and counts the answers.
#[derive(Default)]
struct RunnableProbe {
    seen: Arc<Mutex<(u64, u64, u64)>>,
}

impl Policy for RunnableProbe {
    fn name(&self) -> &str {
        "runnable-probe"
    }
    fn init(&mut self, ctx: &mut Ctx<'_>) {
        ctx.set_tick_period(Some(Nanos::from_ms_f64(0.1)));
    }
    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let mut s = self.seen.lock().unwrap();
        for i in 0..8 {
            let t = ThreadId(i);
            let quick = ctx.runnable(t);
            if quick == ctx.thread(t).map(|v| v.runnable) {
                match quick {
                    Some(true) => s.0 += 1,
                    _ => s.1 += 1,
                }
            } else {
                s.2 += 1;
            }
        }
    }
}

#[test]
fn the_quick_runnable_answer_equals_the_snapshots() {
    // threads that compute and sleep by turns: both answers occur often
    let c = bursty_threads(30.0);
    let p = RunnableProbe::default();
    let seen = p.seen.clone();
    simulate_with(&c, Box::new(p)).unwrap();
    let (runnable, not, differ) = *seen.lock().unwrap();
    assert_eq!(differ, 0, "runnable {runnable}, not {not}");
    // ~300 ticks × 3 threads, and 5 ids that never exist
    assert!(runnable > 200 && not > 300 * 5 + 50, "{runnable} {not}");
}

/// A work segment is timed from its first to its last instruction, and
/// `stop_after_segments` ends the run right there: the run's length is where the
/// segment ended, and the thread retired the instructions up to it (within one fetch
/// batch's operation). Fails if the marks are passed at the wrong instruction counts,
/// the times are taken from the wrong clock, or the run does not stop.
#[test]
fn a_work_segment_is_timed_and_can_end_the_run() {
    let mut c = cfg("t1-dual", "gzip:1", 2000.0);
    c.threads[0].segment = Some(WorkSegment {
        start_instructions: 2_000_000,
        instructions: 5_000_000,
    });
    c.stop_after_segments = true;
    let r = simulate(&c).unwrap();
    let t = &r.threads[0];
    let (start, len) = (t.segment_start_ms.unwrap(), t.segment_ms.unwrap());
    assert!(
        (r.measured_ms - (start + len)).abs() < 0.01,
        "run ended at {} ms, segment {start} + {len} ms",
        r.measured_ms
    );
    let instr = t.counters.instructions;
    assert!(
        (7_000_000..7_001_000).contains(&instr),
        "{instr} instructions at the segment's end"
    );
    // alone, the segment runs at the thread's own rate: 5 M instructions in the time the
    // run's instruction rate says, within 5% (the segment is past the cold start)
    let expected_ms = 5e6 / r.ips * 1e3;
    assert!(
        (len / expected_ms - 1.0).abs() < 0.05,
        "segment {len} ms, the whole run's rate says {expected_ms} ms"
    );
    // two such threads bound to one CPU take turns of 1 ms: each segment takes about
    // twice as long
    let mut two = c.clone();
    two.threads[0].count = 2;
    two.threads[0].cpus = Some(vec![0]);
    two.kernel.baseline = Baseline::Fx;
    two.kernel.fx_quantum_ms = Some(1.0);
    let r2 = simulate(&two).unwrap();
    let lens: Vec<f64> = r2.threads.iter().map(|t| t.segment_ms.unwrap()).collect();
    for l in &lens {
        assert!(
            (l / len - 2.0).abs() < 0.25,
            "segments {lens:?} ms sharing one CPU, {len} ms alone"
        );
    }
    // the first segment to begin is the run's window: its owner retired exactly its
    // segment in it (within one operation), the other about as much (equal turns)
    let w: Vec<u64> = r2
        .threads
        .iter()
        .map(|t| t.segment_window_instructions.unwrap())
        .collect();
    let owner = if r2.threads[0].segment_start_ms <= r2.threads[1].segment_start_ms {
        0
    } else {
        1
    };
    assert!(
        (5_000_000..5_001_000).contains(&w[owner]),
        "window instructions {w:?}"
    );
    assert!(
        (w[1 - owner] as f64 / 5e6 - 1.0).abs() < 0.15,
        "window instructions {w:?}"
    );
}

/// A start-time jitter delays each thread by a seeded amount within its bound: the same
/// seed gives the same start, different seeds different ones. Fails if the jitter is
/// ignored, unseeded or out of bounds.
#[test]
fn start_jitter_delays_threads_by_a_seeded_amount() {
    let run = |seed: u64| {
        let mut c = cfg("t1-dual", "gzip:2", 60.0);
        c.threads[0].start_jitter_ms = 40.0;
        c.seed = seed;
        let r = simulate(&c).unwrap();
        r.threads
            .iter()
            .map(|t| 60.0 - t.counters.cpu_time_ns as f64 / 1e6)
            .collect::<Vec<f64>>()
    };
    let delays: Vec<Vec<f64>> = (1..=4).map(run).collect();
    assert_eq!(delays[0], run(1));
    for d in delays.iter().flatten() {
        assert!((0.0..40.5).contains(d), "delays {delays:?} ms");
    }
    let mut all: Vec<f64> = delays.into_iter().flatten().collect();
    all.sort_by(f64::total_cmp);
    all.dedup_by(|a, b| (*a - *b).abs() < 0.5);
    assert!(all.len() >= 6, "8 seeded delays, distinct: {all:?} ms");
}

/// `stop_after_segments` without any segment is a configuration error naming the fix.
#[test]
fn stopping_after_segments_needs_a_segment() {
    let mut c = cfg("t1-dual", "gzip:1", 10.0);
    c.stop_after_segments = true;
    let e = simulate(&c).unwrap_err().to_string();
    assert!(e.contains("no thread group has a segment"), "{e}");
}

/// The slice profile (paper 5's Figures 2, 3 and 11): two threads whose 3 MB working
/// sets each fit a 4 MB LLC, not both, share CPU 0 with 30 ms slices. Every run is
/// recorded with its misses in 3 ms bins, which add up to the thread's misses in those
/// runs; each run starts cold (its first bin misses over 1.6 times as often as its
/// sixth onwards), and while a thread is off the CPU the other fills the LLC with
/// enough lines to evict much of what it had left. Fails if runs are lost, bins miss
/// misses, or the cold start does not show.
#[test]
fn slice_profile_records_cold_starts_and_off_cpu_fills() {
    let mut m = cachesched_sim::workload::profile("huge").unwrap();
    m.regions[0].kb = 3 << 10;
    let mut g = ThreadGroup::custom(m, 2);
    g.cpus = Some(vec![0]);
    let mut c = SimConfig::new("core2-4m", vec![g]);
    c.duration_ms = 250.0;
    c.warmup_ms = 60.0;
    c.kernel.slice_profile_ms = Some(3.0);
    c.policies = vec![cachesched_policies::PolicySpec::parse("timeslice:slice_ms=30").unwrap()];
    let r = simulate(&c).unwrap();
    assert_eq!(r.kernel.slice_profile_dropped, 0);
    for t in &r.threads {
        let runs = &t.slice_profile;
        assert!(runs.len() >= 2, "thread {}: {} runs", t.id, runs.len());
        let recorded: u64 = runs.iter().flat_map(|x| x.llc_misses.iter()).sum();
        assert!(
            recorded <= t.counters.llc_misses && recorded * 10 >= t.counters.llc_misses * 5,
            "thread {}: {recorded} of {} misses in recorded runs",
            t.id,
            t.counters.llc_misses
        );
        for run in runs {
            assert!(
                (29.0..=31.5).contains(&run.ms),
                "a 30 ms slice ran {} ms",
                run.ms
            );
            assert!(
                (10..=11).contains(&run.llc_misses.len()),
                "{:?}",
                run.llc_misses
            );
            let first = run.llc_misses[0] as f64;
            let late: Vec<u64> = run.llc_misses[5..run.llc_misses.len() - 1].to_vec();
            let late = late.iter().sum::<u64>() as f64 / late.len() as f64;
            assert!(first > 1.6 * late, "no cold start: {:?}", run.llc_misses);
            let off = run.off_cpu.expect("off-CPU figures after the first run");
            assert!(off.own_lines_back < off.own_lines_left, "{off:?}");
            assert!(off.fills * 4 > off.llc_lines, "{off:?}");
        }
    }
}

/// `stop_after_quanta` ends the measured window at the dispatch that begins the last
/// thread's required slice, or at the window's floor if that comes later; a run with
/// threads that never reach the count runs to its duration. Four threads share one CPU
/// in 1 ms quanta (4 ms rounds): three quanta each end the window in about three
/// rounds, not at the 50 ms duration. Fails if the run does not stop, stops before
/// every thread began its third slice, or ignores the floor.
#[test]
fn a_window_can_end_by_its_quanta() {
    let mut c = cfg("core2-4m", "gzip:4", 50.0);
    c.threads[0].cpus = Some(vec![0]);
    c.kernel.baseline = Baseline::Fx;
    c.kernel.fx_quantum_ms = Some(1.0);
    c.warmup_ms = 2.0;
    c.stop_after_quanta = Some(QuantaStop {
        quanta: 3,
        min_ms: 0.0,
    });
    let r = simulate(&c).unwrap();
    let fewest = r.threads.iter().map(|t| t.slices).min().unwrap();
    assert_eq!(
        fewest,
        3,
        "{:?}",
        r.threads.iter().map(|t| t.slices).collect::<Vec<_>>()
    );
    // the last thread's third slice begins after two full rounds and at most a third
    assert!(
        (8.0..=12.4).contains(&r.measured_ms),
        "window {} ms for three 1 ms quanta of four threads",
        r.measured_ms
    );
    // the same again: the stop is deterministic
    assert_eq!(simulate(&c).unwrap().totals, r.totals);
    // a floor longer than that holds the window open to it (and no later than the
    // next dispatch: the floor's own instant)
    c.stop_after_quanta = Some(QuantaStop {
        quanta: 3,
        min_ms: 30.0,
    });
    let f = simulate(&c).unwrap();
    assert!(
        (f.measured_ms - 30.0).abs() < 0.01,
        "window {} ms with a 30 ms floor",
        f.measured_ms
    );
    assert!(f.threads.iter().all(|t| t.slices >= 7));
    // a count no thread reaches in the run: the duration bounds it
    c.stop_after_quanta = Some(QuantaStop {
        quanta: 1000,
        min_ms: 0.0,
    });
    let l = simulate(&c).unwrap();
    assert!((l.measured_ms - 48.0).abs() < 0.01, "{}", l.measured_ms);
    // a floor past the run's end is refused, naming the setting
    c.stop_after_quanta = Some(QuantaStop {
        quanta: 3,
        min_ms: 49.0,
    });
    let e = simulate(&c).unwrap_err().to_string();
    assert!(e.contains("stop_after_quanta.min_ms"), "{e}");
}
