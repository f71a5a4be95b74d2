//! `cachesched experiment`'s pipeline: a scenario file read and checked → its runs
//! planned → run on the local pool over the run cache ([`crate::runner`]) → results with
//! their solo references → results JSON and CSV, the resolved scenario, SVG plots and a
//! Markdown report ([`crate::report`]).

use crate::error::{chain, Error, Result, ResultExt};
use crate::report::write_outputs;
use crate::runner::{attach_solo_runs, cached_or_run, run_label, worker_count};
use crate::scenario::{Job, Planned, Scenario};
use cachesched_sim::{RunResult, SimConfig, SimError};

/// Reads and validates a scenario file, leaving real programs' traces unrecorded.
pub fn parse(path: &std::path::Path) -> Result<Scenario> {
    let bytes = std::fs::read(path).map_err(Error::io("cannot read scenario file", path))?;
    let text = crate::positions::utf8(path, bytes)?;
    parse_text(path, &text)
}

/// [`parse`] of the text of the file at `path` (named in errors).
pub fn parse_text(path: &std::path::Path, text: &str) -> Result<Scenario> {
    let s: Scenario = toml::from_str(text).map_err(|source| Error::ParseScenario {
        path: path.to_path_buf(),
        source,
    })?;
    crate::papers::validate(&s).within(|| format!("in scenario file '{}'", path.display()))?;
    Ok(s)
}

