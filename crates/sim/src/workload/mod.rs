//! Workload generators: each simulated thread is a deterministic stream of operations —
//! "run `gap` instructions, then access `addr`", "sleep", "exit" — drawn from its own
//! random stream, so what a thread does never depends on how it was scheduled.
//!
//! This module holds the composable locality model (regions with access weights and
//! patterns, memory intensity, write fraction, base CPI, code footprint, run/sleep
//! phases) and a few generic named profiles. Profiles emulating specific benchmarks
//! build on it ([`benchmarks`]); [`reuse`] holds the LRU stack behind reuse-distance
//! regions.

pub mod benchmarks;
pub mod published;
pub mod reuse;

use cachesched_core::rng::StreamRng;
use cachesched_core::{Nanos, SimRng};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One operation of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Execute `gap` non-memory instructions, then one memory instruction at `pc`
    /// accessing `addr`.
    Access {
        /// Non-memory instructions before the access.
        gap: u32,
        /// Data address.
        addr: u64,
        /// Store (true) or load.
        write: bool,
        /// Address of the memory instruction (for the instruction cache).
        pc: u64,
        /// The address comes from the previous dependent access's data (pointer
        /// chasing): the access cannot start before that data returns.
        dep: bool,
    },
    /// Block for this long (I/O, think time), then become runnable again.
    Sleep(Nanos),
    /// The thread is done.
    Exit,
}

/// A generator of one thread's operations.
pub trait Workload: Send {
    /// Work left until the run begins, done once before the first operation is
    /// fetched (a trace thread decodes its trace up to its start point); by default
    /// nothing.
    fn prepare(&mut self) {}

    /// The next operation.
    fn next_op(&mut self) -> Op;

    /// Appends up to `max` operations to `out`, stopping after an [`Op::Exit`] and
    /// wherever [`Workload::base_cpi`] changes, so one batch runs at the base CPI read
    /// just before it was filled. The engine fetches operations this way: a batch of
    /// calls costs one dynamic dispatch, and a thread's stream does not depend on
    /// scheduling, so generating ahead changes nothing.
    fn fill(&mut self, out: &mut Vec<Op>, max: usize) {
        for _ in 0..max {
            let op = self.next_op();
            out.push(op);
            if op == Op::Exit {
                break;
            }
        }
    }
    /// Cycles per instruction when every access hits the L1 on a single-issue in-order
    /// pipeline (≥ 1).
    fn base_cpi(&self) -> f64;

    /// Instructions per cycle the thread's dependences allow on an out-of-order core
    /// of unbounded width when every access hits the L1 (see
    /// [`LocalityModel::ilp`]).
    fn ilp(&self) -> f64 {
        DEFAULT_ILP
    }
}

/// Default [`Workload::ilp`]: SPEC CPU2006 integer programs run at CPI 0.31–0.37
/// (perlbench, which rarely misses) to 0.6–0.7 (gcc) on a 4-wide Skylake, misses and
/// branch mispredictions included (Navarro-Torres et al., PLOS ONE 14(8), 2019, Fig. 2
/// data), i.e. 1.5–3 instructions per cycle; 2 is the middle of that range. Profiles
/// keep it until a program's own figure is known.
pub const DEFAULT_ILP: f64 = 2.0;

/// Operations the engine fetches from a workload at a time (one dynamic call each).
pub const FETCH_BATCH: usize = 32;

/// Fetches operations from `w` as the engine does — [`Workload::fill`] with
/// [`FETCH_BATCH`] at a time — until at least `n` data accesses have been seen or the
/// thread exits, passing each access's address to `f`. Returns the accesses seen (a
/// whole last batch is counted). For benchmarks of the generators.
pub fn fetch_accesses(w: &mut dyn Workload, n: u64, mut f: impl FnMut(u64)) -> u64 {
    let mut buf = Vec::with_capacity(FETCH_BATCH);
    let mut seen = 0;
    while seen < n {
        buf.clear();
        w.fill(&mut buf, FETCH_BATCH);
        for op in &buf {
            match *op {
                Op::Access { addr, .. } => {
                    f(addr);
                    seen += 1;
                }
                Op::Sleep(_) => {}
                Op::Exit => return seen,
            }
        }
    }
    seen
}

/// How addresses are drawn within a region.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Pattern {
    /// Uniformly random 8-byte words.
    Random,
    /// A sequential scan with the given stride in bytes, wrapping at the end.
    Stream {
        /// Stride in bytes.
        stride: u64,
    },
    /// Pointer chasing: a fixed cyclic walk visiting every 64-byte line of the region
    /// once per cycle (LRU's worst case once the region exceeds the cache), consecutive
    /// lines about 0.62 of the region apart (no spatial locality from one access to
    /// the next).
    Chase,
    /// Reuse-distance driven: each access goes to the line at an LRU stack distance
    /// drawn from a geometric distribution with mean `mean_lines` (a new line when the
    /// draw exceeds the lines touched so far), so a fully associative LRU cache of C
    /// lines misses with probability (1 − p)^C, p = 1 / (mean_lines + 1), once warm.
    /// Exact; each access scans the stack back to that depth (see [`crate::workload::reuse`]), so
    /// it costs tens to hundreds of nanoseconds, growing with the mean: for long runs
    /// prefer graded random regions.
    Reuse {
        /// Mean stack distance in 64-byte lines.
        mean_lines: f64,
    },
}

/// The stride in lines of a [`Pattern::Chase`] walk over `n` lines: the integer
/// nearest n·(√5 − 1)/2 that is coprime to `n`, so that stepping by it modulo `n` is a
/// single cycle through all `n` lines in which consecutive lines lie about 0.62 of the
/// region apart (the golden ratio's Weyl sequence, the most evenly spread such walk).
fn chase_stride(n: u64) -> u64 {
    use cachesched_core::num::gcd;
    if n <= 1 {
        return 0;
    }
    let mut s = ((n as f64 * 0.618_033_988_749_894_9).round() as u64).clamp(1, n - 1);
    while gcd(s, n) != 1 {
        s += 1;
    }
    s
}

/// A memory region of a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    /// Size in KiB (at most 2^32 KiB).
    pub kb: u64,
    /// Relative probability that an access goes to this region.
    pub weight: f64,
    /// Address pattern.
    pub pattern: Pattern,
    /// Who shares the region (default: private to the thread).
    #[serde(default)]
    pub scope: Scope,
    /// Fraction of this region's accesses that are stores, overriding the model's
    /// [`LocalityModel::write_fraction`] (default: the model's). Re-touches (next-word
    /// and recent accesses) take the fraction of the region they re-touch. For data
    /// that is read by every operation and almost never written (a B-tree's upper
    /// levels), or written by nearly every one (a lock word, a counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_fraction: Option<f64>,
}

/// Which threads share a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// One copy per thread.
    #[default]
    Private,
    /// One copy per sharing group of the process (e.g. a scoreboard, a chat room, a
    /// warehouse).
    Group,
    /// One copy for the whole process.
    Process,
}

/// A composable locality model. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalityModel {
    /// Data regions.
    pub regions: Vec<Region>,
    /// Mean number of non-memory instructions between memory accesses (geometric
    /// distribution).
    pub gap_mean: f64,
    /// Fraction of accesses that are stores.
    #[serde(default)]
    pub write_fraction: f64,
    /// Cycles per instruction with a perfect L1 on a single-issue in-order pipeline
    /// (default 1).
    #[serde(default = "default_cpi")]
    pub base_cpi: f64,
    /// Instructions per cycle with a perfect L1 on an out-of-order core of unbounded
    /// width: what the program's dependences allow (default [`DEFAULT_ILP`]). An
    /// out-of-order core dispatches the thread at `min(issue width, ilp)`.
    #[serde(default = "default_ilp")]
    pub ilp: f64,
    /// Instruction footprint in KiB: the code the program executes (default 4).
    #[serde(default = "default_code")]
    pub code_kb: u64,
    /// How that code is executed (default `functions`: hot functions and loops, rare
    /// excursions; see [`CodeLayout`]).
    #[serde(default)]
    pub code_layout: CodeLayout,
    /// Fraction of data accesses that go to the thread's stack frames (locals, spills,
    /// saved registers): a private [`STACK_HOT_KB`] KiB region added to `regions`
    /// (default [`DEFAULT_STACK_FRACTION`]; 0 for none).
    #[serde(default = "default_stack_fraction")]
    pub stack_fraction: f64,
    /// Probability that an access goes to the word after the previous access (the next
    /// field of the same object, the next element of the same small array) instead of
    /// a fresh draw (default [`DEFAULT_SPATIAL`]; 0: every access drawn afresh).
    #[serde(default = "default_spatial")]
    pub spatial: f64,
    /// Probability that an access re-touches the word of one of the [`RECENT_DRAWS`]
    /// previous fresh draws (the same few objects and locals worked on over a stretch
    /// of code: short reuse distances) instead of a next-word access or a fresh draw
    /// (default [`DEFAULT_RECENT`]; 0: none; `spatial + recent` at most 0.95).
    #[serde(default = "default_recent")]
    pub recent: f64,
    /// Run this many milliseconds of CPU time between sleeps (default: never sleep).
    #[serde(default)]
    pub run_ms: Option<f64>,
    /// Sleep this long each time (default 1 ms when `run_ms` is set).
    #[serde(default)]
    pub sleep_ms: Option<f64>,
    /// Exit after this many instructions (default: run forever).
    #[serde(default)]
    pub instructions: Option<u64>,
}

