//! Multiple-mount protection, against the real e2fsck: a repair waits on
//! the protection block, refuses a file system another node keeps using
//! or another checker marked, marks the block while it runs and cleans it
//! at the end; a read-only check only reads it.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{code, find_tool, have_all, mke2fs, Scratch};
use ext4_layout::mmp::{self, Mmp, MmpMut};
use ext4_layout::superblock::Superblock;

/// Where an image's protection block is, and its checksum seed.
fn place(img: &Path) -> (u64, Option<u32>) {
    let b = std::fs::read(img).expect("image");
    let sb = Superblock::new(&b[1024..2048]).expect("superblock");
    let bs = 1024u64 << sb.s_log_block_size();
    let csum = sb
        .ro_compat()
        .contains(ext4_layout::features::RoCompatFeatures::METADATA_CSUM);
    (sb.s_mmp_block() * bs, csum.then(|| sb.csum_seed()))
}

fn read_record(img: &Path) -> Vec<u8> {
    let (at, _) = place(img);
    let f = std::fs::File::open(img).expect("open");
    let mut b = vec![0u8; mmp::RECORD_SIZE];
    f.read_exact_at(&mut b, at).expect("read");
    b
}

/// Writes sequence `seq` into the block, as another node would.
fn write_seq(img: &Path, seq: u32, node: &str) {
    let (at, seed) = place(img);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .read(true)
        .open(img)
        .expect("open");
    let mut b = vec![0u8; mmp::RECORD_SIZE];
    f.read_exact_at(&mut b, at).expect("read");
    let mut m = MmpMut::new(&mut b);
    m.set(mmp::field::mmp_seq, seq);
    m.set_names(node, "/dev/other");
    if let Some(s) = seed {
        m.update_checksum(s);
    }
    f.write_all_at(&b, at).expect("write");
    f.sync_all().expect("sync");
}

fn seq(img: &Path) -> u32 {
    Mmp::new(&read_record(img)).expect("record").mmp_seq()
}

