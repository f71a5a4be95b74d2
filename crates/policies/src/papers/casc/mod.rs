//! CASC: cache-aware co-scheduling by partial-cache miss rates (Fedorova et al.,
//! paper 1 in `../shared/papers`).
//!
//! CASC scores each thread by its *partial-cache miss rate* (PCMR): the miss rate it
//! would have with 1/n of the shared cache, estimated from the miss rates of groups of
//! threads observed co-running (the group rate is taken to be the mean of its members'
//! PCMRs). It then gives each CPU a MAX_PCMR and lets a thread run only where its PCMR is
//! below that bound, so cache-greedy threads end up sharing a few CPUs and never all run
//! at once ([`bucket`]).
//!
//! What this module implements, per shared last-level cache (one domain per LLC
//! instance; on machines with several, threads are spread over the domains on arrival
//! and kept in theirs):
//!
//! - **Initial measurement** (§4.2.2.1): the first n + 1 threads (n CPUs on the cache)
//!   are boosted above all others; each co-run segment in which exactly n of them run is
//!   a row of the "all but one" matrix. Rows are orchestrated with masks: two
//!   participants share the designated CPU and take turns, the others have a CPU each;
//!   when both rows of the pair are measured, the two least-measured rows pair up next
//!   (per-CPU run queues would otherwise keep excluding the same two threads). A row's miss rate is the duration-weighted mean
//!   over its intervals; intervals shorter than `min_interval_ms` are discarded (cold
//!   start), and a thread counts only after `startup_delay_ms` of CPU time. When every row
//!   has `min_runlength_ms`, the system is solved ([`solve`]: LU, or least squares when
//!   rows repeat or the system is ill conditioned) and the boosts end.
//! - **Secondary measurement** (§4.2.2.2): a thread whose PCMR is unknown (arrived later,
//!   or beyond the first n + 1) is confined to the designated CPU, so unknown threads
//!   never co-run (and boosted there, so that they take turns on it promptly: one
//!   unknown thread at a time displaces one known thread); each segment in which it runs
//!   with threads of known PCMR gives
//!   x = k·rate − Σ known (Formula 2), weighted by duration until `min_runlength_ms`.
//! - **Bucketization** (§4.3.1) after the initial measurement, after a secondary
//!   measurement whose PCMR exceeds all known ones or fits no CPU, and when threads exit.
//! - **Re-measurement on phase change** (§4.2.1 leaves it as future work). By default
//!   each thread's own miss rate is watched: the first `drift_window_ms` of co-run time
//!   after its measurement sets a reference, and two consecutive later windows that move
//!   away from it by more than `drift_threshold` (relative) send the thread back to a secondary
//!   measurement — all threads of the domain to a new initial measurement when most
//!   drift at once. `drift_detector = "group"` is the paper's suggestion instead: the
//!   observed group rate against the mean of the members' PCMRs (the first window sets
//!   the model's own systematic error), re-measuring the whole domain; it is far less
//!   sensitive, since one thread's change is diluted over n co-runners.
//! - Where CASC cannot help it stays out of the way: with at most n threads on a cache,
//!   every thread runs all the time, so nothing is measured or restricted.
//!
//! Deviations, all configurable: miss rates are LLC misses per 100 *memory references*
//! by default (`miss_rate = "per-llc-ref"` for misses per 100 LLC references — the paper
//! says only "per 100 references"); threads being measured get `measure_slice_ms` slices
//! (0 keeps the baseline's) so that a measurement completes within tens of milliseconds
//! of simulated time rather than seconds; the paper's text discards intervals "under
//! 200 ms" while requiring only 2 ms in total per row, which cannot both hold — we read
//! the threshold as `min_interval_ms` (default 0.5).

pub mod bucket;
pub mod solve;

use crate::drift::Drift;
use bucket::{bucketize, BucketParams, Buckets};
use cachesched_core::{
    CoRunSegment, CounterKind, Counters, CpuId, Cpumask, Ctx, Nanos, Policy, ThreadId,
};
use serde::{Deserialize, Serialize};
use solve::{all_but_one, solve_pcmrs, Method, Weighted};
use std::collections::BTreeMap;

/// Which miss rate CASC works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissRate {
    /// LLC misses per 100 data references (loads and stores).
    #[default]
    PerMemRef,
    /// LLC misses per 100 LLC references.
    PerLlcRef,
}