fn default_cpi() -> f64 {
    1.0
}
fn default_ilp() -> f64 {
    DEFAULT_ILP
}
fn default_code() -> u64 {
    4
}
fn default_stack_fraction() -> f64 {
    DEFAULT_STACK_FRACTION
}
fn default_spatial() -> f64 {
    DEFAULT_SPATIAL
}
fn default_recent() -> f64 {
    DEFAULT_RECENT
}

/// How a thread executes its code footprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodeLayout {
    /// The footprint is functions of [`FUNCTION_BYTES`] bytes. The thread runs one
    /// function for a visit of geometrically distributed length (mean
    /// [`VISIT_INSTRUCTIONS`] instructions), walking its body in sequence and looping
    /// back at its end, then moves to another function drawn by a Zipf law of exponent
    /// 1 over the functions' popularity ranks (the k-th most popular is entered with
    /// probability ∝ 1/k), or returns to the caller (see `next_function`); ranks are
    /// scattered over the footprint. So a few functions hold most of the execution
    /// and the rest are rare excursions, and how often the L1I misses follows from the
    /// footprint and the cache. The exponent 1 is the one anchor a published
    /// per-program figure gives: 176.gcc, 256 KB of code here, then misses a 4 KB,
    /// 64-byte-line cache 16.5 times per 1,000 instructions, against 19 in H&P (6th ed.,
    /// §2.7, Fig. 2.29; the text's other reading is 55); an exponent of 1.5 gives 6.9,
    /// 2.2 gives 1.1.
    #[default]
    Functions,
    /// One loop over the whole footprint, line after line (base vectors and
    /// microkernels, whose point is to sweep a cache; a footprint larger than the L1I
    /// then misses on every line).
    Loop,
}

/// Bytes per function of [`CodeLayout::Functions`].
pub const FUNCTION_BYTES: u64 = 256;
/// Mean instructions per visit to a function in [`CodeLayout::Functions`].
pub const VISIT_INSTRUCTIONS: f64 = 100.0;
/// Size of the hot stack region (the frames of the current call chain) in KiB.
pub const STACK_HOT_KB: u64 = 1;
/// Default [`LocalityModel::stack_fraction`].
pub const DEFAULT_STACK_FRACTION: f64 = 0.3;
/// Default [`LocalityModel::spatial`].
pub const DEFAULT_SPATIAL: f64 = 0.4;
/// Default [`LocalityModel::recent`]: with the default stack and next-word accesses, a
/// program-like profile then misses a fully associative 256-byte (four-line) cache on
/// 0.37 of its data accesses, the median of six real programs traced on this project's
/// host (gzip 0.375, bzip2 0.285, xz 0.357, perl 0.420, sqlite3 0.435, cc1 0.360;
/// `docs/workloads.md`, "Short reuse").
pub const DEFAULT_RECENT: f64 = 0.33;
/// How many previous fresh draws a [`LocalityModel::recent`] access chooses among
/// (uniformly).
pub const RECENT_DRAWS: usize = 4;

/// Errors in a workload description.
#[derive(Debug, Error, PartialEq)]
pub enum WorkloadError {
    /// No such profile.
    #[error("unknown workload profile '{0}'; run `cachesched workloads` for the list")]
    UnknownProfile(String),
    /// A value is out of range.
    #[error("invalid workload: {0}")]
    Invalid(String),
}

impl LocalityModel {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |s: &str| Err(WorkloadError::Invalid(s.to_string()));
        if self.regions.is_empty() {
            return bad("a locality model needs at least one region");
        }
        if self
            .regions
            .iter()
            .any(|r| r.kb == 0 || r.kb > 1 << 32 || !(r.weight > 0.0))
        {
            return bad("every region needs 0 < kb <= 2^32 and weight > 0");
        }
        if self
            .regions
            .iter()
            .any(|r| matches!(r.pattern, Pattern::Stream { stride } if stride == 0))
        {
            return bad("a stream stride must be positive");
        }
        if self
            .regions
            .iter()
            .any(|r| matches!(r.pattern, Pattern::Reuse { .. }) && r.kb > 1 << 28)
        {
            return bad("a reuse region can be at most 2^28 KiB (256 GiB: 2^32 lines)");
        }
        if self.regions.iter().any(
            |r| matches!(r.pattern, Pattern::Reuse { mean_lines } if !(mean_lines >= 0.0 && mean_lines.is_finite())),
        ) {
            return bad("a reuse region's mean_lines must be finite and non-negative");
        }
        if !(self.gap_mean >= 0.0) || self.gap_mean > 1e6 {
            return bad("gap_mean must be between 0 and 1e6");
        }
        if self
            .regions
            .iter()
            .any(|r| r.write_fraction.is_some_and(|w| !(0.0..=1.0).contains(&w)))
        {
            return bad("a region's write_fraction must be within 0..=1");
        }
        if !(0.0..=1.0).contains(&self.write_fraction) {
            return bad("write_fraction must be within 0..=1");
        }
        if !(self.base_cpi >= 0.25) {
            return bad("base_cpi must be at least 0.25");
        }
        if !(self.ilp >= 0.25 && self.ilp <= 64.0) {
            return bad("ilp must be between 0.25 and 64");
        }
        if self.code_kb == 0 || self.code_kb > 1 << 20 {
            return bad("code_kb must be between 1 and 2^20 (1 GiB)");
        }
        if !(0.0..1.0).contains(&self.stack_fraction) {
            return bad("stack_fraction must be within 0..1 (0 included, 1 excluded)");
        }
        if !(0.0..=0.95).contains(&self.spatial) {
            return bad("spatial must be within 0..=0.95");
        }
        if !(0.0..=0.95).contains(&self.recent) || self.spatial + self.recent > 0.95 + 1e-9 {
            return bad("recent must be within 0..=0.95, and spatial + recent at most 0.95");
        }
        if self.run_ms.is_some_and(|r| !(r > 0.0)) || self.sleep_ms.is_some_and(|s| !(s >= 0.0)) {
            return bad("run_ms must be positive and sleep_ms non-negative");
        }
        Ok(())
    }

    /// Data accesses per 1,000 instructions: one access after each mean gap of
    /// `gap_mean` other instructions. A miss ratio times this is misses per 1,000
    /// instructions.
    pub fn accesses_per_ki(&self) -> f64 {
        1000.0 / (self.gap_mean + 1.0)
    }

    /// Total data footprint in bytes (the stack region included).
    pub fn footprint_bytes(&self) -> u64 {
        self.effective_regions().iter().map(|r| r.kb << 10).sum()
    }

    /// The regions a thread runs: `regions`, then the stack region when
    /// `stack_fraction` is positive, weighted so that it takes that fraction of the
    /// accesses.
    pub fn effective_regions(&self) -> Vec<Region> {
        let mut regions = self.regions.clone();
        if self.stack_fraction > 0.0 {
            let total: f64 = regions.iter().map(|r| r.weight).sum();
            regions.push(Region {
                kb: STACK_HOT_KB,
                weight: total * self.stack_fraction / (1.0 - self.stack_fraction),
                pattern: Pattern::Random,
                scope: Scope::Private,
                write_fraction: None,
            });
        }
        regions
    }
}

impl LocalityModel {
    /// One private region of `kb` KiB with `pattern`, `gap_mean` non-memory instructions
    /// between accesses, 20% stores, base CPI 1, 4 KB of code, no stack region and no
    /// next-word accesses (a pure pattern), never sleeping or exiting: the shape of the
    /// generic profiles.
    pub fn single(kb: u64, pattern: Pattern, gap_mean: f64) -> LocalityModel {
        LocalityModel {
            regions: vec![Region {
                kb,
                weight: 1.0,
                pattern,
                scope: Scope::Private,
                write_fraction: None,
            }],
            gap_mean,
            write_fraction: 0.2,
            base_cpi: 1.0,
            ilp: DEFAULT_ILP,
            code_kb: 4,
            code_layout: CodeLayout::Functions,
            stack_fraction: 0.0,
            spatial: 0.0,
            recent: 0.0,
            run_ms: None,
            sleep_ms: None,
            instructions: None,
        }
    }
}

