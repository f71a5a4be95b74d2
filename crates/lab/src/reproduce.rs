//! `cachesched reproduce`: a paper's evaluation from its scenario files
//! (`experiments/<paper>/*.toml`, each one figure or study with the paper's reported
//! values), run on the simulated machine over several seeds, with every window checked,
//! a paper-against-measured table with 95% intervals, plots, and the paper's own
//! analyses (for CASC: classification, the cache illusion, time to steady state).
//! `--quick` runs each file's reduced version and says so; `reproduce all` runs every
//! paper's directory.

use crate::checks::checks;
use crate::docs_block;
use crate::error::{chain, invalid, Error, Result, ResultExt};
use crate::experiment::run_scenario;
use crate::files::write_file;
use crate::scenario::{Job, Scenario};
use cachesched_sim::RunResult;
use std::path::{Path, PathBuf};

/// What `cachesched reproduce PAPER` does (its command-line arguments).
#[derive(Debug, Clone)]
pub struct Options {
    /// Output directory; each paper writes to DIR/PAPER.
    pub out: PathBuf,
    /// Directory of the scenario files (one subdirectory per paper).
    pub experiments: PathBuf,
    /// Parallel runs, 1 to 1,024 (default: number of CPUs; never more than the runs).
    pub jobs: Option<usize>,
    /// The reduced version: each file's `quick` seeds and windows (default: its first
    /// two seeds); every report says it is reduced.
    pub quick: bool,
    /// Only these scenario files (names without `.toml`).
    pub only: Vec<String>,
    /// Replace every file's seeds (for exploration; the report names the override).
    pub seeds: Vec<u64>,
    /// Replace every file's simulated time per run, ms.
    pub duration_ms: Option<f64>,
    /// Replace every file's warm-up, ms.
    pub warmup_ms: Option<f64>,
    /// Replace every file's LLC sizes (KiB).
    pub l2_kb: Vec<u64>,
    /// In files of several mixes, only the mixes of these labels (each must be in
    /// every file run; paper values about the others are dropped).
    pub mixes: Vec<String>,
    /// Write each scenario file's section of the paper-against-measured report into
    /// DIR/PAPER.md, between its markers `<!-- reproduce PAPER/NAME: begin -->` and
    /// `<!-- reproduce PAPER/NAME: end -->` (checked before anything runs).
    pub docs: Option<PathBuf>,
    /// Run nothing: rebuild every report (and with --docs the documents) from the
    /// results a previous run of the same scenario files, with the same options, left
    /// in --out. Refuses when a file or an option differs from that run.
    pub from_results: bool,
    /// Run nothing: print every file's runs, those the run cache holds, the simulated
    /// seconds of the rest and their estimated worker-time, from a rate measured now on
    /// this host for each machine (a short calibration run of each).
    pub plan: bool,
    /// Run nothing: move the runs of these files that a build from before model
    /// versions made (its run-cache keys continued from the hash of its sources,
    /// HASH, 16 hex digits) to their keys under this build's model version. Only for
    /// runs of a build whose results this build's golden tests reproduce.
    pub rekey_from: Option<String>,
    /// Let `docs` take the sections of a reduced or overridden run (`quick`, `seeds`,
    /// `duration_ms`, `warmup_ms`, `l2_kb`, `mixes`); without it such a run refuses to write
    /// the documents, whose blocks hold the full reproduction.
    pub docs_from_reduced: bool,
}

impl Options {
    /// Whether the run is not the reproduction as its files say it: reduced
    /// (`quick`) or with an option that replaces a file's seeds, windows or sizes.
    pub fn reduced(&self) -> bool {
        self.quick
            || !self.seeds.is_empty()
            || self.duration_ms.is_some()
            || self.warmup_ms.is_some()
            || !self.l2_kb.is_empty()
            || !self.mixes.is_empty()
    }
}

/// The papers with scenario files: every directory under `experiments` holding at
/// least one, sorted by name.
pub fn papers_in(experiments: &Path) -> Result<Vec<String>> {
    let mut papers: Vec<String> = std::fs::read_dir(experiments)
        .map_err(Error::io_hint(
            "cannot read the scenario directory",
            experiments,
            SCENARIO_DIR_HINT,
        ))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|p| {
            !scenario_files(&experiments.join(p))
                .unwrap_or_default()
                .is_empty()
        })
        .collect();
    papers.sort();
    if papers.is_empty() {
        return Err(invalid!(
            "no paper directories with scenario files under '{}'",
            experiments.display()
        ));
    }
    Ok(papers)
}

