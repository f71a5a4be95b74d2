//! Phase-change detection shared by the policies that re-measure a thread when its
//! behaviour moves away from what was measured (CASC's PCMRs, cache-fair's
//! reconnaissance): windows of co-run time are averaged, the first window after a
//! measurement sets a reference, and two consecutive later windows beyond a threshold
//! signal a change.

use crate::casc::solve::Weighted;

/// Change detection for re-measurement: the first window after a measurement sets a
/// reference; later windows are compared with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drift {
    window: Weighted,
    reference: Option<f64>,
    /// Consecutive windows beyond the threshold.
    strikes: u32,
}

impl Drift {
    /// Counts a window's change against `threshold`; true on the second consecutive
    /// window beyond it (one window can be an unlucky mix of co-runners).
    pub fn strike(&mut self, err: f64, threshold: f64) -> bool {
        self.strikes = if err.abs() > threshold {
            self.strikes + 1
        } else {
            0
        };
        self.strikes >= 2
    }

    /// Adds `x` (weight `w`); when a window of `len` closes, returns its mean minus the
    /// reference (the first window becomes the reference).
    pub fn observe(&mut self, x: f64, w: f64, len: f64) -> Option<f64> {
        self.window.add(x, w);
        if self.window.weight() < len {
            return None;
        }
        let m = self.window.mean().unwrap_or(0.0);
        self.window = Weighted::default();
        match self.reference {
            None => {
                self.reference = Some(m);
                None
            }
            Some(r) => Some(m - r),
        }
    }

    /// Like [`Drift::observe`], the change as a fraction of the reference (`None` while
    /// the reference is not positive).
    pub fn observe_fraction(&mut self, x: f64, w: f64, len: f64) -> Option<f64> {
        let d = self.observe(x, w, len)?;
        self.reference.filter(|&r| r > 0.0).map(|r| d / r)
    }

    /// Like [`Drift::observe`], the change relative to the reference (floored at 1).
    pub fn observe_relative(&mut self, x: f64, w: f64, len: f64) -> Option<f64> {
        let d = self.observe(x, w, len)?;
        Some(d / self.reference.unwrap_or(1.0).max(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first window is the reference; one window beyond the threshold is not a
    /// change, two consecutive ones are, and a window back within it resets the count.
    #[test]
    fn two_consecutive_windows_beyond_the_threshold() {
        let mut d = Drift::default();
        assert_eq!(d.observe(1.0, 10.0, 10.0), None);
        let e = d.observe(2.0, 10.0, 10.0).unwrap();
        assert!((e - 1.0).abs() < 1e-12);
        assert!(!d.strike(e, 0.5));
        let e = d.observe(1.1, 10.0, 10.0).unwrap();
        assert!(!d.strike(e, 0.5));
        let e = d.observe(2.0, 5.0, 10.0);
        assert_eq!(e, None, "a window closes only at its length");
        let e = d.observe(2.0, 5.0, 10.0).unwrap();
        assert!(!d.strike(e, 0.5));
        let e = d.observe(1.8, 10.0, 10.0).unwrap();
        assert!(d.strike(e, 0.5));
        let mut f = Drift::default();
        assert_eq!(f.observe_fraction(4.0, 1.0, 1.0), None);
        assert_eq!(f.observe_fraction(6.0, 1.0, 1.0), Some(0.5));
    }
}
