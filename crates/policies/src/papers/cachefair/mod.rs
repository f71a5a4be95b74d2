//! The cache-fair scheduler (Fedorova, Seltzer, Smith, "Improving performance
//! isolation on chip multiprocessors via an operating system scheduler", paper 2 in
//! `../shared/papers`): give a thread of the *cache-fair* class the CPU time that lets
//! it progress as fast as it would if the shared cache were divided equally among the
//! threads running on it, taking the difference from (or giving it to) threads of the
//! *best-effort* class. Threads of neither class keep the baseline's treatment.
//!
//! Each cache-fair thread goes through two phases (§4):
//!
//! - **Reconnaissance** ([`model`]). Whenever the thread runs with a set of co-runners
//!   on its shared cache, the co-run segments the kernel reports are merged while the
//!   set stays the same (contiguous segments with the same co-runners) and closed into
//!   a data point when it changes: the thread's misses per cycle, its co-runners'
//!   summed misses per cycle, its miss-stall and store-buffer-stall cycles per
//!   instruction. Co-runners are never forced. After `recon_instructions` of the
//!   thread (the paper: 100 M) and at least `min_points` points (the paper: about ten),
//!   the fair miss rate comes from Equations 1 and 2 and the stall times are fitted as
//!   lines of the miss rate; the fallbacks of [`model::FairMethod`] are counted in the
//!   stats. A thread that gets too few points by `max_recon_factor` times the phase
//!   length ends it with what it has.
//! - **Calibration**. Every `calibration_instructions` of the thread (the paper: 10 M)
//!   its CPI and stalls over the interval give its fair CPI
//!   (`CPI − stalls + fair stalls`); the thread's *next* quantum is set so that by its
//!   end the thread has completed the instructions it would have completed at its fair
//!   CPI (§3 steps 3–4, §4.2): over the interval it ran `T` of CPU time and fell short
//!   of its fair count (`cycles / FairCPI`) by `cycles / FairCPI − instructions`,
//!   which at its CPI takes `T · (CPI / FairCPI − 1)` more, so `Q' = Q + T · (CPI /
//!   FairCPI − 1)`, bounded by `max_adjust · Q`. The adjustment is temporary: once the
//!   thread has begun the adjusted quantum, its quantum is the baseline's again; a
//!   calibration before then adds its interval's difference to the armed one. At the
//!   calibration the
//!   difference `Q' − Q` is taken from one best-effort thread's next quantum — when
//!   taking time, the one with the least accumulated penalty; when giving, the one
//!   with the most — and that thread's slice is reset after it has run the adjusted
//!   quantum. A best-effort thread never
//!   loses more than `be_max_penalty` of the CPU time it would have had (default 8%,
//!   the largest slowdown the paper observed), counting what it has been charged and
//!   not yet run; an adjustment no best-effort thread can absorb is cut to what one
//!   can, and counted. (Until 2026-11-24 the quantum was `Q · CPI / FairCPI`, which
//!   made up only one quantum's worth of an interval spanning several, and the
//!   best-effort thread was charged only when the extension began.)
//! - **Repetition**. Reconnaissance is repeated every `repeat_instructions` of the
//!   thread (the paper: 1 B), and on a detected phase change (the paper's future work,
//!   §6; ours): during calibration the thread's shared-cache references per
//!   instruction are averaged over windows of `phase_window_ms` of its CPU time; the
//!   first window after reconnaissance sets the reference, and two consecutive windows
//!   that differ from it by more than `phase_threshold` of it start a new
//!   reconnaissance, undoing the thread's adjustments ([`crate::drift::Drift`], shared
//!   with CASC). References per instruction are set by the thread's code and private
//!   caches, not by its co-runners, so they move with the program's phase and not with
//!   the schedule. (Equation 1's error was tried first and rejected: a thread's miss
//!   rate depends on how long ago a co-runner evicted its data, not only on the
//!   co-runner of the moment — a 96 KB thread beside an L1-resident co-runner misses
//!   seven times Equation 1's prediction just after sharing the L2 with a 1 MB one — so
//!   the error moved whenever the schedule's pattern did, including when the policy's
//!   own adjustments changed it.)
//!
//! # The mechanism and the baseline
//!
//! The paper runs on Solaris's fixed-priority class, where a thread's quantum *is* its
//! share: with equal priorities, threads take turns of one quantum each, so a longer
//! quantum is more CPU time. There ([`Mechanism::Slice`]) this module adjusts slices as
//! described above; `quantum_ms` must be the baseline's quantum for these threads
//! (Solaris FX at priorities 0–9: 200 ms).
//!
//! On a weighted fair class (CFS/EEVDF: Linux, the simulator's `cfs`) a slice changes
//! only how long a thread runs at a time, not its share, which follows its weight. There
//! ([`Mechanism::Weight`]) a calibration sets the cache-fair thread's weight to
//! `CPI / FairCPI` times its own (bounded by `max_adjust`), and lowers one best-effort
//! thread's weight by the same amount, so that the weights on a CPU keep their sum and
//! the best-effort thread's share falls in proportion to its weight: the bound is on
//! weight, at most `be_max_penalty` of its own (the same choice of thread: the one that
//! has lost the least when taking, the most when giving). The adjustment is as
//! temporary as a slice: every calibration replaces it, and the previous one is given
//! back first. Weights are set through nice values, about 25% apart, so a weight
//! between two levels is met on average by alternating them at every tick
//! ([`weight::NiceDither`]). `mechanism = "auto"` (the default) picks slices where the
//! kernel says a slice is a share ([`Ctx::slice_is_share`]) and weights elsewhere, so
//! on Linux it uses weights.
//!
//! Miss rates are misses of the shared (last-level) cache per cycle, as in the paper;
//! miss stalls are the cycles stalled on data and instructions served beyond it
//! (DRAM or another chip).

