//! The runner: a scenario's runs on a local pool of workers, each read from the run
//! cache when it holds it and stored there when it finishes; solo reference runs; the
//! progress line; `--jobs`.

use crate::error::{chain, Result, ResultExt};
use crate::interrupt::interrupt_flag;
use crate::scenario::{Job, Planned, Scenario};
use cachesched_sim::{RunResult, SimConfig, SimError, Simulation};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// How errors and progress name run `j` of scenario `sc`.
pub fn run_label(sc: &Scenario, j: &Job) -> String {
    format!(
        "run '{}' of {} seed {} llc {:?} KiB",
        sc.variants[j.variant].label, sc.name, j.seed, j.llc_kb
    )
}

/// Said when Ctrl-C stops a batch of runs.
pub const INTERRUPTED: &str =
    "interrupted; nothing more is written (finished runs are kept in the run cache)";

/// Said when a batch of runs stops the command before its results: Ctrl-C, or a
/// detached Slurm submission.
pub fn halt_message() -> &'static str {
    if crate::slurm::detached() {
        "nothing more is written until the Slurm job's runs have landed"
    } else {
        INTERRUPTED
    }
}

/// The exit code of a command that a batch of runs stopped: 0 after a detached Slurm
/// submission (the command did what was asked), else 130 (interrupted).
pub fn halt_code() -> i32 {
    if crate::slurm::detached() {
        0
    } else {
        130
    }
}

/// The most parallel runs `--jobs` may ask for: each worker holds a simulation (tens
/// of MB for the largest machines), and no host of this project has more cores.
pub const MAX_JOBS: usize = 1024;

/// Parses `--jobs`: 1 to [`MAX_JOBS`].
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of parallel runs: give 1 to {MAX_JOBS}"))?;
    if !(1..=MAX_JOBS).contains(&n) {
        return Err(format!("{n} parallel runs: give 1 to {MAX_JOBS}"));
    }
    Ok(n)
}

/// Workers for `n` runs: `jobs`, else every CPU, at least one and at most `n`.
pub fn worker_count(jobs: Option<usize>, n: usize) -> usize {
    jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
    .clamp(1, n.max(1))
}

