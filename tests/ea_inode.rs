//! Attribute values kept in EA inodes (the `ea_inode` feature), judged as
//! e2fsck 1.47.4 judges them: its four checks that 1.47.0 lacks (an EA
//! inode flag on a file that is not regular, an EA inode used without the
//! feature, an entry naming an EA inode, a regular file flagged as an EA
//! inode that no attribute uses), the value size checked before the hash,
//! and a fast symlink whose attribute lives in an EA inode, which is
//! valid. The values are written by the kernel (a loop mount and
//! `lsetxattr`), the damage by debugfs, on file systems without checksums,
//! with uninit_bg and with metadata_csum, with 1 KiB and 4 KiB blocks; each
//! is compared with 1.47.4 (built by `.ci/run`): exit codes of `-n` and
//! `-y`, 1.47.4's `-fn` clean after ext4chk's repair, no file 1.47.4's
//! repair keeps lost, and the finding named by its e2fsck code.

mod common;

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{code, have_all, par_map, run, tool, tool_at, Scratch};

const BASE: &str = "has_journal,ext_attr,resize_inode,dir_index,filetype,extent,flex_bg,\
                    sparse_super,large_file,huge_file,dir_nlink,extra_isize,ea_inode";

const SETS: [(&str, &str); 3] = [
    ("plain", ",^metadata_csum,^uninit_bg"),
    ("uninit_bg", ",^metadata_csum,uninit_bg"),
    ("metadata_csum", ",metadata_csum"),
];

/// The damage, by name: what debugfs does to a fresh image (`{ea}` is
/// the EA inode that holds /f's value, `{dflags}` the flags of /d with
/// the EA_INODE flag added, `{gflags}` those of /g), and the e2fsck code
/// ext4chk must report (none for the undamaged image).
const DAMAGE: [(&str, &[&str], Option<&str>); 6] = [
    ("none", &[], None),
    (
        "entry-names-ea-inode",
        &["ln <{ea}> /xlink"],
        Some("0x020055"),
    ),
    ("no-feature", &["feature -ea_inode"], Some("0x010092")),
    (
        "flag-on-directory",
        &["sif /d flags {dflags}"],
        Some("0x010091"),
    ),
    (
        "flag-on-unattached-file",
        &["sif /g flags {gflags}", "unlink /g"],
        Some("0x040008"),
    ),
    ("value-size-zero", &["sif <{ea}> size 0"], Some("0x010053")),
];

fn mount(img: &Path, mnt: &Path) -> bool {
    Command::new("mount")
        .args(["-t", "ext4", "-o", "loop"])
        .arg(img)
        .arg(mnt)
        .status()
        .is_ok_and(|s| s.success())
}

fn umount(mnt: &Path) {
    let _ = Command::new("umount").arg(mnt).status();
}

/// Sets attribute `name` of `path` (not following a symlink) to `len`
/// bytes, through the kernel.
fn set_xattr(path: &Path, name: &str, len: usize) -> bool {
    let p = CString::new(path.to_str().expect("path")).expect("path");
    let n = CString::new(name).expect("name");
    let value: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
    // SAFETY: both strings are NUL-terminated and the value is a live
    // buffer of the length given.
    let rc = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    rc == 0
}

