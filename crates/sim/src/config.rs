//! Configuration of one simulation run. Every field has a documented default; unknown
//! keys are rejected; the resolved configuration is written beside every result.

use crate::hw::machine::{MachineConfig, MachineError};
use crate::workload::{profile, LocalityModel, WorkloadError};
use cachesched_core::ThreadClass;
use cachesched_policies::PolicySpec;
use serde::{Deserialize, Serialize};

/// The kernel's baseline scheduling class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    /// Linux CFS/EEVDF-like weighted fair scheduling (default).
    #[default]
    Cfs,
    /// Solaris time-sharing: the default dispatch table, placed by the Solaris
    /// dispatcher.
    Ts,
    /// Solaris fixed-priority class (FX): priorities that never change, placed by the
    /// Solaris dispatcher.
    Fx,
    /// Fixed-priority round robin.
    Rr,
}

impl Baseline {
    /// Parses `cfs`, `ts`, `fx` or `rr`.
    pub fn parse(s: &str) -> Option<Baseline> {
        match s {
            "cfs" => Some(Baseline::Cfs),
            "ts" => Some(Baseline::Ts),
            "fx" => Some(Baseline::Fx),
            "rr" => Some(Baseline::Rr),
            _ => None,
        }
    }

    /// The short name.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Cfs => "cfs",
            Baseline::Ts => "ts",
            Baseline::Fx => "fx",
            Baseline::Rr => "rr",
        }
    }
}

/// Kernel mechanism parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    /// Baseline class (default `cfs`).
    pub baseline: Baseline,
    /// Direct cost of a context switch in microseconds (default 2).
    pub context_switch_us: f64,
    /// CFS target latency in ms before scaling by 1 + log2(CPUs) (default 6, as Linux).
    pub cfs_latency_ms: f64,
    /// CFS minimum granularity in ms before scaling (default 0.75, as Linux).
    pub cfs_min_granularity_ms: f64,
    /// CFS wake-up preemption granularity in ms (default 1).
    pub cfs_wakeup_granularity_ms: f64,
    /// Round-robin quantum in ms (default 100, as Linux SCHED_RR).
    pub rr_quantum_ms: f64,
    /// Solaris TS: one quantum in ms for every level instead of the dispatch table's
    /// 20–200 ms (default: the table), as `dispadmin` can set; the affinity paper runs
    /// with 2, 10 and 200 ms.
    pub ts_quantum_ms: Option<f64>,
    /// Solaris FX: one quantum in ms for every priority instead of the dispatch
    /// table's (default: the table, 200 ms at priority 0).
    pub fx_quantum_ms: Option<f64>,
    /// Solaris dispatcher: a thread that left its CPU at most this long ago still has
    /// cache warmth and goes back to it (`rechoose_interval`, default 30: 3 ticks).
    pub rechoose_interval_ms: f64,
    /// Solaris dispatcher: an idle CPU does not steal a thread queued on the CPU it
    /// last ran on, in another cache, until it has waited this long (`nosteal_nsec`,
    /// default 100).
    pub nosteal_us: f64,
    /// Load-balancing period in ms (default 4). The Solaris classes have no balancer;
    /// the watchdog runs at this period for every class.
    pub balance_interval_ms: f64,
    /// A thread that ran within this many microseconds is cache-hot and not migrated by
    /// the load balancer unless balancing keeps failing (default 500, as Linux).
    pub migration_cost_us: f64,
    /// Ignore cache affinity (default false): a thread that runs again — waking, or
    /// requeued when its slice expires — goes to a CPU chosen at random among the
    /// least loaded (CFS, RR) or among those running the lowest priority (Solaris:
    /// "affinity settings disabled", no cache-warmth test, no steal delay), and the
    /// balancer ignores cache-hotness. CPU-bound threads then keep moving.
    pub affinity_oblivious: bool,
    /// Fail the run if a runnable thread waits this long for a CPU (default 2000 ms).
    pub starvation_limit_ms: f64,
    /// How virtual pages map to physical frames, which physically indexed caches see
    /// (default `random`).
    pub page_placement: PagePlacement,
    /// Longest co-run segment in ms (default 10): a segment still open after this long
    /// is closed and a new one with the same members begins, checked at each balancing
    /// tick, so that a policy measuring over segments keeps getting data while nothing
    /// changes on a cache.
    pub corun_segment_max_ms: f64,
    /// CPU cycles one address sample costs the thread whose access was sampled, as the
    /// overflow interrupt and handler that read the sampled address do (default 0:
    /// free). The thread-clustering paper's overhead (Figure 8) emerges from this.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub sample_cost_cycles: u64,
    /// Record every thread's runs on a CPU that begin in the measured window, with
    /// their LLC misses in bins of this many ms from each run's start and the LLC's
    /// fills while the thread was off the CPU before it (default: none; 0.1–1000 ms;
    /// [`crate::kernel::profile`]). Results then carry each thread's `slice_profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_profile_ms: Option<f64>,
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