/// The results of `cfgs`: those the run cache holds (an interrupted batch, a shared
/// baseline), and the others run on `workers` workers in one pool, each kept in the
/// run cache as it finishes (`label` names a run in errors); configurations that
/// repeat (the same key) run once. `None` if interrupted.
pub fn cached_or_run(
    cfgs: &[&SimConfig],
    label: &(dyn Fn(usize) -> String + Sync),
    workers: usize,
) -> Result<Option<Vec<RunResult>>> {
    let keys = cfgs
        .iter()
        .map(|c| crate::caches::config_key(c))
        .collect::<Result<Vec<u64>>>()?;
    let mut found: Vec<Option<RunResult>> = keys
        .iter()
        .map(|&k| crate::caches::runs::load(k))
        .collect::<Result<_>>()?;
    // the first of each key the cache lacks
    let mut seen = std::collections::HashSet::new();
    let missing: Vec<usize> = (0..cfgs.len())
        .filter(|&i| found[i].is_none() && seen.insert(keys[i]))
        .collect();
    let lacking = found.iter().filter(|r| r.is_none()).count();
    if missing.len() < cfgs.len() {
        let same = lacking - missing.len();
        println!(
            "{} of {} runs read from the run cache ({}), {}{} to run",
            cfgs.len() - lacking,
            cfgs.len(),
            crate::caches::runs::cache_dir()?.display(),
            if same > 0 {
                format!("{same} the same as another, ")
            } else {
                String::new()
            },
            missing.len()
        );
    }
    let to_run: Vec<&SimConfig> = missing.iter().map(|&i| cfgs[i]).collect();
    let warned = std::sync::Once::new();
    let keep = |m: usize, r: &RunResult| {
        if let Err(e) = crate::caches::runs::store(keys[missing[m]], r) {
            warned.call_once(|| {
                eprintln!("warning: runs are not kept in the run cache: {}", chain(&e))
            });
        }
    };
    if !to_run.is_empty() {
        let ran = match crate::slurm::executor() {
            crate::slurm::Executor::Local => {
                let Some(ran) = run_configs(&to_run, &|m| label(missing[m]), workers, &keep)?
                else {
                    return Ok(None);
                };
                ran
            }
            crate::slurm::Executor::Slurm(s) => {
                let mkeys: Vec<u64> = missing.iter().map(|&m| keys[m]).collect();
                if crate::slurm::run(s, &to_run, &mkeys, &|m| label(missing[m]))?.is_none() {
                    return Ok(None);
                }
                mkeys
                    .iter()
                    .map(|&k| {
                        crate::caches::runs::load(k)?.ok_or_else(|| {
                            crate::error::Error::Tool(format!(
                                "run {k:016x} landed and then left the run cache"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?
            }
        };
        let made: std::collections::HashMap<u64, RunResult> =
            missing.iter().map(|&m| keys[m]).zip(ran).collect();
        for (f, k) in found.iter_mut().zip(&keys) {
            if f.is_none() {
                *f = made.get(k).cloned();
            }
        }
    }
    Ok(Some(
        found
            .into_iter()
            .map(|r| r.expect("every run found or made"))
            .collect(),
    ))
}

/// Runs every run of a file's `planned` mixes that the run cache lacks, on `jobs`
/// workers (default: all CPUs) in one pool, keeping each in the run cache: the mixes
/// then read their runs from it, and no worker idles at the end of one mix while the
/// next mix's runs wait. Where runs cannot be kept (the run cache is not writable), the
/// mixes run one after the other instead, as they would without this. `None` if
/// interrupted (said on stderr; finished runs are kept).
pub fn fill_run_cache(planned: &[Planned], jobs: Option<usize>) -> Result<Option<()>> {
    if planned.len() < 2 {
        return Ok(Some(()));
    }
    if let Err(e) = crate::caches::runs::check_writable() {
        eprintln!("warning: the mixes run one after the other: {}", chain(&e));
        return Ok(Some(()));
    }
    let all: Vec<(&Planned, &Job)> = planned
        .iter()
        .flat_map(|p| p.jobs.iter().map(move |j| (p, j)))
        .collect();
    let cfgs: Vec<&SimConfig> = all.iter().map(|(_, j)| &j.cfg).collect();
    let label = |i: usize| run_label(&all[i].0.sc, all[i].1);
    let workers = worker_count(jobs, cfgs.len());
    println!(
        "{} runs of {} mixes on {workers} worker(s), into the run cache",
        cfgs.len(),
        planned.len()
    );
    announce_solo_runs(&planned[0].sc, &cfgs)?;
    let done = cached_or_run(&cfgs, &label, workers)?.map(|_| ());
    if done.is_none() {
        eprintln!("{}", halt_message());
    }
    Ok(done)
}

/// Says, before runs start, how many solo reference runs will follow them (`cfgs`, runs
/// of scenario `sc`; nothing if it needs none): the progress line counts only the runs.
pub fn announce_solo_runs(sc: &Scenario, cfgs: &[&SimConfig]) -> Result<()> {
    if !sc.wants_solo() {
        return Ok(());
    }
    let (distinct, _) = crate::caches::solo::plan(cfgs)?;
    let cached = crate::caches::solo::cached(distinct.keys().copied())?.len();
    println!(
        "then {} solo reference run(s) of its threads' programs ({cached} of {} cached), \
         after the runs the progress line counts",
        distinct.len() - cached,
        distinct.len()
    );
    Ok(())
}

/// Gives every thread of `runs` (the results of `cfgs`) its solo reference: cached
/// ones are read, the others run on `workers` (or, with the Slurm executor, as a job
/// array into the run cache) and cached (see [`crate::caches::solo`]).
/// `None` if interrupted.
pub fn attach_solo_runs(
    cfgs: &[&SimConfig],
    runs: &mut [RunResult],
    workers: usize,
) -> Result<Option<()>> {
    let (distinct, keys) = crate::caches::solo::plan(cfgs)?;
    let mut refs = crate::caches::solo::cached(distinct.keys().copied())?;
    let missing: Vec<(u64, &SimConfig)> = distinct
        .iter()
        .filter(|(k, _)| !refs.contains_key(k))
        .map(|(k, c)| (*k, c))
        .collect();
    println!(
        "solo references: {} needed, {} cached, {} to run (cache {})",
        distinct.len(),
        refs.len(),
        missing.len(),
        crate::caches::solo::cache_dir()?.display()
    );
    if !missing.is_empty() {
        let solo_cfgs: Vec<&SimConfig> = missing.iter().map(|(_, c)| *c).collect();
        let label = |i: usize| {
            let c = solo_cfgs[i];
            format!("solo run of '{}' seed {}", c.threads[0].name(), c.seed)
        };
        let workers = workers.min(missing.len());
        // on a cluster, solo runs are an array of their own like the runs (they land
        // in the run cache, under the same keys as in the solo cache)
        let solo_runs = match crate::slurm::executor() {
            crate::slurm::Executor::Local => run_configs(&solo_cfgs, &label, workers, &|_, _| {})?,
            crate::slurm::Executor::Slurm(_) => cached_or_run(&solo_cfgs, &label, workers)?,
        };
        let Some(solo_runs) = solo_runs else {
            return Ok(None);
        };
        for ((k, c), r) in missing.iter().zip(&solo_runs) {
            refs.insert(*k, crate::caches::solo::store(*k, c, r)?);
        }
    }
    for ((cfg, ks), r) in cfgs.iter().zip(&keys).zip(runs.iter_mut()) {
        crate::caches::solo::attach(cfg, ks, &refs, r);
    }
    Ok(Some(()))
}

/// Runs `cfgs` on `workers` threads with a progress bar; `label(i)` names run `i` in
/// errors, and `on_done(i, result)` is called as soon as run `i` has finished (not for
/// a run cut short by Ctrl-C). `None` if interrupted.
pub fn run_configs(
    cfgs: &[&SimConfig],
    label: &(dyn Fn(usize) -> String + Sync),
    workers: usize,
    on_done: &(dyn Fn(usize, &RunResult) + Sync),
) -> Result<Option<Vec<RunResult>>> {
    let stop = interrupt_flag();
    let progress = Progress::new(cfgs.len());
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunResult, SimError>>>> =
        Mutex::new((0..cfgs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= cfgs.len() || stop.load(Ordering::SeqCst) {
                    break;
                }
                let cfg = cfgs[i];
                let mut done = 0u64;
                let res = Simulation::new(cfg, cachesched_sim::build_chain(cfg)).and_then(|sim| {
                    sim.run(&mut |f| {
                        let p = (f * 100.0) as u64;
                        if p > done {
                            progress.advance(p - done, false);
                            done = p;
                        }
                        !stop.load(Ordering::SeqCst)
                    })
                });
                progress.advance(100 - done.min(100), true);
                if let Ok(r) = &res {
                    if !stop.load(Ordering::SeqCst) {
                        on_done(i, r);
                    }
                }
                results.lock().expect("no panics while holding the lock")[i] = Some(res);
            });
        }
    });
    progress.finish();
    if stop.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let mut runs = Vec::new();
    for (i, r) in results
        .into_inner()
        .expect("workers joined")
        .into_iter()
        .enumerate()
    {
        let r = r
            .expect("every job ran")
            .within(|| format!("{} failed", label(i)))?;
        runs.push(r);
    }
    Ok(Some(runs))
}

/// Progress of a batch of runs on stderr: a bar that counts runs on a terminal, and
/// otherwise a line every 10 seconds or more (runs done of all, elapsed, an estimate
/// of what is left), so that logs and pipes show that work goes on.
struct Progress {
    bar: indicatif::ProgressBar,
    runs: usize,
    tty: bool,
    start: std::time::Instant,
    /// Run-percent done, runs done, and when the last line was printed.
    state: Mutex<(u64, usize, std::time::Instant)>,
}

impl Progress {
    fn new(runs: usize) -> Progress {
        use std::io::IsTerminal;
        let tty = std::io::stderr().is_terminal();
        let bar = if tty {
            indicatif::ProgressBar::new(runs as u64 * 100)
        } else {
            indicatif::ProgressBar::hidden()
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {msg} [{elapsed} elapsed, eta {eta}]",
            )
            .expect("valid template"),
        );
        bar.set_message(format!("0/{runs} runs"));
        let now = std::time::Instant::now();
        Progress {
            bar,
            runs,
            tty,
            start: now,
            state: Mutex::new((0, 0, now)),
        }
    }

    /// `percent` more of a run done; `finished`: a run ended.
    fn advance(&self, percent: u64, finished: bool) {
        let mut st = self.state.lock().expect("no panics while holding the lock");
        st.0 += percent;
        st.1 += finished as usize;
        self.bar.inc(percent);
        if finished {
            self.bar.set_message(format!("{}/{} runs", st.1, self.runs));
        }
        let now = std::time::Instant::now();
        let last_run = finished && st.1 == self.runs;
        if !self.tty && (now.duration_since(st.2).as_secs() >= 10 || last_run) {
            st.2 = now;
            let elapsed = now.duration_since(self.start).as_secs_f64();
            let fraction = st.0 as f64 / (self.runs as f64 * 100.0);
            let left = if fraction > 0.0 {
                format!(
                    ", about {} left",
                    clock(elapsed * (1.0 - fraction) / fraction)
                )
            } else {
                String::new()
            };
            eprintln!(
                "progress: {}/{} runs done ({:.0}%), {} elapsed{left}",
                st.1,
                self.runs,
                fraction * 100.0,
                clock(elapsed)
            );
        }
    }

    /// Clears the bar.
    fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// Seconds as `1m05s` (or `42s`).
pub(crate) fn clock(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