/// Generic named profiles: `(name, description, model)`.
pub fn profiles() -> Vec<(&'static str, &'static str, LocalityModel)> {
    let one = LocalityModel::single;
    vec![
        (
            "compute",
            "4 KB random working set: L1-resident, CPU-bound",
            one(4, Pattern::Random, 4.0),
        ),
        (
            "small",
            "64 KB random working set: L2-resident",
            one(64, Pattern::Random, 2.0),
        ),
        (
            "medium",
            "256 KB random working set",
            one(256, Pattern::Random, 2.0),
        ),
        (
            "large",
            "1 MB random working set: cache-hungry",
            one(1024, Pattern::Random, 2.0),
        ),
        (
            "huge",
            "8 MB random working set: misses most caches",
            one(8 * 1024, Pattern::Random, 2.0),
        ),
        (
            "stream",
            "64 MB sequential scan, 8-byte stride",
            one(64 * 1024, Pattern::Stream { stride: 8 }, 2.0),
        ),
        (
            "hotcold",
            "80% of accesses to a 32 KB hot set, 20% to 4 MB",
            LocalityModel {
                regions: vec![
                    Region {
                        kb: 32,
                        weight: 0.8,
                        pattern: Pattern::Random,
                        scope: Scope::Private,
                        write_fraction: None,
                    },
                    Region {
                        kb: 4096,
                        weight: 0.2,
                        pattern: Pattern::Random,
                        scope: Scope::Private,
                        write_fraction: None,
                    },
                ],
                ..one(1, Pattern::Random, 2.0)
            },
        ),
        (
            "chase",
            "pointer chasing over 4 MB: one cyclic walk through every line",
            one(4096, Pattern::Chase, 2.0),
        ),
        (
            "reuse",
            "reuse-distance stream: geometric LRU stack distances, mean 2,048 lines (128 KB), \
             over 16 MB: an exponential miss-ratio curve",
            one(16 * 1024, Pattern::Reuse { mean_lines: 2048.0 }, 2.0),
        ),
        (
            "interferer",
            "cache-aggressive interference microkernel: 32 MB line-stride stream, half stores",
            LocalityModel {
                write_fraction: 0.5,
                ..one(32 * 1024, Pattern::Stream { stride: 64 }, 0.0)
            },
        ),
        (
            "bigcode",
            "1 MB instruction footprint, 16 KB data: instruction-cache bound",
            LocalityModel {
                code_kb: 1024,
                ..one(16, Pattern::Random, 3.0)
            },
        ),
    ]
}

/// Shared-data server workloads of the thread-clustering paper (Tam et al., EuroSys
/// 2007, §5): `(name, description, model, threads per sharing group)`. Their threads
/// form one process; thread *i* of *n* belongs to sharing group *i* mod ⌈n / t⌉, so
/// threads created one after another land in different groups (as connections and
/// warehouses are served in arrival order), and the grouping is the ground truth a
/// clustering is scored against. Sizes are the paper's where it gives them (≈25 MB per
/// warehouse); the rest are chosen to make the shared data the dominant reuse. The
/// application server and the database split their shared data by how a transaction or
/// a query walks it (B-tree levels, rows written by nearly every transaction, latches);
/// `docs/workloads.md` ("Server workloads") derives each weight and write fraction.
pub fn servers() -> Vec<(&'static str, &'static str, LocalityModel, u32)> {
    let r = |kb: u64, weight: f64, scope: Scope| Region {
        kb,
        weight,
        pattern: Pattern::Random,
        scope,
        write_fraction: None,
    };
    let rw = |kb: u64, weight: f64, scope: Scope, writes: f64| Region {
        write_fraction: Some(writes),
        ..r(kb, weight, scope)
    };
    let m = |regions: Vec<Region>, writes: f64| LocalityModel {
        regions,
        gap_mean: 3.0,
        write_fraction: writes,
        base_cpi: 1.0,
        ilp: DEFAULT_ILP,
        code_kb: 16,
        code_layout: CodeLayout::Functions,
        stack_fraction: DEFAULT_STACK_FRACTION,
        spatial: DEFAULT_SPATIAL,
        recent: DEFAULT_RECENT,
        run_ms: None,
        sleep_ms: None,
        instructions: None,
    };
    vec![
        (
            "scoreboard",
            "microbenchmark: groups of 4 threads update a 16 KB scoreboard; 2 MB private chunk each",
            m(vec![r(2048, 0.5, Scope::Private), r(16, 0.5, Scope::Group)], 0.3),
            4,
        ),
        (
            "chat",
            "chat server: rooms of 4 threads (2 connections x 2 threads) share 64 KB of messages",
            m(vec![r(32, 0.6, Scope::Private), r(64, 0.4, Scope::Group)], 0.25),
            4,
        ),
        (
            "appserver",
            "SPECjbb-like: 4 threads per ~25 MB warehouse (B-trees; warehouse and district rows updated by nearly every transaction), 256 KB private each",
            m(
                vec![
                    // the thread's transaction objects
                    r(256, 0.3, Scope::Private),
                    // warehouse and district rows, the insertion ends of the order,
                    // new-order and history trees: written by New-Order and Payment
                    rw(4, 0.01, Scope::Group, 0.3),
                    // roots and first internal levels of the warehouse's trees
                    rw(20, 0.26, Scope::Group, 0.0),
                    // second internal levels
                    rw(160, 0.13, Scope::Group, 0.0),
                    // leaves and records (stock and customer updates)
                    rw(25 * 1024, 0.30, Scope::Group, 0.1),
                ],
                0.2,
            ),
            4,
        ),
        (
            "database",
            "database: instances of 8 threads, each with a 16 MB buffer pool of B-tree indexes (latched and page-fixed on every lookup) (16 threads: two instances)",
            m(
                vec![
                    // the connection's own state: query, sort and result buffers
                    r(128, 0.4, Scope::Private),
                    // server-wide mutexes and counters, shared by both instances
                    rw(8, 0.02, Scope::Process, 0.5),
                    // the instance's index latches and the control blocks of its
                    // root pages: read-modify-written by every lookup
                    rw(4, 0.11, Scope::Group, 0.5),
                    // index root pages
                    rw(160, 0.16, Scope::Group, 0.0),
                    // leaf pages and rows (the bidding mix's updates)
                    rw(16 * 1024, 0.31, Scope::Group, 0.1),
                ],
                0.15,
            ),
            8,
        ),
    ]
}

/// A base vector (Doucette & Fedorova, WIOSCA 2007; the affinity paper's tool): a
/// loop with a configured cache footprint. `kind` is `bv0` (negligible footprint),
/// `bv-l1d` (data footprint `kb`), `bv-l1i` (instruction footprint `kb`, negligible
/// data) or `bv-l2` (data footprint `kb`, meant to fill a shared L2). The footprint is
/// swept line by line (code as one loop, no stack region, no next-word accesses), so
/// after one pass it is exactly resident (or displaced).
pub fn base_vector(kind: &str, kb: Option<u64>) -> Result<LocalityModel, WorkloadError> {
    let sweep = |data_kb: u64, code_kb: u64| LocalityModel {
        regions: vec![Region {
            kb: data_kb.max(1),
            weight: 1.0,
            pattern: Pattern::Stream { stride: 64 },
            scope: Scope::Private,
            write_fraction: None,
        }],
        gap_mean: 3.0,
        write_fraction: 0.3,
        base_cpi: 1.0,
        ilp: DEFAULT_ILP,
        code_kb: code_kb.max(1),
        code_layout: CodeLayout::Loop,
        stack_fraction: 0.0,
        spatial: 0.0,
        recent: 0.0,
        run_ms: None,
        sleep_ms: None,
        instructions: None,
    };
    Ok(match kind {
        "bv0" => sweep(kb.unwrap_or(1), 1),
        "bv-l1d" => sweep(kb.unwrap_or(32), 1),
        "bv-l1i" => sweep(1, kb.unwrap_or(32)),
        "bv-l2" => sweep(kb.unwrap_or(4096), 1),
        _ => return Err(WorkloadError::UnknownProfile(kind.to_string())),
    })
}

/// The base vectors: name and what each does with its default footprint (the
/// defaults of [`base_vector`]; `NAME=KiB` sets another).
pub const BASE_VECTORS: [(&str, &str); 4] = [
    (
        "bv0",
        "a loop over 1 KB: negligible footprint (high affinity)",
    ),
    (
        "bv-l1d",
        "sweeps 32 KB of data line by line (bv-l1d=KiB sets it): displaces the L1D",
    ),
    (
        "bv-l1i",
        "runs 32 KB of code as one loop (bv-l1i=KiB): displaces the L1I",
    ),
    (
        "bv-l2",
        "sweeps 4 MB of data (bv-l2=KiB): fills a shared L2 (low L2 retention)",
    ),
];

