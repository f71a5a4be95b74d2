//! Finished runs of scenarios, kept on disk so that a long reproduction resumes where
//! it stopped (Ctrl-C, a lost session) and scenario files that share runs (the baseline
//! and CASC of Figures 5-7 and of the variants file) simulate each only once.
//!
//! A run is stored under `$CACHESCHED_RUNS`, else `$XDG_CACHE_HOME/cachesched/runs`,
//! else `~/.cache/cachesched/runs`, keyed by [`crate::caches::config_key`] (its whole
//! configuration, seed included, the model version and the bytes of its traces): the simulator is
//! deterministic, so a stored result is the result that running it again would give, a
//! new model version never reuses one, and a rebuild that keeps every golden result
//! keeps them. The directory can be copied to another machine (or kept in a repository) to
//! carry a long reproduction across machines. Delete it to reclaim the space.

use crate::error::{Error, Result};
use cachesched_sim::RunResult;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The run cache directory.
pub fn cache_dir() -> Result<PathBuf> {
    crate::caches::user_cache_dir("CACHESCHED_RUNS", "runs")
}

/// Whether runs can be kept: the run cache's directory exists or can be made, and a
/// file can be written there and removed; the error names the directory and why not.
pub fn check_writable() -> Result<()> {
    let dir = cache_dir()?;
    let probe = dir.join(format!(".probe.{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(Error::io_hint(
            "runs cannot be kept in the run cache",
            &dir,
            " (make it writable, or set CACHESCHED_RUNS to a writable directory)",
        ))
}

/// A stored run: its key, so that an entry under another key's name (copied, renamed)
/// is never taken for that run, and its result.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    /// The key it was stored under, 16 hex digits.
    key: String,
    /// The result.
    result: RunResult,
}

/// The stored result of the run with key `k`, if there is a readable one whose own key
/// is `k`. Anything else is run again: an entry that holds another key's run is said on
/// stderr; an unreadable one (cut, or written before entries held their keys) is not.
pub fn load(k: u64) -> Result<Option<RunResult>> {
    Ok(load_in(&cache_dir()?, k))
}

/// [`load`] from run cache directory `dir` (a cluster's shared run cache, named in a
/// batch's manifest).
pub fn load_in(dir: &std::path::Path, k: u64) -> Option<RunResult> {
    let path = crate::caches::entry_path(dir, k);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return None;
    };
    let Ok(s) = serde_json::from_str::<Stored>(&text) else {
        return None;
    };
    let want = format!("{k:016x}");
    if s.key != want {
        eprintln!(
            "warning: run cache entry '{}' holds the run of key {}, not {want}: ignored, the run is made again",
            path.display(),
            s.key
        );
        return None;
    }
    Some(s.result)
}

/// The result in an entry of a build before model versions (a bare result, as entries
/// were then, or a keyed one), for `reproduce --rekey-from`, which names the entry by
/// the old build's key and stores it again under the new one.
pub fn read_entry_of_old_build(path: &std::path::Path) -> Option<RunResult> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str::<Stored>(&text)
        .map(|s| s.result)
        .or_else(|_| serde_json::from_str::<RunResult>(&text))
        .ok()
}

/// Stores `r` as the result of the run with key `k`.
pub fn store(k: u64, r: &RunResult) -> Result<()> {
    store_in(&cache_dir()?, k, r)
}

/// [`store`] into run cache directory `dir`.
pub fn store_in(dir: &std::path::Path, k: u64, r: &RunResult) -> Result<()> {
    let s = Stored {
        key: format!("{k:016x}"),
        result: r.clone(),
    };
    crate::caches::store_entry(dir, "run cache", k, &serde_json::to_string(&s)?)
}

/// Whether the run cache holds a usable entry for key `k`.
pub fn holds(k: u64) -> Result<bool> {
    Ok(load(k)?.is_some())
}
