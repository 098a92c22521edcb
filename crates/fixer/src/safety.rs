//! Keeping repairs safe: never write to a mounted file system, hold a
//! block device exclusively while writing, and stop at a safe point on
//! SIGINT or SIGTERM.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a device is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mounted {
    /// The mount point.
    pub mount_point: String,
    /// The device the kernel mounted (the loop device for an image file).
    pub source: String,
    /// Whether the file system itself is mounted read-only (so the
    /// kernel writes nothing to it through any of its mounts).
    pub read_only: bool,
}

/// What a repair may do with a device, given where it is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MountPolicy {
    /// Not mounted: repair, holding a block device exclusively.
    Free,
    /// The root file system, mounted read-only (as at boot): repair
    /// without an exclusive open, and ask for a reboot if anything
    /// changed, since the kernel still holds the old metadata.
    ReadOnlyRoot,
    /// Mounted in a way that the kernel may write to it, or somewhere
    /// other than the root: no repair.
    Refuse(Mounted),
}

/// Decides what a repair may do given every mount of the device.
pub fn mount_policy(mounts: &[Mounted]) -> MountPolicy {
    if mounts.is_empty() {
        return MountPolicy::Free;
    }
    if let Some(m) = mounts.iter().find(|m| !m.read_only) {
        return MountPolicy::Refuse(m.clone());
    }
    if mounts.iter().any(|m| m.mount_point == "/") {
        MountPolicy::ReadOnlyRoot
    } else {
        MountPolicy::Refuse(mounts[0].clone())
    }
}

/// The block device numbers (major, minor) through which `path` can be
/// mounted: the device itself, or every loop device backed by the file.
fn candidate_devices(path: &Path) -> io::Result<Vec<(u64, u64)>> {
    let meta = std::fs::metadata(path)?;
    if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        return Ok(vec![(
            nix::sys::stat::major(rdev),
            nix::sys::stat::minor(rdev),
        )]);
    }
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Ok(out);
    };
    for e in entries.flatten() {
        let sys = e.path();
        let Ok(backing) = std::fs::read_to_string(sys.join("loop/backing_file")) else {
            continue;
        };
        let backing = PathBuf::from(backing.trim());
        let same = std::fs::metadata(&backing)
            .is_ok_and(|b| b.dev() == meta.dev() && b.ino() == meta.ino());
        if !same {
            continue;
        }
        if let Ok(dev) = std::fs::read_to_string(sys.join("dev")) {
            if let Some((ma, mi)) = dev.trim().split_once(':') {
                if let (Ok(ma), Ok(mi)) = (ma.parse(), mi.parse()) {
                    out.push((ma, mi));
                }
            }
        }
    }
    Ok(out)
}

/// Every mount of the file system on `path` (a block device or an image
/// file attached to a loop device), from /proc/self/mountinfo.
pub fn mounted(path: &Path) -> io::Result<Vec<Mounted>> {
    let devs = candidate_devices(path)?;
    if devs.is_empty() {
        return Ok(Vec::new());
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(parse_mountinfo(&info, &devs))
}

/// The mounts of any of `devs` in mountinfo text.
pub fn parse_mountinfo(info: &str, devs: &[(u64, u64)]) -> Vec<Mounted> {
    let mut out = Vec::new();
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 5 {
            continue;
        }
        let Some((ma, mi)) = f[2].split_once(':') else {
            continue;
        };
        let (Ok(ma), Ok(mi)) = (ma.parse::<u64>(), mi.parse::<u64>()) else {
            continue;
        };
        if !devs.contains(&(ma, mi)) {
            continue;
        }
        let sep = f.iter().position(|&x| x == "-");
        let source = sep
            .and_then(|i| f.get(i + 2))
            .map_or_else(|| format!("{ma}:{mi}"), |s| s.to_string());
        // The file system's own options follow the source; without them
        // the mount is taken as writable.
        let read_only = sep
            .and_then(|i| f.get(i + 3))
            .is_some_and(|o| o.split(',').any(|x| x == "ro"));
        out.push(Mounted {
            mount_point: unescape(f[4]),
            source,
            read_only,
        });
    }
    out
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Opens a device for writing. With `exclusive`, a block device is opened
/// with `O_EXCL`, which the kernel refuses while the device is mounted or
/// held by another exclusive opener.
pub fn open_for_repair(path: &Path, exclusive: bool) -> io::Result<File> {
    let meta = std::fs::metadata(path)?;
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    if exclusive && meta.file_type().is_block_device() {
        o.custom_flags(libc::O_EXCL);
    }
    o.open(path)
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM set the interrupt flag instead of killing the
/// process, so a repair can stop between commits.
pub fn install_interrupt_handler() -> io::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        unsafe { sigaction(sig, &act) }.map_err(io::Error::from)?;
    }
    Ok(())
}

/// The flag SIGINT and SIGTERM set, for code that polls it.
pub fn interrupt_flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// Whether SIGINT or SIGTERM has arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_mount_by_device_number() {
        let info = "22 1 7:3 / /mnt/my\\040disk rw,relatime shared:1 - ext4 /dev/loop3 rw\n\
                    23 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
        let m = parse_mountinfo(info, &[(7, 3)]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].mount_point, "/mnt/my disk");
        assert_eq!(m[0].source, "/dev/loop3");
        assert!(!m[0].read_only);
        assert!(parse_mountinfo(info, &[(7, 4)]).is_empty());
    }

    fn mount(point: &str, read_only: bool) -> Mounted {
        Mounted {
            mount_point: point.into(),
            source: "/dev/sda1".into(),
            read_only,
        }
    }

    #[test]
    fn only_a_read_only_root_may_be_repaired_while_mounted() {
        // The file system's options decide, not the mount's: a read-only
        // bind of a writable file system is still written by the kernel.
        let info = "23 1 8:1 / / ro,relatime - ext4 /dev/sda1 ro\n\
                    24 1 8:1 / /srv ro,relatime - ext4 /dev/sda1 ro\n\
                    25 1 8:2 / /data ro,relatime - ext4 /dev/sda2 rw,errors=remount-ro\n";
        let root = parse_mountinfo(info, &[(8, 1)]);
        assert_eq!(root.len(), 2);
        assert!(root.iter().all(|m| m.read_only));
        assert_eq!(mount_policy(&root), MountPolicy::ReadOnlyRoot);
        let data = parse_mountinfo(info, &[(8, 2)]);
        assert!(!data[0].read_only);
        assert_eq!(mount_policy(&data), MountPolicy::Refuse(data[0].clone()));

        assert_eq!(mount_policy(&[]), MountPolicy::Free);
        assert_eq!(
            mount_policy(&[mount("/", false)]),
            MountPolicy::Refuse(mount("/", false))
        );
        assert_eq!(
            mount_policy(&[mount("/mnt", true)]),
            MountPolicy::Refuse(mount("/mnt", true))
        );
        assert_eq!(
            mount_policy(&[mount("/", true), mount("/mnt", false)]),
            MountPolicy::Refuse(mount("/mnt", false))
        );
    }
}