impl MissRate {
    /// The rate of counter totals `c` (`None` without references).
    pub fn of(self, c: &Counters) -> Option<f64> {
        let refs = match self {
            MissRate::PerMemRef => c.l1d_refs,
            MissRate::PerLlcRef => c.llc_refs,
        };
        (refs > 0).then(|| 100.0 * c.llc_misses as f64 / refs as f64)
    }
}

/// How a group's miss rate is formed from its members' counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupRate {
    /// The mean of the members' own miss rates — what Formula 1 (the group rate is the
    /// average of PCMRs) assumes; needs per-thread counters.
    #[default]
    Mean,
    /// All members' misses over all their references, as chip-wide counters give it
    /// (what the paper's Niagara measured).
    Pooled,
}

/// How a secondary measurement turns a co-run interval into a PCMR estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Secondary {
    /// The paper's Formula 2: x = k · group rate − Σ known PCMRs. Every co-runner's
    /// departure from its PCMR lands in x.
    #[default]
    Formula2,
    /// The thread's own miss rate, scaled by how the known co-runners' PCMRs compare with
    /// their own rates in the same interval (needs per-thread counters): the co-runners
    /// calibrate the current cache pressure instead of adding their errors to x.
    Calibrated,
}

/// The paper's Formula 2: the PCMR of the one thread of unknown PCMR in a co-run
/// segment of `k` threads whose group miss rate (the mean of members' rates) is
/// `group_rate` and whose other members' PCMRs sum to `known_sum`: k · rate = Σ known + x.
/// `k` is the segment's thread count, which is below the cache's context count when
/// contexts idle (the paper writes n; declared in docs/casc.md).
pub fn formula2(k: usize, group_rate: f64, known_sum: f64) -> f64 {
    k as f64 * group_rate - known_sum
}

/// Configuration of [`Casc`]. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CascConfig {
    /// Total measured time each matrix row (and each secondary measurement) needs, ms
    /// (default 2, the paper's MIN_RUNLENGTH).
    pub min_runlength_ms: f64,
    /// CPU time a thread must have run before its intervals count, ms (default 0.5).
    pub startup_delay_ms: f64,
    /// Intervals shorter than this are discarded, ms (default 0.5).
    pub min_interval_ms: f64,
    /// Initial miss-rate threshold of the bucketization (default 15).
    pub threshold: f64,
    /// Geometric growth of the threshold when CPUs could idle (default 1.25).
    pub threshold_growth: f64,
    /// Threads every CPU must always be able to run, the paper's m (default 1).
    pub min_threads_per_cpu: usize,
    /// MAX_PCMR decrement, in miss-rate units (default 1).
    pub step: f64,
    /// Bucketize exactly as the paper's loop does (default true, as published; see
    /// [`BucketParams::literal`]).
    pub literal_bucketization: bool,
    /// Slice given to threads while they are measured, ms (default 10; 0: the
    /// baseline's).
    pub measure_slice_ms: f64,
    /// Index, within its cache domain, of the CPU that runs threads of unknown PCMR
    /// (default 0).
    pub designated_cpu: usize,
    /// The miss rate measured (default per memory reference).
    pub miss_rate: MissRate,
    /// How a group's rate is formed (default the mean of members' rates).
    pub group_rate: GroupRate,
    /// Secondary-measurement estimator (default the paper's Formula 2).
    pub secondary: Secondary,
    /// Cache refill time after each dispatch, ms: an interval that starts within it
    /// counts only if the remaining refill is at most a tenth of the interval (default
    /// 1).
    pub warm_ms: f64,
    /// What is watched for phase changes (default each thread's own miss rate).
    pub drift_detector: DriftDetector,
    /// Relative change that triggers re-measurement (default 0.6; 0 disables
    /// re-measurement).
    pub drift_threshold: f64,
    /// Length of the windows the miss rate (or prediction error) is averaged over, ms of
    /// co-run time (default 40).
    pub drift_window_ms: f64,
}

impl Default for CascConfig {
    fn default() -> Self {
        CascConfig {
            min_runlength_ms: 2.0,
            startup_delay_ms: 0.5,
            min_interval_ms: 0.5,
            threshold: 15.0,
            threshold_growth: 1.25,
            min_threads_per_cpu: 1,
            step: 1.0,
            literal_bucketization: true,
            measure_slice_ms: 10.0,
            designated_cpu: 0,
            miss_rate: MissRate::PerMemRef,
            group_rate: GroupRate::Mean,
            secondary: Secondary::Formula2,
            warm_ms: 1.0,
            drift_detector: DriftDetector::Thread,
            drift_threshold: 0.6,
            drift_window_ms: 40.0,
        }
    }
}

