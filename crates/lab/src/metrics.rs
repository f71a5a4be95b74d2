//! The metrics a scenario may report: their names, labels and directions, and how
//! each is read from a run's result.

use cachesched_sim::result::ThreadResult;
use cachesched_sim::RunResult;

/// Metrics a scenario may name: name, description, and the column or axis label
/// (with its unit) that reports show.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "ips",
        "instructions per second, all threads",
        "throughput (instructions/s)",
    ),
    ("l2_miss_ratio", "aggregate L2 miss ratio", "L2 miss ratio"),
    (
        "llc_mpki",
        "LLC misses per 1000 instructions",
        "LLC misses per 1,000 instructions",
    ),
    (
        "cpu_share_cv",
        "std. deviation of threads' CPU shares / mean",
        "CPU-share deviation / mean",
    ),
    (
        "ipc",
        "instructions per cycle, summed over threads",
        "instructions per cycle (sum)",
    ),
    ("context_switches", "context switches", "context switches"),
    (
        "context_switches_per_s",
        "context switches per second of the window",
        "context switches per second",
    ),
    ("migrations", "migrations", "migrations"),
    (
        "remote_accesses",
        "accesses served by another chip's cache",
        "remote cache accesses",
    ),
    (
        "remote_stall_cpki",
        "cycles stalled on data from another chip's cache per 1000 instructions",
        "remote-cache stall cycles per 1,000 instructions",
    ),
    (
        "remote_stall_share",
        "cycles stalled on data from another chip's cache, as a share of all cycles",
        "remote-cache stall cycles / cycles",
    ),
    (
        "remote_share_of_stalls",
        "cycles stalled on data from another chip's cache, as a share of memory stall cycles",
        "remote-cache stalls / memory stalls",
    ),
    (
        "samples_per_ms",
        "address samples delivered per simulated ms, over the whole run (warm-up included)",
        "address samples per ms",
    ),
    (
        "bus_utilization",
        "memory bus utilisation",
        "memory bus utilisation (fraction)",
    ),
    (
        "stp",
        "system throughput: the sum of threads' progress against running alone (weighted speedup)",
        "system throughput (STP, weighted speedup)",
    ),
    (
        "antt",
        "average normalized turnaround time: threads' mean slowdown against running alone",
        "ANTT (mean slowdown against alone)",
    ),
    (
        "max_slowdown",
        "the largest slowdown of a thread against running alone",
        "worst slowdown against alone",
    ),
    (
        "jain",
        "Jain's fairness index of threads' progress against running alone",
        "Jain's index of progress against alone",
    ),
];

/// Metrics that count events over the whole measured window (not comparable between
/// windows of different lengths, [`crate::scenario::Scenario::stop_after_quanta`]).
pub const WINDOW_COUNTS: &[&str] = &["context_switches", "migrations", "remote_accesses"];

/// Metrics computed against each thread's solo run (made automatically, cached).
pub const SOLO_METRICS: &[&str] = &["stp", "antt", "max_slowdown", "jain"];

/// Whether a larger value of metric `name` is better (`None`: neither, such as counts
/// of mechanism events).
pub fn higher_is_better(name: &str) -> Option<bool> {
    match name {
        "ips" | "ipc" | "stp" | "jain" => Some(true),
        "l2_miss_ratio" | "llc_mpki" | "cpu_share_cv" | "antt" | "max_slowdown"
        | "remote_stall_cpki" | "remote_stall_share" => Some(false),
        _ => None,
    }
}

/// The label (with unit) reports show for metric `name`.
pub fn metric_label(name: &str) -> &'static str {
    METRICS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or("?", |(_, _, l)| l)
}

/// The value of metric `name` in `r` (NaN for a metric against solo runs when `r`'s
/// threads have no solo references).
pub fn metric(r: &RunResult, name: &str) -> Option<f64> {
    Some(match name {
        "ips" => r.ips,
        "l2_miss_ratio" => r.l2_miss_ratio,
        "llc_mpki" => r.llc_mpki,
        "cpu_share_cv" => r.cpu_share_cv,
        "ipc" => r.threads.iter().map(|t| t.counters.ipc()).sum(),
        "context_switches" => r.kernel.context_switches as f64,
        "context_switches_per_s" => {
            r.kernel.context_switches as f64 / (r.measured_ms / 1e3).max(1e-12)
        }
        "migrations" => r.kernel.migrations as f64,
        "remote_accesses" => r.totals.remote_accesses as f64,
        "remote_stall_cpki" => {
            1000.0 * r.totals.data_stall_remote_cycles as f64 / r.totals.instructions.max(1) as f64
        }
        "samples_per_ms" => {
            let ms = r
                .timeline
                .last()
                .map_or(r.measured_ms, |p| p.t_ms.max(r.measured_ms));
            r.kernel.address_samples as f64 / ms.max(1e-9)
        }
        "remote_share_of_stalls" => {
            r.totals.data_stall_remote_cycles as f64 / r.totals.mem_stall_cycles.max(1) as f64
        }
        "remote_stall_share" => {
            r.totals.data_stall_remote_cycles as f64 / r.totals.cycles.max(1) as f64
        }
        "bus_utilization" => r.bus_utilization,
        "stp" => r.multiprogram().map_or(f64::NAN, |m| m.stp),
        "antt" => r.multiprogram().map_or(f64::NAN, |m| m.antt),
        "max_slowdown" => r.multiprogram().map_or(f64::NAN, |m| m.max_slowdown),
        "jain" => r.multiprogram().map_or(f64::NAN, |m| m.jain),
        _ => return None,
    })
}

/// The thread still running that began the fewest slices (quanta) in run `r`'s
/// measured window (`None` if none is running).
pub fn fewest_slices(r: &RunResult) -> Option<&ThreadResult> {
    r.threads
        .iter()
        .filter(|t| !t.exited)
        .min_by_key(|t| t.slices)
}
