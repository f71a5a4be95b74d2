//! Cache affinity (paper 4, "cache affinity on multicore"): keep each thread on a *home*
//! — one core, or the CPUs sharing one last-level cache — so that what it left in the
//! cache is still there when it runs again; move threads between homes only rarely, and
//! only to keep the load balanced.
//!
//! The paper finds L1 affinity irrelevant and L2/LLC affinity worth up to 27% for
//! programs with large working sets, so the default home is an LLC domain. A new thread
//! gets the home with the fewest runnable threads per CPU; every `rebalance_ms` the
//! policy compares homes' runnable threads per CPU and moves at most `max_moves` threads
//! from the busiest to the idlest home when that narrows the gap. Within a home the
//! kernel balances as usual (same cache, cheap).

use cachesched_core::{Cpumask, Ctx, Nanos, Policy, ThreadId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a home is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Home {
    /// The CPUs sharing one last-level-cache instance (one chip where the topology names
    /// no caches).
    #[default]
    Llc,
    /// The hardware contexts of one core.
    Core,
}

/// Configuration of [`Affinity`]. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AffinityConfig {
    /// Home granularity (default `llc`).
    pub home: Home,
    /// How often the load across homes is checked, ms (default 100: rarely, against the
    /// kernel balancer's milliseconds).
    pub rebalance_ms: f64,
    /// Threads moved between homes per check at most (default 1).
    pub max_moves: usize,
}

impl Default for AffinityConfig {
    fn default() -> Self {
        AffinityConfig {
            home: Home::Llc,
            rebalance_ms: 100.0,
            max_moves: 1,
        }
    }
}

impl AffinityConfig {
    /// Checks ranges; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rebalance_ms > 0.0 && self.rebalance_ms.is_finite()) {
            return Err("rebalance_ms must be positive".into());
        }
        Ok(())
    }
}

/// The cache-affinity policy. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Affinity {
    config: AffinityConfig,
    homes: Vec<Cpumask>,
    home_of: BTreeMap<ThreadId, usize>,
    moves: u64,
}

impl Affinity {
    /// A policy with `config`.
    pub fn new(config: AffinityConfig) -> Affinity {
        Affinity {
            config,
            homes: Vec::new(),
            home_of: BTreeMap::new(),
            moves: 0,
        }
    }

    /// Runnable threads homed on each home (threads not yet seen by the kernel count as
    /// runnable).
    fn loads(&self, ctx: &Ctx<'_>) -> Vec<usize> {
        let mut l = vec![0; self.homes.len()];
        for (&t, &h) in &self.home_of {
            if ctx.runnable(t).unwrap_or(true) {
                l[h] += 1;
            }
        }
        l
    }

    /// Runnable threads per CPU of home `h` with `n` threads.
    fn per_cpu(&self, h: usize, n: usize) -> f64 {
        n as f64 / self.homes[h].weight() as f64
    }
}

impl Policy for Affinity {
    fn name(&self) -> &str {
        "affinity"
    }

    fn needs_thread_states(&self) -> bool {
        true
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        let topo = ctx.topology();
        self.homes = match self.config.home {
            Home::Llc => topo.llc_domains(),
            Home::Core => topo.core_domains(),
        };
        if self.homes.len() > 1 {
            ctx.set_tick_period(Some(Nanos::from_ms_f64(self.config.rebalance_ms)));
        }
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        if self.homes.len() < 2 {
            return; // one home: nothing to keep threads apart from
        }
        let loads = self.loads(ctx);
        let h = (0..self.homes.len())
            .min_by(|&a, &b| {
                self.per_cpu(a, loads[a])
                    .total_cmp(&self.per_cpu(b, loads[b]))
                    .then(a.cmp(&b))
            })
            .expect("homes");
        self.home_of.insert(thread, h);
        ctx.set_mask(thread, Some(self.homes[h].clone()));
    }

    fn thread_exited(&mut self, _ctx: &mut Ctx<'_>, thread: ThreadId) {
        self.home_of.remove(&thread);
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        for _ in 0..self.config.max_moves {
            let loads = self.loads(ctx);
            let by_load = |a: &usize, b: &usize| {
                self.per_cpu(*a, loads[*a])
                    .total_cmp(&self.per_cpu(*b, loads[*b]))
                    .then(a.cmp(b))
            };
            let (Some(hi), Some(lo)) = (
                (0..self.homes.len()).max_by(by_load),
                (0..self.homes.len()).min_by(by_load),
            ) else {
                return;
            };
            // move only if the busiest stays at least as loaded as the idlest becomes
            if loads[hi] == 0 || self.per_cpu(hi, loads[hi] - 1) < self.per_cpu(lo, loads[lo] + 1) {
                return;
            }
            // the most recently started runnable thread of the busiest home
            let Some(t) = self
                .home_of
                .iter()
                .filter(|&(&t, &h)| h == hi && ctx.runnable(t) == Some(true))
                .map(|(&t, _)| t)
                .next_back()
            else {
                return;
            };
            self.home_of.insert(t, lo);
            ctx.set_mask(t, Some(self.homes[lo].clone()));
            self.moves += 1;
        }
    }

    cachesched_core::report_stats!(AffinityStats);
}

cachesched_core::policy_stats! {
    /// Cache affinity's statistics over a run.
    pub struct AffinityStats for "affinity" {
        /// Homes: the groups of CPUs behind one cache that threads are kept on.
        homes: u64 = "homes",
        /// Threads moved between homes to balance the load.
        moves: u64 = "moves",
    }
}

impl Affinity {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> AffinityStats {
        AffinityStats {
            homes: self.homes.len() as u64,
            moves: self.moves,
        }
    }
}
