//! A scenario: a base run configuration, *variants* (policies, baseline, kernel
//! switches), an optional sweep over last-level-cache sizes, seeds, mixes, the
//! metrics to report and the paper's values, as one TOML file says them; and the runs
//! (jobs) it stands for. Every combination of variant, sweep point and seed is one run.
//!
//! [`Scenario::validate`] checks the file's own fields; the papers' checks of their
//! values and `analyses` names are [`crate::papers::validate`]'s.

use crate::error::{invalid, Error, Result, ResultExt};
use crate::metrics::{METRICS, SOLO_METRICS, WINDOW_COUNTS};
use cachesched_policies::PolicySpec;
use cachesched_sim::{
    Baseline, KernelConfig, MachineSpec, RunResult, SimConfig, Simulation, ThreadGroup,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    pub paper: Vec<crate::scenario::PaperValue>,
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

/// One mix's label, scenario, jobs and results.
pub type MixRuns = (Option<String>, Scenario, Vec<Job>, Vec<RunResult>);

impl Scenario {
    /// Whether the scenario reports a metric measured against running alone (its runs
    /// need solo reference runs, [`crate::caches::solo`]).
    pub fn wants_solo(&self) -> bool {
        self.metrics
            .iter()
            .any(|m| SOLO_METRICS.contains(&m.as_str()))
    }

    /// Checks the scenario's own fields (the papers' checks of their values over
    /// several mixes and of `analyses` are [`crate::papers::validate`]'s).
    pub fn validate(&self) -> Result<()> {
        if self.variants.is_empty() || self.seeds.is_empty() {
            return Err(invalid!(
                "a scenario needs at least one variant and one seed"
            ));
        }
        if let Some(k) = self.min_seeds {
            let n = self.seeds.len();
            if k > n || k < 2.min(n) {
                return Err(invalid!(
                    "min_seeds = {k}: give from {} to the number of seeds, {n}",
                    2.min(n)
                ));
            }
        }
        if self.threads.is_empty() == self.mixes.is_empty() {
            return Err(invalid!("a scenario gives its threads either as `threads` or as `mixes`, exactly one of them"));
        }
        if self.stop_after_quanta.is_some() {
            if let Some(m) = self
                .metrics
                .iter()
                .find(|m| WINDOW_COUNTS.contains(&m.as_str()))
            {
                return Err(invalid!(
                    "metric '{m}' counts events over the measured window, whose length \
                     stop_after_quanta makes differ between variants: use a rate \
                     (context_switches_per_s) or drop stop_after_quanta"
                ));
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
            return Err(invalid!(
                "mix '{}': a mix needs threads and a label of letters, digits, '-', '_' or '.'",
                m.label
            ));
        }
        for m in &self.mixes {
            crate::files::component(&m.label, "mix label")?;
        }
        mixes.sort();
        mixes.dedup();
        if mixes.len() != self.mixes.len() {
            return Err(invalid!("mix labels must be unique"));
        }
        for m in &self.metrics {
            if !METRICS.iter().any(|(n, _, _)| n == m) {
                let known: Vec<&str> = METRICS.iter().map(|(n, _, _)| *n).collect();
                return Err(invalid!(
                    "unknown metric '{m}'; known metrics: {}",
                    known.join(", ")
                ));
            }
        }
        let mut labels: Vec<&str> = self.variants.iter().map(|v| v.label.as_str()).collect();
        labels.sort();
        labels.dedup();
        if labels.len() != self.variants.len() {
            return Err(invalid!("variant labels must be unique"));
        }
        for v in &self.variants {
            if v.pin.is_none() && !v.pin_labels.is_empty() {
                return Err(invalid!("variant '{}': pin_labels without pin", v.label));
            }
            if v.cfs_online_cpus.is_some()
                && v.baseline.unwrap_or(self.kernel.baseline) != Baseline::Cfs
            {
                return Err(invalid!(
                    "variant '{}': cfs_online_cpus scales the CFS baseline's tunables, but \
                     the variant's baseline is not CFS: remove it or set baseline = \"cfs\"",
                    v.label
                ));
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
                    return Err(invalid!(
                        "variant '{}': pin_labels names '{l}', which is not the label of a \
                         thread group in every mix it runs on",
                        v.label
                    ));
                }
            }
        }
        if self.sweep.as_ref().is_some_and(|s| s.llc_kb.is_empty()) {
            return Err(invalid!("sweep.llc_kb is empty"));
        }
        // values over several mixes are their paper's to check (crate::papers::validate)
        if self.mixes.is_empty() {
            for pv in &self.paper {
                pv.validate(self).map_err(Error::Invalid)?;
            }
        }
        for (i, r) in self.references.iter().enumerate() {
            if !self.analyses.iter().any(|a| a == "timeslice") {
                return Err(invalid!(
                    "references name '{r}', but only the timeslice analysis uses them: add \
                     \"timeslice\" to analyses or remove references"
                ));
            }
            if r == "cfs" {
                return Err(invalid!(
                    "references name 'cfs', which is always the baseline: remove it"
                ));
            }
            if !self.variants.iter().any(|v| &v.label == r) {
                let labels: Vec<&str> = self.variants.iter().map(|v| v.label.as_str()).collect();
                return Err(invalid!(
                    "references name '{r}', which is not a variant's label; the variants: {}",
                    labels.join(", ")
                ));
            }
            if self.references[..i].contains(r) {
                return Err(invalid!("references name '{r}' twice: name each once"));
            }
        }
        if let Some(q) = &self.quick {
            if q.seeds.as_ref().is_some_and(|s| s.is_empty()) {
                return Err(invalid!("quick.seeds is empty"));
            }
            if let Some(ks) = &q.llc_kb {
                let sweep: &[u64] = self.sweep.as_ref().map_or(&[], |s| &s.llc_kb);
                if let Some(k) = ks.iter().find(|k| !sweep.contains(k)) {
                    return Err(invalid!(
                        "quick.llc_kb: {k} KiB is not a point of the sweep"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Sweeps over the LLC sizes `ks` instead; paper values and the reduced run's
    /// sizes at other sizes are left out.
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
        // the reduced run's sizes too: those of the new sweep, else the whole sweep
        if let Some(q) = &mut self.quick {
            if let Some(at) = &mut q.llc_kb {
                at.retain(|k| ks.contains(k));
                if at.is_empty() {
                    q.llc_kb = None;
                }
            }
        }
    }

    /// Keeps only the mixes labelled `labels` (a scenario of several mixes; `--mixes`),
    /// dropping the paper values about programs no kept mix has. Refuses a scenario of
    /// one mix, or a label it does not have.
    pub fn keep_mixes(&mut self, labels: &[String]) -> Result<()> {
        let all: Vec<&str> = self.mixes.iter().map(|m| m.label.as_str()).collect();
        if all.is_empty() {
            return Err(invalid!(
                "--mixes: scenario '{}' has a single mix; leave --mixes out for it (or use \
                 --only to run other files)",
                self.name
            ));
        }
        if let Some(l) = labels.iter().find(|l| !all.contains(&l.as_str())) {
            return Err(invalid!(
                "--mixes: scenario '{}' has no mix labelled '{l}'; its mixes are {}",
                self.name,
                all.join(", ")
            ));
        }
        self.mixes.retain(|m| labels.contains(&m.label));
        self.drop_paper_of_absent_mixes();
        Ok(())
    }

    /// Drops the paper values about programs no mix has (a program's mixes may be
    /// labelled PROGRAM-SOMETHING).
    fn drop_paper_of_absent_mixes(&mut self) {
        let kept: Vec<String> = self.mixes.iter().map(|m| m.label.clone()).collect();
        self.paper.retain(|pv| {
            pv.program.as_ref().is_none_or(|p| {
                kept.iter()
                    .any(|k| k == p || k.starts_with(&format!("{p}-")))
            })
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
        // every title and heading made from the name says the run is reduced
        s.name = format!("{} (reduced)", self.name);
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
            s.drop_paper_of_absent_mixes();
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
                    Some(m) => sc.jobs().within(|| format!("in mix '{m}'"))?,
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
                return Err(invalid!(
                    "variant '{}': cfs_online_cpus = {n} is fewer than the machine's {cpus} \
                     CPUs, which are all online: give {cpus} or more",
                    v.label
                ));
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

/// One value a paper reports for the figure a scenario reproduces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperValue {
    /// What the value is, as the paper says it (shown in the table).
    pub what: String,
    /// Where in the paper (section, figure, table).
    pub source: String,
    /// The metric (one of the scenario metrics' names).
    pub metric: String,
    /// The variant the value is about.
    pub variant: String,
    /// For a change: the variant it is measured against (default: the scenario's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    /// The change in percent, `[low, high]` (exactly one of `change_pct` and `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<[f64; 2]>,
    /// The metric's value, `[low, high]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<[f64; 2]>,
    /// Sweep points (LLC KiB) the value applies to (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_kb: Option<Vec<u64>>,
    /// In a scenario of several mixes, the program the value is about (default: all of
    /// them); such values are measures of the scenario's analysis
    /// ([`crate::papers::cachefair::MEASURES`]), not per-run metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

impl PaperValue {
    /// The checks every analysis over mixes makes of its paper values: the metric is
    /// one of `measures` (the measures of the analysis named `analysis`), the variant
    /// exists, and the value is a `value` range with no `change_pct` or `llc_kb` (nor
    /// `against`, unless `with_against`), which apply to single runs' metrics only.
    pub fn check_over_mixes(
        &self,
        sc: &Scenario,
        analysis: &str,
        measures: &[&str],
        with_against: bool,
    ) -> Result<(), String> {
        let what = &self.what;
        if !measures.contains(&self.metric.as_str()) {
            return Err(format!(
                "paper value '{what}': in a scenario of several mixes the metric is one of \
                 the {analysis} analysis's measures: {}",
                measures.join(", ")
            ));
        }
        if !sc.variants.iter().any(|v| v.label == self.variant) {
            return Err(format!(
                "paper value '{what}': no variant labelled '{}'",
                self.variant
            ));
        }
        let against = self.against.is_some() && !with_against;
        if self.value.is_none() || self.change_pct.is_some() || against || self.llc_kb.is_some() {
            let extra = if with_against { "" } else { ", against" };
            return Err(format!(
                "paper value '{what}': give `value` (a range) only; change_pct{extra} and \
                 llc_kb do not apply to a measure over mixes"
            ));
        }
        Ok(())
    }
}

impl PaperValue {
    /// Checks the value against its scenario of one mix: known metric and variants,
    /// one kind, points inside the sweep. (A value of a scenario of several mixes is
    /// checked by its paper: [`crate::papers::validate`].)
    pub fn validate(&self, sc: &Scenario) -> Result<(), String> {
        if self.program.is_some() {
            return Err(format!(
                "paper value '{}': 'program' applies to scenarios of several mixes only",
                self.what
            ));
        }
        if !sc.metrics.contains(&self.metric) {
            return Err(format!(
                "paper value '{}': metric '{}' is not among the scenario's metrics",
                self.what, self.metric
            ));
        }
        for v in std::iter::once(&self.variant).chain(self.against.as_ref()) {
            if !sc.variants.iter().any(|x| &x.label == v) {
                return Err(format!(
                    "paper value '{}': no variant labelled '{v}'",
                    self.what
                ));
            }
        }
        if self.change_pct.is_some() == self.value.is_some() {
            return Err(format!(
                "paper value '{}': give exactly one of change_pct and value",
                self.what
            ));
        }
        if self.value.is_some() && self.against.is_some() {
            return Err(format!(
                "paper value '{}': 'against' applies to change_pct only",
                self.what
            ));
        }
        if let Some(ks) = &self.llc_kb {
            let sweep: &[u64] = sc.sweep.as_ref().map_or(&[], |s| &s.llc_kb);
            if let Some(k) = ks.iter().find(|k| !sweep.contains(k)) {
                return Err(format!(
                    "paper value '{}': {k} KiB is not a sweep point",
                    self.what
                ));
            }
        }
        Ok(())
    }

    /// The sweep points the value applies to.
    pub fn points(&self, sc: &Scenario) -> Vec<Option<u64>> {
        match (&self.llc_kb, &sc.sweep) {
            (Some(ks), _) => ks.iter().map(|&k| Some(k)).collect(),
            (None, Some(s)) => s.llc_kb.iter().map(|&k| Some(k)).collect(),
            (None, None) => vec![None],
        }
    }

    /// The index of the variant labelled `label` in `sc` (validated to exist).
    pub fn index(sc: &Scenario, label: &str) -> usize {
        sc.variants
            .iter()
            .position(|v| v.label == label)
            .expect("validated")
    }

    /// The paper's range: its change in percent, else its value.
    pub fn range(&self) -> [f64; 2] {
        self.change_pct.or(self.value).expect("validated")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