/// What to do when the scenario directory cannot be read.
const SCENARIO_DIR_HINT: &str = " (run from the repository's root or pass --experiments)";

/// The scenario files of one paper's directory, sorted by name.
pub fn scenario_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(Error::io_hint(
            "cannot read the scenario directory",
            dir,
            SCENARIO_DIR_HINT,
        ))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    Ok(v)
}

/// The name of the comparison across a paper's files (its docs block
/// `reproduce PAPER/across-files`), written when two or more of its files can be
/// compared ([`crate::paper::Paper::across_files`]).
const ACROSS: &str = "across-files";

/// Scenario file `f` loaded, reduced with `--quick`, with the command line's overrides
/// (said in its description), checked, and its runs planned.
fn prepare(f: &Path, a: &Options) -> Result<(Scenario, Vec<crate::scenario::Planned>)> {
    // a plan costs what is recorded; it does not spend minutes recording traces
    let mut sc = crate::experiment::load_with(f, !a.plan)?;
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
    if !a.mixes.is_empty() {
        sc.keep_mixes(&a.mixes)?;
        over.push(format!("mixes {}", a.mixes.join(", ")));
    }
    if !over.is_empty() {
        sc.name += " (overridden)";
        sc.description += &format!(
            " **Overridden on the command line: {}; not the reproduction.**",
            over.join(", ")
        );
    }
    crate::papers::validate(&sc).within(|| format!("in scenario file '{}'", f.display()))?;
    let planned = crate::experiment::plan_file(&sc, f)?;
    Ok((sc, planned))
}

