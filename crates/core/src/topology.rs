//! Machine topology: chips → cores → hardware contexts (logical CPUs), and cache levels
//! with their size, associativity, line size, latency and which CPUs share each instance.
//!
//! A topology is a read-only value. The simulator builds one from a preset or file; the
//! Linux backend builds one from sysfs. Cache instance spans are explicit CPU masks so that
//! irregular real machines (offline CPUs, hybrid cores) are represented as faithfully as
//! symmetric presets.

use crate::cpumask::Cpumask;
use crate::types::CpuId;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What a cache level holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheKind {
    /// Instructions only (L1I).
    Instruction,
    /// Data only (L1D).
    Data,
    /// Instructions and data.
    Unified,
}

/// Which hardware contexts share one instance of a cache level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Private to one hardware context.
    Context,
    /// Shared by the hardware contexts of one core.
    Core,
    /// Shared by all cores of one chip.
    Chip,
    /// One instance for the whole machine.
    Machine,
}

/// One cache level of the machine (e.g. "L2, unified, 768 KB, 12-way, shared per chip").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheLevel {
    /// 1 for L1, 2 for L2, …
    pub level: u8,
    /// Instruction, data or unified.
    pub kind: CacheKind,
    /// Total capacity of one instance, in bytes.
    pub size_bytes: u64,
    /// Associativity (ways per set).
    pub ways: u32,
    /// Line (block) size in bytes.
    pub line_bytes: u32,
    /// Hit latency in core cycles (0 where unknown, e.g. on a real host).
    pub latency_cycles: u32,
    /// Store handling (write-back unless the machine says otherwise; a real host's is
    /// not read).
    #[serde(default)]
    pub write_policy: WritePolicy,
    /// Banks per instance (0: not modelled; see [`CacheSpec::banks`]).
    #[serde(default)]
    pub banks: u32,
    /// Sharing scope of one instance.
    pub scope: CacheScope,
    /// The CPUs sharing each instance; instance `i` is `instances[i]`.
    pub instances: Vec<Cpumask>,
}

impl CacheLevel {
    /// Number of sets of one instance.
    pub fn sets(&self) -> u64 {
        self.size_bytes / (self.ways as u64 * self.line_bytes as u64).max(1)
    }

    /// A short name such as `L1D` or `L2`.
    pub fn name(&self) -> String {
        match self.kind {
            CacheKind::Instruction => format!("L{}I", self.level),
            CacheKind::Data => format!("L{}D", self.level),
            CacheKind::Unified => format!("L{}", self.level),
        }
    }
}

/// One logical CPU and where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// The CPU.
    pub id: CpuId,
    /// Chip (package / socket) index, dense from 0.
    pub chip: u32,
    /// Core index, dense from 0 across the machine.
    pub core: u32,
    /// Index of this hardware context within its core.
    pub smt: u32,
}

/// Errors building a topology.
#[derive(Debug, Error, PartialEq)]
pub enum TopologyError {
    /// A count or size was zero or inconsistent.
    #[error("invalid topology: {0}")]
    Invalid(String),
}

/// A machine: its CPUs, cache levels and clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Human-readable name (preset name or host name).
    pub name: String,
    /// Core clock in MHz (0 where unknown).
    pub freq_mhz: u32,
    /// All logical CPUs, indexed by `CpuId`.
    pub cpus: Vec<CpuInfo>,
    /// Cache levels, innermost first.
    pub caches: Vec<CacheLevel>,
}

/// How a cache handles stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// Write-back, write-allocate: a store that misses fills the line, and a modified
    /// line is written to the next level when it is evicted (the default).
    #[default]
    WriteBack,
    /// Write-through, no-write-allocate (the UltraSPARC T1's L1D): every store goes on
    /// to the next level; a store that hits updates the line, which stays clean; a
    /// store that misses does not fill it.
    WriteThrough,
}

/// Shape of one cache level for [`Topology::symmetric`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CacheSpec {
    /// 1 for L1, …
    pub level: u8,
    /// Instruction, data or unified.
    pub kind: CacheKind,
    /// Capacity of one instance in bytes.
    pub size_bytes: u64,
    /// Associativity.
    pub ways: u32,
    /// Line size in bytes.
    pub line_bytes: u32,
    /// Hit latency in cycles.
    pub latency_cycles: u32,
    /// Sharing scope.
    pub scope: CacheScope,
    /// Store handling (default write-back).
    #[serde(default)]
    pub write_policy: WritePolicy,
    /// Banks of one instance, lines interleaved across them, each a pipeline that
    /// takes one request per cycle (two for an instruction fetch); requests to a busy
    /// bank wait (default 0: throughput not modelled).
    #[serde(default)]
    pub banks: u32,
}

