//! Longer timeslices on the real host (paper 5 here; `cachesched study timeslice`): two
//! chasing threads sharing CPU 0, each doing a fixed amount of work, under Linux's
//! default slices and under `cachesched run --policy timeslice:slice_ms=N`; completion
//! time against the default, per working-set size, and each thread alone for
//! reference. How runs are made and kept: [`crate::host_study`].

use crate::error::{invalid, Result};
use crate::files::write_file;
use crate::host_study::{
    self, change_plot, finish, kib, over_repeats, paired, repeats_of, run_all, run_load, sizes_of,
    table, Condition, Meta, Outcome, Record, Report, Row, Settings,
};
use crate::stats::show;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The study's own options.
#[derive(Debug, Clone)]
pub struct TimesliceStudy {
    /// Slice lengths of the timeslice policy, ms (each 0.1 to 1000).
    pub slices: Vec<f64>,
    /// Work per thread, as the time one thread alone takes for it, ms (calibrated per
    /// size at the start).
    pub solo_ms: u64,
}

/// Working-set sizes per thread when none are given, KiB: two of them fit a 2 MB
/// private L2 together below 1 MiB each, and neither does from 2 MiB on.
pub const SIZES_KB: &[u64] = &[256, 512, 1024, 1536, 2048, 3072, 4096, 8192];

