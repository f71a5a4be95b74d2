//! The `cachesched` binary end to end: determinism, outputs, clear errors.

use std::path::PathBuf;
use std::process::Command;

/// The binary, with a run cache of its own (empty) for every command, so that no
/// test reads runs another test or an earlier `cargo test` made.
fn bin() -> Command {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let runs =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("runs-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&runs);
    let mut c = Command::new(env!("CARGO_BIN_EXE_cachesched"));
    c.env("CACHESCHED_RUNS", runs);
    // cstrace, where a test records, is built under the target directory, not in the
    // user's tool cache (one build shared by the tests: builds are atomic)
    c.env(
        "CACHESCHED_TOOLS",
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tools"),
    );
    c
}

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run_ok(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_err(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn simulate_is_byte_identical_per_seed_and_writes_resolved_config() {
    let d = tmp("sim");
    let args = |f: &str, seed: &str| {
        vec![
            "simulate".to_string(),
            "--machine=t1-dual".into(),
            "--mix=large:2,small:2".into(),
            "--duration-ms=20".into(),
            format!("--seed={seed}"),
            format!("--json={}", d.join(f).display()),
        ]
    };
    let a: Vec<String> = args("a.json", "7");
    let out = run_ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.starts_with("seed 7\nmachine t1-dual, "),
        "the seed is printed first, then the resolved run: {out}"
    );
    assert_eq!(out.matches("seed 7").count(), 1, "the seed once: {out}");
    run_ok(
        &args("b.json", "7")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    run_ok(
        &args("c.json", "8")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let read = |f: &str| std::fs::read(d.join(f)).unwrap();
    assert_eq!(read("a.json"), read("b.json"));
    assert_ne!(read("a.json"), read("c.json"));
    // the resolved configuration reproduces the run
    let cfg = d.join("a.json.config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.contains("seed = 7") && text.contains("freq_mhz = 992"),
        "{text}"
    );
    let again = d.join("again.json");
    run_ok(&[
        "simulate",
        &format!("--config={}", cfg.display()),
        &format!("--json={}", again.display()),
    ]);
    assert_eq!(read("a.json"), std::fs::read(again).unwrap());
}

#[test]
fn bad_input_gets_clear_errors() {
    let d = tmp("bad");
    assert!(run_err(&["simulate", "--machine=nosuch"]).contains("nosuch"));
    assert!(run_err(&["simulate", "--mix=large:x"]).contains("count"));
    assert!(run_err(&["simulate", "--baseline=fifo"]).contains("cfs, ts, fx or rr"));
    // values, not only keys: counts, sizes, durations and policy parameters have ranges
    for mix in ["art:0", "art:99999999999", "art:4294967295"] {
        let e = run_err(&["simulate", &format!("--mix={mix}")]);
        assert!(e.contains("from 1 to 4096"), "{mix}: {e}");
    }
    assert!(run_err(&["simulate", "--mix=art:3000,twolf:2000"]).contains("at most 4096"));
    assert!(run_err(&["simulate", "--duration-ms", "-5"]).contains("duration_ms"));
    assert!(run_err(&["simulate", "--policy=timeslice:slice_ms=-3"])
        .contains("slice_ms must be between 0.1 and 1000"));
    assert!(run_err(&["burn", "--threads", "100000"]).contains("at most 4096 threads"));
    assert!(run_err(&["simulate", "--policy=nosuch"]).contains("unknown policy"));
    assert!(
        run_err(&["simulate", "--config=/nonexistent.toml"]).contains("cannot read config file")
    );
    let cfg = d.join("bad.toml");
    std::fs::write(
        &cfg,
        "machine = \"t1-dual\"\nthreads = []\nduration_msec = 5\n",
    )
    .unwrap();
    let e = run_err(&["simulate", &format!("--config={}", cfg.display())]);
    assert!(e.contains("duration_msec"), "{e}");
    std::fs::write(
        &cfg,
        "machine = \"t1-dual\"\nthreads = [{ profile = \"art\", count = 0 }]\n",
    )
    .unwrap();
    let e = run_err(&["simulate", &format!("--config={}", cfg.display())]);
    assert!(e.contains("'art' has count 0"), "{e}");
    let sc = d.join("sc.toml");
    std::fs::write(&sc, "name = \"x\"\nmachine = \"t1-dual\"\nthreads = [{ profile = \"small\" }]\nmetrics = [\"nope\"]\n").unwrap();
    assert!(run_err(&["experiment", sc.to_str().unwrap()]).contains("unknown metric 'nope'"));
    std::fs::write(
        &sc,
        "name = \"x\"\nmachine = \"t1-dual\"\nthreads = [{ profile = \"small\", cnt = 2 }]\n",
    )
    .unwrap();
    assert!(run_err(&["experiment", sc.to_str().unwrap()]).contains("cnt"));
    // a bad value is said alone, before anything is printed
    let out = bin()
        .args(["simulate", "--duration-ms=-5", "--mix", "art:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("duration_ms = -5 is out of range"));
    // a misspelled machine is named with its file and line, like the parser's errors
    std::fs::write(
        &sc,
        "name = \"x\"\n\nmachine = \"niagra-2c\"\nthreads = [{ profile = \"small\" }]\n",
    )
    .unwrap();
    let e = run_err(&["experiment", sc.to_str().unwrap()]);
    assert!(
        e.contains("sc.toml'") && e.contains("line 3, column 11") && e.contains("'niagra-2c'"),
        "{e}"
    );
    // the same for a run configuration
    let cfg = tmp("bad-machine").join("run.toml");
    std::fs::write(&cfg, "machine = \"niagra-2c\"\n").unwrap();
    let e = run_err(&["simulate", "--config", cfg.to_str().unwrap()]);
    assert!(
        e.contains("line 1, column 11") && e.contains("'niagra-2c'"),
        "{e}"
    );
    assert!(run_err(&["experiment", "/nonexistent/scenario.toml"])
        .contains("cannot read scenario file"));
    // range errors name their line and column like type errors (issue 77, item 14)
    let base =
        "name = \"x\"\nmachine = \"t1-dual\"\nthreads = [{ profile = \"small\", count = 1 }]\n";
    for (extra, key_line, col, what) in [
        (
            "duration_ms = 0\n",
            4,
            15,
            "duration_ms = 0 is out of range",
        ),
        (
            "duration_ms = 100\nwarmup_ms = 100\n",
            5,
            13,
            "warmup_ms = 100 must be",
        ),
        ("sweep = { llc_kb = [0, 64] }\n", 4, 20, "must be non-zero"),
    ] {
        std::fs::write(&sc, format!("{base}{extra}")).unwrap();
        let e = run_err(&["experiment", sc.to_str().unwrap()]);
        assert!(
            e.contains(&format!("line {key_line}, column {col}")) && e.contains(what),
            "{extra}: {e}"
        );
    }
    std::fs::write(&sc, base.replace("count = 1", "count = 4097")).unwrap();
    let e = run_err(&["experiment", sc.to_str().unwrap()]);
    assert!(
        e.contains("line 3, column 41") && e.contains("4097 threads"),
        "{e}"
    );
    std::fs::write(&sc, b"name = \"\xff\"\n").unwrap();
    let e = run_err(&["experiment", sc.to_str().unwrap()]);
    assert!(e.contains("not UTF-8 text: line 1, column 9"), "{e}");
    // --jobs out of range is refused, not clamped (issue 77, item 16)
    std::fs::write(&sc, base).unwrap();
    for j in ["0", "100000"] {
        let e = run_err(&["experiment", sc.to_str().unwrap(), "--jobs", j]);
        assert!(e.contains("give 1 to 1024"), "{j}: {e}");
    }
}

#[test]
fn experiment_writes_results_plots_and_report() {
    let d = tmp("exp");
    let sc = d.join("s.toml");
    std::fs::write(
        &sc,
        r#"
name = "tiny"
machine = "niagara-2c"
duration_ms = 15
seeds = [1, 2]
metrics = ["ips", "l2_miss_ratio"]
threads = [{ profile = "large", count = 4 }, { profile = "small", count = 4 }]
variants = [{ label = "cfs" }, { label = "ts", baseline = "ts" }]
sweep = { llc_kb = [96, 768] }
"#,
    )
    .unwrap();
    let out = d.join("out");
    let o = bin()
        .args([
            "experiment",
            sc.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--jobs",
            "2",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("8 runs"), "{stdout}");
    // stderr is a pipe here, not a terminal: progress comes as lines, the last one
    // when every run is done
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("progress: 8/8 runs done (100%)")),
        "{stderr}"
    );
    for f in [
        "results.json",
        "results.csv",
        "scenario.resolved.toml",
        "report.md",
        "ips.svg",
        "l2_miss_ratio.svg",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 9);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| ts | 96 |") && md.contains("![ips](ips.svg)"));
    // the bigger L2 has the lower miss ratio, for both baselines (from the model)
    let rows: Vec<Vec<String>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "l2_miss_ratio").unwrap();
    for v in ["cfs", "ts"] {
        let m = |kb: &str| -> f64 {
            rows.iter()
                .filter(|r| r[0] == v && r[1] == kb)
                .map(|r| r[col].parse::<f64>().unwrap())
                .sum()
        };
        assert!(m("768") < m("96"), "{v}");
    }
    let svg = std::fs::read_to_string(out.join("ips.svg")).unwrap();
    assert!(svg.contains("<polyline") && svg.contains(">ts<"));
    // deterministic outputs
    let out2 = d.join("out2");
    run_ok(&[
        "experiment",
        sc.to_str().unwrap(),
        "--out",
        out2.to_str().unwrap(),
        "--jobs",
        "1",
    ]);
    assert_eq!(
        std::fs::read(out.join("results.json")).unwrap(),
        std::fs::read(out2.join("results.json")).unwrap()
    );
}

#[test]
fn linux_commands_say_plainly_what_happened() {
    // a process that does not exist: the error alone, no banner before it
    let e = run_err(&["run", "--policy", "timeslice", "--pid", "999999"]);
    assert_eq!(
        e.trim(),
        "error: process 999999 does not exist (check the --pid value)"
    );
    // burn without --report says what it did
    let out = bin()
        .args([
            "burn",
            "--threads",
            "2",
            "--ms",
            "50",
            "--work-us",
            "1000",
            "--sleep-us",
            "1000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.starts_with("burn: 2 thread(s) ran 50 ms,") && out.stdout.is_empty(),
        "{e}"
    );
}

/// Off a terminal, `simulate` prints progress lines to stderr (`--progress-every 0`: one
/// at every update, so the count does not depend on the machine's speed): more than
/// one, in order, the last at 100%; `--quiet` prints none; an interval out of range is
/// refused. Fails if the lines stop, run backwards, or the flag is not checked.
#[test]
fn simulate_reports_progress_off_a_terminal() {
    let args = [
        "simulate",
        "--machine",
        "niagara-2c",
        "--mix",
        "art:4",
        "--duration-ms",
        "40",
        "--progress-every",
        "0",
    ];
    let out = bin().args(args).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    let pct: Vec<f64> = err
        .lines()
        .filter_map(|l| l.strip_prefix("progress: "))
        .map(|l| l.split('%').next().unwrap().parse().unwrap())
        .collect();
    assert!(pct.len() >= 2, "{err}");
    assert!(pct.windows(2).all(|w| w[0] <= w[1]), "{pct:?}");
    assert_eq!(pct.last(), Some(&100.0), "{err}");
    let mut quiet = args.to_vec();
    quiet.push("--quiet");
    let out = bin().args(&quiet).output().unwrap();
    assert!(!String::from_utf8(out.stderr).unwrap().contains("progress:"));
    let e = run_err(&["simulate", "--progress-every", "5000"]);
    assert!(e.contains("outside 0 to 3600 seconds"), "{e}");
}

#[test]
fn info_commands() {
    let m = run_ok(&["machines"]);
    for p in [
        "niagara-2c",
        "t1-dual",
        "power5-2x2x2",
        "clovertown-2x2",
        "xeon-e5-16m",
        "core2-4m",
        "host",
    ] {
        assert!(m.contains(p), "{p}");
    }
    let t = run_ok(&["topology"]);
    assert!(t.contains("host:") && t.contains("OS CPU numbers"));
    // sysfs gives no latencies: a host's caches say so instead of "0 cycles"
    assert!(
        t.contains("latency unknown") && !t.contains(" 0 cycles"),
        "{t}"
    );
    let t = run_ok(&["topology", "--machine", "power5-2x2x2"]);
    assert!(
        t.contains("2 chip(s), 4 core(s), 8 hardware context(s)"),
        "{t}"
    );
    assert!(
        t.contains("14 cycles") && !t.contains("latency unknown"),
        "{t}"
    );
    assert!(run_ok(&["workloads"]).contains("hotcold"));
    // every policy with its statistics' fields and what each measures
    let p = run_ok(&["policies"]);
    for line in [
        "casc\n",
        "  pcmr.KEY ",
        "  steady_ms ",
        "cachefair\n",
        "  fair_mpc.KEY ",
        "process-llc\n",
    ] {
        assert!(p.contains(line), "{line:?} missing from:\n{p}");
    }
    assert!(p.contains("Each thread's last measured PCMR"), "{p}");
}

#[test]
fn mrc_of_a_profile() {
    let d = tmp("mrc");
    let out = run_ok(&[
        "mrc",
        "--profile",
        "hotcold",
        "--accesses",
        "300000",
        "--sample-rate",
        "0.1",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(out.starts_with("seed 1\n"));
    for f in ["mrc.csv", "mrc.json", "mrc.svg"] {
        assert!(d.join(f).is_file(), "{f}");
    }
    // the curve falls from ~1 to the cold-miss floor: 32 KB holds the hot set (80%)
    let csv = std::fs::read_to_string(d.join("mrc.csv")).unwrap();
    let at = |bytes: u64| -> f64 {
        csv.lines()
            .find(|l| l.starts_with(&format!("{bytes},")))
            .and_then(|l| l.split(',').nth(1))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(at(1024) > 0.9);
    assert!(at(64 << 10) < 0.3);
    let last: f64 = csv
        .lines()
        .last()
        .unwrap()
        .split(',')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        last < at(64 << 10),
        "the largest cache only takes cold misses"
    );
    assert!(run_err(&["mrc"]).contains("exactly one"));
    assert!(
        run_err(&["mrc", "--profile", "hotcold", "--line-bytes", "48"]).contains("power of two")
    );
}

/// The shipped scenario files' directory.
fn experiments() -> String {
    format!("{}/../../experiments", env!("CARGO_MANIFEST_DIR"))
}

/// `reproduce casc` from the shipped files, cut down on the command line: every section
/// is written with the paper's values, the window checks (which must fail here: 100 ms
/// of TS cannot give 10 quanta, and CASC cannot finish measuring in a 100 ms warm-up),
/// CASC's analysis and the change plots with the paper's range. Fails if a section,
/// the override notice, a check or a plot is missing, or if bad input is accepted.
#[test]
fn reproduce_casc_runs_its_scenario_files_with_checks_and_paper_values() {
    let d = tmp("casc");
    let o = d.to_str().unwrap();
    let ex = experiments();
    // the arguments of the run; with `--from-results` appended (the 17th) they rebuild
    // its reports
    let args = |seeds: &'static str| {
        vec![
            "reproduce".to_string(),
            "casc".into(),
            "--experiments".into(),
            ex.clone(),
            "--out".into(),
            o.into(),
            "--only".into(),
            "fig5-7".into(),
            "--seeds".into(),
            seeds.into(),
            "--l2-kb".into(),
            "384,768".into(),
            "--warmup-ms".into(),
            "100".into(),
            "--duration-ms".into(),
            "200".into(),
            "--from-results".into(),
        ]
    };
    // the run, with its own solo and run caches (a second run reads them)
    let run = || {
        bin()
            .args(&args("1,2")[..16])
            .env("CACHESCHED_SOLO", d.join("solo"))
            .env("CACHESCHED_RUNS", d.join("runs"))
            .output()
            .unwrap()
    };
    let out = run();
    let err = String::from_utf8_lossy(&out.stderr);
    // overridden: the failed checks are reported, not an error
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("a check of the measured windows failed"),
        "{err}"
    );
    let table = std::fs::read_to_string(d.join("casc/paper-vs-measured.md")).unwrap();
    for want in [
        "## fig5-7: casc-fig5-7",
        "Overridden on the command line",
        "**TOO SHORT**",
        "the others measured inside the window",
        "| L2 miss rate reduced by 15-46% | §5.3.1, Fig. 5 | casc vs ts | 768 KB | -46% to -15% |",
        "| the best case: 46% fewer misses at 768 KB |",
        "| 768 KB | casc |",
        "classed right (paper classes)",
    ] {
        assert!(table.contains(want), "missing {want:?}:\n{table}");
    }
    // the 48-192 KB values are left out with those sizes
    assert!(!table.contains("| 96 KB |"), "{table}");
    let dir = d.join("casc/fig5-7");
    for f in [
        "results.json",
        "scenario.resolved.toml",
        "report.md",
        "stp.svg",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }
    let svg = std::fs::read_to_string(dir.join("change_l2_miss_ratio_vs_ts.svg")).unwrap();
    assert!(svg.contains(">paper (§5.3.1, Fig. 5)<") && svg.contains(">casc<"));
    // solo references were made and cached: STP is a number, not NaN
    let results = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert!(!results.contains("NaN"), "{results}");
    assert!(std::fs::read_dir(d.join("solo")).unwrap().count() >= 6);
    assert!(table.contains("| runs restricting |"), "{table}");
    // the reports rebuild from the saved results without a run, byte for byte; a
    // changed scenario is refused (the runs' arguments, with --from-results)
    let json = std::fs::read(dir.join("results.json")).unwrap();
    // run again with the same simulator: every run comes from the run cache, the same
    // bytes result
    let cached = run();
    assert!(cached.status.success());
    let said = String::from_utf8_lossy(&cached.stdout);
    assert!(
        said.contains("8 of 8 runs read from the run cache"),
        "{said}"
    );
    assert_eq!(std::fs::read(dir.join("results.json")).unwrap(), json);
    let again = bin().args(args("1,2")).output().unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(!String::from_utf8_lossy(&again.stdout).contains(" worker(s) -> "));
    assert_eq!(
        std::fs::read_to_string(d.join("casc/paper-vs-measured.md")).unwrap(),
        table
    );
    assert_eq!(std::fs::read(dir.join("results.json")).unwrap(), json);
    let other = bin().args(args("1,3")).output().unwrap();
    let e = String::from_utf8_lossy(&other.stderr);
    assert!(
        !other.status.success() && e.contains("different scenario"),
        "{e}"
    );
    // bad input is named
    let e = run_err(&[
        "reproduce",
        "casc",
        "--experiments",
        &ex,
        "--only",
        "nosuch",
    ]);
    assert!(
        e.contains("no scenario files to run") && e.contains("--only"),
        "{e}"
    );
    let e = run_err(&["reproduce", "casc", "--experiments", "/nonexistent"]);
    assert!(e.contains("cannot read the scenario directory"), "{e}");
}

/// `reproduce all --quick` runs every paper directory's files in their reduced form,
/// each report saying so. Two tiny papers stand in for the shipped ones. Fails if a
/// paper is skipped, a reduced report does not say it is reduced, or the quick seeds
/// and window are not the ones run.
#[test]
fn reproduce_all_quick_runs_every_paper_reduced() {
    let d = tmp("all-quick");
    let ex = d.join("experiments");
    for (paper, file) in [("alpha", "one"), ("beta", "two")] {
        std::fs::create_dir_all(ex.join(paper)).unwrap();
        std::fs::write(
            ex.join(paper).join(format!("{file}.toml")),
            format!(
                r#"name = "{paper}-{file}"
description = "tiny"
machine = "t1-dual"
duration_ms = 400
warmup_ms = 20
seeds = [1, 2, 3, 4, 5]
metrics = ["ips", "cpu_share_cv"]
min_quanta = 1

[quick]
seeds = [7, 8]
duration_ms = 60

[[threads]]
profile = "small"
count = 3

[[variants]]
label = "cfs"

[[variants]]
label = "rr"
baseline = "rr"

[[paper]]
what = "some throughput"
source = "Fig. 1"
metric = "ips"
variant = "rr"
change_pct = [-5, 5]
"#
            ),
        )
        .unwrap();
    }
    let out = d.join("out");
    let stdout = run_ok(&[
        "reproduce",
        "all",
        "--quick",
        "--experiments",
        ex.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.contains("seeds [7, 8]"), "{stdout}");
    for (paper, file) in [("alpha", "one"), ("beta", "two")] {
        let md = std::fs::read_to_string(out.join(paper).join("paper-vs-measured.md")).unwrap();
        assert!(md.contains("Reduced run (--quick)"), "{md}");
        assert!(md.contains("60 ms per run"), "{md}");
        assert!(
            md.contains("| some throughput | Fig. 1 | rr vs cfs | - | -5% to +5% |"),
            "{md}"
        );
        assert!(out.join(paper).join(file).join("results.json").exists());
    }
}

/// The timeslice analysis on two tiny mixes of four threads on one CPU each: the
/// improvement table against CFS, with the fewest slices any thread of each variant
/// began in a window. With 60 ms slices a 100 ms window holds no round of four threads,
/// so its check fails (exit status 1, the variant named TOO SHORT); with 4 ms slices
/// every variant passes. Beside a second file of two threads per CPU, the files are
/// compared across (improvement per slice length and file, Figure 8's plot of the
/// programs per core, the docs block), and the second file's partitioned variant is
/// set beside Figure 11's estimate, and its dynamic variant shows the slices it chose.
/// Fails if the window check looks only at the
/// first variant (CFS, whose slices are short), the table loses its column, or the
/// comparison across files is missing or takes the wrong layouts, or the partitioned
/// run is not compared with its sibling, or the dynamic variant's slices are not shown.
#[test]
fn reproduce_timeslice_checks_every_variants_window() {
    let d = tmp("timeslice-window");
    let ex = d.join("experiments").join("timeslice");
    std::fs::create_dir_all(&ex).unwrap();
    let scenario = |slice: u32| {
        format!(
            r#"name = "ts-window"
description = "tiny"
machine = "t1-dual"
duration_ms = 120
warmup_ms = 20
seeds = [1, 2]
metrics = ["ips"]
analyses = ["timeslice"]
min_quanta = 3

[[mixes]]
label = "a"
threads = [
  {{ profile = "small", cpus = [0] }}, {{ profile = "medium", cpus = [0] }},
  {{ profile = "small", cpus = [0] }}, {{ profile = "medium", cpus = [0] }},
]

[[mixes]]
label = "b"
threads = [
  {{ profile = "medium", cpus = [1] }}, {{ profile = "small", cpus = [1] }},
  {{ profile = "medium", cpus = [1] }}, {{ profile = "small", cpus = [1] }},
]

[[variants]]
label = "cfs"

[[variants]]
label = "slice"
policies = [{{ name = "timeslice", slice_ms = {slice} }}]
"#
        )
    };
    let args = |out: &str| {
        vec![
            "reproduce".to_string(),
            "timeslice".into(),
            "--experiments".into(),
            d.join("experiments").to_str().unwrap().into(),
            "--out".into(),
            d.join(out).to_str().unwrap().into(),
        ]
    };
    std::fs::write(ex.join("w.toml"), scenario(60)).unwrap();
    let out = bin().args(args("long")).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let md = std::fs::read_to_string(d.join("long/timeslice/paper-vs-measured.md")).unwrap();
    assert!(md.contains("| fewest slices |"), "{md}");
    assert!(md.contains("**TOO SHORT** for `slice`"), "{md}");
    std::fs::write(ex.join("w.toml"), scenario(4)).unwrap();
    // two per CPU, on one CPU as `w`'s mixes are
    let two = scenario(4)
        .replace("name = \"ts-window\"", "name = \"ts-two\"")
        .split("[[mixes]]")
        .next()
        .unwrap()
        .to_string()
        + "[[mixes]]\nlabel = \"c\"\nthreads = [\n  { profile = \"small\", cpus = [0] }, \
           { profile = \"medium\", cpus = [0] },\n]\n\n[[variants]]\nlabel = \"cfs\"\n\n\
           [[variants]]\nlabel = \"slice\"\npolicies = [{ name = \"timeslice\", slice_ms = 4 }]\n\n\
           [[variants]]\nlabel = \"slice-part\"\npolicies = [{ name = \"timeslice\", slice_ms = 4 }]\n\
           partition = \"per-thread\"\n\n[[variants]]\nlabel = \"dyn\"\n\
           policies = [{ name = \"timeslice\", mode = \"dynamic\", max_ms = 6 }]\n\n\
           [kernel]\nslice_profile_ms = 0.5\n";
    std::fs::write(ex.join("x.toml"), two).unwrap();
    let docs = d.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let blocks = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!("<!-- reproduce timeslice/{n}: begin -->\n<!-- reproduce timeslice/{n}: end -->\n"))
            .collect::<String>()
    };
    // the comparison's block is required before anything runs
    std::fs::write(docs.join("timeslice.md"), blocks(&["w", "x"])).unwrap();
    let mut with_docs = args("short");
    with_docs.extend(["--docs".to_string(), docs.to_str().unwrap().into()]);
    let e = run_err(&with_docs.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(e.contains("reproduce timeslice/across-files"), "{e}");
    assert!(
        !d.join("short").exists(),
        "nothing runs before the docs are checked"
    );
    std::fs::write(
        docs.join("timeslice.md"),
        blocks(&["w", "x", "across-files"]),
    )
    .unwrap();
    let _ = run_ok(&with_docs.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let md = std::fs::read_to_string(d.join("short/timeslice/paper-vs-measured.md")).unwrap();
    assert!(
        md.contains("| fewest slices |") && !md.contains("TOO SHORT"),
        "{md}"
    );
    assert!(md.contains("| largest lag (ms) |"), "{md}");
    // the dynamic variant's row shows the slices it chose
    assert!(
        md.contains("| dyn | ") && md.contains(" (chosen, mean) |"),
        "{md}"
    );
    // Figure 11's estimate beside the partitioned run against its unpartitioned sibling
    assert!(
        md.contains("**Ideal partitioning beyond 2.50 ms slices**"),
        "five 0.5 ms bins: {md}"
    );
    let fig11 = md.split("(Figure 11)").nth(1).expect("Figure 11's table");
    let row = fig11
        .lines()
        .find(|l| l.starts_with("| medium |"))
        .expect("a program's row");
    assert!(
        row.matches('|').count() == 9 && !row.contains("NaN"),
        "{row}"
    );
    assert!(
        fig11.contains("`slice-part` against `slice`: misses avoided | runtime improvement |"),
        "{fig11}"
    );
    let across = md
        .split("## Across files")
        .nth(1)
        .expect("the comparison across files");
    // the partitioned variant is not a slice length of its own
    assert!(
        across.contains("| programs per core | 4.00 ms |\n"),
        "{across}"
    );
    assert!(across.contains("| w | t1-dual | 1 | 4 |"), "{across}");
    assert!(across.contains("| x | t1-dual | 1 | 2 |"), "{across}");
    let svg = std::fs::read_to_string(d.join("short/timeslice/fig8-per-core.svg")).unwrap();
    assert!(
        svg.contains("2 per core (x)") && svg.contains("4 per core (w)"),
        "{svg}"
    );
    assert!(d.join("short/timeslice/across-files.svg").exists());
    let doc = std::fs::read_to_string(docs.join("timeslice.md")).unwrap();
    assert!(doc.contains("### Across files"), "{doc}");
}

/// `cachesched reproduce cachefair` of the files under `d/experiments` into `out` on
/// 2 workers; its standard output.
fn reproduce_cachefair(d: &std::path::Path, out: &std::path::Path) -> String {
    run_ok(&[
        "reproduce",
        "cachefair",
        "--jobs",
        "2",
        "--experiments",
        d.join("experiments").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

/// The cache-fair paper's fast and slow schedule of gzip as two mixes of a scenario
/// file: gzip (a cache-fair principal with a work segment) with vpr, vpr and crafty,
/// and with art, mcf and gcc; with `best_effort`, the third co-runner of each is of the
/// best-effort class.
fn cachefair_mixes(best_effort: bool) -> String {
    let principal = r#"{ profile = "gzip", class = "cache-fair", start_jitter_ms = 2, segment = { start_instructions = 6_000_000, instructions = 3_000_000 } }"#;
    let other =
        |p: &str, class: &str| format!(r#"{{ profile = "{p}", start_jitter_ms = 2{class} }}"#);
    let last = if best_effort {
        r#", class = "best-effort""#
    } else {
        ""
    };
    [
        ("gzip-fast", ["vpr", "vpr", "crafty"]),
        ("gzip-slow", ["art", "mcf", "gcc"]),
    ]
    .iter()
    .map(|(label, [a, b, c])| {
        format!(
            "[[mixes]]\nlabel = \"{label}\"\nthreads = [{principal}, {}, {}, {}]\n\n",
            other(a, ""),
            other(b, ""),
            other(c, last)
        )
    })
    .collect()
}

/// A scenario of several mixes with the cache-fair analysis: each mix runs on its own
/// (its own directory), every run ends when the principal's work segment is done, and
/// the section has the variability table (with a partitioned baseline, §5.5), the
/// best-effort slowdown, the paper's value against the measured, the reconnaissance
/// check, Figure 4's estimates against the partitioned miss rates and the plots. The
/// two mixes' 12 runs go through one pool first, and each mix then reads its 6 from the
/// run cache. Fails if a mix is not run, the mixes run one after the other, a run does
/// not stop at its segment, or a part of the analysis is missing.
#[test]
fn reproduce_cachefair_analyses_fast_and_slow_mixes() {
    let d = tmp("cachefair-mixes");
    let ex = d.join("experiments").join("cachefair");
    std::fs::create_dir_all(&ex).unwrap();
    let file = format!(
        r#"name = "cf-tiny"
description = "tiny"
machine = "t1-dual"
duration_ms = 2000
stop_after_segments = true
seeds = [1, 2]
metrics = ["ips"]
analyses = ["cachefair"]
min_quanta = 1

[kernel]
baseline = "fx"
fx_quantum_ms = 2

[[variants]]
label = "fx"

[[variants]]
label = "cachefair"
policies = [{{ name = "cachefair", quantum_ms = 2, recon_instructions = 2_000_000, min_points = 3, calibration_instructions = 300_000, repeat_instructions = 100_000_000 }}]

[[variants]]
label = "fx-part"
partition = "per-core"

[[paper]]
what = "gzip: 21%"
source = "§5.2"
metric = "variability_pct"
variant = "fx"
program = "gzip"
value = [21, 21]

{}"#,
        cachefair_mixes(true)
    );
    std::fs::write(ex.join("tiny.toml"), file).unwrap();
    let out = d.join("out");
    let said = reproduce_cachefair(&d, &out);
    assert!(
        said.contains("12 runs of 2 mixes on 2 worker(s), into the run cache"),
        "{said}"
    );
    assert_eq!(
        said.matches("6 of 6 runs read from the run cache").count(),
        2,
        "{said}"
    );
    for m in ["gzip-fast", "gzip-slow"] {
        let r = std::fs::read_to_string(out.join("cachefair/tiny").join(m).join("results.json"))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        for row in v.as_array().unwrap() {
            let res = &row["result"];
            let seg = res["threads"][0]["segment_ms"].as_f64().unwrap();
            let start = res["threads"][0]["segment_start_ms"].as_f64().unwrap();
            let end = res["measured_ms"].as_f64().unwrap();
            assert!((start + seg - end).abs() < 0.01, "{m}: ends at {end} ms");
        }
    }
    // the per-seed table: a row per mix and seed, fx's segment as results.json has it,
    // cache-fair's estimate and corrections filled
    let per_seed = std::fs::read_to_string(out.join("cachefair/tiny/per-seed.md")).unwrap();
    assert!(
        per_seed.contains("| mix | seed | fx: start | fx: segment | cachefair: start | cachefair: segment | cachefair: fair miss rate | cachefair: fallback | cachefair: given |"),
        "{per_seed}"
    );
    for m in ["gzip-fast", "gzip-slow"] {
        let r = std::fs::read_to_string(out.join("cachefair/tiny").join(m).join("results.json"))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        for seed in [1u64, 2] {
            let row = per_seed
                .lines()
                .find(|l| l.starts_with(&format!("| {m} | {seed} |")))
                .unwrap_or_else(|| panic!("no row for {m}, seed {seed}:\n{per_seed}"));
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 2 + 2 + 8 + 2, "{row}");
            let fx = v
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["variant"] == "fx" && x["seed"] == seed)
                .unwrap();
            let seg = fx["result"]["threads"][0]["segment_ms"].as_f64().unwrap();
            assert_eq!(cells[3], format!("{seg:.0}"), "{row}");
            let rate: f64 = cells[6].parse().unwrap_or_else(|_| panic!("{row}"));
            assert!(rate > 0.0, "{row}");
            assert!(["yes", "no"].contains(&cells[7]), "{row}");
            let given: f64 = cells[8].parse().unwrap_or_else(|_| panic!("{row}"));
            assert!(given.is_finite(), "{row}");
        }
    }
    let md = std::fs::read_to_string(out.join("cachefair/paper-vs-measured.md")).unwrap();
    for want in [
        "| gzip |",
        "Per seed, each mix's principal",
        "reduction (cachefair vs fx)",
        "Best-effort thread under `cachefair` against `fx`",
        "| gzip: 21% | §5.2 | fx | gzip | 21.0% |",
        "ended its first reconnaissance before its work segment began",
        "in 4 of 4",
        "cachefair: calibrations",
        "Plot: `completion-times.svg`",
        "reduction (fx-part vs fx)",
        "| program | estimated fair (cachefair) | actual, equal partitions (fx-part) | estimated / actual |",
        "Plot: `fair-miss-rate.svg`",
    ] {
        assert!(md.contains(want), "missing '{want}' in:\n{md}");
    }
    // Figure 4's row: both numbers measured
    let row = md
        .lines()
        .find(|l| l.starts_with("| gzip |") && l.matches('|').count() == 5)
        .expect("a Figure 4 row for gzip");
    assert!(!row.contains("n/a"), "{row}");
    for f in [
        "variability-fx.svg",
        "variability-cachefair.svg",
        "variability-fx-part.svg",
        "completion-times.svg",
        "fair-miss-rate.svg",
    ] {
        let svg = std::fs::read_to_string(out.join("cachefair/tiny").join(f)).unwrap();
        assert!(
            svg.contains("principal program") && svg.contains("gzip"),
            "{f}"
        );
    }
}

/// The sensitivity study: one parameter moved both ways, each workload run under the
/// baseline and CASC, a table row with the moved values and the paired changes, and
/// both charts. Fails if the parameter is not moved (the values 12 and 20 are twolf's
/// 16 KB of code ±25%), if a run is missing, or if a bad scale is accepted.
#[test]
fn reproduce_casc_sensitivity_moves_one_parameter_both_ways() {
    let d = tmp("sensitivity");
    let out = d.join("s");
    let o = out.to_str().unwrap();
    let stdout = run_ok(&[
        "reproduce",
        "casc-sensitivity",
        "--out",
        o,
        "--only",
        "twolf.code",
        "--warmup-ms",
        "10",
        "--duration-ms",
        "20",
    ]);
    assert!(stdout.contains("6 runs"), "{stdout}");
    let table = std::fs::read_to_string(out.join("sensitivity.md")).unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with("| twolf | code_kb |"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!((cells[3], cells[4], cells[7]), ("16", "12", "20"), "{row}");
    // the paired change against the unperturbed workload, low / high
    assert_eq!(cells[10].matches(" / ").count(), 1, "{row}");
    assert!(table.contains("Unperturbed: Δ L2 miss ratio"), "{table}");
    assert!(table.contains("(one seed: no interval)"), "{table}");
    for f in [
        "sensitivity-miss.svg",
        "sensitivity-throughput.svg",
        "results.json",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    let svg = std::fs::read_to_string(out.join("sensitivity-miss.svg")).unwrap();
    assert!(svg.contains("twolf: code_kb"), "{svg}");
    let err = run_err(&[
        "reproduce",
        "casc-sensitivity",
        "--out",
        o,
        "--scale",
        "1.5",
    ]);
    assert!(err.contains("--scale must be between 0 and 1"), "{err}");
}

/// The real-program suite: names in mixes, the cache directory, recording a window of
/// a run, and a cached trace replayed as threads labelled `real:NAME`. The suite's
/// own recordings (50 M instructions each) are too long for a test: a small window of
/// gzip is recorded here with `trace record` and put where the cache keeps gzip's.
#[test]
fn real_programs_from_the_trace_cache() {
    let d = tmp("real");
    let cache = d.join("cache");
    let with_cache = |args: &[&str]| {
        let out = bin()
            .args(args)
            .env("CACHESCHED_TRACES", &cache)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, list, _) = with_cache(&["real", "list"]);
    assert!(ok && list.contains(&cache.display().to_string()), "{list}");
    for p in ["gzip", "xz", "cc1", "sqlite3", "stockfish", "povray"] {
        assert!(
            list.lines().any(|l| l.starts_with(p)),
            "{p} missing:\n{list}"
        );
    }
    // at least ten programs, between the header lines and the closing hint
    let rows = list
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with("use:"))
        .count();
    assert!(rows >= 10, "{list}");
    // the packages: gzip (essential) and valgrind (this test records with it) are
    // installed, so they have versions and are not among the missing
    let (ok, pk, err) = with_cache(&["real", "packages"]);
    assert!(ok, "{err}");
    for p in ["gzip", "valgrind"] {
        let row = pk.lines().find(|l| l.starts_with(&format!("{p} ")));
        let row = row.unwrap_or_else(|| panic!("{p} missing:\n{pk}"));
        assert!(!row.split_whitespace().nth(1).unwrap().eq("no"), "{row}");
    }
    assert!(
        pk.lines()
            .any(|l| l.starts_with("gap-libs ") && l.ends_with(" gap")),
        "{pk}"
    );
    let (ok, absent, err) = with_cache(&["real", "packages", "--missing"]);
    assert!(ok && absent.lines().count() == 1, "{absent}{err}");
    assert!(
        !absent
            .split_whitespace()
            .any(|p| p == "gzip" || p == "valgrind"),
        "{absent}"
    );
    let (ok, _, err) = with_cache(&["simulate", "--mix", "real:nosuch:2", "--duration-ms", "1"]);
    assert!(
        !ok && err.contains("unknown real program 'nosuch'") && err.contains("gzip"),
        "{err}"
    );
    let (ok, _, err) = with_cache(&["simulate", "--mix", "real:", "--duration-ms", "1"]);
    assert!(!ok && err.contains("name a program after real:"), "{err}");

    // a window: 100,000 instructions skipped, 200,000 recorded, then gzip is stopped
    let input = d.join("in.txt");
    std::fs::write(&input, "a few words, again and again. ".repeat(20_000)).unwrap();
    let trace = d.join("w.cst");
    let inp = input.to_str().unwrap();
    run_ok(&[
        "trace",
        "record",
        "--skip-instructions",
        "100000",
        "--instructions",
        "200000",
        "--out",
        trace.to_str().unwrap(),
        "--",
        "gzip",
        "-c",
        inp,
    ]);
    let report = run_ok(&["replay", "--trace", trace.to_str().unwrap()]);
    let irefs: u64 = report
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary in {report}"));
    assert_eq!(irefs, 200_000, "{report}");

    // placed where the cache keeps gzip's trace, it is used, not recorded again
    let (ok, path, _) = with_cache(&["real", "path", "gzip"]);
    assert!(ok, "{path}");
    let path = PathBuf::from(path.trim());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(&trace, &path).unwrap();
    let json = d.join("r.json");
    let (ok, _, err) = with_cache(&[
        "simulate",
        "--machine",
        "t1-dual",
        "--mix",
        "real:gzip:2,small:1",
        "--duration-ms",
        "5",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(ok && !err.contains("recording"), "{err}");
    let r = std::fs::read_to_string(&json).unwrap();
    assert_eq!(r.matches("\"name\": \"real:gzip\"").count(), 2, "{r}");
    let resolved = std::fs::read_to_string(d.join("r.json.config.toml")).unwrap();
    assert!(resolved.contains("real = \"gzip\"") && resolved.contains(path.to_str().unwrap()));
}

/// `burn` with memory work: fixed work per thread (`--steps`, rounded up to whole
/// chunks of 1,024), pinned threads on distinct CPUs, and the reports that the studies
/// read; fails if a thread stops early, overruns by more than a chunk, or two pinned
/// threads share a CPU.
#[test]
fn burn_chases_a_working_set_for_fixed_work() {
    let out = run_ok(&[
        "burn",
        "--threads",
        "2",
        "--chase-kb",
        "64",
        "--steps",
        "300000",
        "--pin-threads",
        "--report",
    ]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        let steps = l["steps"].as_u64().unwrap();
        assert!((300_000..300_000 + 1024).contains(&steps), "{l}");
        assert!(l["wall_ms"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["steps_per_s"].as_f64().unwrap() > 1e6, "{l}");
    }
    let cpus: Vec<u64> = lines
        .iter()
        .filter_map(|l| l["pinned_to"].as_u64())
        .collect();
    let n = std::thread::available_parallelism().unwrap().get();
    if n >= 2 {
        assert_eq!(cpus.len(), 2);
        assert_ne!(cpus[0], cpus[1], "{out}");
    }
    assert!(run_err(&["burn", "--chase-kb", "0"]).contains("at least 1 KiB"));
}

/// `burn --profile-bin-us`: a thread that alternates 3 ms of chasing with 4 ms of
/// sleep returns to its CPU after every sleep; each return is a run binned from its
/// start. Fails if the sleeps are not seen as returns, if a run's whole bins are not
/// all counted, or if bad uses of the option are not named. On a loaded machine a
/// preemption can cut every 3 ms run short of 2.5 ms, or late wake-ups leave one
/// round; the burn is then repeated, three attempts in all, and one that never shows
/// two rounds and a whole run fails.
#[test]
fn burn_profiles_every_return_to_the_cpu() {
    let burn = || -> serde_json::Value {
        let out = run_ok(&[
            "burn",
            "--chase-kb",
            "64",
            "--ms",
            "70",
            "--work-us",
            "3000",
            "--sleep-us",
            "4000",
            "--profile-bin-us",
            "500",
            "--report",
        ]);
        serde_json::from_str(out.lines().next().unwrap()).unwrap()
    };
    // starved: fewer than two rounds, or no run reaching its fifth bin
    let usable = |l: &serde_json::Value| {
        l["rounds"].as_u64().is_some_and(|r| r >= 2)
            && l["run_profile"]["runs_per_bin"]
                .as_array()
                .is_some_and(|b| b.len() >= 5)
    };
    let mut l = burn();
    for _ in 1..3 {
        if usable(&l) {
            break;
        }
        l = burn();
    }
    let p = &l["run_profile"];
    let (runs, rounds) = (p["runs"].as_u64().unwrap(), l["rounds"].as_u64().unwrap());
    // every sleep but the last is followed by a return (the first run is not one); a
    // loaded machine gives fewer rounds (late wake-ups) and may add returns (a
    // preemption is one too), never fewer returns than sleeps
    assert!(rounds >= 2 && runs + 1 >= rounds, "{l}");
    let per_bin: Vec<u64> = serde_json::from_value(p["runs_per_bin"].clone()).unwrap();
    let rates: Vec<f64> = serde_json::from_value(p["steps_per_ms"].clone()).unwrap();
    assert_eq!(per_bin.len(), rates.len());
    assert!(
        per_bin.len() >= 5,
        "3 ms runs have at least 5 whole 0.5 ms bins: {l}"
    );
    assert!(per_bin[0] >= per_bin[4] && per_bin[4] >= 1, "{l}");
    assert!(
        rates[..5].iter().all(|&r| r > 100.0),
        "a 64 KiB chase makes progress: {l}"
    );
    assert!(run_err(&["burn", "--profile-bin-us", "500", "--report"]).contains("memory work"));
    assert!(run_err(&["burn", "--chase-kb", "64", "--profile-bin-us", "500"]).contains("--report"));
    assert!(run_err(&[
        "burn",
        "--chase-kb",
        "64",
        "--report",
        "--profile-bin-us",
        "10"
    ])
    .contains("out of range"));
}

/// `study affinity` end to end at a tiny size: every condition runs once (bound,
/// forced migration through `cachesched run --policy migrate`, Linux, the affinity
/// policy), the runs are kept, the report names them, `--from-runs` rebuilds the same
/// report without running, and --docs fills the study's block. Fails if a condition
/// is missing, a run is lost, or the rebuilt report differs.
#[test]
fn study_affinity_runs_every_condition_and_rebuilds_its_report() {
    let dir = tmp("study-affinity");
    let out = dir.join("out");
    let o = out.to_str().unwrap();
    run_ok(&[
        "study",
        "affinity",
        "--kb",
        "64",
        "--repeats",
        "1",
        "--ms",
        "150",
        "--out",
        o,
    ]);
    let runs = std::fs::read_to_string(out.join("runs.jsonl")).unwrap();
    assert_eq!(runs.lines().count(), 5, "{runs}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for c in [
        "bound",
        "migrate-2ms",
        "migrate-10ms",
        "linux",
        "affinity-policy",
    ] {
        assert!(report.contains(c), "{c}: {report}");
    }
    assert!(report.contains("| 64 KiB |"), "{report}");
    // forced migration moved the threads many times; bound threads stayed
    let rec: Vec<serde_json::Value> = runs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let migr = |c: &str| -> u64 {
        rec.iter()
            .filter(|r| r["condition"] == c)
            .flat_map(|r| r["threads"].as_array().unwrap().iter())
            .map(|t| t["migrations"].as_u64().unwrap_or(0))
            .sum()
    };
    assert!(migr("migrate-2ms") >= 20, "{runs}");
    assert!(migr("bound") <= 4, "{runs}");
    let doc = dir.join("doc.md");
    std::fs::write(
        &doc,
        "# x\n<!-- study affinity: begin -->\n<!-- study affinity: end -->\n",
    )
    .unwrap();
    run_ok(&[
        "study",
        "affinity",
        "--from-runs",
        "--out",
        o,
        "--docs",
        doc.to_str().unwrap(),
    ]);
    let again = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert_eq!(again, report);
    assert!(std::fs::read_to_string(&doc)
        .unwrap()
        .contains("### Cache affinity on this host"));
    let e = run_err(&[
        "study",
        "affinity",
        "--from-runs",
        "--out",
        dir.join("none").to_str().unwrap(),
    ]);
    assert!(e.contains("--from-runs needs a previous study"), "{e}");
}

/// `experiment` on two mixes that are the same simulation: the pool runs it once and
/// both mixes read it from the run cache; with a run cache that cannot be written, the
/// mixes run one after the other, each its own run, with a warning. Fails if the
/// repeated configuration runs twice in the pool, the mixes bypass the pool, or an
/// unwritable cache stops the experiment.
#[test]
fn experiment_pools_its_mixes_and_runs_a_repeated_one_once() {
    let d = tmp("pool-mixes");
    let mix = |label: &str| {
        format!(
            "[[mixes]]\nlabel = \"{label}\"\nthreads = [{{ profile = \"mcf\", cpus = [0] }}]\n\n"
        )
    };
    let file = d.join("two.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"two\"\ndescription = \"the same mix twice\"\nmachine = \"core2-4m\"\n\
             duration_ms = 10\nseeds = [1]\nmetrics = [\"ips\"]\nmin_quanta = 0\n\n{}{}",
            mix("a"),
            mix("b")
        ),
    )
    .unwrap();
    let said = run_ok(&[
        "experiment",
        file.to_str().unwrap(),
        "--out",
        d.join("out").to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    assert!(
        said.contains("2 runs of 2 mixes on 2 worker(s), into the run cache"),
        "{said}"
    );
    assert!(
        said.contains("0 of 2 runs read from the run cache")
            && said.contains(", 1 the same as another, 1 to run"),
        "{said}"
    );
    assert_eq!(
        said.matches("1 of 1 runs read from the run cache").count(),
        2,
        "{said}"
    );
    // a run cache under a file cannot be made: no pool, each mix runs its own
    let out = bin()
        .env("CACHESCHED_RUNS", file.join("runs"))
        .args([
            "experiment",
            file.to_str().unwrap(),
            "--out",
            d.join("out2").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (said, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: the mixes run one after the other")
            && err.contains("CACHESCHED_RUNS"),
        "{err}"
    );
    assert!(!said.contains("into the run cache"), "{said}");
    for m in ["a", "b"] {
        assert!(d.join("out2").join(m).join("results.json").exists());
    }
}

/// `reproduce` adds seeds one at a time: a variant that runs one program where the
/// baseline runs eight (`half`, a large effect) stops at three seeds, the baseline
/// repeated under another label (`same`, no effect: no interval) runs all five, and
/// the reports say so; a second reproduction chooses the same runs, all from the run
/// cache, and writes the same bytes, as `--from-results` does; `--plan` counts the
/// runs at three seeds and at five; `--seeds` runs every seed it names. Fails if a
/// decided comparison gets more seeds, an undecided one fewer, the choice changes
/// between runs, or a report or the plan miscounts.
#[test]
fn reproduce_adds_seeds_one_at_a_time_while_a_comparison_is_undecided() {
    let d = tmp("seq-seeds");
    std::fs::create_dir_all(d.join("exp/casc")).unwrap();
    std::fs::write(
        d.join("exp/casc/tiny.toml"),
        r#"
name = "tiny"
machine = "niagara-2c"
duration_ms = 15
min_quanta = 0
seeds = [1, 2, 3, 4, 5]
metrics = ["ips", "l2_miss_ratio"]
threads = [{ profile = "large", count = 4 }, { profile = "small", count = 4 }]
variants = [
  { label = "cfs" },
  { label = "same" },
  { label = "half", threads = [{ profile = "large", count = 1 }] },
]
"#,
    )
    .unwrap();
    let (exp, out) = (d.join("exp"), d.join("out"));
    let run = |extra: &[&str]| {
        let o = bin()
            .env("CACHESCHED_RUNS", d.join("runs"))
            .args(["reproduce", "casc", "--experiments", exp.to_str().unwrap()])
            .args(["--out", out.to_str().unwrap(), "--jobs", "2"])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{extra:?}: {err}");
        String::from_utf8(o.stdout).unwrap()
    };
    let said = run(&[]);
    assert!(said.contains("seeds, round 3: 2 runs"), "{said}");
    assert!(!said.contains("round 4"), "{said}");
    let read = |f: &str| std::fs::read_to_string(out.join("casc").join(f)).unwrap();
    let (table, report) = (read("paper-vs-measured.md"), read("tiny/report.md"));
    let outcome = "Seeds per comparison with `cfs`: decided after 3 seeds: half; undecided at \
                   the maximum, 5 seeds: same.";
    for md in [&table, &report] {
        assert!(md.contains(outcome), "{md}");
        assert!(
            md.contains(
                "seeds added sequentially from [1, 2, 3, 4, 5]: every variant ran the first 3"
            ),
            "{md}"
        );
    }
    let csv = read("tiny/results.csv");
    // the runs of each variant in results.csv
    let seeds = |csv: &str| {
        let n = |v: &str| {
            csv.lines()
                .filter(|l| l.starts_with(&format!("{v},")))
                .count()
        };
        (n("cfs"), n("same"), n("half"))
    };
    assert_eq!(seeds(&csv), (5, 5, 3));
    // again: the same runs, read from the run cache, the same bytes
    let said = run(&[]);
    assert!(
        !said.contains("1 to run") && said.contains("0 to run"),
        "{said}"
    );
    assert_eq!(read("tiny/report.md"), report);
    run(&["--from-results"]);
    assert_eq!(read("tiny/report.md"), report);
    assert_eq!(read("tiny/results.csv"), csv);
    // cfs and same are one configuration: 2 distinct runs a seed
    let plan = run(&["--plan"]);
    assert!(
        plan.contains("| casc/tiny | 6–10 | 6–8 | 0–2 | 0 of 0 |"),
        "{plan}"
    );
    // the seeds named on the command line, every one
    run(&["--seeds", "1,2,3,4"]);
    assert_eq!(seeds(&read("tiny/results.csv")), (4, 4, 4));
    assert!(read("paper-vs-measured.md").contains("; seeds [1, 2, 3, 4]; means"));
}

/// Seeds added one at a time in a file of mixes (the cache-fair analysis pairs each
/// program's fast and slow mix by seed, and each mix's comparisons stop on their own):
/// the section names every comparison of every mix with its seeds, and each mix's
/// results hold exactly those, the baseline every seed any of its comparisons got.
/// Fails if the analysis breaks on mixes with different seeds, or a comparison's
/// stated seeds differ from the runs it has.
#[test]
fn reproduce_adds_seeds_per_mix_and_the_mixes_analysis_takes_ragged_seeds() {
    let d = tmp("seq-seeds-mixes");
    let ex = d.join("experiments").join("cachefair");
    std::fs::create_dir_all(&ex).unwrap();
    let file = format!(
        r#"name = "cf-seq"
machine = "t1-dual"
duration_ms = 2000
stop_after_segments = true
seeds = [1, 2, 3, 4, 5]
metrics = ["ips"]
analyses = ["cachefair"]
min_quanta = 1

[kernel]
baseline = "fx"
fx_quantum_ms = 2

[[variants]]
label = "fx"

[[variants]]
label = "fx-same"

[[variants]]
label = "fx-part"
partition = "per-core"

{}"#,
        cachefair_mixes(false)
    );
    std::fs::write(ex.join("seq.toml"), file).unwrap();
    let out = d.join("out");
    let said = reproduce_cachefair(&d, &out);
    assert!(
        said.contains("seeds, round 1: 18 runs of 2 mix(es)"),
        "{said}"
    );
    let md = std::fs::read_to_string(out.join("cachefair/paper-vs-measured.md")).unwrap();
    assert!(md.contains("| gzip |"), "{md}");
    let line = md
        .lines()
        .find_map(|l| l.strip_prefix("Seeds per comparison with `fx` (mix: variant): "))
        .unwrap_or_else(|| panic!("{md}"));
    let csv = |m: &str| {
        std::fs::read_to_string(out.join("cachefair/seq").join(m).join("results.csv")).unwrap()
    };
    let runs = |m: &str, v: &str| {
        csv(m)
            .lines()
            .filter(|l| l.starts_with(&format!("{v},")))
            .count()
    };
    let mut named = 0;
    for group in line.trim_end_matches('.').split("; ") {
        let (outcome, names) = group.split_once(" seeds: ").unwrap();
        let n: usize = outcome.rsplit(' ').next().unwrap().parse().unwrap();
        for name in names.split(", ") {
            let (m, v) = name.split_once(": ").unwrap();
            assert_eq!(runs(m, v), n, "{name} in {line}");
            assert!(runs(m, "fx") >= n, "{name} in {line}");
            named += 1;
        }
    }
    // two variants against fx in each of two mixes
    assert_eq!(named, 4, "{line}");
    // fx-same is fx under another label: no interval, so to the maximum in both mixes
    assert!(
        line.contains("undecided at the maximum, 5 seeds: gzip-fast: fx-same, gzip-slow: fx-same"),
        "{line}"
    );
}

/// `--plan` counts a run whose window ends by its quanta at its whole duration (and
/// says these are upper bounds) until a run of the same configuration with another
/// seed is in the run cache, then at that run's length. Four threads take turns of
/// 1 ms on one CPU: two quanta each end a window after about 5 ms of a 40 ms run.
/// Fails if the plan ignores the cached sibling, or stops saying which runs are
/// bounded.
#[test]
fn plan_takes_a_quanta_window_from_a_cached_sibling() {
    plan_takes_an_early_end_from_a_cached_sibling(
        "plan-quanta",
        "stop_after_quanta = { quanta = 2 }\nthreads = [{ profile = \"gzip\", count = 4, cpus = [0] }]",
    );
}

/// The same for a run that ends when its work segment completes
/// (`stop_after_segments`, as cache-fair's Table 2 runs do): a 2 M-instruction segment
/// ends a 40 ms run after about a millisecond. Fails if the plan counts such runs at
/// their whole duration once a sibling is cached (it did, and overestimated
/// cache-fair's real-program file about tenfold).
#[test]
fn plan_takes_a_segment_window_from_a_cached_sibling() {
    plan_takes_an_early_end_from_a_cached_sibling(
        "plan-segments",
        "stop_after_segments = true\nthreads = [{ profile = \"gzip\", segment = { start_instructions = 0, instructions = 2_000_000 } }]",
    );
}

/// The plan of three seeds of a 40 ms run on one CPU whose window ends early by
/// `ending` (its stop setting and threads), before and after seed 1 is made.
fn plan_takes_an_early_end_from_a_cached_sibling(name: &str, ending: &str) {
    let d = tmp(name);
    std::fs::create_dir_all(d.join("exp/casc")).unwrap();
    std::fs::write(
        d.join("exp/casc/turns.toml"),
        format!(
            r#"
name = "turns"
machine = "core2-4m"
duration_ms = 40
warmup_ms = 5
min_quanta = 0
seeds = [1, 2, 3]
metrics = ["ips"]
{ending}

[kernel]
baseline = "fx"
fx_quantum_ms = 1
"#
        ),
    )
    .unwrap();
    let exp = d.join("exp");
    let run = |extra: &[&str]| {
        let o = bin()
            .env("CACHESCHED_RUNS", d.join("runs"))
            .args(["reproduce", "casc", "--experiments", exp.to_str().unwrap()])
            .args(["--out", d.join("out").to_str().unwrap(), "--jobs", "1"])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{extra:?}: {err}");
        String::from_utf8(o.stdout).unwrap()
    };
    // nothing cached: 3 runs at 40 ms each, bounded
    let plan = run(&["--plan"]);
    assert!(
        plan.contains("| casc/turns | 3 | 0 | 3 | 0 of 0 | 0.1 |"),
        "{plan}"
    );
    assert!(
        plan.contains("3 of the runs to make end their window"),
        "{plan}"
    );
    // seed 1 made: the other two at its length, well under 40 ms each
    run(&["--seeds", "1"]);
    let plan = run(&["--plan"]);
    assert!(
        plan.contains("| casc/turns | 3 | 1 | 2 | 0 of 0 | 0.0 |"),
        "{plan}"
    );
    assert!(
        !plan.contains("of the runs to make end their window"),
        "{plan}"
    );
}

/// Outputs stay where they were asked to go (issue 77, items 8, 11 and 12): a scenario
/// name or mix label that is not a plain file name is refused; a symbolic link at an
/// output's place is replaced, not written through; an unusable `--out` is said before
/// any run; a run cache entry copied under another run's key is not taken for that run.
/// Fails if any of these writes outside the directory, follows the link, runs first, or
/// reports a copied run.
#[test]
fn outputs_stay_in_their_place_and_the_run_cache_checks_its_keys() {
    let d = tmp("outputs-place");
    let sc = d.join("sc.toml");
    let tiny = "machine = \"t1-dual\"\nthreads = [{ profile = \"small\" }]\nduration_ms = 2\nwarmup_ms = 0\nseeds = [1]\n";
    std::fs::write(&sc, format!("name = \"../../escape\"\n{tiny}")).unwrap();
    let e = run_err(&["experiment", sc.to_str().unwrap()]);
    assert!(
        e.contains("scenario name '../../escape' cannot be a file name"),
        "{e}"
    );
    let mixes = "name = \"m\"\nmachine = \"t1-dual\"\nduration_ms = 2\nwarmup_ms = 0\nseeds = [1]\n[[mixes]]\nlabel = \"..\"\nthreads = [{ profile = \"small\" }]\n";
    std::fs::write(&sc, mixes).unwrap();
    let e = run_err(&[
        "experiment",
        sc.to_str().unwrap(),
        "--out",
        d.join("o").to_str().unwrap(),
    ]);
    assert!(e.contains("mix label '..' cannot be a file name"), "{e}");
    // an unusable --out (a file where a directory should be), before any run
    let file = d.join("a-file");
    std::fs::write(&file, "x").unwrap();
    std::fs::write(&sc, format!("name = \"ok\"\n{tiny}")).unwrap();
    let out = bin()
        .args(["experiment", sc.to_str().unwrap(), "--out"])
        .arg(file.join("sub"))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("cannot create the output directory"),
        "{e}"
    );
    assert!(!e.contains("run 1/"), "said after running: {e}");
    // a link at report.md's place is replaced; its target keeps its text
    let o = d.join("out");
    std::fs::create_dir_all(&o).unwrap();
    let victim = d.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, o.join("report.md")).unwrap();
    let runs = d.join("runs");
    // `experiment` on the scenario file into `out`, with the run cache `runs`
    let experiment = |out: &std::path::Path| {
        bin()
            .env("CACHESCHED_RUNS", &runs)
            .args(["experiment", sc.to_str().unwrap(), "--out"])
            .arg(out)
            .output()
            .unwrap()
    };
    let out = experiment(&o);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::read_to_string(o.join("report.md"))
        .unwrap()
        .starts_with("# ok"));
    let leftovers: Vec<_> = std::fs::read_dir(&o)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // the run cache: the one entry, copied under another key's name, is refused there
    let entries: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let text = std::fs::read_to_string(&entries[0]).unwrap();
    assert!(
        text.starts_with("{\"key\":\""),
        "an entry holds its key: {}",
        &text[..40.min(text.len())]
    );
    // the same scenario with another seed: its key's file now holds seed 1's run
    std::fs::write(
        &sc,
        format!(
            "name = \"ok\"\n{}",
            tiny.replace("seeds = [1]", "seeds = [2]")
        ),
    )
    .unwrap();
    assert!(experiment(&d.join("o2")).status.success());
    let after: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let other = after
        .iter()
        .find(|p| **p != entries[0])
        .expect("seed 2's entry")
        .clone();
    std::fs::copy(&entries[0], &other).unwrap();
    let out = experiment(&d.join("o3"));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{e}");
    assert!(
        e.contains("holds the run of key"),
        "the copied entry is said: {e}"
    );
    assert_eq!(
        std::fs::read(d.join("o2/results.json")).unwrap(),
        std::fs::read(d.join("o3/results.json")).unwrap(),
        "seed 2's results, not the copied seed 1's"
    );
}

/// `experiment` stops cleanly on SIGTERM as on Ctrl-C (issue 77, item 12): it says it
/// was interrupted, writes nothing more and exits with 130, instead of dying with 143.
/// Fails if SIGTERM kills it outright or it goes on running.
#[test]
fn experiment_stops_cleanly_on_sigterm() {
    let d = tmp("sigterm");
    let sc = d.join("long.toml");
    std::fs::write(
        &sc,
        "name = \"long\"\nmachine = \"niagara-2c\"\nthreads = [{ profile = \"art\", count = 6 }]\nduration_ms = 60000\nseeds = [1]\n",
    )
    .unwrap();
    let child = bin()
        .args(["experiment", sc.to_str().unwrap(), "--jobs", "1", "--out"])
        .arg(d.join("out"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    send_signal(child.id() as i32, 15);
    let t0 = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        t0.elapsed().as_secs() < 20,
        "took {:?} to stop",
        t0.elapsed()
    );
    assert!(!d.join("out/results.json").exists());
}

/// Sends signal `sig` to `pid` with the `kill` command (this test crate has no libc).
fn send_signal(pid: i32, sig: i32) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

/// `--docs` from a reduced run (`--quick`, or an option replacing a file's seeds,
/// windows or sizes) refuses before anything runs and leaves the document as it was:
/// its blocks hold the full reproduction. Fails if a reduced run's two-seed sections
/// could overwrite them again without `--docs-from-reduced`.
#[test]
fn docs_from_a_reduced_run_are_refused() {
    let d = tmp("reduced-docs");
    let docs = d.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let text = "<!-- reproduce casc/fig5-7: begin -->\nfull\n<!-- reproduce casc/fig5-7: end -->\n";
    std::fs::write(docs.join("casc.md"), text).unwrap();
    let ex = experiments();
    let out = d.join("out");
    for extra in [
        &["--quick"][..],
        &["--seeds", "1,2"],
        &["--warmup-ms", "100"],
    ] {
        let mut a = vec![
            "reproduce",
            "casc",
            "--only",
            "fig5-7",
            "--experiments",
            &ex,
            "--out",
            out.to_str().unwrap(),
            "--docs",
            docs.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        let e = run_err(&a);
        assert!(e.contains("--docs-from-reduced"), "{extra:?}: {e}");
        assert_eq!(std::fs::read_to_string(docs.join("casc.md")).unwrap(), text);
        assert!(!out.exists(), "{extra:?}: nothing runs");
    }
}
