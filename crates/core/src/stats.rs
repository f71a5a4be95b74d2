//! Statistics, in one place: means with their 95% confidence intervals (Student's t),
//! mean and standard deviation, quantiles by nearest rank, geometric means. The
//! laboratory's statistics over seeds (`cachesched_lab::stats`) are built on these.

/// Mean and (population) standard deviation.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
    (m, var.sqrt())
}

/// Mean and the half-width of its 95% confidence interval (Student's t with n − 1
/// degrees of freedom, sample standard deviation); the half-width is NaN for fewer
/// than two values, where no interval exists.
pub fn mean_ci95(v: &[f64]) -> (f64, f64) {
    /// Two-sided 95% quantiles of Student's t for 1–30 degrees of freedom.
    const T95: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (m, f64::NAN);
    }
    let s2 = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
    let t = T95.get(n - 2).copied().unwrap_or(1.960);
    (m, t * (s2 / n as f64).sqrt())
}

/// The `q` quantile (0 to 1) of `v` by nearest rank (the element at
/// `round((len - 1) · q)` once sorted): `v` is sorted in place. NaN for an empty `v`.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The geometric mean of `xs` (NaN for none): the mean of ratios, as the timeslice
/// paper averages its programs' runtime ratios.
pub fn geomean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (s / n as f64).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_interval_uses_students_t() {
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        // s = 1, t(2 df) = 4.303: 4.303 / sqrt(3)
        assert!((h - 4.303 / 3f64.sqrt()).abs() < 1e-12, "{h}");
        assert!(mean_ci95(&[5.0]).1.is_nan());
        let (_, wide) = mean_ci95(&[0.0, 10.0]);
        assert!((wide - 12.706 * 5.0).abs() < 1e-9, "{wide}");
    }

    #[test]
    fn quantile_by_nearest_rank() {
        let mut v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(quantile(&mut v, 0.5), 3.0);
        assert_eq!(v, [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(quantile(&mut v, 0.0), 1.0);
        assert_eq!(quantile(&mut v, 1.0), 5.0);
        // (5 - 1) * 0.9 = 3.6 rounds to the fifth
        assert_eq!(quantile(&mut v, 0.9), 5.0);
        assert_eq!(quantile(&mut v, 0.25), 2.0);
        assert!(quantile(&mut [], 0.5).is_nan());
    }

    #[test]
    fn geomean_of_ratios() {
        assert!((geomean([2.0, 8.0].into_iter()) - 4.0).abs() < 1e-12);
        assert!(geomean(std::iter::empty()).is_nan());
    }
}
