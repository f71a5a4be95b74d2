//! Golden results: a short run of each preset's paper workload, and of the kinds of run
//! the reproductions' goldens (`crates/lab/src/golden.rs`) do not make (the round-robin
//! class, the `migrate` and `demo` policies, recorded traces and phased programs as
//! threads), each reduced to a hash of its full JSON result (every counter, thread and
//! CPU).
//!
//! They guard [`MODEL_VERSION`], which keys every cached run: optimisations of the
//! engine must leave them unchanged; a change that is meant to change the model raises
//! the version in the same commit, updates the tables with the printed values and says
//! why in docs/model.md's table of model versions.

use cachesched_core::hash::fnv1a;
use cachesched_policies::PolicySpec;
use cachesched_sim::config::Phase;
use cachesched_sim::trace::replay::TraceEvent;
use cachesched_sim::trace::TraceWriter;
use cachesched_sim::{
    simulate, Baseline, SimConfig, ThreadGroup, MODEL_VERSION, PAPER_MIXES, PRESETS,
};

/// The model version the tables were made with; it must be [`MODEL_VERSION`].
const GOLDEN_MODEL_VERSION: u32 = 1;

/// Simulated milliseconds per preset: long enough for every thread to run (CFS-like
/// slices on 8 CPUs with 18 threads first switch after 10 ms), miss in every cache
/// level and be switched (where threads outnumber CPUs), short for a test (one test per preset, so that they run in
/// parallel: about 50 s of CPU in all on this 2-core machine).
const MS: f64 = 30.0;

/// power5-8chip's run is shorter: 64 hardware contexts make its 30 ms the slowest test
/// of the workspace (67 s of the simulator tests' 283 on this machine); at 10 ms every
/// thread has run and the last level missed ([`check_in`] requires both). Its hash was
/// made by the build whose 30 ms hash was 0x59525d8cd387fc05, model version 1.
const MS_POWER5_8CHIP: f64 = 10.0;

/// (preset, FNV-1a 64 of `serde_json::to_string(&simulate(..))`).
const GOLDEN: &[(&str, u64)] = &[
    ("niagara-2c", 0x0666dcc9fe641970),
    ("niagara-8c", 0x3f329d4019d15d0b),
    ("t2000", 0xdc551352b2a9a8cd),
    ("t1-dual", 0xdf283925c5ddc8e4),
    ("power5-2x2x2", 0xba7d20257ee2b559),
    ("power5-8chip", 0x33353e8357cc3f11),
    ("clovertown-2x2", 0xc0f4e99b21f43e6c),
    ("clovertown-ump", 0xf527c0570373f987),
    ("xeon-e5-16m", 0x02cda5ffbe7bac20),
    ("xeon-e5-16m-2c", 0x20103a930dcf9279),
    ("core2-4m", 0x6b5ef1b56062b05f),
];

#[test]
fn every_preset_has_a_paper_mix() {
    for (name, _) in PRESETS {
        assert!(
            PAPER_MIXES.iter().any(|(p, _)| p == name),
            "preset {name} has no entry in PAPER_MIXES"
        );
    }
}

/// The run of `preset`'s paper mix.
fn paper_mix(preset: &str) -> SimConfig {
    let mix = PAPER_MIXES
        .iter()
        .find(|(p, _)| *p == preset)
        .map(|(_, m)| *m)
        .unwrap();
    let mut c = SimConfig::new(preset, ThreadGroup::parse_mix(mix).unwrap());
    c.duration_ms = if preset == "power5-8chip" {
        MS_POWER5_8CHIP
    } else {
        MS
    };
    c
}

/// Runs `cfg` and compares its hash with `table`'s entry `name`.
fn check_in(table: &[(&str, u64)], name: &str, cfg: &SimConfig) {
    let r = simulate(cfg).unwrap();
    assert!(
        r.threads.iter().all(|t| t.counters.instructions > 0) && r.totals.llc_misses > 0,
        "{name}: every thread must run and the last level miss"
    );
    let actual = fnv1a(serde_json::to_string(&r).unwrap().as_bytes());
    let golden = table.iter().find(|(p, _)| *p == name).map(|(_, h)| *h);
    assert_eq!(
        golden,
        Some(actual),
        "{name}: the engine's results changed; if the model was meant to change, raise \
         MODEL_VERSION (crates/sim/src/lib.rs) and say why in docs/model.md's table of model \
         versions; the entry becomes (\"{name}\", 0x{actual:016x})"
    );
}

/// Runs `preset`'s paper mix and compares its hash with the table.
fn check(preset: &str) {
    check_in(GOLDEN, preset, &paper_mix(preset));
}

