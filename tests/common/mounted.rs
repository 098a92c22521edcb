//! Loop-mounted file systems for the tests of online checks and of the
//! watch: made, mounted, unmounted (and thawed) when dropped, with a
//! seeded workload and cold files to damage under them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{find_tool, have_all, Rng, Scratch};

pub const EXT4: &str =
    "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize";

/// A loop-mounted file system, unmounted when dropped.
pub struct Mounted {
    /// The image file.
    pub img: PathBuf,
    /// Where it is mounted.
    pub mnt: PathBuf,
    /// The loop device.
    pub dev: PathBuf,
}

impl Mounted {
    pub fn new(scratch: &Scratch, name: &str, size_mb: u64) -> Option<Mounted> {
        Mounted::with(scratch, name, size_mb, &["-O", EXT4, "-I", "256"])
    }

    /// A file system made with `mke2fs_opts`, loop-mounted.
    pub fn with(
        scratch: &Scratch,
        name: &str,
        size_mb: u64,
        mke2fs_opts: &[&str],
    ) -> Option<Mounted> {
        let img = scratch.path(&format!("{name}.img"));
        let f = std::fs::File::create(&img).ok()?;
        f.set_len(size_mb << 20).ok()?;
        drop(f);
        let mut args = mke2fs_opts.to_vec();
        args.push(img.to_str()?);
        super::mke2fs(&args);
        let mnt = scratch.path(&format!("{name}.mnt"));
        std::fs::create_dir_all(&mnt).ok()?;
        let out = Command::new(find_tool("losetup")?)
            .args(["--find", "--show"])
            .arg(&img)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let ok = Command::new(find_tool("mount")?)
            .arg(&dev)
            .arg(&mnt)
            .status()
            .ok()?
            .success();
        if !ok {
            let _ = Command::new("losetup").arg("-d").arg(&dev).status();
            return None;
        }
        Some(Mounted { img, mnt, dev })
    }

    pub fn unmount(&self) {
        for _ in 0..50 {
            let ok = Command::new("umount")
                .arg(&self.mnt)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok || !is_mounted(&self.mnt) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Still busy after 5 s (a process that has not yet let go of it
        // on a loaded machine): detached lazily, so that no mount or loop
        // device outlives the test.
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mnt)
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // Never leave it frozen or mounted behind a failed test.
        let _ = Command::new("fsfreeze")
            .args(["--unfreeze"])
            .arg(&self.mnt)
            .stderr(Stdio::null())
            .status();
        if is_mounted(&self.mnt) {
            self.unmount();
        }
    }
}

pub fn is_mounted(mnt: &Path) -> bool {
    let Ok(canon) = std::fs::canonicalize(mnt) else {
        return false;
    };
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == canon.to_str())
}

pub fn can_mount(scratch: &Scratch) -> bool {
    if !have_all(&[
        "mount", "umount", "losetup", "mke2fs", "e2fsck", "debugfs", "fsfreeze",
    ]) {
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: online checks need root");
        return false;
    }
    let ok = Mounted::new(scratch, "probe", 16).is_some();
    if !ok {
        eprintln!("skipping: this machine cannot loop-mount ext4");
        // In CI a machine with root and loop devices must run these.
        assert!(
            !(Path::new("/dev/loop-control").exists()
                && std::env::var_os("EXT4CHK_REQUIRE_ALL").is_some()),
            "EXT4CHK_REQUIRE_ALL is set and this machine has root and loop devices, yet it cannot loop-mount ext4"
        );
    }
    ok
}

/// A seeded workload of the kinds that leave metadata half-changed:
/// create, write, append, fsync, rename, unlink of open files, mkdir and
/// rmdir, hard links; until `stop`.
pub fn workload(root: PathBuf, seed: &str, stop: Arc<AtomicBool>) {
    let mut r = Rng::new(seed);
    let mut open: Vec<std::fs::File> = Vec::new();
    let mut n = 0u64;
    let dir = root.join("w");
    let _ = std::fs::create_dir_all(&dir);
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let a = dir.join(format!("f{}", r.below(64)));
        let b = dir.join(format!("f{}", r.below(64)));
        match r.below(9) {
            0 | 1 => {
                if let Ok(mut f) = std::fs::File::create(&a) {
                    let _ = f.write_all(&vec![n as u8; 1 + r.below(20000) as usize]);
                    if r.below(3) == 0 {
                        let _ = f.sync_all();
                    }
                }
            }
            2 => {
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&a) {
                    let _ = f.write_all(&vec![1u8; 1 + r.below(9000) as usize]);
                }
            }
            3 => {
                let _ = std::fs::rename(&a, &b);
            }
            4 => {
                // Unlinked while open: an orphan until it is closed.
                if let Ok(f) = std::fs::File::open(&a) {
                    let _ = std::fs::remove_file(&a);
                    open.push(f);
                    if open.len() > 8 {
                        open.remove(0);
                    }
                }
            }
            5 => {
                let d = dir.join(format!("d{}", r.below(16)));
                if std::fs::create_dir(&d).is_err() {
                    let _ = std::fs::remove_dir(&d);
                }
            }
            6 => {
                let _ = std::fs::hard_link(&a, dir.join(format!("l{}", r.below(16))));
            }
            7 => {
                let _ = std::fs::remove_file(&a);
            }
            _ => {
                if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&a) {
                    let _ = f.set_len(r.below(30000));
                }
            }
        }
    }
}

/// Forty small files in /cold, written out, with the kernel's inodes and
/// dentries dropped, so damage written under them is read afresh.
pub fn cold_files(m: &Mounted) {
    cold_files_in(m, "cold", "c", 40, 5000);
}

/// `count` files of `len` bytes named `prefix0`.. in `dir` (made if
/// missing) under the mount, written out, and the kernel's caches (its
/// inodes, dentries and the device's pages) dropped.
pub fn cold_files_in(m: &Mounted, dir: &str, prefix: &str, count: usize, len: usize) {
    let d = m.mnt.join(dir);
    std::fs::create_dir_all(&d).expect("dir");
    for i in 0..count {
        std::fs::write(d.join(format!("{prefix}{i}")), vec![b'c'; len]).expect("file");
    }
    Command::new("sync").status().expect("sync");
    std::fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches");
}
