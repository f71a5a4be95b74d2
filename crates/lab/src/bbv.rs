//! Basic-block vectors of a whole run (valgrind's exp-bbv) and the choice of its most
//! representative window, the rule by which the real-program suite's later windows
//! are placed.
//!
//! A basic-block vector (BBV) of an interval counts, for every basic block, the
//! instructions the interval executed in it; two intervals with close vectors run the
//! same code in the same proportions, and so behave alike (Sherwood et al., ASPLOS
//! 2002, the SimPoint method). The rule here is SimPoint's with a single point and no
//! clustering: among the windows of the wanted length that start at a multiple of the
//! interval, take the one whose vector, normalised to sum 1, is nearest to the whole
//! run's in Manhattan distance (SimPoint's metric); ties go to the earliest, which is
//! the cheapest to record (lackey prints the skipped instructions too; cstrace,
//! [`crate::tracer`], counts them). The window is in retired
//! instructions, as exp-bbv counts them ([`crate::traces::Counting::Retired`]).
//!
//! exp-bbv writes each thread's vectors apart, without a common clock, while a
//! recording interleaves every thread into one stream. The rule reads the thread that
//! executes the most instructions (a program's first, or the worker it hands its work
//! to, as POV-Ray does) and refuses a run whose other threads execute more than
//! [`MAX_OTHER_THREADS_SHARE`]. Their instructions are in no vector, which moves any
//! window's distance by at most twice their share ([`Vectors::distance_bound`]); in the
//! recording's count the window starts at [`Choice::stream_skip`], the other threads
//! taken to run in step with the one read.

use crate::error::{invalid, Error, Result};
use std::path::Path;
use std::process::Command;

/// Largest exp-bbv output read (bytes): a run of 10 G instructions in intervals of
/// 10 M writes about 1,000 lines of some tens of kilobytes.
pub const MAX_BBV_BYTES: u64 = 1 << 30;

/// Largest basic-block number accepted: the vectors are held dense.
pub const MAX_BLOCKS: usize = 1 << 24;

/// Per interval: (basic block, instructions executed in it), as [`Vectors`] holds them.
type Intervals = Vec<Vec<(u32, u64)>>;

/// A run's basic-block vectors, one per interval, of the thread that executed the
/// most instructions.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    /// Instructions per interval.
    pub interval: u64,
    /// Per interval: (basic block, instructions executed in it).
    pub intervals: Vec<Vec<(u32, u64)>>,
    /// The thread they are of, as exp-bbv numbers threads (1: the first).
    pub thread: u32,
    /// Instructions that thread executed, its last, partial interval included.
    pub thread_instructions: u64,
    /// Instructions the run's other threads executed (0: it had no other).
    pub others: u64,
}

impl Vectors {
    /// Instructions of the run's full intervals (exp-bbv leaves out the last,
    /// partial one).
    pub fn total(&self) -> u64 {
        instructions(&self.intervals)
    }

    /// Parses exp-bbv's output (`T:block:count :block:count …`, one line per interval)
    /// for a run measured with intervals of `interval` instructions.
    pub fn parse(text: &str, interval: u64) -> Result<Vectors> {
        Self::from_intervals(Self::intervals(text)?, interval)
    }

    /// The share of the run's instructions executed in threads other than the one
    /// read, in none of the vectors.
    pub fn others_share(&self) -> f64 {
        others_share(self.others, self.thread_instructions + self.others)
    }

    /// How far any window's distance ([`Choice::distances`]) may be from what it would
    /// be with the other threads' instructions in the vectors: twice their share (a
    /// share `f` of the mass left out moves normalised vectors by at most `2f` in
    /// Manhattan distance).
    pub fn distance_bound(&self) -> f64 {
        2.0 * self.others_share()
    }

    /// The vectors of one thread (the only one) whose `intervals` have `interval`
    /// instructions each; an error if there are none.
    fn from_intervals(intervals: Intervals, interval: u64) -> Result<Vectors> {
        if intervals.is_empty() {
            return Err(invalid!("basic-block vectors: no interval"));
        }
        Ok(Vectors {
            interval,
            thread_instructions: instructions(&intervals),
            intervals,
            thread: 1,
            others: 0,
        })
    }

