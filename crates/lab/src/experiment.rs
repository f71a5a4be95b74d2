//! `cachesched experiment`: a scenario file → many runs (in parallel, with a progress
//! bar) → results JSON and CSV, the resolved scenario, SVG plots and a Markdown report.
//!
//! A scenario is a base run configuration, a list of *variants* (policies, baseline,
//! kernel switches), an optional sweep over last-level-cache sizes, and seeds. Every
//! combination is one run; tables and plots show the mean over seeds.

use crate::files::write_file;
use crate::interrupt::interrupt_flag;
use crate::svg::{line_chart, Series, XAxis};
use anyhow::{bail, Context, Result};
use cachesched_policies::PolicySpec;
use cachesched_sim::result::mean_ci95;
use cachesched_sim::result::ThreadResult;
use cachesched_sim::{
    Baseline, KernelConfig, MachineSpec, RunResult, SimConfig, SimError, Simulation, ThreadGroup,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One variant of a scenario: what differs between compared runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Label in tables and legends.
    pub label: String,
    /// Policies (default: none, the baseline alone).
    #[serde(default)]
    pub policies: Vec<PolicySpec>,
    /// Baseline class (default: the scenario's).
    #[serde(default)]
    pub baseline: Option<Baseline>,
    /// Affinity-oblivious kernel (default: the scenario's).
    #[serde(default)]
    pub affinity_oblivious: Option<bool>,
    /// The number of online CPUs the CFS-like baseline scales its tunables by (default:
    /// the machine's CPUs; at least those). Linux multiplies its latency target and
    /// minimum granularity by `1 + log2(min(n, 8))` of the CPUs online
    /// (`get_update_sysctl_factor` in kernel/sched/fair.c), not of the CPUs a thread is
    /// pinned to, so a machine emulated by pinning threads to some CPUs of a larger one
    /// (the timeslice paper's 2-core set, pinned on its quad-core Xeon, §4.2) has the
    /// larger machine's slices. Applied as the scenario's `kernel.cfs_latency_ms` and
    /// `kernel.cfs_min_granularity_ms` rescaled from the machine's factor to `n`'s (the
    /// resolved configuration shows the rescaled values); only for a variant whose
    /// baseline is CFS. Linux scales its wake-up granularity too; the simulated kernel
    /// scales it by no count (`kernel.cfs_wakeup_granularity_ms` as given), and so
    /// neither does this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cfs_online_cpus: Option<u32>,
    /// Equal way-partitioning of the shared last-level cache (default: none).
    #[serde(default)]
    pub partition: Option<cachesched_sim::config::Partition>,
    /// Threads of this variant in place of the scenario's (default: the scenario's), for
    /// comparisons between workloads, such as a profile with one parameter changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<ThreadGroup>>,
    /// Pin every thread of the multi-threaded processes (thread groups with
    /// `same_process`), as the thread-clustering paper's manual placements, or of the
    /// groups named in `pin_labels` (default: none, the kernel places them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<cachesched_sim::Pin>,
    /// The thread groups `pin` applies to, by label (default: none, meaning the
    /// multi-threaded processes), such as the affinity paper's main benchmarks bound
    /// each to its own core while the interfering ones are not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pin_labels: Vec<String>,
    /// Threads this variant runs besides the scenario's (or the mix's), after them
    /// (default: none), such as the affinity paper's base vectors: each mix keeps its
    /// benchmark, each variant adds the interference it is about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_threads: Vec<ThreadGroup>,
}

/// One mix of a scenario run as several ([`Scenario::mixes`]): every variant, size and
/// seed runs on each mix, and each mix is reported on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    /// Label (letters, digits, `-`, `_`, `.`): names the mix's output directory and its
    /// rows in reports.
    pub label: String,
    /// The mix's threads.
    pub threads: Vec<ThreadGroup>,
}

/// One scenario of a file, planned ([`Scenario::plan`]): a mix's scenario (or the
/// file's own, without mixes) and its runs.
pub struct Planned {
    /// The mix's label (`None`: the scenario has no mixes).
    pub mix: Option<String>,
    /// The scenario it runs.
    pub sc: Scenario,
    /// Its runs.
    pub jobs: Vec<Job>,
}

impl Planned {
    /// Where its outputs go under the scenario's output directory `base`: a
    /// subdirectory named after its mix, or `base` itself.
    pub fn out(&self, base: &std::path::Path) -> PathBuf {
        self.mix
            .as_ref()
            .map_or(base.to_path_buf(), |m| base.join(m))
    }
}

/// A sweep over one machine parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Last-level cache sizes in KiB.
    pub llc_kb: Vec<u64>,
}

/// An experiment scenario. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name (also the default output directory).
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
    /// Machine preset or description.
    pub machine: MachineSpec,
    /// Threads (default: none; a scenario gives these or `mixes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadGroup>,
    /// Several mixes instead of `threads` (default: none), such as the cache-fair
    /// paper's fast and slow schedule of each program: the scenario runs as one
    /// scenario per mix ([`Scenario::per_mix`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mixes: Vec<Mix>,
    /// Kernel parameters shared by all variants.
    #[serde(default)]
    pub kernel: KernelConfig,
    /// Simulated duration per run, ms (default 1000).
    #[serde(default = "default_duration")]
    pub duration_ms: f64,
    /// Warm-up per run, ms (default 0).
    #[serde(default)]
    pub warmup_ms: f64,
    /// Timeline sample interval, ms (default 10).
    #[serde(default = "default_sample")]
    pub sample_ms: f64,
    /// End each run when every thread with a work segment has completed it, with
    /// `duration_ms` as the limit (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_after_segments: bool,
    /// End each run's measured window when every thread has begun `quanta` slices in
    /// it and it has lasted `min_ms`, with `duration_ms` as the limit (default: none;
    /// [`cachesched_sim::QuantaStop`]): each variant's window sized to its own slices,
    /// not to the longest slices of the file. Metrics that count events over the
    /// window (`context_switches`, `migrations`, `remote_accesses`) are refused with
    /// it, as windows then differ between variants; their rates are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after_quanta: Option<cachesched_sim::QuantaStop>,
    /// Seeds; each combination runs once per seed (default: 1 to 5). Under
    /// `cachesched reproduce` (neither `--quick` nor `--seeds`) these are the most a
    /// comparison gets: see `min_seeds`.
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// Seeds every variant runs first under `cachesched reproduce`, which then adds the
    /// next seed of `seeds`, one at a time, to each comparison with the baseline still
    /// undecided ([`crate::seeds`]); from 2 (or the number of seeds, if fewer) to the
    /// number of seeds (default: 3, or every seed when there are fewer). As many as
    /// `seeds` runs every seed at once, as `cachesched experiment`, `--quick` and
    /// `--seeds` do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_seeds: Option<usize>,
    /// Variants to compare (default: the baseline alone).
    #[serde(default = "default_variants")]
    pub variants: Vec<Variant>,
    /// Optional sweep.
    #[serde(default)]
    pub sweep: Option<Sweep>,
    /// Metrics to tabulate and plot (default: ips, l2_miss_ratio, cpu_share_cv).
    #[serde(default = "default_metrics")]
    pub metrics: Vec<String>,
    /// Values the paper reports for this figure (default: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paper: Vec<crate::paper::PaperValue>,
    /// Scheduling quanta every thread of the first variant (the baseline) must receive
    /// in each measured window for the window to count as long enough (default 10; 0:
    /// no check). Checked after the runs and reported.
    #[serde(default = "default_min_quanta")]
    pub min_quanta: u32,
    /// What `--quick` runs instead (default: the first two seeds, the same windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quick: Option<Quick>,
    /// The paper's class of each program, by thread label (default: none).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub classes: std::collections::BTreeMap<String, Class>,
    /// Paper-specific analyses added to `cachesched reproduce`'s report: `casc`
    /// (classification, cache illusion, time to steady state). Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analyses: Vec<String>,
    /// Variants, by label, that the `timeslice` analysis also compares every other
    /// variant with, as it does with `cfs` (default: none): a diagnostic's fixed slice
    /// standing in for another baseline, such as the slice CFS gives with more programs
    /// per core. A file with references is a diagnostic: its curve stays out of the
    /// comparison across files, where it would repeat another file's layout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
}

/// A program's class in a cache-sharing paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Takes much of a shared cache, and suffers when it gets less.
    Greedy,
    /// Needs little of a shared cache.
    Frugal,
}

/// The reduced version of a scenario (`--quick`): each field replaces the scenario's.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    /// Seeds (default: the scenario's first two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<Vec<u64>>,
    /// Simulated duration per run, ms (default: the scenario's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// Warm-up per run, ms (default: the scenario's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_ms: Option<f64>,
    /// Sweep points, LLC KiB, a subset of the scenario's (default: the scenario's);
    /// paper values at other points are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_kb: Option<Vec<u64>>,
    /// In a scenario of several mixes, only its first this many (default: all); paper
    /// values about the mixes left out are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixes: Option<usize>,
}

/// One mix's label, scenario, jobs and results.
pub type MixRuns = (Option<String>, Scenario, Vec<Job>, Vec<RunResult>);

fn default_duration() -> f64 {
    1000.0
}
fn default_sample() -> f64 {
    10.0
}
fn default_seeds() -> Vec<u64> {
    (1..=5).collect()
}
fn default_variants() -> Vec<Variant> {
    vec![Variant {
        label: "baseline".into(),
        ..Default::default()
    }]
}
fn default_min_quanta() -> u32 {
    10
}
fn default_metrics() -> Vec<String> {
    ["ips", "l2_miss_ratio", "cpu_share_cv"]
        .map(String::from)
        .to_vec()
}

