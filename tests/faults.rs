//! I/O faults and power cuts, through a device wrapper (`tests/faults/
//! shim.rs`, loaded with `LD_PRELOAD`) that fails chosen reads, writes and
//! flushes of the device and the undo file, and records every write.
//!
//! * Failed and short reads: for blocks e2fsck reads on each fixture
//!   kind, the same block is made unreadable for `e2fsck -fn` and for
//!   `ext4chk -n`; the exit codes are the same, nothing panics, and
//!   ext4chk names the block.
//! * Failed writes (EIO on the device, ENOSPC on the undo file, a failing
//!   flush) during repairs of damaged images: the repair stops at once
//!   with exit 8 or 12 and one clear message, nothing is written after
//!   the failure, the stock e2undo puts back the original byte for byte,
//!   and a second repair completes.
//! * Power cuts: every write of a repair and its flush points are
//!   recorded; at each flush point, and for random subsets of the writes
//!   in flight after it, the image and the undo file a crash would leave
//!   are built; e2undo restores the original from them, and a repair of
//!   the crashed image leaves it clean by `e2fsck -fn`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{bin, code, fixture_images_wide, have_all, par_map, Rng, FIXTURES};

/// Builds the wrapper once per test process; `None` without rustc.
fn shim() -> Option<&'static Path> {
    static SHIM: OnceLock<Option<PathBuf>> = OnceLock::new();
    SHIM.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/faults/shim.rs");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("faultshim-{}.so", std::process::id()));
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let ok = Command::new(rustc)
            .args(["--edition", "2021", "-O", "--crate-type", "cdylib", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "the fault wrapper does not build");
        Some(out)
    })
    .as_deref()
}

/// Runs `prog args` with the wrapper in front of `dev` (and `undo`) and
/// the given fault settings.
fn under(
    prog: &Path,
    args: &[&str],
    dev: &Path,
    undo: Option<&Path>,
    env: &[(&str, String)],
) -> Output {
    let mut c = Command::new(prog);
    c.args(args)
        .env("LD_PRELOAD", shim().expect("wrapper"))
        .env("FAULT_DEV", dev)
        .env("LC_ALL", "C")
        .env("TZ", "GMT0")
        .env("E2FSCK_CONFIG", "/dev/null")
        .stdin(std::process::Stdio::null());
    if let Some(u) = undo {
        c.env("FAULT_UNDO", u);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs")
}

fn e2fsck() -> PathBuf {
    common::find_tool("e2fsck").expect("e2fsck")
}

/// One record of the wrapper's log.
#[derive(Clone, Debug)]
struct Rec {
    kind: u8,
    off: u64,
    len: u64,
    data: Vec<u8>,
}

const DEV_WRITE: u8 = 1;
const UNDO_WRITE: u8 = 2;
const DEV_FLUSH: u8 = 3;
const UNDO_FLUSH: u8 = 4;
const DEV_READ: u8 = 5;

fn read_log(p: &Path) -> Vec<Rec> {
    let b = std::fs::read(p).unwrap_or_default();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 13 <= b.len() {
        let kind = b[i];
        let off = u64::from_le_bytes(b[i + 1..i + 9].try_into().expect("8 bytes"));
        let len = u64::from(u32::from_le_bytes(
            b[i + 9..i + 13].try_into().expect("4 bytes"),
        ));
        i += 13;
        let n = if kind == DEV_WRITE || kind == UNDO_WRITE {
            len as usize
        } else {
            0
        };
        out.push(Rec {
            kind,
            off,
            len,
            data: b[i..i + n].to_vec(),
        });
        i += n;
    }
    out
}

fn block_size(img: &Path) -> u64 {
    let b = std::fs::read(img).expect("image");
    1024 << u32::from_le_bytes(b[1024 + 24..1024 + 28].try_into().expect("4 bytes"))
}

/// The blocks `e2fsck -fn` reads on `img`.
fn blocks_e2fsck_reads(img: &Path, scratch: &Path) -> (u64, Vec<u64>) {
    let log = scratch.join("reads.log");
    let _ = std::fs::remove_file(&log);
    let o = under(
        &e2fsck(),
        &["-fn", img.to_str().expect("path")],
        img,
        None,
        &[("FAULT_LOG", log.display().to_string())],
    );
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stdout));
    let bs = block_size(img);
    let mut set = BTreeSet::new();
    for r in read_log(&log).into_iter().filter(|r| r.kind == DEV_READ) {
        let mut b = r.off / bs;
        while b * bs < r.off + r.len {
            set.insert(b);
            b += 1;
        }
    }
    (bs, set.into_iter().collect())
}

fn scratch_dir(what: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("faults-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch");
    d
}

/// Blocks per fixture kind whose reads are made to fail.
const READ_FAULTS_PER_KIND: usize = 24;

