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
