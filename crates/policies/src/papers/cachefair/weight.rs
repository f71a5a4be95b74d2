//! Weights through nice values.
//!
//! A weighted fair class (CFS/EEVDF) gives each runnable thread a share of its CPU in
//! proportion to its weight; a scheduler outside the kernel can set a thread's weight
//! only through its nice value, whose weights (Linux's `sched_prio_to_weight`) are
//! about 25% apart. [`NiceDither`] meets a weight between two levels on average: it
//! alternates the two levels around the target (first-order sigma-delta modulation),
//! integrating the difference between the target and the weight applied over time and
//! choosing, at each step, the level that pays the accumulated difference back. Over a
//! few steps the time-averaged weight equals the target; each step is one tick of the
//! policy.

use cachesched_core::num::nice_to_weight;
use cachesched_core::Nanos;

/// The nice value that realises a target weight on average. See the
/// [module documentation](self).
#[derive(Debug, Clone, PartialEq)]
pub struct NiceDither {
    /// The thread's own nice value, whose weight is the base.
    base_nice: i32,
    /// The weight to meet on average.
    target: f64,
    /// Integral of (target − applied weight) over time, weight·ns.
    err: f64,
    /// The nice value applied now.
    nice: i32,
    /// When the last step was taken.
    last: Option<Nanos>,
}

impl Default for NiceDither {
    fn default() -> Self {
        NiceDither::new(0)
    }
}

impl NiceDither {
    /// A thread whose nice value is `base_nice`, at its base weight.
    pub fn new(base_nice: i32) -> NiceDither {
        let base_nice = base_nice.clamp(-20, 19);
        NiceDither {
            base_nice,
            target: nice_to_weight(base_nice) as f64,
            err: 0.0,
            nice: base_nice,
            last: None,
        }
    }

    /// The weight of the thread's own nice value.
    pub fn base_weight(&self) -> f64 {
        nice_to_weight(self.base_nice) as f64
    }

    /// The thread's own nice value.
    pub fn base_nice(&self) -> i32 {
        self.base_nice
    }

    /// The weight being met.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// Sets the weight to meet, clamped to the weights nice values can give. A step
    /// taken at the base weight ends the dithering (the accumulated difference is
    /// dropped); a target changed and changed back between two steps loses nothing.
    pub fn set_target(&mut self, weight: f64) {
        let (lo, hi) = (nice_to_weight(19) as f64, nice_to_weight(-20) as f64);
        self.target = weight.clamp(lo, hi);
    }

    /// Whether the target is the base weight.
    pub fn at_base(&self) -> bool {
        (self.target - self.base_weight()).abs() < 0.5
    }

    /// Advances to `now` and returns the nice value to apply from now on, if it differs
    /// from the one applied.
    pub fn step(&mut self, now: Nanos) -> Option<i32> {
        let dt = self.last.map_or(0, |l| now.0.saturating_sub(l.0)) as f64;
        self.last = Some(now);
        self.err += (self.target - nice_to_weight(self.nice) as f64) * dt;
        let next = if self.at_base() {
            self.err = 0.0;
            self.base_nice
        } else {
            // the lightest level at least as heavy as the target, and the next lighter
            let heavy = (-20..=19)
                .rev()
                .find(|&n| nice_to_weight(n) as f64 >= self.target)
                .unwrap_or(-20);
            let light = (heavy + 1).min(19);
            let (wh, wl) = (nice_to_weight(heavy) as f64, nice_to_weight(light) as f64);
            // the accumulated difference decides; with none, the nearer level
            let pay_back = if self.err == 0.0 {
                wh - self.target <= self.target - wl
            } else {
                self.err > 0.0
            };
            if pay_back {
                heavy
            } else {
                light
            }
        };
        (next != self.nice).then(|| {
            self.nice = next;
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The time-averaged weight of `steps` steps of `period_ns` towards `target`.
    fn average(target: f64, steps: u64, period_ns: u64) -> f64 {
        let mut d = NiceDither::new(0);
        d.set_target(target);
        let mut sum = 0.0;
        let mut nice = 0;
        for i in 0..steps {
            if let Some(n) = d.step(Nanos(i * period_ns)) {
                nice = n;
            }
            sum += nice_to_weight(nice) as f64;
        }
        sum / steps as f64
    }

    #[test]
    fn weights_between_levels_are_met_on_average() {
        // 8% and 30% more than nice 0, 5% less: between levels, and beyond one level
        for target in [1105.92, 1331.2, 972.8] {
            let avg = average(target, 200, 10_000_000);
            assert!(
                (avg - target).abs() < 0.01 * target,
                "target {target}, average {avg}"
            );
        }
    }

    #[test]
    fn the_base_weight_restores_the_own_nice() {
        let mut d = NiceDither::new(3);
        d.set_target(d.base_weight() * 1.1);
        let mut changed = false;
        for i in 0..10 {
            changed |= d.step(Nanos(i * 1_000_000)).is_some();
        }
        assert!(changed, "a target 10% above the base moves the nice value");
        d.set_target(d.base_weight());
        d.step(Nanos(11_000_000));
        assert_eq!(d.step(Nanos(12_000_000)), None);
        assert_eq!(d.nice, 3);
        assert_eq!(d.err, 0.0);
    }
}
