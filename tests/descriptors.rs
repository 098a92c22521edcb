//! What e2fsck fixes before pass 1, and what must be fixed before
//! ext4chk's pass 1 reads a group: the group descriptors' unused-inode
//! counts, uninit flags, free counts and checksums, and the superblock's
//! inode count and orphan list head.
//!
//! Each field is damaged on file systems built here with files in
//! several groups, on every combination of descriptor checksums (none,
//! uninit_bg's crc16, metadata_csum's crc32c) and block size (1 KiB, 4
//! KiB). Each case compares ext4chk with e2fsck on copies of the same
//! image:
//! * `-n`: the same verdict as `e2fsck -fn`;
//! * `-y`: the exit code of `e2fsck -fy`, `e2fsck -fn` clean afterwards,
//!   and every regular file e2fsck's repair keeps (path, size, content)
//!   kept too;
//! * `-p` (as `fsck.ext4`): the exit code of `e2fsck -p`.

mod common;

use std::path::{Path, PathBuf};

use common::{code, have_all, par_map, run, run_as, tool, Scratch};

/// One base file system.
struct Base {
    name: &'static str,
    features: &'static str,
    block_size: &'static str,
}

const COMMON: &str = "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,\
                      sparse_super,large_file,huge_file,dir_nlink,extra_isize";

const BASES: &[Base] = &[
    Base {
        name: "nocsum-1k",
        features: "",
        block_size: "1024",
    },
    Base {
        name: "nocsum-4k",
        features: "",
        block_size: "4096",
    },
    Base {
        name: "uninit_bg-1k",
        features: "uninit_bg",
        block_size: "1024",
    },
    Base {
        name: "uninit_bg-4k",
        features: "uninit_bg",
        block_size: "4096",
    },
    Base {
        name: "metadata_csum-1k",
        features: "metadata_csum,64bit",
        block_size: "1024",
    },
    Base {
        name: "metadata_csum-4k",
        features: "metadata_csum,64bit",
        block_size: "4096",
    },
];

/// Inodes per group of every base (`-N` is set so that it comes out so).
const IPG: u32 = 128;

/// A tree of about 330 inodes: the first three groups are used.
fn make_tree(dir: &Path) {
    std::fs::create_dir_all(dir).expect("tree");
    for d in 0..40 {
        let sub = dir.join(format!("d{d:02}"));
        std::fs::create_dir_all(&sub).expect("dir");
        for f in 0..7 {
            let n = match (d + f) % 9 {
                0 => 0,
                1 => 1,
                2 => 5000,
                3 => 70_000,
                _ => 100 + (d * 37 + f * 11) % 3000,
            };
            let data: Vec<u8> = (0..n).map(|i| ((i * 7 + d + f) % 251) as u8).collect();
            std::fs::write(sub.join(format!("f{f}")), data).expect("file");
        }
    }
}

fn build_base(base: &Base, tree: &Path, out: &Path) {
    let f = std::fs::File::create(out).expect("image");
    f.set_len(64 << 20).expect("size");
    drop(f);
    let features = if base.features.is_empty() {
        COMMON.to_string()
    } else {
        format!("{COMMON},{}", base.features)
    };
    let groups: u32 = if base.block_size == "1024" { 8 } else { 4 };
    let mut args = vec![
        "-I",
        "256",
        "-O",
        &features,
        "-b",
        base.block_size,
        "-d",
        tree.to_str().expect("path"),
    ];
    let inodes = (IPG * groups).to_string();
    args.extend(["-N", &inodes]);
    if base.block_size == "4096" {
        args.extend(["-g", "4096"]);
    }
    args.push(out.to_str().expect("path"));
    common::mke2fs(&args);
}

/// One kind of damage: debugfs commands, given the number of groups.
struct Damage {
    name: &'static str,
    commands: fn(u32) -> Vec<String>,
}

fn calc(g: u32) -> String {
    format!("set_bg {g} checksum calc")
}

