//! Cachegrind-compatible replay of valgrind `lackey --trace-mem=yes` traces through an
//! I1/D1/LL hierarchy.
//!
//! The rules are cachegrind's (`cachegrind/cg_sim.c`, `cg_main.c`, `cg_arch.c` and its
//! manual), so that the counters match cachegrind's `summary:` line exactly on the same
//! program:
//! - each cache is set-associative with true LRU, the block number as tag,
//!   write-allocate, no write-back traffic, and the LL is neither inclusive nor
//!   exclusive: an L1 miss references the LL;
//! - an access that straddles two lines references both lines and counts as one
//!   reference that misses if either line missed;
//! - a data access larger than the smallest line size of the three caches is clamped
//!   to that size (cachegrind's `min_line_size`; it refuses to run on a host whose
//!   largest register exceeds it, so in practice only wide helper accesses are clamped);
//! - a modify (`M`, e.g. `inc [mem]`) counts as one data read only — the read brings
//!   the line in, so the write cannot miss;
//! - a geometry is accepted only if the set count and line size are powers of two,
//!   the line is at least 16 bytes, the size exceeds one line and the associativity
//!   does not exceed the line count (cachegrind's `check_cache`).

use crate::hw::cache::{Cache, CacheError, CacheGeometry, Outcome};
use std::io::BufRead;
use thiserror::Error;

/// cachegrind's `MIN_LINE_SIZE`: the smallest line size it accepts.
pub const MIN_LINE_SIZE: u64 = 16;

/// Errors reading a trace or configuring the replay.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// A cache option is malformed or violates cachegrind's rules.
    #[error("bad cache option --{name}={value}: {reason}")]
    BadCache {
        /// I1, D1 or LL.
        name: String,
        /// The value given.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// A trace line could not be parsed.
    #[error("malformed lackey trace at line {line}: {reason}: {text:?}")]
    Malformed {
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        reason: &'static str,
        /// The offending text (truncated).
        text: String,
    },
    /// A binary trace could not be decoded.
    #[error("malformed binary trace at byte offset {offset}: {reason}")]
    MalformedBinary {
        /// Byte offset of the bad record.
        offset: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// Reading failed.
    #[error("reading trace: {0}")]
    Io(#[from] std::io::Error),
    /// The cache could not be built.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// One memory event of a lackey trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEvent {
    /// Instruction fetch of `size` bytes at `addr`.
    Instr {
        /// Address.
        addr: u64,
        /// Size in bytes.
        size: u64,
    },
    /// Data load.
    Load {
        /// Address.
        addr: u64,
        /// Size in bytes.
        size: u64,
    },
    /// Data store.
    Store {
        /// Address.
        addr: u64,
        /// Size in bytes.
        size: u64,
    },
    /// Data modify (load then store of the same location).
    Modify {
        /// Address.
        addr: u64,
        /// Size in bytes.
        size: u64,
    },
    /// `count` sequential instructions, `bytes` long in all, each within the same
    /// 16-byte-aligned block as the instruction fetched before it: under cachegrind's
    /// rules (lines of at least 16 bytes) every one is an I1 hit on the most recently
    /// used line, for any cache configuration. Only binary traces aggregate them.
    HitRun {
        /// Number of instructions.
        count: u64,
        /// Their total size.
        bytes: u64,
    },
}

/// Parses a cachegrind cache option value `size,assoc,line_size` and applies
/// cachegrind's checks.
pub fn parse_cg_cache(name: &str, value: &str) -> Result<CacheGeometry, ReplayError> {
    let bad = |reason: &str| ReplayError::BadCache {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    };
    let parts: Vec<&str> = value.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return Err(bad("expected size,assoc,line_size (bytes, ways, bytes)"));
    }
    let nums: Result<Vec<u64>, _> = parts.iter().map(|p| p.parse::<u64>()).collect();
    let nums = nums.map_err(|_| bad("size, assoc and line_size must be positive integers"))?;
    let (size, assoc, line) = (nums[0], nums[1], nums[2]);
    if size == 0 || assoc == 0 || line == 0 {
        return Err(bad("size, assoc and line_size must be positive integers"));
    }
    if size % (line * assoc) != 0 || !(size / line / assoc).is_power_of_two() {
        return Err(bad("Cache set count is not a power of two."));
    }
    if !line.is_power_of_two() {
        return Err(bad("Cache line size is not a power of two."));
    }
    if line < MIN_LINE_SIZE {
        return Err(bad("Cache line size is too small."));
    }
    if size <= line {
        return Err(bad("Cache size <= line size."));
    }
    if assoc > size / line {
        return Err(bad("Cache associativity > (size/line size)."));
    }
    let g = CacheGeometry {
        size_bytes: size,
        ways: u32::try_from(assoc).map_err(|_| bad("associativity too large"))?,
        line_bytes: u32::try_from(line).map_err(|_| bad("line size too large"))?,
    };
    g.check()?;
    Ok(g)
}

/// cachegrind's nine cache events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgCounts {
    /// Instructions executed (I1 references).
    pub ir: u64,
    /// I1 misses.
    pub i1mr: u64,
    /// LL misses caused by instruction fetches.
    pub ilmr: u64,
    /// Data reads (loads and modifies).
    pub dr: u64,
    /// D1 read misses.
    pub d1mr: u64,
    /// LL read misses.
    pub dlmr: u64,
    /// Data writes.
    pub dw: u64,
    /// D1 write misses.
    pub d1mw: u64,
    /// LL write misses.
    pub dlmw: u64,
}

