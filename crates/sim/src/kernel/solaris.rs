//! The Solaris dispatcher's placement rules, which the TS and FX classes share
//! (illumos `usr/src/uts/common/disp/disp.c`, `cmt_policy.c`, `ts.c`; the 2009–2013
//! Solaris 10 / OpenSolaris line). Solaris has no periodic load balancer: threads move
//! only when they are put on a run queue, when an idle CPU steals, and through the
//! once-a-second `ts_update`.
//!
//! - **`setbackdq`** (a thread whose quantum expired, one waking up, one whose priority
//!   changed while queued): it goes back to the CPU it last ran on if it still has cache
//!   warmth — it is the thread being switched out, or it left its CPU at most
//!   `rechoose_interval` ago (3 ticks) — else to the CPU running or queueing the lowest
//!   priority (`disp_lowpri_cpu`: an idle CPU first; ties favour the last CPU and those
//!   after it). If that CPU is busy and an allowed CPU is idle, `cmt_balance` moves it
//!   there (the idle CPU on the least busy chip, then core). Then the run-queue rule:
//!   compared with the next CPU, if this queue holds more threads of the thread's
//!   priority (below priority 16), or more than 2 more (from 16 on), the thread goes to
//!   the next CPU instead.
//! - **`setfrontdq`** (a thread preempted by a higher priority before its quantum
//!   ended): the front of its own CPU's queue.
//! - **Idle stealing** (`disp_getwork`/`disp_getbest`): a CPU with an empty queue takes
//!   the highest-priority queued thread it may run from the nearest CPU holding one
//!   (same core, same chip, then the rest), except a thread queued less than
//!   `nosteal_nsec` ago on the CPU it last ran on when the two CPUs do not share a
//!   cache; it then tries again once that thread becomes stealable.
//! - **`ts_update`** (TS, once a second): see [`super::class`]; a queued thread whose
//!   level changes is placed again by `setbackdq` (usually without cache warmth: it
//!   waited longer than `rechoose_interval`), which spreads the waiting threads.
//!
//! With `affinity_oblivious` ("affinity settings disabled"): no thread has cache
//! warmth, `disp_lowpri_cpu` starts from a random CPU so that ties fall anywhere, and
//! nothing is protected from stealing.

use super::solaris_tables::{RUNQ_MATCH_PRI, RUNQ_MAX_DIFF};
use super::{Kernel, State, Timer};
use cachesched_core::CpuId;

impl Kernel {
    /// The Solaris priority of thread `t`.
    fn sol_pri(&self, t: usize) -> i32 {
        self.class.priority(&self.threads[t].se)
    }

    /// `max(running priority, highest queued priority)` of CPU `c`, −1 when idle.
    fn cpu_pri(&self, c: usize) -> i32 {
        let cpu = &self.cpus[c];
        cpu.current
            .iter()
            .chain(cpu.rq.iter())
            .map(|&t| self.sol_pri(t))
            .max()
            .unwrap_or(-1)
    }

    /// Whether CPUs `a` and `b` share their last-level cache.
    pub(crate) fn share_llc(&self, a: usize, b: usize) -> bool {
        match self.topo.llc() {
            Some(l) => {
                self.topo.cache_instance(l, CpuId(a as u32))
                    == self.topo.cache_instance(l, CpuId(b as u32))
            }
            None => false,
        }
    }

    /// `disp_lowpri_cpu`: among the CPUs thread `t` may use, scanning from `hint`
    /// (wrapping in CPU order), the first idle one, else the first with the strictly
    /// lowest priority.
    fn disp_lowpri_cpu(&self, t: usize, hint: usize) -> usize {
        let n = self.cpus.len();
        let mask = &self.threads[t].mask;
        let mut best = None;
        for k in 0..n {
            let c = (hint + k) % n;
            if !mask.contains(CpuId(c as u32)) {
                continue;
            }
            let p = self.cpu_pri(c);
            if p < 0 {
                return c;
            }
            if best.is_none_or(|(bp, _)| p < bp) {
                best = Some((p, c));
            }
        }
        best.map(|(_, c)| c).expect("masks are never empty")
    }