/// The named profile, benchmark profile ([`crate::workload::benchmarks`]), server workload or
/// base vector `name` (`bv-l2=2048` sets a base
/// vector's footprint in KiB).
pub fn profile(name: &str) -> Result<LocalityModel, WorkloadError> {
    let (base, kb) = match name.split_once('=') {
        Some((b, k)) => (
            b,
            Some(k.parse::<u64>().map_err(|_| {
                WorkloadError::Invalid(format!("'{name}': the footprint after '=' must be KiB"))
            })?),
        ),
        None => (name, None),
    };
    if BASE_VECTORS.iter().any(|(n, _)| *n == base) {
        return base_vector(base, kb);
    }
    if kb.is_some() {
        return Err(WorkloadError::Invalid(format!(
            "'{name}': only base vectors take a footprint"
        )));
    }
    profiles()
        .into_iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, m)| m)
        .or_else(|| benchmarks::benchmark(name).map(|b| b.model))
        .or_else(|| {
            servers()
                .into_iter()
                .find(|(n, ..)| *n == name)
                .map(|(_, _, m, _)| m)
        })
        .ok_or_else(|| WorkloadError::UnknownProfile(name.to_string()))
}

/// Threads per sharing group of server workload `name` (`None`: not a server).
pub fn server_group_size(name: &str) -> Option<u32> {
    servers()
        .into_iter()
        .find(|(n, ..)| *n == name)
        .map(|(.., t)| t)
}

/// A thread running a [`LocalityModel`].
#[derive(Debug, Clone)]
pub struct LocalityThread {
    model: LocalityModel,
    /// What the per-access hot path reads.
    tables: Tables,
    /// What the hot path updates on every access (kept in registers while a batch is
    /// generated, see [`Workload::fill`]).
    cur: Cursor,
    /// Per region: the position of a stream or chase, lines handed out by a reuse
    /// region.
    cursors: Vec<u64>,
    /// LRU stacks of `Pattern::Reuse` regions.
    stacks: Vec<Option<Box<reuse::ReuseStack>>>,
    /// What `cur.until` started from at the last check.
    period: u64,
    /// Instructions left before the thread exits (`u64::MAX`: never).
    exit_left: u64,
    /// Instructions left in the current run burst (`u64::MAX`: never sleeps).
    run_left: u64,
    /// Instructions per run burst at the base CPI (`u64::MAX`: never sleeps).
    run_instr: u64,
}

/// The read-only part of a [`LocalityThread`] that every access consults.
#[derive(Debug, Clone)]
struct Tables {
    /// Per region: base address, size in bytes, and the pattern, flattened for the hot
    /// path.
    rt: Vec<RegionRt>,
    /// Cumulative region weights scaled to 2^16 (region choice from 16 random bits).
    cum_weights: Vec<u32>,
    /// Per 1/256 bucket of the 16-bit region draw, the region at its bottom and top:
    /// where they agree the region is known without a search.
    region_table: Box<[(u8, u8); 256]>,
    /// Per 1/1024 bucket of the 53-bit uniform draw: the smallest gap `lo` in it (high
    /// bits) and, below them, the draw within the bucket where the gap drops from
    /// `lo + 1` to `lo`, so that inversion stays exact without a logarithm;
    /// [`GAP_EXACT`] where the bucket spans more than two gaps. 8 KB, so it stays in
    /// the host's L1 cache.
    gap_table: Box<[u64; GAP_BUCKETS]>,
    /// 1 / ln(1 − p) of the geometric gap distribution (p = 1 / (gap_mean + 1)).
    inv_ln_q: f64,
    /// Some region is a simple stream (see [`RegionRt::simple`]).
    streams: bool,
    /// Address of the code.
    code_base: u64,
    /// Functions in the code ([`CodeLayout::Functions`]; 1 for a loop).
    functions: u64,
    /// Bytes per function (the whole footprint for a loop).
    function_bytes: u64,
    /// Stride that scatters popularity ranks over the functions (a [`chase_stride`]).
    function_stride: u64,
    /// ln(functions + 1), for the Zipf draw of the next function.
    ln_functions: f64,
    /// [`LocalityModel::spatial`] scaled to 2^11 (the low bits of the gap draw).
    spatial_threshold: u64,
    /// `spatial + recent` scaled the same way: draws between the two thresholds are
    /// re-touches of a recent fresh draw.
    recent_threshold: u64,
}

/// The state every access advances.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    rng: StreamRng,
    /// Offset of the next instruction within the code.
    pc: u64,
    /// Offset of the function running (0 for a loop).
    function: u64,
    /// Offset of the function that called it, plus one (0: none remembered).
    caller: u64,
    /// Instructions left in the visit to that function (`u64::MAX` for a loop).
    visit_left: u64,
    /// Address of the previous data access (the base of a next-word access).
    last: u64,
    /// The write threshold of the region of `last` (see [`RegionRt::write_threshold`]).
    last_write: u32,
    /// The addresses of the last [`RECENT_DRAWS`] fresh draws (a ring).
    recent: [u64; RECENT_DRAWS],
    /// The write thresholds of their regions.
    recent_write: [u32; RECENT_DRAWS],
    /// Where the next fresh draw goes in `recent`.
    recent_pos: usize,
    /// Instructions left before the next exit or sleep check (0: check now); the hot
    /// path only counts this down.
    until: u64,
}

/// A region as the hot path sees it.
#[derive(Debug, Clone, Copy)]
struct RegionRt {
    base: u64,
    size: u64,
    pattern: Pattern,
    /// `pattern` is `Pattern::Random`.
    random: bool,
    /// Random, chase, or a stream with a stride below the size: the hot path computes
    /// the offset without a branch (a random region's cursor stays 0).
    simple: bool,
    /// Bytes a simple stream or chase advances per access (0 for a random region).
    stride: u64,
    /// 1 / ln(1 − p) for `Pattern::Reuse`.
    inv_ln: f64,
    /// The region's write fraction scaled to 2^16 (the model's unless the region sets
    /// its own).
    write_threshold: u32,
}

/// A store fraction scaled to 2^16: an access is a store when 16 random bits fall below
/// it.
fn write_threshold(fraction: f64) -> u32 {
    (fraction * 65536.0).round() as u32
}

/// `v mod m` for a `v` usually below `2m`: a subtraction instead of a division on the
/// hot path.
#[inline(always)]
fn wrap(v: u64, m: u64) -> u64 {
    if v < m {
        v
    } else if v < 2 * m {
        v - m
    } else {
        v % m
    }
}

/// log2 of the buckets of the gap lookup table.
const GAP_BUCKET_BITS: u32 = 10;
/// Buckets of the gap lookup table.
const GAP_BUCKETS: usize = 1 << GAP_BUCKET_BITS;
/// Bits of the 53-bit draw within a bucket of the gap table.
const GAP_SPLIT_BITS: u32 = 53 - GAP_BUCKET_BITS;
/// Mask of the draw within a bucket.
const GAP_SPLIT_MASK: u64 = (1 << GAP_SPLIT_BITS) - 1;
/// A gap table entry meaning "compute the logarithm".
const GAP_EXACT: u64 = u64::MAX;

/// The geometric gap for the 53-bit uniform draw `x` (u = x / 2^53) by inversion:
/// ⌊ln u / ln q⌋, the quotient being non-negative, capped at 10^6.
#[inline]
fn gap_of(x: u64, inv_ln_q: f64) -> u64 {
    let u = (x as f64 * (1.0 / (1u64 << 53) as f64)).max(1e-300);
    (u.ln() * inv_ln_q).min(1e6) as u64
}

/// Bytes of virtual address space between processes. Within a process:
/// `[0, 2^40)` process-shared regions, `[2^40, 2^42)` sharing groups (8 GiB each),
/// `[2^42, 2^44)` threads' private regions and code (8 GiB each).
const PROCESS_SPAN: u64 = 1 << 44;
/// Bytes of address space per sharing group and per thread.
const AREA_SPAN: u64 = 1 << 33;
/// Sharing groups per process.
pub const MAX_GROUPS: u32 = 256;
/// Threads per process.
pub const MAX_THREADS_PER_PROCESS: u32 = 512;

impl LocalityThread {
    /// Thread number `index` (within process `process`) running `model`, drawing from
    /// `rng`, in sharing group 0. See [`LocalityThread::in_group`].
    pub fn new(model: LocalityModel, process: u32, index: u32, rng: SimRng) -> LocalityThread {
        Self::in_group(model, process, index, 0, rng)
    }

