//! The size of the filesystem holding a log directory, as DescribeLogDirs v4 reports it
//! (KIP-827: Kafka's `FileStore.getTotalSpace` / `getUsableSpace`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes of the filesystem and bytes an unprivileged writer may still use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    pub total_bytes: u64,
    pub usable_bytes: u64,
}

/// `None` when the path cannot be asked (gone, or not a C string).
pub fn disk_space(path: &Path) -> Option<DiskSpace> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c_path` is a valid NUL-terminated string and `stats` a writable statvfs that
    // lives across the call; statvfs only writes into it.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) } != 0 {
        return None;
    }
    // The field widths differ between platforms (all u64 on Linux x86_64).
    #[allow(clippy::useless_conversion)]
    let (fragment, blocks, available) = (
        u64::from(stats.f_frsize),
        u64::from(stats.f_blocks),
        u64::from(stats.f_bavail),
    );
    Some(DiskSpace {
        total_bytes: blocks.saturating_mul(fragment),
        usable_bytes: available.saturating_mul(fragment),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_directory_has_a_size_and_a_missing_one_none() {
        let space = disk_space(Path::new("/")).expect("root is a filesystem");
        assert!(space.total_bytes > 0 && space.usable_bytes <= space.total_bytes);
        assert_eq!(disk_space(Path::new("/no/such/dir/runnel")), None);
    }
}
