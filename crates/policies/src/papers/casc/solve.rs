//! Estimating partial-cache miss rates (PCMRs) from group miss rates (CASC §4.2).
//!
//! CASC assumes the miss rate of threads co-running on a shared cache is the average of
//! their PCMRs (Formula 1). Each observed group gives one linear equation
//! Σ_{j ∈ group} x_j = |group| · rate. The initial measurement observes the n + 1 rows of
//! the "all but one" assignment matrix, a square system with a unique solution; repeated
//! or extra observations make it overdetermined, solved in the least-squares sense.

use nalgebra::{DMatrix, DVector};
use thiserror::Error;

/// A duration-weighted average.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Weighted {
    sum: f64,
    weight: f64,
}

impl Weighted {
    /// Adds `x` with weight `w`.
    pub fn add(&mut self, x: f64, w: f64) {
        self.sum += x * w;
        self.weight += w;
    }

    /// Total weight.
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// The weighted mean (`None` before any weight).
    pub fn mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.sum / self.weight)
    }
}

/// One observation: the threads `members` (indices of unknowns) co-ran with group miss
/// rate `rate`.
#[derive(Debug, Clone, PartialEq)]
pub struct Equation {
    /// Indices of the co-running threads.
    pub members: Vec<usize>,
    /// Their group miss rate.
    pub rate: f64,
}

/// How the system was solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Square and well conditioned: LU decomposition.
    Lu,
    /// Overdetermined, repeated rows or ill conditioned: least squares (SVD).
    LeastSquares,
}

/// The estimated PCMRs.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// One PCMR per unknown.
    pub pcmrs: Vec<f64>,
    /// How they were obtained.
    pub method: Method,
    /// Root-mean-square residual of the group equations, in miss-rate units.
    pub rms_residual: f64,
    /// Ratio of the largest to the smallest singular value.
    pub condition: f64,
}

/// Why the PCMRs could not be determined.
#[derive(Debug, Error, PartialEq)]
pub enum SolveError {
    /// No observations.
    #[error("no group observations to solve")]
    Empty,
    /// An equation names a thread outside `0..unknowns` or has no members.
    #[error("equation {0} is malformed (no members or a member out of range)")]
    Malformed(usize),
    /// The observations do not determine every PCMR.
    #[error("the observed groups determine only {rank} of {unknowns} PCMRs")]
    Underdetermined {
        /// Rank of the system.
        rank: usize,
        /// Number of unknowns.
        unknowns: usize,
    },
}

/// Condition number above which a square system is solved as least squares.
const ILL_CONDITIONED: f64 = 1e8;

/// Solves the group equations for `unknowns` PCMRs.
pub fn solve_pcmrs(unknowns: usize, eqs: &[Equation]) -> Result<Solution, SolveError> {
    if eqs.is_empty() || unknowns == 0 {
        return Err(SolveError::Empty);
    }
    let mut a = DMatrix::<f64>::zeros(eqs.len(), unknowns);
    let mut b = DVector::<f64>::zeros(eqs.len());
    for (i, e) in eqs.iter().enumerate() {
        if e.members.is_empty() || e.members.iter().any(|&j| j >= unknowns) {
            return Err(SolveError::Malformed(i));
        }
        for &j in &e.members {
            a[(i, j)] += 1.0;
        }
        b[i] = e.members.len() as f64 * e.rate;
    }
    let svd = a.clone().svd(true, true);
    let sv = &svd.singular_values;
    let smax = sv.max();
    let eps = smax * 1e-10 * eqs.len().max(unknowns) as f64;
    let rank = sv.iter().filter(|&&s| s > eps).count();
    if rank < unknowns {
        return Err(SolveError::Underdetermined { rank, unknowns });
    }
    let smin = sv.iter().copied().fold(f64::INFINITY, f64::min);
    let condition = smax / smin;
    let (x, method) = match (eqs.len() == unknowns && condition < ILL_CONDITIONED)
        .then(|| a.clone().lu().solve(&b))
        .flatten()
    {
        Some(x) => (x, Method::Lu),
        None => (
            svd.solve(&b, eps)
                .map_err(|_| SolveError::Underdetermined { rank, unknowns })?,
            Method::LeastSquares,
        ),
    };
    let r = &a * &x - &b;
    // residual per equation in rate units (divide by group size)
    let rms = (eqs
        .iter()
        .zip(r.iter())
        .map(|(e, ri)| (ri / e.members.len() as f64).powi(2))
        .sum::<f64>()
        / eqs.len() as f64)
        .sqrt();
    Ok(Solution {
        pcmrs: x.iter().copied().collect(),
        method,
        rms_residual: rms,
        condition,
    })
}