/// Metrics a scenario may name: name, description, and the column or axis label
/// (with its unit) that reports show.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "ips",
        "instructions per second, all threads",
        "throughput (instructions/s)",
    ),
    ("l2_miss_ratio", "aggregate L2 miss ratio", "L2 miss ratio"),
    (
        "llc_mpki",
        "LLC misses per 1000 instructions",
        "LLC misses per 1,000 instructions",
    ),
    (
        "cpu_share_cv",
        "std. deviation of threads' CPU shares / mean",
        "CPU-share deviation / mean",
    ),
    (
        "ipc",
        "instructions per cycle, summed over threads",
        "instructions per cycle (sum)",
    ),
    ("context_switches", "context switches", "context switches"),
    (
        "context_switches_per_s",
        "context switches per second of the window",
        "context switches per second",
    ),
    ("migrations", "migrations", "migrations"),
    (
        "remote_accesses",
        "accesses served by another chip's cache",
        "remote cache accesses",
    ),
    (
        "remote_stall_cpki",
        "cycles stalled on data from another chip's cache per 1000 instructions",
        "remote-cache stall cycles per 1,000 instructions",
    ),
    (
        "remote_stall_share",
        "cycles stalled on data from another chip's cache, as a share of all cycles",
        "remote-cache stall cycles / cycles",
    ),
    (
        "remote_share_of_stalls",
        "cycles stalled on data from another chip's cache, as a share of memory stall cycles",
        "remote-cache stalls / memory stalls",
    ),
    (
        "samples_per_ms",
        "address samples delivered per simulated ms, over the whole run (warm-up included)",
        "address samples per ms",
    ),
    (
        "bus_utilization",
        "memory bus utilisation",
        "memory bus utilisation (fraction)",
    ),
    (
        "stp",
        "system throughput: the sum of threads' progress against running alone (weighted speedup)",
        "system throughput (STP, weighted speedup)",
    ),
    (
        "antt",
        "average normalized turnaround time: threads' mean slowdown against running alone",
        "ANTT (mean slowdown against alone)",
    ),
    (
        "max_slowdown",
        "the largest slowdown of a thread against running alone",
        "worst slowdown against alone",
    ),
    (
        "jain",
        "Jain's fairness index of threads' progress against running alone",
        "Jain's index of progress against alone",
    ),
];

/// Metrics that count events over the whole measured window (not comparable between
/// windows of different lengths, [`Scenario::stop_after_quanta`]).
pub const WINDOW_COUNTS: &[&str] = &["context_switches", "migrations", "remote_accesses"];

/// Metrics computed against each thread's solo run (made automatically, cached).
pub const SOLO_METRICS: &[&str] = &["stp", "antt", "max_slowdown", "jain"];

/// Whether a larger value of metric `name` is better (`None`: neither, such as counts
/// of mechanism events).
pub fn higher_is_better(name: &str) -> Option<bool> {
    match name {
        "ips" | "ipc" | "stp" | "jain" => Some(true),
        "l2_miss_ratio" | "llc_mpki" | "cpu_share_cv" | "antt" | "max_slowdown"
        | "remote_stall_cpki" | "remote_stall_share" => Some(false),
        _ => None,
    }
}

/// The label (with unit) reports show for metric `name`.
pub fn metric_label(name: &str) -> &'static str {
    METRICS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or("?", |(_, _, l)| l)
}

pub use cachesched_core::num::plain;

/// The value of metric `name` in `r` (NaN for a metric against solo runs when `r`'s
/// threads have no solo references).
pub fn metric(r: &RunResult, name: &str) -> Option<f64> {
    Some(match name {
        "ips" => r.ips,
        "l2_miss_ratio" => r.l2_miss_ratio,
        "llc_mpki" => r.llc_mpki,
        "cpu_share_cv" => r.cpu_share_cv,
        "ipc" => r.threads.iter().map(|t| t.counters.ipc()).sum(),
        "context_switches" => r.kernel.context_switches as f64,
        "context_switches_per_s" => {
            r.kernel.context_switches as f64 / (r.measured_ms / 1e3).max(1e-12)
        }
        "migrations" => r.kernel.migrations as f64,
        "remote_accesses" => r.totals.remote_accesses as f64,
        "remote_stall_cpki" => {
            1000.0 * r.totals.data_stall_remote_cycles as f64 / r.totals.instructions.max(1) as f64
        }
        "samples_per_ms" => {
            let ms = r
                .timeline
                .last()
                .map_or(r.measured_ms, |p| p.t_ms.max(r.measured_ms));
            r.kernel.address_samples as f64 / ms.max(1e-9)
        }
        "remote_share_of_stalls" => {
            r.totals.data_stall_remote_cycles as f64 / r.totals.mem_stall_cycles.max(1) as f64
        }
        "remote_stall_share" => {
            r.totals.data_stall_remote_cycles as f64 / r.totals.cycles.max(1) as f64
        }
        "bus_utilization" => r.bus_utilization,
        "stp" => r.multiprogram().map_or(f64::NAN, |m| m.stp),
        "antt" => r.multiprogram().map_or(f64::NAN, |m| m.antt),
        "max_slowdown" => r.multiprogram().map_or(f64::NAN, |m| m.max_slowdown),
        "jain" => r.multiprogram().map_or(f64::NAN, |m| m.jain),
        _ => return None,
    })
}

/// The change of metric `m` of variant `v` against variant `base` at sweep point `p`,
/// paired by seed, in percent of the baseline: the mean over seeds and its 95%
/// interval's half-width (NaN with one seed).
pub fn paired_change(
    jobs: &[Job],
    runs: &[RunResult],
    (base, v): (usize, usize),
    p: Option<u64>,
    m: &str,
) -> (f64, f64) {
    let at = |variant: usize| {
        jobs.iter()
            .zip(runs)
            .filter(move |(j, _)| j.variant == variant && j.llc_kb == p)
            .map(|(j, r)| (j.seed, metric(r, m).expect("known metric")))
    };
    let b: std::collections::BTreeMap<u64, f64> = at(base).collect();
    let d: Vec<f64> = at(v)
        .filter_map(|(seed, x)| b.get(&seed).map(|&b| 100.0 * (x - b) / b))
        .collect();
    over_seeds(&d)
}

/// Mean over seeds and the half-width of its 95% interval, as [`mean_ci95`], except
/// that values identical across several seeds have no interval (NaN): the seeds did not
/// vary the run (a workload without seeded randomness, such as recorded traces), so a
/// zero width would claim a certainty that was never sampled.
pub fn over_seeds(v: &[f64]) -> (f64, f64) {
    let (m, h) = mean_ci95(v);
    if v.len() > 1 && v.iter().all(|x| x.to_bits() == v[0].to_bits()) {
        return (m, f64::NAN);
    }
    (m, h)
}

/// A mean and its 95% half-width over seeds as tables show them: `MEAN UNIT ± HALF`,
/// the mean alone when there is no interval, `n/a` when there is no mean.
pub fn show((m, h): (f64, f64), unit: &str) -> String {
    if !m.is_finite() {
        "n/a".into()
    } else if h.is_finite() {
        format!("{}{unit} ± {}", plain(m), plain(h))
    } else {
        format!("{}{unit}", plain(m))
    }
}

/// What a paired change of a metric means: an improvement or a regression only when
/// its 95% interval excludes zero.
pub fn verdict(m: &str, (mean, half): (f64, f64)) -> &'static str {
    if !mean.is_finite() {
        return if SOLO_METRICS.contains(&m) {
            // a slowdown against alone is unbounded when a thread made no progress at all
            "unbounded in some run: a thread without progress"
        } else {
            // a change in percent of a baseline that is zero in some seed
            "undefined: the baseline is 0 in some run"
        };
    }
    if !half.is_finite() {
        return "no interval";
    }
    if (mean - half..=mean + half).contains(&0.0) {
        return "no clear change";
    }
    match (higher_is_better(m), mean > 0.0) {
        (Some(h), up) if h == up => "better",
        (Some(_), _) => "worse",
        (None, true) => "higher",
        (None, false) => "lower",
    }
}

/// One run of a scenario.
#[derive(Clone)]
pub struct Job {
    /// Index of the variant.
    pub variant: usize,
    /// Sweep point.
    pub llc_kb: Option<u64>,
    /// Seed.
    pub seed: u64,
    /// The run's configuration.
    pub cfg: SimConfig,
}

#[derive(Serialize)]
struct Row<'a> {
    variant: &'a str,
    llc_kb: Option<u64>,
    seed: u64,
    result: &'a RunResult,
}

/// One run of `results.json`, read back.
#[derive(Deserialize)]
struct OwnedRow {
    variant: String,
    llc_kb: Option<u64>,
    seed: u64,
    result: RunResult,
}

