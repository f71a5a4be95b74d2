//! `cachesched reproduce`: a paper's evaluation from its scenario files
//! (`experiments/<paper>/*.toml`, each one figure or study with the paper's reported
//! values), run on the simulated machine over several seeds, with every window checked,
//! a paper-against-measured table with 95% intervals, plots, and the paper's own
//! analyses (for CASC: classification, the cache illusion, time to steady state).
//! `--quick` runs each file's reduced version and says so; `reproduce all` runs every
//! paper's directory.

use crate::docs_block;
use crate::experiment::{
    checks, load, metric, plain, run_scenario, Class, Job, Scenario, Sweep, Variant,
};
use crate::files::write_file;
use anyhow::{bail, Context, Result};
use cachesched_policies::PolicySpec;
use cachesched_sim::workload::LocalityModel;
use cachesched_sim::{Baseline, KernelConfig, MachineSpec, RunResult, ThreadGroup};
use clap::{Args, Subcommand};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What to reproduce.
#[derive(Subcommand, Debug)]
pub enum ReproduceCommand {
    /// CASC (paper 1): the scenario files of `experiments/casc/` (Figures 5-7 with the
    /// paper's values, variants beyond the paper, a real-program mix, mixes where CASC
    /// cannot help), with CASC's classification, cache illusion and time to steady state.
    Casc(PaperArgs),
    /// The cache-fair scheduler (paper 2): the scenario files of `experiments/cachefair/`
    /// (Table 2's fast and slow schedules: completion-time variability under the
    /// fixed-priority baseline and under cache-fair, Figures 6-8; best-effort
    /// slowdowns), with the policy's fair-miss-rate estimates and mechanism counts.
    Cachefair(PaperArgs),
    /// Sharing-aware thread clustering (paper 3): the scenario files of
    /// `experiments/clustering/` (the four placements of the server workloads on the
    /// 2-chip Power5, Figures 5-8, the 8-chip machine), with the clusters' accuracy
    /// against the ground truth and Figure 5's sharing maps.
    Clustering(PaperArgs),
    /// Cache affinity (paper 4): the scenario files of `experiments/affinity/` (§2: L1
    /// affinity on a multicore uniprocessor, Table 2's six experiments on the T2000 and
    /// one Clovertown chip at 2, 10 and 200 ms quanta; §3: L2 affinity on the Clovertown
    /// as a multicore and as a unicore multiprocessor, Table 3's mixes bound against
    /// affinity-oblivious, and the affinity policy), with IPC and misses per instruction
    /// low against high affinity.
    Affinity(PaperArgs),
    /// Longer timeslices (paper 5): the scenario files of `experiments/timeslice/`
    /// (Figure 1's slowdowns with a cache-aggressive microkernel; Figures 2, 3 and 11
    /// from slice profiles; Figures 5-10: runtime improvement of aggregated slices
    /// against CFS on 2 and 4 cores with 16 MB and on 2 cores with 4 MB, 2/4/8 programs
    /// per core, LLC misses, fairness; the dynamic variant and a partitioned LLC).
    Timeslice(PaperArgs),
    /// Every paper that has scenario files (every directory under `experiments/`).
    All(PaperArgs),
    /// How far CASC's headline (768 KB: L2 miss ratio and throughput against TS) moves
    /// when each parameter of the art, twolf and Berkeley DB profiles moves by ±25%.
    CascSensitivity(crate::sensitivity::SensitivityArgs),
}

