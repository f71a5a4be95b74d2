//! One set-associative cache instance: true LRU, write-allocate, per-line owner thread
//! (so per-thread occupancy can be read), dirty and exclusive bits for coherence, optional
//! way partitioning, flush.
//!
//! This is the simulator's hot path, specialised on purpose. Each set keeps its lines in
//! MRU-to-LRU order (as cachegrind does), so a hit on the most recently used line costs
//! one comparison and the LRU victim is the last line. Invalid lines always sit at the
//! LRU end, so they are filled before any valid line is evicted. A line remembers the
//! physical way it occupies, which is what way partitioning restricts.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Line flag: modified since filled.
pub const DIRTY: u8 = 1;
/// Line flag: no other chip holds this block (a write need not invalidate across chips).
pub const EXCLUSIVE: u8 = 2;
/// Line flag: no other core's private cache on this chip holds this block.
pub const CORE_EXCLUSIVE: u8 = 4;
/// Line flag: brought in by a prefetcher and not yet used by a demand access.
pub const PREFETCHED: u8 = 8;

const INVALID: u64 = u64::MAX;

/// Host bytes one simulated line takes (for estimating a run's memory before it
/// allocates).
pub const LINE_BYTES_IN_HOST: u64 = std::mem::size_of::<Line>() as u64;

/// The largest cache instance a machine may have, bytes (1 GiB: 16 M lines, 256 MiB of
/// host memory each).
pub const MAX_CACHE_BYTES: u64 = 1 << 30;

#[derive(Debug, Clone, Copy)]
struct Line {
    /// Block number (address >> line bits), or `INVALID`.
    tag: u64,
    owner: u32,
    way: u16,
    flags: u8,
}

/// Geometry of a cache instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheGeometry {
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Associativity.
    pub ways: u32,
    /// Line size in bytes (a power of two).
    pub line_bytes: u32,
}

/// Errors in a cache geometry.
#[derive(Debug, Error, PartialEq)]
pub enum CacheError {
    /// The shape cannot be simulated.
    #[error("invalid cache geometry {size} B, {ways}-way, {line} B lines: {reason}")]
    Geometry {
        /// Size in bytes.
        size: u64,
        /// Associativity.
        ways: u32,
        /// Line size.
        line: u32,
        /// What is wrong.
        reason: &'static str,
    },
}

impl CacheGeometry {
    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.size_bytes / (self.ways as u64 * self.line_bytes as u64)
    }

    /// Checks that the geometry can be simulated (any set count; power-of-two lines).
    pub fn check(&self) -> Result<(), CacheError> {
        let err = |reason| CacheError::Geometry {
            size: self.size_bytes,
            ways: self.ways,
            line: self.line_bytes,
            reason,
        };
        if self.line_bytes == 0 || !self.line_bytes.is_power_of_two() {
            return Err(err("line size must be a power of two"));
        }
        if self.ways == 0 || self.ways > u16::MAX as u32 {
            return Err(err("associativity must be between 1 and 65535"));
        }
        if self.size_bytes > MAX_CACHE_BYTES {
            return Err(err("size must be at most 1 GiB"));
        }
        if self.size_bytes == 0
            || !self
                .size_bytes
                .is_multiple_of(self.ways as u64 * self.line_bytes as u64)
        {
            return Err(err("size must be a non-zero multiple of ways × line size"));
        }
        Ok(())
    }
}

/// What a line evicted by a fill held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// Its block number.
    pub block: u64,
    /// The thread that had filled it.
    pub owner: u32,
    /// Its flags (e.g. [`DIRTY`]).
    pub flags: u8,
}

/// Result of [`Cache::access`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The line was present; its flags before the access.
    Hit {
        /// Flags before the access.
        flags: u8,
    },
    /// The line was filled, possibly evicting another.
    Miss {
        /// The evicted valid line, if any.
        evicted: Option<Evicted>,
    },
}