    /// The CPU `setbackdq` puts thread `t` on at `now`; `self_requeue`: `t` is the
    /// thread being switched out (always warm, unless affinity is ignored).
    pub(crate) fn setbackdq_cpu(&mut self, t: usize, now: u64, self_requeue: bool) -> usize {
        let oblivious = self.kcfg.affinity_oblivious;
        let th = &self.threads[t];
        let last = th.last_cpu.filter(|&l| th.mask.contains(CpuId(l as u32)));
        let warm = !oblivious
            && last.is_some()
            && (self_requeue || now.saturating_sub(th.last_ran) <= self.rechoose_cycles);
        let mut cp = match last {
            Some(l) if warm => l,
            _ => {
                let hint = if oblivious {
                    self.rng.below(self.cpus.len() as u64) as usize
                } else {
                    last.unwrap_or(0)
                };
                self.disp_lowpri_cpu(t, hint)
            }
        };
        // cmt_balance: a busy choice gives way to an idle CPU in a less busy group
        if self.nr(cp) > 0 {
            let idle: Vec<usize> = self.threads[t]
                .mask
                .iter()
                .map(|c| c.index())
                .filter(|&c| self.nr(c) == 0)
                .collect();
            if !idle.is_empty() {
                return self.spread_idle(&idle);
            }
        }
        // the run-queue rule against the next CPU the thread may use
        let tpri = self.sol_pri(t);
        let queued = |k: &Kernel, c: usize| {
            k.cpus[c]
                .rq
                .iter()
                .filter(|&&q| k.sol_pri(q) == tpri)
                .count()
        };
        let n = self.cpus.len();
        if let Some(next) = (1..n)
            .map(|k| (cp + k) % n)
            .find(|&c| self.threads[t].mask.contains(CpuId(c as u32)))
        {
            let here = queued(self, cp);
            let limit = if tpri < RUNQ_MATCH_PRI {
                here
            } else {
                here.saturating_sub(RUNQ_MAX_DIFF)
            };
            if limit > 0 && queued(self, next) < limit {
                cp = next;
            }
        }
        cp
    }

    /// `disp_getwork` for idle CPU `c` at `now`: steals the best queued thread it may
    /// run onto its own queue; returns whether it did. A thread protected by the
    /// steal delay makes `c` try again when the protection ends.
    pub(crate) fn steal(&mut self, c: usize, now: u64) -> bool {
        let n = self.cpus.len();
        let me = self.topo.cpus[c];
        let cpu_c = CpuId(c as u32);
        // locality order: same core, same chip, then the rest
        let mut victims: Vec<usize> = (1..n).map(|k| (c + k) % n).collect();
        victims.sort_by_key(|&v| {
            let o = self.topo.cpus[v];
            (o.core != me.core, o.chip != me.chip)
        });
        let mut best: Option<(i32, usize, usize)> = None;
        let mut retry_at: Option<u64> = None;
        for v in victims {
            for (i, &t) in self.cpus[v].rq.iter().enumerate() {
                let th = &self.threads[t];
                if !th.mask.contains(cpu_c) {
                    continue;
                }
                let p = self.sol_pri(t);
                if best.is_some_and(|(bp, ..)| p <= bp) {
                    continue;
                }
                let protected = !self.kcfg.affinity_oblivious
                    && th.last_cpu == Some(v)
                    && !self.share_llc(c, v)
                    && now.saturating_sub(th.wait_since) < self.nosteal_cycles;
                if protected {
                    let at = th.wait_since + self.nosteal_cycles;
                    retry_at = Some(retry_at.map_or(at, |r: u64| r.min(at)));
                    continue;
                }
                best = Some((p, v, i));
            }
        }
        let Some((_, v, i)) = best else {
            if let Some(at) = retry_at {
                self.add_timer(at, Timer::Steal(c));
            }
            return false;
        };
        let t = self.cpus[v].rq.remove(i);
        self.stats.balance_moves += 1;
        self.cpus[c].rq.push(t);
        true
    }

    /// The once-a-second `ts_update` at `now` (TS only): every thread's level is
    /// aged; queued threads whose level changed are placed again.
    pub(crate) fn ts_update(&mut self, now: u64) {
        for t in 0..self.threads.len() {
            let state = self.threads[t].state;
            let running = matches!(state, State::Running(_));
            if matches!(state, State::Waiting | State::Exited) {
                continue;
            }
            if !self.class.ts_update(&mut self.threads[t].se, running) {
                continue;
            }
            match state {
                State::Runnable => {
                    let from = self
                        .cpus
                        .iter()
                        .position(|cpu| cpu.rq.contains(&t))
                        .expect("a runnable thread is queued");
                    self.cpus[from].rq.retain(|&x| x != t);
                    let to = self.setbackdq_cpu(t, now, false);
                    let waiting_since = self.threads[t].wait_since;
                    self.enqueue(t, to, now);
                    self.threads[t].wait_since = waiting_since;
                }
                State::Running(c) => {
                    let p = self.sol_pri(t);
                    if self.cpus[c].rq.iter().any(|&q| self.sol_pri(q) > p) {
                        self.cpus[c].need_resched = true;
                    }
                }
                _ => {}
            }
        }
    }
}
