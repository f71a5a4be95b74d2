//! perf events named the way `perf stat -e` names them, resolved against sysfs: a PMU
//! and its terms (`cpu/event=0xd3,umask=0x08/`, `cpu/mem-loads,ldlat=30/`,
//! `software/config=2/`) or a raw event (`r01d3`, on the core PMU).
//!
//! Counters a model-specific event gives — Intel's remote-cache events
//! (`mem_load_l3_miss_retired.remote_hitm`, …) or a stall-cycle count — are not in the
//! kernel's generic events and not in every PMU's sysfs `events/` directory, so an
//! operator names them (`cachesched run --counter-event KIND=EVENT`) from the CPU's
//! documentation or `perf list`. A term's bits are placed as the PMU's `format/` files
//! say, as perf does; a named event of the PMU's `events/` directory expands to its
//! terms.

use cachesched_core::CounterKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// `PERF_TYPE_RAW`: a raw event of the core PMU.
const PERF_TYPE_RAW: u32 = 4;

/// A resolved event: what `perf_event_attr` needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RawEvent {
    /// The event as the user wrote it (for messages).
    pub name: String,
    /// `type`: the PMU's number.
    pub pmu_type: u32,
    /// `config`, `config1`, `config2`.
    pub config: [u64; 3],
}

/// Counters mapped to events by the operator, tried before the built-in mapping.
pub type EventMap = BTreeMap<CounterKind, RawEvent>;

/// Why an event description could not be resolved.
#[derive(Debug, Error, PartialEq)]
pub enum EventError {
    /// Not of the form `pmu/terms/` or `rHEX`.
    #[error("'{0}' is not an event of the form PMU/TERM=VALUE,…/ (e.g. cpu/event=0xd3,umask=0x08/) or rHEX (a raw event of the core PMU)")]
    Syntax(String),
    /// The PMU does not exist here.
    #[error("'{event}': this machine has no PMU '{pmu}' ({dir} does not exist; `ls {parent}` lists the PMUs)")]
    NoPmu {
        /// The event.
        event: String,
        /// The PMU named.
        pmu: String,
        /// The directory looked for.
        dir: String,
        /// Its parent.
        parent: String,
    },
    /// A term the PMU's format and events do not know.
    #[error(
        "'{event}': PMU '{pmu}' has no term or event '{term}' (see {dir}/format and {dir}/events)"
    )]
    UnknownTerm {
        /// The event.
        event: String,
        /// The PMU.
        pmu: String,
        /// The term.
        term: String,
        /// The PMU's directory.
        dir: String,
    },
    /// A value or a sysfs file that cannot be read.
    #[error("'{event}': {what}")]
    Bad {
        /// The event.
        event: String,
        /// What is wrong.
        what: String,
    },
    /// `KIND=EVENT` names no counter.
    #[error("'{0}' names no counter; counters: {1}")]
    UnknownCounter(String, String),
}

/// The PMUs' sysfs directory.
pub fn sysfs_pmus() -> PathBuf {
    PathBuf::from("/sys/bus/event_source/devices")
}

