//! A demonstration policy that exercises the whole API end to end: it pins threads to
//! CPUs round robin (masks), optionally gives every thread a fixed slice and a nice
//! value (or one per thread class), asks for a periodic tick and counts the co-run segments it is shown. It is not
//! meant to improve anything.

use cachesched_core::{CoRunSegment, CpuId, Cpumask, Ctx, Nanos, Policy, ThreadClass, ThreadId};
use serde::{Deserialize, Serialize};

/// Configuration of [`Demo`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DemoConfig {
    /// Pin each new thread to one CPU, round robin (default true).
    pub pin: bool,
    /// Slice to give every thread in milliseconds, 0.1–1,000 (default: none, the
    /// baseline's).
    pub slice_ms: Option<f64>,
    /// Tick period in milliseconds, 0.1–10,000 (default 10).
    pub tick_ms: f64,
    /// Nice value to give every thread, -20–19 (default: none, leave it).
    pub nice: Option<i32>,
    /// Nice value to give threads of the cache-fair class instead, -20–19 (default:
    /// none).
    pub cache_fair_nice: Option<i32>,
    /// Nice value to give threads of the best-effort class instead, -20–19 (default:
    /// none).
    pub best_effort_nice: Option<i32>,
}

impl DemoConfig {
    /// Checks every value's range; the error names the key and its range.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(s) = self.slice_ms {
            crate::within("slice_ms", s, 0.1, 1000.0)?;
        }
        crate::within("tick_ms", self.tick_ms, 0.1, 10_000.0)?;
        for (key, v) in [
            ("nice", self.nice),
            ("cache_fair_nice", self.cache_fair_nice),
            ("best_effort_nice", self.best_effort_nice),
        ] {
            if let Some(n) = v {
                crate::within(key, n as f64, -20.0, 19.0)?;
            }
        }
        Ok(())
    }
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            pin: true,
            slice_ms: None,
            tick_ms: 10.0,
            nice: None,
            cache_fair_nice: None,
            best_effort_nice: None,
        }
    }
}

/// The demonstration policy. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Demo {
    config: DemoConfig,
    next_cpu: usize,
    ticks: u64,
    segments: u64,
    segment_ns: u64,
    members: u64,
}

impl Demo {
    /// A demo policy with `config`.
    pub fn new(config: DemoConfig) -> Demo {
        Demo {
            config,
            next_cpu: 0,
            ticks: 0,
            segments: 0,
            segment_ns: 0,
            members: 0,
        }
    }
}

impl Policy for Demo {
    fn name(&self) -> &str {
        "demo"
    }

    fn wants_corun_segments(&self) -> bool {
        true
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        ctx.set_tick_period(Some(Nanos::from_ms_f64(self.config.tick_ms)));
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        if self.config.pin {
            let n = ctx.topology().nr_cpus();
            let cpu = CpuId((self.next_cpu % n) as u32);
            self.next_cpu += 1;
            ctx.set_mask(thread, Some(Cpumask::from_cpus([cpu])));
        }
        if let Some(s) = self.config.slice_ms {
            ctx.set_slice(thread, Some(Nanos::from_ms_f64(s)));
        }
        let class = ctx.thread(thread).and_then(|v| v.info.class);
        let nice = match class {
            Some(ThreadClass::CacheFair) => self.config.cache_fair_nice,
            Some(ThreadClass::BestEffort) => self.config.best_effort_nice,
            None => None,
        }
        .or(self.config.nice);
        if let Some(n) = nice {
            ctx.set_nice(thread, Some(n));
        }
    }

    fn corun_segment(&mut self, _ctx: &mut Ctx<'_>, segment: &CoRunSegment) {
        self.segments += 1;
        self.segment_ns += segment.duration().0;
        self.members += segment.members.len() as u64;
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {
        self.ticks += 1;
    }

    cachesched_core::report_stats!(DemoStats);
}

cachesched_core::policy_stats! {
    /// The demo policy's statistics: what it was shown.
    pub struct DemoStats for "demo" {
        /// Periodic ticks received.
        ticks: u64 = "ticks",
        /// Co-run segments shown.
        corun_segments: u64 = "corun_segments",
        /// The segments' durations, summed (s).
        corun_seconds: f64 = "corun_seconds",
        /// The segments' members, summed.
        corun_members: u64 = "corun_members",
    }
}

impl Demo {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> DemoStats {
        DemoStats {
            ticks: self.ticks,
            corun_segments: self.segments,
            corun_seconds: self.segment_ns as f64 / 1e9,
            corun_members: self.members,
        }
    }
}
