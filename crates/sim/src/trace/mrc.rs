//! Miss-ratio curves: the LRU miss ratio of a fully associative cache as a function of
//! its size, for every size at once.
//!
//! - **Exact**: LRU stack distances (the number of distinct lines touched since the
//!   previous access to the same line) computed in O(N log M) time and O(M) memory with
//!   a Fenwick tree over access times holding a mark at each line's most recent access;
//!   times are renumbered compactly when the tree fills (M = distinct lines).
//! - **Sampled** (SHARDS, Waldspurger et al., FAST 2015, fixed rate): only lines whose
//!   hash falls below a threshold are tracked; their distances, scaled by 1/rate,
//!   estimate the full curve with memory and time reduced by the rate.
//!
//! A cache of C lines misses exactly the accesses whose stack distance is ≥ C (and the
//! cold ones), which is what makes the exact curve equal a fully associative LRU
//! simulation at every size.

use crate::fenwick::Fenwick;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-xorshift hasher for line numbers (SipHash costs more than the rest of a
/// stack-distance update; line numbers are not adversarial).
#[derive(Default, Clone, Copy)]
pub struct LineHasher(u64);

impl Hasher for LineHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = hash64(v);
    }
}

/// Stack-distance histogram builder.
#[derive(Debug, Clone)]
pub struct StackDistances {
    /// Per line: the slot of its latest access.
    last: HashMap<u64, u32, BuildHasherDefault<LineHasher>>,
    tree: Fenwick,
    slot_block: Vec<u64>,
    next: u32,
    live: u64,
    /// `hist[d]`: accesses with stack distance `d` (0 = the line just accessed).
    pub hist: Vec<u64>,
    /// First-touch (cold) accesses.
    pub cold: u64,
    /// All accesses.
    pub accesses: u64,
}

impl Default for StackDistances {
    fn default() -> Self {
        Self::new()
    }
}

impl StackDistances {
    /// An empty histogram.
    pub fn new() -> StackDistances {
        let cap = 1 << 16;
        StackDistances {
            last: HashMap::default(),
            tree: Fenwick::new(cap),
            slot_block: vec![u64::MAX; cap],
            next: 0,
            live: 0,
            hist: Vec::new(),
            cold: 0,
            accesses: 0,
        }
    }

    /// Renumbers live slots 0..M (in time order), growing the tree if it is over half
    /// full.
    fn compact(&mut self) {
        let mut live: Vec<(u32, u64)> = self
            .slot_block
            .iter()
            .enumerate()
            .filter(|(_, &b)| b != u64::MAX)
            .map(|(s, &b)| (s as u32, b))
            .collect();
        live.sort_unstable();
        let mut cap = self.slot_block.len();
        while live.len() * 2 > cap {
            cap *= 2;
        }
        self.slot_block = vec![u64::MAX; cap];
        let mut marks = vec![0; cap];
        for (i, &(_, b)) in live.iter().enumerate() {
            self.slot_block[i] = b;
            self.last.insert(b, i as u32);
            marks[i] = 1;
        }
        self.tree = Fenwick::from_counts(&marks);
        self.next = live.len() as u32;
    }

    /// Records an access to line `block`; returns its stack distance (`None`: cold).
    pub fn access(&mut self, block: u64) -> Option<u64> {
        if self.next as usize == self.slot_block.len() {
            self.compact();
        }
        self.accesses += 1;
        let now = self.next;
        self.next += 1;
        let d = match self.last.insert(block, now) {
            Some(prev) => {
                // distinct lines touched after prev = live marks in (prev, now)
                let d = self.live - self.tree.prefix(prev as usize);
                if self.hist.len() <= d as usize {
                    self.hist.resize(d as usize + 1, 0);
                }
                self.hist[d as usize] += 1;
                self.tree.add(prev as usize, -1);
                self.slot_block[prev as usize] = u64::MAX;
                Some(d)
            }
            None => {
                self.cold += 1;
                self.live += 1;
                None
            }
        };
        self.tree.add(now as usize, 1);
        self.slot_block[now as usize] = block;
        d
    }

