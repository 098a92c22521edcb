//! A primary superblock with one field damaged, as a bit flip leaves it:
//! every value e2fsprogs' open refuses sends e2fsck to a backup
//! superblock (and ext4chk with it); values the open takes and e2fsck's
//! own check of the superblock refuses stop both (exit 8); the rest is
//! checked and repaired.
//!
//! Each field of the superblock that the open or that check reads is set
//! to zero, to all ones and to its value with bit 0 flipped, with the
//! superblock's checksum made good again (else every case would be a
//! checksum failure), on {no checksums 1 KiB, uninit_bg 4 KiB,
//! metadata_csum 1 KiB and 4 KiB}, each of four groups. ext4chk -n gives
//! e2fsck -fn's exit code, -y e2fsck -fy's; after -y e2fsck -fn finds
//! the file system clean wherever it finds e2fsck's own repair clean, and
//! every file e2fsck -fy keeps is kept.
//!
//! Where e2fsck 1.47.4 fixes 1.47.0 (the backup it picks when the primary
//! opens but its descriptors are bad: 1.47.0 takes the block after the
//! first group without looking, 1.47.4 probes the backup groups), the
//! case is judged against 1.47.4 when it is built
//! (`common::e2fsck_1474`), and skipped otherwise.

mod common;

use std::path::{Path, PathBuf};

use common::{code, have_all, par_map, run, tool, Scratch};

/// (name, byte offset in the superblock, width in bytes).
const FIELDS: &[(&str, usize, usize)] = &[
    ("s_inodes_count", 0x00, 4),
    ("s_blocks_count_lo", 0x04, 4),
    ("s_first_data_block", 0x14, 4),
    ("s_log_block_size", 0x18, 4),
    ("s_log_cluster_size", 0x1c, 4),
    ("s_blocks_per_group", 0x20, 4),
    ("s_clusters_per_group", 0x24, 4),
    ("s_inodes_per_group", 0x28, 4),
    ("s_magic", 0x38, 2),
    ("s_rev_level", 0x4c, 4),
    ("s_first_ino", 0x54, 4),
    ("s_inode_size", 0x58, 2),
    ("s_desc_size", 0xfe, 2),
    ("s_log_groups_per_flex", 0x174, 1),
    ("s_checksum", 0x3fc, 4),
];

/// How a field is damaged.
#[derive(Clone, Copy, Debug)]
enum Value {
    Zero,
    AllOnes,
    FlipBit0,
}

/// The fields whose damage 1.47.0 and 1.47.4 judge apart.
fn newer_oracle_decides(field: &str) -> bool {
    field == "s_first_data_block"
}

/// Features of the ext4 bases (mke2fs runs without a configuration file
/// in the tests, so nothing comes from one).
const EXT4: &str = "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,\
                    sparse_super,large_file,huge_file,dir_nlink,extra_isize";

/// The bases: (name, extra features, block size); `None`: mke2fs's ext2.
const BASES: &[(&str, Option<&str>, &str)] = &[
    ("ext2-1k", None, "1024"),
    ("uninit_bg-4k", Some("uninit_bg"), "4096"),
    ("metadata_csum-1k", Some("metadata_csum,64bit"), "1024"),
    ("metadata_csum-4k", Some("metadata_csum,64bit"), "4096"),
];

fn make_tree(dir: &Path) {
    for d in 0..4 {
        let sub = dir.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).expect("mkdir");
        for f in 0..12 {
            let n = (d * 12 + f) * 977;
            let data: Vec<u8> = (0..n).map(|i| ((i * 31 + d + f) % 253) as u8).collect();
            std::fs::write(sub.join(format!("f{f}")), data).expect("write");
        }
    }
}

/// Sets a field of the primary superblock and makes its checksum good
/// again (when the file system has one and the field is not it).
fn damage(img: &Path, off: usize, width: usize, value: Value) {
    let mut bytes = std::fs::read(img).expect("image");
    let sb = &mut bytes[1024..2048];
    let mut v = 0u64;
    for k in 0..width {
        v |= u64::from(sb[off + k]) << (8 * k);
    }
    v = match value {
        Value::Zero => 0,
        Value::AllOnes => (1u64 << (8 * width)) - 1,
        Value::FlipBit0 => v ^ 1,
    };
    for k in 0..width {
        sb[off + k] = (v >> (8 * k)) as u8;
    }
    let ro_compat = u32::from_le_bytes([sb[0x64], sb[0x65], sb[0x66], sb[0x67]]);
    if ro_compat & 0x400 != 0 && off != 0x3fc {
        let c = ext4_layout::superblock::Superblock::new(sb)
            .expect("superblock")
            .computed_checksum();
        sb[1020..1024].copy_from_slice(&c.to_le_bytes());
    }
    std::fs::write(img, bytes).expect("write");
}

