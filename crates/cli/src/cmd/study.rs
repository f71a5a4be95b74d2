//! `cachesched study`: the papers' effects measured on this real machine, by time (no
//! hardware counters needed), with real processes: `cachesched burn` threads chasing
//! pointers through private working sets of a given size, under several conditions run
//! side by side, interleaved and repeated, so that a noisy shared machine affects every
//! condition alike.
//!
//! - `study affinity` (paper 4, §3 on this host): as many chasing threads as CPUs,
//!   bound one per core, moved between the cores every 2 or 10 ms by the `migrate`
//!   policy (forced low affinity), left to Linux, and under `cachesched run --policy
//!   affinity:home=core`; work per second against bound, per working-set size.
//! - `study timeslice` (paper 5 on this host): two chasing threads sharing CPU 0, each
//!   doing a fixed amount of work, under Linux's default slices and under `cachesched
//!   run --policy timeslice:slice_ms=N`; completion time against the default, per
//!   working-set size, and each thread alone for reference.
//!
//! Every run is one child process (`cachesched burn`, under `cachesched run` where a
//! policy applies); each repeat runs every (size, condition) pair once, in an order
//! drawn from `--seed`. Runs are appended to `runs.jsonl` in `--out` as they finish; the
//! report (`report.md`, `results.json`, SVG plots) is made from them at the end, or
//! again with `--from-runs` without running anything. Ctrl-C stops after killing the
//! current run (whose `cachesched run` restores what it changed); the runs finished so
//! far stay in `runs.jsonl`.

use anyhow::{bail, Context, Result};
use cachesched_core::SimRng;
use cachesched_lab::files::write_file;
use cachesched_lab::interrupt::interrupt_flag;
use cachesched_lab::stats::{over_seeds, plain, show};
use cachesched_lab::svg::{line_chart, Series, XAxis};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Which study.
#[derive(Subcommand, Debug)]
pub enum StudyCommand {
    /// Cache affinity (paper 4) on this host: chasing threads bound, forced to migrate
    /// every 2 or 10 ms, left to Linux, and under the affinity policy; work per second
    /// against bound, by working-set size.
    Affinity(AffinityArgs),
    /// Longer timeslices (paper 5) on this host: two chasing threads sharing CPU 0
    /// under Linux's slices and under the timeslice policy's; completion time of fixed
    /// work against the default, by working-set size.
    Timeslice(TimesliceArgs),
}

/// Options every study shares.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Working-set sizes per thread, KiB.
    #[arg(long, value_name = "KIB", value_delimiter = ',')]
    kb: Option<Vec<u64>>,
    /// Times every (size, condition) pair runs, interleaved.
    #[arg(long, value_name = "N", default_value_t = 5)]
    repeats: usize,
    /// Seed of the order runs are made in.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Output directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run nothing: rebuild the report from `runs.jsonl` in --out.
    #[arg(long)]
    from_runs: bool,
    /// Also write the report's block into this document, between its markers
    /// `<!-- study NAME: begin -->` and `<!-- study NAME: end -->`.
    #[arg(long, value_name = "FILE")]
    docs: Option<PathBuf>,
}

/// `cachesched study affinity`.
#[derive(Args, Debug)]
pub struct AffinityArgs {
    #[command(flatten)]
    common: Common,
    /// Length of each run, ms.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    ms: u64,
    /// Chasing threads (default: one per CPU this process may use).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

/// `cachesched study timeslice`.
#[derive(Args, Debug)]
pub struct TimesliceArgs {
    #[command(flatten)]
    common: Common,
    /// Slice lengths of the timeslice policy, ms.
    #[arg(long, value_name = "MS", value_delimiter = ',', default_values_t = [3.0, 5.0, 15.0, 30.0, 45.0])]
    slices: Vec<f64>,
    /// Work per thread, as the time one thread alone takes for it, ms (calibrated per
    /// size at the start).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    solo_ms: u64,
}

/// How a condition runs its load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Condition {
    /// Label in tables and plots.
    label: String,
    /// `cachesched run --policy` specification, if the load runs under the daemon.
    policy: Option<String>,
    /// Extra `cachesched burn` options (pinning, thread count).
    burn: Vec<String>,
}

/// One finished run.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    study: String,
    repeat: usize,
    kb: u64,
    condition: String,
    /// Per thread: steps, wall ms, steps per second, migrations, involuntary switches.
    threads: Vec<ThreadRun>,
}