pub mod model;
pub mod weight;

use crate::drift::Drift;
use crate::within;
use cachesched_core::num::ratio;
use cachesched_core::{
    CoRunSegment, CounterKind, Counters, Ctx, Nanos, Policy, ThreadClass, ThreadId, ThreadView,
};
use model::{FairMethod, FairModel, Point};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use weight::NiceDither;

/// Configuration of [`CacheFair`]. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheFairConfig {
    /// The baseline's quantum for the managed threads, ms, 1–10,000 (default 200,
    /// Solaris FX at priorities 0–9): adjustments scale it.
    pub quantum_ms: f64,
    /// Length of a reconnaissance phase in the thread's instructions, at least 1,000
    /// (default 100,000,000, the paper's).
    pub recon_instructions: u64,
    /// Data points a reconnaissance phase waits for, 1–1,000 (default 10, the paper's
    /// "approximately ten").
    pub min_points: usize,
    /// A reconnaissance phase ends with the points it has after this many times
    /// `recon_instructions`, 1–100 (default 4).
    pub max_recon_factor: f64,
    /// Shortest co-run interval kept as a data point, ms, 0–1,000 (default 1: shorter
    /// ones are dominated by the cold start after a dispatch; the paper keeps every
    /// interval).
    pub min_point_ms: f64,
    /// The co-runners' miss rates (and, for the stall fits, the thread's own) must
    /// spread by at least this fraction of their mean for a line to be fitted, 0–10
    /// (default 0.1).
    pub min_spread: f64,
    /// Calibration period in the thread's instructions, at least 1,000 (default
    /// 10,000,000, the paper's).
    pub calibration_instructions: u64,
    /// Reconnaissance is repeated after this many of the thread's instructions, at
    /// least `recon_instructions` (default 1,000,000,000, the paper's).
    pub repeat_instructions: u64,
    /// Largest adjustment of a quantum, as a fraction of `quantum_ms`, 0–10 (default 1:
    /// a quantum is at most doubled or, when shortened, kept above zero).
    pub max_adjust: f64,
    /// Largest CPU time a best-effort thread may lose, as a fraction of the CPU time it
    /// would have had, 0–1 (default 0.08, the paper's largest observed slowdown).
    pub be_max_penalty: f64,
    /// How often threads' counters are read for calibration, ms, 0.1–1,000 (default
    /// 10, the Solaris clock tick the paper's scheduler runs on).
    pub tick_ms: f64,
    /// How CPU time is given and taken (default `auto`: slices where the kernel's
    /// slices are shares, weights otherwise).
    pub mechanism: Mechanism,
    /// A phase change is a window whose shared-cache references per instruction moved
    /// from the first window's by more than this fraction of it, twice in a row, 0–100
    /// (default 0.2: where L1s write through, as T1's do, every store reaches the L2
    /// whatever the program's footprint, which dilutes a change of L1 misses — a 96 KB
    /// sweep turning into a 1 MB random walk moves t1-dual's references per instruction
    /// by 33%, while a steady thread's windows differ by under 0.3%); 0 disables the
    /// detection.
    pub phase_threshold: f64,
    /// The thread's CPU time averaged into one window of the phase-change detection, ms,
    /// 1–10,000 (default 40, CASC's `drift_window_ms`).
    pub phase_window_ms: f64,
}

/// How [`CacheFair`] gives a cache-fair thread CPU time and takes it from a
/// best-effort thread. See the [module documentation](self#the-mechanism-and-the-baseline).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Slices where the kernel says a slice is a share
    /// ([`Ctx::slice_is_share`]), weights otherwise.
    #[default]
    Auto,
    /// The next quantum's length (the paper's, on Solaris's fixed-priority class).
    Slice,
    /// Weights, through nice values (for weighted fair classes: CFS/EEVDF).
    Weight,
}

impl Default for CacheFairConfig {
    fn default() -> Self {
        CacheFairConfig {
            quantum_ms: 200.0,
            recon_instructions: 100_000_000,
            min_points: 10,
            max_recon_factor: 4.0,
            min_point_ms: 1.0,
            min_spread: 0.1,
            calibration_instructions: 10_000_000,
            repeat_instructions: 1_000_000_000,
            max_adjust: 1.0,
            be_max_penalty: 0.08,
            tick_ms: 10.0,
            mechanism: Mechanism::Auto,
            phase_threshold: 0.2,
            phase_window_ms: 40.0,
        }
    }
}

