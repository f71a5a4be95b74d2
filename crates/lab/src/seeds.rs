//! Seeds added one at a time (`cachesched reproduce`, neither `--quick` nor `--seeds`):
//! a run costs minutes to hours, and most comparisons are clear long before the last
//! seed, so each mix of a scenario file runs its first [`Scenario::first_seeds`] seeds
//! for every variant, then adds the next seed of `seeds` only to the comparisons still
//! undecided, until none is or the seeds run out.
//!
//! A *comparison* is a variant other than the baseline (variant 0) at a sweep point. It
//! is *undecided* while the 95% interval of its paired change against the baseline in
//! the scenario's headline metric (the first of `metrics`) contains zero, or while the
//! interval of the change a paper value gives for it (`change_pct`, against the value's
//! `against`) contains an edge of the paper's band (whether it lies inside the band is
//! still open), or while there is no interval yet. Adding a seed to a comparison runs
//! that seed for its variant and for the variants it is measured against, once each
//! (the baseline's runs are shared by every comparison at the point). Every variant's
//! seeds are thus a prefix of `seeds`, and a comparison is judged on every seed its
//! variant has. The seeds chosen depend only on the results, which are deterministic:
//! a repeated reproduction chooses the same runs and reads them from the run cache.

use crate::scenario::{Job, Planned, Scenario};

use crate::error::{invalid, Result};
use crate::stats::paired_change;
use cachesched_sim::RunResult;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// A variant at a sweep point: the unit a seed is added to.
type Key = (usize, Option<u64>);

/// Seeds of each variant at each sweep point (a prefix of the scenario's `seeds`).
type Counts = BTreeMap<Key, usize>;

/// One interval a comparison waits on.
struct Test {
    /// The variant the change is measured against.
    base: usize,
    /// The metric.
    metric: String,
    /// The paper's band (`None`: the headline's test, decided when zero is outside).
    band: Option<[f64; 2]>,
}

/// One comparison of a scenario's runs, as they stand.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The variant.
    pub variant: usize,
    /// The sweep point.
    pub point: Option<u64>,
    /// The seeds its variant ran at the point.
    pub seeds: usize,
    /// Whether every interval it waits on is clear of zero and of the paper's edges.
    pub decided: bool,
}

/// The sweep points of `sc` (`None` alone without a sweep).
fn points(sc: &Scenario) -> Vec<Option<u64>> {
    match &sc.sweep {
        Some(s) => s.llc_kb.iter().map(|&k| Some(k)).collect(),
        None => vec![None],
    }
}

/// Every comparison of `sc` with the intervals it waits on, point by point, variant by
/// variant: the headline change against the baseline for every variant but the
/// baseline, and each paper change of the variant at the point against its `against`.
fn tests(sc: &Scenario) -> Vec<(Key, Vec<Test>)> {
    let headline = &sc.metrics[0];
    let mut out = Vec::new();
    for p in points(sc) {
        for v in 0..sc.variants.len() {
            let mut ts = Vec::new();
            if v != 0 {
                ts.push(Test {
                    base: 0,
                    metric: headline.clone(),
                    band: None,
                });
            }
            for pv in &sc.paper {
                let Some(band) = pv.change_pct else { continue };
                let base = pv
                    .against
                    .as_deref()
                    .map_or(0, |a| crate::scenario::PaperValue::index(sc, a));
                if crate::scenario::PaperValue::index(sc, &pv.variant) == v
                    && base != v
                    && pv.points(sc).contains(&p)
                {
                    ts.push(Test {
                        base,
                        metric: pv.metric.clone(),
                        band: Some(band),
                    });
                }
            }
            if !ts.is_empty() {
                out.push(((v, p), ts));
            }
        }
    }
    out
}

/// Whether `t` of variant `v` at point `p` is still open in `runs` (the results of
/// `jobs`): no interval yet, or one that contains zero (the headline) or an edge of
/// the paper's band.
fn open(jobs: &[Job], runs: &[RunResult], (v, p): Key, t: &Test) -> bool {
    let (m, h) = paired_change(jobs, runs, (t.base, v), p, &t.metric);
    if !m.is_finite() || !h.is_finite() {
        return true;
    }
    let holds = |x: f64| m - h <= x && x <= m + h;
    match t.band {
        None => holds(0.0),
        Some([a, b]) => holds(a) || holds(b),
    }
}