/// Arguments of `cachesched reproduce PAPER`.
#[derive(Args, Debug)]
pub struct PaperArgs {
    /// Output directory; each paper writes to DIR/PAPER.
    #[arg(long, value_name = "DIR", default_value = "results")]
    out: PathBuf,
    /// Directory of the scenario files (one subdirectory per paper).
    #[arg(long, value_name = "DIR", default_value = "experiments")]
    experiments: PathBuf,
    /// Parallel runs, 1 to 1,024 (default: number of CPUs; never more than the runs).
    #[arg(long, value_name = "N", value_parser = crate::experiment::parse_jobs)]
    jobs: Option<usize>,
    /// The reduced version: each file's `quick` seeds and windows (default: its first
    /// two seeds); every report says it is reduced.
    #[arg(long)]
    quick: bool,
    /// Only these scenario files (names without `.toml`).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    only: Vec<String>,
    /// Replace every file's seeds (for exploration; the report names the override).
    #[arg(long, value_delimiter = ',', value_name = "SEEDS")]
    seeds: Vec<u64>,
    /// Replace every file's simulated time per run, ms.
    #[arg(long, value_name = "MS")]
    duration_ms: Option<f64>,
    /// Replace every file's warm-up, ms.
    #[arg(long, value_name = "MS")]
    warmup_ms: Option<f64>,
    /// Replace every file's LLC sizes (KiB).
    #[arg(long, value_delimiter = ',', value_name = "KIB")]
    l2_kb: Vec<u64>,
    /// Write each scenario file's section of the paper-against-measured report into
    /// DIR/PAPER.md, between its markers `<!-- reproduce PAPER/NAME: begin -->` and
    /// `<!-- reproduce PAPER/NAME: end -->` (checked before anything runs).
    #[arg(long, value_name = "DIR")]
    docs: Option<PathBuf>,
    /// Run nothing: rebuild every report (and with --docs the documents) from the
    /// results a previous run of the same scenario files, with the same options, left
    /// in --out. Refuses when a file or an option differs from that run.
    #[arg(long)]
    from_results: bool,
    /// Run nothing: print every file's runs, those the run cache holds, the simulated
    /// seconds of the rest and their estimated worker-time, from a rate measured now on
    /// this host for each machine (a short calibration run of each).
    #[arg(long, conflicts_with = "from_results")]
    plan: bool,
    /// Run nothing: move the runs of these files that a build from before model
    /// versions made (its run-cache keys continued from the hash of its sources,
    /// HASH, 16 hex digits) to their keys under this build's model version. Only for
    /// runs of a build whose results this build's golden tests reproduce.
    #[arg(long, value_name = "HASH", conflicts_with_all = ["from_results", "plan"])]
    rekey_from: Option<String>,
}

/// The paper's numbers (§5.3): ranges over the five cache sizes.
pub(crate) const PAPER_MISS_CHANGE: (f64, f64) = (-46.0, -15.0);
pub(crate) const PAPER_IPS_CHANGE: (f64, f64) = (28.0, 50.0);
pub(crate) const PROFILES: [&str; 3] = ["art", "twolf", "bdb"];

/// The paper's 18 threads, 6 of each profile arriving interleaved; with `replace`, the
/// named profile's threads run the given model instead (labelled with the profile's
/// name, so per-thread results keep it).
pub(crate) fn casc_threads(replace: Option<(&str, &LocalityModel)>) -> Vec<ThreadGroup> {
    (0..18)
        .map(|i| {
            let p = PROFILES[i % 3];
            match replace {
                Some((w, m)) if w == p => ThreadGroup {
                    label: Some(p.to_string()),
                    ..ThreadGroup::custom(m.clone(), 1)
                },
                _ => ThreadGroup::of(p, 1),
            }
        })
        .collect()
}

/// The paper's experiment on niagara-2c under the Solaris-TS-like baseline, sampled
/// every 10 ms, with these variants and L2 sizes.
pub(crate) fn casc_experiment(
    name: &str,
    description: String,
    timing: (f64, f64, &[u64]),
    variants: Vec<Variant>,
    l2_kb: Vec<u64>,
    metrics: &[&str],
) -> Scenario {
    let (warmup_ms, duration_ms, seeds) = timing;
    Scenario {
        name: name.into(),
        description,
        machine: MachineSpec::Preset("niagara-2c".into()),
        threads: casc_threads(None),
        mixes: Vec::new(),
        kernel: KernelConfig {
            baseline: Baseline::Ts,
            ..Default::default()
        },
        duration_ms,
        warmup_ms,
        sample_ms: 10.0,
        stop_after_segments: false,
        stop_after_quanta: None,
        seeds: seeds.to_vec(),
        // every seed at once: the sensitivity study compares single parameters
        min_seeds: Some(seeds.len()),
        variants,
        sweep: Some(Sweep { llc_kb: l2_kb }),
        metrics: metrics.iter().map(|m| m.to_string()).collect(),
        paper: Vec::new(),
        min_quanta: 0,
        quick: None,
        classes: Default::default(),
        analyses: Vec::new(),
        references: Vec::new(),
    }
}