impl Topology {
    /// A symmetric machine of `chips × cores_per_chip × threads_per_core` contexts,
    /// numbered chip-major, then core, then hardware thread.
    pub fn symmetric(
        name: &str,
        freq_mhz: u32,
        chips: u32,
        cores_per_chip: u32,
        threads_per_core: u32,
        caches: &[CacheSpec],
    ) -> Result<Topology, TopologyError> {
        if chips == 0 || cores_per_chip == 0 || threads_per_core == 0 {
            return Err(TopologyError::Invalid(
                "chips, cores per chip and threads per core must all be at least 1".into(),
            ));
        }
        let mut cpus = Vec::new();
        for chip in 0..chips {
            for c in 0..cores_per_chip {
                for t in 0..threads_per_core {
                    cpus.push(CpuInfo {
                        id: CpuId(cpus.len() as u32),
                        chip,
                        core: chip * cores_per_chip + c,
                        smt: t,
                    });
                }
            }
        }
        let mut levels = Vec::new();
        for spec in caches {
            let key = |cpu: &CpuInfo| -> u32 {
                match spec.scope {
                    CacheScope::Context => cpu.id.0,
                    CacheScope::Core => cpu.core,
                    CacheScope::Chip => cpu.chip,
                    CacheScope::Machine => 0,
                }
            };
            let n = cpus.iter().map(key).max().unwrap_or(0) + 1;
            let mut instances = vec![Cpumask::new(); n as usize];
            for cpu in &cpus {
                instances[key(cpu) as usize].set(cpu.id);
            }
            levels.push(CacheLevel {
                level: spec.level,
                kind: spec.kind,
                size_bytes: spec.size_bytes,
                ways: spec.ways,
                line_bytes: spec.line_bytes,
                latency_cycles: spec.latency_cycles,
                scope: spec.scope,
                write_policy: spec.write_policy,
                banks: spec.banks,
                instances,
            });
        }
        let t = Topology {
            name: name.to_string(),
            freq_mhz,
            cpus,
            caches: levels,
        };
        t.validate()?;
        Ok(t)
    }

    /// Checks internal consistency: dense CPU ids, every cache instance non-empty, every
    /// CPU covered exactly once by each cache level, sane cache shapes.
    pub fn validate(&self) -> Result<(), TopologyError> {
        if self.cpus.is_empty() {
            return Err(TopologyError::Invalid("no CPUs".into()));
        }
        for (i, c) in self.cpus.iter().enumerate() {
            if c.id.index() != i {
                return Err(TopologyError::Invalid(format!(
                    "CPU ids must be dense from 0; entry {i} has id {}",
                    c.id.0
                )));
            }
        }
        for l in &self.caches {
            if l.size_bytes == 0 || l.ways == 0 || l.line_bytes == 0 {
                return Err(TopologyError::Invalid(format!(
                    "{}: size, ways and line size must be non-zero",
                    l.name()
                )));
            }
            if l.size_bytes % (l.ways as u64 * l.line_bytes as u64) != 0 {
                return Err(TopologyError::Invalid(format!(
                    "{}: size {} B is not a multiple of ways × line ({} × {} B)",
                    l.name(),
                    l.size_bytes,
                    l.ways,
                    l.line_bytes
                )));
            }
            for cpu in &self.cpus {
                let n = l.instances.iter().filter(|m| m.contains(cpu.id)).count();
                if n != 1 {
                    return Err(TopologyError::Invalid(format!(
                        "{}: {} is covered by {n} instances (must be exactly 1)",
                        l.name(),
                        cpu.id
                    )));
                }
            }
        }
        Ok(())
    }