impl CacheFairConfig {
    /// Checks every value's range; the error names the key and its range.
    pub fn validate(&self) -> Result<(), String> {
        within("quantum_ms", self.quantum_ms, 1.0, 10_000.0)?;
        within("max_recon_factor", self.max_recon_factor, 1.0, 100.0)?;
        within("min_point_ms", self.min_point_ms, 0.0, 1000.0)?;
        within("min_spread", self.min_spread, 0.0, 10.0)?;
        within("max_adjust", self.max_adjust, 0.0, 10.0)?;
        within("be_max_penalty", self.be_max_penalty, 0.0, 1.0)?;
        within("tick_ms", self.tick_ms, 0.1, 1000.0)?;
        within("min_points", self.min_points as f64, 1.0, 1000.0)?;
        within("phase_threshold", self.phase_threshold, 0.0, 100.0)?;
        within("phase_window_ms", self.phase_window_ms, 1.0, 10_000.0)?;
        if self.recon_instructions < 1000 || self.calibration_instructions < 1000 {
            return Err(format!(
                "recon_instructions and calibration_instructions must be at least 1000 (got {} and {})",
                self.recon_instructions, self.calibration_instructions
            ));
        }
        if self.repeat_instructions < self.recon_instructions {
            return Err(format!(
                "repeat_instructions ({}) must be at least recon_instructions ({})",
                self.repeat_instructions, self.recon_instructions
            ));
        }
        Ok(())
    }
}

/// A data point being accumulated: the thread's deltas while its co-runners stayed
/// `key`.
#[derive(Debug, Clone)]
struct Open {
    key: Vec<ThreadId>,
    end: Nanos,
    ns: u64,
    own: Counters,
    /// Per co-runner (aligned with `key`): misses and cycles.
    co: Vec<(u64, u64)>,
}

/// Where a cache-fair thread is.
#[derive(Debug, Clone)]
enum Phase {
    Recon {
        start: Counters,
        points: Vec<Point>,
        open: Option<Open>,
    },
    Calibrate {
        model: FairModel,
        recon_end_instructions: u64,
        last: Counters,
        /// Its shared-cache references per instruction, watched for a phase change.
        drift: Drift,
        /// The current window of the phase-change detection.
        window: Window,
    },
}

/// One window of the phase-change detection: the thread's shared-cache references and
/// instructions over `ns` of its CPU time.
#[derive(Debug, Clone, Default)]
struct Window {
    /// The thread's counters when last seen (at the previous tick).
    seen: Counters,
    refs: u64,
    instructions: u64,
    ns: u64,
}

/// The scheduling of one managed thread's quanta, as seen at ticks.
#[derive(Debug, Clone, Default)]
struct Quanta {
    /// Context switches seen so far.
    switches: u64,
    /// Whether it was running at the last tick.
    running: bool,
    /// The slice adjustment set for its next dispatch, ns.
    pending_ns: i64,
}

impl Quanta {
    /// Brings the view up to date; returns the adjustment of a quantum that began since
    /// the last tick (`None` if none began): the pending one, which the kernel applied
    /// at that dispatch.
    fn observe(&mut self, v: &ThreadView) -> Option<i64> {
        self.step(v.running_on.is_some(), v.counters.context_switches)
    }

    /// [`Quanta::observe`] from whether the thread runs now and its switch-out count.
    /// Every quantum that began since the last tick has either ended (a switch-out) or
    /// runs now, and the quantum running at the last tick, if any, is not one of them:
    /// `switch-outs + running now − running then` began. A quantum shorter than the
    /// tick can begin and end between two ticks; it counts too. (Until 2026-11-24 only
    /// a quantum running at the tick was seen, so a shortened one — down to 1 ms — was
    /// often missed and stayed short for quantum after quantum.)
    fn step(&mut self, running: bool, switches: u64) -> Option<i64> {
        let out = switches.saturating_sub(self.switches);
        let began = out + u64::from(running) > u64::from(self.running);
        self.switches = switches;
        self.running = running;
        began.then_some(self.pending_ns)
    }
}

/// A cache-fair thread.
#[derive(Debug, Clone)]
struct FairThread {
    phase: Phase,
    quanta: Quanta,
    /// Its weight (the weight mechanism).
    dither: NiceDither,
    /// The best-effort thread whose weight pays for its current adjustment, and the
    /// adjustment (weight units; negative: given back).
    lent: Option<(ThreadId, f64)>,
    /// The best-effort threads whose next quanta were shortened (negative: lengthened)
    /// for its armed extension, and by how much, ns, until the extension runs.
    reserved: Vec<(ThreadId, i64)>,
}

/// A best-effort thread.
#[derive(Debug, Clone, Default)]
struct BestEffort {
    quanta: Quanta,
    /// CPU time taken from it, net of time given, ns (negative: it gained).
    penalty_ns: i64,
    /// Its CPU time when it was first seen, ns.
    cpu_start_ns: u64,
    /// Its CPU time at the last tick, ns.
    cpu_ns: u64,
    /// Its weight (the weight mechanism).
    dither: NiceDither,
    /// Weight taken from it for cache-fair threads now, net of weight given
    /// (negative: it gained).
    absorbed: f64,
}

/// Counters the stats report.
#[derive(Debug, Clone, Default)]
struct Stats {
    recon_phases: u64,
    recon_without_points: u64,
    fallback: BTreeMap<&'static str, u64>,
    extrapolated: u64,
    stall_fallbacks: u64,
    calibrations: u64,
    adjusted_up: u64,
    adjusted_down: u64,
    capped: u64,
    no_best_effort: u64,
    given_ns: i64,
    taken_from_be_ns: i64,
    fair_mpc: BTreeMap<ThreadId, f64>,
    fair_method: BTreeMap<ThreadId, FairMethod>,
    /// Per thread, its instruction count when its first reconnaissance ended.
    recon_end: BTreeMap<ThreadId, u64>,
    /// Data points of every finished reconnaissance phase, summed.
    recon_points: u64,
    /// Reconnaissance phases started on a detected phase change.
    phase_changes: u64,
    /// Largest window change the phase-change detection saw.
    max_phase_drift: f64,
}

