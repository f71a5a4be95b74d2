//! Finished runs of scenarios, kept on disk so that a long reproduction resumes where
//! it stopped (Ctrl-C, a lost session) and scenario files that share runs (the baseline
//! and CASC of Figures 5-7 and of the variants file) simulate each only once.
//!
//! A run is stored under `$CACHESCHED_RUNS`, else `$XDG_CACHE_HOME/cachesched/runs`,
//! else `~/.cache/cachesched/runs`, keyed by [`crate::cache::config_key`] (its whole
//! configuration, seed included, and the model version): the simulator is
//! deterministic, so a stored result is the result that running it again would give, a
//! new model version never reuses one, and a rebuild that keeps every golden result
//! keeps them. The directory can be copied to another machine (or kept in a repository) to
//! carry a long reproduction across machines. Delete it to reclaim the space.

use anyhow::{Context, Result};
use cachesched_sim::RunResult;
use std::path::PathBuf;

/// The run cache directory.
pub fn cache_dir() -> Result<PathBuf> {
    crate::cache::user_cache_dir("CACHESCHED_RUNS", "runs")
}

/// Whether runs can be kept: the run cache's directory exists or can be made, and a
/// file can be written there and removed; the error names the directory and why not.
pub fn check_writable() -> Result<()> {
    let dir = cache_dir()?;
    let probe = dir.join(format!(".probe.{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .with_context(|| {
            format!(
                "runs cannot be kept in the run cache '{}' (make it writable, or set \
                 CACHESCHED_RUNS to a writable directory)",
                dir.display()
            )
        })
}

/// The stored result of the run with key `k`, if there is a readable one (anything
/// else is run again).
pub fn load(k: u64) -> Result<Option<RunResult>> {
    Ok(
        std::fs::read_to_string(crate::cache::entry_path(&cache_dir()?, k))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok()),
    )
}

/// Stores `r` as the result of the run with key `k`.
pub fn store(k: u64, r: &RunResult) -> Result<()> {
    crate::cache::store_entry(&cache_dir()?, "run cache", k, &serde_json::to_string(r)?)
}

/// Whether the run cache holds an entry for key `k` (without reading it).
pub fn holds(k: u64) -> Result<bool> {
    Ok(crate::cache::entry_path(&cache_dir()?, k).exists())
}
