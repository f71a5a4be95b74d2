//! Named profiles emulating the cache behaviour of the programs the five papers run:
//! SPEC CPU2000 (CASC, cache-fair, cache-affinity papers), Berkeley DB (CASC), and the
//! memory-intensive PARSEC / SPLASH-2x / SPEC CPU2006 programs and SAT solver of the
//! timeslice paper.
//!
//! A profile is a [`LocalityModel`] built from uniform random regions of graded sizes
//! (a mixture gives a gradual, convex fall of the miss ratio with cache size), scans
//! (thrashing until they fit) and pointer chases; reuse-distance regions would give exact
//! exponential curves but cost several times more to generate than the memory system
//! takes to simulate an access, so the profiles avoid them. What matters for scheduling research is the shape
//! of each program's miss ratio against cache size — where it falls, how steeply, and
//! whether it is cache-greedy or cache-frugal at the papers' cache sizes — and its memory
//! intensity. Each entry records what it emulates and where its shape comes from:
//!
//! - **Classes stated in the papers** (`../shared/papers`): CASC §5.3.2 classes 179.art
//!   as poor locality (cache-greedy) and 300.twolf and Berkeley DB as good locality at
//!   768 KB; its Berkeley DB runs a hot-set workload, 80% of accesses to 30% of a 100 MB
//!   database, each copy private. The affinity paper §2 finds gzip and mcf with good
//!   temporal reuse, art with poor, crafty and gcc with high instruction-cache miss
//!   rates, and art, mcf, parser, twolf the most memory-bound. The cache-fair paper cites
//!   gzip running 42% slower beside art than beside apsi (art is an aggressive
//!   occupant). The timeslice paper picks programs whose working sets exceed the L2 and
//!   shows raytrace and xalancbmk refilling a 4 MB LLC within 3–6 ms of a timeslice
//!   (Fig. 3), the SAT solver re-touching ~75% of its data between timeslices.
//! - **Program structure**, from the programs' published descriptions: art scans its
//!   neural-network arrays (a few MB) over and over, so LRU thrashes until they fit;
//!   mcf and canneal chase pointers through data far beyond any cache; streamcluster
//!   streams the same block of points repeatedly; gzip works in a 32 KB window with hash
//!   chains; Berkeley DB's B-tree keeps its upper levels hot while leaf pages are drawn
//!   from the hot set.
//! - **Footprints** are orders of magnitude of the programs' resident sets with their
//!   reference/native inputs (SPEC CPU2000/2006 documentation, Bienia et al., PARSEC,
//!   PACT 2008), not exact sizes.
//!
//! - **Published miss figures**, where they were found: the large regions of art, mcf,
//!   twolf, vpr and parser are fitted to the LRU L2 misses of Qureshi et al., "Adaptive
//!   Insertion Policies for High Performance Caching", ISCA 2007 (DIP): Table 2 (1 MB,
//!   all five) and Figure 3 (art's and mcf's whole curves, 0.06–2 MB and 0.1–8 MB).
//!   The SPEC CPU2006 profiles' short reuse is fitted to published L1D figures.
//!
//! The numeric miss ratios are the model's own, measured from the generated streams by
//! `cachesched workloads` (and `cachesched mrc` for whole curves), written in
//! `docs/workloads.md` beside the published figures, and checked by tests against
//! those figures and the classes above. Every fitted value, and why, is in the history
//! at the end of `docs/workloads.md`.

use crate::workload::{LocalityModel, Pattern, Region, Scope};

/// A named benchmark profile.
#[derive(Debug, Clone)]
pub struct Benchmark {
    /// Profile name (`--mix art:6`).
    pub name: &'static str,
    /// Suite of the emulated program.
    pub suite: &'static str,
    /// What it emulates and the shape it is built to have.
    pub emulates: &'static str,
    /// Where the shape comes from.
    pub source: &'static str,
    /// The locality model.
    pub model: LocalityModel,
}

const CASC: &str = "CASC paper §5.2, §5.3.2";
const AFFINITY: &str = "cache-affinity paper §2";
const FAIR: &str = "cache-fair paper §1, §3";
const SLICES: &str = "timeslice paper §2, §4, Fig. 3";

