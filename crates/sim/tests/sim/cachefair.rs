//! The cache-fair scheduler on the simulated t1-dual: a cache-fair thread whose
//! co-runners take more than its fair share of the L2 gets CPU time from the
//! best-effort thread, through slices on Solaris's fixed-priority class and through
//! weights (nice values) on the CFS-like class, and the best-effort thread never loses
//! more than its bound.

use cachesched_core::ThreadClass;
use cachesched_core::{Ctx, Nanos, Policy, ThreadId};
use cachesched_policies::cachefair::weight::NiceDither;
use cachesched_policies::cachefair::{CacheFairConfig, Mechanism};
use cachesched_policies::CacheFairStats;
use cachesched_policies::PolicySpec;
use cachesched_sim::config::Phase;
use cachesched_sim::*;

/// One thread of profile `name` bound to `cpu`, in `class`.
fn on(name: &str, cpu: u32, class: Option<ThreadClass>) -> ThreadGroup {
    let mut g = ThreadGroup::of(name, 1);
    g.cpus = Some(vec![cpu]);
    g.class = class;
    g
}

/// A 64 KB principal (it fits in half the 256 KB L2, its fair share) and the
/// best-effort thread (L1-resident) bound to CPU 0; a 1 MB cache-hungry thread and an
/// L1-resident one bound to CPU 1, so that the principal's co-runner alternates
/// between one that takes far more than half the L2 and one that takes nothing, and
/// the time it is given comes from the best-effort thread beside it. Generic profiles
/// and fixed placement: the test rests on the mechanism, not on how the SPEC profiles
/// are calibrated or where a balancer puts threads.
fn mix() -> Vec<ThreadGroup> {
    vec![
        on("bv-l2=96", 0, Some(ThreadClass::CacheFair)),
        on("large", 1, None),
        on("compute", 1, None),
        on("compute", 0, Some(ThreadClass::BestEffort)),
        on("compute", 1, None),
    ]
}

/// Quantum of the fixed-priority runs, ms.
const QUANTUM_MS: f64 = 4.0;

fn config(mechanism: Mechanism, be_max_penalty: f64) -> CacheFairConfig {
    CacheFairConfig {
        quantum_ms: QUANTUM_MS,
        recon_instructions: 15_000_000,
        min_points: 10,
        calibration_instructions: 3_000_000,
        repeat_instructions: 1_000_000_000,
        tick_ms: 1.0,
        mechanism,
        be_max_penalty,
        ..Default::default()
    }
}

fn run(baseline: Baseline, policy: Option<CacheFairConfig>, seed: u64) -> RunResult {
    let mut c = SimConfig::new("t1-dual", mix());
    c.kernel.baseline = baseline;
    c.kernel.fx_quantum_ms = Some(QUANTUM_MS);
    c.duration_ms = 1000.0;
    c.warmup_ms = 200.0;
    c.seed = seed;
    if let Some(p) = policy {
        c.policies = vec![PolicySpec::Cachefair(p)];
    }
    simulate(&c).expect("run completes")
}

/// The cache-fair scheduler's statistics of run `r`.
fn cf_stats(r: &RunResult) -> CacheFairStats {
    r.stats_of().expect("the cache-fair scheduler ran")
}

/// CPU time of thread `t` in the measured window, ms.
fn cpu_ms(r: &RunResult, t: usize) -> f64 {
    r.threads[t].counters.cpu_time_ns as f64 / 1e6
}

