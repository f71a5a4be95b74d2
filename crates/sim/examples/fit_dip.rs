//! How the SPEC CPU2000 profiles' large regions were fitted to DIP's published LRU
//! curves (`cachesched_sim::workload::published`; `docs/workloads.md`, history).
//!
//! `cargo run --release -p cachesched-sim --example fit_dip -- art|mcf|scale|check`
//!
//! - `art`, `mcf`: coordinate descent, in log space, of the regions' sizes and weights
//!   (and, for mcf, the short reuse) minimising the mean absolute distance to DIP's
//!   Figure 3 points, from the starting point written below (reasoned from the
//!   program's structure; the search finds a local minimum, so the start matters and
//!   is recorded). About a minute each on one core.
//! - `scale`: twolf, vpr and parser, for which only the 1 MB figure (Table 2) is
//!   published: the weights of their regions of 1 MB and more multiplied by the one
//!   factor (bisection) at which the profile's 1 MB figure equals DIP's.
//!
//! - `check`: the profiles as they are, beside DIP's points.
//!
//! Prints the fitted values and the profile's curve beside DIP's; the profiles in
//! `benchmarks.rs` hold these values rounded to three digits.

use cachesched_sim::trace::mrc::model_curve;
use cachesched_sim::workload::benchmarks::benchmark;
use cachesched_sim::workload::published::{
    mean_distance, mpki_at, DIP_1MB_MPKI, DIP_ART_CURVE, DIP_MCF_CURVE,
};
use cachesched_sim::workload::{LocalityModel, Pattern, Region, Scope};

/// Distance of a candidate to the points (a shorter warm-up than the final check).
fn distance(m: &LocalityModel, points: &[(f64, f64)]) -> f64 {
    mean_distance(m, &model_curve(m, 1, 3_000_000, 1_500_000), points)
}

/// A private region of `kb` KiB (rounded).
fn region(kb: f64, weight: f64, pattern: Pattern) -> Region {
    Region {
        kb: kb.round() as u64,
        weight,
        pattern,
        scope: Scope::Private,
        write_fraction: None,
    }
}

/// Coordinate descent over the parameters `free` of `p`, multiplying one at a time
/// by a step (1.25, then its square roots) while the distance falls.
fn descend(
    mut p: Vec<f64>,
    free: &[usize],
    points: &[(f64, f64)],
    build: &dyn Fn(&[f64]) -> LocalityModel,
) -> Vec<f64> {
    let mut best = distance(&build(&p), points);
    println!("start: distance {best:.3}");
    let mut step = 1.25f64;
    while step > 1.01 {
        let mut improved = false;
        for &i in free {
            for f in [step, 1.0 / step] {
                let mut q = p.clone();
                q[i] *= f;
                let d = distance(&build(&q), points);
                if d < best {
                    (best, p, improved) = (d, q, true);
                }
            }
        }
        if !improved {
            step = step.sqrt();
        }
        println!("step {step:.3}: distance {best:.3} at {p:.4?}");
    }
    p
}

