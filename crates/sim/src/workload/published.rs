//! Published miss figures the benchmark profiles are fitted to and tested against
//! (`docs/workloads.md`, "SPEC CPU2000 profiles against published L2 figures").
//!
//! Qureshi, Jaleel, Patt, Steely and Emer, "Adaptive Insertion Policies for High
//! Performance Caching", ISCA 2007 (DIP): L2 misses per 1,000 instructions of SPEC
//! CPU2000 programs (Alpha binaries, reference inputs, one 250 M-instruction SimPoint
//! slice each) with a 16-way LRU L2 of 64-byte lines behind 16 KB 2-way L1s.

/// DIP, Table 2: L2 misses per 1,000 instructions at 1 MB, for the programs with
/// a profile here.
pub const DIP_1MB_MPKI: [(&str, f64); 5] = [
    ("art", 38.7),
    ("mcf", 136.0),
    ("twolf", 3.48),
    ("vpr", 2.16),
    ("parser", 1.57),
];

/// DIP, Figure 3: 179.art's LRU curve, (cache size in MB, misses per 1,000
/// instructions), read off the plotted points (to about ±0.5). The first fall (near
/// 0.6 MB) and the cliff at 1.25–1.375 MB are where the paper's kernel arrays, 640 KB
/// of `f1_layer` and 880 KB of `bus`, stop being thrashed.
pub const DIP_ART_CURVE: [(f64, f64); 16] = [
    (0.25, 50.6),
    (0.5, 50.6),
    (0.625, 44.3),
    (0.75, 42.3),
    (0.875, 40.4),
    (1.0, 38.7),
    (1.125, 37.2),
    (1.1875, 34.5),
    (1.25, 29.0),
    (1.3125, 11.5),
    (1.375, 8.3),
    (1.5, 8.0),
    (1.625, 7.4),
    (1.75, 7.2),
    (1.875, 7.0),
    (2.0, 5.6),
];

/// DIP, Figure 3: 181.mcf's LRU curve, read off the plot as [`DIP_ART_CURVE`] (to
/// about ±1): "MPKI reduces only marginally till 3.5MB and then the first knee of the
/// MPKI curve occurs"; a second knee near 6.3 MB.
pub const DIP_MCF_CURVE: [(f64, f64); 20] = [
    (0.25, 139.0),
    (0.5, 138.0),
    (1.0, 136.0),
    (1.5, 133.5),
    (2.0, 130.0),
    (2.5, 126.5),
    (3.0, 122.5),
    (3.25, 119.5),
    (3.5, 77.0),
    (3.75, 50.0),
    (4.0, 46.5),
    (4.5, 43.0),
    (5.0, 39.5),
    (5.5, 35.5),
    (5.75, 31.5),
    (6.0, 25.0),
    (6.25, 14.5),
    (6.5, 9.5),
    (7.0, 7.5),
    (8.0, 6.8),
];

/// Misses per 1,000 instructions of a profile's warm solo curve (fully associative
/// LRU, 64-byte lines, data accesses) at `mb` megabytes.
pub fn mpki_at(
    model: &crate::workload::LocalityModel,
    curve: &crate::trace::mrc::StackDistances,
    mb: f64,
) -> f64 {
    let lines = (mb * 1024.0 * 1024.0 / 64.0) as u64;
    curve.miss_ratio(lines) * model.accesses_per_ki()
}

/// Mean absolute distance, in misses per 1,000 instructions, between a profile's
/// curve and published points.
pub fn mean_distance(
    model: &crate::workload::LocalityModel,
    curve: &crate::trace::mrc::StackDistances,
    points: &[(f64, f64)],
) -> f64 {
    points
        .iter()
        .map(|&(mb, y)| (mpki_at(model, curve, mb) - y).abs())
        .sum::<f64>()
        / points.len() as f64
}
