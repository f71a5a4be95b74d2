//! The slice profile (`kernel.slice_profile_ms`): for every run of a thread on a CPU
//! (from being switched in to being switched out) that begins in the measured window,
//! its LLC misses in bins of a few ms from its start, and what happened to the LLC
//! while the thread was off the CPU before it: how many lines the LLC filled (for the
//! other threads: this one was not running) and how many of its own lines the LLC held
//! when it left and when it came back. The timeslice paper's Figure 2 (lines replaced
//! while a thread is off the CPU), Figure 3 (misses per ms inside one long slice) and
//! Figure 11 (how fast the miss rate falls inside a slice) are made of these.
//!
//! Bins end on timers armed at each switch-in, outside the engine's hot loop; nothing
//! is recorded (and no timer armed) unless the profile is configured.

use serde::{Deserialize, Serialize};

/// Most runs recorded per thread; later ones are counted in the run's kernel statistics
/// (`slice_profile_dropped`).
pub const MAX_RUNS_PER_THREAD: usize = 2000;

/// What the LLC did while a thread was off the CPU, before one of its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpu {
    /// Lines the thread's LLC instance filled meanwhile (demand and prefetch fills of
    /// every thread).
    pub fills: u64,
    /// Of `fills`, those the L2 streamer's prefetches made. `fills - streamer_fills`
    /// is what Intel's architectural "LLC Misses" event counts (demand misses and the
    /// first-level prefetchers' requests; the event "may exclude cache line fills due
    /// to other hardware-prefetchers", Intel SDM vol. 3B, architectural performance
    /// events), which the timeslice paper's Figure 2 was measured with.
    #[serde(default)]
    pub streamer_fills: u64,
    /// Lines of the thread's own the instance held when it was switched out.
    pub own_lines_left: u64,
    /// ... and when it was switched in again (on the same LLC instance; a thread that
    /// came back on another instance has no `OffCpu`).
    pub own_lines_back: u64,
    /// Lines of the LLC instance.
    pub llc_lines: u64,
}

/// One run of a thread on a CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliceRecord {
    /// When it began, ms of simulated time from the start of the run.
    pub start_ms: f64,
    /// How long it ran, ms.
    pub ms: f64,
    /// Its LLC misses in consecutive bins of `kernel.slice_profile_ms` from its start;
    /// the last bin is the partial one it was switched out in.
    pub llc_misses: Vec<u64>,
    /// The LLC while it was off the CPU before this run (`None` for its first run, or
    /// if it came back on another LLC instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpu>,
}

/// A thread's profile state.
#[derive(Debug, Clone, Default)]
struct ThreadProfile {
    /// The run in progress: its record and the LLC misses when its current bin began.
    open: Option<(SliceRecord, u64)>,
    /// Incremented at each switch-in, so that a bin timer of an earlier run is ignored.
    gen: u64,
    /// What the profiler read when it was last switched out on a CPU with an LLC.
    left: Option<Moment>,
    runs: Vec<SliceRecord>,
}

/// What the profiler reads when a thread is switched in or out.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Moment {
    /// Simulated time, ms.
    pub(crate) ms: f64,
    /// The thread's LLC misses so far.
    pub(crate) llc_misses: u64,
    /// The LLC instance of the CPU (`None`: the machine has none).
    pub(crate) inst: Option<usize>,
    /// Lines that instance has filled so far.
    pub(crate) fills: u64,
    /// Of them, those the L2 streamer's prefetches filled.
    pub(crate) streamer_fills: u64,
    /// Lines of the thread's that it holds.
    pub(crate) own: u64,
    /// Lines it holds in all.
    pub(crate) lines: u64,
}

/// Every thread's slice profile.
#[derive(Debug, Clone)]
pub(crate) struct SliceProfiler {
    /// Bin width in cycles.
    pub(crate) bin_cycles: u64,
    /// Whether runs that begin now are recorded (from the end of the warm-up).
    pub(crate) on: bool,
    threads: Vec<ThreadProfile>,
    /// Runs not recorded because a thread had [`MAX_RUNS_PER_THREAD`] already.
    pub(crate) dropped: u64,
}

impl SliceProfiler {
    /// A profiler for `n` threads with bins of `bin_cycles`, recording from the start
    /// if `on`.
    pub(crate) fn new(n: usize, bin_cycles: u64, on: bool) -> SliceProfiler {
        SliceProfiler {
            bin_cycles: bin_cycles.max(1),
            on,
            threads: vec![ThreadProfile::default(); n],
            dropped: 0,
        }
    }

