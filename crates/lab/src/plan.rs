//! What a reproduction will cost before it runs (`reproduce PAPER --plan`), and the
//! re-keying of runs made before model versions (`reproduce PAPER --rekey-from`).
//!
//! The estimate is measured, not guessed: for each machine the plan uses (and each set
//! of traces replayed on it, `machine_of`), one of its runs is set up and simulated for
//! a short calibration window on this host with this build, and the worker-time of a
//! run is its set-up (reading and checking its traces, building the machine) plus its
//! simulated time at that rate. The two are timed apart: a run of a real program's
//! trace reads and decompresses half a gigabyte first, which counted inside a 20 ms
//! window would multiply into every simulated second. The rate of a machine depends on
//! its mix (threads, miss rates), so the estimate is within tens of percent, enough to
//! decide between minutes, hours and days. A run whose window ends by its quanta
//! (`stop_after_quanta`) or when its work segments complete (`stop_after_segments`) is
//! counted at the mean length of the runs of the same configuration with other seeds
//! that the run cache holds; when it holds none and the window ends by quanta, at the
//! mean length of the same variant's cached runs in the file's other mixes (said: such
//! a window lasts about as long in every mix of a file, its length set by the
//! variant's slices and the threads per CPU, which a file's mixes share; a window that
//! ends with the work segments depends on the mix's programs); else at its whole
//! duration (an upper bound, said).

use crate::error::{Error, Result, ResultExt};
use crate::scenario::Planned;
use cachesched_sim::SimConfig;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

/// Simulated milliseconds of a calibration run: long enough for a rate (the caches
/// fill in the first milliseconds), short enough that a plan of ten machines costs
/// well under a minute.
const CALIBRATION_MS: f64 = 20.0;

/// What a run of one machine and mix costs on this host ([`calibrate`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rate {
    /// Worker-seconds to set a run up (configuration resolved, traces read, machine
    /// built), before its first simulated instant.
    pub setup_s: f64,
    /// Worker-seconds per simulated second after that.
    pub per_sim_s: f64,
}

impl Rate {
    /// Worker-seconds of `runs` runs that simulate `sim_s` seconds in all.
    pub fn worker_s(&self, runs: usize, sim_s: f64) -> f64 {
        runs as f64 * self.setup_s + sim_s * self.per_sim_s
    }
}

/// One scenario file of a plan: its runs, those the run cache holds, and their
/// simulated time.
struct FileCost {
    /// `PAPER/FILE`.
    name: String,
    /// Distinct runs (configurations that repeat run once).
    runs: usize,
    /// Of them, those the run cache already holds.
    cached: usize,
    /// Distinct solo reference runs its metrics need, and those the solo cache holds.
    solo: (usize, usize),
    /// The runs still to make (solo runs included), per machine name ([`machine_of`]):
    /// how many (each is set up once, [`Rate::setup_s`]) and their simulated seconds.
    pending: BTreeMap<String, Pending>,
    /// Of the runs to make, those whose window ends by their quanta or their work
    /// segments ([`SimConfig::stop_after_quanta`],
    /// [`SimConfig::stop_after_segments`]) and that neither a run of the same
    /// configuration with another seed ([`sibling_ms`]) nor, for a window ended by
    /// quanta, the same variant's runs in other mixes ([`variant_ms`]) tell the length
    /// of: counted at their whole duration, an upper bound.
    bounded: usize,
    /// Of the runs to make whose window ends by their quanta and that no run of the
    /// same configuration tells the length of, those counted at the mean length of
    /// the same variant's cached runs in the file's other mixes ([`variant_ms`]).
    from_mixes: usize,
    /// The simulated seconds of the longest run to make, per machine name, of the runs
    /// (`[0]`) and of the solo runs (`[1]`): on a large cluster, a file takes at least
    /// its longest run per round.
    longest_s: [BTreeMap<String, f64>; 2],
    /// Rounds of runs the file makes at most: 1, or with seeds added one at a time, one
    /// per seed from the first seeds' round on.
    rounds: usize,
    /// Mixes whose metrics need solo runs: with the Slurm executor, each makes its
    /// solo runs as an array of its own, after the runs.
    solo_mixes: usize,
}

