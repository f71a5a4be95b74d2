//! Hashes the simulator's sources into `CACHESCHED_MODEL_HASH`, the part of a run
//! cache key that stands for the simulator (see `src/cache.rs`).
//!
//! A run's result is decided by its configuration and by the code that simulates it:
//! the crates `core`, `policies` and `sim` (their `src` and `Cargo.toml`) and the
//! workspace's `Cargo.lock` (the versions of their dependencies). Those bytes are
//! hashed here, so that a rebuild that changes only the command-line tool, its reports,
//! tests or documents keeps the runs already made, and any change to the simulator,
//! down to a comment in its sources, makes new keys.

use cachesched_core::hash::{fnv1a, fnv1a_from};
use std::path::{Path, PathBuf};

/// Every file under `dir`, recursively, in sorted order.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read '{}': {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the crates directory");
    let root = crates
        .join("..")
        .canonicalize()
        .expect("the workspace root");
    let mut inputs = vec![root.join("Cargo.lock")];
    for c in ["core", "policies", "sim"] {
        inputs.push(crates.join(c).join("Cargo.toml"));
        files(&crates.join(c).join("src"), &mut inputs);
        println!("cargo:rerun-if-changed=../{c}/src");
        println!("cargo:rerun-if-changed=../{c}/Cargo.toml");
    }
    println!("cargo:rerun-if-changed=../../Cargo.lock");
    let mut h = fnv1a(b"cachesched model");
    for p in &inputs {
        let rel = p.strip_prefix(&root).unwrap_or(p);
        let bytes =
            std::fs::read(p).unwrap_or_else(|e| panic!("cannot read '{}': {e}", p.display()));
        h = fnv1a_from(h, rel.to_string_lossy().as_bytes());
        h = fnv1a_from(h, &(bytes.len() as u64).to_le_bytes());
        h = fnv1a_from(h, &bytes);
    }
    println!("cargo:rustc-env=CACHESCHED_MODEL_HASH={h:016x}");
}
