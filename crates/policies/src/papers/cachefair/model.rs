//! The cache-fair scheduler's analytical models (paper 2, §3 and §4.1), as pure
//! functions of measured data points:
//!
//! - the **fair miss rate** (§3.1): a line fitted to the thread's miss rate against its
//!   co-runners' aggregate miss rate (Equation 1, `MissRate(T) = a·Σ MissRate(Cᵢ) + b`)
//!   and its crossing with equal sharing (Equation 2, `b / (1 − a·n)` for n co-runners),
//!   with stated fallbacks where real data give no usable line;
//! - the **stall models** (§4.1): memory-stall and store-buffer-stall cycles per
//!   instruction as linear functions of the thread's own miss rate;
//! - the **fair CPI** (§3.2, Equations 3–6): `IdealCPI = CPI − L2CacheStalls`,
//!   `FairCPI = IdealCPI + FairL2CacheStalls`.
//!
//! Miss rates are in misses per cycle (MPC), as the paper defines them.

use serde::{Deserialize, Serialize};

/// One reconnaissance data point: the thread and its co-runners over one interval in
/// which the set of co-runners stayed the same.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The thread's shared-cache misses per cycle.
    pub own_mpc: f64,
    /// The co-runners' misses per cycle, summed (Σ MissRate(Cᵢ) of Equation 1); 0 when
    /// the other CPUs on the cache were idle.
    pub corunners_mpc: f64,
    /// The thread's cycles stalled on misses of the shared cache, per instruction.
    pub mem_stall_cpi: f64,
    /// The thread's cycles stalled on a full store buffer, per instruction.
    pub sb_stall_cpi: f64,
    /// The thread's cycles in the interval (the point's weight in the fits).
    pub cycles: f64,
}

/// A fitted line `y = slope·x + intercept`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Slope.
    pub slope: f64,
    /// Intercept.
    pub intercept: f64,
}

impl Line {
    /// The line's value at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.slope * x + self.intercept
    }
}

/// Weighted least-squares line through `(x, y, w)` points. `None` with fewer than two
/// points of positive weight, or when the xs do not spread by at least `min_spread`
/// relative to their weighted mean (no slope can be told from such data).
pub fn fit_line(pts: impl IntoIterator<Item = (f64, f64, f64)>, min_spread: f64) -> Option<Line> {
    let pts: Vec<(f64, f64, f64)> = pts
        .into_iter()
        .filter(|&(x, y, w)| w > 0.0 && x.is_finite() && y.is_finite())
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let sw: f64 = pts.iter().map(|p| p.2).sum();
    let mx = pts.iter().map(|p| p.0 * p.2).sum::<f64>() / sw;
    let my = pts.iter().map(|p| p.1 * p.2).sum::<f64>() / sw;
    let (lo, hi) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    if !(hi - lo > min_spread * mx.abs()) || hi - lo <= 0.0 {
        return None;
    }
    let sxx: f64 = pts.iter().map(|p| p.2 * (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| p.2 * (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some(Line {
        slope,
        intercept: my - slope * mx,
    })
}

/// How a fair miss rate was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FairMethod {
    /// Equation 2 on the regression line of Equation 1 (the paper's method).
    Regression,
    /// Fallback: the co-runners' miss rates did not spread enough to fit a slope
    /// (fewer than two points, or all co-runner rates within `min_spread`).
    NoSpread,
    /// Fallback: the fitted slope was negative (the thread missed less as its
    /// co-runners missed more, which the model excludes: noise).
    NegativeSlope,
    /// Fallback: `a·n ≥ 1`, so the line never meets equal miss rates, or Equation 2
    /// gave a negative rate.
    NoCrossing,
}

impl FairMethod {
    /// Its name in the policy's stats (`fallback_NAME`).
    pub fn name(self) -> &'static str {
        match self {
            FairMethod::Regression => "regression",
            FairMethod::NoSpread => "no_spread",
            FairMethod::NegativeSlope => "negative_slope",
            FairMethod::NoCrossing => "no_crossing",
        }
    }

    /// Whether this is a fallback rather than the paper's regression.
    pub fn is_fallback(self) -> bool {
        self != FairMethod::Regression
    }
}

/// A thread's estimated fair miss rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FairMissRate {
    /// Misses per cycle under equal sharing.
    pub mpc: f64,
    /// How it was obtained.
    pub method: FairMethod,
    /// The fitted line of Equation 1, when one was fitted.
    pub line: Option<Line>,
    /// Whether the estimate lies outside the range of the thread's measured miss
    /// rates (an extrapolation of the line).
    pub extrapolated: bool,
}

