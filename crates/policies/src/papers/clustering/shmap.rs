//! Sharing maps (paper 3, §4.3.1): per thread, a vector of small saturating counters,
//! one per hashed memory region, counting the thread's sampled remote-cache accesses to
//! that region; and the per-process *shMap filter* that keeps the vectors comparable.
//!
//! A region is `region_bytes` of address space (the paper: 128 B, the Power5 L2 line).
//! Its number is hashed into one of `entries` slots (a Fibonacci hash of the region
//! number: equal offsets of different objects do not collide systematically, as they
//! would with a plain modulo). The filter records which region owns each slot: the first
//! region sampled there claims it for good, and a sample of any other region hashing to
//! an owned slot is discarded, so a slot counts one region in every thread's vector and
//! dot products compare like with like. A thread may claim at most
//! `max_claims_per_thread` slots, so that one thread with many private remote misses
//! cannot take the whole filter before the sharers are sampled.

use std::collections::BTreeMap;

use cachesched_core::ThreadId;

/// What became of one sample offered to a [`ShMaps`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleFate {
    /// Counted in the thread's vector (the slot was free and is now this region's, or
    /// already was).
    Counted,
    /// Discarded: another region owns the slot.
    FilterConflict,
    /// Discarded: the slot was free, but the thread has claimed its limit of slots.
    ThreadLimit,
}

/// The shMaps of one process's threads and the process's filter.
#[derive(Debug, Clone, PartialEq)]
pub struct ShMaps {
    bits: u32,
    region_shift: u32,
    saturate: u8,
    max_claims: usize,
    owner: Vec<Option<u64>>,
    claims: BTreeMap<ThreadId, usize>,
    maps: BTreeMap<ThreadId, Vec<u8>>,
}

impl ShMaps {
    /// Empty maps of `entries` slots (a power of two) over regions of `region_bytes`
    /// (a power of two), counters saturating at `saturate`, at most `max_claims` slots
    /// claimed per thread.
    pub fn new(entries: usize, region_bytes: u64, saturate: u8, max_claims: usize) -> ShMaps {
        assert!(
            entries.is_power_of_two() && entries >= 2,
            "entries must be a power of two"
        );
        assert!(
            region_bytes.is_power_of_two(),
            "region_bytes must be a power of two"
        );
        ShMaps {
            bits: entries.trailing_zeros(),
            region_shift: region_bytes.trailing_zeros(),
            saturate: saturate.max(1),
            max_claims,
            owner: vec![None; entries],
            claims: BTreeMap::new(),
            maps: BTreeMap::new(),
        }
    }

    /// Number of slots per vector.
    pub fn entries(&self) -> usize {
        self.owner.len()
    }

    /// The slot of address `addr`, and its region number.
    pub fn slot(&self, addr: u64) -> (usize, u64) {
        let region = addr >> self.region_shift;
        let h = region.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits);
        (h as usize, region)
    }

    /// Offers a sample of `thread` at `addr`.
    pub fn record(&mut self, thread: ThreadId, addr: u64) -> SampleFate {
        let (slot, region) = self.slot(addr);
        match self.owner[slot] {
            Some(r) if r != region => return SampleFate::FilterConflict,
            Some(_) => {}
            None => {
                let c = self.claims.entry(thread).or_insert(0);
                if *c >= self.max_claims {
                    return SampleFate::ThreadLimit;
                }
                *c += 1;
                self.owner[slot] = Some(region);
            }
        }
        let n = self.owner.len();
        let v = self.maps.entry(thread).or_insert_with(|| vec![0; n]);
        if v[slot] < self.saturate {
            v[slot] += 1;
        }
        SampleFate::Counted
    }

    /// The vectors of the threads that had at least one sample counted, by thread.
    pub fn maps(&self) -> &BTreeMap<ThreadId, Vec<u8>> {
        &self.maps
    }

    /// Forgets a thread's vector (its claimed slots stay owned).
    pub fn remove(&mut self, thread: ThreadId) {
        self.maps.remove(&thread);
    }

    /// Slots owned by some region.
    pub fn owned_slots(&self) -> usize {
        self.owner.iter().filter(|o| o.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(i: u32) -> ThreadId {
        ThreadId(i)
    }

    #[test]
    fn counters_saturate() {
        let mut m = ShMaps::new(256, 128, 255, 32);
        for _ in 0..300 {
            assert_eq!(m.record(t(0), 0x1000), SampleFate::Counted);
        }
        let (slot, _) = m.slot(0x1000);
        assert_eq!(m.maps()[&t(0)][slot], 255);
        // a reduced saturation (scaled sampling) holds too
        let mut m = ShMaps::new(256, 128, 26, 32);
        for _ in 0..300 {
            m.record(t(0), 0x1000);
        }
        assert_eq!(m.maps()[&t(0)][slot], 26);
    }

    #[test]
    fn one_region_per_slot_first_claim_owns() {
        let mut m = ShMaps::new(16, 128, 255, 16);
        // find two regions hashing to the same slot
        let a = 0x10_0000u64;
        let (sa, _) = m.slot(a);
        let b = (1..10_000u64)
            .map(|k| a + k * 128)
            .find(|&x| m.slot(x).0 == sa)
            .expect("a colliding region among 10,000");
        assert_eq!(m.record(t(1), a), SampleFate::Counted);
        assert_eq!(m.record(t(2), b), SampleFate::FilterConflict);
        // every byte of a's region counts in a's slot, for any thread
        assert_eq!(m.record(t(2), a + 127), SampleFate::Counted);
        assert_eq!(m.maps()[&t(1)][sa], 1);
        assert_eq!(m.maps()[&t(2)][sa], 1);
        assert_eq!(m.owned_slots(), 1);
    }

    #[test]
    fn per_thread_claim_limit() {
        let mut m = ShMaps::new(256, 128, 255, 4);
        let mut counted = 0;
        let mut limited = 0;
        for k in 0..64u64 {
            match m.record(t(0), k * 128) {
                SampleFate::Counted => counted += 1,
                SampleFate::ThreadLimit => limited += 1,
                SampleFate::FilterConflict => {}
            }
        }
        assert_eq!(counted, 4, "only four slots may be claimed");
        assert!(limited >= 56);
        // another thread may still count in the slots thread 0 claimed, and claim its own
        assert_eq!(m.record(t(1), 0), SampleFate::Counted);
        assert_eq!(m.record(t(1), 200 * 128), SampleFate::Counted);
    }

    #[test]
    fn equal_offsets_of_different_objects_spread() {
        // 64 objects 1 MiB apart, same offset: a modulo hash would put all in one slot
        let m = ShMaps::new(256, 128, 255, 32);
        let slots: std::collections::BTreeSet<usize> =
            (0..64u64).map(|k| m.slot(k << 20).0).collect();
        assert!(slots.len() >= 40, "{} distinct slots of 64", slots.len());
    }
}
