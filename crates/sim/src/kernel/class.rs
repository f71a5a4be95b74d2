//! Baseline scheduling classes: the per-thread scheduling state and the rules each
//! class applies — which queued thread runs next, how long its slice is, how running
//! time is charged, what happens on wake-up.
//!
//! - **CFS/EEVDF-like**: weighted virtual runtime; the smallest runs next; slice =
//!   max(latency, nr × min_granularity) × weight / total weight, with Linux's scaling of
//!   latency and granularity by 1 + log2(CPUs); a per-task custom slice is honoured;
//!   waking threads are placed at most half a latency behind the queue's minimum and
//!   preempt the current thread when they are ahead by more than the wake-up granularity.
//! - **Solaris TS**: the default `ts_dptbl` ([`super::solaris_tables`]): 60 levels,
//!   quanta 200 ms (levels 0–9) down to 40 ms (40–58) and 20 ms (59), or one configured
//!   quantum for every level (as `dispadmin` can set); using up a quantum moves the
//!   thread to `ts_tqexp` (10 levels down); once a second `ts_update` raises every
//!   thread that got no new quantum since the last pass to `ts_lwait` (50–59), or, if
//!   it is running, to `ts_slpret` with a new quantum; a thread waking from sleep runs
//!   at a kernel priority above every user level until it is dispatched (Solaris gives
//!   threads blocked in the kernel a `ts_kmdpri`), and returns to `ts_slpret` if a
//!   `ts_update` passed since its last quantum. The user priority from the nice value
//!   shifts the level (nice / 2).
//! - **Solaris FX**: fixed priorities 0–60 that never change; quanta from `fx_dptbl`
//!   (200 ms at 0–9 … 20 ms at 59–60) or one configured quantum.
//! - **Round robin**: fixed priority from the nice value, FIFO within a priority, a fixed
//!   quantum.
//!
//! In every class a boosted thread (policy directive) is picked before any unboosted one.
//! Where the Solaris classes place threads is the dispatcher's business
//! (`kernel/solaris.rs`).

use super::solaris_tables::{fx_quantum_ticks, ts_row, FX_MAX_LEVEL, TICK_MS, TS_MAX_LEVEL};
use crate::config::{Baseline, KernelConfig};

pub use cachesched_core::num::{nice_to_weight, NICE_TO_WEIGHT};

/// The global priority of a TS thread woken from sleep until it is dispatched: the
/// lowest kernel-mode priority (`TSGPKP0`), above every user level.
pub const TS_KERNEL_PRI: i32 = 60;

/// Per-thread scheduling state.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedEntity {
    /// CFS virtual runtime in weighted ns.
    pub vruntime: u64,
    /// Current nice value.
    pub nice: i32,
    /// Solaris TS level (`ts_cpupri`, 0..=59).
    pub ts_pri: i32,
    /// Solaris FX priority (0..=60).
    pub fx_pri: i32,
    /// TS: `ts_update` passes since the thread last got a new quantum (`ts_dispwait`).
    pub ts_dispwait: u32,
    /// TS: woken from sleep and not yet dispatched (kernel-mode priority).
    pub ts_kpri: bool,
    /// Boosted by a policy.
    pub boosted: bool,
    /// FIFO order among equals (smaller runs first).
    pub enqueue_seq: u64,
    /// Custom slice from a policy, ns.
    pub custom_slice_ns: Option<u64>,
    /// TS: CPU time used since the last new quantum, ns.
    pub ts_used_ns: u64,
}

