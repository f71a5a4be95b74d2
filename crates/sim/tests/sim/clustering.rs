//! Sharing-aware thread clustering (paper 3) on the simulated 2-chip Power5: it finds the
//! sharing groups from sampled remote accesses alone, and placing them cuts the
//! remote-cache stalls; the manual placements it is compared with do what they say.

use cachesched_policies::clustering::cluster::adjusted_rand_index;
use cachesched_policies::{ClusteringConfig, PolicySpec};
use cachesched_sim::*;

/// 16 scoreboard threads of one process in 4 groups of 4, dealt into groups by the
/// seed, so that no placement following thread ids matches the groups by construction.
fn scoreboard(pin: Option<Pin>) -> Vec<ThreadGroup> {
    let mut g = ThreadGroup::of("scoreboard", 16);
    g.same_process = true;
    g.threads_per_group = Some(4);
    g.group_assignment = GroupAssignment::Seeded;
    g.pin = pin;
    vec![g]
}

fn config(threads: Vec<ThreadGroup>, seed: u64, warm: f64, ms: f64) -> SimConfig {
    let mut c = SimConfig::new("power5-2x2x2", threads);
    c.seed = seed;
    c.warmup_ms = warm;
    c.duration_ms = ms;
    c
}

/// The policy as the reproduction runs it, shortened for a test: detection at a tenth
/// of the paper's samples (threshold scaled to match), a 200 M-cycle window, and
/// activation at any remote-stall share (the scoreboard's is about 8% here, below the
/// paper's 20%; `reproduce clustering` reports both).
fn policy() -> PolicySpec {
    PolicySpec::Clustering(ClusteringConfig {
        activation_share: 0.0,
        window_cycles: 2e8,
        sample_scale: 0.1,
        settle_ms: 10.0,
        ..Default::default()
    })
}

fn remote_stall_cpki(r: &RunResult) -> f64 {
    1000.0 * r.totals.data_stall_remote_cycles as f64 / r.totals.instructions as f64
}

/// The last clustering that found groups: the adjusted Rand index of its clusters
/// against the ground truth over the threads it clustered, and how many it clustered.
fn accuracy(r: &RunResult) -> (f64, usize) {
    let (mut found, mut truth) = (Vec::new(), Vec::new());
    for (k, v) in &r.policy_vectors {
        if let Some(i) = k.strip_prefix("cluster.") {
            for &t in v {
                found.push(i.parse::<usize>().expect("cluster index"));
                truth.push(r.threads[t as usize].sharing_group.expect("truth") as usize);
            }
        }
    }
    (adjusted_rand_index(&truth, &found), found.len())
}

/// The share of same-group thread pairs the policy placed on one chip.
fn colocated(r: &RunResult) -> f64 {
    let chip = &r.policy_vectors["chip_of"];
    let (mut same, mut pairs) = (0, 0);
    for a in &r.threads {
        for b in r
            .threads
            .iter()
            .filter(|b| b.id > a.id && b.sharing_group == a.sharing_group)
        {
            pairs += 1;
            let (ca, cb) = (chip[a.id as usize], chip[b.id as usize]);
            if ca >= 0.0 && ca == cb {
                same += 1;
            }
        }
    }
    same as f64 / pairs as f64
}