    /// The intervals of exp-bbv's output `text`, none if it has no full interval.
    fn intervals(text: &str) -> Result<Intervals> {
        let mut intervals = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let body = line.strip_prefix('T').ok_or_else(|| {
                invalid!(
                    "basic-block vectors, line {}: does not start with 'T'",
                    i + 1
                )
            })?;
            let mut v = Vec::new();
            for pair in body.split_whitespace() {
                let mut it = pair.strip_prefix(':').unwrap_or(pair).split(':');
                let (Some(b), Some(n), None) = (it.next(), it.next(), it.next()) else {
                    return Err(invalid!(
                        "basic-block vectors, line {}: '{pair}' is not ':block:count'",
                        i + 1
                    ));
                };
                let parse = |s: &str| {
                    s.parse::<u64>().map_err(|_| {
                        invalid!("basic-block vectors, line {}: '{s}' is not a count", i + 1)
                    })
                };
                let b = parse(b)?;
                if b as usize >= MAX_BLOCKS {
                    return Err(invalid!(
                        "basic-block vectors, line {}: block {b} is beyond {MAX_BLOCKS}",
                        i + 1
                    ));
                }
                v.push((b as u32, parse(n)?));
            }
            intervals.push(v);
        }
        Ok(intervals)
    }

    /// Runs command `t` whole under `valgrind --tool=exp-bbv` with intervals of
    /// `interval` instructions, in `work` (a scratch directory the output is written to
    /// and removed from), and reads its vectors.
    pub fn measure(t: &crate::traces::Traced<'_>, interval: u64, work: &Path) -> Result<Vectors> {
        let out = work.join(format!("cachesched-bbv-{}.out", std::process::id()));
        remove_outputs(&out);
        let status = crate::traces::run_valgrind(
            t.append_to(
                Command::new("valgrind")
                    .arg("-q")
                    .arg("--tool=exp-bbv")
                    .arg(format!("--interval-size={interval}"))
                    .arg(format!("--bb-out-file={}", out.display())),
            )?,
        )?;
        if !t.succeeded(status) {
            remove_outputs(&out);
            return Err(Error::Tool(format!(
                "'{}' under valgrind --tool=exp-bbv exited with {status}",
                t.cmd.join(" ")
            )));
        }
        let read = || -> Result<Vec<Thread>> {
            let mut threads = vec![Thread::read(1, &out)?];
            for (n, f) in thread_outputs(&out) {
                threads.push(Thread::read(n, &f)?);
            }
            Ok(threads)
        };
        let read = read();
        remove_outputs(&out);
        let mut threads = read?;
        let (i, others) = dominant(t.cmd, &threads)?;
        let th = threads.swap_remove(i);
        let mut v = Vectors::from_intervals(th.intervals, interval)?;
        v.thread = th.number;
        v.thread_instructions = th.instructions;
        v.others = others;
        Ok(v)
    }
}

/// One thread's output of exp-bbv.
#[derive(Debug)]
struct Thread {
    /// exp-bbv's number of it (1: the first).
    number: u32,
    /// Its full intervals.
    intervals: Intervals,
    /// Its instructions, partial last interval included: the `Total instructions` of
    /// exp-bbv's trailer, else those of its full intervals.
    instructions: u64,
}

impl Thread {
    /// Reads thread `number`'s output `path`.
    fn read(number: u32, path: &Path) -> Result<Thread> {
        let text = read_output(path)?;
        let intervals = Vectors::intervals(&text)?;
        let instructions = trailer_instructions(&text).unwrap_or_else(|| instructions(&intervals));
        Ok(Thread {
            number,
            intervals,
            instructions,
        })
    }
}

