//! The daemon never changes a thread that merely took a managed thread's id (issue 77,
//! item 6). A managed process ends and, before the daemon's next scan, a new process
//! that nobody manages gets the same id (through `ns_last_pid`, so root only); the
//! policy's next directive for the old thread, and the restore at the stop, must leave
//! the new process alone.

use cachesched_core::{Ctx, Nanos, Policy};
use cachesched_linux::daemon::Target;
use cachesched_linux::sched::{nice, set_nice};
use cachesched_linux::{read_host_topology, Daemon, DaemonConfig};
use std::process::Command;
use std::time::Duration;

/// Gives every thread nice 5 at every tick (10 ms).
struct NiceEveryTick;

impl Policy for NiceEveryTick {
    fn name(&self) -> &str {
        "nice-every-tick"
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        ctx.set_tick_period(Some(Nanos::from_ms_f64(10.0)));
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        for t in ctx.threads() {
            ctx.set_nice(t, Some(5));
        }
    }
}

/// Fails if the daemon sets the new process's nice value (a directive applied by id
/// alone), or restores it at the stop (a restore by id alone: the new process is given
/// nice 5 itself, the value the daemon had set, so only the identity check saves it).
#[test]
fn a_thread_that_took_a_managed_id_is_never_changed() {
    if std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/kernel/ns_last_pid")
        .is_err()
    {
        eprintln!("cannot write ns_last_pid (not root); skipped");
        return;
    }
    for _ in 0..20 {
        let mut old = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = old.id() as i32;
        let orig = nice(pid).unwrap();
        let config = DaemonConfig {
            scan_ms: 60_000.0,
            stats_counters: false,
            ..DaemonConfig::default()
        };
        let target = Target::Processes {
            pids: vec![pid],
            children: false,
        };
        let mut d = Daemon::start(
            read_host_topology().unwrap(),
            Box::new(NiceEveryTick),
            target,
            config,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        d.poll().unwrap();
        assert_eq!(
            nice(pid).unwrap(),
            5,
            "the policy reaches the managed thread"
        );
        // the managed process ends; a new one takes its id before the daemon scans
        old.kill().unwrap();
        old.wait().unwrap();
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let mut new = Command::new("sleep").arg("30").spawn().unwrap();
        if new.id() as i32 != pid {
            // another process took the id first: try again
            new.kill().unwrap();
            new.wait().unwrap();
            drop(d);
            continue;
        }
        std::thread::sleep(Duration::from_millis(20));
        d.poll().unwrap();
        assert_eq!(nice(pid).unwrap(), orig, "a tick changed the new process");
        // the new process sets the value the daemon had set; the stop must not undo it
        set_nice(pid, 5).unwrap();
        let rep = d.finish();
        assert!(rep.failed.is_empty(), "{:?}", rep.failed);
        assert_eq!(nice(pid).unwrap(), 5, "the stop restored the new process");
        new.kill().unwrap();
        new.wait().unwrap();
        return;
    }
    panic!("the id was never reused in 20 tries");
}