/// The tables were made with this model version, and docs/model.md's table of model
/// versions has a row for every version up to it, the newest last. Fails when the
/// version is raised without its row, or the tables are left from another version.
#[test]
fn the_goldens_are_of_this_model_version() {
    assert_eq!(
        GOLDEN_MODEL_VERSION, MODEL_VERSION,
        "the golden tables were made with another model version: regenerate them"
    );
    let doc = include_str!("../../../../docs/model.md");
    let versions: Vec<u32> = doc
        .lines()
        .skip_while(|l| !l.starts_with("## Model versions"))
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next()?.trim().parse().ok())
        .collect();
    assert_eq!(
        versions,
        (1..=MODEL_VERSION).collect::<Vec<u32>>(),
        "docs/model.md's table of model versions must list versions 1 to {MODEL_VERSION} in order"
    );
}

/// (kind, FNV-1a 64 of its result's JSON) of the kinds of run of [`kind`].
const KINDS: &[(&str, u64)] = &[
    ("rr", 0x8659456fdbf98327),
    ("demo", 0xc07716cdbe0f9e6f),
    ("migrate", 0x112fd2fd6074e808),
    ("trace", 0xf9114ff194a87f81),
    ("phases", 0x13c38e3cf87f1776),
];

/// A kind of run the reproductions' goldens do not make (see the module documentation).
fn kind(name: &str) -> SimConfig {
    let mut c = paper_mix(match name {
        "rr" => "niagara-2c",
        "demo" | "migrate" | "trace" => "clovertown-2x2",
        "phases" => "t1-dual",
        _ => unreachable!("no kind {name}"),
    });
    match name {
        "rr" => {
            // 2 ms quanta: every thread runs within the window
            c.kernel.baseline = Baseline::Rr;
            c.kernel.rr_quantum_ms = 2.0;
        }
        "demo" | "migrate" => c.policies = vec![PolicySpec::parse(name).unwrap()],
        "trace" => {
            // a 1,024-iteration loop over 96 KB, read by two threads beside the mix
            let mut w = TraceWriter::new(Vec::new()).unwrap();
            for i in 0..20_000u64 {
                let pc = 0x40_1000 + (i % 16) * 4;
                w.write(TraceEvent::Instr { addr: pc, size: 4 }).unwrap();
                let addr = 0x7f00_0000_0000 + (i * 40) % (96 << 10);
                let e = if i % 3 == 0 {
                    TraceEvent::Store { addr, size: 8 }
                } else {
                    TraceEvent::Load { addr, size: 8 }
                };
                w.write(e).unwrap();
            }
            let dir = scratch();
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("loop96k.cst");
            std::fs::write(&path, w.finish().unwrap()).unwrap();
            let mut g = ThreadGroup::parse_mix(&format!("{}:2", path.display())).unwrap();
            // named apart from the temporary path, which the result would otherwise carry
            g[0].label = Some("loop96k".into());
            c.threads.extend(g);
        }
        "phases" => {
            c.kernel.baseline = Baseline::Fx;
            c.kernel.fx_quantum_ms = Some(2.0);
            let mut g = c.threads[0].clone();
            g.profile = None;
            g.count = 1;
            g.phases = vec![
                Phase {
                    profile: Some("small".into()),
                    model: None,
                    instructions: 5_000_000,
                },
                Phase {
                    profile: Some("large".into()),
                    model: None,
                    instructions: 1 << 40,
                },
            ];
            c.threads.push(g);
        }
        _ => unreachable!(),
    }
    c
}

/// Where the trace kind's trace is written (removed after its run).
fn scratch() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("cachesched-golden-{}", std::process::id()))
}

macro_rules! kinds {
    ($($test:ident: $kind:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let c = kind($kind);
                let r = std::panic::catch_unwind(|| check_in(KINDS, $kind, &c));
                if $kind == "trace" {
                    let _ = std::fs::remove_dir_all(scratch());
                }
                if let Err(e) = r {
                    std::panic::resume_unwind(e);
                }
            }
        )*
    };
}

kinds! {
    kind_rr: "rr",
    kind_demo: "demo",
    kind_migrate: "migrate",
    kind_trace: "trace",
    kind_phases: "phases",
}

macro_rules! golden {
    ($($test:ident: $preset:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check($preset);
            }
        )*
    };
}

golden! {
    niagara_2c: "niagara-2c",
    niagara_8c: "niagara-8c",
    t2000: "t2000",
    t1_dual: "t1-dual",
    power5_2x2x2: "power5-2x2x2",
    power5_8chip: "power5-8chip",
    clovertown_2x2: "clovertown-2x2",
    clovertown_ump: "clovertown-ump",
    xeon_e5_16m: "xeon-e5-16m",
    xeon_e5_16m_2c: "xeon-e5-16m-2c",
    core2_4m: "core2-4m",
}