/// What `burn --report` says about one thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ThreadRun {
    steps: u64,
    wall_ms: f64,
    steps_per_s: f64,
    #[serde(default)]
    migrations: Option<u64>,
    #[serde(default)]
    involuntary_switches: u64,
    #[serde(default)]
    cpu_ms: f64,
}

/// How a study was run, kept beside its runs (`study.json`) so that `--from-runs`
/// reports it as it was.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Meta {
    /// The command line that made the runs.
    command: String,
    /// The host they ran on ([`host_line`]).
    host: String,
    /// Length of each run, ms (affinity).
    #[serde(default)]
    ms: Option<u64>,
    /// Work per thread as one thread's time alone, ms (timeslice).
    #[serde(default)]
    solo_ms: Option<u64>,
}

impl Meta {
    /// This process's command line, with the executable as `cachesched`.
    fn here(ms: Option<u64>, solo_ms: Option<u64>) -> Meta {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Meta {
            command: format!("cachesched {}", args.join(" ")),
            host: host_line(),
            ms,
            solo_ms,
        }
    }

    /// Writes it to `out` (a new study) or reads the one there (`--from-runs`).
    fn keep_or_load(self, c: &Common, out: &Path) -> Result<Meta> {
        let path = out.join("study.json");
        if c.from_runs {
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "cannot read {} (--from-runs needs a previous study in --out)",
                    path.display()
                )
            })?;
            return serde_json::from_str(&text).with_context(|| format!("in {}", path.display()));
        }
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        write_file(&path, &serde_json::to_string_pretty(&self)?)?;
        Ok(self)
    }
}

/// `cachesched study`.
pub fn run(c: StudyCommand) -> Result<i32> {
    match c {
        StudyCommand::Affinity(a) => affinity(a),
        StudyCommand::Timeslice(a) => timeslice(a),
    }
}

fn out_dir(c: &Common, study: &str) -> PathBuf {
    c.out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results/study").join(study))
}

/// The `cachesched` executable that runs the loads (this one).
fn exe() -> Result<PathBuf> {
    std::env::current_exe().context("cannot locate the cachesched executable to run loads with")
}

/// Runs `burn` with `args` under `cond`; returns its threads' reports, or `None` if
/// interrupted.
fn run_load(cond: &Condition, args: &[String]) -> Result<Option<Vec<ThreadRun>>> {
    let exe = exe()?;
    let mut cmd = std::process::Command::new(&exe);
    if let Some(p) = &cond.policy {
        cmd.args([
            "run",
            "--policy",
            p,
            "--scan-ms",
            "5",
            "--no-stats-counters",
            "--",
        ]);
        cmd.arg(&exe);
    }
    cmd.arg("burn").args(args).args(&cond.burn);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let cmdline = format!("{cmd:?}");
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {cmdline}"))?;
    let stop = interrupt_flag();
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
            .collect::<Vec<String>>()
    });
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if stop.load(Ordering::SeqCst) {
            // the child got the terminal's SIGINT too; make sure it ends, then stop
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let lines = reader.join().expect("reader thread");
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read as _;
            let _ = e.read_to_string(&mut err);
        }
        bail!(
            "{cmdline} failed ({status}): {}",
            err.lines().last().unwrap_or("no message")
        );
    }
    let threads: Vec<ThreadRun> = lines
        .iter()
        .filter(|l| l.starts_with("{\"pid\""))
        .map(|l| serde_json::from_str(l).context("a burn report line"))
        .collect::<Result<_>>()?;
    if threads.is_empty() {
        bail!("{cmdline} reported no threads");
    }
    Ok(Some(threads))
}

