//! The LRU stack behind [`Pattern::Reuse`](crate::workload::Pattern::Reuse): a generator
//! draws a stack depth, takes the line at that depth and moves it to the top, or pushes
//! a line never used before.
//!
//! Lines are kept in the order of their last use: each use takes the next *time slot*,
//! and a bit per slot says whether that slot still holds its line's latest use. The line
//! at depth `d` is the (d + 1)-th marked slot counted back from the newest. Drawn depths
//! are geometric, mostly small, so it is usually among the newest 512 slots, found by
//! popcounts of their words; otherwise a Fenwick tree over 512-slot blocks (small enough
//! to stay in the host's cache) finds its block in O(log(slots / 512)). Moving the line
//! costs two updates of that tree, and since the line is found by its slot, no per-line
//! index is needed (a line is pushed only once). When the slots run out, the marked
//! ones are renumbered in order (and the slot space doubled if more than half of it is
//! live). The same stack as [`StackDistances`](crate::trace::mrc::StackDistances) measures,
//! which the tests hold it to, without walking a Fenwick tree over millions of slots.

use crate::fenwick::Fenwick;

/// Slots per block of the Fenwick tree.
const BLOCK_SLOTS: usize = 512;
/// 64-bit words per block (a power of two).
const BLOCK_WORDS: usize = BLOCK_SLOTS / 64;
/// Initial number of slots.
const INITIAL_SLOTS: usize = 1 << 16;

/// An LRU stack of lines that hands out the line at a given depth. See the [module
/// documentation](self).
#[derive(Debug, Clone)]
pub struct ReuseStack {
    /// Per slot: whether it holds its line's latest use.
    bits: Vec<u64>,
    /// Marked slots per block of [`BLOCK_SLOTS`].
    tree: Fenwick,
    /// Per slot: the line used then (a reuse region has under 2^32 lines; 4 bytes a
    /// slot keep more of this array in the host's caches when deep lines are taken).
    slot_line: Vec<u32>,
    /// The next free slot.
    next: usize,
    /// Distinct lines in the stack.
    live: u64,
}

impl Default for ReuseStack {
    fn default() -> Self {
        Self::new()
    }
}

impl ReuseStack {
    /// An empty stack.
    pub fn new() -> ReuseStack {
        ReuseStack {
            bits: vec![0; INITIAL_SLOTS / 64],
            tree: Fenwick::new(INITIAL_SLOTS / BLOCK_SLOTS),
            slot_line: vec![0; INITIAL_SLOTS],
            next: 0,
            live: 0,
        }
    }

    /// Distinct lines in the stack.
    pub fn distinct(&self) -> u64 {
        self.live
    }

    /// Moves the line at depth `d` (0: the most recently used) to the top and returns
    /// it; `None` (nothing moved) if the stack holds at most `d` lines.
    pub fn take(&mut self, d: u64) -> Option<u64> {
        if d >= self.live {
            return None;
        }
        let s = self.slot_at_depth(d);
        let line = self.slot_line[s] as u64;
        self.unmark(s);
        self.live -= 1;
        self.push(line);
        Some(line)
    }

    /// Puts `line`, which must not be in the stack, on top.
    pub fn push(&mut self, line: u64) {
        if self.next == self.slot_line.len() {
            self.compact();
        }
        let s = self.next;
        self.next += 1;
        self.mark(s);
        self.slot_line[s] = u32::try_from(line).expect("a reuse region has under 2^32 lines");
        self.live += 1;
    }

    /// The slot holding depth `d` (< `live`).
    fn slot_at_depth(&self, d: u64) -> usize {
        // the newest block, word by word from the top: most drawn depths end here
        let mut rem = d;
        let top = self.next - 1;
        let mut w = top / 64;
        let mut word = self.bits[w] & (u64::MAX >> (63 - top % 64));
        loop {
            let c = word.count_ones() as u64;
            if rem < c {
                return w * 64 + select_from_top(word, rem);
            }
            rem -= c;
            if w & (BLOCK_WORDS - 1) == 0 {
                break;
            }
            w -= 1;
            word = self.bits[w];
        }
        // deeper: the (live − d)-th marked slot from the oldest, by descending the tree
        // to its block, then the block's words from its oldest
        let (block, mut rank) = self.tree.find(self.live - d);
        let mut w = block * BLOCK_WORDS;
        loop {
            let word = self.bits[w];
            let c = word.count_ones() as u64;
            if rank <= c {
                return w * 64 + select_from_bottom(word, rank - 1);
            }
            rank -= c;
            w += 1;
        }
    }

