//! Baseline scheduling classes: the per-thread scheduling state and the rules each
//! class applies — which queued thread runs next, how long its slice is, how running
//! time is charged, what happens on wake-up.
//!
//! - **CFS/EEVDF-like**: weighted virtual runtime; the smallest runs next; slice =
//!   max(latency, nr × min_granularity) × weight / total weight, with Linux's scaling of
//!   latency and granularity by 1 + log2(CPUs); a per-task custom slice is honoured;
//!   waking threads are placed at most half a latency behind the queue's minimum and
//!   preempt the current thread when they are ahead by more than the wake-up granularity.
//! - **Solaris TS-like**: 60 priority levels; quanta from 200 ms (level 0–9) down to
//!   20 ms (50–59); using up a quantum drops 10 levels, returning from sleep raises to
//!   50 + level/10; a thread waiting over a second is raised to 50 (starvation aging).
//! - **Round robin**: fixed priority from the nice value, FIFO within a priority, a fixed
//!   quantum.
//!
//! In every class a boosted thread (policy directive) is picked before any unboosted one.

use crate::config::{Baseline, KernelConfig};

/// Linux's nice-to-weight table (`sched_prio_to_weight`), nice −20 … 19.
pub const NICE_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904,
    3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87,
    70, 56, 45, 36, 29, 23, 18, 15,
];

/// Weight of a nice value (clamped to −20..=19).
pub fn nice_to_weight(nice: i32) -> u32 {
    NICE_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// Per-thread scheduling state.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedEntity {
    /// CFS virtual runtime in weighted ns.
    pub vruntime: u64,
    /// Current nice value.
    pub nice: i32,
    /// Solaris TS priority level (0..=59, higher runs first).
    pub ts_pri: i32,
    /// Boosted by a policy.
    pub boosted: bool,
    /// FIFO order among equals.
    pub enqueue_seq: u64,
    /// Custom slice from a policy, ns.
    pub custom_slice_ns: Option<u64>,
    /// TS: CPU time used since the priority last dropped, ns.
    pub ts_used_ns: u64,
}

impl SchedEntity {
    /// A new entity with nice value `nice`.
    pub fn new(nice: i32) -> SchedEntity {
        SchedEntity {
            vruntime: 0,
            nice,
            ts_pri: 29,
            boosted: false,
            enqueue_seq: 0,
            custom_slice_ns: None,
            ts_used_ns: 0,
        }
    }

    /// Load weight.
    pub fn weight(&self) -> u32 {
        nice_to_weight(self.nice)
    }
}

/// The rules of the configured baseline class.
#[derive(Debug, Clone)]
pub struct Class {
    baseline: Baseline,
    latency_ns: u64,
    min_gran_ns: u64,
    wakeup_gran_ns: u64,
    rr_quantum_ns: u64,
}

/// Solaris TS quantum of a priority level, in ms.
pub fn ts_quantum_ms(pri: i32) -> u64 {
    [200, 160, 120, 80, 40, 20][(pri.clamp(0, 59) / 10) as usize]
}

impl Class {
    /// The class configured by `k` on a machine with `cpus` CPUs.
    pub fn new(k: &KernelConfig, cpus: usize) -> Class {
        let factor = 1.0 + (cpus.max(1) as f64).log2().floor().min(3.0);
        Class {
            baseline: k.baseline,
            latency_ns: (k.cfs_latency_ms * factor * 1e6) as u64,
            min_gran_ns: (k.cfs_min_granularity_ms * factor * 1e6) as u64,
            wakeup_gran_ns: (k.cfs_wakeup_granularity_ms * 1e6) as u64,
            rr_quantum_ns: (k.rr_quantum_ms * 1e6) as u64,
        }
    }

    /// The baseline.
    pub fn baseline(&self) -> Baseline {
        self.baseline
    }

    /// Ordering key: the queued thread with the smallest key runs next.
    #[inline]
    pub fn key(&self, e: &SchedEntity) -> (bool, i64, u64) {
        let k = match self.baseline {
            Baseline::Cfs => e.vruntime as i64,
            Baseline::Ts => -((e.ts_pri - e.nice / 2).clamp(0, 59) as i64),
            Baseline::Rr => e.nice as i64,
        };
        (!e.boosted, k, e.enqueue_seq)
    }

    /// Slice in ns for `e` about to run on a CPU with `nr` runnable threads of total
    /// weight `total_weight` (including `e`).
    pub fn slice_ns(&self, e: &SchedEntity, nr: usize, total_weight: u64) -> u64 {
        if let Some(s) = e.custom_slice_ns {
            return s.max(1_000);
        }
        match self.baseline {
            Baseline::Cfs => {
                let period = self.latency_ns.max(nr as u64 * self.min_gran_ns);
                let s = (period as u128 * e.weight() as u128 / total_weight.max(1) as u128) as u64;
                s.max(self.min_gran_ns)
            }
            Baseline::Ts => ts_quantum_ms(e.ts_pri) * 1_000_000,
            Baseline::Rr => self.rr_quantum_ns,
        }
    }

