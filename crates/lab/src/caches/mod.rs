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
use cachesched_sim::trace::FileId;
use cachesched_sim::{SimConfig, MODEL_VERSION};
use std::path::{Path, PathBuf};

/// The trace cache's directory: `$CACHESCHED_TRACES`, else `cachesched/traces` under
/// `$XDG_CACHE_HOME` or `~/.cache`.
pub fn traces_dir() -> Result<PathBuf> {
    user_cache_dir("CACHESCHED_TRACES", "traces")
}

/// A cache directory of cachesched: `$VAR` if set, else `cachesched/SUB` under
/// `$XDG_CACHE_HOME` or `~/.cache`; made absolute (from the working directory), so
/// that a path kept in a configuration or a cluster's manifest (a trace, the run cache)
/// names the same file in a process started elsewhere.
pub fn user_cache_dir(var: &str, sub: &str) -> Result<PathBuf> {
    let dir = if let Some(d) = std::env::var_os(var).filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d).join("cachesched").join(sub)
    } else {
        match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            Some(h) => PathBuf::from(h).join(".cache/cachesched").join(sub),
            None => {
                return Err(invalid!(
                    "no cache directory for {sub}: set {var} (or HOME)"
                ))
            }
        }
    };
    std::path::absolute(&dir).map_err(Error::io(format!("cannot resolve the {sub} cache"), &dir))
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
/// [`model_key`], then from the digest of every trace file its thread groups replay
/// ([`trace_digest`], in the groups' order). The simulator is deterministic, so the
/// same key means the same result.
///
/// A configuration names a trace by its path, and the same path can hold different
/// recordings: a real program's trace is named by its definition, but recording a
/// program with threads whose interleaving depends on timing (real:povray's frontend
/// and renderer under valgrind) gives different traces on different recordings, and a
/// run cache copied from another machine (`run-cache/`, a cluster's shared cache)
/// would otherwise hand back the result of another recording. A configuration without
/// traces keeps the key it had before trace digests were part of keys.
pub fn config_key(cfg: &SimConfig) -> Result<u64> {
    if let Some(g) = cfg
        .threads
        .iter()
        .find(|g| g.real.is_some() && g.trace.is_none())
    {
        return Err(invalid!(
            "real:{} has no trace yet: its runs cannot be keyed before the real program's trace \
             is found or recorded (a bug: `real::prepare` comes first)",
            g.real.as_deref().unwrap_or_default()
        ));
    }
    let mut k = key_from(model_key(), cfg)?;
    for path in cfg.threads.iter().filter_map(|g| g.trace.as_deref()) {
        k = fnv1a_from(k, &trace_digest(Path::new(path))?.to_le_bytes());
    }
    Ok(k)
}

/// Digests already taken, by path, with the identity of the file they were taken of.
static DIGESTS: std::sync::Mutex<Vec<(PathBuf, FileId, u64)>> = std::sync::Mutex::new(Vec::new());

/// At most this many digests are remembered (then the memo starts again).
const MAX_DIGESTS: usize = 256;

/// FNV-1a of the bytes of the trace file at `path` as stored (compressed or not),
/// remembered for the file's identity so that a reproduction's hundreds of keys read
/// each trace once per process. The error names the file.
pub fn trace_digest(path: &Path) -> Result<u64> {
    use std::io::Read;
    let what = "cannot read the trace file to key its runs";
    let mut f = std::fs::File::open(path).map_err(Error::io(what, path))?;
    let id = FileId::of(&f.metadata().map_err(Error::io(what, path))?);
    {
        let memo = DIGESTS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(_, _, d)) = memo.iter().find(|(p, i, _)| p == path && *i == id) {
            return Ok(d);
        }
    }
    let mut h = fnv1a(b"cachesched trace file");
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(Error::io(what, path))?;
        if n == 0 {
            break;
        }
        h = fnv1a_from(h, &buf[..n]);
    }
    let mut memo = DIGESTS.lock().unwrap_or_else(|e| e.into_inner());
    if memo.len() >= MAX_DIGESTS {
        memo.clear();
    }
    memo.retain(|(p, _, _)| p != path);
    memo.push((path.to_path_buf(), id, h));
    Ok(h)
}

/// The key of `cfg`'s JSON continued from `model`: with [`model_key`], the part of
/// [`config_key`] before its trace digests (all of it for a configuration without
/// traces), and the keys of runs made before model versions, whose `model` was a hash
/// of the simulator's sources (see `reproduce PAPER --rekey-from`; those runs had no
/// trace digests in their keys).
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

    /// Two recordings at one path are two keys: a run of a trace keyed by the trace's
    /// path alone would hand back the result of whatever recording a run cache was
    /// filled with (real:povray records differently from one recording to the next).
    /// Fails if the digest is left out of the key, is taken of the path, of the first
    /// group's trace only or of the first read (the files are 1.5 MiB and differ in
    /// their last byte), or is remembered across a rewrite of the file; and if a real
    /// program's group could be keyed before its trace is set.
    #[test]
    fn a_traces_key_follows_the_recording_at_its_path() {
        let dir = std::env::temp_dir().join(format!("cachesched-digest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let recording = |last: u8| {
            let mut b = vec![7u8; 3 << 19];
            *b.last_mut().unwrap() = last;
            b
        };
        let (fixed, path, tmp) = (dir.join("a.cst"), dir.join("b.cst"), dir.join("b.cst.new"));
        std::fs::write(&fixed, recording(0)).unwrap();
        std::fs::write(&path, recording(1)).unwrap();
        let mut c = SimConfig::new("core2-4m", ThreadGroup::parse_mix("mcf:1,gzip:1").unwrap());
        assert_eq!(c.threads.len(), 2);
        c.threads[0].trace = Some(fixed.to_string_lossy().into_owned());
        c.threads[1].trace = Some(path.to_string_lossy().into_owned());
        let first = config_key(&c).unwrap();
        assert_ne!(
            first,
            key_from(model_key(), &c).unwrap(),
            "the digests are in the key"
        );
        assert_eq!(first, config_key(&c).unwrap(), "a key is a function");
        // another recording of the same length at the second group's path, renamed into
        // place as the trace cache writes
        std::fs::write(&tmp, recording(2)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let second = config_key(&c).unwrap();
        assert_ne!(first, second, "another recording, another key");
        // the first recording's bytes again: its key again, whatever the file's identity
        std::fs::write(&tmp, recording(1)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_eq!(
            first,
            config_key(&c).unwrap(),
            "the same bytes, the same key"
        );
        // a missing trace names itself
        c.threads[1].trace = Some(dir.join("missing.cst").to_string_lossy().into_owned());
        let e = config_key(&c).unwrap_err().to_string();
        assert!(e.contains("missing.cst"), "{e}");
        // a real program's group is keyed only with its trace
        c.threads[1].trace = None;
        c.threads[1].real = Some("gzip".into());
        let e = config_key(&c).unwrap_err().to_string();
        assert!(e.contains("real:gzip has no trace"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