impl Scenario {
    /// Checks the scenario's own fields.
    pub fn validate(&self) -> Result<()> {
        if self.variants.is_empty() || self.seeds.is_empty() {
            bail!("a scenario needs at least one variant and one seed");
        }
        if let Some(k) = self.min_seeds {
            let n = self.seeds.len();
            if k > n || k < 2.min(n) {
                bail!(
                    "min_seeds = {k}: give from {} to the number of seeds, {n}",
                    2.min(n)
                );
            }
        }
        if self.threads.is_empty() == self.mixes.is_empty() {
            bail!("a scenario gives its threads either as `threads` or as `mixes`, exactly one of them");
        }
        if self.stop_after_quanta.is_some() {
            if let Some(m) = self
                .metrics
                .iter()
                .find(|m| WINDOW_COUNTS.contains(&m.as_str()))
            {
                bail!(
                    "metric '{m}' counts events over the measured window, whose length \
                     stop_after_quanta makes differ between variants: use a rate \
                     (context_switches_per_s) or drop stop_after_quanta"
                );
            }
        }
        let mut mixes: Vec<&str> = self.mixes.iter().map(|m| m.label.as_str()).collect();
        if let Some(m) = self.mixes.iter().find(|m| {
            m.threads.is_empty()
                || m.label.is_empty()
                || !m
                    .label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        }) {
            bail!(
                "mix '{}': a mix needs threads and a label of letters, digits, '-', '_' or '.'",
                m.label
            );
        }
        for m in &self.mixes {
            crate::files::component(&m.label, "mix label")?;
        }
        mixes.sort();
        mixes.dedup();
        if mixes.len() != self.mixes.len() {
            bail!("mix labels must be unique");
        }
        for m in &self.metrics {
            if !METRICS.iter().any(|(n, _, _)| n == m) {
                let known: Vec<&str> = METRICS.iter().map(|(n, _, _)| *n).collect();
                bail!("unknown metric '{m}'; known metrics: {}", known.join(", "));
            }
        }
        let mut labels: Vec<&str> = self.variants.iter().map(|v| v.label.as_str()).collect();
        labels.sort();
        labels.dedup();
        if labels.len() != self.variants.len() {
            bail!("variant labels must be unique");
        }
        for v in &self.variants {
            if v.pin.is_none() && !v.pin_labels.is_empty() {
                bail!("variant '{}': pin_labels without pin", v.label);
            }
            if v.cfs_online_cpus.is_some()
                && v.baseline.unwrap_or(self.kernel.baseline) != Baseline::Cfs
            {
                bail!(
                    "variant '{}': cfs_online_cpus scales the CFS baseline's tunables, but \
                     the variant's baseline is not CFS: remove it or set baseline = \"cfs\"",
                    v.label
                );
            }
            // every thread set the variant can run on: the scenario's or each mix's
            let sets: Vec<&Vec<ThreadGroup>> = match &v.threads {
                Some(t) => vec![t],
                None if self.mixes.is_empty() => vec![&self.threads],
                None => self.mixes.iter().map(|m| &m.threads).collect(),
            };
            for l in &v.pin_labels {
                let named = |g: &ThreadGroup| g.label.as_deref() == Some(l.as_str());
                if !sets
                    .iter()
                    .all(|s| s.iter().chain(&v.add_threads).any(named))
                {
                    bail!(
                        "variant '{}': pin_labels names '{l}', which is not the label of a \
                         thread group in every mix it runs on",
                        v.label
                    );
                }
            }
        }
        if self.sweep.as_ref().is_some_and(|s| s.llc_kb.is_empty()) {
            bail!("sweep.llc_kb is empty");
        }
        for pv in &self.paper {
            pv.validate(self).map_err(anyhow::Error::msg)?;
        }
        if let Some(a) = self
            .analyses
            .iter()
            .find(|a| crate::papers::find(a).is_none())
        {
            bail!(
                "unknown analysis '{a}'; known: {}",
                crate::papers::names().join(", ")
            );
        }
        for (i, r) in self.references.iter().enumerate() {
            if !self.analyses.iter().any(|a| a == "timeslice") {
                bail!(
                    "references name '{r}', but only the timeslice analysis uses them: add \
                     \"timeslice\" to analyses or remove references"
                );
            }
            if r == "cfs" {
                bail!("references name 'cfs', which is always the baseline: remove it");
            }
            if !self.variants.iter().any(|v| &v.label == r) {
                let labels: Vec<&str> = self.variants.iter().map(|v| v.label.as_str()).collect();
                bail!(
                    "references name '{r}', which is not a variant's label; the variants: {}",
                    labels.join(", ")
                );
            }
            if self.references[..i].contains(r) {
                bail!("references name '{r}' twice: name each once");
            }
        }
        if let Some(q) = &self.quick {
            if q.seeds.as_ref().is_some_and(|s| s.is_empty()) {
                bail!("quick.seeds is empty");
            }
            if let Some(ks) = &q.llc_kb {
                let sweep: &[u64] = self.sweep.as_ref().map_or(&[], |s| &s.llc_kb);
                if let Some(k) = ks.iter().find(|k| !sweep.contains(k)) {
                    bail!("quick.llc_kb: {k} KiB is not a point of the sweep");
                }
            }
        }
        Ok(())
    }

    /// Sweeps over the LLC sizes `ks` instead; paper values at other sizes are left out.
    pub fn set_sweep(&mut self, ks: &[u64]) {
        self.sweep = Some(Sweep {
            llc_kb: ks.to_vec(),
        });
        self.paper.retain_mut(|pv| match &mut pv.llc_kb {
            Some(at) => {
                at.retain(|k| ks.contains(k));
                !at.is_empty()
            }
            None => true,
        });
    }

    /// The seeds every variant runs first when seeds are added one at a time
    /// ([`crate::seeds`]): `min_seeds`, by default 3 or every seed when there are fewer.
    pub fn first_seeds(&self) -> usize {
        self.min_seeds.unwrap_or(3).min(self.seeds.len())
    }

    /// Whether `cachesched reproduce` adds seeds one at a time (some comparison may
    /// stop before the last seed), rather than running every seed at once.
    pub fn sequential(&self) -> bool {
        self.first_seeds() < self.seeds.len()
    }

    /// Runs every seed at once: `min_seeds` is the number of seeds (for `cachesched
    /// experiment`, `--quick` and `--seeds`, which run what they say).
    pub fn every_seed(&mut self) {
        self.min_seeds = Some(self.seeds.len());
    }

    /// The reduced version `--quick` runs: the `quick` table's seeds and windows
    /// (default: the first two seeds), every seed at once, with a line saying so in the
    /// description.
    pub fn reduced(&self) -> Scenario {
        let q = self.quick.clone().unwrap_or_default();
        let mut s = self.clone();
        s.seeds = q
            .seeds
            .unwrap_or_else(|| self.seeds.iter().take(2).copied().collect());
        s.every_seed();
        s.duration_ms = q.duration_ms.unwrap_or(self.duration_ms);
        s.warmup_ms = q.warmup_ms.unwrap_or(self.warmup_ms);
        if let Some(ks) = &q.llc_kb {
            s.set_sweep(ks);
        }
        if let Some(n) = q.mixes {
            s.mixes.truncate(n.max(1));
            let kept: Vec<String> = s.mixes.iter().map(|m| m.label.clone()).collect();
            // (a program's mixes may be labelled PROGRAM-SOMETHING)
            s.paper.retain(|pv| {
                pv.program.as_ref().is_none_or(|p| {
                    kept.iter()
                        .any(|k| k == p || k.starts_with(&format!("{p}-")))
                })
            });
        }
        s.description = format!(
            "{} **Reduced run (--quick): seeds {:?} instead of {:?}, {} ms per run ({} ms warm-up) \
             instead of {} ms ({} ms){}; not the reproduction.**",
            self.description,
            s.seeds,
            self.seeds,
            s.duration_ms,
            s.warmup_ms,
            self.duration_ms,
            self.warmup_ms,
            if s.mixes.len() < self.mixes.len() {
                format!(", the first {} of {} mixes", s.mixes.len(), self.mixes.len())
            } else {
                String::new()
            }
        );
        s
    }

    /// The scenario as one scenario per mix, each with its mix's label (`None` and the
    /// scenario itself when it has no mixes): named `NAME/LABEL`, with the mix's
    /// threads.
    pub fn per_mix(&self) -> Vec<(Option<String>, Scenario)> {
        if self.mixes.is_empty() {
            return vec![(None, self.clone())];
        }
        self.mixes
            .iter()
            .map(|m| {
                let sc = Scenario {
                    name: format!("{}/{}", self.name, m.label),
                    description: format!("Mix `{}`. {}", m.label, self.description),
                    threads: m.threads.clone(),
                    mixes: Vec::new(),
                    // the paper's values are about the analysis over all mixes
                    paper: Vec::new(),
                    ..self.clone()
                };
                (Some(m.label.clone()), sc)
            })
            .collect()
    }

    /// Every run of every mix ([`Scenario::per_mix`]), each checked to be buildable,
    /// before any of them runs; an error names the mix.
    pub fn plan(&self) -> Result<Vec<Planned>> {
        self.per_mix()
            .into_iter()
            .map(|(mix, sc)| {
                let jobs = match &mix {
                    Some(m) => sc.jobs().with_context(|| format!("in mix '{m}'"))?,
                    None => sc.jobs()?,
                };
                Ok(Planned { mix, sc, jobs })
            })
            .collect()
    }

    /// Variant `v`'s kernel settings on a machine of `cpus` CPUs: the scenario's, with
    /// the variant's baseline and affinity settings, and its CFS tunables rescaled to
    /// `cfs_online_cpus` CPUs online (refused if fewer than the machine's).
    fn variant_kernel(&self, v: &Variant, cpus: usize) -> Result<KernelConfig> {
        let mut kernel = self.kernel.clone();
        if let Some(b) = v.baseline {
            kernel.baseline = b;
        }
        if let Some(o) = v.affinity_oblivious {
            kernel.affinity_oblivious = o;
        }
        if let Some(n) = v.cfs_online_cpus {
            if (n as usize) < cpus {
                bail!(
                    "variant '{}': cfs_online_cpus = {n} is fewer than the machine's {cpus} \
                     CPUs, which are all online: give {cpus} or more",
                    v.label
                );
            }
            let (from, to) = (cfs_factor(cpus), cfs_factor(n as usize));
            kernel.cfs_latency_ms = rescaled(kernel.cfs_latency_ms, from, to);
            kernel.cfs_min_granularity_ms = rescaled(kernel.cfs_min_granularity_ms, from, to);
        }
        Ok(kernel)
    }

