//! Sharing-aware thread clustering (paper 3: Tam, Azimi and Stumm, "Thread clustering:
//! sharing-aware scheduling on SMP-CMP-SMT multiprocessors", EuroSys 2007).
//!
//! Threads that share data should run on one chip, so that the data moves between
//! their caches on the chip and not across chips. The policy finds such threads without
//! being told, in four phases per process (threads of different processes share
//! nothing and are never compared):
//!
//! 1. **Monitoring** (§4.2): every tick, the process's remote-cache stall cycles
//!    ([`CounterKind::DataStallRemoteCycles`]) as a share of its cycles, over windows
//!    of `window_cycles` cycles summed over its threads. A window at or above
//!    `activation_share` starts detection.
//! 2. **Detection** (§4.3): address sampling of remote-cache accesses, one in N with N
//!    jittered at every sample and raised if sampling would cost more than
//!    `max_overhead` of the cycles. Samples go into [`ShMaps`] through the process's
//!    filter. Detection ends after `samples_per_thread` × threads samples of the
//!    process (paper: about 1 million for its 16-thread SPECjbb).
//! 3. **Clustering** (§4.4): see [`cluster`](cluster::cluster).
//! 4. **Migration** (§4.5): see [`place`](place::place); each thread's CPU mask
//!    becomes its chip's CPUs (or one context of that chip, chosen at random, with
//!    `within_chip = "context"`, the paper's own placement). Then monitoring resumes
//!    after `settle_ms`; a round that moved no thread doubles (`backoff`) the next
//!    window, so that sharing no placement can remove does not keep the sampling on.
//!
//! `sample_scale` shrinks detection for short simulations consistently: s × the samples,
//! counters saturating at s × 255, small values s × 3 and the similarity threshold
//! s² × 40,000 (counts grow linearly with samples, dot products with their square).
//! `sample_scale = 1` is the paper's scale.

pub mod cluster;
pub mod place;
pub mod shmap;

use crate::within;
use cachesched_core::{AddressSample, CounterKind, CpuId, Cpumask, Ctx, Nanos, Policy, ThreadId};
use cluster::{ClusterParams, Clustering};
use serde::{Deserialize, Serialize};
use shmap::{SampleFate, ShMaps};
use std::collections::{BTreeMap, BTreeSet};

/// Where in its chip a placed thread may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WithinChip {
    /// Any CPU of the chip (the kernel balances inside it).
    #[default]
    Chip,
    /// One hardware context of the chip, drawn at random (§4.5), at most ⌈n / contexts⌉
    /// threads per context.
    Context,
}

/// Configuration of [`Clustering`](ThreadClustering). Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusteringConfig {
    /// Remote-cache stall cycles as a share of cycles that starts detection (default
    /// 0.20, §4.2).
    pub activation_share: f64,
    /// Monitoring window: cycles summed over the process's threads (default 1e9, the
    /// paper's "per billion cycles"; whether it meant per thread is not said).
    pub window_cycles: f64,
    /// Tick period in ms (default 10).
    pub tick_ms: f64,
    /// Slots per shMap, a power of two (default 256, §4.3.1).
    pub shmap_entries: usize,
    /// Region size in bytes, a power of two (default 128, the Power5 L2 line).
    pub region_bytes: u64,
    /// Sample one in this many remote accesses (default 10, the balance point of
    /// Figure 8).
    pub period: u64,
    /// Each period is drawn uniformly from period × (1 ± this) (default 0.1: "a small
    /// random value", §4.3.1).
    pub period_jitter: f64,
    /// Samples per thread of the process that end detection (default 62,500 = 1 M / 16,
    /// the paper's count for 16 SPECjbb threads).
    pub samples_per_thread: f64,
    /// Scale of detection (default 1, the paper's; see the module documentation).
    pub sample_scale: f64,
    /// Slots of the filter one thread may claim (default 32; the paper has a limit but
    /// gives no value).
    pub max_claims_per_thread: usize,
    /// Counters below this are noise (default 3, §4.4.1; scaled by `sample_scale`).
    pub small_value: u32,
    /// Similarity threshold (default 40,000, §4.4.1; scaled by `sample_scale`²).
    pub similarity: f64,
    /// A slot non-zero in more than this fraction of the threads is global (default 0.5).
    pub global_fraction: f64,
    /// Clusters smaller than this are placed as loose threads (default 2).
    pub min_cluster: usize,
    /// Where a placed thread may run inside its chip (default `chip`).
    pub within_chip: WithinChip,
    /// Discard sampled stores: the Power5 event samples L1D misses, and its L1D is
    /// store-through (default true).
    pub loads_only: bool,
    /// The cost of one sample in cycles as this policy assumes it, for the overhead
    /// bound (default 0: unknown, no bound). The simulator charges its own
    /// `sample_cost_cycles`; set both alike.
    pub sample_cost_cycles: f64,
    /// Raise the period so that sampling costs at most this share of the sampled
    /// threads' cycles (default 0.05).
    pub max_overhead: f64,
    /// Give up a detection after this long, ms (default 2000).
    pub max_detect_ms: f64,
    /// Wait after a migration before monitoring resumes, ms (default 50).
    pub settle_ms: f64,
    /// Factor on the next window after a round that moved nobody (default 2).
    pub backoff: f64,
    /// Act on the clusters (default true). False: detect and cluster, then monitor
    /// again without moving anyone (for measuring detection alone, as Figure 8 does).
    #[serde(skip_serializing_if = "is_true")]
    pub place: bool,
}