/// Over three seeds, against the baseline alone: the principal (whose co-runners take
/// more than its fair share of the L2) is given CPU time, the best-effort thread beside
/// it pays for it; with a bound of 1% the bound binds and holds (within what dithering
/// nice values costs on the CFS class).
fn compensates(baseline: Baseline, weights: bool) {
    for seed in 1..=3 {
        let base = run(baseline, None, seed);
        let free = run(baseline, Some(config(Mechanism::Auto, 0.08)), seed);
        let tight = run(baseline, Some(config(Mechanism::Auto, 0.01)), seed);
        let gain_ms = |r: &RunResult| cpu_ms(r, 0) - cpu_ms(&base, 0);
        let loss_pct = |r: &RunResult| 100.0 * (1.0 - cpu_ms(r, 3) / cpu_ms(&base, 3));
        let gain_pct = 100.0 * gain_ms(&free) / cpu_ms(&base, 0);
        let be_loss_ms = cpu_ms(&base, 3) - cpu_ms(&free, 3);
        eprintln!(
            "seed {seed}: principal {gain_pct:+.2}% ({:+.2} ms), best-effort {:+.2} ms, tight: best-effort {:+.2}%",
            gain_ms(&free),
            -be_loss_ms,
            -loss_pct(&tight)
        );
        for r in [&free, &tight] {
            assert_eq!(
                f64::from(u8::from(cf_stats(r).weights)),
                weights as u8 as f64
            );
            assert_eq!(cf_stats(r).recon_phases as f64, 1.0, "seed {seed}");
            assert_eq!(
                cf_stats(r).phase_changes as f64,
                0.0,
                "seed {seed}: a steady thread"
            );
            assert_eq!(
                f64::from(u8::from(cf_stats(r).fair_fallback[&0])),
                0.0,
                "seed {seed}: Equation 2 fitted"
            );
            // the fair miss rate lies between the principal's rate beside an
            // L1-resident co-runner and beside the cache-hungry one, far below the latter
            let own = r.threads[0].counters.llc_misses as f64 / r.threads[0].counters.cycles as f64;
            assert!(cf_stats(r).fair_mpc[&0] < 0.8 * own, "seed {seed}");
        }
        let (up, down) = (
            cf_stats(&free).adjusted_up as f64,
            cf_stats(&free).adjusted_down as f64,
        );
        assert!(
            up >= 10.0 && down * 10.0 <= up,
            "seed {seed}: up {up}, down {down}"
        );
        assert!(
            gain_pct > 1.0,
            "seed {seed}: the principal gained {gain_pct}%"
        );
        let paid = be_loss_ms / gain_ms(&free);
        assert!(
            (0.8..=1.2).contains(&paid),
            "seed {seed}: the best-effort thread paid {paid} of the principal's gain"
        );
        assert!(
            cf_stats(&tight).capped as f64 > 0.0,
            "seed {seed}: the 1% bound never bound"
        );
        // the bound is on slices' CPU time (fixed priority) or on weight (CFS), where
        // dithering nice values over 1 ms ticks realises a share within about 0.3% of
        // the CPU (dithered_nice_values_meet_weights_between_levels): 1.3-1.75% here
        // (the tight run's loss is below the free run's, not below half of it: on the
        // CFS class the free run's calibrations take only about 1.7% — the principal's
        // weight is raised less than its quantum is on FX — against 1.2% tight)
        let tight_loss = loss_pct(&tight);
        let limit = if weights { 2.0 } else { 1.5 };
        assert!(
            (0.3..=limit).contains(&tight_loss) && tight_loss < loss_pct(&free),
            "seed {seed}: with a 1% bound the best-effort thread lost {tight_loss}%"
        );
        assert!(gain_ms(&tight) < gain_ms(&free), "seed {seed}");
    }
}

#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn slices_compensate_on_the_fixed_priority_class() {
    compensates(Baseline::Fx, false);
}

#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn weights_compensate_on_the_cfs_class() {
    compensates(Baseline::Cfs, true);
}

/// Sets fixed weights through [`NiceDither`], one step per tick.
struct Dithered {
    targets: Vec<(ThreadId, NiceDither)>,
}

impl Policy for Dithered {
    fn name(&self) -> &str {
        "dithered"
    }
    fn init(&mut self, ctx: &mut Ctx<'_>) {
        ctx.set_tick_period(Some(Nanos::from_ms(1)));
    }
    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now();
        for (t, d) in &mut self.targets {
            if let Some(n) = d.step(now) {
                ctx.set_nice(*t, Some(n));
            }
        }
    }
}

/// Two CPU-bound threads on one CPU of the CFS class, weights set between nice levels
/// by dithering: their CPU times split as the target weights say. Fails if dithering
/// biases the share (the weight mechanism's bound on the best-effort thread rests on
/// it).
#[test]
fn dithered_nice_values_meet_weights_between_levels() {
    for (a, b) in [(1.01, 0.99), (1.08, 0.92), (1.3, 1.0)] {
        let mut c = SimConfig::new(
            "t1-dual",
            vec![ThreadGroup::of("compute", 1), ThreadGroup::of("compute", 1)],
        );
        for g in &mut c.threads {
            g.cpus = Some(vec![0]);
        }
        c.duration_ms = 1000.0;
        c.warmup_ms = 100.0;
        let targets = [a, b]
            .iter()
            .enumerate()
            .map(|(i, &f)| {
                let mut d = NiceDither::new(0);
                d.set_target(1024.0 * f);
                (ThreadId(i as u32), d)
            })
            .collect();
        let r = simulate_with(&c, Box::new(Dithered { targets })).unwrap();
        let share = cpu_ms(&r, 0) / (cpu_ms(&r, 0) + cpu_ms(&r, 1));
        let want = a / (a + b);
        eprintln!("weights {a}/{b}: share {share:.4}, want {want:.4}");
        assert!(
            (share - want).abs() < 0.004,
            "weights {a}/{b}: share {share}, want {want}"
        );
    }
}

/// The principal's work segment in [`cache_fair_reduces_co_runner_variability`]: it begins once its reconnaissance
/// (15 M instructions) has ended.
const SEGMENT: WorkSegment = WorkSegment {
    start_instructions: 18_000_000,
    instructions: 25_000_000,
};

