//! Placing clusters on chips (paper 3, §4.5).
//!
//! Clusters are placed largest first, each on the chip with the fewest threads so far.
//! A cluster that would take that chip above an even share (⌈threads / chips⌉, the
//! concrete reading of the paper's "if that unbalances the chips") is spread evenly
//! instead, one thread at a time to the lightest chip. The chips are then renamed to
//! match the current placement as well as possible, so that a new round that finds the
//! same groups moves nobody (hysteresis: chip numbers carry no meaning of their own).
//! Last, threads in no cluster stay on their current chip while it is below the even
//! share, and otherwise fill the lightest chips: a thread with no remote samples gave
//! no reason to move it (it may already sit with the threads it shares with), and the
//! paper only asks that unclustered threads balance the load.

use cachesched_core::ThreadId;
use std::collections::BTreeMap;

/// Chip of each thread: `clusters` (each a list of threads) and `loose` threads placed
/// on `chips` chips, renamed to overlap most with `current` (a thread's chip now, where
/// known).
pub fn place(
    clusters: &[Vec<ThreadId>],
    loose: &[ThreadId],
    chips: usize,
    current: &BTreeMap<ThreadId, usize>,
) -> BTreeMap<ThreadId, usize> {
    assert!(chips > 0);
    let total = clusters.iter().map(Vec::len).sum::<usize>() + loose.len();
    let cap = total.div_ceil(chips);
    let mut load = vec![0usize; chips];
    let lightest = |load: &[usize]| (0..chips).min_by_key(|&c| (load[c], c)).expect("chips");
    let mut order: Vec<&Vec<ThreadId>> = clusters.iter().filter(|c| !c.is_empty()).collect();
    order.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    let mut out = BTreeMap::new();
    for c in order {
        let chip = lightest(&load);
        if load[chip] + c.len() <= cap {
            for &t in c {
                out.insert(t, chip);
            }
            load[chip] += c.len();
        } else {
            for &t in c {
                let chip = lightest(&load);
                out.insert(t, chip);
                load[chip] += 1;
            }
        }
    }
    // chips renamed after the clusters alone, so that loose threads can be kept where
    // they are
    let mut out = rename(out, chips, current);
    let mut load = vec![0usize; chips];
    for &c in out.values() {
        load[c] += 1;
    }
    for &t in loose {
        let chip = match current.get(&t) {
            Some(&c) if c < chips && load[c] < cap => c,
            _ => lightest(&load),
        };
        out.insert(t, chip);
        load[chip] += 1;
    }
    out
}

