//! Hardware data prefetchers: which lines a core asks for ahead of its loads, and when
//! they arrive.
//!
//! The Intel Core microarchitecture (the affinity paper's Clovertown, the timeslice
//! paper's Core 2 and, with the same three mechanisms, its Sandy Bridge Xeon) has, per
//! core, an L1D *streaming* (next-line) prefetcher, an L1D *instruction-pointer stride*
//! prefetcher and an L2 *streamer* (Intel 64 and IA-32 Architectures Optimization
//! Reference Manual, "Data Prefetching" for the Core and Sandy Bridge
//! microarchitectures). They are modelled at the level their behaviour matters to
//! scheduling: they turn sequential and strided misses into hits, spend bus bandwidth,
//! and occupy cache space. Prefetches never cross a 4 KiB page.
//!
//! - **Next line** (`l1_next_line`, the DCU or streaming prefetcher): a load at a
//!   higher address in the line the previous load touched ("an ascending access to
//!   very recently loaded data", the manual says) fetches the next line into the L1D.
//!   Only loads train it on the Intel presets: the manual's first-level data prefetcher
//!   "is triggered by load operations" (Optimization Reference Manual, "Hardware
//!   Prefetching for First-Level Data Cache"); `next_line_on_stores` lets stores train
//!   it too (the POWER5 presets, whose sources say nothing either way, keep that).
//! - **IP stride** (`l1_ip_stride`): a table of 256 loads indexed by instruction
//!   address remembers each one's last address and stride; when a load moves by the same
//!   non-zero stride twice in a row, the line at address + stride is fetched into the
//!   L1D.
//! - **L2 streamer** (`l2_streamer`): a table of 16 pages remembers the last line the
//!   L1D asked the L2 for in each, the direction, and how far ahead it has fetched; a
//!   request for the next line in the same direction fetches `l2_degree` more lines
//!   into the L2, staying at most [`STREAM_DISTANCE`] lines ahead ("two prefetch
//!   requests on every L2 lookup … up to 20 lines ahead of the load request", the
//!   Optimization Reference Manual on the Core streamer).
//!
//! A prefetched line is marked in the cache with its arrival time; a demand access that
//! finds it before it has arrived waits for the rest (a late prefetch), and one that
//! finds it after counts as a useful prefetch.

use serde::{Deserialize, Serialize};

/// The prefetchers of a machine's cores (default: none). Unknown keys are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefetchConfig {
    /// L1D next-line prefetcher (default false).
    #[serde(default)]
    pub l1_next_line: bool,
    /// Whether stores train the next-line prefetcher as loads do (default false: only
    /// loads, as Intel documents its first-level data prefetcher).
    #[serde(default)]
    pub next_line_on_stores: bool,
    /// L1D instruction-pointer stride prefetcher (default false).
    #[serde(default)]
    pub l1_ip_stride: bool,
    /// L2 streamer (default false).
    #[serde(default)]
    pub l2_streamer: bool,
    /// Lines the L2 streamer fetches ahead per confirmed miss (default 2, at most 16).
    #[serde(default = "default_degree")]
    pub l2_degree: u32,
}

fn default_degree() -> u32 {
    2
}

impl Default for PrefetchConfig {
    fn default() -> Self {
        PrefetchConfig {
            l1_next_line: false,
            next_line_on_stores: false,
            l1_ip_stride: false,
            l2_streamer: false,
            l2_degree: default_degree(),
        }
    }
}

impl PrefetchConfig {
    /// Every prefetcher of the Intel Core microarchitecture on, degree 2; the next-line
    /// prefetcher trained by loads only.
    pub fn intel_core() -> PrefetchConfig {
        PrefetchConfig {
            l1_next_line: true,
            next_line_on_stores: false,
            l1_ip_stride: true,
            l2_streamer: true,
            l2_degree: 2,
        }
    }

    /// Whether any prefetcher is on.
    pub fn any(&self) -> bool {
        self.l1_next_line || self.l1_ip_stride || self.l2_streamer
    }
}