/// The fair miss rate of a thread with `n` co-runners on its cache, from its data
/// points (Equations 1 and 2). Fallbacks, each named by [`FairMethod`]: without a
/// usable line (no spread, negative slope, no crossing) the fair rate is the thread's
/// miss rate at the data point nearest to equal sharing — the point whose co-runners'
/// mean rate (Σ/n) is closest to the thread's own, the paper's "cache-friendly
/// co-runner" observed directly; with no point at all, the fair rate is unknown.
pub fn fair_miss_rate(points: &[Point], n: usize, min_spread: f64) -> Option<FairMissRate> {
    if points.is_empty() {
        return None;
    }
    let n = n.max(1) as f64;
    let line = fit_line(
        points
            .iter()
            .map(|p| (p.corunners_mpc, p.own_mpc, p.cycles)),
        min_spread,
    );
    let method = match line {
        None => FairMethod::NoSpread,
        Some(l) if l.slope < 0.0 => FairMethod::NegativeSlope,
        Some(l) if l.slope * n >= 1.0 || l.intercept / (1.0 - l.slope * n) < 0.0 => {
            FairMethod::NoCrossing
        }
        Some(_) => FairMethod::Regression,
    };
    let mpc = match (method, line) {
        (FairMethod::Regression, Some(l)) => l.intercept / (1.0 - l.slope * n),
        _ => nearest_to_equal_sharing(points, n),
    };
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.own_mpc), hi.max(p.own_mpc))
        });
    Some(FairMissRate {
        mpc,
        method,
        line,
        extrapolated: mpc < lo || mpc > hi,
    })
}

/// The thread's miss rate at the point whose co-runners' mean miss rate is relatively
/// closest to its own.
fn nearest_to_equal_sharing(points: &[Point], n: f64) -> f64 {
    let gap = |p: &Point| {
        let other = p.corunners_mpc / n;
        let scale = p.own_mpc.max(other);
        if scale > 0.0 {
            (p.own_mpc - other).abs() / scale
        } else {
            0.0
        }
    };
    points
        .iter()
        .min_by(|a, b| gap(a).total_cmp(&gap(b)))
        .map_or(0.0, |p| p.own_mpc)
}

/// A stall time per instruction as a function of the thread's miss rate (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum StallModel {
    /// The fitted line (the paper's).
    Linear(Line),
    /// Fallback when the thread's own miss rates did not spread enough to fit a line:
    /// stalls proportional to the miss rate, through the origin, with the measured
    /// mean stall per unit of miss rate (a fixed cost per miss).
    Proportional {
        /// Stall cycles per instruction per unit of misses per cycle.
        per_mpc: f64,
    },
}

impl StallModel {
    /// Fits stall cycles per instruction (`stall(p)`) against the own miss rate.
    pub fn fit(points: &[Point], stall: impl Fn(&Point) -> f64, min_spread: f64) -> StallModel {
        if let Some(l) = fit_line(
            points.iter().map(|p| (p.own_mpc, stall(p), p.cycles)),
            min_spread,
        ) {
            return StallModel::Linear(l);
        }
        let sw: f64 = points.iter().map(|p| p.cycles).sum();
        let mpc: f64 = points.iter().map(|p| p.own_mpc * p.cycles).sum::<f64>();
        let st: f64 = points.iter().map(|p| stall(p) * p.cycles).sum::<f64>();
        StallModel::Proportional {
            per_mpc: if sw > 0.0 && mpc > 0.0 { st / mpc } else { 0.0 },
        }
    }

    /// Stall cycles per instruction at miss rate `mpc`, never negative.
    pub fn at(&self, mpc: f64) -> f64 {
        match self {
            StallModel::Linear(l) => l.at(mpc),
            StallModel::Proportional { per_mpc } => per_mpc * mpc,
        }
        .max(0.0)
    }

    /// Whether this is the proportional fallback.
    pub fn is_fallback(&self) -> bool {
        matches!(self, StallModel::Proportional { .. })
    }
}

/// What reconnaissance produces: the fair miss rate and the stall models that turn it
/// into fair stall time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FairModel {
    /// The fair miss rate.
    pub fair: FairMissRate,
    /// Memory-stall cycles per instruction against the miss rate.
    pub mem_stall: StallModel,
    /// Store-buffer-stall cycles per instruction against the miss rate.
    pub sb_stall: StallModel,
}

impl FairModel {
    /// Builds the model from reconnaissance points (`None` without any point).
    pub fn from_points(points: &[Point], n: usize, min_spread: f64) -> Option<FairModel> {
        let fair = fair_miss_rate(points, n, min_spread)?;
        Some(FairModel {
            fair,
            mem_stall: StallModel::fit(points, |p| p.mem_stall_cpi, min_spread),
            sb_stall: StallModel::fit(points, |p| p.sb_stall_cpi, min_spread),
        })
    }