impl SchedEntity {
    /// A new entity with nice value `nice` and FX priority `fx_pri`.
    pub fn new(nice: i32, fx_pri: i32) -> SchedEntity {
        SchedEntity {
            vruntime: 0,
            nice,
            ts_pri: 29,
            fx_pri: fx_pri.clamp(0, FX_MAX_LEVEL),
            ts_dispwait: 0,
            ts_kpri: false,
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
    ts_quantum_ns: Option<u64>,
    fx_quantum_ns: Option<u64>,
}

/// Solaris TS quantum of a level in the default table, in ms.
pub fn ts_quantum_ms(level: i32) -> u64 {
    ts_row(level).quantum_ticks * TICK_MS
}

impl Class {
    /// The class configured by `k` on a machine with `cpus` CPUs.
    pub fn new(k: &KernelConfig, cpus: usize) -> Class {
        let factor = 1.0 + (cpus.max(1) as f64).log2().floor().min(3.0);
        let ns = |ms: f64| (ms * 1e6) as u64;
        Class {
            baseline: k.baseline,
            latency_ns: ns(k.cfs_latency_ms * factor),
            min_gran_ns: ns(k.cfs_min_granularity_ms * factor),
            wakeup_gran_ns: ns(k.cfs_wakeup_granularity_ms),
            rr_quantum_ns: ns(k.rr_quantum_ms),
            ts_quantum_ns: k.ts_quantum_ms.map(ns),
            fx_quantum_ns: k.fx_quantum_ms.map(ns),
        }
    }

    /// The baseline.
    pub fn baseline(&self) -> Baseline {
        self.baseline
    }

    /// Whether the class is one of Solaris' (TS or FX), placed by the Solaris
    /// dispatcher.
    pub fn solaris(&self) -> bool {
        matches!(self.baseline, Baseline::Ts | Baseline::Fx)
    }

    /// The Solaris global priority of `e` (higher runs first): its TS level shifted by
    /// the nice value (or the kernel priority after a wake-up), or its FX priority.
    /// Other classes: 0.
    #[inline]
    pub fn priority(&self, e: &SchedEntity) -> i32 {
        match self.baseline {
            Baseline::Ts if e.ts_kpri => TS_KERNEL_PRI,
            Baseline::Ts => (e.ts_pri - e.nice / 2).clamp(0, TS_MAX_LEVEL),
            Baseline::Fx => e.fx_pri,
            _ => 0,
        }
    }

    /// Ordering key: the queued thread with the smallest key runs next.
    #[inline]
    pub fn key(&self, e: &SchedEntity) -> (bool, i64, u64) {
        let k = match self.baseline {
            Baseline::Cfs => e.vruntime as i64,
            Baseline::Ts | Baseline::Fx => -(self.priority(e) as i64),
            Baseline::Rr => e.nice as i64,
        };
        (!e.boosted, k, e.enqueue_seq)
    }

    /// The TS quantum of `e`'s level: the configured one, else the table's, in ns.
    fn ts_quantum_ns(&self, e: &SchedEntity) -> u64 {
        self.ts_quantum_ns
            .unwrap_or(ts_quantum_ms(e.ts_pri) * 1_000_000)
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
            Baseline::Ts => self.ts_quantum_ns(e),
            Baseline::Fx => self
                .fx_quantum_ns
                .unwrap_or(fx_quantum_ticks(e.fx_pri) * TICK_MS * 1_000_000),
            Baseline::Rr => self.rr_quantum_ns,
        }
    }

    /// Charges `ran_ns` of CPU time.
    #[inline]
    pub fn charge(&self, e: &mut SchedEntity, ran_ns: u64) {
        match self.baseline {
            Baseline::Cfs => e.vruntime += ran_ns * 1024 / e.weight() as u64,
            Baseline::Ts => e.ts_used_ns += ran_ns,
            Baseline::Fx | Baseline::Rr => {}
        }
    }

    /// The thread is dispatched: a TS thread leaves its wake-up kernel priority.
    pub fn dispatched(&self, e: &mut SchedEntity) {
        e.ts_kpri = false;
    }

    /// The thread used up its slice. TS moves it to `ts_tqexp` once a whole quantum of
    /// its level has been used (with the class's own quanta, at every expiry; a shorter
    /// custom slice does not age a thread faster than its quantum would).
    pub fn slice_expired(&self, e: &mut SchedEntity) {
        if self.baseline == Baseline::Ts && e.ts_used_ns >= self.ts_quantum_ns(e) {
            e.ts_pri = ts_row(e.ts_pri).tqexp;
            e.ts_used_ns = 0;
            e.ts_dispwait = 0;
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
                // ts_wakeup: back to ts_slpret only if a ts_update passed meanwhile
                if e.ts_dispwait > ts_row(e.ts_pri).maxwait {
                    e.ts_pri = ts_row(e.ts_pri).slpret;
                    e.ts_used_ns = 0;
                    e.ts_dispwait = 0;
                }
                e.ts_kpri = true;
            }
            Baseline::Fx | Baseline::Rr => {}
        }
    }

    /// The once-a-second `ts_update` pass over a TS thread (`running` on a CPU or
    /// not): returns whether its level changed.
    pub fn ts_update(&self, e: &mut SchedEntity, running: bool) -> bool {
        if self.baseline != Baseline::Ts {
            return false;
        }
        e.ts_dispwait += 1;
        let row = ts_row(e.ts_pri);
        if e.ts_dispwait <= row.maxwait {
            return false;
        }
        let old = e.ts_pri;
        // a queued or sleeping thread gets ts_lwait now; a running one gets ts_slpret
        // and a new quantum at its next return to user mode (here: at once)
        e.ts_pri = if running { row.slpret } else { row.lwait };
        e.ts_used_ns = 0;
        e.ts_dispwait = 0;
        e.ts_pri != old
    }

