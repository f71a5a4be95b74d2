//! What the on-disk caches of cachesched share (traces, solo references, runs): where
//! they live, how a simulation's entry is keyed, and how an entry is written.

use anyhow::{bail, Context, Result};
use cachesched_core::hash::fnv1a_from;
use cachesched_sim::SimConfig;
use std::path::{Path, PathBuf};

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

/// The hash of the simulator's sources this executable was built from (the crates
/// `core`, `policies` and `sim` and `Cargo.lock`, hashed by `build.rs`).
///
/// It stands for the simulator in every cache key: a rebuild that changes only the
/// command-line tool (its reports, plots, documents or tests) keeps the runs already
/// made, while any change to the simulator's sources, a comment included, makes new
/// keys. It assumes that the simulator's results do not depend on the compiler's
/// optimisation level or version (the simulator uses no fast-math and no
/// target-specific floating point). Checked for the optimisation level: the golden
/// results (`crates/sim/tests/sim/golden.rs`, a hash of every preset's full JSON result)
/// are the same from the test profile (opt-level 2) and from the release profile
/// (opt-level 3, thin LTO): `cargo test --release -p cachesched-sim --test sim golden::`
/// passed, rustc 1.95.0, 2026-11-26. Not checkable for a compiler yet to come: a change of
/// compiler that broke it would go unnoticed by the key, so delete the cache after one.
pub fn model_hash() -> u64 {
    u64::from_str_radix(env!("CACHESCHED_MODEL_HASH"), 16).expect("build.rs writes 16 hex digits")
}

/// The cache key of a simulation: its configuration's JSON and the simulator's sources
/// ([`model_hash`]; the simulator is deterministic, so the same key means the same
/// result).
pub fn config_key(cfg: &SimConfig) -> Result<u64> {
    let json = serde_json::to_string(cfg)?;
    Ok(fnv1a_from(model_hash(), json.as_bytes()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_sim::ThreadGroup;

    #[test]
    fn a_key_is_the_configuration_and_the_simulator() {
        let c = SimConfig::new("core2-4m", ThreadGroup::parse_mix("mcf:2").unwrap());
        let mut d = c.clone();
        d.seed += 1;
        let k = config_key(&c).unwrap();
        assert_eq!(k, config_key(&c.clone()).unwrap(), "a key is a function");
        assert_ne!(k, config_key(&d).unwrap(), "the seed is part of the key");
        // the simulator's part: the configuration's JSON continued from the sources' hash
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(k, fnv1a_from(model_hash(), json.as_bytes()));
        assert_ne!(k, cachesched_core::hash::fnv1a(json.as_bytes()));
        assert_eq!(env!("CACHESCHED_MODEL_HASH").len(), 16);
    }
}