#[test]
fn unreadable_blocks_are_met_as_e2fsck_meets_them() {
    if !have_all(&["mke2fs", "e2fsck", "dumpe2fs"]) {
        return;
    }
    let Some(dir) = fixture_images_wide(300) else {
        return;
    };
    let work = scratch_dir("reads");
    let mut cases = Vec::new();
    for kind in FIXTURES {
        let img = dir.join(format!("{kind}.img"));
        let (bs, blocks) = blocks_e2fsck_reads(&img, &work);
        let mut r = Rng::new(kind);
        let mut chosen = BTreeSet::new();
        // The first blocks read (superblock, descriptors, journal), then a
        // spread of the rest.
        chosen.extend(blocks.iter().take(6));
        while chosen.len() < READ_FAULTS_PER_KIND.min(blocks.len()) {
            chosen.insert(blocks[r.below(blocks.len() as u64) as usize]);
        }
        for (i, b) in chosen.into_iter().enumerate() {
            // The whole block is bad (as a disk's bad sectors fail every
            // read touching them); every other case is a short read.
            let fault = if i % 2 == 0 {
                "FAULT_READ_EIO"
            } else {
                "FAULT_READ_SHORT"
            };
            cases.push((img.clone(), *kind, b, bs, fault));
        }
    }
    let results = par_map(&cases, |(img, kind, b, bs, fault)| {
        let env = [
            (*fault, (b * bs).to_string()),
            ("FAULT_READ_LEN", bs.to_string()),
        ];
        let p = img.to_str().expect("path");
        let theirs = under(&e2fsck(), &["-fn", p], img, None, &env);
        let ours = under(&bin(), &["--io", "pread", "-fn", p], img, None, &env);
        let (e, o) = (code(&theirs), code(&ours));
        let text = String::from_utf8_lossy(&ours.stdout).to_string()
            + &String::from_utf8_lossy(&ours.stderr);
        let mut problems = Vec::new();
        if text.contains("panicked") || o > 16 {
            problems.push(format!("ext4chk crashed ({o})"));
        }
        if e != o {
            problems.push(format!("e2fsck -fn {e}, ext4chk -n {o}"));
        }
        let named = format!("block {b}");
        if e != 0
            && String::from_utf8_lossy(&theirs.stdout).contains(&named)
            && !text.contains(&named)
        {
            problems.push(format!("the message does not name block {b}"));
        }
        let name = format!("{kind} block {b} ({fault})");
        (name, problems, text)
    });
    let failures: Vec<String> = results
        .iter()
        .filter(|(_, p, _)| !p.is_empty())
        .map(|(n, p, t)| {
            format!(
                "{n}: {}\n    {}",
                p.join("; "),
                t.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
            )
        })
        .collect();
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        failures.is_empty(),
        "{} of {} read faults met differently:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}

/// A damaged copy of each fixture kind: an inode cleared (its entry
/// dangles, its blocks are unowned), wrong link counts on a file and on
/// the root, an inode marked free while in use. Every pass has work.
fn damaged_images(dir: &Path, work: &Path) -> Vec<(String, Vec<u8>)> {
    FIXTURES
        .iter()
        .map(|kind| {
            let img = work.join(format!("{kind}-damaged.img"));
            std::fs::copy(dir.join(format!("{kind}.img")), &img).expect("copy");
            let p = img.to_str().expect("path");
            for cmd in [
                "clri <20>",
                "sif <30> links_count 7",
                "sif <2> links_count 9",
                "freei <50>",
            ] {
                let o = common::tool("debugfs", &["-w", "-R", cmd, p]);
                assert!(o.status.success(), "debugfs {cmd} on {kind}");
            }
            let bytes = std::fs::read(&img).expect("image");
            let _ = std::fs::remove_file(&img);
            (kind.to_string(), bytes)
        })
        .collect()
}

/// `e2fsck -fn`'s exit code on `img`.
fn e2fsck_fn(img: &Path) -> i32 {
    code(&common::tool(
        "e2fsck",
        &["-fn", img.to_str().expect("path")],
    ))
}

/// Repairs `img` with ext4chk (no faults); returns its exit code.
fn repair(img: &Path) -> i32 {
    code(&common::run(&["-fy", img.to_str().expect("path")]))
}

/// Replays `undo` onto `img` with the stock e2undo; returns its output
/// when it fails.
fn e2undo(undo: &Path, img: &Path) -> Result<(), String> {
    let o = common::tool(
        "e2undo",
        &[undo.to_str().expect("path"), img.to_str().expect("path")],
    );
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "e2undo exits {}: {}{}",
            code(&o),
            String::from_utf8_lossy(&o.stdout).trim(),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// A repair under the wrapper, logging every write; returns the output
/// and the log.
fn logged_repair(
    work: &Path,
    tag: &str,
    image: &[u8],
    env: &[(&str, String)],
) -> (PathBuf, PathBuf, Output, Vec<Rec>) {
    let img = work.join(format!("{tag}.img"));
    let undo = work.join(format!("{tag}.undo"));
    let log = work.join(format!("{tag}.log"));
    for p in [&undo, &log] {
        let _ = std::fs::remove_file(p);
    }
    std::fs::write(&img, image).expect("image");
    let mut env = env.to_vec();
    env.push(("FAULT_LOG", log.display().to_string()));
    let o = under(
        &bin(),
        &[
            "--io",
            "pread",
            "-fy",
            "-z",
            undo.to_str().expect("path"),
            img.to_str().expect("path"),
        ],
        &img,
        Some(&undo),
        &env,
    );
    let recs = read_log(&log);
    let _ = std::fs::remove_file(&log);
    (img, undo, o, recs)
}

const DEV_WRITE_REFUSED: u8 = 6;
const UNDO_WRITE_REFUSED: u8 = 7;

#[test]
fn failed_writes_stop_the_repair_and_the_undo_file_puts_everything_back() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "e2undo"]) {
        return;
    }
    let Some(dir) = fixture_images_wide(300) else {
        return;
    };
    let work = scratch_dir("writes");
    let images = damaged_images(&dir, &work);
    // How many writes and flushes a repair of each makes, to aim at the
    // first, a middle and the last one.
    let mut cases = Vec::new();
    for (kind, bytes) in &images {
        let (img, undo, o, recs) = logged_repair(&work, &format!("{kind}-plain"), bytes, &[]);
        assert_eq!(code(&o), 1, "{kind}: the repair without faults");
        let _ = std::fs::remove_file(img);
        let _ = std::fs::remove_file(undo);
        let count = |k: u8| recs.iter().filter(|r| r.kind == k).count() as u64;
        let (w, f, u) = (count(DEV_WRITE), count(DEV_FLUSH), count(UNDO_WRITE));
        assert!(
            w > 2 && f > 1 && u > 2,
            "{kind}: {w} writes, {f} flushes, {u} undo writes"
        );
        for n in [1, w / 2, w] {
            cases.push((kind.clone(), "FAULT_WRITE_EIO", n));
        }
        for n in [1, f] {
            cases.push((kind.clone(), "FAULT_FLUSH_EIO", n));
        }
        for n in [1, u / 2, u] {
            cases.push((kind.clone(), "FAULT_UNDO_ENOSPC", n));
        }
    }
    let results = par_map(&cases, |(kind, fault, n)| {
        let original = &images.iter().find(|(k, _)| k == kind).expect("image").1;
        let tag = format!("{kind}-{fault}-{n}");
        let (img, undo, o, recs) = logged_repair(&work, &tag, original, &[(*fault, n.to_string())]);
        let mut problems = Vec::new();
        let rc = code(&o);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        if rc != 8 && rc != 12 {
            problems.push(format!("exit {rc}, not 8 or 12"));
        }
        if (out.clone() + &err).contains("panicked") {
            problems.push("panicked".into());
        }
        let why = if *fault == "FAULT_UNDO_ENOSPC" {
            "No space left on device"
        } else {
            "Input/output error"
        };
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(why)).collect();
        if lines.len() != 1 {
            problems.push(format!(
                "{} lines of stderr say {why:?}: {err:?}",
                lines.len()
            ));
        }
        // Nothing reaches the device after the failure.
        let failed_at = recs.iter().position(|r| match *fault {
            "FAULT_WRITE_EIO" => r.kind == DEV_WRITE_REFUSED,
            "FAULT_UNDO_ENOSPC" => r.kind == UNDO_WRITE_REFUSED,
            _ => false,
        });
        let failed_at = failed_at.or_else(|| {
            // A failed flush is not logged: it is the `n`th flush attempt,
            // the one after the last logged flush.
            (*fault == "FAULT_FLUSH_EIO").then(|| {
                let mut seen = 0;
                recs.iter()
                    .position(|r| {
                        if r.kind == DEV_FLUSH {
                            seen += 1;
                        }
                        seen == *n - 1 && r.kind == DEV_WRITE
                    })
                    .map_or(recs.len(), |_| {
                        recs.iter()
                            .rposition(|r| r.kind == DEV_WRITE)
                            .map_or(recs.len(), |i| i + 1)
                    })
            })
        });
        match failed_at {
            None => problems.push("the fault was never reached".into()),
            Some(i) => {
                // Only the old primary superblock may go back (when the
                // undo file cannot take the new one's copy).
                let later = recs[i..]
                    .iter()
                    .filter(|r| r.kind == DEV_WRITE && !(r.off < 2048 && r.off + r.len > 1024))
                    .count();
                if later > 0 {
                    problems.push(format!("{later} device writes after the failure"));
                }
            }
        }
        // The stock e2undo puts back every byte.
        let undone = work.join(format!("{tag}-undone.img"));
        std::fs::copy(&img, &undone).expect("copy");
        let wrote = recs.iter().any(|r| r.kind == DEV_WRITE);
        if wrote {
            if let Err(e) = e2undo(&undo, &undone) {
                problems.push(e);
            }
        }
        if std::fs::read(&undone).expect("image") != *original {
            problems.push("after e2undo the image is not the original".into());
        }
        // A second repair, without faults, completes.
        let again = repair(&img);
        let after = e2fsck_fn(&img);
        if !matches!(again, 0 | 1) || after != 0 {
            problems.push(format!(
                "the second repair exits {again}, then e2fsck -fn {after}"
            ));
        }
        for p in [&img, &undo, &undone] {
            let _ = std::fs::remove_file(p);
        }
        (tag, problems, err)
    });
    let _ = std::fs::remove_dir_all(&work);
    let failures: Vec<String> = results
        .iter()
        .filter(|(_, p, _)| !p.is_empty())
        .map(|(n, p, e)| format!("{n}: {}\n    {}", p.join("; "), e.trim()))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed writes mishandled:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}