/// The cache-fair scheduler. See the [module documentation](self).
pub struct CacheFair {
    config: CacheFairConfig,
    llc_level: Option<usize>,
    /// Co-runners a thread has on its cache when all its CPUs are busy (n of
    /// Equation 2).
    n: usize,
    fair: BTreeMap<ThreadId, FairThread>,
    best_effort: BTreeMap<ThreadId, BestEffort>,
    /// Whether CPU time moves through weights rather than slices.
    weights: bool,
    stats: Stats,
}

impl CacheFair {
    /// A cache-fair scheduler with `config` (validated by the caller).
    pub fn new(config: CacheFairConfig) -> CacheFair {
        CacheFair {
            config,
            llc_level: None,
            n: 1,
            fair: BTreeMap::new(),
            best_effort: BTreeMap::new(),
            weights: false,
            stats: Stats::default(),
        }
    }

    fn quantum_ns(&self) -> i64 {
        Nanos::from_ms_f64(self.config.quantum_ms).0 as i64
    }

    fn min_point_ns(&self) -> u64 {
        Nanos::from_ms_f64(self.config.min_point_ms).0
    }

    /// Ends thread `t`'s reconnaissance if it has run long enough.
    fn maybe_end_recon(&mut self, t: ThreadId, now: &Counters) {
        let cfg = &self.config;
        let Some(ft) = self.fair.get(&t) else { return };
        let Phase::Recon { start, points, .. } = &ft.phase else {
            return;
        };
        let ran = now.instructions.saturating_sub(start.instructions) as f64;
        let enough = ran >= cfg.recon_instructions as f64 && points.len() >= cfg.min_points;
        if !enough && ran < cfg.max_recon_factor * cfg.recon_instructions as f64 {
            return;
        }
        let Some(ft) = self.fair.get_mut(&t) else {
            return;
        };
        let Phase::Recon { points, open, .. } = std::mem::replace(
            &mut ft.phase,
            Phase::Recon {
                start: *now,
                points: Vec::new(),
                open: None,
            },
        ) else {
            return;
        };
        let mut points = points;
        if let Some(o) = open {
            close_into(o, self.min_point_ns(), &mut points);
        }
        let Some(model) = FairModel::from_points(&points, self.n, self.config.min_spread) else {
            // no point at all: a new phase starts from here
            self.stats.recon_without_points += 1;
            return;
        };
        self.stats.recon_phases += 1;
        self.stats.recon_points += points.len() as u64;
        if model.fair.method.is_fallback() {
            *self
                .stats
                .fallback
                .entry(model.fair.method.name())
                .or_default() += 1;
        }
        self.stats.extrapolated += model.fair.extrapolated as u64;
        self.stats.stall_fallbacks +=
            model.mem_stall.is_fallback() as u64 + model.sb_stall.is_fallback() as u64;
        self.stats.fair_mpc.insert(t, model.fair.mpc);
        self.stats.recon_end.entry(t).or_insert(now.instructions);
        self.stats.fair_method.insert(t, model.fair.method);
        if let Some(ft) = self.fair.get_mut(&t) {
            ft.phase = Phase::Calibrate {
                model,
                recon_end_instructions: now.instructions,
                last: *now,
                drift: Drift::default(),
                window: Window {
                    seen: *now,
                    ..Window::default()
                },
            };
        }
    }

    /// One calibration of thread `t` over the interval since its last one.
    fn calibrate(&mut self, ctx: &mut Ctx<'_>, t: ThreadId, now: &Counters) {
        let q = self.quantum_ns();
        let Some(ft) = self.fair.get_mut(&t) else {
            return;
        };
        let Phase::Calibrate {
            model,
            recon_end_instructions,
            last,
            ..
        } = &mut ft.phase
        else {
            return;
        };
        let d = now.delta(last);
        if d.instructions < self.config.calibration_instructions {
            return;
        }
        *last = *now;
        if now.instructions.saturating_sub(*recon_end_instructions)
            >= self.config.repeat_instructions
        {
            self.restart_recon(ctx, t, now);
            return;
        }
        self.stats.calibrations += 1;
        let cpi = d.cpi();
        let stall = ratio(
            miss_stall_cycles(&d) + d.store_buffer_stall_cycles,
            d.instructions,
        );
        let fair_cpi = model.fair_cpi(cpi, stall);
        if self.weights {
            self.adjust_weight(t, cpi / fair_cpi);
            return;
        }
        // an extension that has not run yet still has its interval to make up
        let armed = self.fair.get(&t).map_or(0, |ft| ft.quanta.pending_ns);
        // never shorter than 1 ms
        let (lo, hi) = (
            -(self.config.max_adjust * q as f64).min(q as f64 - 1e6),
            self.config.max_adjust * q as f64,
        );
        // the CPU time that makes up the interval's difference between its fair and its
        // actual instruction count (cycles / FairCPI − instructions, at its CPI), in
        // the next quantum (§3 steps 3-4, §4.2)
        let delta = (armed as f64 + d.cpu_time_ns as f64 * (cpi / fair_cpi - 1.0)).clamp(lo, hi)
            - armed as f64;
        // a best-effort thread must be able to absorb it; its quantum is adjusted now
        let chosen = self.choose_best_effort(delta);
        let delta = self.absorbable(chosen, delta) as i64;
        if let (Some((b, _)), true) = (chosen, delta != 0) {
            self.arm_best_effort(ctx, b, delta);
            if let Some(ft) = self.fair.get_mut(&t) {
                ft.reserved.push((b, delta));
            }
        }
        let total = armed + delta;
        if let Some(ft) = self.fair.get_mut(&t) {
            ft.quanta.pending_ns = total;
        }
        ctx.set_slice(t, (total != 0).then(|| Nanos((q + total) as u64)));
    }

