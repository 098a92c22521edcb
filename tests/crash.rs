//! Power cuts made by the real kernel, then the boot-time check.
//!
//! Each case makes a file system, loop-mounts it, runs a seeded workload
//! (create, append, fsync, rename, unlink, files held open after unlink,
//! hard links, symlinks, xattrs, directories with default ACLs, rmdir),
//! cuts the power as xfstests does (`FS_IOC_SHUTDOWN` with the no-log-
//! flush flag on the mount point) and unmounts. Then, on copies of the
//! image:
//!
//! * `fsck.ext4 -p` (ext4chk under that name) against `e2fsck -p`: the
//!   same exit code, and wherever e2fsck's preen leaves a file system the
//!   real `e2fsck -fn` calls clean, ext4chk's does too. Where e2fsck 1.47
//!   cannot replay the journal at all (its fast-commit replay fails on
//!   some logs the kernel writes), the kernel is the judge instead: a
//!   mount and unmount replays the log, and ext4chk's preen must end clean
//!   with the same inode and block counts.
//! * `ext4chk -n` against `e2fsck -fn`: the same verdict.
//! * `ext4chk -y` against `e2fsck -fy`: clean afterwards, and every file
//!   e2fsck keeps (path, size, content) kept too.
//!
//! It needs root, loop devices and the ext4 module, as the kernel does
//! the writing. Without them it skips with one line; with
//! `EXT4CHK_REQUIRE_ALL` set (as `.ci/run` does), a machine that has root
//! and loop devices but cannot run the cases fails the test.

mod common;

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{code, find_tool, have_all, par_map, run_as, tool, Rng, Scratch};

/// One set of mke2fs options to cut the power on.
struct Features {
    name: &'static str,
    args: &'static [&'static str],
}

const EXT4: &str = "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,64bit,flex_bg,\
                    sparse_super,large_file,huge_file,dir_nlink,extra_isize,metadata_csum";

/// The feature sets of the boot-after-a-crash cases.
const SETS: &[Features] = &[
    Features {
        name: "ext4",
        args: &["-I", "256", "-O", EXT4, "-b", "4096", "-g", "8192"],
    },
    Features {
        name: "ext4-1k",
        args: &["-I", "256", "-O", EXT4, "-b", "1024"],
    },
    Features {
        name: "uninit_bg",
        args: &[
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,sparse_super,\
             large_file,huge_file,dir_nlink,extra_isize,uninit_bg",
            "-b",
            "4096",
            "-g",
            "8192",
        ],
    },
    Features {
        name: "no64-noflex",
        args: &[
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,sparse_super,large_file,\
             huge_file,dir_nlink,extra_isize,metadata_csum",
            "-b",
            "1024",
        ],
    },
    Features {
        name: "inline_data",
        args: &[
            "-I",
            "256",
            "-O",
            EXT4,
            "-O",
            "inline_data",
            "-b",
            "4096",
            "-g",
            "8192",
        ],
    },
    Features {
        name: "fast_commit",
        args: &[
            "-I",
            "256",
            "-O",
            EXT4,
            "-O",
            "fast_commit",
            "-b",
            "4096",
            "-g",
            "8192",
        ],
    },
    Features {
        name: "orphan_file",
        args: &[
            "-I",
            "256",
            "-O",
            EXT4,
            "-O",
            "orphan_file",
            "-b",
            "4096",
            "-g",
            "8192",
        ],
    },
    Features {
        name: "ext3",
        args: &[
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,sparse_super,large_file",
            "-b",
            "1024",
        ],
    },
];

/// Seeds per feature set.
const SEEDS: u64 = 4;

/// `FS_IOC_SHUTDOWN`, `_IOR('X', 125, __u32)`.
const FS_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587d;
/// Stop at once, without flushing the log (`EXT4_GOING_FLAGS_NOLOGFLUSH`).
const GOING_NOLOGFLUSH: u32 = 2;

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL in path")
}

fn setxattr(p: &Path, name: &str, value: &[u8]) {
    let n = CString::new(name).expect("name");
    // SAFETY: both strings are NUL-terminated and the value outlives the
    // call. A failure (no space, say) only changes the workload.
    unsafe {
        libc::setxattr(
            cstr(p).as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        );
    }
}

