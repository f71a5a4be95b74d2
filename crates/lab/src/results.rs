//! A scenario's results as one typed table: each run's job (variant, sweep point,
//! seed) beside its result, with the selections every report makes — a variant's runs,
//! at a sweep point, and a metric's values over them.

use crate::metrics::metric;
use crate::scenario::Job;
use cachesched_sim::RunResult;

/// The runs of a scenario: `jobs[i]` made `runs[i]`.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    jobs: &'a [Job],
    runs: &'a [RunResult],
}

impl<'a> Table<'a> {
    /// The table of `jobs` and their results `runs` (the same length, in order).
    pub fn new(jobs: &'a [Job], runs: &'a [RunResult]) -> Table<'a> {
        debug_assert_eq!(jobs.len(), runs.len());
        Table { jobs, runs }
    }

    /// Every run with its job.
    pub fn rows(&self) -> impl Iterator<Item = (&'a Job, &'a RunResult)> + 'a {
        self.jobs.iter().zip(self.runs)
    }

    /// The runs of variant `v` (every sweep point and seed).
    pub fn of_variant(&self, v: usize) -> impl Iterator<Item = (&'a Job, &'a RunResult)> + 'a {
        self.rows().filter(move |(j, _)| j.variant == v)
    }

    /// The runs of variant `v` at sweep point `p` (`None`: a scenario without a sweep).
    pub fn at(&self, v: usize, p: Option<u64>) -> impl Iterator<Item = &'a RunResult> + 'a {
        self.rows()
            .filter(move |(j, _)| j.variant == v && j.llc_kb == p)
            .map(|(_, r)| r)
    }

    /// Metric `m` of the runs of variant `v` at sweep point `p`, with each run's seed.
    pub fn by_seed(
        &self,
        v: usize,
        p: Option<u64>,
        m: &'a str,
    ) -> impl Iterator<Item = (u64, f64)> + 'a {
        self.rows()
            .filter(move |(j, _)| j.variant == v && j.llc_kb == p)
            .map(move |(j, r)| (j.seed, metric(r, m).expect("known metric")))
    }

    /// Metric `m` (a known one, [`crate::metrics::METRICS`]) of the runs of variant `v`
    /// at sweep point `p`, one value per seed.
    pub fn values(&self, v: usize, p: Option<u64>, m: &str) -> Vec<f64> {
        self.at(v, p)
            .map(|r| metric(r, m).expect("known metric"))
            .collect()
    }
}

/// Runs made by hand for the laboratory's tests.
#[cfg(test)]
pub(crate) mod fixture {
    use cachesched_core::Counters;
    use cachesched_sim::result::ThreadResult;
    use cachesched_sim::RunResult;
    use std::collections::BTreeMap;

    /// A run of `seed` with a window of `measured_ms` and one thread per `(name,
    /// counters)`, ids and processes in order, each with half the window on a CPU and
    /// 10 slices; every other field empty.
    pub(crate) fn run(seed: u64, measured_ms: f64, threads: &[(&str, Counters)]) -> RunResult {
        let threads = threads
            .iter()
            .enumerate()
            .map(|(i, (name, counters))| ThreadResult {
                id: i as u32,
                name: name.to_string(),
                process: i as u32,
                counters: *counters,
                cpu_share: 0.5,
                exited: false,
                sharing_group: None,
                slices: 10,
                solo_ips: None,
                segment_start_ms: None,
                segment_ms: None,
                segment_window_instructions: None,
                slice_profile: Vec::new(),
            })
            .collect();
        RunResult {
            seed,
            machine: "fixture".into(),
            baseline: "cfs".into(),
            policy: "none".into(),
            measured_ms,
            totals: Default::default(),
            ips: 0.0,
            l2_miss_ratio: 0.0,
            llc_mpki: 0.0,
            cpu_share_cv: 0.0,
            bus_utilization: 0.0,
            bus_transfers: 0,
            prefetches: Default::default(),
            bus_transfer_cycles: 0.0,
            bus_mean_wait_cycles: 0.0,
            threads,
            cpus: Vec::new(),
            kernel: Default::default(),
            policy_stats: BTreeMap::new(),
            policy_vectors: BTreeMap::new(),
            timeline: Vec::new(),
        }
    }
}