impl CascConfig {
    /// Checks ranges; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64| v > 0.0 && v.is_finite();
        let nonneg = |v: f64| v >= 0.0 && v.is_finite();
        if !pos(self.min_runlength_ms) {
            return Err("min_runlength_ms must be positive".into());
        }
        if !nonneg(self.startup_delay_ms) || !nonneg(self.min_interval_ms) || !nonneg(self.warm_ms)
        {
            return Err("startup_delay_ms, min_interval_ms and warm_ms must be >= 0".into());
        }
        if !pos(self.threshold) || !(self.threshold_growth > 1.0) || !pos(self.step) {
            return Err("threshold and step must be positive and threshold_growth > 1".into());
        }
        if self.min_threads_per_cpu == 0 {
            return Err("min_threads_per_cpu must be at least 1".into());
        }
        if !nonneg(self.measure_slice_ms) || !nonneg(self.drift_threshold) {
            return Err("measure_slice_ms and drift_threshold must be >= 0".into());
        }
        if !pos(self.drift_window_ms) {
            return Err("drift_window_ms must be positive".into());
        }
        Ok(())
    }
}

/// Where a cache domain is in CASC's cycle.
#[derive(Debug, Clone, PartialEq)]
enum Stage {
    /// At most n threads (or not yet started): nothing to co-schedule.
    Idle,
    /// The initial measurement over `participants`; `rows[i]` excludes participant i.
    /// Participants `pair` share the designated CPU, the others have one CPU each, so
    /// the two rows excluding either of the pair are the ones that run.
    Initial {
        participants: Vec<ThreadId>,
        rows: Vec<Weighted>,
        pair: (usize, usize),
    },
    /// PCMRs known (or being measured one by one), buckets in force.
    Running,
}

/// What is watched for phase changes once PCMRs are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriftDetector {
    /// Each thread's own miss rate against its rate right after it was measured
    /// (per-thread counters); a drifting thread is measured again alone, the whole
    /// domain when most threads drift.
    #[default]
    Thread,
    /// The paper's suggestion (§4.2.1): observed group miss rates against the mean of
    /// the members' PCMRs; a drift re-measures the whole domain.
    Group,
}

/// One shared last-level cache and its threads.
#[derive(Debug, Clone)]
struct Domain {
    cpus: Vec<CpuId>,
    all: Cpumask,
    /// Live threads in arrival order.
    threads: Vec<ThreadId>,
    stage: Stage,
    buckets: Option<Buckets>,
    drift: Drift,
}

/// What CASC knows and last told the kernel about a thread.
#[derive(Debug, Clone, Default)]
struct ThreadState {
    domain: usize,
    pcmr: Option<f64>,
    secondary: Weighted,
    /// CPU time seen in co-run segments, ns (for the start-up delay).
    cpu_seen: u64,
    /// Co-run time on one CPU since the thread was last dispatched there, ns, and that
    /// CPU.
    streak: (u64, Option<CpuId>),
    /// Own-miss-rate change detection.
    drift: Drift,
    mask: Option<Option<Cpumask>>,
    slice: Option<Option<Nanos>>,
    boosted: bool,
}

/// The CASC policy. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Casc {
    config: CascConfig,
    llc_level: Option<usize>,
    all_cpus: Cpumask,
    domains: Vec<Domain>,
    threads: BTreeMap<ThreadId, ThreadState>,
    /// Last known PCMR of every thread ever measured (kept after exit for reports).
    history: BTreeMap<ThreadId, f64>,
    stats: Stats,
}

#[derive(Debug, Clone, Default)]
struct Stats {
    initial_done_ms: Option<f64>,
    steady_ms: Option<f64>,
    initial_measurements: u32,
    secondary_measurements: u32,
    remeasurements: u32,
    bucketizations: u32,
    least_squares: u32,
    solve_failures: u32,
    last_threshold: f64,
    last_projected: f64,
    last_rms_residual: f64,
    /// Largest |window error − reference| seen since the last measurement.
    max_drift: f64,
}

impl Casc {
    /// A policy with `config` (validated by [`CascConfig::validate`] when built from a
    /// specification).
    pub fn new(config: CascConfig) -> Casc {
        Casc {
            config,
            llc_level: None,
            all_cpus: Cpumask::new(),
            domains: Vec::new(),
            threads: BTreeMap::new(),
            history: BTreeMap::new(),
            stats: Stats::default(),
        }
    }