/// The simulated kernel's physical page allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PagePlacement {
    /// Each 4 KiB page gets a pseudo-random frame (a fixed bijection of its number), as
    /// a long-running allocator hands out: cache colours are spread, so threads' data
    /// laid out at identical offsets do not collide in the same sets.
    #[default]
    Random,
    /// Physical = virtual: every region starts on the same cache colour (useful to
    /// study conflict misses, and to compare with virtually indexed tools).
    Identity,
}

impl PagePlacement {
    /// The physical address of virtual address `addr`.
    #[inline(always)]
    pub fn translate(self, addr: u64) -> u64 {
        match self {
            PagePlacement::Identity => addr,
            PagePlacement::Random => {
                // a bijection of the 52-bit page number: odd multipliers and xor-shifts
                // are invertible modulo 2^52
                const MASK: u64 = (1 << 52) - 1;
                let mut x = addr >> 12;
                x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) & MASK;
                x ^= x >> 29;
                x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9) & MASK;
                x ^= x >> 32;
                (x << 12) | (addr & 0xfff)
            }
        }
    }
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            baseline: Baseline::Cfs,
            context_switch_us: 2.0,
            cfs_latency_ms: 6.0,
            cfs_min_granularity_ms: 0.75,
            cfs_wakeup_granularity_ms: 1.0,
            rr_quantum_ms: 100.0,
            ts_quantum_ms: None,
            fx_quantum_ms: None,
            rechoose_interval_ms: 30.0,
            nosteal_us: 100.0,
            balance_interval_ms: 4.0,
            migration_cost_us: 500.0,
            affinity_oblivious: false,
            starvation_limit_ms: 2000.0,
            corun_segment_max_ms: 10.0,
            page_placement: PagePlacement::Random,
            sample_cost_cycles: 0,
            slice_profile_ms: None,
        }
    }
}

/// Where the machine comes from: a preset name (optionally resizing the LLC) or a full
/// inline description. Checked while it is read ([`MachineSpec::resolve`] must
/// succeed), so that a misspelled preset is reported with the file's line and column
/// like any other error of the format.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MachineSpec {
    /// A preset, e.g. `machine = "niagara-2c"`.
    Preset(String),
    /// A preset with the last-level cache resized, e.g.
    /// `machine = { preset = "niagara-2c", llc_kb = 96 }`.
    Resized {
        /// Preset name.
        preset: String,
        /// New LLC size in KiB.
        llc_kb: u64,
    },
    /// A complete machine description.
    Custom(Box<MachineConfig>),
}

impl<'de> Deserialize<'de> for MachineSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// The same shapes, read without checking.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Preset(String),
            Resized { preset: String, llc_kb: u64 },
            Custom(Box<MachineConfig>),
        }
        let spec = match Raw::deserialize(d)? {
            Raw::Preset(p) => MachineSpec::Preset(p),
            Raw::Resized { preset, llc_kb } => MachineSpec::Resized { preset, llc_kb },
            Raw::Custom(m) => MachineSpec::Custom(m),
        };
        spec.resolve().map_err(serde::de::Error::custom)?;
        Ok(spec)
    }
}

