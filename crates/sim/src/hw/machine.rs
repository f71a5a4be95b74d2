//! Machine descriptions: shape, caches and timing; the built-in presets of the papers'
//! machines.

use crate::hw::prefetch::PrefetchConfig;
use cachesched_core::topology::{CacheSpec, Topology, TopologyError, WritePolicy};
use cachesched_core::{CacheKind, CacheScope};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How a core issues instructions from its hardware contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CoreKind {
    /// In-order, fine-grained multithreaded (Niagara): one pipeline shared by the hardware
    /// contexts; a context that misses waits while the others issue.
    FineGrained,
    /// Simultaneous multithreading: `issue_width` pipelines shared by the contexts.
    Smt,
    /// One hardware context per core.
    Single,
}

/// Core timing model (see [`crate::hw::core`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreModel {
    /// How the hardware contexts share the core.
    pub kind: CoreKind,
    /// Instructions dispatched per cycle by the whole core, shared by its contexts
    /// (default 1).
    #[serde(default = "one")]
    pub issue_width: u32,
    /// Out-of-order execution: loads that miss overlap within a window of
    /// `rob_entries` instructions and a thread dispatches at its instruction-level
    /// parallelism (default false: in order, a load miss stalls its context).
    #[serde(default)]
    pub out_of_order: bool,
    /// Reorder-buffer entries of an out-of-order core (default 96).
    #[serde(default = "default_rob")]
    pub rob_entries: u32,
    /// Outstanding L1 data-load misses per context of an out-of-order core (miss
    /// registers, fill buffers; default 8). In-order cores have one.
    #[serde(default = "default_load_misses")]
    pub load_misses: u32,
    /// Stores leave the store buffer one at a time, each waiting for its
    /// acknowledgement (the UltraSPARC T1; default false).
    #[serde(default)]
    pub serial_stores: bool,
}

fn one() -> u32 {
    1
}
fn default_rob() -> u32 {
    96
}
fn default_load_misses() -> u32 {
    8
}

/// Memory and interconnect timing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryModel {
    /// DRAM access latency in core cycles, excluding bus queueing and transfer.
    pub latency_cycles: u32,
    /// Memory bus bandwidth in bytes per core cycle (shared by the whole machine).
    pub bus_bytes_per_cycle: f64,
    /// Latency of an access served by another chip's cache, in cycles (by a chip of
    /// the same node when [`MemoryModel::chips_per_node`] is set).
    #[serde(default = "default_remote")]
    pub remote_latency_cycles: u32,
    /// Chips per node of a two-tier interconnect (e.g. a building block of a large
    /// POWER5 system): chips of one node are near (`remote_latency_cycles`), chips of
    /// other nodes far (`far_latency_cycles`). 0 (default): every chip is near.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chips_per_node: u32,
    /// Latency of an access served by a cache on another node, in cycles; a store that
    /// must invalidate copies on another node waits this long. Used only with
    /// `chips_per_node` (default 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub far_latency_cycles: u32,
    /// Store-buffer entries per hardware context (stores that miss the L1 occupy one
    /// until they complete; a full buffer stalls the thread).
    #[serde(default = "default_sb")]
    pub store_buffer_entries: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}
fn default_remote() -> u32 {
    120
}
fn default_sb() -> u32 {
    8
}

/// A complete machine description. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Name shown in reports.
    pub name: String,
    /// Core clock in MHz.
    pub freq_mhz: u32,
    /// Number of chips.
    pub chips: u32,
    /// Cores per chip.
    pub cores_per_chip: u32,
    /// Hardware contexts per core.
    pub threads_per_core: u32,
    /// Core timing.
    pub core: CoreModel,
    /// Cache levels, innermost first.
    pub caches: Vec<CacheSpec>,
    /// Memory timing.
    pub memory: MemoryModel,
    /// Hardware data prefetchers (default: none).
    #[serde(default)]
    pub prefetch: PrefetchConfig,
}

