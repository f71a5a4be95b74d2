//! Process-to-LLC aggregation, modelled on Linux's cache-aware scheduling series
//! (SCHED_CACHE: P. Zijlstra's 2025 prototype, then T. Chen and C. Yu, "Cache aware
//! scheduling", v1–v3, 2025–2026): the threads of one process are taken to share data,
//! with no sharing detection, and are aggregated onto the process's *preferred* LLC
//! domain, the one where it has been running most. The series gives aggregation up and
//! falls back to the ordinary load balancing when the preferred LLC would be overloaded,
//! so a process with more runnable threads than an LLC has CPUs is never aggregated.
//!
//! This is a model of the idea for comparison with sharing detection (paper 3), not of
//! the kernel code: every `period_ms` each multi-threaded process, largest first, gets
//! the LLC holding most of its threads (by the CPU each last ran on; ties to the LLC it
//! already has, then the lowest), if its runnable threads fit there beside the processes
//! already aggregated there (at most `overload` threads per CPU); otherwise its threads
//! are released to the kernel's balancing. Processes of one thread are left alone.
//! Where it works and where sharing detection does better: a process whose threads do
//! not all share (two warehouses, two database instances) or that is larger than one
//! LLC gains nothing from aggregation by process.

use cachesched_core::{Cpumask, Ctx, Nanos, Policy, ThreadId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Configuration of [`ProcessLlc`]. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessLlcConfig {
    /// How often preferred LLCs are recomputed, ms (default 10: load balancing at the
    /// LLC level runs every few milliseconds; the series updates a process's occupancy
    /// on a similar scale).
    pub period_ms: f64,
    /// Runnable threads per CPU an LLC may hold from aggregated processes before
    /// aggregation onto it is given up (default 1: no more threads than CPUs).
    pub overload: f64,
}

impl Default for ProcessLlcConfig {
    fn default() -> Self {
        ProcessLlcConfig {
            period_ms: 10.0,
            overload: 1.0,
        }
    }
}

impl ProcessLlcConfig {
    /// Checks ranges; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        crate::within("period_ms", self.period_ms, 0.1, 1e6)?;
        crate::within("overload", self.overload, 0.1, 64.0)
    }
}

/// The process-to-LLC aggregation policy. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct ProcessLlc {
    config: ProcessLlcConfig,
    llcs: Vec<Cpumask>,
    /// The LLC each aggregated process has now.
    preferred: BTreeMap<u32, usize>,
    /// The mask each thread was last given (`None`: all CPUs).
    given: BTreeMap<ThreadId, Option<usize>>,
    /// Masks changed so far.
    moves: u64,
    /// Decisions (per process and period) that gave aggregation up for lack of room.
    given_up: u64,
}

impl ProcessLlc {
    /// A policy with `config`.
    pub fn new(config: ProcessLlcConfig) -> ProcessLlc {
        ProcessLlc {
            config,
            llcs: Vec::new(),
            preferred: BTreeMap::new(),
            given: BTreeMap::new(),
            moves: 0,
            given_up: 0,
        }
    }

    /// The LLC of `cpu`.
    fn llc_of(&self, cpu: cachesched_core::CpuId) -> Option<usize> {
        self.llcs.iter().position(|m| m.contains(cpu))
    }
}

impl Policy for ProcessLlc {
    fn name(&self) -> &str {
        "process-llc"
    }

    fn needs_thread_states(&self) -> bool {
        true
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.llcs = ctx.topology().llc_domains();
        if self.llcs.len() > 1 {
            ctx.set_tick_period(Some(Nanos::from_ms_f64(self.config.period_ms)));
        }
    }

    fn thread_exited(&mut self, _ctx: &mut Ctx<'_>, thread: ThreadId) {
        self.given.remove(&thread);
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        // runnable threads per process, and where each last ran
        let mut procs: BTreeMap<u32, Vec<(ThreadId, Option<usize>)>> = BTreeMap::new();
        for t in ctx.threads() {
            let Some(v) = ctx.thread(t) else { continue };
            if v.runnable {
                let at = v.running_on.or(v.last_cpu).and_then(|c| self.llc_of(c));
                procs.entry(v.info.process).or_default().push((t, at));
            }
        }
        let mut order: Vec<(u32, usize)> = procs
            .iter()
            .filter(|(_, ts)| ts.len() > 1)
            .map(|(&p, ts)| (p, ts.len()))
            .collect();
        // largest first, then by process number
        order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut load = vec![0.0f64; self.llcs.len()];
        let mut decided: BTreeMap<u32, Option<usize>> = BTreeMap::new();
        for (p, n) in order {
            let mut occupancy = vec![0usize; self.llcs.len()];
            for &(_, at) in &procs[&p] {
                if let Some(l) = at {
                    occupancy[l] += 1;
                }
            }
            let current = self.preferred.get(&p).copied();
            let best = (0..self.llcs.len())
                .max_by(|&a, &b| {
                    occupancy[a]
                        .cmp(&occupancy[b])
                        .then((Some(a) == current).cmp(&(Some(b) == current)))
                        .then(b.cmp(&a))
                })
                .expect("at least two LLCs");
            let room = self.config.overload * self.llcs[best].weight() as f64 - load[best];
            let choice = if n as f64 <= room {
                load[best] += n as f64;
                Some(best)
            } else {
                self.given_up += 1;
                None
            };
            decided.insert(p, choice);
        }
        self.preferred = decided
            .iter()
            .filter_map(|(&p, c)| c.map(|l| (p, l)))
            .collect();
        for (p, ts) in &procs {
            let want = decided.get(p).copied().flatten();
            for &(t, _) in ts {
                let had = self.given.get(&t).copied().flatten();
                if had != want || !self.given.contains_key(&t) {
                    if had.is_some() || want.is_some() {
                        ctx.set_mask(t, want.map(|l| self.llcs[l].clone()));
                        self.moves += 1;
                    }
                    self.given.insert(t, want);
                }
            }
        }
    }