fn region(kb: u64, weight: f64, pattern: Pattern) -> Region {
    Region {
        kb,
        weight,
        pattern,
        scope: Scope::Private,
        write_fraction: None,
    }
}

/// Uniformly random words of `kb` KiB.
fn random(kb: u64, weight: f64) -> Region {
    region(kb, weight, Pattern::Random)
}

/// A sequential scan of `kb` KiB with 8-byte stride (one miss per 8 accesses when it
/// does not fit).
fn scan(kb: u64, weight: f64) -> Region {
    region(kb, weight, Pattern::Stream { stride: 8 })
}

/// Pointer chasing through `kb` KiB.
fn chase(kb: u64, weight: f64) -> Region {
    region(kb, weight, Pattern::Chase)
}

fn model(regions: Vec<Region>, gap_mean: f64, writes: f64, code_kb: u64) -> LocalityModel {
    LocalityModel {
        regions,
        gap_mean,
        write_fraction: writes,
        base_cpi: 1.0,
        ilp: crate::workload::DEFAULT_ILP,
        code_kb,
        code_layout: crate::workload::CodeLayout::Functions,
        stack_fraction: crate::workload::DEFAULT_STACK_FRACTION,
        spatial: crate::workload::DEFAULT_SPATIAL,
        recent: crate::workload::DEFAULT_RECENT,
        run_ms: None,
        sleep_ms: None,
        instructions: None,
    }
}

/// `m` with [`LocalityModel::recent`] set to `recent`: for the profiles whose program
/// has an L1D miss ratio to stand against (published, or measured from the same program
/// on this project's host), the value at which the profile's solo miss ratio in a fully
/// associative 32 KB cache of 64-byte lines equals it (`docs/workloads.md`, "Short
/// reuse"); the others keep [`crate::workload::DEFAULT_RECENT`].
fn with_recent(recent: f64, m: LocalityModel) -> LocalityModel {
    LocalityModel { recent, ..m }
}