/// Runs every (size, condition) pair `repeats` times in seeded interleaved order,
/// appending each run to `runs.jsonl` under `out`; `args(kb)` gives the burn options
/// of a size. Returns every record, or `None` if interrupted.
fn run_all(
    study: &str,
    c: &Common,
    sizes: &[u64],
    conds: &[Condition],
    args: &dyn Fn(u64) -> Vec<String>,
    out: &Path,
) -> Result<Option<Vec<Record>>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join("runs.jsonl");
    let mut file =
        std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut rng = SimRng::new(c.seed);
    let total = c.repeats * sizes.len() * conds.len();
    let mut records = Vec::new();
    let t0 = std::time::Instant::now();
    for repeat in 0..c.repeats {
        let mut order: Vec<(u64, usize)> = sizes
            .iter()
            .flat_map(|&kb| (0..conds.len()).map(move |i| (kb, i)))
            .collect();
        for k in (1..order.len()).rev() {
            order.swap(k, rng.below(k as u64 + 1) as usize);
        }
        for (kb, ci) in order {
            let Some(threads) = run_load(&conds[ci], &args(kb))? else {
                eprintln!(
                    "interrupted: {} of {total} runs kept in {}; no report",
                    records.len(),
                    path.display()
                );
                return Ok(None);
            };
            let r = Record {
                study: study.into(),
                repeat,
                kb,
                condition: conds[ci].label.clone(),
                threads,
            };
            writeln!(file, "{}", serde_json::to_string(&r)?)?;
            records.push(r);
            let done = records.len();
            let left = t0.elapsed().as_secs_f64() / done as f64 * (total - done) as f64;
            eprintln!(
                "progress: {done}/{total} runs (repeat {}, {kb} KiB, {}), about {:.0}s left",
                repeat + 1,
                conds[ci].label,
                left
            );
        }
    }
    Ok(Some(records))
}

/// The working-set sizes the records cover, in order.
fn sizes_of(records: &[Record]) -> Vec<u64> {
    let mut s: Vec<u64> = records.iter().map(|r| r.kb).collect();
    s.sort();
    s.dedup();
    s
}

/// The records of a previous run in `out`.
fn load_runs(out: &Path) -> Result<Vec<Record>> {
    let path = out.join("runs.jsonl");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (--from-runs needs a previous study in --out)",
            path.display()
        )
    })?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("a line of {}", path.display())))
        .collect()
}

/// Per (size, condition), per repeat, `f` of the run's threads.
fn table(
    records: &[Record],
    f: &dyn Fn(&[ThreadRun]) -> f64,
) -> BTreeMap<(u64, String), BTreeMap<usize, f64>> {
    let mut t: BTreeMap<(u64, String), BTreeMap<usize, f64>> = BTreeMap::new();
    for r in records {
        t.entry((r.kb, r.condition.clone()))
            .or_default()
            .insert(r.repeat, f(&r.threads));
    }
    t
}

/// `100 · (x / base − 1)` per repeat where both ran, over repeats.
fn paired(
    t: &BTreeMap<(u64, String), BTreeMap<usize, f64>>,
    kb: u64,
    cond: &str,
    base: &str,
) -> (f64, f64) {
    let (Some(x), Some(b)) = (t.get(&(kb, cond.into())), t.get(&(kb, base.into()))) else {
        return (f64::NAN, f64::NAN);
    };
    let v: Vec<f64> = x
        .iter()
        .filter_map(|(r, x)| b.get(r).map(|b| 100.0 * (x / b - 1.0)))
        .collect();
    over_seeds(&v)
}