impl CgCounts {
    /// The values in cachegrind's `events:` order.
    pub fn as_array(&self) -> [u64; 9] {
        [
            self.ir, self.i1mr, self.ilmr, self.dr, self.d1mr, self.dlmr, self.dw, self.d1mw,
            self.dlmw,
        ]
    }
}

/// An I1/D1/LL hierarchy applying cachegrind's rules. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct CgSim {
    geoms: [CacheGeometry; 3],
    i1: Cache,
    d1: Cache,
    ll: Cache,
    min_line: u64,
    /// Block of the most recent I1 reference: it is the MRU line of its set, so another
    /// non-straddling reference to it is a hit that changes nothing.
    last_i: u64,
    /// The same for D1.
    last_d: u64,
    /// Counters so far.
    pub counts: CgCounts,
}

/// References `[addr, addr+size)` in `c`; true if it missed (either line of a straddle).
#[inline(always)]
fn ref_is_miss(c: &mut Cache, addr: u64, size: u64) -> bool {
    let shift = c.line_shift();
    let b1 = addr >> shift;
    let b2 = addr.wrapping_add(size - 1) >> shift;
    if b1 == b2 {
        return !c.is_mru(b1) && matches!(c.access(b1, 0, 0), Outcome::Miss { .. });
    }
    let m1 = matches!(c.access(b1, 0, 0), Outcome::Miss { .. });
    // Straddles two lines: always reference both (LRU state is a side effect).
    let m2 = matches!(c.access(b2, 0, 0), Outcome::Miss { .. });
    m1 || m2
}

impl CgSim {
    /// A cold hierarchy.
    pub fn new(
        i1: CacheGeometry,
        d1: CacheGeometry,
        ll: CacheGeometry,
    ) -> Result<CgSim, ReplayError> {
        Ok(CgSim {
            geoms: [i1, d1, ll],
            i1: Cache::new(i1)?,
            d1: Cache::new(d1)?,
            ll: Cache::new(ll)?,
            min_line: i1.line_bytes.min(d1.line_bytes).min(ll.line_bytes) as u64,
            last_i: u64::MAX,
            last_d: u64::MAX,
            counts: CgCounts::default(),
        })
    }