    /// The PCMR of `t`, if known.
    pub fn pcmr(&self, t: ThreadId) -> Option<f64> {
        self.threads.get(&t).and_then(|s| s.pcmr)
    }

    fn params(&self) -> BucketParams {
        BucketParams {
            threshold: self.config.threshold,
            growth: self.config.threshold_growth,
            min_threads_per_cpu: self.config.min_threads_per_cpu,
            step: self.config.step,
            literal: self.config.literal_bucketization,
        }
    }

    fn n(&self, d: usize) -> usize {
        self.domains[d].cpus.len()
    }

    fn designated(&self, d: usize) -> Cpumask {
        let cpus = &self.domains[d].cpus;
        Cpumask::from_cpus([cpus[self.config.designated_cpu.min(cpus.len() - 1)]])
    }

    /// Starts measuring or running domain `d` when it has more threads than CPUs.
    fn maybe_start(&mut self, ctx: &mut Ctx<'_>, d: usize) {
        let n = self.n(d);
        if self.domains[d].stage != Stage::Idle || self.domains[d].threads.len() <= n {
            return;
        }
        let known = self.domains[d]
            .threads
            .iter()
            .filter(|t| self.threads[t].pcmr.is_some())
            .count();
        if known + 1 >= n {
            // enough known PCMRs for secondary measurements of the rest
            self.domains[d].stage = Stage::Running;
            self.rebucketize(d);
        } else {
            let participants: Vec<ThreadId> = self.domains[d]
                .threads
                .iter()
                .take(n + 1)
                .copied()
                .collect();
            for t in &participants {
                if let Some(s) = self.threads.get_mut(t) {
                    s.pcmr = None;
                }
            }
            self.stats.initial_measurements += 1;
            self.domains[d].stage = Stage::Initial {
                participants,
                rows: vec![Weighted::default(); n + 1],
                pair: (0, 1),
            };
        }
        self.apply(ctx, d);
    }

    /// Back to idle (too few threads): no restrictions.
    fn stop(&mut self, ctx: &mut Ctx<'_>, d: usize) {
        self.domains[d].stage = Stage::Idle;
        self.domains[d].buckets = None;
        self.apply(ctx, d);
    }

    fn rebucketize(&mut self, d: usize) {
        let pcmrs: Vec<f64> = self.domains[d]
            .threads
            .iter()
            .filter_map(|t| self.threads[t].pcmr)
            .collect();
        let b = bucketize(&pcmrs, self.n(d), &self.params());
        self.stats.bucketizations += 1;
        self.stats.last_threshold = b.threshold;
        self.stats.last_projected = b.projected();
        self.domains[d].buckets = Some(b);
    }

    /// Issues the mask, slice and boost every thread of domain `d` should have now.
    fn apply(&mut self, ctx: &mut Ctx<'_>, d: usize) {
        let single = self.domains.len() == 1;
        let measure_slice = (self.config.measure_slice_ms > 0.0)
            .then(|| Nanos::from_ms_f64(self.config.measure_slice_ms));
        let designated = self.designated(d);
        let dom = &self.domains[d];
        let whole = if single { None } else { Some(dom.all.clone()) };
        for &t in &dom.threads {
            let st = &self.threads[&t];
            let (mask, slice, boost) = match &dom.stage {
                Stage::Idle => (whole.clone(), None, false),
                Stage::Initial {
                    participants, pair, ..
                } => match participants.iter().position(|&p| p == t) {
                    Some(i) if i == pair.0 || i == pair.1 => {
                        (Some(designated.clone()), measure_slice, true)
                    }
                    Some(i) => {
                        // the k-th other participant gets the k-th other CPU
                        let k = (0..i).filter(|&j| j != pair.0 && j != pair.1).count();
                        let cpu = dom
                            .cpus
                            .iter()
                            .filter(|c| !designated.contains(**c))
                            .nth(k)
                            .copied();
                        let m = cpu.map_or_else(|| dom.all.clone(), |c| Cpumask::from_cpus([c]));
                        (Some(m), measure_slice, true)
                    }
                    None => (Some(designated.clone()), None, false),
                },
                Stage::Running => match (st.pcmr, &dom.buckets) {
                    (Some(p), Some(b)) => {
                        let m = Cpumask::from_cpus(
                            dom.cpus
                                .iter()
                                .enumerate()
                                .filter(|&(i, _)| b.allows(i, p))
                                .map(|(_, &c)| c),
                        );
                        if m.is_empty() || m == dom.all {
                            (whole.clone(), None, false)
                        } else {
                            (Some(m), None, false)
                        }
                    }
                    (Some(_), None) => (whole.clone(), None, false),
                    (None, _) => (Some(designated.clone()), measure_slice, true),
                },
            };
            let st = self
                .threads
                .get_mut(&t)
                .expect("domain threads are tracked");
            if st.mask.as_ref() != Some(&mask) {
                // the full machine is "no restriction"
                let m = mask.clone().filter(|m| *m != self.all_cpus);
                ctx.set_mask(t, m);
                st.mask = Some(mask);
            }
            if st.slice != Some(slice) {
                ctx.set_slice(t, slice);
                st.slice = Some(slice);
            }
            if st.boosted != boost {
                ctx.boost(t, boost);
                st.boosted = boost;
            }
        }
        self.note_steady(ctx.now());
    }