impl Default for ClusteringConfig {
    fn default() -> Self {
        ClusteringConfig {
            activation_share: 0.20,
            window_cycles: 1e9,
            tick_ms: 10.0,
            shmap_entries: 256,
            region_bytes: 128,
            period: 10,
            period_jitter: 0.1,
            samples_per_thread: 62_500.0,
            sample_scale: 1.0,
            max_claims_per_thread: 32,
            small_value: 3,
            similarity: 40_000.0,
            global_fraction: 0.5,
            min_cluster: 2,
            within_chip: WithinChip::Chip,
            loads_only: true,
            sample_cost_cycles: 0.0,
            max_overhead: 0.05,
            max_detect_ms: 2000.0,
            settle_ms: 50.0,
            backoff: 2.0,
            place: true,
        }
    }
}

fn is_true(b: &bool) -> bool {
    *b
}

impl ClusteringConfig {
    /// Checks ranges; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        within("activation_share", self.activation_share, 0.0, 1.0)?;
        within("window_cycles", self.window_cycles, 1e3, 1e15)?;
        within("tick_ms", self.tick_ms, 0.01, 1e6)?;
        if !(self.shmap_entries.is_power_of_two() && (2..=1 << 20).contains(&self.shmap_entries)) {
            return Err(format!(
                "shmap_entries must be a power of two between 2 and 1048576 (got {})",
                self.shmap_entries
            ));
        }
        if !(self.region_bytes.is_power_of_two() && (8..=1 << 30).contains(&self.region_bytes)) {
            return Err(format!(
                "region_bytes must be a power of two between 8 and 2^30 (got {})",
                self.region_bytes
            ));
        }
        if self.period == 0 {
            return Err("period must be at least 1".into());
        }
        within("period_jitter", self.period_jitter, 0.0, 0.9)?;
        within("samples_per_thread", self.samples_per_thread, 1.0, 1e9)?;
        within("sample_scale", self.sample_scale, 1e-4, 100.0)?;
        if self.max_claims_per_thread == 0 {
            return Err("max_claims_per_thread must be at least 1".into());
        }
        within("similarity", self.similarity, 0.0, 1e15)?;
        within("global_fraction", self.global_fraction, 0.0, 1.0)?;
        within("sample_cost_cycles", self.sample_cost_cycles, 0.0, 1e9)?;
        within("max_overhead", self.max_overhead, 1e-6, 1.0)?;
        within("max_detect_ms", self.max_detect_ms, 0.01, 1e9)?;
        within("settle_ms", self.settle_ms, 0.0, 1e9)?;
        within("backoff", self.backoff, 1.0, 1e3)?;
        Ok(())
    }

    /// Clustering parameters after scaling.
    fn cluster_params(&self) -> ClusterParams {
        let s = self.sample_scale;
        ClusterParams {
            small_value: (self.small_value as f64 * s).round() as u32,
            similarity: (self.similarity * s * s).round() as u64,
            global_fraction: self.global_fraction,
        }
    }

    /// Where a counter saturates after scaling.
    fn saturate(&self) -> u8 {
        (255.0 * self.sample_scale).round().clamp(1.0, 255.0) as u8
    }
}

/// Where one process is in the monitor–detect–cluster–migrate cycle.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Watching remote stalls over a window.
    Monitor,
    /// Sampling since `since`.
    Detect { since: Nanos },
    /// Waiting after a migration until `until`.
    Settle { until: Nanos },
}

/// One process's state.
#[derive(Debug, Clone)]
struct Process {
    threads: BTreeSet<ThreadId>,
    phase: Phase,
    window_stall: u64,
    window_cycles: u64,
    window_factor: f64,
    maps: Option<ShMaps>,
    samples: u64,
}

