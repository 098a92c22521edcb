//! Repairs that can be undone and interrupted: the undo file restores the
//! device byte for byte through e2fsprogs' own e2undo, also after the
//! repair was killed at a random point; a journal written by the kernel
//! is recovered to what the kernel itself sees, its fast commits too; a
//! mounted file system is never repaired; SIGTERM stops a repair at a
//! safe point.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    code, corpus_image, file_tree, fixture_images, gunzip, have, mke2fs, run, run_as, tool, Scratch,
};

fn sha(p: &Path) -> u64 {
    // FNV-1a over the whole image: enough to tell two images apart.
    let data = std::fs::read(p).expect("image");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn e2undo(undo: &Path, img: &Path) -> std::process::Output {
    tool(
        "e2undo",
        &[undo.to_str().expect("path"), img.to_str().expect("path")],
    )
}

fn e2fsck_fn(img: &Path) -> i32 {
    code(&tool("e2fsck", &["-fn", img.to_str().expect("path")]))
}

fn tools_ok() -> bool {
    let ok = have("e2fsck") && have("e2undo") && have("debugfs");
    if !ok {
        eprintln!("e2fsprogs (e2fsck, e2undo, debugfs) is missing: skipping");
    }
    ok
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn undo_file_restores_damaged_corpus_images() {
    if !tools_ok() || common::manifest().is_none() {
        return;
    }
    let scratch = Scratch::new("undo");
    // Repairs of every kind: journal replay, cloning, directory salvage,
    // relocation, reconnection, bitmaps.
    let tests = [
        "f_journal",
        "j_corrupt_commit_csum",
        "f_dup",
        "f_dup_de",
        "f_baddir",
        "f_illbbitmap",
        "f_lpf",
        "f_holedir",
        "f_h_badnode",
        "f_extents",
        "f_orphan",
        "f_misstable",
    ];
    for t in tests {
        let gz = corpus_image(t);
        let img = scratch.path(&format!("{t}.img"));
        let undo = scratch.path(&format!("{t}.undo"));
        gunzip(&gz, &img);
        let before = sha(&img);
        let out = run(&[
            "-y",
            "--undo",
            undo.to_str().expect("path"),
            img.to_str().expect("path"),
        ]);
        let c = code(&out);
        assert!(c == 1 || c == 0 || c & 4 != 0, "{t}: repair exited {c}");
        if c == 1 {
            assert_ne!(sha(&img), before, "{t}: the repair changed nothing");
        }
        let u = e2undo(&undo, &img);
        assert!(
            u.status.success(),
            "{t}: e2undo failed: {}{}",
            String::from_utf8_lossy(&u.stdout),
            String::from_utf8_lossy(&u.stderr)
        );
        assert_eq!(sha(&img), before, "{t}: e2undo did not restore the image");
    }
}

/// A fixture with damage of every pass, so a repair runs several rounds.
fn damaged_fixture(scratch: &Scratch) -> Option<PathBuf> {
    let dir = fixture_images()?;
    let img = scratch.path("damaged.img");
    std::fs::copy(dir.join("ext4.img"), &img).ok()?;
    let mut cmds = Vec::new();
    for i in (20..2900).step_by(7) {
        cmds.push(format!("sif <{i}> links_count 9"));
    }
    for i in (21..2900).step_by(11) {
        cmds.push(format!("sif <{i}> size 1"));
    }
    for b in (3000..6000).step_by(5) {
        cmds.push(format!("freeb {b}"));
    }
    let script = scratch.path("damage.cmds");
    std::fs::write(&script, cmds.join("\n") + "\n").ok()?;
    let out = tool("debugfs", &["-w", "-f", script.to_str()?, img.to_str()?]);
    assert!(out.status.success(), "debugfs failed");
    assert_eq!(e2fsck_fn(&img), 4, "the damage must be visible to e2fsck");
    Some(img)
}

#[test]
fn a_killed_repair_is_undone_and_can_be_rerun() {
    if !tools_ok() {
        return;
    }
    let scratch = Scratch::new("kill");
    let Some(orig) = damaged_fixture(&scratch) else {
        eprintln!("mke2fs is missing: skipping");
        return;
    };
    let before = sha(&orig);
    // How long an uninterrupted repair takes.
    let probe = scratch.path("probe.img");
    std::fs::copy(&orig, &probe).expect("copy");
    let t = Instant::now();
    let c = code(&run(&[
        "-y",
        "--threads",
        "2",
        probe.to_str().expect("path"),
    ]));
    let full = t.elapsed();
    assert_eq!(c, 1, "the repair fixes the damage");
    assert_eq!(e2fsck_fn(&probe), 0);
    // Kill it at points spread over that time (a fixed sequence of
    // pseudo-random fractions, so a failure can be reproduced).
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for round in 0..10 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let frac = (x % 1000) as f64 / 1000.0;
        let delay = full.mul_f64(frac);
        let img = scratch.path(&format!("k{round}.img"));
        let undo = scratch.path(&format!("k{round}.undo"));
        std::fs::copy(&orig, &img).expect("copy");
        let _ = std::fs::remove_file(&undo);
        let mut child = Command::new(common::bin())
            .args(["-y", "--threads", "2", "--undo"])
            .arg(&undo)
            .arg(&img)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        if undo.exists() && std::fs::metadata(&undo).map(|m| m.len()).unwrap_or(0) > 0 {
            let u = e2undo(&undo, &img);
            assert!(
                u.status.success(),
                "round {round} (killed after {delay:?}): e2undo failed: {}{}",
                String::from_utf8_lossy(&u.stdout),
                String::from_utf8_lossy(&u.stderr)
            );
        }
        assert_eq!(
            sha(&img),
            before,
            "round {round} (killed after {delay:?}): the image is not the original after e2undo"
        );
        let c = code(&run(&["-y", img.to_str().expect("path")]));
        assert_eq!(c, 1, "round {round}: the rerun repairs");
        assert_eq!(e2fsck_fn(&img), 0, "round {round}: clean after the rerun");
    }
}

#[test]
fn sigterm_stops_at_a_safe_point() {
    if !tools_ok() {
        return;
    }
    let scratch = Scratch::new("sigterm");
    let Some(orig) = damaged_fixture(&scratch) else {
        return;
    };
    let before = sha(&orig);
    let undo = scratch.path("t.undo");
    let child = Command::new(common::bin())
        .args(["-y", "--undo"])
        .arg(&undo)
        .arg(&orig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(30));
    let _ = nix_kill(child.id(), 15);
    let out = child.wait_with_output().expect("wait");
    let c = code(&out);
    // Either it finished first, or it stopped with the "cancelled" bit.
    assert!(
        c == 1 || c & 32 != 0,
        "exit {c}:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    if c & 32 != 0 {
        assert!(String::from_utf8_lossy(&out.stdout).contains("Interrupted"));
    }
    let u = e2undo(&undo, &orig);
    assert!(u.status.success(), "e2undo failed after SIGTERM");
    assert_eq!(sha(&orig), before);
}

fn nix_kill(pid: u32, sig: i32) -> bool {
    Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

/// Mounts an image on a loop device; `None` where mounting is not allowed.
fn mount(img: &Path, at: &Path) -> Option<()> {
    mount_with(img, at, "loop")
}

fn mount_with(img: &Path, at: &Path, options: &str) -> Option<()> {
    std::fs::create_dir_all(at).ok()?;
    let ok = Command::new("mount")
        .args(["-o", options])
        .arg(img)
        .arg(at)
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    ok.then_some(())
}

fn umount(at: &Path) {
    let _ = Command::new("umount").arg(at).status();
}

#[test]
fn a_journal_written_by_the_kernel_is_recovered() {
    if !tools_ok() || !have("mke2fs") {
        return;
    }
    let scratch = Scratch::new("journal");
    let img = scratch.path("j.img");
    mke2fs(&[
        "-I",
        "256",
        "-O",
        "has_journal,extent,64bit,flex_bg,metadata_csum,dir_index,filetype,sparse_super,large_file,huge_file,dir_nlink,extra_isize",
        img.to_str().expect("path"),
        "32M",
    ]);
    let mnt = scratch.path("mnt");
    if mount(&img, &mnt).is_none() {
        eprintln!("cannot mount a loop device here: skipping");
        return;
    }
    // Files written and committed to the journal, then the image copied
    // while still mounted: the copy needs recovery.
    let mut x: u32 = 7;
    for d in 0..4 {
        let dir = mnt.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..25 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let len = (x % 20000) as usize;
            let data: Vec<u8> = (0..len).map(|i| (i as u32 ^ x) as u8).collect();
            std::fs::write(dir.join(format!("f{f}")), data).expect("write");
        }
    }
    let _ = std::fs::remove_file(mnt.join("d0/f3"));
    let _ = Command::new("sync").status();
    let copy = scratch.path("copy.img");
    let cp = Command::new("cp").arg(&img).arg(&copy).status();
    umount(&mnt);
    assert!(cp.is_ok_and(|s| s.success()), "cp failed");
    let h = tool("dumpe2fs", &["-h", copy.to_str().expect("path")]);
    assert!(
        String::from_utf8_lossy(&h.stdout).contains("needs_recovery"),
        "the copy of a mounted file system needs recovery"
    );
    let c = code(&run(&["-y", copy.to_str().expect("path")]));
    assert!(c == 0 || c == 1, "repair exited {c}");
    assert_eq!(e2fsck_fn(&copy), 0, "clean after recovery");
    let want = file_tree(&img, &scratch.path("t1")).expect("files of the original");
    let got = file_tree(&copy, &scratch.path("t2")).expect("files of the copy");
    assert!(want.len() >= 99, "the original holds the files");
    assert_eq!(got, want, "the recovered copy holds what the kernel wrote");
}

#[test]
fn fast_commits_written_by_the_kernel_are_replayed() {
    if !tools_ok() || !have("mke2fs") {
        return;
    }
    let scratch = Scratch::new("fastcommit");
    let img = scratch.path("fc.img");
    mke2fs(&[
        "-I",
        "256",
        "-O",
        "has_journal,fast_commit,extent,64bit,flex_bg,metadata_csum,dir_index,filetype,sparse_super,large_file,huge_file,dir_nlink,extra_isize",
        img.to_str().expect("path"),
        "32M",
    ]);
    let mnt = scratch.path("mnt");
    // A long commit interval: what fsync writes goes to fast commits.
    if mount_with(&img, &mnt, "loop,commit=300").is_none() {
        eprintln!("cannot mount a loop device here: skipping");
        return;
    }
    let dir = mnt.join("d");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let _ = Command::new("sync").status();
    let mut x: u32 = 11;
    for f in 0..12 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let len = (x % 30000) as usize + 1;
        let data: Vec<u8> = (0..len).map(|i| (i as u32 ^ x) as u8).collect();
        let path = dir.join(format!("f{f}"));
        std::fs::write(&path, data).expect("write");
        std::fs::File::open(&path)
            .and_then(|h| h.sync_all())
            .expect("fsync");
    }
    let copy = scratch.path("copy.img");
    let cp = Command::new("cp").arg(&img).arg(&copy).status();
    umount(&mnt);
    assert!(cp.is_ok_and(|s| s.success()), "cp failed");
    let log = tool("debugfs", &["-R", "logdump", copy.to_str().expect("path")]);
    if !String::from_utf8_lossy(&log.stdout).contains("tag TAIL") {
        eprintln!("the kernel wrote no fast commits here: skipping");
        return;
    }
    let out = run(&["-y", copy.to_str().expect("path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(code(&out) == 0 || code(&out) == 1, "{text}");
    assert!(text.contains("Fast commits replayed"), "{text}");
    // The replay keeps the bitmaps in step, as e2fsck's does.
    assert!(!text.contains("bitmap-differs"), "{text}");
    assert_eq!(e2fsck_fn(&copy), 0, "clean after recovery");
    let want = file_tree(&img, &scratch.path("t1")).expect("files of the original");
    let got = file_tree(&copy, &scratch.path("t2")).expect("files of the copy");
    assert_eq!(want.len(), 12, "the original holds the files");
    assert_eq!(got, want, "the recovered copy holds what the kernel wrote");
}

#[test]
fn a_mounted_file_system_is_not_repaired() {
    if !have("mke2fs") {
        return;
    }
    let scratch = Scratch::new("mounted");
    let img = scratch.path("m.img");
    mke2fs(&[
        "-O",
        "has_journal,extent",
        img.to_str().expect("path"),
        "8M",
    ]);
    let mnt = scratch.path("mnt");
    if mount(&img, &mnt).is_none() {
        eprintln!("cannot mount a loop device here: skipping");
        return;
    }
    let r = run(&["-y", img.to_str().expect("path")]);
    let ro = run(&["-n", img.to_str().expect("path")]);
    umount(&mnt);
    assert_eq!(code(&r), 8, "repair of a mounted file system is refused");
    assert!(String::from_utf8_lossy(&r.stderr).contains("mounted"));
    assert_eq!(code(&ro), 0, "a read-only check goes on");
    assert!(String::from_utf8_lossy(&ro.stderr).contains("mounted"));

    // Mounted read-only, but not as the root: still refused (only the
    // root, checked at boot, is repaired in place), and left untouched.
    let before = std::fs::read(&img).expect("read");
    if mount_with(&img, &mnt, "loop,ro").is_none() {
        return;
    }
    let r = run(&["-y", img.to_str().expect("path")]);
    umount(&mnt);
    assert_eq!(code(&r), 8);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("mounted") && err.contains("read-only"),
        "{err}"
    );
    assert!(std::fs::read(&img).expect("read") == before);
}

#[test]
fn preen_fixes_only_what_is_safe() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.img");
    if !have("debugfs") {
        return;
    }
    let scratch = Scratch::new("preen");
    // A wrong link count: preen fixes it.
    let a = scratch.path("a.img");
    std::fs::copy(&demo, &a).expect("copy");
    tool(
        "debugfs",
        &[
            "-w",
            "-R",
            "sif <14> links_count 5",
            a.to_str().expect("path"),
        ],
    );
    let out = run(&["-p", a.to_str().expect("path")]);
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(code(&run(&["-n", a.to_str().expect("path")])), 0);
    // An unattached inode needs a question: preen stops, changes nothing,
    // and says to run a full repair.
    let b = scratch.path("b.img");
    std::fs::copy(&demo, &b).expect("copy");
    tool(
        "debugfs",
        &["-w", "-R", "unlink /data", b.to_str().expect("path")],
    );
    let before = std::fs::read(&b).expect("image");
    let out = run(&["-p", b.to_str().expect("path")]);
    assert_eq!(code(&out), 4, "as e2fsck -p: exit 4 exactly");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--repair"));
    // As e2fsck's preen halt: nothing is repaired, and the superblock is
    // marked as having errors (s_state 0x3A, s_wtime 0x30 and the
    // checksum 0x3FC change), so the next boot's check is not skipped.
    let after = std::fs::read(&b).expect("image");
    let sb = 1024usize;
    let allowed = [0x30..0x34, 0x3A..0x3C, 0x274..0x275, 0x3FC..0x400];
    for (i, (x, y)) in before.iter().zip(&after).enumerate() {
        let ok = i >= sb && allowed.iter().any(|r| r.contains(&(i - sb)));
        assert!(
            x == y || ok,
            "preen changed byte {i} of an image it would not repair"
        );
    }
    assert_eq!(after[sb + 0x3A] & 2, 2, "the error state is recorded");
    let out = run_as("fsck.ext4", &["-p", b.to_str().expect("path")]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("contains a file system with errors, check forced"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(code(&out), 4);
}