    fn note_steady(&mut self, now: Nanos) {
        let all_known = self.domains.iter().all(|d| {
            d.stage != Stage::Running || d.threads.iter().all(|t| self.threads[t].pcmr.is_some())
        }) && self.domains.iter().any(|d| d.stage == Stage::Running);
        if all_known && self.stats.steady_ms.is_none() {
            self.stats.steady_ms = Some(now.as_ms_f64());
        } else if !all_known {
            self.stats.steady_ms = None;
        }
    }

    fn finish_initial(&mut self, ctx: &mut Ctx<'_>, d: usize) {
        let Stage::Initial {
            participants, rows, ..
        } = self.domains[d].stage.clone()
        else {
            return;
        };
        let n = self.n(d);
        let rates: Vec<f64> = rows.iter().map(|r| r.mean().unwrap_or(0.0)).collect();
        match solve_pcmrs(n + 1, &all_but_one(n, &rates)) {
            Ok(sol) => {
                if sol.method == Method::LeastSquares {
                    self.stats.least_squares += 1;
                }
                self.stats.last_rms_residual = sol.rms_residual;
                for (t, x) in participants.iter().zip(&sol.pcmrs) {
                    let x = x.max(0.0);
                    if let Some(s) = self.threads.get_mut(t) {
                        s.pcmr = Some(x);
                        s.drift = Drift::default();
                    }
                    self.history.insert(*t, x);
                }
                self.stats.initial_done_ms = Some(ctx.now().as_ms_f64());
                self.domains[d].stage = Stage::Running;
                self.domains[d].drift = Drift::default();
                self.rebucketize(d);
            }
            Err(_) => {
                // cannot happen for the square all-but-one matrix; measure again
                self.stats.solve_failures += 1;
                self.domains[d].stage = Stage::Idle;
                self.maybe_start(ctx, d);
                return;
            }
        }
        self.apply(ctx, d);
    }

    fn remeasure(&mut self, ctx: &mut Ctx<'_>, d: usize) {
        self.stats.remeasurements += 1;
        for t in self.domains[d].threads.clone() {
            if let Some(s) = self.threads.get_mut(&t) {
                s.pcmr = None;
                s.secondary = Weighted::default();
                s.drift = Drift::default();
            }
        }
        self.domains[d].buckets = None;
        self.domains[d].stage = Stage::Idle;
        self.maybe_start(ctx, d);
    }
}

impl Policy for Casc {
    fn name(&self) -> &str {
        "casc"
    }

    fn required_counters(&self) -> Vec<CounterKind> {
        let refs = match self.config.miss_rate {
            MissRate::PerMemRef => CounterKind::L1dRefs,
            MissRate::PerLlcRef => CounterKind::LlcRefs,
        };
        vec![CounterKind::LlcMisses, refs, CounterKind::CpuTimeNs]
    }

    fn wants_corun_segments(&self) -> bool {
        true
    }

    fn requires_corun_segments(&self) -> bool {
        true
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        let topo = ctx.topology();
        self.all_cpus = topo.all_cpus();
        self.llc_level = topo.llc();
        if let Some(l) = self.llc_level {
            for inst in &topo.caches[l].instances {
                if inst.weight() > 1 {
                    self.domains.push(Domain {
                        cpus: inst.iter().collect(),
                        all: inst.clone(),
                        threads: Vec::new(),
                        stage: Stage::Idle,
                        buckets: None,
                        drift: Drift::default(),
                    });
                }
            }
        }
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        if self.domains.is_empty() {
            return; // no shared cache: nothing to co-schedule
        }
        let d = (0..self.domains.len())
            .min_by_key(|&d| self.domains[d].threads.len())
            .expect("at least one domain");
        self.domains[d].threads.push(thread);
        self.threads.insert(
            thread,
            ThreadState {
                domain: d,
                ..Default::default()
            },
        );
        self.maybe_start(ctx, d);
        self.apply(ctx, d);
    }

