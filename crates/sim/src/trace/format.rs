//! A compact binary form of lackey memory traces, and fast cachegrind-exact replay of it.
//!
//! # Format (`CSTRACE2`; `CSTRACE1` is read too)
//!
//! An 8-byte magic `CSTRACE2`, then one record per event, then an end record: the byte
//! `0x70`, a varint count of the records before it and the FNV-1a 64-bit hash (8 bytes,
//! little-endian) of every byte before the end record, magic included. [`verify`]
//! checks them, so that a trace cut at a record boundary or with bytes changed is
//! refused before it is used; readers stop at the end record. Traces of the first
//! version (`CSTRACE1`) have no end record: they are read, but a cut at a record
//! boundary or a changed byte that still decodes cannot be told. The high nibble of a
//! record's first byte is its kind, the low nibble its size (0: the size follows as a
//! LEB128 varint):
//!
//! | kind | event | then |
//! |---|---|---|
//! | 0 | instruction at the address right after the previous instruction | — |
//! | 1 | instruction elsewhere | zigzag varint: address − end of previous instruction |
//! | 2 | load | zigzag varint: address − the previous data address predicted for this point of the instruction stream |
//! | 3 | store | same |
//! | 4 | modify | same |
//! | 5 | a [`TraceEvent::HitRun`] of *size* instructions | varint: their total bytes |
//! | 6 | instruction at the predicted branch target | — |
//! | 7 | the end record (`CSTRACE2`) | varint record count, 8-byte hash |
//!
//! The branch-target predictor remembers, per hashed fall-through address (the end of
//! the previous instruction), where control went last time; a loop's back edge costs one
//! byte. The data-address predictor is a 4096-entry table indexed by a hash of the end
//! address of the last instruction written, holding the last data address seen there:
//! an instruction's accesses are usually strided, so the deltas are small. A
//! sequential instruction costs one byte and a data access usually two, against about
//! twenty bytes of lackey text: over 10× smaller.
//!
//! The writer folds every instruction that continues sequentially within the
//! 16-byte-aligned block of the instruction before it into a hit run: such a fetch is
//! an I1 hit on the MRU line for every configuration cachegrind accepts (lines of at
//! least 16 bytes), touches nothing else, and so only adds to `Ir`. A run is written
//! just before the next instruction that is not folded (data events in between keep
//! their place), so every event that can change cache state keeps its order and the
//! replayed counters are exactly those of the full trace.

use crate::trace::replay::{CgSim, ReplayError, TraceEvent};
use std::io::Write;

/// Entries of the data-address predictor (a power of two).
const PRED_SIZE: usize = 4096;

/// Slot of the data-address predictor for the instruction stream position `next_i`
/// (the end of the last written instruction): accesses by the same instruction tend to
/// be strided, so their deltas are small. Writer and reader index identically, so
/// collisions only cost bytes, never correctness.
#[inline(always)]
fn pred_slot(next_i: u64) -> usize {
    (next_i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize & (PRED_SIZE - 1)
}

/// The magic bytes that start a binary trace of the first version (no end record).
pub const MAGIC: &[u8; 8] = b"CSTRACE1";

/// The magic bytes that start a binary trace as written now (with its end record).
pub const MAGIC2: &[u8; 8] = b"CSTRACE2";

/// Whether `prefix` starts a binary trace of either version.
pub fn is_binary_trace(prefix: &[u8]) -> bool {
    prefix.starts_with(MAGIC) || prefix.starts_with(MAGIC2)
}

/// The header byte of the end record.
const END: u8 = 0x70;

/// The magic bytes of a zstd frame: a trace file starting with them is a binary trace
/// compressed with zstd (how the real-program suite stores its traces).
pub const ZSTD_MAGIC: &[u8; 4] = &[0x28, 0xB5, 0x2F, 0xFD];

/// Largest trace, decompressed, that [`read_trace_file`] accepts: 16 GiB, far above any
/// window this project records (a 200 M-instruction window is about 0.5 GB).
pub const MAX_TRACE_BYTES: u64 = 16 << 30;

/// Whether `prefix` starts a zstd-compressed file.
pub fn is_compressed(prefix: &[u8]) -> bool {
    prefix.starts_with(ZSTD_MAGIC)
}

/// The bytes of the trace file at `path`, decompressed if it is zstd-compressed; a
/// file that decompresses to more than [`MAX_TRACE_BYTES`] is refused.
pub fn read_trace_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    read_trace_bytes(std::fs::File::open(path)?)
}

/// The bytes of the open trace file `f` ([`read_trace_file`]).
fn read_trace_bytes(mut f: std::fs::File) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut raw = Vec::new();
    f.read_to_end(&mut raw)?;
    if !is_compressed(&raw) {
        return Ok(raw);
    }
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(raw.as_slice())?
        .take(MAX_TRACE_BYTES + 1)
        .read_to_end(&mut out)?;
    // read_to_end grows by doubling: give the run back what the trace does not use
    out.shrink_to_fit();
    if out.len() as u64 > MAX_TRACE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("decompresses to more than {MAX_TRACE_BYTES} bytes"),
        ));
    }
    Ok(out)
}

/// Trace files this process has verified whole ([`verify`]), by path, with the
/// identity of the file verified (device, inode, length, modification time).
static VERIFIED: std::sync::Mutex<Option<std::collections::HashMap<std::path::PathBuf, FileId>>> =
    std::sync::Mutex::new(None);

/// At most this many files are remembered as verified (then the record starts over).
const MAX_VERIFIED: usize = 4096;

/// What identifies one version of a file: a new recording is written whole and renamed
/// into place (a new inode, length and time), so a path with the same identity holds
/// the bytes read before. Also the laboratory's key for remembering a trace's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileId {
    /// Device.
    dev: u64,
    /// Inode.
    ino: u64,
    /// Length in bytes.
    len: u64,
    /// Modification time, where the filesystem keeps one.
    modified: Option<std::time::SystemTime>,
}

