//! Why an effect has the size it has (issue 80, part 3): a change between two sets of
//! runs, paired by seed, taken apart into (a) how many more or fewer costly events —
//! last-level cache misses, L1 misses or remote cache accesses — each program has per
//! instruction, and (b) what each event costs in stall cycles, with the rest of the
//! change (pipeline sharing, hits in the inner caches, the store buffer) left over; and,
//! for the throughput of the whole machine, (c) who ran (the shift of CPU time between
//! threads of different speeds) beside (a) and (b).
//!
//! Per program (the counters of its threads summed) and per seed, with `I`
//! instructions, `C` cycles on a CPU, `N` events and `S` the cycles stalled on them:
//! `CPI = C/I = (C − S)/I + (N/I)·(S/N)`, so the change of CPI from run A to run B is
//! exactly `Δ(N/I)·c_A` (a) `+ (N/I)_B·Δc` (b) `+ Δ((C − S)/I)` (the rest), `c = S/N`
//! being the stall cycles per event; the rest is taken as what (a) and (b) leave of the
//! whole change, which is that term whenever both runs have events (see `parts`). Each
//! part is shown in percent of CPI in A.
//!
//! The throughput of the machine (instructions per second over the measured window,
//! `Σ_i w_i/CPI_i` with `w_i` thread `i`'s cycles per second) changes by
//! `Σ_i (w_i^B − w_i^A)/CPI_i^A` (who ran) `+ Σ_i w_i^B·(1/CPI_i^B − 1/CPI_i^A)` (how fast
//! each ran); the second term is linear in each thread's `ΔCPI`, so it splits exactly
//! into that thread's (a), (b) and rest. This needs the same threads in A and B (same
//! ids and programs); otherwise only the programs' table is made.
//!
//! Means over seeds carry their 95% interval ([`crate::stats::over_seeds`]).

use crate::error::{invalid, Result};
use crate::report::read_saved;
use crate::stats::{over_seeds, show};
use cachesched_core::counters::Counters;
use cachesched_sim::RunResult;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The costly event whose count and price the decomposition separates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Last-level cache misses, priced by the cycles stalled on DRAM (data and
    /// instructions) and on other chips' caches.
    Llc,
    /// L1 misses (data and instructions), priced by every stall beyond the L1.
    L1,
    /// Accesses served by another chip's cache, priced by the cycles stalled on them.
    Remote,
}

impl Event {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Event::Llc => "llc",
            Event::L1 => "l1",
            Event::Remote => "remote",
        }
    }

    /// What it counts and how it is priced, for a report's heading.
    pub fn describe(self) -> &'static str {
        match self {
            Event::Llc => {
                "last-level cache misses, priced by the cycles stalled on DRAM and on other \
                 chips' caches"
            }
            Event::L1 => "L1 misses (data and instructions), priced by every stall beyond the L1",
            Event::Remote => {
                "accesses served by another chip's cache, priced by the cycles stalled on them"
            }
        }
    }

    /// The event's count and its stall cycles in counters `c`.
    fn of(self, c: &Counters) -> (f64, f64) {
        match self {
            Event::Llc => (
                c.llc_misses as f64,
                (c.data_stall_dram_cycles + c.instr_stall_dram_cycles + c.data_stall_remote_cycles)
                    as f64,
            ),
            Event::L1 => (
                (c.l1d_misses + c.l1i_misses) as f64,
                c.mem_stall_cycles as f64,
            ),
            Event::Remote => (c.remote_accesses as f64, c.data_stall_remote_cycles as f64),
        }
    }
}

impl std::str::FromStr for Event {
    type Err = crate::error::Error;
    /// `llc`, `l1` or `remote`.
    fn from_str(s: &str) -> Result<Event> {
        match s {
            "llc" => Ok(Event::Llc),
            "l1" => Ok(Event::L1),
            "remote" => Ok(Event::Remote),
            _ => Err(invalid!("unknown event '{s}': one of llc, l1, remote")),
        }
    }
}

/// One side of a comparison: the runs of one variant in one scenario's results.
#[derive(Clone, Debug)]
pub struct Side {
    /// The directory holding `results.json` (a scenario's, or one mix's, output), or a
    /// scenario of several mixes whose subdirectories each hold one (their runs pooled).
    pub dir: PathBuf,
    /// The variant's label.
    pub variant: String,
}