/// The files a crash would leave: `image` with `writes` applied in order.
fn apply_writes(mut image: Vec<u8>, writes: &[&Rec]) -> Vec<u8> {
    for w in writes {
        let end = (w.off + w.len) as usize;
        if image.len() < end {
            image.resize(end, 0);
        }
        image[w.off as usize..end].copy_from_slice(&w.data);
    }
    image
}

/// One crash: how many records of the log had been issued, and which of
/// the writes still in flight (issued after their file's last flush)
/// reached the disk.
struct Crash {
    issued: usize,
    kept: Vec<bool>,
}

/// The image and the undo file a crash leaves.
fn crashed(original: &[u8], recs: &[Rec], c: &Crash) -> (Vec<u8>, Vec<u8>) {
    let prefix = &recs[..c.issued];
    let last_flush = |flush: u8| prefix.iter().rposition(|r| r.kind == flush);
    let mut in_flight = 0;
    let mut pick = |kind: u8, flush: u8| -> Vec<&Rec> {
        let durable_to = last_flush(flush).map_or(0, |i| i + 1);
        prefix
            .iter()
            .enumerate()
            .filter(|(_, r)| r.kind == kind)
            .filter(|(i, _)| {
                if *i < durable_to {
                    return true;
                }
                let keep = c.kept.get(in_flight).copied().unwrap_or(true);
                in_flight += 1;
                keep
            })
            .map(|(_, r)| r)
            .collect()
    };
    let dev = pick(DEV_WRITE, DEV_FLUSH);
    let undo = pick(UNDO_WRITE, UNDO_FLUSH);
    (
        apply_writes(original.to_vec(), &dev),
        apply_writes(Vec::new(), &undo),
    )
}