/// The comparisons of `sc` as `runs` (the results of `jobs`, any seeds of each
/// variant) stand: each one's seeds and whether it is decided.
pub fn comparisons(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> Vec<Comparison> {
    tests(sc)
        .into_iter()
        .map(|((v, p), ts)| Comparison {
            variant: v,
            point: p,
            seeds: jobs
                .iter()
                .filter(|j| j.variant == v && j.llc_kb == p)
                .count(),
            decided: !ts.iter().any(|t| open(jobs, runs, (v, p), t)),
        })
        .collect()
}

/// Every variant at every point with the first seeds.
fn initial(sc: &Scenario) -> Counts {
    let k = sc.first_seeds();
    points(sc)
        .into_iter()
        .flat_map(|p| (0..sc.variants.len()).map(move |v| ((v, p), k)))
        .collect()
}

/// The counts after one more round: one seed more for each undecided comparison with
/// seeds left (judged on `runs`, the results of `jobs`, the runs of `counts`), then as
/// many for the variants each is measured against. Equal to `counts` when nothing is
/// left to add.
fn advance(sc: &Scenario, counts: &Counts, jobs: &[Job], runs: &[RunResult]) -> Counts {
    let n = sc.seeds.len();
    let mut next = counts.clone();
    for c in comparisons(sc, jobs, runs) {
        let k = (c.variant, c.point);
        if !c.decided && counts[&k] < n {
            next.insert(k, counts[&k] + 1);
        }
    }
    let tests = tests(sc);
    // a base needs every seed of the variants measured against it (and a base may be
    // measured against another, so until nothing moves)
    loop {
        let mut moved = false;
        for ((v, p), ts) in &tests {
            for t in ts {
                let need = next[&(*v, *p)];
                let have = next.get_mut(&(t.base, *p)).expect("every variant counted");
                if *have < need {
                    *have = need;
                    moved = true;
                }
            }
        }
        if !moved {
            return next;
        }
    }
}

/// The indices of the jobs of `sc` (`jobs`, [`Scenario::jobs`]) that `counts` runs.
fn select(sc: &Scenario, counts: &Counts, jobs: &[Job]) -> Vec<usize> {
    (0..jobs.len())
        .filter(|&i| {
            let j = &jobs[i];
            let rank = sc.seeds.iter().position(|&s| s == j.seed);
            rank.is_some_and(|r| r < counts[&(j.variant, j.llc_kb)])
        })
        .collect()
}

/// The jobs at `idx` of `jobs`, in order, and their results from `have`.
fn chosen(
    jobs: &[Job],
    idx: &[usize],
    have: &HashMap<usize, RunResult>,
) -> (Vec<Job>, Vec<RunResult>) {
    idx.iter()
        .map(|&i| (jobs[i].clone(), have[&i].clone()))
        .unzip()
}

/// The jobs the sequential rule keeps of `p`'s, in order, given results of some of
/// them: `result(i)` is the result of job `i` if there is one. `Err(i)`: the rule wants
/// job `i`, which has none.
fn rule(
    sc: &Scenario,
    all: &[Job],
    result: &dyn Fn(usize) -> Option<RunResult>,
) -> std::result::Result<Vec<usize>, usize> {
    let mut counts = initial(sc);
    loop {
        let idx = select(sc, &counts, all);
        let mut have = HashMap::new();
        for &i in &idx {
            have.insert(i, result(i).ok_or(i)?);
        }
        let (jobs, runs) = chosen(all, &idx, &have);
        let next = advance(sc, &counts, &jobs, &runs);
        if next == counts {
            return Ok(idx);
        }
        counts = next;
    }
}

/// A mix with the jobs it ran and their results.
pub type Ran = (Planned, Vec<RunResult>);

/// Runs the mixes of one file (`planned`) with seeds added one at a time: each round
/// runs every mix's new runs on `jobs` workers in one pool (read from the run cache
/// where it holds them, kept there as they finish), judges the comparisons, and adds a
/// seed where they are undecided. Returns each mix with the jobs it ran and their
/// results (solo references not attached), or `None` if interrupted.
pub fn run(planned: Vec<Planned>, jobs: Option<usize>) -> Result<Option<Vec<Ran>>> {
    let mut counts: Vec<Counts> = planned.iter().map(|p| initial(&p.sc)).collect();
    let mut have: Vec<HashMap<usize, RunResult>> = vec![HashMap::new(); planned.len()];
    for round in 1.. {
        let idx: Vec<Vec<usize>> = planned
            .iter()
            .zip(&counts)
            .map(|(p, c)| select(&p.sc, c, &p.jobs))
            .collect();
        let new: Vec<(usize, usize)> = idx
            .iter()
            .enumerate()
            .flat_map(|(pi, is)| is.iter().map(move |&i| (pi, i)))
            .filter(|(pi, i)| !have[*pi].contains_key(i))
            .collect();
        if new.is_empty() {
            break;
        }
        let cfgs: Vec<&cachesched_sim::SimConfig> = new
            .iter()
            .map(|&(pi, i)| &planned[pi].jobs[i].cfg)
            .collect();
        let label = |k: usize| {
            let (pi, i) = new[k];
            crate::runner::run_label(&planned[pi].sc, &planned[pi].jobs[i])
        };
        let workers = crate::runner::worker_count(jobs, cfgs.len());
        println!(
            "seeds, round {round}: {} runs of {} mix(es) on {workers} worker(s)",
            cfgs.len(),
            planned.len()
        );
        let Some(mut runs) = crate::runner::cached_or_run(&cfgs, &label, workers)? else {
            eprintln!("{}", crate::runner::halt_message());
            return Ok(None);
        };
        // a test on a metric against running alone needs the solo references
        for (pi, p) in planned.iter().enumerate() {
            if !tests(&p.sc)
                .iter()
                .flat_map(|(_, ts)| ts)
                .any(|t| crate::metrics::SOLO_METRICS.contains(&t.metric.as_str()))
            {
                continue;
            }
            let mine: Vec<usize> = (0..new.len()).filter(|&k| new[k].0 == pi).collect();
            let cfgs: Vec<&cachesched_sim::SimConfig> = mine.iter().map(|&k| cfgs[k]).collect();
            let mut rs: Vec<RunResult> = mine.iter().map(|&k| runs[k].clone()).collect();
            if crate::runner::attach_solo_runs(&cfgs, &mut rs, workers)?.is_none() {
                eprintln!("{}", crate::runner::halt_message());
                return Ok(None);
            }
            for (&k, r) in mine.iter().zip(rs) {
                runs[k] = r;
            }
        }
        for (&(pi, i), r) in new.iter().zip(runs) {
            have[pi].insert(i, r);
        }
        let mut undecided = 0;
        for (pi, p) in planned.iter().enumerate() {
            let (jobs, runs) = chosen(&p.jobs, &idx[pi], &have[pi]);
            let next = advance(&p.sc, &counts[pi], &jobs, &runs);
            undecided += next.iter().filter(|(k, n)| counts[pi][k] < **n).count();
            counts[pi] = next;
        }
        if undecided > 0 {
            println!("seeds: {undecided} variant(s) at a point get one more seed");
        }
    }
    let mut out = Vec::new();
    for ((mut p, c), mut have) in planned.into_iter().zip(counts).zip(have) {
        let idx = select(&p.sc, &c, &p.jobs);
        let runs: Vec<RunResult> = idx
            .iter()
            .map(|i| have.remove(i).expect("every chosen run made"))
            .collect();
        let mut keep = idx.into_iter().peekable();
        p.jobs = p
            .jobs
            .into_iter()
            .enumerate()
            .filter(|(i, _)| keep.next_if_eq(i).is_some())
            .map(|(_, j)| j)
            .collect();
        out.push((p, runs));
    }
    Ok(Some(out))
}

/// Checks that the runs a previous reproduction left (`found`: a result for some of
/// `jobs`, the jobs of `sc`, by index) are the ones the sequential rule chooses from
/// them, and returns their indices in order; the error says what differs.
pub fn check_loaded(
    sc: &Scenario,
    jobs: &[Job],
    found: &HashMap<usize, RunResult>,
) -> Result<Vec<usize>> {
    match rule(sc, jobs, &|i| found.get(&i).cloned()) {
        Ok(idx) if idx.len() == found.len() => Ok(idx),
        Ok(idx) => Err(invalid!(
            "the results hold {} runs where adding seeds by the rule chooses {} of them",
            found.len(),
            idx.len()
        )),
        Err(i) => Err(invalid!(
            "the rule adding seeds wants the run of {} that the results lack",
            crate::runner::run_label(sc, &jobs[i])
        )),
    }
}

/// How a comparison ended, in words: "decided after 3 seeds", "undecided at the
/// maximum, 5 seeds".
fn outcome(c: &Comparison, max: usize) -> String {
    match (c.decided, c.seeds >= max) {
        (true, _) => format!("decided after {} seeds", c.seeds),
        (false, true) => format!("undecided at the maximum, {} seeds", c.seeds),
        // only where another comparison needed its variant's seeds beyond its own
        (false, false) => format!("undecided at {} seeds", c.seeds),
    }
}

/// The sentence that says how seeds were chosen: "seeds [1, 2, 3]" when every run had
/// every seed, else the sequential rule in one sentence.
pub fn rule_sentence(sc: &Scenario) -> String {
    if !sc.sequential() {
        return format!("seeds {:?}", sc.seeds);
    }
    let band = if sc.paper.iter().any(|pv| pv.change_pct.is_some()) {
        " (or a paper's change for it contained an edge of the paper's range)"
    } else {
        ""
    };
    format!(
        "seeds added sequentially from {:?}: every variant ran the first {}, then each \
         comparison with `{}` got the next seed while the 95% interval of its paired change \
         in {} contained zero{band}, up to all {}",
        sc.seeds,
        sc.first_seeds(),
        sc.variants[0].label,
        crate::metrics::metric_label(&sc.metrics[0]),
        sc.seeds.len()
    )
}

/// Per comparison of `sc` (its runs `jobs` with results `runs`), how many seeds it got
/// and why it stopped, grouped by outcome, as one Markdown line (empty when every run
/// had every seed). `mix` names the scenario's mix in each comparison, if any.
pub fn outcomes_md(sc: &Scenario, jobs: &[Job], runs: &[RunResult]) -> String {
    if !sc.sequential() {
        return String::new();
    }
    let groups = outcome_groups(sc, jobs, runs, None);
    if groups.is_empty() {
        return String::new();
    }
    format!(
        "Seeds per comparison with `{}`: {}.\n\n",
        sc.variants[0].label,
        join(&groups)
    )
}

/// The comparisons of `sc` grouped by outcome: (outcome, names), names prefixed by
/// `mix` if given.
fn outcome_groups(
    sc: &Scenario,
    jobs: &[Job],
    runs: &[RunResult],
    mix: Option<&str>,
) -> Vec<(String, Vec<String>)> {
    let mut found = comparisons(sc, jobs, runs);
    // the decided first, fewest seeds first
    found.sort_by_key(|c| (!c.decided, c.seeds));
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for c in found {
        let o = outcome(&c, sc.seeds.len());
        let mut name = sc.variants[c.variant].label.clone();
        if let Some(k) = c.point {
            let _ = write!(name, " at {k} KB");
        }
        if let Some(m) = mix {
            name = format!("{m}: {name}");
        }
        match groups.iter_mut().find(|g| g.0 == o) {
            Some(g) => g.1.push(name),
            None => groups.push((o, vec![name])),
        }
    }
    groups
}

/// The number of seeds an outcome ([`outcome`]) names.
fn seeds_of(outcome: &str) -> usize {
    outcome
        .split(|c: char| !c.is_ascii_digit())
        .find_map(|w| w.parse().ok())
        .unwrap_or(0)
}

/// Groups as "OUTCOME: a, b; OUTCOME: c".
fn join(groups: &[(String, Vec<String>)]) -> String {
    groups
        .iter()
        .map(|(o, names)| format!("{o}: {}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// [`outcomes_md`] over the mixes of a file (`done`: each mix's label, scenario, jobs
/// and results), each comparison named by its mix.
pub fn mixes_outcomes_md(sc: &Scenario, done: &[crate::scenario::MixRuns]) -> String {
    if !sc.sequential() {
        return String::new();
    }
    let mut all: Vec<(String, Vec<String>)> = Vec::new();
    for (mix, sub, jobs, runs) in done {
        for (o, names) in outcome_groups(sub, jobs, runs, mix.as_deref()) {
            match all.iter_mut().find(|g| g.0 == o) {
                Some(g) => g.1.extend(names),
                None => all.push((o, names)),
            }
        }
    }
    // in the order of outcome_groups: the decided first, fewest seeds first
    all.sort_by_key(|g| (!g.0.starts_with("decided"), seeds_of(&g.0)));
    if all.is_empty() {
        return String::new();
    }
    format!(
        "Seeds per comparison with `{}` (mix: variant): {}.\n\n",
        sc.variants[0].label,
        join(&all)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario of five seeds whose variants the tests give made-up throughputs:
    /// `base`, `big` (twice the baseline), `none` (the baseline within ±1%, no effect)
    /// and `ten` (10% above the baseline within ±1%).
    fn scenario(paper: &str) -> Scenario {
        let text = format!(
            r#"
name = "t"
machine = "niagara-2c"
duration_ms = 2
seeds = [1, 2, 3, 4, 5]
metrics = ["ips", "l2_miss_ratio"]
threads = [{{ profile = "small", count = 2 }}]
variants = [{{ label = "base" }}, {{ label = "big" }}, {{ label = "none" }}, {{ label = "ten" }}]
{paper}
"#
        );
        let sc: Scenario = toml::from_str(&text).unwrap();
        sc.validate().unwrap();
        sc
    }

    /// The noise of seed `s`, a fraction: it moves one way and the other, so a change
    /// of zero (or of 10%) stays inside every interval of two or more of these seeds.
    fn noise(s: u64) -> f64 {
        [0.01, -0.01, 0.005, -0.007, 0.002][(s - 1) as usize]
    }

    /// A result of job `j` whose throughput is its variant's made-up value at its seed
    /// (a real 2 ms run's, with `ips` replaced).
    fn result(template: &RunResult, sc: &Scenario, j: &Job) -> RunResult {
        let base = 1e8 * (1.0 + 0.03 * j.seed as f64);
        let ips = match sc.variants[j.variant].label.as_str() {
            "base" => base,
            "big" => 2.0 * base * (1.0 + noise(j.seed)),
            "none" => base * (1.0 + noise(j.seed)),
            "ten" => base * (1.10 + noise(j.seed)),
            l => panic!("no variant {l}"),
        };
        RunResult {
            ips,
            seed: j.seed,
            ..template.clone()
        }
    }

    /// The seeds the rule chooses for each variant of `sc`, by label.
    fn chosen_seeds(sc: &Scenario) -> BTreeMap<String, Vec<u64>> {
        let jobs = sc.jobs().unwrap();
        let template = cachesched_sim::simulate(&jobs[0].cfg).unwrap();
        let idx = rule(sc, &jobs, &|i| Some(result(&template, sc, &jobs[i]))).unwrap();
        let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for i in idx {
            let j = &jobs[i];
            out.entry(sc.variants[j.variant].label.clone())
                .or_default()
                .push(j.seed);
        }
        out
    }

    /// A large effect (`big`, +100%) and a clear one (`ten`, +10% ± 1) stop at the
    /// first three seeds; no effect (`none`) runs to the maximum, five, and the
    /// baseline has every seed any comparison needed. Fails if a decided comparison
    /// gets more seeds, an undecided one stops early, or the baseline lacks a seed of
    /// a comparison (its pairs would be fewer than its seeds).
    #[test]
    fn a_clear_effect_stops_at_three_seeds_and_no_effect_runs_to_the_maximum() {
        let sc = scenario("");
        let got = chosen_seeds(&sc);
        assert_eq!(got["big"], [1, 2, 3]);
        assert_eq!(got["ten"], [1, 2, 3]);
        assert_eq!(got["none"], [1, 2, 3, 4, 5]);
        assert_eq!(got["base"], [1, 2, 3, 4, 5]);
        // min_seeds moves the start, not the rule
        let mut two = sc.clone();
        two.min_seeds = Some(2);
        two.validate().unwrap();
        let got = chosen_seeds(&two);
        assert_eq!((got["big"].len(), got["none"].len()), (2, 5));
    }

    /// A paper band whose edge lies inside the interval keeps adding seeds: `ten` is
    /// +10% ± 1 and the paper says 10 to 20%, so whether it is inside the band stays
    /// open to the last seed; a band of 30 to 40% is clear of it after three. With the
    /// band measured against `big` (`against`), `big` runs every seed `ten` does, so
    /// their changes pair over all of them. Fails if a paper band does not hold a
    /// comparison open, or a variant measured against lacks the seeds of the variant
    /// measured.
    #[test]
    fn a_paper_band_with_an_edge_inside_the_interval_keeps_adding_seeds() {
        let band = |range: &str, against: &str| {
            format!(
                "[[paper]]\nwhat = \"x\"\nsource = \"y\"\nmetric = \"ips\"\nvariant = \"ten\"\n\
                 change_pct = {range}\n{against}"
            )
        };
        let got = chosen_seeds(&scenario(&band("[10, 20]", "")));
        assert_eq!(got["ten"], [1, 2, 3, 4, 5]);
        assert_eq!(got["big"], [1, 2, 3]);
        let got = chosen_seeds(&scenario(&band("[30, 40]", "")));
        assert_eq!(got["ten"], [1, 2, 3]);
        // against big: ten is 1.1 / 2 of big, -45%, the band's edge
        let got = chosen_seeds(&scenario(&band("[-45, -40]", "against = \"big\"")));
        assert_eq!(got["ten"], [1, 2, 3, 4, 5]);
        assert_eq!(got["big"], [1, 2, 3, 4, 5]);
    }

    /// The report names each comparison's seeds and why it stopped, and results read
    /// back are accepted only when they are the runs the rule chooses. Fails if an
    /// outcome is misnamed or miscounted, or a run too many or too few is accepted.
    #[test]
    fn reports_say_why_each_comparison_stopped_and_loaded_runs_are_checked() {
        let sc = scenario("");
        let jobs = sc.jobs().unwrap();
        let template = cachesched_sim::simulate(&jobs[0].cfg).unwrap();
        let all: HashMap<usize, RunResult> = (0..jobs.len())
            .map(|i| (i, result(&template, &sc, &jobs[i])))
            .collect();
        let idx = rule(&sc, &jobs, &|i| all.get(&i).cloned()).unwrap();
        let mut have: HashMap<usize, RunResult> =
            idx.iter().map(|&i| (i, all[&i].clone())).collect();
        let (kept, runs) = chosen(&jobs, &idx, &have);
        let md = outcomes_md(&sc, &kept, &runs);
        assert_eq!(
            md,
            "Seeds per comparison with `base`: decided after 3 seeds: big, ten; undecided \
             at the maximum, 5 seeds: none.\n\n"
        );
        assert!(rule_sentence(&sc).contains("the first 3, then each comparison"));
        assert_eq!(check_loaded(&sc, &jobs, &have).unwrap(), idx);
        // every seed of every variant: more than the rule chooses
        let err = check_loaded(&sc, &jobs, &all).unwrap_err().to_string();
        assert!(err.contains("hold 20 runs where"), "{err}");
        // the fifth seed of `none` missing
        let none5 = (0..jobs.len())
            .find(|&i| jobs[i].variant == 2 && jobs[i].seed == 5)
            .unwrap();
        assert!(have.remove(&none5).is_some());
        let err = check_loaded(&sc, &jobs, &have).unwrap_err().to_string();
        assert!(err.contains("run 'none' of t seed 5"), "{err}");
        // every seed at once: no rule, no outcomes
        let mut every = sc.clone();
        every.every_seed();
        assert!(outcomes_md(&every, &kept, &runs).is_empty());
        assert_eq!(rule_sentence(&every), "seeds [1, 2, 3, 4, 5]");
    }

    /// `min_seeds` is from 2 (or the number of seeds, if fewer) to the number of seeds;
    /// its default is 3, or every seed when there are fewer. Fails if a value outside
    /// is accepted or the default changes.
    #[test]
    fn min_seeds_is_checked_and_defaults_to_three() {
        let mut sc = scenario("");
        assert_eq!((sc.first_seeds(), sc.sequential()), (3, true));
        for (k, ok) in [(1, false), (2, true), (5, true), (6, false)] {
            sc.min_seeds = Some(k);
            assert_eq!(sc.validate().is_ok(), ok, "{k}");
        }
        sc.min_seeds = None;
        sc.seeds = vec![7, 8];
        assert_eq!((sc.first_seeds(), sc.sequential()), (2, false));
        sc.seeds = vec![7];
        sc.min_seeds = Some(1);
        sc.validate().unwrap();
    }
}
