//! The Slurm executor against a real single-node Slurm (Debian's munge, slurmctld and
//! slurmd, started by `scripts/slurm-single-node` in a temporary directory and stopped
//! at the end): the same bytes as a local run, a cancelled task named with its state
//! and log and then resubmitted alone, and a detached submission read back by the same
//! command. Skipped, with a line saying so, where Slurm's packages are missing or the
//! test does not run as root (`.ci/run` installs the packages).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cachesched");

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-single-node")
}

/// A running single-node Slurm, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    /// Starts one under `dir` on ports of its own; `None` (said on stderr) where it
    /// cannot run here.
    fn start(dir: &Path) -> Option<Cluster> {
        let port = 20_000 + (std::process::id() % 10_000) * 2;
        let out = Command::new(script())
            .args(["start", dir.to_str().unwrap()])
            .env("CACHESCHED_SLURMCTLD_PORT", port.to_string())
            .env("CACHESCHED_SLURMD_PORT", (port + 1).to_string())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(3) {
            eprintln!("slurm suite: SKIPPED: {}", err.trim());
            return None;
        }
        let c = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
        };
        assert!(out.status.success(), "Slurm did not start: {err}");
        Some(c)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .args(["stop", self.dir.to_str().unwrap()])
            .status();
    }
}

/// `cachesched ARGS` with the cluster's configuration and run cache `runs`.
fn cachesched(c: &Cluster, runs: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("SLURM_CONF", &c.conf)
        .env("CACHESCHED_RUNS", runs)
        .env("CACHESCHED_SOLO", runs.with_extension("solo"));
    cmd
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A scenario of 2 variants × `seeds` of a 4-thread mix on core2-4m, `ms` long, with
/// `metrics` (a metric against running alone needs a solo run per program and seed).
fn scenario(path: &Path, seeds: &str, ms: u32, metrics: &str) {
    std::fs::write(
        path,
        format!(
            r#"name = "slurm-test"
description = "the Slurm executor's test"
machine = "core2-4m"
duration_ms = {ms}
warmup_ms = 2
seeds = [{seeds}]
metrics = [{metrics}]

[[variants]]
label = "baseline"

[[variants]]
label = "casc"
policies = [{{ name = "casc" }}]

[[threads]]
profile = "mcf"
count = 2

[[threads]]
profile = "gzip"
count = 2
"#
        ),
    )
    .unwrap();
}

/// Every file of `a` and `b`, byte for byte.
fn assert_same_tree(a: &Path, b: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    let mut other: Vec<_> = std::fs::read_dir(b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    other.sort();
    assert_eq!(names, other, "{} and {}", a.display(), b.display());
    for n in names {
        let (x, y) = (a.join(&n), b.join(&n));
        if x.is_dir() {
            assert_same_tree(&x, &y);
        } else {
            assert!(
                std::fs::read(&x).unwrap() == std::fs::read(&y).unwrap(),
                "{} differs from {}",
                x.display(),
                y.display()
            );
        }
    }
}

/// Every file of `a` is in `b` with the same bytes; returns how many more files `b` has.
fn assert_within(a: &Path, b: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(a).unwrap() {
        let e = e.unwrap();
        let other = b.join(e.file_name());
        assert!(
            std::fs::read(e.path()).unwrap() == std::fs::read(&other).unwrap_or_default(),
            "{} differs from {}",
            e.path().display(),
            other.display()
        );
        n += 1;
    }
    std::fs::read_dir(b).unwrap().count() - n
}

/// Run cache entries in `dir`.
fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            let n = n.to_string_lossy();
            n.ends_with(".json") && !n.starts_with('.')
        })
        .count()
    })
}

