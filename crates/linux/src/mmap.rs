//! Read-only memory maps of files (trace replay reads traces without copying them
//! through `read(2)`).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// A read-only, populated memory map of a whole file.
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value; sharing &[u8] views of it
// across threads is as safe as sharing any immutable byte slice.
unsafe impl Send for Mapped {}
// SAFETY: as above, only immutable access is ever given out.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps `path` read-only (an empty file maps to an empty slice).
    pub fn open(path: &Path) -> std::io::Result<Mapped> {
        let f = File::open(path)?;
        let len = usize::try_from(f.metadata()?.len())
            .map_err(|_| std::io::Error::other("file too large to map"))?;
        if len == 0 {
            return Ok(Mapped {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        // SAFETY: a fresh private read-only mapping of a file we opened; the kernel
        // validates every argument and we check the result.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                f.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapped { ptr, len })
    }
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr/len describe a live read-only mapping owned by self. (Another
        // process truncating the file could fault on access; traces are our own files.)
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping exactly the region mapped in `open`.
            unsafe {
                libc::munmap(self.ptr, self.len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_file_contents() {
        let p = std::env::temp_dir().join(format!("cachesched-mmap-{}", std::process::id()));
        std::fs::write(&p, b"hello trace").unwrap();
        let m = Mapped::open(&p).unwrap();
        assert_eq!(&m[..], b"hello trace");
        drop(m);
        std::fs::write(&p, b"").unwrap();
        assert!(Mapped::open(&p).unwrap().is_empty());
        std::fs::remove_file(&p).unwrap();
        assert!(Mapped::open(&p).is_err());
    }
}