    /// Thread number `index` of process `process` in sharing group `group`. Private
    /// regions of different threads never overlap; group regions coincide for the
    /// threads of one group, process regions for all threads of the process.
    /// (`index` < [`MAX_THREADS_PER_PROCESS`], `group` < [`MAX_GROUPS`]; the model
    /// validated, so each scope's regions fit in 8 GiB.)
    pub fn in_group(
        model: LocalityModel,
        process: u32,
        index: u32,
        group: u32,
        mut rng: SimRng,
    ) -> LocalityThread {
        let proc_base = (process as u64 + 1) * PROCESS_SPAN;
        let thread_base =
            proc_base + (1 << 42) + (index % MAX_THREADS_PER_PROCESS) as u64 * AREA_SPAN;
        let group_base = proc_base + (1 << 40) + (group % MAX_GROUPS) as u64 * AREA_SPAN;
        let mut offs = [0u64; 3];
        let regions = model.effective_regions();
        let rt: Vec<RegionRt> = regions
            .iter()
            .map(|r| {
                let size = r.kb << 10;
                let (base, k) = match r.scope {
                    Scope::Private => (thread_base, 0),
                    Scope::Group => (group_base, 1),
                    Scope::Process => (proc_base, 2),
                };
                let base = base + offs[k];
                offs[k] += size.next_multiple_of(1 << 20);
                RegionRt {
                    base,
                    size,
                    pattern: r.pattern,
                    random: r.pattern == Pattern::Random,
                    simple: match r.pattern {
                        Pattern::Random | Pattern::Chase => true,
                        Pattern::Stream { stride } => stride < size,
                        Pattern::Reuse { .. } => false,
                    },
                    stride: match r.pattern {
                        Pattern::Stream { stride } if stride < size => stride,
                        Pattern::Chase => chase_stride((size / 64).max(1)) * 64,
                        _ => 0,
                    },
                    inv_ln: match r.pattern {
                        Pattern::Reuse { mean_lines } => {
                            1.0 / (1.0 - 1.0 / (mean_lines + 1.0)).ln()
                        }
                        _ => 0.0,
                    },
                    write_threshold: write_threshold(
                        r.write_fraction.unwrap_or(model.write_fraction),
                    ),
                }
            })
            .collect();
        let total: f64 = regions.iter().map(|r| r.weight).sum();
        let mut acc = 0.0;
        let cum_weights: Vec<u32> = regions
            .iter()
            .map(|r| {
                acc += r.weight / total;
                (acc * 65536.0).round() as u32
            })
            .collect();
        let region_table: Vec<(u8, u8)> = (0..256u32)
            .map(|b| {
                let at = |pick: u32| {
                    cum_weights
                        .iter()
                        .position(|&c| pick < c)
                        .unwrap_or(cum_weights.len() - 1)
                        .min(255) as u8
                };
                if cum_weights.len() > 255 {
                    (0, 1) // never equal: search
                } else {
                    (at(b << 8), at((b << 8) | 0xff))
                }
            })
            .collect();
        let geo_p = 1.0 / (model.gap_mean + 1.0);
        let inv_ln_q = 1.0 / (1.0 - geo_p).ln();
        let gap_table: Vec<u64> = (0..GAP_BUCKETS as u64)
            .map(|i| {
                // draws x in [first, last] (53 bits) fall into bucket i; the gap falls
                // as x grows
                let first = i << GAP_SPLIT_BITS;
                let last = first + GAP_SPLIT_MASK;
                let (lo, hi) = (gap_of(last, inv_ln_q), gap_of(first, inv_ln_q));
                if hi > lo + 1 || lo >= GAP_EXACT >> GAP_SPLIT_BITS {
                    return GAP_EXACT;
                }
                // the first draw of the bucket whose gap is `lo` (binary search)
                let (mut a, mut b) = (first, last);
                while a < b {
                    let mid = a + (b - a) / 2;
                    if gap_of(mid, inv_ln_q) == lo {
                        b = mid;
                    } else {
                        a = mid + 1;
                    }
                }
                (lo << GAP_SPLIT_BITS) | (a - first)
            })
            .collect();
        let code = model.code_kb << 10;
        let (functions, function_bytes) = match model.code_layout {
            CodeLayout::Functions => ((code / FUNCTION_BYTES).max(1), FUNCTION_BYTES.min(code)),
            CodeLayout::Loop => (1, code),
        };
        let first_base = rt[0].base;
        let first_write = rt[0].write_threshold;
        let tables = Tables {
            streams: rt.iter().any(|r| r.simple && !r.random),
            rt,
            cum_weights,
            region_table: region_table.try_into().expect("256 buckets"),
            gap_table: gap_table.try_into().expect("GAP_BUCKETS buckets"),
            inv_ln_q,
            code_base: thread_base + AREA_SPAN - code - 4096,
            functions,
            function_bytes,
            function_stride: chase_stride(functions),
            ln_functions: ((functions + 1) as f64).ln(),
            spatial_threshold: (model.spatial * 2048.0).round() as u64,
            recent_threshold: ((model.spatial + model.recent) * 2048.0).round() as u64,
        };
        // run bursts are CPU time at 1 GHz and the base CPI; exact time is the kernel's
        let run_instr = model
            .run_ms
            .map(|r| ((r * 1e6 / model.base_cpi).round() as u64).max(1))
            .unwrap_or(u64::MAX);
        let exit_left = model.instructions.unwrap_or(u64::MAX);
        let until = exit_left.min(run_instr);
        let mut cur = Cursor {
            rng: StreamRng::from_rng(&mut rng),
            pc: 0,
            function: 0,
            caller: 0,
            visit_left: u64::MAX,
            last: first_base,
            last_write: first_write,
            recent: [first_base; RECENT_DRAWS],
            recent_write: [first_write; RECENT_DRAWS],
            recent_pos: 0,
            until,
        };
        if model.code_layout == CodeLayout::Functions {
            tables.next_function(&mut cur);
        }
        LocalityThread {
            tables,
            cur,
            cursors: vec![0; regions.len()],
            stacks: regions
                .iter()
                .map(|r| {
                    matches!(r.pattern, Pattern::Reuse { .. })
                        .then(|| Box::new(reuse::ReuseStack::new()))
                })
                .collect(),
            period: until,
            exit_left,
            run_left: run_instr,
            run_instr,
            model,
        }
    }

    /// Feeds the thread's next `n` data accesses (address, store) to `f`, skipping
    /// sleeps; stops early if the thread exits. Returns how many were fed.
    pub fn feed_accesses(&mut self, n: u64, mut f: impl FnMut(u64, bool)) -> u64 {
        let mut fed = 0;
        while fed < n {
            match self.next_op() {
                Op::Access { addr, write, .. } => {
                    f(addr, write);
                    fed += 1;
                }
                Op::Sleep(_) => {}
                Op::Exit => break,
            }
        }
        fed
    }

    /// At the end of a counted-down period: [`Op::Exit`] once the instruction limit is
    /// reached, [`Op::Sleep`] at the end of a run burst (and a new burst begins), `None`
    /// when neither is due yet (the next period is counted down).
    #[cold]
    fn exit_or_sleep(&mut self) -> Option<Op> {
        let done = std::mem::take(&mut self.period);
        self.exit_left -= done.min(self.exit_left);
        self.run_left -= done.min(self.run_left);
        if self.exit_left == 0 {
            return Some(Op::Exit);
        }
        let op = (self.run_left == 0).then(|| {
            self.run_left = self.run_instr;
            Op::Sleep(Nanos((self.model.sleep_ms.unwrap_or(1.0) * 1e6) as u64))
        });
        self.cur.until = self.exit_left.min(self.run_left);
        self.period = self.cur.until;
        op
    }
}

/// The offset of a uniformly random 8-byte word in a region of `size` bytes, chosen by
/// the high 32 bits of `bits` (multiply-shift).
#[inline(always)]
fn random_offset(bits: u64, size: u64) -> u64 {
    (((bits >> 32) * (size >> 3)) >> 32) << 3
}

/// The offset of the next access to region `reg` for any pattern (the hot path takes
/// simple regions itself, see [`RegionRt::simple`]); `cursor` and `stack` are the
/// region's.
#[inline(always)]
fn patterned_offset(
    reg: &RegionRt,
    cursor: &mut u64,
    stack: &mut Option<Box<reuse::ReuseStack>>,
    bits: u64,
) -> u64 {
    let size = reg.size;
    let o = *cursor;
    match reg.pattern {
        Pattern::Random => random_offset(bits, size),
        Pattern::Stream { stride } => {
            *cursor = wrap(o + stride, size);
            o
        }
        Pattern::Chase => {
            *cursor = wrap(o + reg.stride, size);
            o
        }
        Pattern::Reuse { .. } => reuse_offset(reg, cursor, stack, bits),
    }
}

/// The offset of the next access to a [`Pattern::Reuse`] region: out of line, as it
/// costs far more than the call.
#[inline(never)]
fn reuse_offset(
    reg: &RegionRt,
    cursor: &mut u64,
    stack: &mut Option<Box<reuse::ReuseStack>>,
    bits: u64,
) -> u64 {
    let lines = (reg.size / 64).max(1);
    let u = ((bits >> 32) as f64 + 0.5) / 4294967296.0;
    let d = (u.ln() * reg.inv_ln) as u64;
    let stack = stack.as_mut().expect("reuse regions have a stack");
    let line = match stack.take(d) {
        Some(l) => l,
        None if *cursor < lines => {
            // deeper than the lines used so far: a new line
            *cursor += 1;
            stack.push(*cursor - 1);
            *cursor - 1
        }
        None => stack
            .take(d % stack.distinct())
            .expect("a full region's stack is not empty"),
    };
    line * 64
}