    /// Whether a D1 reference is a hit on the most recently used D1 block (then nothing
    /// changes); otherwise records the block it will leave as MRU.
    #[inline]
    fn d1_mru_hit(&mut self, addr: u64, size: u64) -> bool {
        let shift = self.d1.line_shift();
        let (b1, b2) = (addr >> shift, addr.wrapping_add(size - 1) >> shift);
        if b1 == self.last_d && b2 == b1 {
            return true;
        }
        self.last_d = b2;
        false
    }

    /// Replays one event.
    #[inline]
    pub fn event(&mut self, e: TraceEvent) {
        match e {
            TraceEvent::HitRun { count, .. } => self.hit_run(count),
            TraceEvent::Instr { addr, size } => self.instr(addr, size),
            TraceEvent::Load { addr, size } | TraceEvent::Modify { addr, size } => {
                self.read(addr, size)
            }
            TraceEvent::Store { addr, size } => self.write(addr, size),
        }
    }

    /// `count` instructions that are sure I1 hits.
    #[inline(always)]
    pub fn hit_run(&mut self, count: u64) {
        self.counts.ir += count;
    }

    /// An instruction fetch.
    #[inline(always)]
    pub fn instr(&mut self, addr: u64, size: u64) {
        self.counts.ir += 1;
        let shift = self.i1.line_shift();
        let (b1, b2) = (addr >> shift, addr.wrapping_add(size - 1) >> shift);
        if b1 == self.last_i && b2 == b1 {
            return;
        }
        self.last_i = b2;
        if ref_is_miss(&mut self.i1, addr, size) {
            self.counts.i1mr += 1;
            if ref_is_miss(&mut self.ll, addr, size) {
                self.counts.ilmr += 1;
            }
        }
    }

    /// A data read (load or modify).
    #[inline(always)]
    pub fn read(&mut self, addr: u64, size: u64) {
        self.counts.dr += 1;
        if let Some(ll_missed) = self.data(addr, size) {
            self.counts.d1mr += 1;
            self.counts.dlmr += ll_missed as u64;
        }
    }

    /// A data write.
    #[inline(always)]
    pub fn write(&mut self, addr: u64, size: u64) {
        self.counts.dw += 1;
        if let Some(ll_missed) = self.data(addr, size) {
            self.counts.d1mw += 1;
            self.counts.dlmw += ll_missed as u64;
        }
    }

    /// References D1 (and the LL on a D1 miss); `None` on a D1 hit, else whether the
    /// LL missed too.
    #[inline(always)]
    fn data(&mut self, addr: u64, size: u64) -> Option<bool> {
        let size = size.min(self.min_line);
        if self.d1_mru_hit(addr, size) || !ref_is_miss(&mut self.d1, addr, size) {
            return None;
        }
        Some(ref_is_miss(&mut self.ll, addr, size))
    }

    /// The result in cachegrind's output-file header form (`desc:`, `cmd:`, `events:`,
    /// `summary:` lines).
    pub fn report(&self, cmd: &str) -> String {
        let mut s = String::new();
        for (name, g) in ["I1", "D1", "LL"].iter().zip(self.geoms.iter()) {
            s += &format!(
                "desc: {name} cache:         {} B, {} B, {}-way associative\n",
                g.size_bytes, g.line_bytes, g.ways
            );
        }
        s += &format!("cmd: {cmd}\n");
        s += "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw \n";
        let v: Vec<String> = self
            .counts
            .as_array()
            .iter()
            .map(|x| x.to_string())
            .collect();
        s += &format!("summary: {}\n", v.join(" "));
        s
    }
}

/// Streams [`TraceEvent`]s out of lackey's text output. Lines valgrind itself prints
/// (`==pid== …`, `--pid-- …`) and blank lines are skipped; anything else that is not a
/// lackey memory line is an error naming the line.
pub struct LackeyReader<R> {
    input: R,
    line: u64,
    buf: Vec<u8>,
    /// `buf` holds a line already read but not yet returned: the instruction line
    /// [`LackeyReader::skip_until`] stopped at, when it had to be read out of the
    /// input to be seen whole.
    pending: bool,
}