/// Runs every paper's scenario files and writes each paper's paper-against-measured
/// report; exit code 0, or 130 if interrupted, or 1 if a check of the measured windows
/// failed (the reports say which).
pub fn reproduce_papers(papers: &[String], a: &Options) -> Result<i32> {
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
                Err(e) if a.plan => println!("{paper}/{stem}: not in the plan: {}", chain(&e)),
                Err(e) => return Err(e),
            }
        }
        if scs.is_empty() {
            return Err(invalid!(
                "no scenario files to run in '{}'{}",
                a.experiments.join(paper).display(),
                if a.only.is_empty() {
                    ""
                } else {
                    " (check --only)"
                }
            ));
        }
        let across = crate::papers::find(paper).is_some_and(|p| {
            p.across_files(&scs.iter().map(|s| &s.1).collect::<Vec<_>>())
                .is_some()
        });
        plan.push((paper.clone(), scs, across));
    }
    // documents to update must have every block, before hours of runs
    if a.docs.is_some() && a.reduced() && !a.docs_from_reduced {
        return Err(invalid!(
            "--docs with a reduced or overridden run (--quick, --seeds, --duration-ms, \
             --warmup-ms, --l2-kb or --mixes) would replace the documents' full reproduction with it: \
             leave out --docs (the reports in --out say everything), or add \
             --docs-from-reduced to write them all the same"
        ));
    }
    if let Some(docs) = &a.docs {
        for (paper, scs, across) in &plan {
            let doc = docs.join(format!("{paper}.md"));
            let text = std::fs::read_to_string(&doc).map_err(Error::io_hint(
                "cannot read",
                &doc,
                " (--docs)",
            ))?;
            for (stem, _, _) in scs {
                docs_block::find(&text, &format!("reproduce {paper}/{stem}"))
                    .within(|| format!("in '{}'", doc.display()))?;
            }
            if *across {
                docs_block::find(&text, &format!("reproduce {paper}/{ACROSS}"))
                    .within(|| format!("in '{}'", doc.display()))?;
            }
        }
    }
    if a.plan || a.rekey_from.is_some() {
        let files: Vec<(String, &[crate::scenario::Planned])> = plan
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
                .ok_or_else(|| {
                    invalid!("--rekey-from takes a source hash of 16 hex digits, not '{h}'")
                })?;
            let all: Vec<&crate::scenario::Planned> =
                files.iter().flat_map(|(_, p)| p.iter()).collect();
            let (moved, there, absent) = crate::plan::rekey(&all, hash)?;
            println!(
                "{moved} run(s) moved to their keys under model version {}, {there} there \
                 already, {absent} not made by that build",
                cachesched_sim::MODEL_VERSION
            );
        } else {
            crate::plan::print(&files, crate::runner::worker_count(a.jobs, usize::MAX))?;
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
        let mut across_files = if across {
            crate::papers::find(paper)
                .and_then(|p| p.across_files(&scs.iter().map(|s| &s.1).collect::<Vec<_>>()))
        } else {
            None
        };
        for (stem, sc, planned) in scs {
            let (stem, sc) = (&stem, &sc);
            let mut done = Vec::new();
            if a.from_results {
                for p in planned {
                    let out = p.out(&dir.join(stem));
                    let (jobs, runs) = crate::report::load_results(&p.sc, p.jobs, &out)?;
                    done.push((p.mix, p.sc, jobs, runs));
                }
            } else if sc.sequential() {
                // seeds one at a time, every mix's runs of a round in one pool
                let Some(ran) = crate::seeds::run(planned, a.jobs)? else {
                    return Ok(crate::runner::halt_code());
                };
                for (p, runs) in ran {
                    let out = p.out(&dir.join(stem));
                    let workers = crate::runner::worker_count(a.jobs, p.jobs.len());
                    let Some((jobs, runs)) =
                        crate::experiment::complete(&p.sc, p.jobs, runs, &out, workers)?
                    else {
                        return Ok(crate::runner::halt_code());
                    };
                    done.push((p.mix, p.sc, jobs, runs));
                }
            } else {
                if crate::runner::fill_run_cache(&planned, a.jobs)?.is_none() {
                    return Ok(crate::runner::halt_code());
                }
                for p in planned {
                    let out = p.out(&dir.join(stem));
                    let Some(r) = run_scenario(&p.sc, p.jobs, &out, a.jobs)? else {
                        return Ok(crate::runner::halt_code());
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
            if let Some(a) = &mut across_files {
                a.add(stem, sc, &done);
            }
        }
        if let Some(files) = &across_files {
            let stems = files.stems();
            let cmd = format!(
                "cachesched reproduce {paper} {}{}",
                stems
                    .iter()
                    .map(|s| format!("--only {s}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                if a.quick { " --quick" } else { "" }
            );
            let sec = files.section(&cmd, &dir)?;
            md += &sec;
            sections.push((ACROSS.to_string(), sec));
        }
        write_report(&dir.join("paper-vs-measured.md"), &md)?;
        if let Some(docs) = &a.docs {
            let doc = docs.join(format!("{paper}.md"));
            let mut text = std::fs::read_to_string(&doc).map_err(Error::io("cannot read", &doc))?;
            for (stem, sec) in &sections {
                text = docs_block::replace(&text, &format!("reproduce {paper}/{stem}"), sec)?;
            }
            write_file(&doc, &text)?;
            println!("updated {}", doc.display());
        }
    }
    if !all_ok {
        eprintln!("a check of the measured windows failed: see the reports' checks");
        // a reduced or overridden run may fail them; the reproduction may not
        if !a.reduced() {
            return Ok(1);
        }
        eprintln!(
            "(a reduced or overridden run's windows may be too short for them: exit status 0; \
             the full reproduction exits with 1)"
        );
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
    let t = crate::report::table(sc, jobs, runs);
    if !t.is_empty() {
        sec += &format!("{t}\n");
    }
    for paper in crate::papers::named_by(sc) {
        sec += &paper.section(sc, jobs, runs, out)?;
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
    done: &[crate::scenario::MixRuns],
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
    for paper in crate::papers::named_by(sc) {
        sec += &paper.mixes_section(sc, done, out)?;
    }
    Ok((sec, all_ok))
}

/// Writes a reproduction's report to `path` and prints it.
pub fn write_report(path: &std::path::Path, md: &str) -> Result<()> {
    write_file(path, md)?;
    println!("\n{md}");
    println!("wrote {}", path.display());
    Ok(())
}
