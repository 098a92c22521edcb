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

use common::{bin, code, fixture_images_wide, have_all, par_map, FIXTURES};

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

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: &str) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng(h | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
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
