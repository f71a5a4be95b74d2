//! Composition of policies: a chain runs several policies in order and merges what they
//! ask for.
//!
//! Merge rules, per thread: CPU masks intersect (an empty intersection is passed on as
//! is, and the kernel's guardrail falls back to all CPUs and counts it); for slices and
//! nice values the last policy in the chain that set one wins; a boost holds while any
//! policy asks for it. For the global sampling period the last policy that set one wins.
//! Each member gets its own tick period: the chain ticks at the greatest common divisor
//! of its members' periods and calls each member when its own period has elapsed.

use cachesched_core::num::gcd;
use cachesched_core::{
    AddressSample, CoRunSegment, CounterKind, Cpumask, Ctx, Directive, Nanos, Policy, ThreadId,
};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq)]
struct ThreadWish {
    mask: Option<Cpumask>,
    slice: Option<Nanos>,
    nice: Option<i32>,
    boost: bool,
}

#[derive(Default)]
struct Member {
    wishes: BTreeMap<ThreadId, ThreadWish>,
    sampling: Option<u64>,
    tick: Option<Nanos>,
    next_tick: Nanos,
}

/// Several policies run as one. See the [module documentation](self).
pub struct Chain {
    name: String,
    policies: Vec<Box<dyn Policy>>,
    members: Vec<Member>,
    merged: BTreeMap<ThreadId, ThreadWish>,
    sampling: Option<u64>,
    tick: Option<Nanos>,
}

impl Chain {
    /// A chain of `policies`, run in the given order.
    pub fn new(policies: Vec<Box<dyn Policy>>) -> Chain {
        let name = policies
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join("+");
        let members = policies.iter().map(|_| Member::default()).collect();
        Chain {
            name,
            policies,
            members,
            merged: BTreeMap::new(),
            sampling: None,
            tick: None,
        }
    }

    /// Number of member policies.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether the chain has no member.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Runs `f` on member `i` with a private directive buffer, records its wishes and
    /// forwards the merged result to `ctx`.
    fn run_member(
        &mut self,
        i: usize,
        ctx: &mut Ctx<'_>,
        f: &mut dyn FnMut(&mut dyn Policy, &mut Ctx<'_>),
    ) {
        let mut buf = Vec::new();
        {
            let view = ctx.view();
            let mut sub = Ctx::new(view, ctx.rng(), &mut buf);
            f(self.policies[i].as_mut(), &mut sub);
        }
        let now = ctx.now();
        let mut touched = Vec::new();
        for d in buf {
            let member = &mut self.members[i];
            match d {
                Directive::SetMask { thread, mask } => {
                    member.wishes.entry(thread).or_default().mask = mask;
                    touched.push(thread);
                }
                Directive::SetSlice { thread, slice } => {
                    member.wishes.entry(thread).or_default().slice = slice;
                    touched.push(thread);
                }
                Directive::SetNice { thread, nice } => {
                    member.wishes.entry(thread).or_default().nice = nice;
                    touched.push(thread);
                }
                Directive::Boost { thread, on } => {
                    member.wishes.entry(thread).or_default().boost = on;
                    touched.push(thread);
                }
                Directive::SetSamplingPeriod { period } => {
                    member.sampling = period;
                    let merged = self.members.iter().rev().find_map(|m| m.sampling);
                    if merged != self.sampling {
                        self.sampling = merged;
                        ctx.set_sampling_period(merged);
                    }
                }
                Directive::SetTickPeriod { period } => {
                    member.tick = period.filter(|p| p.0 > 0);
                    member.next_tick = now + member.tick.unwrap_or(Nanos::ZERO);
                    let merged = self
                        .members
                        .iter()
                        .filter_map(|m| m.tick.map(|p| p.0))
                        .reduce(gcd)
                        .map(Nanos);
                    if merged != self.tick {
                        self.tick = merged;
                        ctx.set_tick_period(merged);
                    }
                }
            }
        }
        touched.sort();
        touched.dedup();
        for t in touched {
            self.forward(t, ctx);
        }
    }

    fn forward(&mut self, t: ThreadId, ctx: &mut Ctx<'_>) {
        let mut m = ThreadWish::default();
        for member in &self.members {
            if let Some(w) = member.wishes.get(&t) {
                m.mask = match (m.mask.take(), &w.mask) {
                    (Some(a), Some(b)) => Some(a.and(b)),
                    (a, b) => a.or_else(|| b.clone()),
                };
                m.slice = w.slice.or(m.slice);
                m.nice = w.nice.or(m.nice);
                m.boost |= w.boost;
            }
        }
        let old = self.merged.get(&t).cloned().unwrap_or_default();
        if old.mask != m.mask {
            ctx.set_mask(t, m.mask.clone());
        }
        if old.slice != m.slice {
            ctx.set_slice(t, m.slice);
        }
        if old.nice != m.nice {
            ctx.set_nice(t, m.nice);
        }
        if old.boost != m.boost {
            ctx.boost(t, m.boost);
        }
        self.merged.insert(t, m);
    }

    fn each(&mut self, ctx: &mut Ctx<'_>, f: &mut dyn FnMut(&mut dyn Policy, &mut Ctx<'_>)) {
        for i in 0..self.policies.len() {
            self.run_member(i, ctx, f);
        }
    }
}

