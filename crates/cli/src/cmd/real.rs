//! `cachesched real`: the real-program suite, its trace cache, recording.

use anyhow::{bail, Result};
use cachesched_lab::real::{
    cache_dir, ensure_in, installed_version, packages, program, record, Program, M, SUITE,
};
use clap::{Args, Subcommand};

/// `cachesched real …`.
#[derive(Subcommand, Debug)]
pub enum RealCommand {
    /// The suite: each program, its package, input, instruction window and whether
    /// its trace is in the cache.
    List,
    /// Record programs' traces into the cache (all of them with --all).
    Record(RecordArgs),
    /// Run a program whole under valgrind's exp-bbv and print its most representative
    /// window: of the windows starting at a multiple of the interval, the one whose
    /// basic-block vector is nearest the whole run's (SimPoint's rule with one point).
    Phases(PhasesArgs),
    /// The Debian packages the suite needs (valgrind, each program's package and what
    /// it requires), whether each is installed, and the apt-get line for the missing.
    Packages {
        /// Print only the missing packages' names, on one line (for
        /// `apt-get install -y $(cachesched real packages --missing)`).
        #[arg(long)]
        missing: bool,
    },
    /// Print where a program's trace is (or will be) in the cache; records nothing.
    Path {
        /// The program (`cachesched real list`).
        program: String,
    },
}

/// Arguments of `cachesched real record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Programs to record (`cachesched real list`).
    #[arg(value_name = "PROGRAM")]
    programs: Vec<String>,
    /// Record every program of the suite.
    #[arg(long)]
    all: bool,
    /// Record again even if the cache has a trace.
    #[arg(long)]
    force: bool,
}

/// Arguments of `cachesched real phases`.
#[derive(Args, Debug)]
pub struct PhasesArgs {
    /// The program (`cachesched real list`).
    program: String,
    /// Interval of the basic-block vectors, in millions of retired instructions
    /// (1-1000).
    #[arg(long, default_value_t = 10, value_name = "M", value_parser = clap::value_parser!(u64).range(1..=1000))]
    interval_m: u64,
    /// Window length, in millions of retired instructions (a multiple of the interval).
    #[arg(long, default_value_t = 200, value_name = "M", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    window_m: u64,
}

/// Runs `cachesched real …`.
pub fn run(c: RealCommand) -> Result<()> {
    let dir = cache_dir()?;
    match c {
        RealCommand::List => {
            println!("trace cache: {}", dir.display());
            println!(
                "{:10} {:11} {:>8} {:>8} {:>9}  what",
                "program", "package", "skip", "record", "cached"
            );
            for p in SUITE {
                let path = p.trace_path(&dir);
                let cached = std::fs::metadata(&path)
                    .map(|m| format!("{:.0} MB", m.len() as f64 / 1e6))
                    .unwrap_or_else(|_| "no".into());
                println!(
                    "{:10} {:11} {:>7}M {:>7}M {:>9}  {}",
                    p.name,
                    p.package,
                    p.window.skip / M,
                    p.window.length / M,
                    cached,
                    p.what
                );
            }
            println!("use: --mix real:NAME[:COUNT]; a missing trace is recorded on first use (needs valgrind and the package)");
            Ok(())
        }
        RealCommand::Phases(a) => {
            let p = program(&a.program)?;
            eprintln!(
                "running real:{} whole under valgrind --tool=exp-bbv (intervals of {} M instructions)",
                p.name, a.interval_m
            );
            let t0 = std::time::Instant::now();
            let (v, c) = cachesched_lab::real::phases(p, &dir, a.interval_m * M, a.window_m * M)?;
            println!(
                "real:{}: {:.1} M retired instructions in {} intervals of {} M ({:.0} s under exp-bbv)",
                p.name,
                v.total() as f64 / 1e6,
                v.intervals.len(),
                a.interval_m,
                t0.elapsed().as_secs_f64()
            );
            if v.others > 0 {
                println!(
                    "  of its thread {} (its busiest, {:.1} M in all); its other threads ran {:.1} M ({:.2}%), in no vector: every distance below is exact to within {:.4}",
                    v.thread,
                    v.thread_instructions as f64 / 1e6,
                    v.others as f64 / 1e6,
                    v.others_share() * 100.0,
                    v.distance_bound()
                );
            }
            println!(
                "distance of each {} M window from the whole run (Manhattan, normalised vectors), by start in thread {}'s instructions:",
                a.window_m, v.thread
            );
            for (i, d) in c.distances.iter().enumerate() {
                let mark = if i == c.start {
                    "  <- most representative"
                } else {
                    ""
                };
                println!("  {:>7} M  {d:.4}{mark}", i as u64 * a.interval_m);
            }
            if v.others > 0 {
                println!(
                    "in the recording's count (every thread's instructions, the others taken to run in step with thread {}; off by at most {:.1} M): skip {:.1} M",
                    v.thread,
                    v.others as f64 / 1e6,
                    c.stream_skip as f64 / 1e6
                );
            }
            println!(
                "window: skip {} M, record {} M retired instructions (distance {:.4}); the suite has skip {} M, record {} M ({:?})",
                c.stream_skip / M,
                a.window_m,
                c.distance(),
                p.window.skip / M,
                p.window.length / M,
                p.counting
            );
            Ok(())
        }
        RealCommand::Packages { missing } => {
            let list: Vec<_> = packages()
                .into_iter()
                .map(|(p, users)| (p, users, installed_version(p)))
                .collect();
            let absent: Vec<&str> = list
                .iter()
                .filter(|(_, _, v)| v.is_none())
                .map(|(p, _, _)| *p)
                .collect();
            if missing {
                println!("{}", absent.join(" "));
                return Ok(());
            }
            let width = |col: Vec<usize>| col.into_iter().max().unwrap_or(0) + 1;
            let wp = width(list.iter().map(|(p, _, _)| p.len()).collect());
            let wv = width(
                list.iter()
                    .map(|(_, _, v)| v.as_ref().map_or(2, String::len))
                    .collect(),
            );
            println!("{:wp$} {:wv$} needed by", "package", "installed");
            for (p, users, v) in &list {
                let v = v.as_deref().unwrap_or("no");
                println!("{p:wp$} {v:wv$} {}", users.join(", "));
            }
            if absent.is_empty() {
                println!("all {} installed", list.len());
            } else {
                println!(
                    "{} of {} missing: apt-get update && apt-get install -y {}",
                    absent.len(),
                    list.len(),
                    absent.join(" ")
                );
            }
            Ok(())
        }
        RealCommand::Path { program: name } => {
            println!("{}", program(&name)?.trace_path(&dir).display());
            Ok(())
        }
        RealCommand::Record(a) => {
            let programs: Vec<&Program> = if a.all {
                if !a.programs.is_empty() {
                    bail!("give program names or --all, not both");
                }
                SUITE.iter().collect()
            } else if a.programs.is_empty() {
                bail!("name the programs to record, or --all (`cachesched real list`)");
            } else {
                a.programs
                    .iter()
                    .map(|n| program(n))
                    .collect::<cachesched_lab::Result<_>>()?
            };
            for p in programs {
                if a.force {
                    record(p, &dir)?;
                } else if !ensure_in(p, &dir)?.1 {
                    // there already, or recorded by another process meanwhile
                    eprintln!("real:{} is in the cache (--force records it again)", p.name);
                }
            }
            Ok(())
        }
    }
}