impl MachineSpec {
    /// Resolves to a full machine description.
    pub fn resolve(&self) -> Result<MachineConfig, MachineError> {
        match self {
            MachineSpec::Preset(p) => MachineConfig::preset(p),
            MachineSpec::Resized { preset, llc_kb } => {
                MachineConfig::preset(preset)?.with_llc_bytes(llc_kb << 10)
            }
            MachineSpec::Custom(m) => {
                m.validate()?;
                Ok((**m).clone())
            }
        }
    }
}

/// A group of identical threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadGroup {
    /// Named profile (see `cachesched workloads`), unless `model` is given.
    #[serde(default)]
    pub profile: Option<String>,
    /// Explicit locality model.
    #[serde(default)]
    pub model: Option<LocalityModel>,
    /// A binary trace (`cachesched trace record`) replayed in a loop by each thread.
    #[serde(default)]
    pub trace: Option<String>,
    /// Base CPI of trace threads (default 1).
    #[serde(default)]
    pub trace_cpi: Option<f64>,
    /// Where in its trace each thread of a trace (or real) group starts (default
    /// `seeded`: at an offset drawn from the run's seed, different per thread).
    #[serde(default)]
    pub trace_start: TraceStart,
    /// A program of the real-program suite (`cachesched real list`), replayed like a
    /// trace: the CLI records it into its trace cache on first use and sets `trace` to
    /// the cached file before the simulation starts (default: none).
    #[serde(default)]
    pub real: Option<String>,
    /// Phases: the threads cycle through these models (default: none).
    #[serde(default)]
    pub phases: Vec<Phase>,
    /// Number of threads (default 1).
    #[serde(default = "one")]
    pub count: u32,
    /// Whether the threads form one process sharing `process` regions (default false:
    /// one process per thread).
    #[serde(default)]
    pub same_process: bool,
    /// Threads per sharing group, for `group` regions (default: all threads of the
    /// process in one group). Thread i of n is in group i mod ceil(n / this).
    #[serde(default)]
    pub threads_per_group: Option<u32>,
    /// How threads are dealt into sharing groups (default `interleaved`: thread i of n
    /// in group i mod ⌈n / threads_per_group⌉).
    #[serde(default, skip_serializing_if = "GroupAssignment::is_default")]
    pub group_assignment: GroupAssignment,
    /// Pin each thread to one CPU, as a hand placement does with balancing off (default:
    /// none, the kernel places and balances). Intersected with `cpus`, which it must
    /// not contradict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Pin>,
    /// Start time in ms (default 0).
    #[serde(default)]
    pub start_ms: f64,
    /// Each thread of the group starts later than `start_ms` by a delay drawn by the
    /// run's seed uniformly from [0, this) ms (default 0: no delay). Programs launched
    /// one after another start out of phase; this models that phase without scripting
    /// it, so quanta on different CPUs do not expire in lockstep.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub start_jitter_ms: f64,
    /// A work segment whose completion time the result reports (default: none): each
    /// thread of the group is timed from its `start_instructions`-th instruction to
    /// `instructions` later ([`crate::result::ThreadResult::segment_ms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<WorkSegment>,
    /// Nice value (default 0).
    #[serde(default)]
    pub nice: i32,
    /// Fixed priority under the Solaris FX class, 0–60 (default 0).
    #[serde(default)]
    pub fx_priority: u8,
    /// The class a policy sees for these threads, assigned like a priority:
    /// `cache-fair` or `best-effort` for the cache-fair scheduler (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ThreadClass>,
    /// Bind the group's threads to these CPUs (hard affinity, as `pbind` or
    /// `taskset`; default: all CPUs). A policy's masks are intersected with it.
    #[serde(default)]
    pub cpus: Option<Vec<u32>>,
    /// Label used in reports (default: the profile name).
    #[serde(default)]
    pub label: Option<String>,
}