/// A run's place in a comparison: its mix (empty for a directory of one mix) and its
/// seed. Two sides are paired on equal keys.
pub type Key = (String, u64);

/// The runs of `side` at sweep point `kb` (`None`: the scenario has no sweep, or it
/// must have a single point), by mix and seed: the directory's own `results.json`, or
/// else those of its subdirectories (one per mix, keyed by the subdirectory's name).
/// Refuses a side with no runs, or with several runs of one seed (a sweep without
/// `kb`).
pub fn load_side(side: &Side, kb: Option<u64>) -> Result<BTreeMap<Key, RunResult>> {
    if side.dir.join("results.json").exists() {
        return load_one(side, &side.dir, "", kb);
    }
    let mut subdirs: Vec<(String, PathBuf)> = std::fs::read_dir(&side.dir)
        .map_err(crate::error::Error::io(
            "cannot read the directory",
            &side.dir,
        ))?
        .flatten()
        .filter(|e| e.path().join("results.json").exists())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    subdirs.sort();
    if subdirs.is_empty() {
        return Err(invalid!(
            "'{}' holds no results.json, nor subdirectories (one per mix) holding one: give \
             a scenario's or a mix's output directory",
            side.dir.display()
        ));
    }
    let mut out = BTreeMap::new();
    for (mix, dir) in subdirs {
        out.append(&mut load_one(side, &dir, &mix, kb)?);
    }
    Ok(out)
}