/// What [`LackeyReader::skip_until`] needs of a line (its line end included or not):
/// an instruction's address, nothing (a data line, valgrind's own, a blank line), or
/// why it is not a lackey line. Data lines are checked for their kind only.
fn instruction_address(l: &[u8]) -> Result<Option<u64>, &'static str> {
    let mut l = l;
    while let [rest @ .., b'\n' | b'\r'] = l {
        l = rest;
    }
    match l {
        [] | [b'=', b'=', ..] | [b'-', b'-', ..] => Ok(None),
        [b'I', b' ', b' ', body @ ..] => {
            let body = trim_start(body);
            let comma = body.iter().position(|&c| c == b',');
            match comma.and_then(|c| parse_hex(&body[..c])) {
                Some(addr) => Ok(Some(addr)),
                None => Err("expected 'I  addr,size' with a hexadecimal address"),
            }
        }
        [b' ', b'L' | b'S' | b'M', b' ', ..] => Ok(None),
        _ => Err("expected 'I  addr,size' or ' L|S|M addr,size'"),
    }
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | d as u64;
    }
    Some(v)
}

fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    Some(v)
}

impl<R: BufRead> LackeyReader<R> {
    /// A reader over `input`.
    pub fn new(input: R) -> Self {
        LackeyReader {
            input,
            line: 0,
            buf: Vec::with_capacity(64),
            pending: false,
        }
    }

    /// Passes over the input without producing events until an instruction line for
    /// which `stop(address)` is true (called once per instruction line, in order,
    /// until it answers true), which [`LackeyReader::next_event`] then returns first;
    /// `false` if the input ended before. Data lines in between are checked for their
    /// kind but not parsed, so fast-forwarding through the start of a run before a
    /// window costs a fraction of reading its events.
    pub fn skip_until(&mut self, mut stop: impl FnMut(u64) -> bool) -> Result<bool, ReplayError> {
        if self.pending {
            match instruction_address(&self.buf) {
                Ok(Some(addr)) if stop(addr) => return Ok(true),
                Ok(_) => self.pending = false,
                Err(reason) => return Err(self.malformed(reason)),
            }
        }
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Ok(false);
            }
            let Some(end) = buf.iter().position(|&c| c == b'\n') else {
                // the line runs past the buffer: read it whole, and keep it if it is
                // the one to stop at
                self.buf.clear();
                self.input.read_until(b'\n', &mut self.buf)?;
                self.line += 1;
                match instruction_address(&self.buf) {
                    Ok(Some(addr)) if stop(addr) => {
                        self.pending = true;
                        return Ok(true);
                    }
                    Ok(_) => continue,
                    Err(reason) => return Err(self.malformed(reason)),
                }
            };
            match instruction_address(&buf[..end]) {
                Ok(Some(addr)) if stop(addr) => return Ok(true),
                Ok(_) => {
                    self.input.consume(end + 1);
                    self.line += 1;
                }
                Err(reason) => {
                    self.buf.clear();
                    self.buf.extend_from_slice(&buf[..end]);
                    self.line += 1;
                    return Err(self.malformed(reason));
                }
            }
        }
    }

    /// Number of lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    fn malformed(&self, reason: &'static str) -> ReplayError {
        let text = String::from_utf8_lossy(&self.buf[..self.buf.len().min(80)])
            .trim_end()
            .to_string();
        ReplayError::Malformed {
            line: self.line,
            reason,
            text,
        }
    }

    /// The next event, `Ok(None)` at the end of the input.
    pub fn next_event(&mut self) -> Result<Option<TraceEvent>, ReplayError> {
        loop {
            if self.pending {
                self.pending = false;
            } else {
                self.buf.clear();
                if self.input.read_until(b'\n', &mut self.buf)? == 0 {
                    return Ok(None);
                }
                self.line += 1;
            }
            let mut l: &[u8] = &self.buf;
            while let [rest @ .., b'\n' | b'\r'] = l {
                l = rest;
            }
            if l.is_empty() || l.starts_with(b"==") || l.starts_with(b"--") {
                continue;
            }
            if l.len() < 4 {
                return Err(self.malformed("line too short"));
            }
            let (kind, body) = (&l[..2], &l[3..]);
            if l[2] != b' ' {
                return Err(self.malformed("expected 'I  addr,size' or ' L|S|M addr,size'"));
            }
            let body = if kind == b"I " {
                trim_start(body)
            } else {
                body
            };
            let Some(comma) = body.iter().position(|&c| c == b',') else {
                return Err(self.malformed("missing ',' between address and size"));
            };
            let Some(addr) = parse_hex(&body[..comma]) else {
                return Err(self.malformed("address is not hexadecimal"));
            };
            let size = match parse_dec(&body[comma + 1..]) {
                Some(s) if s > 0 => s,
                _ => return Err(self.malformed("size is not a positive decimal number")),
            };
            if addr.checked_add(size).is_none() {
                return Err(self.malformed("access wraps around the address space"));
            }
            let ev = match kind {
                b"I " => TraceEvent::Instr { addr, size },
                b" L" => TraceEvent::Load { addr, size },
                b" S" => TraceEvent::Store { addr, size },
                b" M" => TraceEvent::Modify { addr, size },
                _ => return Err(self.malformed("unknown event kind (expected I, L, S or M)")),
            };
            return Ok(Some(ev));
        }
    }
}