fn one() -> u32 {
    1
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A stretch of a thread's instructions whose completion time is measured, as the
/// cache-fair paper's "work segments": the simulated time from the thread's
/// `start_instructions`-th instruction to its (`start_instructions` +
/// `instructions`)-th. Unknown keys are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkSegment {
    /// Instructions the thread completes before the segment begins (counted from its
    /// start, warm-up included).
    pub start_instructions: u64,
    /// Instructions in the segment, at least 1.
    pub instructions: u64,
}

impl ThreadGroup {
    /// A group of `count` threads of profile `name`.
    pub fn of(name: &str, count: u32) -> ThreadGroup {
        ThreadGroup {
            profile: Some(name.to_string()),
            model: None,
            trace: None,
            trace_cpi: None,
            trace_start: TraceStart::default(),
            real: None,
            phases: Vec::new(),
            threads_per_group: None,
            group_assignment: GroupAssignment::Interleaved,
            pin: None,
            count,
            same_process: false,
            start_ms: 0.0,
            start_jitter_ms: 0.0,
            segment: None,
            nice: 0,
            fx_priority: 0,
            class: None,
            cpus: None,
            label: None,
        }
    }

    /// A group of `count` threads running `model`, a locality model given in full rather
    /// than a named profile (its name in results is "custom" unless `label` is set).
    pub fn custom(model: LocalityModel, count: u32) -> ThreadGroup {
        ThreadGroup {
            profile: None,
            model: Some(model),
            ..ThreadGroup::of("", count)
        }
    }

