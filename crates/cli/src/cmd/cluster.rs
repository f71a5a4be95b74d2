//! `--executor` and its Slurm options (shared by `experiment` and `reproduce`), and
//! `cachesched run-batch`, what each Slurm array task runs.

use anyhow::Result;
use cachesched_lab::slurm::{self, Executor, SlurmSettings};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Where runs are made: locally or as Slurm job arrays.
#[derive(Args, Debug, Clone)]
pub struct ExecutorArgs {
    /// `local` (worker threads here, --jobs) or `slurm` (the runs the run cache lacks
    /// as one `sbatch --array` job; the run cache, --slurm-dir and this binary must be
    /// on a filesystem every node sees at the same path; docs/cluster.md).
    #[arg(long, value_name = "EXECUTOR", default_value = "local", value_parser = ["local", "slurm"])]
    executor: String,
    /// The shared directory of the Slurm executor's manifests and task logs (default:
    /// `slurm` beside the run cache).
    #[arg(long, value_name = "DIR")]
    slurm_dir: Option<PathBuf>,
    /// More arguments for sbatch, split at spaces (no quoting), e.g.
    /// `--slurm-args "--partition=long --account=arch --time=02:00:00"`.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    slurm_args: Option<String>,
    /// Runs per array task, 1 to 100,000 (default: sized from each machine's speed
    /// measured here, to about --slurm-task-minutes per task).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    runs_per_task: Option<u64>,
    /// Worker minutes per array task when tasks are sized by cost, 1 to 1,440
    /// (default 10).
    #[arg(long, value_name = "MIN")]
    slurm_task_minutes: Option<f64>,
    /// Return as soon as the array is submitted; the same command run again reads
    /// what has landed (waiting for the job while it runs) and submits only what is
    /// missing.
    #[arg(long)]
    detach: bool,
    /// Seconds between two looks at squeue and the run cache while waiting, 0.2 to 600
    /// (default 5).
    #[arg(long, value_name = "SECS")]
    slurm_poll_s: Option<f64>,
    /// Cores per node of the cluster, 1 to 4,096, for `--plan`'s estimate of the wall
    /// time on 1, 4, 16 and 64 nodes (default 32).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    slurm_node_cores: Option<u64>,
}

impl ExecutorArgs {
    /// Checks the options and sets the process's executor.
    pub fn apply(&self) -> Result<()> {
        let slurm_only = self.slurm_dir.is_some()
            || self.slurm_args.is_some()
            || self.runs_per_task.is_some()
            || self.slurm_node_cores.is_some()
            || self.slurm_task_minutes.is_some()
            || self.slurm_poll_s.is_some()
            || self.detach;
        if self.executor == "local" {
            if slurm_only {
                anyhow::bail!(
                    "--slurm-dir, --slurm-args, --runs-per-task, --slurm-task-minutes, --slurm-poll-s, \
                 --slurm-node-cores and --detach are options of --executor slurm: add \
                 --executor slurm, or leave them out"
                );
            }
            slurm::set_executor(Executor::Local);
            return Ok(());
        }
        let task_minutes = self.slurm_task_minutes.unwrap_or(10.0);
        if !(1.0..=1440.0).contains(&task_minutes) {
            anyhow::bail!("--slurm-task-minutes {task_minutes}: give 1 to 1,440 minutes");
        }
        let poll_s = self.slurm_poll_s.unwrap_or(5.0);
        if !(0.2..=600.0).contains(&poll_s) {
            anyhow::bail!("--slurm-poll-s {poll_s}: give 0.2 to 600 seconds");
        }
        let dir = match &self.slurm_dir {
            Some(d) => d.clone(),
            None => cachesched_lab::caches::runs::cache_dir()?
                .parent()
                .map(|p| p.join("slurm"))
                .unwrap_or_else(|| PathBuf::from("slurm")),
        };
        slurm::set_executor(Executor::Slurm(SlurmSettings {
            dir,
            sbatch_args: self
                .slurm_args
                .as_deref()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            runs_per_task: self.runs_per_task.map(|n| n as usize),
            task_minutes,
            detach: self.detach,
            poll: Duration::from_secs_f64(poll_s),
            binary: std::env::current_exe()?,
            node_cores: self.slurm_node_cores.unwrap_or(32) as usize,
        }));
        Ok(())
    }
}

/// Arguments of `cachesched run-batch`.
#[derive(Args, Debug)]
pub struct RunBatchArgs {
    /// The manifest the submitting command wrote.
    #[arg(value_name = "MANIFEST")]
    manifest: PathBuf,
    /// The array task's index ($SLURM_ARRAY_TASK_ID).
    #[arg(value_name = "INDEX")]
    index: usize,
}

/// `cachesched run-batch`.
pub fn run_batch(a: RunBatchArgs) -> Result<i32> {
    slurm::run_batch(&a.manifest, a.index)?;
    Ok(0)
}
