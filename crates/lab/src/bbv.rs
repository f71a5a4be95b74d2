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
//! the cheapest to record (lackey has no fast-forward). The window is in retired
//! instructions, as exp-bbv counts them ([`crate::traces::Counting::Retired`]).

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

/// A run's basic-block vectors, one per interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    /// Instructions per interval.
    pub interval: u64,
    /// Per interval: (basic block, instructions executed in it).
    pub intervals: Vec<Vec<(u32, u64)>>,
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

    /// The vectors of `intervals` of `interval` instructions each; an error if there are
    /// none.
    fn from_intervals(intervals: Intervals, interval: u64) -> Result<Vectors> {
        if intervals.is_empty() {
            return Err(invalid!("basic-block vectors: no interval"));
        }
        Ok(Vectors {
            interval,
            intervals,
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
            Command::new("valgrind")
                .arg("-q")
                .arg("--tool=exp-bbv")
                .arg(format!("--interval-size={interval}"))
                .arg(format!("--bb-out-file={}", out.display()))
                .args(t.cmd)
                .envs(t.env.iter().copied())
                .stdin(crate::traces::stdin_of(t.stdin)?),
        )?;
        if !t.succeeded(status) {
            remove_outputs(&out);
            return Err(Error::Tool(format!(
                "'{}' under valgrind --tool=exp-bbv exited with {status}",
                t.cmd.join(" ")
            )));
        }
        let read = || -> Result<(Intervals, u64)> {
            let main = Vectors::intervals(&read_output(&out)?)?;
            let mut others = 0;
            for f in thread_outputs(&out) {
                others += instructions(&Vectors::intervals(&read_output(&f)?)?);
            }
            Ok((main, others))
        };
        let read = read();
        remove_outputs(&out);
        let (main, others) = read?;
        single_stream(t.cmd, instructions(&main), others)?;
        Vectors::from_intervals(main, interval)
    }
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

/// Largest share of a run's instructions that threads other than the first may execute
/// (in exp-bbv's full intervals) for the rule to place its window: exp-bbv writes each
/// thread's vectors apart, without a common clock, while a recording interleaves every
/// thread into one stream, so the rule reads the first thread's vectors only.
pub const MAX_OTHER_THREADS_SHARE: f64 = 0.01;

/// Refuses a run of command `cmd` whose threads other than the first executed `others`
/// of its instructions against the first's `main`, more than
/// [`MAX_OTHER_THREADS_SHARE`]: the first thread's vectors would not describe it (a
/// program rendering in a worker thread, such as POV-Ray, has almost nothing in its
/// first).
fn single_stream(cmd: &[String], main: u64, others: u64) -> Result<()> {
    let share = others as f64 / (main + others).max(1) as f64;
    if share > MAX_OTHER_THREADS_SHARE {
        return Err(invalid!(
            "'{}' ran {:.1}% of its instructions ({others} of {}) in threads other than its first; exp-bbv counts each thread apart and the rule places a window in one instruction stream: run the program with one thread, or place its window by another stated rule",
            cmd.join(" "),
            share * 100.0,
            main + others
        ));
    }
    Ok(())
}

/// The other threads' outputs beside exp-bbv's main output `out` (`OUT.N`, N a thread
/// number), in a stable order.
fn thread_outputs(out: &Path) -> Vec<std::path::PathBuf> {
    let (Some(dir), Some(name)) = (out.parent(), out.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix(&prefix)
                .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

/// Removes exp-bbv's output `out` and the files it writes beside it for the program's
/// other threads (`out.2`, `out.3`, …).
fn remove_outputs(out: &Path) {
    let _ = std::fs::remove_file(out);
    for f in thread_outputs(out) {
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
    /// Instructions before the window ([`Vectors::interval`] × `start`).
    pub skip: u64,
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
    Ok(Choice {
        start,
        len,
        skip: start as u64 * v.interval,
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

    /// A run whose other threads executed at most 1% of its instructions is placed by
    /// its first thread's vectors; more is refused, naming the share (POV-Ray: 20 M
    /// instructions in its first thread, its rendering in another). Fails if the other
    /// threads' instructions were ignored (as before) or a helper thread's few were not.
    #[test]
    fn a_run_mostly_in_other_threads_is_refused() {
        let cmd = ["povray".to_string()];
        assert!(single_stream(&cmd, 99_000, 1_000).is_ok());
        assert!(single_stream(&cmd, 1_000, 0).is_ok());
        let e = single_stream(&cmd, 98_000, 2_000).unwrap_err().to_string();
        assert!(e.contains("2.0% of its instructions"), "{e}");
        let e = single_stream(&cmd, 20_000_000, 1_000_000_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'povray' ran 98.0%"), "{e}");
        assert!(e.contains("one thread"), "{e}");
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
            vec![d.join("b.out.2"), d.join("b.out.3")]
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
        Vectors {
            interval: 10,
            intervals,
        }
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