    /// The group's label in results: `label` if given, else the profile's name,
    /// `real:NAME` for a real program, the trace file's stem (without `.cst.zst`),
    /// "phased" or "custom"
    /// (reads nothing).
    pub fn name(&self) -> String {
        if let Some(l) = &self.label {
            return l.clone();
        }
        if let Some(r) = &self.real {
            return format!("{REAL_PREFIX}{r}");
        }
        if let Some(path) = &self.trace {
            // x.cst.zst names x, as x.cst does
            let p = std::path::Path::new(path);
            let p = p
                .to_str()
                .and_then(|s| s.strip_suffix(".zst"))
                .map_or(p, std::path::Path::new);
            return p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into());
        }
        if !self.phases.is_empty() {
            return "phased".into();
        }
        self.profile.clone().unwrap_or_else(|| "custom".into())
    }

    /// What the group's threads run, and its label ([`ThreadGroup::name`]). Trace files
    /// are read here.
    pub fn resolve(&self) -> Result<(Source, String), WorkloadError> {
        self.resolve_in(&mut TraceFiles::default())
    }

    /// [`ThreadGroup::resolve`], with the trace files read so far by path in `files`:
    /// groups replaying the same file share one copy (a real program's window is
    /// about 0.5 GB decompressed).
    pub fn resolve_in(&self, files: &mut TraceFiles) -> Result<(Source, String), WorkloadError> {
        let given = [
            self.profile.is_some(),
            self.model.is_some(),
            self.trace.is_some() || self.real.is_some(),
            !self.phases.is_empty(),
        ];
        if given.iter().filter(|&&g| g).count() != 1 {
            return Err(WorkloadError::Invalid(
                "a thread group needs exactly one of profile, model, trace (or real) or phases"
                    .into(),
            ));
        }
        if let (Some(r), None) = (&self.real, &self.trace) {
            return Err(WorkloadError::Invalid(format!(
                "real program '{r}' has no trace yet: the cachesched command records it on \
                 first use (or run `cachesched real record {r}`)"
            )));
        }
        if !(-20..=19).contains(&self.nice) {
            return Err(WorkloadError::Invalid(format!(
                "nice {} is outside -20..=19",
                self.nice
            )));
        }
        if self.cpus.as_ref().is_some_and(|c| c.is_empty()) {
            return Err(WorkloadError::Invalid(
                "cpus, when given, must list at least one CPU".into(),
            ));
        }
        if self.fx_priority > 60 {
            return Err(WorkloadError::Invalid(format!(
                "fx_priority {} is outside 0..=60",
                self.fx_priority
            )));
        }
        if !(self.start_ms >= 0.0) || !(self.start_jitter_ms >= 0.0) {
            return Err(WorkloadError::Invalid(
                "start_ms and start_jitter_ms must be non-negative".into(),
            ));
        }
        if self.segment.is_some_and(|s| s.instructions == 0) {
            return Err(WorkloadError::Invalid(
                "segment.instructions must be at least 1".into(),
            ));
        }
        let src = if let Some(path) = &self.trace {
            let bytes = match files.0.get(path) {
                Some(b) => b.clone(),
                None => {
                    use crate::trace::ReadTraceError;
                    let bytes = crate::trace::read_verified_trace(std::path::Path::new(path))
                        .map_err(|e| match e {
                            ReadTraceError::Io(e) => WorkloadError::Invalid(format!(
                                "cannot read trace '{path}': {e}"
                            )),
                            ReadTraceError::Invalid(e) => WorkloadError::Invalid(format!(
                                "trace '{path}': {e} (record one with `cachesched trace record --out FILE -- CMD`)"
                            )),
                        })?;
                    let b = std::sync::Arc::new(bytes);
                    files.0.insert(path.clone(), b.clone());
                    b
                }
            };
            let cpi = self.trace_cpi.unwrap_or(1.0);
            if !(cpi >= 0.25) {
                return Err(WorkloadError::Invalid(
                    "trace_cpi must be at least 0.25".into(),
                ));
            }
            Source::Trace(bytes, cpi, self.trace_start)
        } else if !self.phases.is_empty() {
            let mut v = Vec::new();
            for ph in &self.phases {
                let m = match (&ph.profile, &ph.model) {
                    (Some(p), None) => profile(p)?,
                    (None, Some(m)) => m.clone(),
                    _ => {
                        return Err(WorkloadError::Invalid(
                            "a phase needs exactly one of profile or model".into(),
                        ))
                    }
                };
                m.validate()?;
                if ph.instructions == 0 {
                    return Err(WorkloadError::Invalid(
                        "a phase needs instructions > 0".into(),
                    ));
                }
                v.push((m, ph.instructions));
            }
            Source::Phased(v)
        } else if let Some(p) = &self.profile {
            Source::Model(profile(p)?)
        } else {
            Source::Model(self.model.clone().expect("checked above"))
        };
        if let Source::Model(m) = &src {
            m.validate()?;
        }
        Ok((src, self.name()))
    }

    /// Parses the command-line mix form `name:count,name:count`, where a name is a
    /// profile, `real:PROGRAM` (a program of the real-program suite) or the path of a
    /// binary trace (ending in `.cst`, or `.cst.zst` compressed); a count of 1 may be left out.
    pub fn parse_mix(s: &str) -> Result<Vec<ThreadGroup>, WorkloadError> {
        let groups: Vec<ThreadGroup> = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                // `real:xz:2`: the prefix's colon is not the count's
                let (real, rest) = match p.trim_start().strip_prefix(REAL_PREFIX) {
                    Some(rest) => (true, rest),
                    None => (false, p),
                };
                let (name, n) = rest.rsplit_once(':').unwrap_or((rest, "1"));
                let range = || {
                    WorkloadError::Invalid(format!(
                        "'{p}': the count must be a whole number from 1 to {MAX_THREADS} \
                         (profile:count)"
                    ))
                };
                let count: u64 = n.trim().parse().map_err(|_| range())?;
                if count == 0 || count > MAX_THREADS as u64 {
                    return Err(range());
                }
                let count = count as u32;
                let name = name.trim();
                let mut g = ThreadGroup::of(name, count);
                if real {
                    if name.is_empty() {
                        return Err(WorkloadError::Invalid(format!(
                            "'{p}': name a program after real: (`cachesched real list`)"
                        )));
                    }
                    g.profile = None;
                    g.real = Some(name.to_string());
                } else if name.ends_with(".cst") || name.ends_with(".cst.zst") {
                    g.profile = None;
                    g.trace = Some(name.to_string());
                } else {
                    profile(name)?;
                    if let Some(t) = crate::workload::server_group_size(name) {
                        g.same_process = true;
                        g.threads_per_group = Some(t);
                    }
                }
                Ok(g)
            })
            .collect::<Result<_, _>>()?;
        let total: u64 = groups.iter().map(|g| g.count as u64).sum();
        if total > MAX_THREADS as u64 {
            return Err(WorkloadError::Invalid(format!(
                "the mix has {total} threads; a simulation runs at most {MAX_THREADS}"
            )));
        }
        Ok(groups)
    }
}

