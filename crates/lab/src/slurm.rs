//! The Slurm executor: a scenario's pending runs as one Slurm job array, each array task
//! a batch of runs that `cachesched run-batch MANIFEST INDEX` simulates into the run
//! cache on a shared filesystem.
//!
//! The submitting command ([`run`], called by the runner for the runs the run cache
//! lacks) writes a **manifest** into the shared directory (`--slurm-dir`): the run
//! cache's directory, the model version, and per array task its runs (key, label,
//! complete configuration). It submits `sbatch --array=0-(T-1)` with each task's log in
//! `DIR/logs/JOB_TASK.out`, then either waits (polling `squeue`, printing progress as
//! runs land in the run cache; Ctrl-C cancels the job with `scancel`) or, with
//! `--detach`, returns at once. Before submitting, it reads the jobs of the directory
//! that Slurm still has queued or running: runs one of them makes into the same run
//! cache are not submitted again, that job is waited for instead. So the same command
//! made again waits for its jobs while they run, and once they have ended submits only
//! the runs that did not land.
//!
//! Runs are idempotent: the simulator is deterministic and an entry is written whole
//! and renamed, so a run made twice (a requeued task, two overlapping submissions)
//! stores the same bytes. Tasks size themselves by measured cost: each distinct machine
//! of the runs is simulated briefly on the submitting host ([`crate::plan`]'s
//! calibration), and the runs are split evenly into tasks of about
//! `--slurm-task-minutes` of worker time at the mean run's cost, a multiple of the
//! partition's CPUs in number, each at least a minute long, at most `MaxArraySize`
//! tasks (read from `scontrol show config`).
//! Real programs' traces are recorded on the submitting machine into the trace cache
//! when the scenario is loaded, before any array (a configuration names its trace by
//! path, so the trace cache must be shared too). Solo reference runs a mix's runs need
//! are an array of their own, after its runs ([`crate::runner::attach_solo_runs`]):
//! they land in the run cache under their solo keys and are then kept in the solo cache
//! here.

use crate::caches::runs;
use crate::error::{invalid, Error, Result, ResultExt};
use crate::interrupt::interrupt_flag;
use cachesched_core::hash::fnv1a;
use cachesched_sim::{SimConfig, Simulation, MODEL_VERSION};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How runs are made: on local workers, or as a Slurm job array.
#[derive(Debug, Clone, Default)]
pub enum Executor {
    /// A pool of local worker threads (`--jobs`).
    #[default]
    Local,
    /// Slurm job arrays.
    Slurm(SlurmSettings),
}

/// The settings of the Slurm executor (`--executor slurm`).
#[derive(Debug, Clone)]
pub struct SlurmSettings {
    /// The shared directory of manifests and task logs (`--slurm-dir`); every node must
    /// see it at the same path, as it must the run cache and the binary.
    pub dir: PathBuf,
    /// More arguments for `sbatch` (`--slurm-args`: partition, account, time limit).
    pub sbatch_args: Vec<String>,
    /// Runs per array task; `None`: sized by measured cost to about `task_minutes`.
    pub runs_per_task: Option<usize>,
    /// Worker minutes an array task aims at when sized by cost (1 to 1,440).
    pub task_minutes: f64,
    /// Return after submitting instead of waiting (`--detach`).
    pub detach: bool,
    /// How often `squeue` and the run cache are looked at while waiting.
    pub poll: Duration,
    /// The `cachesched` binary the tasks run (this one, by default).
    pub binary: PathBuf,
    /// Cores per node for `--plan`'s estimate of the wall time on 1 to 64 nodes.
    pub node_cores: usize,
}

/// The executor of this process, set once by the command line before any run.
static EXECUTOR: std::sync::OnceLock<Executor> = std::sync::OnceLock::new();

/// Sets the executor every later batch of runs uses (the first call wins; the command
/// line calls it once, before planning).
pub fn set_executor(e: Executor) {
    let _ = EXECUTOR.set(e);
}

/// The executor: the one set, else local.
pub fn executor() -> &'static Executor {
    EXECUTOR.get_or_init(Executor::default)
}