    /// Every run of the scenario, each checked to be buildable.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let sizes: Vec<Option<u64>> = match &self.sweep {
            Some(s) => s.llc_kb.iter().map(|&k| Some(k)).collect(),
            None => vec![None],
        };
        let base = self.machine.resolve()?;
        let cpus = base.topology()?.nr_cpus();
        let kernels = self
            .variants
            .iter()
            .map(|v| self.variant_kernel(v, cpus))
            .collect::<Result<Vec<_>>>()?;
        let mut jobs = Vec::new();
        for &llc in &sizes {
            let machine = match llc {
                Some(kb) => MachineSpec::Custom(Box::new(base.clone().with_llc_bytes(kb << 10)?)),
                None => MachineSpec::Custom(Box::new(base.clone())),
            };
            for ((vi, v), kernel) in self.variants.iter().enumerate().zip(&kernels) {
                for &seed in &self.seeds {
                    let mut threads = v.threads.clone().unwrap_or_else(|| self.threads.clone());
                    threads.extend(v.add_threads.iter().cloned());
                    if let Some(pin) = v.pin {
                        for g in threads.iter_mut().filter(|g| {
                            if v.pin_labels.is_empty() {
                                g.same_process
                            } else {
                                g.label.as_ref().is_some_and(|l| v.pin_labels.contains(l))
                            }
                        }) {
                            g.pin = Some(pin);
                        }
                    }
                    let cfg = SimConfig {
                        machine: machine.clone(),
                        threads,
                        kernel: kernel.clone(),
                        policies: v.policies.clone(),
                        partition: v.partition,
                        duration_ms: self.duration_ms,
                        warmup_ms: self.warmup_ms,
                        sample_ms: self.sample_ms,
                        stop_after_segments: self.stop_after_segments,
                        stop_after_quanta: self.stop_after_quanta,
                        seed,
                    };
                    // fail before running anything if a run is misconfigured: once per
                    // size and variant (the seeds change nothing a check looks at, and
                    // building a run reads every trace its threads replay)
                    if seed == self.seeds[0] {
                        cfg.check_ranges()?;
                        Simulation::new(&cfg, None)?;
                    }
                    jobs.push(Job {
                        variant: vi,
                        llc_kb: llc,
                        seed,
                        cfg,
                    });
                }
            }
        }
        Ok(jobs)
    }
}

/// The thread still running that began the fewest slices (quanta) in run `r`'s
/// measured window (`None` if none is running).
pub fn fewest_slices(r: &RunResult) -> Option<&ThreadResult> {
    r.threads
        .iter()
        .filter(|t| !t.exited)
        .min_by_key(|t| t.slices)
}

/// The factor by which Linux's CFS scales its latency target and minimum granularity
/// with `cpus` CPUs online: `1 + log2(min(cpus, 8))`, rounded down (kernel/sched/fair.c,
/// `SCHED_TUNABLESCALING_LOG`), as the simulated kernel scales them by the machine's
/// CPUs.
pub fn cfs_factor(cpus: usize) -> f64 {
    1.0 + (cpus.clamp(1, 8) as f64).log2().floor()
}

/// A CFS tunable of `ms` (before scaling) rescaled so that the simulated kernel, which
/// multiplies it by factor `from` and truncates to whole ns, gets `ms` times factor
/// `to` rounded to the ns: the quotient `ms · to / from`, raised by the ulps its
/// rounding lost (a third or two thirds times three can fall one ns short).
fn rescaled(ms: f64, from: f64, to: f64) -> f64 {
    let want = (ms * to * 1e6).round() as u64;
    let mut x = ms * to / from;
    while (((x * from) * 1e6) as u64) < want {
        x = x.next_up();
    }
    x
}

/// The checks of a scenario's measured windows, as a Markdown list, and whether they
/// passed: every thread of every variant got at least `min_quanta` quanta; every
/// policy that reports when its measurements were done (`steady_ms`) was steady before
/// the warm-up ended; and, reported for judgement, how the first variant's L2 miss
/// ratio moves from the first to the second half of the window (a cold cache still
/// warming shows as a fall).
pub fn checks(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> (String, bool) {
    let mut md = String::new();
    let mut ok = true;
    let base: Vec<(&Job, &RunResult)> = jobs
        .iter()
        .zip(runs)
        .filter(|(j, _)| j.variant == 0)
        .collect();
    if sc.min_quanta > 0 {
        // Every variant is counted: the first is often the baseline with the shortest
        // slices, and a window long enough for it can hold no slice of a longer one.
        let per_variant: Vec<(usize, u64, &String, &Job)> = (0..sc.variants.len())
            .filter_map(|v| {
                jobs.iter()
                    .zip(runs)
                    .filter(|(j, _)| j.variant == v)
                    .filter_map(|(j, r)| fewest_slices(r).map(|t| (v, t.slices, &t.name, j)))
                    .min_by_key(|a| a.1)
            })
            .collect();
        if let Some(&(v, q, name, j)) = per_variant.iter().min_by_key(|a| a.1) {
            let short: Vec<String> = per_variant
                .iter()
                .filter(|a| a.1 < u64::from(sc.min_quanta))
                .map(|a| format!("`{}`", sc.variants[a.0].label))
                .collect();
            ok &= short.is_empty();
            md += &format!(
                "- Window length: the fewest quanta any thread of any variant received in a \
                 measured window is {q} (`{}`, {name}, seed {}{}), against at least {} \
                 required: {}. (Counted by the kernel: slices begun in the window, one per \
                 dispatch.)\n",
                sc.variants[v].label,
                j.seed,
                j.llc_kb.map_or(String::new(), |k| format!(", {k} KB")),
                sc.min_quanta,
                if short.is_empty() {
                    "long enough".to_string()
                } else {
                    format!("**TOO SHORT** for {}", short.join(", "))
                }
            );
        }
    }
    if sc.seeds.len() > 1 {
        let same = base.iter().all(|(j, r)| {
            base.iter()
                .filter(|(k, _)| k.llc_kb == j.llc_kb)
                .all(|(_, o)| o.totals == r.totals)
        });
        if same {
            ok = false;
            md += &format!(
                "- Seeds: **every run of `{}` is identical across the seeds** (the workload has \
                 no seeded randomness, as recorded traces have none): each point is one run, \
                 shown without an interval.\n",
                sc.variants[0].label
            );
        }
    }
    let steady: Vec<f64> = jobs
        .iter()
        .zip(runs)
        .filter_map(|(_, r)| r.policy_stats.get("steady_ms").copied())
        .collect();
    if !steady.is_empty() {
        let late = steady
            .iter()
            .filter(|&&s| s < 0.0 || s > sc.warmup_ms)
            .count();
        ok &= late == 0;
        let latest = steady
            .iter()
            .copied()
            .filter(|s| *s >= 0.0)
            .fold(f64::NEG_INFINITY, f64::max);
        md += &format!(
            "- Policies' measurements: {} of {} runs were steady (every measurement done) \
             within the {} ms warm-up; {}{}.\n",
            steady.len() - late,
            steady.len(),
            sc.warmup_ms,
            if latest.is_finite() {
                format!("the latest at {} ms", plain(latest))
            } else {
                "none was ever steady".into()
            },
            if late > 0 {
                "; **the others measured inside the window**"
            } else {
                ""
            }
        );
    }
    let drift: Vec<f64> = base
        .iter()
        .filter_map(|(_, r)| {
            let w: Vec<f64> = r
                .timeline
                .iter()
                .filter(|p| p.t_ms > sc.warmup_ms + 1e-9)
                .map(|p| p.l2_miss_ratio)
                .collect();
            if w.len() < 4 {
                return None;
            }
            let (a, b) = w.split_at(w.len() / 2);
            let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
            let (a, b) = (mean(a), mean(b));
            (a > 0.0).then(|| 100.0 * (b - a) / a)
        })
        .collect();
    if !drift.is_empty() {
        let (m, h) = mean_ci95(&drift);
        md += &format!(
            "- Warm cache: `{}`'s L2 miss ratio moves by {m:+.1}%{} from the first to the \
             second half of the measured window (over {} runs; a cache still warming up \
             would show a clear fall).\n",
            sc.variants[0].label,
            if h.is_finite() {
                format!(" ± {h:.1}")
            } else {
                String::new()
            },
            drift.len()
        );
    }
    (md, ok)
}

/// Reads and validates a scenario file, leaving real programs' traces unrecorded.
pub fn parse(path: &std::path::Path) -> Result<Scenario> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read scenario file '{}'", path.display()))?;
    let text = crate::positions::utf8(path, bytes)?;
    parse_text(path, &text)
}

/// [`parse`] of the text of the file at `path` (named in errors).
pub fn parse_text(path: &std::path::Path, text: &str) -> Result<Scenario> {
    let s: Scenario =
        toml::from_str(text).with_context(|| format!("in scenario file '{}'", path.display()))?;
    s.validate()
        .with_context(|| format!("in scenario file '{}'", path.display()))?;
    Ok(s)
}