impl FileId {
    /// The identity of the file `m` describes (the metadata of an opened file, so that
    /// the identity is of the bytes read through it).
    pub fn of(m: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            modified: m.modified().ok(),
        }
    }
}

/// The bytes of the trace file at `path` ([`read_trace_file`]), checked whole by
/// [`TraceThread::validate`] the first time this process reads that version of the
/// file. Building a run reads every trace its threads replay, and a reproduction
/// builds hundreds: decoding a 200 M-instruction window to its end record took about
/// a second each time. The identity is taken from the opened file, so a file renamed
/// into place after the check is checked again; one changed in place keeping its
/// inode, length and modification time would not be (nothing here writes so).
pub fn read_verified_trace(path: &std::path::Path) -> Result<Vec<u8>, ReadTraceError> {
    let f = std::fs::File::open(path).map_err(ReadTraceError::Io)?;
    let id = FileId::of(&f.metadata().map_err(ReadTraceError::Io)?);
    let bytes = read_trace_bytes(f).map_err(ReadTraceError::Io)?;
    let known = {
        let seen = VERIFIED.lock().unwrap_or_else(|e| e.into_inner());
        seen.as_ref().and_then(|m| m.get(path)) == Some(&id)
    };
    if !known {
        TraceThread::validate(&bytes).map_err(ReadTraceError::Invalid)?;
        let mut seen = VERIFIED.lock().unwrap_or_else(|e| e.into_inner());
        let m = seen.get_or_insert_with(Default::default);
        if m.len() >= MAX_VERIFIED {
            m.clear();
        }
        m.insert(path.to_path_buf(), id);
    }
    Ok(bytes)
}

/// Why [`read_verified_trace`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadTraceError {
    /// The file could not be opened or read (or decompressed).
    #[error("{0}")]
    Io(std::io::Error),
    /// The bytes are not a whole trace with a data access.
    #[error("{0}")]
    Invalid(ReplayError),
}

/// Opens the trace file at `path` for streaming, decompressing it on the way if it is
/// zstd-compressed.
pub fn open_trace(path: &std::path::Path) -> std::io::Result<Box<dyn std::io::BufRead>> {
    use std::io::BufRead;
    let mut f = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    Ok(if is_compressed(f.fill_buf()?) {
        Box::new(std::io::BufReader::with_capacity(
            1 << 20,
            zstd::stream::read::Decoder::with_buffer(f)?,
        ))
    } else {
        Box::new(f)
    })
}

/// Encodes events into the binary form.
pub struct TraceWriter<W: Write> {
    out: W,
    next_i: u64,
    run_count: u64,
    run_bytes: u64,
    pred: Vec<u64>,
    targets: Vec<u64>,
    buf: Vec<u8>,
    /// Events written.
    pub events: u64,
    /// Records written (a hit run is one record of many events).
    records: u64,
    /// FNV-1a hash of every byte written.
    hash: u64,
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

impl<W: Write> TraceWriter<W> {
    /// A writer that has written the magic to `out`.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(MAGIC2)?;
        Ok(TraceWriter {
            records: 0,
            hash: cachesched_core::hash::fnv1a(MAGIC2),
            out,
            next_i: 0,
            run_count: 0,
            run_bytes: 0,
            pred: vec![0; PRED_SIZE],
            targets: vec![0; PRED_SIZE],
            buf: Vec::with_capacity(1 << 16),
            events: 0,
        })
    }

    fn head(&mut self, kind: u8, size: u64) {
        self.records += 1;
        if (1..16).contains(&size) {
            self.buf.push(kind << 4 | size as u8);
        } else {
            self.buf.push(kind << 4);
            put_varint(&mut self.buf, size);
        }
    }

    fn flush_run(&mut self) {
        if self.run_count > 0 {
            let (c, b) = (self.run_count, self.run_bytes);
            self.head(5, c);
            put_varint(&mut self.buf, b);
            self.next_i = self.next_i.wrapping_add(b);
            self.run_count = 0;
            self.run_bytes = 0;
        }
    }

