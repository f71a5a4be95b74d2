//! Clustering threads by their shMaps (paper 3, §4.4).
//!
//! Counters below `small_value` are taken as zero (noise). A slot that is non-zero in
//! more than `global_fraction` of the threads is *globally shared* (data every thread
//! touches, e.g. a run-time's heap metadata) and ignored: it says nothing about which
//! threads belong together. Similarity is the dot product of two vectors. One pass in
//! thread order puts each thread into the cluster whose representative (its first
//! member) is most similar, if that similarity reaches the threshold, or else starts a
//! new cluster with the thread as representative — O(threads × clusters).

use cachesched_core::ThreadId;
use std::collections::BTreeMap;

/// Parameters of [`cluster`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClusterParams {
    /// Counters below this are treated as zero (paper: 3).
    pub small_value: u32,
    /// Dot product at which two threads share (paper: ≈ 40,000).
    pub similarity: u64,
    /// A slot non-zero in more than this fraction of the threads is global (paper: ½).
    pub global_fraction: f64,
}

/// The outcome of one clustering.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Clustering {
    /// Clusters, each in thread order, in order of their representatives.
    pub clusters: Vec<Vec<ThreadId>>,
    /// Slots found globally shared and ignored.
    pub global_slots: Vec<usize>,
}

impl Clustering {
    /// The cluster index of each clustered thread.
    pub fn cluster_of(&self) -> BTreeMap<ThreadId, usize> {
        let mut m = BTreeMap::new();
        for (i, c) in self.clusters.iter().enumerate() {
            for &t in c {
                m.insert(t, i);
            }
        }
        m
    }
}

/// The vectors of `maps` after zeroing small counters and global slots, as used for
/// similarity, with the global slots.
pub fn filtered(
    maps: &BTreeMap<ThreadId, Vec<u8>>,
    p: &ClusterParams,
) -> (BTreeMap<ThreadId, Vec<u32>>, Vec<usize>) {
    let mut v: BTreeMap<ThreadId, Vec<u32>> = maps
        .iter()
        .map(|(&t, m)| {
            let row = m
                .iter()
                .map(|&x| {
                    if (x as u32) < p.small_value {
                        0
                    } else {
                        x as u32
                    }
                })
                .collect();
            (t, row)
        })
        .collect();
    let entries = maps.values().map(Vec::len).max().unwrap_or(0);
    let threads = v.len();
    let global: Vec<usize> = (0..entries)
        .filter(|&e| {
            let nonzero = v
                .values()
                .filter(|r| r.get(e).copied().unwrap_or(0) > 0)
                .count();
            threads > 0 && nonzero as f64 > p.global_fraction * threads as f64
        })
        .collect();
    for row in v.values_mut() {
        for &e in &global {
            if let Some(x) = row.get_mut(e) {
                *x = 0;
            }
        }
    }
    (v, global)
}

/// The dot product of two vectors.
pub fn similarity(a: &[u32], b: &[u32]) -> u64 {
    a.iter().zip(b).map(|(&x, &y)| x as u64 * y as u64).sum()
}

/// Clusters the threads of one process by their shMaps. Threads whose filtered vector
/// is all zero (no non-global sharing seen) form no cluster and are left out.
pub fn cluster(maps: &BTreeMap<ThreadId, Vec<u8>>, p: &ClusterParams) -> Clustering {
    let (v, global_slots) = filtered(maps, p);
    let mut clusters: Vec<Vec<ThreadId>> = Vec::new();
    for (&t, row) in &v {
        if row.iter().all(|&x| x == 0) {
            continue;
        }
        let best = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| (i, similarity(row, &v[&c[0]])))
            .filter(|&(_, s)| s >= p.similarity)
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
        match best {
            Some((i, _)) => clusters[i].push(t),
            None => clusters.push(vec![t]),
        }
    }
    Clustering {
        clusters,
        global_slots,
    }
}

