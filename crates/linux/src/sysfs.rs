//! Host topology from sysfs (`/sys/devices/system/cpu`), degrading gracefully where a
//! VM or ARM board omits cache ids, levels, associativity or sharing lists.
//!
//! Online CPUs are numbered densely in the returned [`Topology`]; [`HostTopology::os_cpu`]
//! maps them back to the kernel's CPU numbers. Chips come from `physical_package_id`,
//! cores from (`physical_package_id`, `core_id`). A cache level whose sharing list is
//! missing is assumed private to the core for L1/L2 and shared by the package otherwise;
//! a missing associativity is taken as fully associative.

use cachesched_core::topology::{CacheLevel, CpuInfo, Topology};
use cachesched_core::{CacheKind, CacheScope, CpuId, Cpumask};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Errors reading sysfs.
#[derive(Debug, Error)]
pub enum SysfsError {
    /// A required file is missing or unreadable.
    #[error("cannot read {path}: {source} (is sysfs mounted at {root}?)")]
    Read {
        /// The file.
        path: String,
        /// The sysfs root used.
        root: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file's content is malformed.
    #[error("malformed {path}: {content:?}")]
    Malformed {
        /// The file.
        path: String,
        /// What it contained.
        content: String,
    },
    /// The result is inconsistent.
    #[error("inconsistent host topology: {0}")]
    Topology(#[from] cachesched_core::TopologyError),
}

/// The host's topology and the mapping to OS CPU numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTopology {
    /// The topology, CPUs numbered densely.
    pub topology: Topology,
    /// `os_cpu[i]` is the kernel's number of dense CPU `i`.
    pub os_cpu: Vec<u32>,
    /// Things that were missing and guessed, for the operator.
    pub warnings: Vec<String>,
}

struct Reader {
    root: PathBuf,
}

impl Reader {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn read(&self, rel: &str) -> Result<String, SysfsError> {
        let p = self.path(rel);
        std::fs::read_to_string(&p)
            .map(|s| s.trim().to_string())
            .map_err(|e| SysfsError::Read {
                path: p.display().to_string(),
                root: self.root.display().to_string(),
                source: e,
            })
    }

    fn opt(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel))
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn num(&self, rel: &str) -> Option<u64> {
        self.opt(rel).and_then(|s| s.parse().ok())
    }
}

/// Parses a sysfs size such as `32K`, `1024K`, `32M` or `512`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mult)
}

