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
//! `--detach`, returns at once. The manifest is named by the hash of its runs, so the
//! same command made again finds its job: while the job is still queued or running it
//! waits for it (or says so, detached) instead of submitting again; once it has ended,
//! only the runs that did not land are submitted.
//!
//! Runs are idempotent: the simulator is deterministic and an entry is written whole
//! and renamed, so a run made twice (a requeued task, two overlapping submissions)
//! stores the same bytes. Tasks size themselves by measured cost: each distinct machine
//! of the runs is simulated briefly on the submitting host ([`crate::plan`]'s
//! calibration), and runs are packed into tasks of about `--slurm-task-minutes` of
//! worker time, at most `MaxArraySize` tasks (read from `scontrol show config`).
//! Solo reference runs and traces are made on the submitting machine, after and before
//! the array, as locally.

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
/// to land in the run cache. `Ok(None)` when interrupted (the job is cancelled) or
/// detached ([`detached`] then says which). An error names every task whose runs did not
/// land, with its state and log.
pub fn run(
    s: &SlurmSettings,
    cfgs: &[&SimConfig],
    keys: &[u64],
    label: &dyn Fn(usize) -> String,
) -> Result<Option<()>> {
    let runs_dir = absolute(&runs::cache_dir()?)?;
    std::fs::create_dir_all(s.dir.join("logs"))
        .map_err(Error::io("cannot create the Slurm directory", &s.dir))?;
    let id = fnv1a(
        keys.iter()
            .map(|k| format!("{k:016x}"))
            .collect::<Vec<_>>()
            .join(",")
            .as_bytes(),
    );
    let manifest_path = absolute(&s.dir)?.join(format!("batch-{id:016x}.json"));
    let job_path = manifest_path.with_extension("job.json");
    // the same runs submitted before: wait for that job while Slurm still has it
    let earlier: Option<Submitted> = std::fs::read_to_string(&job_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let manifest: Manifest;
    let job = match earlier.filter(|e| job_active(&e.job)) {
        Some(e) => {
            println!(
                "Slurm job {} for these {} runs is still queued or running: waiting for it",
                e.job, e.runs
            );
            manifest = read_manifest(&manifest_path)?;
            e.job
        }
        None => {
            let per_task = match s.runs_per_task {
                Some(n) => n,
                None => size_tasks(cfgs, s.task_minutes)?,
            };
            let max_tasks = max_array_size();
            let per_task = per_task.max(cfgs.len().div_ceil(max_tasks)).max(1);
            let tasks: Vec<Vec<BatchRun>> = (0..cfgs.len())
                .collect::<Vec<_>>()
                .chunks(per_task)
                .map(|c| {
                    c.iter()
                        .map(|&i| BatchRun {
                            key: format!("{:016x}", keys[i]),
                            label: label(i),
                            cfg: cfgs[i].clone(),
                        })
                        .collect()
                })
                .collect();
            manifest = Manifest {
                format: FORMAT,
                model_version: MODEL_VERSION,
                runs_dir: runs_dir.clone(),
                tasks,
            };
            crate::files::write_file(&manifest_path, &serde_json::to_string(&manifest)?)?;
            let job = submit(s, &manifest_path, manifest.tasks.len())?;
            crate::files::write_file(
                &job_path,
                &serde_json::to_string(&Submitted {
                    job: job.clone(),
                    tasks: manifest.tasks.len(),
                    runs: cfgs.len(),
                })?,
            )?;
            println!(
                "submitted Slurm job {job}: {} runs in {} array task(s) of at most {per_task} \
                 (manifest {}, logs {}/logs/{job}_TASK.out)",
                cfgs.len(),
                manifest.tasks.len(),
                manifest_path.display(),
                s.dir.display()
            );
            job
        }
    };
    if s.detach {
        println!(
            "detached: Slurm job {job} makes the runs; run the same command again to read \
             what has landed (it waits for the job while it runs, and submits only the runs \
             that did not land), or `scancel {job}` to stop it"
        );
        DETACHED.store(true, Ordering::SeqCst);
        return Ok(None);
    }
    wait(s, &job, &manifest)
}

/// Polls until job `job` has left the queue, printing progress as runs land; cancels it
/// on Ctrl-C. Then checks that every run of `m` landed.
fn wait(s: &SlurmSettings, job: &str, m: &Manifest) -> Result<Option<()>> {
    let stop = interrupt_flag();
    let total: usize = m.tasks.iter().map(Vec::len).sum();
    let start = Instant::now();
    let mut last = (usize::MAX, Instant::now());
    // the runs not seen in the run cache yet: a landed entry is read once, not at
    // every look
    let mut pending: Vec<&BatchRun> = m.tasks.iter().flatten().collect();
    loop {
        pending.retain(|r| !landed(&m.runs_dir, &r.key));
        let landed = total - pending.len();
        let active = job_active(job);
        if landed != last.0 || last.1.elapsed() >= Duration::from_secs(60) || !active {
            eprintln!(
                "slurm job {job}: {landed}/{total} runs landed, {} elapsed",
                crate::runner::clock(start.elapsed().as_secs_f64())
            );
            last = (landed, Instant::now());
        }
        if !active {
            break;
        }
        if stop.load(Ordering::SeqCst) {
            let _ = Command::new("scancel").arg(job).status();
            eprintln!(
                "interrupted: cancelled Slurm job {job} (scancel); the {landed} runs that landed are kept in the run cache"
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
    Err(Error::Tool(format!(
        "{missing} run(s) of Slurm job {job} did not land in the run cache:\n{}\n\
         run the same command again to submit only those",
        lines.join("\n")
    )))
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

/// Whether Slurm still has job `job` queued or running (any of its array tasks).
fn job_active(job: &str) -> bool {
    Command::new("squeue")
        .args(["-h", "-j", job, "-o", "%T"])
        .output()
        .map(|o| o.status.success() && !String::from_utf8_lossy(&o.stdout).trim().is_empty())
        .unwrap_or(false)
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

/// Runs per task so that a task is about `minutes` of worker time: the mean run's
/// worker-seconds from each machine's measured rate on this host.
fn size_tasks(cfgs: &[&SimConfig], minutes: f64) -> Result<usize> {
    let mut rates = std::collections::BTreeMap::new();
    let mut total = 0.0;
    for c in cfgs {
        let m = crate::plan::machine_of(c)?;
        if !rates.contains_key(&m) {
            let r = crate::plan::calibrate(c).within(|| format!("calibrating {m}"))?;
            rates.insert(m.clone(), r);
        }
        total += rates[&m] * c.duration_ms / 1e3;
    }
    let mean = total / cfgs.len().max(1) as f64;
    let n = ((minutes * 60.0) / mean.max(1e-3)).floor() as usize;
    println!(
        "Slurm tasks sized at {:.0} worker-s per run (measured on this host): {} run(s) per task of about {minutes} min",
        mean,
        n.max(1)
    );
    Ok(n.max(1))
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
                 changed or made by another build",
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