/// Set when a batch was submitted with `--detach`: the runs are made on the cluster,
/// not here, so the command stops without them.
static DETACHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a batch of this process was submitted detached (its runs are not here yet).
pub fn detached() -> bool {
    DETACHED.load(Ordering::SeqCst)
}

/// The manifest's format; a `run-batch` of another format refuses it.
const FORMAT: u32 = 1;

/// One run of a task.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRun {
    /// Its run cache key, 16 hex digits.
    pub key: String,
    /// How errors and logs name it.
    pub label: String,
    /// The complete configuration.
    pub cfg: SimConfig,
}

/// What the array's tasks run.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The manifest format's version (a task refuses a manifest of another version).
    pub format: u32,
    /// The model version of the submitting binary (a task's binary must match it, or
    /// its keys would differ).
    pub model_version: u32,
    /// The run cache every task stores into (absolute; shared by every node).
    pub runs_dir: PathBuf,
    /// Per array task, its runs.
    pub tasks: Vec<Vec<BatchRun>>,
}

/// A submitted array: the job id, written beside the manifest.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Submitted {
    job: String,
    tasks: usize,
    runs: usize,
}

/// Runs `cfgs` (keys `keys`, named by `label`) as a Slurm job array and waits for them
/// to land in the run cache. Runs that a job of this Slurm directory still queued or
/// running makes into the same run cache are not submitted again: that job is waited
/// for. `Ok(None)` when interrupted (the jobs are cancelled) or detached ([`detached`]
/// then says which). An error names every task whose runs did not land, with its state
/// and log.
pub fn run(
    s: &SlurmSettings,
    cfgs: &[&SimConfig],
    keys: &[u64],
    label: &dyn Fn(usize) -> String,
) -> Result<Option<()>> {
    let runs_dir = absolute(&runs::cache_dir()?)?;
    let dir = absolute(&s.dir)?;
    std::fs::create_dir_all(dir.join("logs"))
        .map_err(Error::io("cannot create the Slurm directory", &dir))?;
    let hex: Vec<String> = keys.iter().map(|k| format!("{k:016x}")).collect();
    // jobs still queued or running that make some of these runs
    let mut jobs: Vec<(String, Manifest)> = Vec::new();
    let mut covered = std::collections::HashSet::new();
    for (job, m) in active_jobs(&dir, &runs_dir)? {
        let theirs: std::collections::HashSet<&str> =
            m.tasks.iter().flatten().map(|r| r.key.as_str()).collect();
        let shared = hex.iter().filter(|k| theirs.contains(k.as_str())).count();
        if shared == 0 {
            continue;
        }
        println!(
            "Slurm job {job}, still queued or running, makes {shared} of these runs: waiting for it"
        );
        covered.extend(theirs.into_iter().map(str::to_string));
        jobs.push((job, m));
    }
    let todo: Vec<usize> = (0..cfgs.len())
        .filter(|&i| !covered.contains(&hex[i]))
        .collect();
    if !todo.is_empty() {
        let cfgs: Vec<&SimConfig> = todo.iter().map(|&i| cfgs[i]).collect();
        let keys: Vec<u64> = todo.iter().map(|&i| keys[i]).collect();
        let (job, m) = submit_runs(s, &dir, &runs_dir, &cfgs, &keys, &|i| label(todo[i]))?;
        jobs.push((job, m));
    }
    if s.detach {
        let ids: Vec<&str> = jobs.iter().map(|(j, _)| j.as_str()).collect();
        println!(
            "detached: Slurm job(s) {} make the runs; run the same command again to read \
             what has landed (it waits for the jobs while they run, and submits only the \
             runs that did not land), or `scancel {}` to stop them",
            ids.join(", "),
            ids.join(" ")
        );
        DETACHED.store(true, Ordering::SeqCst);
        return Ok(None);
    }
    for (job, m) in &jobs {
        if wait(s, job, m)?.is_none() {
            return Ok(None);
        }
    }
    Ok(Some(()))
}