/// The "all but one" assignment matrix of CASC's initial measurement for `n` CPUs and
/// `n + 1` threads: row `i` runs every thread except thread `i`.
pub fn all_but_one(n: usize, rates: &[f64]) -> Vec<Equation> {
    (0..=n)
        .zip(rates)
        .map(|(i, &rate)| Equation {
            members: (0..=n).filter(|&j| j != i).collect(),
            rate,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates_of(truth: &[f64], eqs: &mut [Equation]) {
        for e in eqs.iter_mut() {
            e.rate = e.members.iter().map(|&j| truth[j]).sum::<f64>() / e.members.len() as f64;
        }
    }

    #[test]
    fn recovers_pcmrs_from_the_assignment_matrix() {
        let truth = [30.0, 12.0, 15.0, 31.0, 9.0, 11.0, 28.0, 14.0, 16.0];
        let n = truth.len() - 1;
        let mut eqs = all_but_one(n, &vec![0.0; n + 1]);
        rates_of(&truth, &mut eqs);
        let s = solve_pcmrs(n + 1, &eqs).unwrap();
        assert_eq!(s.method, Method::Lu);
        for (x, t) in s.pcmrs.iter().zip(truth) {
            assert!((x - t).abs() < 1e-9, "{x} vs {t}");
        }
        assert!(s.rms_residual < 1e-9);
    }

    #[test]
    fn repeated_rows_use_least_squares_and_average_noise() {
        let truth = [20.0, 5.0, 10.0];
        let mut eqs = all_but_one(2, &[0.0; 3]);
        rates_of(&truth, &mut eqs);
        // the same rows observed again with opposite noise
        let mut noisy = eqs.clone();
        for (e, sign) in noisy.iter_mut().zip([1.0, -1.0, 1.0]) {
            e.rate += sign;
        }
        let mut twice = noisy.clone();
        for (e, sign) in twice.iter_mut().zip([1.0, -1.0, 1.0]) {
            e.rate -= 2.0 * sign;
        }
        noisy.extend(twice);
        let s = solve_pcmrs(3, &noisy).unwrap();
        assert_eq!(s.method, Method::LeastSquares);
        for (x, t) in s.pcmrs.iter().zip(truth) {
            assert!((x - t).abs() < 1e-9, "{x} vs {t}");
        }
        assert!(s.rms_residual > 0.5, "noise shows in the residual");
    }

    #[test]
    fn underdetermined_and_malformed_are_errors() {
        // every row contains both threads: their split is unknown
        let eqs = vec![
            Equation {
                members: vec![0, 1],
                rate: 5.0,
            };
            3
        ];
        assert_eq!(
            solve_pcmrs(2, &eqs),
            Err(SolveError::Underdetermined {
                rank: 1,
                unknowns: 2
            })
        );
        assert_eq!(solve_pcmrs(2, &[]), Err(SolveError::Empty));
        let bad = [Equation {
            members: vec![3],
            rate: 1.0,
        }];
        assert_eq!(solve_pcmrs(2, &bad), Err(SolveError::Malformed(0)));
    }

    #[test]
    fn weighted_mean() {
        let mut w = Weighted::default();
        assert_eq!(w.mean(), None);
        w.add(10.0, 1.0);
        w.add(20.0, 3.0);
        assert_eq!(w.mean(), Some(17.5));
        assert_eq!(w.weight(), 4.0);
    }
}
