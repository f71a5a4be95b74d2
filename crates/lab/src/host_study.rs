//! Studies on the real host: the papers' effects measured on this machine by time (no
//! hardware counters needed), with real processes — `cachesched burn` threads chasing
//! pointers through private working sets of a given size — under several conditions
//! run side by side, interleaved and repeated, so that a noisy shared machine affects
//! every condition alike. Each paper with a study has it in its folder
//! ([`crate::papers::affinity::host`], [`crate::papers::timeslice::host`]); this module
//! is what they share: running a load, the runs file, the paired statistics and the
//! report files.
//!
//! Every run is one child process (`cachesched burn`, under `cachesched run` where a
//! policy applies); each repeat runs every (size, condition) pair once, in an order
//! drawn from the seed. Runs are appended to `runs.jsonl` in the output directory as
//! they finish; the report (`report.md`, `results.json`, SVG plots) is made from them
//! at the end, or again from the runs file without running anything
//! ([`Settings::from_runs`]). An interrupt (Ctrl-C, SIGTERM) stops after killing the
//! current run (whose `cachesched run` restores what it changed); the runs finished so
//! far stay in `runs.jsonl`.

use crate::error::{Error, Result, ResultExt};
use crate::files::write_file;
use crate::interrupt::interrupt_flag;
use crate::stats::over_seeds;
use crate::svg::{line_chart, Series, XAxis};
use cachesched_core::SimRng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// What every study is given.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Working-set sizes per thread, KiB (`None`: the study's own).
    pub sizes_kb: Option<Vec<u64>>,
    /// Times every (size, condition) pair runs, interleaved.
    pub repeats: usize,
    /// Seed of the order runs are made in.
    pub seed: u64,
    /// Output directory: the runs, the report, the plots.
    pub out: PathBuf,
    /// Run nothing: rebuild the report from `runs.jsonl` in [`Settings::out`].
    pub from_runs: bool,
    /// Also write the report's block into this document, between its markers
    /// `<!-- study NAME: begin -->` and `<!-- study NAME: end -->`.
    pub docs: Option<PathBuf>,
    /// The `cachesched` executable that runs the loads (`burn`, and `run` for a policy).
    pub exe: PathBuf,
    /// The command line that asked for the study, as the report names it.
    pub command: String,
}

/// How a study ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The report was written.
    Reported,
    /// Interrupted while running: the runs so far are kept, no report was made.
    Interrupted,
}

/// How a condition runs its load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Condition {
    /// Label in tables and plots.
    pub(crate) label: String,
    /// `cachesched run --policy` specification, if the load runs under the daemon.
    pub(crate) policy: Option<String>,
    /// Extra `cachesched burn` options (pinning, thread count).
    pub(crate) burn: Vec<String>,
}

/// One finished run, a line of `runs.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The study's name.
    pub(crate) study: String,
    /// Which repeat, from 0.
    pub(crate) repeat: usize,
    /// Working-set size per thread, KiB.
    pub(crate) kb: u64,
    /// The condition's label.
    pub(crate) condition: String,
    /// What each thread did.
    pub(crate) threads: Vec<ThreadRun>,
}

/// What `burn --report` says about one thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ThreadRun {
    /// Chase steps made.
    pub(crate) steps: u64,
    /// Wall time from its start to its end, ms.
    pub(crate) wall_ms: f64,
    /// Steps per second of wall time.
    pub(crate) steps_per_s: f64,
    /// Migrations the kernel counted, where it did.
    #[serde(default)]
    pub(crate) migrations: Option<u64>,
    /// Involuntary context switches.
    #[serde(default)]
    pub(crate) involuntary_switches: u64,
    /// CPU time it got, ms.
    #[serde(default)]
    pub(crate) cpu_ms: f64,
}