    /// Charges `ran_ns` of CPU time.
    #[inline]
    pub fn charge(&self, e: &mut SchedEntity, ran_ns: u64) {
        match self.baseline {
            Baseline::Cfs => e.vruntime += ran_ns * 1024 / e.weight() as u64,
            Baseline::Ts => e.ts_used_ns += ran_ns,
            Baseline::Rr => {}
        }
    }

    /// The thread used up its slice. TS drops the priority once a whole quantum of its
    /// level has been used (with the class's own quanta, at every expiry; a shorter
    /// custom slice does not age a thread faster than its quantum would).
    pub fn slice_expired(&self, e: &mut SchedEntity) {
        if self.baseline == Baseline::Ts && e.ts_used_ns >= ts_quantum_ms(e.ts_pri) * 1_000_000 {
            e.ts_pri = (e.ts_pri - 10).max(0);
            e.ts_used_ns = 0;
        }
    }

    /// The thread wakes from sleep onto a queue whose minimum vruntime is `min_vruntime`.
    pub fn woke(&self, e: &mut SchedEntity, min_vruntime: Option<u64>) {
        match self.baseline {
            Baseline::Cfs => {
                if let Some(m) = min_vruntime {
                    e.vruntime = e.vruntime.max(m.saturating_sub(self.latency_ns / 2));
                }
            }
            Baseline::Ts => {
                e.ts_pri = (50 + e.ts_pri / 10).min(59);
                e.ts_used_ns = 0;
            }
            Baseline::Rr => {}
        }
    }

    /// A thread waited over a second (Solaris ts_maxwait aging).
    pub fn starving(&self, e: &mut SchedEntity) {
        if self.baseline == Baseline::Ts {
            e.ts_pri = e.ts_pri.max(50);
        }
    }

    /// Whether `woken` should preempt `curr`.
    pub fn preempts(&self, curr: &SchedEntity, woken: &SchedEntity) -> bool {
        if woken.boosted != curr.boosted {
            return woken.boosted;
        }
        match self.baseline {
            Baseline::Cfs => woken.vruntime + self.wakeup_gran_ns < curr.vruntime,
            Baseline::Ts => self.key(woken).1 < self.key(curr).1,
            Baseline::Rr => woken.nice < curr.nice,
        }
    }

    /// Re-bases a vruntime when a thread moves between queues.
    pub fn migrate_vruntime(&self, v: u64, from_min: Option<u64>, to_min: Option<u64>) -> u64 {
        match (from_min, to_min) {
            (Some(f), Some(t)) => (v as i128 - f as i128 + t as i128).max(0) as u64,
            _ => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfs_weights_slices_and_order() {
        let c = Class::new(&KernelConfig::default(), 1);
        let mut a = SchedEntity::new(0);
        let b = SchedEntity::new(5);
        assert_eq!(a.weight(), 1024);
        assert_eq!(nice_to_weight(-20), 88761);
        // two equal threads share the 6 ms latency
        assert_eq!(c.slice_ns(&a, 2, 2048), 3_000_000);
        // a lower-weight thread gets a shorter slice
        assert!(c.slice_ns(&b, 2, 1024 + 335) < c.slice_ns(&a, 2, 1024 + 335));
        c.charge(&mut a, 1_000_000);
        assert_eq!(a.vruntime, 1_000_000);
        let mut b2 = b.clone();
        c.charge(&mut b2, 1_000_000);
        assert!(b2.vruntime > a.vruntime, "nice 5 ages faster");
        assert!(c.key(&a) < c.key(&b2));
        a.custom_slice_ns = Some(45_000_000);
        assert_eq!(c.slice_ns(&a, 2, 2048), 45_000_000);
    }

    #[test]
    fn ts_feedback() {
        let k = KernelConfig {
            baseline: Baseline::Ts,
            ..Default::default()
        };
        let c = Class::new(&k, 8);
        let mut e = SchedEntity::new(0);
        assert_eq!(c.slice_ns(&e, 1, 1), 120_000_000);
        // a 10 ms custom slice expiring does not age the thread; a whole quantum does
        c.charge(&mut e, 10_000_000);
        c.slice_expired(&mut e);
        assert_eq!(e.ts_pri, 29);
        c.charge(&mut e, 110_000_000);
        c.slice_expired(&mut e);
        assert_eq!(e.ts_pri, 19);
        assert_eq!(c.slice_ns(&e, 1, 1), 160_000_000);
        c.woke(&mut e, None);
        assert_eq!(e.ts_pri, 51);
        let low = SchedEntity::new(0);
        assert!(c.key(&e) < c.key(&low));
        let mut boosted = SchedEntity::new(0);
        boosted.boosted = true;
        assert!(c.key(&boosted) < c.key(&e));
        assert!(c.preempts(&low, &e));
    }
}
