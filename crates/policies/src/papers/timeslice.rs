//! Timeslice aggregation (paper 5, "longer timeslices for the LLC"): give threads slices
//! long enough to amortise the cold-start misses of refilling the last-level cache after
//! a context switch.
//!
//! - **Static**: one slice (default 45 ms) for every managed thread.
//! - **Dynamic** (the paper's §5.4): each thread's slice is bounded so that it can fill
//!   only `fill_fraction` of the LLC per slice at its measured miss rate — a misses-per-
//!   timeslice (MPTS) target — clamped to `[min_ms, max_ms]`: a thread that streams
//!   through the cache gets a short slice (it would only pollute), one that misses
//!   rarely gets a long one. Miss rates are re-measured every tick from LLC misses over
//!   CPU time, so phase changes move the slice. CFS keeps long-run fairness either way.

use crate::within;
use cachesched_core::{CounterKind, Counters, Ctx, Nanos, Policy, ThreadId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Static or dynamic aggregation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// One slice for all.
    #[default]
    Static,
    /// Per-thread slice from its LLC miss rate.
    Dynamic,
}

/// Configuration of [`Timeslice`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimesliceConfig {
    /// Static or dynamic (default static).
    pub mode: Mode,
    /// Static slice in ms, 0.1–1000 (default 45, the paper's saturation point for a
    /// 16 MB LLC).
    pub slice_ms: f64,
    /// Dynamic: fraction of the LLC a thread should be able to fill per slice, above 0
    /// and at most 1 (default 0.5).
    pub fill_fraction: f64,
    /// Dynamic: shortest slice, ms, 0.1–1000 (default 4, about the CFS default).
    pub min_ms: f64,
    /// Dynamic: longest slice, ms, from `min_ms` to 1000 (default 100).
    pub max_ms: f64,
    /// Dynamic: re-measurement period, ms, 0.1–10,000 (default 20).
    pub tick_ms: f64,
}

impl TimesliceConfig {
    /// Checks every value's range; the error names the key and its range.
    pub fn validate(&self) -> Result<(), String> {
        within("slice_ms", self.slice_ms, 0.1, 1000.0)?;
        within("min_ms", self.min_ms, 0.1, 1000.0)?;
        within("max_ms", self.max_ms, self.min_ms, 1000.0)?;
        within("tick_ms", self.tick_ms, 0.1, 10_000.0)?;
        if !(self.fill_fraction > 0.0 && self.fill_fraction <= 1.0) {
            return Err(format!(
                "fill_fraction must be above 0 and at most 1 (got {})",
                self.fill_fraction
            ));
        }
        Ok(())
    }
}

impl Default for TimesliceConfig {
    fn default() -> Self {
        TimesliceConfig {
            mode: Mode::Static,
            slice_ms: 45.0,
            fill_fraction: 0.5,
            min_ms: 4.0,
            max_ms: 100.0,
            tick_ms: 20.0,
        }
    }
}

/// The timeslice-aggregation policy. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Timeslice {
    config: TimesliceConfig,
    last: BTreeMap<ThreadId, Counters>,
    slices: BTreeMap<ThreadId, Option<Nanos>>,
}

impl Timeslice {
    /// A policy with `config`.
    pub fn new(config: TimesliceConfig) -> Timeslice {
        Timeslice {
            config,
            last: BTreeMap::new(),
            slices: BTreeMap::new(),
        }
    }

    /// The slice the dynamic mode gives a thread that missed `misses` times in `cpu_ns`
    /// of CPU time, with an LLC of `llc_lines` lines: the time to fill the target
    /// fraction of it, clamped (no misses: the longest slice).
    pub fn dynamic_slice(&self, misses: u64, cpu_ns: u64, llc_lines: u64) -> Nanos {
        let fill_ms = if misses == 0 {
            f64::INFINITY
        } else {
            let rate = misses as f64 / cpu_ns.max(1) as f64; // misses per ns
            self.config.fill_fraction * llc_lines as f64 / rate / 1e6
        };
        Nanos::from_ms_f64(fill_ms.clamp(self.config.min_ms, self.config.max_ms))
    }
}

