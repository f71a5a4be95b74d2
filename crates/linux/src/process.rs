//! This process's signals and children: stop signals for the daemon (SIGINT, SIGTERM
//! and SIGHUP set a flag, remembering which signal came, instead of killing the process,
//! so that the daemon can restore what it changed before it exits and pass the signal
//! on to the command it launched), and reaping the children it launched.

use std::sync::atomic::{AtomicI32, Ordering};

static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // only an atomic store: async-signal-safe
    STOP.store(sig, Ordering::SeqCst);
}

/// Installs the handlers. Returns an error naming the signal if one cannot be installed.
pub fn install_stop_handlers() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The stop signal received so far, if any.
pub fn stop_signal() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Sends `sig` to process `pid` (a vanished process is not an error).
pub fn send(pid: i32, sig: i32) {
    // SAFETY: kill with plain integers.
    unsafe { libc::kill(pid, sig) };
}

/// Whether a process `pid` exists (another user's process counts: `kill` fails with
/// EPERM for it, not ESRCH). A pid at or below 0 is never a process here.
pub fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// SIGKILL.
pub const SIGKILL: i32 = libc::SIGKILL;

/// SIGTERM's number, for [`send`].
pub const SIGTERM: i32 = libc::SIGTERM;

/// The calling thread's id.
pub fn current_tid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Reaps every exited child without blocking; returns `pid`'s wait status if it was
/// among them.
pub fn reap(pid: i32) -> Option<i32> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid on any child, non-blocking, into a local.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            return found;
        }
        if r == pid {
            found = Some(status);
        }
    }
}

/// The shell's exit code for a wait status: the exit status, or 128+N for signal N.
pub fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

/// What [`spawn_with_fd3_pipe`] asks the pipe to hold: 1 MiB, the kernel's default
/// `/proc/sys/fs/pipe-max-size`, so a writer of small chunks can run ahead of a reader
/// that reads in batches.
pub const FD3_PIPE_BYTES: i32 = 1 << 20;

/// Spawns `cmd` with a pipe on its file descriptor 3 and returns the child with the
/// pipe's read end: a side channel that the program's own stdout and stderr cannot
/// mix into (valgrind's `--log-fd=3`). The pipe is enlarged to [`FD3_PIPE_BYTES`] where
/// the system allows it (it keeps the default 64 KiB otherwise).
pub fn spawn_with_fd3_pipe(
    cmd: &mut std::process::Command,
) -> std::io::Result<(std::process::Child, std::fs::File)> {
    use std::os::fd::FromRawFd;
    use std::os::unix::process::CommandExt;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here alone.
    let (read, write) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    // SAFETY: F_SETPIPE_SZ on a descriptor just created; a refusal (a lower
    // pipe-max-size) leaves the pipe as it was, which works, only with more wake-ups
    let _ = unsafe { libc::fcntl(fds[0], libc::F_SETPIPE_SZ, FD3_PIPE_BYTES) };
    let w = fds[1];
    // SAFETY: between fork and exec only dup2 runs, which is async-signal-safe; the
    // duplicate on 3 has no close-on-exec flag, so the program inherits it.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(w, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    // the parent's copy of the write end must close, or reading never sees the end
    drop(write);
    Ok((child?, read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_signal_sets_the_flag_instead_of_killing() {
        install_stop_handlers().unwrap();
        assert_eq!(stop_signal(), None);
        // SAFETY: raise with a handled signal.
        unsafe { libc::raise(libc::SIGHUP) };
        assert_eq!(stop_signal(), Some(libc::SIGHUP));
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        // reaped with waitpid below, which clippy cannot see
        #[allow(clippy::zombie_processes)]
        let run = |script: &str| {
            let c = std::process::Command::new("sh")
                .args(["-c", script])
                .spawn()
                .unwrap();
            // (not `reap`: it would also reap other tests' children)
            let mut st = 0;
            assert_eq!(
                unsafe { libc::waitpid(c.id() as i32, &mut st, 0) },
                c.id() as i32
            );
            exit_code(st)
        };
        assert_eq!(run("exit 3"), 3);
        assert_eq!(run("kill -TERM $$"), 128 + libc::SIGTERM);
    }
}
