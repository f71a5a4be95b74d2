//! Data-address sampling through `perf_event_open`'s memory-mapped ring buffer, for
//! policies that learn from the addresses threads touch (thread clustering builds its
//! shMaps from sampled remote-cache accesses: paper 3, §4.3; on Power5 the addresses came
//! from continuous sampling read when a remote-access counter overflowed, §5.2.1).
//!
//! - [`memory_sampling_events`] finds the host's precise memory-load event in sysfs:
//!   Intel's `cpu/events/mem-loads` (PEBS load latency, `ldlat` in `config1` as perf
//!   puts it) or AMD's `ibs_op` PMU. Their samples carry a data source
//!   ([`Sample::data_src`]), which [`is_remote_cache_hit`] reads to keep only accesses
//!   served by another cache. Where neither exists — every VM without a virtual PMU —
//!   the error names exactly what is missing.
//! - [`SampledEvent`] is one such event (or any [`EventSpec`]) sampling one thread into a
//!   ring of `1 + 2^n` pages; [`SampledEvent::drain`] takes the records written since
//!   the last drain.
//! - [`parse_ring`] is the record parser on its own, a pure function over the ring's
//!   bytes, unit-tested on synthetic rings.
//!
//! Software page faults ([`EventSpec::page_faults`]) carry a data address too and need
//! no PMU: they exercise the whole path on any host, though a page fault is not a
//! remote-cache access.

use crate::events::{parse_num, place};
use crate::perf::{self, RawAttr};
use serde::Serialize;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// Where the kernel lists its PMUs (`perf list` reads the same directory).
pub const EVENT_SOURCE_DEVICES: &str = "/sys/bus/event_source/devices";

/// `PERF_TYPE_SOFTWARE`.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_PAGE_FAULTS`: the software event of every page fault, with the
/// faulting address as the sample's data address.
pub const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;

/// `PERF_RECORD_LOST`: the kernel had no room for some records.
const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`: one sample.
const PERF_RECORD_SAMPLE: u32 = 9;

/// `PERF_EVENT_IOC_ENABLE` (`_IO('$', 0)`).
const IOC_ENABLE: libc::c_ulong = 0x2400;
/// `PERF_EVENT_IOC_DISABLE` (`_IO('$', 1)`).
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// `PERF_EVENT_IOC_PERIOD` (`_IOW('$', 4, __u64)`).
const IOC_PERIOD: libc::c_ulong = 0x4008_2404;
/// `PERF_EVENT_IOC_ID` (`_IOR('$', 7, __u64 *)`).
const IOC_ID: libc::c_ulong = 0x8008_2407;
/// `PERF_IOC_FLAG_GROUP`: an enable/disable ioctl acts on the whole group.
const IOC_FLAG_GROUP: libc::c_ulong = 1;

/// The fields a sample record carries (`perf_event_attr.sample_type`, PERF_SAMPLE_*
/// bits). Only fixed-size fields are supported (see [`SampleType::SUPPORTED`]); every
/// sample must carry [`SampleType::TID`] and [`SampleType::ADDR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct SampleType(pub u64);

impl SampleType {
    /// `PERF_SAMPLE_IP`: the instruction pointer.
    pub const IP: SampleType = SampleType(1 << 0);
    /// `PERF_SAMPLE_TID`: process and thread id.
    pub const TID: SampleType = SampleType(1 << 1);
    /// `PERF_SAMPLE_TIME`: the perf clock, ns.
    pub const TIME: SampleType = SampleType(1 << 2);
    /// `PERF_SAMPLE_ADDR`: the data address.
    pub const ADDR: SampleType = SampleType(1 << 3);
    /// `PERF_SAMPLE_ID`: the event's id.
    pub const ID: SampleType = SampleType(1 << 6);
    /// `PERF_SAMPLE_CPU`: the CPU it happened on.
    pub const CPU: SampleType = SampleType(1 << 7);
    /// `PERF_SAMPLE_PERIOD`: the sampling period.
    pub const PERIOD: SampleType = SampleType(1 << 8);
    /// `PERF_SAMPLE_STREAM_ID`: the id of the event that was opened (not inherited).
    pub const STREAM_ID: SampleType = SampleType(1 << 9);
    /// `PERF_SAMPLE_WEIGHT`: a cost, the load latency in cycles for memory events.
    pub const WEIGHT: SampleType = SampleType(1 << 14);
    /// `PERF_SAMPLE_DATA_SRC`: where the data came from (`union perf_mem_data_src`).
    pub const DATA_SRC: SampleType = SampleType(1 << 15);
    /// `PERF_SAMPLE_IDENTIFIER`: the event's id, first in the record.
    pub const IDENTIFIER: SampleType = SampleType(1 << 16);
    /// Every bit [`parse_ring`] understands.
    pub const SUPPORTED: SampleType = SampleType(
        Self::IP.0
            | Self::TID.0
            | Self::TIME.0
            | Self::ADDR.0
            | Self::ID.0
            | Self::CPU.0
            | Self::PERIOD.0
            | Self::STREAM_ID.0
            | Self::WEIGHT.0
            | Self::DATA_SRC.0
            | Self::IDENTIFIER.0,
    );

    /// Whether every bit of `other` is set here.
    pub fn contains(self, other: SampleType) -> bool {
        self.0 & other.0 == other.0
    }

    /// An error unless the type has TID and ADDR and nothing [`parse_ring`] cannot parse.
    pub fn check(self) -> Result<(), SamplingError> {
        if self.0 & !Self::SUPPORTED.0 != 0 || !self.contains(Self::TID | Self::ADDR) {
            return Err(SamplingError::SampleType(self.0));
        }
        Ok(())
    }
}

impl std::ops::BitOr for SampleType {
    type Output = SampleType;
    fn bitor(self, rhs: SampleType) -> SampleType {
        SampleType(self.0 | rhs.0)
    }
}

/// A sampling event: which PMU and event, how precisely, and what its samples carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventSpec {
    /// A name for messages (`cpu/mem-loads/`, `ibs_op//`, `page-faults`).
    pub name: String,
    /// `perf_event_attr.type`: PERF_TYPE_* or a PMU's number from sysfs.
    pub perf_type: u32,
    /// `config`.
    pub config: u64,
    /// `config1` (Intel's load-latency threshold `ldlat`).
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// The `precise_ip` level asked for (0–3); lowered one step at a time down to 1 if
    /// the kernel refuses it, as perf's `:P` modifier does. 0 for software events.
    pub precise: u8,
    /// Whether samples carry a data source and a weight ([`SampleType::DATA_SRC`],
    /// [`SampleType::WEIGHT`]): memory-load events, whose data source tells a
    /// remote-cache hit from the rest ([`is_remote_cache_hit`]).
    pub data_src: bool,
    /// Whether only user mode is sampled (`exclude_kernel`, `exclude_hv`), which is
    /// also what `perf_event_paranoid` 2 permits without privilege.
    pub user_only: bool,
    /// The smallest period the PMU accepts (AMD IBS: 0x90 ops or cycles).
    pub period_min: u64,
    /// Periods are rounded up to a multiple of this (AMD IBS: 16; else 1).
    pub period_step: u64,
}

impl EventSpec {
    /// Software page faults (PERF_COUNT_SW_PAGE_FAULTS), user mode: every page fault a
    /// thread takes, with the faulting address. For testing the sampling path on hosts
    /// without a PMU; page faults are not remote-cache accesses.
    pub fn page_faults() -> EventSpec {
        EventSpec {
            name: "page-faults".into(),
            perf_type: PERF_TYPE_SOFTWARE,
            config: PERF_COUNT_SW_PAGE_FAULTS,
            config1: 0,
            config2: 0,
            precise: 0,
            data_src: false,
            user_only: true,
            period_min: 1,
            period_step: 1,
        }
    }

    /// The fields [`SampledEvent::open`] asks for: thread, time, data address and CPU,
    /// with data source and weight for memory-load events.
    pub fn sample_type(&self) -> SampleType {
        let base = SampleType::TID | SampleType::TIME | SampleType::ADDR | SampleType::CPU;
        if self.data_src {
            base | SampleType::DATA_SRC | SampleType::WEIGHT
        } else {
            base
        }
    }