/// Prefetch counts (cumulative in the memory system; over the measured window in a
/// result).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefetchStats {
    /// Lines requested by a prefetcher that were not already in the target cache: one
    /// per request, so a line both an L1 prefetcher and the L2 streamer ask for counts
    /// twice (this is requests, not memory traffic, and `useful / issued` is not the
    /// literature's accuracy).
    pub issued: u64,
    /// Prefetched lines a demand access found after they had arrived.
    pub useful: u64,
    /// Prefetched lines a demand access found while they were still on their way.
    pub late: u64,
}

impl PrefetchStats {
    /// `self - earlier`.
    pub fn since(&self, earlier: &PrefetchStats) -> PrefetchStats {
        PrefetchStats {
            issued: self.issued - earlier.issued,
            useful: self.useful - earlier.useful,
            late: self.late - earlier.late,
        }
    }
}

/// Entries of the IP-stride table.
const IP_ENTRIES: usize = 256;
/// Entries of the streamer's page table.
const STREAM_PAGES: usize = 16;
/// Entries of the in-flight table (arrival times of recent prefetches).
const IN_FLIGHT: usize = 64;
/// How many lines the L2 streamer runs ahead of the requests at most.
pub const STREAM_DISTANCE: u64 = 20;
/// Page size prefetches stay within.
const PAGE_SHIFT: u32 = 12;

#[derive(Debug, Clone, Copy, Default)]
struct IpEntry {
    pc: u64,
    last: u64,
    stride: i64,
}

#[derive(Debug, Clone, Copy, Default)]
struct StreamEntry {
    /// Page number + 1 (0: empty).
    page: u64,
    last_line: u64,
    dir: i64,
    /// The furthest line fetched ahead in `dir`.
    ahead: u64,
}

/// One core's prefetcher state.
#[derive(Debug, Clone)]
pub struct Prefetcher {
    ip: Vec<IpEntry>,
    pages: [StreamEntry; STREAM_PAGES],
    next_page: usize,
    /// (line address, arrival cycle) of recent prefetches, a ring.
    in_flight: [(u64, u64); IN_FLIGHT],
    next_flight: usize,
    /// The previous data address (for the next-line prefetcher).
    last: u64,
}

impl Default for Prefetcher {
    fn default() -> Self {
        Prefetcher {
            ip: vec![IpEntry::default(); IP_ENTRIES],
            pages: [StreamEntry::default(); STREAM_PAGES],
            next_page: 0,
            in_flight: [(u64::MAX, 0); IN_FLIGHT],
            next_flight: 0,
            last: u64::MAX,
        }
    }
}

/// `addr + delta` if it stays in `addr`'s page.
pub fn same_page(addr: u64, delta: i64) -> Option<u64> {
    let to = addr.checked_add_signed(delta)?;
    (to >> PAGE_SHIFT == addr >> PAGE_SHIFT).then_some(to)
}

impl Prefetcher {
    /// The next-line prefetcher sees an access to `addr` (lines of `2^shift` bytes):
    /// the next line's address, if the access ascends within the line of the previous
    /// one and the next line is in the same page.
    pub fn next_line(&mut self, addr: u64, shift: u32) -> Option<u64> {
        let prev = std::mem::replace(&mut self.last, addr);
        if addr > prev && addr >> shift == prev >> shift {
            same_page(addr >> shift << shift, 1 << shift)
        } else {
            None
        }
    }

    /// The IP-stride prefetcher sees load `pc` at `addr`: the address to prefetch, if
    /// the load repeated its stride.
    pub fn ip_stride(&mut self, pc: u64, addr: u64) -> Option<u64> {
        let e = &mut self.ip[((pc >> 2) as usize) % IP_ENTRIES];
        if e.pc != pc {
            *e = IpEntry {
                pc,
                last: addr,
                stride: 0,
            };
            return None;
        }
        let stride = addr.wrapping_sub(e.last) as i64;
        let confirmed = stride != 0 && stride == e.stride;
        e.stride = stride;
        e.last = addr;
        if confirmed {
            same_page(addr, stride)
        } else {
            None
        }
    }