/// The index after which only the primary superblock is written: the
/// last device write elsewhere.
fn last_other_write(recs: &[Rec]) -> usize {
    recs.iter()
        .rposition(|r| r.kind == DEV_WRITE && !(r.off < 2048 && r.off + r.len > 1024))
        .map_or(0, |i| i + 1)
}

/// Whether `b` is `a` but for what `e2undo -f` changes on purpose: the
/// superblock's state (it clears "cleanly unmounted"), its last write
/// time and its checksum.
fn same_but_state(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() || a.len() < 2048 {
        return false;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    for v in [&mut a, &mut b] {
        // s_wtime (0x30) and s_wtime_hi (0x274), s_state (0x3A),
        // s_checksum (0x3FC).
        v[1024 + 0x30..1024 + 0x34].fill(0);
        v[1024 + 0x274] = 0;
        v[1024 + 0x3A..1024 + 0x3C].fill(0);
        v[1024 + 0x3FC..1024 + 0x400].fill(0);
    }
    a == b
}

/// Which 1 KiB blocks of `b` differ from `a`, for a failure message.
fn differing_blocks(a: &[u8], b: &[u8]) -> String {
    let n = a.len().max(b.len()).div_ceil(1024);
    let block = |v: &[u8], i: usize| {
        v.get(i * 1024..((i + 1) * 1024).min(v.len()))
            .map(<[u8]>::to_vec)
    };
    let diff: Vec<String> = (0..n)
        .filter(|&i| block(a, i) != block(b, i))
        .map(|i| i.to_string())
        .collect();
    let shown = diff.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
    let in_super: Vec<String> = (1024..2048.min(a.len()).min(b.len()))
        .filter(|&i| a[i] != b[i])
        .map(|i| format!("{:#x}", i - 1024))
        .take(12)
        .collect();
    format!(
        "{} KiB blocks differ: {shown}; superblock bytes: {}",
        diff.len(),
        in_super.join(" ")
    )
}

/// Crash points per flush point beyond the flush point itself: random
/// subsets of the writes in flight before the next one.
const SUBSETS_PER_FLUSH: usize = 2;

#[test]
fn power_cuts_during_a_repair_leave_an_undoable_and_repairable_image() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "e2undo"]) {
        return;
    }
    let Some(dir) = fixture_images_wide(300) else {
        return;
    };
    let work = scratch_dir("power");
    let images = damaged_images(&dir, &work);
    let mut cases = Vec::new();
    for (kind, original) in &images {
        let (img, undo, o, recs) = logged_repair(&work, &format!("{kind}-log"), original, &[]);
        assert_eq!(code(&o), 1, "{kind}: the repair");
        let _ = std::fs::remove_file(img);
        let _ = std::fs::remove_file(undo);
        let recs: Vec<Rec> = recs.into_iter().filter(|r| r.kind <= UNDO_FLUSH).collect();
        let flushes: Vec<usize> = recs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.kind == DEV_FLUSH || r.kind == UNDO_FLUSH)
            .map(|(i, _)| i + 1)
            .collect();
        let mut r = Rng::new(kind);
        for (j, &at) in flushes.iter().enumerate() {
            cases.push((
                kind.clone(),
                original,
                recs.clone(),
                Crash {
                    issued: at,
                    kept: Vec::new(),
                },
                cases.len(),
            ));
            // Just before the next flush, with some of the writes since
            // this one lost.
            let next = flushes.get(j + 1).map_or(recs.len(), |&n| n - 1);
            for _ in 0..SUBSETS_PER_FLUSH {
                let kept = (0..next.saturating_sub(at) + 64)
                    .map(|_| r.below(2) == 0)
                    .collect();
                cases.push((
                    kind.clone(),
                    original,
                    recs.clone(),
                    Crash { issued: next, kept },
                    cases.len(),
                ));
            }
        }
    }
    assert!(cases.len() >= 200, "{} crash points", cases.len());
    let results = par_map(&cases, |(kind, original, recs, crash, n)| {
        let tag = format!(
            "{kind}-{n}-at-{}{}",
            crash.issued,
            if crash.kept.is_empty() {
                ""
            } else {
                "-some-lost"
            }
        );
        let (image, undo) = crashed(original, recs, crash);
        let img = work.join(format!("{tag}.img"));
        let und = work.join(format!("{tag}.undo"));
        let mut problems = Vec::new();
        let mut forced = false;
        std::fs::write(&img, &image).expect("image");
        if undo.is_empty() {
            if image != **original {
                problems.push("the device was written before the undo file".into());
            }
        } else {
            std::fs::write(&und, &undo).expect("undo");
            let mut refused = None;
            if let Err(e) = e2undo(&und, &img) {
                if e.contains("superblock doesn't match") {
                    refused = Some(e);
                } else {
                    problems.push(e);
                }
            }
            if let Some(e) = refused {
                // Only the superblock's own landing, the repair's last
                // write, may leave the device's superblock and the undo
                // file's copy of it apart: two files cannot change at
                // once. e2undo -f then puts every byte back but marks the
                // file system for a check, as it says it does.
                forced = true;
                if crash.issued <= last_other_write(recs) {
                    problems.push(format!(
                        "before the superblock's landing, e2undo refused: {e}"
                    ));
                }
                let o = common::tool(
                    "e2undo",
                    &[
                        "-f",
                        und.to_str().expect("path"),
                        img.to_str().expect("path"),
                    ],
                );
                if !o.status.success() {
                    problems.push(format!("e2undo -f exits {}", code(&o)));
                }
            }
            let undone = std::fs::read(&img).expect("image");
            let same = if forced {
                same_but_state(original, &undone)
            } else {
                undone == **original
            };
            if !same {
                problems.push(format!(
                    "after e2undo{} the image is not the original ({})",
                    if forced { " -f" } else { "" },
                    differing_blocks(original, &undone)
                ));
            }
        }
        // The crashed image, repaired again without undo, is clean, and
        // (at every fourth crash point) keeps every file e2fsck's repair
        // of the same crashed image keeps.
        std::fs::write(&img, &image).expect("image");
        let again = repair(&img);
        let after = e2fsck_fn(&img);
        if !matches!(again, 0 | 1) || after != 0 {
            problems.push(format!(
                "the repair of the crashed image exits {again}, then e2fsck -fn {after}"
            ));
        }
        if n % 4 == 0 {
            let theirs = work.join(format!("{tag}.e2fsck.img"));
            std::fs::write(&theirs, &image).expect("image");
            common::tool("e2fsck", &["-fy", theirs.to_str().expect("path")]);
            if e2fsck_fn(&theirs) == 0 {
                let trees = work.join(format!("{tag}.trees"));
                match common::files_lost(&theirs, &img, &trees) {
                    Some((lost, _)) if !lost.is_empty() => problems.push(format!(
                        "e2fsck -fy keeps files the repair does not: {}",
                        lost.join(", ")
                    )),
                    Some(_) => {}
                    None => problems.push("debugfs could not list the files".into()),
                }
                let _ = std::fs::remove_dir_all(&trees);
            }
            let _ = std::fs::remove_file(&theirs);
        }
        let _ = std::fs::remove_file(&img);
        let _ = std::fs::remove_file(&und);
        (tag, problems, forced)
    });
    let _ = std::fs::remove_dir_all(&work);
    let forced = results.iter().filter(|r| r.2).count();
    eprintln!(
        "{} crash points over {} damaged images; {forced} in the superblock's landing needed e2undo -f",
        results.len(),
        images.len()
    );
    let failures: Vec<String> = results
        .iter()
        .filter(|(_, p, _)| !p.is_empty())
        .map(|(n, p, _)| format!("{n}: {}", p.join("; ")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} crash points failed:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}