fn trim_start(mut s: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = s {
        s = rest;
    }
    s
}

impl<R: BufRead> Iterator for LackeyReader<R> {
    type Item = Result<TraceEvent, ReplayError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim() -> CgSim {
        let g = parse_cg_cache("I1", "1024,2,64").unwrap();
        CgSim::new(g, g, parse_cg_cache("LL", "4096,4,64").unwrap()).unwrap()
    }

    #[test]
    fn parses_lackey_lines() {
        let text = "==12== Lackey\nI  0401ab70,3\n S 1fff000758,8\n L 00001000,4\n M 10,2\n\n";
        let evs: Vec<_> = LackeyReader::new(text.as_bytes())
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(
            evs,
            vec![
                TraceEvent::Instr {
                    addr: 0x401ab70,
                    size: 3
                },
                TraceEvent::Store {
                    addr: 0x1fff000758,
                    size: 8
                },
                TraceEvent::Load {
                    addr: 0x1000,
                    size: 4
                },
                TraceEvent::Modify {
                    addr: 0x10,
                    size: 2
                },
            ]
        );
    }

    #[test]
    fn skipping_leaves_the_events_reading_would() {
        // instructions with data lines, a repeated address (a `rep` iteration),
        // valgrind's own lines and a blank one
        let mut text = String::from("==7== Lackey\n");
        for i in 0..40u64 {
            let addr = 0x4000 + 4 * (i / 3 * 3);
            text += &format!("I  {addr:08x},3\n L {:x},8\n", 0x1f000 + i);
            if i % 5 == 0 {
                text += &format!(
                    " S {:x},4\n M {:x},2\n--7-- note\n\n",
                    0x2000 + i,
                    0x3000 + i
                );
            }
        }
        let read = |r: &mut LackeyReader<std::io::BufReader<&[u8]>>| -> Vec<TraceEvent> {
            r.map(|e| e.unwrap()).collect()
        };
        // 14 distinct addresses (each three times in a row)
        for skip in [0, 1, 7, 13] {
            // what next_event gives from the skip-th distinct address on
            let all = read(&mut LackeyReader::new(std::io::BufReader::new(
                text.as_bytes(),
            )));
            let (mut seen, mut last) = (0, u64::MAX);
            let from = all
                .iter()
                .position(|e| match *e {
                    TraceEvent::Instr { addr, .. } if addr != last => {
                        last = addr;
                        seen += 1;
                        seen > skip
                    }
                    _ => false,
                })
                .unwrap();
            // buffers of 7 and 16 bytes cut lines in two; 4096 holds the whole text
            for cap in [7, 16, 4096] {
                let mut r =
                    LackeyReader::new(std::io::BufReader::with_capacity(cap, text.as_bytes()));
                let (mut n, mut last) = (0, u64::MAX);
                let stopped = r
                    .skip_until(|addr| {
                        if addr != last {
                            if n == skip {
                                return true;
                            }
                            n += 1;
                        }
                        last = addr;
                        false
                    })
                    .unwrap();
                assert!(stopped, "skip {skip}, buffer {cap}");
                assert_eq!(read(&mut r), all[from..], "skip {skip}, buffer {cap}");
                let lines = text.lines().count() as u64;
                assert_eq!(r.lines_read(), lines, "skip {skip}, buffer {cap}");
            }
        }
        // past the end: false; a bad line in the part skipped: an error naming it
        let mut r = LackeyReader::new(text.as_bytes());
        assert!(!r.skip_until(|_| false).unwrap());
        let bad = "I  10,3\n L 20,4\nhello\nI  14,3\n";
        let e = LackeyReader::new(bad.as_bytes())
            .skip_until(|_| false)
            .unwrap_err();
        assert!(
            e.to_string().contains("line 3") && e.to_string().contains("hello"),
            "{e}"
        );
    }