    fn mark(&mut self, s: usize) {
        self.bits[s / 64] |= 1 << (s % 64);
        self.tree.add(s / BLOCK_SLOTS, 1);
    }

    fn unmark(&mut self, s: usize) {
        self.bits[s / 64] &= !(1 << (s % 64));
        self.tree.add(s / BLOCK_SLOTS, -1);
    }

    /// Renumbers the marked slots `0..live` in order, doubling the slot space while
    /// more than half of it would be live.
    fn compact(&mut self) {
        let lines: Vec<u32> = (0..self.next)
            .filter(|&s| self.bits[s / 64] & (1 << (s % 64)) != 0)
            .map(|s| self.slot_line[s])
            .collect();
        let mut cap = self.slot_line.len();
        while lines.len() * 2 > cap {
            cap *= 2;
        }
        self.bits = vec![0; cap / 64];
        self.slot_line = vec![0; cap];
        let mut counts = vec![0; cap / BLOCK_SLOTS];
        for (s, line) in lines.into_iter().enumerate() {
            self.bits[s / 64] |= 1 << (s % 64);
            self.slot_line[s] = line;
            counts[s / BLOCK_SLOTS] += 1;
        }
        self.tree = Fenwick::from_counts(&counts);
        self.next = self.live as usize;
    }
}

/// The bit position of the (k + 1)-th set bit of `word` counted from the top
/// (`k` < the number of set bits).
#[inline]
fn select_from_top(mut word: u64, k: u64) -> usize {
    for _ in 0..k {
        word &= !(1 << (63 - word.leading_zeros()));
    }
    63 - word.leading_zeros() as usize
}

/// The bit position of the (k + 1)-th set bit of `word` counted from the bottom
/// (`k` < the number of set bits).
#[inline]
fn select_from_bottom(mut word: u64, k: u64) -> usize {
    for _ in 0..k {
        word &= word - 1;
    }
    word.trailing_zeros() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::mrc::StackDistances;
    use cachesched_core::SimRng;

    #[test]
    fn take_walks_the_lru_stack() {
        let mut s = ReuseStack::new();
        for l in [10u64, 20, 30] {
            s.push(l);
        }
        assert_eq!(s.take(1), Some(20));
        // MRU order: 20, 30, 10
        assert_eq!(s.take(3), None);
        assert_eq!(s.take(2), Some(10));
        // 10, 20, 30
        assert_eq!(
            (s.take(0), s.take(2), s.distinct()),
            (Some(10), Some(30), 3)
        );
        // across compactions and growth: a cyclic walk over 5000 lines
        let mut s = ReuseStack::new();
        for l in 0..5000 {
            s.push(l);
        }
        for i in 0..200_000u64 {
            assert_eq!(s.take(4999), Some(i % 5000));
        }
        assert_eq!(s.take(0), Some(199_999 % 5000));
        assert_eq!(s.distinct(), 5000);
    }

    #[test]
    fn the_line_at_depth_d_has_stack_distance_d() {
        // the measuring implementation as the oracle: the line taken from depth d must
        // measure distance d; geometric depths of several means, new lines mixed in,
        // over enough uses for compactions and growth (200k lines live)
        let mut rng = SimRng::new(11);
        let mut stack = ReuseStack::new();
        let mut oracle = StackDistances::new();
        let mut fresh = 0u64;
        for (i, mean) in [3.0, 300.0, 30_000.0]
            .into_iter()
            .cycle()
            .take(600_000)
            .enumerate()
        {
            let d = (rng.unit().max(1e-300).ln() * -mean) as u64;
            let taken = if i % 3 != 0 || fresh >= 200_000 {
                stack.take(d)
            } else {
                None
            };
            let (line, want) = match taken {
                Some(l) => (l, Some(d)),
                None => {
                    fresh += 1;
                    stack.push(fresh + 1_000_000);
                    (fresh + 1_000_000, None)
                }
            };
            assert_eq!(oracle.access(line), want, "use {i}: line {line}, depth {d}");
        }
        assert_eq!(stack.distinct(), fresh);
    }
}
