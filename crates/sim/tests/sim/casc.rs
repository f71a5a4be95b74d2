//! CASC on the simulated CASC machine (niagara-2c): it finds the cache-greedy threads
//! from group miss rates alone, confines them, and does no harm where it cannot help.

use cachesched_policies::casc::CascConfig;
use cachesched_policies::CascStats;
use cachesched_policies::PolicySpec;
use cachesched_sim::config::Phase;
use cachesched_sim::*;

/// 6 cache-greedy (1 MB random), 6 L2-resident (64 KB random) and 6 L1-resident
/// threads, arriving interleaved: generic profiles whose classes at 768 KB follow from
/// their sizes alone, so that the test of the mechanism does not rest on how the
/// benchmark profiles are calibrated (they classify art, twolf and bdb as the paper
/// does only as far as their parameters are right; `reproduce casc` reports that).
fn mechanism_mix() -> Vec<ThreadGroup> {
    (0..18)
        .map(|i| ThreadGroup::of(["large", "small", "compute"][i % 3], 1))
        .collect()
}

/// 6 art-like, 6 twolf-like, 6 Berkeley-DB-like threads, arriving interleaved.
fn casc_mix() -> Vec<ThreadGroup> {
    (0..18)
        .map(|i| ThreadGroup::of(["art", "twolf", "bdb"][i % 3], 1))
        .collect()
}

fn run(threads: Vec<ThreadGroup>, casc: Option<CascConfig>, warm: f64, ms: f64) -> RunResult {
    let mut c = SimConfig::new("niagara-2c", threads);
    c.kernel.baseline = Baseline::Ts;
    c.duration_ms = ms;
    c.warmup_ms = warm;
    c.seed = 7;
    if let Some(cc) = casc {
        c.policies = vec![PolicySpec::Casc(cc)];
    }
    simulate(&c).expect("run completes")
}

/// CASC's statistics of run `r`.
fn casc_stats(r: &RunResult) -> CascStats {
    r.stats_of().expect("CASC ran")
}

fn pcmr(r: &RunResult, t: u32) -> Option<f64> {
    casc_stats(r).pcmr.get(&t).copied()
}