    fn thread_exited(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        let Some(st) = self.threads.remove(&thread) else {
            return;
        };
        let d = st.domain;
        self.domains[d].threads.retain(|&t| t != thread);
        let n = self.n(d);
        if self.domains[d].threads.len() <= n {
            self.stop(ctx, d);
            return;
        }
        match &self.domains[d].stage {
            Stage::Initial { participants, .. } if participants.contains(&thread) => {
                // a row lost a member: measure again with the current first n + 1
                self.domains[d].stage = Stage::Idle;
                self.maybe_start(ctx, d);
            }
            Stage::Running => {
                self.rebucketize(d);
                self.apply(ctx, d);
            }
            _ => {}
        }
    }

    fn corun_segment(&mut self, ctx: &mut Ctx<'_>, seg: &CoRunSegment) {
        if Some(seg.cache_level) != self.llc_level {
            return;
        }
        let Some(d) = self.domains.iter().position(|dom| {
            dom.all
                .contains(seg.members.first().map_or(CpuId(u32::MAX), |m| m.cpu))
        }) else {
            return;
        };
        // start-up delay and cache warm-up after each dispatch, judged on what the
        // members had run before this segment
        let delay = Nanos::from_ms_f64(self.config.startup_delay_ms).0;
        let warm = Nanos::from_ms_f64(self.config.warm_ms).0;
        let dur = seg.duration();
        let mut eligible = !seg.members.is_empty();
        for m in &seg.members {
            match self.threads.get_mut(&m.thread) {
                Some(s) => {
                    let streak = if s.streak.1 == Some(m.cpu) {
                        s.streak.0
                    } else {
                        0
                    };
                    // the refill after a dispatch may be at most a tenth of the interval
                    let cold = warm.saturating_sub(streak);
                    eligible &= s.cpu_seen >= delay && cold * 10 <= dur.0;
                    s.cpu_seen += m.delta.cpu_time_ns;
                    s.streak = (streak + dur.0, Some(m.cpu));
                }
                None => eligible = false,
            }
        }
        // a thread absent from this segment was descheduled: its streak ends
        for (t, s) in self.threads.iter_mut() {
            if s.domain == d && !seg.members.iter().any(|m| m.thread == *t) {
                s.streak = (0, None);
            }
        }
        if !eligible || dur < Nanos::from_ms_f64(self.config.min_interval_ms) {
            return;
        }
        let rate = match self.config.group_rate {
            GroupRate::Pooled => self.config.miss_rate.of(&seg.total()),
            GroupRate::Mean => {
                let rates: Option<Vec<f64>> = seg
                    .members
                    .iter()
                    .map(|m| self.config.miss_rate.of(&m.delta))
                    .collect();
                rates.map(|r| r.iter().sum::<f64>() / r.len() as f64)
            }
        };
        let Some(rate) = rate else {
            return;
        };
        let w = dur.as_ms_f64();
        let n = self.n(d);
        let need = self.config.min_runlength_ms;
        if let Stage::Initial {
            participants,
            rows,
            pair,
        } = &mut self.domains[d].stage
        {
            if seg.members.len() == n
                && seg.members.iter().all(|m| participants.contains(&m.thread))
            {
                if let Some(i) = participants
                    .iter()
                    .position(|p| seg.members.iter().all(|m| m.thread != *p))
                {
                    rows[i].add(rate, w);
                }
            }
            if rows.iter().all(|r| r.weight() >= need) {
                self.finish_initial(ctx, d);
            } else if rows[pair.0].weight() >= need && rows[pair.1].weight() >= need {
                // the next pair: the two least-measured rows
                let mut order: Vec<usize> = (0..rows.len()).collect();
                order.sort_by(|&a, &b| rows[a].weight().total_cmp(&rows[b].weight()));
                *pair = (order[0].min(order[1]), order[0].max(order[1]));
                self.apply(ctx, d);
            }
            return;
        }
        if self.domains[d].stage != Stage::Running {
            return;
        }
        let unknown: Vec<ThreadId> = seg
            .members
            .iter()
            .map(|m| m.thread)
            .filter(|t| self.threads[t].pcmr.is_none())
            .collect();
        let known_sum: f64 = seg
            .members
            .iter()
            .filter_map(|m| self.threads[&m.thread].pcmr)
            .sum();
        let k = seg.members.len() as f64;
        let estimate = match (&unknown[..], self.config.secondary) {
            ([_], Secondary::Formula2) => Some(formula2(seg.members.len(), rate, known_sum)),
            ([u], Secondary::Calibrated) => {
                let own = |t: ThreadId| {
                    let m = seg.members.iter().find(|m| m.thread == t)?;
                    self.config.miss_rate.of(&m.delta)
                };
                let actual: Option<f64> = seg
                    .members
                    .iter()
                    .filter(|m| m.thread != *u)
                    .map(|m| own(m.thread))
                    .sum();
                match (own(*u), actual) {
                    (Some(x), Some(a)) if a > 0.0 => Some(x * known_sum / a),
                    _ => None,
                }
            }
            _ => None,
        };
        if let (Some(x), [u]) = (estimate, &unknown[..]) {
            let u = *u;
            let st = self.threads.get_mut(&u).expect("member is tracked");
            st.secondary.add(x, w);
            if st.secondary.weight() >= need {
                let x = st.secondary.mean().unwrap_or(0.0).max(0.0);
                st.pcmr = Some(x);
                st.secondary = Weighted::default();
                st.drift = Drift::default();
                self.history.insert(u, x);
                self.stats.secondary_measurements += 1;
                let fits = self.domains[d]
                    .buckets
                    .as_ref()
                    .is_some_and(|b| b.max_pcmr.iter().any(|&m| x < m));
                let largest = self.domains[d]
                    .threads
                    .iter()
                    .filter(|&&t| t != u)
                    .filter_map(|t| self.threads[t].pcmr)
                    .fold(f64::NEG_INFINITY, f64::max);
                let last_unknown = self.domains[d]
                    .threads
                    .iter()
                    .all(|t| self.threads[t].pcmr.is_some());
                // the paper's triggers, and once the last unknown PCMR is in
                // (the first buckets saw only the initial n + 1 threads)
                if !fits || x > largest || last_unknown {
                    self.rebucketize(d);
                }
                self.apply(ctx, d);
            }
        }
        if self.config.drift_threshold > 0.0 {
            match self.config.drift_detector {
                DriftDetector::Group if unknown.is_empty() && seg.members.len() == n => {
                    let pred = known_sum / k;
                    let rel = (rate - pred) / pred.max(1.0);
                    if let Some(err) =
                        self.domains[d]
                            .drift
                            .observe(rel, w, self.config.drift_window_ms)
                    {
                        self.stats.max_drift = self.stats.max_drift.max(err.abs());
                        if self.domains[d]
                            .drift
                            .strike(err, self.config.drift_threshold)
                        {
                            self.remeasure(ctx, d);
                        }
                    }
                }
                DriftDetector::Group => {}
                DriftDetector::Thread => {
                    let mut drifted = Vec::new();
                    for m in seg.members.iter().filter(|m| !unknown.contains(&m.thread)) {
                        let Some(own) = self.config.miss_rate.of(&m.delta) else {
                            continue;
                        };
                        let st = self.threads.get_mut(&m.thread).expect("member is tracked");
                        if let Some(err) =
                            st.drift
                                .observe_relative(own, w, self.config.drift_window_ms)
                        {
                            self.stats.max_drift = self.stats.max_drift.max(err.abs());
                            if st.drift.strike(err, self.config.drift_threshold) {
                                drifted.push(m.thread);
                            }
                        }
                    }
                    if drifted.len() * 2 > self.domains[d].threads.len() {
                        self.remeasure(ctx, d);
                    } else if !drifted.is_empty() {
                        // measure just these again, one by one on the designated CPU
                        self.stats.remeasurements += 1;
                        for t in drifted {
                            let st = self.threads.get_mut(&t).expect("member is tracked");
                            st.pcmr = None;
                            st.secondary = Weighted::default();
                            st.drift = Drift::default();
                        }
                        self.apply(ctx, d);
                    }
                }
            }
        }
    }

