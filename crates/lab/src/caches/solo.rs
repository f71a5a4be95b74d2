//! Solo reference runs: each thread's program alone on the same machine, for the
//! metrics measured against running alone (slowdown, STP, ANTT, Jain's index).
//!
//! A run's thread group, with one thread starting at time 0, is simulated with no
//! other thread and no policy, on the run's machine (cache size of its sweep point),
//! kernel, window and seed; its instructions per second over the measured window
//! become [`ThreadResult::solo_ips`](cachesched_sim::result::ThreadResult::solo_ips)
//! of every thread of that group. Runs that need the same reference share it (the
//! variants of a scenario, groups of one thread with the same program). References
//! are cached on disk under `$CACHESCHED_SOLO`, else `$XDG_CACHE_HOME/cachesched/solo`,
//! else `~/.cache/cachesched/solo`, keyed by a hash of the solo configuration and of
//! this executable, so a rebuilt simulator never reuses a stale reference.

use crate::error::{Error, Result};
use cachesched_sim::{RunResult, SimConfig, ThreadGroup};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The configuration of the solo run of `group` under `cfg`: that group's program as one
/// thread starting at 0 (keeping its binding), alone, with no policy, no partition and
/// no work segment, for the whole duration (a lone thread's window ends by no quanta).
pub fn solo_config(cfg: &SimConfig, group: &ThreadGroup) -> SimConfig {
    SimConfig {
        threads: vec![ThreadGroup {
            count: 1,
            start_ms: 0.0,
            start_jitter_ms: 0.0,
            segment: None,
            ..group.clone()
        }],
        policies: Vec::new(),
        partition: None,
        stop_after_segments: false,
        stop_after_quanta: None,
        ..cfg.clone()
    }
}

/// The thread group of each thread of a run of `groups`, in thread-id order (the
/// simulator numbers threads group by group).
pub fn group_of_threads(groups: &[ThreadGroup]) -> Vec<usize> {
    groups
        .iter()
        .enumerate()
        .flat_map(|(g, grp)| std::iter::repeat_n(g, grp.count as usize))
        .collect()
}

/// The solo cache directory.
pub fn cache_dir() -> Result<PathBuf> {
    crate::caches::user_cache_dir("CACHESCHED_SOLO", "solo")
}

/// One cached reference, as stored.
#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    /// The thread's instructions per second alone.
    ips: f64,
    /// The solo configuration, for people who look.
    config: SimConfig,
}

/// What a set of runs needs of solo references: the distinct solo configurations, each
/// under its key, and for every run the key of each of its thread groups.
pub type Plan = (BTreeMap<u64, SimConfig>, Vec<Vec<u64>>);

/// The distinct solo configurations that `cfgs` need, each with its key, and for every
/// configuration the key of each of its thread groups.
pub fn plan(cfgs: &[&SimConfig]) -> Result<Plan> {
    let mut distinct = BTreeMap::new();
    let mut keys = Vec::new();
    for cfg in cfgs {
        let mut ks = Vec::new();
        for g in &cfg.threads {
            let solo = solo_config(cfg, g);
            let k = crate::caches::config_key(&solo)?;
            distinct.entry(k).or_insert(solo);
            ks.push(k);
        }
        keys.push(ks);
    }
    Ok((distinct, keys))
}

/// Cached references among `keys` (missing or unreadable entries are left out, to be
/// run again).
pub fn cached(keys: impl Iterator<Item = u64>) -> Result<BTreeMap<u64, f64>> {
    let dir = cache_dir()?;
    let mut found = BTreeMap::new();
    for k in keys {
        let path = crate::caches::entry_path(&dir, k);
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Ok(e) = serde_json::from_str::<Entry>(&text) {
                // an entry under another key's name is not this run's
                if crate::caches::config_key(&e.config).ok() == Some(k) {
                    found.insert(k, e.ips);
                } else {
                    eprintln!(
                        "warning: solo cache entry '{}' holds another configuration's run: ignored, the run is made again",
                        path.display()
                    );
                }
            }
        }
    }
    Ok(found)
}

/// Stores the reference of the solo run `config` (key `k`), whose result is `r`, and
/// returns its instructions per second.
pub fn store(k: u64, config: &SimConfig, r: &RunResult) -> Result<f64> {
    let t = r
        .threads
        .first()
        .ok_or(Error::Internal("a solo run without its thread"))?;
    let ips = r.thread_ips(t);
    let e = Entry {
        ips,
        config: config.clone(),
    };
    crate::caches::store_entry(
        &cache_dir()?,
        "solo cache",
        k,
        &(serde_json::to_string_pretty(&e)? + "\n"),
    )?;
    Ok(ips)
}

/// Sets every thread's solo reference in `r` (the result of `cfg`) from `refs`, given
/// the keys of `cfg`'s thread groups.
pub fn attach(cfg: &SimConfig, group_keys: &[u64], refs: &BTreeMap<u64, f64>, r: &mut RunResult) {
    let groups = group_of_threads(&cfg.threads);
    for t in &mut r.threads {
        t.solo_ips = groups
            .get(t.id as usize)
            .and_then(|&g| refs.get(&group_keys[g]))
            .copied();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_policies::PolicySpec;

    /// A group's solo run keeps its program, binding and the run's machine and seed, and
    /// drops the other groups, the policies and the start time; groups of one thread with
    /// the same program share one reference, and threads map to their groups.
    #[test]
    fn solo_runs_are_shared_by_identical_programs() {
        let mut cfg = SimConfig::new(
            "niagara-2c",
            vec![
                ThreadGroup::of("art", 1),
                ThreadGroup::of("twolf", 2),
                ThreadGroup::of("art", 1),
                ThreadGroup {
                    start_ms: 5.0,
                    ..ThreadGroup::of("bdb", 1)
                },
            ],
        );
        cfg.seed = 9;
        cfg.policies = vec![PolicySpec::Demo(Default::default())];
        let (distinct, keys) = plan(&[&cfg]).unwrap();
        assert_eq!(distinct.len(), 3, "art, twolf, bdb");
        assert_eq!(keys[0][0], keys[0][2]);
        assert_ne!(keys[0][0], keys[0][1]);
        let bdb = &distinct[&keys[0][3]];
        assert_eq!(bdb.threads.len(), 1);
        assert_eq!(bdb.threads[0].start_ms, 0.0);
        assert_eq!(bdb.threads[0].count, 1);
        assert!(bdb.policies.is_empty());
        assert_eq!(bdb.seed, 9);
        assert_eq!(group_of_threads(&cfg.threads), vec![0, 1, 1, 2, 3]);
        let mut other = cfg.clone();
        other.seed = 10;
        let (d2, _) = plan(&[&cfg, &other]).unwrap();
        assert_eq!(d2.len(), 6, "another seed, other references");
    }
}