    /// The period the PMU is given for a requested one: at least
    /// [`EventSpec::period_min`] and 1, rounded up to [`EventSpec::period_step`].
    pub fn period_for(&self, requested: u64) -> u64 {
        let p = requested.max(self.period_min).max(1);
        let step = self.period_step.max(1);
        p.div_ceil(step).saturating_mul(step)
    }
}

/// One sample record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The data address.
    pub addr: u64,
    /// The instruction pointer ([`SampleType::IP`]).
    pub ip: Option<u64>,
    /// The perf clock, ns ([`SampleType::TIME`]).
    pub time: Option<u64>,
    /// The CPU ([`SampleType::CPU`]).
    pub cpu: Option<u32>,
    /// The period ([`SampleType::PERIOD`]).
    pub period: Option<u64>,
    /// The event's id ([`SampleType::IDENTIFIER`] or [`SampleType::ID`]).
    pub id: Option<u64>,
    /// The opened event's id ([`SampleType::STREAM_ID`]).
    pub stream_id: Option<u64>,
    /// The weight, load latency for memory events ([`SampleType::WEIGHT`]).
    pub weight: Option<u64>,
    /// The data source ([`SampleType::DATA_SRC`]; see [`is_remote_cache_hit`]).
    pub data_src: Option<u64>,
}

/// What one drain (or one [`parse_ring`] call) found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DrainCounts {
    /// Sample records parsed (and appended to the output).
    pub samples: u64,
    /// Samples the kernel dropped for lack of room, from PERF_RECORD_LOST records.
    pub lost: u64,
    /// PERF_RECORD_LOST records.
    pub lost_records: u64,
    /// Records of other types (throttling …), skipped.
    pub other: u64,
    /// Records that straddled the end of the ring and were copied to be parsed.
    pub straddled: u64,
    /// Bytes consumed.
    pub bytes: u64,
}

impl DrainCounts {
    /// Adds `o` to these counts.
    pub fn accumulate(&mut self, o: &DrainCounts) {
        self.samples += o.samples;
        self.lost += o.lost;
        self.lost_records += o.lost_records;
        self.other += o.other;
        self.straddled += o.straddled;
        self.bytes += o.bytes;
    }
}

/// Why a sampling event could not be opened, mapped or read.
#[derive(Debug, Error)]
pub enum SamplingError {
    /// The kernel or CPU has no such event, or cannot sample it.
    #[error("{event} cannot be sampled here (perf_event_open: {}): the kernel or CPU has no such event, or it cannot sample data addresses", perf::errno(.source))]
    Unsupported {
        /// The event's name.
        event: String,
        /// The error.
        source: io::Error,
    },
    /// Not permitted.
    #[error("sampling {event} is not permitted (perf_event_open: {}): /proc/sys/kernel/perf_event_paranoid is {paranoid}; run as root, grant CAP_PERFMON, or lower it (e.g. to 1)", perf::errno(.source))]
    Denied {
        /// The event's name.
        event: String,
        /// The paranoid level, if readable.
        paranoid: String,
        /// The error.
        source: io::Error,
    },
    /// The thread no longer exists.
    #[error("thread {tid} is gone")]
    Gone {
        /// The thread.
        tid: i32,
    },
    /// The ring buffer could not be mapped.
    #[error("cannot map the {pages}-page ring buffer of {event}: {source}{}", if .source.raw_os_error() == Some(libc::EPERM) { " (perf buffers beyond /proc/sys/kernel/perf_event_mlock_kb per user count against RLIMIT_MEMLOCK: raise either, use fewer data pages, or run as root)" } else { "" })]
    Mmap {
        /// The event's name.
        event: String,
        /// Pages mapped (1 + data pages).
        pages: usize,
        /// The error.
        source: io::Error,
    },
    /// The data pages are not a power of two.
    #[error("a perf ring buffer needs a power-of-two number of data pages, not {0}")]
    DataPages(usize),
    /// A sample type [`parse_ring`] cannot parse, or one without TID and ADDR.
    #[error("sample_type {0:#x} is not supported: it needs TID and ADDR and only fixed-size fields (IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD, WEIGHT, DATA_SRC)")]
    SampleType(u64),
    /// The ring holds something that is not a well-formed record.
    #[error("corrupt perf ring buffer at position {pos}: {what}")]
    Corrupt {
        /// Position (in the ring's running byte count) of the bad record.
        pos: u64,
        /// What is wrong.
        what: String,
    },
    /// Any other failure of a call.
    #[error("{call} for {event} failed: {}", perf::errno(.source))]
    Os {
        /// The event's name.
        event: String,
        /// The call.
        call: &'static str,
        /// The error.
        source: io::Error,
    },
}

/// Parses the records of a perf ring buffer between `tail` and `head` (the running byte
/// counts of `perf_event_mmap_page`, which may wrap around 2^64; positions are taken
/// modulo `ring.len()`, a power of two as the kernel's rings are),
/// appending each PERF_RECORD_SAMPLE to `out` and counting PERF_RECORD_LOST's lost
/// samples. A record that straddles the end of the ring is copied into `scratch` first.
/// Other record types are skipped by their size, as are the `sample_id_all` fields that
/// follow a LOST record's own.
///
/// On a malformed record (size under 8 bytes or beyond `head`) it stops with
/// [`SamplingError::Corrupt`], keeping the samples parsed before it in `out`.
pub fn parse_ring(
    ring: &[u8],
    tail: u64,
    head: u64,
    sample_type: SampleType,
    scratch: &mut Vec<u8>,
    out: &mut Vec<Sample>,
) -> Result<DrainCounts, SamplingError> {
    sample_type.check()?;
    let len = ring.len() as u64;
    if !len.is_power_of_two() || len < 8 {
        return Err(SamplingError::Corrupt {
            pos: tail,
            what: format!("a ring of {len} bytes (not a power of two of at least 8)"),
        });
    }
    let avail = head.wrapping_sub(tail);
    if avail > len {
        return Err(SamplingError::Corrupt {
            pos: tail,
            what: format!(
                "head {head} is {avail} bytes past tail {tail}, more than the ring's {len}"
            ),
        });
    }
    let mut counts = DrainCounts::default();
    let mut pos = tail;
    while pos != head {
        let left = head.wrapping_sub(pos);
        if left < 8 {
            return Err(SamplingError::Corrupt {
                pos,
                what: format!("{left} bytes left, less than a record header"),
            });
        }
        let mut hdr = [0u8; 8];
        copy_wrapped(ring, pos, &mut hdr);
        let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let size = u64::from(u16::from_ne_bytes([hdr[6], hdr[7]]));
        if size < 8 || size > left {
            return Err(SamplingError::Corrupt {
                pos,
                what: format!("record of type {kind} claims {size} bytes with {left} left"),
            });
        }
        let off = (pos % len) as usize;
        let rec: &[u8] = if off + size as usize <= ring.len() {
            &ring[off..off + size as usize]
        } else {
            scratch.clear();
            scratch.resize(size as usize, 0);
            copy_wrapped(ring, pos, scratch);
            counts.straddled += 1;
            scratch
        };
        let body = &rec[8..];
        match kind {
            PERF_RECORD_SAMPLE => {
                out.push(parse_sample(body, sample_type).ok_or_else(|| {
                    SamplingError::Corrupt {
                        pos,
                        what: format!(
                            "a sample record of {size} bytes is too short for sample_type {:#x}",
                            sample_type.0
                        ),
                    }
                })?);
                counts.samples += 1;
            }
            PERF_RECORD_LOST => {
                // struct { u64 id; u64 lost; struct sample_id sample_id; }
                if body.len() < 16 {
                    return Err(SamplingError::Corrupt {
                        pos,
                        what: format!("a LOST record of {size} bytes"),
                    });
                }
                counts.lost += read_u64(body, 8);
                counts.lost_records += 1;
            }
            _ => counts.other += 1,
        }
        pos = pos.wrapping_add(size);
        counts.bytes += size;
    }
    Ok(counts)
}

/// Copies `dst.len()` bytes of `ring` from running position `pos` on, wrapping at its end.
fn copy_wrapped(ring: &[u8], pos: u64, dst: &mut [u8]) {
    let off = (pos % ring.len() as u64) as usize;
    let first = dst.len().min(ring.len() - off);
    dst[..first].copy_from_slice(&ring[off..off + first]);
    let rest = dst.len() - first;
    dst[first..].copy_from_slice(&ring[..rest]);
}

/// The native-endian u64 at byte `at` of `b` (the caller checked the length).
fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