/// [`Scenario::plan`] of the scenario read from `path`: an error about a value out of
/// range names the line and column that set it.
pub fn plan_file(sc: &Scenario, path: &std::path::Path) -> Result<Vec<Planned>> {
    sc.plan().map_err(|e| {
        let key = if let Some(r) = e.downcast_ref::<cachesched_sim::RangeError>() {
            Some(r.key.clone())
        } else if matches!(e.downcast_ref::<SimError>(), Some(SimError::Machine(_)))
            || e.downcast_ref::<cachesched_sim::hw::machine::MachineError>()
                .is_some()
        {
            // a machine the file's own `machine` key resolves is checked while it is read,
            // with its position: here it is a swept LLC size
            Some("llc_kb".to_string())
        } else {
            None
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        match key.and_then(|k| crate::positions::locate(&text, &k).map(|p| (k, p))) {
            Some((_, (line, col))) => anyhow::anyhow!("{e:#}").context(format!(
                "in scenario file '{}', line {line}, column {col}",
                path.display()
            )),
            None => e.context(format!("in scenario file '{}'", path.display())),
        }
    })
}

/// Loads and validates a scenario file; real programs it names get their cached traces
/// (recorded first if missing).
pub fn load(path: &std::path::Path) -> Result<Scenario> {
    let mut s = parse(path)?;
    // real programs' traces, recorded on first use
    crate::real::prepare(&mut s.threads)
        .with_context(|| format!("in scenario file '{}'", path.display()))?;
    for m in &mut s.mixes {
        crate::real::prepare(&mut m.threads)
            .with_context(|| format!("in mix '{}' of '{}'", m.label, path.display()))?;
    }
    Ok(s)
}

/// Runs `jobs_list` (the jobs of `sc`, [`Scenario::jobs`]) on `jobs` workers (default:
/// all CPUs) with a progress bar, writes the outputs to `out` and returns the jobs with
/// their results; `None` if interrupted (nothing written).
pub fn run_scenario(
    sc: &Scenario,
    jobs_list: Vec<Job>,
    out: &std::path::Path,
    jobs: Option<usize>,
) -> Result<Option<(Vec<Job>, Vec<RunResult>)>> {
    let workers = worker_count(jobs, jobs_list.len());
    println!("seeds {:?}", sc.seeds);
    println!(
        "scenario {}: {} runs on {} worker(s) -> {}",
        sc.name,
        jobs_list.len(),
        workers,
        out.display()
    );
    let cfgs: Vec<&SimConfig> = jobs_list.iter().map(|j| &j.cfg).collect();
    let label = |i: usize| run_label(sc, &jobs_list[i]);
    let Some(runs) = cached_or_run(&cfgs, &label, workers)? else {
        eprintln!("{INTERRUPTED}");
        return Ok(None);
    };
    complete(sc, jobs_list, runs, out, workers)
}

/// Finishes runs already made (`runs`, the results of `jobs_list`, some jobs of `sc`):
/// gives their threads their solo references where `sc` wants them (made on `workers`
/// workers where the solo cache lacks them), writes the outputs to `out` and returns
/// the jobs with their results; `None` if interrupted (nothing written).
pub fn complete(
    sc: &Scenario,
    jobs_list: Vec<Job>,
    mut runs: Vec<RunResult>,
    out: &std::path::Path,
    workers: usize,
) -> Result<Option<(Vec<Job>, Vec<RunResult>)>> {
    if wants_solo(sc) {
        let cfgs: Vec<&SimConfig> = jobs_list.iter().map(|j| &j.cfg).collect();
        let Some(()) = attach_solo_runs(&cfgs, &mut runs, workers)? else {
            eprintln!("interrupted; nothing written");
            return Ok(None);
        };
    }
    write_outputs(sc, &jobs_list, &runs, out)?;
    Ok(Some((jobs_list, runs)))
}

/// Whether `sc` reports a metric measured against running alone (its runs need solo
/// reference runs, [`crate::caches::solo`]).
pub fn wants_solo(sc: &Scenario) -> bool {
    sc.metrics
        .iter()
        .any(|m| SOLO_METRICS.contains(&m.as_str()))
}

/// How errors and progress name run `j` of scenario `sc`.
pub fn run_label(sc: &Scenario, j: &Job) -> String {
    format!(
        "run '{}' of {} seed {} llc {:?} KiB",
        sc.variants[j.variant].label, sc.name, j.seed, j.llc_kb
    )
}

/// Said when Ctrl-C stops a batch of runs.
pub const INTERRUPTED: &str =
    "interrupted; nothing more is written (finished runs are kept in the run cache)";

/// The most parallel runs `--jobs` may ask for: each worker holds a simulation (tens
/// of MB for the largest machines), and no host of this project has more cores.
pub const MAX_JOBS: usize = 1024;

/// Parses `--jobs`: 1 to [`MAX_JOBS`].
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of parallel runs: give 1 to {MAX_JOBS}"))?;
    if !(1..=MAX_JOBS).contains(&n) {
        return Err(format!("{n} parallel runs: give 1 to {MAX_JOBS}"));
    }
    Ok(n)
}

/// Workers for `n` runs: `jobs`, else every CPU, at least one and at most `n`.
pub fn worker_count(jobs: Option<usize>, n: usize) -> usize {
    jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
    .clamp(1, n.max(1))
}

/// The results of `cfgs`: those the run cache holds (an interrupted batch, a shared
/// baseline), and the others run on `workers` workers in one pool, each kept in the
/// run cache as it finishes (`label` names a run in errors); configurations that
/// repeat (the same key) run once. `None` if interrupted.
pub fn cached_or_run(
    cfgs: &[&SimConfig],
    label: &(dyn Fn(usize) -> String + Sync),
    workers: usize,
) -> Result<Option<Vec<RunResult>>> {
    let keys = cfgs
        .iter()
        .map(|c| crate::caches::config_key(c))
        .collect::<Result<Vec<u64>>>()?;
    let mut found: Vec<Option<RunResult>> = keys
        .iter()
        .map(|&k| crate::caches::runs::load(k))
        .collect::<Result<_>>()?;
    // the first of each key the cache lacks
    let mut seen = std::collections::HashSet::new();
    let missing: Vec<usize> = (0..cfgs.len())
        .filter(|&i| found[i].is_none() && seen.insert(keys[i]))
        .collect();
    let lacking = found.iter().filter(|r| r.is_none()).count();
    if missing.len() < cfgs.len() {
        let same = lacking - missing.len();
        println!(
            "{} of {} runs read from the run cache ({}), {}{} to run",
            cfgs.len() - lacking,
            cfgs.len(),
            crate::caches::runs::cache_dir()?.display(),
            if same > 0 {
                format!("{same} the same as another, ")
            } else {
                String::new()
            },
            missing.len()
        );
    }
    let to_run: Vec<&SimConfig> = missing.iter().map(|&i| cfgs[i]).collect();
    let warned = std::sync::Once::new();
    let keep = |m: usize, r: &RunResult| {
        if let Err(e) = crate::caches::runs::store(keys[missing[m]], r) {
            warned.call_once(|| eprintln!("warning: runs are not kept in the run cache: {e:#}"));
        }
    };
    if !to_run.is_empty() {
        let Some(ran) = run_configs(&to_run, &|m| label(missing[m]), workers, &keep)? else {
            return Ok(None);
        };
        let made: std::collections::HashMap<u64, RunResult> =
            missing.iter().map(|&m| keys[m]).zip(ran).collect();
        for (f, k) in found.iter_mut().zip(&keys) {
            if f.is_none() {
                *f = made.get(k).cloned();
            }
        }
    }
    Ok(Some(
        found
            .into_iter()
            .map(|r| r.expect("every run found or made"))
            .collect(),
    ))
}

/// Runs every run of a file's `planned` mixes that the run cache lacks, on `jobs`
/// workers (default: all CPUs) in one pool, keeping each in the run cache: the mixes
/// then read their runs from it, and no worker idles at the end of one mix while the
/// next mix's runs wait. Where runs cannot be kept (the run cache is not writable), the
/// mixes run one after the other instead, as they would without this. `None` if
/// interrupted (said on stderr; finished runs are kept).
pub fn fill_run_cache(planned: &[Planned], jobs: Option<usize>) -> Result<Option<()>> {
    if planned.len() < 2 {
        return Ok(Some(()));
    }
    if let Err(e) = crate::caches::runs::check_writable() {
        eprintln!("warning: the mixes run one after the other: {e:#}");
        return Ok(Some(()));
    }
    let all: Vec<(&Planned, &Job)> = planned
        .iter()
        .flat_map(|p| p.jobs.iter().map(move |j| (p, j)))
        .collect();
    let cfgs: Vec<&SimConfig> = all.iter().map(|(_, j)| &j.cfg).collect();
    let label = |i: usize| run_label(&all[i].0.sc, all[i].1);
    let workers = worker_count(jobs, cfgs.len());
    println!(
        "{} runs of {} mixes on {workers} worker(s), into the run cache",
        cfgs.len(),
        planned.len()
    );
    let done = cached_or_run(&cfgs, &label, workers)?.map(|_| ());
    if done.is_none() {
        eprintln!("{INTERRUPTED}");
    }
    Ok(done)
}