    cachesched_core::report_stats!(CascStats);
}

cachesched_core::policy_stats! {
    /// CASC's statistics over a run.
    pub struct CascStats for "casc" {
        /// When the last initial measurement finished and its PCMRs were solved (ms of
        /// simulated or wall time); −1 in the record if none finished.
        initial_done_ms: Option<f64> = "initial_done_ms" or -1.0,
        /// Since when every thread of every running domain has had a PCMR (ms); −1 if
        /// that never held at the end (a remeasurement clears it).
        steady_ms: Option<f64> = "steady_ms" or -1.0,
        /// Initial measurements started (all-but-one group runs of a domain, §4.1).
        initial_measurements: u64 = "initial_measurements",
        /// Secondary measurements: PCMRs of threads that arrived later, by Formula 2.
        secondary_measurements: u64 = "secondary_measurements",
        /// Remeasurements of a domain after a thread's miss rate drifted or a thread left.
        remeasurements: u64 = "remeasurements",
        /// Times the threads of a domain were sorted into buckets (Algorithm 1).
        bucketizations: u64 = "bucketizations",
        /// Initial measurements solved by least squares instead of exactly.
        least_squares_solves: u64 = "least_squares_solves",
        /// Initial measurements whose equations could not be solved (measured again).
        solve_failures: u64 = "solve_failures",
        /// The bucket threshold of the last bucketization (in the configured miss rate's
        /// units, misses per 100 references).
        threshold: f64 = "threshold",
        /// The projected miss rate of the last bucketization's schedule.
        projected_miss_rate: f64 = "projected_miss_rate",
        /// The RMS residual of the last initial measurement's solve.
        initial_rms_residual: f64 = "initial_rms_residual",
        /// The largest |window miss rate − reference| seen since the last measurement.
        max_drift: f64 = "max_drift",
        /// Scheduling domains (shared caches) the policy manages.
        domains: u64 = "domains",
        /// Each thread's last measured PCMR (misses per 100 references), by thread id.
        pcmr: BTreeMap<u32, f64> = "pcmr.",
        /// Each bucket's highest PCMR, by `DOMAIN.cpuCPU` (the bucket a CPU runs).
        max_pcmr: BTreeMap<String, f64> = "max_pcmr.",
    }
}