/// How a study was run, kept beside its runs (`study.json`) so that a report rebuilt
/// from the runs says how they were made.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// The command line that made the runs.
    pub(crate) command: String,
    /// The host they ran on ([`host_line`]).
    pub(crate) host: String,
    /// Length of each run, ms (affinity).
    #[serde(default)]
    pub(crate) ms: Option<u64>,
    /// Work per thread as one thread's time alone, ms (timeslice).
    #[serde(default)]
    pub(crate) solo_ms: Option<u64>,
}

impl Meta {
    /// Writes this study's to `s.out` (a new study) or reads the one there (rebuilding
    /// from the runs).
    pub(crate) fn keep_or_load(
        s: &Settings,
        ms: Option<u64>,
        solo_ms: Option<u64>,
    ) -> Result<Meta> {
        let path = s.out.join("study.json");
        if s.from_runs {
            let text = std::fs::read_to_string(&path).map_err(Error::io_hint(
                "cannot read",
                &path,
                " (--from-runs needs a previous study in --out)",
            ))?;
            return serde_json::from_str(&text).map_err(|source| Error::ParseStudy {
                path: path.clone(),
                line: None,
                source,
            });
        }
        let meta = Meta {
            command: s.command.clone(),
            host: host_line(),
            ms,
            solo_ms,
        };
        std::fs::create_dir_all(&s.out).map_err(Error::io("cannot create", &s.out))?;
        write_file(&path, &serde_json::to_string_pretty(&meta)?)?;
        Ok(meta)
    }
}

/// Runs `burn` with `args` under `cond`; returns its threads' reports, or `None` if
/// interrupted.
pub(crate) fn run_load(
    exe: &Path,
    cond: &Condition,
    args: &[String],
) -> Result<Option<Vec<ThreadRun>>> {
    let mut cmd = std::process::Command::new(exe);
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
        cmd.arg(exe);
    }
    cmd.arg("burn").args(args).args(&cond.burn);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let cmdline = format!("{cmd:?}");
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        what: format!("cannot start {cmdline}"),
        source,
    })?;
    let stop = interrupt_flag();
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
            .collect::<Vec<String>>()
    });
    let status = loop {
        if let Some(s) = child
            .try_wait()
            .map_err(Error::io("cannot wait for", exe))?
        {
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
        return Err(Error::Tool(format!(
            "{cmdline} failed ({status}): {}",
            err.lines().last().unwrap_or("no message")
        )));
    }
    let threads: Vec<ThreadRun> = lines
        .iter()
        .filter(|l| l.starts_with("{\"pid\""))
        .map(|l| {
            serde_json::from_str(l).map_err(|e| {
                Error::Tool(format!(
                    "{cmdline} wrote a report line that is not JSON: {e}"
                ))
            })
        })
        .collect::<Result<_>>()?;
    if threads.is_empty() {
        return Err(Error::Tool(format!("{cmdline} reported no threads")));
    }
    Ok(Some(threads))
}

