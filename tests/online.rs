//! `ext4chk --online`: checks of a loop-mounted ext4 file system while a
//! workload runs on it (no false alarms), after damage written under it
//! (found, and agreed with e2fsck -fn after unmounting), and a checker
//! killed while the file system is frozen (thawed at once).

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::mounted::{can_mount, cold_files, workload, Mounted, EXT4};
use common::{bin, code, Scratch};

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
    // Every other check keeps no copy of a block, only its sum: blocks
    // changed after a freeze are then taken again, not served stale.
    let sums_only: &[(&str, &str)] = &[("EXT4CHK_ONLINE_COPY_BYTES", "0")];
    for i in 0..checks {
        let o = online(&m.mnt, &[], if i % 2 == 1 { sums_only } else { &[] });
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
            // Once keeping only sums of what was read, then as by default.
            let summed = online(&m.mnt, &[], &[("EXT4CHK_ONLINE_COPY_BYTES", "0")]);
            let o = online(&m.mnt, &[], &[]);
            let v = json(&o);
            assert_eq!(code(&o), 6, "{name}: {v}");
            assert!(
                v["findings"].as_array().is_some_and(|a| !a.is_empty()),
                "{name}: {v}"
            );
            let vs = json(&summed);
            assert_eq!(code(&summed), 6, "{name}, sums only: {vs}");
            assert_eq!(
                finding_codes(&vs),
                finding_codes(&v),
                "{name}: sums only and copies differ"
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
