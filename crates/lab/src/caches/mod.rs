//! The laboratory's three on-disk caches, named apart:
//!
//! - the **trace cache** (`$CACHESCHED_TRACES`, [`traces_dir`]): the real-program
//!   suite's recorded traces ([`crate::real`]);
//! - the **run cache** (`$CACHESCHED_RUNS`, [`runs`]): every finished run of a
//!   scenario, keyed by its configuration and the model version;
//! - the **solo cache** (`$CACHESCHED_SOLO`, [`solo`]): each program's instructions per
//!   second alone, the reference of the slowdown metrics.
//!
//! This module holds what they share: where they live, how a simulation's entry is
//! keyed, and how an entry is written.

pub mod runs;
pub mod solo;

use crate::error::{invalid, Error, Result};
use cachesched_core::hash::{fnv1a, fnv1a_from};
use cachesched_sim::{SimConfig, MODEL_VERSION};
use std::path::{Path, PathBuf};

/// The trace cache's directory: `$CACHESCHED_TRACES`, else `cachesched/traces` under
/// `$XDG_CACHE_HOME` or `~/.cache`.
pub fn traces_dir() -> Result<PathBuf> {
    user_cache_dir("CACHESCHED_TRACES", "traces")
}

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
        None => Err(invalid!(
            "no cache directory for {sub}: set {var} (or HOME)"
        )),
    }
}

/// The part of every cache key that stands for the simulator: a hash of
/// [`MODEL_VERSION`], the declared version of what the model computes.
///
/// A rebuild that keeps every golden result (a refactoring, a speed-up, a change to the
/// command-line tool, its reports or tests) keeps the runs already made; a change that
/// alters results raises the version (the golden tests fail until it does), and every
/// key changes with it. It assumes that the simulator's results do not depend on the
/// compiler's optimisation level or version (the simulator uses no fast-math and no
/// target-specific floating point): the golden results are the same from the test
/// profile (opt-level 2) and the release profile (opt-level 3, thin LTO), checked with
/// `cargo test --release -p cachesched-sim --test sim golden::` (rustc 1.95.0), and a
/// compiler that changed them would fail the golden tests in CI.
pub fn model_key() -> u64 {
    fnv1a(format!("cachesched model version {MODEL_VERSION}").as_bytes())
}

/// The cache key of a simulation: its configuration's JSON continued from
/// [`model_key`] (the simulator is deterministic, so the same key means the same
/// result).
pub fn config_key(cfg: &SimConfig) -> Result<u64> {
    key_from(model_key(), cfg)
}

/// The key of `cfg` continued from `model`: [`config_key`] with [`model_key`], and
/// the keys of runs made before model versions, whose `model` was a hash of the
/// simulator's sources (see `reproduce PAPER --rekey-from`).
pub fn key_from(model: u64, cfg: &SimConfig) -> Result<u64> {
    let json = serde_json::to_string(cfg)?;
    Ok(fnv1a_from(model, json.as_bytes()))
}

/// The file of entry `k` in cache directory `dir`.
pub fn entry_path(dir: &Path, k: u64) -> PathBuf {
    dir.join(format!("{k:016x}.json"))
}

/// Writes `text` as entry `k` of cache directory `dir` (created if missing; `what`
/// names the cache in errors): written whole, then renamed, so that a reader never
/// sees half an entry.
pub fn store_entry(dir: &Path, what: &str, k: u64, text: &str) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io(format!("cannot create the {what}"), dir))?;
    crate::files::write_file(&entry_path(dir, k), text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_sim::ThreadGroup;

    #[test]
    fn a_key_is_the_configuration_and_the_model_version() {
        let c = SimConfig::new("core2-4m", ThreadGroup::parse_mix("mcf:2").unwrap());
        let mut d = c.clone();
        d.seed += 1;
        let k = config_key(&c).unwrap();
        assert_eq!(k, config_key(&c.clone()).unwrap(), "a key is a function");
        assert_ne!(k, config_key(&d).unwrap(), "the seed is part of the key");
        // the simulator's part: the configuration's JSON continued from the version's
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(k, fnv1a_from(model_key(), json.as_bytes()));
        assert_ne!(k, fnv1a(json.as_bytes()));
        let other = fnv1a(format!("cachesched model version {}", MODEL_VERSION + 1).as_bytes());
        assert_ne!(
            k,
            key_from(other, &c).unwrap(),
            "a new version makes new keys"
        );
    }

    /// The key does not depend on the simulator's source text: the key of one fixed
    /// configuration under version 1 is written down here, so a key that took in a hash
    /// of the sources again (as before model versions: a comment changed in engine.rs
    /// changed every key) fails it, and so does a change of the configuration's
    /// serialisation, which would orphan every cached run (keep new configuration
    /// fields out of the JSON when at their defaults, or re-key).
    #[test]
    fn a_key_outlives_source_changes() {
        let c = SimConfig::new("core2-4m", ThreadGroup::parse_mix("mcf:2").unwrap());
        let v1 = fnv1a(b"cachesched model version 1");
        assert_eq!(
            key_from(v1, &c).unwrap(),
            0x786e_908a_8b40_7d85,
            "the key of core2-4m mcf:2, version 1"
        );
        assert_eq!(
            model_key(),
            fnv1a(format!("cachesched model version {MODEL_VERSION}").as_bytes())
        );
    }
}