/// The jobs of Slurm directory `dir` that Slurm still has queued or running and that
/// store into run cache `runs_dir`, each with its manifest.
fn active_jobs(dir: &Path, runs_dir: &Path) -> Result<Vec<(String, Manifest)>> {
    let queued = queued_jobs()?;
    let mut out = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(Error::io("cannot read the Slurm directory", dir))?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".job.json"))
        .collect();
    files.sort();
    for f in files {
        let Some(sub) = std::fs::read_to_string(&f)
            .ok()
            .and_then(|t| serde_json::from_str::<Submitted>(&t).ok())
        else {
            continue;
        };
        if !queued.contains(&sub.job) {
            continue;
        }
        let manifest = PathBuf::from(f.to_string_lossy().replace(".job.json", ".json"));
        let m = read_manifest(&manifest)?;
        if m.runs_dir == runs_dir {
            out.push((sub.job, m));
        }
    }
    Ok(out)
}

/// Writes the manifest of `cfgs` (keys `keys`) into `dir` and submits it; returns the
/// job id and the manifest. Tasks hold `--runs-per-task` runs, or are sized by
/// measured cost ([`size_tasks`]), within the cluster's MaxArraySize.
fn submit_runs(
    s: &SlurmSettings,
    dir: &Path,
    runs_dir: &Path,
    cfgs: &[&SimConfig],
    keys: &[u64],
    label: &dyn Fn(usize) -> String,
) -> Result<(String, Manifest)> {
    let id = fnv1a(
        format!(
            "{}\n{}",
            runs_dir.display(),
            keys.iter()
                .map(|k| format!("{k:016x}"))
                .collect::<Vec<_>>()
                .join(",")
        )
        .as_bytes(),
    );
    let manifest_path = dir.join(format!("batch-{id:016x}.json"));
    let tasks = match s.runs_per_task {
        Some(n) => cfgs.len().div_ceil(n.max(1)),
        None => size_tasks(cfgs, s.task_minutes, cluster_cpus(&s.sbatch_args))?,
    }
    .clamp(1, max_array_size());
    let tasks: Vec<Vec<BatchRun>> = split(cfgs.len(), tasks)
        .into_iter()
        .map(|r| {
            r.map(|i| BatchRun {
                key: format!("{:016x}", keys[i]),
                label: label(i),
                cfg: cfgs[i].clone(),
            })
            .collect()
        })
        .collect();
    let most = tasks.iter().map(Vec::len).max().unwrap_or(0);
    let manifest = Manifest {
        format: FORMAT,
        model_version: MODEL_VERSION,
        runs_dir: runs_dir.to_path_buf(),
        tasks,
    };
    crate::files::write_file(&manifest_path, &serde_json::to_string(&manifest)?)?;
    let job = submit(s, &manifest_path, manifest.tasks.len())?;
    crate::files::write_file(
        &manifest_path.with_extension("job.json"),
        &serde_json::to_string(&Submitted {
            job: job.clone(),
            tasks: manifest.tasks.len(),
            runs: cfgs.len(),
        })?,
    )?;
    println!(
        "submitted Slurm job {job}: {} runs in {} array task(s) of at most {most} \
         (manifest {}, logs {}/logs/{job}_TASK.out)",
        cfgs.len(),
        manifest.tasks.len(),
        manifest_path.display(),
        dir.display()
    );
    Ok((job, manifest))
}

/// `n` runs split into `tasks` consecutive ranges whose lengths differ by at most one.
fn split(n: usize, tasks: usize) -> Vec<std::ops::Range<usize>> {
    let tasks = tasks.clamp(1, n.max(1));
    let (base, extra) = (n / tasks, n % tasks);
    let mut at = 0;
    (0..tasks)
        .map(|t| {
            let len = base + usize::from(t < extra);
            at += len;
            at - len..at
        })
        .collect()
}