/// How the threads of a process are dealt into its sharing groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupAssignment {
    /// Thread i of n in group i mod ⌈n / threads_per_group⌉: threads created one after
    /// another land in different groups, as connections are served in arrival order.
    #[default]
    Interleaved,
    /// A permutation drawn from the run's seed, groups kept equal in size: no placement
    /// that follows thread ids (the kernel's start-up spreading, round-robin pinning) is
    /// aligned with the groups by construction.
    Seeded,
}

impl GroupAssignment {
    fn is_default(&self) -> bool {
        *self == GroupAssignment::Interleaved
    }
}

/// A per-thread pinning of a thread group (the thread-clustering paper's manual
/// placements, §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pin {
    /// Thread k of the run (all groups, in order) on CPU k mod CPUs.
    RoundRobin,
    /// Thread k of the run (all groups, in order) on the k-th CPU (mod CPUs) of an
    /// order that visits the chips in turn: every chip's first CPU, then every chip's
    /// second, and so on, so that bound threads spread over the chips' caches first
    /// (the affinity paper's main benchmarks bound each to its own core).
    Spread,
    /// Sharing group g on chip g mod chips, the group's threads round-robin over the
    /// chip's CPUs (continuing where the chip's previous group stopped): the paper's
    /// hand-optimised placement, which knows the ground truth as its authors did.
    ByGroup,
}

/// How a mix names a program of the real-program suite: `real:xz`.
pub const REAL_PREFIX: &str = "real:";

/// Most simulated threads in one run (each keeps its generator, its operation buffer
/// and its counters, some tens of KiB; checked before anything is allocated).
pub const MAX_THREADS: u32 = 4096;

/// A configuration value outside its range ([`SimConfig::check_ranges`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RangeError {
    /// The key, dotted as in a configuration file (`kernel.ts_quantum_ms`).
    pub key: String,
    /// What is wrong and the range.
    pub message: String,
}

/// A range bound as people write it (600000, 0.01).
fn num(v: f64) -> String {
    format!("{v}")
}

impl ThreadGroup {
    /// Number of sharing groups of this thread group.
    pub fn sharing_groups(&self) -> u32 {
        match self.threads_per_group {
            Some(t) if self.same_process => self.count.div_ceil(t).max(1),
            _ => 1,
        }
    }
}

/// Where the threads of a trace group start in their trace.
///
/// Each thread replays its trace in a loop. Started together at the trace's first
/// event, copies of one program would run the same phases in step, and a run would not
/// depend on its seed at all (nothing else in a trace thread is random), so seeds could
/// not give the spread a confidence interval needs. Real copies of a program started
/// at different times are at unrelated points of their execution; `Seeded` models that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceStart {
    /// At a byte offset drawn uniformly over the trace from the run's seed and the
    /// thread's number (the events before it are decoded, not replayed).
    #[default]
    Seeded,
    /// At the trace's first event, every thread and every seed alike.
    Beginning,
}

/// Trace files read while resolving a run's thread groups, by path, so that groups
/// replaying the same file share one copy ([`ThreadGroup::resolve_in`]).
#[derive(Debug, Default)]
pub struct TraceFiles(std::collections::HashMap<String, std::sync::Arc<Vec<u8>>>);

/// What a thread group runs.
#[derive(Debug, Clone)]
pub enum Source {
    /// A synthetic locality model.
    Model(LocalityModel),
    /// A binary trace, the base CPI to replay it with and where its threads start.
    Trace(std::sync::Arc<Vec<u8>>, f64, TraceStart),
    /// Models run in turn for the given instruction counts.
    Phased(Vec<(LocalityModel, u64)>),
}

