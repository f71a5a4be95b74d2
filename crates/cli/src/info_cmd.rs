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

/// `cachesched workloads`.
pub fn workloads() -> Result<()> {
    workload_table()?;
    println!(
        "\nshared-data servers (one process; threads in sharing groups, ground truth recorded):"
    );
    for (name, what, m, t) in cachesched_sim::workload::servers() {
        println!(
            "{name:<10} {:>9} KB {:>9.1} {:>6.0}%  {what} (group size {t})",
            m.footprint_bytes() >> 10,
            m.gap_mean,
            m.write_fraction * 100.0
        );
    }
    Ok(())
}

fn workload_table() -> Result<()> {
    println!(
        "{:<10} {:>12} {:>9} {:>7}  description",
        "profile", "footprint", "gap", "writes"
    );
    for (name, what, m) in profiles() {
        println!(
            "{name:<10} {:>9} KB {:>9.1} {:>6.0}%  {what}",
            m.footprint_bytes() >> 10,
            m.gap_mean,
            m.write_fraction * 100.0
        );
    }
    Ok(())
}