/// Polls until job `job` has left the queue, printing progress as runs land (and why
/// the job waits, while it does); cancels it on Ctrl-C. Then checks that every run of
/// `m` landed.
fn wait(s: &SlurmSettings, job: &str, m: &Manifest) -> Result<Option<()>> {
    let stop = interrupt_flag();
    let total: usize = m.tasks.iter().map(Vec::len).sum();
    let start = Instant::now();
    let mut last = (usize::MAX, Instant::now());
    // the runs not seen in the run cache yet: a landed entry is read once, not at
    // every look
    let mut pending: Vec<&BatchRun> = m.tasks.iter().flatten().collect();
    let mut failures = 0;
    loop {
        pending.retain(|r| !landed(&m.runs_dir, &r.key));
        let landed = total - pending.len();
        let active = match job_state(job) {
            Ok(a) => {
                failures = 0;
                a
            }
            // squeue failing now and then (slurmctld busy) does not end the wait
            Err(e) if failures < MAX_SQUEUE_FAILURES => {
                failures += 1;
                eprintln!("warning: {e}; looking again");
                Some(String::new())
            }
            Err(e) => return Err(e),
        };
        if landed != last.0 || last.1.elapsed() >= Duration::from_secs(60) || active.is_none() {
            let why = match active.as_deref() {
                Some(r) if !r.is_empty() && r != "None" => format!(" (pending: {r})"),
                _ => String::new(),
            };
            eprintln!(
                "slurm job {job}: {landed}/{total} runs landed, {} elapsed{why}",
                crate::runner::clock(start.elapsed().as_secs_f64())
            );
            last = (landed, Instant::now());
        }
        if active.is_none() {
            break;
        }
        if stop.load(Ordering::SeqCst) {
            let said = match Command::new("scancel").arg(job).status() {
                Ok(st) if st.success() => format!("cancelled Slurm job {job} (scancel)"),
                _ => format!("scancel {job} failed: cancel it by hand"),
            };
            eprintln!(
                "interrupted: {said}; the {landed} runs that landed are kept in the run cache"
            );
            return Ok(None);
        }
        // short steps, so that Ctrl-C is answered promptly
        let until = Instant::now() + s.poll;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    check_landed(s, job, m)
}

/// Failures of `squeue` in a row that end a wait with an error.
const MAX_SQUEUE_FAILURES: u32 = 10;

/// Whether run `key` (16 hex digits) is in run cache `dir`, whole and under its key.
fn landed(dir: &Path, key: &str) -> bool {
    u64::from_str_radix(key, 16)
        .ok()
        .and_then(|k| runs::load_in(dir, k))
        .is_some()
}

/// After the job: an error naming every task with runs that did not land.
fn check_landed(s: &SlurmSettings, job: &str, m: &Manifest) -> Result<Option<()>> {
    let states = task_states(job);
    let mut lines = Vec::new();
    let mut missing = 0;
    for (i, task) in m.tasks.iter().enumerate() {
        let lost: Vec<&BatchRun> = task
            .iter()
            .filter(|r| !landed(&m.runs_dir, &r.key))
            .collect();
        if lost.is_empty() {
            continue;
        }
        missing += lost.len();
        lines.push(format!(
            "  task {i} ({}): {} of its {} runs did not land, first {}; log {}",
            states
                .get(&i)
                .map(String::as_str)
                .unwrap_or("state unknown"),
            lost.len(),
            task.len(),
            lost[0].label,
            s.dir.join("logs").join(format!("{job}_{i}.out")).display()
        ));
    }
    if missing == 0 {
        return Ok(Some(()));
    }
    Err(Error::RunsNotLanded {
        job: job.to_string(),
        missing,
        tasks: lines.join("\n"),
    })
}

/// The state of each array task Slurm still remembers (`scontrol show job`: kept for
/// MinJobAge after the job ends), by task index.
fn task_states(job: &str) -> std::collections::HashMap<usize, String> {
    let mut out = std::collections::HashMap::new();
    let Ok(o) = Command::new("scontrol")
        .args(["-o", "show", "job", job])
        .output()
    else {
        return out;
    };
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(str::to_string)
        };
        if let (Some(t), Some(st)) = (field("ArrayTaskId="), field("JobState=")) {
            if let Ok(i) = t.parse() {
                out.insert(i, st);
            }
        }
    }
    out
}