/// The principal (a 96 KB sweep, cache-fair) and the best-effort thread (L1-resident)
/// on CPU 0; on CPU 1 three co-runners that take no L2 ("fast") or two 1 MB random
/// threads and an L1-resident one ("slow": the principal shares the L2 with a
/// cache-hungry thread two thirds of the time). The schedules differ only in what the
/// co-runners do to the L2; nothing else about them can slow the principal (their L1s
/// are their own, the bus is far from saturated). Returns the principal's segment
/// time, ms, and the run.
fn segment_run(slow: bool, policy: Option<CacheFairConfig>, seed: u64) -> (f64, RunResult) {
    let mut principal = on("bv-l2=96", 0, Some(ThreadClass::CacheFair));
    principal.segment = Some(SEGMENT);
    let co = if slow {
        ["large", "large", "compute"]
    } else {
        ["compute", "compute", "compute"]
    };
    let mut threads = vec![principal, on("compute", 0, Some(ThreadClass::BestEffort))];
    threads.extend(co.iter().map(|p| on(p, 1, None)));
    let mut c = SimConfig::new("t1-dual", threads);
    c.kernel.baseline = Baseline::Fx;
    c.kernel.fx_quantum_ms = Some(QUANTUM_MS);
    c.duration_ms = 3000.0;
    c.stop_after_segments = true;
    c.seed = seed;
    if let Some(p) = policy {
        c.policies = vec![PolicySpec::Cachefair(p)];
    }
    let r = simulate(&c).expect("run completes");
    let t = r.threads[0].segment_ms.expect("the segment completes");
    (t, r)
}

/// Figures 6–7's effect at the mechanism's level, over three seeds: under FX the
/// principal takes longer in the slow schedule than in the fast one (its co-runners
/// take more than its fair share of the L2), and cache-fair, which gives it the CPU
/// time its extra misses cost, cuts that difference to at most a third. The
/// best-effort bound is set out of the way (50%) so that what is tested is the
/// compensation; the bound is the other tests'. Measured (seeds 1–3): FX +4.4%,
/// cache-fair +0.7% to +0.9%, the fast schedule unchanged. Fails if the baseline shows
/// less than 3% to reduce, if cache-fair leaves more than a third of it, or if it
/// changes the fast schedule (no co-runner takes any L2 there: nothing to correct) by
/// more than 2%.
#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn cache_fair_reduces_co_runner_variability() {
    for seed in 1..=3 {
        let cf = || Some(config(Mechanism::Auto, 0.5));
        let (fx_fast, _) = segment_run(false, None, seed);
        let (fx_slow, _) = segment_run(true, None, seed);
        let (cf_fast, _) = segment_run(false, cf(), seed);
        let (cf_slow, r) = segment_run(true, cf(), seed);
        let fx_var = 100.0 * (fx_slow / fx_fast - 1.0);
        let cf_var = 100.0 * (cf_slow / cf_fast - 1.0);
        eprintln!(
            "seed {seed}: fx {fx_fast:.1}/{fx_slow:.1} ms ({fx_var:+.2}%), cachefair {cf_fast:.1}/{cf_slow:.1} ms ({cf_var:+.2}%), given {:.1} ms",
            cf_stats(&r).given_ms
        );
        assert!(fx_var > 3.0, "seed {seed}: FX variability {fx_var}%");
        assert!(
            cf_var.abs() <= fx_var / 3.0,
            "seed {seed}: cache-fair {cf_var}% against FX {fx_var}%"
        );
        assert!(
            (cf_fast / fx_fast - 1.0).abs() < 0.02,
            "seed {seed}: fast schedule {fx_fast} → {cf_fast} ms"
        );
    }
}

/// A principal that changes program after 25 M instructions (the 96 KB sweep becomes a
/// 1 MB random walk), after its first reconnaissance (15 M): the phase-change detection
/// starts a second reconnaissance, which ends with a fair miss rate far above the
/// sweep's (2.1e-4 misses per cycle in `compensates`' runs, where the sweep runs
/// throughout and no phase change may be seen). Over three seeds. Measured: references
/// per instruction move by 33% (a steady thread's windows by under 0.3%); fair miss
/// rate 1.07e-2 after the change. Fails if the change goes undetected or is seen twice,
/// or if the second reconnaissance does not complete with a new model.
#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn a_phase_change_starts_a_new_reconnaissance() {
    for seed in 1..=3 {
        let mut threads = mix();
        threads[0].profile = None;
        threads[0].phases = vec![
            Phase {
                profile: Some("bv-l2=96".into()),
                model: None,
                instructions: 25_000_000,
            },
            Phase {
                profile: Some("large".into()),
                model: None,
                instructions: 1 << 40,
            },
        ];
        let mut c = SimConfig::new("t1-dual", threads);
        c.kernel.baseline = Baseline::Fx;
        c.kernel.fx_quantum_ms = Some(QUANTUM_MS);
        c.duration_ms = 1500.0;
        c.seed = seed;
        c.policies = vec![PolicySpec::Cachefair(config(Mechanism::Auto, 0.08))];
        let r = simulate(&c).expect("run completes");
        eprintln!(
            "seed {seed}: drift {:.3}, fair MPC {:.2e}",
            cf_stats(&r).max_phase_drift,
            cf_stats(&r).fair_mpc[&0]
        );
        assert_eq!(cf_stats(&r).phase_changes as f64, 1.0, "seed {seed}");
        assert_eq!(cf_stats(&r).recon_phases as f64, 2.0, "seed {seed}");
        assert!(
            cf_stats(&r).fair_mpc[&0] > 2e-3,
            "seed {seed}: the second reconnaissance kept the sweep's model"
        );
    }
}