    #[test]
    fn malformed_lines_name_the_line() {
        for (text, want) in [
            ("I  0401ab70,3\n X 12,4\n", "line 2"),
            ("I  zz,3\n", "hexadecimal"),
            (" L 12\n", "missing ','"),
            (" L 12,0\n", "positive"),
            ("hello world\n", "line 1"),
            (" L ffffffffffffffff,8\n", "wraps"),
        ] {
            let err = LackeyReader::new(text.as_bytes())
                .find_map(|r| r.err())
                .unwrap_or_else(|| panic!("no error for {text:?}"))
                .to_string();
            assert!(err.contains(want), "{err} should mention {want}");
        }
    }

    #[test]
    fn cachegrind_geometry_rules() {
        assert!(parse_cg_cache("I1", "32768,8,64").is_ok());
        for (v, why) in [
            ("32768,3,64", "power of two"),
            ("32768,8,8", "too small"),
            ("64,1,64", "<= line"),
            ("1,2", "expected"),
            ("a,b,c", "integers"),
        ] {
            let e = parse_cg_cache("D1", v).unwrap_err().to_string();
            assert!(e.contains(why), "{v}: {e}");
        }
    }

    #[test]
    fn straddle_counts_one_reference_and_modify_counts_as_read() {
        let mut s = sim();
        // straddles lines 0x1000/0x1040: one Dr, one D1 miss, one LL miss
        s.event(TraceEvent::Load {
            addr: 0x103c,
            size: 8,
        });
        assert_eq!((s.counts.dr, s.counts.d1mr, s.counts.dlmr), (1, 1, 1));
        // both lines now present
        s.event(TraceEvent::Load {
            addr: 0x1040,
            size: 4,
        });
        s.event(TraceEvent::Load {
            addr: 0x1000,
            size: 4,
        });
        assert_eq!(s.counts.d1mr, 1);
        s.event(TraceEvent::Modify {
            addr: 0x2000,
            size: 4,
        });
        assert_eq!((s.counts.dr, s.counts.dw, s.counts.d1mr), (4, 0, 2));
        // a 128-byte access is clamped to the 64-byte minimum line: one line only
        s.event(TraceEvent::Store {
            addr: 0x3000,
            size: 128,
        });
        assert_eq!((s.counts.dw, s.counts.d1mw), (1, 1));
        assert!(!s.d1.contains(0x3040 >> 6));
        assert!(s.report("x").contains("summary: 0 0 0 4 2 2 1 1 1"));
    }
}
