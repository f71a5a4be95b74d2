//! Number helpers shared by the crates: arithmetic, and numbers and names as people
//! read them.

use std::cmp::Ordering;

/// The greatest common divisor of `a` and `b` (`gcd(a, 0) = a`).
pub fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

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

/// `a / b` as a float, 0 when `b` is 0 (a rate over an empty interval).
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// `x.ceil() as u64` without a call into the maths library (x86-64's baseline has no
/// rounding instruction, and the engine rounds on every chunk it dispatches): the same
/// value for every `x` from 0 to 2^53 and for NaN (0); not for larger or negative ones.
#[inline(always)]
pub fn ceil_u64(x: f64) -> u64 {
    // through i64: its conversions are single instructions, the u64 ones a dozen
    let i = x as i64;
    i.wrapping_add(i64::from((i as f64) < x)) as u64
}

/// A number as a person reads it: three significant digits, plain between 0.001 and
/// 100,000 (`0.161`, `24.5`, `1390`), else in e-notation (`1.32e9`).
pub fn plain(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        return format!("{v:.2e}");
    }
    let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// Orders names the way people do: runs of digits by their value (`pcmr.2` before
/// `pcmr.10`), the rest by characters.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let i = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let j = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (m, n) = (&x[..i], &y[..j]);
                // by value: leading zeros aside, a longer run is larger
                let (zm, zn) = (
                    m.iter().take_while(|&&c| c == b'0').count(),
                    n.iter().take_while(|&&c| c == b'0').count(),
                );
                let (ms, ns) = (&m[zm..], &n[zn..]);
                let o = ms.len().cmp(&ns.len()).then(ms.cmp(ns)).then(i.cmp(&j));
                if o != Ordering::Equal {
                    return o;
                }
                (x, y) = (&x[i..], &y[j..]);
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                (x, y) = (&x[1..], &y[1..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_u64_is_ceil() {
        for x in [
            0.0,
            0.2,
            1.0,
            1.5,
            2.999,
            3.0,
            7.25e6,
            4503599627370495.5,
            f64::NAN,
        ] {
            assert_eq!(ceil_u64(x), x.ceil() as u64, "{x}");
        }
        let mut x = 0.013f64;
        for _ in 0..10_000 {
            assert_eq!(ceil_u64(x), x.ceil() as u64, "{x}");
            x = x * 1.37 % 1e6 + 0.1;
        }
    }

    #[test]
    fn numbers_and_names_for_people() {
        assert_eq!(plain(0.16123), "0.161");
        assert_eq!(plain(24.49), "24.5");
        assert_eq!(plain(1390.2), "1390");
        assert_eq!(plain(1.32e9), "1.32e9");
        assert_eq!(plain(0.0), "0");
        let mut v = vec![
            "pcmr.10",
            "pcmr.2",
            "max_pcmr.0.cpu1",
            "pcmr.1",
            "moves",
            "pcmr.02",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "max_pcmr.0.cpu1",
                "moves",
                "pcmr.1",
                "pcmr.2",
                "pcmr.02",
                "pcmr.10"
            ]
        );
    }

    #[test]
    fn gcd_of_small_numbers() {
        assert_eq!(gcd(12, 18), 6);
        assert_eq!(gcd(18, 12), 6);
        assert_eq!(gcd(7, 0), 7);
        assert_eq!(gcd(0, 7), 7);
        assert_eq!(gcd(1_000_003, 999_983), 1);
    }
}