    /// Number of logical CPUs.
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Number of chips.
    pub fn nr_chips(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| c.chip as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// log2 of the line size of the first-level instruction (or unified) cache: an
    /// instruction fetch goes to the memory system when the pc enters a new such line.
    /// 6 (64-byte lines) when the machine has no such cache.
    pub fn fetch_line_shift(&self) -> u32 {
        self.caches
            .iter()
            .find(|l| l.level == 1 && l.kind != CacheKind::Data)
            .map(|l| l.line_bytes.trailing_zeros())
            .unwrap_or(6)
    }

    /// Number of cores.
    pub fn nr_cores(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| c.core as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// All CPUs.
    pub fn all_cpus(&self) -> Cpumask {
        Cpumask::from_cpus(self.cpus.iter().map(|c| c.id))
    }

    /// The CPUs of chip `chip`.
    pub fn chip_cpus(&self, chip: u32) -> Cpumask {
        Cpumask::from_cpus(self.cpus.iter().filter(|c| c.chip == chip).map(|c| c.id))
    }

    /// The CPUs of core `core`.
    pub fn core_cpus(&self, core: u32) -> Cpumask {
        Cpumask::from_cpus(self.cpus.iter().filter(|c| c.core == core).map(|c| c.id))
    }

    /// The CPU sets of each core, in core order (one set per core: its SMT contexts).
    pub fn core_domains(&self) -> Vec<Cpumask> {
        let mut cores: std::collections::BTreeMap<u32, Cpumask> = Default::default();
        for c in &self.cpus {
            cores.entry(c.core).or_default().set(c.id);
        }
        cores.into_values().collect()
    }

    /// Index (into `caches`) of the last-level cache, the outermost level holding data.
    pub fn llc(&self) -> Option<usize> {
        self.caches
            .iter()
            .enumerate()
            .filter(|(_, l)| l.kind != CacheKind::Instruction)
            .max_by_key(|(_, l)| l.level)
            .map(|(i, _)| i)
    }

    /// The CPU sets sharing each last-level-cache instance (one set per chip if no cache
    /// information is known).
    pub fn llc_domains(&self) -> Vec<Cpumask> {
        match self.llc() {
            Some(i) => self.caches[i].instances.clone(),
            None => (0..self.nr_chips() as u32)
                .map(|c| self.chip_cpus(c))
                .collect(),
        }
    }

    /// Instance of cache level `level_idx` used by `cpu`.
    pub fn cache_instance(&self, level_idx: usize, cpu: CpuId) -> usize {
        self.caches[level_idx]
            .instances
            .iter()
            .position(|m| m.contains(cpu))
            .expect("validated topology covers every CPU")
    }

    /// A multi-line human-readable description.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}: {} chip(s), {} core(s), {} hardware context(s){}\n",
            self.name,
            self.nr_chips(),
            self.nr_cores(),
            self.nr_cpus(),
            if self.freq_mhz > 0 {
                format!(", {} MHz", self.freq_mhz)
            } else {
                String::new()
            }
        );
        for chip in 0..self.nr_chips() as u32 {
            s += &format!("  chip {chip}: cpus {}\n", self.chip_cpus(chip));
        }
        for l in &self.caches {
            s += &format!(
                "  {:<4} {:>9} {:>2}-way {:>3} B lines {:>10}, {:?}-shared, {} instance(s): {}\n",
                l.name(),
                human_bytes(l.size_bytes),
                l.ways,
                l.line_bytes,
                // a host's sysfs gives no latencies: 0 means unknown
                match l.latency_cycles {
                    0 => "latency unknown".to_string(),
                    c => format!("{c} cycles"),
                },
                l.scope,
                l.instances.len(),
                l.instances
                    .iter()
                    .map(|m| format!("[{m}]"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        s
    }
}

/// Formats a byte count as `768 KB`, `2 MB`, `36 MB`, or bytes.
pub fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KB", b >> 10)
    } else {
        format!("{b} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(level: u8, kind: CacheKind, kb: u64, scope: CacheScope) -> CacheSpec {
        CacheSpec {
            level,
            kind,
            size_bytes: kb << 10,
            ways: 4,
            line_bytes: 64,
            latency_cycles: 3,
            scope,
            write_policy: WritePolicy::WriteBack,
            banks: 0,
        }
    }

    #[test]
    fn symmetric_spans() {
        let t = Topology::symmetric(
            "x",
            1000,
            2,
            2,
            2,
            &[
                spec(1, CacheKind::Data, 64, CacheScope::Core),
                spec(2, CacheKind::Unified, 2048, CacheScope::Chip),
            ],
        )
        .unwrap();
        assert_eq!(t.nr_cpus(), 8);
        assert_eq!(t.nr_chips(), 2);
        assert_eq!(t.nr_cores(), 4);
        assert_eq!(t.caches[0].instances.len(), 4);
        assert_eq!(t.caches[1].instances[1].to_string(), "4-7");
        assert_eq!(t.llc(), Some(1));
        assert_eq!(t.cache_instance(0, CpuId(3)), 1);
        assert_eq!(t.caches[1].sets(), 8192);
        assert!(t.describe().contains("L2"));
    }

    #[test]
    fn rejects_bad_shapes() {
        assert!(Topology::symmetric("x", 1, 0, 1, 1, &[]).is_err());
        let mut bad = spec(1, CacheKind::Data, 1, CacheScope::Core);
        bad.size_bytes = 1000;
        assert!(Topology::symmetric("x", 1, 1, 1, 1, &[bad]).is_err());
    }
}