/// All benchmark profiles.
pub fn benchmarks() -> Vec<Benchmark> {
    vec![
        // ---------------------------------------------------------------- SPEC CPU2000
        Benchmark {
            name: "art",
            suite: "SPEC CPU2000",
            emulates: "179.art: repeated sweeps over its neural-network arrays, a new 64-byte line per sweep access (one or two fields of each 64-byte f1_neuron; column walks of the weight rows); LRU misses ~50 per 1,000 instructions until ~0.5 MB, 39 at 1 MB, and falls off a cliff at ~1.3 MB, where the kernel's ~1.5 MB working set fits (DIP, Fig. 3)",
            source: "CASC paper §5.3.2; Qureshi et al., ISCA 2007 (DIP), Table 2 and Fig. 3",
            // Fitted to DIP's Figure 3 (1 MB 16-way LRU L2; docs/workloads.md,
            // history): the regions' sizes and weights minimise the mean distance to its
            // 16 points from 0.25 to 2 MB. The sweeps keep the 64-byte stride of
            // 179.art's scanner.c (one or two fields of each 64-byte f1_neuron; a column
            // of the bus weights). In a mixture every region's reuse distance includes
            // the others' lines, so the kernel sweep (778 KB) misses up to ~1.25 MB.
            // Weights as the search has them (relative; normalised, 0.052, 0.357,
            // 0.148, 0.064, 0.380).
            model: model(
                vec![
                    region(63, 0.0274, Pattern::Stream { stride: 64 }),
                    region(778, 0.188, Pattern::Stream { stride: 64 }),
                    random(537, 0.0781),
                    random(2646, 0.0335),
                    random(16, 0.2),
                ],
                1.5,
                0.1,
                8,
            ),
        },
        Benchmark {
            name: "mcf",
            suite: "SPEC CPU2000",
            emulates: "181.mcf: linked-list traversals of arcs and nodes (a ~3.5 MB kernel structure), the rest of a ~100 MB network touched rarely; LRU misses 136 per 1,000 instructions at 1 MB, falls off cliffs at ~3.5 and ~6.3 MB to ~7 at 8 MB (DIP, Fig. 3)",
            source: "cache-affinity paper §2.1, §2.3; Qureshi et al., ISCA 2007 (DIP), Table 2 and Fig. 3",
            // Fitted to DIP's Figure 3 (docs/workloads.md, history): sizes, weights and
            // the short reuse minimise the mean distance to its 20 points from 0.25 to
            // 8 MB. Two chases give the two cliffs (in a mixture each one's reuse
            // distance includes the other regions' lines, so the kernel chase is
            // 1.8 MB for a cliff at ~3.5 MB), a random region the slope between them,
            // a 96 MB chase the floor. A tenth of the data accesses go to the stack,
            // not the default 0.3: the kernel (84% of the misses, DIP Fig. 2) is a loop
            // over list fields with its variables in registers, and with 0.3 no short
            // reuse reaches DIP's 136 misses per 1,000 instructions (at most ~63).
            // Short reuse 0.129 and the floor's weight 0.0197 are from a step of the
            // search at mean distance 1.51; its last steps reached 0.127 and 0.0200
            // (1.46), after the measurements in docs/workloads.md had been made with
            // these.
            model: LocalityModel {
                stack_fraction: 0.1,
                ..with_recent(
                    0.129,
                    model(
                        vec![
                            chase(1850, 0.473),
                            chase(1304, 0.102),
                            random(3471, 0.330),
                            chase(96 * 1024, 0.0197),
                            random(256, 0.0151),
                            random(32, 0.0604),
                        ],
                        2.0,
                        0.15,
                        8,
                    ),
                )
            },
        },
        Benchmark {
            name: "gzip",
            suite: "SPEC CPU2000",
            emulates: "164.gzip: 32 KB window, hash chains, streaming input; misses fall early, frugal at 768 KB",
            source: AFFINITY,
            model: with_recent(0.38, model(
                vec![random(32, 0.55), random(8, 0.2), random(48, 0.15), random(256, 0.05), scan(64 * 1024, 0.05)],
                2.5,
                0.2,
                8,
            )),
        },
        Benchmark {
            name: "twolf",
            suite: "SPEC CPU2000",
            emulates: "300.twolf: placement over ~2 MB with strong reuse of ~40 KB; 3.5 misses per 1,000 instructions at 1 MB (DIP, Table 2), several times fewer than art at CASC's 768 KB",
            source: "CASC paper §5.3.2; Qureshi et al., ISCA 2007 (DIP), Table 2",
            model: model(
                // the two large regions' weights ×3.25 to DIP's 1 MB figure (docs/workloads.md)
                vec![random(8, 0.55), random(32, 0.3), random(128, 0.11), random(1024, 0.0975), random(2048, 0.0325)],
                3.0,
                0.15,
                16,
            ),
        },
        Benchmark {
            name: "vpr",
            suite: "SPEC CPU2000",
            emulates: "175.vpr: FPGA place and route over a few MB with good reuse; like twolf, somewhat larger; 2.2 misses per 1,000 instructions at 1 MB (DIP, Table 2)",
            source: "cache-fair paper §3; Qureshi et al., ISCA 2007 (DIP), Table 2",
            model: model(
                // the two large regions' weights ×0.33 to DIP's 1 MB figure (docs/workloads.md)
                vec![random(16, 0.45), random(128, 0.25), random(512, 0.2), random(2048, 0.0166), random(4096, 0.0166)],
                2.5,
                0.15,
                16,
            ),
        },
        Benchmark {
            name: "crafty",
            suite: "SPEC CPU2000",
            emulates: "186.crafty: chess search; small hot data, large transposition table touched rarely, 64 KB of hot code",
            source: AFFINITY,
            model: model(
                vec![random(48, 0.7), random(16, 0.2), random(256, 0.08), random(2048, 0.02)],
                3.0,
                0.1,
                64,
            ),
        },
        Benchmark {
            name: "gcc",
            suite: "SPEC CPU2000",
            emulates: "176.gcc: large code (256 KB executed), medium data reuse, a few MB of heap",
            source: AFFINITY,
            model: with_recent(0.53, model(
                vec![random(16, 0.45), random(48, 0.25), random(192, 0.2), random(1024, 0.05), random(4096, 0.05)],
                3.0,
                0.2,
                256,
            )),
        },
        Benchmark {
            name: "parser",
            suite: "SPEC CPU2000",
            emulates: "197.parser: dictionary lookups with hot data of a few hundred KB and a ~32 MB dictionary touched rarely; 1.6 misses per 1,000 instructions at 1 MB (DIP, Table 2), several times more below 512 KB",
            source: "cache-affinity paper §2.3; Qureshi et al., ISCA 2007 (DIP), Table 2",
            model: model(
                // the three large regions' weights ×0.05 to DIP's 1 MB figure (docs/workloads.md)
                vec![random(32, 0.45), random(256, 0.2), random(1024, 0.0085), random(4096, 0.005), random(32 * 1024, 0.004)],
                2.0,
                0.15,
                32,
            ),
        },
        Benchmark {
            name: "vortex",
            suite: "SPEC CPU2000",
            emulates: "255.vortex: object database; large code, medium data reuse over ~16 MB",
            source: FAIR,
            model: model(
                vec![random(16, 0.52), random(96, 0.2), random(384, 0.15), random(2048, 0.05), random(16 * 1024, 0.08)],
                2.5,
                0.25,
                192,
            ),
        },
        Benchmark {
            name: "gap",
            suite: "SPEC CPU2000",
            emulates: "254.gap: group-theory interpreter; hot interpreter state, 1 MB working heap, periodic heap sweeps",
            source: AFFINITY,
            model: model(
                vec![random(16, 0.5), random(64, 0.25), random(256, 0.12), random(1024, 0.03), scan(32 * 1024, 0.1)],
                2.5,
                0.2,
                32,
            ),
        },
        // ---------------------------------------------------------------- Berkeley DB
        Benchmark {
            name: "bdb",
            suite: "Berkeley DB",
            emulates: "hot-set queries on a private 100 MB database: 80% of record accesses to 30% of it; B-tree upper levels and buffer-pool metadata reused by every query, so frugal at 768 KB",
            source: CASC,
            model: model(
                vec![
                    random(8, 0.45),          // per-query state, locks, cursors
                    random(32, 0.35),         // B-tree root and upper internal pages
                    random(128, 0.15),        // lower internal pages, buffer-pool hash
                    random(384, 0.03),        // buffer headers, log buffer
                    random(30 * 1024, 0.016), // leaf/record lines in the hot 30%
                    random(70 * 1024, 0.004), // the cold 70%
                ],
                4.0,
                0.15,
                // executed code: the size at which the profile misses niagara-2c's 16 KB
                // L1I as often as SQLite's point-lookup window does (docs/workloads.md)
                32,
            ),
        },
        // ------------------------------------------- timeslice paper: PARSEC, SPLASH-2x, CPU2006
        Benchmark {
            name: "canneal",
            suite: "PARSEC 2.1",
            emulates: "canneal: random element swaps across a netlist of hundreds of MB; greedy at any LLC",
            source: SLICES,
            model: model(vec![random(32, 0.6), chase(256 * 1024, 0.1), random(256 * 1024, 0.3)], 3.0, 0.1, 16),
        },
        Benchmark {
            name: "streamcluster",
            suite: "PARSEC 2.1",
            emulates: "streamcluster: repeated passes over an 8 MB block of points; a cliff where the block fits",
            source: SLICES,
            model: model(vec![scan(8 * 1024, 0.85), random(16, 0.15)], 1.5, 0.02, 8),
        },
        Benchmark {
            name: "freqmine",
            suite: "PARSEC 2.1",
            emulates: "freqmine: FP-tree mining; reuse spread over tens of MB, misses fall gradually",
            source: SLICES,
            model: model(vec![random(32, 0.45), random(1024, 0.2), random(4096, 0.15), random(32 * 1024, 0.1), scan(16 * 1024, 0.1)], 2.5, 0.2, 32),
        },
        Benchmark {
            name: "raytrace",
            suite: "SPLASH-2x",
            emulates: "raytrace: BVH and scene of several MB reused every ray batch; refills a 4 MB LLC within a few ms",
            source: SLICES,
            model: model(vec![random(16, 0.4), random(1024, 0.3), random(3 * 1024, 0.25), random(8 * 1024, 0.05)], 2.5, 0.05, 32),
        },
        Benchmark {
            name: "mcf06",
            suite: "SPEC CPU2006",
            emulates: "429.mcf: pointer chasing over hundreds of MB; the most memory-bound program of the set",
            source: SLICES,
            model: with_recent(0.3, model(vec![random(32, 0.4), chase(512 * 1024, 0.35), random(2048, 0.1), random(16 * 1024, 0.15)], 2.0, 0.15, 8)),
        },
        Benchmark {
            name: "omnetpp",
            suite: "SPEC CPU2006",
            emulates: "471.omnetpp: discrete-event simulation; event heap and objects over ~100 MB, reuse at MB scale",
            source: SLICES,
            model: with_recent(0.49, model(vec![random(32, 0.45), random(1024, 0.2), random(4096, 0.15), random(32 * 1024, 0.15), random(64 * 1024, 0.05)], 2.5, 0.2, 64)),
        },
        Benchmark {
            name: "soplex",
            suite: "SPEC CPU2006",
            emulates: "450.soplex: simplex on sparse matrices; column streams plus a reused MB-scale working set",
            source: SLICES,
            model: with_recent(0.5, model(vec![random(32, 0.4), scan(64 * 1024, 0.35), random(1024, 0.15), random(8 * 1024, 0.1)], 2.0, 0.1, 32)),
        },
        Benchmark {
            name: "xalancbmk",
            suite: "SPEC CPU2006",
            emulates: "483.xalancbmk: XSLT over a DOM tree; large code, reuse at hundreds of KB to a few MB",
            source: SLICES,
            model: with_recent(0.55, model(vec![random(32, 0.4), random(512, 0.25), random(2048, 0.25), random(16 * 1024, 0.08), random(128 * 1024, 0.02)], 2.5, 0.15, 256)),
        },
        Benchmark {
            name: "satsolver",
            suite: "SAT (Glucose-like)",
            emulates: "CDCL SAT solver: watch lists and clause database of tens of MB, most of it re-touched between timeslices",
            source: SLICES,
            model: model(vec![random(32, 0.35), random(1024, 0.2), random(4096, 0.25), random(16 * 1024, 0.15), random(64 * 1024, 0.05)], 2.5, 0.1, 32),
        },
    ]
}