/// Runs e2fsck (`bin`, or the installed one) on `img`: its exit code.
fn e2fsck(bin: Option<&Path>, args: &[&str], img: &Path) -> i32 {
    let mut all = args.to_vec();
    all.push(img.to_str().expect("path"));
    match bin {
        Some(b) => code(&common::tool_at(b, &all)),
        None => code(&tool("e2fsck", &all)),
    }
}

#[test]
fn a_damaged_superblock_field_is_judged_as_e2fsck_judges_it() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let newer = common::e2fsck_1474();
    let scratch = Scratch::new("sb-fields");
    let tree = scratch.path("tree");
    make_tree(&tree);
    let mut bases: Vec<(&str, PathBuf)> = Vec::new();
    for &(name, extra, bs) in BASES {
        let img = scratch.path(&format!("{name}.img"));
        let features = extra.map(|e| format!("{EXT4},{e}"));
        let mut a: Vec<&str> = vec!["-b", bs];
        match &features {
            Some(f) => a.extend(["-I", "256", "-O", f]),
            None => a.extend(["-t", "ext2"]),
        }
        // Four groups of either block size.
        if bs == "4096" {
            a.extend(["-g", "4096"]);
        }
        let size = if bs == "4096" { "64M" } else { "32M" };
        a.extend([
            "-d",
            tree.to_str().expect("path"),
            img.to_str().expect("path"),
            size,
        ]);
        common::mke2fs(&a);
        assert_eq!(
            e2fsck(None, &["-fn"], &img),
            0,
            "{name}: the base is not clean"
        );
        bases.push((name, img));
    }
    let mut cases = Vec::new();
    for (name, img) in &bases {
        for &(field, off, width) in FIELDS {
            for value in [Value::Zero, Value::AllOnes, Value::FlipBit0] {
                cases.push((*name, img.clone(), field, off, width, value));
            }
        }
    }
    let skipped = std::sync::atomic::AtomicUsize::new(0);
    let results = par_map(&cases, |(name, base, field, off, width, value)| {
        let label = format!("{name}-{field}-{value:?}");
        let oracle = if newer_oracle_decides(field) {
            match &newer {
                Some(b) => Some(b.as_path()),
                None => {
                    skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return (label, Vec::new());
                }
            }
        } else {
            None
        };
        let img = scratch.path(&format!("{label}.img"));
        std::fs::copy(base, &img).expect("copy");
        damage(&img, *off, *width, *value);
        let copy = |tag: &str| {
            let c = scratch.path(&format!("{label}.{tag}.img"));
            std::fs::copy(&img, &c).expect("copy");
            c
        };
        let (theirs, ours) = (copy("e2fsck"), copy("ours"));
        let mut problems = Vec::new();
        let en = e2fsck(oracle, &["-fn"], &img);
        let n = run(&["-n", img.to_str().expect("path")]);
        if code(&n) != en {
            problems.push(format!(
                "-n exits {}, e2fsck -fn {en}: {}",
                code(&n),
                String::from_utf8_lossy(&n.stderr).trim()
            ));
        }
        let ey = e2fsck(oracle, &["-fy"], &theirs);
        let y = run(&["-y", ours.to_str().expect("path")]);
        if code(&y) != ey {
            problems.push(format!(
                "-y exits {}, e2fsck -fy {ey}: {}",
                code(&y),
                String::from_utf8_lossy(&y.stderr).trim()
            ));
        }
        let theirs_clean = e2fsck(oracle, &["-fn"], &theirs) == 0;
        let ours_after = e2fsck(None, &["-fn"], &ours);
        if theirs_clean && ours_after != 0 {
            problems.push(format!("e2fsck -fn exits {ours_after} after -y"));
        }
        if theirs_clean {
            let t = scratch.path(&format!("{label}.trees"));
            match common::files_lost(&theirs, &ours, &t) {
                Some((lost, _)) => {
                    problems.extend(lost.into_iter().map(|p| format!("lost {p}")));
                }
                None => problems.push("debugfs cannot list the files".into()),
            }
            let _ = std::fs::remove_dir_all(&t);
        }
        for f in [img, theirs, ours] {
            let _ = std::fs::remove_file(f);
        }
        (label, problems)
    });
    let skipped = skipped.into_inner();
    if skipped > 0 {
        eprintln!("{skipped} cases need e2fsck 1.47.4, which is not built: skipped");
    }
    let failures: Vec<String> = results
        .iter()
        .flat_map(|(l, p)| p.iter().map(move |x| format!("{l}: {x}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases went wrong:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}