/// The ids of every job Slurm has queued or running (of an array, its base id), from
/// one `squeue` rather than one per job a Slurm directory has ever held.
fn queued_jobs() -> Result<std::collections::HashSet<String>> {
    let o = squeue(&["-h", "-o", "%F"])?;
    if !o.status.success() {
        return Err(Error::Tool(format!(
            "squeue failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// `squeue ARGS`, its output.
fn squeue(args: &[&str]) -> Result<std::process::Output> {
    Command::new("squeue")
        .args(args)
        .output()
        .map_err(|source| Error::Spawn {
            what: "cannot run squeue: is Slurm's client installed and on PATH?".into(),
            source,
        })
}

/// Job `job` as `squeue` sees it: `None` once it has left the queue, else the reason
/// a pending task of it waits (`squeue`'s `%r`; empty or `None` while running). An
/// error when `squeue` fails for another reason than not knowing the job.
fn job_state(job: &str) -> Result<Option<String>> {
    let o = squeue(&["-h", "-j", job, "-o", "%T %r"])?;
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        if err.contains("Invalid job id") {
            return Ok(None);
        }
        return Err(Error::Tool(format!(
            "squeue -j {job} failed ({}): {}",
            o.status,
            err.trim()
        )));
    }
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines().filter(|l| !l.trim().is_empty()).peekable();
    if lines.peek().is_none() {
        return Ok(None);
    }
    // the reason of a pending task, if any
    Ok(Some(
        lines
            .filter_map(|l| l.split_once(' '))
            .find(|(state, _)| *state == "PENDING")
            .map(|(_, r)| r.trim().to_string())
            .unwrap_or_default(),
    ))
}

/// Submits the array of `tasks` tasks of `manifest`; returns the job id.
fn submit(s: &SlurmSettings, manifest: &Path, tasks: usize) -> Result<String> {
    let quote = |p: &Path| -> Result<String> {
        let t = p.to_string_lossy();
        if t.contains('\'') {
            return Err(invalid!(
                "'{t}': a path with a single quote cannot be passed to sbatch; use another directory"
            ));
        }
        Ok(format!("'{t}'"))
    };
    let binary = absolute(&s.binary)?;
    let wrap = format!(
        "exec {} run-batch {} \"$SLURM_ARRAY_TASK_ID\"",
        quote(&binary)?,
        quote(manifest)?
    );
    let logs = absolute(&s.dir)?.join("logs").join("%A_%a.out");
    let out = Command::new("sbatch")
        .arg("--parsable")
        .arg(format!("--array=0-{}", tasks - 1))
        .arg("--job-name=cachesched")
        .arg(format!("--output={}", logs.display()))
        .args(&s.sbatch_args)
        .arg("--wrap")
        .arg(&wrap)
        .output()
        .map_err(|source| Error::Spawn {
            what: "cannot run sbatch: is Slurm's client installed and on PATH?".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "sbatch refused the array ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    // `--parsable` prints `JOBID` or `JOBID;CLUSTER`
    let text = String::from_utf8_lossy(&out.stdout);
    let job = text.trim().split(';').next().unwrap_or("").to_string();
    if job.is_empty() || !job.chars().all(|c| c.is_ascii_digit()) {
        return Err(Error::Tool(format!(
            "sbatch printed '{}', not a job id",
            text.trim()
        )));
    }
    Ok(job)
}

/// The cluster's MaxArraySize (`scontrol show config`), else Slurm's default, 1001.
fn max_array_size() -> usize {
    Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout).lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "MaxArraySize")
                    .then(|| v.trim().parse::<usize>().ok())
                    .flatten()
            })
        })
        .unwrap_or(1001)
        .max(1)
}

/// The CPUs that can run tasks (allocated or idle) in the partition the array goes
/// to (`sinfo -o "%C %P"`: the one named by `--partition`/`-p` in `sbatch_args` or by
/// `SBATCH_PARTITION`, else the default one), or `None` if Slurm does not say (or
/// several partitions are named).
fn cluster_cpus(sbatch_args: &[String]) -> Option<usize> {
    let from_args = sbatch_args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--partition=")
            .or_else(|| a.strip_prefix("-p").filter(|p| !p.is_empty()))
            .map(str::to_string)
            .or_else(|| {
                (a == "--partition" || a == "-p")
                    .then(|| sbatch_args.get(i + 1).cloned())
                    .flatten()
            })
    });
    let named = from_args.or_else(|| std::env::var("SBATCH_PARTITION").ok());
    let o = Command::new("sinfo")
        .args(["-h", "-o", "%C %P"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&o.stdout).lines().find_map(|l| {
        let (cpus, part) = l.trim().split_once(' ')?;
        let chosen = match &named {
            Some(n) => part.trim_end_matches('*') == n,
            None => part.ends_with('*'),
        };
        // allocated/idle/other/total: those that can run tasks (not down or drained)
        let n: Vec<usize> = cpus.split('/').filter_map(|x| x.parse().ok()).collect();
        (chosen && n.len() == 4).then(|| n[0] + n[1])
    })
}