/// A POSIX ACL in the kernel's xattr form (version 2): the owner, a named
/// user, the group, the mask and others. The named user keeps it from
/// folding into the mode bits, so every file made beneath a directory
/// with it as its default gets an ACL of its own.
fn acl() -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 7u16, u32::MAX),
        (0x02, 4, 1000),
        (0x04, 5, u32::MAX),
        (0x10, 5, u32::MAX),
        (0x20, 5, u32::MAX),
    ] {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

fn bytes(rng: &mut Rng, n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(n as usize);
    while (v.len() as u64) < n {
        v.extend_from_slice(&rng.next().to_le_bytes());
    }
    v.truncate(n as usize);
    v
}

/// A file size: mostly small, some spanning many blocks (and so index
/// blocks or indirect blocks).
fn size(rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0 => 1 + rng.below(3 << 20),
        1..=3 => 1 + rng.below(64 << 10),
        _ => 1 + rng.below(6000),
    }
}

/// Runs the seeded workload on the mounted file system at `mnt`, then
/// cuts the power. Files held open stay open until after the cut, so
/// that the unlinked ones are orphans on disk.
fn workload(mnt: &Path, seed: &str) {
    use std::io::Write;
    let mut rng = Rng::new(seed);
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut held: Vec<std::fs::File> = Vec::new();
    for d in 0..6 {
        let p = mnt.join(format!("d{d}"));
        std::fs::create_dir_all(&p).expect("mkdir");
        if d % 2 == 0 {
            setxattr(&p, "system.posix_acl_default", &acl());
        }
        dirs.push(p);
    }
    let ops = 150 + rng.below(250);
    // The last sync before the cut: what follows it is what the log may
    // or may not hold.
    let sync_at = rng.below(ops);
    let big = bytes(&mut rng, 200);
    for i in 0..ops {
        if i == sync_at {
            // SAFETY: sync takes no arguments.
            unsafe { libc::sync() };
        }
        let dir = dirs[rng.below(dirs.len() as u64) as usize].clone();
        let p = dir.join(format!("f{i}"));
        let pick = |rng: &mut Rng, files: &Vec<PathBuf>| {
            (!files.is_empty()).then(|| files[rng.below(files.len() as u64) as usize].clone())
        };
        match rng.below(20) {
            0..=6 => {
                let n = size(&mut rng);
                if let Ok(mut f) = std::fs::File::create(&p) {
                    let _ = f.write_all(&bytes(&mut rng, n));
                    if rng.below(3) == 0 {
                        let _ = f.sync_all();
                    }
                }
                if rng.below(3) == 0 {
                    setxattr(&p, "user.tag", &big);
                }
                files.push(p);
            }
            7..=8 => {
                if let Some(q) = pick(&mut rng, &files) {
                    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&q) {
                        let n = size(&mut rng);
                        let _ = f.write_all(&bytes(&mut rng, n));
                        if rng.below(2) == 0 {
                            let _ = f.sync_data();
                        }
                    }
                }
            }
            9 => {
                if let Some(q) = pick(&mut rng, &files) {
                    if std::fs::rename(&q, &p).is_ok() {
                        files.push(p);
                    }
                }
            }
            10..=11 => {
                if let Some(q) = pick(&mut rng, &files) {
                    let _ = std::fs::remove_file(&q);
                }
            }
            12..=14 => {
                // Written, maybe given xattrs, unlinked while open: an
                // orphan when the power goes.
                if let Ok(mut f) = std::fs::File::create(&p) {
                    let n = size(&mut rng);
                    let _ = f.write_all(&bytes(&mut rng, n));
                    if rng.below(2) == 0 {
                        setxattr(&p, "user.tag", &big);
                    }
                    if rng.below(3) == 0 {
                        let _ = f.sync_all();
                    }
                    let _ = std::fs::remove_file(&p);
                    held.push(f);
                }
            }
            15 => {
                if let Some(q) = pick(&mut rng, &files) {
                    let l = dir.join(format!("l{i}"));
                    if std::fs::hard_link(&q, &l).is_ok() {
                        files.push(l);
                    }
                }
            }
            16 => {
                let target = if rng.below(2) == 0 {
                    "short".to_string()
                } else {
                    "x/".repeat(60)
                };
                let _ = std::os::unix::fs::symlink(target, dir.join(format!("s{i}")));
            }
            17 => {
                if let Some(q) = pick(&mut rng, &files) {
                    let n = 16 + rng.below(400);
                    let v = bytes(&mut rng, n);
                    setxattr(&q, &format!("user.v{}", rng.below(4)), &v);
                }
            }
            18 => {
                let d = dir.join(format!("sub{i}"));
                if std::fs::create_dir(&d).is_ok() {
                    let f = d.join("inner");
                    let _ = std::fs::write(&f, bytes(&mut rng, 100));
                    if rng.below(2) == 0 {
                        let _ = std::fs::remove_file(&f);
                        let _ = std::fs::remove_dir(&d);
                    } else {
                        files.push(f);
                    }
                }
            }
            _ => {
                // Shrunk while held open.
                if let Some(q) = pick(&mut rng, &files) {
                    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&q) {
                        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                        let _ = f.set_len(len / 2);
                        held.push(f);
                    }
                }
            }
        }
    }
    let m = std::fs::File::open(mnt).expect("open the mount point");
    let flag = GOING_NOLOGFLUSH;
    // SAFETY: the ioctl reads one u32 through the pointer, which lives
    // across the call.
    let rc = unsafe { libc::ioctl(m.as_raw_fd(), FS_IOC_SHUTDOWN, &flag as *const u32) };
    assert_eq!(
        rc,
        0,
        "FS_IOC_SHUTDOWN: {}",
        std::io::Error::last_os_error()
    );
    drop(held);
}