impl Tables {
    /// The geometric number of non-memory instructions (failures before success, mean
    /// `gap_mean`) for the 53-bit uniform draw `x`, by inversion: the quotient is
    /// non-negative, so truncation is floor. The table answers whenever the bucket of the
    /// draw spans at most two gaps.
    #[inline(always)]
    fn gap_for(&self, x: u64) -> u32 {
        let e = self.gap_table[(x >> GAP_SPLIT_BITS) as usize];
        if e != GAP_EXACT {
            return ((e >> GAP_SPLIT_BITS) + ((x & GAP_SPLIT_MASK) < (e & GAP_SPLIT_MASK)) as u64)
                as u32;
        }
        gap_of(x, self.inv_ln_q) as u32
    }

    /// The next access; `cursors` and `stacks` are the thread's, per region. `STREAMS`
    /// false: no region is a simple stream, so a simple region is a random one; `ONE`:
    /// the model has one region.
    #[inline(always)]
    fn access<const STREAMS: bool, const ONE: bool>(
        &self,
        cur: &mut Cursor,
        cursors: &mut [u64],
        stacks: &mut [Option<Box<reuse::ReuseStack>>],
    ) -> Op {
        // one draw gives the gap (high 53 bits) and whether this is a next-word access
        // (low 11 bits)
        let g = cur.rng.next_u64();
        let gap = self.gap_for(g >> 11);
        // one draw decides region (16 bits), store or load (16 bits) and the word
        // within a random region (32 bits, multiply-shift)
        let bits = cur.rng.next_u64();
        let store_draw = ((bits >> 16) & 0xffff) as u32;
        let n = gap as u64 + 1;
        self.advance_pc(cur, n);
        cur.until = cur.until.saturating_sub(n);
        let pc = self.code_base + cur.pc;
        let u = g & 0x7ff;
        if u < self.recent_threshold {
            if u < self.spatial_threshold {
                // the next word of the object last accessed
                cur.last += 8;
            } else {
                // a word of one of the last few objects drawn (the top bits of `bits`
                // are otherwise the word within a random region, unused here)
                let k = (bits >> 62) as usize % RECENT_DRAWS;
                cur.last = cur.recent[k];
                cur.last_write = cur.recent_write[k];
            }
            return Op::Access {
                gap,
                addr: cur.last,
                write: store_draw < cur.last_write,
                pc,
                dep: false,
            };
        }
        let pick = (bits & 0xffff) as u32;
        let (lo, hi) = self.region_table[(pick >> 8) as usize];
        let r = if ONE {
            0
        } else if lo == hi {
            lo as usize
        } else {
            self.cum_weights
                .iter()
                .position(|&c| pick < c)
                .unwrap_or(self.cum_weights.len() - 1)
        };
        let reg = &self.rt[r];
        let off = if !STREAMS && reg.random {
            random_offset(bits, reg.size)
        } else if STREAMS && reg.simple {
            // both candidates, then a select: regions of different patterns interleave
            // at random, so a branch on the pattern would be mispredicted often
            let random = random_offset(bits, reg.size);
            let pos = cursors[r];
            let next = pos + reg.stride;
            cursors[r] = if next >= reg.size {
                next - reg.size
            } else {
                next
            };
            if reg.random {
                random
            } else {
                pos
            }
        } else {
            patterned_offset(reg, &mut cursors[r], &mut stacks[r], bits)
        };
        cur.last = reg.base + off;
        cur.last_write = reg.write_threshold;
        cur.recent[cur.recent_pos] = cur.last;
        cur.recent_write[cur.recent_pos] = reg.write_threshold;
        cur.recent_pos = (cur.recent_pos + 1) % RECENT_DRAWS;
        Op::Access {
            gap,
            addr: cur.last,
            write: store_draw < reg.write_threshold,
            pc,
            dep: reg.pattern == Pattern::Chase,
        }
    }

    /// Moves the pc over `n` instructions: on through the running function, looping
    /// back at its end, and to the next function when the visit is over.
    #[inline(always)]
    fn advance_pc(&self, cur: &mut Cursor, n: u64) {
        let within = cur.pc - cur.function + 4 * n;
        cur.pc = cur.function + wrap(within, self.function_bytes);
        if n >= cur.visit_left {
            self.next_function(cur);
        } else {
            cur.visit_left -= n;
        }
    }