    /// Distinct lines seen.
    pub fn distinct(&self) -> u64 {
        self.live
    }

    /// Forgets the counts but keeps the stack: what follows is measured warm.
    pub fn reset_counts(&mut self) {
        self.hist.clear();
        self.cold = 0;
        self.accesses = 0;
    }

    /// Miss ratio of a fully associative LRU cache of `lines` lines.
    pub fn miss_ratio(&self, lines: u64) -> f64 {
        if self.accesses == 0 {
            return 0.0;
        }
        let hits: u64 = self.hist.iter().take(lines as usize).sum();
        (self.accesses - hits) as f64 / self.accesses as f64
    }
}

/// The solo stack-distance histogram of a locality model's data stream (thread 0 of
/// process 0, seeded by `seed`): `warm` accesses to fill the stack, then `n` measured
/// (so the miss ratios are warm, not dominated by first touches).
pub fn model_curve(
    model: &crate::workload::LocalityModel,
    seed: u64,
    warm: u64,
    n: u64,
) -> StackDistances {
    let mut t = crate::workload::LocalityThread::new(
        model.clone(),
        0,
        0,
        cachesched_core::SimRng::new(seed),
    );
    let mut sd = StackDistances::new();
    t.feed_accesses(warm, |addr, _| {
        sd.access(addr >> 6);
    });
    sd.reset_counts();
    t.feed_accesses(n, |addr, _| {
        sd.access(addr >> 6);
    });
    sd
}

/// SHARDS fixed-rate sampling around [`StackDistances`].
#[derive(Debug, Clone)]
pub struct Shards {
    inner: StackDistances,
    threshold: u64,
    rate: f64,
    /// All accesses offered (sampled or not).
    pub offered: u64,
}

/// A 64-bit mixing hash (splitmix64 finaliser) for spatial sampling.
pub fn hash64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Shards {
    /// Samples lines at `rate` (0 < rate ≤ 1).
    pub fn new(rate: f64) -> Shards {
        let rate = rate.clamp(1e-6, 1.0);
        Shards {
            inner: StackDistances::new(),
            threshold: (rate * u64::MAX as f64) as u64,
            rate,
            offered: 0,
        }
    }

    /// Forgets the counts but keeps the sampled stack (see
    /// [`StackDistances::reset_counts`]).
    pub fn reset_counts(&mut self) {
        self.inner.reset_counts();
        self.offered = 0;
    }

    /// Offers an access to line `block`.
    pub fn access(&mut self, block: u64) {
        self.offered += 1;
        if hash64(block) <= self.threshold {
            self.inner.access(block);
        }
    }

    /// Estimated miss ratio of a fully associative LRU cache of `lines` lines, with
    /// SHARDS_adj's correction: the difference between the expected number of sampled
    /// accesses (offered × rate) and the actual number is credited to the smallest
    /// distance, which removes most of the bias from hot lines sampled more or less
    /// often than their share.
    pub fn miss_ratio(&self, lines: u64) -> f64 {
        let s = &self.inner;
        let expected = self.offered as f64 * self.rate;
        if expected <= 0.0 || s.accesses == 0 {
            return 0.0;
        }
        // sampled distance d stands for d / rate lines
        let scaled = (lines as f64 * self.rate).round() as usize;
        let hits: u64 = s.hist.iter().take(scaled).sum();
        let adj = if scaled > 0 {
            expected - s.accesses as f64
        } else {
            0.0
        };
        let total = expected;
        ((total - (hits as f64 + adj)) / total).clamp(0.0, 1.0)
    }

    /// The smallest cache (in lines) whose miss ratio this sample can estimate: below
    /// it the scaled size covers fewer than four sampled lines.
    pub fn min_lines(&self) -> u64 {
        (4.0 / self.rate).ceil() as u64
    }

    /// The sampling rate.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Accesses actually tracked.
    pub fn sampled(&self) -> u64 {
        self.inner.accesses
    }
}

