//! Configuration of one simulation run. Every field has a documented default; unknown
//! keys are rejected; the resolved configuration is written beside every result.

use crate::hw::machine::{MachineConfig, MachineError};
use crate::workload::{profile, LocalityModel, WorkloadError};
use cachesched_policies::PolicySpec;
use serde::{Deserialize, Serialize};

/// The kernel's baseline scheduling class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    /// Linux CFS/EEVDF-like weighted fair scheduling (default).
    #[default]
    Cfs,
    /// Solaris time-sharing-like multi-level feedback queue.
    Ts,
    /// Fixed-priority round robin.
    Rr,
}

impl Baseline {
    /// Parses `cfs`, `ts` or `rr`.
    pub fn parse(s: &str) -> Option<Baseline> {
        match s {
            "cfs" => Some(Baseline::Cfs),
            "ts" => Some(Baseline::Ts),
            "rr" => Some(Baseline::Rr),
            _ => None,
        }
    }

    /// The short name.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Cfs => "cfs",
            Baseline::Ts => "ts",
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
    /// Load-balancing period in ms (default 4).
    pub balance_interval_ms: f64,
    /// A thread that ran within this many microseconds is cache-hot and not migrated by
    /// the load balancer unless balancing keeps failing (default 500, as Linux).
    pub migration_cost_us: f64,
    /// Ignore cache affinity: wake-ups go to a random idle CPU and the balancer ignores
    /// cache-hotness (default false).
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
            balance_interval_ms: 4.0,
            migration_cost_us: 500.0,
            affinity_oblivious: false,
            starvation_limit_ms: 2000.0,
            corun_segment_max_ms: 10.0,
            page_placement: PagePlacement::Random,
        }
    }
}

/// Where the machine comes from: a preset name (optionally resizing the LLC) or a full
/// inline description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Start time in ms (default 0).
    #[serde(default)]
    pub start_ms: f64,
    /// Nice value (default 0).
    #[serde(default)]
    pub nice: i32,
    /// Label used in reports (default: the profile name).
    #[serde(default)]
    pub label: Option<String>,
}

fn one() -> u32 {
    1
}

impl ThreadGroup {
    /// A group of `count` threads of profile `name`.
    pub fn of(name: &str, count: u32) -> ThreadGroup {
        ThreadGroup {
            profile: Some(name.to_string()),
            model: None,
            trace: None,
            trace_cpi: None,
            phases: Vec::new(),
            threads_per_group: None,
            count,
            same_process: false,
            start_ms: 0.0,
            nice: 0,
            label: None,
        }
    }

    /// What the group's threads run, and its label. Trace files are read here.
    pub fn resolve(&self) -> Result<(Source, String), WorkloadError> {
        let given = [
            self.profile.is_some(),
            self.model.is_some(),
            self.trace.is_some(),
            !self.phases.is_empty(),
        ];
        if given.iter().filter(|&&g| g).count() != 1 {
            return Err(WorkloadError::Invalid(
                "a thread group needs exactly one of profile, model, trace or phases".into(),
            ));
        }
        if !(-20..=19).contains(&self.nice) {
            return Err(WorkloadError::Invalid(format!(
                "nice {} is outside -20..=19",
                self.nice
            )));
        }
        if !(self.start_ms >= 0.0) {
            return Err(WorkloadError::Invalid(
                "start_ms must be non-negative".into(),
            ));
        }
        let (src, name) = if let Some(path) = &self.trace {
            let bytes = std::fs::read(path)
                .map_err(|e| WorkloadError::Invalid(format!("cannot read trace '{path}': {e}")))?;
            crate::trace::TraceThread::validate(&bytes).map_err(|e| {
                WorkloadError::Invalid(format!(
                    "trace '{path}': {e} (record one with `cachesched trace record --out FILE -- CMD`)"
                ))
            })?;
            let cpi = self.trace_cpi.unwrap_or(1.0);
            if !(cpi >= 0.25) {
                return Err(WorkloadError::Invalid(
                    "trace_cpi must be at least 0.25".into(),
                ));
            }
            let name = std::path::Path::new(path)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into());
            (Source::Trace(std::sync::Arc::new(bytes), cpi), name)
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
            (Source::Phased(v), "phased".to_string())
        } else if let Some(p) = &self.profile {
            (Source::Model(profile(p)?), p.clone())
        } else {
            let m = self.model.clone().expect("checked above");
            (Source::Model(m), "custom".to_string())
        };
        if let Source::Model(m) = &src {
            m.validate()?;
        }
        Ok((src, self.label.clone().unwrap_or(name)))
    }

    /// Parses the command-line mix form `name:count,name:count`, where a name is a
    /// profile or the path of a binary trace (ending in `.cst`).
    pub fn parse_mix(s: &str) -> Result<Vec<ThreadGroup>, WorkloadError> {
        s.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                let (name, n) = p.rsplit_once(':').unwrap_or((p, "1"));
                let count: u32 = n.trim().parse().map_err(|_| {
                    WorkloadError::Invalid(format!(
                        "'{p}': count must be a positive integer (profile:count)"
                    ))
                })?;
                let name = name.trim();
                let mut g = ThreadGroup::of(name, count);
                if name.ends_with(".cst") {
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
            .collect()
    }
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

/// What a thread group runs.
#[derive(Debug, Clone)]
pub enum Source {
    /// A synthetic locality model.
    Model(LocalityModel),
    /// A binary trace and the base CPI to replay it with.
    Trace(std::sync::Arc<Vec<u8>>, f64),
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
    /// Simulated duration in ms, including warm-up (default 1000).
    #[serde(default = "default_duration")]
    pub duration_ms: f64,
    /// Counters in the result start after this many ms (default 0).
    #[serde(default)]
    pub warmup_ms: f64,
    /// Timeline sample interval in ms (default 10).
    #[serde(default = "default_sample")]
    pub sample_ms: f64,
    /// The seed that drives everything (default 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
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

impl SimConfig {
    /// A run of `threads` on `machine` with defaults for everything else.
    pub fn new(machine: &str, threads: Vec<ThreadGroup>) -> SimConfig {
        SimConfig {
            machine: MachineSpec::Preset(machine.to_string()),
            threads,
            kernel: KernelConfig::default(),
            policies: Vec::new(),
            duration_ms: default_duration(),
            warmup_ms: 0.0,
            sample_ms: default_sample(),
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
