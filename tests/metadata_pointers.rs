//! A file's pointer into the file system's own metadata (a bit flip that
//! makes a block number name an inode table, a bitmap or a descriptor
//! block): a repair must never write through it. e2fsck says the block
//! "conflicts with critical metadata", copies it before it edits it (or
//! clears the file), and keeps every other file; so must ext4chk.
//!
//! Every kind of pointer (direct, single, double and triple indirect,
//! extent leaf and index, extended attribute block, a directory's block)
//! is set to each kind of metadata block of group 0 (the first and
//! fourth inode table blocks, both bitmaps, the descriptor block), on
//! {ext2 1 KiB, ext2 4 KiB, block-mapped metadata_csum 1 KiB, uninit_bg
//! 4 KiB, metadata_csum 1 and 4 KiB}. Against e2fsck -fy on a copy:
//! ext4chk -y exits as e2fsck does (where e2fsck's own repair ends
//! clean), e2fsck -fn finds ext4chk's result clean, and every file
//! e2fsck keeps is kept (path, content: as e2fsck leaves it, or as it
//! was before the repair: e2fsck itself writes through a double indirect
//! pointer into another file's data, which ext4chk leaves alone).

mod common;

use std::path::{Path, PathBuf};

use common::{code, have_all, mke2fs, par_map, run, tool, Scratch};

/// (name, mke2fs arguments, extent-mapped files).
const SETS: &[(&str, &[&str], bool)] = &[
    ("ext2-1k", &["-t", "ext2", "-b", "1024", "-I", "128"], false),
    ("ext2-4k", &["-t", "ext2", "-b", "4096"], false),
    (
        "blockmap-metadata_csum-1k",
        &[
            "-b",
            "1024",
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,sparse_super,large_file,\
             huge_file,dir_nlink,extra_isize,metadata_csum",
        ],
        false,
    ),
    (
        "uninit_bg-4k",
        &[
            "-b",
            "4096",
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,sparse_super,\
             large_file,huge_file,dir_nlink,extra_isize,uninit_bg",
        ],
        true,
    ),
    (
        "metadata_csum-1k",
        &[
            "-b",
            "1024",
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,sparse_super,\
             large_file,huge_file,dir_nlink,extra_isize,metadata_csum,64bit",
        ],
        true,
    ),
    (
        "metadata_csum-4k",
        &[
            "-b",
            "4096",
            "-I",
            "256",
            "-O",
            "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,sparse_super,\
             large_file,huge_file,dir_nlink,extra_isize,metadata_csum,64bit",
        ],
        true,
    ),
];

/// The pointer set to metadata: (name, debugfs request with `{b}` for
/// the block). Block-mapped files, then extent-mapped ones (i_block
/// word 5 is the first leaf extent's start, word 4 the first index
/// entry's leaf).
const BLOCKMAP_KINDS: &[(&str, &str)] = &[
    ("direct", "sif /a/f3 block[0] {b}"),
    ("indirect", "sif /a/f3 block[IND] {b}"),
    ("double-indirect", "sif /b/f3 block[DIND] {b}"),
    ("triple-indirect", "sif /b/f4 block[TIND] {b}"),
    ("directory-block", "sif /b block[0] {b}"),
    ("attribute-block", "sif /a/f5 file_acl {b}"),
];
const EXTENT_KINDS: &[(&str, &str)] = &[
    ("extent-leaf", "sif /a/f3 block[5] {b}"),
    ("extent-index", "sif /frag block[4] {b}"),
    ("directory-extent", "sif /b block[5] {b}"),
    ("attribute-block", "sif /a/f5 file_acl {b}"),
];

const TARGETS: &[&str] = &[
    "inode-table",
    "inode-table+3",
    "block-bitmap",
    "inode-bitmap",
    "descriptors",
];

fn make_tree(dir: &Path) {
    let mut rng = common::Rng::new("metadata-pointers");
    for d in ["a", "b", "c"] {
        std::fs::create_dir_all(dir.join(d)).expect("mkdir");
        for i in 0..25 {
            let n = [300u64, 5000, 15_000, 70_000, 300_000][rng.below(5) as usize];
            let body: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            std::fs::write(dir.join(d).join(format!("f{i}")), body).expect("write");
        }
    }
    // Large enough for a triple indirect block at 1 KiB (past 64 MiB of
    // logical blocks), sparse: one block at the end.
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::File::create(dir.join("b/f4")).expect("create");
    f.seek(SeekFrom::Start(80 << 20)).expect("seek");
    f.write_all(b"far").expect("write");
    // One block every other block: an extent tree with an index.
    let mut f = std::fs::File::create(dir.join("frag")).expect("create");
    for i in 0..40u64 {
        f.seek(SeekFrom::Start(i * 2 * 4096)).expect("seek");
        f.write_all(&[i as u8; 4096]).expect("write");
    }
}

