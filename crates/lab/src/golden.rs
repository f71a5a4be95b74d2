//! Golden results of the reproductions: one short run of every kind of run the shipped
//! scenario files make, reduced to a hash of its full JSON result.
//!
//! With the preset goldens of `crates/sim/tests/sim/golden.rs`, these guard
//! [`MODEL_VERSION`], which keys every cached run: a change to the simulator or the
//! policies that keeps every hash here keeps every run already made; one that changes
//! a hash fails until the version is raised, the tables regenerated and
//! `docs/model.md`'s table of model versions says why.
//!
//! A *kind* of run is what selects code paths: the machine preset, the baseline class,
//! each policy, the partitioning, the slice profile, sampling, the kernel's switches,
//! and each thread group's source, binding, placement and work segment
//! ([`signature`]). Every scenario file's variants are taken in file order (first mix,
//! first cache size, first seed), and the first variant of each kind becomes a case,
//! cut to a short window ([`shortened`]). Programs recorded from real binaries
//! (`real:NAME`) are left out: their traces are not in a clean checkout (the trace
//! replay is covered by the simulator's own trace-thread goldens).

use crate::experiment;
use crate::scenario::Scenario;
use cachesched_core::hash::fnv1a;
use cachesched_sim::{SimConfig, MODEL_VERSION};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The model version the table was made with; it must be [`MODEL_VERSION`].
pub const GOLDEN_MODEL_VERSION: u32 = 1;

/// (case `PAPER/FILE/VARIANT`, FNV-1a 64 of `serde_json::to_string(&simulate(..))`).
pub const GOLDEN: &[(&str, u64)] = &[
    ("affinity/heldout-mmp/bound", 0x6c197bcb939b4a4d),
    ("affinity/heldout-mmp/oblivious", 0xc6593da7770a3a98),
    ("affinity/heldout-ump/bound", 0xd0c5e2e4dde86be2),
    ("affinity/heldout-ump/oblivious", 0x6a712e2f1156a036),
    ("affinity/l1-clovertown-q10/high", 0xc187b5115806d111),
    ("affinity/l1-t2000-q10/high", 0xdfc9a197367bb78a),
    ("affinity/l2-mmp/default", 0x7491987e93d3dd9b),
    ("affinity/l2-mmp/affinity-core", 0x7affa92be9173b45),
    ("affinity/l2-mmp/affinity-llc", 0x85fb413ef3b1ea69),
    ("affinity/l2-ump/default", 0xfd5a5c68f3aea222),
    ("affinity/l2-ump/affinity-core", 0x93775e7f222b3986),
    ("affinity/l2-ump/affinity-llc", 0x93775e7f222b3986),
    ("cachefair/fig6-8/fx", 0xe98f1c8150c87b25),
    ("cachefair/fig6-8/cachefair", 0xe8c9d0fd8fccd649),
    ("cachefair/fig6-8/fx-partitioned", 0x10d09593302b51f4),
    (
        "cachefair/unlimited-bus/fx-partitioned-unlimited-bus",
        0xbfbb2e3dca8a2a30,
    ),
    ("casc/fig5-7/ts", 0xc9b8006a1f97c2d0),
    ("casc/fig5-7/casc", 0x29406616bf8bb1f8),
    ("casc/miss-rate-units/casc-per-llc-ref", 0x4c86224788ff6ed2),
    ("casc/variants/casc-calibrated", 0x29406616bf8bb1f8),
    ("casc/variants/casc-strict", 0x29406616bf8bb1f8),
    ("clustering/fig-8chip-specjbb/default", 0xcfd158c257ca5949),
    (
        "clustering/fig-8chip-specjbb/round-robin",
        0x45229a7f7e9a09e6,
    ),
    ("clustering/fig-8chip-specjbb/hand", 0x2e04a79b8e5a55de),
    ("clustering/fig-8chip-specjbb/automatic", 0x6c310e87dbab746c),
    ("clustering/fig5-shmap-sizes/default", 0xae1bfc7501382ff3),
    ("clustering/fig5-shmap-sizes/shmap-128", 0x4a755ad119b183d2),
    ("clustering/fig5-specjbb-4wh/hand", 0x2527cd46c7f91805),
    ("clustering/fig6-7-rubis/round-robin", 0x97915eb04fdf1fa5),
    ("clustering/fig6-7-rubis/process-llc", 0xff084f9fb90f4e67),
    ("clustering/fig8/no sampling", 0xd84314c068c2469c),
    ("clustering/fig8/1 in 1", 0xaa5d22a13a44979b),
    ("clustering/heldback-mixed/default", 0x3c5c416107314159),
    ("clustering/heldback-mixed/process-llc", 0x98cf0089fc54b3c2),
    ("clustering/heldback-mixed/clustering", 0x2528bed7a5cc2d4c),
    ("timeslice/diag-fig5-cfs-2cpu/cfs", 0x596716413e114535),
    ("timeslice/diag-fig5-cfs-2cpu/slice-5ms", 0xaf87f3a60da207ce),
    ("timeslice/diag-fig8-2-at-4.5ms/cfs", 0x6ae57daace72953f),
    (
        "timeslice/diag-fig8-2-at-4.5ms/slice-4.5ms",
        0x0a3c82f61aa1b05b,
    ),
    ("timeslice/fig1-slowdown/solo", 0x5412dec6caf75f4c),
    ("timeslice/fig2-offcpu/cfs", 0xfaaf56342481e33b),
    ("timeslice/fig5-2c16m/dynamic", 0xd70c4bf9721027b0),
    ("timeslice/fig5-2c16m/cfs-partitioned", 0x2a2e3f04520b99c8),
    (
        "timeslice/fig5-2c16m/slice-15ms-partitioned",
        0xc9f5437d6def8069,
    ),
    ("timeslice/fig7-2c4m/cfs", 0x98cd4ad08c5aa83c),
    ("timeslice/fig7-2c4m/slice-5ms", 0x661d0919548e6328),
];