/// Renames the chips of `placed` so that as many threads as possible keep their chip
/// in `current`: greedily, the (new, old) pair with most threads in common first.
fn rename(
    placed: BTreeMap<ThreadId, usize>,
    chips: usize,
    current: &BTreeMap<ThreadId, usize>,
) -> BTreeMap<ThreadId, usize> {
    let mut overlap = vec![vec![0usize; chips]; chips];
    for (t, &new) in &placed {
        if let Some(&old) = current.get(t) {
            if old < chips {
                overlap[new][old] += 1;
            }
        }
    }
    let mut pairs: Vec<(usize, usize, usize)> = (0..chips)
        .flat_map(|n| (0..chips).map(move |o| (n, o)))
        .map(|(n, o)| (overlap[n][o], n, o))
        .collect();
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut map = vec![usize::MAX; chips];
    let mut taken = vec![false; chips];
    for (_, n, o) in pairs {
        if map[n] == usize::MAX && !taken[o] {
            map[n] = o;
            taken[o] = true;
        }
    }
    placed.into_iter().map(|(t, c)| (t, map[c])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<ThreadId> {
        v.iter().map(|&i| ThreadId(i)).collect()
    }

    fn chips_of(p: &BTreeMap<ThreadId, usize>, v: &[u32]) -> Vec<usize> {
        v.iter().map(|&i| p[&ThreadId(i)]).collect()
    }

    #[test]
    fn groups_go_whole_to_chips_and_balance() {
        // four groups of four on two chips: two groups per chip, 8 and 8
        let cl: Vec<Vec<ThreadId>> = (0..4).map(|g| ids(&[g, g + 4, g + 8, g + 12])).collect();
        let p = place(&cl, &[], 2, &BTreeMap::new());
        for g in 0..4 {
            let c = chips_of(&p, &[g, g + 4, g + 8, g + 12]);
            assert!(c.iter().all(|&x| x == c[0]), "group {g} split: {c:?}");
        }
        let on0 = p.values().filter(|&&c| c == 0).count();
        assert_eq!(on0, 8);
    }

    #[test]
    fn largest_first_and_split_when_too_big() {
        // a 6-thread cluster and a 2-thread one on 2 chips of cap 4: the big one is split
        // 3/3... then the pair goes whole to a chip with room
        let cl = vec![ids(&[0, 1, 2, 3, 4, 5]), ids(&[6, 7])];
        let p = place(&cl, &[], 2, &BTreeMap::new());
        let big = chips_of(&p, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(big.iter().filter(|&&c| c == 0).count(), 3);
        let pair = chips_of(&p, &[6, 7]);
        // chips hold 4 and 4 in the end only if the pair is split too: 3+2 > 4
        let loads: Vec<usize> = (0..2)
            .map(|c| p.values().filter(|&&x| x == c).count())
            .collect();
        assert_eq!(loads, vec![4, 4], "{pair:?}");
    }

    #[test]
    fn loose_threads_fill_the_lightest_chips() {
        let cl = vec![ids(&[0, 1, 2])];
        let p = place(&cl, &ids(&[3, 4, 5]), 2, &BTreeMap::new());
        assert_eq!(chips_of(&p, &[0, 1, 2]), vec![0, 0, 0]);
        assert_eq!(chips_of(&p, &[3, 4, 5]), vec![1, 1, 1]);
    }

    #[test]
    fn loose_threads_stay_while_their_chip_has_room() {
        // everyone is on chip 1 now; cluster {0,1} stays there, loose 2 too (cap 3), and
        // the loose threads 3-5 no longer fit: they go to chip 0
        let cur: BTreeMap<ThreadId, usize> = (0..6).map(|i| (ThreadId(i), 1)).collect();
        let p = place(&[ids(&[0, 1])], &ids(&[2, 3, 4, 5]), 2, &cur);
        assert_eq!(chips_of(&p, &[0, 1, 2]), vec![1, 1, 1]);
        assert_eq!(chips_of(&p, &[3, 4, 5]), vec![0, 0, 0]);
    }

    #[test]
    fn same_groups_again_move_nobody() {
        let cl: Vec<Vec<ThreadId>> = (0..4).map(|g| ids(&[g, g + 4, g + 8, g + 12])).collect();
        let first = place(&cl, &[], 2, &BTreeMap::new());
        // the same clusters found in another order
        let mut again = cl.clone();
        again.reverse();
        let second = place(&again, &[], 2, &first);
        assert_eq!(first, second);
        // with the chips' numbers swapped in the current placement too
        let swapped: BTreeMap<ThreadId, usize> = first.iter().map(|(&t, &c)| (t, 1 - c)).collect();
        assert_eq!(place(&cl, &[], 2, &swapped), swapped);
    }

    #[test]
    fn eight_chips() {
        let cl: Vec<Vec<ThreadId>> = (0..8)
            .map(|g| (0..4).map(|k| ThreadId(g * 4 + k)).collect())
            .collect();
        let p = place(&cl, &[], 8, &BTreeMap::new());
        for g in 0..8u32 {
            let c: Vec<usize> = (0..4).map(|k| p[&ThreadId(g * 4 + k)]).collect();
            assert!(c.iter().all(|&x| x == c[0]));
        }
        let used: std::collections::BTreeSet<usize> = p.values().copied().collect();
        assert_eq!(used.len(), 8);
    }
}