/// A set-associative LRU cache instance. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Cache {
    geom: CacheGeometry,
    sets: u64,
    set_mask: Option<u64>,
    line_shift: u32,
    assoc: usize,
    lines: Vec<Line>,
    occupancy: Vec<u64>,
    /// Per partition class, the allowed ways as a bit set (`None`: no partitioning).
    partition: Option<Vec<Vec<bool>>>,
    /// Partition class of each owner (default class 0).
    owner_class: Vec<u16>,
    /// Lines filled so far (every fill, whoever asked for it).
    fills: u64,
}

impl Cache {
    /// An empty cache of geometry `geom`.
    pub fn new(geom: CacheGeometry) -> Result<Cache, CacheError> {
        geom.check()?;
        let sets = geom.sets();
        let assoc = geom.ways as usize;
        let mut lines = Vec::with_capacity((sets as usize) * assoc);
        for _ in 0..sets {
            for w in 0..assoc {
                lines.push(Line {
                    tag: INVALID,
                    owner: 0,
                    way: w as u16,
                    flags: 0,
                });
            }
        }
        Ok(Cache {
            geom,
            sets,
            set_mask: sets.is_power_of_two().then_some(sets - 1),
            line_shift: geom.line_bytes.trailing_zeros(),
            assoc,
            lines,
            occupancy: Vec::new(),
            partition: None,
            owner_class: Vec::new(),
            fills: 0,
        })
    }

    /// The geometry.
    pub fn geometry(&self) -> CacheGeometry {
        self.geom
    }

