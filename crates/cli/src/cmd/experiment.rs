//! `cachesched experiment`: a scenario file's runs, results, plots and report.

use anyhow::Result;
use cachesched_lab::experiment::{load, plan_file, run_scenario};
use cachesched_lab::runner::{fill_run_cache, parse_jobs};
use clap::Args;
use std::path::PathBuf;

/// Arguments of `cachesched experiment`.
#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// Scenario file (TOML).
    scenario: PathBuf,
    /// Output directory (default: results/NAME, NAME being the scenario's).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Parallel runs, 1 to 1,024 (default: number of CPUs; never more than the runs).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
    #[command(flatten)]
    exec: super::cluster::ExecutorArgs,
}

/// `cachesched experiment`.
pub fn run(a: ExperimentArgs) -> Result<i32> {
    a.exec.apply()?;
    let mut sc = load(&a.scenario)?;
    // the runs of a file, as it says (seeds are added one at a time by `reproduce`)
    sc.every_seed();
    let out = match &a.out {
        Some(o) => o.clone(),
        None => PathBuf::from("results")
            .join(cachesched_lab::files::component(&sc.name, "scenario name")?),
    };
    let planned = plan_file(&sc, &a.scenario)?;
    // an unusable output directory is said before the runs, not after them
    for p in &planned {
        cachesched_lab::files::check_writable_dir(&p.out(&out))?;
    }
    if fill_run_cache(&planned, a.jobs)?.is_none() {
        return Ok(cachesched_lab::runner::halt_code());
    }
    for p in planned {
        let dir = p.out(&out);
        if run_scenario(&p.sc, p.jobs, &dir, a.jobs)?.is_none() {
            return Ok(cachesched_lab::runner::halt_code());
        }
    }
    Ok(0)
}
