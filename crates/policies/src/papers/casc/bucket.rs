//! CASC's bucketization (§4.3.1): each CPU gets a MAX_PCMR; a thread may run only on
//! CPUs whose MAX_PCMR is above its PCMR, so cache-greedy threads share a few CPUs and
//! can never all run at once.
//!
//! Starting from MAX_PCMR = the largest possible value everywhere, while the projected
//! miss rate (the mean of the MAX_PCMRs) exceeds the threshold, lower by one step the
//! MAX_PCMR of the *minimum-penalty* CPU — the one with the fewest threads in its bucket
//! (a thread is in the bucket of the lowest MAX_PCMR above its PCMR); among equals the
//! one with the highest MAX_PCMR, lowest index first — never one whose decrease would leave a thread with no CPU at all. If the
//! threshold cannot be met, stop with the best assignment reached. Then check that every
//! CPU can always run at least `m` threads; if not, raise the threshold geometrically and
//! start again. A threshold of the largest MAX_PCMR restricts nothing, so this ends.

/// Parameters of the bucketization.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketParams {
    /// Initial miss-rate threshold (the paper uses 15).
    pub threshold: f64,
    /// Factor by which the threshold rises when a CPU could be left idle (> 1).
    pub growth: f64,
    /// Threads each CPU must always be able to run (the paper's m; 1 for CPU-bound
    /// workloads).
    pub min_threads_per_cpu: usize,
    /// Amount by which a MAX_PCMR is lowered per iteration (> 0).
    pub step: f64,
    /// Follow the paper's loop literally: only refuse decrements that leave a thread
    /// without a CPU, and rely on the final m-check (raising the threshold) to keep
    /// CPUs busy (the default of [`CascConfig`](super::CascConfig)). When false (strict), decrements that would leave some CPU unable
    /// to run `min_threads_per_cpu` threads are refused too: with fine-grained PCMRs the
    /// literal loop sinks one CPU through empty PCMR bands until it admits nobody, and
    /// the threshold then has to rise until almost nothing is restricted.
    pub literal: bool,
}

/// The outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    /// MAX_PCMR of each CPU.
    pub max_pcmr: Vec<f64>,
    /// The threshold finally used.
    pub threshold: f64,
    /// Whether the projected miss rate meets it.
    pub satisfied: bool,
    /// Threshold attempts (1 if the first threshold worked).
    pub attempts: u32,
    /// Decrement iterations over all attempts.
    pub iterations: u64,
}

impl Buckets {
    /// The projected miss-rate bound: the mean of the MAX_PCMRs.
    pub fn projected(&self) -> f64 {
        mean(&self.max_pcmr)
    }