/// One sample record's body (after the header), fields in the order
/// `perf_output_sample` writes them; `None` if the body is too short.
fn parse_sample(body: &[u8], st: SampleType) -> Option<Sample> {
    let mut at = 0usize;
    let mut next = || -> Option<u64> {
        let v = (at + 8 <= body.len()).then(|| read_u64(body, at));
        at += 8;
        v
    };
    let mut s = Sample::default();
    if st.contains(SampleType::IDENTIFIER) {
        s.id = Some(next()?);
    }
    if st.contains(SampleType::IP) {
        s.ip = Some(next()?);
    }
    // TID: u32 pid, u32 tid (checked present)
    let pt = next()?.to_ne_bytes();
    s.pid = u32::from_ne_bytes([pt[0], pt[1], pt[2], pt[3]]);
    s.tid = u32::from_ne_bytes([pt[4], pt[5], pt[6], pt[7]]);
    if st.contains(SampleType::TIME) {
        s.time = Some(next()?);
    }
    s.addr = next()?;
    if st.contains(SampleType::ID) {
        s.id = Some(next()?);
    }
    if st.contains(SampleType::STREAM_ID) {
        s.stream_id = Some(next()?);
    }
    if st.contains(SampleType::CPU) {
        // u32 cpu, u32 reserved
        let c = next()?.to_ne_bytes();
        s.cpu = Some(u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
    }
    if st.contains(SampleType::PERIOD) {
        s.period = Some(next()?);
    }
    if st.contains(SampleType::WEIGHT) {
        s.weight = Some(next()?);
    }
    if st.contains(SampleType::DATA_SRC) {
        s.data_src = Some(next()?);
    }
    Some(s)
}

/// `union perf_mem_data_src`: `mem_lvl` (bits 5–18) HIT.
const MEM_LVL_HIT: u64 = 0x02;
/// `mem_lvl` REM_CCE1: a remote cache, one hop.
const MEM_LVL_REM_CCE1: u64 = 0x400;
/// `mem_lvl` REM_CCE2: a remote cache, two hops.
const MEM_LVL_REM_CCE2: u64 = 0x800;
/// `mem_snoop` (bits 19–23) HITM: the line was modified in another core's cache.
const MEM_SNOOP_HITM: u64 = 0x10;
/// `mem_snoopx` (bits 38–39) PEER: transferred from a peer's cache.
const MEM_SNOOPX_PEER: u64 = 0x02;
/// `mem_lvl_num` (bits 33–36) ANY_CACHE.
const MEM_LVLNUM_ANY_CACHE: u64 = 0x0b;

/// Whether a sample's data source says it was served by another core's or chip's
/// cache: a hit in a remote cache (`mem_lvl` REM_CCE1/REM_CCE2 with HIT, or a cache
/// `mem_lvl_num` with the `mem_remote` bit, as AMD IBS reports), a snoop that found the
/// line modified elsewhere (HITM), or a transfer from a peer cache (`mem_snoopx` PEER).
/// The paper counts accesses "satisfied by a remote L2 or remote L3" (§5.2.1); these are
/// the data sources that say so. `PERF_MEM_NA` (what software events report) is not.
pub fn is_remote_cache_hit(data_src: u64) -> bool {
    let lvl = (data_src >> 5) & 0x3fff;
    let snoop = (data_src >> 19) & 0x1f;
    let lvl_num = (data_src >> 33) & 0xf;
    let remote = (data_src >> 37) & 1;
    let snoopx = (data_src >> 38) & 0x3;
    (lvl & MEM_LVL_HIT != 0 && lvl & (MEM_LVL_REM_CCE1 | MEM_LVL_REM_CCE2) != 0)
        || (remote == 1 && ((1..=4).contains(&lvl_num) || lvl_num == MEM_LVLNUM_ANY_CACHE))
        || snoop & MEM_SNOOP_HITM != 0
        || snoopx & MEM_SNOOPX_PEER != 0
}

/// The start of `struct perf_event_mmap_page` (include/uapi/linux/perf_event.h), the
/// first page of the mapping; the ring's data pages follow it.
#[repr(C)]
struct MmapPage {
    /// `version`.
    version: u32,
    /// `compat_version`.
    compat_version: u32,
    /// `lock`: seqlock for the time and index fields.
    lock: u32,
    /// `index`: hardware counter number + 1, for user-space `rdpmc`.
    index: u32,
    /// `offset`.
    offset: i64,
    /// `time_enabled`.
    time_enabled: u64,
    /// `time_running`.
    time_running: u64,
    /// `capabilities` bit field.
    capabilities: u64,
    /// `pmc_width`.
    pmc_width: u16,
    /// `time_shift`.
    time_shift: u16,
    /// `time_mult`.
    time_mult: u32,
    /// `time_offset`.
    time_offset: u64,
    /// `time_zero`.
    time_zero: u64,
    /// `size`: how much of this header the kernel fills.
    size: u32,
    /// `__reserved_1`.
    reserved_1: u32,
    /// `time_cycles`.
    time_cycles: u64,
    /// `time_mask`.
    time_mask: u64,
    /// `__reserved`: pads the header to 1 KiB.
    reserved: [u8; 928],
    /// `data_head`: bytes the kernel has written so far; read with acquire ordering.
    data_head: AtomicU64,
    /// `data_tail`: bytes user space has consumed; written with release ordering.
    data_tail: AtomicU64,
    /// `data_offset`: where the data area starts in the mapping (0 before Linux 4.1).
    data_offset: u64,
    /// `data_size`: the data area's size (0 before Linux 4.1).
    data_size: u64,
}

const _: () = assert!(std::mem::offset_of!(MmapPage, time_mask) == 88);
const _: () = assert!(std::mem::offset_of!(MmapPage, data_head) == 1024);
const _: () = assert!(std::mem::offset_of!(MmapPage, data_tail) == 1032);
const _: () = assert!(std::mem::offset_of!(MmapPage, data_offset) == 1040);
const _: () = assert!(std::mem::offset_of!(MmapPage, data_size) == 1048);

/// The size of a memory page.
pub fn page_size() -> usize {
    // SAFETY: sysconf with a valid name only returns a value.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// One sampling event on one thread, with its ring buffer mapped. Unmapped and closed
/// on drop.
#[derive(Debug)]
pub struct SampledEvent {
    /// The event.
    fd: OwnedFd,
    /// The mapping: the header page, then the data area.
    base: *mut libc::c_void,
    /// The mapping's length.
    map_len: usize,
    /// The data area's offset in the mapping.
    data_offset: usize,
    /// The data area's length (a power of two).
    data_size: usize,
    /// What the records carry.
    sample_type: SampleType,
    /// A record that straddles the end of the ring is copied here.
    scratch: Vec<u8>,
    /// The thread sampled.
    tid: i32,
    /// The event's name, for messages.
    name: String,
    /// The period given to the PMU.
    period: u64,
}

// SAFETY: the mapping belongs to this value alone (the kernel aside, which only writes
// the data area beyond data_tail and data_head); every access goes through &self or
// &mut self, so moving the value to another thread moves sole ownership with it.
unsafe impl Send for SampledEvent {}

impl SampledEvent {
    /// Opens `spec` on thread `tid` (any CPU), sampling one in `period` events (adjusted
    /// by [`EventSpec::period_for`]) into a ring of `data_pages` pages (a power of two)
    /// after one header page, with the fields of [`EventSpec::sample_type`].
    pub fn open(
        tid: i32,
        spec: &EventSpec,
        period: u64,
        data_pages: usize,
    ) -> Result<SampledEvent, SamplingError> {
        Self::open_with(tid, spec, period, data_pages, spec.sample_type())
    }

    /// [`SampledEvent::open`] with the sample's fields chosen
    /// ([`SampleType::check`]). The event is opened disabled and enabled once its ring
    /// is mapped, so that every event after this returns is either in the ring or
    /// counted as lost.
    pub fn open_with(
        tid: i32,
        spec: &EventSpec,
        period: u64,
        data_pages: usize,
        sample_type: SampleType,
    ) -> Result<SampledEvent, SamplingError> {
        sample_type.check()?;
        if data_pages == 0 || !data_pages.is_power_of_two() {
            return Err(SamplingError::DataPages(data_pages));
        }
        let period = spec.period_for(period);
        let fd = Self::open_fd(tid, spec, period, sample_type)?;
        let ps = page_size();
        let map_len = (1 + data_pages) * ps;
        // SAFETY: a fresh shared mapping of the event's descriptor, of 1 + 2^n pages as
        // perf requires; the kernel validates every argument and we check the result.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(SamplingError::Mmap {
                event: spec.name.clone(),
                pages: 1 + data_pages,
                source: io::Error::last_os_error(),
            });
        }
        let page = base as *const MmapPage;
        // SAFETY: the header page is mapped and readable; data_offset and data_size are
        // set by the kernel before mmap returns and never change.
        let (off, size) = unsafe {
            (
                std::ptr::addr_of!((*page).data_offset).read_volatile() as usize,
                std::ptr::addr_of!((*page).data_size).read_volatile() as usize,
            )
        };
        let (data_offset, data_size) = if size == 0 {
            (ps, data_pages * ps) // kernels before 4.1
        } else {
            (off, size)
        };
        let ev = SampledEvent {
            fd,
            base,
            map_len,
            data_offset,
            data_size,
            sample_type,
            scratch: Vec::with_capacity(256),
            tid,
            name: spec.name.clone(),
            period,
        };
        ev.ioctl(IOC_ENABLE, 0, "enable")?;
        Ok(ev)
    }

    /// perf_event_open, lowering `precise_ip` from the spec's level to 1 while the
    /// kernel refuses it.
    fn open_fd(
        tid: i32,
        spec: &EventSpec,
        period: u64,
        sample_type: SampleType,
    ) -> Result<OwnedFd, SamplingError> {
        let mut precise = spec.precise.min(3);
        loop {
            let mut flags = perf::ATTR_DISABLED | perf::ATTR_SAMPLE_ID_ALL;
            flags |= perf::attr_precise_ip(precise);
            if spec.user_only {
                flags |= perf::EXCLUDE_KERNEL | perf::EXCLUDE_HV;
            }
            let attr = RawAttr {
                sample_period: period,
                sample_type: sample_type.0,
                flags,
                config1: spec.config1,
                config2: spec.config2,
                ..RawAttr::new(spec.perf_type, spec.config)
            };
            match perf::open_event(&attr, tid, -1) {
                Ok(fd) => return Ok(fd),
                Err(e)
                    if precise > 1
                        && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) =>
                {
                    precise -= 1;
                }
                Err(e) => {
                    let event = spec.name.clone();
                    return Err(match e.raw_os_error() {
                        Some(libc::ESRCH) => SamplingError::Gone { tid },
                        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL) => {
                            SamplingError::Unsupported { event, source: e }
                        }
                        Some(libc::EACCES | libc::EPERM) => SamplingError::Denied {
                            event,
                            paranoid: perf::paranoid(),
                            source: e,
                        },
                        _ => SamplingError::Os {
                            event,
                            call: "perf_event_open",
                            source: e,
                        },
                    });
                }
            }
        }
    }

    /// An ioctl on the event with an integer argument.
    fn ioctl(
        &self,
        req: libc::c_ulong,
        arg: libc::c_ulong,
        call: &'static str,
    ) -> Result<(), SamplingError> {
        // SAFETY: a perf ioctl on our own descriptor whose argument is an integer flag.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), req as _, arg) };
        if r < 0 {
            return Err(self.os_error(call));
        }
        Ok(())
    }

    /// The last OS error as [`SamplingError::Os`] for `call`.
    fn os_error(&self, call: &'static str) -> SamplingError {
        SamplingError::Os {
            event: self.name.clone(),
            call,
            source: io::Error::last_os_error(),
        }
    }

    /// The thread sampled.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// The period given to the PMU.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// What the samples carry.
    pub fn sample_type(&self) -> SampleType {
        self.sample_type
    }

    /// The data area's size in bytes.
    pub fn ring_bytes(&self) -> usize {
        self.data_size
    }

    /// The kernel's id of the event (what [`Sample::id`] holds).
    pub fn id(&self) -> Result<u64, SamplingError> {
        let mut id = 0u64;
        // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), IOC_ID as _, &mut id as *mut u64) };
        if r < 0 {
            return Err(self.os_error("PERF_EVENT_IOC_ID"));
        }
        Ok(id)
    }

    /// Changes the sampling period to `period` (at least 1) with PERF_EVENT_IOC_PERIOD,
    /// effective from the next overflow. Unlike [`SampledEvent::open`] it does not apply
    /// [`EventSpec::period_for`]: the caller passes a period the PMU accepts.
    pub fn set_period(&mut self, period: u64) -> Result<(), SamplingError> {
        let p = period.max(1);
        // SAFETY: PERF_EVENT_IOC_PERIOD reads one u64 through the pointer.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), IOC_PERIOD as _, &p as *const u64) };
        if r < 0 {
            return Err(self.os_error("PERF_EVENT_IOC_PERIOD"));
        }
        self.period = p;
        Ok(())
    }

    /// Stops sampling (with `group`, every event of its group too); the ring keeps what
    /// was written.
    pub fn disable(&self, group: bool) -> Result<(), SamplingError> {
        self.ioctl(
            IOC_DISABLE,
            if group { IOC_FLAG_GROUP } else { 0 },
            "disable",
        )
    }

    /// Starts sampling again (with `group`, every event of its group too).
    pub fn enable(&self, group: bool) -> Result<(), SamplingError> {
        self.ioctl(IOC_ENABLE, if group { IOC_FLAG_GROUP } else { 0 }, "enable")
    }

    /// The event's descriptor (e.g. as the group leader of other events).
    pub fn as_raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Appends the samples written since the last drain to `out` and frees their room in
    /// the ring. Reads `data_head` with acquire ordering (the kernel writes the records,
    /// then the head), parses from `data_tail` to it ([`parse_ring`]), then stores the
    /// head as the new `data_tail` with release ordering, so that the kernel reuses the
    /// room only after the records were read. A corrupt ring is skipped to its head, and
    /// the error returned.
    pub fn drain(&mut self, out: &mut Vec<Sample>) -> Result<DrainCounts, SamplingError> {
        let page = self.base as *const MmapPage;
        // SAFETY: the header page is mapped for as long as self lives; data_head and
        // data_tail are 8-byte aligned u64s the kernel accesses atomically.
        let (head_cell, tail_cell) = unsafe {
            (
                &*std::ptr::addr_of!((*page).data_head),
                &*std::ptr::addr_of!((*page).data_tail),
            )
        };
        let head = head_cell.load(Ordering::Acquire);
        // only this process writes data_tail
        let tail = tail_cell.load(Ordering::Relaxed);
        // SAFETY: the data area is mapped for as long as self lives. The kernel writes
        // only at and beyond data_head, up to data_tail + size, never into [tail, head),
        // which is all the parser reads (bytes outside it are not read).
        let ring = unsafe {
            std::slice::from_raw_parts(
                (self.base as *const u8).add(self.data_offset),
                self.data_size,
            )
        };
        let r = parse_ring(ring, tail, head, self.sample_type, &mut self.scratch, out);
        tail_cell.store(head, Ordering::Release);
        r
    }
}