/// [`load_side`] for one directory holding `results.json`, its runs keyed by `mix`.
fn load_one(
    side: &Side,
    dir: &Path,
    mix: &str,
    kb: Option<u64>,
) -> Result<BTreeMap<Key, RunResult>> {
    let path = dir.join("results.json");
    let rows = read_saved(&path)?;
    let variants: Vec<String> = {
        let mut v: Vec<String> = rows.iter().map(|r| r.variant.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let points: std::collections::BTreeSet<Option<u64>> = rows
        .iter()
        .filter(|r| r.variant == side.variant)
        .map(|r| r.llc_kb)
        .collect();
    let sizes = points
        .iter()
        .map(|p| p.map_or("none".into(), |k| k.to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = BTreeMap::new();
    for r in rows {
        if r.variant != side.variant || (kb.is_some() && r.llc_kb != kb) {
            continue;
        }
        let seed = r.seed;
        if out.insert((mix.to_string(), seed), r.result).is_some() {
            return Err(invalid!(
                "'{}' holds several runs of variant '{}', seed {seed} (LLC sizes {}): give \
                 --kb",
                path.display(),
                side.variant,
                sizes
            ));
        }
    }
    if out.is_empty() {
        return Err(invalid!(
            "'{}' holds no run of variant '{}'{}: its variants are {}, its LLC sizes (KiB) {}",
            path.display(),
            side.variant,
            kb.map_or(String::new(), |k| format!(" at {k} KiB")),
            variants.join(", "),
            sizes
        ));
    }
    Ok(out)
}

/// A program's measures in one run: instructions, cycles, events, their stall cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sums {
    instructions: f64,
    cycles: f64,
    events: f64,
    stall: f64,
}

impl Sums {
    /// The measures of counters `c`, with event `e`.
    fn of(c: &Counters, e: Event) -> Sums {
        let (events, stall) = e.of(c);
        Sums {
            instructions: c.instructions as f64,
            cycles: c.cycles as f64,
            events,
            stall,
        }
    }
    /// Adds another thread's measures.
    fn add(&mut self, o: Sums) {
        self.instructions += o.instructions;
        self.cycles += o.cycles;
        self.events += o.events;
        self.stall += o.stall;
    }
    /// Cycles per instruction.
    fn cpi(&self) -> f64 {
        self.cycles / self.instructions
    }
    /// Events per instruction.
    fn epi(&self) -> f64 {
        self.events / self.instructions
    }
    /// Stall cycles per event (0 without events: none was paid for).
    fn cost(&self) -> f64 {
        if self.events > 0.0 {
            self.stall / self.events
        } else {
            0.0
        }
    }
    /// Whether it can be taken apart: instructions and cycles both counted.
    fn usable(&self) -> bool {
        self.instructions > 0.0 && self.cycles > 0.0
    }
}

/// The change of CPI from `a` to `b` in its three parts, each in percent of `a`'s CPI:
/// event count (a), cost per event (b), the rest. A side without events has no price
/// of its own: it is given the other side's, so that events appearing from none (or
/// vanishing) count as (a), not as a change of price. The rest is what (a) and (b)
/// leave of the whole change, so the three add up to it exactly; with events on both
/// sides it is the change of the cycles per instruction not stalled on the event
/// (stall cycles counted without any event, e.g. upgrades of lines the LLC holds, stay
/// in it too).
fn parts(a: &Sums, b: &Sums) -> [f64; 3] {
    let base = a.cpi();
    let ca = if a.events > 0.0 { a.cost() } else { b.cost() };
    let cb = if b.events > 0.0 { b.cost() } else { ca };
    let count = 100.0 * (b.epi() - a.epi()) * ca / base;
    let price = 100.0 * b.epi() * (cb - ca) / base;
    let whole = 100.0 * (b.cpi() - a.cpi()) / base;
    [count, price, whole - count - price]
}

/// One program's row: per-pair values of each column.
#[derive(Debug, Default)]
struct ProgramSeeds {
    /// Its threads (the most in any pair, side A).
    threads: usize,
    /// Events per 1,000 instructions in A and in B.
    epki: (Vec<f64>, Vec<f64>),
    /// Their change in percent (pairs with events in A; no change where neither has).
    epki_change: Vec<f64>,
    /// Stall cycles per event in A and in B.
    cost: (Vec<f64>, Vec<f64>),
    /// Percent of A's cycles stalled on the event.
    share: Vec<f64>,
    /// CPI change in percent.
    cpi_change: Vec<f64>,
    /// (a), (b) and the rest, in percent of A's CPI.
    parts: [Vec<f64>; 3],
}

/// The whole decomposition of B against A.
#[derive(Debug)]
pub struct Decomposition {
    /// The event.
    pub event: Event,
    /// Runs paired: mix (empty for a single mix) and seed.
    pub seeds: Vec<Key>,
    /// Programs in both sides of some pair, in order of first appearance in A.
    programs: Vec<(String, ProgramSeeds)>,
    /// Per pair: throughput change, who ran, (a), (b), rest, all in percent of A's
    /// throughput; or why the throughput is not taken apart (the first pair that could
    /// not be: different threads, an empty window).
    throughput: std::result::Result<[Vec<f64>; 5], String>,
    /// Programs left out of a pair because they did not run in one side's window.
    skipped: Vec<String>,
}

/// The program names of a run's threads, in order of first appearance.
fn program_order(r: &RunResult) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for t in &r.threads {
        if !v.contains(&t.name) {
            v.push(t.name.clone());
        }
    }
    v
}

/// A run's programs' sums.
fn by_program(r: &RunResult, e: Event) -> BTreeMap<String, (usize, Sums)> {
    let mut m: BTreeMap<String, (usize, Sums)> = BTreeMap::new();
    for t in &r.threads {
        let x = m.entry(t.name.clone()).or_default();
        x.0 += 1;
        x.1.add(Sums::of(&t.counters, e));
    }
    m
}

/// Takes B against A apart, pair by pair, over the (mix, seed) pairs both have; `only`
/// keeps those programs in the table (all programs in both sides of some pair when
/// empty). A program enters a pair's statistics where both sides of that pair run it.
pub fn decompose(
    a: &BTreeMap<Key, RunResult>,
    b: &BTreeMap<Key, RunResult>,
    event: Event,
    only: &[String],
) -> Result<Decomposition> {
    let seeds: Vec<Key> = a.keys().filter(|s| b.contains_key(s)).cloned().collect();
    if seeds.is_empty() {
        return Err(invalid!(
            "the two sides have no (mix, seed) in common (A: {}, B: {})",
            show_keys(a.keys()),
            show_keys(b.keys())
        ));
    }
    let mut names: Vec<String> = Vec::new();
    for s in &seeds {
        let in_b = program_order(&b[s]);
        for n in program_order(&a[s]) {
            if in_b.contains(&n) && !names.contains(&n) {
                names.push(n);
            }
        }
    }
    if !only.is_empty() {
        if let Some(missing) = only.iter().find(|n| !names.contains(n)) {
            return Err(invalid!(
                "program '{missing}' is not in both sides (in both: {})",
                names.join(", ")
            ));
        }
        names.retain(|n| only.contains(n));
    }
    if names.is_empty() {
        return Err(invalid!("the two sides have no program in common"));
    }
    let mut programs: Vec<(String, ProgramSeeds)> = names
        .iter()
        .map(|n| (n.clone(), ProgramSeeds::default()))
        .collect();
    let mut skipped = Vec::new();
    let mut throughput: std::result::Result<[Vec<f64>; 5], String> = Ok(Default::default());
    for key in &seeds {
        let s = show_key(key);
        let (ra, rb) = (&a[key], &b[key]);
        let (pa, pb) = (by_program(ra, event), by_program(rb, event));
        for (name, row) in &mut programs {
            let (Some(&(n, x)), Some(&(_, y))) = (pa.get(name), pb.get(name)) else {
                // not in this pair on both sides (another mix's program)
                continue;
            };
            if !x.usable() || !y.usable() {
                // it did not run in one side's window: nothing per instruction to compare
                skipped.push(format!("{name} in {s}"));
                continue;
            }
            row.threads = row.threads.max(n);
            row.epki.0.push(1000.0 * x.epi());
            row.epki.1.push(1000.0 * y.epi());
            if x.events > 0.0 {
                row.epki_change.push(100.0 * (y.epi() / x.epi() - 1.0));
            } else if y.events == 0.0 {
                row.epki_change.push(0.0);
            }
            row.cost.0.push(x.cost());
            row.cost.1.push(y.cost());
            row.share.push(100.0 * x.stall / x.cycles);
            row.cpi_change.push(100.0 * (y.cpi() / x.cpi() - 1.0));
            for (v, p) in row.parts.iter_mut().zip(parts(&x, &y)) {
                v.push(p);
            }
        }
        if let Ok(t) = &mut throughput {
            match machine(ra, rb, event) {
                Ok(split) => {
                    for (v, x) in t.iter_mut().zip(split) {
                        v.push(x);
                    }
                }
                Err(why) => {
                    throughput = Err(format!(
                        "{s}: {why}, so the machine's throughput is not taken apart"
                    ))
                }
            }
        }
    }
    Ok(Decomposition {
        event,
        seeds,
        programs,
        throughput,
        skipped,
    })
}

/// One pair's throughput split, in percent of A's instructions per second: the whole
/// change, who ran, (a), (b), rest; or why it cannot be split.
fn machine(ra: &RunResult, rb: &RunResult, event: Event) -> std::result::Result<[f64; 5], String> {
    let same_threads = ra.threads.len() == rb.threads.len()
        && ra
            .threads
            .iter()
            .zip(&rb.threads)
            .all(|(x, y)| x.id == y.id && x.name == y.name);
    if !same_threads {
        return Err("the two sides' threads differ (ids or programs)".into());
    }
    let (ta, tb) = (ra.measured_ms, rb.measured_ms);
    if !(ta.is_finite() && ta > 0.0 && tb.is_finite() && tb > 0.0) {
        return Err(format!("a measured window of {ta} or {tb} ms"));
    }
    // instructions per ms of the window
    let ips = |r: &RunResult, t: f64| {
        r.threads
            .iter()
            .map(|x| x.counters.instructions as f64)
            .sum::<f64>()
            / t
    };
    let (ips_a, ips_b) = (ips(ra, ta), ips(rb, tb));
    if ips_a <= 0.0 {
        return Err("A retired no instruction".into());
    }
    let mut who = 0.0;
    let mut speed = [0.0; 3];
    for (x, y) in ra.threads.iter().zip(&rb.threads) {
        let (sx, sy) = (Sums::of(&x.counters, event), Sums::of(&y.counters, event));
        if !sx.usable() || !sy.usable() {
            // a thread that did not run on one side: all of its change is who ran
            who += sy.instructions / tb - sx.instructions / ta;
            continue;
        }
        // cycles per ms of the window
        let (wa, wb) = (sx.cycles / ta, sy.cycles / tb);
        who += (wb - wa) / sx.cpi();
        // w_b (1/cpi_b − 1/cpi_a) = −w_b ΔCPI / (cpi_a cpi_b), ΔCPI = Σ parts · cpi_a / 100
        let k = -wb / sy.cpi() / 100.0;
        for (acc, p) in speed.iter_mut().zip(parts(&sx, &sy)) {
            *acc += k * p;
        }
    }
    let pct = |v: f64| 100.0 * v / ips_a;
    Ok([
        100.0 * (ips_b / ips_a - 1.0),
        pct(who),
        pct(speed[0]),
        pct(speed[1]),
        pct(speed[2]),
    ])
}

impl Decomposition {
    /// The report, in Markdown: `a` and `b` name the two sides.
    pub fn render(&self, a: &str, b: &str) -> String {
        let ms = |v: &[f64], unit: &str| show(over_seeds(v), unit);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "B = {b} against A = {a}, paired by mix and seed over {} pair(s) ({}); event: {} \
             ({}). Means over the pairs with 95% intervals.\n",
            self.seeds.len(),
            show_keys(self.seeds.iter()),
            self.event.name(),
            self.event.describe()
        );
        match &self.throughput {
            Ok(t) => {
                let _ = writeln!(
                    s,
                    "Throughput (instructions per second, all threads): {} = who ran {} + \
                     (a) event count {} + (b) cost per event {} + rest {}.\n",
                    ms(&t[0], "%"),
                    ms(&t[1], "%"),
                    ms(&t[2], "%"),
                    ms(&t[3], "%"),
                    ms(&t[4], "%")
                );
            }
            Err(why) => {
                let _ = writeln!(s, "{why}.\n");
            }
        }
        s.push_str(
            "| program | threads | events / 1k instr. A → B | change | stall cycles per event \
             A → B | stall share of cycles, A | CPI change | (a) event count | (b) cost per \
             event | rest |\n|---|---:|---|---:|---|---:|---:|---:|---:|---:|\n",
        );
        for (name, p) in &self.programs {
            let m = |v: &[f64]| over_seeds(v).0;
            let _ = writeln!(
                s,
                "| {name} | {} | {} → {} | {} | {} → {} | {} | {} | {} | {} | {} |",
                p.threads,
                fmt3(m(&p.epki.0)),
                fmt3(m(&p.epki.1)),
                ms(&p.epki_change, "%"),
                fmt1(m(&p.cost.0)),
                fmt1(m(&p.cost.1)),
                ms(&p.share, "%"),
                ms(&p.cpi_change, "%"),
                ms(&p.parts[0], "%"),
                ms(&p.parts[1], "%"),
                ms(&p.parts[2], "%"),
            );
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(
                s,
                "\nLeft out, not having run in one side's measured window: {}.",
                self.skipped.join(", ")
            );
        }
        s.push_str(
            "\nEach program's CPI change is exactly (a) + (b) + rest, in percent of its CPI in \
             A: (a) the change in events per instruction at A's price per event, (b) the \
             change in that price at B's count, the rest everything else (pipeline sharing, \
             hits in the inner caches, the store buffer).\n",
        );
        s
    }
}

/// A pair's key as reports show it: `seed N`, or `MIX seed N`.
fn show_key((mix, seed): &Key) -> String {
    if mix.is_empty() {
        format!("seed {seed}")
    } else {
        format!("{mix} seed {seed}")
    }
}

/// Keys as a list: seeds alone for a single mix, else `MIX/SEED`.
fn show_keys<'a>(keys: impl Iterator<Item = &'a Key>) -> String {
    keys.map(|(m, s)| {
        if m.is_empty() {
            s.to_string()
        } else {
            format!("{m}/{s}")
        }
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// Three significant-ish decimals for small rates.
fn fmt3(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "n/a".into()
    }
}

/// One decimal.
fn fmt1(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "n/a".into()
    }
}

/// Loads both sides and takes B apart against A: the command `cachesched decompose`.
pub fn run(a: &Side, b: &Side, kb: Option<u64>, event: Event, only: &[String]) -> Result<String> {
    let (ra, rb) = (load_side(a, kb)?, load_side(b, kb)?);
    let d = decompose(&ra, &rb, event, only)?;
    let name = |x: &Side| format!("{} in {}", x.variant, display(&x.dir));
    Ok(d.render(&name(a), &name(b)))
}

/// A directory as reports show it.
fn display(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(i: u64, c: u64, misses: u64, stall: u64) -> Counters {
        Counters {
            instructions: i,
            cycles: c,
            llc_misses: misses,
            data_stall_dram_cycles: stall,
            ..Default::default()
        }
    }

    fn run(threads: &[(&str, Counters)], ms: f64) -> RunResult {
        crate::results::fixture::run(1, ms, threads)
    }

    #[test]
    fn parts_add_up_and_separate_count_from_price() {
        // 1,000 instructions, 2,000 cycles of which 1,000 stalled on 10 misses (100 each)
        let a = Sums::of(&counters(1000, 2000, 10, 1000), Event::Llc);
        // twice the misses at the same price: CPI 3.0, a +50% change all from (a)
        let b = Sums::of(&counters(1000, 3000, 20, 2000), Event::Llc);
        let p = parts(&a, &b);
        assert!((p[0] - 50.0).abs() < 1e-9, "{p:?}");
        assert!(p[1].abs() < 1e-9 && p[2].abs() < 1e-9, "{p:?}");
        // the same misses at twice the price: all from (b)
        let c = Sums::of(&counters(1000, 3000, 10, 2000), Event::Llc);
        let p = parts(&a, &c);
        assert!((p[1] - 50.0).abs() < 1e-9 && p[0].abs() < 1e-9, "{p:?}");
        // both, plus 100 cycles of pipeline: the parts sum to the whole change
        let d = Sums::of(&counters(1000, 4100, 15, 3000), Event::Llc);
        let p = parts(&a, &d);
        let whole = 100.0 * (d.cpi() / a.cpi() - 1.0);
        assert!(
            (p.iter().sum::<f64>() - whole).abs() < 1e-9,
            "{p:?} vs {whole}"
        );
        assert!((p[0] - 25.0).abs() < 1e-9, "{p:?}"); // 5 more misses × 100 / 2.0 CPI
        assert!((p[2] - 5.0).abs() < 1e-9, "{p:?}"); // 100 cycles / 1000 instr / 2.0
    }

    #[test]
    fn throughput_splits_into_who_ran_and_how_fast() {
        // A: two threads with equal cycles, the fast one CPI 1, the slow one CPI 2
        let a = run(
            &[
                ("fast", counters(1000, 1000, 0, 0)),
                ("slow", counters(500, 1000, 5, 500)),
            ],
            1.0,
        );
        // B: the fast thread runs more (1,500 cycles against 500), nobody's CPI changes
        let b = run(
            &[
                ("fast", counters(1500, 1500, 0, 0)),
                ("slow", counters(250, 500, 2, 250)),
            ],
            1.0,
        );
        let one = |r| BTreeMap::from([((String::new(), 1u64), r)]);
        let d = decompose(&one(a.clone()), &one(b), Event::Llc, &[]).unwrap();
        let t = d.throughput.as_ref().unwrap();
        // 1,500 → 1,750 instructions per ms: +16.7%, all of it who ran
        assert!((t[0][0] - 100.0 / 6.0).abs() < 1e-9, "{t:?}");
        assert!((t[1][0] - t[0][0]).abs() < 1e-9, "{t:?}");
        // the slow thread's misses per instruction fell (10 → 8 per 1k) at a higher
        // price (100 → 125): (a) and (b) cancel in its CPI, which is unchanged
        // (a) = (8 − 10)/1k × 100 / CPI 2 = −10%, (b) = 8/1k × 25 / 2 = +10%
        let slow = &d.programs[1].1;
        assert!((slow.parts[0][0] + 10.0).abs() < 1e-9, "{:?}", slow.parts);
        assert!((slow.parts[1][0] - 10.0).abs() < 1e-9, "{:?}", slow.parts);
        // B made slower by misses only: (a) carries the whole throughput change
        let c = run(
            &[
                ("fast", counters(500, 1000, 5, 500)),
                ("slow", counters(500, 1000, 5, 500)),
            ],
            1.0,
        );
        let d = decompose(&one(a), &one(c), Event::Llc, &[]).unwrap();
        let t = d.throughput.clone().unwrap();
        assert!((t[0][0] + 100.0 / 3.0).abs() < 1e-9, "{t:?}");
        assert!(
            (t[2][0] - t[0][0]).abs() < 1e-9 && t[1][0].abs() < 1e-9,
            "{t:?}"
        );
        let r = d.render("a", "b");
        assert!(r.contains("| fast | 1 | 0.000 → 10.000 |"), "{r}");
    }

    /// Pooled mixes: a program enters the pairs of the mixes that run it, and each
    /// pair's throughput is taken apart on its own. Fails if a program of one mix
    /// were required in every mix, or a mix's pairs were dropped.
    #[test]
    fn pooled_mixes_pair_each_program_where_it_runs() {
        let c = |m| counters(1000, 2000, m, 10 * m);
        let a = BTreeMap::from([
            (
                ("m1".to_string(), 1),
                run(&[("x", c(10)), ("y", c(20))], 1.0),
            ),
            (
                ("m2".to_string(), 1),
                run(&[("x", c(10)), ("z", c(30))], 1.0),
            ),
        ]);
        let b = BTreeMap::from([
            (
                ("m1".to_string(), 1),
                run(&[("x", c(5)), ("y", c(20))], 1.0),
            ),
            (
                ("m2".to_string(), 1),
                run(&[("x", c(15)), ("z", c(30))], 1.0),
            ),
        ]);
        let d = decompose(&a, &b, Event::Llc, &[]).unwrap();
        let names: Vec<&str> = d.programs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x", "y", "z"]);
        let x = &d.programs[0].1;
        assert_eq!(x.epki_change.len(), 2);
        assert!((x.epki_change[0] + 50.0).abs() < 1e-9 && (x.epki_change[1] - 50.0).abs() < 1e-9);
        assert_eq!(d.programs[1].1.epki_change.len(), 1);
        assert_eq!(d.throughput.as_ref().unwrap()[0].len(), 2);
        assert!(d.render("a", "b").contains("m1/1, m2/1"));
    }

    /// Both identities hold to rounding over counters drawn at random, zeros included
    /// (no events on a side, stall cycles without events, a thread that did not run):
    /// each program's (a) + (b) + rest is its CPI change, and who ran + (a) + (b) +
    /// rest is the machine's throughput change. Fails if any case breaks either.
    #[test]
    fn both_identities_hold_over_random_counters() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for case in 0..400 {
            let mut side = |_: ()| {
                let threads: Vec<(&str, Counters)> = ["p", "q", "r"]
                    .into_iter()
                    .map(|n| {
                        let i = if next(10) == 0 { 0 } else { 1 + next(100_000) };
                        let c = if i == 0 { 0 } else { i / 2 + next(400_000) };
                        let misses = if next(4) == 0 { 0 } else { next(i / 10 + 1) };
                        let stall = next(c / 2 + 1);
                        (n, counters(i, c, misses, stall))
                    })
                    .collect();
                run(&threads, 1.0 + next(3) as f64)
            };
            let (a, b) = (side(()), side(()));
            let key = (String::new(), 1u64);
            let d = decompose(
                &BTreeMap::from([(key.clone(), a)]),
                &BTreeMap::from([(key, b)]),
                Event::Llc,
                &[],
            )
            .unwrap();
            for (name, p) in &d.programs {
                for k in 0..p.cpi_change.len() {
                    let sum: f64 = (0..3).map(|j| p.parts[j][k]).sum();
                    let tol = 1e-9 * p.cpi_change[k].abs().max(1.0);
                    assert!(
                        (sum - p.cpi_change[k]).abs() < tol,
                        "case {case}, {name}: {p:?}"
                    );
                }
            }
            if let Ok(t) = &d.throughput {
                let sum: f64 = (1..5).map(|j| t[j][0]).sum();
                let tol = 1e-9 * t[0][0].abs().max(1.0);
                assert!((sum - t[0][0]).abs() < tol, "case {case}: {t:?}");
            }
        }
    }

    #[test]
    fn different_threads_give_no_throughput_and_unknown_programs_are_refused() {
        let a = run(&[("x", counters(1000, 2000, 10, 1000))], 1.0);
        let b = run(
            &[
                ("x", counters(1000, 2000, 10, 1000)),
                ("y", counters(1000, 2000, 10, 1000)),
            ],
            1.0,
        );
        let one = |r| BTreeMap::from([((String::new(), 1u64), r)]);
        let d = decompose(&one(a.clone()), &one(b.clone()), Event::Llc, &[]).unwrap();
        assert!(d.throughput.is_err() && d.programs.len() == 1);
        let e = decompose(&one(a.clone()), &one(b), Event::Llc, &["y".into()]);
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("'y' is not in both sides"));
        let other_seed = BTreeMap::from([((String::new(), 2u64), a.clone())]);
        let e = decompose(&one(a), &other_seed, Event::Llc, &[]).unwrap_err();
        assert!(e.to_string().contains("no (mix, seed) in common"), "{e}");
    }
}