    /// The L2 streamer sees the L1D ask for line `line` (line number, lines of
    /// `line_bytes`): the lines to prefetch (first, direction, count), if the request
    /// continues a run in its page.
    pub fn stream(&mut self, line: u64, line_bytes: u64, degree: u32) -> Option<(u64, i64, u64)> {
        let page = ((line * line_bytes) >> PAGE_SHIFT) + 1;
        if let Some(e) = self.pages.iter_mut().find(|e| e.page == page) {
            let d = line as i64 - e.last_line as i64;
            let run = d.abs() == 1 && (e.dir == 0 || e.dir == d);
            e.last_line = line;
            if !run {
                e.dir = 0;
                return None;
            }
            if e.dir != d {
                e.dir = d;
                e.ahead = line;
            }
            // continue from the furthest line fetched, if still ahead of the request
            let from = if (e.ahead as i64 - line as i64) * d > 0 {
                e.ahead
            } else {
                line
            };
            let gap = (from as i64 - line as i64).unsigned_abs();
            let n = (degree as u64).min(STREAM_DISTANCE.saturating_sub(gap));
            if n == 0 {
                return None;
            }
            e.ahead = (from as i64 + d * n as i64) as u64;
            return Some(((from as i64 + d) as u64, d, n));
        }
        self.pages[self.next_page] = StreamEntry {
            page,
            last_line: line,
            dir: 0,
            ahead: line,
        };
        self.next_page = (self.next_page + 1) % STREAM_PAGES;
        None
    }

    /// Records that the line at `addr` (any address in it, lines of `2^shift` bytes)
    /// arrives at cycle `at`.
    pub fn record(&mut self, addr: u64, shift: u32, at: u64) {
        self.in_flight[self.next_flight] = (addr >> shift, at);
        self.next_flight = (self.next_flight + 1) % IN_FLIGHT;
    }

    /// When the prefetched line holding `addr` arrives (0 if it is no longer
    /// remembered: long arrived).
    pub fn arrival(&self, addr: u64, shift: u32) -> u64 {
        let line = addr >> shift;
        self.in_flight
            .iter()
            .filter(|(l, _)| *l == line)
            .map(|&(_, at)| at)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_line_on_an_ascending_access_within_a_line() {
        let mut p = Prefetcher::default();
        assert_eq!(p.next_line(0x1000, 6), None);
        assert_eq!(p.next_line(0x1008, 6), Some(0x1040));
        assert_eq!(p.next_line(0x1000, 6), None);
        assert_eq!(p.next_line(0x2000, 6), None);
        // not across a page
        p.next_line(0x1fc0, 6);
        assert_eq!(p.next_line(0x1fc8, 6), None);
    }

    #[test]
    fn ip_stride_needs_the_same_stride_twice() {
        let mut p = Prefetcher::default();
        assert_eq!(p.ip_stride(0x400, 0x1000), None);
        assert_eq!(p.ip_stride(0x400, 0x1100), None);
        assert_eq!(p.ip_stride(0x400, 0x1200), Some(0x1300));
        // another load at the same table slot resets it
        assert_eq!(p.ip_stride(0x400 + 4 * IP_ENTRIES as u64, 0x9000), None);
        // never across a page
        let mut p = Prefetcher::default();
        p.ip_stride(8, 0x1d00);
        p.ip_stride(8, 0x1e00);
        assert_eq!(p.ip_stride(8, 0x1f00), None);
    }

    #[test]
    fn streamer_follows_runs_and_stays_a_distance_ahead() {
        let mut p = Prefetcher::default();
        assert_eq!(p.stream(1000, 64, 2), None);
        // two lines per request, each time beyond the furthest fetched
        assert_eq!(p.stream(1001, 64, 2), Some((1002, 1, 2)));
        assert_eq!(p.stream(1002, 64, 2), Some((1004, 1, 2)));
        // 20 lines ahead at most
        let mut ahead = 1005;
        for line in 1003..1020 {
            if let Some((first, 1, n)) = p.stream(line, 64, 2) {
                assert_eq!(first, ahead + 1);
                ahead += n;
            }
            assert!(ahead - line <= STREAM_DISTANCE, "{line} {ahead}");
        }
        assert_eq!(ahead, 1019 + STREAM_DISTANCE);
        // a jump breaks the run, a descending pair starts another
        assert_eq!(p.stream(1010, 64, 2), None);
        assert_eq!(p.stream(1009, 64, 2), Some((1008, -1, 2)));
    }
}
