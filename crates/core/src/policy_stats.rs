//! Typed policy statistics.
//!
//! Each policy declares its statistics as a struct with [`policy_stats!`](crate::policy_stats!), one field
//! per measure with a description (as scx_layered's stats do). The struct is the
//! interface: the policy fills it, and readers (the laboratory's analyses, the tests,
//! `cachesched info`) read it back with [`PolicyStats::from_record`] instead of matching
//! key strings. On the wire, in result files and the run cache, a policy's statistics
//! are a flat [`StatsRecord`] of `(key, value)` pairs: a scalar field is one key, a map
//! field (per thread, per CPU, per reason) is one key per entry, `PREFIX` followed by
//! the entry's key (`pcmr.3`). The flat form is what results stored before the typed
//! structs hold, so they stay readable.
//!
//! ```
//! use std::collections::BTreeMap;
//! use cachesched_core::policy_stats::PolicyStats;
//!
//! cachesched_core::policy_stats! {
//!     /// Statistics of an example policy.
//!     pub struct ExampleStats for "example" {
//!         /// Periods observed.
//!         periods: u64 = "periods",
//!         /// When the policy settled (ms); -1 in the record while it has not.
//!         settled_ms: Option<f64> = "settled_ms" or -1.0,
//!         /// Each thread's score, by thread id.
//!         score: BTreeMap<u64, f64> = "score.",
//!     }
//! }
//!
//! let mut s = ExampleStats::default();
//! s.periods = 3;
//! s.score.insert(7, 0.5);
//! let record = s.to_record();
//! assert_eq!(record, vec![
//!     ("periods".to_string(), 3.0),
//!     ("settled_ms".to_string(), -1.0),
//!     ("score.7".to_string(), 0.5),
//! ]);
//! let map: BTreeMap<String, f64> = record.into_iter().collect();
//! assert_eq!(ExampleStats::from_record(&map), Some(s));
//! ```

use std::collections::BTreeMap;
use std::fmt::Display;
use std::str::FromStr;

/// A policy's statistics as stored: `(key, value)` pairs.
pub type StatsRecord = Vec<(String, f64)>;

/// One field of a policy's statistics, for listings and readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatField {
    /// The field's name in the struct.
    pub name: &'static str,
    /// Its key in the record; for a map field, the prefix of its entries' keys.
    pub key: &'static str,
    /// Whether the field is a map (one record entry per key) rather than one value.
    pub map: bool,
    /// What the field measures (its doc comment).
    pub about: &'static str,
}

/// A policy's typed statistics (made by [`policy_stats!`](crate::policy_stats!)).
pub trait PolicyStats: Default + Sized {
    /// The names a run gives the policy that reports these statistics: its registry
    /// name first, then those of its modes that name themselves apart
    /// (`timeslice-dynamic`). A chain stores a member's statistics under `NAME.`.
    const POLICIES: &'static [&'static str];

    /// The fields, in declaration order.
    const FIELDS: &'static [StatField];

    /// The flat record stored in results.
    fn to_record(&self) -> StatsRecord;

    /// Reads the statistics back from a record whose keys may carry `prefix` (a chain
    /// of policies stores each member's statistics as `NAME.key`). `None` when the
    /// record holds none of this struct's scalar fields (another policy's record);
    /// a missing field reads as its default.
    fn from_record_prefixed(record: &BTreeMap<String, f64>, prefix: &str) -> Option<Self>;

    /// [`from_record_prefixed`](PolicyStats::from_record_prefixed) with the bare keys.
    fn from_record(record: &BTreeMap<String, f64>) -> Option<Self> {
        Self::from_record_prefixed(record, "")
    }

    /// The field whose key (or map prefix) `key` belongs to.
    fn field_of(key: &str) -> Option<&'static StatField> {
        field_of(Self::FIELDS, key)
    }
}

/// The field of `fields` whose key (or map prefix) `key` belongs to.
pub fn field_of<'a>(fields: &'a [StatField], key: &str) -> Option<&'a StatField> {
    fields.iter().find(|f| {
        if f.map {
            key.strip_prefix(f.key).is_some_and(|rest| !rest.is_empty())
        } else {
            key == f.key
        }
    })
}

/// A value a statistics field can hold, and how it goes to and from the record.
pub trait StatSlot: Default {
    /// Whether the slot is a map of entries.
    const MAP: bool;