    /// Whether a thread with `pcmr` may run on CPU `cpu`.
    pub fn allows(&self, cpu: usize, pcmr: f64) -> bool {
        pcmr < self.max_pcmr[cpu]
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The MAX_PCMRs of one iteration, indexed for O(log n) questions.
struct Layout {
    /// (MAX_PCMR, CPU) ascending.
    order: Vec<(f64, usize)>,
}

impl Layout {
    fn of(max: &[f64]) -> Layout {
        let mut order: Vec<(f64, usize)> = max.iter().copied().zip(0..).collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Layout { order }
    }

    /// The largest MAX_PCMR of any CPU but `c`.
    fn best_other(&self, c: usize) -> f64 {
        match self.order.as_slice() {
            [.., (_, last)] if *last != c => self.order[self.order.len() - 1].0,
            [.., (v, _), _] => *v,
            _ => f64::NEG_INFINITY,
        }
    }

    /// The threads in CPU `c`'s bucket (the paper's penalty for lowering it): a thread
    /// belongs to the bucket of the lowest MAX_PCMR above its PCMR; among CPUs with
    /// equal MAX_PCMR, to the lowest-numbered one.
    fn bucket_size(&self, max: &[f64], c: usize, sorted: &[f64]) -> usize {
        let v = max[c];
        let first = self.order.partition_point(|&(m, _)| m < v);
        if self.order[first].1 != c {
            return 0; // a lower-numbered CPU has the same MAX_PCMR
        }
        let below = if first == 0 {
            f64::NEG_INFINITY
        } else {
            self.order[first - 1].0
        };
        sorted.partition_point(|&x| x < v) - sorted.partition_point(|&x| x < below)
    }
}

/// Bucketizes threads with PCMRs `pcmrs` onto `ncpus` CPUs.
pub fn bucketize(pcmrs: &[f64], ncpus: usize, p: &BucketParams) -> Buckets {
    assert!(p.step > 0.0 && p.growth > 1.0, "step > 0 and growth > 1");
    let mut sorted: Vec<f64> = pcmrs.iter().map(|&x| x.max(0.0)).collect();
    sorted.sort_by(f64::total_cmp);
    let top = sorted.last().copied().unwrap_or(0.0);
    // the largest possible MAX_PCMR: 100 misses per 100 references, or above every PCMR
    let initial = 100f64.max(((top / p.step).floor() + 1.0) * p.step);
    let mut threshold = p.threshold;
    let mut iterations = 0u64;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut max = vec![initial; ncpus];
        let mut satisfied = false;
        loop {
            if mean(&max) <= threshold {
                satisfied = true;
                break;
            }
            let mut best: Option<(usize, usize)> = None;
            let layout = Layout::of(&max);
            for c in 0..ncpus {
                let lowered = max[c] - p.step;
                if lowered < 0.0 {
                    continue;
                }
                let best_other = layout.best_other(c);
                // never leave the most demanding thread without a CPU
                if !sorted.is_empty() && top >= lowered.max(best_other) {
                    continue;
                }
                if !p.literal {
                    let saved = max[c];
                    max[c] = lowered;
                    let busy = keeps_cpus_busy(&max, &sorted, p.min_threads_per_cpu);
                    max[c] = saved;
                    if !busy {
                        continue;
                    }
                }
                let penalty = layout.bucket_size(&max, c, &sorted);
                // fewest threads restricted; among those, the CPU admitting the most
                // (so decrements spread instead of sinking one CPU through empty bands)
                if best.is_none_or(|(bc, bp)| penalty < bp || (penalty == bp && max[c] > max[bc])) {
                    best = Some((c, penalty));
                }
            }
            let Some((c, _)) = best else { break };
            max[c] -= p.step;
            iterations += 1;
        }
        let b = Buckets {
            max_pcmr: max,
            threshold,
            satisfied,
            attempts,
            iterations,
        };
        if keeps_cpus_busy(&b.max_pcmr, &sorted, p.min_threads_per_cpu) || threshold >= initial {
            return b;
        }
        threshold *= p.growth;
    }
}

/// Whether every CPU can always run `m` threads: with CPUs sorted by MAX_PCMR, the
/// lowest `j` of them can be served only by threads below the `j`-th MAX_PCMR, and the
/// nested sets make this prefix condition sufficient (Hall). With fewer than `m` threads
/// per CPU in total, each prefix needs only as many as exist.
pub fn keeps_cpus_busy(max_pcmr: &[f64], sorted_pcmrs: &[f64], m: usize) -> bool {
    let mut caps = max_pcmr.to_vec();
    caps.sort_by(f64::total_cmp);
    let n = sorted_pcmrs.len();
    caps.iter().enumerate().all(|(j, &cap)| {
        let allowed = sorted_pcmrs.partition_point(|&x| x < cap);
        allowed >= (m * (j + 1)).min(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: BucketParams = BucketParams {
        threshold: 15.0,
        growth: 1.5,
        min_threads_per_cpu: 1,
        step: 1.0,
        literal: true,
    };

    fn allowed_cpus(b: &Buckets, pcmr: f64) -> usize {
        (0..b.max_pcmr.len()).filter(|&c| b.allows(c, pcmr)).count()
    }

    #[test]
    fn greedy_threads_share_few_cpus_and_every_cpu_stays_busy() {
        // 6 greedy, 12 frugal threads on 8 CPUs
        let mut pcmrs = vec![30.0; 6];
        pcmrs.extend([
            8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5,
        ]);
        let b = bucketize(&pcmrs, 8, &P);
        let greedy = allowed_cpus(&b, 30.0);
        let frugal = allowed_cpus(&b, 8.0);
        assert!((1..8).contains(&greedy), "greedy threads on {greedy} CPUs");
        assert!(frugal > greedy);
        // at most `greedy` greedy threads can run at once
        let mut sorted = pcmrs.clone();
        sorted.sort_by(f64::total_cmp);
        assert!(keeps_cpus_busy(&b.max_pcmr, &sorted, 1));
        // every thread has a CPU
        assert!(pcmrs.iter().all(|&x| allowed_cpus(&b, x) >= 1));
        // the threshold was raised (the mix cannot reach 15 without idling CPUs) but the
        // projection is below the unrestricted mean of the top eight
        assert!(b.projected() <= b.threshold + 1e-9 || !b.satisfied);
        assert!(b.projected() < 30.0, "{:?}", b.max_pcmr);
    }

    #[test]
    fn frugal_mix_meets_the_threshold_without_restriction() {
        let pcmrs = [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        let b = bucketize(&pcmrs, 8, &P);
        assert!(b.satisfied);
        assert_eq!(b.attempts, 1);
        assert!(b.projected() <= 15.0);
        // lowering to 15 on average restricts nobody: every MAX is above 10
        assert!(
            pcmrs.iter().all(|&x| allowed_cpus(&b, x) == 8),
            "{:?}",
            b.max_pcmr
        );
    }

    #[test]
    fn minimum_penalty_cpu_is_lowered_first() {
        // one very greedy thread and eight frugal ones on 2 CPUs, threshold 20:
        // the greedy thread ends up confined to one CPU, frugal ones keep both
        let mut pcmrs = vec![90.0];
        pcmrs.extend([5.0; 8]);
        let p = BucketParams {
            threshold: 20.0,
            ..P
        };
        let b = bucketize(&pcmrs, 2, &p);
        assert_eq!(allowed_cpus(&b, 90.0), 1);
        assert_eq!(allowed_cpus(&b, 5.0), 2);
        assert!(b.satisfied, "{b:?}");
    }

    #[test]
    fn threshold_rises_geometrically_when_cpus_would_idle() {
        // identical greedy threads: any restriction idles CPUs, so the threshold climbs
        let pcmrs = [40.0; 9];
        let b = bucketize(&pcmrs, 8, &P);
        assert!(b.attempts > 1);
        assert!(
            pcmrs.iter().all(|&x| allowed_cpus(&b, x) == 8),
            "{:?}",
            b.max_pcmr
        );
        assert!(b.threshold >= 40.0);
    }

    #[test]
    fn refusing_idling_decrements_restricts_more_without_raising_the_threshold() {
        let mut pcmrs = vec![30.0; 6];
        pcmrs.extend([
            8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5,
        ]);
        let literal = bucketize(&pcmrs, 8, &P);
        let strict = bucketize(
            &pcmrs,
            8,
            &BucketParams {
                literal: false,
                ..P
            },
        );
        assert_eq!(strict.attempts, 1, "{strict:?}");
        assert!(strict.projected() <= literal.projected());
        let mut sorted = pcmrs.clone();
        sorted.sort_by(f64::total_cmp);
        assert!(keeps_cpus_busy(&strict.max_pcmr, &sorted, 1));
        assert!(allowed_cpus(&strict, 30.0) <= allowed_cpus(&literal, 30.0));
    }

    #[test]
    fn busy_check_is_halls_condition() {
        let sorted = [1.0, 2.0, 50.0];
        // CPU caps 3 and 3: both low CPUs can be served (two threads below 3)
        assert!(keeps_cpus_busy(&[3.0, 3.0], &sorted, 1));
        // caps 1.5 and 60: lowest CPU has one thread, both have three
        assert!(keeps_cpus_busy(&[1.5, 60.0], &sorted, 1));
        // caps 1.0 and 60: nobody is below 1.0
        assert!(!keeps_cpus_busy(&[1.0, 60.0], &sorted, 1));
        // m = 2 needs two threads below the lowest cap
        assert!(!keeps_cpus_busy(&[1.5, 60.0], &sorted, 2));
    }
}