fn run(prog: &Path, args: &[&str], img: &Path) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(prog)
        .args(args)
        .arg(img)
        .env("LC_ALL", "C")
        .env("E2FSCK_CONFIG", "/dev/null")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("runs");
    (out, t.elapsed())
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A node that keeps using the file system: a new sequence number every
/// second until dropped.
struct OtherNode {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OtherNode {
    fn start(img: PathBuf) -> OtherNode {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut n = 1000u32;
            while !s.load(Ordering::SeqCst) {
                write_seq(&img, n, "othernode");
                n += 1;
                std::thread::sleep(Duration::from_millis(1000));
            }
        });
        OtherNode {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for OtherNode {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const FEATURES: [&[&str]; 2] = [
    &[
        "-O",
        "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize,mmp",
        "-I",
        "256",
        "-b",
        "1024",
    ],
    &[
        "-t",
        "ext4",
        "-b",
        "4096",
        "-O",
        "mmp,^metadata_csum,uninit_bg",
    ],
];

/// A 16 MiB image made with `mkfs` (mke2fs options) and the default
/// 5 s update interval: the base every case of feature set `i` copies.
fn base_image(scratch: &Scratch, i: usize, mkfs: &[&str]) -> PathBuf {
    let base = scratch.path(&format!("base{i}.img"));
    let mut args = mkfs.to_vec();
    args.extend_from_slice(&[
        "-E",
        "mmp_update_interval=5",
        base.to_str().expect("path"),
        "16M",
    ]);
    mke2fs(&args);
    base
}

/// One case on both tools at once (the waits are long): returns
/// (ours, e2fsck's), each with its copy of the image.
fn both(
    scratch: &Scratch,
    tag: &str,
    base: &Path,
    args: &[&str],
    prepare: impl Fn(&Path) + Sync,
    with_other_node: bool,
) -> [(Output, Duration, PathBuf); 2] {
    let ours = scratch.path("fsck.ext4");
    if !ours.exists() {
        std::os::unix::fs::symlink(common::bin(), &ours).expect("symlink");
    }
    let theirs = find_tool("e2fsck").expect("e2fsck");
    let progs = [ours, theirs];
    let mut results = Vec::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = progs
            .iter()
            .enumerate()
            .map(|(i, prog)| {
                let img = scratch.path(&format!("{tag}-{i}.img"));
                std::fs::copy(base, &img).expect("copy");
                prepare(&img);
                let prepare_done = img.clone();
                s.spawn(move || {
                    let _node = with_other_node.then(|| OtherNode::start(prepare_done.clone()));
                    if with_other_node {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    let (out, took) = run(prog, args, &img);
                    (out, took, img)
                })
            })
            .collect();
        for h in handles {
            results.push(h.join().expect("thread"));
        }
    });
    let b = results.pop().expect("theirs");
    let a = results.pop().expect("ours");
    [a, b]
}

#[test]
fn multiple_mount_protection_as_e2fsck_runs_it() {
    if !have_all(&["mke2fs", "e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("mmp");
    let mut failures = Vec::new();
    for (i, mkfs) in FEATURES.iter().enumerate() {
        let base = base_image(&scratch, i, mkfs);
        assert_eq!(seq(&base), mmp::SEQ_CLEAN, "mke2fs leaves it clean");
        let ctx = format!("{mkfs:?}");

        // Nobody uses it: the repair waits twice the interval (and a
        // second), claims it, marks it while it runs, and cleans it.
        let [(o, took, a), (t, _, _)] = both(
            &scratch,
            &format!("clean{i}"),
            &base,
            &["-fy"],
            |_| {},
            false,
        );
        if code(&o) != code(&t) || code(&o) != 0 {
            failures.push(format!(
                "{ctx} clean: exit {} vs e2fsck's {}\n{}",
                code(&o),
                code(&t),
                text(&o)
            ));
        }
        if took < Duration::from_secs(11) {
            failures.push(format!(
                "{ctx} clean: took {took:?}, less than the 11 s watch"
            ));
        }
        if seq(&a) != mmp::SEQ_CLEAN {
            failures.push(format!("{ctx} clean: left sequence {:#x}", seq(&a)));
        }
        if code(&common::tool("e2fsck", &["-fn", a.to_str().expect("path")])) != 0 {
            failures.push(format!("{ctx} clean: e2fsck -fn finds problems afterwards"));
        }

        // A checker killed while it ran left the block marked: both
        // refuse at once, with exit 12, and leave the mark.
        for args in [&["-fy"][..], &["-fn"], &["-p"]] {
            let [(o, took, a), (t, _, _)] = both(
                &scratch,
                &format!("fsck{i}"),
                &base,
                args,
                |img| write_seq(img, mmp::SEQ_FSCK, "deadnode"),
                false,
            );
            if code(&o) != 12 || code(&o) != code(&t) {
                failures.push(format!(
                    "{ctx} marked {args:?}: exit {} vs e2fsck's {}\n{}",
                    code(&o),
                    code(&t),
                    text(&o)
                ));
            }
            if !text(&o).contains("clear_mmp") || !text(&o).contains("deadnode") {
                failures.push(format!(
                    "{ctx} marked {args:?}: the message names neither the node nor the remedy:\n{}",
                    text(&o)
                ));
            }
            if took > Duration::from_secs(3) || seq(&a) != mmp::SEQ_FSCK {
                failures.push(format!(
                    "{ctx} marked {args:?}: took {took:?}, left {:#x}",
                    seq(&a)
                ));
            }
        }

        // An operation nothing names: refused the same way.
        let [(o, _, _), (t, _, _)] = both(
            &scratch,
            &format!("unknown{i}"),
            &base,
            &["-fy"],
            |img| write_seq(img, mmp::SEQ_FSCK + 7, "x"),
            false,
        );
        if code(&o) != 12 || code(&o) != code(&t) {
            failures.push(format!(
                "{ctx} unknown: exit {} vs e2fsck's {}\n{}",
                code(&o),
                code(&t),
                text(&o)
            ));
        }

        // Another node keeps writing it: the repair refuses after its
        // watch, with exit 8, and writes nothing of its own.
        let [(o, took, a), (t, _, _)] =
            both(&scratch, &format!("busy{i}"), &base, &["-fy"], |_| {}, true);
        if code(&o) != 8 || code(&o) != code(&t) {
            failures.push(format!(
                "{ctx} busy: exit {} vs e2fsck's {}\n{}",
                code(&o),
                code(&t),
                text(&o)
            ));
        }
        if !text(&o).contains("othernode") {
            failures.push(format!(
                "{ctx} busy: the message does not name the node:\n{}",
                text(&o)
            ));
        }
        if took > Duration::from_secs(20) {
            failures.push(format!("{ctx} busy: took {took:?}"));
        }
        let rec = read_record(&a);
        let left = Mmp::new(&rec).expect("record");
        if left.mmp_nodename() != "othernode" {
            failures.push(format!(
                "{ctx} busy: the block was written by us ({})",
                left.mmp_nodename()
            ));
        }

        // A read-only check reads it and goes on at once, writing nothing.
        let busy = scratch.path(&format!("ro{i}.img"));
        std::fs::copy(&base, &busy).expect("copy");
        write_seq(&busy, 1234, "othernode");
        let before = std::fs::read(&busy).expect("image");
        let (o, took) = run(&scratch.path("fsck.ext4"), &["-fn"], &busy);
        if code(&o) != 0 || took > Duration::from_secs(3) {
            failures.push(format!(
                "{ctx} -n: exit {}, took {took:?}\n{}",
                code(&o),
                text(&o)
            ));
        }
        if std::fs::read(&busy).expect("image") != before {
            failures.push(format!("{ctx} -n: the image changed"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A protection block that is not one (bad magic, all zeros), fails its
/// checksum, or lies outside the file system, as e2fsck meets it: a
/// read-only check stops (exit 12); a repair or preen writes the block
/// afresh and goes on (exit 0, and e2fsck -fn is clean after), or, for a
/// block outside the file system, stops with exit 8, as e2fsck does.
/// Every case runs on both tools at once (each waits on the block).
#[test]
fn a_damaged_protection_block_is_fixed_as_e2fsck_fixes_it() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let scratch = Scratch::new("mmp-bad");
    let mut cases = Vec::new();
    for (i, mkfs) in FEATURES.iter().enumerate() {
        let base = base_image(&scratch, i, mkfs);
        let csum = place(&base).1.is_some();
        for damage in ["magic", "zero", "csum", "outside"] {
            if damage == "csum" && !csum {
                continue;
            }
            for args in [&["-fn"][..], &["-fy"], &["-fp"]] {
                cases.push((i, base.clone(), damage, args));
            }
        }
    }
    let damage_it = |img: &Path, damage: &str| {
        let (at, _) = place(img);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(img)
            .expect("open");
        match damage {
            "magic" => f.write_all_at(&[0u8; 4], at).expect("write"),
            "zero" => f.write_all_at(&[0u8; 1024], at).expect("write"),
            // A byte of the node name: the checksum no longer matches.
            "csum" => f.write_all_at(b"X", at + 0x10).expect("write"),
            _ => {
                let out = common::tool(
                    "debugfs",
                    &[
                        "-w",
                        "-R",
                        "ssv mmp_block 99999999",
                        img.to_str().expect("path"),
                    ],
                );
                assert!(out.status.success(), "debugfs ssv mmp_block");
            }
        }
    };
    // `both` runs ours as fsck.ext4: the link is made once, before the
    // threads.
    std::os::unix::fs::symlink(common::bin(), scratch.path("fsck.ext4")).expect("symlink");
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (n, (i, base, damage, args)) in cases.iter().enumerate() {
            let failures = &failures;
            let scratch = &scratch;
            s.spawn(move || {
                let tag = format!("{damage}{i}-{n}");
                let [(o, _, a), (t, _, _)] = both(
                    scratch,
                    &tag,
                    base,
                    args,
                    |img| damage_it(img, damage),
                    false,
                );
                let ctx = format!("features {i}, {damage}, {args:?}");
                let mut bad = Vec::new();
                if code(&o) != code(&t) {
                    bad.push(format!(
                        "{ctx}: exit {} vs e2fsck's {}\n{}",
                        code(&o),
                        code(&t),
                        text(&o)
                    ));
                }
                if args[0] != "-fn" && *damage != "outside" {
                    if seq(&a) != mmp::SEQ_CLEAN {
                        bad.push(format!("{ctx}: left sequence {:#x}", seq(&a)));
                    }
                    let after = common::tool("e2fsck", &["-fn", a.to_str().expect("path")]);
                    if code(&after) != 0 {
                        bad.push(format!(
                            "{ctx}: e2fsck -fn exits {} after\n{}",
                            code(&after),
                            String::from_utf8_lossy(&after.stdout)
                        ));
                    }
                }
                failures.lock().expect("lock").extend(bad);
            });
        }
    });
    let failures = failures.into_inner().expect("lock");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