/// One phase of a phased thread group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Named profile, unless `model` is given.
    #[serde(default)]
    pub profile: Option<String>,
    /// Explicit model.
    #[serde(default)]
    pub model: Option<LocalityModel>,
    /// Instructions before the next phase.
    pub instructions: u64,
}

/// One simulation run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// The machine.
    pub machine: MachineSpec,
    /// The threads.
    pub threads: Vec<ThreadGroup>,
    /// Kernel parameters and baseline class.
    #[serde(default)]
    pub kernel: KernelConfig,
    /// Policies on top of the baseline, run as a chain in this order (default: none).
    #[serde(default)]
    pub policies: Vec<PolicySpec>,
    /// Equal way-partitioning of the shared last-level cache (default: none): each
    /// thread, or each core, may fill only its own equal share of the ways (the
    /// cache-fair paper's "fair share" ground truth).
    #[serde(default)]
    pub partition: Option<Partition>,
    /// Simulated duration in ms, including warm-up (default 1000).
    #[serde(default = "default_duration")]
    pub duration_ms: f64,
    /// Counters in the result start after this many ms (default 0).
    #[serde(default)]
    pub warmup_ms: f64,
    /// Timeline sample interval in ms (default 10).
    #[serde(default = "default_sample")]
    pub sample_ms: f64,
    /// End the run as soon as every thread with a work segment
    /// ([`ThreadGroup::segment`]) has completed it, before `duration_ms` if they all
    /// do (default false): "run until the principal completes its segment".
    #[serde(default, skip_serializing_if = "is_false")]
    pub stop_after_segments: bool,
    /// End the measured window once every thread has begun this many slices in it
    /// (and the window has lasted `min_ms`), before `duration_ms` if they all do
    /// (default: none, the window runs to `duration_ms`): a window sized to the run's
    /// own quanta, so that a run of short slices is not simulated as long as one of
    /// long slices. The window starts when the warm-up ends (at 0 without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after_quanta: Option<QuantaStop>,
    /// The seed that drives everything (default 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
}

/// When a run's measured window ends by its quanta ([`SimConfig::stop_after_quanta`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantaStop {
    /// Slices every thread that has not exited must have begun in the window (1 to
    /// 1,000,000): the window ends at the dispatch that begins the last of them.
    pub quanta: u32,
    /// The window lasts at least this long, ms (default 0; below the run's window):
    /// a floor for runs whose slices are short.
    #[serde(default)]
    pub min_ms: f64,
}

/// How a shared cache's ways are divided ([`SimConfig::partition`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Partition {
    /// Equal ways per thread (thread *i* gets the *i*-th share; needs at least as many
    /// ways as threads).
    PerThread,
    /// Equal ways per core: a thread fills the share of the core it runs on.
    PerCore,
}

fn default_duration() -> f64 {
    1000.0
}
fn default_sample() -> f64 {
    10.0
}
fn default_seed() -> u64 {
    1
}

/// The longest simulated run, ms (10 simulated minutes: the papers' runs are at most a
/// few seconds, and one simulated second takes minutes of host time).
pub const MAX_DURATION_MS: f64 = 600_000.0;

/// Shortest timeline interval, quantum, period or slice a configuration may give, ms
/// (10 µs: below that the kernel model's own costs, microseconds, dominate).
pub const MIN_PERIOD_MS: f64 = 0.01;

/// Longest quantum, period or interval a configuration may give, ms.
pub const MAX_PERIOD_MS: f64 = 10_000.0;