/// Reads the topology under `root` (normally `/sys/devices/system/cpu`).
pub fn read_topology_at(root: &Path, name: &str) -> Result<HostTopology, SysfsError> {
    let r = Reader {
        root: root.to_path_buf(),
    };
    let mut warnings = Vec::new();
    let online_text = r.read("online")?;
    let online = Cpumask::parse_list(&online_text).ok_or_else(|| SysfsError::Malformed {
        path: r.path("online").display().to_string(),
        content: online_text.clone(),
    })?;
    let os_cpu: Vec<u32> = online.iter().map(|c| c.0).collect();
    let dense: BTreeMap<u32, u32> = os_cpu
        .iter()
        .enumerate()
        .map(|(i, &c)| (c, i as u32))
        .collect();
    let mut chip_ids = BTreeMap::new();
    let mut core_ids = BTreeMap::new();
    let mut cpus = Vec::new();
    for (i, &c) in os_cpu.iter().enumerate() {
        let pkg = r.num(&format!("cpu{c}/topology/physical_package_id"));
        let core = r.num(&format!("cpu{c}/topology/core_id"));
        if pkg.is_none() || core.is_none() {
            warnings.push(format!(
                "cpu{c}: no package/core id; treated as its own core on chip 0"
            ));
        }
        let pkg = pkg.unwrap_or(0);
        let core = core.unwrap_or(1 << 32 | c as u64);
        let n = chip_ids.len() as u32;
        let chip = *chip_ids.entry(pkg).or_insert(n);
        let n = core_ids.len() as u32;
        let core_idx = *core_ids.entry((pkg, core)).or_insert(n);
        cpus.push(CpuInfo {
            id: CpuId(i as u32),
            chip,
            core: core_idx,
            smt: 0,
        });
    }
    // SMT index within each core.
    let mut seen: BTreeMap<u32, u32> = BTreeMap::new();
    for cpu in &mut cpus {
        let e = seen.entry(cpu.core).or_insert(0);
        cpu.smt = *e;
        *e += 1;
    }
    let to_dense = |m: &Cpumask| {
        Cpumask::from_cpus(m.iter().filter_map(|c| dense.get(&c.0).map(|&d| CpuId(d))))
    };
    // Caches: group by (level, type), collect distinct sharing masks.
    let mut levels: BTreeMap<(u8, u8), (CacheLevel, Vec<Cpumask>)> = BTreeMap::new();
    for (i, &c) in os_cpu.iter().enumerate() {
        for idx in 0..16 {
            let base = format!("cpu{c}/cache/index{idx}");
            if !r.path(&base).exists() {
                break;
            }
            let Some(level) = r.num(&format!("{base}/level")) else {
                warnings.push(format!("{base}: no level; skipped"));
                continue;
            };
            let kind = match r.opt(&format!("{base}/type")).as_deref() {
                Some("Data") => CacheKind::Data,
                Some("Instruction") => CacheKind::Instruction,
                _ => CacheKind::Unified,
            };
            let Some(size) = r.opt(&format!("{base}/size")).and_then(|s| parse_size(&s)) else {
                warnings.push(format!("{base}: no size; skipped"));
                continue;
            };
            let line = r
                .num(&format!("{base}/coherency_line_size"))
                .filter(|&l| l > 0 && l.is_power_of_two())
                .unwrap_or_else(|| {
                    warnings.push(format!("{base}: no line size; assumed 64 B"));
                    64
                });
            let ways = match r
                .num(&format!("{base}/ways_of_associativity"))
                .filter(|&w| w > 0)
            {
                Some(w) if size % (w * line) == 0 => w,
                _ => {
                    warnings.push(format!(
                        "{base}: associativity missing or inconsistent; taken as fully associative"
                    ));
                    size / line
                }
            };
            let shared = r
                .opt(&format!("{base}/shared_cpu_list"))
                .and_then(|s| Cpumask::parse_list(&s))
                .map(|m| to_dense(&m));
            let me = CpuId(i as u32);
            let span = match shared.filter(|m| m.contains(me)) {
                Some(m) => m,
                None => {
                    warnings.push(format!("{base}: no sharing list; guessed from the level"));
                    if level <= 2 {
                        Cpumask::from_cpus(
                            cpus.iter().filter(|x| x.core == cpus[i].core).map(|x| x.id),
                        )
                    } else {
                        Cpumask::from_cpus(
                            cpus.iter().filter(|x| x.chip == cpus[i].chip).map(|x| x.id),
                        )
                    }
                }
            };
            let key = (level as u8, kind as u8);
            let entry = levels.entry(key).or_insert_with(|| {
                (
                    CacheLevel {
                        level: level as u8,
                        kind,
                        size_bytes: size,
                        ways: ways as u32,
                        line_bytes: line as u32,
                        latency_cycles: 0,
                        scope: CacheScope::Context,
                        write_policy: Default::default(),
                        banks: 0,
                        instances: Vec::new(),
                    },
                    Vec::new(),
                )
            });
            if !entry.1.contains(&span) {
                // a CPU already covered by another span (inconsistent lists) is dropped
                if entry.1.iter().any(|m| m.intersects(&span)) {
                    warnings.push(format!("{base}: overlapping sharing lists; kept the first"));
                } else {
                    entry.1.push(span);
                }
            }
        }
    }
    let mut caches = Vec::new();
    for (_, (mut lvl, spans)) in levels {
        let covered: usize = spans.iter().map(|m| m.weight()).sum();
        if covered != cpus.len() {
            warnings.push(format!(
                "{}: not every online CPU reports it; level dropped",
                lvl.name()
            ));
            continue;
        }
        let scope_of = |m: &Cpumask| {
            let members: Vec<&CpuInfo> = m.iter().map(|c| &cpus[c.index()]).collect();
            if members.len() == 1 {
                CacheScope::Context
            } else if members.iter().all(|x| x.core == members[0].core) {
                CacheScope::Core
            } else if members.iter().all(|x| x.chip == members[0].chip) {
                CacheScope::Chip
            } else {
                CacheScope::Machine
            }
        };
        lvl.scope = spans
            .iter()
            .map(scope_of)
            .max_by_key(|s| *s as u8)
            .unwrap_or(CacheScope::Core);
        // a single-context span on a machine without SMT is a per-core cache
        if lvl.scope == CacheScope::Context && cpus.iter().all(|c| c.smt == 0) {
            lvl.scope = CacheScope::Core;
        }
        lvl.instances = spans;
        caches.push(lvl);
    }
    caches.sort_by_key(|l| (l.level, l.kind != CacheKind::Instruction));
    let freq_mhz = os_cpu
        .first()
        .and_then(|c| r.num(&format!("cpu{c}/cpufreq/cpuinfo_max_freq")))
        .map(|khz| (khz / 1000) as u32)
        .unwrap_or(0);
    let topology = Topology {
        name: name.to_string(),
        freq_mhz,
        cpus,
        caches,
    };
    topology.validate()?;
    Ok(HostTopology {
        topology,
        os_cpu,
        warnings,
    })
}

