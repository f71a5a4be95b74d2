//! Test support: a fresh temporary directory that is removed when dropped, for the fake
//! sysfs trees of the unit tests (so that a test run leaves nothing in the temporary
//! directory, whether it passes or fails).

use std::path::{Path, PathBuf};

/// A directory under the system's temporary directory, unique to this process and
/// thread, emptied when made and removed on drop.
pub(crate) struct TempTree(PathBuf);

impl TempTree {
    /// Makes `cachesched-NAME-PID-THREAD` afresh.
    pub(crate) fn new(name: &str) -> TempTree {
        let d = std::env::temp_dir().join(format!(
            "cachesched-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create a temporary test directory");
        TempTree(d)
    }
}

impl std::ops::Deref for TempTree {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempTree {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
