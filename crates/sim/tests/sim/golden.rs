//! Golden results: a short run of each preset's paper workload, reduced to a hash of
//! its full JSON result (every counter, thread and CPU). Optimisations of the engine
//! must leave these unchanged; a change that is meant to change the model updates the
//! table below with the printed values and says so (and why) in its commit and in
//! docs/model.md's "Changes, newest first".

use cachesched_core::hash::fnv1a;
use cachesched_sim::{simulate, SimConfig, ThreadGroup, PAPER_MIXES, PRESETS};

/// Simulated milliseconds per preset: long enough for every thread to run (CFS-like
/// slices on 8 CPUs with 18 threads first switch after 10 ms), miss in every cache
/// level and be switched (where threads outnumber CPUs), short for a test (one test per preset, so that they run in
/// parallel: about 50 s of CPU in all on this 2-core machine).
const MS: f64 = 30.0;

/// (preset, FNV-1a 64 of `serde_json::to_string(&simulate(..))`).
const GOLDEN: &[(&str, u64)] = &[
    ("niagara-2c", 0x0666dcc9fe641970),
    ("niagara-8c", 0x3f329d4019d15d0b),
    ("t2000", 0xdc551352b2a9a8cd),
    ("t1-dual", 0xdf283925c5ddc8e4),
    ("power5-2x2x2", 0xba7d20257ee2b559),
    ("power5-8chip", 0x59525d8cd387fc05),
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

/// Runs `preset`'s paper mix and compares its hash with the table.
fn check(preset: &str) {
    let mix = PAPER_MIXES
        .iter()
        .find(|(p, _)| *p == preset)
        .map(|(_, m)| *m)
        .unwrap();
    let mut c = SimConfig::new(preset, ThreadGroup::parse_mix(mix).unwrap());
    c.duration_ms = MS;
    let r = simulate(&c).unwrap();
    assert!(
        r.threads.iter().all(|t| t.counters.instructions > 0) && r.totals.llc_misses > 0,
        "{preset}: every thread must run and the last level miss"
    );
    let actual = fnv1a(serde_json::to_string(&r).unwrap().as_bytes());
    let golden = GOLDEN.iter().find(|(p, _)| *p == preset).map(|(_, h)| *h);
    assert_eq!(
        golden,
        Some(actual),
        "{preset}: the engine's results changed; if the model was meant to change, its \
         entry in GOLDEN becomes (\"{preset}\", 0x{actual:016x})"
    );
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