/// Runs of one machine still to make ([`FileCost::pending`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Pending {
    /// How many.
    runs: usize,
    /// Their simulated seconds in all.
    sim_s: f64,
}

impl FileCost {
    /// Simulated seconds of the runs still to make (a sum of no terms is -0.0, hence
    /// the 0.0 +).
    fn sim_s(&self) -> f64 {
        0.0 + self.pending.values().map(|p| p.sim_s).sum::<f64>()
    }

    /// Worker-seconds of the runs still to make, at each machine's `rate`: each run's
    /// set-up and its simulated time.
    fn worker_s(&self, rate: &BTreeMap<String, Rate>) -> f64 {
        0.0 + self
            .pending
            .iter()
            .map(|(m, p)| rate[m].worker_s(p.runs, p.sim_s))
            .sum::<f64>()
    }
}

/// The name a plan groups runs by: the machine's name, with its LLC size (a sweep's
/// points run at different rates), whether it is a solo run (one thread, a rate of its
/// own), and the traces its threads replay (named by their files' first word: reading
/// them is most of a run's set-up, seconds for a real program's, milliseconds for a
/// profile's mix).
pub(crate) fn machine_of(cfg: &SimConfig) -> Result<String> {
    let m = cfg.machine.resolve()?;
    let llc = m
        .caches
        .iter()
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or_default();
    let solo = if cfg.threads.len() == 1 && cfg.threads[0].count == 1 {
        ", solo"
    } else {
        ""
    };
    let traces: std::collections::BTreeSet<String> = cfg
        .threads
        .iter()
        .filter_map(|g| g.trace.as_deref())
        .map(|t| {
            let file = std::path::Path::new(t)
                .file_name()
                .map_or_else(|| t.to_string(), |f| f.to_string_lossy().into_owned());
            file.split(['-', '.'])
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let traces = if traces.is_empty() {
        String::new()
    } else {
        format!(", traces {}", Vec::from_iter(traces).join("+"))
    };
    Ok(format!("{} ({} KiB{solo}{traces})", m.name, llc >> 10))
}

/// What a run of `cfg`'s machine and mix costs on this host: `cfg` set up
/// ([`set_up`]), timed, then simulated for [`CALIBRATION_MS`] (no warm-up, and no
/// early end: a run that stopped before them would be divided by time it did not
/// simulate), timed apart.
pub(crate) fn calibrate(cfg: &SimConfig) -> Result<Rate> {
    let c = SimConfig {
        duration_ms: CALIBRATION_MS,
        warmup_ms: 0.0,
        stop_after_quanta: None,
        stop_after_segments: false,
        ..cfg.clone()
    };
    let t0 = Instant::now();
    let sim = set_up(&c)?;
    let t1 = Instant::now();
    sim.run(&mut |_| true)?;
    Ok(Rate {
        setup_s: (t1 - t0).as_secs_f64(),
        per_sim_s: t1.elapsed().as_secs_f64() / (CALIBRATION_MS / 1e3),
    })
}

/// A run of `cfg` built and prepared: everything a run does before its first simulated
/// instant, which [`calibrate`] times as its set-up. Preparing matters: a real
/// program's trace thread decodes its trace up to its seeded start point then (seconds
/// per thread), and counted inside the calibration's 20 ms that would multiply into
/// every simulated second (it did from e3388a8, which moved that decoding from
/// building to running, until 2026-12-07: fig6-4c16m-real was calibrated at 792
/// worker-s per simulated s, where its mix01 runs took 346).
fn set_up(cfg: &SimConfig) -> Result<cachesched_sim::Simulation> {
    let mut sim = cachesched_sim::Simulation::new(cfg, cachesched_sim::build_chain(cfg))?;
    sim.prepare();
    Ok(sim)
}

/// What the run cache says of window lengths, kept so that a second plan of the same
/// files ([`costs`] at most and at the minimum) reads no cached run again.
#[derive(Default)]
struct Lengths {
    /// [`sibling_ms`] of each configuration (keyed with seed 0).
    by_config: HashMap<u64, Option<f64>>,
    /// [`variant_ms`] of each file (`PAPER/FILE`) and variant.
    by_variant: HashMap<(String, Variant), Option<f64>>,
}

/// The costs of `files` (each `PAPER/FILE` with its planned mixes), counting the jobs
/// `keep` accepts, and the first pending configuration of each machine (to calibrate
/// on), added to `probes`; `lengths` keeps what the run cache said of window lengths.
fn costs(
    files: &[(String, &[Planned])],
    keep: &dyn Fn(&Planned, &crate::scenario::Job) -> bool,
    probes: &mut BTreeMap<String, SimConfig>,
    lengths: &mut Lengths,
) -> Result<Vec<FileCost>> {
    let mut seen = HashSet::new();
    let mut seen_solo = HashSet::new();
    let mut costs = Vec::new();
    for (name, planned) in files {
        let mut fc = FileCost {
            name: name.clone(),
            runs: 0,
            cached: 0,
            solo: (0, 0),
            pending: BTreeMap::new(),
            bounded: 0,
            from_mixes: 0,
            longest_s: [BTreeMap::new(), BTreeMap::new()],
            rounds: planned
                .iter()
                .map(|p| p.sc.seeds.len() + 1 - p.sc.first_seeds().max(1))
                .max()
                .unwrap_or(1),
            solo_mixes: planned.iter().filter(|p| p.sc.wants_solo()).count(),
        };
        let mut pending =
            |cfg: &SimConfig, job: Option<Variant>, fc: &mut FileCost| -> Result<()> {
                let solo = job.is_none();
                let m = machine_of(cfg)?;
                let ms = counted_ms(cfg, job, name, planned, lengths, fc)?;
                let p = fc.pending.entry(m.clone()).or_default();
                p.runs += 1;
                p.sim_s += ms / 1e3;
                let longest = fc.longest_s[usize::from(solo)]
                    .entry(m.clone())
                    .or_default();
                *longest = longest.max(ms / 1e3);
                probes.entry(m).or_insert_with(|| cfg.clone());
                Ok(())
            };
        for p in planned.iter() {
            let jobs: Vec<&crate::scenario::Job> = p.jobs.iter().filter(|j| keep(p, j)).collect();
            for j in &jobs {
                let k = crate::caches::config_key(&j.cfg)?;
                if !seen.insert(k) {
                    continue;
                }
                fc.runs += 1;
                if crate::caches::runs::holds(k)? {
                    fc.cached += 1;
                } else {
                    pending(&j.cfg, Some((j.variant, j.llc_kb)), &mut fc)?;
                }
            }
            if !p.sc.wants_solo() {
                continue;
            }
            let cfgs: Vec<&SimConfig> = jobs.iter().map(|j| &j.cfg).collect();
            let (distinct, _) = crate::caches::solo::plan(&cfgs)?;
            let held = crate::caches::solo::cached(distinct.keys().copied())?;
            for (k, cfg) in &distinct {
                if !seen_solo.insert(*k) {
                    continue;
                }
                fc.solo.0 += 1;
                if held.contains_key(k) {
                    fc.solo.1 += 1;
                } else {
                    pending(cfg, None, &mut fc)?;
                }
            }
        }
        costs.push(fc);
    }
    Ok(costs)
}

/// A variant of a file (its index) at a sweep point (the LLC size, if swept).
type Variant = (usize, Option<u64>);

/// The simulated ms a run of `cfg` still to make is counted at: its duration, unless
/// its window ends by its quanta or when its work segments complete. Then the mean
/// length of its cached siblings with other seeds ([`sibling_ms`], kept in `lengths`);
/// without any, for a window ended by quanta, the mean length of the cached runs of
/// its variant `job` in the mixes `planned` of file `file` ([`variant_ms`], kept in
/// `lengths`; counted in [`FileCost::from_mixes`]; not for a solo run, `job`
/// `None`, nor for a window ended by work segments, whose length depends on the mix's
/// programs); without any either, its duration, an upper bound (counted in
/// [`FileCost::bounded`]).
fn counted_ms(
    cfg: &SimConfig,
    job: Option<Variant>,
    file: &str,
    planned: &[Planned],
    lengths: &mut Lengths,
    fc: &mut FileCost,
) -> Result<f64> {
    if cfg.stop_after_quanta.is_none() && !cfg.stop_after_segments {
        return Ok(cfg.duration_ms);
    }
    let any_seed = crate::caches::config_key(&SimConfig {
        seed: 0,
        ..cfg.clone()
    })?;
    let known = match lengths.by_config.get(&any_seed) {
        Some(&l) => l,
        None => {
            let l = sibling_ms(cfg)?;
            lengths.by_config.insert(any_seed, l);
            l
        }
    };
    if let Some(l) = known {
        return Ok(l);
    }
    let from_mixes = match job {
        None => None,
        Some(_) if cfg.stop_after_quanta.is_none() => None,
        Some(v) => {
            let key = (file.to_string(), v);
            match lengths.by_variant.get(&key) {
                Some(&l) => l,
                None => {
                    let l = variant_ms(planned, v, &crate::caches::runs::load)?;
                    lengths.by_variant.insert(key, l);
                    l
                }
            }
        }
    };
    Ok(match from_mixes {
        Some(l) => {
            fc.from_mixes += 1;
            l
        }
        None => {
            fc.bounded += 1;
            cfg.duration_ms
        }
    })
}

/// Seeds tried for runs of the same configuration as one not yet made
/// ([`sibling_ms`]).
const SIBLING_SEEDS: u64 = 10;

/// The simulated ms of a run of `cfg` whose window ends early (by its quanta or its
/// work segments), from the runs of the same configuration with seeds 1 to
/// [`SIBLING_SEEDS`] that the run cache holds (its own seed's is not, or it would not
/// be made): their mean length ([`length_ms`]); `None` if it holds none.
fn sibling_ms(cfg: &SimConfig) -> Result<Option<f64>> {
    let mut lens = Vec::new();
    for seed in 1..=SIBLING_SEEDS {
        let k = crate::caches::config_key(&SimConfig {
            seed,
            ..cfg.clone()
        })?;
        if let Some(r) = crate::caches::runs::load(k)? {
            lens.push(length_ms(cfg, &r));
        }
    }
    Ok(mean(&lens))
}

/// The simulated ms of finished run `r` of `cfg`: its warm-up and measured window,
/// capped at its duration (a run that ends inside its warm-up counts its time from the
/// start as measured, and would otherwise have its warm-up counted twice).
fn length_ms(cfg: &SimConfig, r: &cachesched_sim::RunResult) -> f64 {
    (cfg.warmup_ms + r.measured_ms).min(cfg.duration_ms)
}

/// The mean of `xs`, `None` if there are none.
fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The simulated ms of the runs of variant `v.0` at sweep point `v.1` in `planned` (one
/// file's mixes) that the run cache holds (`load`, by configuration key) and whose
/// window ends by its quanta, whatever their mix and seed: their mean length
/// ([`length_ms`]); `None` if it holds none.
fn variant_ms(
    planned: &[Planned],
    v: Variant,
    load: &dyn Fn(u64) -> Result<Option<cachesched_sim::RunResult>>,
) -> Result<Option<f64>> {
    let mut lens = Vec::new();
    for p in planned {
        for j in p.jobs.iter().filter(|j| (j.variant, j.llc_kb) == v) {
            if j.cfg.stop_after_quanta.is_none() {
                continue;
            }
            if let Some(r) = load(crate::caches::config_key(&j.cfg)?)? {
                lens.push(length_ms(&j.cfg, &r));
            }
        }
    }
    Ok(mean(&lens))
}

/// Whether job `j` of `p` is one of the runs every variant makes first when seeds are
/// added one at a time (all of them when `p` runs every seed at once).
fn at_minimum(p: &Planned, j: &crate::scenario::Job) -> bool {
    p.sc.seeds
        .iter()
        .position(|&s| s == j.seed)
        .is_some_and(|r| r < p.sc.first_seeds())
}

/// `a` alone when it equals `b`, else `a–b`.
fn span<T: PartialEq + std::fmt::Display>(a: T, b: T) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}–{b}")
    }
}