    /// log2 of the line size.
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }

    /// Partitions the ways: `classes[k]` lists the ways that owners of class `k` may fill.
    /// Lines already cached stay where they are.
    pub fn set_partition(&mut self, classes: &[Vec<u32>]) -> Result<(), CacheError> {
        let mut v = Vec::new();
        for ways in classes {
            let mut allowed = vec![false; self.assoc];
            for &w in ways {
                if (w as usize) >= self.assoc {
                    return Err(CacheError::Geometry {
                        size: self.geom.size_bytes,
                        ways: self.geom.ways,
                        line: self.geom.line_bytes,
                        reason: "partition names a way beyond the associativity",
                    });
                }
                allowed[w as usize] = true;
            }
            if !allowed.iter().any(|&a| a) {
                return Err(CacheError::Geometry {
                    size: self.geom.size_bytes,
                    ways: self.geom.ways,
                    line: self.geom.line_bytes,
                    reason: "a partition class has no way",
                });
            }
            v.push(allowed);
        }
        self.partition = Some(v);
        Ok(())
    }

    /// Puts `owner` into partition class `class`.
    pub fn set_owner_class(&mut self, owner: u32, class: u16) {
        let i = owner as usize;
        if self.owner_class.len() <= i {
            self.owner_class.resize(i + 1, 0);
        }
        self.owner_class[i] = class;
    }

    #[inline(always)]
    fn set_base(&self, block: u64) -> usize {
        let set = match self.set_mask {
            Some(m) => block & m,
            None => block % self.sets,
        };
        set as usize * self.assoc
    }

    /// Accesses block `block` on behalf of `owner`: on a hit the line becomes MRU; on a
    /// miss it is filled as MRU (write-allocate), evicting the LRU line the owner's
    /// partition allows. `set_flags` are OR-ed into the line's flags.
    #[inline]
    pub fn access(&mut self, block: u64, owner: u32, set_flags: u8) -> Outcome {
        match self.lookup(block, set_flags) {
            Some(flags) => Outcome::Hit { flags },
            None => Outcome::Miss {
                evicted: self.fill(block, owner, set_flags),
            },
        }
    }

    /// Looks `block` up: on a hit the line becomes MRU and its flags are returned; on a
    /// miss nothing changes (fill it with [`Cache::fill`]). `set_flags` are OR-ed into a
    /// hit line's flags (the returned flags are the old ones).
    #[inline]
    pub fn lookup(&mut self, block: u64, set_flags: u8) -> Option<u8> {
        let base = self.set_base(block);
        let set = &mut self.lines[base..base + self.assoc];
        let i = set.iter().position(|l| l.tag == block)?;
        let mut l = set[i];
        let f = l.flags;
        l.flags |= set_flags;
        set.copy_within(0..i, 1);
        set[0] = l;
        Some(f)
    }

    /// Fills `block` (known to be absent) as MRU with `flags`, returning the evicted line.
    #[inline]
    pub fn fill(&mut self, block: u64, owner: u32, flags: u8) -> Option<Evicted> {
        let base = self.set_base(block);
        self.fill_at(base, block, owner, flags)
    }

    #[inline]
    fn fill_at(&mut self, base: usize, block: u64, owner: u32, flags: u8) -> Option<Evicted> {
        self.fills += 1;
        let assoc = self.assoc;
        let victim = match &self.partition {
            None => assoc - 1,
            Some(classes) => {
                let class = self.owner_class.get(owner as usize).copied().unwrap_or(0) as usize;
                let allowed = &classes[class.min(classes.len() - 1)];
                let set = &self.lines[base..base + assoc];
                (0..assoc)
                    .rev()
                    .find(|&i| allowed[set[i].way as usize])
                    .expect("every partition class has a way")
            }
        };
        let set = &mut self.lines[base..base + assoc];
        let old = set[victim];
        set.copy_within(0..victim, 1);
        set[0] = Line {
            tag: block,
            owner,
            way: old.way,
            flags,
        };
        let o = owner as usize;
        if self.occupancy.len() <= o {
            self.occupancy.resize(o + 1, 0);
        }
        self.occupancy[o] += 1;
        if old.tag != INVALID {
            self.occupancy[old.owner as usize] -= 1;
            Some(Evicted {
                block: old.tag,
                owner: old.owner,
                flags: old.flags,
            })
        } else {
            None
        }
    }

    /// Whether `block` is the most recently used line of its set — then an access to
    /// it is a hit that changes nothing. The inlined fast path of callers.
    #[inline(always)]
    pub fn is_mru(&self, block: u64) -> bool {
        self.lines[self.set_base(block)].tag == block
    }

    /// Whether `block` is cached; does not change LRU order.
    #[inline]
    pub fn contains(&self, block: u64) -> bool {
        let base = self.set_base(block);
        self.lines[base..base + self.assoc]
            .iter()
            .any(|l| l.tag == block)
    }

    /// Flags of `block` if cached (no LRU update).
    #[inline]
    pub fn flags(&self, block: u64) -> Option<u8> {
        let base = self.set_base(block);
        self.lines[base..base + self.assoc]
            .iter()
            .find(|l| l.tag == block)
            .map(|l| l.flags)
    }

    /// Sets and clears flags of `block` if cached (no LRU update). Returns whether it was.
    #[inline]
    pub fn update_flags(&mut self, block: u64, set: u8, clear: u8) -> bool {
        let base = self.set_base(block);
        for l in &mut self.lines[base..base + self.assoc] {
            if l.tag == block {
                l.flags = (l.flags | set) & !clear;
                return true;
            }
        }
        false
    }

    /// Removes `block` if cached, returning its flags. The freed line moves to the LRU
    /// end.
    pub fn invalidate(&mut self, block: u64) -> Option<u8> {
        let base = self.set_base(block);
        let set = &mut self.lines[base..base + self.assoc];
        let i = set.iter().position(|l| l.tag == block)?;
        let l = set[i];
        set.copy_within(i + 1.., i);
        let last = set.len() - 1;
        set[last] = Line {
            tag: INVALID,
            owner: 0,
            way: l.way,
            flags: 0,
        };
        self.occupancy[l.owner as usize] -= 1;
        Some(l.flags)
    }

    /// Empties the cache.
    pub fn flush(&mut self) {
        for l in &mut self.lines {
            l.tag = INVALID;
            l.flags = 0;
        }
        self.occupancy.iter_mut().for_each(|o| *o = 0);
    }

    /// Number of lines currently owned by `owner`.
    pub fn occupancy_lines(&self, owner: u32) -> u64 {
        self.occupancy.get(owner as usize).copied().unwrap_or(0)
    }

    /// Bytes currently owned by `owner`.
    pub fn occupancy_bytes(&self, owner: u32) -> u64 {
        self.occupancy_lines(owner) << self.line_shift
    }

    /// Lines filled so far (demand and prefetch fills of every owner).
    pub fn fills(&self) -> u64 {
        self.fills
    }

    /// Number of valid lines.
    pub fn valid_lines(&self) -> u64 {
        self.occupancy.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(size: u64, ways: u32) -> Cache {
        Cache::new(CacheGeometry {
            size_bytes: size,
            ways,
            line_bytes: 64,
        })
        .unwrap()
    }

    fn is_miss(o: Outcome) -> bool {
        matches!(o, Outcome::Miss { .. })
    }

    #[test]
    fn lru_within_a_set() {
        // 2 sets × 2 ways; blocks 0, 2, 4 map to set 0.
        let mut c = cache(256, 2);
        assert!(is_miss(c.access(0, 1, 0)));
        assert!(is_miss(c.access(2, 1, 0)));
        assert!(!is_miss(c.access(0, 1, 0))); // 0 becomes MRU
        match c.access(4, 2, 0) {
            Outcome::Miss { evicted: Some(e) } => assert_eq!((e.block, e.owner), (2, 1)),
            o => panic!("{o:?}"),
        }
        assert!(c.contains(0) && c.contains(4) && !c.contains(2));
        assert_eq!(c.occupancy_lines(1), 1);
        assert_eq!(c.occupancy_lines(2), 1);
        assert_eq!(c.occupancy_bytes(2), 64);
    }

    #[test]
    fn invalid_lines_fill_first_and_flush_empties() {
        let mut c = cache(256, 2);
        c.access(0, 0, DIRTY);
        c.access(2, 0, 0);
        assert_eq!(c.invalidate(0), Some(DIRTY));
        assert_eq!(c.invalidate(0), None);
        // refill goes to the freed line: 2 must survive
        assert!(matches!(c.access(4, 0, 0), Outcome::Miss { evicted: None }));
        assert!(c.contains(2));
        c.flush();
        assert_eq!(c.valid_lines(), 0);
        assert!(!c.contains(2));
    }

    #[test]
    fn non_power_of_two_sets() {
        // 3 sets × 2 ways
        let mut c = cache(384, 2);
        for b in 0..6 {
            assert!(is_miss(c.access(b, 0, 0)));
        }
        for b in 0..6 {
            assert!(!is_miss(c.access(b, 0, 0)), "block {b}");
        }
        assert!(is_miss(c.access(6, 0, 0)));
    }

    #[test]
    fn way_partitioning_confines_fills() {
        // 1 set × 4 ways; class 0 gets ways 0-2, class 1 gets way 3.
        let mut c = cache(256, 4);
        c.set_partition(&[vec![0, 1, 2], vec![3]]).unwrap();
        c.set_owner_class(7, 1);
        for b in 0..3 {
            c.access(b, 0, 0);
        }
        // owner 7 streams: it can only ever hold one line, never evicting class 0
        for b in 100..110 {
            c.access(b, 7, 0);
        }
        assert_eq!(c.occupancy_lines(7), 1);
        assert_eq!(c.occupancy_lines(0), 3);
        for b in 0..3 {
            assert!(c.contains(b));
        }
        assert!(c.set_partition(&[vec![9]]).is_err());
    }

    #[test]
    fn flags_update() {
        let mut c = cache(256, 2);
        c.access(5, 0, EXCLUSIVE);
        assert_eq!(c.flags(5), Some(EXCLUSIVE));
        assert!(c.update_flags(5, DIRTY, EXCLUSIVE));
        assert_eq!(c.flags(5), Some(DIRTY));
        assert!(matches!(c.access(5, 0, 0), Outcome::Hit { flags: DIRTY }));
        assert!(!c.update_flags(9, DIRTY, 0));
    }
}