/// Group 0's metadata blocks, by target name, from dumpe2fs.
fn targets(img: &Path) -> Vec<(&'static str, u64)> {
    let out = tool("dumpe2fs", &[img.to_str().expect("path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let g0 = text.split("Group 1:").next().unwrap_or(&text);
    let after = |tag: &str| -> u64 {
        let at = g0
            .find(tag)
            .unwrap_or_else(|| panic!("no {tag:?} in dumpe2fs"));
        g0[at + tag.len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a block number")
    };
    let table = after("Inode table at ");
    vec![
        ("inode-table", table),
        ("inode-table+3", table + 3),
        ("block-bitmap", after("Block bitmap at ")),
        ("inode-bitmap", after("Inode bitmap at ")),
        ("descriptors", after("Group descriptors at ")),
    ]
}

fn judge(base: &Path, label: &str, request: &str, blk: u64, scratch: &Path) -> Vec<String> {
    let img = scratch.join(format!("{label}.img"));
    std::fs::copy(base, &img).expect("copy");
    let req = request.replace("{b}", &blk.to_string());
    let out = tool("debugfs", &["-w", "-R", &req, img.to_str().expect("path")]);
    assert!(out.status.success(), "{label}: debugfs {req}");
    let copy = |tag: &str| -> PathBuf {
        let c = scratch.join(format!("{label}.{tag}.img"));
        std::fs::copy(&img, &c).expect("copy");
        c
    };
    let (theirs, ours) = (copy("e2fsck"), copy("ours"));
    let e2 = code(&tool("e2fsck", &["-fy", theirs.to_str().expect("path")]));
    let theirs_clean = code(&tool("e2fsck", &["-fn", theirs.to_str().expect("path")])) == 0;
    let y = run(&["-y", ours.to_str().expect("path")]);
    let mut problems = Vec::new();
    if code(&y) != e2 && theirs_clean && e2 < 4 {
        problems.push(format!("-y exits {}, e2fsck -fy {e2}", code(&y)));
    }
    let after = tool("e2fsck", &["-fn", ours.to_str().expect("path")]);
    if code(&after) != 0 {
        problems.push(format!(
            "e2fsck -fn exits {} after -y:\n{}",
            code(&after),
            String::from_utf8_lossy(&after.stdout)
        ));
    }
    let t = scratch.join(format!("{label}.trees"));
    // Kept: as e2fsck's repair leaves it, or as it was before either
    // repair (e2fsck can write through such a pointer into a file it
    // keeps; that is no standard to match).
    match common::files_lost_either(&theirs, &img, &ours, &t) {
        Some(lost) => problems.extend(lost.into_iter().map(|p| format!("lost {p}"))),
        None => problems.push("debugfs cannot list the files".into()),
    }
    let _ = std::fs::remove_dir_all(&t);
    if !problems.is_empty() {
        // Kept for a look: the damaged image, before either repair.
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kept");
        let _ = std::fs::create_dir_all(&kept);
        let _ = std::fs::copy(&img, kept.join(format!("{label}.img")));
    }
    for p in [img, theirs, ours] {
        let _ = std::fs::remove_file(p);
    }
    problems
}

#[test]
fn a_file_pointing_into_metadata_is_never_written_through() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck", "dumpe2fs"]) {
        return;
    }
    let scratch = Scratch::new("meta-ptr");
    let tree = scratch.path("tree");
    make_tree(&tree);
    let mut cases = Vec::new();
    for &(set, args, extents) in SETS {
        let img = scratch.path(&format!("{set}.img"));
        let mut a: Vec<&str> = args.to_vec();
        a.extend([
            "-d",
            tree.to_str().expect("path"),
            img.to_str().expect("path"),
            "64M",
        ]);
        mke2fs(&a);
        let kinds = if extents {
            EXTENT_KINDS
        } else {
            BLOCKMAP_KINDS
        };
        for (target, blk) in targets(&img) {
            assert!(TARGETS.contains(&target));
            for &(kind, req) in kinds {
                cases.push((format!("{set}-{kind}-{target}"), img.clone(), req, blk));
            }
        }
    }
    let results = par_map(&cases, |(label, img, req, blk)| {
        (label.clone(), judge(img, label, req, *blk, &scratch.0))
    });
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

/// An indirect block that is an inode table block whose words are all
/// block numbers in range (timestamps made small, as in images built
/// for reproducibility): every pointer in it is shared with the files
/// whose inodes it holds, and the repair clones them. The clone of the
/// map block must be a copy; the inode table keeps only the inodes' own
/// updates, and every file keeps its content.
#[test]
fn an_indirect_block_on_an_inode_table_is_copied_before_it_is_edited() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck", "dumpe2fs"]) {
        return;
    }
    let scratch = Scratch::new("meta-ptr-ind");
    let tree = scratch.path("tree");
    make_tree(&tree);
    let img = scratch.path("base.img");
    mke2fs(&[
        "-t",
        "ext2",
        "-b",
        "1024",
        "-I",
        "128",
        "-d",
        tree.to_str().expect("path"),
        img.to_str().expect("path"),
        "128M",
    ]);
    let cmds: Vec<String> = (2..100)
        .flat_map(|i| ["ctime", "atime", "mtime"].map(|f| format!("sif <{i}> {f} 1000")))
        .collect();
    common::debugfs_batch_w(&img, &cmds, &scratch.0).expect("debugfs");
    let table = targets(&img)[0].1;
    let mut failures = Vec::new();
    for k in 0..6 {
        let label = format!("itable-{k}");
        for p in judge(
            &img,
            &label,
            "sif /a/f3 block[IND] {b}",
            table + k,
            &scratch.0,
        ) {
            failures.push(format!("{label}: {p}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