/// The host as a line: CPU model and cache sizes from sysfs.
fn host_line() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let caches = cachesched_linux::sysfs::read_host_topology()
        .map(|t| {
            t.topology
                .caches
                .iter()
                .map(|c| format!("L{} {:?} {} KiB", c.level, c.kind, c.size_bytes >> 10))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    format!(
        "{model}, {} CPUs; caches per instance: {caches}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
}

/// Writes the report files and, with --docs, the document's block.
fn finish(study: &str, c: &Common, out: &Path, md: &str, results: &impl Serialize) -> Result<i32> {
    write_file(&out.join("report.md"), md)?;
    write_file(
        &out.join("results.json"),
        &serde_json::to_string_pretty(results)?,
    )?;
    println!("wrote {}", out.join("report.md").display());
    if let Some(doc) = &c.docs {
        let text = std::fs::read_to_string(doc)
            .with_context(|| format!("cannot read '{}' (--docs)", doc.display()))?;
        let text = cachesched_lab::docs_block::replace(&text, &format!("study {study}"), md)
            .with_context(|| format!("in '{}' (--docs)", doc.display()))?;
        write_file(doc, &text)?;
        println!("updated {}", doc.display());
    }
    Ok(0)
}

/// Summary row of one (size, condition).
#[derive(Debug, Serialize)]
struct Row {
    kb: u64,
    condition: String,
    /// Mean and 95% half-width over repeats of the measured quantity.
    value: (f64, f64),
    /// Paired change against the reference condition, percent.
    change_pct: (f64, f64),
    /// Mean migrations per thread per run.
    migrations: f64,
}

/// `cachesched study affinity`.
fn affinity(a: AffinityArgs) -> Result<i32> {
    let c = &a.common;
    let out = out_dir(c, "affinity");
    let sizes =
        c.kb.clone()
            .unwrap_or_else(|| vec![32, 128, 512, 1024, 1536, 2048, 3072, 4096, 8192, 32768]);
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let cond = |label: &str, policy: Option<&str>, pin: bool| Condition {
        label: label.into(),
        policy: policy.map(String::from),
        burn: if pin {
            vec!["--pin-threads".into()]
        } else {
            Vec::new()
        },
    };
    let conds = vec![
        cond("bound", None, true),
        cond("migrate-2ms", Some("migrate:every_ms=2"), false),
        cond("migrate-10ms", Some("migrate:every_ms=10"), false),
        cond("linux", None, false),
        cond("affinity-policy", Some("affinity:home=core"), false),
    ];
    let ms = a.ms;
    let args = move |kb: u64| -> Vec<String> {
        [
            "--threads".to_string(),
            threads.to_string(),
            "--chase-kb".into(),
            kb.to_string(),
            "--ms".into(),
            ms.to_string(),
            "--delay-ms".into(),
            "50".into(),
            "--report".into(),
        ]
        .to_vec()
    };
    let meta = Meta::here(Some(a.ms), None).keep_or_load(c, &out)?;
    let records = if c.from_runs {
        load_runs(&out)?
    } else {
        eprintln!(
            "study affinity: {} sizes x {} conditions x {} repeats, {ms} ms each (~{:.0} min)",
            sizes.len(),
            conds.len(),
            c.repeats,
            (sizes.len() * conds.len() * c.repeats) as f64 * (ms as f64 + 300.0) / 60_000.0
        );
        match run_all("affinity", c, &sizes, &conds, &args, &out)? {
            Some(r) => r,
            None => return Ok(130),
        }
    };
    let sizes = sizes_of(&records);
    let nthreads = records.first().map_or(0, |r| r.threads.len());
    let rate = table(&records, &|t| t.iter().map(|x| x.steps_per_s).sum::<f64>());
    let migr = table(&records, &|t| {
        t.iter()
            .map(|x| x.migrations.unwrap_or(0) as f64)
            .sum::<f64>()
            / t.len().max(1) as f64
    });
    let labels = [
        "bound",
        "migrate-2ms",
        "migrate-10ms",
        "linux",
        "affinity-policy",
    ];
    let mut rows = Vec::new();
    let mut md = format!(
        "## Cache affinity on this host\n\nGenerated by `{}`. Host: {}. \
         {nthreads} threads, each chasing pointers through its own working set (a random \
         cyclic order of its 64-byte lines); each run {} ms; {} repeats, every (size, \
         condition) pair once per repeat in a seeded random order. Work: chase steps per \
         second summed over the threads (millions); change: against `bound` in the same \
         repeat, mean ± 95% half-width over repeats (Student's t); migrations: per thread \
         per run, as the kernel counted them.\n\n",
        meta.command,
        meta.host,
        meta.ms.unwrap_or(a.ms),
        records.iter().map(|r| r.repeat).max().map_or(0, |m| m + 1)
    );
    md += "| working set | ";
    md += &labels
        .iter()
        .map(|&l| {
            if l == "bound" {
                format!("{l}: M steps/s | {l}: migrations")
            } else {
                format!("{l}: M steps/s | {l}: vs bound | {l}: migrations")
            }
        })
        .collect::<Vec<_>>()
        .join(" | ");
    md += " |\n|---|---|---|";
    md += &"---|---|---|".repeat(labels.len() - 1);
    md += "\n";
    for &kb in &sizes {
        let _ = write!(md, "| {} |", kib(kb));
        for l in labels {
            let v = rate
                .get(&(kb, l.to_string()))
                .map(|m| over_seeds(&m.values().map(|x| x / 1e6).collect::<Vec<_>>()))
                .unwrap_or((f64::NAN, f64::NAN));
            let ch = if l == "bound" {
                (f64::NAN, f64::NAN)
            } else {
                paired(&rate, kb, l, "bound")
            };
            let mg = migr.get(&(kb, l.to_string())).map_or(f64::NAN, |m| {
                m.values().sum::<f64>() / m.len().max(1) as f64
            });
            if l == "bound" {
                let _ = write!(md, " {} | {} |", show(v, ""), plain(mg));
            } else {
                let _ = write!(md, " {} | {} | {} |", show(v, ""), show(ch, "%"), plain(mg));
            }
            rows.push(Row {
                kb,
                condition: l.into(),
                value: v,
                change_pct: ch,
                migrations: mg,
            });
        }
        md += "\n";
    }
    let series: Vec<Series> = labels[1..]
        .iter()
        .map(|l| {
            let xs: Vec<(f64, (f64, f64))> = sizes
                .iter()
                .map(|&kb| (kb as f64, paired(&rate, kb, l, "bound")))
                .collect();
            Series::with_intervals(l.to_string(), &xs)
        })
        .collect();
    write_file(
        &out.join("affinity-loss.svg"),
        &line_chart(
            "Work per second against bound threads, this host",
            "working set per thread",
            "change in chase steps per second against bound (%)",
            &series,
            XAxis::Kib,
            None,
        ),
    )?;
    md += "\nPlot: `affinity-loss.svg`. Raw runs: `runs.jsonl`.\n";
    finish("affinity", c, &out, &md, &rows)
}

/// `cachesched study timeslice`.
fn timeslice(a: TimesliceArgs) -> Result<i32> {
    let c = &a.common;
    let out = out_dir(c, "timeslice");
    let sizes =
        c.kb.clone()
            .unwrap_or_else(|| vec![256, 512, 1024, 1536, 2048, 3072, 4096, 8192]);
    if a.slices.iter().any(|s| !(*s >= 0.1 && *s <= 1000.0)) {
        bail!("--slices must be between 0.1 and 1000 ms");
    }
    let mut conds = vec![
        Condition {
            label: "solo".into(),
            policy: None,
            burn: vec!["--threads".into(), "1".into()],
        },
        Condition {
            label: "linux".into(),
            policy: None,
            burn: vec!["--threads".into(), "2".into()],
        },
    ];
    for s in &a.slices {
        conds.push(Condition {
            label: format!("slice-{s}ms"),
            policy: Some(format!("timeslice:slice_ms={s}")),
            burn: vec!["--threads".into(), "2".into()],
        });
    }
    let meta = Meta::here(None, Some(a.solo_ms)).keep_or_load(c, &out)?;
    let records = if c.from_runs {
        load_runs(&out)?
    } else {
        // the work of each size: what one thread alone does in solo_ms
        let mut steps: BTreeMap<u64, u64> = BTreeMap::new();
        for &kb in &sizes {
            let cal = Condition {
                label: "calibration".into(),
                policy: None,
                burn: Vec::new(),
            };
            let args: Vec<String> = [
                "--threads",
                "1",
                "--cpu",
                "0",
                "--chase-kb",
                &kb.to_string(),
                "--ms",
                "300",
                "--report",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let Some(t) = run_load(&cal, &args)? else {
                return Ok(130);
            };
            steps.insert(
                kb,
                (t[0].steps_per_s * a.solo_ms as f64 / 1e3).max(1.0) as u64,
            );
        }
        write_file(
            &out.join("calibration.json"),
            &serde_json::to_string_pretty(&steps)?,
        )?;
        eprintln!(
            "study timeslice: {} sizes x {} conditions x {} repeats (~{:.0} min)",
            sizes.len(),
            conds.len(),
            c.repeats,
            (sizes.len() * c.repeats) as f64
                * (a.solo_ms as f64 * (1.0 + 2.5 * (conds.len() - 1) as f64))
                / 60_000.0
        );
        let limit = a.solo_ms * 20;
        let args = move |kb: u64| -> Vec<String> {
            [
                "--cpu".to_string(),
                "0".into(),
                "--chase-kb".into(),
                kb.to_string(),
                "--steps".into(),
                steps[&kb].to_string(),
                "--ms".into(),
                limit.to_string(),
                "--delay-ms".into(),
                "50".into(),
                "--report".into(),
            ]
            .to_vec()
        };
        match run_all("timeslice", c, &sizes, &conds, &args, &out)? {
            Some(r) => r,
            None => return Ok(130),
        }
    };
    let sizes = sizes_of(&records);
    let mut labels: Vec<String> = Vec::new();
    for r in &records {
        if !labels.contains(&r.condition) {
            labels.push(r.condition.clone());
        }
    }
    let rank = |l: &str| match l {
        "solo" => (0, 0.0),
        "linux" => (1, 0.0),
        s => (
            2,
            s.trim_start_matches("slice-")
                .trim_end_matches("ms")
                .parse()
                .unwrap_or(f64::MAX),
        ),
    };
    labels.sort_by(|a, b| {
        rank(a)
            .partial_cmp(&rank(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    // completion time: the mean of the threads' own times for their fixed work
    let time = table(&records, &|t| {
        t.iter().map(|x| x.wall_ms).sum::<f64>() / t.len().max(1) as f64
    });
    let mut rows = Vec::new();
    let mut md = format!(
        "## Longer timeslices on this host\n\nGenerated by `{}`. \
         Host: {}. Two threads pinned to CPU 0, each chasing pointers through its own working \
         set (a random cyclic order of its 64-byte lines) for a fixed number of steps (what \
         one thread alone does in about {} ms, calibrated per size at the start: `solo` is \
         that thread alone); {} repeats, every (size, condition) pair once per repeat in a \
         seeded random order. Completion time: the mean of the two threads' times for their \
         work, ms; change: against `linux` (the kernel's default slices) in the same repeat, \
         mean ± 95% half-width over repeats (negative: faster).\n\n",
        meta.command,
        meta.host,
        meta.solo_ms.unwrap_or(a.solo_ms),
        records.iter().map(|r| r.repeat).max().map_or(0, |m| m + 1)
    );
    md += "| working set | ";
    md += &labels
        .iter()
        .map(|l| {
            if l == "linux" || l == "solo" {
                format!("{l}: ms")
            } else {
                format!("{l}: ms | {l}: vs linux")
            }
        })
        .collect::<Vec<_>>()
        .join(" | ");
    let refs = labels
        .iter()
        .filter(|l| *l == "linux" || *l == "solo")
        .count();
    md += " |\n|---|";
    md += &"---|".repeat(refs);
    md += &"---|---|".repeat(labels.len() - refs);
    md += "\n";
    for &kb in &sizes {
        let _ = write!(md, "| {} |", kib(kb));
        for l in &labels {
            let v = time
                .get(&(kb, l.clone()))
                .map(|m| over_seeds(&m.values().copied().collect::<Vec<_>>()))
                .unwrap_or((f64::NAN, f64::NAN));
            let ch = if l == "linux" || l == "solo" {
                (f64::NAN, f64::NAN)
            } else {
                paired(&time, kb, l, "linux")
            };
            if l == "linux" || l == "solo" {
                let _ = write!(md, " {} |", show(v, ""));
            } else {
                let _ = write!(md, " {} | {} |", show(v, ""), show(ch, "%"));
            }
            rows.push(Row {
                kb,
                condition: l.clone(),
                value: v,
                change_pct: ch,
                migrations: f64::NAN,
            });
        }
        md += "\n";
    }
    let series: Vec<Series> = labels
        .iter()
        .filter(|l| l.starts_with("slice-"))
        .map(|l| {
            let xs: Vec<(f64, (f64, f64))> = sizes
                .iter()
                .map(|&kb| (kb as f64, paired(&time, kb, l, "linux")))
                .collect();
            Series::with_intervals(l.clone(), &xs)
        })
        .collect();
    write_file(
        &out.join("timeslice-change.svg"),
        &line_chart(
            "Completion time with longer slices against Linux's, this host",
            "working set per thread",
            "change in completion time against the default slices (%)",
            &series,
            XAxis::Kib,
            None,
        ),
    )?;
    md += "\nPlot: `timeslice-change.svg`. Raw runs: `runs.jsonl`; work per size: \
           `calibration.json`.\n";
    finish("timeslice", c, &out, &md, &rows)
}

/// A size in KiB as people write it.
fn kib(kb: u64) -> String {
    if kb >= 1024 && kb.is_multiple_of(1024) {
        format!("{} MiB", kb / 1024)
    } else if kb >= 1024 {
        format!("{:.1} MiB", kb as f64 / 1024.0)
    } else {
        format!("{kb} KiB")
    }
}