/// Errors building a machine.
#[derive(Debug, Error)]
pub enum MachineError {
    /// No preset of that name.
    #[error("unknown machine preset '{0}'; run `cachesched machines` for the list")]
    UnknownPreset(String),
    /// The description is inconsistent.
    #[error("invalid machine '{name}': {reason}")]
    Invalid {
        /// Machine name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The topology is inconsistent.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// Names of the built-in presets, with a one-line description each.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "niagara-2c",
        "CASC: 2 in-order cores x 4 hw threads, 992 MHz, shared L2 768 KB 12-way",
    ),
    (
        "niagara-8c",
        "Niagara T1: 8 in-order cores x 4 hw threads, shared L2 3 MB 12-way",
    ),
    (
        "t2000",
        "affinity §2: UltraSPARC T1 in a Sun Fire T2000, 8 in-order cores x 4 hw threads, 1.2 GHz, shared L2 3 MB 12-way",
    ),
    (
        "t1-dual",
        "cache-fair: 2 single-threaded cores, 992 MHz, shared L2 256 KB 8-way, 4 GB/s bus",
    ),
    (
        "power5-2x2x2",
        "clustering: 2 chips x 2 cores x 2 SMT, L2 1.875 MB + L3 36 MB per chip",
    ),
    (
        "power5-8chip",
        "clustering §7.4: 8 chips x 2 cores x 2 SMT in 4 building blocks of 2 (remote 160 / 240 cycles)",
    ),
    (
        "clovertown-2x2",
        "affinity: 2 chips x 2 cores, L2 4 MB 16-way per chip",
    ),
    (
        "clovertown-ump",
        "affinity: 2 chips x 1 core (unicore multiprocessor), L2 4 MB per chip",
    ),
    ("xeon-e5-16m", "timeslices: 4 cores sharing a 16 MB LLC"),
    ("xeon-e5-16m-2c", "timeslices: 2 cores sharing a 16 MB LLC"),
    ("core2-4m", "timeslices: 2 cores sharing a 4 MB LLC"),
];

/// The workload each preset's paper runs on it, as a mix: what `cachesched bench
/// engine` measures speed on and what the engine's golden results are made of (one
/// hardware context each where the paper fills the machine).
/// niagara-2c: CASC's headline (6 art, 6 twolf, 6 bdb); niagara-8c: the same programs
/// and vpr, 8 each; t2000: one of the affinity study's §2 experiments (a benchmark, a
/// base vector and the L2 base vector); t1-dual: cache-fair's memory-intensive pair twice; power5-2x2x2:
/// the clustering scoreboard microbenchmark (16 threads; 32 on power5-8chip); clovertown-2x2 and
/// clovertown-ump: the affinity study's memory-bound main programs with an interferer;
/// the xeon and core2 presets: the timeslice study's memory-intensive programs, four
/// per core.
pub const PAPER_MIXES: &[(&str, &str)] = &[
    ("niagara-2c", "art:6,twolf:6,bdb:6"),
    ("niagara-8c", "art:8,twolf:8,bdb:8,vpr:8"),
    ("t2000", "twolf:1,bv-l1i=16:1,bv-l2=3072:1"),
    ("t1-dual", "twolf:2,mcf:2"),
    ("power5-2x2x2", "scoreboard:16"),
    ("power5-8chip", "scoreboard:32"),
    ("clovertown-2x2", "art:2,twolf:2,mcf:1"),
    ("clovertown-ump", "art:4,mcf:2"),
    ("xeon-e5-16m", "soplex:4,raytrace:4,mcf06:4,omnetpp:4"),
    ("xeon-e5-16m-2c", "soplex:4,raytrace:4"),
    ("core2-4m", "soplex:4,raytrace:4"),
];

fn c(
    level: u8,
    kind: CacheKind,
    size_kb: u64,
    ways: u32,
    line: u32,
    lat: u32,
    scope: CacheScope,
) -> CacheSpec {
    CacheSpec {
        level,
        kind,
        size_bytes: size_kb << 10,
        ways,
        line_bytes: line,
        latency_cycles: lat,
        scope,
        write_policy: WritePolicy::WriteBack,
        banks: 0,
    }
}

use CacheKind::{Data as D, Instruction as I, Unified as U};
use CacheScope::{Chip, Core};

