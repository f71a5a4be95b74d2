//! The benchmarks (`cachesched bench …`): speed and cost measured on this machine,
//! each reported beside what it is compared with — a reference run side by side
//! (another build, cachegrind itself), or the period a decision must fit in — never as
//! a bare time. They print their tables to standard output.
//!
//! - [`engine`]: the whole simulated machine per preset, and its scaling with threads
//!   and CPUs;
//! - [`workloads`]: the workload generators against the cache model and the machine;
//! - [`replay`]: trace replay against cachegrind on the same program, and the
//!   recording's reader against lackey;
//! - [`casc`], [`cachefair`]: the schedulers' decision cost against their slice or tick;
//! - [`daemon`]: the Linux daemon's own CPU time and decision latency.

pub mod cachefair;
pub mod casc;
pub mod daemon;
pub mod engine;
pub mod replay;
pub mod workloads;

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A benchmark's scratch directory under the system's temporary directory (traces,
/// cachegrind's output, results of the runs it compares), removed when dropped, also
/// when the benchmark fails.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// Creates this process's scratch directory.
    pub(crate) fn new() -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("cachesched-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(Error::io("cannot create", &dir))?;
        Ok(Scratch(dir))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Median wall time of `f` over `repeat` calls (at least one), in seconds.
pub(crate) fn median_secs(repeat: usize, mut f: impl FnMut()) -> f64 {
    median(
        (0..repeat.max(1))
            .map(|_| {
                let t0 = Instant::now();
                f();
                t0.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

/// The median of `v` (the upper one of an even count); `v` must not be empty.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The `p` quantile (0 to 1) of `sorted`, nearest rank; 0 if it is empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The median is the middle of the sorted values (the upper middle of an even
    /// count), and a percentile the nearest rank. Fails if the values are not sorted
    /// first or the rank is off by one.
    #[test]
    fn median_and_percentile_by_rank() {
        assert_eq!(median(vec![5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        let s: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(percentile(&s, 0.5), 51.0);
        assert_eq!(percentile(&s, 0.99), 100.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
