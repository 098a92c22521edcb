//! `ext4chk --online`: checks of a loop-mounted ext4 file system while a
//! workload runs on it (no false alarms), after damage written under it
//! (found, and agreed with e2fsck -fn after unmounting), and a checker
//! killed while the file system is frozen (thawed at once).

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bin, code, find_tool, have_all, Rng, Scratch};

const EXT4: &str = "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize";

/// A loop-mounted file system, unmounted when dropped.
struct Mounted {
    img: PathBuf,
    mnt: PathBuf,
    dev: PathBuf,
}

impl Mounted {
    fn new(scratch: &Scratch, name: &str, size_mb: u64) -> Option<Mounted> {
        Mounted::with(scratch, name, size_mb, &["-O", EXT4, "-I", "256"])
    }

    /// A file system made with `mke2fs_opts`, loop-mounted.
    fn with(scratch: &Scratch, name: &str, size_mb: u64, mke2fs_opts: &[&str]) -> Option<Mounted> {
        let img = scratch.path(&format!("{name}.img"));
        let f = std::fs::File::create(&img).ok()?;
        f.set_len(size_mb << 20).ok()?;
        drop(f);
        let mut args = mke2fs_opts.to_vec();
        args.push(img.to_str()?);
        common::mke2fs(&args);
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

    fn unmount(&self) {
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

fn is_mounted(mnt: &Path) -> bool {
    let Ok(canon) = std::fs::canonicalize(mnt) else {
        return false;
    };
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == canon.to_str())
}

fn can_mount(scratch: &Scratch) -> bool {
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

fn online(target: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.arg("--online")
        .args(extra)
        .args(["--format", "json"])
        .arg(target)
        .env("LC_ALL", "C")
        .env("E2FSCK_CONFIG", "/dev/null");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}):\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// A seeded workload of the kinds that leave metadata half-changed:
/// create, write, append, fsync, rename, unlink of open files, mkdir and
/// rmdir, hard links; until `stop`.
fn workload(root: PathBuf, seed: &str, stop: Arc<AtomicBool>) {
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
fn cold_files(m: &Mounted) {
    let cold = m.mnt.join("cold");
    std::fs::create_dir_all(&cold).expect("dir");
    for i in 0..40 {
        std::fs::write(cold.join(format!("c{i}")), vec![b'c'; 5000]).expect("file");
    }
    Command::new("sync").status().expect("sync");
    std::fs::write("/proc/sys/vm/drop_caches", "2").expect("drop caches");
}

/// The codes of a JSON report's findings.
fn finding_codes(v: &serde_json::Value) -> Vec<&str> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f["code"].as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn online_checks_under_load_find_nothing_and_damage_is_found() {
    let scratch = Scratch::new("online");
    if !can_mount(&scratch) {
        return;
    }
    // Refusals: one line, exit 8 (16 for a wrong command line).
    let tmp = online(Path::new("/dev/shm"), &[], &[]);
    assert_eq!(code(&tmp), 8, "{}", String::from_utf8_lossy(&tmp.stderr));
    let unmounted = scratch.path("u.img");
    std::fs::File::create(&unmounted)
        .expect("img")
        .set_len(16 << 20)
        .expect("len");
    common::mke2fs(&["-O", EXT4, unmounted.to_str().expect("path")]);
    let not_mounted = online(scratch.0.as_path(), &[], &[]);
    assert_eq!(code(&not_mounted), 8);
    let with_y = Command::new(bin())
        .args(["--online", "-y", "/"])
        .output()
        .expect("runs");
    assert_eq!(code(&with_y), 16);

    // 1. A workload runs; every online check must say clean.
    let m = Mounted::new(&scratch, "load", 64).expect("mount");
    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let (root, stop) = (m.mnt.clone(), stop.clone());
        std::thread::spawn(move || workload(root, "online-load", stop))
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut longest = Vec::new();
    let mut alarms = Vec::new();
    // Checks that froze, and of those, the ones whose freezes copied only
    // what the journal said had changed.
    let (mut froze, mut by_journal, mut frozen_bytes) = (0, 0, 0u64);
    let checks = 50;
    for i in 0..checks {
        let o = online(&m.mnt, &[], &[]);
        let v = json(&o);
        if code(&o) != 0 {
            alarms.push(format!(
                "check {i}: exit {}: {} {} {} {}\n{}",
                code(&o),
                v["findings"],
                v["online"],
                v["notes"],
                v["aborted"],
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        longest.push(v["online"]["freeze_longest_ms"].as_f64().unwrap_or(0.0));
        if v["online"]["freezes"].as_u64().unwrap_or(0) > 0 {
            froze += 1;
            if v["online"]["from_journal"].as_bool() == Some(true) {
                by_journal += 1;
            }
            frozen_bytes += v["online"]["frozen_bytes"].as_u64().unwrap_or(0);
        }
    }
    stop.store(true, Ordering::Relaxed);
    w.join().expect("workload");
    m.unmount();
    let after = common::tool("e2fsck", &["-fn", m.img.to_str().expect("path")]);
    longest.sort_by(|a, b| a.total_cmp(b));
    eprintln!(
        "{checks} online checks under load: {} false alarms; longest freeze {:.1} ms, p99 {:.1} ms, freezes in {} checks",
        alarms.len(),
        longest.last().copied().unwrap_or(0.0),
        longest[(longest.len() * 99 / 100).min(longest.len() - 1)],
        longest.iter().filter(|&&x| x > 0.0).count()
    );
    eprintln!(
        "{froze} checks froze; {by_journal} of them copied only the journal's changes; {frozen_bytes} bytes copied frozen in all"
    );
    assert!(alarms.is_empty(), "false alarms:\n{}", alarms.join("\n"));
    assert!(
        froze == 0 || by_journal > 0,
        "no freeze used the journal's changes ({froze} froze)"
    );
    assert_eq!(
        code(&after),
        0,
        "{}",
        String::from_utf8_lossy(&after.stdout)
    );
    assert!(
        longest.last().copied().unwrap_or(0.0) <= 250.0,
        "a freeze outlasted --max-freeze (200 ms): {longest:?}"
    );

    // 2. Damage written under the mounted file system, to cold files the
    // kernel no longer holds: found, confirmed, and as e2fsck -fn sees it
    // once unmounted.
    let m = Mounted::new(&scratch, "damage", 64).expect("mount");
    cold_files(&m);
    let dbg = common::tool(
        "debugfs",
        &[
            "-w",
            "-R",
            "sif /cold/c7 links_count 5",
            m.dev.to_str().expect("path"),
        ],
    );
    assert!(dbg.status.success(), "{dbg:?}");
    let o = online(&m.mnt, &[], &[]);
    let v = json(&o);
    assert_eq!(code(&o), 6, "{v}");
    assert!(finding_codes(&v).contains(&"link-count-wrong"), "{v}");
    // A journalled file system: the freeze took what changed, not all.
    assert_eq!(v["online"]["from_journal"], true, "{v}");
    assert!(v["online"]["freezes"].as_u64().unwrap_or(0) >= 1, "{v}");

    // 3. Killed while the file system is frozen: the watchdog thaws it.
    let mut child = Command::new(bin())
        .args(["--online", "--max-freeze", "20000"])
        .arg(&m.mnt)
        .env("EXT4CHK_ONLINE_HOLD_MS", "15000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runs");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let t = Instant::now();
    let probe = m.mnt.join("after-kill");
    std::fs::write(&probe, b"still writable").expect("write");
    std::fs::File::open(&probe)
        .expect("open")
        .sync_all()
        .expect("fsync");
    let took = t.elapsed();
    eprintln!("a write after the kill took {took:?}");
    assert!(
        took < Duration::from_secs(2),
        "frozen after the kill: {took:?}"
    );
    m.unmount();
    let after = common::tool("e2fsck", &["-fn", m.img.to_str().expect("path")]);
    assert_eq!(
        code(&after),
        4,
        "{}",
        String::from_utf8_lossy(&after.stdout)
    );
    assert!(
        String::from_utf8_lossy(&after.stdout).contains("ref count is 5"),
        "{}",
        String::from_utf8_lossy(&after.stdout)
    );
}

/// Damage of each kind, written under a mounted file system of each
/// feature set, to structures the kernel no longer holds: an inode, a
/// directory block, the block bitmap. The online check confirms it (exit
/// 6), and once unmounted e2fsck -fn finds errors too. ext2 has no
/// journal, so its freezes copy everything the live check read.
#[test]
fn damage_of_each_kind_on_each_feature_set_is_confirmed() {
    let scratch = Scratch::new("online-damage");
    if !can_mount(&scratch) {
        return;
    }
    let sets: [(&str, &[&str], bool); 3] = [
        ("csum4k", &["-b", "4096", "-O", EXT4, "-I", "256"], true),
        (
            "uninit1k",
            &[
                "-b",
                "1024",
                "-O",
                "has_journal,extent,flex_bg,uninit_bg,dir_nlink,extra_isize",
                "-I",
                "256",
            ],
            true,
        ),
        ("ext2", &["-b", "4096"], false),
    ];
    for (set, opts, journalled) in sets {
        for damage in ["inode", "dir", "bitmap"] {
            let name = format!("{set}-{damage}");
            let m = Mounted::with(&scratch, &name, 64, opts).expect("mount");
            cold_files(&m);
            let dev = m.dev.to_str().expect("path");
            let request = match damage {
                "inode" => "sif /cold/c7 links_count 5".to_string(),
                "dir" => "unlink /cold/c9".to_string(),
                _ => {
                    let b = common::tool("debugfs", &["-R", "bmap /cold/c3 0", dev]);
                    let blk = String::from_utf8_lossy(&b.stdout).trim().to_string();
                    assert!(blk.parse::<u64>().is_ok(), "{name}: bmap said {blk:?}");
                    format!("freeb {blk}")
                }
            };
            let dbg = common::tool("debugfs", &["-w", "-R", &request, dev]);
            assert!(dbg.status.success(), "{name}: {dbg:?}");
            let o = online(&m.mnt, &[], &[]);
            let v = json(&o);
            assert_eq!(code(&o), 6, "{name}: {v}");
            assert!(
                v["findings"].as_array().is_some_and(|a| !a.is_empty()),
                "{name}: {v}"
            );
            assert_eq!(v["online"]["from_journal"], journalled, "{name}: {v}");
            let codes = finding_codes(&v);
            eprintln!(
                "{name}: exit 6, {codes:?}, {} bytes copied frozen",
                v["online"]["frozen_bytes"]
            );
            m.unmount();
            let after = common::tool("e2fsck", &["-fn", m.img.to_str().expect("path")]);
            assert_eq!(
                after.status.code(),
                Some(4),
                "{name}: e2fsck -fn after unmounting:\n{}",
                String::from_utf8_lossy(&after.stdout)
            );
        }
    }
}
