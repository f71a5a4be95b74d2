//! CPU masks: sets of logical CPUs.

use crate::types::CpuId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A set of CPUs, stored as a bit vector. Masks of different lengths compare by content.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Cpumask {
    bits: Vec<u64>,
}

impl Cpumask {
    /// The empty mask.
    pub fn new() -> Cpumask {
        Cpumask { bits: Vec::new() }
    }

    /// CPUs `0..n`.
    pub fn first_n(n: usize) -> Cpumask {
        let mut m = Cpumask::new();
        for c in 0..n {
            m.set(CpuId(c as u32));
        }
        m
    }

    /// A mask holding exactly the given CPUs.
    pub fn from_cpus<I: IntoIterator<Item = CpuId>>(cpus: I) -> Cpumask {
        let mut m = Cpumask::new();
        for c in cpus {
            m.set(c);
        }
        m
    }

    /// Adds `cpu`.
    pub fn set(&mut self, cpu: CpuId) {
        let (w, b) = (cpu.index() / 64, cpu.index() % 64);
        if self.bits.len() <= w {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] |= 1 << b;
    }

    /// Removes `cpu`.
    pub fn clear(&mut self, cpu: CpuId) {
        let (w, b) = (cpu.index() / 64, cpu.index() % 64);
        if let Some(word) = self.bits.get_mut(w) {
            *word &= !(1 << b);
        }
    }

    /// Whether `cpu` is in the mask.
    #[inline]
    pub fn contains(&self, cpu: CpuId) -> bool {
        let (w, b) = (cpu.index() / 64, cpu.index() % 64);
        self.bits.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Number of CPUs in the mask.
    pub fn weight(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether no CPU is set.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    /// Set intersection.
    pub fn and(&self, other: &Cpumask) -> Cpumask {
        let n = self.bits.len().min(other.bits.len());
        Cpumask {
            bits: (0..n).map(|i| self.bits[i] & other.bits[i]).collect(),
        }
    }

    /// Set union.
    pub fn or(&self, other: &Cpumask) -> Cpumask {
        let n = self.bits.len().max(other.bits.len());
        let get = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
        Cpumask {
            bits: (0..n)
                .map(|i| get(&self.bits, i) | get(&other.bits, i))
                .collect(),
        }
    }

    /// Whether the two masks share a CPU.
    pub fn intersects(&self, other: &Cpumask) -> bool {
        self.bits.iter().zip(&other.bits).any(|(a, b)| a & b != 0)
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            (0..64)
                .filter(move |b| word & (1u64 << b) != 0)
                .map(move |b| CpuId((w * 64 + b) as u32))
        })
    }

    /// The lowest CPU in the mask.
    pub fn first(&self) -> Option<CpuId> {
        self.iter().next()
    }

    /// Parses the Linux list format, e.g. `0-3,8,10-11`.
    pub fn parse_list(s: &str) -> Option<Cpumask> {
        let mut m = Cpumask::new();
        let s = s.trim();
        if s.is_empty() {
            return Some(m);
        }
        for part in s.split(',') {
            let part = part.trim();
            if let Some((a, b)) = part.split_once('-') {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b > 1 << 16 {
                    return None;
                }
                for c in a..=b {
                    m.set(CpuId(c));
                }
            } else {
                m.set(CpuId(part.parse().ok()?));
            }
        }
        Some(m)
    }
}

impl PartialEq for Cpumask {
    fn eq(&self, other: &Self) -> bool {
        let n = self.bits.len().max(other.bits.len());
        (0..n).all(|i| self.bits.get(i).unwrap_or(&0) == other.bits.get(i).unwrap_or(&0))
    }
}
impl Eq for Cpumask {}

impl fmt::Display for Cpumask {
    /// The Linux list format, e.g. `0-3,8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus: Vec<u32> = self.iter().map(|c| c.0).collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < cpus.len() {
            let mut j = i;
            while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                j += 1;
            }
            out.push(if i == j {
                cpus[i].to_string()
            } else {
                format!("{}-{}", cpus[i], cpus[j])
            });
            i = j + 1;
        }
        write!(f, "{}", out.join(","))
    }
}

impl fmt::Debug for Cpumask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cpumask({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip_and_set_ops() {
        let m = Cpumask::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(m.weight(), 7);
        assert_eq!(m.to_string(), "0-3,8,10-11");
        let n = Cpumask::parse_list("2-9").unwrap();
        assert_eq!(m.and(&n).to_string(), "2-3,8");
        assert_eq!(m.or(&n).to_string(), "0-11");
        assert!(m.intersects(&n));
        assert!(!Cpumask::parse_list("70").unwrap().intersects(&m));
        assert!(Cpumask::parse_list("3-1").is_none());
        assert!(Cpumask::parse_list("x").is_none());
        assert_eq!(Cpumask::from_cpus([CpuId(64)]).first(), Some(CpuId(64)));
        assert_eq!(Cpumask::first_n(2), Cpumask::parse_list("0,1").unwrap());
    }
}