    /// Starts a visit to the next function: a return to the caller with probability
    /// 1/2 when one is remembered (every call has its return; one level is kept), else
    /// a call to a function drawn by popularity rank (Zipf, exponent 1: rank
    /// ⌊(F + 1)^u⌋ − 1 for uniform u, so rank k comes with probability
    /// ln((k + 2) / (k + 1)) / ln(F + 1) ≈ 1 / ((k + 1.5) ln(F + 1))), the rank
    /// scattered over the footprint. The visit lasts a geometric number of instructions.
    #[cold]
    fn next_function(&self, cur: &mut Cursor) {
        let x = cur.rng.next_u64();
        if cur.caller != 0 && x & 1 == 1 {
            cur.function = cur.caller - 1;
            cur.caller = 0;
        } else {
            let u = (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            let rank = ((u * self.ln_functions).exp() as u64)
                .saturating_sub(1)
                .min(self.functions - 1);
            cur.caller = cur.function + 1;
            cur.function = (rank * self.function_stride) % self.functions * self.function_bytes;
        }
        cur.pc = cur.function;
        let v = (cur.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        cur.visit_left = ((-(1.0 - v).ln() * VISIT_INSTRUCTIONS) as u64).max(1);
    }
}

impl Workload for LocalityThread {
    fn next_op(&mut self) -> Op {
        if self.cur.until == 0 {
            if let Some(op) = self.exit_or_sleep() {
                return op;
            }
        }
        self.tables
            .access::<true, false>(&mut self.cur, &mut self.cursors, &mut self.stacks)
    }

    fn fill(&mut self, out: &mut Vec<Op>, max: usize) {
        out.reserve(max);
        let end = out.len() + max;
        while out.len() < end {
            if self.cur.until == 0 {
                if let Some(op) = self.exit_or_sleep() {
                    out.push(op);
                    if op == Op::Exit {
                        return;
                    }
                    continue;
                }
            }
            // the cursor in a local, so that it stays in registers: stores into `out`
            // could otherwise alias it and force a reload after every access
            let mut cur = self.cur;
            let (tables, cursors, stacks) = (&self.tables, &mut self.cursors, &mut self.stacks);
            // a loop per kind of model, so that the hot path tests nothing it knows
            macro_rules! run {
                ($streams:literal, $one:literal) => {
                    while out.len() < end && cur.until > 0 {
                        out.push(tables.access::<$streams, $one>(&mut cur, cursors, stacks));
                    }
                };
            }
            match (tables.streams, tables.rt.len() == 1) {
                (true, true) => run!(true, true),
                (true, false) => run!(true, false),
                (false, true) => run!(false, true),
                (false, false) => run!(false, false),
            }
            self.cur = cur;
        }
    }

    fn base_cpi(&self) -> f64 {
        self.model.base_cpi
    }

    fn ilp(&self) -> f64 {
        self.model.ilp
    }
}

/// A thread that switches between locality models: phase *k* runs for its instruction
/// count, then the next begins; after the last, the first again. All phases share the
/// thread's address ranges (region *i* of every phase is the same memory), as a program
/// moving between algorithms over its data would.
pub struct PhasedThread {
    phases: Vec<(LocalityThread, u64)>,
    current: usize,
    left: u64,
}

impl PhasedThread {
    /// Phases `(model, instructions)` of thread `index` of `process` in `group`.
    pub fn new(
        phases: &[(LocalityModel, u64)],
        process: u32,
        index: u32,
        group: u32,
        rng: &SimRng,
    ) -> PhasedThread {
        let phases: Vec<(LocalityThread, u64)> = phases
            .iter()
            .enumerate()
            .map(|(k, (m, n))| {
                (
                    LocalityThread::in_group(m.clone(), process, index, group, rng.fork(k as u64)),
                    (*n).max(1),
                )
            })
            .collect();
        let left = phases[0].1;
        PhasedThread {
            phases,
            current: 0,
            left,
        }
    }

    /// The phase running now.
    pub fn phase(&self) -> usize {
        self.current
    }
}

impl Workload for PhasedThread {
    fn next_op(&mut self) -> Op {
        let op = self.phases[self.current].0.next_op();
        if let Op::Access { gap, .. } = op {
            let n = gap as u64 + 1;
            if n >= self.left {
                self.current = (self.current + 1) % self.phases.len();
                self.left = self.phases[self.current].1;
            } else {
                self.left -= n;
            }
        }
        op
    }

    fn fill(&mut self, out: &mut Vec<Op>, max: usize) {
        let phase = self.current;
        for _ in 0..max {
            let op = self.next_op();
            out.push(op);
            if op == Op::Exit || self.current != phase {
                break;
            }
        }
    }

    fn base_cpi(&self) -> f64 {
        self.phases[self.current].0.base_cpi()
    }

    fn ilp(&self) -> f64 {
        self.phases[self.current].0.ilp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_within_regions() {
        let m = profile("hotcold").unwrap();
        let mut a = LocalityThread::new(m.clone(), 0, 0, SimRng::new(1));
        let mut b = LocalityThread::new(m.clone(), 0, 0, SimRng::new(1));
        let mut hot = 0;
        for _ in 0..10_000 {
            let (x, y) = (a.next_op(), b.next_op());
            assert_eq!(x, y);
            if let Op::Access { addr, .. } = x {
                let base = a.tables.rt[0].base;
                if addr >= base && addr < base + (32 << 10) {
                    hot += 1;
                }
            }
        }
        assert!((7_500..8_500).contains(&hot), "{hot}");
    }

    #[test]
    fn batches_are_the_same_stream_as_single_operations() {
        // every specialised loop of `fill` (one region or several, with or without
        // streams), a reuse region, sleeps and an instruction limit
        let mut sleepy = profile("hotcold").unwrap();
        sleepy.run_ms = Some(0.01);
        sleepy.sleep_ms = Some(0.5);
        sleepy.instructions = Some(40_000);
        let reuse = LocalityModel {
            regions: vec![
                Region {
                    kb: 256,
                    weight: 0.5,
                    pattern: Pattern::Reuse { mean_lines: 100.0 },
                    scope: Scope::Private,
                    write_fraction: None,
                },
                Region {
                    kb: 64,
                    weight: 0.5,
                    pattern: Pattern::Stream { stride: 100 << 10 },
                    scope: Scope::Private,
                    write_fraction: None,
                },
            ],
            ..profile("compute").unwrap()
        };
        let models = [
            "compute", "stream", "chase", "hotcold", "art", "mcf", "gzip", "database",
        ]
        .map(|n| profile(n).unwrap())
        .into_iter()
        .chain([sleepy, reuse]);
        for m in models {
            let mut one = LocalityThread::new(m.clone(), 1, 2, SimRng::new(4));
            let mut batched = LocalityThread::new(m.clone(), 1, 2, SimRng::new(4));
            let single: Vec<Op> = (0..20_000)
                .map(|_| one.next_op())
                .take_while(|&op| op != Op::Exit)
                .collect();
            let mut got = Vec::new();
            while got.len() < single.len() {
                batched.fill(&mut got, 7);
                if got.last() == Some(&Op::Exit) {
                    got.pop();
                    break;
                }
            }
            got.truncate(single.len());
            assert_eq!(got, single, "{m:?}");
        }
    }

    #[test]
    fn a_region_write_fraction_holds_for_its_fresh_draws_and_re_touches() {
        // a read-only region, a write-only one and one at the model's fraction, with
        // next-word and recent re-touches on (the defaults): every access to the first
        // is a load and every access to the second a store, whichever way it was drawn;
        // the third stays near the model's 0.3
        let region = |kb: u64, w: Option<f64>| Region {
            kb,
            weight: 1.0,
            pattern: Pattern::Random,
            scope: Scope::Private,
            write_fraction: w,
        };
        let m = LocalityModel {
            regions: vec![
                region(64, Some(0.0)),
                region(64, Some(1.0)),
                region(64, None),
            ],
            write_fraction: 0.3,
            stack_fraction: 0.0,
            spatial: DEFAULT_SPATIAL,
            recent: DEFAULT_RECENT,
            ..profile("compute").unwrap()
        };
        let mut t = LocalityThread::new(m, 0, 0, SimRng::new(9));
        let rt: Vec<(u64, u64)> = t.tables.rt.iter().map(|r| (r.base, r.size)).collect();
        let mut counts = [[0u32; 2]; 3];
        for _ in 0..60_000 {
            if let Op::Access { addr, write, .. } = t.next_op() {
                // next-word accesses may step past a region's end: count those with it
                let r = rt
                    .iter()
                    .position(|&(b, s)| addr >= b && addr < b + s + 4096)
                    .expect("an access lands in a region");
                counts[r][write as usize] += 1;
            }
        }
        assert_eq!(
            counts[0][1], 0,
            "stores to the read-only region: {counts:?}"
        );
        assert_eq!(
            counts[1][0], 0,
            "loads from the write-only region: {counts:?}"
        );
        assert!(counts[0][0] > 15_000 && counts[1][1] > 15_000, "{counts:?}");
        let share = counts[2][1] as f64 / (counts[2][0] + counts[2][1]) as f64;
        assert!((0.27..0.33).contains(&share), "model fraction {share}");
        let mut bad = profile("compute").unwrap();
        bad.regions[0].write_fraction = Some(1.5);
        assert!(bad.validate().is_err());
    }

    #[test]
    fn private_regions_disjoint_shared_coincide() {
        let mut m = profile("small").unwrap();
        m.regions.push(Region {
            kb: 64,
            weight: 1.0,
            pattern: Pattern::Random,
            scope: Scope::Process,
            write_fraction: None,
        });
        let t0 = LocalityThread::new(m.clone(), 3, 0, SimRng::new(1));
        let t1 = LocalityThread::new(m.clone(), 3, 1, SimRng::new(2));
        let other = LocalityThread::new(m, 4, 0, SimRng::new(3));
        assert_ne!(t0.tables.rt[0].base, t1.tables.rt[0].base);
        assert_eq!(t0.tables.rt[1].base, t1.tables.rt[1].base);
        assert_ne!(t0.tables.rt[1].base, other.tables.rt[1].base);
    }

    #[test]
    fn phases_alternate_by_instruction_count() {
        let a = profile("compute").unwrap();
        let mut b = profile("huge").unwrap();
        b.base_cpi = 2.0;
        let mut t = PhasedThread::new(&[(a, 10_000), (b, 5_000)], 0, 0, 0, &SimRng::new(1));
        let mut switches = 0;
        let mut last = 0;
        let mut instr = 0u64;
        while instr < 150_000 {
            if let Op::Access { gap, .. } = t.next_op() {
                instr += gap as u64 + 1;
            }
            if t.phase() != last {
                switches += 1;
                last = t.phase();
                assert_eq!(t.base_cpi(), if last == 1 { 2.0 } else { 1.0 });
            }
        }
        // 15,000 instructions per cycle of two phases: ~20 switches in 150,000
        assert!((18..=21).contains(&switches), "{switches}");
    }

    #[test]
    fn reuse_stream_has_the_miss_ratio_curve_it_was_built_for() {
        let mean = 200.0;
        let m = LocalityModel::single(64 << 10, Pattern::Reuse { mean_lines: mean }, 4.0);
        m.validate().unwrap();
        let sd = crate::trace::mrc::model_curve(&m, 4, 0, 300_000);
        let q = 1.0 - 1.0 / (mean + 1.0);
        let cold = sd.cold as f64 / sd.accesses as f64;
        for c in [50u64, 200, 600] {
            let want = q.powi(c as i32);
            let got = sd.miss_ratio(c);
            assert!(
                (got - want).abs() < 0.02 + cold,
                "C={c}: {got} vs {want} (cold {cold})"
            );
        }
    }

    #[test]
    fn reuse_regions_are_validated() {
        let reuse = |kb, mean_lines| LocalityModel::single(kb, Pattern::Reuse { mean_lines }, 4.0);
        assert!(reuse(1 << 28, 0.0).validate().is_ok());
        for (kb, mean) in [
            (1 << 28 | 1, 10.0),
            (64, -1.0),
            (64, f64::NAN),
            (64, f64::INFINITY),
        ] {
            let e = reuse(kb, mean).validate().unwrap_err().to_string();
            assert!(e.contains("reuse region"), "{kb} KB, mean {mean}: {e}");
        }
    }

    #[test]
    fn chase_visits_every_line_once_per_cycle_far_apart() {
        for kb in [1u64, 7, 64, 1000, 4096] {
            let mut m = profile("chase").unwrap();
            m.regions[0].kb = kb;
            let n = kb * 16;
            let mut t = LocalityThread::new(m, 0, 0, SimRng::new(1));
            let base = t.tables.rt[0].base;
            let mut seen = vec![false; n as usize];
            let mut prev = None;
            t.feed_accesses(n, |addr, _| {
                let line = (addr - base) / 64;
                assert_eq!((addr - base) % 64, 0);
                assert!(!seen[line as usize], "{kb} KB: line {line} twice");
                seen[line as usize] = true;
                if let Some(p) = prev {
                    // consecutive lines at least a quarter of the region apart
                    let d = line.abs_diff(p);
                    assert!(d.min(n - d) >= n / 4, "{kb} KB: {p} then {line}");
                }
                prev = Some(line);
            });
            assert!(seen.iter().all(|&v| v), "{kb} KB");
        }
    }

    #[test]
    fn base_vectors_have_their_footprints() {
        let d = profile("bv-l1d=16").unwrap();
        assert_eq!(d.footprint_bytes(), 16 << 10);
        let i = profile("bv-l1i").unwrap();
        assert_eq!((i.code_kb, i.footprint_bytes()), (32, 1 << 10));
        assert_eq!(profile("bv-l2").unwrap().footprint_bytes(), 4 << 20);
        assert!(profile("bv-l2=x").is_err());
        assert!(profile("large=5").is_err());
        assert!(profile("bv9").is_err());
    }

    /// L1I misses per 1,000 instructions of `m` in a fully associative LRU cache of
    /// `kb` KiB with 64-byte lines, one fetch per line the pc enters, measured over 4 M
    /// instructions after 2 M of warm-up.
    fn code_mpki(m: &LocalityModel, kb: u64) -> f64 {
        let mut t = LocalityThread::new(m.clone(), 0, 0, SimRng::new(5));
        let mut sd = crate::trace::mrc::StackDistances::new();
        let (mut instr, mut line, mut warm) = (0u64, u64::MAX, true);
        while instr < 6_000_000 {
            if warm && instr >= 2_000_000 {
                sd.reset_counts();
                warm = false;
            }
            if let Op::Access { gap, pc, .. } = t.next_op() {
                instr += gap as u64 + 1;
                if pc >> 6 != line {
                    line = pc >> 6;
                    sd.access(line);
                }
            }
        }
        sd.miss_ratio(kb * 1024 / 64) * sd.accesses as f64 / 4_000.0
    }

    /// Code as functions: a footprint that fits the cache does not miss once warm, a
    /// large one misses at a rate that falls with the cache as the hot functions fit
    /// (SPEC CPU2000 integer programs: mostly well under 10 per 1,000 instructions at
    /// 16–32 KB, the large-code ones such as gcc higher; H&P 6th ed. Fig. B.6 gives
    /// 3.82 and 1.36 as the average of ten programs at 16 and 32 KB), and a loop over
    /// the same footprint misses on every line (the artifact this layout removes).
    #[test]
    fn code_misses_fall_with_the_cache_as_programs_do() {
        let mut m = LocalityModel::single(4, Pattern::Random, 3.0);
        m.code_kb = 16;
        assert!(code_mpki(&m, 32) < 0.01, "{}", code_mpki(&m, 32));
        m.code_kb = 256;
        let (k4, k16, k32, k64) = (
            code_mpki(&m, 4),
            code_mpki(&m, 16),
            code_mpki(&m, 32),
            code_mpki(&m, 64),
        );
        assert!(
            k4 > 1.2 * k16 && k16 > 1.2 * k32 && k32 > 1.2 * k64,
            "{k4} {k16} {k32} {k64}"
        );
        // gcc's 4 KB figure (19, see CodeLayout::Functions) within ±30%
        assert!(
            (13.0..25.0).contains(&k4) && k64 > 1.0,
            "{k4} {k16} {k32} {k64}"
        );
        // a loop over 256 KB: every line entered misses a 64 KB cache, 62.5 lines per
        // 1,000 instructions (16 4-byte instructions per 64-byte line)
        m.code_layout = CodeLayout::Loop;
        let loop64 = code_mpki(&m, 64);
        assert!((loop64 - 62.5).abs() < 1.0, "{loop64}");
    }

    /// The stack region takes its fraction of the accesses, in 1 KiB; next-word
    /// accesses follow the previous access by 8 bytes at the configured rate.
    #[test]
    fn stack_and_next_word_accesses() {
        let mut m = LocalityModel::single(64 * 1024, Pattern::Random, 2.0);
        m.stack_fraction = 0.3;
        m.spatial = 0.4;
        let regions = m.effective_regions();
        assert_eq!(regions.len(), 2);
        assert_eq!(m.footprint_bytes(), (64 << 20) + (1 << 10));
        let mut t = LocalityThread::new(m, 0, 0, SimRng::new(9));
        let (mut prev, mut next_word, mut stack, n) = (0u64, 0u32, 0u32, 200_000);
        let mut stack_lo = u64::MAX;
        let mut addrs = Vec::with_capacity(n);
        for _ in 0..n {
            if let Op::Access { addr, .. } = t.next_op() {
                next_word += (addr == prev + 8) as u32;
                prev = addr;
                addrs.push(addr);
            }
        }
        // the stack is the region above the 64 MB data region
        let data_lo = *addrs.iter().min().unwrap();
        for &a in &addrs {
            if a >= data_lo + (64 << 20) {
                stack += 1;
                stack_lo = stack_lo.min(a);
            }
        }
        let f = |k: u32| k as f64 / n as f64;
        // next-word accesses: 0.4 (plus chance adjacency, ~0 in 64 MB)
        assert!((f(next_word) - 0.4).abs() < 0.01, "{}", f(next_word));
        // accesses drawn afresh go to the stack 30% of the time; a next-word access
        // follows its predecessor, so the stack's share of all accesses is 0.3 too
        assert!((f(stack) - 0.3).abs() < 0.01, "{}", f(stack));
        assert!(addrs.iter().all(|&a| a < stack_lo + 1024 + 8 * 64));
    }

    /// Short-reuse accesses take their fraction of all accesses and go to the words of
    /// the last [`RECENT_DRAWS`] fresh draws, each about equally often; without them
    /// no access would return to one of those words (a 64 MB region).
    #[test]
    fn recent_accesses_retouch_the_last_draws() {
        let mut m = LocalityModel::single(64 * 1024, Pattern::Random, 2.0);
        m.spatial = 0.4;
        m.recent = 0.3;
        let mut t = LocalityThread::new(m, 0, 0, SimRng::new(5));
        let n = 200_000;
        let (mut prev, mut ring, mut pos) = (0u64, [u64::MAX; RECENT_DRAWS], 0usize);
        let (mut next_word, mut recent, mut depth) = (0u32, 0u32, [0u32; RECENT_DRAWS]);
        let mut seen = 0;
        while seen < n {
            if let Op::Access { addr, .. } = t.next_op() {
                seen += 1;
                if addr == prev + 8 {
                    next_word += 1;
                } else if let Some(i) = ring.iter().position(|&a| a == addr) {
                    recent += 1;
                    // 0: the newest draw
                    depth[(pos + RECENT_DRAWS - 1 - i) % RECENT_DRAWS] += 1;
                } else {
                    ring[pos] = addr;
                    pos = (pos + 1) % RECENT_DRAWS;
                }
                prev = addr;
            }
        }
        let f = |k: u32| k as f64 / n as f64;
        assert!((f(next_word) - 0.4).abs() < 0.01, "{}", f(next_word));
        assert!((f(recent) - 0.3).abs() < 0.01, "{}", f(recent));
        for d in depth {
            assert!((f(d) - 0.3 / RECENT_DRAWS as f64).abs() < 0.01, "{depth:?}");
        }
    }

    #[test]
    fn gap_table_is_exact_inversion() {
        for mean in [0.5, 2.0, 4.0, 30.0, 1000.0] {
            let mut m = profile("compute").unwrap();
            m.gap_mean = mean;
            let t = LocalityThread::new(m, 0, 0, SimRng::new(3));
            let mut r = StreamRng::from_rng(&mut SimRng::new(3));
            let mut r2 = r;
            let inv = 1.0 / (1.0 - 1.0 / (mean + 1.0)).ln();
            for _ in 0..20_000 {
                // the same draw the table path consumes
                let bits = r.next_u64();
                let u = ((bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)).max(1e-300);
                let exact = (u.ln() * inv).min(1e6) as u32;
                assert_eq!(t.tables.gap_for(r2.next_u64() >> 11), exact, "mean {mean}");
            }
            // and at the edges of every bucket and around every step within one
            for (i, &e) in t.tables.gap_table.iter().enumerate() {
                let first = (i as u64) << GAP_SPLIT_BITS;
                let split = first + (e & GAP_SPLIT_MASK);
                for x in [
                    first,
                    first + GAP_SPLIT_MASK,
                    split.max(first + 1) - 1,
                    split,
                ] {
                    let u = (x as f64 * (1.0 / (1u64 << 53) as f64)).max(1e-300);
                    let exact = (u.ln() * inv).min(1e6) as u32;
                    assert_eq!(t.tables.gap_for(x), exact, "mean {mean}, draw {x}");
                }
            }
        }
    }

    #[test]
    fn gap_mean_exit_and_sleep() {
        let mut m = profile("compute").unwrap();
        m.instructions = Some(50_000);
        let mut t = LocalityThread::new(m, 0, 0, SimRng::new(9));
        let mut n = 0u64;
        let mut accesses = 0u64;
        loop {
            match t.next_op() {
                Op::Access { gap, .. } => {
                    n += gap as u64 + 1;
                    accesses += 1;
                }
                Op::Exit => break,
                Op::Sleep(_) => panic!("no sleeps configured"),
            }
        }
        let mean = n as f64 / accesses as f64 - 1.0;
        assert!((3.6..4.4).contains(&mean), "{mean}");
        let mut s = profile("compute").unwrap();
        s.run_ms = Some(0.01);
        s.sleep_ms = Some(2.0);
        let mut t = LocalityThread::new(s, 0, 0, SimRng::new(9));
        assert!((0..100_000).any(|_| t.next_op() == Op::Sleep(Nanos::from_ms(2))));
        assert!(profile("nope").is_err());
    }
}