/// Counts for reports.
#[derive(Debug, Clone, Default)]
struct Stats {
    windows: u64,
    rounds: u64,
    timeouts: u64,
    samples: u64,
    counted: u64,
    filter_conflicts: u64,
    thread_limit: u64,
    stores: u64,
    other_process: u64,
    moved: u64,
    idle_rounds: u64,
    first_clustered_ms: Option<f64>,
    detect_ms: f64,
    clusters: u64,
    loose: u64,
    global_slots: u64,
    last_share: f64,
    max_share: f64,
    period: u64,
}

/// The last clustering of one process, kept for reports.
#[derive(Debug, Clone)]
struct Snapshot {
    maps: BTreeMap<ThreadId, Vec<u8>>,
    clustering: Clustering,
}

/// The thread-clustering policy. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct ThreadClustering {
    config: ClusteringConfig,
    chips: Vec<Cpumask>,
    procs: BTreeMap<u32, Process>,
    proc_of: BTreeMap<ThreadId, u32>,
    last: BTreeMap<ThreadId, (u64, u64, u64)>,
    chip_of: BTreeMap<ThreadId, usize>,
    context_of: BTreeMap<ThreadId, CpuId>,
    sampling: bool,
    period: u64,
    stats: Stats,
    snapshot: Option<Snapshot>,
}

impl ThreadClustering {
    /// A policy with `config`.
    pub fn new(config: ClusteringConfig) -> ThreadClustering {
        let period = config.period;
        ThreadClustering {
            config,
            chips: Vec::new(),
            procs: BTreeMap::new(),
            proc_of: BTreeMap::new(),
            last: BTreeMap::new(),
            chip_of: BTreeMap::new(),
            context_of: BTreeMap::new(),
            sampling: false,
            period,
            stats: Stats::default(),
            snapshot: None,
        }
    }

    fn new_maps(&self) -> ShMaps {
        ShMaps::new(
            self.config.shmap_entries,
            self.config.region_bytes,
            self.config.saturate(),
            self.config.max_claims_per_thread,
        )
    }

    /// Samples that end a detection in a process of `threads` threads.
    fn target(&self, threads: usize) -> u64 {
        (self.config.samples_per_thread * self.config.sample_scale * threads as f64).ceil() as u64
    }

    /// A period drawn around the current one.
    fn jittered(&self, ctx: &mut Ctx<'_>) -> u64 {
        let j = self.config.period_jitter;
        let f = 1.0 + j * (2.0 * ctx.rng().unit() - 1.0);
        ((self.period as f64 * f).round() as u64).max(1)
    }

    /// Turns sampling on or off as detection needs it.
    fn update_sampling(&mut self, ctx: &mut Ctx<'_>) {
        let want = self
            .procs
            .values()
            .any(|p| matches!(p.phase, Phase::Detect { .. }));
        if want && !self.sampling {
            let p = self.jittered(ctx);
            ctx.set_sampling_period(Some(p));
        } else if !want && self.sampling {
            ctx.set_sampling_period(None);
        }
        self.sampling = want;
    }

