//! Statistics over seeds, in one place: means with 95% intervals (Student's t),
//! changes paired by seed, and how they are shown and judged.

use crate::metrics::{higher_is_better, SOLO_METRICS};
use crate::scenario::Job;
use cachesched_sim::RunResult;

pub use cachesched_core::num::plain;
pub use cachesched_core::stats::{geomean, mean_ci95, quantile};

/// The change of metric `m` of variant `v` against variant `base` at sweep point `p`,
/// paired by seed, in percent of the baseline: the mean over seeds and its 95%
/// interval's half-width (NaN with one seed).
pub fn paired_change(
    jobs: &[Job],
    runs: &[RunResult],
    (base, v): (usize, usize),
    p: Option<u64>,
    m: &str,
) -> (f64, f64) {
    let t = crate::results::Table::new(jobs, runs);
    let at = |variant: usize| t.by_seed(variant, p, m);
    let b: std::collections::BTreeMap<u64, f64> = at(base).collect();
    let d: Vec<f64> = at(v)
        .filter_map(|(seed, x)| b.get(&seed).map(|&b| 100.0 * (x - b) / b))
        .collect();
    over_seeds(&d)
}

/// Mean over seeds and the half-width of its 95% interval, as [`mean_ci95`], except
/// that values identical across several seeds have no interval (NaN): the seeds did not
/// vary the run (a workload without seeded randomness, such as recorded traces), so a
/// zero width would claim a certainty that was never sampled.
pub fn over_seeds(v: &[f64]) -> (f64, f64) {
    let (m, h) = mean_ci95(v);
    if v.len() > 1 && v.iter().all(|x| x.to_bits() == v[0].to_bits()) {
        return (m, f64::NAN);
    }
    (m, h)
}

/// A mean and its 95% half-width over seeds as tables show them: `MEAN UNIT ± HALF`,
/// the mean alone when there is no interval, `n/a` when there is no mean.
pub fn show((m, h): (f64, f64), unit: &str) -> String {
    if !m.is_finite() {
        "n/a".into()
    } else if h.is_finite() {
        format!("{}{unit} ± {}", plain(m), plain(h))
    } else {
        format!("{}{unit}", plain(m))
    }
}

/// What a paired change of a metric means: an improvement or a regression only when
/// its 95% interval excludes zero.
pub fn verdict(m: &str, (mean, half): (f64, f64)) -> &'static str {
    if !mean.is_finite() {
        return if SOLO_METRICS.contains(&m) {
            // a slowdown against alone is unbounded when a thread made no progress at all
            "unbounded in some run: a thread without progress"
        } else {
            // a change in percent of a baseline that is zero in some seed
            "undefined: the baseline is 0 in some run"
        };
    }
    if !half.is_finite() {
        return "no interval";
    }
    if (mean - half..=mean + half).contains(&0.0) {
        return "no clear change";
    }
    match (higher_is_better(m), mean > 0.0) {
        (Some(h), up) if h == up => "better",
        (Some(_), _) => "worse",
        (None, true) => "higher",
        (None, false) => "lower",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{metric_label, METRICS};

    /// every metric has a label of its own.
    #[test]
    fn numbers_and_labels_for_people() {
        let cases = [
            (0.16051, "0.161"),
            (24.549, "24.5"),
            (1390.4, "1390"),
            (0.0043, "0.00430"),
            (1.3242e9, "1.32e9"),
            (4.3e-5, "4.30e-5"),
            (0.0, "0"),
            (-6.93, "-6.93"),
        ];
        for (v, s) in cases {
            assert_eq!(plain(v), s, "{v}");
        }
        for (n, _, l) in METRICS {
            assert_eq!(metric_label(n), *l);
            assert!(!l.contains('_'), "{n}: '{l}' is an identifier, not a label");
        }
        assert_eq!(metric_label("nope"), "?");
    }

    /// would call a change certain.
    #[test]
    fn seeds_that_vary_nothing_give_no_interval() {
        assert!(over_seeds(&[3.0, 3.0, 3.0]).1.is_nan());
        assert_eq!(verdict("ips", over_seeds(&[5.0, 5.0])), "no interval");
        // a thread without progress: its slowdown, and the change of ANTT, unbounded
        let inf = over_seeds(&[3.0, f64::INFINITY]);
        assert!(verdict("antt", inf).starts_with("unbounded"));
        // a count that is 0 in the baseline: no change in percent exists
        assert!(verdict("migrations", (f64::NAN, f64::NAN)).contains("baseline is 0"));
        let (m, h) = over_seeds(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((h - 4.303 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(verdict("ips", over_seeds(&[5.0, 5.1, 4.9, 5.2])), "better");
    }
}
