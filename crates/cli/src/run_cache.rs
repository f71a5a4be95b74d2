//! Finished runs of scenarios, kept on disk so that a long reproduction resumes where
//! it stopped (Ctrl-C, a lost session) and scenario files that share runs (the baseline
//! and CASC of Figures 5-7 and of the variants file) simulate each only once.
//!
//! A run is stored under `$CACHESCHED_RUNS`, else `$XDG_CACHE_HOME/cachesched/runs`,
//! else `~/.cache/cachesched/runs`, keyed by a hash of its whole configuration (seed
//! included) and of this executable ([`crate::solo::exe_hash`]): the simulator is
//! deterministic, so a stored result is the result that running it again would give,
//! and a rebuilt simulator never reuses one. Delete the directory to reclaim the space.

use anyhow::{Context, Result};
use cachesched_core::hash::fnv1a_from;
use cachesched_sim::{RunResult, SimConfig};
use std::path::PathBuf;

/// The run cache directory.
pub fn cache_dir() -> Result<PathBuf> {
    crate::real::user_cache_dir("CACHESCHED_RUNS", "runs")
}

/// The cache key of a run: its configuration's JSON and the executable.
pub fn key(cfg: &SimConfig) -> Result<u64> {
    let json = serde_json::to_string(cfg)?;
    Ok(fnv1a_from(crate::solo::exe_hash()?, json.as_bytes()))
}

/// The stored result of the run with key `k`, if there is a readable one (anything
/// else is run again).
pub fn load(k: u64) -> Result<Option<RunResult>> {
    let path = cache_dir()?.join(format!("{k:016x}.json"));
    Ok(std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok()))
}

/// Stores `r` as the result of the run with key `k`: written whole, then renamed, so a
/// reader never sees half a result.
pub fn store(k: u64, r: &RunResult) -> Result<()> {
    let dir = cache_dir()?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the run cache '{}'", dir.display()))?;
    let path = dir.join(format!("{k:016x}.json"));
    let tmp = dir.join(format!("{k:016x}.json.{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_string(r)?)
        .with_context(|| format!("cannot write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write '{}'", path.display()))
}