impl Policy for Chain {
    fn name(&self) -> &str {
        &self.name
    }

    fn required_counters(&self) -> Vec<CounterKind> {
        let mut v: Vec<CounterKind> = self
            .policies
            .iter()
            .flat_map(|p| p.required_counters())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    fn wants_corun_segments(&self) -> bool {
        self.policies.iter().any(|p| p.wants_corun_segments())
    }

    fn requires_corun_segments(&self) -> bool {
        self.policies.iter().any(|p| p.requires_corun_segments())
    }

    fn requires_address_samples(&self) -> bool {
        self.policies.iter().any(|p| p.requires_address_samples())
    }

    fn needs_thread_states(&self) -> bool {
        self.policies.iter().any(|p| p.needs_thread_states())
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.each(ctx, &mut |p, c| p.init(c));
    }

    fn thread_started(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        self.each(ctx, &mut |p, c| p.thread_started(c, thread));
    }

    fn thread_exited(&mut self, ctx: &mut Ctx<'_>, thread: ThreadId) {
        self.each(ctx, &mut |p, c| p.thread_exited(c, thread));
        for m in &mut self.members {
            m.wishes.remove(&thread);
        }
        self.merged.remove(&thread);
    }

    fn corun_segment(&mut self, ctx: &mut Ctx<'_>, segment: &CoRunSegment) {
        for i in 0..self.policies.len() {
            if self.policies[i].wants_corun_segments() {
                self.run_member(i, ctx, &mut |p, c| p.corun_segment(c, segment));
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now();
        for i in 0..self.policies.len() {
            let m = &mut self.members[i];
            if let Some(p) = m.tick {
                if now >= m.next_tick {
                    while m.next_tick <= now {
                        m.next_tick += p;
                    }
                    self.run_member(i, ctx, &mut |p, c| p.tick(c));
                }
            }
        }
    }

    fn address_sample(&mut self, ctx: &mut Ctx<'_>, sample: &AddressSample) {
        self.each(ctx, &mut |p, c| p.address_sample(c, sample));
    }

    fn stats(&self) -> cachesched_core::policy_stats::StatsRecord {
        // each member's under its name: read back with `from_record_prefixed(r, "NAME.")`
        self.policies
            .iter()
            .flat_map(|p| {
                let n = p.name().to_string();
                p.stats()
                    .into_iter()
                    .map(move |(k, v)| (format!("{n}.{k}"), v))
            })
            .collect()
    }

    fn vectors(&self) -> Vec<(String, Vec<f64>)> {
        self.policies
            .iter()
            .flat_map(|p| {
                let n = p.name().to_string();
                p.vectors()
                    .into_iter()
                    .map(move |(k, v)| (format!("{n}.{k}"), v))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachesched_core::policy::KernelView;
    use cachesched_core::{CpuId, SimRng, ThreadView, Topology};

    struct View(Topology, Nanos);
    impl KernelView for View {
        fn now(&self) -> Nanos {
            self.1
        }
        fn topology(&self) -> &Topology {
            &self.0
        }
        fn live_threads(&self) -> Vec<ThreadId> {
            vec![ThreadId(0)]
        }
        fn thread(&self, _: ThreadId) -> Option<ThreadView> {
            None
        }
        fn available_counters(&self) -> &[CounterKind] {
            &[]
        }
    }

    /// Sets fixed wishes for thread 0 at start and counts its ticks.
    struct Wish {
        mask: Option<&'static str>,
        slice_ms: Option<u64>,
        boost: bool,
        tick_ms: u64,
        ticks: std::sync::Arc<std::sync::atomic::AtomicU32>,
    }

    impl Policy for Wish {
        fn name(&self) -> &str {
            "wish"
        }
        fn init(&mut self, ctx: &mut Ctx<'_>) {
            ctx.set_tick_period(Some(Nanos::from_ms(self.tick_ms)));
        }
        fn thread_started(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) {
            if let Some(m) = self.mask {
                ctx.set_mask(t, Cpumask::parse_list(m));
            }
            if let Some(s) = self.slice_ms {
                ctx.set_slice(t, Some(Nanos::from_ms(s)));
            }
            if self.boost {
                ctx.boost(t, true);
            }
        }
        fn tick(&mut self, _ctx: &mut Ctx<'_>) {
            self.ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn merges_wishes_and_splits_ticks() {
        let topo = Topology::symmetric("t", 1000, 1, 4, 1, &[]).unwrap();
        let counters: Vec<_> = (0..2)
            .map(|_| std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0)))
            .collect();
        let a = Wish {
            mask: Some("0-2"),
            slice_ms: Some(10),
            boost: false,
            tick_ms: 4,
            ticks: counters[0].clone(),
        };
        let b = Wish {
            mask: Some("1-3"),
            slice_ms: Some(30),
            boost: true,
            tick_ms: 6,
            ticks: counters[1].clone(),
        };
        let mut chain = Chain::new(vec![Box::new(a), Box::new(b)]);
        assert_eq!(chain.name(), "wish+wish");
        let mut rng = SimRng::new(1);
        let mut out = Vec::new();
        let view = View(topo.clone(), Nanos::ZERO);
        chain.init(&mut Ctx::new(&view, &mut rng, &mut out));
        // ticks at the gcd of 4 ms and 6 ms
        assert_eq!(
            out,
            vec![
                Directive::SetTickPeriod {
                    period: Some(Nanos::from_ms(4))
                },
                Directive::SetTickPeriod {
                    period: Some(Nanos::from_ms(2))
                }
            ]
        );
        out.clear();
        chain.thread_started(&mut Ctx::new(&view, &mut rng, &mut out), ThreadId(0));
        let last_mask = out.iter().rev().find_map(|d| match d {
            Directive::SetMask { mask, .. } => Some(mask.clone()),
            _ => None,
        });
        assert_eq!(
            last_mask,
            Some(Some(Cpumask::from_cpus([CpuId(1), CpuId(2)]))),
            "masks intersect"
        );
        let last_slice = out.iter().rev().find_map(|d| match d {
            Directive::SetSlice { slice, .. } => Some(*slice),
            _ => None,
        });
        assert_eq!(
            last_slice,
            Some(Some(Nanos::from_ms(30))),
            "the later policy's slice wins"
        );
        assert!(out.contains(&Directive::Boost {
            thread: ThreadId(0),
            on: true
        }));
        // each member ticks at its own period: over 12 ms, a: 3 times, b: 2 times
        for ms in (2..=12).step_by(2) {
            let v = View(topo.clone(), Nanos::from_ms(ms));
            chain.tick(&mut Ctx::new(&v, &mut rng, &mut Vec::new()));
        }
        assert_eq!(counters[0].load(std::sync::atomic::Ordering::SeqCst), 3);
        assert_eq!(counters[1].load(std::sync::atomic::Ordering::SeqCst), 2);
        // an exited thread's wishes are forgotten
        chain.thread_exited(&mut Ctx::new(&view, &mut rng, &mut Vec::new()), ThreadId(0));
        assert!(chain.merged.is_empty() && chain.members.iter().all(|m| m.wishes.is_empty()));
    }
}
