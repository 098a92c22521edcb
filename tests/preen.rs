//! `fsck.ext4 -p`, as a boot runs it: what it writes when it stops at a
//! problem it may not fix, and what it prints, against e2fsck -p.

mod common;

use std::path::{Path, PathBuf};

use common::{code, have_all, run_as, tool, Scratch};

const FEATURES: &str = "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,\
                        sparse_super,large_file,huge_file,dir_nlink,extra_isize";

/// The checksum feature sets, by name.
const SETS: [(&str, &str); 3] = [
    ("plain", ""),
    ("uninit_bg", ",uninit_bg"),
    ("metadata_csum", ",metadata_csum,64bit"),
];

/// Two directories of `n` files each (large enough, at 400, for pass 3A
/// to index them on 1 KiB blocks).
fn tree(scratch: &Scratch, n: usize) -> PathBuf {
    let t = scratch.path(&format!("tree-{n}"));
    for d in ["a", "b"] {
        std::fs::create_dir_all(t.join(d)).expect("mkdir");
        for i in 1..=n {
            std::fs::write(t.join(d).join(format!("f{i}")), format!("{d} {i}\n")).expect("write");
        }
    }
    t
}

fn image(scratch: &Scratch, name: &str, tree: &Path, extra: &str, bs: &str) -> PathBuf {
    let img = scratch.path(&format!("{name}.img"));
    let features = format!("{FEATURES}{extra}");
    common::mke2fs_tree(&img, tree, bs, &features, "64M");
    img
}

fn debugfs_w(img: &Path, requests: &[&str]) {
    for req in requests {
        let out = tool("debugfs", &["-w", "-R", req, img.to_str().expect("path")]);
        assert!(out.status.success(), "debugfs {req}");
    }
}

fn copy(img: &Path, tag: &str) -> PathBuf {
    let c = img.with_extension(format!("{tag}.img"));
    std::fs::copy(img, &c).expect("copy");
    c
}

/// The blocks of the superblock and of the group descriptor table.
fn super_and_descriptors(img: &Path) -> Vec<u64> {
    let out = tool("dumpe2fs", &[img.to_str().expect("path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for l in text.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("Primary superblock at ") {
            let mut parts = rest.split(", Group descriptors at ");
            let sb: u64 = parts
                .next()
                .and_then(|x| x.trim().parse().ok())
                .expect("superblock");
            v.push(sb);
            if let Some(gd) = parts.next() {
                let mut r = gd.split('-');
                let a: u64 = r.next().and_then(|x| x.trim().parse().ok()).expect("gdt");
                let b: u64 = r.next().and_then(|x| x.trim().parse().ok()).unwrap_or(a);
                v.extend(a..=b);
            }
            break;
        }
    }
    // 1 KiB blocks: the superblock is block 1; larger: it is in block 0.
    v.push(0);
    v
}

/// The blocks of `bs` bytes that differ between two images.
fn changed_blocks(a: &Path, b: &Path, bs: usize) -> Vec<u64> {
    let x = std::fs::read(a).expect("read");
    let y = std::fs::read(b).expect("read");
    x.chunks(bs)
        .zip(y.chunks(bs))
        .enumerate()
        .filter(|(_, (p, q))| p != q)
        .map(|(i, _)| i as u64)
        .collect()
}

/// An unattached inode, a wrong link count, an entry naming an unused
/// inode and a bad descriptor checksum, in directories pass 3A would
/// index: e2fsck -p stops at the unattached inode (exit 4). fsck.ext4 -p
/// stops too, and writes nothing after its check but the superblock's
/// mark of errors: every block it changed is the superblock's or a
/// descriptor block, its report lists what it fixed and says the mark
/// (text and JSON, which says `modified`), and its text prints the
/// problem it stopped at, not every problem as NOT FIXED nor a summary
/// (e2fsck -p's lines). On {no checksums, uninit_bg, metadata_csum} x
/// {1 KiB, 4 KiB}.
#[test]
fn a_preen_that_stops_writes_only_what_it_reports() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck", "dumpe2fs"]) {
        return;
    }
    let scratch = Scratch::new("preen-stop");
    let t = tree(&scratch, 400);
    for bs in ["1024", "4096"] {
        for (set, extra) in SETS {
            let name = format!("{set}-{bs}");
            let img = image(&scratch, &name, &t, extra, bs);
            debugfs_w(
                &img,
                &[
                    "unlink /a/f3",
                    "sif /a/f5 links_count 4",
                    "clri /b/f2",
                    "set_bg 1 checksum 0x1234",
                ],
            );
            let theirs = copy(&img, "e2fsck");
            let e2 = code(&tool("e2fsck", &["-pf", theirs.to_str().expect("path")]));
            assert_eq!(e2, 4, "{name}: e2fsck -pf does not stop");
            let ours = copy(&img, "ours");
            let out = run_as("fsck.ext4", &["-pf", ours.to_str().expect("path")]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert_eq!(code(&out), e2, "{name}: fsck.ext4 -pf\n{text}");
            let allowed = super_and_descriptors(&img);
            let changed = changed_blocks(&img, &ours, bs.parse().expect("bs"));
            let stray: Vec<u64> = changed
                .iter()
                .copied()
                .filter(|b| !allowed.contains(b))
                .collect();
            assert!(
                stray.is_empty(),
                "{name}: preen stopped but wrote blocks {stray:?}\n{text}"
            );
            assert!(
                text.contains("marked as having errors"),
                "{name}: the mark of errors is not said\n{text}"
            );
            assert!(
                !text.contains("NOT FIXED") && !text.contains(" files ("),
                "{name}: more than e2fsck -p prints\n{text}"
            );
            assert!(
                text.contains("inode ") && text.contains("not referenced"),
                "{name}: the problem preen stopped at is not printed\n{text}"
            );
            let json = copy(&img, "json");
            let out = common::run(&["-pf", "--format", "json", json.to_str().expect("path")]);
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("a JSON document");
            assert_eq!(v["modified"], true, "{name}: {v}");
            assert!(
                v["notes"].as_array().is_some_and(|n| n.iter().any(|x| x
                    .as_str()
                    .is_some_and(|s| s.contains("marked as having errors")))),
                "{name}: {v}"
            );
        }
    }
}

/// What preen prints after fixing: the lines of its fixes and e2fsck's
/// summary, not pass 5's bitmap differences and counts (e2fsck's
/// PR_PREEN_NOMSG). An inode whose link count was zeroed (a deleted
/// inode with no deletion time, and the entry that names it) prints the
/// same number of lines as under e2fsck -p, with the same exit code.
#[test]
fn preen_prints_what_e2fsck_preen_prints() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("preen-lines");
    let t = tree(&scratch, 20);
    for bs in ["1024", "4096"] {
        for (set, extra) in SETS {
            let name = format!("{set}-{bs}");
            let img = image(&scratch, &name, &t, extra, bs);
            debugfs_w(&img, &["sif /a/f7 links_count 0"]);
            let theirs = copy(&img, "e2fsck");
            let e2 = tool("e2fsck", &["-pf", theirs.to_str().expect("path")]);
            let ours = copy(&img, "ours");
            let out = run_as("fsck.ext4", &["-pf", ours.to_str().expect("path")]);
            let (a, b) = (
                String::from_utf8_lossy(&e2.stdout).into_owned(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            );
            assert_eq!(code(&out), code(&e2), "{name}\n{a}\n{b}");
            assert_eq!(
                b.lines().count(),
                a.lines().count(),
                "{name}: e2fsck -p prints\n{a}\nfsck.ext4 -p prints\n{b}"
            );
        }
    }
}