/// The `Total instructions` exp-bbv writes in the trailer of a thread's output (every
/// instruction of the thread, its last, partial interval included).
fn trailer_instructions(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .find_map(|l| l.trim().strip_prefix("Total instructions:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Instructions counted in `intervals` (per interval: block, instructions).
fn instructions(intervals: &[Vec<(u32, u64)>]) -> u64 {
    intervals.iter().flatten().map(|&(_, n)| n).sum()
}

/// Reads the output exp-bbv wrote to `path`, refusing files over [`MAX_BBV_BYTES`].
fn read_output(path: &Path) -> Result<String> {
    let len = std::fs::metadata(path)
        .map_err(Error::io("exp-bbv wrote no vectors to", path))?
        .len();
    if len > MAX_BBV_BYTES {
        return Err(invalid!(
            "exp-bbv wrote {len} bytes of vectors to {}, more than {MAX_BBV_BYTES}: use a larger interval",
            path.display()
        ));
    }
    std::fs::read_to_string(path).map_err(Error::io("cannot read", path))
}

/// Largest share of a run's instructions that threads other than the one the rule
/// reads (the one executing the most) may execute: exp-bbv writes each thread's
/// vectors apart, without a common clock, while a recording interleaves every thread
/// into one stream, so the rule reads one thread's vectors and the others' instructions
/// are in none. At this share they move a window's distance by at most 0.2
/// ([`Vectors::distance_bound`]), about the distance of the suite's chosen windows
/// (0.003 to 0.49); a tenth of the run, on 2026-12-07 (it was 1%, which refused
/// POV-Ray, whose frontend thread gamma-corrects and stores the rendered pixels, 3.8%
/// of its instructions, beside the rendering thread's 95.3%).
pub const MAX_OTHER_THREADS_SHARE: f64 = 0.10;

/// The share `others` are of `all` instructions (0 for an empty run).
fn others_share(others: u64, all: u64) -> f64 {
    others as f64 / all.max(1) as f64
}

/// The thread of `threads` (those of a run of command `cmd`) whose vectors describe
/// the run: the one that executed the most instructions (the first of equals); with
/// the others' instructions. Refuses a run whose other threads executed more than
/// [`MAX_OTHER_THREADS_SHARE`] of its instructions (a chosen thread without a full
/// interval is refused after, by [`Vectors::from_intervals`]).
fn dominant(cmd: &[String], threads: &[Thread]) -> Result<(usize, u64)> {
    let all: u64 = threads.iter().map(|t| t.instructions).sum();
    let i = threads.iter().enumerate().fold(0, |best, (i, t)| {
        if t.instructions > threads[best].instructions {
            i
        } else {
            best
        }
    });
    let Some(t) = threads.get(i) else {
        return Err(invalid!(
            "exp-bbv wrote no thread's vectors for '{}'",
            cmd.join(" ")
        ));
    };
    let others = all - t.instructions;
    let share = others_share(others, all);
    if share > MAX_OTHER_THREADS_SHARE {
        return Err(invalid!(
            "'{}' ran {:.1}% of its instructions ({others} of {all}) in threads other than its busiest (thread {}), more than {:.0}%; exp-bbv counts each thread apart and the rule places a window in one instruction stream: run the program with fewer threads, or place its window by another stated rule",
            cmd.join(" "),
            share * 100.0,
            t.number,
            MAX_OTHER_THREADS_SHARE * 100.0
        ));
    }
    Ok((i, others))
}

/// The other threads' outputs beside exp-bbv's main output `out` (`OUT.N`, N a thread
/// number): their numbers and paths, in the numbers' order.
fn thread_outputs(out: &Path) -> Vec<(u32, std::path::PathBuf)> {
    let (Some(dir), Some(name)) = (out.parent(), out.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let t = n.strip_prefix(&prefix)?;
            // digits only: `parse` alone would take "+2"
            if !t.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((t.parse::<u32>().ok()?, e.path()))
        })
        .collect();
    files.sort();
    files
}

/// Removes exp-bbv's output `out` and the files it writes beside it for the program's
/// other threads (`out.2`, `out.3`, …).
fn remove_outputs(out: &Path) {
    let _ = std::fs::remove_file(out);
    for (_, f) in thread_outputs(out) {
        let _ = std::fs::remove_file(f);
    }
}

/// The chosen window and how near every candidate came.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// First interval of the chosen window.
    pub start: usize,
    /// Intervals per window.
    pub len: usize,
    /// Instructions before the window ([`Vectors::interval`] × `start`), in the
    /// thread read ([`Vectors::thread`]).
    pub skip: u64,
    /// The same in the instructions of every thread, as a recording counts them: `skip`
    /// plus the other threads' instructions in proportion (they are taken to run in
    /// step with the thread read; off by at most [`Vectors::others`]). `skip` when the
    /// run has one thread.
    pub stream_skip: u64,
    /// Manhattan distance of each candidate window (starting at interval 0, 1, …) from
    /// the whole run, between vectors normalised to sum 1 (0: the same proportions; 2:
    /// no block in common).
    pub distances: Vec<f64>,
}

impl Choice {
    /// The chosen window's distance.
    pub fn distance(&self) -> f64 {
        self.distances[self.start]
    }
}

/// The window of `window` instructions (a multiple of the interval) whose vector is
/// nearest to the whole run's; only windows of full intervals are candidates.
pub fn representative(v: &Vectors, window: u64) -> Result<Choice> {
    if window == 0 || !window.is_multiple_of(v.interval) {
        return Err(invalid!(
            "the window ({window} instructions) must be a positive multiple of the interval ({})",
            v.interval
        ));
    }
    let len = (window / v.interval) as usize;
    // exp-bbv writes an interval's line only once the interval is full (the run's last
    // instructions, short of one, are left out), so every line is a candidate's part;
    // a line's blocks may sum below the interval (exp-bbv counts back-to-back `rep`
    // instructions in no block), which changes nothing here
    let full = v.intervals.len();
    if full < len {
        return Err(invalid!(
            "the run has {full} full intervals of {} instructions ({} in all), fewer than the window's {len}: give the program a larger input",
            v.interval,
            v.total()
        ));
    }
    let blocks = v
        .intervals
        .iter()
        .flat_map(|iv| iv.iter().map(|&(b, _)| b as usize + 1))
        .max()
        .unwrap_or(0);
    let mut whole = vec![0u64; blocks];
    for iv in &v.intervals {
        for &(b, n) in iv {
            whole[b as usize] += n;
        }
    }
    let whole_sum = whole.iter().sum::<u64>() as f64;
    let mut win = vec![0u64; blocks];
    let mut win_sum = 0u64;
    let add = |win: &mut Vec<u64>, sum: &mut u64, iv: &[(u32, u64)], sign: bool| {
        for &(b, n) in iv {
            if sign {
                win[b as usize] += n;
                *sum += n;
            } else {
                win[b as usize] -= n;
                *sum -= n;
            }
        }
    };
    for iv in &v.intervals[..len] {
        add(&mut win, &mut win_sum, iv, true);
    }
    let mut distances = Vec::with_capacity(full - len + 1);
    for start in 0..=full - len {
        if start > 0 {
            add(&mut win, &mut win_sum, &v.intervals[start - 1], false);
            add(&mut win, &mut win_sum, &v.intervals[start + len - 1], true);
        }
        let ws = win_sum.max(1) as f64;
        let d: f64 = whole
            .iter()
            .zip(&win)
            .map(|(&a, &w)| (w as f64 / ws - a as f64 / whole_sum).abs())
            .sum();
        distances.push(d);
    }
    let start = distances.iter().enumerate().fold(
        0,
        |best, (i, &d)| if d < distances[best] { i } else { best },
    );
    let skip = start as u64 * v.interval;
    let in_step = skip as u128 * v.others as u128 / v.thread_instructions.max(1) as u128;
    Ok(Choice {
        start,
        len,
        skip,
        stream_skip: skip + in_step as u64,
        distances,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// exp-bbv's main output and its other threads' `.N` files go; files that only
    /// share the prefix stay. Fails if a thread's file were left behind (as before) or
    /// another file removed.
    #[test]
    fn measured_outputs_of_every_thread_are_removed() {
        let d = std::env::temp_dir().join(format!("cachesched-bbvout-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let out = d.join("cachesched-bbv-7.out");
        let files = [
            ("cachesched-bbv-7.out", false),
            ("cachesched-bbv-7.out.2", false),
            ("cachesched-bbv-7.out.13", false),
            ("cachesched-bbv-7.out.x", true),
            ("cachesched-bbv-7.out.2.keep", true),
            ("cachesched-bbv-70.out.2", true),
        ];
        for (f, _) in files {
            std::fs::write(d.join(f), b"x").unwrap();
        }
        super::remove_outputs(&out);
        for (f, kept) in files {
            assert_eq!(d.join(f).exists(), kept, "{f}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A thread of `instructions` instructions with one full interval.
    fn thread(number: u32, instructions: u64) -> Thread {
        Thread {
            number,
            intervals: vec![vec![(0, instructions)]],
            instructions,
        }
    }

    /// The rule reads the busiest thread, wherever it is: POV-Ray's threads as exp-bbv
    /// counted them (2026-12-07; the first 23 M, the frontend 168.5 M, the parser 7.3 M,
    /// the renderer 4,200 M) give the renderer, with the others' 205 M (4.6%). A run
    /// whose other threads exceed a tenth is refused, naming the share and the thread.
    /// Fails if the first thread were read whatever it ran (as before 2026-12-07), the
    /// others' instructions were not counted, or a run shared by two threads passed.
    #[test]
    fn the_busiest_thread_is_read_and_a_shared_run_refused() {
        let cmd = ["povray".to_string()];
        let m = 1_000_000;
        let pov = [
            thread(1, 23 * m),
            thread(2, 473),
            thread(3, 168_500_000),
            thread(4, 7_300_000),
            thread(6, 6_500_000),
            thread(7, 4_200 * m),
        ];
        let (i, others) = dominant(&cmd, &pov).unwrap();
        assert_eq!(pov[i].number, 7);
        assert_eq!(others, 205_300_473);
        let (i, others) = dominant(&cmd, &[thread(1, 99_000), thread(2, 1_000)]).unwrap();
        assert_eq!((i, others), (0, 1_000));
        assert_eq!(dominant(&cmd, &[thread(1, 1_000)]).unwrap(), (0, 0));
        let e = dominant(&cmd, &[thread(1, 890), thread(2, 110)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("11.0% of its instructions"), "{e}");
        let e = dominant(&cmd, &[thread(1, 400), thread(2, 500), thread(3, 100)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'povray' ran 50.0%") && e.contains("(thread 2)"),
            "{e}"
        );
    }

    /// The recording's skip adds the other threads' instructions in proportion, and the
    /// distances' bound is twice their share; a single thread's skip is its own. Fails
    /// if the window were recorded at the read thread's count in a multi-threaded run
    /// (too early by the others' instructions before it).
    #[test]
    fn the_stream_skip_counts_the_other_threads_in_step() {
        let mut v = run();
        let c = representative(&v, 30).unwrap();
        assert_eq!(c.stream_skip, c.skip);
        assert_eq!(v.distance_bound(), 0.0);
        // a tenth as many instructions again in other threads
        v.others = v.thread_instructions / 10;
        let c = representative(&v, 30).unwrap();
        assert_eq!(c.stream_skip, c.skip + c.skip / 10);
        assert!((v.distance_bound() - 2.0 / 11.0).abs() < 1e-12);
    }

    /// exp-bbv's trailer gives a thread's every instruction, a thread shorter than an
    /// interval included (POV-Ray's parser: 7.3 M in intervals of 10 M).
    #[test]
    fn a_threads_instructions_come_from_the_trailer() {
        let text = "\n\n# Thread 4\n#   Total intervals: 0 (Interval Size 10000000)\n#   Total instructions: 7278598\n#   Total reps: 1051140\n";
        assert_eq!(trailer_instructions(text), Some(7_278_598));
        assert_eq!(trailer_instructions("T:1:5\n"), None);
    }

    /// Every `.N` file beside the output is another thread's, in a stable order.
    #[test]
    fn other_threads_outputs_are_found() {
        let d = std::env::temp_dir().join(format!("cachesched-bbvthr-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let out = d.join("b.out");
        for f in ["b.out", "b.out.3", "b.out.2", "b.out.x", "b.outer.2"] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        assert_eq!(
            thread_outputs(&out),
            vec![(2, d.join("b.out.2")), (3, d.join("b.out.3"))]
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A run of a start-up phase (blocks 0-1) and then a phase alternating two kinds
    /// of interval (blocks 2-3 and 4-5) two to one, in intervals of 10 instructions.
    fn run() -> Vectors {
        let mut intervals = vec![vec![(0, 6), (1, 4)]; 6];
        for i in 0..30 {
            intervals.push(if i % 3 == 2 {
                vec![(4, 5), (5, 5)]
            } else {
                vec![(2, 7), (3, 3)]
            });
        }
        Vectors::from_intervals(intervals, 10).unwrap()
    }

    #[test]
    fn parses_exp_bbv_output() {
        // exp-bbv's trailer is comments
        let v = Vectors::parse(
            "T:12:3   :7:100\nT:12:5 \n\n\n# Thread 1\n#   Total intervals: 2 (Interval Size 100)\n",
            100,
        )
        .unwrap();
        assert_eq!(v.intervals, vec![vec![(12, 3), (7, 100)], vec![(12, 5)]]);
        assert_eq!(v.total(), 108);
        assert!(Vectors::parse("T:12\n", 100).is_err());
        assert!(Vectors::parse("X:1:2\n", 100).is_err());
        assert!(Vectors::parse("", 100).is_err());
    }

    #[test]
    fn picks_the_window_in_the_runs_proportions_not_the_start_up() {
        let v = run();
        // three intervals: a window of one of each kind of the main phase, two to one,
        // as the run is (the start-up is a sixth of it, so no window is exact)
        let c = representative(&v, 30).unwrap();
        assert!(c.start >= 6, "window in the start-up: {c:?}");
        assert_eq!(c.skip, c.start as u64 * 10);
        // the start-up's windows are farthest: no block in common with most of the run
        assert!(c.distances[0] > 1.5, "{:?}", c.distances);
        // every window of the main phase holds two of one kind and one of the other:
        // all equally near; the earliest wins
        assert_eq!(c.start, 6);
        // a window of one interval cannot hold both kinds: it takes the commoner
        let one = representative(&v, 10).unwrap();
        assert!(one.start >= 6 && (one.start - 6) % 3 != 2, "{one:?}");
        // every interval starts a candidate, and the sliding sums are the windows'
        // own: each distance recomputed from scratch
        assert_eq!(one.distances.len(), 36);
        for (start, d) in c.distances.iter().enumerate() {
            let mut w = std::collections::BTreeMap::<u32, u64>::new();
            for iv in &v.intervals[start..start + 3] {
                for &(b, n) in iv {
                    *w.entry(b).or_default() += n;
                }
            }
            let mut all = std::collections::BTreeMap::<u32, u64>::new();
            for iv in &v.intervals {
                for &(b, n) in iv {
                    *all.entry(b).or_default() += n;
                }
            }
            let (ws, alls) = (w.values().sum::<u64>() as f64, v.total() as f64);
            let direct: f64 = all
                .iter()
                .map(|(b, &a)| (*w.get(b).unwrap_or(&0) as f64 / ws - a as f64 / alls).abs())
                .sum();
            assert!((direct - d).abs() < 1e-9, "window {start}: {d} vs {direct}");
        }
    }

    #[test]
    fn refuses_windows_longer_than_the_run_or_off_the_interval() {
        let v = run();
        assert!(representative(&v, 370).is_err());
        assert!(representative(&v, 25).is_err());
        assert_eq!(representative(&v, 360).unwrap().distances.len(), 1);
    }
}
