//! Property tests (fuzzing) of the scenario files: arbitrary text, and TOML built from
//! the scenario keys with values from ordinary to absurd, never panics — it is read,
//! checked and planned, or refused with an error (issue 77). Bounded to a few hundred
//! cases so that the tests run it on every build.

use crate::experiment::parse_text;
use proptest::prelude::*;

/// A value for a scenario key: ordinary, at a bound, or absurd.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..5000).prop_map(|v| v.to_string()),
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1e-9".to_string()),
        Just("1e15".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("4097".to_string()),
        Just("18446744073709551615".to_string()),
        (0.0f64..100.0).prop_map(|v| format!("{v}")),
    ]
}

fn line() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("duration_ms"),
        Just("warmup_ms"),
        Just("sample_ms"),
        Just("min_seeds"),
        Just("min_quanta"),
    ];
    let kernel_key = prop_oneof![
        Just("ts_quantum_ms"),
        Just("cfs_latency_ms"),
        Just("rr_quantum_ms"),
        Just("context_switch_us"),
        Just("balance_interval_ms"),
        Just("slice_profile_ms"),
        Just("sample_cost_cycles"),
    ];
    prop_oneof![
        (key, number()).prop_map(|(k, v)| format!("{k} = {v}")),
        (kernel_key, number()).prop_map(|(k, v)| format!("kernel = {{ {k} = {v} }}")),
        number().prop_map(|v| format!("seeds = [1, {v}]")),
        number().prop_map(|v| format!("sweep = {{ llc_kb = [{v}] }}")),
        number().prop_map(|v| format!("threads = [{{ profile = \"small\", count = {v} }}]")),
        "[a-z./-]{0,12}".prop_map(|n| format!("name = \"{n}\"")),
        prop_oneof![Just("t1-dual"), Just("niagara-2c"), Just("nosuch")]
            .prop_map(|m| format!("machine = \"{m}\"")),
        "[a-z.]{0,6}".prop_map(|l| format!(
            "mixes = [{{ label = \"{l}\", threads = [{{ profile = \"small\" }}] }}]"
        )),
        Just("variants = [{ label = \"a\", baseline = \"ts\" }, { label = \"b\", policies = [{ name = \"timeslice\", slice_ms = -1 }] }]".to_string()),
        "[ -~]{0,30}",
    ]
}

/// A scenario file of `lines` over a base that names a machine and threads: a key given
/// twice keeps its first line (TOML refuses repeated keys, which would stop every case at
/// the parser).
fn file_of(lines: &[String]) -> String {
    let base = [
        "name = \"fuzz\"".to_string(),
        "machine = \"t1-dual\"".to_string(),
        "threads = [{ profile = \"small\" }]".to_string(),
        "duration_ms = 5".to_string(),
        "seeds = [1]".to_string(),
    ];
    let mut seen = std::collections::BTreeSet::new();
    let mut out = String::new();
    for l in lines.iter().chain(base.iter()) {
        let key = l.split(" = ").next().unwrap_or("").to_string();
        // a mix replaces the base's threads (a file has one or the other)
        let key = if key == "mixes" {
            "threads".to_string()
        } else {
            key
        };
        if seen.insert(key) {
            out += l;
            out += "\n";
        }
    }
    out
}

/// 300 files of scenario lines: none panics, and enough of them are read and planned
/// (not all refused at the first key) that the checks behind the parser are reached.
#[test]
fn scenario_files_never_panic() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 300,
        ..Config::default()
    });
    let planned = std::cell::Cell::new(0);
    let refused_by_plan = std::cell::Cell::new(0);
    runner
        .run(&proptest::collection::vec(line(), 0..10), |lines| {
            let text = file_of(&lines);
            if let Ok(sc) = parse_text(std::path::Path::new("fuzz.toml"), &text) {
                match sc.plan() {
                    Ok(_) => planned.set(planned.get() + 1),
                    Err(_) => refused_by_plan.set(refused_by_plan.get() + 1),
                }
            }
            Ok(())
        })
        .unwrap();
    assert!(
        planned.get() >= 10 && refused_by_plan.get() >= 10,
        "planned {}, refused by plan {}: the cases do not reach the checks",
        planned.get(),
        refused_by_plan.get()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = parse_text(std::path::Path::new("fuzz.toml"), &text);
    }
}