/// Runs the study (or rebuilds its report from the runs) and writes its report.
pub fn run(s: &Settings, a: &TimesliceStudy) -> Result<Outcome> {
    let sizes = s.sizes_kb.clone().unwrap_or_else(|| SIZES_KB.to_vec());
    if a.slices.iter().any(|s| !(*s >= 0.1 && *s <= 1000.0)) {
        return Err(invalid!("--slices must be between 0.1 and 1000 ms"));
    }
    let mut conds = vec![
        Condition {
            label: "solo".into(),
            policy: None,
            burn: vec!["--threads".into(), "1".into()],
        },
        Condition {
            label: "linux".into(),
            policy: None,
            burn: vec!["--threads".into(), "2".into()],
        },
    ];
    for sl in &a.slices {
        conds.push(Condition {
            label: format!("slice-{sl}ms"),
            policy: Some(format!("timeslice:slice_ms={sl}")),
            burn: vec!["--threads".into(), "2".into()],
        });
    }
    let meta = Meta::keep_or_load(s, None, Some(a.solo_ms))?;
    let records = if s.from_runs {
        host_study::load_runs(&s.out)?
    } else {
        // the work of each size: what one thread alone does in solo_ms
        let mut steps: BTreeMap<u64, u64> = BTreeMap::new();
        for &kb in &sizes {
            let cal = Condition {
                label: "calibration".into(),
                policy: None,
                burn: Vec::new(),
            };
            let args: Vec<String> = [
                "--threads",
                "1",
                "--cpu",
                "0",
                "--chase-kb",
                &kb.to_string(),
                "--ms",
                "300",
                "--report",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let Some(t) = run_load(&s.exe, &cal, &args)? else {
                return Ok(Outcome::Interrupted);
            };
            steps.insert(
                kb,
                (t[0].steps_per_s * a.solo_ms as f64 / 1e3).max(1.0) as u64,
            );
        }
        write_file(
            &s.out.join("calibration.json"),
            &serde_json::to_string_pretty(&steps)?,
        )?;
        eprintln!(
            "study timeslice: {} sizes x {} conditions x {} repeats (~{:.0} min)",
            sizes.len(),
            conds.len(),
            s.repeats,
            (sizes.len() * s.repeats) as f64
                * (a.solo_ms as f64 * (1.0 + 2.5 * (conds.len() - 1) as f64))
                / 60_000.0
        );
        let limit = a.solo_ms * 20;
        let args = move |kb: u64| -> Vec<String> {
            [
                "--cpu".to_string(),
                "0".into(),
                "--chase-kb".into(),
                kb.to_string(),
                "--steps".into(),
                steps[&kb].to_string(),
                "--ms".into(),
                limit.to_string(),
                "--delay-ms".into(),
                "50".into(),
                "--report".into(),
            ]
            .to_vec()
        };
        match run_all("timeslice", s, &sizes, &conds, &args)? {
            Some(r) => r,
            None => return Ok(Outcome::Interrupted),
        }
    };
    finish("timeslice", s, &report(&records, &meta, a.solo_ms))
}

/// Whether a condition is a reference (no change column): `solo` and `linux`.
fn is_reference(label: &str) -> bool {
    label == "linux" || label == "solo"
}

/// The report of `records`: each condition's completion time and its change against
/// `linux`, per size; `solo_ms` is the work per thread if `meta` does not say.
pub(crate) fn report(records: &[Record], meta: &Meta, solo_ms: u64) -> Report {
    let sizes = sizes_of(records);
    let mut labels: Vec<String> = Vec::new();
    for r in records {
        if !labels.contains(&r.condition) {
            labels.push(r.condition.clone());
        }
    }
    let rank = |l: &str| match l {
        "solo" => (0, 0.0),
        "linux" => (1, 0.0),
        s => (
            2,
            s.trim_start_matches("slice-")
                .trim_end_matches("ms")
                .parse()
                .unwrap_or(f64::MAX),
        ),
    };
    labels.sort_by(|a, b| {
        rank(a)
            .partial_cmp(&rank(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    // completion time: the mean of the threads' own times for their fixed work
    let time = table(records, &|t| {
        t.iter().map(|x| x.wall_ms).sum::<f64>() / t.len().max(1) as f64
    });
    let mut rows = Vec::new();
    let mut md = format!(
        "## Longer timeslices on this host\n\nGenerated by `{}`. \
         Host: {}. Two threads pinned to CPU 0, each chasing pointers through its own working \
         set (a random cyclic order of its 64-byte lines) for a fixed number of steps (what \
         one thread alone does in about {} ms, calibrated per size at the start: `solo` is \
         that thread alone); {} repeats, every (size, condition) pair once per repeat in a \
         seeded random order. Completion time: the mean of the two threads' times for their \
         work, ms; change: against `linux` (the kernel's default slices) in the same repeat, \
         mean ± 95% half-width over repeats (negative: faster).\n\n",
        meta.command,
        meta.host,
        meta.solo_ms.unwrap_or(solo_ms),
        repeats_of(records)
    );
    md += "| working set | ";
    md += &labels
        .iter()
        .map(|l| {
            if is_reference(l) {
                format!("{l}: ms")
            } else {
                format!("{l}: ms | {l}: vs linux")
            }
        })
        .collect::<Vec<_>>()
        .join(" | ");
    let refs = labels.iter().filter(|l| is_reference(l)).count();
    md += " |\n|---|";
    md += &"---|".repeat(refs);
    md += &"---|---|".repeat(labels.len() - refs);
    md += "\n";
    for &kb in &sizes {
        let _ = write!(md, "| {} |", kib(kb));
        for l in &labels {
            let v = over_repeats(&time, kb, l, 1.0);
            let ch = if is_reference(l) {
                (f64::NAN, f64::NAN)
            } else {
                paired(&time, kb, l, "linux")
            };
            if is_reference(l) {
                let _ = write!(md, " {} |", show(v, ""));
            } else {
                let _ = write!(md, " {} | {} |", show(v, ""), show(ch, "%"));
            }
            rows.push(Row {
                kb,
                condition: l.clone(),
                value: v,
                change_pct: ch,
                migrations: f64::NAN,
            });
        }
        md += "\n";
    }
    let slices: Vec<&str> = labels
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("slice-"))
        .collect();
    let plot = change_plot(
        "Completion time with longer slices against Linux's, this host",
        "change in completion time against the default slices (%)",
        &slices,
        &sizes,
        &time,
        "linux",
    );
    md += "\nPlot: `timeslice-change.svg`. Raw runs: `runs.jsonl`; work per size: \
           `calibration.json`.\n";
    Report {
        md,
        rows,
        plots: vec![("timeslice-change.svg", plot)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_study::tests::record;

    /// The report of two repeats: columns in the order solo, linux, then slices by
    /// length (5 before 45 though the runs came in another order, and "45" is not
    /// sorted as text before "5"), completion time as the mean of the two threads'
    /// times, and a slice whose threads finish 5% sooner than under `linux` in each
    /// repeat at −5.0%. Fails if the columns follow the runs' order, the time is summed
    /// or taken from one thread, or the change is against `solo`.
    #[test]
    fn reports_completion_time_against_linux() {
        let mut rs = Vec::new();
        for rep in 0..2 {
            let t = 2000.0 + 100.0 * rep as f64;
            rs.push(record(
                "timeslice",
                rep,
                1024,
                "slice-45ms",
                &[(1.0, 0.95 * t - 10.0, 0), (1.0, 0.95 * t + 10.0, 0)],
            ));
            rs.push(record(
                "timeslice",
                rep,
                1024,
                "linux",
                &[(1.0, t - 50.0, 0), (1.0, t + 50.0, 0)],
            ));
            rs.push(record(
                "timeslice",
                rep,
                1024,
                "slice-5ms",
                &[(1.0, t, 0), (1.0, t, 0)],
            ));
            rs.push(record("timeslice", rep, 1024, "solo", &[(1.0, 1000.0, 0)]));
        }
        let meta = Meta {
            command: "cachesched study timeslice".into(),
            host: "test host".into(),
            ms: None,
            solo_ms: Some(1000),
        };
        let r = report(&rs, &meta, 500);
        assert!(r.md.contains("about 1000 ms"), "{}", r.md);
        assert!(
            r.md.contains(
                "| working set | solo: ms | linux: ms | slice-5ms: ms | slice-5ms: vs linux | \
             slice-45ms: ms | slice-45ms: vs linux |"
            ),
            "{}",
            r.md
        );
        let row = |c: &str| r.rows.iter().find(|x| x.condition == c).unwrap();
        assert!((row("linux").value.0 - 2050.0).abs() < 1e-9);
        assert!((row("slice-45ms").change_pct.0 + 5.0).abs() < 1e-9);
        assert!(row("slice-5ms").change_pct.0.abs() < 1e-9);
        assert!(row("solo").change_pct.0.is_nan());
        assert!(r.md.contains("| 1 MiB |"), "{}", r.md);
    }
}
