//! `ext4chk --watch` on loop-mounted file systems: the kernel's error
//! event, made on demand by damaging a directory block under a mounted
//! file system and listing the directory, is reported with a confirmed
//! finding naming the path; a workload with scheduled checks reports
//! nothing; a watch killed while a check holds a freeze leaves the file
//! system thawed; unmounts and remounts are followed; refusals.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::mounted::{can_mount, cold_files_in, workload, Mounted, EXT4};
use common::{bin, code, Scratch};
use serde_json::Value;

/// A running watch and the records it wrote, each with when it came.
struct Watching {
    child: Child,
    records: Arc<Mutex<Vec<(Instant, Value)>>>,
}

impl Watching {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Watching {
        let mut c = Command::new(bin());
        c.arg("--watch")
            .args(args)
            .env("LC_ALL", "C")
            .env("E2FSCK_CONFIG", "/dev/null")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("runs");
        let out = child.stdout.take().expect("stdout");
        let records = Arc::new(Mutex::new(Vec::new()));
        let into = records.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
                into.lock().expect("lock").push((Instant::now(), v));
            }
        });
        Watching { child, records }
    }

    /// The first record that `want` takes, waiting up to `limit`.
    fn wait_for(&self, limit: Duration, want: impl Fn(&Value) -> bool) -> Option<(Instant, Value)> {
        let t = Instant::now();
        while t.elapsed() < limit {
            if let Some(r) = self
                .records
                .lock()
                .expect("lock")
                .iter()
                .find(|(_, v)| want(v))
            {
                return Some(r.clone());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    fn all(&self) -> Vec<Value> {
        self.records
            .lock()
            .expect("lock")
            .iter()
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Stops the watch as an admin would (SIGTERM) and returns its code.
    fn stop(mut self) -> i32 {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().expect("waits");
        status.code().unwrap_or(-1)
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether this kernel reports file system errors to fanotify
/// (FAN_FS_ERROR, 5.16 and later); the watch refuses to start without.
fn kernel_reports_errors() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let ok = (major, minor) >= (5, 16);
    if !ok {
        eprintln!("skipping: kernel {} has no FAN_FS_ERROR", release.trim());
    }
    ok
}

/// Root, loop devices and a kernel that reports errors.
fn can_watch(scratch: &Scratch) -> bool {
    kernel_reports_errors() && can_mount(scratch)
}

fn mount_str(m: &Mounted) -> String {
    std::fs::canonicalize(&m.mnt)
        .expect("mount point")
        .display()
        .to_string()
}

/// A directory of 60 files at /cold/d, written out, its blocks and the
/// kernel's inodes and dentries dropped.
fn cold_dir(m: &Mounted) {
    cold_files_in(m, "cold/d", "file-", 60, 3000);
}

/// Zeroes the record length of the first entry of /cold/d's first block,
/// through the device under the mounted file system, then drops the
/// caches so that the kernel reads it afresh.
fn damage_dir_block(m: &Mounted, block_size: u64) {
    let out = common::tool(
        "debugfs",
        &["-R", "bmap /cold/d 0", m.dev.to_str().expect("path")],
    );
    let blk: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("bmap: {out:?}"));
    let dev = std::fs::OpenOptions::new()
        .write(true)
        .open(&m.dev)
        .expect("device");
    use std::os::unix::fs::FileExt;
    dev.write_all_at(&[0, 0], blk * block_size + 4)
        .expect("write");
    dev.sync_all().expect("sync");
    std::fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches");
}

/// Lists /cold/d, as a user would: the kernel meets the damage.
fn list_dir(m: &Mounted) {
    let _ = std::fs::read_dir(m.mnt.join("cold/d")).map(|d| d.count());
}

fn records_of<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|v| v["type"] == kind).collect()
}

/// A directory block damaged under a mounted file system of each feature
/// set: the kernel's event is reported with the directory's inode and
/// path, and the online check's confirmed finding names the path, within
/// 10 s of the event. e2fsck -fn agrees once it is unmounted.
#[test]
fn a_kernel_error_is_reported_with_a_confirmed_finding_naming_the_path() {
    let scratch = Scratch::new("watch-event");
    if !can_watch(&scratch) {
        return;
    }
    let sets: [(&str, &[&str], u64); 3] = [
        ("csum4k", &["-O", EXT4, "-I", "256", "-b", "4096"], 4096),
        (
            "plain1k",
            &[
                "-O",
                "^metadata_csum,^uninit_bg",
                "-t",
                "ext4",
                "-b",
                "1024",
            ],
            1024,
        ),
        (
            "uninit1k",
            &["-O", "^metadata_csum,uninit_bg", "-t", "ext4", "-b", "1024"],
            1024,
        ),
    ];
    for (name, opts, bs) in sets {
        let m = Mounted::with(&scratch, name, 64, opts).expect("mount");
        cold_dir(&m);
        let w = Watching::start(&[m.mnt.to_str().expect("path")], &[]);
        let mnt = mount_str(&m);
        assert!(
            w.wait_for(Duration::from_secs(10), |v| v["type"] == "watch"
                && v["state"] == "watching"
                && v["mount"] == mnt.as_str())
                .is_some(),
            "{name}: never watching: {:?}",
            w.all()
        );
        damage_dir_block(&m, bs);
        list_dir(&m);
        let event = w.wait_for(Duration::from_secs(10), |v| v["type"] == "event");
        let Some((t_event, ev)) = event else {
            panic!("{name}: no event: {:?}", w.all());
        };
        assert_eq!(ev["mount"], mnt.as_str(), "{name}: {ev}");
        assert_eq!(ev["device"], m.dev.to_str().expect("path"), "{name}: {ev}");
        let errno = ev["error"].as_i64().unwrap_or(0);
        assert!(errno == 74 || errno == 117, "{name}: {ev}");
        assert_eq!(ev["path"], "/cold/d", "{name}: {ev}");
        assert!(ev["inode"].as_u64().unwrap_or(0) > 11, "{name}: {ev}");
        let finding = w.wait_for(Duration::from_secs(10), |v| {
            v["type"] == "finding" && (v["path"] == "/cold/d" || v["dir_path"] == "/cold/d")
        });
        let Some((t_found, f)) = finding else {
            panic!("{name}: no finding naming /cold/d: {:?}", w.all());
        };
        let took = t_found.duration_since(t_event);
        eprintln!("{name}: event to finding {took:?}: {f}");
        assert!(took < Duration::from_secs(10), "{name}: {took:?}");
        let check = w
            .wait_for(Duration::from_secs(1), |v| v["type"] == "check")
            .expect("a check record")
            .1;
        assert_eq!(check["cause"], "event", "{name}: {check}");
        assert_eq!(check["result"], "damage", "{name}: {check}");
        assert_eq!(check["exit_code"], 6, "{name}: {check}");
        assert!(
            check["events"].as_u64().unwrap_or(0) >= 1,
            "{name}: {check}"
        );
        assert_eq!(w.stop(), 0, "{name}");
        m.unmount();
        // Unmounted, e2fsck -fn finds the damage too, and ext4chk -n
        // gives its verdict.
        let after = common::tool("e2fsck", &["-fn", m.img.to_str().expect("path")]);
        assert!(code(&after) >= 4, "{name}: {after:?}");
        let ours = common::run(&["-n", m.img.to_str().expect("path")]);
        assert_eq!(code(&ours), code(&after), "{name}: {ours:?}");
    }
}

/// A seeded workload while scheduled online checks run every second:
/// every check is clean, no finding or event is reported, and no freeze
/// outlasts the limit. EXT4CHK_WATCH_SECONDS runs it longer (20 s).
#[test]
fn a_watch_over_a_busy_file_system_reports_nothing() {
    let scratch = Scratch::new("watch-busy");
    if !can_watch(&scratch) {
        return;
    }
    let secs: u64 = std::env::var("EXT4CHK_WATCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let m = Mounted::new(&scratch, "busy", 128).expect("mount");
    let w = Watching::start(
        &[
            "--every",
            "1s",
            "--max-freeze",
            "200",
            m.mnt.to_str().expect("path"),
        ],
        &[],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            let (root, stop) = (m.mnt.clone(), stop.clone());
            std::thread::spawn(move || {
                workload(root.join(format!("w{i}")), &format!("watch-{i}"), stop)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for t in workers {
        t.join().expect("workload");
    }
    let all = w.all();
    assert_eq!(w.stop(), 0);
    let checks = records_of(&all, "check");
    let longest = checks
        .iter()
        .filter_map(|c| c["freeze_longest_ms"].as_f64())
        .fold(0.0, f64::max);
    let froze = checks
        .iter()
        .filter(|c| c["freezes"].as_u64().unwrap_or(0) > 0)
        .count();
    eprintln!(
        "{secs} s: {} checks, {froze} with freezes, the longest freeze {longest:.1} ms",
        checks.len()
    );
    assert!(checks.len() >= 3, "{all:?}");
    for c in &checks {
        assert_eq!(c["result"], "clean", "{c}");
        assert_eq!(c["cause"], "schedule", "{c}");
    }
    assert!(records_of(&all, "finding").is_empty(), "{all:?}");
    assert!(records_of(&all, "event").is_empty(), "{all:?}");
    assert!(records_of(&all, "error").is_empty(), "{all:?}");
    assert!(
        longest <= 250.0,
        "a freeze outlasted the limit: {longest} ms"
    );
}

/// The watch killed (SIGKILL) while its check holds the file system
/// frozen: the check dies with it and its watchdog thaws at once.
#[test]
fn a_watch_killed_during_a_freeze_leaves_the_file_system_thawed() {
    let scratch = Scratch::new("watch-kill");
    if !can_watch(&scratch) {
        return;
    }
    let m = Mounted::new(&scratch, "kill", 64).expect("mount");
    cold_dir(&m);
    let dbg = common::tool(
        "debugfs",
        &[
            "-w",
            "-R",
            "sif /cold/d/file-7 links_count 5",
            m.dev.to_str().expect("path"),
        ],
    );
    assert!(dbg.status.success(), "{dbg:?}");
    let mut w = Watching::start(
        &[
            "--every",
            "1s",
            "--max-freeze",
            "20000",
            m.mnt.to_str().expect("path"),
        ],
        &[("EXT4CHK_ONLINE_HOLD_MS", "15000")],
    );
    // The first check starts after a second, finds the link count and
    // freezes to confirm it, holding the freeze: a write waits.
    std::thread::sleep(Duration::from_millis(3000));
    let probe = m.mnt.join("during-freeze");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let done = std::fs::write(&probe, b"waits for the thaw")
            .and_then(|()| std::fs::File::open(&probe)?.sync_all());
        let _ = tx.send(done.is_ok());
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(700)).is_err(),
        "the file system was not frozen when the watch was killed: {:?}",
        w.all()
    );
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(w.child.id() as i32, libc::SIGKILL) };
    let _ = w.child.wait();
    let t = Instant::now();
    let written = rx.recv_timeout(Duration::from_secs(2));
    eprintln!("the waiting write ended {:?} after the kill", t.elapsed());
    assert_eq!(written, Ok(true), "frozen after the kill");
}

/// Two file systems watched at once; one unmounted and mounted again is
/// watched again, and its damage then reported.
#[test]
fn mounts_and_unmounts_are_followed() {
    let scratch = Scratch::new("watch-mounts");
    if !can_watch(&scratch) {
        return;
    }
    let a = Mounted::new(&scratch, "a", 32).expect("mount");
    let b = Mounted::new(&scratch, "b", 32).expect("mount");
    cold_dir(&b);
    let (ma, mb) = (mount_str(&a), mount_str(&b));
    let w = Watching::start(
        &[a.mnt.to_str().expect("path"), b.mnt.to_str().expect("path")],
        &[],
    );
    for mnt in [&ma, &mb] {
        assert!(
            w.wait_for(Duration::from_secs(10), |v| v["state"] == "watching"
                && v["mount"] == mnt.as_str())
                .is_some(),
            "{mnt}: {:?}",
            w.all()
        );
    }
    // b leaves and comes back.
    let umount = Command::new("umount").arg(&b.mnt).status().expect("umount");
    assert!(umount.success());
    assert!(
        w.wait_for(Duration::from_secs(10), |v| v["state"] == "unmounted"
            && v["mount"] == mb.as_str())
            .is_some(),
        "{:?}",
        w.all()
    );
    let mount = Command::new("mount")
        .arg(&b.dev)
        .arg(&b.mnt)
        .status()
        .expect("mount");
    assert!(mount.success());
    let n_watching = |all: &[Value]| {
        all.iter()
            .filter(|v| v["state"] == "watching" && v["mount"] == mb.as_str())
            .count()
    };
    let t = Instant::now();
    while n_watching(&w.all()) < 2 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(n_watching(&w.all()), 2, "{:?}", w.all());
    damage_dir_block(&b, 4096);
    list_dir(&b);
    assert!(
        w.wait_for(Duration::from_secs(10), |v| v["type"] == "finding"
            && v["mount"] == mb.as_str())
            .is_some(),
        "{:?}",
        w.all()
    );
    // Nothing about a, which has no damage.
    assert!(
        !w.all()
            .iter()
            .any(|v| v["mount"] == ma.as_str() && v["type"] != "watch"),
        "{:?}",
        w.all()
    );
    // With no mount point given, both are watched (among any others).
    let all_w = Watching::start(&[], &[]);
    for mnt in [&ma, &mb] {
        assert!(
            all_w
                .wait_for(Duration::from_secs(10), |v| v["state"] == "watching"
                    && v["mount"] == mnt.as_str())
                .is_some(),
            "{mnt}: {:?}",
            all_w.all()
        );
    }
    assert_eq!(all_w.stop(), 0);
    assert_eq!(w.stop(), 0);
}

/// Each refusal: one line on standard error and its own exit code.
#[test]
fn refusals_have_one_line_and_their_own_codes() {
    let line = |o: &std::process::Output| {
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(e.lines().count(), 1, "{e}");
        e
    };
    let o = Command::new(bin())
        .args(["--watch", "-y", "/"])
        .output()
        .expect("runs");
    assert_eq!(code(&o), 16, "{}", line(&o));
    let o = Command::new(bin())
        .args(["--log", "/tmp/x.log", "/"])
        .output()
        .expect("runs");
    assert_eq!(code(&o), 16, "{}", line(&o));
    let o = Command::new(bin())
        .args(["--watch", "--min-interval", "soon"])
        .output()
        .expect("runs");
    assert_eq!(code(&o), 16, "{}", line(&o));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let o = Command::new(bin())
            .args(["--watch"])
            .output()
            .expect("runs");
        assert_eq!(code(&o), 20, "{}", line(&o));
        return;
    }
    // /proc is not ext2/3/4; a plain directory is not a mount point.
    let o = Command::new(bin())
        .args(["--watch", "/proc"])
        .output()
        .expect("runs");
    assert_eq!(code(&o), 22, "{}", line(&o));
    assert!(line(&o).contains("proc mount"));
    let scratch = Scratch::new("watch-refuse");
    let o = Command::new(bin())
        .arg("--watch")
        .arg(scratch.path(""))
        .output()
        .expect("runs");
    assert_eq!(code(&o), 22, "{}", line(&o));
    if Path::new("/usr/bin/setpriv").exists() {
        let o = Command::new("/usr/bin/setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin())
            .arg("--watch")
            .output()
            .expect("runs");
        assert_eq!(code(&o), 20, "{}", line(&o));
    }
}

/// `--on-error` runs with the report on its standard input and the mount
/// in its environment; `--log` appends the records to a file.
#[test]
fn on_error_gets_the_report_and_log_gets_the_records() {
    let scratch = Scratch::new("watch-hook");
    if !can_watch(&scratch) {
        return;
    }
    let m = Mounted::new(&scratch, "hook", 32).expect("mount");
    cold_dir(&m);
    let log = scratch.path("watch.log");
    let got = scratch.path("hook.json");
    let hook = format!(
        "cat > {0}.tmp; echo \"$EXT4CHK_MOUNT\" >> {0}.tmp; mv {0}.tmp {0}",
        got.display()
    );
    let w = Watching::start(
        &[
            "--log",
            log.to_str().expect("path"),
            "--on-error",
            &hook,
            m.mnt.to_str().expect("path"),
        ],
        &[],
    );
    let t = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("watching")
        && t.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    damage_dir_block(&m, 4096);
    list_dir(&m);
    let t = Instant::now();
    while !got.exists() && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(w.stop(), 0);
    let text = std::fs::read_to_string(&got).expect("the hook ran");
    let (report, mount) = text.rsplit_once("}\n").expect("report then mount");
    let v: Value = serde_json::from_str(&format!("{report}}}")).expect("a JSON report");
    assert_eq!(v["exit_code"], 6, "{v}");
    assert_eq!(mount.trim(), mount_str(&m));
    let lines = std::fs::read_to_string(&log).expect("log");
    let kinds: Vec<String> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("a JSON line")["type"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    for k in ["watch", "event", "check", "finding"] {
        assert!(kinds.iter().any(|x| x == k), "{k} missing: {lines}");
    }
}

/// The systemd units verify (with the built binary as ExecStart) where
/// systemd-analyze is installed, and the watch's unit sandboxes itself.
#[test]
fn the_systemd_units_verify() {
    let Some(analyze) = common::find_tool("systemd-analyze") else {
        eprintln!("skipping: no systemd-analyze");
        return;
    };
    let scratch = Scratch::new("watch-units");
    let units = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/systemd");
    let mut paths = Vec::new();
    for name in [
        "ext4chk-watch.service",
        "ext4chk-scrub@.service",
        "ext4chk-scrub-all.service",
        "ext4chk-scrub-all.timer",
    ] {
        let text = std::fs::read_to_string(units.join(name)).expect("unit");
        if name == "ext4chk-watch.service" {
            for key in [
                "ExecStart=/usr/local/bin/ext4chk --watch",
                "NoNewPrivileges=yes",
                "ProtectSystem=strict",
                "SyslogIdentifier=ext4chk",
            ] {
                assert!(text.contains(key), "{name} lacks {key}");
            }
        }
        // The man page may not be installed here: the link is not checked.
        let text: String = text
            .lines()
            .filter(|l| !l.starts_with("Documentation="))
            .map(|l| l.replace("/usr/local/bin/ext4chk", bin().to_str().expect("path")) + "\n")
            .collect();
        let p = scratch.path(name);
        std::fs::write(&p, text).expect("write");
        paths.push(p);
    }
    let o = Command::new(analyze)
        .arg("verify")
        .args(&paths)
        .output()
        .expect("runs");
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