/// The inode flags debugfs shows for `spec`.
fn flags_of(img: &Path, spec: &str) -> u32 {
    let out = tool(
        "debugfs",
        &["-R", &format!("stat {spec}"), img.to_str().expect("path")],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("Flags: 0x")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

const EA_INODE_FL: u32 = 0x0020_0000;

/// An image whose /f and fast symlink /sl keep attribute values in EA
/// inodes (written by the kernel); `None` when it cannot be mounted.
fn base_image(scratch: &Scratch, set: &str, features: &str, bs: &str) -> Option<PathBuf> {
    let tree = scratch.path(&format!("{set}-{bs}-tree"));
    std::fs::create_dir_all(tree.join("d")).expect("mkdir");
    std::fs::write(tree.join("f"), b"hello\n").expect("write");
    std::fs::write(tree.join("g"), b"an ordinary file\n").expect("write");
    std::os::unix::fs::symlink("foo", tree.join("sl")).expect("symlink");
    let img = scratch.path(&format!("{set}-{bs}.img"));
    common::mke2fs_tree(&img, &tree, bs, &format!("{BASE}{features}"), "16M");
    let mnt = scratch.path(&format!("{set}-{bs}.mnt"));
    std::fs::create_dir_all(&mnt).expect("mount point");
    if !mount(&img, &mnt) {
        return None;
    }
    let big = 3 * bs.parse::<usize>().expect("bs");
    let ok = set_xattr(&mnt.join("f"), "user.big", big)
        && set_xattr(&mnt.join("sl"), "trusted.big", big + 100);
    umount(&mnt);
    assert!(ok, "{set}-{bs}: the kernel did not take the attributes");
    Some(img)
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Damages a copy of `base` and compares ext4chk with 1.47.4 on it.
/// Returns the problems found.
fn judge(
    scratch: &Scratch,
    e4: &Path,
    base: &Path,
    name: &str,
    requests: &[&str],
    want: Option<&str>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let img = scratch.path(&format!("{name}.img"));
    std::fs::copy(base, &img).expect("copy");
    let p = img.to_str().expect("path");
    // /f's value: the flagged inode past the first ones.
    let ea = (12..40)
        .find(|i| flags_of(&img, &format!("<{i}>")) & EA_INODE_FL != 0)
        .expect("an EA inode");
    let dflags = flags_of(&img, "/d") | EA_INODE_FL;
    let gflags = flags_of(&img, "/g") | EA_INODE_FL;
    for req in requests {
        let req = req
            .replace("{ea}", &ea.to_string())
            .replace("{dflags}", &format!("0x{dflags:x}"))
            .replace("{gflags}", &format!("0x{gflags:x}"));
        let out = tool("debugfs", &["-w", "-R", &req, p]);
        assert!(out.status.success(), "{name}: debugfs {req}");
    }
    let theirs = scratch.path(&format!("{name}-e2fsck.img"));
    let ours = scratch.path(&format!("{name}-ext4chk.img"));
    std::fs::copy(&img, &theirs).expect("copy");
    std::fs::copy(&img, &ours).expect("copy");
    let (tp, op) = (theirs.to_str().expect("path"), ours.to_str().expect("path"));
    let e4n = code(&tool_at(e4, &["-fn", p]));
    let n = run(&["-n", p]);
    if code(&n) != e4n {
        problems.push(format!(
            "{name}: -n exits {}, e2fsck 1.47.4 -fn {e4n}\n{}",
            code(&n),
            text(&n)
        ));
    }
    if let Some(c) = want {
        if !text(&n).contains(c) {
            problems.push(format!("{name}: -n does not report {c}\n{}", text(&n)));
        }
    } else if e4n != 0 {
        problems.push(format!(
            "{name}: e2fsck 1.47.4 finds the undamaged image unclean"
        ));
    }
    let e4y = code(&tool_at(e4, &["-fy", tp]));
    let y = run(&["-y", op]);
    if code(&y) != e4y {
        problems.push(format!(
            "{name}: -y exits {}, e2fsck 1.47.4 -fy {e4y}\n{}",
            code(&y),
            text(&y)
        ));
    }
    let after = tool_at(e4, &["-fn", op]);
    if code(&after) != 0 {
        problems.push(format!(
            "{name}: e2fsck 1.47.4 -fn after the repair exits {}\n{}",
            code(&after),
            text(&after)
        ));
    }
    let t = scratch.path(&format!("{name}-trees"));
    match common::files_lost(&theirs, &ours, &t) {
        Some((lost, _)) if !lost.is_empty() => problems.push(format!(
            "{name}: files e2fsck 1.47.4 keeps are lost: {lost:?}"
        )),
        Some(_) => {}
        None => problems.push(format!("{name}: debugfs could not list the files")),
    }
    problems
}

#[test]
fn ea_inode_damage_is_judged_as_e2fsck_1474_judges_it() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "mount", "umount"]) {
        eprintln!("skipped: e2fsprogs or mount missing");
        return;
    }
    let Some(e4) = common::e2fsck_1474() else {
        eprintln!("skipped: e2fsck 1.47.4 is not built (.ci/run builds it into target/)");
        return;
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the kernel writes the EA inodes, which needs root to mount");
        return;
    }
    let scratch = Scratch::new("ea-inode");
    let mut bases = Vec::new();
    for (set, features) in SETS {
        for bs in ["1024", "4096"] {
            match base_image(&scratch, set, features, bs) {
                Some(img) => bases.push((format!("{set}-{bs}"), img)),
                None => {
                    assert!(
                        std::env::var_os("EXT4CHK_REQUIRE_ALL").is_none(),
                        "EXT4CHK_REQUIRE_ALL is set, yet a loop mount of ext4 fails as root"
                    );
                    eprintln!("skipped: this machine cannot loop-mount ext4");
                    return;
                }
            }
        }
    }
    let cases: Vec<(usize, usize)> = (0..bases.len())
        .flat_map(|b| (0..DAMAGE.len()).map(move |d| (b, d)))
        .collect();
    let results = par_map(&cases, |&(b, d)| {
        let (damage, requests, want) = DAMAGE[d];
        let name = format!("{}-{damage}", bases[b].0);
        judge(&scratch, &e4, &bases[b].1, &name, requests, want)
    });
    let problems: Vec<String> = results.into_iter().flatten().collect();
    eprintln!(
        "{} cases ({} file systems x {} kinds of damage), {} problems",
        cases.len(),
        bases.len(),
        DAMAGE.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The corpus's EA-inode images: what 1.47.4 reports of them, ext4chk
/// reports, and nothing 1.47.0 alone reports (an inode holding a value
/// called unattached, a fast symlink's target called an illegal block),
/// also when 1.47.4 is not built.
#[test]
fn corpus_ea_inode_images_follow_e2fsck_1474() {
    let dir = common::corpus_dir().join("e2fsprogs");
    if !dir.join("f_ea_inode").is_dir() {
        eprintln!("skipped: the corpus is not there");
        return;
    }
    let scratch = Scratch::new("ea-inode-corpus");
    let cases: [(&str, &[&str], &[&str]); 7] = [
        ("f_ea_inode", &["0x040005"], &["0x040002"]),
        ("f_ea_inode_dir_ref", &["0x020055"], &[]),
        ("f_ea_inode_no_feature", &["0x010092"], &[]),
        ("f_ea_inode_spurious_flag_dir", &["0x010091"], &[]),
        ("f_ea_zero_size", &["0x010053"], &["0x010054"]),
        ("f_ea_inode_disconnected", &["0x040008", "0x040002"], &[]),
        ("f_ea_inode_fast_symlink", &[], &["0x01000e"]),
    ];
    for (t, want, never) in cases {
        let img = scratch.path(&format!("{t}.img"));
        common::gunzip(&common::corpus_image(t), &img);
        let n = run(&["-n", img.to_str().expect("path")]);
        let out = text(&n);
        for c in want {
            assert!(out.contains(c), "{t}: {c} is not reported\n{out}");
        }
        for c in never {
            assert!(!out.contains(c), "{t}: {c} is reported\n{out}");
        }
        if t == "f_ea_inode_fast_symlink" {
            assert_eq!(code(&n), 0, "{t}\n{out}");
            let y = run(&["-y", img.to_str().expect("path")]);
            assert_eq!(code(&y), 0, "{t}: -y\n{}", text(&y));
        }
    }
}
