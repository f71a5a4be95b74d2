//! `cachesched machines`, `topology`, `workloads`, `policies`.

use anyhow::{Context, Result};
use cachesched_sim::hw::machine::{MachineConfig, PRESETS};
use cachesched_sim::workload::profiles;
use clap::Args;

/// Arguments of `cachesched topology`.
#[derive(Args, Debug)]
pub struct TopologyArgs {
    /// Show this preset (or machine file) instead of the host.
    #[arg(long, value_name = "PRESET|FILE")]
    machine: Option<String>,
}

/// Loads a machine: a preset name, or a TOML file describing a [`MachineConfig`].
pub fn load_machine(spec: &str) -> Result<MachineConfig> {
    if spec.ends_with(".toml") || std::path::Path::new(spec).is_file() {
        let text = std::fs::read_to_string(spec)
            .with_context(|| format!("cannot read machine file '{spec}'"))?;
        let m: MachineConfig =
            toml::from_str(&text).with_context(|| format!("in machine file '{spec}'"))?;
        m.validate()?;
        Ok(m)
    } else {
        Ok(MachineConfig::preset(spec)?)
    }
}

/// `cachesched machines`.
pub fn machines() -> Result<()> {
    for (name, what) in PRESETS {
        let m = MachineConfig::preset(name)?;
        println!("{name:<16} {what}");
        print!("{}", indent(&m.topology()?.describe()));
        let core = if m.core.out_of_order {
            format!(
                "out of order, {}-entry window, {} load misses",
                m.core.rob_entries, m.core.load_misses
            )
        } else {
            "in order".to_string()
        };
        println!(
            "    core {:?} (issue width {}, {core}), memory {} cycles, bus {} B/cycle, remote {} cycles\n",
            m.core.kind,
            m.core.issue_width,
            m.memory.latency_cycles,
            m.memory.bus_bytes_per_cycle,
            m.memory.remote_latency_cycles
        );
    }
    println!("host             this machine, read from sysfs (`cachesched topology`)");
    Ok(())
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect()
}

/// `cachesched topology`.
pub fn topology(a: TopologyArgs) -> Result<()> {
    match a.machine.as_deref() {
        Some("host") | None => {
            let h = cachesched_linux::read_host_topology()?;
            print!("{}", h.topology.describe());
            let os: Vec<String> = h.os_cpu.iter().map(|c| c.to_string()).collect();
            println!("  OS CPU numbers: {}", os.join(","));
            for w in &h.warnings {
                println!("  note: {w}");
            }
        }
        Some(spec) => print!("{}", load_machine(spec)?.topology()?.describe()),
    }
    Ok(())
}

/// Cache sizes (KiB) at which `cachesched workloads` reports solo miss ratios: the
/// papers' L2/LLC sizes (CASC 48–768 KB, cache-fair 256 KB, 4 MB, 16 MB).
const REPORT_KB: [u64; 6] = [48, 256, 768, 2048, 4096, 16384];

/// Warm-up and measured accesses of `cachesched workloads`.
const WARM_ACCESSES: u64 = 2_000_000;
const MEASURED_ACCESSES: u64 = 1_000_000;

/// Solo miss ratios of models: fully associative LRU, 64-byte lines, from the exact
/// stack-distance curve of each generated stream (seed 1) after a warm-up; computed on
/// all host CPUs, returned in input order.
fn solo_miss_ratios(models: &[&cachesched_sim::workload::LocalityModel]) -> Vec<Vec<f64>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let out = std::sync::Mutex::new(vec![Vec::new(); models.len()]);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(m) = models.get(i) else { break };
                let sd =
                    cachesched_sim::trace::mrc::model_curve(m, 1, WARM_ACCESSES, MEASURED_ACCESSES);
                let row = REPORT_KB
                    .iter()
                    .map(|kb| sd.miss_ratio(kb * 1024 / 64))
                    .collect();
                out.lock().expect("no worker panics")[i] = row;
            });
        }
    });
    out.into_inner().expect("no worker panics")
}

