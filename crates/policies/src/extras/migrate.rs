//! Forced migration: the cache-affinity paper's *low affinity* as a policy (paper 4).
//! Every `every_ms` each managed thread is moved to the next core (or LLC domain) in
//! turn, so that whatever it left in its private caches is behind it at the start of
//! every period: the lower bound that affinity scheduling is measured against, the same
//! on the simulated machine and on a real one (`cachesched run --policy
//! migrate:every_ms=2`).
//!
//! At the k-th period the i-th live thread (in thread-id order) gets unit (i + k) mod
//! units: threads keep apart from each other as a balanced placement would, and all of
//! them move every period. With a single unit there is nowhere to move and the policy
//! does nothing.

use crate::within;
use cachesched_core::{Cpumask, Ctx, Nanos, Policy};
use serde::{Deserialize, Serialize};

/// What a thread is moved between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// The hardware contexts of one core: private caches are left behind.
    #[default]
    Core,
    /// The CPUs sharing one last-level-cache instance (one chip where the topology names
    /// no caches): the LLC is left behind too.
    Llc,
}

/// Configuration of [`Migrate`]. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MigrateConfig {
    /// Period between moves, ms, 0.1–10,000 (default 2: the paper's shortest quantum).
    pub every_ms: f64,
    /// Move between cores or between LLC domains (default `core`).
    pub unit: Unit,
}

impl Default for MigrateConfig {
    fn default() -> Self {
        MigrateConfig {
            every_ms: 2.0,
            unit: Unit::Core,
        }
    }
}

impl MigrateConfig {
    /// Checks ranges; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        within("every_ms", self.every_ms, 0.1, 10_000.0)
    }
}

/// The forced-migration policy. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Migrate {
    config: MigrateConfig,
    units: Vec<Cpumask>,
    period: u64,
    moves: u64,
}

impl Migrate {
    /// A policy with `config`.
    pub fn new(config: MigrateConfig) -> Migrate {
        Migrate {
            config,
            units: Vec::new(),
            period: 0,
            moves: 0,
        }
    }

    /// Sets every live thread's mask for the current period.
    fn place(&mut self, ctx: &mut Ctx<'_>) {
        let n = self.units.len() as u64;
        let mut threads = ctx.threads();
        threads.sort();
        for (i, t) in threads.into_iter().enumerate() {
            let u = ((i as u64 + self.period) % n) as usize;
            ctx.set_mask(t, Some(self.units[u].clone()));
            self.moves += 1;
        }
    }
}

impl Policy for Migrate {
    fn name(&self) -> &str {
        "migrate"
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        let topo = ctx.topology();
        self.units = match self.config.unit {
            Unit::Llc => topo.llc_domains(),
            Unit::Core => topo.core_domains(),
        };
        if self.units.len() > 1 {
            ctx.set_tick_period(Some(Nanos::from_ms_f64(self.config.every_ms)));
        }
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, thread: cachesched_core::ThreadId) {
        if self.units.len() > 1 {
            // until the next period, the unit its place in the order gives
            let mut threads = ctx.threads();
            threads.sort();
            let i = threads.iter().position(|&t| t == thread).unwrap_or(0) as u64;
            let u = ((i + self.period) % self.units.len() as u64) as usize;
            ctx.set_mask(thread, Some(self.units[u].clone()));
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if self.units.len() > 1 {
            self.period += 1;
            self.place(ctx);
        }
    }

    cachesched_core::report_stats!(MigrateStats);
}

cachesched_core::policy_stats! {
    /// The migrate policy's statistics.
    pub struct MigrateStats for "migrate" {
        /// Units (cache domains) threads rotate over.
        units: u64 = "units",
        /// Rotation periods passed.
        periods: u64 = "periods",
        /// Thread masks set.
        moves: u64 = "moves",
    }
}

impl Migrate {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> MigrateStats {
        MigrateStats {
            units: self.units.len() as u64,
            periods: self.period,
            moves: self.moves,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_core::policy::KernelView;
    use cachesched_core::{CounterKind, CpuId, Directive, SimRng, ThreadId, ThreadView, Topology};

    struct View(Topology);

    impl KernelView for View {
        fn now(&self) -> Nanos {
            Nanos(0)
        }
        fn topology(&self) -> &Topology {
            &self.0
        }
        fn live_threads(&self) -> Vec<ThreadId> {
            vec![ThreadId(5), ThreadId(2)]
        }
        fn thread(&self, _t: ThreadId) -> Option<ThreadView> {
            None
        }
        fn available_counters(&self) -> &[CounterKind] {
            &[]
        }
    }

    fn masks(d: &[Directive]) -> Vec<(u32, Vec<u32>)> {
        d.iter()
            .filter_map(|d| match d {
                Directive::SetMask {
                    thread,
                    mask: Some(m),
                } => Some((thread.0, m.iter().map(|c: CpuId| c.0).collect())),
                _ => None,
            })
            .collect()
    }

    /// Two threads on two cores swap cores every period, and the tick period is the
    /// configured one; fails if a thread stays put or both land on one core.
    #[test]
    fn threads_swap_cores_every_period() {
        let view = View(Topology::symmetric("t", 1000, 1, 2, 1, &[]).unwrap());
        let mut rng = SimRng::new(1);
        let mut p = Migrate::new(MigrateConfig::default());
        let mut out = Vec::new();
        p.init(&mut Ctx::new(&view, &mut rng, &mut out));
        assert!(out.iter().any(|d| matches!(d,
            Directive::SetTickPeriod { period: Some(n) } if *n == Nanos::from_ms_f64(2.0))));
        let mut placed = Vec::new();
        for _ in 0..3 {
            let mut out = Vec::new();
            p.tick(&mut Ctx::new(&view, &mut rng, &mut out));
            placed.push(masks(&out));
        }
        assert_eq!(placed[0], [(2, vec![1]), (5, vec![0])]);
        assert_eq!(placed[1], [(2, vec![0]), (5, vec![1])]);
        assert_eq!(placed[2], placed[0]);
        assert_eq!(p.moves, 6);
    }

    /// One LLC domain: nowhere to move, no tick, no mask.
    #[test]
    fn one_unit_does_nothing() {
        let view = View(Topology::symmetric("t", 1000, 1, 2, 1, &[]).unwrap());
        let mut rng = SimRng::new(1);
        let mut p = Migrate::new(MigrateConfig {
            unit: Unit::Llc,
            ..Default::default()
        });
        let mut out = Vec::new();
        p.init(&mut Ctx::new(&view, &mut rng, &mut out));
        p.tick(&mut Ctx::new(&view, &mut rng, &mut out));
        assert!(out.is_empty(), "{out:?}");
    }
}