impl Casc {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> CascStats {
        let s = &self.stats;
        let mut max_pcmr = BTreeMap::new();
        for (di, d) in self.domains.iter().enumerate() {
            if let Some(b) = &d.buckets {
                for (c, m) in d.cpus.iter().zip(&b.max_pcmr) {
                    max_pcmr.insert(format!("{di}.cpu{}", c.0), *m);
                }
            }
        }
        CascStats {
            initial_done_ms: s.initial_done_ms,
            steady_ms: s.steady_ms,
            initial_measurements: s.initial_measurements.into(),
            secondary_measurements: s.secondary_measurements.into(),
            remeasurements: s.remeasurements.into(),
            bucketizations: s.bucketizations.into(),
            least_squares_solves: s.least_squares.into(),
            solve_failures: s.solve_failures.into(),
            threshold: s.last_threshold,
            projected_miss_rate: s.last_projected,
            initial_rms_residual: s.last_rms_residual,
            max_drift: s.max_drift,
            domains: self.domains.len() as u64,
            pcmr: self.history.iter().map(|(t, x)| (t.0, *x)).collect(),
            max_pcmr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::formula2;

    /// Formula 2 recovers the unknown PCMR exactly when every member misses at its
    /// PCMR; a co-runner missing above its PCMR adds its whole departure to the
    /// estimate (the paper's "most errors in the secondary measurement"); with idle
    /// contexts the segment's count is used. Fails if the formula divides or weights
    /// differently.
    #[test]
    fn formula2_recovers_the_unknown_and_takes_every_error() {
        let known = [5.0, 6.0, 7.0];
        let x = 22.0;
        let rate = (known.iter().sum::<f64>() + x) / 4.0;
        assert!((formula2(4, rate, known.iter().sum()) - x).abs() < 1e-12);
        // one co-runner at 6 + 2: the group rate rises by 2/4, the estimate by 2
        let noisy = (5.0 + 8.0 + 7.0 + x) / 4.0;
        assert!((formula2(4, noisy, 18.0) - (x + 2.0)).abs() < 1e-12);
        // two threads in the segment (six contexts idle): 2 · rate − known
        assert!((formula2(2, (5.0 + 9.0) / 2.0, 5.0) - 9.0).abs() < 1e-12);
        // co-runners missing below their PCMRs can push it negative (clamped by the
        // policy, declared)
        assert!(formula2(4, 3.0, 18.0) < 0.0);
    }
}