const DAMAGE: &[Damage] = &[
    Damage {
        name: "itable-unused-hides-the-root",
        commands: |_| vec![format!("set_bg 0 itable_unused {}", IPG - 1), calc(0)],
    },
    Damage {
        name: "itable-unused-over-free",
        commands: |_| vec![format!("set_bg 1 itable_unused {}", IPG - 20), calc(1)],
    },
    Damage {
        name: "itable-unused-over-ipg",
        commands: |_| vec![format!("set_bg 2 itable_unused {}", IPG + 9), calc(2)],
    },
    Damage {
        name: "itable-unused-bad-checksum",
        commands: |_| vec![format!("set_bg 1 itable_unused {}", IPG - 1)],
    },
    Damage {
        name: "inode-uninit-on-a-used-group",
        commands: |_| vec!["set_bg 1 flags 5".into(), calc(1)],
    },
    Damage {
        name: "inode-uninit-on-group-0",
        commands: |_| vec!["set_bg 0 flags 5".into(), calc(0)],
    },
    Damage {
        name: "block-uninit-on-a-used-group",
        commands: |_| vec!["set_bg 0 flags 6".into(), calc(0)],
    },
    Damage {
        name: "block-uninit-on-the-last-group",
        commands: |n| vec![format!("set_bg {} flags 6", n - 1), calc(n - 1)],
    },
    Damage {
        name: "bad-checksum",
        commands: |_| vec!["set_bg 1 checksum 0x1234".into()],
    },
    Damage {
        name: "bad-checksum-uninit-flags",
        commands: |_| vec!["set_bg 2 flags 7".into()],
    },
    Damage {
        name: "free-inodes-count-low",
        commands: |_| vec!["set_bg 1 free_inodes_count 0".into(), calc(1)],
    },
    Damage {
        name: "free-inodes-count-low-itable-unused",
        commands: |_| {
            vec![
                "set_bg 2 free_inodes_count 3".into(),
                format!("set_bg 2 itable_unused {}", IPG - 60),
                calc(2),
            ]
        },
    },
    Damage {
        name: "free-blocks-count-wrong",
        commands: |_| vec!["set_bg 2 free_blocks_count 7".into(), calc(2)],
    },
    Damage {
        name: "used-dirs-count-wrong",
        commands: |_| vec!["set_bg 1 used_dirs_count 99".into(), calc(1)],
    },
    Damage {
        name: "inodes-count-wrong",
        commands: |n| vec![format!("ssv inodes_count {}", IPG * n - 1)],
    },
    Damage {
        name: "orphan-head-out-of-range",
        commands: |n| vec![format!("ssv last_orphan {}", IPG * n + 5)],
    },
    Damage {
        name: "orphan-head-a-live-file",
        commands: |_| vec!["ssv last_orphan 20".into()],
    },
];

