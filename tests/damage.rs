//! Whole metadata blocks damaged on every fixture kind, compared with
//! e2fsck: superblocks, descriptor blocks, bitmaps, inode-table blocks,
//! directory blocks and extent-tree blocks, overwritten with zeros or
//! random bytes, hit by a few bit flips or by a window of garbage.
//!
//! For each case:
//! * the `-n` verdict (clean or not) is `e2fsck -fn`'s;
//! * where `e2fsck -fy` leaves a clean file system, `--repair` does too,
//!   and keeps every regular file e2fsck's repair keeps (path and
//!   content);
//! * after every repair, `ext4chk -n` and `e2fsck -fn` agree on the
//!   result.
//!
//! Cases are generated from fixed seeds, so a failure names a case that
//! reproduces. `tests/known/damage.txt` lists known failures; it may only
//! shrink.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{code, fixture_images_wide, have_all, known_list, par_map, run, tool, Rng, FIXTURES};

/// Cases per fixture kind.
const PER_KIND: usize = 100;

/// The metadata blocks of an image worth damaging, by kind.
fn targets(img: &Path) -> (u64, Vec<(&'static str, u64)>) {
    let p = img.to_str().expect("path");
    let dump = String::from_utf8_lossy(&tool("dumpe2fs", &[p]).stdout).to_string();
    let num = |s: &str| s.trim().parse::<u64>().unwrap_or(0);
    let bs = dump
        .lines()
        .find_map(|l| l.strip_prefix("Block size:"))
        .map_or(4096, num);
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for l in dump.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("Primary superblock at ") {
            out.push(("superblock", num(rest.split(',').next().unwrap_or("0"))));
            if let Some(g) = rest.split("Group descriptors at ").nth(1) {
                out.push(("descriptors", num(g.split('-').next().unwrap_or("0"))));
            }
        }
        for (key, what) in [
            ("Block bitmap at ", "block-bitmap"),
            ("Inode bitmap at ", "inode-bitmap"),
        ] {
            if let Some(rest) = l.split(key).nth(1) {
                out.push((what, num(rest.split([' ', ',']).next().unwrap_or("0"))));
            }
        }
        if let Some(rest) = l.split("Inode table at ").nth(1) {
            let range = rest.split([' ', ',']).next().unwrap_or("0-0");
            let mut it = range.split('-');
            let a = num(it.next().unwrap_or("0"));
            let b = num(it.next().unwrap_or("0")).max(a);
            for k in a..=b.min(a + 7) {
                out.push(("inode-table", k));
            }
        }
    }
    // Directory blocks and extent-tree blocks of a few directories.
    for dir in ["/", "/files", "/wide", "/deep/a/b", "/links", "/dirs/d1"] {
        let blocks =
            String::from_utf8_lossy(&tool("debugfs", &["-R", &format!("blocks {dir}"), p]).stdout)
                .to_string();
        for b in blocks.split_whitespace().take(3) {
            out.push(("directory", num(b)));
        }
        let stat =
            String::from_utf8_lossy(&tool("debugfs", &["-R", &format!("stat {dir}"), p]).stdout)
                .to_string();
        for part in stat.split("(ETB").skip(1) {
            if let Some(b) = part.split(':').nth(1) {
                out.push((
                    "extent-tree",
                    num(b.split([',', ' ', '\n']).next().unwrap_or("0")),
                ));
            }
        }
    }
    // The large file's extent tree or indirect blocks.
    let stat = String::from_utf8_lossy(&tool("debugfs", &["-R", "stat /files/large-3m", p]).stdout)
        .to_string();
    for key in ["(ETB0):", "(IND):", "(DIND):"] {
        if let Some(b) = stat.split(key).nth(1) {
            out.push((
                "map-block",
                num(b.split([',', ' ', '\n']).next().unwrap_or("0")),
            ));
        }
    }
    out.retain(|&(_, b)| b != 0 || bs > 1024);
    (bs, out)
}

/// How a block is damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    Zeros,
    Random,
    BitFlips,
    Window,
}

struct Case {
    name: String,
    kind: &'static str,
    bs: u64,
    blk: u64,
    how: Damage,
    /// Seed of the bytes the damage writes.
    seed: u64,
}

fn damage(base: &[u8], bs: u64, blk: u64, how: Damage, r: &mut Rng) -> Vec<u8> {
    let mut d = base.to_vec();
    // The primary superblock is the 1024 bytes at 1024, whatever the
    // block size.
    let (off, len) = if blk == 0 || (blk == 1 && bs == 1024) {
        (1024usize, 1024usize)
    } else {
        ((blk * bs) as usize, bs as usize)
    };
    if off + len > d.len() {
        return d;
    }
    let region = &mut d[off..off + len];
    match how {
        Damage::Zeros => region.fill(0),
        Damage::Random => region.iter_mut().for_each(|b| *b = r.next() as u8),
        Damage::BitFlips => {
            for _ in 0..1 + r.below(4) {
                let i = r.below(len as u64) as usize;
                region[i] ^= 1 << r.below(8);
            }
        }
        Damage::Window => {
            let n = 16 + r.below(240) as usize;
            let i = r.below((len - n) as u64) as usize;
            region[i..i + n]
                .iter_mut()
                .for_each(|b| *b = r.next() as u8);
        }
    }
    d
}