impl Policy for Timeslice {
    fn name(&self) -> &str {
        match self.config.mode {
            Mode::Static => "timeslice",
            Mode::Dynamic => "timeslice-dynamic",
        }
    }

    fn required_counters(&self) -> Vec<CounterKind> {
        match self.config.mode {
            Mode::Static => Vec::new(),
            Mode::Dynamic => vec![CounterKind::LlcMisses, CounterKind::CpuTimeNs],
        }
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        if self.config.mode == Mode::Dynamic {
            ctx.set_tick_period(Some(Nanos::from_ms_f64(self.config.tick_ms)));
        }
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        if self.config.mode == Mode::Static {
            let s = Some(Nanos::from_ms_f64(self.config.slice_ms));
            ctx.set_slice(thread, s);
            self.slices.insert(thread, s);
        } else if let Some(c) = ctx.counters(thread) {
            self.last.insert(thread, c);
        }
    }

    fn thread_exited(&mut self, _ctx: &mut Ctx<'_>, thread: ThreadId) {
        self.last.remove(&thread);
        self.slices.remove(&thread);
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let topo = ctx.topology();
        let Some(llc) = topo.llc() else { return };
        let l = &topo.caches[llc];
        let llc_lines = l.size_bytes / l.line_bytes as u64;
        for t in ctx.threads() {
            let Some(now) = ctx.counters(t) else { continue };
            let before = self.last.insert(t, now).unwrap_or_default();
            let d = now.delta(&before);
            if d.cpu_time_ns < 1_000_000 {
                continue; // too little CPU time since the last look to judge
            }
            let want = Some(self.dynamic_slice(d.llc_misses, d.cpu_time_ns, llc_lines));
            if self.slices.get(&t) != Some(&want) {
                ctx.set_slice(t, want);
                self.slices.insert(t, want);
            }
        }
    }

    cachesched_core::report_stats!(TimesliceStats);
}

cachesched_core::policy_stats! {
    /// Timeslice aggregation's statistics at the end of a run.
    pub struct TimesliceStats for "timeslice" | "timeslice-dynamic" {
        /// Threads the policy gave a slice of its own.
        threads_with_slice: u64 = "threads_with_slice",
        /// The mean of those slices (ms; 0 when none was set).
        mean_slice_ms: f64 = "mean_slice_ms",
    }
}

impl Timeslice {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> TimesliceStats {
        let set: Vec<f64> = self
            .slices
            .values()
            .filter_map(|s| s.map(|n| n.as_ms_f64()))
            .collect();
        let mean = if set.is_empty() {
            0.0
        } else {
            set.iter().sum::<f64>() / set.len() as f64
        };
        TimesliceStats {
            threads_with_slice: set.len() as u64,
            mean_slice_ms: mean,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_slice_fills_the_target_fraction() {
        let p = Timeslice::new(TimesliceConfig {
            mode: Mode::Dynamic,
            ..Default::default()
        });
        // 16 MB LLC of 64 B lines; 10 misses/us → half the LLC (131072 lines) in 13.1 ms
        assert_eq!(
            p.dynamic_slice(10_000, 1_000_000, 262_144),
            Nanos(13_107_200)
        );
        // a streaming thread would fill it in 0.13 ms: the shortest slice
        assert_eq!(
            p.dynamic_slice(1_000_000, 1_000_000, 262_144),
            Nanos::from_ms_f64(4.0)
        );
        // a thread that rarely misses gets the longest
        assert_eq!(
            p.dynamic_slice(10, 1_000_000, 262_144),
            Nanos::from_ms_f64(100.0)
        );
        assert_eq!(
            p.dynamic_slice(0, 1_000_000, 262_144),
            Nanos::from_ms_f64(100.0)
        );
    }
}