fn groups_of(img: &Path) -> u32 {
    let out = tool("dumpe2fs", &["-h", img.to_str().expect("path")]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Inode count:"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .map_or(1, |n| n / IPG)
}

fn e2fsck(args: &[&str], img: &Path) -> (i32, String) {
    let mut all = args.to_vec();
    all.push(img.to_str().expect("path"));
    let out = tool("e2fsck", &all);
    (
        code(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Runs one case; returns what went wrong, if anything, and the files
/// e2fsck's repair kept.
fn judge(base_img: &Path, label: &str, damage: &Damage, scratch: &Path) -> (Vec<String>, usize) {
    let img = scratch.join(format!("{label}.img"));
    std::fs::copy(base_img, &img).expect("copy");
    let p = img.to_str().expect("path");
    let cmds = (damage.commands)(groups_of(&img));
    let script = scratch.join(format!("{label}.cmds"));
    std::fs::write(&script, cmds.join("\n") + "\n").expect("script");
    tool("debugfs", &["-w", "-f", script.to_str().expect("path"), p]);
    let _ = std::fs::remove_file(script);
    judge_damaged(&img, label, scratch, false)
}

/// Compares ext4chk with e2fsck on a damaged image (removed after):
/// `-n`'s verdict (its exit code too when `exact_n`), `fsck.ext4 -p`'s
/// exit code, `-y`'s exit code, e2fsck -fn clean after, and the files
/// e2fsck -fy keeps kept.
fn judge_damaged(img: &Path, label: &str, scratch: &Path, exact_n: bool) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let img = img.to_path_buf();
    let p = img.to_str().expect("path");
    let copy = |tag: &str| -> PathBuf {
        let c = scratch.join(format!("{label}.{tag}.img"));
        std::fs::copy(&img, &c).expect("copy");
        c
    };

    let (nfn, nfn_out) = e2fsck(&["-fn"], &img);
    let n = run(&["-n", p]);
    if (code(&n) == 0) != (nfn == 0) || (exact_n && code(&n) != nfn) {
        problems.push(format!(
            "-n exits {}, e2fsck -fn {nfn}\n{}\n-- e2fsck:\n{nfn_out}",
            code(&n),
            String::from_utf8_lossy(&n.stdout)
        ));
    }

    let (pa, pb) = (copy("p-e2fsck"), copy("p-ours"));
    let (pe, pe_out) = e2fsck(&["-p"], &pa);
    let po = run_as("fsck.ext4", &["-p", pb.to_str().expect("path")]);
    if code(&po) != pe {
        problems.push(format!(
            "fsck.ext4 -p exits {}, e2fsck -p {pe}\n{}\n-- e2fsck:\n{pe_out}",
            code(&po),
            String::from_utf8_lossy(&po.stdout)
        ));
    }

    let (ya, yb) = (copy("y-e2fsck"), copy("y-ours"));
    let (ye, _) = e2fsck(&["-fy"], &ya);
    let yo = run(&["-y", yb.to_str().expect("path")]);
    let yo_text = String::from_utf8_lossy(&yo.stdout).into_owned();
    if code(&yo) != ye {
        problems.push(format!(
            "-y exits {}, e2fsck -fy {ye}\n{yo_text}",
            code(&yo)
        ));
    }
    let (theirs_clean, _) = e2fsck(&["-fn"], &ya);
    let (ours_clean, ours_out) = e2fsck(&["-fn"], &yb);
    if theirs_clean == 0 && ours_clean != 0 {
        problems.push(format!(
            "e2fsck -fn exits {ours_clean} after -y\n{yo_text}\n-- e2fsck -fn:\n{ours_out}"
        ));
    }
    let t = scratch.join(format!("{label}.trees"));
    let mut kept = 0;
    match common::files_lost(&ya, &yb, &t) {
        Some((lost, _)) => {
            kept = common::file_tree(&ya, &t).map_or(0, |x| x.len());
            for path in lost {
                problems.push(format!("e2fsck -fy keeps {path}; -y does not"));
            }
        }
        None => problems.push("debugfs could not list the files".into()),
    }
    let _ = std::fs::remove_dir_all(&t);
    for f in [img, pa, pb, ya, yb] {
        let _ = std::fs::remove_file(f);
    }
    (problems, kept)
}

#[test]
fn descriptor_and_superblock_fields_are_fixed_before_pass_1_as_e2fsck_fixes_them() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "dumpe2fs"]) {
        return;
    }
    let scratch = Scratch::new("descriptors");
    let tree = scratch.path("tree");
    make_tree(&tree);
    let bases: Vec<PathBuf> = BASES
        .iter()
        .map(|b| {
            let img = scratch.path(&format!("{}.img", b.name));
            build_base(b, &tree, &img);
            assert_eq!(
                e2fsck(&["-fn"], &img).0,
                0,
                "{}: the base is not clean",
                b.name
            );
            img
        })
        .collect();
    let cases: Vec<(usize, usize)> = (0..BASES.len())
        .flat_map(|b| (0..DAMAGE.len()).map(move |d| (b, d)))
        .collect();
    let results = par_map(&cases, |&(b, d)| {
        let label = format!("{}-{}", BASES[b].name, DAMAGE[d].name);
        let (problems, kept) = judge(&bases[b], &label, &DAMAGE[d], &scratch.0);
        (label, problems, kept)
    });
    let mut failures = Vec::new();
    for (label, problems, kept) in &results {
        eprintln!(
            "{label}: e2fsck -fy keeps {kept} files; {} problems",
            problems.len()
        );
        for p in problems {
            failures.push(format!("{label}: {p}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases went wrong:\n\n{}",
        failures.len(),
        results.len(),
        failures.join("\n\n")
    );
}

/// Where a group's descriptor block lies: (block size, its first block).
fn desc_block(img: &Path, group_first_block: u64) -> (u64, u64) {
    let out = tool("dumpe2fs", &["-h", img.to_str().expect("path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .expect("dumpe2fs field")
    };
    let bs = field("Block size:");
    let first = field("First block:");
    (bs, group_first_block.max(first) + 1)
}

/// Zeroes `len` bytes at block `blk` of an image.
fn zero_at(img: &Path, bs: u64, blk: u64, len: u64) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(img)
        .expect("open");
    f.seek(SeekFrom::Start(blk * bs)).expect("seek");
    f.write_all(&vec![0u8; len as usize]).expect("zero");
}

/// A group descriptor block zeroed (its groups' bitmaps and inode tables
/// then point at block 0), a single descriptor zeroed, a group's table
/// set to 0, and the primary and first backup descriptors both zeroed:
/// e2fsck takes the backup descriptors when there are some and they
/// are sound, and relocates what is missing otherwise (pass 1's
/// relocation, a restart, then the root and lost+found made again).
/// ext4chk must give e2fsck's verdict under -n, -p and -y, end clean and
/// keep every file e2fsck keeps, on single-group images (no backup at
/// all: the 2 KiB metadata_csum case) and on the multi-group
/// bases, with and without descriptor checksums, 1, 2 and 4 KiB blocks.
#[test]
fn missing_group_metadata_is_relocated_as_e2fsck_relocates_it() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "dumpe2fs"]) {
        return;
    }
    let scratch = Scratch::new("relocate");
    let tree = scratch.path("tree");
    make_tree(&tree);
    let mut bases: Vec<(String, PathBuf, u64)> = Vec::new();
    // Single groups, as mke2fs makes them for small file systems.
    for (name, features, bs) in [
        ("one-group-metadata_csum-2k", "metadata_csum,64bit", "2048"),
        ("one-group-uninit_bg-4k", "uninit_bg", "4096"),
        ("one-group-nocsum-4k", "", "4096"),
    ] {
        let img = scratch.path(&format!("{name}.img"));
        let f = std::fs::File::create(&img).expect("image");
        f.set_len(32 << 20).expect("size");
        drop(f);
        let features = if features.is_empty() {
            COMMON.to_string()
        } else {
            format!("{COMMON},{features}")
        };
        common::mke2fs(&[
            "-O",
            &features,
            "-b",
            bs,
            "-d",
            tree.to_str().expect("path"),
            img.to_str().expect("path"),
        ]);
        bases.push((name.to_string(), img, 0));
    }
    for b in BASES.iter().filter(|b| b.name != "nocsum-4k") {
        let img = scratch.path(&format!("{}.img", b.name));
        build_base(b, &tree, &img);
        let bpg = if b.block_size == "1024" { 8192 } else { 4096 };
        bases.push((b.name.to_string(), img, bpg));
    }
    let mut cases = Vec::new();
    for (name, img, bpg) in &bases {
        assert_eq!(e2fsck(&["-fn"], img).0, 0, "{name}: the base is not clean");
        cases.push((name.clone(), img.clone(), "descriptor-block-zeroed", *bpg));
        cases.push((name.clone(), img.clone(), "descriptor-0-zeroed", *bpg));
        if *bpg != 0 {
            cases.push((name.clone(), img.clone(), "group-1-inode-table-0", *bpg));
            cases.push((name.clone(), img.clone(), "both-copies-zeroed", *bpg));
        }
    }
    let results = par_map(&cases, |(name, base, damage, bpg)| {
        let label = format!("{name}-{damage}");
        let img = scratch.path(&format!("{label}.img"));
        std::fs::copy(base, &img).expect("copy");
        let (bs, blk) = desc_block(&img, 0);
        match *damage {
            "descriptor-block-zeroed" => zero_at(&img, bs, blk, bs),
            "descriptor-0-zeroed" => {
                let wide = BASES
                    .iter()
                    .any(|b| b.name == name && b.features.contains("64bit"))
                    || name.contains("metadata_csum");
                zero_at(&img, bs, blk, if wide { 64 } else { 32 });
            }
            "both-copies-zeroed" => {
                zero_at(&img, bs, blk, bs);
                let (_, backup) = desc_block(&img, blk - 1 + bpg);
                zero_at(&img, bs, backup, bs);
            }
            _ => {
                let p = img.to_str().expect("path");
                tool("debugfs", &["-w", "-R", "set_bg 1 inode_table 0", p]);
                tool("debugfs", &["-w", "-R", &calc(1), p]);
            }
        }
        let (problems, kept) = judge_damaged(&img, &label, &scratch.0, true);
        (label, problems, kept)
    });
    let mut failures = Vec::new();
    for (label, problems, kept) in &results {
        eprintln!(
            "{label}: e2fsck -fy keeps {kept} files; {} problems",
            problems.len()
        );
        for p in problems {
            failures.push(format!("{label}: {p}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases went wrong:\n\n{}",
        failures.len(),
        results.len(),
        failures.join("\n\n")
    );
}