impl Drop for SampledEvent {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `open_with`; the descriptor is
        // closed afterwards by OwnedFd.
        unsafe {
            libc::munmap(self.base, self.map_len);
        }
    }
}

/// Why no memory-sampling event could be found.
#[derive(Debug, Error)]
pub enum DiscoveryError {
    /// Neither Intel's nor AMD's precise memory-load event exists.
    #[error("no precise memory-load event: {} do not exist ({hint})", join_and(.missing))]
    NoEvent {
        /// What was looked for.
        missing: Vec<PathBuf>,
        /// Why, as far as sysfs tells.
        hint: String,
    },
    /// A sysfs file exists but cannot be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A sysfs file says something this parser does not understand.
    #[error("{}: cannot understand {what:?}", .path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// The text.
        what: String,
    },
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(paths: &[PathBuf]) -> String {
    let s: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    match s.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The host's precise memory-load sampling events, from
/// [`EVENT_SOURCE_DEVICES`]: see [`memory_sampling_events_at`].
pub fn memory_sampling_events() -> Result<Vec<EventSpec>, DiscoveryError> {
    memory_sampling_events_at(Path::new(EVENT_SOURCE_DEVICES))
}

/// The precise memory-load sampling events under `root` (a copy of
/// `/sys/bus/event_source/devices`), one per PMU that has one:
/// - Intel: `cpu/events/mem-loads` (`cpu_core` and `cpu_atom` on hybrid CPUs), its terms
///   (`event=0xcd,umask=0x1,ldlat=3`) placed into config/config1/config2 by the PMU's
///   `format/` files as perf does, the PMU's number from `type`, the highest precise
///   level asked for (perf's `:P`). Where `mem-loads-aux` exists (Sapphire Rapids and
///   later) the kernel wants it as the group leader, which is not done here: opening
///   the event then fails with the kernel's error.
/// - AMD: the `ibs_op` PMU (its number from `ibs_op/type`), periods rounded as IBS
///   requires; it samples all modes (IBS rejects the mode exclusions).
///
/// Where there is none, the error names every path looked for.
pub fn memory_sampling_events_at(root: &Path) -> Result<Vec<EventSpec>, DiscoveryError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for pmu in ["cpu", "cpu_core", "cpu_atom"] {
        let dir = root.join(pmu);
        let ev = dir.join("events/mem-loads");
        if ev.exists() {
            found.push(intel_mem_loads(&dir, pmu, &ev)?);
        } else if pmu == "cpu" || dir.exists() {
            missing.push(ev);
        }
    }
    let ibs = root.join("ibs_op");
    if ibs.exists() {
        found.push(EventSpec {
            name: "ibs_op//".into(),
            perf_type: read_type(&ibs)?,
            config: 0,
            config1: 0,
            config2: 0,
            precise: 0,
            data_src: true,
            user_only: false,
            period_min: 0x90,
            period_step: 16,
        });
    } else {
        missing.push(ibs);
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let any_cpu_pmu = ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| root.join(p).exists());
    Err(DiscoveryError::NoEvent {
        missing,
        hint: if any_cpu_pmu {
            "the CPU's PMU has no precise memory-load event (no PEBS load latency, no IBS)".into()
        } else {
            "no hardware PMU is exposed, typical in a VM".into()
        },
    })
}

