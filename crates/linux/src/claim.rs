//! A daemon's claim on a process, so that two daemons never manage the same one.
//!
//! Two daemons on one process would each record the other's changes as originals, and
//! whichever stops last would put the first one's changes back for good. A claim is a
//! listening Unix socket bound to an abstract address named after the process (its id
//! and start time): the kernel lets one socket hold an address, frees it when the holder
//! exits however it ends (SIGKILL included), and tells whoever connects to it the
//! holder's process and user ids. No file is involved, so there is nothing to leave
//! behind, clean up or plant. Abstract addresses belong to a network namespace: daemons
//! in different network namespaces do not see each other's claims.

use crate::procfs::Pid;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use thiserror::Error;

/// Why a process could not be claimed.
#[derive(Debug, Error)]
pub enum ClaimError {
    /// Another daemon manages it.
    #[error("process {pid} is already managed by another cachesched daemon{}: two daemons on one process would leave changes behind; stop that one first", holder(*by))]
    Held {
        /// The process.
        pid: Pid,
        /// The other daemon's process and user ids, when the kernel said.
        by: Option<(Pid, u32)>,
    },
    /// The socket calls failed.
    #[error("cannot claim process {pid} ({call}: {source})")]
    Os {
        /// The process.
        pid: Pid,
        /// The call.
        call: &'static str,
        /// The error.
        source: io::Error,
    },
}

fn holder(by: Option<(Pid, u32)>) -> String {
    match by {
        Some((pid, uid)) => format!(" (pid {pid}, uid {uid})"),
        None => String::new(),
    }
}

/// A held claim; dropping it releases the process.
#[derive(Debug)]
pub struct Claim {
    _socket: OwnedFd,
}

/// The abstract socket address of process `pid` started at `start` (clock ticks).
fn address(pid: Pid, start: u64) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = format!("cachesched/claim/{pid}/{start}");
    // sun_path[0] stays 0: an abstract address, its name the bytes after it
    for (i, b) in name.bytes().enumerate() {
        a.sun_path[i + 1] = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (a, len as libc::socklen_t)
}

fn socket(pid: Pid) -> Result<OwnedFd, ClaimError> {
    // SAFETY: plain socket call; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(ClaimError::Os {
            pid,
            call: "socket",
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: fd is a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Claims process `pid` (started at `start`, clock ticks after boot, from its `stat`)
/// for this daemon, or says which daemon holds it.
pub fn claim(pid: Pid, start: u64) -> Result<Claim, ClaimError> {
    let s = socket(pid)?;
    let (a, len) = address(pid, start);
    // SAFETY: `a` is a valid sockaddr_un of `len` bytes.
    let r = unsafe {
        libc::bind(
            s.as_raw_fd(),
            &a as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EADDRINUSE) {
            return Err(ClaimError::Held {
                pid,
                by: holder_of(pid, start),
            });
        }
        return Err(ClaimError::Os {
            pid,
            call: "bind",
            source: e,
        });
    }
    // SAFETY: a bound socket.
    if unsafe { libc::listen(s.as_raw_fd(), 4) } != 0 {
        return Err(ClaimError::Os {
            pid,
            call: "listen",
            source: io::Error::last_os_error(),
        });
    }
    Ok(Claim { _socket: s })
}

/// The process and user ids of the daemon holding the claim on `pid`, if it answers.
fn holder_of(pid: Pid, start: u64) -> Option<(Pid, u32)> {
    let s = socket(pid).ok()?;
    let (a, len) = address(pid, start);
    // SAFETY: as in `claim`.
    let r = unsafe {
        libc::connect(
            s.as_raw_fd(),
            &a as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: ucred is plain data and the kernel writes at most its size.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut n = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut n,
        )
    };
    (r == 0).then_some((cred.pid, cred.uid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_claimed_once_and_released_on_drop() {
        // a made-up start time: no real process is claimed by this test
        let (pid, start) = (std::process::id() as Pid, u64::MAX - 7);
        let c = claim(pid, start).unwrap();
        match claim(pid, start) {
            Err(ClaimError::Held { by, .. }) => {
                assert_eq!(by.map(|b| b.0), Some(std::process::id() as Pid));
            }
            other => panic!("second claim: {other:?}"),
        }
        let e = claim(pid, start).unwrap_err().to_string();
        assert!(
            e.contains("already managed by another cachesched daemon (pid"),
            "{e}"
        );
        // another process, or the same id started at another time: free
        let other = claim(pid, start - 1).unwrap();
        drop(c);
        let again = claim(pid, start).unwrap();
        drop((other, again));
    }
}