/// Starts `prog args` under the wrapper with every device read slowed,
/// sends `signal` after `after`, and returns the output, the exit code and
/// how long the program took to end after the signal.
fn stopped_midway(
    prog: &Path,
    args: &[&str],
    dev: &Path,
    signal: nix::sys::signal::Signal,
    after: std::time::Duration,
) -> (Output, i32, std::time::Duration) {
    let child = Command::new(prog)
        .args(args)
        .env("LD_PRELOAD", shim().expect("wrapper"))
        .env("FAULT_DEV", dev)
        .env("FAULT_READ_DELAY_US", "2000")
        .env("LC_ALL", "C")
        .env("TZ", "GMT0")
        .env("E2FSCK_CONFIG", "/dev/null")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    std::thread::sleep(after);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(pid, signal).expect("signal");
    let out = child.wait_with_output().expect("wait");
    let took = sent.elapsed();
    let c = code(&out);
    (out, c, took)
}

/// Ctrl-C (SIGINT) and SIGTERM stop a read-only check within a second,
/// with what it found so far marked as incomplete and e2fsck's exit code
/// 32; the real e2fsck, slowed and stopped the same way, exits 32 too.
#[test]
fn a_signal_stops_a_check_within_a_second() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck", "rustc"]) {
        return;
    }
    let scratch = common::Scratch::new("cancel");
    for (i, mkfs) in [
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "1024",
        ][..],
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,uninit_bg,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "1024",
        ],
        &["-t", "ext2", "-b", "1024"],
    ]
    .iter()
    .enumerate()
    {
        let img = scratch.path(&format!("slow{i}.img"));
        let mut args = mkfs.to_vec();
        args.extend_from_slice(&["-N", "65536", img.to_str().expect("path"), "256M"]);
        common::mke2fs(&args);
        // A problem in pass 4, so the report has something to say if the
        // check got that far.
        common::tool(
            "debugfs",
            &[
                "-w",
                "-R",
                "sif <2> links_count 9",
                img.to_str().expect("path"),
            ],
        );
        let p = img.to_str().expect("path");
        for (sig, json) in [
            (nix::sys::signal::Signal::SIGINT, false),
            (nix::sys::signal::Signal::SIGTERM, true),
        ] {
            let mut a = vec!["-fn", "--io", "pread"];
            if json {
                a.extend_from_slice(&["--format", "json"]);
            }
            a.push(p);
            let (out, c, took) =
                stopped_midway(&bin(), &a, &img, sig, std::time::Duration::from_millis(100));
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert_eq!(c & 32, 32, "{sig:?} {mkfs:?}: exit {c}\n{text}");
            assert!(
                took < std::time::Duration::from_secs(1),
                "{sig:?} {mkfs:?}: took {took:?} to stop"
            );
            if json {
                let v: serde_json::Value = serde_json::from_str(&text).expect("a JSON report");
                assert_eq!(v["cancelled"], true, "{text}");
                assert_eq!(v["exit_code"], c);
                assert!(v["summary"].is_null(), "no summary of a partial check");
            } else {
                assert!(text.contains("canceled"), "{text}");
                assert!(text.contains("Interrupted"), "{text}");
            }
        }
        let (out, c, _) = stopped_midway(
            &e2fsck(),
            &["-fn", p],
            &img,
            nix::sys::signal::Signal::SIGINT,
            // e2fsck takes its signals once it has opened the file system.
            std::time::Duration::from_millis(400),
        );
        assert_eq!(
            c & 32,
            32,
            "e2fsck: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The first block of group 0's inode table, and the block size.
fn inode_table_start(img: &Path) -> (u64, u64) {
    let out = common::tool("dumpe2fs", &[img.to_str().expect("path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let bs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Block size:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("block size");
    let start = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Inode table at "))
        .and_then(|v| v.split('-').next())
        .and_then(|v| v.trim().parse().ok())
        .expect("inode table");
    (start, bs)
}

/// A repair meets an unreadable inode-table block as e2fsck -y does: it
/// goes on, and writes the block back (which makes a disk remap it). When
/// only a sector of the block fails, the rest of the block is read sector
/// by sector and its inodes are kept: strictly more files than e2fsck
/// keeps, which loses the whole block.
#[test]
fn an_unreadable_inode_table_block_is_rewritten_and_the_repair_goes_on() {
    if !have_all(&["mke2fs", "e2fsck", "dumpe2fs", "debugfs", "rustc"]) {
        return;
    }
    let scratch = common::Scratch::new("itable-eio");
    let tree = scratch.path("tree");
    std::fs::create_dir_all(tree.join("d")).expect("tree");
    for i in 0..60 {
        std::fs::write(
            tree.join(format!("f{i:02}")),
            format!("file {i}\n").repeat(i + 1),
        )
        .expect("file");
    }
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for (n, mkfs) in [
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "1024",
        ][..],
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,uninit_bg,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "4096",
        ],
        &["-t", "ext2", "-b", "4096"],
    ]
    .iter()
    .enumerate()
    {
        let base = scratch.path(&format!("base{n}.img"));
        let mut args = mkfs.to_vec();
        args.extend_from_slice(&[
            "-I",
            "256",
            "-d",
            tree.to_str().expect("path"),
            base.to_str().expect("path"),
            "16M",
        ]);
        common::mke2fs(&args);
        let (start, bs) = inode_table_start(&base);
        // The table block holding inodes 17 onwards: files.
        let blk = start + 16 * 256 / bs;
        for (what, len) in [("the whole block", bs), ("one sector", 512)] {
            let env = [
                ("FAULT_READ_EIO", (blk * bs).to_string()),
                ("FAULT_READ_LEN", len.to_string()),
                ("FAULT_HEAL_ON_WRITE", "1".to_string()),
            ];
            let theirs = scratch.path(&format!("t{n}-{len}.img"));
            let ours = scratch.path(&format!("o{n}-{len}.img"));
            std::fs::copy(&base, &theirs).expect("copy");
            std::fs::copy(&base, &ours).expect("copy");
            let t = under(
                &e2fsck(),
                &["-fy", theirs.to_str().expect("path")],
                &theirs,
                None,
                &env,
            );
            let o = under(
                &bin(),
                &["--io", "pread", "-fy", ours.to_str().expect("path")],
                &ours,
                None,
                &env,
            );
            let ctx = format!("{mkfs:?}, {what} of block {blk}");
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            if code(&o) != code(&t) {
                failures.push(format!(
                    "{ctx}: exit {} vs e2fsck's {}\n{text}",
                    code(&o),
                    code(&t)
                ));
            }
            if !text.contains(&format!("block {blk} of the inode table")) {
                failures.push(format!(
                    "{ctx}: the unreadable block is not reported\n{text}"
                ));
            }
            for img in [&theirs, &ours] {
                let after = common::tool("e2fsck", &["-fn", img.to_str().expect("path")]);
                if code(&after) != 0 {
                    failures.push(format!(
                        "{ctx}: e2fsck -fn finds {} unclean\n{}",
                        img.display(),
                        String::from_utf8_lossy(&after.stdout)
                    ));
                }
            }
            let (Some((lost, _)), Some(t_files), Some(o_files)) = (
                common::files_lost(&theirs, &ours, &scratch.0),
                common::file_tree(&theirs, &scratch.0),
                common::file_tree(&ours, &scratch.0),
            ) else {
                failures.push(format!("{ctx}: debugfs cannot list the files"));
                continue;
            };
            if !lost.is_empty() {
                failures.push(format!(
                    "{ctx}: files e2fsck keeps and ext4chk lost: {lost:?}"
                ));
            }
            if len == 512 && o_files.len() <= t_files.len() {
                failures.push(format!(
                    "{ctx}: ext4chk keeps {} files, e2fsck {}: no more",
                    o_files.len(),
                    t_files.len()
                ));
            }
            table.push(format!(
                "{ctx}: exit {} / e2fsck {}; files kept {} / e2fsck {} (of 60)",
                code(&o),
                code(&t),
                o_files.len(),
                t_files.len()
            ));
        }
    }
    eprintln!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The same for a directory block: the repair goes on as e2fsck -y does,
/// and when only the block's last sector fails, the entries before it are
/// kept in place (e2fsck loses the whole block, and its files go to
/// /lost+found).
#[test]
fn an_unreadable_directory_block_is_rewritten_and_the_repair_goes_on() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "rustc"]) {
        return;
    }
    let scratch = common::Scratch::new("dir-eio");
    let tree = scratch.path("tree");
    std::fs::create_dir_all(tree.join("d")).expect("tree");
    for i in 0..100 {
        std::fs::write(
            tree.join("d")
                .join(format!("a-file-with-a-longer-name-{i:03}")),
            format!("file {i}\n"),
        )
        .expect("file");
    }
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for (n, mkfs) in [
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "4096",
        ][..],
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,uninit_bg,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "4096",
        ],
        &["-t", "ext2", "-b", "4096"],
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "1024",
        ],
    ]
    .iter()
    .enumerate()
    {
        let base = scratch.path(&format!("base{n}.img"));
        let mut args = mkfs.to_vec();
        args.extend_from_slice(&[
            "-d",
            tree.to_str().expect("path"),
            base.to_str().expect("path"),
            "16M",
        ]);
        common::mke2fs(&args);
        let (_, bs) = inode_table_start(&base);
        let out = common::tool(
            "debugfs",
            &["-R", "blocks /d", base.to_str().expect("path")],
        );
        let blk: u64 = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .and_then(|b| b.parse().ok())
            .expect("a directory block");
        for (what, at, len) in [
            ("the whole block", blk * bs, bs),
            ("its last sector", (blk + 1) * bs - 512, 512),
        ] {
            let env = [
                ("FAULT_READ_EIO", at.to_string()),
                ("FAULT_READ_LEN", len.to_string()),
                ("FAULT_HEAL_ON_WRITE", "1".to_string()),
            ];
            let theirs = scratch.path(&format!("t{n}-{len}.img"));
            let ours = scratch.path(&format!("o{n}-{len}.img"));
            std::fs::copy(&base, &theirs).expect("copy");
            std::fs::copy(&base, &ours).expect("copy");
            let t = under(
                &e2fsck(),
                &["-fy", theirs.to_str().expect("path")],
                &theirs,
                None,
                &env,
            );
            let o = under(
                &bin(),
                &["--io", "pread", "-fy", ours.to_str().expect("path")],
                &ours,
                None,
                &env,
            );
            let ctx = format!("{mkfs:?}, {what} of directory block {blk}");
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            if code(&o) != code(&t) {
                failures.push(format!(
                    "{ctx}: exit {} vs e2fsck's {}\n{text}",
                    code(&o),
                    code(&t)
                ));
            }
            for img in [&theirs, &ours] {
                if code(&common::tool(
                    "e2fsck",
                    &["-fn", img.to_str().expect("path")],
                )) != 0
                {
                    failures.push(format!("{ctx}: e2fsck -fn finds {} unclean", img.display()));
                }
            }
            let (Some((lost, _)), Some(t_files), Some(o_files)) = (
                common::files_lost(&theirs, &ours, &scratch.0),
                common::file_tree(&theirs, &scratch.0),
                common::file_tree(&ours, &scratch.0),
            ) else {
                failures.push(format!("{ctx}: debugfs cannot list the files"));
                continue;
            };
            if !lost.is_empty() {
                failures.push(format!(
                    "{ctx}: files e2fsck keeps and ext4chk lost: {lost:?}"
                ));
            }
            // Files still under /d, by their names.
            let in_place = |m: &std::collections::BTreeMap<String, String>| {
                m.keys().filter(|p| p.starts_with("/d/")).count()
            };
            if len == 512 && bs == 4096 && in_place(&o_files) <= in_place(&t_files) {
                failures.push(format!(
                    "{ctx}: {} files keep their names, e2fsck's {}: no more",
                    in_place(&o_files),
                    in_place(&t_files)
                ));
            }
            table.push(format!(
                "{ctx}: exit {} / e2fsck {}; files {} / e2fsck {}, named in /d {} / e2fsck {} (of 100)",
                code(&o),
                code(&t),
                o_files.len(),
                t_files.len(),
                in_place(&o_files),
                in_place(&t_files)
            ));
        }
    }
    eprintln!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The other metadata a repair reads, unreadable: a block bitmap, an
