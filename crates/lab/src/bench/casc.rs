//! `cachesched bench casc`: CASC's decision cost — the PCMR linear solve and the
//! bucketization at 18, 100 and 1,000 threads, against the 10 ms slice the scheduler
//! decides for.

use super::median_secs;
use crate::error::Result;

/// Times the solve and the bucketization, `repeat` times each (the median counts), and
/// prints a row per thread count and case.
pub fn run(repeat: usize) -> Result<()> {
    use cachesched_core::SimRng;
    use cachesched_policies::casc::bucket::{bucketize, BucketParams};
    use cachesched_policies::casc::solve::{all_but_one, solve_pcmrs};
    let params = BucketParams {
        threshold: 15.0,
        growth: 1.25,
        min_threads_per_cpu: 1,
        step: 1.0,
        literal: true,
    };
    let slice = 10e-3;
    println!(
        "CASC decision cost (median of {} runs); share = cost / a 10 ms slice; the solve is\n\
         of an (n+1)x(n+1) system (niagara-2c: n = 8, as on its CPUs; all: n = threads - 1)\n",
        repeat
    );
    println!(
        "{:>7} {:<10} {:>5} {:>14} {:>11} {:>5} {:>14} {:>11}",
        "threads", "case", "n", "solve us", "share", "CPUs", "bucketize us", "share"
    );
    for threads in [18usize, 100, 1000] {
        // a third greedy, the rest frugal, with spread
        let mut rng = SimRng::new(threads as u64);
        let pcmrs: Vec<f64> = (0..threads)
            .map(|i| {
                if i % 3 == 0 {
                    25.0 + 10.0 * rng.unit()
                } else {
                    5.0 + 15.0 * rng.unit()
                }
            })
            .collect();
        for (label, n) in [("niagara-2c", 8usize), ("all", threads - 1)] {
            let rates: Vec<f64> = (0..=n)
                .map(|i| {
                    let s: f64 = (0..=n).filter(|&j| j != i).map(|j| pcmrs[j]).sum();
                    s / n as f64
                })
                .collect();
            let eqs = all_but_one(n, &rates);
            let solve = median_secs(repeat, || {
                std::hint::black_box(solve_pcmrs(n + 1, &eqs).expect("square system"));
            });
            let cpus = n.min(64);
            let buck = median_secs(repeat, || {
                std::hint::black_box(bucketize(&pcmrs, cpus, &params));
            });
            println!(
                "{threads:>7} {label:<10} {n:>5} {:>14.1} {:>10.3}% {cpus:>5} {:>14.1} {:>10.3}%",
                solve * 1e6,
                100.0 * solve / slice,
                buck * 1e6,
                100.0 * buck / slice
            );
        }
    }
    Ok(())
}
