//! The Solaris dispatcher (TS and FX classes): CPU-bound threads are not frozen where
//! they started, the run-queue rule spreads a pile of threads, quanta are
//! configurable, FX priorities are strict, and with affinity settings disabled
//! CPU-bound threads keep moving.

use cachesched_core::{CpuId, Cpumask, Ctx, Policy, ThreadId};
use cachesched_sim::workload::{LocalityModel, Pattern};
use cachesched_sim::*;

/// `n` CPU-bound threads with 4 KB of data and long chunks (cheap to simulate).
fn hogs(n: u32) -> ThreadGroup {
    ThreadGroup::custom(LocalityModel::single(4, Pattern::Random, 300.0), n)
}

fn run(machine: &str, groups: Vec<ThreadGroup>, k: KernelConfig, ms: f64) -> RunResult {
    let mut c = SimConfig::new(machine, groups);
    c.kernel = k;
    c.duration_ms = ms;
    simulate(&c).unwrap()
}

fn kernel(baseline: Baseline) -> KernelConfig {
    KernelConfig {
        baseline,
        ..Default::default()
    }
}

/// Pins every thread to `cpus` at start.
struct Pin(Vec<u32>);
impl Policy for Pin {
    fn name(&self) -> &str {
        "pin"
    }
    fn thread_started(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
        ctx.set_mask(
            t,
            Some(Cpumask::from_cpus(self.0.iter().map(|&c| CpuId(c)))),
        );
    }
}

#[test]
fn ts_and_fx_move_cpu_bound_threads() {
    // 18 CPU-bound threads on 8 CPUs: each quantum expiry may hand a thread to the
    // next CPU (run-queue rule), and TS re-places the waiting threads every second
    for b in [Baseline::Ts, Baseline::Fx] {
        let r = run("niagara-2c", vec![hogs(18)], kernel(b), 3000.0);
        assert!(
            r.kernel.migrations >= 18,
            "{b:?}: {} migrations in 3 s",
            r.kernel.migrations
        );
        assert_eq!(r.kernel.balance_moves, 0, "{b:?}: no CPU ever idles");
    }
}

#[test]
fn the_run_queue_rule_spreads_a_pile_of_threads() {
    // FX never changes priorities and has no ts_update: only the run-queue rule moves
    // the threads that pile up on the first CPUs at start (every CPU runs the same
    // priority, so the lowest-priority choice falls on CPU 0 and its neighbours)
    let mut k = kernel(Baseline::Fx);
    k.fx_quantum_ms = Some(20.0);
    let mut c = SimConfig::new("niagara-2c", vec![hogs(16)]);
    c.kernel = k;
    c.duration_ms = 3000.0;
    c.warmup_ms = 1500.0;
    let r = simulate(&c).unwrap();
    let per_cpu: Vec<f64> = r.cpus.iter().map(|c| c.busy_fraction).collect();
    assert!(per_cpu.iter().all(|&b| b > 0.99), "{per_cpu:?}");
    // 16 threads on 8 CPUs: two each once spread
    assert!(
        r.cpu_share_cv < 0.1,
        "CPU-share CV {} (shares {:?})",
        r.cpu_share_cv,
        r.threads.iter().map(|t| t.cpu_share).collect::<Vec<_>>()
    );
}

#[test]
fn ts_quantum_is_configurable() {
    // two hogs sharing CPU 0 switch once per quantum
    let switches = |q: Option<f64>| {
        let mut k = kernel(Baseline::Ts);
        k.ts_quantum_ms = q;
        let mut c = SimConfig::new("t1-dual", vec![hogs(2)]);
        c.kernel = k;
        c.duration_ms = 400.0;
        simulate_with(&c, Box::new(Pin(vec![0])))
            .unwrap()
            .kernel
            .context_switches
    };
    let (q2, q10, table) = (switches(Some(2.0)), switches(Some(10.0)), switches(None));
    assert!((180..=210).contains(&q2), "2 ms: {q2} switches in 400 ms");
    assert!((36..=42).contains(&q10), "10 ms: {q10}");
    // the table's quanta grow as the threads sink (120 ms at level 29 … 200 ms)
    assert!(table <= 4, "table: {table}");
}

#[test]
fn fx_priorities_are_strict_and_fixed() {
    let mut hi = hogs(1);
    hi.fx_priority = 20;
    let r = {
        let mut c = SimConfig::new("t1-dual", vec![hi, hogs(1)]);
        c.kernel = kernel(Baseline::Fx);
        c.duration_ms = 300.0;
        simulate_with(&c, Box::new(Pin(vec![0]))).unwrap()
    };
    assert!(
        r.threads[0].cpu_share > 0.99 && r.threads[1].cpu_share < 0.01,
        "{} / {}",
        r.threads[0].cpu_share,
        r.threads[1].cpu_share
    );
}

#[test]
fn affinity_oblivious_keeps_cpu_bound_threads_moving() {
    // the affinity paper's low-affinity condition: 2 ms quanta, affinity disabled;
    // six CPU-bound threads on four CPUs
    for b in [Baseline::Ts, Baseline::Cfs] {
        let mut k = kernel(b);
        k.ts_quantum_ms = Some(2.0);
        let warm = run("clovertown-2x2", vec![hogs(6)], k.clone(), 300.0);
        k.affinity_oblivious = true;
        let cold = run("clovertown-2x2", vec![hogs(6)], k, 300.0);
        // TS expires a 2 ms quantum ~600 times in 300 ms; CFS slices are ~9 ms here
        let least = if b == Baseline::Ts { 100 } else { 30 };
        assert!(
            cold.kernel.migrations > least,
            "{b:?}: {} migrations oblivious",
            cold.kernel.migrations
        );
        // CFS moves a thread only when the balancer evens out 2-vs-1 queues; Solaris TS
        // rotates them anyway (at levels below 16 a requeued thread goes to the next
        // CPU whenever that one queues fewer threads of its priority)
        if b == Baseline::Cfs {
            assert!(
                cold.kernel.migrations > warm.kernel.migrations * 3 / 2,
                "{} migrations oblivious, {} with affinity",
                cold.kernel.migrations,
                warm.kernel.migrations
            );
        } else {
            assert!(warm.kernel.migrations > 100, "{}", warm.kernel.migrations);
        }
    }
}

#[test]
fn slices_counts_every_quantum_given_in_the_window() {
    // 10 ms quanta, 400 ms measured after 100 ms of warm-up: two hogs sharing CPU 0
    // get 20 quanta each; a hog alone on CPU 0 gets 40 without one context switch
    let run = |n: u32| {
        let mut k = kernel(Baseline::Ts);
        k.ts_quantum_ms = Some(10.0);
        let mut c = SimConfig::new("t1-dual", vec![hogs(n)]);
        c.kernel = k;
        c.warmup_ms = 100.0;
        c.duration_ms = 500.0;
        simulate_with(&c, Box::new(Pin(vec![0]))).unwrap()
    };
    let two = run(2);
    for t in &two.threads {
        assert!((19..=21).contains(&t.slices), "shared: {} slices", t.slices);
    }
    let one = run(1);
    let t = &one.threads[0];
    assert_eq!(t.counters.context_switches, 0);
    assert!((39..=41).contains(&t.slices), "alone: {} slices", t.slices);
}