    /// Starts a new reconnaissance of thread `t` (counters `now`), undoing its
    /// adjustments: none is made while it runs.
    fn restart_recon(&mut self, ctx: &mut Ctx<'_>, t: ThreadId, now: &Counters) {
        let Some(ft) = self.fair.get_mut(&t) else {
            return;
        };
        ft.phase = Phase::Recon {
            start: *now,
            points: Vec::new(),
            open: None,
        };
        if self.weights {
            self.adjust_weight(t, 1.0);
        } else {
            ft.quanta.pending_ns = 0;
            let reserved = std::mem::take(&mut ft.reserved);
            ctx.set_slice(t, None);
            for (b, x) in reserved {
                self.arm_best_effort(ctx, b, -x);
            }
        }
    }

    /// Watches calibrating thread `t`'s counters (`now`) for a phase change; true when
    /// one is detected.
    fn phase_changed(&mut self, t: ThreadId, now: &Counters) -> bool {
        let (threshold, window_ms) = (self.config.phase_threshold, self.config.phase_window_ms);
        if threshold <= 0.0 {
            return false;
        }
        let Some(FairThread {
            phase: Phase::Calibrate { drift, window, .. },
            ..
        }) = self.fair.get_mut(&t)
        else {
            return false;
        };
        let delta = now.delta(&window.seen);
        window.seen = *now;
        window.refs += delta.llc_refs;
        window.instructions += delta.instructions;
        window.ns += delta.cpu_time_ns;
        if (window.ns as f64) < window_ms * 1e6 || window.instructions == 0 {
            return false;
        }
        let rate = ratio(window.refs, window.instructions);
        *window = Window {
            seen: *now,
            ..Window::default()
        };
        let Some(moved) = drift.observe_fraction(rate, 1.0, 1.0) else {
            return false;
        };
        let changed = drift.strike(moved, threshold);
        self.stats.max_phase_drift = self.stats.max_phase_drift.max(moved.abs());
        self.stats.phase_changes += changed as u64;
        changed
    }

    /// Thread `t`'s reconnaissance or calibration, with its counters now.
    fn advance(&mut self, ctx: &mut Ctx<'_>, t: ThreadId, now: &Counters) {
        match self
            .fair
            .get(&t)
            .map(|ft| matches!(ft.phase, Phase::Recon { .. }))
        {
            Some(true) => self.maybe_end_recon(t, now),
            Some(false) if self.phase_changed(t, now) => self.restart_recon(ctx, t, now),
            Some(false) => self.calibrate(ctx, t, now),
            None => {}
        }
    }

    /// A tick of the weight mechanism: reconnaissance and calibrations, then every
    /// managed thread's nice value one step towards its weight.
    fn tick_weights(&mut self, ctx: &mut Ctx<'_>) {
        let fair: Vec<ThreadId> = self.fair.keys().copied().collect();
        for &t in &fair {
            if let Some(c) = ctx.counters(t) {
                self.advance(ctx, t, &c);
            }
        }
        let now = ctx.now();
        let dithers = self
            .fair
            .iter_mut()
            .map(|(&t, ft)| (t, &mut ft.dither))
            .chain(
                self.best_effort
                    .iter_mut()
                    .map(|(&b, s)| (b, &mut s.dither)),
            );
        for (t, d) in dithers {
            if let Some(n) = d.step(now) {
                ctx.set_nice(t, (n != d.base_nice()).then_some(n));
            }
        }
    }

    /// Adds `dw` to the weight taken from best-effort thread `b` (negative: gives it
    /// back) and retargets its weight.
    fn absorb(&mut self, b: ThreadId, dw: f64) {
        if let Some(s) = self.best_effort.get_mut(&b) {
            s.absorbed += dw;
            if s.absorbed.abs() < 1e-6 {
                s.absorbed = 0.0;
            }
            let w = s.dither.base_weight() - s.absorbed;
            s.dither.set_target(w);
        }
    }

