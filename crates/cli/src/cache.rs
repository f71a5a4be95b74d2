//! What the on-disk caches of cachesched share (traces, solo references, runs): where
//! they live, how a simulation's entry is keyed, and how an entry is written.

use anyhow::{bail, Context, Result};
use cachesched_core::hash::{fnv1a, fnv1a_from};
use cachesched_sim::SimConfig;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A cache directory of cachesched: `$VAR` if set, else `cachesched/SUB` under
/// `$XDG_CACHE_HOME` or `~/.cache`.
pub fn user_cache_dir(var: &str, sub: &str) -> Result<PathBuf> {
    if let Some(d) = std::env::var_os(var).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("cachesched").join(sub));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".cache/cachesched").join(sub)),
        None => bail!("no cache directory for {sub}: set {var} (or HOME)"),
    }
}

/// A hash of this executable's bytes, computed once (a rebuilt simulator gets new keys).
///
/// Taken once, before any run (see [`crate::experiment::run_scenario`]), and read
/// through `/proc/self/exe` where it exists, which still reads the running binary after
/// a rebuild has replaced the file: a long batch must not fail at its end because the
/// binary on disk changed meanwhile.
pub fn exe_hash() -> Result<u64> {
    static HASH: OnceLock<u64> = OnceLock::new();
    if let Some(&h) = HASH.get() {
        return Ok(h);
    }
    let bytes = match std::fs::read("/proc/self/exe") {
        Ok(b) => b,
        Err(_) => {
            let exe = std::env::current_exe().context("cannot locate this executable")?;
            std::fs::read(&exe)
                .with_context(|| format!("cannot read this executable '{}'", exe.display()))?
        }
    };
    Ok(*HASH.get_or_init(|| fnv1a(&bytes)))
}

/// The cache key of a simulation: its configuration's JSON and this executable (the
/// simulator is deterministic, so the same key means the same result).
pub fn config_key(cfg: &SimConfig) -> Result<u64> {
    let json = serde_json::to_string(cfg)?;
    Ok(fnv1a_from(exe_hash()?, json.as_bytes()))
}

/// The file of entry `k` in cache directory `dir`.
pub fn entry_path(dir: &Path, k: u64) -> PathBuf {
    dir.join(format!("{k:016x}.json"))
}

/// Writes `text` as entry `k` of cache directory `dir` (created if missing; `what`
/// names the cache in errors): written whole, then renamed, so that a reader never
/// sees half an entry.
pub fn store_entry(dir: &Path, what: &str, k: u64, text: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the {what} '{}'", dir.display()))?;
    let path = entry_path(dir, k);
    let tmp = dir.join(format!("{k:016x}.json.{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write '{}'", path.display()))
}
