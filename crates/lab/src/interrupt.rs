//! The interrupt flag every long run of the laboratory polls: set by Ctrl-C, SIGTERM
//! or SIGHUP (ctrlc's `termination` feature), a run stops cleanly at its next check.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The process's flag, set on Ctrl-C / SIGTERM so long runs stop cleanly: one flag for
/// every caller (a handler can be installed only once, so a flag made per call would
/// never be set after the first), which stays set, so that every later batch of runs
/// stops too.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        // installing fails only if another handler exists (none does in this binary)
        let _ = ctrlc::set_handler(move || f.store(true, Ordering::SeqCst));
        flag
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every caller gets the one flag the Ctrl-C handler sets: fails if a later batch
    /// of runs (the second file or mix of a reproduction) gets a flag of its own that
    /// no handler would ever set, as it once did.
    #[test]
    fn every_caller_shares_the_interrupt_flag() {
        let (a, b) = (interrupt_flag(), interrupt_flag());
        assert!(Arc::ptr_eq(&a, &b));
    }
}
