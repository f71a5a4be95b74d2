//! `cachesched run`: cache-aware policies on real Linux processes.

use anyhow::{bail, Context, Result};
use cachesched_core::Policy;
use cachesched_core::ThreadClass;
use cachesched_linux::classes::ClassRule;
use cachesched_linux::daemon::{Daemon, DaemonConfig, SamplingEventChoice, StatsRecord, Target};
use cachesched_linux::session::{self, restore_notes, Event, Session};
use cachesched_linux::{journal, procfs, sched};
use cachesched_policies::{build_policy, Chain, PolicySpec};
use clap::Args;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `cachesched run` (its manual is the subcommand's doc in main.rs).
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Policy as name or name:key=value,…; repeat to chain several (masks intersect,
    /// later slices and nice values win).
    #[arg(long = "policy", value_name = "SPEC", required = true)]
    policies: Vec<String>,
    /// Manage this existing process (all its threads); repeat for several.
    #[arg(long = "pid", value_name = "PID", conflicts_with_all = ["cgroup", "command"])]
    pids: Vec<i32>,
    /// With --pid: do not follow the processes' children.
    #[arg(long, requires = "pids")]
    no_children: bool,
    /// Manage every thread of this cgroup directory (v1 `tasks` or v2
    /// `cgroup.threads`), e.g. /sys/fs/cgroup/cpu/batch.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    cgroup: Option<PathBuf>,
    /// How often /proc is scanned for threads that started or exited, milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 20.0)]
    scan_ms: f64,
    /// Most of one CPU, percent, spent re-reading thread states before the ticks of a
    /// policy that reads them (affinity); with many threads each state is then re-read
    /// less often than every tick (the stats line shows how often).
    #[arg(long, value_name = "PCT", default_value_t = 0.4)]
    state_budget_pct: f64,
    /// Print a stats line every SECS seconds (to stderr); default: none until the final
    /// one at the end.
    #[arg(long = "stats", value_name = "SECS")]
    stats_secs: Option<f64>,
    /// Write machine-readable stats to FILE as JSON lines: the resolved configuration
    /// first, then one record per --stats interval, then a final record.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Stop after this many seconds (restoring everything); default: until the command
    /// or the processes exit, or a signal.
    #[arg(long, value_name = "SECS")]
    duration_s: Option<f64>,
    /// How much a policy's boost lowers a thread's nice value.
    #[arg(long, value_name = "N", default_value_t = 10)]
    boost_nice: i32,
    /// Do not open per-thread counters for stats (policies still get those they need).
    #[arg(long)]
    no_stats_counters: bool,
    /// Record every change in FILE before making it, so that `cachesched restore FILE`
    /// can undo them if cachesched is killed with SIGKILL (removed after a clean end).
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Give threads a class (cache-fair or best-effort, for the cachefair policy):
    /// CLASS=pid:N, CLASS=comm:GLOB (the thread's or its process's command name) or
    /// CLASS=cgroup:DIR; repeat for several, the first that matches wins.
    #[arg(long = "class", value_name = "CLASS=MATCH")]
    classes: Vec<ClassRule>,
    /// Seed of the policies' random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The event address samples come from, for a policy that sets a sampling period:
    /// `discover` (the host's precise memory-load event: Intel mem-loads, AMD IBS) or
    /// `page-faults` (for testing the sampling path on hosts without a PMU; page faults
    /// are not remote-cache accesses, so a policy's decisions from them mean nothing).
    #[arg(long, value_name = "EVENT", default_value = "discover", value_parser = ["discover", "page-faults"])]
    sampling_event: String,
    /// Count COUNTER with a perf event named as `perf stat -e` names it:
    /// `remote_accesses=cpu/event=0xd3,umask=0x08/` (a PMU's terms, placed by its sysfs
    /// format files; a named event of its `events/` directory expands) or
    /// `remote_accesses=r08d3` (raw, core PMU). For the model-specific counters the
    /// backend has no event for (remote-cache accesses and stalls: take the event codes
    /// from the CPU's documentation or `perf list`); repeat for several.
    #[arg(long = "counter-event", value_name = "COUNTER=EVENT")]
    counter_events: Vec<String>,
    /// Testing aid: panic after this many milliseconds (to check restore on panic).
    #[arg(long, value_name = "MS", hide = true)]
    debug_panic_after_ms: Option<u64>,
    /// The command to launch and manage, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The resolved configuration, written first into --json.
#[derive(Serialize)]
struct Resolved<'a> {
    seed: u64,
    policies: &'a [PolicySpec],
    target: &'a Target,
    command: &'a [String],
    daemon: &'a DaemonConfig,
    stats_secs: Option<f64>,
    duration_s: Option<f64>,
    counters: Vec<&'static str>,
    kernel_honours_slices: Option<bool>,
}

/// A JSON-lines record.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Record<'a> {
    Config(Resolved<'a>),
    Stats(&'a StatsRecord),
    Final {
        stats: &'a StatsRecord,
        restored: usize,
        gone: usize,
        /// Settings the program changed itself after cachesched did: left as it set them.
        kept: usize,
        /// Threads still being created when the stop gave up rescanning.
        unsettled: usize,
        failed: usize,
        exit_code: i32,
        stopped_by: &'a str,
    },
}

fn positive(v: Option<f64>, flag: &str) -> Result<()> {
    if let Some(v) = v {
        if !(v > 0.0 && v.is_finite()) {
            bail!("{flag} must be a positive number of seconds, got {v}");
        }
    }
    Ok(())
}

/// `cachesched run`.
pub fn run(a: RunArgs) -> Result<i32> {
    positive(a.stats_secs, "--stats")?;
    positive(a.duration_s, "--duration-s")?;
    if !(a.scan_ms > 0.0 && a.scan_ms.is_finite()) {
        bail!("--scan-ms must be a positive number of milliseconds");
    }
    if !(a.state_budget_pct > 0.0 && a.state_budget_pct <= 100.0) {
        bail!("--state-budget-pct must be a percentage of one CPU above 0 and at most 100");
    }
    let target = if !a.pids.is_empty() {
        Target::Processes {
            pids: a.pids.clone(),
            children: !a.no_children,
        }
    } else if let Some(dir) = &a.cgroup {
        Target::Cgroup(dir.clone())
    } else if !a.command.is_empty() {
        Target::Descendants
    } else {
        bail!("nothing to manage: give a command after `--`, --pid PID or --cgroup DIR");
    };
    // a process or cgroup that does not exist is said before anything else is printed
    target.check()?;
    for r in &a.classes {
        r.check()?;
    }
    let specs = a
        .policies
        .iter()
        .map(|s| PolicySpec::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let classes_used = specs.iter().any(PolicySpec::uses_classes);
    let cachefair = specs.iter().any(|s| matches!(s, PolicySpec::Cachefair(_)));
    if cachefair && !a.classes.iter().any(|r| r.class == ThreadClass::CacheFair) {
        bail!("policy cachefair needs threads of the cache-fair class: give --class cache-fair=MATCH (pid:N, comm:GLOB or cgroup:DIR), and --class best-effort=MATCH for the threads it may take CPU time from");
    }
    let policy: Box<dyn Policy> = if specs.len() == 1 {
        build_policy(&specs[0])
    } else {
        Box::new(Chain::new(specs.iter().map(build_policy).collect()))
    };
    let host = cachesched_linux::read_host_topology()
        .context("cannot read this host's topology from sysfs")?;
    let config = DaemonConfig {
        scan_ms: a.scan_ms,
        state_budget_pct: a.state_budget_pct,
        boost_nice: a.boost_nice,
        stats_counters: !a.no_stats_counters,
        seed: a.seed,
        journal: a.journal.clone(),
        classes: a.classes.clone(),
        counter_events: a
            .counter_events
            .iter()
            .map(|spec| {
                cachesched_linux::events::parse_mapping(
                    spec,
                    &cachesched_linux::events::sysfs_pmus(),
                )
                .with_context(|| format!("--counter-event {spec}"))
            })
            .collect::<Result<_>>()?,
    };
    eprintln!(
        "cachesched run: policy {} on {}; seed {}",
        policy.name(),
        match &target {
            Target::Descendants => format!("`{}` and its children", a.command.join(" ")),
            Target::Processes { pids, children } => format!(
                "process(es) {pids:?}{}",
                if *children { " and their children" } else { "" }
            ),
            Target::Cgroup(d) => format!("cgroup {}", d.display()),
        },
        a.seed
    );
    for w in &host.warnings {
        eprintln!("  topology: {w}");
    }
    if specs.iter().any(|s| {
        matches!(s, PolicySpec::Cachefair(c) if c.mechanism == cachesched_policies::cachefair::Mechanism::Slice)
    }) {
        eprintln!("warning: cachefair:mechanism=slice on Linux: a slice does not change a thread's share of the CPU here (CFS/EEVDF), only how long it runs at a time; mechanism=weight (the default, auto) compensates through nice values");
    }
    if !a.classes.is_empty() && !classes_used {
        eprintln!(
            "warning: --class has no effect: no policy given uses thread classes (cachefair does; demo with cache_fair_nice or best_effort_nice)"
        );
    }
    let honours = sched::kernel_honours_slices();
    if honours == Some(false) && specs.iter().any(|s| matches!(s, PolicySpec::Timeslice(_))) {
        eprintln!("warning: this kernel is older than 6.12 and ignores per-task slices set with sched_setattr; the timeslice policy will have no effect");
    }
    session::prepare(&target)?;
    let sampling = match a.sampling_event.as_str() {
        "page-faults" => SamplingEventChoice::PageFaults,
        _ => SamplingEventChoice::Discover,
    };
    let d = Daemon::start_with(host, policy, target.clone(), config.clone(), sampling)?;
    let mut json = match &a.json {
        Some(p) => {
            cachesched_lab::files::write_file(p, "")?;
            let f = std::fs::OpenOptions::new()
                .append(true)
                .open(p)
                .with_context(|| format!("cannot open '{}'", p.display()))?;
            Some(std::io::BufWriter::new(f))
        }
        None => None,
    };
    let mut emit = |r: &Record<'_>| -> std::io::Result<()> {
        if let Some(w) = json.as_mut() {
            serde_json::to_writer(&mut *w, r)?;
            writeln!(w)?;
            w.flush()?;
        }
        Ok(())
    };
    emit(&Record::Config(Resolved {
        seed: a.seed,
        policies: &specs,
        target: &target,
        command: &a.command,
        daemon: &config,
        stats_secs: a.stats_secs,
        duration_s: a.duration_s,
        counters: d.counter_kinds().iter().map(|k| k.name()).collect(),
        kernel_honours_slices: honours,
    }))?;
    // one line about counters: what the kernel offers, what is missing and why, and
    // what was opened for every managed thread
    eprintln!(
        "{}; opened per thread: {}",
        session::counter_line(),
        if d.counter_kinds().is_empty() {
            "none".to_string()
        } else {
            d.counter_kinds()
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let session = Session {
        command: a.command.clone(),
        duration: a.duration_s.map(Duration::from_secs_f64),
        stats_every: a.stats_secs.map(Duration::from_secs_f64),
        panic_after: a.debug_panic_after_ms.map(Duration::from_millis),
    };
    let end = session::run(d, &target, &session, |ev| {
        match ev {
            Event::Stats(rec) => {
                eprintln!("{}", rec.line());
                emit(&Record::Stats(rec))?;
            }
            Event::Warning(w) => eprintln!("warning: {w}"),
        }
        Ok(())
    })?;
    let (last, rep, code) = (&end.last, &end.report, end.exit_code);
    eprintln!("final: {}", last.line());
    eprintln!(
        "stopped ({}); restored the settings of {} thread(s), {} had exited{}",
        end.stopped_by,
        rep.restored,
        rep.gone,
        restore_notes(rep)
    );
    for (tid, e) in &rep.failed {
        eprintln!("  thread {tid}: {e}");
    }
    if let Some(pid) = end.left_running {
        eprintln!("the command (pid {pid}) keeps running, no longer managed");
    }
    emit(&Record::Final {
        stats: last,
        restored: rep.restored,
        gone: rep.gone,
        kept: rep.kept,
        unsettled: rep.unsettled,
        failed: rep.failed.len(),
        exit_code: code,
        stopped_by: &end.stopped_by,
    })?;
    if !rep.failed.is_empty() {
        bail!(
            "{} thread(s) could not be restored (listed above)",
            rep.failed.len()
        );
    }
    Ok(code)
}

/// Arguments of `cachesched restore`.
#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The journal file a `cachesched run --journal FILE` left behind.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Also reset the threads of this process (repeatable) that the journal does not
    /// name (born after its last line): each setting that has a value cachesched set on
    /// the process's other threads gets their original back.
    #[arg(long, value_name = "PID")]
    pid: Vec<i32>,
    /// As --pid, for every thread in this cgroup directory.
    #[arg(long, value_name = "DIR")]
    cgroup: Option<PathBuf>,
}

/// `cachesched restore`.
pub fn restore(a: RestoreArgs) -> Result<i32> {
    for &pid in &a.pid {
        procfs::tasks(pid)
            .with_context(|| format!("--pid {pid}: no such process (check the value)"))?;
    }
    if let Some(dir) = &a.cgroup {
        procfs::cgroup_threads(dir).with_context(|| {
            format!(
                "--cgroup {}: not a readable cgroup directory",
                dir.display()
            )
        })?;
    }
    // the targets' threads now (listed again while new ones appear)
    let list = || {
        let mut v: Vec<(i32, i32)> = Vec::new();
        for &pid in &a.pid {
            let tids = procfs::tasks(pid).unwrap_or_default();
            v.extend(tids.into_iter().map(|t| (t, pid)));
        }
        if let Some(dir) = &a.cgroup {
            let tids = procfs::cgroup_threads(dir).unwrap_or_default();
            v.extend(
                tids.into_iter()
                    .filter_map(|t| procfs::tgid_of(t).ok().map(|p| (t, p))),
            );
        }
        v
    };
    let swept = !a.pid.is_empty() || a.cgroup.is_some();
    let list: &dyn Fn() -> Vec<(i32, i32)> = &list;
    let r = journal::restore_file(&a.file, swept.then_some(list))?;
    println!(
        "restored the settings of {} thread(s); {} had exited{}{}",
        r.report.restored,
        r.report.gone - r.reused,
        if r.reused > 0 {
            format!(
                ", {} thread id(s) now name other threads and were left alone",
                r.reused
            )
        } else {
            String::new()
        },
        restore_notes(&r.report)
    );
    if swept {
        println!(
            "{} thread(s) the journal did not name had settings cachesched set on their process and were reset",
            r.swept
        );
    }
    if r.cut_last_line {
        println!("the last line was cut short (the run was killed writing it, before the change it announced): ignored");
    }
    for (line, why) in &r.invalid {
        eprintln!(
            "  {}:{line}: not a cachesched journal line ({why}); skipped",
            a.file.display()
        );
    }
    for (tid, why) in &r.refused {
        eprintln!("  thread {tid}: not changed: {why}");
    }
    for (tid, e) in &r.report.failed {
        eprintln!("  thread {tid}: {e}");
    }
    let problems = r.invalid.len() + r.refused.len() + r.report.failed.len();
    if problems > 0 {
        bail!(
            "{} invalid line(s), {} refused entr(ies), {} failure(s): every other entry was restored; {} is kept",
            r.invalid.len(),
            r.refused.len(),
            r.report.failed.len(),
            a.file.display()
        );
    }
    Ok(0)
}