    /// Whether `woken` should preempt `curr`.
    pub fn preempts(&self, curr: &SchedEntity, woken: &SchedEntity) -> bool {
        if woken.boosted != curr.boosted {
            return woken.boosted;
        }
        match self.baseline {
            Baseline::Cfs => woken.vruntime + self.wakeup_gran_ns < curr.vruntime,
            Baseline::Ts | Baseline::Fx => self.priority(woken) > self.priority(curr),
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
        let mut a = SchedEntity::new(0, 0);
        let b = SchedEntity::new(5, 0);
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
        let mut e = SchedEntity::new(0, 0);
        assert_eq!(c.slice_ns(&e, 1, 1), 120_000_000);
        // a 10 ms custom slice expiring does not age the thread; a whole quantum does
        c.charge(&mut e, 10_000_000);
        c.slice_expired(&mut e);
        assert_eq!(e.ts_pri, 29);
        c.charge(&mut e, 110_000_000);
        c.slice_expired(&mut e);
        assert_eq!(e.ts_pri, 19);
        assert_eq!(c.slice_ns(&e, 1, 1), 160_000_000);
        // waking without a ts_update in between: kernel priority until dispatched, the
        // level unchanged
        c.woke(&mut e, None);
        assert_eq!((e.ts_pri, c.priority(&e)), (19, 60));
        c.dispatched(&mut e);
        assert_eq!(c.priority(&e), 19);
        // a ts_update pass: a queued thread goes to ts_lwait, a running one to ts_slpret
        let mut q = e.clone();
        assert!(c.ts_update(&mut q, false));
        assert_eq!(q.ts_pri, 51);
        let mut r = SchedEntity::new(0, 0);
        r.ts_pri = 45;
        assert!(c.ts_update(&mut r, true));
        assert_eq!(r.ts_pri, 56);
        // level 59 waits up to 32000 passes
        let mut top = SchedEntity::new(0, 0);
        top.ts_pri = 59;
        assert!(!c.ts_update(&mut top, false));
        // woken after a pass since its last quantum: ts_slpret
        let mut w = SchedEntity::new(0, 0);
        w.ts_pri = 3;
        w.ts_dispwait = 1;
        c.woke(&mut w, None);
        assert_eq!(w.ts_pri, 50);
        let low = SchedEntity::new(0, 0);
        assert!(c.key(&q) < c.key(&low));
        let mut boosted = SchedEntity::new(0, 0);
        boosted.boosted = true;
        assert!(c.key(&boosted) < c.key(&q));
        assert!(c.preempts(&low, &q));
        // a configured quantum replaces every level's
        let short = Class::new(
            &KernelConfig {
                baseline: Baseline::Ts,
                ts_quantum_ms: Some(2.0),
                ..Default::default()
            },
            8,
        );
        let mut s = SchedEntity::new(0, 0);
        assert_eq!(short.slice_ns(&s, 1, 1), 2_000_000);
        short.charge(&mut s, 2_000_000);
        short.slice_expired(&mut s);
        assert_eq!(s.ts_pri, 19);
    }

    #[test]
    fn fx_priorities_never_change() {
        let k = KernelConfig {
            baseline: Baseline::Fx,
            ..Default::default()
        };
        let c = Class::new(&k, 2);
        let mut hi = SchedEntity::new(0, 30);
        let lo = SchedEntity::new(0, 0);
        assert_eq!(c.slice_ns(&hi, 1, 1), 80_000_000);
        assert_eq!(c.slice_ns(&lo, 1, 1), 200_000_000);
        c.charge(&mut hi, 500_000_000);
        c.slice_expired(&mut hi);
        c.woke(&mut hi, None);
        assert!(!c.ts_update(&mut hi, false));
        assert_eq!(c.priority(&hi), 30);
        assert!(c.key(&hi) < c.key(&lo) && c.preempts(&lo, &hi));
        let q = Class::new(
            &KernelConfig {
                baseline: Baseline::Fx,
                fx_quantum_ms: Some(10.0),
                ..Default::default()
            },
            2,
        );
        assert_eq!(q.slice_ns(&lo, 1, 1), 10_000_000);
    }
}
