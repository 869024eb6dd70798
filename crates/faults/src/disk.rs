//! Small filesystems for the disk nemesis: each node's data dir on its own size-limited tmpfs
//! (mounted by the harness, as root, and unmounted at the end), filled to the last byte by a
//! filler file while the fault lasts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

pub fn mount_tmpfs(dir: &Path, size_mb: u64) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
        .arg(dir)
        .status()
        .context("run mount (the disk nemesis needs root)")?;
    if !status.success() {
        bail!(
            "mount tmpfs on {} failed (the disk nemesis needs root)",
            dir.display()
        );
    }
    Ok(())
}

pub fn unmount(dir: &Path) {
    let _ = Command::new("umount").arg("-l").arg(dir).status();
}

/// Unmounts a node's tmpfs and leaves a copy of its files in the same directory: a failing
/// run's data dirs are the evidence (the batches' producer ids, epochs and sequences), and
/// the run's verdict decides later whether they stay (`--keep`, or a failure).
pub fn unmount_keeping(dir: &Path) {
    let saved = dir.with_extension("saved");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(&saved)
        .status()
        .is_ok_and(|s| s.success());
    unmount(dir);
    if copied && std::fs::remove_dir(dir).is_ok() {
        let _ = std::fs::rename(&saved, dir);
    }
}

fn filler(dir: &Path) -> PathBuf {
    dir.join("faults-filler")
}

/// Writes zeros until the filesystem is full (ENOSPC); returns the bytes written.
pub fn fill(dir: &Path) -> u64 {
    let Ok(mut file) = std::fs::File::create(filler(dir)) else {
        return 0;
    };
    let chunk = vec![0u8; 256 * 1024];
    let mut written = 0u64;
    loop {
        match file.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    // The last partial chunks, so not even a small batch fits.
    let small = [0u8; 512];
    while let Ok(n) = file.write(&small) {
        if n == 0 {
            break;
        }
        written += n as u64;
    }
    written
}

pub fn free(dir: &Path) {
    let _ = std::fs::remove_file(filler(dir));
}
