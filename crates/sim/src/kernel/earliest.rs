//! The earliest busy CPU: a tournament tree over the CPUs' ready times, so that the
//! engine finds the next CPU to step in O(1) and updates one CPU in O(log CPUs), where a
//! scan of every CPU per step grew with the machine (256 CPUs: 2.8 times the cost per
//! simulated instruction of 8 CPUs at 18 threads).
//!
//! A leaf holds a CPU's key — its ready time while it runs a thread, `u64::MAX` while
//! idle — and its number; an inner node the lesser of its children, by key then
//! number, which is exactly what a scan in CPU order keeping the first strict minimum
//! picks.

/// See the [module documentation](self).
#[derive(Debug, Clone)]
pub(crate) struct Earliest {
    /// Leaves: a power of two at least the CPU count.
    leaves: usize,
    /// `tree[1]` is the root; leaves from `tree[leaves]`.
    tree: Vec<(u64, u32)>,
}

impl Earliest {
    /// `cpus` idle CPUs.
    pub(crate) fn new(cpus: usize) -> Earliest {
        let leaves = cpus.next_power_of_two().max(1);
        let mut tree = vec![(u64::MAX, u32::MAX); 2 * leaves];
        for c in 0..cpus {
            tree[leaves + c] = (u64::MAX, c as u32);
        }
        for i in (1..leaves).rev() {
            tree[i] = tree[2 * i].min(tree[2 * i + 1]);
        }
        Earliest { leaves, tree }
    }

    /// Sets CPU `c`'s key.
    #[inline]
    pub(crate) fn set(&mut self, c: usize, key: u64) {
        let mut i = self.leaves + c;
        if self.tree[i].0 == key {
            return;
        }
        self.tree[i].0 = key;
        while i > 1 {
            i /= 2;
            let m = self.tree[2 * i].min(self.tree[2 * i + 1]);
            if self.tree[i] == m {
                break;
            }
            self.tree[i] = m;
        }
    }

    /// The least key and its CPU (`u64::MAX` when every CPU is idle).
    #[inline]
    pub(crate) fn min(&self) -> (u64, usize) {
        let (k, c) = self.tree[1];
        (k, c as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_core::SimRng;

    #[test]
    fn agrees_with_a_scan_in_cpu_order() {
        let mut rng = SimRng::new(7);
        for n in [1usize, 3, 8, 13, 64] {
            let mut keys = vec![u64::MAX; n];
            let mut e = Earliest::new(n);
            for _ in 0..5000 {
                let c = rng.below(n as u64) as usize;
                // few distinct values, so that ties between CPUs are common
                keys[c] = match rng.below(4) {
                    0 => u64::MAX,
                    _ => rng.below(6),
                };
                e.set(c, keys[c]);
                let mut best = (u64::MAX, usize::MAX);
                for (i, &k) in keys.iter().enumerate() {
                    if k < best.0 {
                        best = (k, i);
                    }
                }
                let got = e.min();
                assert_eq!(got.0, best.0);
                if best.0 != u64::MAX {
                    assert_eq!(got.1, best.1, "keys {keys:?}");
                }
            }
        }
    }
}
