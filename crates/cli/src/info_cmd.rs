//! `cachesched machines`, `topology`, `workloads`.

use anyhow::{Context, Result};
use cachesched_sim::machine::{MachineConfig, PRESETS};
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
        println!(
            "    core {:?} (issue width {}, MLP {}), memory {} cycles, bus {} B/cycle, remote {} cycles\n",
            m.core.kind,
            m.core.issue_width,
            m.core.mlp,
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

/// Solo miss ratios of a model: fully associative LRU, 64-byte lines, from the exact
/// stack-distance curve of `accesses` generated accesses (seed 1).
fn solo_miss_ratios(m: &cachesched_sim::workload::LocalityModel, accesses: u64) -> Vec<f64> {
    use cachesched_sim::workload::{LocalityThread, Op, Workload};
    let mut t = LocalityThread::new(m.clone(), 0, 0, cachesched_core::SimRng::new(1));
    let mut sd = cachesched_sim::mrc::StackDistances::new();
    let mut n = 0;
    while n < accesses {
        if let Op::Access { addr, .. } = t.next_op() {
            sd.access(addr >> 6);
            n += 1;
        }
    }
    REPORT_KB
        .iter()
        .map(|kb| sd.miss_ratio(kb * 1024 / 64))
        .collect()
}

/// `cachesched workloads`.
pub fn workloads() -> Result<()> {
    let head: Vec<String> = REPORT_KB
        .iter()
        .map(|kb| format!("{:>7}", cachesched_core::topology::human_bytes(kb << 10)))
        .collect();
    println!(
        "solo miss ratios: fully associative LRU, 64 B lines, 1M accesses, seed 1 (cachesched mrc for whole curves)\n"
    );
    println!(
        "{:<10} {:>10} {:>5} {:>6} {}  description",
        "profile",
        "footprint",
        "gap",
        "writes",
        head.join(" ")
    );
    let row = |name: &str, what: &str, m: &cachesched_sim::workload::LocalityModel| {
        let mr: Vec<String> = solo_miss_ratios(m, 1_000_000)
            .iter()
            .map(|r| format!("{r:>7.3}"))
            .collect();
        println!(
            "{name:<10} {:>7} KB {:>5.1} {:>5.0}% {}  {what}",
            m.footprint_bytes() >> 10,
            m.gap_mean,
            m.write_fraction * 100.0,
            mr.join(" ")
        );
    };
    for (name, what, m) in profiles() {
        row(name, what, &m);
    }
    println!("\nshared-data servers (one process; threads in sharing groups; one thread's stream shown):");
    for (name, what, m, t) in cachesched_sim::workload::servers() {
        row(name, &format!("{what} (group size {t})"), &m);
    }
    Ok(())
}