    /// The weight mechanism's calibration: thread `t` should progress `speedup` times as
    /// fast as it does (`CPI / FairCPI`), so its weight becomes `speedup` times its own,
    /// and one best-effort thread's weight pays the difference (within
    /// `be_max_penalty` of its own weight: with the weights on a CPU summing to the
    /// same, its share falls in proportion).
    fn adjust_weight(&mut self, t: ThreadId, speedup: f64) {
        let Some(ft) = self.fair.get_mut(&t) else {
            return;
        };
        let lent = ft.lent.take();
        let w0 = ft.dither.base_weight();
        if let Some((b, dw)) = lent {
            self.absorb(b, -dw);
        }
        let m = self.config.max_adjust;
        let mut dw = w0 * (speedup.clamp(1.0 / (1.0 + m), 1.0 + m) - 1.0);
        if dw.abs() < 1e-3 * w0 {
            dw = 0.0;
        }
        // taking: the one that lost the smallest share of its weight; giving: the largest
        let frac = |s: &BestEffort| s.absorbed / s.dither.base_weight();
        let chosen = self
            .best_effort
            .iter()
            .map(|(&b, s)| (b, frac(s), s))
            .reduce(|a, c| {
                let better = if dw >= 0.0 { c.1 < a.1 } else { c.1 > a.1 };
                if better {
                    c
                } else {
                    a
                }
            })
            .map(|(b, _, s)| {
                let room = self.config.be_max_penalty * s.dither.base_weight() - s.absorbed;
                (b, room.max(0.0))
            });
        let dw = self.absorbable(chosen, dw);
        let lent = chosen.filter(|_| dw != 0.0).map(|(b, _)| (b, dw));
        if let Some((b, dw)) = lent {
            self.absorb(b, dw);
        }
        if let Some(ft) = self.fair.get_mut(&t) {
            ft.dither.set_target(w0 + dw);
            ft.lent = lent;
        }
    }

    /// How much of `x` (CPU time or weight for a cache-fair thread; negative: given
    /// back) the `chosen` best-effort thread (and its room) can absorb: nothing without
    /// one, at most its room when taking. Counted in the stats.
    fn absorbable(&mut self, chosen: Option<(ThreadId, f64)>, x: f64) -> f64 {
        let x = match chosen {
            None if x != 0.0 => {
                self.stats.no_best_effort += 1;
                0.0
            }
            Some((_, room)) if x > room => {
                self.stats.capped += 1;
                room
            }
            _ => x,
        };
        if x >= 1.0 {
            self.stats.adjusted_up += 1;
        } else if x <= -1.0 {
            self.stats.adjusted_down += 1;
        }
        x
    }

    /// The best-effort thread to absorb `delta` ns (positive: time taken from it) —
    /// when taking, the one with the least penalty; when giving, the one with the
    /// most — and how much it can absorb, ns.
    fn choose_best_effort(&self, delta: f64) -> Option<(ThreadId, f64)> {
        let max = self.config.be_max_penalty;
        let candidates = self.best_effort.iter().map(|(&b, s)| {
            // penalty including what it has been armed with and not yet run
            let penalty = s.penalty_ns - s.quanta.pending_ns;
            // its CPU time as of this tick (read once per tick, not per calibration)
            let cpu = s.cpu_ns.saturating_sub(s.cpu_start_ns) as f64;
            // (penalty + x) / (cpu + penalty + x) <= max, with cpu + penalty what it
            // would have had
            let room = (max * (cpu + penalty as f64) - penalty as f64) / (1.0 - max).max(1e-9);
            (b, penalty, room.max(0.0))
        });
        if delta >= 0.0 {
            candidates
                .min_by_key(|&(b, p, _)| (p, b))
                .map(|(b, _, room)| (b, room))
        } else {
            candidates
                .max_by_key(|&(b, p, _)| (p, std::cmp::Reverse(b)))
                .map(|(b, _, _)| (b, f64::INFINITY))
        }
    }

    /// Shortens best-effort thread `b`'s next quantum by `take` ns more (negative:
    /// lengthens it), for a cache-fair thread's extension.
    fn arm_best_effort(&mut self, ctx: &mut Ctx<'_>, b: ThreadId, take: i64) {
        let q = self.quantum_ns();
        if let Some(s) = self.best_effort.get_mut(&b) {
            s.quanta.pending_ns -= take;
            let p = s.quanta.pending_ns;
            ctx.set_slice(b, (p != 0).then(|| Nanos((q + p).max(1_000_000) as u64)));
        }
    }
}

/// Cycles stalled on misses of the shared cache: data and instructions served beyond
/// it.
fn miss_stall_cycles(c: &Counters) -> u64 {
    c.data_stall_dram_cycles + c.instr_stall_dram_cycles + c.data_stall_remote_cycles
}

impl Policy for CacheFair {
    fn name(&self) -> &str {
        "cachefair"
    }

    fn required_counters(&self) -> Vec<CounterKind> {
        vec![
            CounterKind::Instructions,
            CounterKind::Cycles,
            CounterKind::LlcRefs,
            CounterKind::LlcMisses,
            CounterKind::DataStallDramCycles,
            CounterKind::InstrStallDramCycles,
            CounterKind::StoreBufferStallCycles,
            CounterKind::ContextSwitches,
            CounterKind::CpuTimeNs,
        ]
    }

    fn needs_thread_states(&self) -> bool {
        true
    }

    fn wants_corun_segments(&self) -> bool {
        true
    }