/// Reads this host's topology from `/sys/devices/system/cpu`.
pub fn read_host_topology() -> Result<HostTopology, SysfsError> {
    read_topology_at(Path::new("/sys/devices/system/cpu"), "host")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Fake {
        root: PathBuf,
    }

    impl Fake {
        fn new(name: &str) -> Fake {
            let root = std::env::temp_dir()
                .join(format!("cachesched-sysfs-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).unwrap();
            Fake { root }
        }
        fn put(&self, rel: &str, content: &str) {
            let p = self.root.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, format!("{content}\n")).unwrap();
        }
        /// Writes cache index `idx` of `cpu`: (level, type, size, ways) shared by `shared`.
        fn cache(
            &self,
            cpu: u32,
            idx: u32,
            (level, ty, size, ways): (u32, &str, &str, u32),
            shared: &str,
        ) {
            let b = format!("cpu{cpu}/cache/index{idx}");
            self.put(&format!("{b}/level"), &level.to_string());
            self.put(&format!("{b}/type"), ty);
            self.put(&format!("{b}/size"), size);
            self.put(&format!("{b}/ways_of_associativity"), &ways.to_string());
            self.put(&format!("{b}/coherency_line_size"), "64");
            self.put(&format!("{b}/shared_cpu_list"), shared);
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    #[test]
    fn two_sockets_smt_with_offline_cpu() {
        // 2 packages × 2 cores × 2 threads; cpu 5 offline.
        let f = Fake::new("2s");
        f.put("online", "0-4,6-7");
        for c in 0..8u32 {
            let pkg = c / 4;
            let core = (c / 2) % 2;
            f.put(
                &format!("cpu{c}/topology/physical_package_id"),
                &pkg.to_string(),
            );
            f.put(&format!("cpu{c}/topology/core_id"), &core.to_string());
            let sib = format!("{}-{}", c / 2 * 2, c / 2 * 2 + 1);
            f.cache(c, 0, (1, "Data", "32K", 8), &sib);
            f.cache(c, 1, (1, "Instruction", "32K", 8), &sib);
            let llc_span = if pkg == 0 { "0-3" } else { "4-7" };
            f.cache(c, 2, (3, "Unified", "16384K", 16), llc_span);
        }
        f.put("cpu0/cpufreq/cpuinfo_max_freq", "2400000");
        let h = read_topology_at(&f.root, "fake").unwrap();
        let t = &h.topology;
        assert_eq!(t.nr_cpus(), 7);
        assert_eq!(h.os_cpu, vec![0, 1, 2, 3, 4, 6, 7]);
        assert_eq!(t.nr_chips(), 2);
        assert_eq!(t.nr_cores(), 4);
        assert_eq!(t.freq_mhz, 2400);
        let llc = &t.caches[t.llc().unwrap()];
        assert_eq!(
            (llc.level, llc.size_bytes, llc.scope),
            (3, 16 << 20, CacheScope::Chip)
        );
        assert_eq!(llc.instances.len(), 2);
        // dense cpu 5 is os cpu 6, on package 1
        assert_eq!(t.cpus[5].chip, 1);
        assert_eq!(t.caches[0].scope, CacheScope::Core);
        assert!(h.warnings.is_empty(), "{:?}", h.warnings);
    }

    #[test]
    fn vm_without_cache_info_degrades_with_warnings() {
        let f = Fake::new("vm");
        f.put("online", "0-1");
        // no topology ids; one cache with no sharing list and no ways
        f.put("cpu0/cache/index0/level", "2");
        f.put("cpu0/cache/index0/size", "4096K");
        f.put("cpu1/cache/index0/level", "2");
        f.put("cpu1/cache/index0/size", "4096K");
        let h = read_topology_at(&f.root, "vm").unwrap();
        assert_eq!(h.topology.nr_cpus(), 2);
        assert_eq!(h.topology.nr_cores(), 2);
        let l2 = &h.topology.caches[0];
        assert_eq!(l2.ways as u64, (4096 << 10) / 64);
        assert!(h.warnings.iter().any(|w| w.contains("package/core")));
        assert!(h.warnings.iter().any(|w| w.contains("fully associative")));
    }

    #[test]
    fn missing_sysfs_is_a_clear_error() {
        let e = read_topology_at(Path::new("/nonexistent/sysfs"), "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("online") && e.contains("sysfs"), "{e}");
        assert_eq!(parse_size("32K"), Some(32768));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn this_host() {
        let h = read_host_topology().unwrap();
        let n = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        // every CPU this process may run on is online and described
        assert!(h.topology.nr_cpus() >= n, "{} < {n}", h.topology.nr_cpus());
        assert!(h.topology.llc().is_some() || !h.warnings.is_empty());
    }
}