    /// Stall cycles per instruction at the fair miss rate (FairL2CacheStalls,
    /// Equation 6).
    pub fn fair_stall_cpi(&self) -> f64 {
        self.mem_stall.at(self.fair.mpc) + self.sb_stall.at(self.fair.mpc)
    }

    /// The fair CPI of an interval with measured `cpi` and measured stall cycles per
    /// instruction `stall_cpi` (L2CacheStalls): `IdealCPI + FairL2CacheStalls`, where
    /// `IdealCPI = CPI − L2CacheStalls` (Equations 3 and 4). At least 1% of `cpi`.
    pub fn fair_cpi(&self, cpi: f64, stall_cpi: f64) -> f64 {
        let ideal = (cpi - stall_cpi).max(0.0);
        (ideal + self.fair_stall_cpi()).max(0.01 * cpi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(own: f64, co: f64) -> Point {
        Point {
            own_mpc: own,
            corunners_mpc: co,
            mem_stall_cpi: 100.0 * own,
            sb_stall_cpi: 10.0 * own + 0.01,
            cycles: 1e6,
        }
    }

    /// A thread whose miss rate is 0.002 + 0.5·(co-runners'): alone-ish 0.002, with one
    /// co-runner it meets equal sharing where F = 0.002 + 0.5·F, F = 0.004.
    #[test]
    fn equation_2_finds_the_crossing_with_equal_sharing() {
        let pts: Vec<Point> = [0.0, 0.002, 0.004, 0.008, 0.012]
            .iter()
            .map(|&x| pt(0.002 + 0.5 * x, x))
            .collect();
        let f = fair_miss_rate(&pts, 1, 0.1).unwrap();
        assert_eq!(f.method, FairMethod::Regression);
        assert!((f.mpc - 0.004).abs() < 1e-12, "{f:?}");
        assert!(!f.extrapolated);
        // with three co-runners the same line meets equal sharing at 0.002/(1-1.5) < 0:
        // no crossing, the nearest point is used
        let f3 = fair_miss_rate(&pts, 3, 0.1).unwrap();
        assert_eq!(f3.method, FairMethod::NoCrossing);
        // nearest to own = Σ/3: x = 0.012 gives own 0.008, mean co-runner 0.004
        assert!((f3.mpc - 0.008).abs() < 1e-12, "{f3:?}");
    }

    #[test]
    fn fallbacks_are_named() {
        // all co-runners alike: no slope
        let flat: Vec<Point> = (0..5).map(|i| pt(0.003 + 1e-5 * i as f64, 0.006)).collect();
        let f = fair_miss_rate(&flat, 1, 0.1).unwrap();
        assert_eq!(f.method, FairMethod::NoSpread);
        assert!(f.method.is_fallback());
        // decreasing: negative slope
        let neg: Vec<Point> = [0.0, 0.004, 0.008]
            .iter()
            .map(|&x| pt(0.006 - 0.2 * x, x))
            .collect();
        assert_eq!(
            fair_miss_rate(&neg, 1, 0.1).unwrap().method,
            FairMethod::NegativeSlope
        );
        // one point: no spread, its own rate
        let one = fair_miss_rate(&[pt(0.005, 0.001)], 1, 0.1).unwrap();
        assert_eq!((one.method, one.mpc), (FairMethod::NoSpread, 0.005));
        assert!(fair_miss_rate(&[], 1, 0.1).is_none());
    }

    #[test]
    fn stall_models_and_fair_cpi() {
        let pts: Vec<Point> = [0.001, 0.002, 0.004]
            .iter()
            .map(|&m| pt(m, 0.003))
            .collect();
        let m = StallModel::fit(&pts, |p| p.mem_stall_cpi, 0.1);
        assert!(matches!(m, StallModel::Linear(_)));
        assert!((m.at(0.003) - 0.3).abs() < 1e-9);
        // one miss rate only: proportional through the origin
        let same = vec![pt(0.002, 0.001), pt(0.002, 0.004)];
        let p = StallModel::fit(&same, |p| p.mem_stall_cpi, 0.1);
        assert!(p.is_fallback());
        assert!((p.at(0.004) - 0.4).abs() < 1e-9);
        // fair CPI: measured CPI 2.0 with 0.8 of stalls; fair stalls 0.3 + 0.04 → 1.54
        let model = FairModel {
            fair: FairMissRate {
                mpc: 0.003,
                method: FairMethod::Regression,
                line: None,
                extrapolated: false,
            },
            mem_stall: m,
            sb_stall: StallModel::fit(&pts, |p| p.sb_stall_cpi, 0.1),
        };
        assert!((model.fair_cpi(2.0, 0.8) - 1.54).abs() < 1e-9);
    }
}