/// The jobs of `sc` ([`Scenario::jobs`]) with the results a previous run of the same
/// scenario left in `out` (`results.json`), without running anything, and the outputs
/// rewritten from them (report, CSV, plots: for changes of the reports). Refuses when
/// `out` holds no results, or results of a scenario that differs from `sc` in any
/// resolved field (file edited, overrides changed, `--quick` or not).
pub fn load_results(
    sc: &Scenario,
    jobs: Vec<Job>,
    out: &std::path::Path,
) -> Result<(Vec<Job>, Vec<RunResult>)> {
    let resolved = out.join("scenario.resolved.toml");
    let saved = std::fs::read_to_string(&resolved).with_context(|| {
        format!(
            "no results to rebuild from in '{}' (cannot read '{}'): run without --from-results first",
            out.display(),
            resolved.display()
        )
    })?;
    if saved != toml::to_string(sc)? {
        bail!(
            "the results in '{}' were made from a different scenario than '{}' resolves to now \
             (the file or the command-line overrides changed since, or --quick differs; compare \
             with '{}'): rerun it without --from-results",
            out.display(),
            sc.name,
            resolved.display()
        );
    }
    let path = out.join("results.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    let rows: Vec<OwnedRow> = serde_json::from_str(&text)
        .with_context(|| format!("'{}' is not a results file of this version", path.display()))?;
    // each row is one of the jobs, in the jobs' order (seeds added one at a time leave
    // some out)
    let mut found = std::collections::HashMap::new();
    let mut next = 0;
    for row in rows {
        let Some(i) = (next..jobs.len()).find(|&i| {
            let j = &jobs[i];
            row.variant == sc.variants[j.variant].label
                && row.llc_kb == j.llc_kb
                && row.seed == j.seed
        }) else {
            bail!(
                "'{}' does not list the scenario's runs in its order (found {} / {:?} KiB / \
                 seed {}): rerun it without --from-results",
                path.display(),
                row.variant,
                row.llc_kb,
                row.seed
            );
        };
        found.insert(i, row.result);
        next = i + 1;
    }
    let keep = if sc.sequential() {
        crate::seeds::check_loaded(sc, &jobs, &found)
            .with_context(|| format!("in '{}': rerun it without --from-results", path.display()))?
    } else if found.len() == jobs.len() {
        (0..jobs.len()).collect()
    } else {
        bail!(
            "'{}' has {} runs where the scenario has {}: rerun it without --from-results",
            path.display(),
            found.len(),
            jobs.len()
        );
    };
    let mut runs = Vec::with_capacity(keep.len());
    let mut kept = Vec::with_capacity(keep.len());
    let mut keep = keep.into_iter().peekable();
    for (i, j) in jobs.into_iter().enumerate() {
        if keep.next_if_eq(&i).is_some() {
            runs.push(found.remove(&i).expect("kept runs are found"));
            kept.push(j);
        }
    }
    write_outputs(sc, &kept, &runs, out)?;
    Ok((kept, runs))
}

/// Gives every thread of `runs` (the results of `cfgs`) its solo reference: cached
/// ones are read, the others run on `workers` and cached (see [`crate::caches::solo`]).
/// `None` if interrupted.
pub fn attach_solo_runs(
    cfgs: &[&SimConfig],
    runs: &mut [RunResult],
    workers: usize,
) -> Result<Option<()>> {
    let (distinct, keys) = crate::caches::solo::plan(cfgs)?;
    let mut refs = crate::caches::solo::cached(distinct.keys().copied())?;
    let missing: Vec<(u64, &SimConfig)> = distinct
        .iter()
        .filter(|(k, _)| !refs.contains_key(k))
        .map(|(k, c)| (*k, c))
        .collect();
    println!(
        "solo references: {} needed, {} cached, {} to run (cache {})",
        distinct.len(),
        refs.len(),
        missing.len(),
        crate::caches::solo::cache_dir()?.display()
    );
    if !missing.is_empty() {
        let solo_cfgs: Vec<&SimConfig> = missing.iter().map(|(_, c)| *c).collect();
        let label = |i: usize| {
            let c = solo_cfgs[i];
            format!("solo run of '{}' seed {}", c.threads[0].name(), c.seed)
        };
        let Some(solo_runs) =
            run_configs(&solo_cfgs, &label, workers.min(missing.len()), &|_, _| {})?
        else {
            return Ok(None);
        };
        for ((k, c), r) in missing.iter().zip(&solo_runs) {
            refs.insert(*k, crate::caches::solo::store(*k, c, r)?);
        }
    }
    for ((cfg, ks), r) in cfgs.iter().zip(&keys).zip(runs.iter_mut()) {
        crate::caches::solo::attach(cfg, ks, &refs, r);
    }
    Ok(Some(()))
}

/// Runs `cfgs` on `workers` threads with a progress bar; `label(i)` names run `i` in
/// errors, and `on_done(i, result)` is called as soon as run `i` has finished (not for
/// a run cut short by Ctrl-C). `None` if interrupted.
pub fn run_configs(
    cfgs: &[&SimConfig],
    label: &(dyn Fn(usize) -> String + Sync),
    workers: usize,
    on_done: &(dyn Fn(usize, &RunResult) + Sync),
) -> Result<Option<Vec<RunResult>>> {
    let stop = interrupt_flag();
    let progress = Progress::new(cfgs.len());
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunResult, SimError>>>> =
        Mutex::new((0..cfgs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= cfgs.len() || stop.load(Ordering::SeqCst) {
                    break;
                }
                let cfg = cfgs[i];
                let mut done = 0u64;
                let res = Simulation::new(cfg, cachesched_sim::build_chain(cfg)).and_then(|sim| {
                    sim.run(&mut |f| {
                        let p = (f * 100.0) as u64;
                        if p > done {
                            progress.advance(p - done, false);
                            done = p;
                        }
                        !stop.load(Ordering::SeqCst)
                    })
                });
                progress.advance(100 - done.min(100), true);
                if let Ok(r) = &res {
                    if !stop.load(Ordering::SeqCst) {
                        on_done(i, r);
                    }
                }
                results.lock().expect("no panics while holding the lock")[i] = Some(res);
            });
        }
    });
    progress.finish();
    if stop.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let mut runs = Vec::new();
    for (i, r) in results
        .into_inner()
        .expect("workers joined")
        .into_iter()
        .enumerate()
    {
        let r = r
            .expect("every job ran")
            .with_context(|| format!("{} failed", label(i)))?;
        runs.push(r);
    }
    Ok(Some(runs))
}

/// The header of a results table: variant, the sweep's size when there is one, and one
/// column per reported metric.
fn table_header(sc: &Scenario) -> String {
    let sweep = sc.sweep.is_some();
    let mut h = String::from("| variant |");
    if sweep {
        h += " LLC size (KiB) |";
    }
    for m in &sc.metrics {
        h += &format!(" {} |", metric_label(m));
    }
    h += "\n|---|";
    if sweep {
        h += "---|";
    }
    h += &"---|".repeat(sc.metrics.len());
    h + "\n"
}