/// Parses `KIND=EVENT` (`remote_accesses=cpu/event=0xd3,umask=0x08/`) against the PMUs
/// under `pmus`.
pub fn parse_mapping(spec: &str, pmus: &Path) -> Result<(CounterKind, RawEvent), EventError> {
    let (kind, event) = spec
        .split_once('=')
        .ok_or_else(|| EventError::Syntax(spec.to_string()))?;
    let kind = CounterKind::ALL
        .iter()
        .copied()
        .find(|k| k.name() == kind.trim())
        .ok_or_else(|| {
            EventError::UnknownCounter(
                kind.to_string(),
                CounterKind::ALL
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })?;
    Ok((kind, parse_event(event.trim(), pmus)?))
}

/// Resolves `event` (`pmu/terms/` or `rHEX`) against the PMUs under `pmus`.
pub fn parse_event(event: &str, pmus: &Path) -> Result<RawEvent, EventError> {
    let syntax = || EventError::Syntax(event.to_string());
    if let Some(hex) = event.strip_prefix('r') {
        if !hex.is_empty() && !hex.contains('/') {
            let config = u64::from_str_radix(hex, 16).map_err(|_| syntax())?;
            return Ok(RawEvent {
                name: event.to_string(),
                pmu_type: PERF_TYPE_RAW,
                config: [config, 0, 0],
            });
        }
    }
    let inner = event
        .strip_suffix('/')
        .ok_or_else(syntax)?
        .split_once('/')
        .ok_or_else(syntax)?;
    let (pmu, terms) = inner;
    if pmu.is_empty() || pmu.contains(['.', '\\']) || terms.contains('/') {
        return Err(syntax());
    }
    let dir = pmus.join(pmu);
    if !dir.is_dir() {
        return Err(EventError::NoPmu {
            event: event.to_string(),
            pmu: pmu.to_string(),
            dir: dir.display().to_string(),
            parent: pmus.display().to_string(),
        });
    }
    let bad = |what: String| EventError::Bad {
        event: event.to_string(),
        what,
    };
    let pmu_type = std::fs::read_to_string(dir.join("type"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .ok_or_else(|| bad(format!("cannot read {}", dir.join("type").display())))?;
    let mut config = [0u64; 3];
    apply_terms(event, pmu, &dir, terms, &mut config, 0)?;
    Ok(RawEvent {
        name: event.to_string(),
        pmu_type,
        config,
    })
}

/// Applies comma-separated `terms` of PMU `pmu` (directory `dir`) to `config`; a named
/// event expands to its own terms (`depth` guards against a loop).
fn apply_terms(
    event: &str,
    pmu: &str,
    dir: &Path,
    terms: &str,
    config: &mut [u64; 3],
    depth: u32,
) -> Result<(), EventError> {
    let bad = |what: String| EventError::Bad {
        event: event.to_string(),
        what,
    };
    for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = match term.split_once('=') {
            Some((n, v)) => (
                n.trim(),
                Some(parse_num(v.trim()).ok_or_else(|| bad(format!("'{v}' is not a number")))?),
            ),
            None => (term, None),
        };
        // perf's built-in terms set a whole field
        if let Some(i) = ["config", "config1", "config2"]
            .iter()
            .position(|&f| f == name)
        {
            config[i] = value.ok_or_else(|| bad(format!("'{name}' needs a value")))?;
            continue;
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad(format!("'{name}' is not a term name")));
        }
        let format = dir.join("format").join(name);
        if let Ok(text) = std::fs::read_to_string(&format) {
            place(&text, value.unwrap_or(1), config).ok_or_else(|| {
                bad(format!(
                    "{} is not a format perf understands",
                    format.display()
                ))
            })?;
            continue;
        }
        let named = dir.join("events").join(name);
        match std::fs::read_to_string(&named) {
            Ok(text) if value.is_none() && depth < 2 => {
                apply_terms(event, pmu, dir, text.trim(), config, depth + 1)?
            }
            _ => {
                return Err(EventError::UnknownTerm {
                    event: event.to_string(),
                    pmu: pmu.to_string(),
                    term: name.to_string(),
                    dir: dir.display().to_string(),
                })
            }
        }
    }
    Ok(())
}

/// A number as sysfs and perf write them: decimal or `0x` hexadecimal.
pub(crate) fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Places `value` into `cfg` ([config, config1, config2]) as a format file says
/// (`config1:0-15`, `config:0-7,32-35`, `config:21`): its low bits into the first
/// range, the next into the second …; `None` if the text is not such a format.
pub(crate) fn place(format: &str, value: u64, cfg: &mut [u64; 3]) -> Option<()> {
    let (field, ranges) = format.trim().split_once(':')?;
    let idx = match field {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        _ => return None,
    };
    let mut v = value;
    for r in ranges.split(',') {
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let b = r.parse::<u32>().ok()?;
                (b, b)
            }
        };
        if hi < lo || hi > 63 {
            return None;
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        cfg[idx] |= (v & mask) << lo;
        v = if width == 64 { 0 } else { v >> width };
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PMU directory `cpu` of type 4 with Intel-like format files and two named
    /// events, under a fresh temporary root.
    fn fake_pmus() -> crate::testdir::TempTree {
        let root = crate::testdir::TempTree::new("events");
        let cpu = root.join("cpu");
        std::fs::create_dir_all(cpu.join("format")).unwrap();
        std::fs::create_dir_all(cpu.join("events")).unwrap();
        std::fs::write(cpu.join("type"), "4\n").unwrap();
        for (f, t) in [
            ("event", "config:0-7"),
            ("umask", "config:8-15"),
            ("cmask", "config:24-31"),
            ("inv", "config:23"),
            ("ldlat", "config1:0-15"),
        ] {
            std::fs::write(cpu.join("format").join(f), format!("{t}\n")).unwrap();
        }
        std::fs::write(
            cpu.join("events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n",
        )
        .unwrap();
        std::fs::write(cpu.join("events/loop"), "loop\n").unwrap();
        root
    }

    #[test]
    fn terms_are_placed_as_the_format_files_say() {
        let pmus = fake_pmus();
        let e = parse_event("cpu/event=0xd3,umask=0x08/", &pmus).unwrap();
        assert_eq!((e.pmu_type, e.config), (4, [0x08d3, 0, 0]));
        // a named event expands; a later term adds to it; a bare flag term is 1
        let e = parse_event("cpu/mem-loads,ldlat=30,inv/", &pmus).unwrap();
        assert_eq!(e.config, [0xcd | 0x100 | (1 << 23), 3 | 30, 0]);
        let e = parse_event("cpu/event=0xa3,umask=0x6,cmask=6/", &pmus).unwrap();
        assert_eq!(e.config[0], 0x0600_06a3);
        let e = parse_event("cpu/config=0x1234,config1=7/", &pmus).unwrap();
        assert_eq!(e.config, [0x1234, 7, 0]);
        let e = parse_event("r01d3", &pmus).unwrap();
        assert_eq!((e.pmu_type, e.config[0]), (4, 0x01d3));
        let (k, e) = parse_mapping("remote_accesses=cpu/event=0xd3,umask=0x08/", &pmus).unwrap();
        assert_eq!((k, e.config[0]), (CounterKind::RemoteAccesses, 0x08d3));
    }

    #[test]
    fn bad_events_name_what_is_wrong() {
        let pmus = fake_pmus();
        let err = |s: &str| parse_event(s, &pmus).unwrap_err();
        assert!(matches!(err("cpu/event=0xd3"), EventError::Syntax(_)));
        assert!(matches!(err("nopmu/event=1/"), EventError::NoPmu { .. }));
        assert!(matches!(err("../cpu/event=1/"), EventError::Syntax(_)));
        let e = err("cpu/bogus=1/");
        assert!(e.to_string().contains("no term or event 'bogus'"), "{e}");
        assert!(matches!(err("cpu/event=zz/"), EventError::Bad { .. }));
        // a named event that names itself stops instead of recursing for ever
        assert!(matches!(err("cpu/loop/"), EventError::UnknownTerm { .. }));
        let e = parse_mapping("remote_hits=cpu/event=1/", &pmus).unwrap_err();
        assert!(e.to_string().contains("remote_accesses"), "{e}");
    }
}