/// A PMU's number from its `type` file.
fn read_type(dir: &Path) -> Result<u32, DiscoveryError> {
    let path = dir.join("type");
    let text = read(&path)?;
    text.trim().parse().map_err(|_| DiscoveryError::Format {
        path,
        what: text.trim().to_string(),
    })
}

/// A sysfs file's contents.
fn read(path: &Path) -> Result<String, DiscoveryError> {
    std::fs::read_to_string(path).map_err(|source| DiscoveryError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Intel's `mem-loads` of PMU `dir`, its terms placed by the PMU's format files.
fn intel_mem_loads(dir: &Path, pmu: &str, ev: &Path) -> Result<EventSpec, DiscoveryError> {
    let mut cfg = [0u64; 3];
    let text = read(ev)?;
    for term in text.trim().split(',').filter(|t| !t.is_empty()) {
        let (name, value) = match term.split_once('=') {
            Some((n, v)) => (n.trim(), parse_num(v.trim())),
            None => (term.trim(), Some(1)),
        };
        let value = value.ok_or_else(|| DiscoveryError::Format {
            path: ev.to_path_buf(),
            what: term.to_string(),
        })?;
        let fpath = dir.join("format").join(name);
        place(&read(&fpath)?, value, &mut cfg).ok_or_else(|| DiscoveryError::Format {
            path: fpath.clone(),
            what: read(&fpath).unwrap_or_default().trim().to_string(),
        })?;
    }
    Ok(EventSpec {
        name: format!("{pmu}/mem-loads/"),
        perf_type: read_type(dir)?,
        config: cfg[0],
        config1: cfg[1],
        config2: cfg[2],
        precise: 3,
        data_src: true,
        user_only: true,
        period_min: 1,
        period_step: 1,
    })
}

/// `0x1f` or `31`.
#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    // ---- synthetic rings ----

    /// A sample record of `st` as the kernel lays it out (header included).
    fn encode_sample(st: SampleType, s: &Sample) -> Vec<u8> {
        let mut b = Vec::new();
        let mut put = |v: u64| b.extend_from_slice(&v.to_ne_bytes());
        if st.contains(SampleType::IDENTIFIER) {
            put(s.id.unwrap());
        }
        if st.contains(SampleType::IP) {
            put(s.ip.unwrap());
        }
        put(u64::from(s.pid) | u64::from(s.tid) << 32);
        if st.contains(SampleType::TIME) {
            put(s.time.unwrap());
        }
        put(s.addr);
        if st.contains(SampleType::ID) {
            put(s.id.unwrap());
        }
        if st.contains(SampleType::STREAM_ID) {
            put(s.stream_id.unwrap());
        }
        if st.contains(SampleType::CPU) {
            put(u64::from(s.cpu.unwrap()));
        }
        if st.contains(SampleType::PERIOD) {
            put(s.period.unwrap());
        }
        if st.contains(SampleType::WEIGHT) {
            put(s.weight.unwrap());
        }
        if st.contains(SampleType::DATA_SRC) {
            put(s.data_src.unwrap());
        }
        header(PERF_RECORD_SAMPLE, b)
    }

    /// A record of `kind` with `body`.
    fn header(kind: u32, body: Vec<u8>) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&kind.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        r.extend(body);
        r
    }

    /// A LOST record for `lost` samples with a `sample_id_all` trailer of `trailer` u64s.
    fn encode_lost(lost: u64, trailer: usize) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&77u64.to_ne_bytes());
        b.extend_from_slice(&lost.to_ne_bytes());
        for i in 0..trailer {
            b.extend_from_slice(&(0xdead_0000 + i as u64).to_ne_bytes());
        }
        header(PERF_RECORD_LOST, b)
    }

    /// A ring of `len` bytes (filled with 0xee) holding `bytes` from running position
    /// `tail` on; returns it with the head.
    fn ring_with(len: usize, tail: u64, bytes: &[u8]) -> (Vec<u8>, u64) {
        assert!(bytes.len() <= len);
        let mut ring = vec![0xee; len];
        for (i, &b) in bytes.iter().enumerate() {
            ring[(tail.wrapping_add(i as u64) % len as u64) as usize] = b;
        }
        (ring, tail.wrapping_add(bytes.len() as u64))
    }

    /// A sample with every field set, distinct per `i`.
    fn full_sample(i: u64) -> Sample {
        Sample {
            pid: 1000 + i as u32,
            tid: 2000 + i as u32,
            addr: 0x7f00_0000_0000 + i * 0x1040,
            ip: Some(0x40_0000 + i),
            time: Some(1_000_000 + i * 7),
            cpu: Some(i as u32 % 5),
            period: Some(1 + i),
            id: Some(900 + i),
            stream_id: Some(800 + i),
            weight: Some(30 + i),
            data_src: Some(0x1_0000 + i),
        }
    }

    /// `s` with only the fields of `st` kept.
    fn only(st: SampleType, s: Sample) -> Sample {
        let has = |t| st.contains(t);
        Sample {
            ip: s.ip.filter(|_| has(SampleType::IP)),
            time: s.time.filter(|_| has(SampleType::TIME)),
            cpu: s.cpu.filter(|_| has(SampleType::CPU)),
            period: s.period.filter(|_| has(SampleType::PERIOD)),
            id: s
                .id
                .filter(|_| has(SampleType::ID) || has(SampleType::IDENTIFIER)),
            stream_id: s.stream_id.filter(|_| has(SampleType::STREAM_ID)),
            weight: s.weight.filter(|_| has(SampleType::WEIGHT)),
            data_src: s.data_src.filter(|_| has(SampleType::DATA_SRC)),
            ..s
        }
    }

    /// Fails if a field is read at the wrong offset for some combination (then values
    /// land in the wrong fields), or a record is skipped or read twice.
    #[test]
    fn every_supported_sample_type_combination_parses_back() {
        let combos = [
            SampleType::TID | SampleType::ADDR,
            SampleType::TID | SampleType::TIME | SampleType::ADDR | SampleType::CPU,
            SampleType::IP | SampleType::TID | SampleType::ADDR | SampleType::DATA_SRC,
            EventSpec::page_faults().sample_type(),
            SampleType::TID
                | SampleType::TIME
                | SampleType::ADDR
                | SampleType::CPU
                | SampleType::WEIGHT
                | SampleType::DATA_SRC,
            SampleType(SampleType::SUPPORTED.0 & !SampleType::IDENTIFIER.0),
            SampleType::SUPPORTED,
        ];
        for st in combos {
            let want: Vec<Sample> = (0..5).map(|i| only(st, full_sample(i))).collect();
            let bytes: Vec<u8> = want.iter().flat_map(|s| encode_sample(st, s)).collect();
            let (ring, head) = ring_with(1024, 64, &bytes);
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            let c = parse_ring(&ring, 64, head, st, &mut scratch, &mut out).unwrap();
            assert_eq!(out, want, "sample_type {:#x}", st.0);
            assert_eq!(c.samples, 5);
            assert_eq!(c.bytes, bytes.len() as u64);
            assert_eq!(c.straddled, 0);
        }
    }

    /// Fails if a record that crosses the end of the ring is not reassembled (its tail
    /// would be read from beyond the end or from the filler bytes), including a header
    /// ending exactly at the end, or if positions are not taken modulo the ring.
    #[test]
    fn records_split_across_the_end_of_the_ring_are_reassembled() {
        let st = SampleType::TID | SampleType::TIME | SampleType::ADDR | SampleType::CPU;
        let want: Vec<Sample> = (0..6).map(|i| only(st, full_sample(i))).collect();
        let bytes: Vec<u8> = want.iter().flat_map(|s| encode_sample(st, s)).collect();
        assert_eq!(bytes.len(), 6 * 40);
        let len = 256;
        let mut straddled_somewhere = 0;
        // every 8-byte-aligned start, and running positions past several wraps
        for tail in (0..len as u64)
            .step_by(8)
            .chain([10 * 256 + 248, u64::MAX - 7])
        {
            // (from u64::MAX - 7 the running count itself wraps around)
            let (ring, head) = ring_with(len, tail, &bytes);
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            let c = parse_ring(&ring, tail, head, st, &mut scratch, &mut out)
                .unwrap_or_else(|e| panic!("tail {tail}: {e}"));
            assert_eq!(out, want, "tail {tail}");
            let crosses = (tail % len as u64) + bytes.len() as u64 > len as u64;
            // 240 bytes from an offset past 16 cross the end once, in one record unless
            // a record boundary falls exactly on it
            let boundary = (len as u64 - tail % len as u64).is_multiple_of(40);
            assert_eq!(c.straddled, u64::from(crosses && !boundary), "tail {tail}");
            straddled_somewhere += c.straddled;
        }
        assert!(straddled_somewhere > 20);
    }

    /// Fails if LOST records are not summed, if their sample_id trailer is parsed as a
    /// record, or if unknown record types stop the parse.
    #[test]
    fn lost_records_are_counted_and_other_records_skipped() {
        let st = SampleType::TID | SampleType::ADDR | SampleType::CPU;
        let s = |i| only(st, full_sample(i));
        let mut bytes = encode_sample(st, &s(0));
        bytes.extend(encode_lost(17, 2)); // sample_id_all: tid and cpu follow
        bytes.extend(encode_sample(st, &s(1)));
        bytes.extend(header(5, vec![0; 24])); // PERF_RECORD_THROTTLE
        bytes.extend(encode_lost(4, 0));
        bytes.extend(encode_sample(st, &s(2)));
        assert_eq!(bytes.len(), 192);
        let (ring, head) = ring_with(256, 240, &bytes);
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        let c = parse_ring(&ring, 240, head, st, &mut scratch, &mut out).unwrap();
        assert_eq!(out, vec![s(0), s(1), s(2)]);
        assert_eq!((c.samples, c.lost, c.lost_records, c.other), (3, 21, 2, 1));
        assert_eq!(c.straddled, 1, "the first sample crosses the end");
    }

    /// Fails if a malformed ring is parsed on (an endless loop on a zero size, reading
    /// past head) or an unparseable sample type is accepted.
    #[test]
    fn malformed_rings_and_unsupported_sample_types_are_errors() {
        let st = SampleType::TID | SampleType::ADDR;
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        let mut parse =
            |ring: &[u8], tail, head, st| parse_ring(ring, tail, head, st, &mut scratch, &mut out);
        let zero = header(PERF_RECORD_SAMPLE, vec![]);
        let mut z = zero.clone();
        z[6] = 0;
        z[7] = 0;
        let (ring, head) = ring_with(64, 0, &z);
        assert!(matches!(
            parse(&ring, 0, head, st),
            Err(SamplingError::Corrupt { .. })
        ));
        let rec = encode_sample(st, &only(st, full_sample(1)));
        let (ring, _) = ring_with(64, 0, &rec);
        assert!(
            matches!(parse(&ring, 0, 16, st), Err(SamplingError::Corrupt { .. })),
            "a record longer than what was written"
        );
        assert!(
            matches!(parse(&ring, 0, 65, st), Err(SamplingError::Corrupt { .. })),
            "head beyond a full ring"
        );
        let wide = st | SampleType::CPU;
        assert!(
            matches!(
                parse(&ring, 0, 24, wide),
                Err(SamplingError::Corrupt { .. })
            ),
            "a sample shorter than its type"
        );
        for bad in [
            SampleType::TID | SampleType::ADDR | SampleType(1 << 5), // CALLCHAIN
            SampleType::TID,
            SampleType::ADDR | SampleType::TIME,
        ] {
            assert!(matches!(
                parse(&ring, 0, 0, bad),
                Err(SamplingError::SampleType(_))
            ));
        }
        assert_eq!(parse(&ring, 5, 5, st).unwrap(), DrainCounts::default());
    }

    /// Fails if a remote-cache data source is missed or a local one taken for remote.
    #[test]
    fn remote_cache_hits_are_told_from_other_data_sources() {
        let lvl = |b: u64| b << 5;
        let snoop = |b: u64| b << 19;
        let na = 1 | lvl(1) | snoop(1) | 1 << 24 | 1 << 26 | 0xf << 33; // PERF_MEM_NA
        assert!(!is_remote_cache_hit(na));
        assert!(!is_remote_cache_hit(0));
        assert!(!is_remote_cache_hit(lvl(0x02 | 0x08)), "L1 hit");
        assert!(
            !is_remote_cache_hit(lvl(0x02 | 0x40) | snoop(0x04)),
            "L3 hit, clean snoop"
        );
        assert!(!is_remote_cache_hit(lvl(0x02 | 0x100)), "remote RAM");
        assert!(
            !is_remote_cache_hit(lvl(0x04 | 0x400)),
            "remote cache, a miss"
        );
        assert!(is_remote_cache_hit(lvl(0x02 | 0x400)), "REM_CCE1 hit");
        assert!(is_remote_cache_hit(lvl(0x02 | 0x800)), "REM_CCE2 hit");
        assert!(
            is_remote_cache_hit(lvl(0x02 | 0x40) | snoop(0x10)),
            "L3 hit, HITM"
        );
        assert!(
            is_remote_cache_hit(3 << 33 | 1 << 37),
            "remote L3 (lvl_num)"
        );
        assert!(is_remote_cache_hit(0xb << 33 | 1 << 37), "remote any cache");
        assert!(
            !is_remote_cache_hit(0xd << 33 | 1 << 37),
            "remote RAM (lvl_num)"
        );
        assert!(!is_remote_cache_hit(3 << 33), "local L3 (lvl_num)");
        assert!(is_remote_cache_hit(2 << 38), "snoopx PEER");
    }

    // ---- discovery ----

    /// A fresh empty directory for a fake sysfs tree.
    fn fake_root(name: &str) -> crate::testdir::TempTree {
        let d = crate::testdir::TempTree::new(&format!("sysfs-{name}"));
        std::fs::create_dir_all(d.join("software")).unwrap();
        std::fs::write(d.join("software/type"), "1\n").unwrap();
        d
    }

    /// Writes `text` to `root/rel`, creating directories.
    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// An Intel core PMU `pmu` with mem-loads and the usual formats.
    fn intel_pmu(root: &Path, pmu: &str, ty: u32) {
        put(root, &format!("{pmu}/type"), &format!("{ty}\n"));
        put(
            root,
            &format!("{pmu}/events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n",
        );
        put(root, &format!("{pmu}/format/event"), "config:0-7\n");
        put(root, &format!("{pmu}/format/umask"), "config:8-15\n");
        put(root, &format!("{pmu}/format/ldlat"), "config1:0-15\n");
    }

    /// Fails if the terms are not placed by the format files (ldlat must land in
    /// config1, as perf puts it) or the PMU's type is not read.
    #[test]
    fn intel_mem_loads_is_found_with_ldlat_in_config1() {
        let root = fake_root("intel");
        intel_pmu(&root, "cpu", 4);
        let ev = memory_sampling_events_at(&root).unwrap();
        assert_eq!(ev.len(), 1);
        let e = &ev[0];
        assert_eq!(
            (e.perf_type, e.config, e.config1, e.config2),
            (4, 0x1cd, 3, 0)
        );
        assert_eq!(e.name, "cpu/mem-loads/");
        assert_eq!((e.precise, e.data_src, e.user_only), (3, true, true));
        assert!(e
            .sample_type()
            .contains(SampleType::DATA_SRC | SampleType::ADDR));
        // hybrid: one per core type
        let root = fake_root("hybrid");
        intel_pmu(&root, "cpu_core", 4);
        intel_pmu(&root, "cpu_atom", 10);
        let ev = memory_sampling_events_at(&root).unwrap();
        let names: Vec<_> = ev.iter().map(|e| (e.name.as_str(), e.perf_type)).collect();
        assert_eq!(
            names,
            [("cpu_core/mem-loads/", 4), ("cpu_atom/mem-loads/", 10)]
        );
        // split ranges and bare flags
        let mut cfg = [0; 3];
        place("config:0-7,32-35", 0x5ab, &mut cfg).unwrap();
        place("config2:63", 1, &mut cfg).unwrap();
        assert_eq!(cfg, [0x5_0000_00ab, 0, 1 << 63]);
        assert!(place("config3:0-7", 1, &mut cfg).is_none());
        assert!(place("config:9-2", 1, &mut cfg).is_none());
        // an unknown term is an error naming the file
        put(&root, "cpu_core/events/mem-loads", "event=0xcd,frob=2\n");
        let err = memory_sampling_events_at(&root).unwrap_err().to_string();
        assert!(err.contains("cpu_core/format/frob"), "{err}");
    }

    /// Fails if ibs_op is not recognised or its period rules are not applied.
    #[test]
    fn amd_ibs_op_is_found_with_its_type_and_period_rules() {
        let root = fake_root("amd");
        put(&root, "cpu/type", "4\n"); // AMD's core PMU: no mem-loads
        put(&root, "ibs_op/type", "11\n");
        let ev = memory_sampling_events_at(&root).unwrap();
        assert_eq!(ev.len(), 1);
        let e = &ev[0];
        assert_eq!(
            (e.name.as_str(), e.perf_type, e.config),
            ("ibs_op//", 11, 0)
        );
        assert!(e.data_src && !e.user_only);
        assert_eq!(e.period_for(1), 0x90);
        assert_eq!(e.period_for(1000), 1008);
        assert_eq!(e.period_for(4096), 4096);
        assert_eq!(EventSpec::page_faults().period_for(0), 1);
        assert_eq!(EventSpec::page_faults().period_for(7), 7);
        put(&root, "ibs_op/type", "eleven\n");
        assert!(matches!(
            memory_sampling_events_at(&root),
            Err(DiscoveryError::Format { .. })
        ));
    }

    /// Fails if the message does not name exactly what is missing, or gives the VM
    /// reason where a CPU PMU does exist.
    #[test]
    fn without_either_event_the_error_names_what_is_missing() {
        let root = fake_root("none");
        let err = memory_sampling_events_at(&root).unwrap_err().to_string();
        let r = root.display();
        assert_eq!(
            err,
            format!("no precise memory-load event: {r}/cpu/events/mem-loads and {r}/ibs_op do not exist (no hardware PMU is exposed, typical in a VM)")
        );
        put(&root, "cpu/type", "4\n");
        let err = memory_sampling_events_at(&root).unwrap_err().to_string();
        assert!(
            err.contains("the CPU's PMU has no precise memory-load event"),
            "{err}"
        );
        // this host: either an event, or an error naming the real paths
        match memory_sampling_events() {
            Ok(ev) => assert!(!ev.is_empty()),
            Err(e) => {
                let msg = e.to_string();
                eprintln!("this host: {msg}");
                assert!(
                    msg.contains("/sys/bus/event_source/devices/cpu/events/mem-loads")
                        && msg.contains("/sys/bus/event_source/devices/ibs_op"),
                    "{msg}"
                );
            }
        }
    }

    // ---- real sampling on this host ----

    /// An anonymous private mapping of `pages` pages without transparent huge pages (so
    /// that each page faults on its own), unmapped on drop.
    struct Anon {
        /// The start.
        ptr: *mut u8,
        /// The length.
        len: usize,
    }

    impl Anon {
        /// Maps `pages` pages.
        fn new(pages: usize) -> Anon {
            let len = pages * page_size();
            // SAFETY: a fresh anonymous mapping; the result is checked.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(ptr, libc::MAP_FAILED);
            // SAFETY: advice on the mapping just made.
            let r = unsafe { libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE) };
            assert_eq!(r, 0, "madvise: {}", io::Error::last_os_error());
            Anon {
                ptr: ptr as *mut u8,
                len,
            }
        }

        /// Writes to byte `off` (one fault the first time its page is touched);
        /// returns its address.
        fn touch(&self, off: usize) -> u64 {
            assert!(off < self.len);
            // SAFETY: off is inside the mapping, which is readable and writable.
            unsafe { std::ptr::write_volatile(self.ptr.add(off), 1) };
            self.ptr as u64 + off as u64
        }
    }

    impl Drop for Anon {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`.
            unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
        }
    }

    /// Opens page-fault sampling on the calling thread, or `None` (with the reason
    /// printed) where perf_event_open itself is denied.
    fn open_faults(period: u64, pages: usize, st: SampleType) -> Option<SampledEvent> {
        let tid = crate::process::current_tid();
        match SampledEvent::open_with(tid, &EventSpec::page_faults(), period, pages, st) {
            Ok(e) => Some(e),
            Err(e @ SamplingError::Denied { .. }) => {
                eprintln!("skipped: {e}");
                None
            }
            Err(e) => panic!("page-fault sampling: {e}"),
        }
    }

    /// Every page touched once is one fault, sampled with period 1: each touched address
    /// must appear exactly once, with this thread's ids, and nothing may be lost in a
    /// ring with room for all. Fails if the data address is read from the wrong place
    /// (wrong offset in the record), if records are skipped or read twice, if the tail
    /// is not advanced (a second drain would repeat them), or if huge pages merge the
    /// faults.
    #[test]
    fn every_touched_page_is_sampled_exactly_once_with_its_address_and_thread() {
        const PAGES: usize = 256;
        let st = EventSpec::page_faults().sample_type();
        let Some(mut ev) = open_faults(1, 64, st) else {
            return;
        };
        let mem = Anon::new(PAGES);
        let ps = page_size();
        // a different offset in each page, so that the exact address is checked
        let touched: Vec<u64> = (0..PAGES)
            .map(|i| mem.touch(i * ps + (i * 24) % ps))
            .collect();
        let mut out = Vec::new();
        let c = ev.drain(&mut out).unwrap();
        let (pid, tid) = (std::process::id(), crate::process::current_tid() as u32);
        for (i, a) in touched.iter().enumerate() {
            let hits: Vec<&Sample> = out.iter().filter(|s| s.addr == *a).collect();
            assert_eq!(hits.len(), 1, "page {i} at {a:#x}: {hits:?}");
            assert_eq!((hits[0].pid, hits[0].tid), (pid, tid));
            assert!(hits[0].cpu.is_some() && hits[0].time.is_some());
        }
        assert_eq!(c.lost, 0);
        assert_eq!(c.samples as usize, out.len());
        let times: Vec<u64> = out.iter().map(|s| s.time.unwrap()).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "records in time order"
        );
        // the tail moved: nothing is read again
        let mut again = Vec::new();
        ev.drain(&mut again).unwrap();
        assert!(
            again.iter().all(|s| !touched.contains(&s.addr)),
            "{again:?}"
        );
    }

    /// The fields a real kernel writes line up with the parser's order: with every
    /// supported field on, a page fault's address, ids, period, weight (0) and data
    /// source (PERF_MEM_NA for software events) come out as the kernel set them. Fails
    /// if any field order in `parse_sample` differs from the kernel's.
    #[test]
    fn all_supported_fields_of_a_real_sample_line_up() {
        let Some(mut ev) = open_faults(1, 8, SampleType::SUPPORTED) else {
            return;
        };
        let id = ev.id().unwrap();
        let mem = Anon::new(4);
        let a = mem.touch(3 * page_size() + 40);
        let mut out = Vec::new();
        ev.drain(&mut out).unwrap();
        let s = out
            .iter()
            .find(|s| s.addr == a)
            .expect("the fault's sample");
        assert_eq!(s.tid, crate::process::current_tid() as u32);
        assert_eq!(s.pid, std::process::id());
        assert_eq!((s.id, s.stream_id, s.period), (Some(id), Some(id), Some(1)));
        assert_eq!(s.weight, Some(0));
        let na = 1 | 1 << 5 | 1 << 19 | 1 << 24 | 1 << 26 | 0xf << 33;
        assert_eq!(
            s.data_src,
            Some(na),
            "PERF_MEM_NA: {:#x}",
            s.data_src.unwrap()
        );
        assert!(s.ip.is_some_and(|ip| ip != 0) && s.time.is_some_and(|t| t > 0));
        // SAFETY: sysconf with a valid name.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) } as u32;
        assert!(s.cpu.is_some_and(|c| c < cpus));
    }

    /// After `set_period(4)`, one fault in four is sampled: 400 touched pages give 100
    /// samples (one more or less, depending on where the count stood). Fails if the
    /// ioctl is not made or ignored (400 samples).
    #[test]
    fn a_new_period_takes_effect_on_an_open_event() {
        let st = EventSpec::page_faults().sample_type();
        let Some(mut ev) = open_faults(1, 64, st) else {
            return;
        };
        ev.set_period(4).unwrap();
        assert_eq!(ev.period(), 4);
        let mem = Anon::new(400);
        let mut out = Vec::with_capacity(1000);
        ev.drain(&mut out).unwrap();
        out.clear();
        for i in 0..400 {
            mem.touch(i * page_size());
        }
        let c = ev.drain(&mut out).unwrap();
        let range = mem.ptr as u64..mem.ptr as u64 + mem.len as u64;
        let mine = out.iter().filter(|s| range.contains(&s.addr)).count();
        assert!((99..=101).contains(&mine), "{mine} of 400 faults sampled");
        assert_eq!(c.lost, 0);
    }

    /// A page-fault counter in the sampling event's group: counts exactly the faults
    /// the sampling event sees, while the group is enabled.
    fn group_counter(leader: &SampledEvent) -> OwnedFd {
        let attr = RawAttr {
            flags: perf::ATTR_DISABLED | perf::EXCLUDE_KERNEL | perf::EXCLUDE_HV,
            ..RawAttr::new(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS)
        };
        perf::open_event(&attr, leader.tid(), leader.as_raw_fd()).expect("group counter")
    }

    /// The counter's value.
    fn read_count(fd: &OwnedFd) -> u64 {
        let mut v = 0u64;
        // SAFETY: reads one u64 (read_format 0) into v.
        let n = unsafe { libc::read(fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
        assert_eq!(n, 8);
        v
    }

    /// ~2,000 faults through a one-page ring (about 100 records) drained mid-way and at
    /// the end: the ring overflows and wraps, records straddle its end. A counter in the
    /// same group counts the same faults over the same enabled window; every one of them
    /// must come out as a sample or inside a LOST record's count. The kernel writes a
    /// LOST record only with the next record that fits, so one more fault after the last
    /// drain flushes it. Fails if straddling records are misparsed (wrong addresses, a
    /// Corrupt error), if LOST counts are dropped or double-counted (the sum would
    /// differ from the counter), or if the tail is not released (everything after the
    /// first ring's worth would be lost).
    #[test]
    fn a_tiny_ring_wraps_and_samples_plus_lost_equal_the_faults() {
        const PAGES: usize = 2000;
        let st = EventSpec::page_faults().sample_type();
        let Some(mut ev) = open_faults(1, 1, st) else {
            return;
        };
        let ring = ev.ring_bytes();
        assert_eq!(ring, page_size());
        ev.disable(true).unwrap();
        let counter = group_counter(&ev);
        let mem = Anon::new(PAGES + 1);
        let ps = page_size();
        // room for every sample drained, allocated and touched before counting starts
        let mut out = vec![Sample::default(); 4 * PAGES];
        out.clear();
        ev.drain(&mut out).unwrap(); // anything from before the disable
        out.clear();
        let mut total = DrainCounts::default();
        ev.enable(true).unwrap();
        let half = PAGES / 2;
        let mut touched: Vec<u64> = Vec::with_capacity(PAGES + 1);
        for i in 0..half {
            touched.push(mem.touch(i * ps + 8));
        }
        let first = ev.drain(&mut out).unwrap();
        total.accumulate(&first);
        for i in half..PAGES {
            touched.push(mem.touch(i * ps + 8));
        }
        let second = ev.drain(&mut out).unwrap();
        total.accumulate(&second);
        touched.push(mem.touch(PAGES * ps + 8)); // flushes the pending LOST record
        ev.disable(true).unwrap();
        let last = ev.drain(&mut out).unwrap();
        total.accumulate(&last);
        let faults = read_count(&counter);
        eprintln!(
            "{faults} faults: {} samples, {} lost in {} LOST records; {} straddled; ring {ring} B; drains {first:?} {second:?} {last:?}",
            total.samples, total.lost, total.lost_records, total.straddled
        );
        assert!(faults > PAGES as u64, "{faults} faults counted");
        assert_eq!(total.samples + total.lost, faults);
        assert!(total.lost > 0, "the ring never overflowed");
        assert!(
            second.lost > 0 && last.lost > 0,
            "each phase's loss reported later"
        );
        assert!(total.bytes > 2 * ring as u64, "the ring wrapped");
        assert!(total.straddled > 0, "no record straddled the end");
        // the touched pages that were sampled: distinct, in touch order, exact addresses
        let mine: Vec<u64> = out
            .iter()
            .map(|s| s.addr)
            .filter(|a| (mem.ptr as u64..mem.ptr as u64 + mem.len as u64).contains(a))
            .collect();
        assert!(
            mine.iter().all(|a| touched.contains(a)),
            "an address never touched"
        );
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "out of order or repeated"
        );
        // the ring was empty when each phase began: its first fault was sampled, and a
        // ring's worth (40-byte records) of each phase
        assert_eq!(mine.first(), touched.first(), "phase 1's first fault");
        assert!(mine.contains(&touched[half]), "phase 2's first fault");
        assert!(mine.contains(touched.last().unwrap()), "the flushing fault");
        let per_ring = ring / 40;
        assert!(
            mine.len() >= 2 * per_ring * 3 / 4,
            "{} of the touches sampled",
            mine.len()
        );
    }

    /// Not a check: prints the cost of a sampled page fault on this host (period 1,
    /// against faults with no event). `cargo test -p cachesched-linux --lib -- --ignored
    /// --nocapture per_sample_cost`.
    #[test]
    #[ignore]
    fn per_sample_cost() {
        const PAGES: usize = 20_000;
        let ps = page_size();
        // (ns per fault, ns per sample drained)
        let run = |sampled: bool| {
            let (mut best, mut drain_best) = (f64::MAX, f64::MAX);
            for _ in 0..5 {
                let mut ev = sampled
                    .then(|| open_faults(1, 1024, EventSpec::page_faults().sample_type()))
                    .flatten();
                let mem = Anon::new(PAGES);
                let mut out = Vec::with_capacity(2 * PAGES);
                let t0 = Instant::now();
                for i in 0..PAGES {
                    mem.touch(i * ps);
                }
                best = best.min(t0.elapsed().as_secs_f64() * 1e9 / PAGES as f64);
                if let Some(ev) = ev.as_mut() {
                    let t1 = Instant::now();
                    let c = ev.drain(&mut out).unwrap();
                    let ns = t1.elapsed().as_secs_f64() * 1e9 / c.samples.max(1) as f64;
                    drain_best = drain_best.min(ns);
                }
            }
            (best, drain_best)
        };
        let ((plain, _), (sampled, drain)) = (run(false), run(true));
        eprintln!(
            "page fault: {plain:.0} ns plain, {sampled:.0} ns sampled: {:.0} ns per sample in the kernel; {drain:.0} ns per sample to drain and parse",
            sampled - plain
        );
    }
}