/// The adjusted Rand index of two partitions of the same items (`a[i]`, `b[i]`: the
/// part of item i in each): 1 for identical partitions, about 0 for a random one, for
/// scoring a clustering against a ground truth (Hubert & Arabie, 1985).
pub fn adjusted_rand_index(a: &[usize], b: &[usize]) -> f64 {
    assert_eq!(a.len(), b.len(), "partitions of different item sets");
    let pairs = |n: u64| (n * n.saturating_sub(1) / 2) as f64;
    let mut table: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut rows: BTreeMap<usize, u64> = BTreeMap::new();
    let mut cols: BTreeMap<usize, u64> = BTreeMap::new();
    for (&x, &y) in a.iter().zip(b) {
        *table.entry((x, y)).or_default() += 1;
        *rows.entry(x).or_default() += 1;
        *cols.entry(y).or_default() += 1;
    }
    let index: f64 = table.values().map(|&n| pairs(n)).sum();
    let sa: f64 = rows.values().map(|&n| pairs(n)).sum();
    let sb: f64 = cols.values().map(|&n| pairs(n)).sum();
    let expected = sa * sb / pairs(a.len() as u64).max(1.0);
    let max = 0.5 * (sa + sb);
    if (max - expected).abs() < 1e-12 {
        return if a.len() < 2 || rows.len() == cols.len() && index == sa {
            1.0
        } else {
            0.0
        };
    }
    (index - expected) / (max - expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: ClusterParams = ClusterParams {
        small_value: 3,
        similarity: 40_000,
        global_fraction: 0.5,
    };

    fn maps(rows: &[&[(usize, u8)]]) -> BTreeMap<ThreadId, Vec<u8>> {
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                let mut v = vec![0u8; 16];
                for &(e, x) in r.iter() {
                    v[e] = x;
                }
                (ThreadId(i as u32), v)
            })
            .collect()
    }

    #[test]
    fn two_groups_a_loner_and_a_global_slot() {
        // slot 15 touched by 4 of 6 threads: global. Threads 0,2 share slots 1-2;
        // 1,3 share slot 5; thread 4 only the global slot; thread 5 a private slot.
        let m = maps(&[
            &[(1, 200), (2, 150), (15, 255)],
            &[(5, 255), (15, 255)],
            &[(1, 210), (2, 140), (15, 255)],
            &[(5, 201), (15, 255)],
            &[(15, 255)],
            &[(9, 255)],
        ]);
        let c = cluster(&m, &P);
        assert_eq!(c.global_slots, vec![15]);
        let id = |v: &[u32]| v.iter().map(|&i| ThreadId(i)).collect::<Vec<_>>();
        assert_eq!(c.clusters, vec![id(&[0, 2]), id(&[1, 3]), id(&[5])]);
    }

    #[test]
    fn adjusted_rand_index_textbook_values() {
        let a = [0, 0, 0, 1, 1, 1];
        assert_eq!(adjusted_rand_index(&a, &a), 1.0);
        // renaming parts changes nothing
        assert_eq!(adjusted_rand_index(&a, &[5, 5, 5, 2, 2, 2]), 1.0);
        // sklearn's documented example: [0,0,1,1] vs [0,0,1,2] = 0.5714...
        let r = adjusted_rand_index(&[0, 0, 1, 1], &[0, 0, 1, 2]);
        assert!((r - 0.571_428_571).abs() < 1e-6, "{r}");
        // all in one part against all apart: 0
        assert_eq!(adjusted_rand_index(&[0, 0, 0, 0], &[0, 1, 2, 3]), 0.0);
        // one thread misplaced of 16 in 4 groups of 4 stays high but below 1
        let truth: Vec<usize> = (0..16).map(|i| i % 4).collect();
        let mut found = truth.clone();
        found[0] = 1;
        let r = adjusted_rand_index(&truth, &found);
        assert!(r > 0.7 && r < 0.95, "{r}");
    }

    #[test]
    fn exactly_half_is_not_global() {
        let m = maps(&[&[(1, 255)], &[(1, 255)], &[(2, 255)], &[(3, 255)]]);
        let c = cluster(&m, &P);
        assert!(c.global_slots.is_empty());
        assert_eq!(c.clusters[0], vec![ThreadId(0), ThreadId(1)]);
    }

    /// `rows` plus four threads with a private slot each (10-13), so that a slot two
    /// of the rows share is not global.
    fn with_loners(rows: &[&[(usize, u8)]]) -> BTreeMap<ThreadId, Vec<u8>> {
        let mut all: Vec<&[(usize, u8)]> = rows.to_vec();
        all.extend_from_slice(&[&[(10, 255)], &[(11, 255)], &[(12, 255)], &[(13, 255)]]);
        maps(&all)
    }

    /// The clusters with more than one member.
    fn groups(m: &BTreeMap<ThreadId, Vec<u8>>) -> Vec<Vec<ThreadId>> {
        cluster(m, &P)
            .clusters
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect()
    }

    #[test]
    fn small_counts_do_not_make_sharing() {
        // 2 in both of 12 slots: zeroed below 3, no sharing
        let row: Vec<(usize, u8)> = (0..8).map(|e| (e, 2)).collect();
        assert!(groups(&with_loners(&[&row, &row])).is_empty());
        // the threshold as the paper states it: one slot > 200 in both
        let pair = vec![vec![ThreadId(0), ThreadId(1)]];
        assert_eq!(groups(&with_loners(&[&[(4, 201)], &[(4, 201)]])), pair);
        assert!(groups(&with_loners(&[&[(4, 199)], &[(4, 199)]])).is_empty());
        // or two slots > 145
        let m = with_loners(&[&[(4, 146), (6, 146)], &[(4, 146), (6, 146)]]);
        assert_eq!(groups(&m), pair);
    }

    #[test]
    fn joins_the_most_similar_representative() {
        // thread 2 is similar to both representatives, more to thread 1's
        let m = with_loners(&[&[(1, 210)], &[(3, 250)], &[(1, 200), (3, 250)]]);
        let c = cluster(&m, &P);
        assert_eq!(c.clusters[0], vec![ThreadId(0)]);
        assert_eq!(c.clusters[1], vec![ThreadId(1), ThreadId(2)]);
    }
}