/// The number of array tasks for `cfgs`: tasks of about `minutes` of worker time (the
/// mean run's worker-seconds from each machine's rate measured on this host), as many
/// as a multiple of the partition's `cpus` so that no CPU idles at the end of a batch
/// while another works through a last task, and at least `cpus` where the runs allow
/// it; but no task shorter than a minute, in which Slurm's seconds of dispatch per task
/// would matter (docs/cluster.md).
fn size_tasks(cfgs: &[&SimConfig], minutes: f64, cpus: Option<usize>) -> Result<usize> {
    let mut rates = std::collections::BTreeMap::new();
    let mut total = 0.0;
    for c in cfgs {
        let m = crate::plan::machine_of(c)?;
        if !rates.contains_key(&m) {
            let r = crate::plan::calibrate(c).within(|| format!("calibrating {m}"))?;
            rates.insert(m.clone(), r);
        }
        total += rates[&m].worker_s(1, c.duration_ms / 1e3);
    }
    let mean = (total / cfgs.len().max(1) as f64).max(1e-3);
    let n = task_count(cfgs.len(), mean, minutes, cpus);
    println!(
        "Slurm tasks sized at {mean:.2} worker-s per run (measured on this host){}: {n} task(s)",
        cpus.map(|c| format!(" for {c} CPUs")).unwrap_or_default()
    );
    Ok(n)
}

/// The number of tasks for `runs` runs of `mean` worker-seconds each, tasks of about
/// `minutes`, on `cpus` CPUs (see [`size_tasks`]); the runs are then [`split`] evenly.
pub(crate) fn task_count(runs: usize, mean: f64, minutes: f64, cpus: Option<usize>) -> usize {
    let runs = runs.max(1);
    let mean = mean.max(1e-3);
    let by_cost = ((minutes * 60.0 / mean).floor() as usize).max(1);
    let mut tasks = runs.div_ceil(by_cost);
    if let Some(c) = cpus.filter(|&c| c > 0) {
        tasks = tasks.max(c).div_ceil(c) * c;
    }
    // runs a task needs to last a minute (never more than the cost size)
    let floor = ((60.0 / mean).ceil() as usize).clamp(1, by_cost);
    tasks.min(runs / floor).clamp(1, runs)
}

/// `p` made absolute against the current directory.
fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).map_err(Error::io("cannot make an absolute path of", p))
}

/// Reads a manifest, refusing one of another format or model version.
pub fn read_manifest(path: &Path) -> Result<Manifest> {
    let text =
        std::fs::read_to_string(path).map_err(Error::io("cannot read the manifest", path))?;
    let m: Manifest = serde_json::from_str(&text).map_err(|e| {
        invalid!(
            "'{}' is not a cachesched batch manifest: {e}",
            path.display()
        )
    })?;
    if m.format != FORMAT {
        return Err(invalid!(
            "'{}' has manifest format {}, this binary reads {FORMAT}: run the binary that submitted it",
            path.display(),
            m.format
        ));
    }
    if m.model_version != MODEL_VERSION {
        return Err(invalid!(
            "'{}' was submitted by a binary of model version {}, this one is {MODEL_VERSION}: \
             give the tasks the submitting binary (its runs' keys depend on the version)",
            path.display(),
            m.model_version
        ));
    }
    Ok(m)
}