/// What selects the code paths a run takes (see the module documentation): runs of
/// the same signature differ only in numbers (cache sizes, slice lengths, seeds).
pub fn signature(cfg: &SimConfig) -> String {
    let m = match &cfg.machine {
        cachesched_sim::MachineSpec::Preset(p) => p.clone(),
        cachesched_sim::MachineSpec::Resized { preset, .. } => preset.clone(),
        cachesched_sim::MachineSpec::Custom(c) => c.name.clone(),
    };
    let machine = m.split("-llc").next().unwrap_or(&m).to_string();
    let k = &cfg.kernel;
    // each policy with its settings, numbers left out (modes and switches select code)
    let mut policies: Vec<String> = cfg
        .policies
        .iter()
        .map(|p| {
            let json = serde_json::to_string(p).expect("a policy serialises");
            let words: String = json
                .chars()
                .map(|c| {
                    if c.is_ascii_digit() || c == '.' {
                        '#'
                    } else {
                        c
                    }
                })
                .collect();
            let mut out = String::new();
            for c in words.chars() {
                if !(c == '#' && out.ends_with('#')) {
                    out.push(c);
                }
            }
            out.replace("#e#", "#")
        })
        .collect();
    policies.sort_unstable();
    let groups: BTreeSet<String> = cfg
        .threads
        .iter()
        .map(|g| {
            let source = if g.model.is_some() {
                "model"
            } else if g.trace.is_some() {
                "trace"
            } else if g.real.is_some() {
                "real"
            } else if !g.phases.is_empty() {
                "phases"
            } else {
                "profile"
            };
            format!(
                "{source} pin={:?} segment={} class={:?} cpus={} process={} groups={} {:?} nice={} fx={}",
                g.pin,
                g.segment.is_some(),
                g.class,
                g.cpus.is_some(),
                g.same_process,
                g.threads_per_group.is_some(),
                g.group_assignment,
                g.nice != 0,
                g.fx_priority != 0,
            )
        })
        .collect();
    format!(
        "{machine} {:?} policies={policies:?} partition={:?} profile={} pages={:?} \
         oblivious={} sampling-cost={} stop-after-segments={} groups={groups:?}",
        k.baseline,
        cfg.partition,
        k.slice_profile_ms.is_some(),
        k.page_placement,
        k.affinity_oblivious,
        k.sample_cost_cycles > 0,
        cfg.stop_after_segments,
    )
}

/// Simulated CPU-cycles of a golden run (its CPUs times its cycles): about a second
/// of a test worker at the engine's rate of the reproductions' runs (2-5e7 simulated
/// instructions per second).
const GOLDEN_CPU_CYCLES: f64 = 1e8;

/// `cfg` cut to a golden run's window: [`GOLDEN_CPU_CYCLES`] over its CPUs, at most
/// 30 ms and at least 3 (on a 2-CPU machine at 2.6 GHz 19 ms: slices end, policies
/// start acting, the warm-up ends), a third of it warm-up where the scenario has one,
/// and neither work segments nor quanta ending the run early (the quanta stop is the
/// simulator's, tested there: `a_window_can_end_by_its_quanta`).
pub fn shortened(cfg: &SimConfig) -> SimConfig {
    let m = cfg.machine.resolve().expect("a shipped machine resolves");
    let cpus = m
        .topology()
        .expect("a shipped machine's topology")
        .nr_cpus();
    let ms = (GOLDEN_CPU_CYCLES / (cpus as f64 * m.freq_mhz as f64 * 1e3))
        .clamp(3.0, 30.0)
        .min(cfg.duration_ms);
    SimConfig {
        duration_ms: ms,
        warmup_ms: if cfg.warmup_ms > 0.0 { ms / 3.0 } else { 0.0 },
        stop_after_segments: false,
        stop_after_quanta: None,
        ..cfg.clone()
    }
}