/// The model's regions and its curve beside the published points.
fn show(name: &str, m: &LocalityModel, points: &[(f64, f64)]) {
    let sd = model_curve(m, 1, 6_000_000, 3_000_000);
    println!(
        "{name}: recent {:.3}, stack {:.2}, regions (KiB, weight, pattern):",
        m.recent, m.stack_fraction
    );
    let total: f64 = m.regions.iter().map(|r| r.weight).sum();
    for r in &m.regions {
        println!("  {:>7} {:.4} {:?}", r.kb, r.weight / total, r.pattern);
    }
    for &(mb, y) in points {
        println!(
            "  {mb:>6.3} MB: profile {:>7.2}, DIP {y:>7.2}",
            mpki_at(m, &sd, mb)
        );
    }
    println!("  mean distance {:.2}", mean_distance(m, &sd, points));
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    match which.as_str() {
        "art" => {
            // a fast sweep (the first fall), the kernel sweep (the cliff), a random
            // region (the slope between), a larger one (the tail), hot data
            let base = benchmark("art").expect("art").model;
            let build = |p: &[f64]| LocalityModel {
                regions: vec![
                    region(p[8], p[0], Pattern::Stream { stride: 64 }),
                    region(p[5], p[1], Pattern::Stream { stride: 64 }),
                    region(p[6], p[2], Pattern::Random),
                    region(p[7], p[3], Pattern::Random),
                    region(16.0, p[4], Pattern::Random),
                ],
                ..base.clone()
            };
            // (the sizes and the kernel's weight from two earlier runs of this search
            // from cruder starts, which stopped at distances 2.2 and 2.3)
            let start = vec![0.05, 0.1342, 0.05, 0.0268, 0.2, 778.0, 600.0, 1536.0, 50.0];
            let p = descend(start, &[0, 1, 2, 3, 5, 6, 7, 8], &DIP_ART_CURVE, &build);
            show("art", &build(&p), &DIP_ART_CURVE);
        }
        "mcf" => {
            // the kernel chase (first cliff), a second chase (second cliff), a random
            // region (the slopes), the rest of the network (the floor), hot data;
            // a tenth of the accesses to the stack (see benchmarks.rs)
            let base = benchmark("mcf").expect("mcf").model;
            let build = |p: &[f64]| LocalityModel {
                regions: vec![
                    region(p[9], p[0], Pattern::Chase),
                    region(p[6], p[1], Pattern::Chase),
                    region(p[7], p[2], Pattern::Random),
                    region(96.0 * 1024.0, p[3], Pattern::Chase),
                    region(256.0, p[4], Pattern::Random),
                    region(32.0, p[5], Pattern::Random),
                ],
                stack_fraction: 0.1,
                recent: p[8],
                ..base.clone()
            };
            // sizes from the cliffs: a chase's reuse distance is its size plus the
            // lines the other regions touch in one of its cycles (~1.9× for the
            // kernel); weights in proportion to the misses each step removes
            let start = vec![
                2.8, 1.05, 1.75, 0.27, 0.1, 0.4, 1700.0, 5500.0, 0.12, 1850.0,
            ];
            let p = descend(start, &[0, 1, 2, 3, 6, 7, 8, 9], &DIP_MCF_CURVE, &build);
            show("mcf", &build(&p), &DIP_MCF_CURVE);
        }
        "scale" => {
            for (n, target) in DIP_1MB_MPKI {
                if !matches!(n, "twolf" | "vpr" | "parser") {
                    continue;
                }
                let base = benchmark(n).expect("profile").model;
                let build = |k: f64| {
                    let mut m = base.clone();
                    for r in m.regions.iter_mut().filter(|r| r.kb >= 1024) {
                        r.weight *= k;
                    }
                    m
                };
                let at_1mb = |k: f64| {
                    let m = build(k);
                    mpki_at(&m, &model_curve(&m, 1, 3_000_000, 1_500_000), 1.0)
                };
                let (mut lo, mut hi) = (0.001f64, 100.0f64);
                for _ in 0..24 {
                    let mid = (lo * hi).sqrt();
                    if at_1mb(mid) < target {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                let k = (lo * hi).sqrt();
                println!("{n}: large regions' weights × {k:.4} (of the profile as it is now)");
                show(n, &build(k), &[(1.0, target)]);
            }
        }
        "check" => {
            for (n, dip) in DIP_1MB_MPKI {
                let points: &[(f64, f64)] = match n {
                    "art" => &DIP_ART_CURVE,
                    "mcf" => &DIP_MCF_CURVE,
                    _ => &[(1.0, dip)],
                };
                show(n, &benchmark(n).expect("profile").model, points);
            }
        }
        _ => eprintln!("usage: fit_dip art|mcf|scale|check"),
    }
}