/// Mean of metric `m` over the runs of variant `v` at size `kb`.
fn mean_at(jobs: &[Job], runs: &[RunResult], v: usize, kb: u64, m: &str) -> f64 {
    let xs: Vec<f64> = jobs
        .iter()
        .zip(runs)
        .filter(|(j, _)| j.variant == v && j.llc_kb == Some(kb))
        .map(|(_, r)| metric(r, m).expect("known metric"))
        .collect();
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The cache size at which `curve` (size, miss ratio; sizes ascending, the ratio
/// falling) reaches `target`, interpolated in log2(size); `None` if outside.
pub fn illusion_size(curve: &[(u64, f64)], target: f64) -> Option<f64> {
    curve.windows(2).find_map(|w| {
        let ((s0, m0), (s1, m1)) = (w[0], w[1]);
        if m0 >= target && target >= m1 && m0 > m1 {
            let f = (m0 - target) / (m0 - m1);
            let l = (s0 as f64).log2() + f * ((s1 as f64).log2() - (s0 as f64).log2());
            Some(l.exp2())
        } else {
            None
        }
    })
}

/// Solo miss rate (LLC misses per 100 data references, fully associative LRU, from the
/// profile's model curve) of the program named `name` at `kb` KiB; `None` for a thread
/// that is not a built-in profile (a real program or a trace).
fn solo_rate(name: &str, kb: u64) -> Option<f64> {
    let m = cachesched_sim::workload::profile(name).ok()?;
    let sd = cachesched_sim::trace::mrc::model_curve(&m, 1, 500_000, 500_000);
    Some(100.0 * sd.miss_ratio(kb * 1024 / 64))
}

/// Threads CASC classes as the truth does: CASC's class of a thread is greedy when its
/// PCMR is above the mean PCMR of the run's threads; `truth(name)` is the thread's true
/// class (`true`: greedy), `None` when unknown (the thread is left out). Right and
/// scored counts; `None` if the run reports no PCMRs.
fn classification(r: &RunResult, truth: &dyn Fn(&str) -> Option<bool>) -> Option<(usize, usize)> {
    let pcmr: Vec<(f64, &str)> = r
        .threads
        .iter()
        .map(|t| {
            r.policy_stats
                .get(&format!("pcmr.{}", t.id))
                .map(|&p| (p, t.name.as_str()))
        })
        .collect::<Option<_>>()?;
    if pcmr.is_empty() {
        return None;
    }
    let mean = pcmr.iter().map(|x| x.0).sum::<f64>() / pcmr.len() as f64;
    let scored: Vec<bool> = pcmr
        .iter()
        .filter_map(|(p, n)| truth(n).map(|g| (*p > mean) == g))
        .collect();
    Some((scored.iter().filter(|&&x| x).count(), scored.len()))
}

/// Relative change from `old` to `new`, in percent.
pub(crate) fn pct(new: f64, old: f64) -> f64 {
    100.0 * (new - old) / old
}

/// `cachesched reproduce`.
pub fn run(c: ReproduceCommand) -> Result<i32> {
    match c {
        ReproduceCommand::Casc(a) => reproduce_papers(&["casc".to_string()], &a),
        ReproduceCommand::Cachefair(a) => reproduce_papers(&["cachefair".to_string()], &a),
        ReproduceCommand::Clustering(a) => reproduce_papers(&["clustering".to_string()], &a),
        ReproduceCommand::Affinity(a) => reproduce_papers(&["affinity".to_string()], &a),
        ReproduceCommand::Timeslice(a) => reproduce_papers(&["timeslice".to_string()], &a),
        ReproduceCommand::All(a) => {
            let mut papers: Vec<String> = std::fs::read_dir(&a.experiments)
                .with_context(|| {
                    format!(
                        "cannot read the scenario directory '{}' (run from the repository's root or pass --experiments)",
                        a.experiments.display()
                    )
                })?
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(String::from))
                .filter(|p| !scenario_files(&a.experiments.join(p)).unwrap_or_default().is_empty())
                .collect();
            papers.sort();
            if papers.is_empty() {
                bail!(
                    "no paper directories with scenario files under '{}'",
                    a.experiments.display()
                );
            }
            reproduce_papers(&papers, &a)
        }
        ReproduceCommand::CascSensitivity(a) => crate::sensitivity::run(a),
    }
}

/// The scenario files of one paper's directory, sorted by name.
pub(crate) fn scenario_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| {
            format!(
                "cannot read the scenario directory '{}' (run from the repository's root or pass --experiments)",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    Ok(v)
}

/// The name of the comparison across a paper's files (its docs block
/// `reproduce PAPER/across-files`), written when two or more of its files can be
/// compared ([`crate::timeslice_report::compared`]).
const ACROSS: &str = "across-files";

/// Scenario file `f` loaded, reduced with `--quick`, with the command line's overrides
/// (said in its description), checked, and its runs planned.
fn prepare(f: &Path, a: &PaperArgs) -> Result<(Scenario, Vec<crate::experiment::Planned>)> {
    let mut sc = load(f)?;
    if a.quick {
        sc = sc.reduced();
    }
    let mut over = Vec::new();
    if !a.seeds.is_empty() {
        sc.seeds = a.seeds.clone();
        // the seeds given, every one (not added one at a time)
        sc.every_seed();
        over.push(format!("seeds {:?}", a.seeds));
    }
    if let Some(d) = a.duration_ms {
        sc.duration_ms = d;
        over.push(format!("{d} ms per run"));
    }
    if let Some(w) = a.warmup_ms {
        sc.warmup_ms = w;
        over.push(format!("{w} ms warm-up"));
    }
    if !a.l2_kb.is_empty() {
        sc.set_sweep(&a.l2_kb);
        over.push(format!("LLC sizes {:?} KiB", a.l2_kb));
    }
    if !over.is_empty() {
        sc.description += &format!(
            " **Overridden on the command line: {}; not the reproduction.**",
            over.join(", ")
        );
    }
    sc.validate()
        .with_context(|| format!("in scenario file '{}'", f.display()))?;
    let planned = crate::experiment::plan_file(&sc, f)?;
    Ok((sc, planned))
}

/// Runs every paper's scenario files and writes each paper's paper-against-measured
/// report; exit code 0, or 130 if interrupted, or 1 if a check of the measured windows
/// failed (the reports say which).
fn reproduce_papers(papers: &[String], a: &PaperArgs) -> Result<i32> {
    if a.seeds.len() == 1 {
        eprintln!("note: one seed gives no confidence intervals");
    }
    // load and check everything before running anything
    let mut plan = Vec::new();
    for paper in papers {
        let files = scenario_files(&a.experiments.join(paper))?;
        let mut scs = Vec::new();
        for f in &files {
            let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario");
            if !a.only.is_empty() && !a.only.iter().any(|o| o == stem) {
                continue;
            }
            match prepare(f, a) {
                Ok((sc, planned)) => scs.push((stem.to_string(), sc, planned)),
                // a plan names what it cannot cost (e.g. a program whose trace cannot
                // be recorded here) and goes on with the rest
                Err(e) if a.plan => println!("{paper}/{stem}: not in the plan: {e:#}"),
                Err(e) => return Err(e),
            }
        }
        if scs.is_empty() {
            bail!(
                "no scenario files to run in '{}'{}",
                a.experiments.join(paper).display(),
                if a.only.is_empty() {
                    ""
                } else {
                    " (check --only)"
                }
            );
        }
        let across =
            crate::timeslice_report::compared(&scs.iter().map(|s| &s.1).collect::<Vec<_>>());
        plan.push((paper.clone(), scs, across));
    }
    // documents to update must have every block, before hours of runs
    if let Some(docs) = &a.docs {
        for (paper, scs, across) in &plan {
            let doc = docs.join(format!("{paper}.md"));
            let text = std::fs::read_to_string(&doc)
                .with_context(|| format!("cannot read '{}' (--docs)", doc.display()))?;
            for (stem, _, _) in scs {
                docs_block::find(&text, &format!("reproduce {paper}/{stem}"))
                    .with_context(|| format!("in '{}'", doc.display()))?;
            }
            if *across {
                docs_block::find(&text, &format!("reproduce {paper}/{ACROSS}"))
                    .with_context(|| format!("in '{}'", doc.display()))?;
            }
        }
    }
    if a.plan || a.rekey_from.is_some() {
        let files: Vec<(String, &[crate::experiment::Planned])> = plan
            .iter()
            .flat_map(|(paper, scs, _)| {
                scs.iter()
                    .map(move |(stem, _, p)| (format!("{paper}/{stem}"), p.as_slice()))
            })
            .collect();
        if let Some(h) = &a.rekey_from {
            let hash = u64::from_str_radix(h, 16)
                .ok()
                .filter(|_| h.len() == 16)
                .with_context(|| {
                    format!("--rekey-from takes a source hash of 16 hex digits, not '{h}'")
                })?;
            let all: Vec<&crate::experiment::Planned> =
                files.iter().flat_map(|(_, p)| p.iter()).collect();
            let (moved, there, absent) = crate::plan::rekey(&all, hash)?;
            println!(
                "{moved} run(s) moved to their keys under model version {}, {there} there \
                 already, {absent} not made by that build",
                cachesched_sim::MODEL_VERSION
            );
        } else {
            crate::plan::print(&files, crate::experiment::worker_count(a.jobs, usize::MAX))?;
        }
        return Ok(0);
    }
    let command = |paper: &str, stem: &str| {
        format!(
            "cachesched reproduce {paper} --only {stem}{}",
            if a.quick { " --quick" } else { "" }
        )
    };
    // an unusable output directory is said before the runs, not after them
    if !a.from_results {
        for (paper, scs, _) in &plan {
            for (stem, _, planned) in scs {
                for p in planned {
                    crate::files::check_writable_dir(&p.out(&a.out.join(paper).join(stem)))?;
                }
            }
        }
    }
    let mut all_ok = true;
    for (paper, scs, across) in plan {
        let paper = &paper;
        let dir = a.out.join(paper);
        let mut md = format!(
            "# {paper}: paper against measured\n\nOne section per scenario file of \
             `experiments/{paper}/`, each with its full report (every metric, paired changes, \
             plots) in its own directory.\n\n"
        );
        let mut sections = Vec::new();
        let mut curves = Vec::new();
        for (stem, sc, planned) in scs {
            let (stem, sc) = (&stem, &sc);
            let mut done = Vec::new();
            if a.from_results {
                for p in planned {
                    let out = p.out(&dir.join(stem));
                    let (jobs, runs) = crate::experiment::load_results(&p.sc, p.jobs, &out)?;
                    done.push((p.mix, p.sc, jobs, runs));
                }
            } else if sc.sequential() {
                // seeds one at a time, every mix's runs of a round in one pool
                let Some(ran) = crate::seeds::run(planned, a.jobs)? else {
                    return Ok(130);
                };
                for (p, runs) in ran {
                    let out = p.out(&dir.join(stem));
                    let workers = crate::experiment::worker_count(a.jobs, p.jobs.len());
                    let Some((jobs, runs)) =
                        crate::experiment::complete(&p.sc, p.jobs, runs, &out, workers)?
                    else {
                        return Ok(130);
                    };
                    done.push((p.mix, p.sc, jobs, runs));
                }
            } else {
                if crate::experiment::fill_run_cache(&planned, a.jobs)?.is_none() {
                    return Ok(130);
                }
                for p in planned {
                    let out = p.out(&dir.join(stem));
                    let Some(r) = run_scenario(&p.sc, p.jobs, &out, a.jobs)? else {
                        return Ok(130);
                    };
                    done.push((p.mix, p.sc, r.0, r.1));
                }
            }
            if sc.mixes.is_empty() {
                let (_, _, jobs, runs) = done.pop().expect("one scenario without mixes");
                let out = dir.join(stem);
                let (sec, ok) = section(stem, sc, &jobs, &runs, &command(paper, stem), &out)?;
                all_ok &= ok;
                md += &sec;
                sections.push((stem.clone(), sec));
                continue;
            }
            let (sec, ok) = mixes_section(stem, sc, &done, &command(paper, stem), &dir.join(stem))?;
            all_ok &= ok;
            md += &sec;
            sections.push((stem.clone(), sec));
            if across {
                curves.extend(crate::timeslice_report::curve(stem, sc, &done));
            }
        }
        if across {
            let stems: Vec<&str> = curves.iter().map(|c| c.stem()).collect();
            let cmd = format!(
                "cachesched reproduce {paper} {}{}",
                stems
                    .iter()
                    .map(|s| format!("--only {s}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                if a.quick { " --quick" } else { "" }
            );
            let sec = crate::timeslice_report::across_files(&curves, &cmd, &dir)?;
            md += &sec;
            sections.push((ACROSS.to_string(), sec));
        }
        write_report(&dir.join("paper-vs-measured.md"), &md)?;
        if let Some(docs) = &a.docs {
            let doc = docs.join(format!("{paper}.md"));
            let mut text = std::fs::read_to_string(&doc)
                .with_context(|| format!("cannot read '{}'", doc.display()))?;
            for (stem, sec) in &sections {
                text = docs_block::replace(&text, &format!("reproduce {paper}/{stem}"), sec)?;
            }
            write_file(&doc, &text)?;
            println!("updated {}", doc.display());
        }
    }
    if !all_ok {
        eprintln!("a check of the measured windows failed: see the reports' checks");
        // a reduced or overridden run is expected to fail them; the reproduction is not
        let changed = a.quick
            || !a.seeds.is_empty()
            || a.duration_ms.is_some()
            || a.warmup_ms.is_some()
            || !a.l2_kb.is_empty();
        if !changed {
            return Ok(1);
        }
    }
    Ok(0)
}

/// The paper-against-measured section of scenario file `stem` (without mixes), made
/// by `command`, and whether its checks passed.
fn section(
    stem: &str,
    sc: &Scenario,
    jobs: &[Job],
    runs: &[RunResult],
    command: &str,
    out: &Path,
) -> Result<(String, bool)> {
    let (checks_md, ok) = checks(sc, jobs, runs);
    let mut sec = head(
        stem,
        sc,
        command,
        &capitalized(&window(sc)),
        &format!("Full report: `{stem}/report.md`"),
    );
    sec += &crate::seeds::outcomes_md(sc, jobs, runs);
    if !checks_md.is_empty() {
        sec += &format!("{checks_md}\n");
    }
    let t = crate::paper::table(sc, jobs, runs);
    if !t.is_empty() {
        sec += &format!("{t}\n");
    }
    if sc.analyses.iter().any(|x| x == "casc") {
        sec += &casc_analysis(sc, jobs, runs)?;
    }
    if sc.analyses.iter().any(|x| x == "clustering") {
        sec += &crate::clustering_report::analysis(sc, jobs, runs, out)?;
    }
    Ok((sec, ok))
}

/// The opening of scenario file `stem`'s section: its name, the command that made it,
/// its description, how its runs went (`runs`), the statistics, and where its full
/// report is (`report`).
fn head(stem: &str, sc: &Scenario, command: &str, runs: &str, report: &str) -> String {
    format!(
        "## {stem}: {}\n\nGenerated by `{command}`. {}\n\n{runs}; {}; means over seeds \
         ± the half-width of the 95% interval (Student's t), changes paired by seed (over \
         the seeds both have). {report}.\n\n",
        sc.name,
        sc.description,
        crate::seeds::rule_sentence(sc)
    )
}

/// `s` with its first letter capital.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}

/// How long a scenario's runs are, in words.
fn window(sc: &Scenario) -> String {
    if sc.stop_after_segments {
        format!(
            "each run ends when its work segments are complete (at most {} ms), the first {} ms \
             not measured",
            sc.duration_ms, sc.warmup_ms
        )
    } else {
        format!(
            "{} ms per run, the first {} ms not measured",
            sc.duration_ms, sc.warmup_ms
        )
    }
}

/// The section of scenario file `stem` run as several mixes (`done`: each mix's
/// label, scenario, jobs and results): the checks of every mix in one list (failures
/// named), then the paper's analysis over all mixes (its plots written to `out`).
fn mixes_section(
    stem: &str,
    sc: &Scenario,
    done: &[crate::cachefair_report::MixRuns],
    command: &str,
    out: &Path,
) -> Result<(String, bool)> {
    let mut sec = head(
        stem,
        sc,
        command,
        &format!("{} mixes; {}", done.len(), window(sc)),
        &format!("Each mix's full report: `{stem}/MIX/report.md`"),
    );
    sec += &crate::seeds::mixes_outcomes_md(sc, done);
    let mut all_ok = true;
    let mut failed = Vec::new();
    for (mix, sub, jobs, runs) in done {
        let (md, ok) = checks(sub, jobs, runs);
        all_ok &= ok;
        if !ok {
            failed.push(format!(
                "- Mix `{}`:\n{}",
                mix.as_deref().unwrap_or("?"),
                md.lines().map(|l| format!("  {l}\n")).collect::<String>()
            ));
        }
    }
    if failed.is_empty() {
        sec += &format!(
            "- Checks: every check of the measured windows passed in all {} mixes (each mix's \
             report lists them).\n\n",
            done.len()
        );
    } else {
        sec += &format!("{}\n", failed.concat());
    }
    if sc.analyses.iter().any(|x| x == "cachefair") {
        sec += &crate::cachefair_report::analysis(sc, done, out)?;
    }
    if sc.analyses.iter().any(|x| x == "affinity") {
        sec += &crate::affinity_report::analysis(sc, done, out)?;
    }
    if sc.analyses.iter().any(|x| x == "timeslice") {
        sec += &crate::timeslice_report::analysis(sc, done, out)?;
    }
    Ok((sec, all_ok))
}

/// CASC's own measures for every CASC variant: the cache illusion (the baseline's
/// size with the same miss ratio), classification against the paper's classes and
/// against each program's own curve at the per-context share, and when its
/// measurements were done.
fn casc_analysis(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> Result<String> {
    let Some(sweep) = &sc.sweep else {
        bail!("the casc analysis needs a sweep over L2 sizes");
    };
    let machine = sc.machine.resolve()?;
    let sharing = (machine.cores_per_chip * machine.threads_per_core).max(1) as u64;
    let mut sizes = sweep.llc_kb.clone();
    sizes.sort_unstable();
    let base = &sc.variants[0].label;
    let ts_curve: Vec<(u64, f64)> = sizes
        .iter()
        .map(|&kb| (kb, mean_at(jobs, runs, 0, kb, "l2_miss_ratio")))
        .collect();
    let mut md = format!(
        "CASC's own measures. Illusion: the `{base}` cache size with the CASC variant's L2 \
         miss ratio (interpolated in log size). Classes: CASC calls a thread greedy when its \
         PCMR is above the run's mean PCMR; scored against the paper's classes ({}) and \
         against each program's own model curve (greedy when its solo miss rate at the \
         per-context share, size / {sharing}, is above the threads' mean). Steady: when the \
         last PCMR was known, ms (the warm-up must cover it).\n\n\
         | L2 | variant | L2 miss ratio (vs {base}) | illusion | classed right (paper classes) | classed right (own curve) | steady at ms (latest) |\n\
         |---|---|---|---|---|---|---|\n",
        if sc.classes.is_empty() {
            "none given".to_string()
        } else {
            sc.classes
                .iter()
                .map(|(n, c)| format!("{n} {}", if *c == Class::Greedy { "greedy" } else { "frugal" }))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    for (vi, v) in sc.variants.iter().enumerate() {
        if !v.policies.iter().any(|p| matches!(p, PolicySpec::Casc(_))) {
            continue;
        }
        for &kb in &sizes {
            let mr = mean_at(jobs, runs, vi, kb, "l2_miss_ratio");
            let bmr = mean_at(jobs, runs, 0, kb, "l2_miss_ratio");
            let illusion = match illusion_size(&ts_curve, mr) {
                Some(s) => format!("{s:.0} KB ({:.1}×)", s / kb as f64),
                None if mr < ts_curve.last().expect("sizes").1 => {
                    format!("> {} KB", ts_curve.last().expect("sizes").0)
                }
                None => "none (no lower)".into(),
            };
            // the own-curve truth: above the mean solo rate of the run's threads
            let names: Vec<String> = sc.threads.iter().map(|g| g.name()).collect();
            let share = (kb / sharing).max(1);
            let rates: Vec<Option<f64>> = names.iter().map(|n| solo_rate(n, share)).collect();
            let known: Vec<f64> = rates.iter().flatten().copied().collect();
            let mean_rate = known.iter().sum::<f64>() / known.len().max(1) as f64;
            let own = |n: &str| {
                let i = names.iter().position(|x| *x == n)?;
                rates[i].map(|r| r > mean_rate)
            };
            let paper = |n: &str| sc.classes.get(n).map(|c| *c == Class::Greedy);
            let (mut pr, mut pn, mut or, mut on) = (0, 0, 0, 0);
            let mut latest = f64::NEG_INFINITY;
            let mut never = 0;
            for (_, r) in jobs
                .iter()
                .zip(runs)
                .filter(|(j, _)| j.variant == vi && j.llc_kb == Some(kb))
            {
                if let Some((k, n)) = classification(r, &paper) {
                    pr += k;
                    pn += n;
                }
                if let Some((k, n)) = classification(r, &own) {
                    or += k;
                    on += n;
                }
                match r.policy_stats.get("steady_ms") {
                    Some(&s) if s >= 0.0 => latest = latest.max(s),
                    _ => never += 1,
                }
            }
            let frac = |k: usize, n: usize| {
                if n == 0 {
                    "n/a".to_string()
                } else {
                    format!("{k}/{n} ({:.0}%)", 100.0 * k as f64 / n as f64)
                }
            };
            writeln!(
                md,
                "| {kb} KB | {} | {} ({}) {:+.1}% | {illusion} | {} | {} | {}{} |",
                v.label,
                plain(mr),
                plain(bmr),
                pct(mr, bmr),
                frac(pr, pn),
                frac(or, on),
                if latest.is_finite() {
                    format!("{latest:.0}")
                } else {
                    "-".into()
                },
                if never > 0 {
                    format!(", {never} run(s) never")
                } else {
                    String::new()
                }
            )?;
        }
    }
    md.push('\n');
    md += &casc_programs(sc, jobs, runs, &sizes);
    Ok(md)
}

/// Where CASC put each program, per L2 size and CASC variant: the program's mean CPU
/// share under the baseline and under CASC (over its threads and the seeds), the range
/// of the PCMRs CASC estimated for its threads, the range of the CPUs' final MAX_PCMRs,
/// and in how many runs some CPU ended with a MAX_PCMR at or below some thread's PCMR
/// (CASC kept a thread off a CPU).
fn casc_programs(sc: &Scenario, jobs: &[Job], runs: &[RunResult], sizes: &[u64]) -> String {
    let mut programs: Vec<String> = Vec::new();
    for g in &sc.threads {
        if !programs.contains(&g.name()) {
            programs.push(g.name());
        }
    }
    let base = &sc.variants[0].label;
    let share = |vi: usize, kb: u64, p: &str| -> Option<f64> {
        let per_run: Vec<f64> = jobs
            .iter()
            .zip(runs)
            .filter(|(j, _)| j.variant == vi && j.llc_kb == Some(kb))
            .filter_map(|(_, r)| {
                let s: Vec<f64> = r
                    .threads
                    .iter()
                    .filter(|t| t.name == p)
                    .map(|t| t.cpu_share)
                    .collect();
                (!s.is_empty()).then(|| s.iter().sum::<f64>() / s.len() as f64)
            })
            .collect();
        (!per_run.is_empty()).then(|| per_run.iter().sum::<f64>() / per_run.len() as f64)
    };
    let range = |xs: &[f64]| match (
        xs.iter().copied().reduce(f64::min),
        xs.iter().copied().reduce(f64::max),
    ) {
        (Some(a), Some(b)) => format!("{a:.1}–{b:.1}"),
        _ => "-".into(),
    };
    let mut md =
        format!(
        "Where CASC put each program: its mean CPU share (over its threads and the seeds) under \
         `{base}` → under CASC, and the range of the PCMRs CASC estimated for its threads \
         (`pcmr.N` in `results.json`); the range of the CPUs' final MAX_PCMRs, and the runs in \
         which some CPU ended with a MAX_PCMR at or below some thread's PCMR (a thread runs \
         only where its PCMR is below the cap: one was kept off a CPU).\n\n\
         | L2 | variant |{} MAX_PCMR | runs restricting |\n|---|---|{}---|---|\n",
        programs.iter().map(|p| format!(" {p}: share, PCMR |")).collect::<String>(),
        "---|".repeat(programs.len())
    );
    for (vi, v) in sc.variants.iter().enumerate() {
        if !v.policies.iter().any(|p| matches!(p, PolicySpec::Casc(_))) {
            continue;
        }
        for &kb in sizes {
            let these: Vec<&RunResult> = jobs
                .iter()
                .zip(runs)
                .filter(|(j, _)| j.variant == vi && j.llc_kb == Some(kb))
                .map(|(_, r)| r)
                .collect();
            let mut row = format!("| {kb} KB | {} |", v.label);
            for p in &programs {
                let pcmrs: Vec<f64> = these
                    .iter()
                    .flat_map(|r| {
                        r.threads
                            .iter()
                            .filter(|t| &t.name == p)
                            .filter_map(|t| r.policy_stats.get(&format!("pcmr.{}", t.id)).copied())
                    })
                    .collect();
                let sh = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
                row += &format!(
                    " {} → {}, {} |",
                    sh(share(0, kb, p)),
                    sh(share(vi, kb, p)),
                    range(&pcmrs)
                );
            }
            let mut caps = Vec::new();
            let mut restricting = 0;
            for r in &these {
                let mine: Vec<f64> = r
                    .policy_stats
                    .iter()
                    .filter(|(k, _)| k.starts_with("max_pcmr."))
                    .map(|(_, &x)| x)
                    .collect();
                let top = r
                    .policy_stats
                    .iter()
                    .filter(|(k, _)| k.starts_with("pcmr."))
                    .map(|(_, &x)| x)
                    .fold(f64::NEG_INFINITY, f64::max);
                if mine.iter().any(|&c| c <= top) {
                    restricting += 1;
                }
                caps.extend(mine);
            }
            row += &format!(" {} | {}/{} |\n", range(&caps), restricting, these.len());
            md += &row;
        }
    }
    md + "\n"
}

/// Writes a reproduction's report to `path` and prints it.
pub(crate) fn write_report(path: &std::path::Path, md: &str) -> Result<()> {
    write_file(path, md)?;
    println!("\n{md}");
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn illusion_interpolates_in_log_size() {
        let curve = [(48, 0.5), (96, 0.3), (192, 0.2)];
        assert_eq!(illusion_size(&curve, 0.3), Some(96.0));
        let s = illusion_size(&curve, 0.25).unwrap();
        assert!((s - (96.0 * 2f64.sqrt())).abs() < 1e-9, "{s}");
        assert_eq!(illusion_size(&curve, 0.1), None);
        assert_eq!(illusion_size(&curve, 0.6), None);
    }
}