/// inode bitmap and a file's extent-tree block (whole, and one sector).
/// Against e2fsck -y under the same faults: the same exit code, both
/// clean afterwards, and every file e2fsck keeps kept.
#[test]
fn unreadable_bitmaps_and_extent_blocks_meet_e2fsck_y() {
    if !have_all(&["mke2fs", "e2fsck", "dumpe2fs", "debugfs", "rustc"]) {
        return;
    }
    let scratch = common::Scratch::new("meta-eio");
    let tree = scratch.path("tree");
    std::fs::create_dir_all(&tree).expect("tree");
    // A file in many pieces (holes between them), so that its extents
    // need a tree block; and some plain files.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(tree.join("pieces")).expect("file");
        for i in 0..40u64 {
            f.write_all_at(&[b'p'; 4096], i * 3 * 65536).expect("write");
        }
    }
    for i in 0..20 {
        std::fs::write(
            tree.join(format!("f{i:02}")),
            format!("file {i}\n").repeat(i + 1),
        )
        .expect("file");
    }
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for (n, mkfs) in [
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "4096",
        ][..],
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,uninit_bg,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "4096",
        ],
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "1024",
        ],
    ]
    .iter()
    .enumerate()
    {
        let base = scratch.path(&format!("base{n}.img"));
        let mut args = mkfs.to_vec();
        args.extend_from_slice(&[
            "-d",
            tree.to_str().expect("path"),
            base.to_str().expect("path"),
            "64M",
        ]);
        common::mke2fs(&args);
        let p = base.to_str().expect("path");
        let dump = String::from_utf8_lossy(&common::tool("dumpe2fs", &[p]).stdout).into_owned();
        let (_, bs) = inode_table_start(&base);
        let first = |key: &str| -> u64 {
            dump.lines()
                .find_map(|l| l.trim().strip_prefix(key))
                .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|v| v.parse().ok())
                .expect(key)
        };
        let bbitmap = first("Block bitmap at ");
        let ibitmap = first("Inode bitmap at ");
        // The extent tree's leaf block: the index entry's target
        // (debugfs ex lists level 0 first, "0/ 1 ... BLK").
        let ex = Command::new(common::find_tool("debugfs").expect("debugfs"))
            .args(["-R", "ex /pieces", p])
            .env("DEBUGFS_PAGER", "__none__")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let leaf: Option<u64> = ex
            .lines()
            .find(|l| l.trim_start().starts_with("0/"))
            .and_then(|l| {
                // "0/ 1   1/  1     0 -  1872  2070  1873": the block
                // follows the logical range.
                let t: Vec<&str> = l.split_whitespace().collect();
                let dash = t.iter().position(|&x| x == "-")?;
                t.get(dash + 2).copied()
            })
            .and_then(|v| v.parse().ok());
        let Some(leaf) = leaf else {
            failures.push(format!("{mkfs:?}: /pieces has no extent tree block:\n{ex}"));
            continue;
        };
        for (what, blk, len) in [
            ("block bitmap", bbitmap, bs),
            ("inode bitmap", ibitmap, bs),
            ("extent block", leaf, bs),
            ("extent block, one sector", leaf, 512),
        ] {
            let env = [
                ("FAULT_READ_EIO", (blk * bs).to_string()),
                ("FAULT_READ_LEN", len.to_string()),
                ("FAULT_HEAL_ON_WRITE", "1".to_string()),
            ];
            let theirs = scratch.path(&format!("t{n}.img"));
            let ours = scratch.path(&format!("o{n}.img"));
            std::fs::copy(&base, &theirs).expect("copy");
            std::fs::copy(&base, &ours).expect("copy");
            let t = under(
                &e2fsck(),
                &["-fy", theirs.to_str().expect("path")],
                &theirs,
                None,
                &env,
            );
            let o = under(
                &bin(),
                &["--io", "pread", "-fy", ours.to_str().expect("path")],
                &ours,
                None,
                &env,
            );
            let ctx = format!("{mkfs:?}, {what} (block {blk})");
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            if code(&o) != code(&t) {
                failures.push(format!(
                    "{ctx}: exit {} vs e2fsck's {}\n{text}\n{}",
                    code(&o),
                    code(&t),
                    String::from_utf8_lossy(&t.stdout)
                ));
            }
            for img in [&theirs, &ours] {
                if code(&common::tool(
                    "e2fsck",
                    &["-fn", img.to_str().expect("path")],
                )) != 0
                {
                    failures.push(format!("{ctx}: e2fsck -fn finds {} unclean", img.display()));
                }
            }
            match (
                common::files_lost(&theirs, &ours, &scratch.0),
                common::file_tree(&theirs, &scratch.0),
                common::file_tree(&ours, &scratch.0),
            ) {
                (Some((lost, _)), Some(tf), Some(of)) => {
                    if !lost.is_empty() {
                        failures.push(format!(
                            "{ctx}: files e2fsck keeps and ext4chk lost: {lost:?}"
                        ));
                    }
                    table.push(format!(
                        "{ctx}: exit {} / e2fsck {}; files {} / e2fsck {}",
                        code(&o),
                        code(&t),
                        of.len(),
                        tf.len()
                    ));
                }
                _ => failures.push(format!("{ctx}: debugfs cannot list the files")),
            }
        }
    }
    eprintln!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