/// Runs every (size, condition) pair `s.repeats` times in seeded interleaved order,
/// appending each run to `runs.jsonl` in `s.out`; `args(kb)` gives the burn options of
/// a size. Returns every record, or `None` if interrupted.
pub(crate) fn run_all(
    study: &str,
    s: &Settings,
    sizes: &[u64],
    conds: &[Condition],
    args: &dyn Fn(u64) -> Vec<String>,
) -> Result<Option<Vec<Record>>> {
    let out = &s.out;
    std::fs::create_dir_all(out).map_err(Error::io("cannot create", out))?;
    let path = out.join("runs.jsonl");
    let mut file = std::fs::File::create(&path).map_err(Error::io("cannot write", &path))?;
    let mut rng = SimRng::new(s.seed);
    let total = s.repeats * sizes.len() * conds.len();
    let mut records = Vec::new();
    let t0 = std::time::Instant::now();
    for repeat in 0..s.repeats {
        let mut order: Vec<(u64, usize)> = sizes
            .iter()
            .flat_map(|&kb| (0..conds.len()).map(move |i| (kb, i)))
            .collect();
        for k in (1..order.len()).rev() {
            order.swap(k, rng.below(k as u64 + 1) as usize);
        }
        for (kb, ci) in order {
            let Some(threads) = run_load(&s.exe, &conds[ci], &args(kb))? else {
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
            writeln!(file, "{}", serde_json::to_string(&r)?)
                .map_err(Error::io("cannot write", &path))?;
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
pub(crate) fn sizes_of(records: &[Record]) -> Vec<u64> {
    let mut s: Vec<u64> = records.iter().map(|r| r.kb).collect();
    s.sort();
    s.dedup();
    s
}

/// The number of repeats the records cover.
pub(crate) fn repeats_of(records: &[Record]) -> usize {
    records.iter().map(|r| r.repeat).max().map_or(0, |m| m + 1)
}

/// The records of a previous study in `out`.
pub(crate) fn load_runs(out: &Path) -> Result<Vec<Record>> {
    let path = out.join("runs.jsonl");
    let text = std::fs::read_to_string(&path).map_err(Error::io_hint(
        "cannot read",
        &path,
        " (--from-runs needs a previous study in --out)",
    ))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| Error::ParseStudy {
                path: path.clone(),
                line: Some(i + 1),
                source,
            })
        })
        .collect()
}

/// Per (size, condition), per repeat: `f` of the run's threads.
pub(crate) type Table = BTreeMap<(u64, String), BTreeMap<usize, f64>>;

/// [`Table`] of `f` over the records.
pub(crate) fn table(records: &[Record], f: &dyn Fn(&[ThreadRun]) -> f64) -> Table {
    let mut t = Table::new();
    for r in records {
        t.entry((r.kb, r.condition.clone()))
            .or_default()
            .insert(r.repeat, f(&r.threads));
    }
    t
}

/// Mean and 95% half-width over repeats of `t`'s values at (`kb`, `cond`), each divided
/// by `unit`; NaN where it did not run.
pub(crate) fn over_repeats(t: &Table, kb: u64, cond: &str, unit: f64) -> (f64, f64) {
    t.get(&(kb, cond.to_string()))
        .map(|m| over_seeds(&m.values().map(|x| x / unit).collect::<Vec<_>>()))
        .unwrap_or((f64::NAN, f64::NAN))
}

/// `100 · (x / base − 1)` per repeat where both ran, over repeats.
pub(crate) fn paired(t: &Table, kb: u64, cond: &str, base: &str) -> (f64, f64) {
    let (Some(x), Some(b)) = (t.get(&(kb, cond.into())), t.get(&(kb, base.into()))) else {
        return (f64::NAN, f64::NAN);
    };
    let v: Vec<f64> = x
        .iter()
        .filter_map(|(r, x)| b.get(r).map(|b| 100.0 * (x / b - 1.0)))
        .collect();
    over_seeds(&v)
}

/// The plot of each of `conds`' change against `base` in `t`, paired by repeat, over
/// the working-set sizes, with its interval.
pub(crate) fn change_plot(
    title: &str,
    y_label: &str,
    conds: &[&str],
    sizes: &[u64],
    t: &Table,
    base: &str,
) -> String {
    let series: Vec<Series> = conds
        .iter()
        .map(|&c| {
            let xs: Vec<(f64, (f64, f64))> = sizes
                .iter()
                .map(|&kb| (kb as f64, paired(t, kb, c, base)))
                .collect();
            Series::with_intervals(c.to_string(), &xs)
        })
        .collect();
    line_chart(
        title,
        "working set per thread",
        y_label,
        &series,
        XAxis::Kib,
        None,
    )
}

/// The host as a line: CPU model and cache sizes from sysfs.
pub(crate) fn host_line() -> String {
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

/// Summary row of one (size, condition), a line of `results.json`.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    /// Working-set size per thread, KiB.
    pub(crate) kb: u64,
    /// The condition's label.
    pub(crate) condition: String,
    /// Mean and 95% half-width over repeats of the measured quantity.
    pub(crate) value: (f64, f64),
    /// Paired change against the reference condition, percent.
    pub(crate) change_pct: (f64, f64),
    /// Mean migrations per thread per run.
    pub(crate) migrations: f64,
}

/// A study's report: its Markdown, its rows and its plots (file name, SVG).
#[derive(Debug)]
pub(crate) struct Report {
    /// `report.md`, and the docs block.
    pub(crate) md: String,
    /// `results.json`.
    pub(crate) rows: Vec<Row>,
    /// Plots, by file name.
    pub(crate) plots: Vec<(&'static str, String)>,
}

/// Writes the report's files into `s.out` and, with [`Settings::docs`], the document's
/// block `study NAME`.
pub(crate) fn finish(study: &str, s: &Settings, report: &Report) -> Result<Outcome> {
    let out = &s.out;
    for (name, svg) in &report.plots {
        write_file(&out.join(name), svg)?;
    }
    write_file(&out.join("report.md"), &report.md)?;
    write_file(
        &out.join("results.json"),
        &serde_json::to_string_pretty(&report.rows)?,
    )?;
    println!("wrote {}", out.join("report.md").display());
    if let Some(doc) = &s.docs {
        let text = std::fs::read_to_string(doc).map_err(Error::io_hint(
            "cannot read",
            doc,
            " (--docs)",
        ))?;
        let text = crate::docs_block::replace(&text, &format!("study {study}"), &report.md)
            .within(|| format!("in '{}' (--docs)", doc.display()))?;
        write_file(doc, &text)?;
        println!("updated {}", doc.display());
    }
    Ok(Outcome::Reported)
}

/// A size in KiB as people write it.
pub(crate) fn kib(kb: u64) -> String {
    if kb >= 1024 && kb.is_multiple_of(1024) {
        format!("{} MiB", kb / 1024)
    } else if kb >= 1024 {
        format!("{:.1} MiB", kb as f64 / 1024.0)
    } else {
        format!("{kb} KiB")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record whose threads are `(steps per second, wall ms, migrations)`.
    pub(crate) fn record(
        study: &str,
        repeat: usize,
        kb: u64,
        condition: &str,
        threads: &[(f64, f64, u64)],
    ) -> Record {
        Record {
            study: study.into(),
            repeat,
            kb,
            condition: condition.into(),
            threads: threads
                .iter()
                .map(|&(rate, wall_ms, migrations)| ThreadRun {
                    steps: (rate * wall_ms / 1e3) as u64,
                    wall_ms,
                    steps_per_s: rate,
                    migrations: Some(migrations),
                    involuntary_switches: 0,
                    cpu_ms: wall_ms,
                })
                .collect(),
        }
    }

    /// The change is paired by repeat: a condition 10% slower than its base in every
    /// repeat is −10% with no spread although the repeats' rates differ fourfold (an
    /// unpaired interval would be wide), and a repeat only one side ran is left out
    /// (its rate of 1 would pull the change far off). Fails if the change is unpaired
    /// or takes in the lone repeat.
    #[test]
    fn paired_change_is_per_repeat() {
        let mut rs = Vec::new();
        for (rep, base) in [(0, 100.0), (1, 200.0), (2, 400.0)] {
            rs.push(record("s", rep, 64, "base", &[(base, 1.0, 0)]));
            rs.push(record("s", rep, 64, "x", &[(base * 0.9, 1.0, 0)]));
        }
        rs.push(record("s", 3, 64, "x", &[(1.0, 1.0, 0)]));
        let t = table(&rs, &|t| t[0].steps_per_s);
        let (m, h) = paired(&t, 64, "x", "base");
        // no spread: the interval is absent (all repeats alike) or nil
        assert!((m + 10.0).abs() < 1e-9 && !(h.abs() > 1e-9), "{m} ± {h}");
        let (m, _) = over_repeats(&t, 64, "base", 100.0);
        assert!((m - 7.0 / 3.0).abs() < 1e-9, "{m}");
        assert!(paired(&t, 128, "x", "base").0.is_nan());
        assert_eq!(repeats_of(&rs), 4);
        assert_eq!(sizes_of(&rs), vec![64]);
    }
}
