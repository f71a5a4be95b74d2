//! Files the laboratory writes: whole or not at all, only where the user asked.
//!
//! Every output goes through [`write_file`]: the text is written to a new file beside
//! the target and renamed over it, so that a reader, a crash or a full disk never leaves
//! a truncated file in place of a complete one, and a symbolic link at the target is
//! replaced, not followed. Names that become file or directory names (a scenario's
//! name, a mix label, a variant) are checked by [`component`] to be single path
//! components, so that no name writes outside its directory.

use crate::error::{invalid, Error, Result, ResultExt};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `text` to `path` atomically, creating parent directories: to a new file in
/// the same directory, then renamed over `path` (a symbolic link there is replaced, not
/// followed); the temporary is removed if anything fails.
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    write_bytes(path, text.as_bytes())
}

/// [`write_file`] for bytes.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(Error::io("cannot create directory", d))?;
            d.to_path_buf()
        }
        None => PathBuf::from("."),
    };
    let (mut f, tmp) = temporary(&dir, path)?;
    // on disk before the rename: a crash leaves the old file or the new, whole
    let res = f
        .write_all(bytes)
        .and_then(|()| f.sync_data())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(Error::io("cannot write", path));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// A new file in `dir` for the contents of `path` (a name no other writer has).
fn temporary(dir: &Path, path: &Path) -> Result<(std::fs::File, PathBuf)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for _ in 0..100 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("cannot write", path)(e)),
        }
    }
    // every name tried was taken
    Err(Error::io("cannot write", path)(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free temporary name beside it",
    )))
}

/// Creates directory `dir` if missing and checks that a file can be written in it, so
/// that a run never ends unable to write its results.
pub fn check_writable_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io_hint(
        "cannot create the output directory",
        dir,
        "; give another --out",
    ))?;
    let (_, tmp) = temporary(dir, &dir.join("probe")).within(|| {
        format!(
            "cannot write in the output directory '{}'; give another --out",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(tmp);
    Ok(())
}

/// Checks that `name` (`what` says what it names, for the error) can be one file or
/// directory name: not empty, no `/`, not `.` or `..`, no NUL, at most 200 bytes.
pub fn component<'a>(name: &'a str, what: &str) -> Result<&'a str> {
    let why = if name.is_empty() {
        Some("it is empty")
    } else if name.contains('/') {
        Some("it contains '/'")
    } else if name == "." || name == ".." {
        Some("it names a directory ('.' or '..')")
    } else if name.contains('\0') {
        Some("it contains a NUL byte")
    } else if name.len() > 200 {
        Some("it is longer than 200 bytes")
    } else {
        None
    };
    match why {
        Some(why) => Err(invalid!(
            "{what} '{}' cannot be a file name: {why}; it names files inside the output directory, so give a plain name",
            name.escape_debug()
        )),
        None => Ok(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_a_link_instead_of_following_it_and_leaves_no_temporary() {
        let d = std::env::temp_dir().join(format!("cachesched-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let target = d.join("report.md");
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        write_file(&target, "report").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "report");
        assert!(!std::fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink());
        // a failed write (the target is a directory) leaves the old state and no temporary
        let dir_target = d.join("sub");
        std::fs::create_dir_all(dir_target.join("x")).unwrap();
        assert!(write_file(&dir_target, "text").is_err());
        let names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn names_are_single_components() {
        for bad in ["", "..", ".", "../../x", "/abs", "a/b", "a\0b"] {
            let e = component(bad, "scenario name").unwrap_err().to_string();
            assert!(e.contains("cannot be a file name"), "{bad:?}: {e}");
        }
        for good in ["fig5-7", "art:6,twolf:6", "l2 768 KB", "...x"] {
            assert_eq!(component(good, "x").unwrap(), good);
        }
    }
}