    /// Clusters process `pid` from its shMaps and places its threads.
    fn cluster_and_place(&mut self, ctx: &mut Ctx<'_>, pid: u32) {
        let params = self.config.cluster_params();
        let Some(proc) = self.procs.get_mut(&pid) else {
            return;
        };
        let maps = proc
            .maps
            .take()
            .map(|m| m.maps().clone())
            .unwrap_or_default();
        let mut result = cluster::cluster(&maps, &params);
        // clusters too small to place are loose threads, in reports too
        result
            .clusters
            .retain(|c| c.len() >= self.config.min_cluster);
        let clusters = &result.clusters;
        let threads: Vec<ThreadId> = proc.threads.iter().copied().collect();
        let in_cluster: BTreeSet<ThreadId> = clusters.iter().flatten().copied().collect();
        let loose: Vec<ThreadId> = threads
            .iter()
            .copied()
            .filter(|t| !in_cluster.contains(t))
            .collect();
        self.stats.clusters = clusters.len() as u64;
        self.stats.loose = loose.len() as u64;
        self.stats.global_slots = result.global_slots.len() as u64;
        // the chip each thread is on now: the policy's own placement, else where it ran
        let current: BTreeMap<ThreadId, usize> = threads
            .iter()
            .filter_map(|&t| {
                self.chip_of
                    .get(&t)
                    .copied()
                    .or_else(|| {
                        let cpu = ctx.thread(t)?.last_cpu?;
                        self.chips.iter().position(|m| m.contains(cpu))
                    })
                    .map(|c| (t, c))
            })
            .collect();
        let placed = if self.config.place {
            place::place(clusters, &loose, self.chips.len(), &current)
        } else {
            BTreeMap::new()
        };
        let mut moved = 0;
        for (&t, &chip) in &placed {
            if current.get(&t) != Some(&chip) {
                moved += 1;
            }
            if self.chip_of.get(&t) == Some(&chip) {
                continue; // placed there already: no directive, no move inside the chip
            }
            let mask = match self.config.within_chip {
                WithinChip::Chip => self.chips[chip].clone(),
                WithinChip::Context => {
                    // a random context among the chip's least used by placed threads
                    let cpus: Vec<CpuId> = self.chips[chip].iter().collect();
                    let used: Vec<usize> = cpus
                        .iter()
                        .map(|c| {
                            self.context_of
                                .iter()
                                .filter(|&(u, x)| x == c && placed.get(u) == Some(&chip))
                                .count()
                        })
                        .collect();
                    let least = used.iter().copied().min().unwrap_or(0);
                    let free: Vec<CpuId> = cpus
                        .iter()
                        .zip(&used)
                        .filter(|&(_, &u)| u == least)
                        .map(|(&c, _)| c)
                        .collect();
                    let cpu = free[ctx.rng().below(free.len() as u64) as usize];
                    self.context_of.insert(t, cpu);
                    Cpumask::from_cpus([cpu])
                }
            };
            ctx.set_mask(t, Some(mask));
            self.chip_of.insert(t, chip);
        }
        self.stats.moved += moved;
        if moved == 0 {
            self.stats.idle_rounds += 1;
        }
        let now = ctx.now();
        if self.stats.first_clustered_ms.is_none() {
            self.stats.first_clustered_ms = Some(now.as_ms_f64());
        }
        let proc = self.procs.get_mut(&pid).expect("process");
        proc.window_factor = if moved == 0 {
            proc.window_factor * self.config.backoff
        } else {
            1.0
        };
        proc.phase = Phase::Settle {
            until: Nanos(now.0 + Nanos::from_ms_f64(self.config.settle_ms).0),
        };
        self.stats.rounds += 1;
        // reports show the last clustering that found groups (a later round on an
        // already good placement may see no remote sharing at all), else the last one,
        // so that a process that never clusters still shows its maps
        let grouped = |s: &Snapshot| !s.clustering.clusters.is_empty();
        if !result.clusters.is_empty() || !self.snapshot.as_ref().is_some_and(grouped) {
            self.snapshot = Some(Snapshot {
                maps,
                clustering: result,
            });
        }
    }

    /// The shMaps of the last clustering (thread, counters), the cluster of each
    /// clustered thread and the global slots, for reports (Figure 5).
    pub fn last_clustering(&self) -> Option<(&BTreeMap<ThreadId, Vec<u8>>, &Clustering)> {
        self.snapshot.as_ref().map(|s| (&s.maps, &s.clustering))
    }
}

impl Policy for ThreadClustering {
    fn name(&self) -> &str {
        "clustering"
    }

    fn required_counters(&self) -> Vec<CounterKind> {
        vec![
            CounterKind::Cycles,
            CounterKind::DataStallRemoteCycles,
            CounterKind::RemoteAccesses,
        ]
    }

    fn requires_address_samples(&self) -> bool {
        true
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        let topo = ctx.topology();
        self.chips = (0..topo.nr_chips() as u32)
            .map(|c| topo.chip_cpus(c))
            .collect();
        if self.chips.len() > 1 {
            ctx.set_tick_period(Some(Nanos::from_ms_f64(self.config.tick_ms)));
        }
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        let Some(v) = ctx.thread(thread) else {
            return;
        };
        let pid = v.info.process;
        self.proc_of.insert(thread, pid);
        self.last.insert(
            thread,
            (
                v.counters.get(CounterKind::DataStallRemoteCycles),
                v.counters.get(CounterKind::Cycles),
                v.counters.get(CounterKind::RemoteAccesses),
            ),
        );
        self.procs
            .entry(pid)
            .or_insert_with(|| Process {
                threads: BTreeSet::new(),
                phase: Phase::Monitor,
                window_stall: 0,
                window_cycles: 0,
                window_factor: 1.0,
                maps: None,
                samples: 0,
            })
            .threads
            .insert(thread);
    }