impl SimConfig {
    /// Checks every number against its documented range, before anything is built: the
    /// error names the key (as written in a configuration file, e.g.
    /// `kernel.ts_quantum_ms`), the value and the range.
    pub fn check_ranges(&self) -> Result<(), RangeError> {
        let k = &self.kernel;
        let (lo, hi) = (MIN_PERIOD_MS, MAX_PERIOD_MS);
        let mut checks: Vec<(&'static str, f64, f64, f64)> = vec![
            (
                "duration_ms",
                self.duration_ms,
                f64::MIN_POSITIVE,
                MAX_DURATION_MS,
            ),
            ("sample_ms", self.sample_ms, lo, 60_000.0),
            (
                "kernel.context_switch_us",
                k.context_switch_us,
                0.0,
                10_000.0,
            ),
            ("kernel.cfs_latency_ms", k.cfs_latency_ms, lo, hi),
            (
                "kernel.cfs_min_granularity_ms",
                k.cfs_min_granularity_ms,
                lo,
                hi,
            ),
            (
                "kernel.cfs_wakeup_granularity_ms",
                k.cfs_wakeup_granularity_ms,
                0.0,
                hi,
            ),
            ("kernel.rr_quantum_ms", k.rr_quantum_ms, lo, hi),
            (
                "kernel.rechoose_interval_ms",
                k.rechoose_interval_ms,
                0.0,
                hi,
            ),
            ("kernel.nosteal_us", k.nosteal_us, 0.0, 1e6),
            ("kernel.balance_interval_ms", k.balance_interval_ms, lo, hi),
            ("kernel.migration_cost_us", k.migration_cost_us, 0.0, 1e6),
            (
                "kernel.starvation_limit_ms",
                k.starvation_limit_ms,
                lo,
                MAX_DURATION_MS,
            ),
            (
                "kernel.corun_segment_max_ms",
                k.corun_segment_max_ms,
                lo,
                hi,
            ),
            (
                "kernel.sample_cost_cycles",
                k.sample_cost_cycles as f64,
                0.0,
                1e9,
            ),
        ];
        if let Some(v) = k.ts_quantum_ms {
            checks.push(("kernel.ts_quantum_ms", v, lo, hi));
        }
        if let Some(v) = k.fx_quantum_ms {
            checks.push(("kernel.fx_quantum_ms", v, lo, hi));
        }
        if let Some(v) = k.slice_profile_ms {
            checks.push(("kernel.slice_profile_ms", v, 0.1, 1000.0));
        }
        for (key, v, min, max) in checks {
            if !(v >= min && v <= max) {
                return Err(RangeError {
                    key: key.to_string(),
                    message: format!(
                        "{key} = {v} is out of range: give {} to {}",
                        if min == f64::MIN_POSITIVE {
                            "a number above 0, up".to_string()
                        } else {
                            num(min)
                        },
                        num(max)
                    ),
                });
            }
        }
        if let Some(g) = self.threads.iter().find(|g| g.count == 0) {
            return Err(RangeError {
                key: "count".into(),
                message: format!(
                    "thread group '{}' has count 0: give 1 to {MAX_THREADS}",
                    g.name()
                ),
            });
        }
        let total: u64 = self.threads.iter().map(|g| g.count as u64).sum();
        if total > MAX_THREADS as u64 {
            return Err(RangeError {
                key: "count".into(),
                message: format!("{total} threads in all; a simulation runs at most {MAX_THREADS}"),
            });
        }
        if !(self.warmup_ms >= 0.0 && self.warmup_ms < self.duration_ms) {
            return Err(RangeError {
                key: "warmup_ms".into(),
                message: format!(
                    "warmup_ms = {} must be at least 0 and shorter than duration_ms ({})",
                    self.warmup_ms, self.duration_ms
                ),
            });
        }
        Ok(())
    }

    /// A run of `threads` on `machine` with defaults for everything else.
    pub fn new(machine: &str, threads: Vec<ThreadGroup>) -> SimConfig {
        SimConfig {
            machine: MachineSpec::Preset(machine.to_string()),
            threads,
            kernel: KernelConfig::default(),
            policies: Vec::new(),
            partition: None,
            duration_ms: default_duration(),
            warmup_ms: 0.0,
            sample_ms: default_sample(),
            stop_after_segments: false,
            stop_after_quanta: None,
            seed: default_seed(),
        }
    }
}

impl SimConfig {
    /// This configuration with the machine replaced by its full resolved description,
    /// as written beside results.
    pub fn resolved(&self) -> Result<SimConfig, MachineError> {
        let mut c = self.clone();
        c.machine = MachineSpec::Custom(Box::new(self.machine.resolve()?));
        Ok(c)
    }
}