/// Makes a crash image: mke2fs, mount, the workload, the cut, umount.
/// `None` when the kernel refuses the mount (a feature it lacks).
fn make_crash_image(img: &Path, mnt: &Path, set: &Features, seed: &str) -> Option<()> {
    let _ = std::fs::remove_file(img);
    let f = std::fs::File::create(img).expect("image");
    f.set_len(128 << 20).expect("size the image");
    drop(f);
    let mut args: Vec<&str> = set.args.to_vec();
    args.push(img.to_str().expect("path"));
    common::mke2fs(&args);
    std::fs::create_dir_all(mnt).expect("mount point");
    let out = Command::new(find_tool("mount").expect("mount"))
        .args(["-t", "ext4", "-o", "loop"])
        .arg(img)
        .arg(mnt)
        .output()
        .expect("mount runs");
    if !out.status.success() {
        eprintln!(
            "{}: the kernel does not mount it: {}",
            set.name,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    workload(mnt, seed);
    // A child of another test thread may hold a copy of a descriptor for
    // a moment (between its fork and exec): the unmount is tried again.
    let mut last = String::new();
    for _ in 0..100 {
        let out = Command::new(find_tool("umount").expect("umount"))
            .arg(mnt)
            .output()
            .expect("umount runs");
        if out.status.success() {
            return Some(());
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("umount {}: {last}", mnt.display());
}

fn e2fsck(args: &[&str], img: &Path) -> (i32, String) {
    let mut all = args.to_vec();
    all.push(img.to_str().expect("path"));
    let out = tool("e2fsck", &all);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (code(&out), text)
}

fn ext4chk_as_fsck(args: &[&str], img: &Path) -> (i32, String) {
    let mut all = args.to_vec();
    all.push(img.to_str().expect("path"));
    let out = run_as("fsck.ext4", &all);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (code(&out), text)
}

/// Whether e2fsck's own journal replay failed (its output says so): it
/// then checks a file system the kernel would never leave.
fn replay_failed(e2fsck_out: &str) -> bool {
    e2fsck_out.contains("while recovering journal")
        || e2fsck_out.contains("while trying to re-open")
        || e2fsck_out.contains("while recovering the ext3 journal")
}

/// Whether e2fsck 1.47.0 left the orphan file's blocks dirty after
/// releasing the inodes they list, found them in its own passes and
/// exited 1 for that alone. Releases since 1.47.2 empty each block as
/// they go (e2fsprogs commit db87cf4c, "e2fsck: clear the orphan_file
/// while processing it"), exit 0, and so does ext4chk.
fn orphan_file_left_dirty(e2fsck_out: &str) -> bool {
    let fixes: Vec<&str> = e2fsck_out
        .lines()
        .filter(|l| l.contains("FIXED") || l.contains("CLEARED") || l.contains("Clear?"))
        .collect();
    e2fsck_out.contains("Clearing orphaned inode")
        && e2fsck_out.contains(") block ")
        && e2fsck_out.contains("is not clean.")
        && fixes.iter().all(|l| l.trim() == "CLEARED.")
}

/// Files and blocks in use, from `e2fsck -fn`'s last line.
fn counts(fn_out: &str) -> Option<(u64, u64)> {
    let line = fn_out.lines().rev().find(|l| l.contains(" files ("))?;
    let (u, _, _, b, _) = common::summary_counts(line)?;
    Some((u, b))
}

/// What one crash image showed; `problems` is empty when ext4chk did
/// as it should.
struct Case {
    name: String,
    preen: (i32, i32),
    replay_failed: bool,
    files_theirs: usize,
    files_extra: usize,
    problems: Vec<String>,
}

fn kernel_replay(img: &Path, mnt: &Path) -> bool {
    let ok = Command::new(find_tool("mount").expect("mount"))
        .args(["-t", "ext4", "-o", "loop"])
        .arg(img)
        .arg(mnt)
        .output()
        .is_ok_and(|o| o.status.success());
    ok && Command::new(find_tool("umount").expect("umount"))
        .arg(mnt)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn judge(set: &Features, seed: u64, scratch: &Scratch) -> Option<Case> {
    let name = format!("{}-{seed}", set.name);
    let img = scratch.path(&format!("{name}.img"));
    let mnt = scratch.path(&format!("{name}.mnt"));
    make_crash_image(&img, &mnt, set, &format!("crash-{name}"))?;
    let copy = |tag: &str| {
        let p = scratch.path(&format!("{name}.{tag}.img"));
        std::fs::copy(&img, &p).expect("copy the image");
        p
    };
    let mut problems = Vec::new();

    // The boot: preen on both sides.
    let (a, b) = (copy("p-e2fsck"), copy("p-ours"));
    let (pa, pa_out) = e2fsck(&["-p"], &a);
    let (pb, pb_out) = ext4chk_as_fsck(&["-p"], &b);
    let (fa, _) = e2fsck(&["-fn"], &a);
    let (fb, fb_out) = e2fsck(&["-fn"], &b);
    let failed = replay_failed(&pa_out);
    // Where e2fsck cannot replay the log, the kernel's replay (a mount
    // and an unmount) is what a repair must match.
    let kernel = failed
        .then(|| copy("kernel"))
        .filter(|k| kernel_replay(k, &mnt) && e2fsck(&["-fn"], k).0 == 0);
    if let Some(k) = &kernel {
        let (_, fk_out) = e2fsck(&["-fn"], k);
        if fb != 0 {
            problems.push(format!(
                "after fsck.ext4 -p (exit {pb}) e2fsck -fn exits {fb}, after the kernel's replay 0:\n{pb_out}\n{fb_out}"
            ));
        } else if pb > 1 {
            problems.push(format!("fsck.ext4 -p exits {pb}:\n{pb_out}"));
        } else if counts(&fb_out) != counts(&fk_out) {
            problems.push(format!(
                "files and blocks in use after fsck.ext4 -p {:?}, after the kernel's replay {:?}",
                counts(&fb_out),
                counts(&fk_out)
            ));
        }
    } else if !failed {
        let want = if orphan_file_left_dirty(&pa_out) {
            0
        } else {
            pa
        };
        if pb != want {
            problems.push(format!(
                "fsck.ext4 -p exits {pb}, e2fsck -p {pa}\n-- e2fsck:\n{pa_out}\n-- ext4chk:\n{pb_out}"
            ));
        }
        if fa == 0 && fb != 0 {
            problems.push(format!(
                "after fsck.ext4 -p, e2fsck -fn exits {fb} (0 after e2fsck -p):\n{pb_out}\n{fb_out}"
            ));
        }
    }
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);

    // The read-only check of the image as the cut left it.
    let (nfn, _) = e2fsck(&["-fn"], &img);
    let ours = common::run(&["-n", img.to_str().expect("path")]);
    let n_ours = code(&ours);
    if (nfn == 0) != (n_ours == 0) {
        problems.push(format!(
            "ext4chk -n exits {n_ours}, e2fsck -fn {nfn}:\n{}",
            String::from_utf8_lossy(&ours.stdout)
        ));
    }

    // The full repair, and the files it keeps: those e2fsck's repair
    // keeps, or where e2fsck cannot replay the log, those the kernel's
    // replay leaves.
    let (a, b) = (copy("y-e2fsck"), copy("y-ours"));
    let (ya, _) = e2fsck(&["-fy"], &a);
    let yb_out = common::run(&["-y", b.to_str().expect("path")]);
    let yb = code(&yb_out);
    let (fb, fb_out) = e2fsck(&["-fn"], &b);
    if fb != 0 {
        problems.push(format!(
            "after ext4chk -y (exit {yb}) e2fsck -fn exits {fb}:\n{}\n{fb_out}",
            String::from_utf8_lossy(&yb_out.stdout)
        ));
    }
    if yb != ya && !failed {
        problems.push(format!("ext4chk -y exits {yb}, e2fsck -fy {ya}"));
    }
    let reference = kernel.as_ref().unwrap_or(&a);
    let t = scratch.path(&format!("{name}.trees"));
    let (mut files_theirs, mut files_extra) = (0, 0);
    let judge = if kernel.is_some() {
        "the kernel's replay"
    } else {
        "e2fsck -fy"
    };
    match common::files_lost(reference, &b, &t) {
        Some((lost, extra)) => {
            files_theirs = common::file_tree(reference, &t).map_or(0, |x| x.len());
            files_extra = extra;
            for p in lost {
                problems.push(format!("{judge} keeps {p}, ext4chk -y does not"));
            }
        }
        None => problems.push("debugfs could not list the files".into()),
    }
    for p in [&a, &b, &img].into_iter().chain(kernel.as_ref()) {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_dir_all(&t);
    Some(Case {
        name,
        preen: (pa, pb),
        replay_failed: kernel.is_some(),
        files_theirs,
        files_extra,
        problems,
    })
}

/// Whether this machine can loop-mount ext4 (root, loop devices, the
/// module); says why not when it cannot.
fn can_mount(scratch: &Scratch) -> bool {
    if !have_all(&["mount", "umount", "losetup", "mke2fs", "e2fsck", "debugfs"]) {
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: the crash cases need root to mount file systems");
        return false;
    }
    let img = scratch.path("probe.img");
    let f = std::fs::File::create(&img).expect("probe image");
    f.set_len(16 << 20).expect("size");
    drop(f);
    common::mke2fs(&["-O", EXT4, img.to_str().expect("path")]);
    let mnt = scratch.path("probe.mnt");
    std::fs::create_dir_all(&mnt).expect("mount point");
    if !kernel_replay(&img, &mnt) {
        eprintln!("skipping: this machine cannot loop-mount ext4");
        return false;
    }
    true
}

#[test]
fn the_boot_after_a_power_cut_leaves_what_e2fsck_leaves() {
    let scratch = Scratch::new("crash");
    if !can_mount(&scratch) {
        // In CI a machine that has what the cases need (root and loop
        // devices) must run them: a mount that fails there is a failure.
        // SAFETY: geteuid has no preconditions.
        let capable = unsafe { libc::geteuid() } == 0 && Path::new("/dev/loop-control").exists();
        assert!(
            !(capable && std::env::var_os("EXT4CHK_REQUIRE_ALL").is_some()),
            "EXT4CHK_REQUIRE_ALL is set and this machine has root and loop devices, yet the crash cases cannot run"
        );
        return;
    }
    let cases: Vec<(usize, u64)> = (0..SETS.len())
        .flat_map(|s| (0..SEEDS).map(move |k| (s, k)))
        .collect();
    let results = par_map(&cases, |&(s, k)| judge(&SETS[s], k, &scratch));
    let mut ran = 0;
    let mut failures = Vec::new();
    for c in results.into_iter().flatten() {
        ran += 1;
        eprintln!(
            "{}: preen exits e2fsck {} / ext4chk {}{}; e2fsck -fy keeps {} files, ext4chk -y {} more",
            c.name,
            c.preen.0,
            c.preen.1,
            if c.replay_failed {
                " (e2fsck's replay failed; judged against the kernel's)"
            } else {
                ""
            },
            c.files_theirs,
            c.files_extra
        );
        for p in &c.problems {
            failures.push(format!("{}: {p}", c.name));
        }
    }
    assert!(
        ran >= 30,
        "only {ran} crash images could be made (the kernel refused the rest)"
    );
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// A directory that once had more than 65,000 subdirectories keeps the
/// kernel's overflow link count (1) after most are removed: a repair
/// sets the exact count back, as `e2fsck -fy` does ("ref count set to
/// overflow but could be exact value"), and a read-only check, as
/// `e2fsck -fn`, does not call it an error.
#[test]
fn a_directory_link_count_left_at_overflow_gets_its_exact_value() {
    let scratch = Scratch::new("nlink");
    if !can_mount(&scratch) {
        return;
    }
    let img = scratch.path("n.img");
    let f = std::fs::File::create(&img).expect("image");
    f.set_len(512 << 20).expect("size");
    drop(f);
    let p = img.to_str().expect("path");
    common::mke2fs(&["-I", "256", "-N", "80000", "-O", EXT4, "-b", "4096", p]);
    let mnt = scratch.path("mnt");
    std::fs::create_dir_all(&mnt).expect("mount point");
    let out = Command::new(find_tool("mount").expect("mount"))
        .args(["-t", "ext4", "-o", "loop", p])
        .arg(&mnt)
        .output()
        .expect("mount runs");
    assert!(
        out.status.success(),
        "mount: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let big = mnt.join("big");
    std::fs::create_dir(&big).expect("mkdir");
    for i in 0..65_010 {
        std::fs::create_dir(big.join(i.to_string())).expect("mkdir");
    }
    for i in 100..65_010 {
        std::fs::remove_dir(big.join(i.to_string())).expect("rmdir");
    }
    let out = Command::new(find_tool("umount").expect("umount"))
        .arg(&mnt)
        .output()
        .expect("umount runs");
    assert!(
        out.status.success(),
        "umount: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(e2fsck(&["-fn"], &img).0, 0);
    assert_eq!(code(&common::run(&["-n", p])), 0);
    let theirs = scratch.path("theirs.img");
    std::fs::copy(&img, &theirs).expect("copy");
    let (ya, ya_out) = e2fsck(&["-fy"], &theirs);
    assert!(ya_out.contains("could be exact value 102"), "{ya_out}");
    let out = common::run(&["-y", p]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), ya, "{text}");
    assert!(text.contains("dir-link-count-overflow"), "{text}");
    assert_eq!(e2fsck(&["-fn"], &img).0, 0);
    let stat = tool("debugfs", &["-R", "stat /big", p]);
    assert!(
        String::from_utf8_lossy(&stat.stdout).contains("Links: 102"),
        "{}",
        String::from_utf8_lossy(&stat.stdout)
    );
}

/// The fast-commit feature sets of the name-change workload.
const FC_SETS: &[Features] = &[
    Features {
        name: "fc-metadata_csum-4k",
        args: &["-I", "256", "-O", EXT4, "-O", "fast_commit", "-b", "4096"],
    },
    Features {
        name: "fc-nocsum-4k",
        args: &[
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,sparse_super,\
             large_file,huge_file,dir_nlink,extra_isize,fast_commit",
            "-b",
            "4096",
        ],
    },
    Features {
        name: "fc-metadata_csum-1k",
        args: &["-I", "256", "-O", EXT4, "-O", "fast_commit", "-b", "1024"],
    },
];

/// Seeds per fast-commit feature set.
const FC_SEEDS: u64 = 6;

/// A workload of name changes, which fast commits log as names and
/// inodes (never as directory blocks): files created, written and
/// fsynced (each fsync a fast commit), renamed across directories,
/// unlinked, hard-linked; directories made and removed; a directory big
/// enough to be indexed. Then the power is cut.
fn name_workload(mnt: &Path, seed: &str) {
    use std::io::Write;
    let mut rng = Rng::new(seed);
    let mut dirs: Vec<PathBuf> = (0..8).map(|d| mnt.join(format!("d{d}"))).collect();
    let big = mnt.join("big");
    dirs.push(big.clone());
    for d in &dirs {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    for i in 0..300 {
        std::fs::write(big.join(format!("pre-{i:04}-{}", "x".repeat(40))), b"p").expect("write");
    }
    // SAFETY: sync takes no arguments.
    unsafe { libc::sync() };
    let fsync = |p: &Path| {
        if let Ok(f) = std::fs::File::open(p) {
            let _ = f.sync_all();
        }
    };
    let mut files: Vec<PathBuf> = Vec::new();
    let ops = 200 + rng.below(300);
    let sync_at = rng.below(ops);
    for i in 0..ops {
        if i == sync_at {
            // SAFETY: sync takes no arguments.
            unsafe { libc::sync() };
        }
        let d = dirs[rng.below(dirs.len() as u64) as usize].clone();
        let pick = |rng: &mut Rng, v: &Vec<PathBuf>| {
            (!v.is_empty()).then(|| v[rng.below(v.len() as u64) as usize].clone())
        };
        match rng.below(20) {
            0..=6 => {
                let p = d.join(format!("f{i}-{}", "n".repeat(rng.below(30) as usize)));
                let n = [10u64, 3000, 20_000, 200_000][rng.below(4) as usize];
                if let Ok(mut f) = std::fs::File::create(&p) {
                    let _ = f.write_all(&bytes(&mut rng, n));
                    if rng.below(3) == 0 {
                        let _ = f.sync_all();
                    }
                    files.push(p);
                }
            }
            7..=9 => {
                if let Some(q) = pick(&mut rng, &files) {
                    let p = dirs[rng.below(dirs.len() as u64) as usize].join(format!("r{i}"));
                    if std::fs::rename(&q, &p).is_ok() {
                        files.retain(|x| x != &q);
                        if rng.below(3) == 0 {
                            fsync(&p);
                        }
                        files.push(p);
                    }
                }
            }
            10..=12 => {
                if let Some(q) = pick(&mut rng, &files) {
                    if std::fs::remove_file(&q).is_ok() {
                        files.retain(|x| x != &q);
                    }
                }
            }
            13..=14 => {
                let sd = d.join(format!("sub{i}"));
                if std::fs::create_dir(&sd).is_ok() {
                    if rng.below(2) == 0 {
                        fsync(&sd);
                    }
                    dirs.push(sd);
                }
            }
            15 => {
                if dirs.len() > 9 {
                    let k = 9 + rng.below(dirs.len() as u64 - 9) as usize;
                    if std::fs::remove_dir(&dirs[k]).is_ok() {
                        dirs.remove(k);
                    }
                }
            }
            16 => {
                if let Some(q) = pick(&mut rng, &files) {
                    let l = d.join(format!("l{i}"));
                    if std::fs::hard_link(&q, &l).is_ok() {
                        files.push(l);
                    }
                }
            }
            17 => {
                if let Some(q) = pick(&mut rng, &files) {
                    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&q) {
                        let n = [100u64, 5000][rng.below(2) as usize];
                        let _ = f.write_all(&bytes(&mut rng, n));
                        let _ = f.sync_all();
                    }
                }
            }
            18 => {
                if let Some(q) = pick(&mut rng, &files) {
                    fsync(&q);
                }
            }
            _ => {
                let target = "t".repeat([5usize, 100][rng.below(2) as usize]);
                let _ = std::os::unix::fs::symlink(target, d.join(format!("s{i}")));
            }
        }
    }
    let m = std::fs::File::open(mnt).expect("open the mount point");
    let flag = GOING_NOLOGFLUSH;
    // SAFETY: the ioctl reads one u32 through the pointer, which lives
    // across the call.
    let rc = unsafe { libc::ioctl(m.as_raw_fd(), FS_IOC_SHUTDOWN, &flag as *const u32) };
    assert_eq!(
        rc,
        0,
        "FS_IOC_SHUTDOWN: {}",
        std::io::Error::last_os_error()
    );
}

/// One fast-commit crash image, replayed by ext4chk (`fsck.ext4 -p`) and
/// by the kernel (a mount and an unmount of a copy): what went wrong, or
/// `None` when the kernel cannot mount it (then nothing judges the
/// replay).
fn judge_fast_commit(
    set: &Features,
    seed: u64,
    scratch: &Scratch,
) -> Option<(String, Vec<String>)> {
    let name = format!("{}-{seed}", set.name);
    let img = scratch.path(&format!("{name}.img"));
    let mnt = scratch.path(&format!("{name}.mnt"));
    let _ = std::fs::remove_file(&img);
    let f = std::fs::File::create(&img).expect("image");
    f.set_len(256 << 20).expect("size the image");
    drop(f);
    let mut args: Vec<&str> = set.args.to_vec();
    args.push(img.to_str().expect("path"));
    common::mke2fs(&args);
    std::fs::create_dir_all(&mnt).expect("mount point");
    let mounted = Command::new(find_tool("mount").expect("mount"))
        .args(["-t", "ext4", "-o", "loop"])
        .arg(&img)
        .arg(&mnt)
        .output()
        .expect("mount runs");
    assert!(
        mounted.status.success(),
        "{name}: mount: {}",
        String::from_utf8_lossy(&mounted.stderr)
    );
    name_workload(&mnt, &format!("fc-{name}"));
    for _ in 0..100 {
        let out = Command::new(find_tool("umount").expect("umount"))
            .arg(&mnt)
            .output()
            .expect("umount runs");
        if out.status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let ours = scratch.path(&format!("{name}.ours.img"));
    let kernel = scratch.path(&format!("{name}.kernel.img"));
    std::fs::copy(&img, &ours).expect("copy");
    std::fs::copy(&img, &kernel).expect("copy");
    let _ = std::fs::remove_file(&img);
    if !kernel_replay(&kernel, &mnt) {
        let _ = std::fs::remove_file(&ours);
        let _ = std::fs::remove_file(&kernel);
        return None;
    }
    let mut problems = Vec::new();
    let (p, p_out) = ext4chk_as_fsck(&["-p"], &ours);
    if p > 1 {
        problems.push(format!("fsck.ext4 -p exits {p}:\n{p_out}"));
    }
    let (after, after_out) = e2fsck(&["-fn"], &ours);
    if after != 0 {
        problems.push(format!(
            "after fsck.ext4 -p (exit {p}) e2fsck -fn exits {after}:\n{p_out}\n{after_out}"
        ));
    }
    let t = scratch.path(&format!("{name}.trees"));
    match (common::file_tree(&ours, &t), common::file_tree(&kernel, &t)) {
        (Some(o), Some(k)) => {
            for (path, h) in &k {
                match o.get(path) {
                    None => problems.push(format!("the kernel's replay has {path}, ext4chk's not")),
                    Some(x) if x != h => problems.push(format!("{path} differs")),
                    _ => {}
                }
            }
            for path in o.keys().filter(|p| !k.contains_key(*p)) {
                problems.push(format!("ext4chk's replay has {path}, the kernel's not"));
            }
        }
        _ => problems.push("debugfs cannot list the files".into()),
    }
    let _ = std::fs::remove_dir_all(&t);
    let _ = std::fs::remove_file(&ours);
    let _ = std::fs::remove_file(&kernel);
    Some((name, problems))
}

/// After a power cut on fast_commit (with and without metadata_csum, 1
/// and 4 KiB blocks), ext4chk's replay of the log leaves the tree the
/// kernel's own replay leaves (every file's path and content), and
/// e2fsck -fn finds it clean: names removed with their inodes when the
/// last link goes (an inode number reused in the same log starts empty),
/// new directories with their '.' and '..', indexed directories indexed
/// again, every block written with its checksum. (e2fsck 1.47 cannot
/// replay these logs at all; the kernel is the judge.)
#[test]
fn a_fast_commit_replay_leaves_the_tree_the_kernels_replay_leaves() {
    let scratch = Scratch::new("fc-crash");
    if !can_mount(&scratch) {
        return;
    }
    let cases: Vec<(usize, u64)> = (0..FC_SETS.len())
        .flat_map(|s| (0..FC_SEEDS).map(move |k| (s, k)))
        .collect();
    let results = par_map(&cases, |&(s, k)| {
        judge_fast_commit(&FC_SETS[s], k, &scratch)
    });
    let mut judged = 0;
    let mut failures = Vec::new();
    for (name, problems) in results.into_iter().flatten() {
        judged += 1;
        eprintln!("{name}: {} problems", problems.len());
        failures.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
    }
    assert!(
        judged >= FC_SETS.len() * FC_SEEDS as usize / 2,
        "the kernel could replay only {judged} of the crash images"
    );
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