    fn thread_exited(&mut self, _ctx: &mut Ctx<'_>, thread: ThreadId) {
        if let Some(pid) = self.proc_of.remove(&thread) {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.threads.remove(&thread);
                if let Some(m) = p.maps.as_mut() {
                    m.remove(thread);
                }
            }
        }
        self.last.remove(&thread);
        self.chip_of.remove(&thread);
        self.context_of.remove(&thread);
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if self.chips.len() < 2 {
            return;
        }
        let now = ctx.now();
        // remote accesses and cycles of detecting threads, for the overhead bound
        let (mut det_remote, mut det_cycles) = (0u64, 0u64);
        for (&t, &pid) in &self.proc_of {
            let Some(c) = ctx.counters(t) else { continue };
            let cur = (
                c.get(CounterKind::DataStallRemoteCycles),
                c.get(CounterKind::Cycles),
                c.get(CounterKind::RemoteAccesses),
            );
            let prev = self.last.insert(t, cur).unwrap_or(cur);
            let p = self.procs.get_mut(&pid).expect("process of a thread");
            match p.phase {
                Phase::Monitor => {
                    p.window_stall += cur.0.saturating_sub(prev.0);
                    p.window_cycles += cur.1.saturating_sub(prev.1);
                }
                Phase::Detect { .. } => {
                    det_remote += cur.2.saturating_sub(prev.2);
                    det_cycles += cur.1.saturating_sub(prev.1);
                }
                Phase::Settle { .. } => {}
            }
        }
        let pids: Vec<u32> = self.procs.keys().copied().collect();
        for pid in pids {
            let target = self.target(self.procs[&pid].threads.len());
            let fresh = self.new_maps();
            let max_detect = Nanos::from_ms_f64(self.config.max_detect_ms).0;
            let p = self.procs.get_mut(&pid).expect("process");
            match p.phase {
                Phase::Monitor => {
                    if (p.window_cycles as f64) < self.config.window_cycles * p.window_factor {
                        continue;
                    }
                    let share = p.window_stall as f64 / p.window_cycles.max(1) as f64;
                    self.stats.windows += 1;
                    self.stats.last_share = share;
                    self.stats.max_share = self.stats.max_share.max(share);
                    p.window_stall = 0;
                    p.window_cycles = 0;
                    if share >= self.config.activation_share && p.threads.len() >= 2 {
                        p.phase = Phase::Detect { since: now };
                        p.maps = Some(fresh);
                        p.samples = 0;
                    }
                }
                Phase::Detect { since } => {
                    if p.samples >= target {
                        self.stats.detect_ms += Nanos(now.0 - since.0).as_ms_f64();
                        self.cluster_and_place(ctx, pid);
                    } else if now.0.saturating_sub(since.0) > max_detect {
                        self.stats.timeouts += 1;
                        self.stats.detect_ms += Nanos(now.0 - since.0).as_ms_f64();
                        p.maps = None;
                        p.window_factor *= self.config.backoff;
                        p.phase = Phase::Monitor;
                    }
                }
                Phase::Settle { until } => {
                    if now >= until {
                        p.phase = Phase::Monitor;
                        p.window_stall = 0;
                        p.window_cycles = 0;
                    }
                }
            }
        }
        // the overhead bound: samples per cycle × cost ≤ max_overhead
        if self.config.sample_cost_cycles > 0.0 && det_cycles > 0 {
            let rate = det_remote as f64 / det_cycles as f64;
            let floor =
                (rate * self.config.sample_cost_cycles / self.config.max_overhead).ceil() as u64;
            let want = self.config.period.max(floor);
            if want != self.period {
                self.period = want;
                if self.sampling {
                    let p = self.jittered(ctx);
                    ctx.set_sampling_period(Some(p));
                }
            }
        }
        self.stats.period = self.period;
        self.update_sampling(ctx);
    }

    fn address_sample(&mut self, ctx: &mut Ctx<'_>, s: &AddressSample) {
        self.stats.samples += 1;
        if self.sampling {
            // a new period after every sample, as the Power5 handler re-arms its counter
            let jittered = self.jittered(ctx);
            ctx.set_sampling_period(Some(jittered));
        }
        let Some(&pid) = self.proc_of.get(&s.thread) else {
            return;
        };
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        let Some(maps) = p.maps.as_mut() else {
            self.stats.other_process += 1;
            return;
        };
        p.samples += 1;
        if s.is_write && self.config.loads_only {
            self.stats.stores += 1;
            return;
        }
        match maps.record(s.thread, s.addr.0) {
            SampleFate::Counted => self.stats.counted += 1,
            SampleFate::FilterConflict => self.stats.filter_conflicts += 1,
            SampleFate::ThreadLimit => self.stats.thread_limit += 1,
        }
    }

    cachesched_core::report_stats!(ClusteringStats);

    /// The last clustering that found groups (else the last clustering, with no
    /// `cluster.` entries): `shmap.tNNNN` (a thread's counters),
    /// `cluster.NNN` (the threads of a cluster of at least `min_cluster`, in the
    /// clustering's order; smaller ones were placed as loose threads),
    /// `global_slots`, and `chip_of` (by thread id, the chip the policy placed the
    /// thread on at its last round; −1: never placed).
    fn vectors(&self) -> Vec<(String, Vec<f64>)> {
        let Some(snap) = &self.snapshot else {
            return Vec::new();
        };
        let mut v: Vec<(String, Vec<f64>)> = snap
            .maps
            .iter()
            .map(|(t, m)| {
                (
                    format!("shmap.t{:04}", t.0),
                    m.iter().map(|&x| x as f64).collect(),
                )
            })
            .collect();
        for (i, c) in snap.clustering.clusters.iter().enumerate() {
            v.push((
                format!("cluster.{i:03}"),
                c.iter().map(|t| t.0 as f64).collect(),
            ));
        }
        if let Some(max) = self.chip_of.keys().map(|t| t.0).max() {
            let mut chips = vec![-1.0; max as usize + 1];
            for (t, &c) in &self.chip_of {
                chips[t.0 as usize] = c as f64;
            }
            v.push(("chip_of".into(), chips));
        }
        v.push((
            "global_slots".into(),
            snap.clustering
                .global_slots
                .iter()
                .map(|&e| e as f64)
                .collect(),
        ));
        v
    }
}