    /// Appends the slot's record entries under `key` (`absent`: what a `None` is
    /// written as, if anything).
    fn write(&self, key: &str, absent: Option<f64>, out: &mut StatsRecord);

    /// Reads the slot from `record` (keys carry `prefix`); `None` when no entry is there
    /// (a map always reads, possibly empty).
    fn read(
        key: &str,
        absent: Option<f64>,
        prefix: &str,
        record: &BTreeMap<String, f64>,
    ) -> Option<Self>;
}

/// A scalar that is one record value.
pub trait StatValue: Default + Copy {
    /// As stored.
    fn to_f64(self) -> f64;
    /// From the stored value.
    fn from_f64(x: f64) -> Self;
}

impl StatValue for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(x: f64) -> Self {
        x
    }
}

impl StatValue for u64 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> Self {
        // stored counts are whole and non-negative; a damaged value saturates
        x.max(0.0).round() as u64
    }
}

impl StatValue for bool {
    fn to_f64(self) -> f64 {
        u8::from(self).into()
    }
    fn from_f64(x: f64) -> Self {
        x != 0.0
    }
}

fn get(prefix: &str, key: &str, record: &BTreeMap<String, f64>) -> Option<f64> {
    if prefix.is_empty() {
        record.get(key).copied()
    } else {
        record.get(&format!("{prefix}{key}")).copied()
    }
}

macro_rules! scalar_slot {
    ($($t:ty),*) => {$(
        impl StatSlot for $t {
            const MAP: bool = false;
            fn write(&self, key: &str, _: Option<f64>, out: &mut StatsRecord) {
                out.push((key.to_string(), self.to_f64()));
            }
            fn read(
                key: &str,
                _: Option<f64>,
                prefix: &str,
                record: &BTreeMap<String, f64>,
            ) -> Option<Self> {
                get(prefix, key, record).map(<$t>::from_f64)
            }
        }
    )*};
}
scalar_slot!(f64, u64, bool);

/// An optional value: written as `absent` when `None` (or left out of the record when
/// the field declares no such value); read back as `None` when missing or equal to it.
impl StatSlot for Option<f64> {
    const MAP: bool = false;
    fn write(&self, key: &str, absent: Option<f64>, out: &mut StatsRecord) {
        if let Some(x) = self.or(absent) {
            out.push((key.to_string(), x));
        }
    }
    fn read(
        key: &str,
        absent: Option<f64>,
        prefix: &str,
        record: &BTreeMap<String, f64>,
    ) -> Option<Self> {
        // present as the declared absent value: `Some(None)`
        get(prefix, key, record).map(|x| Some(x).filter(|&x| Some(x) != absent))
    }
}

/// A map field: one record entry per key, `PREFIX` + the key.
impl<K, V> StatSlot for BTreeMap<K, V>
where
    K: Ord + Display + FromStr,
    V: StatValue,
{
    const MAP: bool = true;
    fn write(&self, key: &str, _: Option<f64>, out: &mut StatsRecord) {
        for (k, v) in self {
            out.push((format!("{key}{k}"), v.to_f64()));
        }
    }
    fn read(
        key: &str,
        _: Option<f64>,
        prefix: &str,
        record: &BTreeMap<String, f64>,
    ) -> Option<Self> {
        let full = format!("{prefix}{key}");
        let m: BTreeMap<K, V> = record
            .range(full.clone()..)
            .take_while(|(k, _)| k.starts_with(&full))
            .filter_map(|(k, &x)| Some((k[full.len()..].parse().ok()?, V::from_f64(x))))
            .collect();
        Some(m)
    }
}