    /// Appends one event.
    pub fn write(&mut self, e: TraceEvent) -> std::io::Result<()> {
        match e {
            TraceEvent::HitRun { count, bytes } => {
                self.flush_run();
                self.head(5, count);
                put_varint(&mut self.buf, bytes);
                self.next_i = self.next_i.wrapping_add(bytes);
            }
            TraceEvent::Instr { addr, size } => {
                let end = self.next_i.wrapping_add(self.run_bytes);
                if addr == end && addr % 16 != 0 && addr.wrapping_add(size - 1) >> 4 == addr >> 4 {
                    // continues within the block of the previous instruction: a sure hit
                    self.run_count += 1;
                    self.run_bytes += size;
                    self.events += 1;
                    return Ok(());
                }
                self.flush_run();
                if addr == self.next_i {
                    self.head(0, size);
                } else {
                    let slot = pred_slot(self.next_i);
                    if self.targets[slot] == addr {
                        self.head(6, size);
                    } else {
                        self.head(1, size);
                        put_varint(&mut self.buf, zigzag(addr.wrapping_sub(self.next_i) as i64));
                        self.targets[slot] = addr;
                    }
                }
                self.next_i = addr.wrapping_add(size);
            }
            TraceEvent::Load { addr, size }
            | TraceEvent::Store { addr, size }
            | TraceEvent::Modify { addr, size } => {
                let kind = match e {
                    TraceEvent::Load { .. } => 2,
                    TraceEvent::Store { .. } => 3,
                    _ => 4,
                };
                self.head(kind, size);
                let slot = pred_slot(self.next_i);
                put_varint(
                    &mut self.buf,
                    zigzag(addr.wrapping_sub(self.pred[slot]) as i64),
                );
                self.pred[slot] = addr;
            }
        }
        self.events += 1;
        if self.buf.len() >= 1 << 16 {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> std::io::Result<()> {
        self.hash = cachesched_core::hash::fnv1a_from(self.hash, &self.buf);
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Writes the end record, flushes and returns the underlying writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.flush_run();
        self.flush_buf()?;
        let mut end = vec![END];
        put_varint(&mut end, self.records);
        end.extend_from_slice(&self.hash.to_le_bytes());
        self.out.write_all(&end)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A streaming decoder of the binary form. It refills a large buffer and decodes in a
/// tight loop; no record is ever split across a refill (the tail moves to the front).
pub struct TraceReader<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
    /// Byte offset of `buf[0]` in the stream.
    base: u64,
    dec: Decoder,
}

/// The decoding state shared by every way of reading the binary form: the end of the
/// last instruction and the two predictors.
struct Decoder {
    next_i: u64,
    pred: Vec<u64>,
    targets: Vec<u64>,
    /// Whether the trace has an end record (`CSTRACE2`), at which decoding stops.
    ends: bool,
}

impl Decoder {
    fn new(ends: bool) -> Decoder {
        Decoder {
            next_i: 0,
            pred: vec![0; PRED_SIZE],
            targets: vec![0; PRED_SIZE],
            ends,
        }
    }

    /// Decodes the record at `data[*pos]` with full checks; `base` is the stream
    /// offset of `data[0]` (for error messages). `Ok(None)` when `*pos` is at the end.
    fn decode_one(
        &mut self,
        data: &[u8],
        pos: &mut usize,
        base: u64,
    ) -> Result<Option<TraceEvent>, ReplayError> {
        if *pos >= data.len() {
            return Ok(None);
        }
        let start = *pos;
        let mut p = start;
        let h = data[p];
        if h == END && self.ends {
            // the end record: nothing after it is an event
            return Ok(None);
        }
        p += 1;
        let mut size = (h & 15) as u64;
        let truncated = || bad(base + start as u64, "trace ends inside a record");
        if size == 0 {
            size = varint(data, &mut p).ok_or_else(truncated)?;
            if size == 0 {
                return Err(bad(base + start as u64, "zero-sized access"));
            }
        }
        let ev = match h >> 4 {
            0 => {
                let addr = self.next_i;
                self.next_i = addr.wrapping_add(size);
                TraceEvent::Instr { addr, size }
            }
            1 => {
                let d = varint(data, &mut p).ok_or_else(truncated)?;
                let addr = self.next_i.wrapping_add(unzigzag(d) as u64);
                self.targets[pred_slot(self.next_i)] = addr;
                self.next_i = addr.wrapping_add(size);
                TraceEvent::Instr { addr, size }
            }
            6 => {
                let addr = self.targets[pred_slot(self.next_i)];
                self.next_i = addr.wrapping_add(size);
                TraceEvent::Instr { addr, size }
            }
            5 => {
                let bytes = varint(data, &mut p).ok_or_else(truncated)?;
                self.next_i = self.next_i.wrapping_add(bytes);
                TraceEvent::HitRun { count: size, bytes }
            }
            k @ 2..=4 => {
                let d = varint(data, &mut p).ok_or_else(truncated)?;
                let slot = pred_slot(self.next_i);
                let addr = self.pred[slot].wrapping_add(unzigzag(d) as u64);
                self.pred[slot] = addr;
                match k {
                    2 => TraceEvent::Load { addr, size },
                    3 => TraceEvent::Store { addr, size },
                    _ => TraceEvent::Modify { addr, size },
                }
            }
            _ => return Err(bad(base + start as u64, "unknown record kind")),
        };
        *pos = p;
        Ok(Some(ev))
    }

    /// The event of the record at `data[*pos]`, `data` being a whole trace that
    /// [`verify`] accepted: a record that starts at least [`MAX_RECORD`] bytes before
    /// the end (so lies wholly inside `data`) and whose size is in its header (nearly
    /// all) is decoded without the careful path's checks, any other by
    /// [`Decoder::decode_one`]; `None` at the end, or where the careful path finds
    /// damage. The same events as `decode_one`'s for such a trace
    /// (`the_unchecked_decoder_gives_the_careful_ones_events`).
    #[inline(always)]
    fn next_unchecked(&mut self, data: &[u8], pos: &mut usize) -> Option<TraceEvent> {
        let p = *pos;
        if p + MAX_RECORD <= data.len() {
            let h = data[p];
            let size = (h & 15) as u64;
            if size != 0 {
                let mut q = p + 1;
                let ev = match h >> 4 {
                    0 => {
                        let addr = self.next_i;
                        self.next_i = addr.wrapping_add(size);
                        Some(TraceEvent::Instr { addr, size })
                    }
                    1 => {
                        let d = varint_fast(data, &mut q);
                        let addr = self.next_i.wrapping_add(unzigzag(d) as u64);
                        self.targets[pred_slot(self.next_i)] = addr;
                        self.next_i = addr.wrapping_add(size);
                        Some(TraceEvent::Instr { addr, size })
                    }
                    6 => {
                        let addr = self.targets[pred_slot(self.next_i)];
                        self.next_i = addr.wrapping_add(size);
                        Some(TraceEvent::Instr { addr, size })
                    }
                    5 => {
                        let bytes = varint_fast(data, &mut q);
                        self.next_i = self.next_i.wrapping_add(bytes);
                        Some(TraceEvent::HitRun { count: size, bytes })
                    }
                    k @ 2..=4 => {
                        let d = varint_fast(data, &mut q);
                        let slot = pred_slot(self.next_i);
                        let addr = self.pred[slot].wrapping_add(unzigzag(d) as u64);
                        self.pred[slot] = addr;
                        Some(match k {
                            2 => TraceEvent::Load { addr, size },
                            3 => TraceEvent::Store { addr, size },
                            _ => TraceEvent::Modify { addr, size },
                        })
                    }
                    _ => None,
                };
                if ev.is_some() {
                    *pos = q;
                    return ev;
                }
            }
        }
        self.decode_one(data, pos, 0).ok().flatten()
    }

    /// Decodes and simulates records from `data[pos..safe_end)` (every record starting
    /// there is wholly inside `data`), stopping early at a record the fast path does
    /// not take. Returns the new position and the number of events.
    #[inline(always)]
    fn fused(
        &mut self,
        sim: &mut CgSim,
        data: &[u8],
        mut p: usize,
        safe_end: usize,
    ) -> (usize, u64) {
        let mut n = 0u64;
        while p < safe_end {
            let h = data[p];
            let size = (h & 15) as u64;
            if size == 0 {
                break; // rare: sizes ≥ 16 take the careful path
            }
            match h >> 4 {
                0 => {
                    p += 1;
                    let addr = self.next_i;
                    self.next_i = addr.wrapping_add(size);
                    sim.instr(addr, size);
                }
                1 => {
                    let mut q = p + 1;
                    let d = varint_fast(data, &mut q);
                    p = q;
                    let addr = self.next_i.wrapping_add(unzigzag(d) as u64);
                    self.targets[pred_slot(self.next_i)] = addr;
                    self.next_i = addr.wrapping_add(size);
                    sim.instr(addr, size);
                }
                6 => {
                    p += 1;
                    let addr = self.targets[pred_slot(self.next_i)];
                    self.next_i = addr.wrapping_add(size);
                    sim.instr(addr, size);
                }
                5 => {
                    let mut q = p + 1;
                    let bytes = varint_fast(data, &mut q);
                    p = q;
                    self.next_i = self.next_i.wrapping_add(bytes);
                    sim.hit_run(size);
                }
                k @ 2..=4 => {
                    let mut q = p + 1;
                    let d = varint_fast(data, &mut q);
                    p = q;
                    let slot = pred_slot(self.next_i);
                    let addr = self.pred[slot].wrapping_add(unzigzag(d) as u64);
                    self.pred[slot] = addr;
                    if k == 3 {
                        sim.write(addr, size);
                    } else {
                        sim.read(addr, size);
                    }
                }
                _ => break,
            }
            n += 1;
        }
        (p, n)
    }
}

/// The longest record: a header, a varint size and a varint delta.
const MAX_RECORD: usize = 1 + 10 + 10;

impl<R: std::io::Read> TraceReader<R> {
    /// Checks the magic and prepares to decode.
    pub fn new(inner: R) -> Result<Self, ReplayError> {
        Self::with_capacity(inner, 4 << 20)
    }

    /// Like [`TraceReader::new`] with a decode buffer of `capacity` bytes (at least 64).
    pub fn with_capacity(mut inner: R, capacity: usize) -> Result<Self, ReplayError> {
        let mut magic = [0u8; 8];
        inner
            .read_exact(&mut magic)
            .map_err(|_| bad(0, "too short for a trace header"))?;
        if !is_binary_trace(&magic) {
            return Err(bad(0, "not a cachesched binary trace (bad magic)"));
        }
        Ok(TraceReader {
            inner,
            buf: vec![0; capacity.max(64)],
            pos: 0,
            len: 0,
            eof: false,
            base: 8,
            dec: Decoder::new(&magic == MAGIC2),
        })
    }

    fn refill(&mut self) -> Result<(), ReplayError> {
        self.buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        while !self.eof && self.len < self.buf.len() {
            let n = self.inner.read(&mut self.buf[self.len..])?;
            if n == 0 {
                self.eof = true;
            }
            self.len += n;
        }
        Ok(())
    }

    /// The byte offset in the trace of the next record to decode.
    pub fn byte_offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The next event, `Ok(None)` at the end.
    #[inline]
    pub fn next_event(&mut self) -> Result<Option<TraceEvent>, ReplayError> {
        if self.len - self.pos < MAX_RECORD && !self.eof {
            self.refill()?;
        }
        self.dec
            .decode_one(&self.buf[..self.len], &mut self.pos, self.base)
    }
}

/// Replays a recorded program as a simulated thread: instructions between data
/// accesses become the gap, each data access one memory operation (a modify counts as
/// a store), and the trace starts over when it ends. Addresses move into a range of
/// their own per process (bit 63 set, the process number from bit 47 up), so two
/// processes replaying one trace share nothing while threads of one process do.
pub struct TraceThread {
    /// The whole trace, shared by the threads replaying it.
    bytes: std::sync::Arc<Vec<u8>>,
    /// Where the next record starts in `bytes` (its byte offset in the trace).
    pos: usize,
    /// The decoding state at `pos`.
    dec: Decoder,
    base: u64,
    pending: u64,
    pc: u64,
    base_cpi: f64,
    /// Times the trace wrapped around.
    pub loops: u64,
    /// Where to start when the run begins ([`TraceThread::start_at_byte_when_run`]).
    start: Option<u64>,
}

impl TraceThread {
    /// A thread of process `process` replaying `bytes` (a binary trace), with `base_cpi`.
    pub fn new(
        bytes: std::sync::Arc<Vec<u8>>,
        process: u32,
        base_cpi: f64,
    ) -> Result<TraceThread, ReplayError> {
        if bytes.len() < MAGIC.len() {
            return Err(bad(0, "too short for a trace header"));
        }
        if !is_binary_trace(&bytes) {
            return Err(bad(0, "not a cachesched binary trace (bad magic)"));
        }
        let t = TraceThread {
            pos: MAGIC.len(),
            dec: Decoder::new(bytes.starts_with(MAGIC2)),
            bytes,
            base: (1 << 63) | ((process as u64) << 47),
            pending: 0,
            pc: 0,
            base_cpi,
            loops: 0,
            start: None,
        };
        Ok(t)
    }

    /// Starts the trace over.
    fn restart(&mut self) {
        self.pos = MAGIC.len();
        self.dec = Decoder::new(self.dec.ends);
    }

    /// The next event, `None` at the end of the trace (or at damage, which
    /// [`TraceThread::validate`] rules out for the traces the engine replays).
    #[inline(always)]
    fn next_event(&mut self) -> Option<TraceEvent> {
        self.dec.next_unchecked(&self.bytes, &mut self.pos)
    }

    /// Takes in one event: an instruction moves the PC and counts towards the next
    /// access's gap; a data access is returned as its address and whether it writes.
    #[inline]
    fn take(&mut self, e: TraceEvent) -> Option<(u64, bool)> {
        match e {
            TraceEvent::Instr { addr, .. } => {
                self.pending += 1;
                self.pc = addr;
                None
            }
            TraceEvent::HitRun { count, bytes } => {
                self.pending += count;
                self.pc = self.pc.wrapping_add(bytes);
                None
            }
            TraceEvent::Load { addr, .. } => Some((addr, false)),
            TraceEvent::Store { addr, .. } | TraceEvent::Modify { addr, .. } => Some((addr, true)),
        }
    }

    /// Starts the replay at the first record at or after byte `offset` of the trace
    /// instead of at its beginning: the events before it are decoded (the predictors
    /// need them) but not replayed; the first replayed access has the PC of the last
    /// instruction before it and no gap. An offset past the end starts at the
    /// beginning.
    fn start_at_byte(&mut self, offset: u64) {
        while (self.pos as u64) < offset {
            match self.next_event() {
                Some(e) => {
                    self.take(e);
                }
                None => {
                    self.restart();
                    self.pc = 0;
                    break;
                }
            }
        }
        self.pending = 0;
    }

    /// Starts the replay at the first record at or after byte `offset` (the events
    /// before it decoded, not replayed; past the end, at the beginning) when the run
    /// begins ([`Workload::prepare`]), not now: a simulation built only to check its configuration (a reproduction builds
    /// one per mix and variant before running any) then does not decode every trace up
    /// to its threads' start points.
    ///
    /// [`Workload::prepare`]: crate::workload::Workload::prepare
    pub fn start_at_byte_when_run(&mut self, offset: u64) {
        self.start = Some(offset);
    }

    /// Checks that `bytes` is a whole binary trace ([`verify`]) with at least one data
    /// access.
    pub fn validate(bytes: &[u8]) -> Result<(), ReplayError> {
        if verify(bytes)?.data > 0 {
            Ok(())
        } else {
            Err(bad(8, "the trace has no data access to replay"))
        }
    }
}

impl crate::workload::Workload for TraceThread {
    fn prepare(&mut self) {
        if let Some(offset) = self.start.take() {
            self.start_at_byte(offset);
        }
    }

    fn next_op(&mut self) -> crate::workload::Op {
        loop {
            let e = match self.next_event() {
                Some(e) => e,
                // validated before replay: the end (or damage) means start over
                None => {
                    self.loops += 1;
                    self.restart();
                    continue;
                }
            };
            let Some((addr, write)) = self.take(e) else {
                continue;
            };
            let gap = self.pending.saturating_sub(1).min(u32::MAX as u64) as u32;
            self.pending = 0;
            return crate::workload::Op::Access {
                gap,
                addr: self.base | (addr & ((1 << 47) - 1)),
                write,
                pc: self.base | (self.pc & ((1 << 47) - 1)),
                dep: false,
            };
        }
    }

    fn base_cpi(&self) -> f64 {
        self.base_cpi
    }
}

/// Decodes a binary trace, calling `f` for every event. Errors name the byte offset.
pub fn read_trace<R: std::io::Read>(
    input: R,
    mut f: impl FnMut(TraceEvent),
) -> Result<u64, ReplayError> {
    let mut r = TraceReader::new(input)?;
    let mut n = 0;
    while let Some(e) = r.next_event()? {
        f(e);
        n += 1;
    }
    Ok(n)
}

#[inline]
fn varint(data: &[u8], p: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    while *p < data.len() {
        let b = data[*p];
        *p += 1;
        if shift >= 64 {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
    None
}

fn bad(offset: u64, reason: &'static str) -> ReplayError {
    ReplayError::MalformedBinary { offset, reason }
}

/// Replays a binary trace through `sim`; returns the number of events. Decoding and
/// simulation are fused into one loop: one dispatch per record, no event values.
pub fn replay_binary<R: std::io::Read>(sim: &mut CgSim, input: R) -> Result<u64, ReplayError> {
    let mut r = TraceReader::new(input)?;
    let mut n = 0u64;
    loop {
        if r.len - r.pos < MAX_RECORD && !r.eof {
            r.refill()?;
        }
        let safe_end = r.len.saturating_sub(MAX_RECORD);
        let (p, k) = r.dec.fused(sim, &r.buf[..r.len], r.pos, safe_end);
        n += k;
        if p == r.pos {
            // the fast loop could not take this record: decode it carefully
            match r.next_event()? {
                Some(e) => {
                    sim.event(e);
                    n += 1;
                }
                None => return Ok(n),
            }
        } else {
            r.pos = p;
        }
    }
}

/// [`replay_binary`] over a trace already in memory (e.g. a memory-mapped file),
/// decoded in place.
pub fn replay_binary_slice(sim: &mut CgSim, bytes: &[u8]) -> Result<u64, ReplayError> {
    if bytes.len() < MAGIC.len() {
        return Err(bad(0, "too short for a trace header"));
    }
    if !is_binary_trace(bytes) {
        return Err(bad(0, "not a cachesched binary trace (bad magic)"));
    }
    let mut dec = Decoder::new(bytes.starts_with(MAGIC2));
    let mut pos = 8;
    let safe_end = bytes.len().saturating_sub(MAX_RECORD);
    let mut n = 0u64;
    loop {
        let (p, k) = dec.fused(sim, bytes, pos, safe_end);
        n += k;
        pos = p;
        match dec.decode_one(bytes, &mut pos, 0)? {
            Some(e) => {
                sim.event(e);
                n += 1;
            }
            None => return Ok(n),
        }
    }
}

/// Where the records of the trace `bytes` end: before the end record of a `CSTRACE2`
/// trace (found from the back: 8 hash bytes, a varint whose bytes before the last have
/// the high bit set, the end byte), at the end of a first-version one. A seeded start
/// point is drawn over the records only, so that a trace's end record changes no run.
pub fn records_end(bytes: &[u8]) -> usize {
    if !bytes.starts_with(MAGIC2) || bytes.len() < 8 + 1 + 1 + 8 {
        return bytes.len();
    }
    let mut j = bytes.len() - 9;
    if bytes[j] & 0x80 != 0 {
        return bytes.len();
    }
    while j > 8 && bytes[j - 1] & 0x80 != 0 {
        j -= 1;
    }
    if j > 8 && bytes[j - 1] == END {
        j - 1
    } else {
        bytes.len()
    }
}

/// What [`verify`] found in a whole trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceCheck {
    /// Records decoded.
    pub records: u64,
    /// Data accesses (loads, stores, modifies) among them.
    pub data: u64,
    /// Whether the end record's count and hash were checked (`CSTRACE2`; a trace of the
    /// first version has none).
    pub checked_end: bool,
}

/// Decodes the whole trace `bytes` and, for a trace with an end record, checks that the
/// end record is there, that it counts the records decoded and that its hash is that of
/// every byte before it, and that nothing follows it: a trace cut anywhere, or with
/// bytes changed, is refused with the byte offset of the problem.
pub fn verify(bytes: &[u8]) -> Result<TraceCheck, ReplayError> {
    if bytes.len() < MAGIC.len() {
        return Err(bad(0, "too short for a trace header"));
    }
    if !is_binary_trace(bytes) {
        return Err(bad(0, "not a cachesched binary trace (bad magic)"));
    }
    let ends = bytes.starts_with(MAGIC2);
    let mut dec = Decoder::new(ends);
    let mut pos = 8;
    let (mut records, mut data) = (0u64, 0u64);
    while let Some(e) = dec.decode_one(bytes, &mut pos, 0)? {
        records += 1;
        if matches!(
            e,
            TraceEvent::Load { .. } | TraceEvent::Store { .. } | TraceEvent::Modify { .. }
        ) {
            data += 1;
        }
    }
    if !ends {
        return Ok(TraceCheck {
            records,
            data,
            checked_end: false,
        });
    }
    if pos >= bytes.len() {
        return Err(bad(
            pos as u64,
            "the trace ends without its end record: it was cut (record it again)",
        ));
    }
    let end_at = pos;
    let mut p = pos + 1;
    let count = varint(bytes, &mut p).ok_or_else(|| bad(end_at as u64, "the end record is cut"))?;
    if count != records {
        return Err(bad(
            end_at as u64,
            "the end record counts another number of records than the trace has: it was cut or changed",
        ));
    }
    let hash: [u8; 8] = bytes
        .get(p..p + 8)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| bad(end_at as u64, "the end record is cut"))?;
    if u64::from_le_bytes(hash) != cachesched_core::hash::fnv1a(&bytes[..end_at]) {
        return Err(bad(
            end_at as u64,
            "the trace's bytes do not match the hash in its end record: it was changed (record it again)",
        ));
    }
    if p + 8 != bytes.len() {
        return Err(bad((p + 8) as u64, "bytes follow the end record"));
    }
    Ok(TraceCheck {
        records,
        data,
        checked_end: true,
    })
}

/// A varint known to be fully buffered (at most 10 bytes are read; malformed input is
/// caught by the careful path, which re-decodes nothing already consumed).
#[inline(always)]
fn varint_fast(data: &[u8], p: &mut usize) -> u64 {
    let b = data[*p];
    *p += 1;
    if b < 0x80 {
        return b as u64;
    }
    let mut v = (b & 0x7f) as u64;
    let mut shift = 7;
    for _ in 0..9 {
        let b = data[*p];
        *p += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::replay::parse_cg_cache;
    use std::io::Read;

    fn events() -> Vec<TraceEvent> {
        vec![
            TraceEvent::Instr {
                addr: 0x401000,
                size: 3,
            },
            TraceEvent::Instr {
                addr: 0x401010,
                size: 5,
            },
            TraceEvent::Load {
                addr: 0x7fff_0000_1000,
                size: 8,
            },
            TraceEvent::Instr {
                addr: 0x400ff0,
                size: 2,
            },
            TraceEvent::Store {
                addr: 0x7fff_0000_0ff8,
                size: 32,
            },
            TraceEvent::Modify {
                addr: 0x10,
                size: 4,
            },
            TraceEvent::Instr {
                addr: u64::MAX - 20,
                size: 15,
            },
        ]
    }

    /// The decoder the engine's trace threads use skips the careful path's checks for
    /// records wholly inside the trace; over a random program of every record kind
    /// (sequential instructions, runs of sure hits, jumps, predicted jumps, loads,
    /// stores, modifies, sizes of 1 to 40 bytes, 16 and more written as a varint) it
    /// yields the careful decoder's events at the same byte offsets, to the end
    /// record, where both stop. Fails if a kind decodes differently, if a predictor is
    /// updated differently, or if a record near the end (the careful path's) is
    /// decoded twice or skipped.
    #[test]
    fn the_unchecked_decoder_gives_the_careful_ones_events() {
        let mut rng = cachesched_core::SimRng::new(11);
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        let mut pc = 0x40_1000u64;
        for _ in 0..200_000 {
            let size = 1 + rng.below(15);
            w.write(TraceEvent::Instr { addr: pc, size }).unwrap();
            pc = match rng.below(10) {
                // a jump back into a small loop: predicted after its first time
                0 => 0x40_1000 + rng.below(8) * 64,
                1 => 0x50_0000 + rng.below(1 << 20),
                _ => pc + size,
            };
            if rng.below(3) == 0 {
                let addr = 0x7f00_0000_0000 + rng.below(1 << 16) * 8;
                let size = 1 + rng.below(40);
                w.write(match rng.below(3) {
                    0 => TraceEvent::Load { addr, size },
                    1 => TraceEvent::Store { addr, size },
                    _ => TraceEvent::Modify { addr, size },
                })
                .unwrap();
            }
            if rng.below(50) == 0 {
                w.write(TraceEvent::HitRun {
                    count: 1 + rng.below(20),
                    bytes: rng.below(300),
                })
                .unwrap();
            }
        }
        let data = w.finish().unwrap();
        assert!(data.starts_with(MAGIC2));
        let (mut careful, mut fast) = (Decoder::new(true), Decoder::new(true));
        let (mut p, mut q) = (8usize, 8usize);
        let mut n = 0u64;
        // records per header kind, and those whose size is a varint (header size 0)
        let (mut kinds, mut sized) = ([0u64; 7], 0u64);
        loop {
            if p < data.len() {
                if let Some(k) = kinds.get_mut(usize::from(data[p] >> 4)) {
                    *k += 1;
                }
                sized += u64::from(data[p] & 15 == 0);
            }
            let a = careful.decode_one(&data, &mut p, 0).unwrap();
            let b = fast.next_unchecked(&data, &mut q);
            assert_eq!(a, b, "event {n}");
            assert_eq!(p, q, "event {n}");
            if a.is_none() {
                break;
            }
            n += 1;
        }
        assert!(n > 250_000, "{n}");
        // every kind the writer makes occurred: instructions in sequence (0), jumps
        // (1), loads, stores, modifies (2-4), runs of sure hits (5), predicted jumps (6)
        assert!(kinds.iter().all(|&k| k > 100), "{kinds:?}");
        assert!(sized > 1_000, "{sized}");
        assert_eq!(careful.next_i, fast.next_i);
    }

    /// A trace of [`events`] written `n` times over.
    fn events_times(n: usize) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for _ in 0..n {
            for e in events() {
                w.write(e).unwrap();
            }
        }
        w.finish().unwrap()
    }

    #[test]
    fn compressed_files_read_as_the_trace_inside_and_damage_is_refused() {
        let raw = events_times(1000);
        let packed = zstd::encode_all(raw.as_slice(), 9).unwrap();
        assert!(
            packed.len() * 3 < raw.len(),
            "{} vs {}",
            packed.len(),
            raw.len()
        );
        let dir = std::env::temp_dir().join(format!("cachesched-zst-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b, c) = (
            dir.join("t.cst"),
            dir.join("t.cst.zst"),
            dir.join("bad.cst.zst"),
        );
        std::fs::write(&a, &raw).unwrap();
        std::fs::write(&b, &packed).unwrap();
        assert_eq!(read_trace_file(&a).unwrap(), raw);
        assert_eq!(read_trace_file(&b).unwrap(), raw);
        let mut streamed = Vec::new();
        open_trace(&b).unwrap().read_to_end(&mut streamed).unwrap();
        assert_eq!(streamed, raw);
        // a cut compressed file is an error, not a shorter trace
        std::fs::write(&c, &packed[..packed.len() / 2]).unwrap();
        assert!(read_trace_file(&c).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A trace file is checked whole the first time it is read, and again whenever a
    /// new version is renamed into place; the same version is not decoded again. Fails
    /// if a damaged file renamed over a verified one is accepted, if a damaged file is
    /// accepted on its first read, or if the check is repeated for an unchanged file
    /// (seen by damaging the file in place while keeping its inode, length and time:
    /// what the identity cannot see, and nothing in this project does).
    #[test]
    fn a_trace_is_verified_once_per_version_of_its_file() {
        let good = events_times(100);
        let mut bad = good.clone();
        bad[good.len() / 2] ^= 0x40;
        assert!(TraceThread::validate(&bad).is_err());
        let dir = std::env::temp_dir().join(format!("cachesched-verified-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (p, q) = (dir.join("t.cst"), dir.join("new.cst"));
        // a new version of the file: written apart, then renamed into place
        let put = |bytes: &[u8]| {
            std::fs::write(&q, bytes).unwrap();
            std::fs::rename(&q, &p).unwrap();
        };
        let refused = || matches!(read_verified_trace(&p), Err(ReadTraceError::Invalid(_)));
        // damaged on its first read: refused
        put(&bad);
        assert!(refused());
        // a good version: read and verified
        put(&good);
        assert_eq!(read_verified_trace(&p).unwrap(), good);
        // a damaged version renamed over it: a new file, checked again
        put(&bad);
        assert!(refused());
        // the verified version again, then damaged in place with its identity kept:
        // not decoded again, so the damage goes unseen (the second read skipped the check)
        put(&good);
        assert_eq!(read_verified_trace(&p).unwrap(), good);
        let when = std::fs::metadata(&p).unwrap().modified().unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        {
            use std::io::Write;
            (&f).write_all(&bad).unwrap();
        }
        f.set_modified(when).unwrap();
        drop(f);
        assert_eq!(read_verified_trace(&p).unwrap(), bad);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn round_trip_and_size() {
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for e in events() {
            w.write(e).unwrap();
        }
        let bytes = w.finish().unwrap();
        let mut back = Vec::new();
        let n = read_trace(&bytes[..], |e| back.push(e)).unwrap();
        assert_eq!(n, 7);
        assert_eq!(back, events());
        // a reader that returns one byte at a time: records straddle reads
        struct Trickle<'a>(&'a [u8]);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() || b.is_empty() {
                    return Ok(0);
                }
                b[0] = self.0[0];
                self.0 = &self.0[1..];
                Ok(1)
            }
        }
        let mut back2 = Vec::new();
        read_trace(Trickle(&bytes), |e| back2.push(e)).unwrap();
        assert_eq!(back2, events());
        assert!(bytes.len() < 8 + 7 * 12);
    }

    #[test]
    fn malformed_input_names_the_offset() {
        assert!(read_trace(&b"NOTATRACE"[..], |_| {})
            .unwrap_err()
            .to_string()
            .contains("magic"));
        let mut t = MAGIC.to_vec();
        t.push(0x71);
        let e = read_trace(&t[..], |_| {}).unwrap_err().to_string();
        assert!(
            e.contains("unknown record kind") && e.contains("offset 8"),
            "{e}"
        );
        let mut t = MAGIC.to_vec();
        t.extend_from_slice(&[0x20, 0x80]);
        assert!(read_trace(&t[..], |_| {})
            .unwrap_err()
            .to_string()
            .contains("ends inside"));
    }

    /// A whole trace is checked before use (issue 77, item 15): bytes changed anywhere
    /// (even ones that still decode), a trace cut at a record boundary or inside the end
    /// record, and bytes after it are refused; a first-version trace (no end record) is
    /// still read. Fails if `verify` accepts any damaged trace, or if damage that still
    /// decodes reaches the simulation.
    #[test]
    fn a_damaged_or_cut_trace_is_refused_whole() {
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for i in 0..20_000u64 {
            w.write(TraceEvent::Instr {
                addr: 0x401000 + (i % 50) * 4,
                size: 4,
            })
            .unwrap();
            w.write(TraceEvent::Load {
                addr: 0x7f00_0000_0000 + (i * 64) % (64 << 10),
                size: 8,
            })
            .unwrap();
        }
        let good = w.finish().unwrap();
        let ok = verify(&good).unwrap();
        assert!(ok.checked_end && ok.data == 20_000, "{ok:?}");
        assert_eq!(good[records_end(&good)], END);
        assert!(TraceThread::validate(&good).is_ok());
        // 200 bytes changed in the records (xor 1 keeps most of them decodable)
        let mut flipped = good.clone();
        let step = (good.len() - 40) / 200;
        for k in 0..200 {
            flipped[16 + k * step] ^= 1;
        }
        let e = verify(&flipped).unwrap_err().to_string();
        assert!(e.contains("changed") || e.contains("offset"), "{e}");
        // cut at a record boundary: the end record is missing
        let end = good.len() - 1 - 8 - {
            let mut n = Vec::new();
            put_varint(&mut n, ok.records);
            n.len()
        };
        assert_eq!(good[end], END);
        let e = verify(&good[..end]).unwrap_err().to_string();
        assert!(e.contains("without its end record"), "{e}");
        let e = verify(&good[..good.len() - 3]).unwrap_err().to_string();
        assert!(e.contains("end record is cut"), "{e}");
        let mut longer = good.clone();
        longer.push(0);
        assert!(verify(&longer)
            .unwrap_err()
            .to_string()
            .contains("follow the end record"));
        // the first version, without an end record, is read as before
        assert_eq!(records_end(&good), end);
        let mut v1 = MAGIC.to_vec();
        v1.extend_from_slice(&good[8..end]);
        assert_eq!(records_end(&v1), v1.len());
        let c = verify(&v1).unwrap();
        assert_eq!((c.records, c.checked_end), (ok.records, false));
        let mut n = 0;
        read_trace(&v1[..], |_| n += 1).unwrap();
        let mut m = 0;
        read_trace(&good[..], |_| m += 1).unwrap();
        assert_eq!(n, m);
    }

    #[test]
    fn hit_runs_fold_sure_hits_and_keep_counts() {
        // a basic block of 2-5 byte instructions interleaved with data accesses
        let mut evs = Vec::new();
        let mut rng = cachesched_core::SimRng::new(5);
        let mut pc = 0x400000u64;
        for i in 0..20_000u64 {
            let size = 2 + rng.below(4);
            evs.push(TraceEvent::Instr { addr: pc, size });
            pc += size;
            if rng.chance(0.05) {
                pc = 0x400000 + rng.below(1 << 16);
            }
            if i % 3 == 0 {
                evs.push(TraceEvent::Load {
                    addr: 0x7000_0000 + rng.below(1 << 14) * 8,
                    size: 8,
                });
            }
        }
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for &e in &evs {
            w.write(e).unwrap();
        }
        let bytes = w.finish().unwrap();
        let mut decoded = Vec::new();
        read_trace(&bytes[..], |e| decoded.push(e)).unwrap();
        let runs = decoded
            .iter()
            .filter(|e| matches!(e, TraceEvent::HitRun { .. }))
            .count();
        assert!(runs > 1000 && decoded.len() < evs.len());
        for cfg in ["1024,2,16", "4096,4,32", "2048,1,64", "65536,8,128"] {
            let g = parse_cg_cache("I1", cfg).unwrap();
            let mut a = CgSim::new(g, g, g).unwrap();
            for &e in &evs {
                a.event(e);
            }
            let mut b = CgSim::new(g, g, g).unwrap();
            replay_binary(&mut b, &bytes[..]).unwrap();
            assert_eq!(a.counts, b.counts, "{cfg}");
            assert!(a.counts.i1mr > 0);
        }
    }
}