/// The job id in "submitted Slurm job N: …".
fn job_of(said: &str) -> String {
    let at = said
        .find("submitted Slurm job ")
        .unwrap_or_else(|| panic!("no submission in: {said}"));
    said[at + 20..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

/// Fails if:
/// - the Slurm executor's results (reports, tables, plots), run cache entries or solo
///   references differ in any byte from a local run of the same scenario, or its solo
///   runs are not an array of their own;
/// - a task cancelled mid-run is not named with its state (CANCELLED) and its log, or
///   the command exits 0 without its runs;
/// - running the command again submits more than the runs that did not land;
/// - `--detach` does not return with exit 0 before the results, or running the command
///   again while that job is still queued does not wait for it (saying why it waits)
///   but submits the runs again, or does not finish them.
#[test]
fn slurm_array_same_bytes_failure_resume_and_detach() {
    let d = tmp("slurm");
    let Some(c) = Cluster::start(&d.join("cluster")) else {
        return;
    };
    let slurm_dir = d.join("shared");
    let slurm = |runs: &Path, file: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec![
            "experiment",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--executor",
            "slurm",
            "--slurm-dir",
            slurm_dir.to_str().unwrap(),
            "--slurm-poll-s",
            "0.2",
        ];
        args.extend_from_slice(extra);
        cachesched(&c, runs, &args)
    };
    let local = |runs: &Path, file: &Path, out: &Path| {
        let o = cachesched(
            &c,
            runs,
            &[
                "experiment",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    };

    // 1. the same bytes as a local run: 8 runs in 3 tasks, then their 8 solo runs
    // (2 programs × 4 seeds) in 3 more
    let tiny = d.join("tiny.toml");
    scenario(&tiny, "1, 2, 3, 4", 6, r#""ips", "stp""#);
    let o = slurm(
        &d.join("runs-s"),
        &tiny,
        &d.join("out-s"),
        &["--runs-per-task", "3"],
    )
    .output()
    .unwrap();
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert_eq!(
        said.matches("8 runs in 3 array task(s) of at most 3")
            .count(),
        2,
        "the runs and then the solo runs as arrays: {said}"
    );
    local(&d.join("runs-l"), &tiny, &d.join("out-l"));
    assert_same_tree(&d.join("out-s"), &d.join("out-l"));
    assert_same_tree(&d.join("runs-s.solo"), &d.join("runs-l.solo"));
    // the Slurm side's run cache also holds the solo runs, which a local run makes
    // without keeping them there
    assert_eq!(
        assert_within(&d.join("runs-l"), &d.join("runs-s")),
        8,
        "the 8 solo runs"
    );

    // 2. a task cancelled mid-run: named, and then only its runs submitted again
    let long = d.join("long.toml");
    scenario(&long, "11, 12", 20, r#""ips""#);
    let runs = d.join("runs-f");
    let child = slurm(&runs, &long, &d.join("out-f"), &["--runs-per-task", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let job = loop {
        // the first task's log once it has begun its runs
        let started = std::fs::read_dir(slurm_dir.join("logs"))
            .ok()
            .and_then(|rd| {
                rd.filter_map(Result::ok).find_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let job = n.strip_suffix("_0.out")?.to_string();
                    let log = std::fs::read_to_string(e.path()).ok()?;
                    (log.contains("task 0: 2 run(s)") && job != job_of(&said)).then_some(job)
                })
            });
        if let Some(j) = started {
            break j;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "task 0 never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let st = Command::new("scancel")
        .arg(format!("{job}_0"))
        .env("SLURM_CONF", &c.conf)
        .status()
        .unwrap();
    assert!(st.success());
    let o = child.wait_with_output().unwrap();
    let said_f = text(&o);
    assert_eq!(o.status.code(), Some(2), "{said_f}");
    assert!(
        said_f.contains(&format!("run(s) of Slurm job {job} did not land")),
        "{said_f}"
    );
    assert!(said_f.contains("task 0 (CANCELLED"), "{said_f}");
    assert!(said_f.contains(&format!("{job}_0.out")), "{said_f}");
    assert!(!said_f.contains("task 1 ("), "task 1 finished: {said_f}");
    let missing = 4 - entries(&runs);
    assert!(missing >= 1, "{said_f}");
    let o = slurm(&runs, &long, &d.join("out-f"), &["--runs-per-task", "2"])
        .output()
        .unwrap();
    let said_r = text(&o);
    assert!(o.status.success(), "{said_r}");
    assert!(
        said_r.contains(&format!(": {missing} runs in 1 array task(s)")),
        "only the {missing} missing run(s) again: {said_r}"
    );
    local(&d.join("runs-fl"), &long, &d.join("out-fl"));
    assert_same_tree(&d.join("out-f"), &d.join("out-fl"));

    // 3. detached (and held, so that it is still queued): returns at once with 0; the
    // same command again waits for that job, saying why it waits, and submits nothing
    let det = d.join("detach.toml");
    scenario(&det, "21, 22", 6, r#""ips""#);
    let runs = d.join("runs-d");
    let o = slurm(
        &runs,
        &det,
        &d.join("out-d"),
        &["--detach", "--slurm-args", "--hold"],
    )
    .output()
    .unwrap();
    let said_d = text(&o);
    assert!(o.status.success(), "{said_d}");
    assert!(said_d.contains("detached: Slurm job"), "{said_d}");
    assert!(
        !d.join("out-d/results.json").exists(),
        "detached, nothing is written"
    );
    let held = job_of(&said_d);
    let again = slurm(&runs, &det, &d.join("out-d"), &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let st = Command::new("scontrol")
        .args(["release", &held])
        .env("SLURM_CONF", &c.conf)
        .status()
        .unwrap();
    assert!(st.success());
    let o = again.wait_with_output().unwrap();
    let said_2 = text(&o);
    assert!(o.status.success(), "{said_2}");
    assert!(
        said_2.contains(&format!(
            "Slurm job {held}, still queued or running, makes 4 of these runs: waiting for it"
        )),
        "{said_2}"
    );
    assert!(said_2.contains("(pending: JobHeldUser)"), "{said_2}");
    assert!(
        !said_2.contains("submitted Slurm job"),
        "the runs of the detached job are not submitted again: {said_2}"
    );
    local(&d.join("runs-dl"), &det, &d.join("out-dl"));
    assert_same_tree(&d.join("out-d"), &d.join("out-dl"));
}
