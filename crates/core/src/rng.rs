//! Small, fast, seedable random number generators: [`SimRng`] (xoshiro256**, seeded
//! through SplitMix64) for everything, and [`StreamRng`] (wyrand, seeded from a
//! `SimRng`) for the workload generators' per-access draws. Their output sequences are
//! fixed by this source file, not by a dependency's version, which is what
//! byte-identical reruns need.

/// Deterministic pseudo-random generator. One seed drives a whole run; independent
/// streams are derived with [`SimRng::fork`].
#[derive(Debug, Clone)]
pub struct SimRng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SimRng {
    /// A generator seeded from `seed`.
    pub fn new(seed: u64) -> SimRng {
        let mut st = seed;
        SimRng {
            s: [
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
            ],
        }
    }

    /// An independent generator for sub-stream `stream` of this seed (e.g. one per
    /// thread), without advancing `self`.
    pub fn fork(&self, stream: u64) -> SimRng {
        let mut st =
            self.s[0] ^ self.s[3].rotate_left(17) ^ stream.wrapping_mul(0xA24B_AED4_963E_E407);
        SimRng::new(splitmix64(&mut st))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, n)` (Lemire's multiply-shift; `n` must be > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// A cheaper generator for the simulator's hottest loop, one per workload thread:
/// wyrand (Wang Yi), a 64-bit Weyl sequence mixed by one 64×64→128-bit multiply. Its
/// state advances by an addition, so consecutive draws do not wait on each other; its
/// author reports it passing BigCrush and PractRand, enough for address streams.
/// Seeded from a [`SimRng`], so the run's one seed still drives it.
#[derive(Debug, Clone, Copy)]
pub struct StreamRng {
    state: u64,
}

impl StreamRng {
    /// A generator seeded by one draw of `rng`.
    pub fn from_rng(rng: &mut SimRng) -> StreamRng {
        StreamRng {
            state: rng.next_u64(),
        }
    }

    /// The next 64 random bits.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = self.state as u128 * (self.state ^ 0xe703_7ed1_a0b4_28db) as u128;
        ((t >> 64) as u64) ^ (t as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_forks_differ() {
        let mut a = SimRng::new(42);
        let mut b = SimRng::new(42);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(va, vb);
        let mut f1 = a.fork(1);
        let mut f2 = a.fork(2);
        assert_ne!(f1.next_u64(), f2.next_u64());
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = SimRng::new(7);
        let mut hist = [0u32; 10];
        for _ in 0..100_000 {
            let v = r.below(10);
            hist[v as usize] += 1;
        }
        for h in hist {
            assert!((9_000..11_000).contains(&h), "{hist:?}");
        }
    }

    #[test]
    fn stream_rng_is_seeded_by_its_simrng_and_roughly_uniform() {
        let mut a = StreamRng::from_rng(&mut SimRng::new(5));
        let mut b = StreamRng::from_rng(&mut SimRng::new(5));
        let mut c = StreamRng::from_rng(&mut SimRng::new(6));
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(a.next_u64(), c.next_u64());
        // every 4-bit nibble of the output about equally often
        let mut hist = [[0u32; 16]; 16];
        for _ in 0..100_000 {
            let v = a.next_u64();
            for (k, h) in hist.iter_mut().enumerate() {
                h[((v >> (4 * k)) & 15) as usize] += 1;
            }
        }
        for h in hist {
            for n in h {
                assert!((5_800..6_700).contains(&n), "{h:?}");
            }
        }
    }
}