    fn requires_corun_segments(&self) -> bool {
        true
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        let topo = ctx.topology();
        self.llc_level = topo.llc();
        if let Some(l) = self.llc_level {
            self.n = topo.caches[l]
                .instances
                .iter()
                .map(|i| i.weight())
                .max()
                .unwrap_or(1)
                .saturating_sub(1)
                .max(1);
        }
        self.weights = match self.config.mechanism {
            Mechanism::Auto => !ctx.slice_is_share(),
            Mechanism::Slice => false,
            Mechanism::Weight => true,
        };
        ctx.set_tick_period(Some(Nanos::from_ms_f64(self.config.tick_ms)));
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
        let Some(v) = ctx.thread(t) else { return };
        match v.info.class {
            Some(ThreadClass::CacheFair) => {
                self.fair.insert(
                    t,
                    FairThread {
                        phase: Phase::Recon {
                            start: v.counters,
                            points: Vec::new(),
                            open: None,
                        },
                        quanta: Quanta::default(),
                        dither: NiceDither::new(v.nice),
                        lent: None,
                        reserved: Vec::new(),
                    },
                );
            }
            Some(ThreadClass::BestEffort) => {
                self.best_effort.insert(
                    t,
                    BestEffort {
                        cpu_start_ns: v.counters.cpu_time_ns,
                        cpu_ns: v.counters.cpu_time_ns,
                        dither: NiceDither::new(v.nice),
                        ..Default::default()
                    },
                );
            }
            None => {}
        }
    }

    fn thread_exited(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
        if let Some(ft) = self.fair.remove(&t) {
            if let Some((b, dw)) = ft.lent {
                self.absorb(b, -dw);
            }
            for (b, x) in ft.reserved {
                self.arm_best_effort(ctx, b, -x);
            }
        }
        self.best_effort.remove(&t);
    }