/// [`Scenario::plan`] of the scenario read from `path`: an error about a value out of
/// range names the line and column that set it.
pub fn plan_file(sc: &Scenario, path: &std::path::Path) -> Result<Vec<Planned>> {
    sc.plan().map_err(|e| {
        // the failure itself, below the mix it happened in
        let key = match e.root() {
            Error::Range(r) => Some(r.key.clone()),
            // a machine the file's own `machine` key resolves is checked while it is read,
            // with its position: here it is a swept LLC size
            Error::Sim(SimError::Machine(_)) | Error::Machine(_) => Some("llc_kb".to_string()),
            _ => None,
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let (context, source) =
            match key.and_then(|k| crate::positions::locate(&text, &k).map(|p| (k, p))) {
                // the whole error as one cause, after the position
                Some((_, (line, col))) => (
                    format!(
                        "in scenario file '{}', line {line}, column {col}",
                        path.display()
                    ),
                    Error::Invalid(chain(&e)),
                ),
                None => (format!("in scenario file '{}'", path.display()), e),
            };
        Error::Context {
            context,
            source: Box::new(source),
        }
    })
}

/// Loads and validates a scenario file; real programs it names get their cached traces
/// (recorded first if missing).
pub fn load(path: &std::path::Path) -> Result<Scenario> {
    load_with(path, true)
}

/// [`load`], recording missing traces only if `record` (else they are an error: see
/// [`crate::real::prepare_with`]).
pub fn load_with(path: &std::path::Path, record: bool) -> Result<Scenario> {
    let mut s = parse(path)?;
    crate::real::prepare_with(&mut s.threads, record)
        .within(|| format!("in scenario file '{}'", path.display()))?;
    for m in &mut s.mixes {
        crate::real::prepare_with(&mut m.threads, record)
            .within(|| format!("in mix '{}' of '{}'", m.label, path.display()))?;
    }
    Ok(s)
}

/// Runs `jobs_list` (the jobs of `sc`, [`Scenario::jobs`]) on `jobs` workers (default:
/// all CPUs) with a progress bar, writes the outputs to `out` and returns the jobs with
/// their results; `None` if interrupted (nothing written).
pub fn run_scenario(
    sc: &Scenario,
    jobs_list: Vec<Job>,
    out: &std::path::Path,
    jobs: Option<usize>,
) -> Result<Option<(Vec<Job>, Vec<RunResult>)>> {
    let workers = worker_count(jobs, jobs_list.len());
    println!("seeds {:?}", sc.seeds);
    println!(
        "scenario {}: {} runs on {} worker(s) -> {}",
        sc.name,
        jobs_list.len(),
        workers,
        out.display()
    );
    let cfgs: Vec<&SimConfig> = jobs_list.iter().map(|j| &j.cfg).collect();
    crate::runner::announce_solo_runs(sc, &cfgs)?;
    let label = |i: usize| run_label(sc, &jobs_list[i]);
    let Some(runs) = cached_or_run(&cfgs, &label, workers)? else {
        eprintln!("{}", crate::runner::halt_message());
        return Ok(None);
    };
    complete(sc, jobs_list, runs, out, workers)
}

/// Finishes runs already made (`runs`, the results of `jobs_list`, some jobs of `sc`):
/// gives their threads their solo references where `sc` wants them (made on `workers`
/// workers where the solo cache lacks them), writes the outputs to `out` and returns
/// the jobs with their results; `None` if interrupted (nothing written).
pub fn complete(
    sc: &Scenario,
    jobs_list: Vec<Job>,
    mut runs: Vec<RunResult>,
    out: &std::path::Path,
    workers: usize,
) -> Result<Option<(Vec<Job>, Vec<RunResult>)>> {
    if sc.wants_solo() {
        let cfgs: Vec<&SimConfig> = jobs_list.iter().map(|j| &j.cfg).collect();
        let Some(()) = attach_solo_runs(&cfgs, &mut runs, workers)? else {
            eprintln!("{}", crate::runner::halt_message());
            return Ok(None);
        };
    }
    write_outputs(sc, &jobs_list, &runs, out)?;
    Ok(Some((jobs_list, runs)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_sim::Pin;

    /// keys, machine, profiles and metrics, and builds all its runs.
    #[test]
    fn shipped_scenarios_load() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut files = Vec::new();
        for e in std::fs::read_dir(&dir).expect("experiments/ exists") {
            let path = e.unwrap().path();
            if path.is_dir() {
                for f in std::fs::read_dir(&path).unwrap() {
                    files.push(f.unwrap().path());
                }
            } else {
                files.push(path);
            }
        }
        let mut n = 0;
        for path in files
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        {
            let sc = parse(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), chain(&e)));
            // its quick version is valid too
            crate::papers::validate(&sc.reduced())
                .unwrap_or_else(|e| panic!("{} (quick): {}", path.display(), chain(&e)));
            // real programs need their recorded traces to build runs
            for (_, sub) in sc.per_mix() {
                if sub.threads.iter().all(|g| g.real.is_none()) {
                    let jobs = sub
                        .jobs()
                        .unwrap_or_else(|e| panic!("{}: {}", path.display(), chain(&e)));
                    assert!(!jobs.is_empty(), "{}", path.display());
                }
            }
            n += 1;
        }
        assert!(n >= 8, "{n} scenario files");
    }

    /// setting is dropped on the way to the runs, or a count metric is accepted.
    #[test]
    fn windows_by_quanta_reach_the_runs_and_refuse_counts() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/timeslice/fig7-2c4m.toml");
        let sc = parse(&path).unwrap();
        let q = sc.stop_after_quanta.expect("fig7 ends windows by quanta");
        let (_, first) = sc.per_mix().remove(0);
        let jobs = first.jobs().unwrap();
        assert!(jobs.iter().all(|j| j.cfg.stop_after_quanta == Some(q)));
        let mut bad = sc.clone();
        bad.metrics.push("context_switches".into());
        let e = chain(&crate::papers::validate(&bad).unwrap_err());
        assert!(
            e.contains("context_switches") && e.contains("context_switches_per_s"),
            "{e}"
        );
        bad.stop_after_quanta = None;
        crate::papers::validate(&bad).unwrap();
    }

    /// a bad file is accepted.
    #[test]
    fn mixes_become_one_scenario_each() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/cachefair/fig6-8.toml");
        let sc = parse(&path).unwrap();
        let subs = sc.per_mix();
        assert_eq!(subs.len(), 18);
        let (label, vortex) = &subs[15];
        assert_eq!(label.as_deref(), Some("vortex-slow"));
        assert_eq!(vortex.name, "cachefair-fig6-8/vortex-slow");
        let names: Vec<String> = vortex.threads.iter().map(|g| g.name()).collect();
        assert_eq!(names, ["vortex", "art", "mcf", "gzip"]);
        assert!(vortex.mixes.is_empty() && vortex.paper.is_empty());
        assert!(!sc.paper.is_empty());
        let err = |s: &Scenario| crate::papers::validate(s).unwrap_err().to_string();
        let mut both = sc.clone();
        both.threads = vortex.threads.clone();
        assert!(err(&both).contains("exactly one of them"));
        let mut dup = sc.clone();
        dup.mixes[1].label = dup.mixes[0].label.clone();
        assert!(err(&dup).contains("unique"));
        let mut slash = sc.clone();
        slash.mixes[0].label = "a/b".into();
        assert!(err(&slash).contains("a label of letters"));
        let mut pv = sc.clone();
        pv.paper[0].metric = "ips".into();
        assert!(err(&pv).contains("variability_pct"));
        let mut pv = sc.clone();
        pv.paper[0].program = Some("nosuch".into());
        assert!(err(&pv).contains("no mix of program 'nosuch'"));
    }

    /// `--mixes` keeps the labelled mixes in the file's order and only the paper values
    /// about their programs (plus those about no program), and refuses an unknown label
    /// and a file of one mix. Fails if a mix or paper value of another program survives,
    /// or if a bad label is accepted.
    #[test]
    fn keep_mixes_keeps_those_labelled_and_their_paper_values() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let sc = parse(&dir.join("cachefair/fig6-8.toml")).unwrap();
        let mut kept = sc.clone();
        kept.keep_mixes(&["vortex-slow".into(), "gzip-fast".into()])
            .unwrap();
        let labels: Vec<&str> = kept.mixes.iter().map(|m| m.label.as_str()).collect();
        assert_eq!(labels, ["gzip-fast", "vortex-slow"]);
        let programs: Vec<Option<&str>> = kept.paper.iter().map(|p| p.program.as_deref()).collect();
        assert!(programs.contains(&Some("vortex")) && programs.contains(&Some("gzip")));
        assert!(
            programs
                .iter()
                .all(|p| matches!(p, None | Some("vortex") | Some("gzip"))),
            "{programs:?}"
        );
        assert!(kept.paper.len() < sc.paper.len());
        crate::papers::validate(&kept).unwrap();
        let e = sc
            .clone()
            .keep_mixes(&["vortex-slow".into(), "nosuch".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'nosuch'") && e.contains("vortex-fast"), "{e}");
        let mut one = parse(&dir.join("casc/fig5-7.toml")).unwrap();
        assert!(one.mixes.is_empty());
        let e = one.keep_mixes(&["x".into()]).unwrap_err().to_string();
        assert!(e.contains("single mix"), "{e}");
    }

    /// `pin_labels` without `pin`) is accepted.
    #[test]
    fn variants_add_threads_and_pin_groups_by_label() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/affinity/l2-mmp.toml");
        let sc = parse(&path).unwrap();
        let (_, art) = sc.per_mix().remove(0);
        let jobs = art.jobs().unwrap();
        let bound = jobs.iter().find(|j| j.variant == 0).unwrap();
        let groups: Vec<(String, Option<Pin>)> = bound
            .cfg
            .threads
            .iter()
            .map(|g| (g.name(), g.pin))
            .collect();
        assert_eq!(
            groups,
            [
                ("main".to_string(), Some(Pin::Spread)),
                ("interfering".to_string(), None)
            ]
        );
        let oblivious = jobs.iter().find(|j| j.variant == 1).unwrap();
        assert!(oblivious.cfg.threads.iter().all(|g| g.pin.is_none()));
        let err = |s: &Scenario| crate::papers::validate(s).unwrap_err().to_string();
        let mut bad = sc.clone();
        bad.variants[0].pin_labels = vec!["nosuch".into()];
        assert!(err(&bad).contains("names 'nosuch'"));
        let mut bad = sc.clone();
        bad.variants[0].pin = None;
        assert!(err(&bad).contains("pin_labels without pin"));
        // the §2 files add the base vectors to each mix's program
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/affinity/l1-t2000-q2.toml");
        let sc = parse(&path).unwrap();
        let (_, twolf) = sc.per_mix().pop().unwrap();
        let jobs = twolf.jobs().unwrap();
        let low = jobs
            .iter()
            .find(|j| sc.variants[j.variant].label == "low-l1i+l2")
            .unwrap();
        let names: Vec<String> = low.cfg.threads.iter().map(|g| g.name()).collect();
        assert_eq!(names, ["main", "bv-l1i", "bv-l2"]);
        assert_eq!(low.cfg.threads[2].cpus, Some(vec![4]));
    }

    /// fails if a reduced scenario does not say so or keeps a value it cannot measure.
    #[test]
    fn quick_reduces_and_says_so() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/casc/variants.toml");
        let mut sc = parse(&path).unwrap();
        sc.paper = vec![crate::scenario::PaperValue {
            what: "x".into(),
            source: "y".into(),
            metric: "ips".into(),
            variant: "casc".into(),
            against: None,
            change_pct: Some([1.0, 2.0]),
            value: None,
            llc_kb: Some(vec![48]),
            program: None,
        }];
        crate::papers::validate(&sc).unwrap();
        let q = sc.reduced();
        assert_eq!(q.seeds, vec![1, 2]);
        assert_eq!(q.sweep.as_ref().unwrap().llc_kb, vec![96, 768]);
        assert!(q.paper.is_empty(), "48 KB is not in the quick sweep");
        assert!(q.description.contains("Reduced run (--quick)"));
        // its plots' and headings' titles say so too
        assert!(q.name.ends_with(" (reduced)"), "{}", q.name);
        assert_eq!(q.duration_ms, 1300.0);
        // bad paper values and quick tables are named
        let mut bad = sc.clone();
        bad.paper[0].variant = "nosuch".into();
        assert!(crate::papers::validate(&bad)
            .unwrap_err()
            .to_string()
            .contains("no variant labelled 'nosuch'"));
        let mut bad = sc.clone();
        bad.paper[0].value = Some([1.0, 1.0]);
        assert!(crate::papers::validate(&bad)
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        let mut bad = sc.clone();
        bad.quick.as_mut().unwrap().llc_kb = Some(vec![100]);
        assert!(crate::papers::validate(&bad)
            .unwrap_err()
            .to_string()
            .contains("100 KiB"));
    }
}