/// The most logical CPUs a simulated machine may have (the scaling benchmark's largest
/// is 256).
pub const MAX_CPUS: u64 = 1024;

impl MachineConfig {
    /// The preset called `name` (see [`PRESETS`]).
    pub fn preset(name: &str) -> Result<MachineConfig, MachineError> {
        // UltraSPARC T1: single issue, in order, one store to the L2 in flight per
        // thread ([OST1-UA] §1.3.1, §1.3.4)
        let niagara = |kind| CoreModel {
            kind,
            issue_width: 1,
            out_of_order: false,
            rob_entries: 1,
            load_misses: 1,
            serial_stores: true,
        };
        let inorder = niagara(CoreKind::FineGrained);
        // Intel Core (Clovertown, Conroe): 4-wide, 96-entry ROB (Intel Optimization
        // Reference Manual, Core microarchitecture, "Execution Core"); 8 outstanding
        // L1D misses as Sniper models the Core-based Xeon (config/dunnington.cfg; the
        // fill-buffer count is not in a stored Intel text)
        let core2 = CoreModel {
            kind: CoreKind::Single,
            issue_width: 4,
            out_of_order: true,
            rob_entries: 96,
            load_misses: 8,
            serial_stores: false,
        };
        let mem = |lat, bw, remote| MemoryModel {
            latency_cycles: lat,
            bus_bytes_per_cycle: bw,
            remote_latency_cycles: remote,
            chips_per_node: 0,
            far_latency_cycles: 0,
            store_buffer_entries: 8,
        };
        let m = |freq, chips, cores, threads, core, caches: Vec<CacheSpec>, memory| MachineConfig {
            name: name.to_string(),
            freq_mhz: freq,
            chips,
            cores_per_chip: cores,
            threads_per_core: threads,
            core,
            caches,
            memory,
            prefetch: PrefetchConfig::default(),
        };
        // UltraSPARC T1 L1s ([OST1-UA] §1.3.1.1, §2.4.3); load-to-use 3 cycles (AnandTech
        // lmbench of a 1 GHz T1); the L1D is write-through, no-write-allocate ("Stores
        // do not allocate", [OST1-UA] §2.4.3)
        let t1_l1d = || CacheSpec {
            write_policy: WritePolicy::WriteThrough,
            ..c(1, D, 8, 4, 16, 3, Core)
        };
        let niagara_l1 = || vec![c(1, I, 16, 4, 32, 1, Core), t1_l1d()];
        // T1 memory: 107.5 ns load-to-use (AnandTech lmbench, 980 MHz part) = 107 cycles
        // at 992 MHz, less the 3-cycle L1 hit the base CPI holds and the 64-byte bus
        // transfer the engine adds: the DRAM latency in cycles for a bus of `bw` B/cycle
        let t1_mem = |bw: f64| (107.0 - 3.0 - 64.0 / bw).round() as u32;
        let cfg = match name {
            // Niagara: 3 MB L2 in 4 banks of 768 KB, each with its own DDR2 channel, 25
            // GB/s in all ([OST1-UA] §1.2, §1.3.4, §1.3.5); the CASC paper simulates a
            // quarter of the L2 (768 KB, one bank), so a quarter of the bandwidth: 6.25
            // GB/s = 6.30 B/cycle at 992 MHz. L2 hit 23 cycles for a data access
            // ([OST1-UA] p. 1-10).
            // Each L2 bank is an 8-stage pipeline taking a request per cycle, two for
            // an instruction fill ([OST1-UA] §4.1.3.2); 768 KB is one bank.
            "niagara-2c" => {
                let mut caches = niagara_l1();
                caches.push(CacheSpec {
                    banks: 1,
                    ..c(2, U, 768, 12, 64, 23, Chip)
                });
                m(992, 1, 2, 4, inorder, caches, mem(t1_mem(6.30), 6.30, 120))
            }
            "niagara-8c" => {
                let mut caches = niagara_l1();
                caches.push(CacheSpec {
                    banks: 4,
                    ..c(2, U, 3072, 12, 64, 23, Chip)
                });
                // 25 GB/s = 25.2 B/cycle at 992 MHz
                m(992, 1, 8, 4, inorder, caches, mem(t1_mem(25.2), 25.2, 120))
            }
            // Sun Fire T2000 (affinity paper, Table 1): the same T1 chip at 1.2 GHz. The
            // L2 (23 cycles) and L1s run at the core clock; the 107.5 ns load-to-use
            // memory latency is 129 cycles at 1.2 GHz, and the four DDR2 channels' 25
            // GB/s are 20.8 B/cycle. The paper runs one thread per core; its scenario
            // files bind threads to one context of each core used.
            "t2000" => {
                let mut caches = niagara_l1();
                caches.push(CacheSpec {
                    banks: 4,
                    ..c(2, U, 3072, 12, 64, 23, Chip)
                });
                let bw = 20.8;
                let lat = (107.5f64 * 1.2 - 3.0 - 64.0 / bw).round() as u32;
                m(1200, 1, 8, 4, inorder, caches, mem(lat, bw, 120))
            }
            "t1-dual" => m(
                992,
                1,
                2,
                1,
                niagara(CoreKind::Single),
                vec![
                    c(1, I, 16, 4, 32, 1, Core),
                    t1_l1d(),
                    // paper 2 Table 1: "four-way banked"
                    CacheSpec {
                        banks: 4,
                        ..c(2, U, 256, 8, 64, 23, Chip)
                    },
                ],
                // paper 2 Table 1: 4 GB/s at 992 MHz ≈ 4.03 bytes per cycle; T1 latencies
                mem(t1_mem(4.03), 4.03, 120),
            ),
            // OpenPower 720 (Tam et al., Fig. 1): L2 ~14 cycles, L3 ~90, memory ~310,
            // cross-chip cache access at least 120 cycles. The real L2 is 1.875 MB
            // 10-way with 128 B lines (1536 sets).
            //
            // power5-8chip: the paper's §7.4 machine, a 32-way POWER5 of 8 chips (the
            // p5 570's largest configuration: 4 building blocks of 2 chips, joined by
            // fabric cables; IBM Redpaper on the p5 570). Same chips; a cache on a chip
            // of the same building block answers in the 2-chip machine's 160 cycles,
            // one on another building block in 240: an assumption (one more fabric
            // hop at half the near cost), as neither the paper nor a source read here
            // gives the latency.
            "power5-2x2x2" | "power5-8chip" => m(
                1500,
                if name == "power5-8chip" { 8 } else { 2 },
                2,
                2,
                // POWER5: dispatch groups of up to 5 instructions per cycle from one
                // thread, 2-way SMT; 20-entry global completion table of 5-instruction
                // groups (100 instructions in flight) and an 8-entry load-miss queue
                // per core, as Sinharoy et al., IBM JRD 49(4/5) 2005 describe them
                // (not re-read here: secondary sources only)
                CoreModel {
                    kind: CoreKind::Smt,
                    issue_width: 5,
                    out_of_order: true,
                    rob_entries: 100,
                    load_misses: 8,
                    serial_stores: false,
                },
                vec![
                    // paper 3 Table 1: 64 KB 4-way L1s (the real POWER5 has a 2-way
                    // L1I and a 32 KB L1D; the preset is the paper's machine)
                    c(1, I, 64, 4, 128, 1, Core),
                    c(1, D, 64, 4, 128, 2, Core),
                    // three slices with their own controllers (IBM Redpaper on the
                    // p5 570, §2.1)
                    CacheSpec {
                        banks: 3,
                        ..c(2, U, 1920, 10, 128, 14, Chip)
                    },
                    c(3, U, 36 * 1024, 12, 256, 90, Chip),
                ],
                // each POWER5 chip has its own memory controller (IBM Redpaper on the
                // p5 570, §2.1), so the 8-chip machine has the 2-chip one's bandwidth
                // per chip: 4 x 8 B/cycle on the model's one shared bus (model change of
                // 2026-11-25; it had the 2-chip machine's 8 B/cycle for all 8 chips)
                if name == "power5-8chip" {
                    MemoryModel {
                        chips_per_node: 2,
                        far_latency_cycles: 240,
                        ..mem(310, 32.0, 160)
                    }
                } else {
                    mem(310, 8.0, 160)
                },
            ),
            "clovertown-2x2" | "clovertown-ump" => {
                let cores = if name == "clovertown-2x2" { 2 } else { 1 };
                m(
                    1860,
                    2,
                    cores,
                    1,
                    core2,
                    vec![
                        c(1, I, 32, 8, 64, 1, Core),
                        c(1, D, 32, 8, 64, 3, Core),
                        c(2, U, 4096, 16, 64, 14, Chip),
                    ],
                    // 1066 MT/s front-side bus × 8 B = 8.53 GB/s = 4.57 B/cycle at
                    // 1.866 GHz (Xeon E5320; the arithmetic of Sniper's
                    // dunnington.cfg), shared by both dies; memory and remote
                    // latencies have no source
                    mem(200, 4.57, 180),
                )
            }
            "xeon-e5-16m" | "xeon-e5-16m-2c" => {
                let cores = if name == "xeon-e5-16m" { 4 } else { 2 };
                m(
                    2000,
                    1,
                    cores,
                    1,
                    // Sandy Bridge: 4-wide, 168-entry ROB, 10 L1D fill buffers (Intel
                    // Optimization Reference Manual, Sandy Bridge chapter; not in a
                    // stored text, so unverified here)
                    CoreModel {
                        rob_entries: 168,
                        load_misses: 10,
                        ..core2
                    },
                    vec![
                        c(1, I, 32, 8, 64, 1, Core),
                        c(1, D, 32, 8, 64, 4, Core),
                        c(2, U, 256, 8, 64, 12, Core),
                        // L3 30 cycles (Sandy Bridge-E measurement, TechReport;
                        // secondary)
                        c(3, U, 16 * 1024, 16, 64, 30, Chip),
                    ],
                    mem(180, 12.0, 150),
                )
            }
            // Core 2 Duo E6550 (the CPUID brand string of paper 5's 4 MB machine):
            // 2.33 GHz, 1333 MT/s bus × 8 B = 10.67 GB/s = 4.57 B/cycle; memory latency
            // has no source
            "core2-4m" => m(
                2333,
                1,
                2,
                1,
                core2,
                vec![
                    c(1, I, 32, 8, 64, 1, Core),
                    c(1, D, 32, 8, 64, 3, Core),
                    c(2, U, 4096, 16, 64, 14, Chip),
                ],
                mem(220, 4.57, 150),
            ),
            _ => return Err(MachineError::UnknownPreset(name.to_string())),
        };
        let mut cfg = cfg;
        cfg.prefetch = match name {
            // Intel Core and Sandy Bridge: L1D next-line and IP-stride prefetchers, L2
            // streamer (Intel Optimization Reference Manual, "Data Prefetching"; the
            // affinity paper credits Clovertown's "aggressive prefetching", §2)
            "clovertown-2x2" | "clovertown-ump" | "xeon-e5-16m" | "xeon-e5-16m-2c" | "core2-4m" => {
                PrefetchConfig::intel_core()
            }
            // POWER5: a hardware stream prefetcher of 8 streams into the L1D and L2
            // (Sinharoy et al., IBM JRD 49(4/5) 2005; secondary sources only). Whether
            // store misses train it is not in those sources: stores train it, as the
            // model always had it (every clustering result was made so)
            "power5-2x2x2" | "power5-8chip" => PrefetchConfig {
                l1_next_line: true,
                next_line_on_stores: true,
                l2_streamer: true,
                ..PrefetchConfig::default()
            },
            // UltraSPARC T1: no hardware data prefetcher ([OST1-UA] describes none;
            // its threads hide latency instead)
            _ => PrefetchConfig::default(),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the description and builds its topology.
    pub fn topology(&self) -> Result<Topology, MachineError> {
        Ok(Topology::symmetric(
            &self.name,
            self.freq_mhz,
            self.chips,
            self.cores_per_chip,
            self.threads_per_core,
            &self.caches,
        )?)
    }

    /// Checks the description for consistency and its sizes against their bounds
    /// ([`MAX_CPUS`], [`crate::hw::cache::MAX_CACHE_BYTES`]).
    pub fn validate(&self) -> Result<(), MachineError> {
        let bad = |reason: String| MachineError::Invalid {
            name: self.name.clone(),
            reason,
        };
        if self.freq_mhz == 0 {
            return Err(bad("freq_mhz must be positive".into()));
        }
        if self.core.issue_width == 0 {
            return Err(bad("core.issue_width must be at least 1".into()));
        }
        if self.core.out_of_order && (self.core.rob_entries == 0 || self.core.load_misses == 0) {
            return Err(bad(
                "an out-of-order core needs rob_entries and load_misses of at least 1".into(),
            ));
        }
        if self.core.kind == CoreKind::Single && self.threads_per_core != 1 {
            return Err(bad(
                "a 'single' core has exactly one hardware context".into()
            ));
        }
        if !(self.memory.bus_bytes_per_cycle > 0.0) {
            return Err(bad("memory.bus_bytes_per_cycle must be positive".into()));
        }
        if self.prefetch.l2_degree == 0 || self.prefetch.l2_degree > 16 {
            return Err(bad("prefetch.l2_degree must be between 1 and 16".into()));
        }
        if self.memory.store_buffer_entries == 0 {
            return Err(bad("memory.store_buffer_entries must be at least 1".into()));
        }
        let (per_node, far) = (self.memory.chips_per_node, self.memory.far_latency_cycles);
        if per_node > 0
            && (!self.chips.is_multiple_of(per_node) || far < self.memory.remote_latency_cycles)
        {
            return Err(bad(format!(
                "memory.chips_per_node ({per_node}) must divide chips ({}) and \
                 memory.far_latency_cycles ({far}) must be at least remote_latency_cycles ({})",
                self.chips, self.memory.remote_latency_cycles
            )));
        }
        if per_node == 0 && far != 0 {
            return Err(bad(
                "memory.far_latency_cycles needs memory.chips_per_node (chips per node)".into(),
            ));
        }
        if !self
            .caches
            .iter()
            .any(|c| c.level == 1 && c.kind != CacheKind::Instruction)
        {
            return Err(bad("a level-1 data (or unified) cache is required".into()));
        }
        for w in self.caches.windows(2) {
            if w[1].level < w[0].level {
                return Err(bad("caches must be listed innermost level first".into()));
            }
        }
        let cpus = self.chips as u64 * self.cores_per_chip as u64 * self.threads_per_core as u64;
        if cpus > MAX_CPUS {
            return Err(bad(format!(
                "{cpus} CPUs ({} chips × {} cores × {} threads): a machine has at most {MAX_CPUS}",
                self.chips, self.cores_per_chip, self.threads_per_core
            )));
        }
        for c in &self.caches {
            if c.size_bytes > crate::hw::cache::MAX_CACHE_BYTES {
                return Err(bad(format!(
                    "L{} is {} KiB: a cache has at most 1 GiB (1048576 KiB)",
                    c.level,
                    c.size_bytes >> 10
                )));
            }
            if !c.line_bytes.is_power_of_two() {
                return Err(bad(format!(
                    "L{} line size {} is not a power of two",
                    c.level, c.line_bytes
                )));
            }
        }
        self.topology()?;
        Ok(())
    }

    /// Replaces the size of the last-level cache (keeping ways and line size), e.g. for
    /// the CASC L2 sweep.
    pub fn with_llc_bytes(mut self, bytes: u64) -> Result<MachineConfig, MachineError> {
        let llc = self
            .caches
            .iter_mut()
            .filter(|c| c.kind != CacheKind::Instruction)
            .max_by_key(|c| c.level)
            .expect("validated machine has a data cache");
        llc.size_bytes = bytes;
        self.name = format!("{}-llc{}k", self.name, bytes >> 10);
        self.validate()?;
        Ok(self)
    }

    /// A machine with this host's topology (from sysfs) and generic timing, for
    /// simulating "this machine".
    pub fn from_topology(t: &Topology) -> Result<MachineConfig, MachineError> {
        let chips = t.nr_chips() as u32;
        let cores = t.nr_cores() as u32;
        let threads = (t.nr_cpus() as u32 / cores.max(1)).max(1);
        let caches: Vec<CacheSpec> = t
            .caches
            .iter()
            .map(|l| CacheSpec {
                level: l.level,
                kind: l.kind,
                size_bytes: l.size_bytes,
                ways: l.ways,
                line_bytes: l.line_bytes,
                latency_cycles: if l.latency_cycles > 0 {
                    l.latency_cycles
                } else {
                    [0, 4, 14, 40, 60][l.level.min(4) as usize]
                },
                scope: l.scope,
                write_policy: l.write_policy,
                banks: l.banks,
            })
            .collect();
        let cfg = MachineConfig {
            name: t.name.clone(),
            freq_mhz: if t.freq_mhz > 0 { t.freq_mhz } else { 2000 },
            chips,
            cores_per_chip: (cores / chips.max(1)).max(1),
            threads_per_core: threads,
            // generic: a 4-wide out-of-order core of the Intel Core kind
            core: CoreModel {
                kind: if threads > 1 {
                    CoreKind::Smt
                } else {
                    CoreKind::Single
                },
                issue_width: 4,
                out_of_order: true,
                rob_entries: 96,
                load_misses: 8,
                serial_stores: false,
            },
            caches,
            memory: MemoryModel {
                latency_cycles: 200,
                bus_bytes_per_cycle: 8.0,
                remote_latency_cycles: 150,
                chips_per_node: 0,
                far_latency_cycles: 0,
                store_buffer_entries: 16,
            },
            // a host of today: the Intel Core kind's prefetchers
            prefetch: PrefetchConfig::intel_core(),
        };
        if cfg.chips * cfg.cores_per_chip * cfg.threads_per_core != t.nr_cpus() as u32 {
            return Err(MachineError::Invalid {
                name: t.name.clone(),
                reason: "host topology is not symmetric (chips × cores × threads ≠ CPUs); describe it in a machine file".into(),
            });
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_presets_build() {
        for (name, _) in PRESETS {
            let m = MachineConfig::preset(name).unwrap();
            let t = m.topology().unwrap();
            assert_eq!(
                t.nr_cpus() as u32,
                m.chips * m.cores_per_chip * m.threads_per_core
            );
        }
        let n = MachineConfig::preset("niagara-2c").unwrap();
        let t = n.topology().unwrap();
        assert_eq!(t.nr_cpus(), 8);
        assert_eq!(t.caches[t.llc().unwrap()].size_bytes, 768 << 10);
        let small = n.with_llc_bytes(48 << 10).unwrap();
        assert_eq!(small.caches[2].size_bytes, 48 << 10);
        assert!(MachineConfig::preset("nope")
            .unwrap_err()
            .to_string()
            .contains("cachesched machines"));
    }

    #[test]
    fn rejects_unknown_keys_and_bad_values() {
        let mut m = MachineConfig::preset("t1-dual").unwrap();
        let text = toml::to_string(&m).unwrap();
        let back: MachineConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, m);
        let err = toml::from_str::<MachineConfig>(&format!("{text}\nbogus = 1\n")).unwrap_err();
        assert!(err.to_string().contains("bogus"));
        m.threads_per_core = 2;
        assert!(m.validate().is_err());
        // nodes must divide the chips, and the far latency needs nodes and is not
        // below the near one
        let eight = MachineConfig::preset("power5-8chip").unwrap();
        let text = toml::to_string(&eight).unwrap();
        assert!(text.contains("chips_per_node = 2"), "{text}");
        assert_eq!(toml::from_str::<MachineConfig>(&text).unwrap(), eight);
        for (per_node, far) in [(3, 240), (2, 100), (0, 240)] {
            let mut bad = eight.clone();
            bad.memory.chips_per_node = per_node;
            bad.memory.far_latency_cycles = far;
            assert!(bad.validate().is_err(), "{per_node} {far}");
        }
    }
}