    fn corun_segment(&mut self, _ctx: &mut Ctx<'_>, seg: &CoRunSegment) {
        if Some(seg.cache_level) != self.llc_level {
            return;
        }
        let min_point_ns = self.min_point_ns();
        for m in &seg.members {
            let Some(ft) = self.fair.get_mut(&m.thread) else {
                continue;
            };
            let Phase::Recon { points, open, .. } = &mut ft.phase else {
                continue;
            };
            let mut co: Vec<(ThreadId, u64, u64)> = seg
                .members
                .iter()
                .filter(|o| o.thread != m.thread)
                .map(|o| (o.thread, o.delta.llc_misses, o.delta.cycles))
                .collect();
            co.sort_by_key(|c| c.0);
            let key: Vec<ThreadId> = co.iter().map(|c| c.0).collect();
            let continues = open
                .as_ref()
                .is_some_and(|o| o.key == key && o.end == seg.start);
            if !continues {
                if let Some(o) = open.take() {
                    close_into(o, min_point_ns, points);
                }
                *open = Some(Open {
                    key,
                    end: seg.start,
                    ns: 0,
                    own: Counters::default(),
                    co: vec![(0, 0); co.len()],
                });
            }
            if let Some(o) = open.as_mut() {
                o.end = seg.end;
                o.ns += seg.duration().0;
                o.own.accumulate(&m.delta);
                for (slot, c) in o.co.iter_mut().zip(&co) {
                    slot.0 += c.1;
                    slot.1 += c.2;
                }
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if self.weights {
            self.tick_weights(ctx);
            return;
        }
        let be: Vec<ThreadId> = self.best_effort.keys().copied().collect();
        for b in be {
            let Some(v) = ctx.thread(b) else { continue };
            let Some(s) = self.best_effort.get_mut(&b) else {
                continue;
            };
            s.cpu_ns = v.counters.cpu_time_ns;
            // it began its adjusted quantum: the penalty is real, the next quantum is
            // the baseline's again (observed before the cache-fair threads arm new
            // adjustments, which apply from its next dispatch)
            if let Some(adj) = s.quanta.observe(&v).filter(|&a| a != 0) {
                s.penalty_ns -= adj;
                s.quanta.pending_ns = 0;
                self.stats.taken_from_be_ns -= adj;
                ctx.set_slice(b, None);
            }
        }
        let fair: Vec<ThreadId> = self.fair.keys().copied().collect();
        for t in fair {
            let Some(v) = ctx.thread(t) else { continue };
            let began = self.fair.get_mut(&t).and_then(|ft| ft.quanta.observe(&v));
            if let Some(adj) = began.filter(|&a| a != 0) {
                // its extension runs now (the best-effort thread was charged when it was
                // armed): later quanta are the baseline's again
                self.stats.given_ns += adj;
                if let Some(ft) = self.fair.get_mut(&t) {
                    ft.quanta.pending_ns = 0;
                    ft.reserved.clear();
                }
                ctx.set_slice(t, None);
            }
            self.advance(ctx, t, &v.counters);
        }
    }

    cachesched_core::report_stats!(CacheFairStats);
}

cachesched_core::policy_stats! {
    /// The cache-fair scheduler's statistics over a run.
    pub struct CacheFairStats for "cachefair" {
        /// Reconnaissance phases that ended with a fair-miss-rate model.
        recon_phases: u64 = "recon_phases",
        /// Reconnaissance phases that ended without a single data point (restarted).
        recon_without_points: u64 = "recon_without_points",
        /// Data points (co-run segments) of every finished reconnaissance phase, summed.
        recon_points: u64 = "recon_points",
        /// Fair miss rates read off the regression line outside the measured range.
        extrapolated: u64 = "extrapolated",
        /// Stall-time models (memory or store-buffer) that fell back to a default.
        stall_fallbacks: u64 = "stall_fallbacks",
        /// Calibration steps (a fair thread's quantum adjusted from its fair CPI).
        calibrations: u64 = "calibrations",
        /// Adjustments that gave a fair thread more CPU time.
        adjusted_up: u64 = "adjusted_up",
        /// Adjustments that took CPU time from a fair thread.
        adjusted_down: u64 = "adjusted_down",
        /// Adjustments capped at what the chosen best-effort thread could give.
        capped: u64 = "capped",
        /// Adjustments dropped for want of a best-effort thread.
        no_best_effort: u64 = "no_best_effort",
        /// CPU time given to fair threads as quantum extensions (ms).
        given_ms: f64 = "given_ms",
        /// CPU time taken from best-effort threads (ms).
        taken_from_be_ms: f64 = "taken_from_be_ms",
        /// Whether CPU time moves through weights (nice values) rather than slices.
        weights: bool = "weights",
        /// Reconnaissance phases started on a detected phase change.
        phase_changes: u64 = "phase_changes",
        /// The largest window change the phase-change detection saw.
        max_phase_drift: f64 = "max_phase_drift",
        /// Fair-miss-rate estimates that fell back from the regression, by reason
        /// (`no_spread`, `negative_slope`, `no_crossing`).
        fallback: BTreeMap<String, u64> = "fallback_",
        /// Each fair thread's estimated fair miss rate (LLC misses per cycle), by thread id.
        fair_mpc: BTreeMap<u32, f64> = "fair_mpc.",
        /// Whether each fair thread's last estimate was a fallback, by thread id.
        fair_fallback: BTreeMap<u32, bool> = "fair_fallback.",
        /// Each fair thread's instruction count when its first reconnaissance ended.
        recon_end_instructions: BTreeMap<u32, u64> = "recon_end_instructions.",
        /// CPU time each best-effort thread gave up (ms), by thread id.
        be_penalty_ms: BTreeMap<u32, f64> = "be_penalty_ms.",
        /// The share of each best-effort thread's weight taken (%; weights only).
        be_weight_taken_pct: BTreeMap<u32, f64> = "be_weight_taken_pct.",
    }
}

impl CacheFair {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> CacheFairStats {
        let s = &self.stats;
        CacheFairStats {
            recon_phases: s.recon_phases,
            recon_without_points: s.recon_without_points,
            recon_points: s.recon_points,
            extrapolated: s.extrapolated,
            stall_fallbacks: s.stall_fallbacks,
            calibrations: s.calibrations,
            adjusted_up: s.adjusted_up,
            adjusted_down: s.adjusted_down,
            capped: s.capped,
            no_best_effort: s.no_best_effort,
            given_ms: s.given_ns as f64 / 1e6,
            taken_from_be_ms: s.taken_from_be_ns as f64 / 1e6,
            weights: self.weights,
            phase_changes: s.phase_changes,
            max_phase_drift: s.max_phase_drift,
            fallback: s
                .fallback
                .iter()
                .map(|(k, n)| (k.to_string(), *n))
                .collect(),
            fair_mpc: s.fair_mpc.iter().map(|(t, x)| (t.0, *x)).collect(),
            fair_fallback: s
                .fair_method
                .iter()
                .map(|(t, m)| (t.0, m.is_fallback()))
                .collect(),
            recon_end_instructions: s.recon_end.iter().map(|(t, n)| (t.0, *n)).collect(),
            be_penalty_ms: self
                .best_effort
                .iter()
                .map(|(b, st)| (b.0, st.penalty_ns as f64 / 1e6))
                .collect(),
            be_weight_taken_pct: if self.weights {
                self.best_effort
                    .iter()
                    .map(|(b, st)| (b.0, 100.0 * st.absorbed / st.dither.base_weight()))
                    .collect()
            } else {
                BTreeMap::new()
            },
        }
    }
}

/// Closes `open` into a data point of `points` if it lasted at least `min_ns`.
fn close_into(open: Open, min_ns: u64, points: &mut Vec<Point>) {
    if open.ns < min_ns || open.own.cycles == 0 {
        return;
    }
    let own = &open.own;
    points.push(Point {
        own_mpc: ratio(own.llc_misses, own.cycles),
        corunners_mpc: open.co.iter().map(|&(m, c)| ratio(m, c)).sum(),
        mem_stall_cpi: ratio(miss_stall_cycles(own), own.instructions),
        sb_stall_cpi: ratio(own.store_buffer_stall_cycles, own.instructions),
        cycles: own.cycles as f64,
    });
}

#[cfg(test)]
mod tests {
    use super::Quanta;

    /// A quantum is seen to begin when it is running at a tick after a switch or after
    /// not running, and when it began and ended between two ticks; not while the same
    /// quantum runs on, nor when the one seen at the last tick ends. Fails if a quantum
    /// shorter than the tick goes unseen (its adjustment would then stay armed).
    #[test]
    fn quanta_are_seen_to_begin_even_between_ticks() {
        let mut q = Quanta {
            pending_ns: -5,
            ..Quanta::default()
        };
        // (running now, switch-outs so far) -> began since the last tick
        let steps = [
            ((false, 0), false), // not yet run
            ((true, 0), true),   // dispatched
            ((true, 0), false),  // the same quantum runs on
            ((false, 1), false), // it ended
            ((false, 2), true),  // a short one began and ended between ticks
            ((false, 2), false), // waiting
            ((true, 3), true),   // one ended, another runs
            ((true, 4), true),   // that one ended, a new one runs
            ((false, 6), true),  // it ended, a short one began and ended
        ];
        for (i, ((running, switches), began)) in steps.into_iter().enumerate() {
            let seen = q.step(running, switches);
            assert_eq!(seen.is_some(), began, "step {i}");
            if began {
                assert_eq!(seen, Some(-5));
            }
        }
    }
}
