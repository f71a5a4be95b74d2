//! `cachesched simulate`.

use crate::cmd::info::load_machine;
use anyhow::{Context, Result};
use cachesched_lab::files::write_file;
use cachesched_lab::interrupt::interrupt_flag;
use cachesched_policies::PolicySpec;
use cachesched_sim::{Baseline, MachineSpec, SimConfig, SimError, Simulation, ThreadGroup};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// Arguments of `cachesched simulate`. Flags override the `--config` file.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Full run configuration (TOML, the format written beside results).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Machine preset (see `cachesched machines`), `host`, or a machine TOML file
    /// [default: niagara-2c, or the config file's].
    #[arg(long, value_name = "PRESET|FILE")]
    machine: Option<String>,
    /// Resize the last-level cache to this many KiB (default: the machine's own size).
    #[arg(long, value_name = "KIB")]
    llc_kb: Option<u64>,
    /// Workload mix as profile:count,… (see `cachesched workloads`); counts 1-4096,
    /// at most 4096 threads in all [default: large:6,medium:6,small:6, or the config
    /// file's].
    #[arg(long, value_name = "MIX")]
    mix: Option<String>,
    /// Baseline scheduling class: cfs, ts (Solaris time-sharing), fx (Solaris fixed
    /// priority) or rr [default: cfs; `reproduce casc` uses ts, as the CASC paper].
    #[arg(long, value_name = "CLASS")]
    baseline: Option<String>,
    /// Policy to run on top of the baseline, as name or name:key=value,…; repeat to
    /// chain several (default: none, the baseline alone, or the config file's).
    #[arg(long = "policy", value_name = "SPEC")]
    policies: Vec<String>,
    /// Ignore cache affinity in wake-up placement and load balancing.
    #[arg(long)]
    affinity_oblivious: bool,
    /// Simulated duration in milliseconds [default: 1000].
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    duration_ms: Option<f64>,
    /// Warm-up in milliseconds, excluded from the results; shorter than the duration
    /// [default: 0].
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    warmup_ms: Option<f64>,
    /// The seed that drives everything [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Write the full result as JSON to FILE (and the resolved configuration beside it
    /// as FILE.config.toml).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Print only the seed and JSON-free summary line.
    #[arg(long)]
    quiet: bool,
    /// Off a terminal (where no progress bar is drawn), print a progress line to stderr
    /// every this many seconds of wall time; 0 prints one at every progress update
    /// (0 to 3600) [default: 10].
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0,
          value_parser = progress_seconds)]
    progress_every: f64,
}

/// Parses `--progress-every` (0 to 3600 seconds).
fn progress_seconds(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if (0.0..=3600.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{s} is outside 0 to 3600 seconds"))
    }
}

/// Builds the configuration from a file and flags.
pub fn build_config(a: &SimulateArgs) -> Result<SimConfig> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read config file '{}'", p.display()))?;
            toml::from_str::<SimConfig>(&text)
                .with_context(|| format!("in config file '{}'", p.display()))?
        }
        None => SimConfig::new(
            "niagara-2c",
            ThreadGroup::parse_mix("large:6,medium:6,small:6")?,
        ),
    };
    if let Some(m) = &a.machine {
        cfg.machine = if m == "host" {
            let h = cachesched_linux::read_host_topology()?;
            MachineSpec::Custom(Box::new(cachesched_sim::MachineConfig::from_topology(
                &h.topology,
            )?))
        } else if MachineSpec::Preset(m.clone()).resolve().is_ok() {
            MachineSpec::Preset(m.clone())
        } else {
            MachineSpec::Custom(Box::new(load_machine(m)?))
        };
    }
    if let Some(kb) = a.llc_kb {
        cfg.machine =
            MachineSpec::Custom(Box::new(cfg.machine.resolve()?.with_llc_bytes(kb << 10)?));
    }
    if let Some(mix) = &a.mix {
        cfg.threads = ThreadGroup::parse_mix(mix)?;
    }
    if let Some(b) = &a.baseline {
        cfg.kernel.baseline = Baseline::parse(b)
            .with_context(|| format!("unknown baseline '{b}': use cfs, ts, fx or rr"))?;
    }
    if !a.policies.is_empty() {
        cfg.policies = a
            .policies
            .iter()
            .map(|s| PolicySpec::parse(s))
            .collect::<Result<_, _>>()?;
    }
    if a.affinity_oblivious {
        cfg.kernel.affinity_oblivious = true;
    }
    if let Some(d) = a.duration_ms {
        cfg.duration_ms = d;
    }
    if let Some(w) = a.warmup_ms {
        cfg.warmup_ms = w;
    }
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    cachesched_lab::real::prepare(&mut cfg.threads)?;
    Ok(cfg)
}