/// Cache sizes (in lines) at which to evaluate a curve: powers of two from 1 line up to
/// at least `max_lines`, plus the midpoints between them.
pub fn curve_sizes(max_lines: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = 1u64;
    while s < max_lines.max(2) * 2 {
        v.push(s);
        if s >= 4 {
            v.push(s + s / 2);
        }
        s *= 2;
    }
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::cache::{Cache, CacheGeometry, Outcome};
    use cachesched_core::SimRng;

    fn stream(n: usize, seed: u64) -> Vec<u64> {
        // a mix of a hot set, a loop and random far lines
        let mut r = SimRng::new(seed);
        (0..n)
            .map(|i| match r.below(10) {
                0..=4 => r.below(200),
                5..=7 => 1000 + (i as u64 % 1500),
                _ => 10_000 + r.below(20_000),
            })
            .collect()
    }

    fn fa_misses(blocks: &[u64], lines: u64, ways: u32) -> u64 {
        let mut c = Cache::new(CacheGeometry {
            size_bytes: lines * 64,
            ways,
            line_bytes: 64,
        })
        .unwrap();
        blocks
            .iter()
            .filter(|&&b| matches!(c.access(b, 0, 0), Outcome::Miss { .. }))
            .count() as u64
    }

    #[test]
    fn exact_curve_equals_fully_associative_simulation() {
        let blocks = stream(200_000, 1);
        let mut sd = StackDistances::new();
        for &b in &blocks {
            sd.access(b);
        }
        assert_eq!(sd.accesses, 200_000);
        for lines in [1u64, 16, 128, 256, 1024, 2048, 4096, 16384] {
            let sim = fa_misses(&blocks, lines, lines as u32);
            let curve = (sd.miss_ratio(lines) * sd.accesses as f64).round() as u64;
            assert_eq!(curve, sim, "{lines} lines");
        }
    }

    #[test]
    fn set_associative_approaches_fully_associative() {
        let blocks = stream(100_000, 2);
        let lines = 1024u64;
        let fa = fa_misses(&blocks, lines, lines as u32) as i64;
        let gaps: Vec<i64> = [1u32, 2, 8, 64]
            .iter()
            .map(|&w| (fa_misses(&blocks, lines, w) as i64 - fa).abs())
            .collect();
        assert!(
            gaps[0] > gaps[1] && gaps[1] > gaps[2] && gaps[2] > gaps[3],
            "{gaps:?}"
        );
        assert!(gaps[3] * 4 < gaps[0], "{gaps:?}");
    }

    #[test]
    fn shards_estimates_the_curve() {
        let blocks = stream(400_000, 3);
        let mut sd = StackDistances::new();
        let mut sh = Shards::new(0.1);
        for &b in &blocks {
            sd.access(b);
            sh.access(b);
        }
        assert!(sh.sampled() < sd.accesses / 5);
        // mean absolute error over the curve, as SHARDS reports it
        let sizes = [64u64, 128, 256, 512, 1024, 2048, 4096, 16384];
        let errs: Vec<f64> = sizes
            .iter()
            .map(|&l| (sh.miss_ratio(l) - sd.miss_ratio(l)).abs())
            .collect();
        let mae = errs.iter().sum::<f64>() / errs.len() as f64;
        let max = errs.iter().copied().fold(0.0, f64::max);
        assert!(mae < 0.025 && max < 0.06, "MAE {mae}, max {max}: {errs:?}");
    }

    #[test]
    fn compaction_keeps_distances() {
        // many more accesses than the initial tree: forces several compactions
        let mut sd = StackDistances::new();
        for i in 0..300_000u64 {
            let d = sd.access(i % 1000);
            if i >= 1000 {
                assert_eq!(d, Some(999));
            }
        }
        assert_eq!(sd.distinct(), 1000);
        assert_eq!(curve_sizes(4)[..4], [1, 2, 4, 6]);
    }
}