/// Prints the plan of `files` (each `PAPER/FILE` with its planned mixes): runs, those
/// cached, simulated seconds and the estimated worker-time of the rest, per file and
/// in all, and the wall time on `workers` workers; each at the minimum (the first
/// seeds of every variant, where seeds are added one at a time) and at most (every
/// seed), as `min–max` where they differ.
pub fn print(files: &[(String, &[Planned])], workers: usize) -> Result<()> {
    let mut probes: BTreeMap<String, SimConfig> = BTreeMap::new();
    let mut lengths = Lengths::default();
    let most = costs(files, &|_, _| true, &mut probes, &mut lengths)?;
    let least = costs(files, &at_minimum, &mut probes, &mut lengths)?;
    let mut rate = BTreeMap::new();
    if !probes.is_empty() {
        println!(
            "calibrating {} machine(s) on this host ({CALIBRATION_MS} simulated ms each):",
            probes.len()
        );
    }
    for (m, cfg) in &probes {
        let r = calibrate(cfg).within(|| format!("calibrating {m}"))?;
        println!(
            "  {m}: {:.0} worker-s per simulated s, {:.2} s to set a run up",
            r.per_sim_s, r.setup_s
        );
        rate.insert(m.clone(), r);
    }
    let first: Vec<usize> = files
        .iter()
        .flat_map(|(_, p)| p.iter().filter(|p| p.sc.sequential()))
        .map(|p| p.sc.first_seeds())
        .collect();
    if let (Some(lo), Some(hi)) = (first.iter().min(), first.iter().max()) {
        println!(
            "\nSeeds are added one at a time: a file's runs lie between the first {} seeds of \
             every variant (min) and every seed (max), shown `min–max` where they differ.",
            span(lo, hi)
        );
    }
    println!(
        "\n| file | runs (not in an earlier file) | cached | to run | solo runs to run (of all) | simulated s to run | est. worker-h |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    // (simulated s, worker-s) of the pending runs of a file
    let work = |fc: &FileCost| -> (f64, f64) { (fc.sim_s(), fc.worker_s(&rate)) };
    // runs, cached, solo to run, solo, simulated s, worker-s: at the minimum and at most
    let mut all = [[0.0f64; 6]; 2];
    for (lo, hi) in least.iter().zip(&most) {
        let mut row = [[0.0f64; 6]; 2];
        for (k, fc) in [lo, hi].into_iter().enumerate() {
            let (s, w) = work(fc);
            row[k] = [
                fc.runs as f64,
                fc.cached as f64,
                (fc.solo.0 - fc.solo.1) as f64,
                fc.solo.0 as f64,
                s,
                w,
            ];
            for (t, x) in all[k].iter_mut().zip(row[k]) {
                *t += x;
            }
        }
        println!("{}", table_row(&hi.name, &row));
    }
    println!("{}", table_row("all", &all));
    let bounded: usize = most.iter().map(|fc| fc.bounded).sum();
    if bounded > 0 {
        println!(
            "\n{bounded} of the runs to make end their window by their quanta \
             (stop_after_quanta) or their work segments (stop_after_segments) and no \
             cached run of theirs with another seed tells \
             how long: counted at their whole duration, so their simulated seconds and \
             worker-hours are upper bounds"
        );
    }
    let from_mixes: usize = most.iter().map(|fc| fc.from_mixes).sum();
    if from_mixes > 0 {
        println!(
            "\n{from_mixes} of the runs to make end their window by their quanta and no \
             cached run of theirs with another seed tells how long: counted at the mean \
             length of the same variant's cached runs in the file's other mixes (an \
             estimate, not a bound)"
        );
    }
    let hours = |k: usize| all[k][5] / 3600.0;
    println!(
        "\nestimated: {} worker-hours, {} hours on {workers} worker(s) (rates measured \
         now on this host; a busy host runs slower)",
        span(format!("{:.2}", hours(0)), format!("{:.2}", hours(1))),
        span(
            format!("{:.2}", hours(0) / workers as f64),
            format!("{:.2}", hours(1) / workers as f64)
        )
    );
    if let crate::slurm::Executor::Slurm(s) = crate::slurm::executor() {
        print_cluster(&least, &most, &rate, s);
    }
    Ok(())
}

/// Seconds a Slurm array adds to a round beyond its tasks: `sbatch`, Slurm starting the
/// first tasks, and the submitting command noticing the end at its next look (5 s
/// apart by default). A 2-run experiment took 6.1 s longer through the single-node
/// Slurm of `scripts/slurm-single-node` than locally (docs/cluster.md); a busy
/// production cluster can queue an array for much longer.
const ARRAY_LATENCY_S: f64 = 6.0;

/// Seconds of a CPU an array task costs beyond its runs: Slurm starts the next task on
/// a freed CPU at its next scheduling pass, and the task starts the binary and reads
/// its manifest. On the single-node Slurm, tasks of sub-second runs started two at a
/// time every 3 s (docs/cluster.md).
const TASK_OVERHEAD_S: f64 = 3.0;

/// Prints the estimated wall time of the plan (`least`, `most`, at each machine's
/// `rate`) on 1, 4, 16 and 64 nodes of `s.node_cores` cores: per file,
/// its worker time (runs, solo runs, and each task's overhead, tasks sized as the
/// executor sizes them) spread over every core, but no less than its rounds one after
/// the other, each an array of runs at least as long as its longest run (and a task's
/// minute) and then, per mix that needs them, an array of solo runs at least as long as
/// its longest; each array with its latency. Files run one after the other, as
/// `reproduce` makes them.
fn print_cluster(
    least: &[FileCost],
    most: &[FileCost],
    rate: &BTreeMap<String, Rate>,
    s: &crate::slurm::SlurmSettings,
) {
    let wall = |fc: &FileCost, rounds: usize, cores: usize| -> f64 {
        let work = fc.worker_s(rate);
        let n = (fc.runs - fc.cached) + (fc.solo.0 - fc.solo.1);
        if work <= 0.0 || n == 0 {
            return 0.0;
        }
        let tasks = crate::slurm::task_count(n, work / n as f64, s.task_minutes, Some(cores));
        let longest = |k: usize| -> f64 {
            fc.longest_s[k]
                .iter()
                .map(|(m, x)| rate[m].worker_s(1, *x))
                .fold(0.0, f64::max)
        };
        let solo_stages = if fc.longest_s[1].is_empty() {
            0
        } else {
            fc.solo_mixes.max(1)
        };
        let spread = (work + tasks as f64 * TASK_OVERHEAD_S) / cores as f64;
        let round = longest(0).max(work.min(60.0)) + solo_stages as f64 * longest(1);
        spread.max(rounds as f64 * round) + (rounds * (1 + solo_stages)) as f64 * ARRAY_LATENCY_S
    };
    println!(
        "\non a Slurm cluster of nodes with {} cores (an estimate: each file's worker time \
         spread over every core, but no less than its rounds one after the other, each as \
         long as its longest run; tasks sized for about {} min; {ARRAY_LATENCY_S} s per \
         array and {TASK_OVERHEAD_S} s per task as measured on a single-node Slurm here; \
         queueing on a busy cluster not counted):\n\n| nodes | cores | est. hours |\n|---:|---:|---:|",
        s.node_cores, s.task_minutes
    );
    for nodes in [1usize, 4, 16, 64] {
        let cores = nodes * s.node_cores;
        let lo: f64 = least.iter().map(|fc| wall(fc, 1, cores)).sum();
        let hi: f64 = most.iter().map(|fc| wall(fc, fc.rounds, cores)).sum();
        println!(
            "| {nodes} | {cores} | {} |",
            span(format!("{:.2}", lo / 3600.0), format!("{:.2}", hi / 3600.0))
        );
    }
}

/// One row of the plan's table: `name`, then runs, cached, to run, solo runs to run
/// (of all), simulated s and worker-hours from `row`'s totals at the minimum and at
/// most (runs, cached, solo to run, solo, simulated s, worker-s).
fn table_row(name: &str, row: &[[f64; 6]; 2]) -> String {
    let [lo, hi] = row;
    let n = |k: usize| span(lo[k] as u64, hi[k] as u64);
    format!(
        "| {name} | {} | {} | {} | {} of {} | {} | {} |",
        n(0),
        n(1),
        span((lo[0] - lo[1]) as u64, (hi[0] - hi[1]) as u64),
        n(2),
        n(3),
        span(format!("{:.1}", lo[4]), format!("{:.1}", hi[4])),
        span(
            format!("{:.2}", lo[5] / 3600.0),
            format!("{:.2}", hi[5] / 3600.0)
        )
    )
}

/// Moves the runs of `planned` that a build before model versions made (keyed by the
/// hash of its sources, `source_hash`) to their keys under this build's model version,
/// in the run cache; returns (moved, already there, absent). Only for a build whose
/// model gives the same results as this one: the golden results of both must agree.
/// Runs that replay traces are counted absent and left where they are: their old keys
/// did not take in the trace's bytes, so nothing tells which recording they replayed.
pub fn rekey(planned: &[&Planned], source_hash: u64) -> Result<(usize, usize, usize)> {
    let dir = crate::caches::runs::cache_dir()?;
    let (mut moved, mut there, mut absent) = (0, 0, 0);
    let mut seen = HashSet::new();
    for j in planned.iter().flat_map(|p| &p.jobs) {
        let traced = j.cfg.threads.iter().any(|g| g.trace.is_some());
        // a configuration of traces is told apart by its JSON, whose key reads no file
        let new = if traced {
            crate::caches::key_from(crate::caches::model_key(), &j.cfg)?
        } else {
            crate::caches::config_key(&j.cfg)?
        };
        if !seen.insert(new) {
            continue;
        }
        if traced {
            absent += 1;
            continue;
        }
        let old = crate::caches::entry_path(&dir, crate::caches::key_from(source_hash, &j.cfg)?);
        let to = crate::caches::entry_path(&dir, new);
        if to.exists() {
            there += 1;
        } else if let Some(r) = crate::caches::runs::read_entry_of_old_build(&old) {
            // stored again under the new key (an entry holds its key), then the old removed
            crate::caches::runs::store(new, &r)?;
            std::fs::remove_file(&old).map_err(Error::io("cannot remove", &old))?;
            moved += 1;
        } else {
            absent += 1;
        }
    }
    Ok((moved, there, absent))
}

#[cfg(test)]
mod tests {
    use super::{machine_of, set_up, variant_ms, FileCost, Pending, Rate};
    use crate::error::Result;
    use cachesched_sim::SimConfig;
    use std::collections::{BTreeMap, HashMap};

    /// Runs that replay different traces are calibrated apart (their set-up differs by
    /// orders of magnitude), and a profile mix apart from both; copies and order do
    /// not matter.
    #[test]
    fn runs_are_grouped_by_the_traces_they_replay() {
        let cfg = |threads: &str| -> SimConfig {
            toml::from_str(&format!(
                "machine = \"clovertown-2x2\"\nduration_ms = 300\n{threads}"
            ))
            .unwrap()
        };
        let gap_cc1 = cfg(
            "[[threads]]\ncount = 2\ntrace = \"/c/gap-ad502934abb80152.cst.zst\"\n\
             [[threads]]\ntrace = \"/c/cc1-e3db3781d6e45fbe.cst\"\n",
        );
        let cc1_gap = cfg("[[threads]]\ntrace = \"/c/cc1-e3db3781d6e45fbe.cst\"\n\
             [[threads]]\ntrace = \"/c/gap-ad502934abb80152.cst.zst\"\n");
        let profiles =
            cfg("[[threads]]\ncount = 2\nprofile = \"gap\"\n[[threads]]\nprofile = \"gcc\"\n");
        let a = machine_of(&gap_cc1).unwrap();
        assert_eq!(a, "clovertown-2x2 (4096 KiB, traces cc1+gap)");
        assert_eq!(machine_of(&cc1_gap).unwrap(), a);
        assert_eq!(machine_of(&profiles).unwrap(), "clovertown-2x2 (4096 KiB)");
    }

    /// A file's worker time counts each run's set-up once and its simulated seconds at
    /// the rate: forty runs of a real-trace machine that take 2 s to set up and 100
    /// worker-s per simulated s, 0.3 s each, cost 80 + 1,200 s: the set-up is not spread
    /// over a calibration window and multiplied into every simulated second.
    #[test]
    fn set_up_is_counted_once_per_run() {
        let fc = FileCost {
            name: "affinity/x".into(),
            runs: 50,
            cached: 10,
            solo: (0, 0),
            pending: BTreeMap::from([
                (
                    "real".into(),
                    Pending {
                        runs: 40,
                        sim_s: 40.0 * 0.3,
                    },
                ),
                (
                    "model".into(),
                    Pending {
                        runs: 4,
                        sim_s: 2.0,
                    },
                ),
            ]),
            bounded: 0,
            from_mixes: 0,
            longest_s: [BTreeMap::new(), BTreeMap::new()],
            rounds: 1,
            solo_mixes: 0,
        };
        let rate = BTreeMap::from([
            (
                "real".to_string(),
                Rate {
                    setup_s: 2.0,
                    per_sim_s: 100.0,
                },
            ),
            (
                "model".to_string(),
                Rate {
                    setup_s: 0.01,
                    per_sim_s: 50.0,
                },
            ),
        ]);
        let w = fc.worker_s(&rate);
        assert!((w - (80.0 + 1200.0 + 0.04 + 100.0)).abs() < 1e-9, "{w}");
        // nothing to run, nothing to pay
        let empty = FileCost {
            pending: BTreeMap::new(),
            ..fc
        };
        assert_eq!(empty.worker_s(&rate), 0.0);
        assert_eq!(empty.sim_s(), 0.0);
    }

    /// A run of a file's variant that no run of its own configuration tells the length
    /// of is counted at the mean of what that variant's cached runs took in every mix:
    /// fig6-4c16m's slice-45ms cached as 900 and 1,000 ms windows in mix01 (seeds 1, 2)
    /// and 1,400 in mix02 (seed 1), each with its 300 ms warm-up and capped at the
    /// 1,500 ms duration, make (1,200 + 1,300 + 1,500) / 3 ms; slice-70ms's cached run
    /// (1,100 ms) does not count for it, and CFS, with none cached, has no estimate.
    /// Fails if another variant's runs count, if only one mix is read, or if the
    /// warm-up or the cap is left out (1,100, 1,250 or 1,400 ms).
    #[test]
    fn a_run_without_cached_siblings_is_counted_at_its_variants_length_in_other_mixes() {
        let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/timeslice/fig6-4c16m.toml");
        let sc = crate::experiment::parse(&f).unwrap();
        let at = |l: &str| sc.variants.iter().position(|v| v.label == l).unwrap();
        let (cfs, s45, s70) = (at("cfs"), at("slice-45ms"), at("slice-70ms"));
        let planned = sc.plan().unwrap();
        let mut cached = HashMap::new();
        for p in &planned {
            for j in &p.jobs {
                let ms = match (p.mix.as_deref(), j.variant, j.seed) {
                    (Some("mix01"), v, 1) if v == s45 => 900.0,
                    (Some("mix01"), v, 2) if v == s45 => 1_000.0,
                    (Some("mix02"), v, 1) if v == s45 => 1_400.0,
                    (Some("mix03"), v, 1) if v == s70 => 1_100.0,
                    _ => continue,
                };
                let k = crate::caches::config_key(&j.cfg).unwrap();
                cached.insert(k, crate::results::fixture::run(j.seed, ms, &[]));
            }
        }
        let load =
            |k: u64| -> Result<Option<cachesched_sim::RunResult>> { Ok(cached.get(&k).cloned()) };
        let ms = variant_ms(&planned, (s45, None), &load).unwrap().unwrap();
        assert!((ms - 4_000.0 / 3.0).abs() < 1e-9, "{ms}");
        assert_eq!(variant_ms(&planned, (cfs, None), &load).unwrap(), None);
        let ms70 = variant_ms(&planned, (s70, None), &load).unwrap().unwrap();
        assert!((ms70 - 1_400.0).abs() < 1e-9, "{ms70}");
    }

    /// What the calibration times as a run's set-up leaves it prepared: a real
    /// program's trace thread has decoded its trace up to its seeded start point, so
    /// that decoding is not divided by the 20 ms simulated after it. Fails if
    /// [`set_up`] stops preparing the simulation.
    #[test]
    fn the_calibrations_set_up_includes_preparing_the_threads() {
        let cfg: SimConfig = toml::from_str(
            "machine = \"clovertown-2x2\"\nduration_ms = 20\n[[threads]]\nprofile = \"gcc\"\n",
        )
        .unwrap();
        assert!(set_up(&cfg).unwrap().is_prepared());
        let built =
            cachesched_sim::Simulation::new(&cfg, cachesched_sim::build_chain(&cfg)).unwrap();
        assert!(!built.is_prepared());
    }
}