    /// Thread `t` switched in at moment `m`; returns the generation its bin timers
    /// carry, if the run is recorded.
    pub(crate) fn switched_in(&mut self, t: usize, m: &Moment) -> Option<u64> {
        let p = &mut self.threads[t];
        p.gen += 1;
        let left = p.left.take();
        if !self.on {
            return None;
        }
        if p.runs.len() >= MAX_RUNS_PER_THREAD {
            self.dropped += 1;
            return None;
        }
        let off_cpu = match left {
            // `left` is only kept with an instance, so this is the same instance
            Some(l) if l.inst == m.inst => Some(OffCpu {
                fills: m.fills - l.fills,
                streamer_fills: m.streamer_fills - l.streamer_fills,
                own_lines_left: l.own,
                own_lines_back: m.own,
                llc_lines: m.lines,
            }),
            _ => None,
        };
        p.open = Some((
            SliceRecord {
                start_ms: m.ms,
                ms: 0.0,
                llc_misses: Vec::new(),
                off_cpu,
            },
            m.llc_misses,
        ));
        Some(p.gen)
    }

    /// A bin timer of generation `gen` for thread `t` fired with `llc_misses` so far:
    /// whether to arm the next one.
    pub(crate) fn bin(&mut self, t: usize, gen: u64, llc_misses: u64) -> bool {
        let p = &mut self.threads[t];
        if p.gen != gen {
            return false;
        }
        let Some((rec, at)) = p.open.as_mut() else {
            return false;
        };
        rec.llc_misses.push(llc_misses - *at);
        *at = llc_misses;
        true
    }

    /// Thread `t` switched out at moment `m`.
    pub(crate) fn switched_out(&mut self, t: usize, m: &Moment) {
        let p = &mut self.threads[t];
        p.left = m.inst.is_some().then_some(*m);
        if let Some((mut rec, at)) = p.open.take() {
            rec.llc_misses.push(m.llc_misses - at);
            rec.ms = m.ms - rec.start_ms;
            p.runs.push(rec);
        }
    }

    /// Thread `t`'s finished runs.
    pub(crate) fn runs(&self, t: usize) -> &[SliceRecord] {
        &self.threads[t].runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's bins split its misses, the partial last bin included; what the LLC did
    /// while the thread was away (its fills, and the streamer's among them) is attached
    /// to its next run on the same instance;
    /// a stale bin timer changes nothing.
    #[test]
    fn runs_bins_and_off_cpu() {
        let mut p = SliceProfiler::new(1, 100, true);
        let g = p
            .switched_in(
                0,
                &Moment {
                    ms: 0.0,
                    llc_misses: 10,
                    inst: Some(0),
                    fills: 500,
                    streamer_fills: 200,
                    own: 0,
                    lines: 1000,
                },
            )
            .unwrap();
        assert!(p.bin(0, g, 40));
        assert!(p.bin(0, g, 45));
        p.switched_out(
            0,
            &Moment {
                ms: 2.5,
                llc_misses: 47,
                inst: Some(0),
                fills: 900,
                streamer_fills: 450,
                own: 300,
                ..Default::default()
            },
        );
        assert!(!p.bin(0, g, 50), "a timer of a finished run");
        let g2 = p
            .switched_in(
                0,
                &Moment {
                    ms: 4.0,
                    llc_misses: 47,
                    inst: Some(0),
                    fills: 1600,
                    streamer_fills: 1000,
                    own: 120,
                    lines: 1000,
                },
            )
            .unwrap();
        assert_ne!(g, g2);
        p.switched_out(
            0,
            &Moment {
                ms: 5.0,
                llc_misses: 60,
                inst: Some(0),
                fills: 1700,
                own: 200,
                ..Default::default()
            },
        );
        let r = p.runs(0);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].llc_misses, [30, 5, 2]);
        assert_eq!(r[0].ms, 2.5);
        assert_eq!(r[0].off_cpu, None);
        assert_eq!(
            r[1].off_cpu,
            Some(OffCpu {
                fills: 700,
                streamer_fills: 550,
                own_lines_left: 300,
                own_lines_back: 120,
                llc_lines: 1000
            })
        );
        assert_eq!(r[1].llc_misses, [13]);
    }

    /// Before the measured window nothing is recorded, and a thread that comes back on
    /// another LLC instance has no off-CPU figures.
    #[test]
    fn off_until_on_and_other_instances() {
        let mut p = SliceProfiler::new(1, 100, false);
        assert_eq!(
            p.switched_in(
                0,
                &Moment {
                    ms: 0.0,
                    llc_misses: 0,
                    inst: Some(0),
                    fills: 0,
                    streamer_fills: 0,
                    own: 0,
                    lines: 10
                }
            ),
            None
        );
        p.switched_out(
            0,
            &Moment {
                ms: 1.0,
                llc_misses: 5,
                inst: Some(0),
                fills: 3,
                own: 1,
                ..Default::default()
            },
        );
        p.on = true;
        p.switched_in(
            0,
            &Moment {
                ms: 2.0,
                llc_misses: 5,
                inst: Some(1),
                fills: 7,
                streamer_fills: 2,
                own: 0,
                lines: 10,
            },
        )
        .unwrap();
        p.switched_out(
            0,
            &Moment {
                ms: 3.0,
                llc_misses: 6,
                inst: Some(1),
                fills: 9,
                own: 1,
                ..Default::default()
            },
        );
        assert_eq!(p.runs(0).len(), 1);
        assert_eq!(p.runs(0)[0].off_cpu, None);
    }
}
