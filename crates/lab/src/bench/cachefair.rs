//! `cachesched bench cachefair`: the cache-fair scheduler's decision cost — per co-run
//! segment, per reconnaissance (Equations 1 and 2 and the stall fits), per calibration
//! (the fair CPI, the quantum or weight, the choice of best-effort thread) — at 10, 100
//! and 1,000 threads, against the 10 ms tick it runs on.
//!
//! The policy runs against a kernel view of synthetic threads (half cache-fair, half
//! best-effort, on t1-dual's two CPUs), fed co-run segments until every cache-fair
//! thread has its data points; the counters then advance so that one tick ends every
//! reconnaissance, and each later tick calibrates every cache-fair thread.

use super::median;
use crate::error::{Error, Result};
use cachesched_core::policy::KernelView;
use cachesched_core::{
    CoRunMember, CoRunSegment, CounterKind, Counters, CpuId, Cpumask, Ctx, Nanos, Policy, SimRng,
    ThreadClass, ThreadId, ThreadInfo, ThreadView, Topology,
};
use cachesched_policies::cachefair::{CacheFair, CacheFairConfig, Mechanism};
use std::time::Instant;

/// Instructions of one calibration interval (and of a reconnaissance phase).
const INTERVAL: u64 = 1_000_000;

/// Synthetic threads: what the policy sees.
struct View {
    now: Nanos,
    topo: Topology,
    threads: Vec<ThreadView>,
    kinds: Vec<CounterKind>,
}

impl KernelView for View {
    fn now(&self) -> Nanos {
        self.now
    }
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn live_threads(&self) -> Vec<ThreadId> {
        self.threads.iter().map(|t| t.id).collect()
    }
    fn thread(&self, t: ThreadId) -> Option<ThreadView> {
        self.threads.get(t.index()).cloned()
    }
    fn available_counters(&self) -> &[CounterKind] {
        &self.kinds
    }
}

impl View {
    fn new(topo: Topology, n: usize) -> View {
        let threads = (0..n)
            .map(|i| ThreadView {
                id: ThreadId(i as u32),
                info: ThreadInfo {
                    name: format!("t{i}"),
                    process: i as u32,
                    class: Some(if i % 2 == 0 {
                        ThreadClass::CacheFair
                    } else {
                        ThreadClass::BestEffort
                    }),
                },
                counters: Counters::default(),
                running_on: None,
                last_cpu: Some(CpuId((i % 2) as u32)),
                runnable: true,
                mask: Cpumask::from_cpus([CpuId(0), CpuId(1)]),
                nice: 0,
            })
            .collect();
        View {
            now: Nanos(0),
            topo,
            threads,
            kinds: Vec::new(),
        }
    }

    /// Counters of `instructions` at a CPI near 2, with misses per cycle `mpc`.
    fn delta(instructions: u64, mpc: f64) -> Counters {
        let cycles = 2 * instructions;
        let misses = (mpc * cycles as f64) as u64;
        Counters {
            instructions,
            cycles,
            llc_misses: misses,
            data_stall_dram_cycles: 100 * misses,
            store_buffer_stall_cycles: instructions / 50,
            cpu_time_ns: cycles,
            ..Default::default()
        }
    }

    /// Every thread runs one more interval.
    fn advance(&mut self, rng: &mut SimRng) {
        for t in &mut self.threads {
            t.counters
                .accumulate(&View::delta(INTERVAL, 0.002 + 0.004 * rng.unit()));
        }
        self.now = Nanos(self.now.0 + 10_000_000);
    }
}