/// `cachesched run-batch MANIFEST INDEX`: makes the runs of array task `index` that the
/// run cache lacks and stores each as it finishes; returns (made, already there). A run
/// whose configuration does not hash to its key is refused (a manifest edited or made by
/// another build). Stops between and within runs on SIGTERM (Slurm's cancel and time
/// limit), keeping the runs made.
pub fn run_batch(manifest: &Path, index: usize) -> Result<(usize, usize)> {
    let m = read_manifest(manifest)?;
    let started = Instant::now();
    let Some(task) = m.tasks.get(index) else {
        return Err(invalid!(
            "'{}' has {} task(s): no task {index}",
            manifest.display(),
            m.tasks.len()
        ));
    };
    eprintln!(
        "task {index}: {} run(s) of {}",
        task.len(),
        manifest.display()
    );
    let stop = interrupt_flag();
    let (mut made, mut there) = (0, 0);
    for r in task {
        let k = crate::caches::config_key(&r.cfg)?;
        if format!("{k:016x}") != r.key {
            return Err(invalid!(
                "{}: its configuration has key {k:016x}, the manifest says {}: the manifest was \
                 changed or made by another build, or a trace it replays is not the \
                 recording the submitting host keyed (a key takes in the trace's bytes)",
                r.label,
                r.key
            ));
        }
        if runs::load_in(&m.runs_dir, k).is_some() {
            there += 1;
            continue;
        }
        if stop.load(Ordering::SeqCst) {
            return Err(Error::BatchStopped { made });
        }
        let t0 = Instant::now();
        let res = Simulation::new(&r.cfg, cachesched_sim::build_chain(&r.cfg))
            .and_then(|sim| sim.run(&mut |_| !stop.load(Ordering::SeqCst)))
            .within(|| format!("{} failed", r.label))?;
        if stop.load(Ordering::SeqCst) {
            return Err(Error::BatchStopped { made });
        }
        runs::store_in(&m.runs_dir, k, &res)?;
        made += 1;
        eprintln!("{}: made in {:.3} s", r.label, t0.elapsed().as_secs_f64());
    }
    eprintln!(
        "task {index}: {made} run(s) made, {there} already in the run cache, {:.3} s in all",
        started.elapsed().as_secs_f64()
    );
    Ok((made, there))
}

#[cfg(test)]
mod tests {
    use super::{split, task_count};

    /// Fails if tasks are not sized to the minutes asked, if the CPUs are left idle
    /// by too few or uneven tasks, or if tasks shorter than a minute are made.
    #[test]
    fn tasks_fill_the_cpus_evenly_and_last_at_least_a_minute() {
        let sizes = |runs, mean, cpus| -> Vec<usize> {
            split(runs, task_count(runs, mean, 10.0, cpus))
                .into_iter()
                .map(|r| r.len())
                .collect()
        };
        // 16 runs of 78 s on 2 CPUs: 7 by cost would be tasks of 7, 7, 2; 4 even ones
        assert_eq!(sizes(16, 78.0, Some(2)), [4, 4, 4, 4]);
        // no CPU count known: by cost alone, 3 tasks
        assert_eq!(sizes(16, 78.0, None), [6, 5, 5]);
        // a large cluster: one run per task rather than tasks fewer than the CPUs
        assert_eq!(sizes(1000, 60.0, Some(2048)), vec![1; 1000]);
        // runs of a third of a second: one task, not tasks of seconds
        assert_eq!(sizes(8, 0.3, Some(2)), [8]);
        // 2,000 runs of 6 s on 64 CPUs: 64 tasks of 31 or 32, not 20 of 100
        let s = sizes(2000, 6.0, Some(64));
        assert_eq!((s.len(), s.iter().sum::<usize>()), (64, 2000));
        assert!(s.iter().all(|&n| n == 31 || n == 32), "{s:?}");
        // ... and on 4,096 CPUs: 200 tasks of a minute (10 runs), not 2,000 of 6 s
        assert_eq!(sizes(2000, 6.0, Some(4096)), vec![10; 200]);
        // 130 runs of 5 min on 64 CPUs: 128 tasks (two rounds of 64), not 65 of 2
        let s = sizes(130, 300.0, Some(64));
        assert_eq!((s.len(), s.iter().filter(|&&n| n == 2).count()), (128, 2));
        // 100 runs of 30 min: each alone, longer than the 10 minutes asked
        assert_eq!(sizes(100, 1800.0, Some(8)), vec![1; 100]);
    }
}