    cachesched_core::report_stats!(ProcessLlcStats);
}

cachesched_core::policy_stats! {
    /// The process-per-LLC policy's statistics.
    pub struct ProcessLlcStats for "process-llc" {
        /// Last-level caches processes are aggregated onto.
        llcs: u64 = "llcs",
        /// Processes aggregated on an LLC at the end.
        aggregated_processes: u64 = "aggregated_processes",
        /// Thread masks changed.
        mask_changes: u64 = "mask_changes",
        /// Decisions (per process and period) that gave aggregation up for lack of room.
        given_up: u64 = "given_up",
    }
}

impl ProcessLlc {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> ProcessLlcStats {
        ProcessLlcStats {
            llcs: self.llcs.len() as u64,
            aggregated_processes: self.preferred.len() as u64,
            mask_changes: self.moves,
            given_up: self.given_up,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_core::policy::KernelView;
    use cachesched_core::{
        CounterKind, Counters, CpuId, Directive, SimRng, ThreadInfo, ThreadView, Topology,
    };

    /// Two LLCs of four CPUs; threads given as (process, last CPU).
    struct View {
        topo: Topology,
        threads: Vec<(u32, u32)>,
    }

    impl KernelView for View {
        fn now(&self) -> Nanos {
            Nanos(0)
        }
        fn topology(&self) -> &Topology {
            &self.topo
        }
        fn live_threads(&self) -> Vec<ThreadId> {
            (0..self.threads.len() as u32).map(ThreadId).collect()
        }
        fn thread(&self, t: ThreadId) -> Option<ThreadView> {
            let &(process, cpu) = self.threads.get(t.0 as usize)?;
            Some(ThreadView {
                id: t,
                info: ThreadInfo {
                    name: "t".into(),
                    process,
                    class: None,
                },
                counters: Counters::default(),
                running_on: None,
                last_cpu: Some(CpuId(cpu)),
                runnable: true,
                mask: self.topo.all_cpus(),
                nice: 0,
            })
        }
        fn available_counters(&self) -> &[CounterKind] {
            &[]
        }
    }

    /// The masks a tick gives, per thread (`None`: released), for `threads`.
    fn tick(p: &mut ProcessLlc, threads: &[(u32, u32)]) -> BTreeMap<u32, Option<Cpumask>> {
        let view = View {
            topo: Topology::symmetric("t", 1000, 2, 4, 1, &[]).unwrap(),
            threads: threads.to_vec(),
        };
        let (mut rng, mut out) = (SimRng::new(1), Vec::new());
        let mut ctx = Ctx::new(&view, &mut rng, &mut out);
        if p.llcs.is_empty() {
            p.init(&mut ctx);
        }
        p.tick(&mut ctx);
        out.into_iter()
            .filter_map(|d| match d {
                Directive::SetMask { thread, mask } => Some((thread.0, mask)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn processes_that_fit_go_to_their_llc_and_larger_ones_are_left_to_the_kernel() {
        let mut p = ProcessLlc::new(ProcessLlcConfig::default());
        let chip = |c: u32| {
            Topology::symmetric("t", 1000, 2, 4, 1, &[])
                .unwrap()
                .chip_cpus(c)
        };
        // process 1: 3 threads, two last on chip 1; process 2: 2 threads on chip 0;
        // process 3: 5 threads (more than an LLC's 4 CPUs); process 4: one thread
        let threads = [
            (1, 0),
            (1, 4),
            (1, 5),
            (2, 1),
            (2, 2),
            (3, 0),
            (3, 1),
            (3, 6),
            (3, 7),
            (3, 3),
            (4, 0),
        ];
        let masks = tick(&mut p, &threads);
        for t in 0..3 {
            assert_eq!(
                masks[&t],
                Some(chip(1)),
                "process 1 to the LLC it runs on most"
            );
        }
        for t in 3..5 {
            assert_eq!(masks[&t], Some(chip(0)));
        }
        assert!(
            (5..11).all(|t| !masks.contains_key(&t)),
            "the 5-thread process and the single thread keep the kernel's placement: {masks:?}"
        );
        assert_eq!(p.given_up, 1);
        // next period, same places: nothing changes
        assert!(tick(&mut p, &threads).is_empty());
    }

    #[test]
    fn a_full_llc_gives_aggregation_up_and_releases_the_threads() {
        let mut p = ProcessLlc::new(ProcessLlcConfig::default());
        // processes 1 and 2, 3 threads each, both mostly on chip 0: the first (lower
        // number at equal size) takes chip 0, the second does not fit beside it
        let threads = [(1, 0), (1, 1), (1, 4), (2, 2), (2, 3), (2, 5)];
        let masks = tick(&mut p, &threads);
        assert_eq!(masks.len(), 3, "{masks:?}");
        assert!((0..3).all(|t| masks[&t].as_ref().is_some_and(|m| m.contains(CpuId(0)))));
        // the kernel balanced process 2 onto chip 1: it fits there, and is aggregated
        let moved = [(1, 0), (1, 1), (1, 2), (2, 4), (2, 5), (2, 6)];
        let masks = tick(&mut p, &moved);
        assert_eq!(masks.len(), 3, "{masks:?}");
        assert!((3..6).all(|t| masks[&t].as_ref().is_some_and(|m| m.contains(CpuId(4)))));
    }
}
