//! `cachesched bench daemon`: the Linux daemon's own CPU cost and decision latency with
//! 10, 100 and 1,000 managed threads, side by side with the periods it decides for.

use super::percentile;
use crate::error::{Error, Result};
use cachesched_linux::daemon::{own_cpu_time, Daemon, DaemonConfig, Target};
use cachesched_policies::{build_policy, PolicySpec};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What `bench daemon` measures.
#[derive(Debug, Clone)]
pub struct DaemonBench {
    /// Managed thread counts.
    pub threads: Vec<usize>,
    /// Seconds measured per run (after the start-up, which is reported apart).
    pub seconds: f64,
    /// Policies to measure, each as name or name:key=value,….
    pub policies: Vec<String>,
    /// Also read every thread's state and counters for a stats line this often, as
    /// `run --stats SECS` does (0: never, as `run` does by default).
    pub stats_s: f64,
    /// The `cachesched` executable that runs the load (`cachesched burn`).
    pub exe: PathBuf,
}

/// Runs the daemon with each policy over loads of each thread count and prints a row
/// each.
pub fn run(a: &DaemonBench) -> Result<()> {
    let host = cachesched_linux::read_host_topology()?;
    let config = DaemonConfig::default();
    println!(
        "the daemon managing a load of N threads (each computes 0.1 ms every 100 ms) for {} s;\n\
         CPU = the daemon's own CPU time over wall time (percent of one CPU); decisions = a\n\
         policy hook and its directives (thread start, exit, tick); the scan (every {} ms)\n\
         and the tick are the periods they must fit in; {}\n",
        a.seconds,
        config.scan_ms,
        if a.stats_s > 0.0 {
            format!(
                "a stats line every {} s (as `run --stats {}`)",
                a.stats_s, a.stats_s
            )
        } else {
            "no stats lines (as `run` without --stats; --stats S adds them)".to_string()
        }
    );
    println!(
        "{:<20} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "policy", "N", "start ms", "CPU %", "CPU/thr", "decisions", "p50 us", "p99 us", "max us"
    );
    for spec in &a.policies {
        let spec = PolicySpec::parse(spec)?;
        for &n in &a.threads {
            let ms = (a.seconds * 1000.0) as u64 + 5000;
            let mut load = Command::new(&a.exe)
                .args(["burn", "--threads", &n.to_string(), "--ms", &ms.to_string()])
                .args(["--work-us", "100", "--sleep-us", "100000"])
                .stdout(Stdio::null())
                .spawn()
                .map_err(|source| Error::Spawn {
                    what: format!("cannot start the load ('{} burn')", a.exe.display()),
                    source,
                })?;
            let pid = load.id() as i32;
            let t0 = Instant::now();
            while cachesched_linux::procfs::tasks(pid).map_or(0, |t| t.len()) < n + 1 {
                if t0.elapsed() > Duration::from_secs(20) {
                    let _ = load.kill();
                    return Err(Error::Bench(format!("the load did not start {n} threads")));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let target = Target::Processes {
                pids: vec![pid],
                children: true,
            };
            let s0 = Instant::now();
            let mut d = Daemon::start(host.clone(), build_policy(&spec), target, config.clone())?;
            let start_ms = s0.elapsed().as_secs_f64() * 1e3;
            let skip = d.latencies().total;
            let (w0, c0) = (Instant::now(), own_cpu_time());
            let stats_every = (a.stats_s > 0.0).then(|| Duration::from_secs_f64(a.stats_s));
            let far = w0 + Duration::from_secs_f64(a.seconds + 1.0);
            let mut next_stats = stats_every.map_or(far, |p| w0 + p);
            while w0.elapsed().as_secs_f64() < a.seconds {
                let nap = d
                    .next_due()
                    .min(next_stats)
                    .saturating_duration_since(Instant::now());
                std::thread::sleep(nap);
                d.poll()?;
                if let Some(p) = stats_every.filter(|_| Instant::now() >= next_stats) {
                    // as `run --stats` does: every thread's state and counters
                    d.stats();
                    next_stats += p;
                }
            }
            let cpu = (own_cpu_time() - c0).as_secs_f64() / w0.elapsed().as_secs_f64();
            let mut lat: Vec<f64> = d.latencies().since(skip).to_vec();
            lat.sort_by(f64::total_cmp);
            let managed = d.threads();
            d.finish();
            let _ = load.kill();
            let _ = load.wait();
            println!(
                "{:<20} {:>6} {:>10.1} {:>9.2}% {:>9.4}% {:>10} {:>10.0} {:>10.0} {:>12.0}",
                spec.name(),
                managed,
                start_ms,
                100.0 * cpu,
                100.0 * cpu / managed.max(1) as f64,
                lat.len(),
                percentile(&lat, 0.5),
                percentile(&lat, 0.99),
                lat.last().copied().unwrap_or(0.0),
            );
        }
    }
    Ok(())
}