/// Each seed: the default kernel and the policy, run side by side.
/// Fails if any seed's clusters mix groups (ARI over the clustered threads below 0.9:
/// one thread of 16 in the wrong group already gives about 0.8), if fewer than two
/// clusters' worth of threads were clustered (7-12 of 16 are: threads with few remote
/// samples are left where they are, as loose threads), if the final placement splits
/// any group over the chips, or if it does not at least
/// halve the remote-stall cycles per instruction of the measured window against the
/// default (the hand placement removes them entirely), or costs throughput.
#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn groups_are_found_and_remote_stalls_fall_across_seeds() {
    let results: Vec<(u64, RunResult, RunResult)> = std::thread::scope(|s| {
        let hs: Vec<_> = (1..=3u64)
            .map(|seed| {
                s.spawn(move || {
                    let base =
                        simulate(&config(scoreboard(None), seed, 60.0, 100.0)).expect("default");
                    let mut c = config(scoreboard(None), seed, 60.0, 100.0);
                    c.policies = vec![policy()];
                    let auto = simulate(&c).expect("clustering");
                    (seed, base, auto)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("run")).collect()
    });
    for (seed, base, auto) in &results {
        let (ari, clustered) = accuracy(auto);
        let together = colocated(auto);
        let (b, a) = (remote_stall_cpki(base), remote_stall_cpki(auto));
        eprintln!(
            "seed {seed}: ARI {ari:.3} over {clustered} threads, groups together {together:.2}, remote-stall cycles per 1000 instr {b:.1} -> {a:.1}, ips {:.3e} -> {:.3e}, stats {:?}",
            base.ips, auto.ips, auto.policy_stats
        );
        assert!(
            auto.policy_stats["rounds"] >= 1.0,
            "seed {seed}: never clustered"
        );
        assert!(
            auto.policy_stats["first_clustered_ms"] < 60.0,
            "seed {seed}: clustered only after the warm-up"
        );
        assert!(ari >= 0.9, "seed {seed}: ARI {ari}");
        assert!(clustered >= 4, "seed {seed}: {clustered} threads clustered");
        assert_eq!(together, 1.0, "seed {seed}: a group split over the chips");
        assert!(a <= 0.5 * b, "seed {seed}: remote stalls {b} -> {a}");
        assert!(
            auto.ips >= base.ips,
            "seed {seed}: throughput {} -> {}",
            base.ips,
            auto.ips
        );
    }
}

/// The manual placements: one group per chip leaves no sharing across chips (and the
/// private data never moves), round-robin pinning by thread id does not.
/// Fails if `Pin::ByGroup` splits a group over the chips or `Pin::RoundRobin` happens
/// to keep every group on one chip.
#[test]
fn hand_placement_removes_remote_accesses_round_robin_does_not() {
    let hand = simulate(&config(scoreboard(Some(Pin::ByGroup)), 1, 2.0, 8.0)).expect("hand");
    let rr = simulate(&config(scoreboard(Some(Pin::RoundRobin)), 1, 2.0, 8.0)).expect("rr");
    assert_eq!(hand.totals.remote_accesses, 0);
    assert!(
        rr.totals.remote_accesses > 10_000,
        "{}",
        rr.totals.remote_accesses
    );
    assert_eq!(hand.kernel.migrations, 0, "pinned threads never move");
}

/// A pin that contradicts a group's `cpus` is refused, naming both.
#[test]
fn pin_outside_cpus_is_refused() {
    let mut t = scoreboard(Some(Pin::RoundRobin));
    t[0].cpus = Some(vec![0, 1]);
    let e = simulate(&config(t, 1, 0.0, 1.0)).expect_err("contradiction");
    let msg = e.to_string();
    assert!(msg.contains("pin") && msg.contains("cpus"), "{msg}");
}

/// Seeded group assignment keeps groups equal and differs between seeds; the ground
/// truth follows it.
#[test]
fn seeded_assignment_is_balanced_and_seed_dependent() {
    let groups = |seed| {
        let r = simulate(&config(scoreboard(None), seed, 0.0, 0.5)).expect("run");
        r.threads
            .iter()
            .map(|t| t.sharing_group.expect("truth"))
            .collect::<Vec<u32>>()
    };
    let (a, b) = (groups(1), groups(2));
    for g in [&a, &b] {
        for k in 0..4 {
            assert_eq!(g.iter().filter(|&&x| x == k).count(), 4, "{g:?}");
        }
    }
    assert_ne!(a, b);
    assert_ne!(a, (0..16).map(|i| i % 4).collect::<Vec<u32>>());
}

/// Threads that share nothing give no remote stalls to speak of: with the paper's
/// activation threshold the policy never samples and never moves a thread.
/// Fails if monitoring activates on private data.
#[test]
fn quiet_without_sharing() {
    let mut g = ThreadGroup::of("mcf", 8);
    g.same_process = true;
    let mut c = config(vec![g], 1, 0.0, 40.0);
    c.policies = vec![PolicySpec::Clustering(ClusteringConfig {
        window_cycles: 1e8,
        ..Default::default()
    })];
    let r = simulate(&c).expect("run");
    assert!(r.policy_stats["windows"] >= 2.0, "{:?}", r.policy_stats);
    assert_eq!(r.policy_stats["rounds"], 0.0);
    assert_eq!(r.kernel.address_samples, 0);
}

/// A sample costs the sampled CPU `sample_cost_cycles`: the kernel counts exactly that
/// per sample, and the run does measurably less work than the same run with free
/// samples. Fails if the cost is not charged (no loss) or charged to no one.
#[test]
#[ignore = "slow tier (see slow_tier.rs): cargo test --release -p cachesched-sim --test sim -- --ignored"]
fn sample_cost_is_charged() {
    let run = |cost: u64| {
        let mut c = config(scoreboard(None), 1, 0.0, 30.0);
        c.kernel.sample_cost_cycles = cost;
        c.policies = vec![PolicySpec::Clustering(ClusteringConfig {
            activation_share: 0.0,
            window_cycles: 1e8,
            max_detect_ms: 1e6,
            samples_per_thread: 1e9, // never stops sampling
            period: 1,
            period_jitter: 0.0,
            ..Default::default()
        })];
        simulate(&c).expect("run")
    };
    let (free, costly) = (run(0), run(3000));
    assert_eq!(free.kernel.sample_cost_cycles, 0);
    assert_eq!(
        costly.kernel.sample_cost_cycles,
        3000 * costly.kernel.address_samples
    );
    // the share of all cycles spent in the handler, and the work it cost
    let frac = costly.kernel.sample_cost_cycles as f64 / costly.totals.cycles as f64;
    let lost = 1.0 - costly.totals.instructions as f64 / free.totals.instructions as f64;
    assert!(frac > 0.1, "handlers took only {frac} of the cycles");
    assert!(
        lost > 0.5 * frac,
        "handlers took {frac} of the cycles but the run lost only {lost} of its work"
    );
}