fn cases(dir: &Path) -> Vec<Case> {
    let mut out = Vec::new();
    for kind in FIXTURES {
        let img = dir.join(format!("{kind}.img"));
        let (bs, blocks) = targets(&img);
        assert!(
            blocks.len() > 10,
            "{kind}: found only {} blocks to damage",
            blocks.len()
        );
        let mut r = Rng::new(kind);
        for k in 0..PER_KIND {
            let (what, blk) = blocks[r.below(blocks.len() as u64) as usize];
            let how = [
                Damage::Zeros,
                Damage::Random,
                Damage::BitFlips,
                Damage::Window,
            ][r.below(4) as usize];
            out.push(Case {
                name: format!("{kind}/{k}/{what}@{blk}/{how:?}"),
                kind,
                bs,
                blk,
                how,
                seed: r.next(),
            });
        }
    }
    out
}

/// Where the copies go: memory when there is /dev/shm.
fn work_dir(what: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
    };
    let d = base.join(format!("ext4chk-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("work dir");
    d
}

/// Runs e2fsck and ext4chk on copies of a damaged image and lists where
/// ext4chk parts from e2fsck (empty when it does not), and whether e2fsck
/// found the image damaged at all.
fn judge(work: &Path, n: u64, name: &str, image: &[u8]) -> (Vec<String>, bool) {
    let a = work.join(format!("{n}-e2fsck.img"));
    let b = work.join(format!("{n}-ours.img"));
    std::fs::write(&a, image).expect("write");
    std::fs::write(&b, image).expect("write");
    let (pa, pb) = (a.to_str().expect("path"), b.to_str().expect("path"));
    let mut problems = Vec::new();
    let en = code(&tool("e2fsck", &["-fn", pa]));
    let on = code(&run(&["-n", pb]));
    if (en == 0) != (on == 0) {
        problems.push(format!("verdict: e2fsck -fn {en}, ext4chk -n {on}"));
    }
    if on >= 128 {
        problems.push(format!("ext4chk -n died ({on})"));
    }
    let ey = code(&tool("e2fsck", &["-fy", pa]));
    let oy = code(&run(&["-y", pb]));
    if oy >= 128 {
        problems.push(format!("ext4chk -y died ({oy})"));
    }
    let ea = code(&tool("e2fsck", &["-fn", pa]));
    let eb = code(&tool("e2fsck", &["-fn", pb]));
    let ob = code(&run(&["-n", pb]));
    if ea == 0 && eb != 0 {
        problems.push(format!(
            "e2fsck -fy ({ey}) leaves it clean; after ext4chk -y ({oy}) e2fsck -fn says {eb}"
        ));
    }
    if (eb == 0) != (ob == 0) {
        problems.push(format!(
            "after the repair: e2fsck -fn {eb}, ext4chk -n {ob}"
        ));
    }
    if ea == 0 && eb == 0 {
        let t = work.join(format!("{n}-t"));
        if let Some((gone, _)) = common::files_lost(&a, &b, &t) {
            if !gone.is_empty() {
                problems.push(format!(
                    "{} files e2fsck keeps are lost or changed: {}",
                    gone.len(),
                    gone.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&t);
    }
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    // EXT4CHK_DAMAGE_KEEP=DIR keeps the damaged image of each failing case
    // there, for a closer look.
    if let (false, Some(keep)) = (problems.is_empty(), std::env::var_os("EXT4CHK_DAMAGE_KEEP")) {
        let file = name.replace(['/', '@'], "_") + ".img";
        let _ = std::fs::write(Path::new(&keep).join(file), image);
    }
    (problems, en != 0)
}

/// Judges every case in parallel and fails on any that parts from e2fsck
/// and is not in the known list (or is listed but now passes).
fn judge_all<C: Sync>(
    what: &str,
    all: &[C],
    name: impl Fn(&C) -> (String, &'static str) + Sync,
    image: impl Fn(&C) -> Vec<u8> + Sync,
) {
    let work = work_dir(what);
    let slot = std::sync::atomic::AtomicU64::new(0);
    let outcomes = par_map(all, |c| {
        let n = slot.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (nm, kind) = name(c);
        let (problems, damaged) = judge(&work, n, &nm, &image(c));
        (nm, kind, problems, damaged)
    });
    let _ = std::fs::remove_dir_all(&work);
    let known = known_list("damage.txt");
    let mut failures = Vec::new();
    let mut per_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (name, kind, problems, _) in &outcomes {
        let e = per_kind.entry(kind).or_default();
        e.0 += 1;
        let listed = known.iter().any(|k| k == name);
        match (problems.is_empty(), listed) {
            (true, true) => failures.push(format!(
                "{name}: now passes; remove it from tests/known/damage.txt"
            )),
            (false, false) => failures.push(format!("{name}: {}", problems.join("; "))),
            (false, true) => e.1 += 1,
            (true, false) => {}
        }
    }
    let damaged = outcomes.iter().filter(|o| o.3).count();
    eprintln!(
        "{what}: {} cases ({damaged} found damaged by e2fsck), {} known failures; per kind: {}",
        outcomes.len(),
        per_kind.values().map(|v| v.1).sum::<usize>(),
        per_kind
            .iter()
            .map(|(k, v)| format!("{k} {}", v.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Most cases must be damage e2fsck notices, or the test proves little.
    assert!(
        damaged * 2 > outcomes.len(),
        "only {damaged} of {} cases are damaged",
        outcomes.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        outcomes.len(),
        failures.join("\n")
    );
}

fn read_bases(dir: &Path) -> BTreeMap<&'static str, Vec<u8>> {
    FIXTURES
        .iter()
        .map(|k| {
            (
                *k,
                std::fs::read(dir.join(format!("{k}.img"))).expect("fixture"),
            )
        })
        .collect()
}

#[test]
fn whole_block_damage_is_judged_and_repaired_as_e2fsck_does() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "dumpe2fs"]) {
        return;
    }
    let Some(dir) = fixture_images_wide(300) else {
        return;
    };
    let all = cases(&dir);
    assert!(all.len() >= 1000, "{} cases", all.len());
    let bases = read_bases(&dir);
    judge_all(
        "damage",
        &all,
        |c| (c.name.clone(), c.kind),
        |c| damage(&bases[c.kind], c.bs, c.blk, c.how, &mut Rng(c.seed | 1)),
    );
}

/// A superblock or descriptor field set to a wrong value.
struct FieldCase {
    name: String,
    kind: &'static str,
    /// Byte offset in the image.
    off: usize,
    /// The value's bytes (little-endian).
    bytes: Vec<u8>,
}

fn le(v: u64, len: usize) -> Vec<u8> {
    v.to_le_bytes()[..len].to_vec()
}

/// Wrong inode counts in the superblock on every kind, and wrong
/// unused-inode counts in the descriptors of file systems without
/// descriptor checksums (where nothing should read them).
fn field_cases(bases: &BTreeMap<&'static str, Vec<u8>>) -> Vec<FieldCase> {
    let mut out = Vec::new();
    for kind in FIXTURES {
        let img = &bases[kind];
        let sb = &img[1024..2048];
        let u32_at = |o: usize| u32::from_le_bytes(sb[o..o + 4].try_into().expect("4 bytes"));
        let u16_at = |o: usize| u16::from_le_bytes(sb[o..o + 2].try_into().expect("2 bytes"));
        let icount = u64::from(u32_at(0x0));
        let ipg = u64::from(u32_at(0x28));
        let mut r = Rng::new(&format!("fields/{kind}"));
        let wrong = [
            icount + ipg,
            icount - ipg,
            icount + 1,
            icount - 1,
            icount * 2,
            icount / 3,
            0,
            r.next() & 0xffff_ffff,
        ];
        for (k, v) in wrong.into_iter().enumerate() {
            out.push(FieldCase {
                name: format!("{kind}/s_inodes_count/{k}={v}"),
                kind,
                off: 1024,
                bytes: le(v, 4),
            });
        }
        let has_csum = u32_at(0x64) & (0x10 | 0x400) != 0;
        if has_csum {
            continue;
        }
        let log_bs = u32_at(0x18);
        let bs = 1024usize << log_bs;
        let first_data = u32_at(0x14) as usize;
        let bpg = u64::from(u32_at(0x20));
        let blocks = u64::from(u32_at(0x4));
        let groups = blocks
            .saturating_sub(first_data as u64)
            .div_ceil(bpg.max(1));
        let incompat_64 = u32_at(0x60) & 0x80 != 0;
        let dsize = if incompat_64 {
            usize::from(u16_at(0xFE)).max(32)
        } else {
            32
        };
        let gdt = (first_data + 1) * bs;
        for k in 0..10u64 {
            let g = r.below(groups) as usize;
            let v = match k % 5 {
                0 => ipg,
                1 => ipg + 1,
                2 => 0xffff,
                3 => ipg / 2,
                _ => r.below(0x1_0000),
            };
            out.push(FieldCase {
                name: format!("{kind}/bg_itable_unused/{k}/group{g}={v}"),
                kind,
                off: gdt + g * dsize + 0x1C,
                bytes: le(v, 2),
            });
        }
    }
    out
}

#[test]
fn wrong_counts_in_the_superblock_and_descriptors_are_repaired_as_e2fsck_does() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let Some(dir) = fixture_images_wide(300) else {
        return;
    };
    let bases = read_bases(&dir);
    let all = field_cases(&bases);
    assert!(all.len() >= 100, "{} cases", all.len());
    judge_all(
        "fields",
        &all,
        |c| (c.name.clone(), c.kind),
        |c| {
            let mut img = bases[c.kind].clone();
            img[c.off..c.off + c.bytes.len()].copy_from_slice(&c.bytes);
            img
        },
    );
}