/// `cachesched workloads`.
pub fn workloads() -> Result<()> {
    let head: Vec<String> = REPORT_KB
        .iter()
        .map(|kb| format!("{:>7}", cachesched_core::topology::human_bytes(kb << 10)))
        .collect();
    println!(
        "solo miss ratios: fully associative LRU, 64 B lines, seed 1, {}M accesses measured after {}M of warm-up\n\
         acc/ki: memory accesses per 1,000 instructions (misses per 1,000 instructions = ratio x acc/ki)\n\
         (cachesched mrc PROFILE for whole curves; sources of the benchmark shapes: docs/workloads.md)\n",
        MEASURED_ACCESSES / 1_000_000,
        WARM_ACCESSES / 1_000_000
    );
    let header = || {
        println!(
            "{:<13} {:>10} {:>6} {:>6} {}  description",
            "profile",
            "footprint",
            "acc/ki",
            "writes",
            head.join(" ")
        )
    };
    let generic = profiles();
    let benches = cachesched_sim::workload::benchmarks::benchmarks();
    let servers = cachesched_sim::workload::servers();
    let mut rows: Vec<(String, String, &cachesched_sim::workload::LocalityModel)> = Vec::new();
    for (name, what, m) in &generic {
        rows.push((name.to_string(), what.to_string(), m));
    }
    for b in &benches {
        rows.push((
            b.name.into(),
            format!("[{}] {}", b.suite, b.emulates),
            &b.model,
        ));
    }
    for (name, what, m, t) in &servers {
        rows.push((name.to_string(), format!("{what} (group size {t})"), m));
    }
    let base: Vec<(&str, &str, cachesched_sim::workload::LocalityModel)> =
        cachesched_sim::workload::BASE_VECTORS
            .into_iter()
            .map(|(n, what)| {
                let m = cachesched_sim::workload::base_vector(n, None).expect("known base vector");
                (n, what, m)
            })
            .collect();
    for (name, what, m) in &base {
        rows.push((name.to_string(), what.to_string(), m));
    }
    let ratios = solo_miss_ratios(&rows.iter().map(|r| r.2).collect::<Vec<_>>());
    let sections = [
        (0, "generic profiles:"),
        (
            generic.len(),
            "\nbenchmark profiles (what each emulates; sources in docs/workloads.md):",
        ),
        (
            generic.len() + benches.len(),
            "\nshared-data servers (one process; threads in sharing groups; one thread's stream shown):",
        ),
        (
            generic.len() + benches.len() + servers.len(),
            "\nbase vectors (the cache-affinity paper's interference loops; NAME=KiB sets the footprint):",
        ),
    ];
    for (i, ((name, what, m), mr)) in rows.iter().zip(&ratios).enumerate() {
        if let Some((_, title)) = sections.iter().find(|(start, _)| *start == i) {
            println!("{title}");
            header();
        }
        let mr: Vec<String> = mr.iter().map(|r| format!("{r:>7.3}")).collect();
        println!(
            "{name:<13} {:>7} KB {:>6.0} {:>5.0}% {}  {what}",
            m.footprint_bytes() >> 10,
            m.accesses_per_ki(),
            m.write_fraction * 100.0,
            mr.join(" ")
        );
    }
    Ok(())
}

/// `cachesched policies`: each policy and the statistics it reports, with what each
/// field measures (its typed statistics struct's fields; a map field has one entry per
/// thread or item, `KEY` followed by it).
pub fn policies() -> Result<()> {
    for name in cachesched_policies::POLICY_NAMES {
        let spec = cachesched_policies::PolicySpec::parse(name)
            .with_context(|| format!("the registry's policy {name}"))?;
        let policy = cachesched_policies::build_policy(&spec);
        println!("{name}");
        for f in policy.stat_fields() {
            let key = if f.map {
                format!("{}KEY", f.key)
            } else {
                f.key.to_string()
            };
            println!("  {key:<28} {}", f.about.trim());
        }
    }
    Ok(())
}