/// The shipped scenario files, sorted (`experiments/PAPER/*.toml`).
fn shipped_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut papers: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the experiments directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_dir())
        .collect();
    papers.sort();
    papers
        .iter()
        .flat_map(|p| crate::reproduce::scenario_files(p).expect("a paper's directory"))
        .collect()
}

/// The golden cases: (name, shortened configuration), one per signature, in file order.
pub fn cases() -> Vec<(String, SimConfig)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for f in shipped_files() {
        let sc: Scenario = experiment::parse(&f).expect("a shipped scenario file parses");
        if sc
            .threads
            .iter()
            .chain(sc.variants.iter().flat_map(|v| v.threads.iter().flatten()))
            .chain(sc.variants.iter().flat_map(|v| &v.add_threads))
            .chain(sc.mixes.iter().flat_map(|m| m.threads.iter()))
            .any(|g| g.real.is_some())
        {
            continue;
        }
        let paper = f
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|p| p.to_str())
            .unwrap_or("?");
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        let plan = sc.plan().expect("a shipped scenario file plans");
        let first = &plan[0];
        for j in &first.jobs {
            if j.seed != first.sc.seeds[0] || j.llc_kb != first.jobs[0].llc_kb {
                continue;
            }
            if seen.insert(signature(&j.cfg)) {
                let name = format!("{paper}/{stem}/{}", first.sc.variants[j.variant].label);
                out.push((name, shortened(&j.cfg)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case's result is the table's, the table has every case and no other, and
    /// it was made with this model version. Fails on any change of the model's
    /// results on a kind of run the reproductions make, and prints the table to adopt
    /// (only together with a raised `MODEL_VERSION` and its line in docs/model.md).
    #[test]
    fn the_reproductions_golden_results_hold() {
        let cases = cases();
        let cfgs: Vec<&SimConfig> = cases.iter().map(|(_, c)| c).collect();
        let workers = crate::runner::worker_count(None, cfgs.len());
        let runs = crate::runner::run_configs(&cfgs, &|i| cases[i].0.clone(), workers, &|_, _| {})
            .expect("every golden run completes")
            .expect("not interrupted");
        let hashes: Vec<u64> = runs
            .iter()
            .map(|r| {
                fnv1a(
                    serde_json::to_string(r)
                        .expect("a result serialises")
                        .as_bytes(),
                )
            })
            .collect();
        let table: String = cases
            .iter()
            .zip(&hashes)
            .map(|((n, _), h)| format!("    (\"{n}\", 0x{h:016x}),\n"))
            .collect();
        let actual: Vec<(&str, u64)> = cases
            .iter()
            .zip(&hashes)
            .map(|((n, _), h)| (n.as_str(), *h))
            .collect();
        let changed: Vec<String> = actual
            .iter()
            .filter(|a| !GOLDEN.contains(a))
            .map(|(n, _)| n.to_string())
            .collect();
        assert!(
            changed.is_empty() && actual.len() == GOLDEN.len(),
            "the results of {} golden case(s) changed or are new ({}); if the model was meant \
             to change, raise MODEL_VERSION (crates/sim/src/lib.rs), say why in docs/model.md's \
             table of model versions, and make GOLDEN in crates/lab/src/golden.rs:\n{table}",
            changed.len(),
            changed.join(", ")
        );
        assert_eq!(
            GOLDEN_MODEL_VERSION, MODEL_VERSION,
            "the golden table was made with another model version: regenerate it"
        );
    }

    /// Cases are distinct kinds and cover every baseline class and policy the shipped
    /// files use: fails if the signature stops telling them apart.
    #[test]
    fn the_cases_cover_the_reproductions() {
        let cases = cases();
        let sigs: BTreeSet<String> = cases.iter().map(|(_, c)| signature(c)).collect();
        assert_eq!(sigs.len(), cases.len());
        let all = sigs.iter().cloned().collect::<Vec<_>>().join("\n");
        for want in [
            "Cfs",
            "Ts",
            "Fx",
            "casc",
            "cachefair",
            "clustering",
            "affinity",
            "timeslice",
            "process-llc",
            "dynamic",
            "partition=Some",
            "profile=true",
            "segment=true",
        ] {
            assert!(all.contains(want), "no golden case with {want}:\n{all}");
        }
    }
}