cachesched_core::policy_stats! {
    /// Thread clustering's statistics over a run.
    pub struct ClusteringStats for "clustering" {
        /// Monitoring windows closed (each compares the remote-stall share with the
        /// activation threshold).
        windows: u64 = "windows",
        /// The largest share of cycles stalled on remote-cache accesses in a window.
        max_remote_stall_share: f64 = "max_remote_stall_share",
        /// The last window's remote-stall share.
        last_remote_stall_share: f64 = "last_remote_stall_share",
        /// Clustering rounds: sharing detected, threads clustered and placed.
        rounds: u64 = "rounds",
        /// Detection phases that ran out of time before enough samples came.
        timeouts: u64 = "timeouts",
        /// Rounds that moved no thread.
        idle_rounds: u64 = "idle_rounds",
        /// Address samples received.
        samples: u64 = "samples",
        /// Samples counted into a shMap.
        samples_counted: u64 = "samples_counted",
        /// Samples dropped because another region owned their shMap slot.
        samples_filter_conflict: u64 = "samples_filter_conflict",
        /// Samples dropped because their thread had claimed its limit of slots.
        samples_thread_limit: u64 = "samples_thread_limit",
        /// Store samples dropped (loads only).
        samples_stores: u64 = "samples_stores",
        /// Samples of processes not in a detection phase.
        samples_not_detecting: u64 = "samples_not_detecting",
        /// Time spent detecting sharing, summed over rounds (ms).
        detect_ms: f64 = "detect_ms",
        /// Thread migrations made by placements.
        threads_moved: u64 = "threads_moved",
        /// Clusters in the last clustering.
        clusters: u64 = "clusters",
        /// Threads in no cluster in the last clustering.
        loose_threads: u64 = "loose_threads",
        /// shMap slots the last clustering found globally shared and ignored.
        global_slots: u64 = "global_slots",
        /// The sampling period in use at the end (remote accesses per sample).
        period: u64 = "period",
        /// When the first placement was made (ms); left out if none was.
        first_clustered_ms: Option<f64> = "first_clustered_ms",
    }
}

