//! A small filesystem of its own (a tmpfs mounted on a temporary
//! directory), for tests that fill a disk. Needs root; without it the
//! test is skipped, loudly, unless `SOLIDQ_REQUIRE_TOOLS=1`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::skip;

/// A mounted tmpfs; unmounted when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `megabytes`; `None` (skipped) without root.
    pub fn mount(megabytes: u32) -> Option<Tmpfs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            let message = "mounting a small filesystem needs root";
            assert!(
                std::env::var("SOLIDQ_REQUIRE_TOOLS").is_err(),
                "{message} (SOLIDQ_REQUIRE_TOOLS is set)"
            );
            skip(message);
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("solidq-tmpfs-")
            .tempdir()
            .expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={megabytes}m,mode=0777"))
            .arg("tmpfs")
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mount a tmpfs on {}",
            dir.path().display()
        );
        Some(Tmpfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills what space is left with a file; returns its path (remove it
    /// to give the space back).
    pub fn fill(&self) -> PathBuf {
        let path = self.dir.path().join("filler");
        let mut file = std::fs::File::create(&path).expect("filler");
        let chunk = vec![0xA5u8; 64 * 1024];
        loop {
            if file.write_all(&chunk).is_err() {
                break;
            }
        }
        // The last partial chunk too.
        let small = vec![0xA5u8; 512];
        while file.write_all(&small).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