/// One line saying what will run on `machine`: threads, baseline, policies, durations.
fn describe(cfg: &SimConfig, machine: &cachesched_sim::MachineConfig) -> String {
    let groups: Vec<String> = cfg
        .threads
        .iter()
        .map(|g| format!("{}:{}", g.name(), g.count))
        .collect();
    let total: u64 = cfg.threads.iter().map(|g| g.count as u64).sum();
    let policies = if cfg.policies.is_empty() {
        "none".to_string()
    } else {
        cfg.policies
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join("+")
    };
    format!(
        "machine {}, {total} threads ({}), baseline {}, policy {}, {} ms simulated, the first {} ms not measured",
        machine.name,
        groups.join(","),
        cfg.kernel.baseline.name(),
        policies,
        cfg.duration_ms,
        cfg.warmup_ms
    )
}

/// `cachesched simulate`.
pub fn run(a: SimulateArgs) -> Result<i32> {
    let cfg = build_config(&a)?;
    // the run is checked before anything is printed: an error comes alone
    let sim = Simulation::new(&cfg, cachesched_sim::build_chain(&cfg))?;
    println!("seed {}", cfg.seed);
    if !a.quiet {
        println!("{}", describe(&cfg, sim.machine()));
    }
    let stop = interrupt_flag();
    let bar = indicatif::ProgressBar::new(1000);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {percent}% simulated, {elapsed} elapsed, eta {eta}",
        )
        .expect("valid template"),
    );
    let t0 = std::time::Instant::now();
    // off a terminal the bar is hidden: a line every --progress-every seconds instead
    // (not with --quiet)
    let lines = !a.quiet && !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut said = 0.0;
    let res = sim.run(&mut |f| {
        bar.set_position((f * 1000.0) as u64);
        let secs = t0.elapsed().as_secs_f64();
        if lines && secs >= said + a.progress_every {
            said = secs;
            let eta = if f > 0.0 { secs * (1.0 - f) / f } else { f64::NAN };
            eprintln!(
                "progress: {:.0}% simulated ({:.0} of {} ms), {secs:.0} s elapsed, about {eta:.0} s left",
                100.0 * f,
                f * cfg.duration_ms,
                cfg.duration_ms
            );
        }
        !stop.load(Ordering::SeqCst)
    });
    bar.finish_and_clear();
    let r = match res {
        Err(SimError::Interrupted) => {
            eprintln!("interrupted; nothing written");
            return Ok(130);
        }
        r => r?,
    };
    let wall = t0.elapsed().as_secs_f64();
    if a.quiet {
        println!("{}", r.summary().lines().nth(1).unwrap_or_default());
    } else {
        // the summary's first line (seed, machine, baseline, policy) was said before
        // the run
        for line in r.summary().lines().skip(1) {
            println!("{line}");
        }
    }
    eprintln!(
        "simulated {:.1} ms in {wall:.2} s wall: {:.2e} simulated instructions/s",
        cfg.duration_ms,
        r.threads
            .iter()
            .map(|t| t.counters.instructions)
            .sum::<u64>() as f64
            / wall
    );
    if let Some(p) = &a.json {
        write_file(p, &(serde_json::to_string_pretty(&r)? + "\n"))?;
        let cp = PathBuf::from(format!("{}.config.toml", p.display()));
        write_file(&cp, &toml::to_string(&cfg.resolved()?)?)?;
        if !a.quiet {
            println!("wrote {} and {}", p.display(), cp.display());
        }
    }
    Ok(0)
}