/// Declares a policy's statistics struct (`pub struct CascStats for "casc" { … }`: the
/// policy's registry name after `for`, then `| "NAME"` for each of its modes' names):
/// one field per line, `name: Type = "key"`,
/// with a doc comment saying what it measures. Types: `u64` (counts), `f64`, `bool`,
/// `Option<f64>` (`= "key" or -1.0` writes `None` as −1, otherwise it is left out),
/// and `BTreeMap<K, V>` with a key prefix (`= "pcmr."`) for per-thread or per-item
/// values. The macro makes the struct (Debug, Clone, PartialEq, Default) and its
/// [`PolicyStats`] implementation. See the [module](self) for an example.
#[macro_export]
macro_rules! policy_stats {
    (
        $(#[doc = $sdoc:literal])*
        $vis:vis struct $name:ident for $($policy:literal)|+ {
            $(
                $(#[doc = $fdoc:literal])*
                $field:ident : $ty:ty = $key:literal $(or $absent:literal)?
            ),* $(,)?
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq, Default)]
        $vis struct $name {
            $(
                $(#[doc = $fdoc])*
                pub $field: $ty,
            )*
        }

        impl $crate::policy_stats::PolicyStats for $name {
            const POLICIES: &'static [&'static str] = &[$($policy),+];
            const FIELDS: &'static [$crate::policy_stats::StatField] = &[
                $($crate::policy_stats::StatField {
                    name: stringify!($field),
                    key: $key,
                    map: <$ty as $crate::policy_stats::StatSlot>::MAP,
                    about: concat!($($fdoc),*),
                }),*
            ];

            fn to_record(&self) -> $crate::policy_stats::StatsRecord {
                let mut out = Vec::new();
                $(
                    $crate::policy_stats::StatSlot::write(
                        &self.$field,
                        $key,
                        None $(.or(Some($absent)))?,
                        &mut out,
                    );
                )*
                out
            }

            fn from_record_prefixed(
                record: &::std::collections::BTreeMap<String, f64>,
                prefix: &str,
            ) -> Option<Self> {
                let mut any = false;
                let mut s = Self::default();
                $(
                    if let Some(v) = <$ty as $crate::policy_stats::StatSlot>::read(
                        $key,
                        None $(.or(Some($absent)))?,
                        prefix,
                        record,
                    ) {
                        s.$field = v;
                        any |= !<$ty as $crate::policy_stats::StatSlot>::MAP;
                    }
                )*
                any.then_some(s)
            }
        }
    };
}

/// The two [`Policy`](crate::Policy) methods that report statistics, for a policy whose
/// `statistics(&self)` method returns its [`PolicyStats`] struct `$stats`: inside the
/// `impl Policy`, `cachesched_core::report_stats!(CascStats);`.
#[macro_export]
macro_rules! report_stats {
    ($stats:ty) => {
        fn stats(&self) -> $crate::policy_stats::StatsRecord {
            let s: $stats = self.statistics();
            $crate::policy_stats::PolicyStats::to_record(&s)
        }

        fn stat_fields(&self) -> &'static [$crate::policy_stats::StatField] {
            <$stats as $crate::policy_stats::PolicyStats>::FIELDS
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::policy_stats! {
        /// Test statistics.
        struct T for "t" {
            /// A count.
            n: u64 = "n",
            /// Settled at (ms).
            at: Option<f64> = "at" or -1.0,
            /// First done (ms), left out while not.
            first: Option<f64> = "first",
            /// A flag.
            on: bool = "on",
            /// Per thread.
            per: BTreeMap<u64, f64> = "per.",
            /// Per reason.
            why: BTreeMap<String, u64> = "why_",
        }
    }

    /// The record keeps the stored key forms (−1 for a declared absent value, a left-out
    /// key otherwise, prefixed map entries) and reads back to the same struct, bare or
    /// behind a chain's prefix; another policy's record reads as `None`. Fails if a key
    /// form or a round trip changes.
    #[test]
    fn round_trips_in_the_stored_form() {
        let mut t = T {
            n: 4,
            on: true,
            ..T::default()
        };
        t.per.insert(2, 0.25);
        t.per.insert(10, 1.5);
        t.why.insert("cold".into(), 3);
        let rec = t.to_record();
        let keys: Vec<&str> = rec.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["n", "at", "on", "per.2", "per.10", "why_cold"]);
        assert_eq!(rec[1].1, -1.0);
        let map: BTreeMap<String, f64> = rec.iter().cloned().collect();
        assert_eq!(T::from_record(&map), Some(t.clone()));
        let chained: BTreeMap<String, f64> =
            rec.iter().map(|(k, v)| (format!("x.{k}"), *v)).collect();
        assert_eq!(T::from_record_prefixed(&chained, "x."), Some(t.clone()));
        assert_eq!(T::from_record(&chained), None);
        t.first = Some(12.5);
        t.at = Some(3.0);
        let map: BTreeMap<String, f64> = t.to_record().into_iter().collect();
        assert_eq!(map["first"], 12.5);
        assert_eq!(T::from_record(&map), Some(t));
        assert_eq!(T::field_of("per.7").map(|f| f.name), Some("per"));
        assert_eq!(T::field_of("per.").map(|f| f.name), None);
        assert_eq!(T::FIELDS[1].about, " Settled at (ms).");
    }
}