impl ThreadClustering {
    /// The policy's statistics so far.
    pub fn statistics(&self) -> ClusteringStats {
        let s = &self.stats;
        ClusteringStats {
            windows: s.windows,
            max_remote_stall_share: s.max_share,
            last_remote_stall_share: s.last_share,
            rounds: s.rounds,
            timeouts: s.timeouts,
            idle_rounds: s.idle_rounds,
            samples: s.samples,
            samples_counted: s.counted,
            samples_filter_conflict: s.filter_conflicts,
            samples_thread_limit: s.thread_limit,
            samples_stores: s.stores,
            samples_not_detecting: s.other_process,
            detect_ms: s.detect_ms,
            threads_moved: s.moved,
            clusters: s.clusters,
            loose_threads: s.loose,
            global_slots: s.global_slots,
            period: s.period,
            first_clustered_ms: s.first_clustered_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_core::policy::KernelView;
    use cachesched_core::{Addr, Counters, Directive, SimRng, ThreadInfo, ThreadView, Topology};

    /// Two chips of two CPUs, four threads of process 7 with settable counters.
    struct View {
        topo: Topology,
        now: Nanos,
        ctr: Vec<Counters>,
    }

    impl KernelView for View {
        fn now(&self) -> Nanos {
            self.now
        }
        fn topology(&self) -> &Topology {
            &self.topo
        }
        fn live_threads(&self) -> Vec<ThreadId> {
            (0..4).map(ThreadId).collect()
        }
        fn thread(&self, t: ThreadId) -> Option<ThreadView> {
            Some(ThreadView {
                id: t,
                info: ThreadInfo {
                    name: "server".into(),
                    process: 7,
                    class: None,
                },
                counters: self.ctr[t.0 as usize],
                running_on: None,
                last_cpu: Some(CpuId(t.0)),
                runnable: true,
                mask: self.topo.all_cpus(),
                nice: 0,
            })
        }
        fn available_counters(&self) -> &[CounterKind] {
            &[]
        }
    }

    struct Harness {
        view: View,
        rng: SimRng,
        policy: ThreadClustering,
    }

    impl Harness {
        fn new(config: ClusteringConfig) -> Harness {
            let mut h = Harness {
                view: View {
                    topo: Topology::symmetric("t", 1000, 2, 2, 1, &[]).unwrap(),
                    now: Nanos(0),
                    ctr: vec![Counters::default(); 4],
                },
                rng: SimRng::new(1),
                policy: ThreadClustering::new(config),
            };
            h.call(|p, c| p.init(c));
            for t in 0..4 {
                h.call(|p, c| p.thread_started(c, ThreadId(t)));
            }
            h
        }

        fn call(&mut self, f: impl FnOnce(&mut ThreadClustering, &mut Ctx<'_>)) -> Vec<Directive> {
            let mut out = Vec::new();
            let mut ctx = Ctx::new(&self.view, &mut self.rng, &mut out);
            f(&mut self.policy, &mut ctx);
            out
        }

        /// 10 ms pass; every thread runs `cycles` cycles, `share` of them stalled remotely.
        fn tick(&mut self, cycles: u64, share: f64) -> Vec<Directive> {
            self.view.now = Nanos(self.view.now.0 + 10_000_000);
            for c in &mut self.view.ctr {
                *c.get_mut(CounterKind::Cycles) += cycles;
                *c.get_mut(CounterKind::DataStallRemoteCycles) += (cycles as f64 * share) as u64;
            }
            self.call(|p, c| p.tick(c))
        }

        /// `n` samples of thread `t` at the 128-byte regions `regions`, round robin.
        fn samples(&mut self, t: u32, regions: &[u64], n: usize) {
            for k in 0..n {
                let s = AddressSample {
                    thread: ThreadId(t),
                    cpu: CpuId(t),
                    addr: Addr(regions[k % regions.len()] * 128 + 8),
                    is_write: false,
                };
                self.call(|p, c| p.address_sample(c, &s));
            }
        }
    }

    fn config() -> ClusteringConfig {
        ClusteringConfig {
            window_cycles: 4e6,
            samples_per_thread: 800.0,
            settle_ms: 0.0,
            ..Default::default()
        }
    }

    fn sampling(d: &[Directive]) -> Option<Option<u64>> {
        d.iter().rev().find_map(|d| match d {
            Directive::SetSamplingPeriod { period } => Some(*period),
            _ => None,
        })
    }

    fn masks(d: &[Directive]) -> BTreeMap<u32, Cpumask> {
        d.iter()
            .filter_map(|d| match d {
                Directive::SetMask {
                    thread,
                    mask: Some(m),
                } => Some((thread.0, m.clone())),
                _ => None,
            })
            .collect()
    }

    /// Threads 0 and 3 share regions 1-4, threads 1 and 2 regions 11-14; they run on
    /// CPUs 0-3, so each pair is split over the two chips.
    fn feed_pairs(h: &mut Harness) {
        for (t, r) in [
            (0, [1, 2, 3, 4]),
            (3, [1, 2, 3, 4]),
            (1, [11, 12, 13, 14]),
            (2, [11, 12, 13, 14]),
        ] {
            h.samples(t, &r, 800); // 200 per region: similarity 4 x 200^2 = 160,000
        }
    }

    #[test]
    fn below_the_threshold_it_only_watches() {
        let mut h = Harness::new(config());
        for _ in 0..5 {
            let d = h.tick(1_000_000, 0.19);
            assert_eq!(sampling(&d), None, "sampling started below 20%");
            assert!(masks(&d).is_empty());
        }
        assert!(h.policy.stats.windows >= 4);
    }

    #[test]
    fn detects_clusters_and_places_each_pair_on_one_chip() {
        let mut h = Harness::new(config());
        let d = h.tick(1_000_000, 0.25); // one window of 4 M cycles, 25% remote stalls
        let p = sampling(&d).expect("sampling started").expect("a period");
        assert!((9..=11).contains(&p), "jittered around 10: {p}");
        feed_pairs(&mut h);
        let d = h.tick(1_000_000, 0.25);
        assert_eq!(sampling(&d), Some(None), "sampling stops after detection");
        let m = masks(&d);
        let chip = |t: u32| m[&t].first().map(|c| c.0 / 2).unwrap();
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(chip(0), chip(3));
        assert_eq!(chip(1), chip(2));
        assert_ne!(chip(0), chip(1));
        assert!(m.values().all(|mask| mask.weight() == 2), "chip masks");
        // hysteresis: the chip kept is the one most of the cluster was on (threads 0 and
        // 1 on chip 0, 2 and 3 on chip 1: one of each pair stays)
        assert_eq!(h.policy.stats.moved, 2);
        // with the same sharing again, a second round moves nobody
        h.tick(1_000_000, 0.25);
        let d = h.tick(1_000_000, 0.25);
        assert!(sampling(&d).is_some(), "detection again");
        feed_pairs(&mut h);
        let d = h.tick(1_000_000, 0.25);
        assert!(
            masks(&d).is_empty(),
            "the same groups moved: {:?}",
            masks(&d)
        );
        assert_eq!(h.policy.stats.idle_rounds, 1);
        assert_eq!(h.policy.stats.rounds, 2);
    }

    /// Names of the exported vectors that start with `prefix`.
    fn exported(p: &ThreadClustering, prefix: &str) -> usize {
        p.vectors()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .count()
    }

    /// Ticks (25% remote stalls) until the policy starts sampling again.
    fn until_detecting(h: &mut Harness) {
        for _ in 0..20 {
            if let Some(Some(_)) = sampling(&h.tick(1_000_000, 0.25)) {
                return;
            }
        }
        panic!("no detection within 20 ticks");
    }

    #[test]
    fn maps_are_exported_without_groups_and_a_grouped_clustering_is_kept() {
        let mut h = Harness::new(config());
        assert!(h.policy.vectors().is_empty(), "nothing before a detection");
        // a detection in which every thread samples regions of its own: no cluster
        h.tick(1_000_000, 0.25);
        for t in 0..4u32 {
            let r: Vec<u64> = (0..4).map(|k| 100 + 10 * t as u64 + k).collect();
            h.samples(t, &r, 800);
        }
        h.tick(1_000_000, 0.25);
        assert_eq!(h.policy.stats.rounds, 1);
        assert_eq!(
            exported(&h.policy, "shmap.t"),
            4,
            "the maps of a clustering without groups"
        );
        assert_eq!(exported(&h.policy, "cluster."), 0);
        // a round with groups replaces it ...
        until_detecting(&mut h);
        feed_pairs(&mut h);
        h.tick(1_000_000, 0.25);
        assert_eq!(h.policy.stats.rounds, 2);
        assert_eq!(exported(&h.policy, "cluster."), 2);
        // ... and a later round without groups does not
        until_detecting(&mut h);
        for t in 0..4u32 {
            h.samples(t, &[200 + t as u64], 800);
        }
        h.tick(1_000_000, 0.25);
        assert_eq!(h.policy.stats.rounds, 3);
        assert_eq!(
            exported(&h.policy, "cluster."),
            2,
            "the grouped clustering kept"
        );
    }

    #[test]
    fn place_false_clusters_without_moving() {
        let mut h = Harness::new(ClusteringConfig {
            place: false,
            ..config()
        });
        h.tick(1_000_000, 0.25);
        feed_pairs(&mut h);
        let d = h.tick(1_000_000, 0.25);
        assert!(masks(&d).is_empty());
        assert_eq!(h.policy.stats.rounds, 1);
        assert_eq!(h.policy.stats.clusters, 2);
    }

    #[test]
    fn stores_are_not_counted_and_scale_shrinks_the_target() {
        let c = ClusteringConfig {
            sample_scale: 0.1,
            ..ClusteringConfig::default()
        };
        let p = ThreadClustering::new(c.clone());
        assert_eq!(p.target(16), 100_000);
        let cp = c.cluster_params();
        assert_eq!((cp.similarity, cp.small_value, c.saturate()), (400, 0, 26));
        let mut h = Harness::new(config());
        h.tick(1_000_000, 0.25);
        let s = AddressSample {
            thread: ThreadId(0),
            cpu: CpuId(0),
            addr: Addr(4096),
            is_write: true,
        };
        h.call(|p, c| p.address_sample(c, &s));
        assert_eq!((h.policy.stats.stores, h.policy.stats.counted), (1, 0));
    }
}