/// The benchmark profile called `name`.
pub fn benchmark(name: &str) -> Option<Benchmark> {
    benchmarks().into_iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::mrc::StackDistances;

    /// Warm solo miss-ratio curve (fully associative LRU, 64 B lines) of a profile.
    fn curve(name: &str, warm: u64, n: u64) -> StackDistances {
        let b = benchmark(name).expect("profile exists");
        crate::trace::mrc::model_curve(&b.model, 11, warm, n)
    }

    fn mr(sd: &StackDistances, kb: u64) -> f64 {
        sd.miss_ratio(kb * 1024 / 64)
    }

    /// Misses per 1,000 instructions of profile `name`'s curve at `kb` KiB.
    fn mpki(name: &str, sd: &StackDistances, kb: u64) -> f64 {
        mr(sd, kb)
            * benchmark(name)
                .expect("profile exists")
                .model
                .accesses_per_ki()
    }

    #[test]
    fn names_unique_and_models_valid() {
        let all = benchmarks();
        for (i, b) in all.iter().enumerate() {
            b.model
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert!(all[i + 1..].iter().all(|c| c.name != b.name), "{}", b.name);
        }
        // the papers' programs are all here
        for n in [
            "art",
            "mcf",
            "gzip",
            "twolf",
            "vpr",
            "crafty",
            "gcc",
            "parser",
            "vortex",
            "gap",
            "bdb",
            "canneal",
            "streamcluster",
            "mcf06",
            "omnetpp",
            "soplex",
            "xalancbmk",
            "raytrace",
            "freqmine",
            "satsolver",
        ] {
            assert!(benchmark(n).is_some(), "{n}");
        }
    }

    /// CASC's workload: at its base L2 (768 KB) art is cache-greedy and twolf and
    /// Berkeley DB are frugal (in misses per instruction); art's misses only collapse
    /// once its arrays fit.
    #[test]
    fn casc_classes_at_768_kb() {
        // art's warm-up covers several passes over its sweeps (a new line each)
        let art = curve("art", 3_000_000, 1_500_000);
        let twolf = curve("twolf", 600_000, 1_500_000);
        let bdb = curve("bdb", 600_000, 1_500_000);
        // misses per 1,000 instructions, what CASC's partial miss rates add up
        let (a, t, d) = (
            mpki("art", &art, 768),
            mpki("twolf", &twolf, 768),
            mpki("bdb", &bdb, 768),
        );
        assert!(
            a > 5.0 * t && a > 5.0 * d,
            "MPKI: art {a} twolf {t} bdb {d}"
        );
        // memory-bound: the class bar the timeslice test uses too (the value was 19.7
        // when the short-reuse accesses were added; 43 before the stack and next-word
        // accesses)
        assert!(a > 10.0, "art {a}");
        // twolf is sensitive in the small caches of the CASC sweep
        let (t48, t768) = (mr(&twolf, 48), mr(&twolf, 768));
        assert!(t48 > 3.0 * t768, "twolf 48 KB {t48} vs 768 KB {t768}");
        // art's kernel fits at ~1.3 MB (DIP, Fig. 3): a cliff, not a slope
        assert!(
            mr(&art, 1536) < 0.3 * mr(&art, 1024),
            "{} {}",
            mr(&art, 1024),
            mr(&art, 1536)
        );
    }

    /// The affinity paper's observations: mcf memory-bound everywhere, crafty and gzip
    /// mostly served by small caches.
    #[test]
    fn spec2000_shapes() {
        let mcf = curve("mcf", 200_000, 1_000_000);
        let crafty = curve("crafty", 200_000, 1_000_000);
        let gzip = curve("gzip", 200_000, 1_000_000);
        // memory-bound at 4 MB: more than twice the 9 and 2 data misses per 1,000
        // instructions H&P (6th ed., §2.7) give for gap and gcc at 4 MB (28.7 when the
        // short-reuse accesses were added)
        let mcf_mpki = mpki("mcf", &mcf, 4096);
        assert!(mcf_mpki > 20.0, "mcf {mcf_mpki} MPKI at 4 MB");
        assert!(mr(&crafty, 768) < 0.05 && mr(&gzip, 768) < 0.05);
        assert!(mr(&mcf, 768) > 5.0 * mr(&gzip, 768));
    }

    /// The timeslice paper chose programs whose working sets exceed the (256 KB) L2:
    /// their misses at 256 KB are well above what a 16 MB LLC leaves; raytrace and
    /// xalancbmk mostly fit a 4 MB LLC (they refill it within a timeslice, Fig. 3);
    /// streamcluster's block fits only the large LLC; canneal and mcf06 miss as much
    /// at 16 MB as at 256 KB. "Memory-intensive" is more than 5 misses per 1,000
    /// instructions at 256 KB: the published 1 MB L2 figures of two of the paper's
    /// programs are 3.8 (xalancbmk) and 4.4 (soplex) (Navarro-Torres et al., PLOS ONE
    /// 2019; `docs/workloads.md`).
    #[test]
    fn timeslice_programs_exceed_the_l2() {
        for n in [
            "streamcluster",
            "raytrace",
            "omnetpp",
            "xalancbmk",
            "satsolver",
            "freqmine",
            "soplex",
        ] {
            // warm-up long enough for a full pass over streamcluster's 8 MB block
            // (a sixth of the accesses go to it)
            let sd = curve(n, 8_000_000, 1_000_000);
            let (m256, m16) = (mr(&sd, 256), mr(&sd, 16 * 1024));
            let mpki256 = mpki(n, &sd, 256);
            assert!(
                mpki256 > 5.0 && m256 > 2.0 * m16,
                "{n}: 256 KB {m256} ({mpki256} MPKI), 16 MB {m16}"
            );
            if n == "raytrace" || n == "xalancbmk" {
                assert!(mr(&sd, 4096) < 0.25 * m256, "{n}");
            }
            if n == "streamcluster" {
                assert!(mr(&sd, 4096) > 5.0 * m16, "{n}");
            }
        }
        for n in ["canneal", "mcf06"] {
            let sd = curve(n, 200_000, 600_000);
            let (m256, m16) = (mr(&sd, 256), mr(&sd, 16 * 1024));
            let mpki16 = mpki(n, &sd, 16 * 1024);
            assert!(
                mpki16 > 15.0 && m16 > 0.7 * m256,
                "{n}: {mpki16} MPKI at 16 MB, 256 KB {m256}"
            );
        }
    }

    /// The SPEC CPU2000 profiles against DIP's 1 MB L2 figures (Table 2) and, for art
    /// and mcf, its whole curves (Fig. 3), to which their regions were fitted: the
    /// 1 MB figure within 10% for all five, the curves within a mean distance of 3
    /// misses per 1,000 instructions (art's points span 6–51, mcf's 7–139; the fits
    /// reached 2.0 and 1.6), and art's and mcf's cliffs where DIP has them (art's at
    /// 1.25–1.375 MB, mcf's at 3.25–4 MB). Moving a large region's size or weight by
    /// a quarter breaks one of these.
    #[test]
    fn spec2000_profiles_against_dip() {
        use crate::workload::published::{
            mean_distance, mpki_at, DIP_1MB_MPKI, DIP_ART_CURVE, DIP_MCF_CURVE,
        };
        for (n, dip) in DIP_1MB_MPKI {
            let model = benchmark(n).expect("profile exists").model;
            let sd = crate::trace::mrc::model_curve(&model, 11, 6_000_000, 3_000_000);
            let m = mpki_at(&model, &sd, 1.0);
            assert!((m / dip - 1.0).abs() < 0.1, "{n}: {m} at 1 MB, DIP {dip}");
            let (points, before, after): (&[(f64, f64)], f64, f64) = match n {
                "art" => (&DIP_ART_CURVE, 1.25, 1.375),
                "mcf" => (&DIP_MCF_CURVE, 3.25, 4.0),
                _ => continue,
            };
            let dist = mean_distance(&model, &sd, points);
            assert!(dist < 3.0, "{n}: mean distance {dist} to DIP's curve");
            assert!(
                mpki_at(&model, &sd, after) < 0.6 * mpki_at(&model, &sd, before),
                "{n}: no cliff between {before} and {after} MB"
            );
        }
    }

    /// The SPEC CPU2006 profiles against the programs' measured L1D and L2 figures
    /// (Navarro-Torres et al., PLOS ONE 14(8) e0220135, 2019: Xeon Gold 5120, 32 KB
    /// 8-way L1D, 1 MB L2, prefetchers off; `docs/workloads.md`, "Short reuse"). The
    /// L1D figure (data load misses per load) is what `recent` was fitted to, so that
    /// bound is tight; the L2 figure (L2 misses per 1,000 instructions) was not fitted
    /// and is held within a factor of 2 (the profile at 1 MB, fully associative).
    #[test]
    fn spec2006_profiles_against_published_l1d_and_l2() {
        for (n, l1, l2_mpki) in [
            ("mcf06", 0.195, 50.33),
            ("omnetpp", 0.079, 19.4),
            ("soplex", 0.044, 4.39),
            ("xalancbmk", 0.042, 3.82),
        ] {
            let sd = curve(n, 2_000_000, 1_000_000);
            let m32 = mr(&sd, 32);
            let at_1mb = mpki(n, &sd, 1024);
            assert!(
                (m32 / l1 - 1.0).abs() < 0.15,
                "{n}: 32 KB {m32}, published {l1}"
            );
            assert!(
                at_1mb / l2_mpki < 2.0 && l2_mpki / at_1mb < 2.0,
                "{n}: {at_1mb} MPKI at 1 MB, published {l2_mpki}"
            );
        }
    }

    /// Every program-like profile misses a four-line (256 B) cache about as often as
    /// the real programs traced here (0.285–0.435; `docs/workloads.md`, "Short
    /// reuse"): without the short-reuse accesses they miss it 0.63 of the time.
    /// mcf is the exception the published data demands: DIP's 136 misses per 1,000
    /// instructions at 1 MB are 0.41 of its accesses, which then miss four lines too;
    /// it is held below 0.6.
    #[test]
    fn short_reuse_as_real_programs_have_it() {
        for b in benchmarks() {
            let sd = crate::trace::mrc::model_curve(&b.model, 11, 200_000, 400_000);
            let m = sd.miss_ratio(4);
            let range = if b.name == "mcf" {
                0.41..0.6
            } else {
                0.15..0.45
            };
            assert!(range.contains(&m), "{}: {m}", b.name);
        }
    }
}