fn mean_pcmr(r: &RunResult, name: &str) -> f64 {
    let v: Vec<f64> = r
        .threads
        .iter()
        .filter(|t| t.name == name)
        .map(|t| pcmr(r, t.id).expect("every thread measured"))
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn casc_finds_the_greedy_threads_and_cuts_misses() {
    let (warm, ms) = (700.0, 1100.0);
    let base = run(mechanism_mix(), None, warm, ms);
    let paper = run(mechanism_mix(), Some(CascConfig::default()), warm, ms);
    let calibrated = CascConfig {
        secondary: cachesched_policies::casc::Secondary::Calibrated,
        ..Default::default()
    };
    let casc = run(mechanism_mix(), Some(calibrated), warm, ms);
    for r in [&paper, &casc] {
        // every PCMR known before the measured window: the initial measurement of the
        // first nine threads, then nine secondary measurements
        let steady = casc_stats(r).steady_ms.unwrap_or(-1.0);
        assert!(steady > 0.0 && steady < warm, "steady at {steady} ms");
        assert_eq!(casc_stats(r).secondary_measurements as f64, 9.0);
        // the initial measurement ranks the greedy threads highest
        let initial = |name: &str| {
            let v: Vec<f64> = (0..9)
                .filter(|&t| r.threads[t].name == name)
                .map(|t| pcmr(r, t as u32).unwrap())
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        assert!(
            initial("large") > 10.0 * initial("small").max(initial("compute")).max(0.1),
            "large {} small {} compute {}",
            initial("large"),
            initial("small"),
            initial("compute")
        );
        // far fewer misses, never an idle CPU for want of allowed threads. Over seeds
        // 7, 1, 2, 3, 4 (this mix and windows as a scenario file, `cachesched
        // experiment`, 2026-11-23) CASC's L2 miss ratio over TS's was 0.15-0.20 as
        // published (-81.8% ± 2.8) and 0.12-0.53 with calibrated secondary measurements
        // (-65.7% ± 18.9); seed 7 gave 0.20 and 0.12. The bounds admit every seed
        // measured and fail a CASC that confines the large threads half as well.
        let bound = if std::ptr::eq(r, &paper) { 0.3 } else { 0.6 };
        eprintln!(
            "L2 miss ratio over TS's: {:.3} (bound {bound})",
            r.l2_miss_ratio / base.l2_miss_ratio
        );
        assert!(
            r.l2_miss_ratio < bound * base.l2_miss_ratio,
            "miss ratio {} vs {}",
            r.l2_miss_ratio,
            base.l2_miss_ratio
        );
        assert!(r.cpus.iter().all(|c| c.busy_fraction > 0.95));
        assert_eq!(r.kernel.mask_fallbacks, 0);
        // stable programs: no phase change detected
        assert_eq!(
            casc_stats(r).remeasurements as f64,
            0.0,
            "{:?}",
            r.policy_stats
        );
    }
    // with calibrated secondary measurements every thread is ranked by its program
    let (large, small, compute) = (
        mean_pcmr(&casc, "large"),
        mean_pcmr(&casc, "small"),
        mean_pcmr(&casc, "compute"),
    );
    assert!(
        large > 10.0 * small.max(compute).max(0.1),
        "large {large} small {small} compute {compute}"
    );
    let lowest_large = casc
        .threads
        .iter()
        .filter(|t| t.name == "large")
        .map(|t| pcmr(&casc, t.id).unwrap())
        .fold(f64::INFINITY, f64::min);
    let highest_other = casc
        .threads
        .iter()
        .filter(|t| t.name != "large")
        .map(|t| pcmr(&casc, t.id).unwrap())
        .fold(0.0, f64::max);
    assert!(
        lowest_large > highest_other,
        "{lowest_large} vs {highest_other}"
    );
    // the greedy threads are allowed on fewer CPUs than the L1-resident ones: the high
    // MAX_PCMR buckets
    let caps: Vec<f64> = (0..8)
        .map(|c| casc_stats(&casc).max_pcmr[&format!("0.cpu{c}")])
        .collect();
    let cpus_for = |p: f64| caps.iter().filter(|&&m| p < m).count();
    assert!(cpus_for(large) < cpus_for(compute), "caps {caps:?}");
    // at the price of fairness: the confined threads get less of the CPUs (CPU-share
    // deviation over five seeds +106.9% ± 99.0 as published, +100.8% ± 88.2
    // calibrated). Whether that buys throughput depends on the machine: over the same
    // five seeds -1.8% ± 10.7 and +3.1% ± 8.8, no clear change; a result for
    // `reproduce casc` to report, not a property of the mechanism to assert.
    assert!(casc.cpu_share_cv > base.cpu_share_cv);
}

#[test]
fn fewer_threads_than_contexts_change_nothing() {
    let threads = vec![ThreadGroup::of("art", 3), ThreadGroup::of("twolf", 3)];
    let base = run(threads.clone(), None, 20.0, 120.0);
    let casc = run(threads, Some(CascConfig::default()), 20.0, 120.0);
    assert_eq!(casc_stats(&casc).initial_measurements as f64, 0.0);
    assert_eq!(casc.ips, base.ips);
    assert_eq!(casc.totals, base.totals);
}

#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn identical_threads_do_no_harm() {
    let threads = vec![ThreadGroup::of("twolf", 12)];
    let base = run(threads.clone(), None, 300.0, 500.0);
    let casc = run(threads, Some(CascConfig::default()), 300.0, 500.0);
    assert!(casc_stats(&casc).steady_ms.unwrap_or(-1.0) > 0.0);
    let ratio = casc.ips / base.ips;
    assert!((0.95..1.05).contains(&ratio), "ips ratio {ratio}");
}

#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn late_arrivals_are_measured_and_exits_rebucketize() {
    let mut threads = casc_mix();
    // two more art threads arrive after the initial measurement
    let mut late = ThreadGroup::of("art", 2);
    late.start_ms = 200.0;
    threads.push(late);
    // three twolf threads finish early
    let mut m = cachesched_sim::workload::profile("twolf").unwrap();
    m.instructions = Some(1_500_000);
    let mut short = ThreadGroup::custom(m, 3);
    short.label = Some("short".into());
    threads.push(short);
    let r = run(threads, Some(CascConfig::default()), 100.0, 1000.0);
    let exited = r.threads.iter().filter(|t| t.exited).count();
    assert_eq!(exited, 3, "the short threads finished");
    for t in r.threads.iter().filter(|t| t.name == "art") {
        assert!(pcmr(&r, t.id).is_some(), "art thread {} measured", t.id);
    }
    // every thread beyond the first nine got a secondary measurement
    assert!(casc_stats(&r).secondary_measurements as f64 >= 21.0 - 9.0 - 3.0);
    assert!(casc_stats(&r).bucketizations as f64 >= 3.0);
    assert_eq!(r.kernel.mask_fallbacks, 0);
}

#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn a_phase_change_triggers_remeasurement() {
    // six twolf-like threads turn mcf-like (pointer chasing) after 120 M instructions,
    // well after every PCMR is known
    let mut changing = ThreadGroup::of("twolf", 6);
    changing.profile = None;
    changing.label = Some("changing".into());
    changing.phases = vec![
        Phase {
            profile: Some("twolf".into()),
            model: None,
            instructions: 120_000_000,
        },
        Phase {
            profile: Some("mcf".into()),
            model: None,
            instructions: 1 << 40,
        },
    ];
    let threads = vec![
        changing,
        ThreadGroup::of("bdb", 6),
        ThreadGroup::of("twolf", 6),
    ];
    let calibrated = CascConfig {
        secondary: cachesched_policies::casc::Secondary::Calibrated,
        ..Default::default()
    };
    let r = run(threads, Some(calibrated), 100.0, 1500.0);
    assert!(
        casc_stats(&r).remeasurements as f64 >= 1.0,
        "{:?}",
        r.policy_stats
    );
    // the re-measured threads now score far above the unchanged twolf threads
    let twolf = mean_pcmr(&r, "twolf");
    let rescored = r
        .threads
        .iter()
        .filter(|t| t.name == "changing")
        .filter_map(|t| pcmr(&r, t.id))
        .filter(|&p| p > 2.0 * twolf)
        .count();
    assert!(rescored >= 2, "{:?}", r.policy_stats);
}