/// Runs `f` on `p` against `view`, discarding the directives.
fn hook(
    view: &View,
    rng: &mut SimRng,
    p: &mut CacheFair,
    f: impl FnOnce(&mut CacheFair, &mut Ctx<'_>),
) {
    let mut out = Vec::new();
    let mut ctx = Ctx::new(view, rng, &mut out);
    f(p, &mut ctx);
}

/// A policy with every thread started and every cache-fair thread given 12 data
/// points; returns the policy and the seconds per co-run segment.
fn prepared(view: &mut View, rng: &mut SimRng, mechanism: Mechanism) -> (CacheFair, f64) {
    let mut p = CacheFair::new(CacheFairConfig {
        recon_instructions: INTERVAL,
        calibration_instructions: INTERVAL,
        min_points: 10,
        min_point_ms: 0.0,
        mechanism,
        ..Default::default()
    });
    hook(view, rng, &mut p, |p, c| p.init(c));
    let n = view.threads.len();
    for i in 0..n {
        hook(view, rng, &mut p, |p, c| {
            p.thread_started(c, ThreadId(i as u32))
        });
    }
    // each cache-fair thread beside one of two best-effort threads in turn, whose miss
    // rates differ, so that every point closes and the line has spread
    let llc = view.topo.llc().unwrap_or(0);
    let (mut calls, mut secs) = (0u64, 0.0);
    for k in 0..12u64 {
        for i in (0..n).step_by(2) {
            let co = (i + 1 + 2 * (k as usize % 2)) % n;
            let co_mpc = if k % 2 == 0 { 0.001 } else { 0.008 };
            let own = View::delta(INTERVAL / 12, 0.002 + 0.3 * co_mpc);
            view.threads[i].counters.accumulate(&own);
            let seg = CoRunSegment {
                cache_level: llc,
                instance: 0,
                start: Nanos(k * 1_000_000),
                end: Nanos((k + 1) * 1_000_000),
                members: vec![
                    CoRunMember {
                        thread: ThreadId(i as u32),
                        cpu: CpuId(0),
                        delta: own,
                    },
                    CoRunMember {
                        thread: ThreadId(co as u32),
                        cpu: CpuId(1),
                        delta: View::delta(INTERVAL / 12, co_mpc),
                    },
                ],
            };
            let t0 = Instant::now();
            hook(view, rng, &mut p, |p, c| p.corun_segment(c, &seg));
            secs += t0.elapsed().as_secs_f64();
            calls += 1;
        }
    }
    (p, secs / calls as f64)
}

/// Times the policy's hooks, `repeat` times each (the median counts), and prints a row
/// per thread count and mechanism.
pub fn run(repeat: usize) -> Result<()> {
    let topo = cachesched_sim::MachineConfig::preset("t1-dual")?.topology()?;
    let tick = 10e-3;
    println!(
        "cache-fair decision cost (median of {} runs); half the threads cache-fair, half\n\
         best-effort; share = cost / the 10 ms tick; per-tick costs are of one tick that\n\
         ends every reconnaissance or calibrates every cache-fair thread\n",
        repeat
    );
    println!(
        "{:>7} {:<9} {:>12} {:>13} {:>13} {:>13} {:>9} {:>13} {:>9}",
        "threads",
        "mechanism",
        "segment us",
        "recon us",
        "recon tick us",
        "calib. us",
        "share",
        "calib tick us",
        "share"
    );
    for n in [10usize, 100, 1000] {
        for (label, mechanism) in [("slice", Mechanism::Slice), ("weight", Mechanism::Weight)] {
            let (mut seg, mut recon, mut calib) = (Vec::new(), Vec::new(), Vec::new());
            for r in 0..repeat.max(1) {
                let mut rng = SimRng::new(r as u64 + 1);
                let mut view = View::new(topo.clone(), n);
                let (mut p, s) = prepared(&mut view, &mut rng, mechanism);
                seg.push(s);
                view.advance(&mut rng);
                let t0 = Instant::now();
                hook(&view, &mut rng, &mut p, |p, c| p.tick(c));
                recon.push(t0.elapsed().as_secs_f64());
                view.advance(&mut rng);
                let t0 = Instant::now();
                hook(&view, &mut rng, &mut p, |p, c| p.tick(c));
                calib.push(t0.elapsed().as_secs_f64());
                // every cache-fair thread went through both steps
                let st = p.statistics();
                if st.recon_phases as usize != n.div_ceil(2)
                    || st.calibrations as usize != n.div_ceil(2)
                {
                    return Err(Error::Bench(format!(
                        "the benchmark did not drive every thread (recon {}, calibrations {})",
                        st.recon_phases, st.calibrations
                    )));
                }
            }
            let fair = n.div_ceil(2) as f64;
            let (seg, recon, calib) = (median(seg), median(recon), median(calib));
            println!(
                "{n:>7} {label:<9} {:>12.2} {:>13.2} {:>13.1} {:>13.2} {:>8.3}% {:>13.1} {:>8.3}%",
                seg * 1e6,
                recon / fair * 1e6,
                recon * 1e6,
                calib / fair * 1e6,
                100.0 * calib / fair / tick,
                calib * 1e6,
                100.0 * calib / tick,
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The benchmark drives what it times: at every thread count and with both
    /// mechanisms, each cache-fair thread finishes its reconnaissance and is
    /// calibrated in the two timed ticks (else it returns an error rather than a
    /// table). Fails if the synthetic view stops feeding the policy what it needs,
    /// say after a change to its minimum of data points, and the benchmark would time
    /// ticks that do nothing.
    #[test]
    fn drives_every_cache_fair_thread() {
        super::run(1).unwrap();
    }
}