/// Writes a scenario's results beside each other in `out`: every run (JSON, CSV), the
/// resolved scenario, and the report (tables of means and paired changes).
fn write_outputs(
    sc: &Scenario,
    jobs: &[Job],
    runs: &[RunResult],
    out: &std::path::Path,
) -> Result<()> {
    let rows: Vec<Row<'_>> = jobs
        .iter()
        .zip(runs)
        .map(|(j, r)| Row {
            variant: &sc.variants[j.variant].label,
            llc_kb: j.llc_kb,
            seed: j.seed,
            result: r,
        })
        .collect();
    write_file(
        &out.join("results.json"),
        &(serde_json::to_string_pretty(&rows)? + "\n"),
    )?;
    write_file(&out.join("scenario.resolved.toml"), &toml::to_string(sc)?)?;
    let mut csv = String::from("variant,llc_kb,seed");
    for (m, _, _) in METRICS {
        csv += &format!(",{m}");
    }
    csv += "\n";
    for row in &rows {
        csv += &format!(
            "{},{},{}",
            row.variant,
            row.llc_kb.map(|k| k.to_string()).unwrap_or_default(),
            row.seed
        );
        for (m, _, _) in METRICS {
            csv += &format!(",{}", metric(row.result, m).expect("known metric"));
        }
        csv += "\n";
    }
    write_file(&out.join("results.csv"), &csv)?;
    // Means over seeds per (variant, sweep point).
    let points: Vec<Option<u64>> = match &sc.sweep {
        Some(s) => s.llc_kb.iter().map(|&k| Some(k)).collect(),
        None => vec![None],
    };
    let stat = |vi: usize, p: Option<u64>, m: &str| -> (f64, f64) {
        let v: Vec<f64> = jobs
            .iter()
            .zip(runs)
            .filter(|(j, _)| j.variant == vi && j.llc_kb == p)
            .map(|(_, r)| metric(r, m).expect("known metric"))
            .collect();
        over_seeds(&v)
    };
    let mut md = format!("# {}\n\n{}\n\n", sc.name, sc.description);
    md += &format!(
        "Machine `{}`, {} ms per run ({} ms warm-up), {}. {}\n\n",
        sc.machine.resolve()?.name,
        sc.duration_ms,
        sc.warmup_ms,
        crate::seeds::rule_sentence(sc),
        if sc.seeds.len() > 1 {
            "Mean over seeds ± the half-width of its 95% confidence interval (Student's t)."
        } else {
            "One seed: single runs, no interval."
        }
    );
    md += &crate::seeds::outcomes_md(sc, jobs, runs);
    let (check_md, _) = checks(sc, jobs, runs);
    if !check_md.is_empty() {
        md += &format!("Checks of the measured windows:\n\n{check_md}\n");
    }
    md += &table_header(sc);
    for &p in &points {
        for (vi, v) in sc.variants.iter().enumerate() {
            md += &format!("| {} |", v.label);
            if let Some(k) = p {
                md += &format!(" {k} |");
            }
            for m in &sc.metrics {
                // one seed has no interval (NaN)
                let (mean, h) = stat(vi, p, m);
                md += &if h.is_finite() {
                    format!(" {} ± {} |", plain(mean), plain(h))
                } else {
                    format!(" {} |", plain(mean))
                };
            }
            md += "\n";
        }
    }
    md += "\n";
    if sc.variants.len() > 1 {
        md += &format!(
            "Against `{}`, paired by seed: the mean change in percent of the baseline ± the \
             half-width of its 95% interval; better or worse only when the interval excludes \
             zero.\n\n",
            sc.variants[0].label
        );
        md += &table_header(sc);
        for &p in &points {
            for (vi, v) in sc.variants.iter().enumerate().skip(1) {
                md += &format!("| {} |", v.label);
                if let Some(k) = p {
                    md += &format!(" {k} |");
                }
                for m in &sc.metrics {
                    let c = paired_change(jobs, runs, (0, vi), p, m);
                    md += &if c.1.is_finite() {
                        format!(" {:+.1}% ± {:.1} ({}) |", c.0, c.1, verdict(m, c))
                    } else {
                        format!(" {:+.1}% ({}) |", c.0, verdict(m, c))
                    };
                }
                md += "\n";
            }
        }
        md += "\n";
    }
    let paper_md = crate::paper::table(sc, jobs, runs);
    if !paper_md.is_empty() {
        md += &format!(
            "## Paper against measured\n\n{paper_md}\n\"inside\": the measured mean is in the \
             paper's range; \"interval overlaps\": it is not, but its 95% interval reaches the \
             range.\n\n"
        );
        for (file, svg) in crate::paper::change_plots(sc, jobs, runs) {
            write_file(&out.join(&file), &svg)?;
            md += &format!("![{file}]({file})\n\n");
        }
    }
    if sc
        .metrics
        .iter()
        .any(|m| SOLO_METRICS.contains(&m.as_str()))
    {
        md += "STP, ANTT, worst slowdown and Jain's index compare each thread with its \
               program running alone on the same machine, kernel, window and seed (solo \
               runs, `solo_ips` in results.json).\n\n";
    }
    for m in &sc.metrics {
        let (xl, labels): (String, Option<Vec<String>>) = match &sc.sweep {
            Some(_) => ("LLC size".into(), None),
            None => (
                "variant".into(),
                Some(sc.variants.iter().map(|v| v.label.clone()).collect()),
            ),
        };
        let series: Vec<Series> = if sc.sweep.is_some() {
            sc.variants
                .iter()
                .enumerate()
                .map(|(vi, v)| {
                    let xs: Vec<_> = points
                        .iter()
                        .map(|&p| (p.unwrap_or(0) as f64, stat(vi, p, m)))
                        .collect();
                    Series::with_intervals(v.label.clone(), &xs)
                })
                .collect()
        } else {
            let xs: Vec<_> = (0..sc.variants.len())
                .map(|vi| (vi as f64, stat(vi, None, m)))
                .collect();
            vec![Series::with_intervals(metric_label(m).into(), &xs)]
        };
        let file = format!("{m}.svg");
        let axis = match &labels {
            Some(l) => XAxis::Categories(l),
            None => XAxis::Kib,
        };
        write_file(
            &out.join(&file),
            &line_chart(
                &format!("{}: {}", sc.name, metric_label(m)),
                &xl,
                metric_label(m),
                &series,
                axis,
                None,
            ),
        )?;
        md += &format!("![{m}]({file})\n\n");
    }
    write_file(&out.join("report.md"), &md)?;
    println!(
        "wrote results.json, results.csv, scenario.resolved.toml, report.md and {} plot(s) to {}",
        sc.metrics.len(),
        out.display()
    );
    print!(
        "{}",
        md.lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    Ok(())
}

/// Progress of a batch of runs on stderr: a bar that counts runs on a terminal, and
/// otherwise a line every 10 seconds or more (runs done of all, elapsed, an estimate
/// of what is left), so that logs and pipes show that work goes on.
struct Progress {
    bar: indicatif::ProgressBar,
    runs: usize,
    tty: bool,
    start: std::time::Instant,
    /// Run-percent done, runs done, and when the last line was printed.
    state: Mutex<(u64, usize, std::time::Instant)>,
}

impl Progress {
    fn new(runs: usize) -> Progress {
        use std::io::IsTerminal;
        let tty = std::io::stderr().is_terminal();
        let bar = if tty {
            indicatif::ProgressBar::new(runs as u64 * 100)
        } else {
            indicatif::ProgressBar::hidden()
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {msg} [{elapsed} elapsed, eta {eta}]",
            )
            .expect("valid template"),
        );
        bar.set_message(format!("0/{runs} runs"));
        let now = std::time::Instant::now();
        Progress {
            bar,
            runs,
            tty,
            start: now,
            state: Mutex::new((0, 0, now)),
        }
    }

    /// `percent` more of a run done; `finished`: a run ended.
    fn advance(&self, percent: u64, finished: bool) {
        let mut st = self.state.lock().expect("no panics while holding the lock");
        st.0 += percent;
        st.1 += finished as usize;
        self.bar.inc(percent);
        if finished {
            self.bar.set_message(format!("{}/{} runs", st.1, self.runs));
        }
        let now = std::time::Instant::now();
        let last_run = finished && st.1 == self.runs;
        if !self.tty && (now.duration_since(st.2).as_secs() >= 10 || last_run) {
            st.2 = now;
            let elapsed = now.duration_since(self.start).as_secs_f64();
            let fraction = st.0 as f64 / (self.runs as f64 * 100.0);
            let left = if fraction > 0.0 {
                format!(
                    ", about {} left",
                    clock(elapsed * (1.0 - fraction) / fraction)
                )
            } else {
                String::new()
            };
            eprintln!(
                "progress: {}/{} runs done ({:.0}%), {} elapsed{left}",
                st.1,
                self.runs,
                fraction * 100.0,
                clock(elapsed)
            );
        }
    }

    /// Clears the bar.
    fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// Seconds as `1m05s` (or `42s`).
fn clock(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_sim::Pin;

    /// Three significant digits, plain in the range people read without exponents;
    /// every metric has a label of its own.
    #[test]
    fn numbers_and_labels_for_people() {
        let cases = [
            (0.16051, "0.161"),
            (24.549, "24.5"),
            (1390.4, "1390"),
            (0.0043, "0.00430"),
            (1.3242e9, "1.32e9"),
            (4.3e-5, "4.30e-5"),
            (0.0, "0"),
            (-6.93, "-6.93"),
        ];
        for (v, s) in cases {
            assert_eq!(plain(v), s, "{v}");
        }
        for (n, _, l) in METRICS {
            assert_eq!(metric_label(n), *l);
            assert!(!l.contains('_'), "{n}: '{l}' is an identifier, not a label");
        }
        assert_eq!(metric_label("nope"), "?");
    }

    /// `cfs_online_cpus` gives a variant the CFS slices of a machine with that many CPUs
    /// online: on the 2-CPU xeon-e5-16m-2c with 4 online, four threads on a CPU get 4.5
    /// ms each from the simulated kernel (as on the 4-CPU xeon-e5-16m), not 3 ms, and
    /// eight per CPU reach the larger floor of 2.25 ms; the other variants keep their
    /// configuration; fewer CPUs online than the machine has, or a non-CFS baseline, is
    /// refused.
    #[test]
    fn cfs_online_cpus_gives_a_larger_machines_slices() {
        use cachesched_sim::kernel::class::{Class, SchedEntity};
        let text = r#"
name = "t"
machine = "xeon-e5-16m-2c"
duration_ms = 20
warmup_ms = 0
seeds = [1]
threads = [{ profile = "mcf", cpus = [0] }]
variants = [{ label = "cfs" }, { label = "cfs-4cpu", cfs_online_cpus = 4 }]
"#;
        let sc: Scenario = toml::from_str(text).unwrap();
        sc.validate().unwrap();
        let jobs = sc.jobs().unwrap();
        let e = SchedEntity::new(0, 0);
        let w = e.weight() as u64;
        let slice_ms = |k: &KernelConfig, cpus: usize, nr: u64| {
            Class::new(k, cpus).slice_ns(&e, nr as usize, nr * w) as f64 / 1e6
        };
        assert_eq!(jobs[0].cfg.kernel, KernelConfig::default());
        let k4 = &jobs[1].cfg.kernel;
        assert_eq!(slice_ms(&jobs[0].cfg.kernel, 2, 4), 3.0);
        assert_eq!(slice_ms(k4, 2, 4), 4.5);
        assert_eq!(slice_ms(k4, 2, 4), slice_ms(&KernelConfig::default(), 4, 4));
        assert_eq!(slice_ms(k4, 2, 8), 2.25);
        assert_eq!(slice_ms(k4, 2, 2), 9.0);
        // beyond 8 CPUs Linux stops scaling: 16 online is 8 online
        let mut big = sc.clone();
        big.variants[1].cfs_online_cpus = Some(16);
        assert_eq!(slice_ms(&big.jobs().unwrap()[1].cfg.kernel, 2, 4), 6.0);
        let mut rr = sc.clone();
        rr.variants[1].baseline = Some(Baseline::Rr);
        let err = rr.validate().unwrap_err().to_string();
        assert!(err.contains("not CFS"), "{err}");
        for few in [0, 1] {
            let mut b = sc.clone();
            b.variants[1].cfs_online_cpus = Some(few);
            let err = b.jobs().err().unwrap().to_string();
            assert!(err.contains("fewer than the machine's 2 CPUs"), "{err}");
        }
        // the factor is the simulated kernel's own, for every count: one thread's
        // slice is the latency target, 6 ms times the factor
        for n in 1..=64 {
            let k = KernelConfig::default();
            assert_eq!(
                Class::new(&k, n).slice_ns(&e, 1, w),
                (6e6 * cfs_factor(n)) as u64,
                "{n} CPUs"
            );
        }
        // every rescaling lands on the ns the larger machine's kernel would have
        for (m, n) in [(1, 2), (1, 4), (2, 4), (2, 8), (3, 8), (4, 8), (1, 8)] {
            let (from, to) = (cfs_factor(m), cfs_factor(n));
            for ms in [0.75, 1.0, 2.5, 6.0, 7.0, 9.1] {
                let want = (ms * to * 1e6).round() as u64;
                assert_eq!(((rescaled(ms, from, to) * from) * 1e6) as u64, want);
            }
        }
    }

    /// Every scenario file shipped under `experiments/` loads: it parses, names known
    /// keys, machine, profiles and metrics, and builds all its runs.
    #[test]
    fn shipped_scenarios_load() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut files = Vec::new();
        for e in std::fs::read_dir(&dir).expect("experiments/ exists") {
            let path = e.unwrap().path();
            if path.is_dir() {
                for f in std::fs::read_dir(&path).unwrap() {
                    files.push(f.unwrap().path());
                }
            } else {
                files.push(path);
            }
        }
        let mut n = 0;
        for path in files
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        {
            let sc = parse(path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            // its quick version is valid too
            sc.reduced()
                .validate()
                .unwrap_or_else(|e| panic!("{} (quick): {e:#}", path.display()));
            // real programs need their recorded traces to build runs
            for (_, sub) in sc.per_mix() {
                if sub.threads.iter().all(|g| g.real.is_none()) {
                    let jobs = sub
                        .jobs()
                        .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                    assert!(!jobs.is_empty(), "{}", path.display());
                }
            }
            n += 1;
        }
        assert!(n >= 8, "{n} scenario files");
    }

    /// A window that ends by its quanta reaches every run, and a metric that counts
    /// events over the window is refused with it, naming the rate to use. Fails if the
    /// setting is dropped on the way to the runs, or a count metric is accepted.
    #[test]
    fn windows_by_quanta_reach_the_runs_and_refuse_counts() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/timeslice/fig7-2c4m.toml");
        let sc = parse(&path).unwrap();
        let q = sc.stop_after_quanta.expect("fig7 ends windows by quanta");
        let (_, first) = sc.per_mix().remove(0);
        let jobs = first.jobs().unwrap();
        assert!(jobs.iter().all(|j| j.cfg.stop_after_quanta == Some(q)));
        let mut bad = sc.clone();
        bad.metrics.push("context_switches".into());
        let e = format!("{:#}", bad.validate().unwrap_err());
        assert!(
            e.contains("context_switches") && e.contains("context_switches_per_s"),
            "{e}"
        );
        bad.stop_after_quanta = None;
        bad.validate().unwrap();
    }

    /// A scenario of several mixes runs as one scenario per mix, each with its mix's
    /// threads and none of the paper's values (they are the analysis's); malformed
    /// mixes and paper values are named. Fails if a mix loses its threads or label, or
    /// a bad file is accepted.
    #[test]
    fn mixes_become_one_scenario_each() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/cachefair/fig6-8.toml");
        let sc = parse(&path).unwrap();
        let subs = sc.per_mix();
        assert_eq!(subs.len(), 18);
        let (label, vortex) = &subs[15];
        assert_eq!(label.as_deref(), Some("vortex-slow"));
        assert_eq!(vortex.name, "cachefair-fig6-8/vortex-slow");
        let names: Vec<String> = vortex.threads.iter().map(|g| g.name()).collect();
        assert_eq!(names, ["vortex", "art", "mcf", "gzip"]);
        assert!(vortex.mixes.is_empty() && vortex.paper.is_empty());
        assert!(!sc.paper.is_empty());
        let err = |s: &Scenario| s.validate().unwrap_err().to_string();
        let mut both = sc.clone();
        both.threads = vortex.threads.clone();
        assert!(err(&both).contains("exactly one of them"));
        let mut dup = sc.clone();
        dup.mixes[1].label = dup.mixes[0].label.clone();
        assert!(err(&dup).contains("unique"));
        let mut slash = sc.clone();
        slash.mixes[0].label = "a/b".into();
        assert!(err(&slash).contains("a label of letters"));
        let mut pv = sc.clone();
        pv.paper[0].metric = "ips".into();
        assert!(err(&pv).contains("variability_pct"));
        let mut pv = sc.clone();
        pv.paper[0].program = Some("nosuch".into());
        assert!(err(&pv).contains("no mix of program 'nosuch'"));
    }

    /// A variant's `add_threads` run after the mix's threads and `pin` with
    /// `pin_labels` pins only the named groups, spread over the chips: the affinity
    /// paper's main copies bound, its interfering program not. Fails if the added
    /// threads are lost, the wrong group is pinned, or a label naming no group (or
    /// `pin_labels` without `pin`) is accepted.
    #[test]
    fn variants_add_threads_and_pin_groups_by_label() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/affinity/l2-mmp.toml");
        let sc = parse(&path).unwrap();
        let (_, art) = sc.per_mix().remove(0);
        let jobs = art.jobs().unwrap();
        let bound = jobs.iter().find(|j| j.variant == 0).unwrap();
        let groups: Vec<(String, Option<Pin>)> = bound
            .cfg
            .threads
            .iter()
            .map(|g| (g.name(), g.pin))
            .collect();
        assert_eq!(
            groups,
            [
                ("main".to_string(), Some(Pin::Spread)),
                ("interfering".to_string(), None)
            ]
        );
        let oblivious = jobs.iter().find(|j| j.variant == 1).unwrap();
        assert!(oblivious.cfg.threads.iter().all(|g| g.pin.is_none()));
        let err = |s: &Scenario| s.validate().unwrap_err().to_string();
        let mut bad = sc.clone();
        bad.variants[0].pin_labels = vec!["nosuch".into()];
        assert!(err(&bad).contains("names 'nosuch'"));
        let mut bad = sc.clone();
        bad.variants[0].pin = None;
        assert!(err(&bad).contains("pin_labels without pin"));
        // the §2 files add the base vectors to each mix's program
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/affinity/l1-t2000-q2.toml");
        let sc = parse(&path).unwrap();
        let (_, twolf) = sc.per_mix().pop().unwrap();
        let jobs = twolf.jobs().unwrap();
        let low = jobs
            .iter()
            .find(|j| sc.variants[j.variant].label == "low-l1i+l2")
            .unwrap();
        let names: Vec<String> = low.cfg.threads.iter().map(|g| g.name()).collect();
        assert_eq!(names, ["main", "bv-l1i", "bv-l2"]);
        assert_eq!(low.cfg.threads[2].cpus, Some(vec![4]));
    }

    /// Identical values over several seeds have no interval (they were not sampled);
    /// varying ones keep Student's; fails if a zero-width interval gets through, which
    /// would call a change certain.
    #[test]
    fn seeds_that_vary_nothing_give_no_interval() {
        assert!(over_seeds(&[3.0, 3.0, 3.0]).1.is_nan());
        assert_eq!(verdict("ips", over_seeds(&[5.0, 5.0])), "no interval");
        // a thread without progress: its slowdown, and the change of ANTT, unbounded
        let inf = over_seeds(&[3.0, f64::INFINITY]);
        assert!(verdict("antt", inf).starts_with("unbounded"));
        // a count that is 0 in the baseline: no change in percent exists
        assert!(verdict("migrations", (f64::NAN, f64::NAN)).contains("baseline is 0"));
        let (m, h) = over_seeds(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((h - 4.303 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(verdict("ips", over_seeds(&[5.0, 5.1, 4.9, 5.2])), "better");
    }

    /// `--quick` keeps what it is told to and drops paper values outside its sizes;
    /// fails if a reduced scenario does not say so or keeps a value it cannot measure.
    #[test]
    fn quick_reduces_and_says_so() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/casc/variants.toml");
        let mut sc = parse(&path).unwrap();
        sc.paper = vec![crate::paper::PaperValue {
            what: "x".into(),
            source: "y".into(),
            metric: "ips".into(),
            variant: "casc".into(),
            against: None,
            change_pct: Some([1.0, 2.0]),
            value: None,
            llc_kb: Some(vec![48]),
            program: None,
        }];
        sc.validate().unwrap();
        let q = sc.reduced();
        assert_eq!(q.seeds, vec![1, 2]);
        assert_eq!(q.sweep.as_ref().unwrap().llc_kb, vec![96, 768]);
        assert!(q.paper.is_empty(), "48 KB is not in the quick sweep");
        assert!(q.description.contains("Reduced run (--quick)"));
        assert_eq!(q.duration_ms, 1300.0);
        // bad paper values and quick tables are named
        let mut bad = sc.clone();
        bad.paper[0].variant = "nosuch".into();
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("no variant labelled 'nosuch'"));
        let mut bad = sc.clone();
        bad.paper[0].value = Some([1.0, 1.0]);
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        let mut bad = sc.clone();
        bad.quick.as_mut().unwrap().llc_kb = Some(vec![100]);
        assert!(bad.validate().unwrap_err().to_string().contains("100 KiB"));
    }
}
