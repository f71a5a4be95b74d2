//! A Fenwick (binary indexed) tree of counts: point updates, prefix sums and finding the
//! position of the k-th counted item, each in O(log n). The exact miss-ratio curves
//! ([`crate::trace::mrc`]) count live marks per access time with one; the reuse-distance
//! generator ([`crate::workload::reuse`]) counts live lines per block of time slots.

/// Counts at positions `0..n`. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Fenwick {
    /// 1-based partial sums.
    tree: Vec<u32>,
}

impl Fenwick {
    /// `n` positions, all counts zero.
    pub fn new(n: usize) -> Fenwick {
        Fenwick {
            tree: vec![0; n + 1],
        }
    }

    /// A tree holding `counts[i]` at position `i`, built in O(n).
    pub fn from_counts(counts: &[u32]) -> Fenwick {
        let n = counts.len();
        let mut tree = vec![0; n + 1];
        tree[1..].copy_from_slice(counts);
        for i in 1..=n {
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                tree[j] += tree[i];
            }
        }
        Fenwick { tree }
    }

    /// Number of positions.
    pub fn len(&self) -> usize {
        self.tree.len() - 1
    }

    /// Whether there are no positions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `v` to the count at `pos` (a count never goes below zero).
    #[inline]
    pub fn add(&mut self, pos: usize, v: i32) {
        let mut i = pos + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(v);
            i += i & i.wrapping_neg();
        }
    }

    /// The sum of the counts at positions `0..=pos`.
    #[inline]
    pub fn prefix(&self, pos: usize) -> u64 {
        let mut i = pos + 1;
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i &= i - 1;
        }
        s
    }

    /// The position holding the `rank`-th counted item (1-based, in position order) and
    /// the item's rank within that position (1-based); `rank` must be at least 1 and at
    /// most the total.
    #[inline]
    pub fn find(&self, mut rank: u64) -> (usize, u64) {
        let n = self.len();
        let mut pos = 0;
        let mut step = if n == 0 {
            0
        } else {
            1 << (usize::BITS - 1 - n.leading_zeros())
        };
        while step > 0 {
            let next = pos + step;
            if next <= n && (self.tree[next] as u64) < rank {
                pos = next;
                rank -= self.tree[next] as u64;
            }
            step >>= 1;
        }
        (pos, rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_and_find_agree_with_a_plain_count() {
        let counts: Vec<u32> = (0..1000u32).map(|i| (i * 7 + 3) % 5).collect();
        let mut f = Fenwick::from_counts(&counts);
        let mut plain = counts.clone();
        for (k, pos) in [0usize, 17, 999, 512, 3].into_iter().enumerate() {
            f.add(pos, 2);
            plain[pos] += 2;
            if k % 2 == 1 {
                f.add(pos, -1);
                plain[pos] -= 1;
            }
        }
        let mut sum = 0u64;
        for (pos, &c) in plain.iter().enumerate() {
            sum += c as u64;
            assert_eq!(f.prefix(pos), sum);
            // every item of this position is found here, with its rank within it
            for r in 1..=c as u64 {
                assert_eq!(f.find(sum - c as u64 + r), (pos, r));
            }
        }
        assert_eq!(Fenwick::new(8).prefix(7), 0);
    }
}
