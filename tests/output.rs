//! What ext4chk prints, as those who read it see it: a reader that goes
//! away early (`| head`), a JSON document with `-C 0`, output that
//! streams while the check runs.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{bin, have_all, mke2fs, tool, Scratch};

/// An image with a few thousand problems (wrong link counts): a report
/// far larger than a pipe holds.
fn many_problems(scratch: &Scratch, name: &str) -> PathBuf {
    let tree = scratch.path(&format!("{name}-tree"));
    for d in 0..8 {
        let dir = tree.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..250 {
            std::fs::write(dir.join(format!("f{f}")), format!("{d}/{f}")).expect("write");
        }
    }
    let img = scratch.path(&format!("{name}.img"));
    let p = img.to_str().expect("path");
    mke2fs(&[
        "-t",
        "ext4",
        "-N",
        "4096",
        "-d",
        tree.to_str().expect("path"),
        p,
        "32M",
    ]);
    let cmds: Vec<String> = (12..2000)
        .map(|i| format!("sif <{i}> links_count 7"))
        .collect();
    common::debugfs_batch_w(&img, &cmds, &scratch.0).expect("debugfs");
    img
}

/// Runs ext4chk with its standard output on a pipe that is closed after
/// `lines` lines; returns (status, stderr).
fn run_closing_stdout(args: &[&str], lines: usize) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ext4chk starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    for _ in 0..lines {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap_or(0) == 0 {
            break;
        }
    }
    drop(out);
    let mut err = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    (child.wait().expect("wait"), err)
}

/// `ext4chk -n IMG | head -2` (and every other output path) ends quietly
/// as e2fsck does, killed by SIGPIPE: no panic, no message, no exit 101.
#[test]
fn a_closed_pipe_ends_a_check_quietly() {
    if !have_all(&["mke2fs", "debugfs"]) {
        return;
    }
    let scratch = Scratch::new("pipe");
    let img = many_problems(&scratch, "many");
    let p = img.to_str().expect("path");
    for args in [
        vec!["-n", p],
        vec!["-n", "-v", p],
        vec!["-n", "--format", "json", p],
        vec!["-n", "--format", "junit", p],
        vec!["-n", "-C", "0", p],
        vec!["-fn", "-C", "0", "-v", p],
    ] {
        let (status, err) = run_closing_stdout(&args, 2);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: says something: {err}");
        assert_eq!(status.signal(), Some(13), "{args:?}: {status:?}");
    }
}

/// A repair whose reader goes away finishes its repair: the file system
/// ends clean, and nothing panics.
#[test]
fn a_closed_pipe_does_not_stop_a_repair() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("pipe-y");
    let img = many_problems(&scratch, "many");
    let p = img.to_str().expect("path");
    let (status, err) = run_closing_stdout(&["-y", "-d", p], 1);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        status.code() == Some(1) || status.signal() == Some(13),
        "{status:?}"
    );
    let after = tool("e2fsck", &["-fn", p]);
    assert_eq!(
        after.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&after.stdout)
    );
}

/// `-C 0` with a machine format draws its bar on standard error; the
/// document on standard output stays a document.
#[test]
fn progress_bar_stays_out_of_a_json_document() {
    if !have_all(&["mke2fs", "debugfs"]) {
        return;
    }
    let scratch = Scratch::new("bar-json");
    let img = many_problems(&scratch, "many");
    let p = img.to_str().expect("path");
    for format in ["json", "junit"] {
        let out = common::run(&["-n", "-C", "0", "--format", format, p]);
        let doc = String::from_utf8_lossy(&out.stdout);
        assert!(
            !doc.contains('\u{1}') && !doc.contains('\r') && !doc.contains("|="),
            "{format}: the bar is in the document"
        );
        if format == "json" {
            let v: serde_json::Value = serde_json::from_str(&doc).expect("a JSON document");
            assert_eq!(v["exit_code"], 4);
        } else {
            assert!(doc.starts_with("<?xml"), "{doc}");
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("|"), "{format}: no bar on stderr: {err:?}");
    }
}

/// An ext2 image, labelled, with a file of a bad mode and one with a
/// wrong link count.
fn bad_mode_and_link_count(scratch: &Scratch, name: &str) -> PathBuf {
    let tree = scratch.path(&format!("{name}-tree"));
    std::fs::create_dir_all(tree.join("a")).expect("mkdir");
    for i in 0..8 {
        std::fs::write(tree.join("a").join(format!("f{i}")), format!("{i}")).expect("write");
    }
    let img = scratch.path(&format!("{name}.img"));
    mke2fs(&[
        "-t",
        "ext2",
        "-L",
        "mylabel",
        "-d",
        tree.to_str().expect("path"),
        img.to_str().expect("path"),
        "8M",
    ]);
    common::debugfs_batch_w(
        &img,
        &[
            "sif /a/f3 mode 0170644".into(),
            "sif /a/f5 links_count 3".into(),
        ],
        &scratch.0,
    )
    .expect("debugfs");
    img
}

/// Where the check knows a path, it names it: the file a bad mode was
/// reached through (as e2fsck: "Inode 26 (/a/f3) has invalid mode"), the
/// file whose link count is wrong; in the text and in the JSON.
#[test]
fn inodes_are_named_by_path_where_the_check_knows_it() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("paths");
    let img = bad_mode_and_link_count(&scratch, "paths");
    let p = img.to_str().expect("path");
    let e2 = tool("e2fsck", &["-fn", p]);
    assert!(String::from_utf8_lossy(&e2.stdout).contains("(/a/f3) has invalid mode"));
    let out = common::run(&["-n", p]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(/a/f3) has a bad mode"), "{text}");
    assert!(text.contains("(/a/f5) has link count 3"), "{text}");
    let out = common::run(&["-n", "--format", "json", p]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let paths: Vec<(String, String)> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| {
            Some((
                f["code"].as_str()?.to_string(),
                f["ino_path"].as_str()?.to_string(),
            ))
        })
        .collect();
    assert!(
        paths.contains(&("bad-mode".into(), "/a/f3".into())),
        "{paths:?}"
    );
    assert!(
        paths.contains(&("link-count-wrong".into(), "/a/f5".into())),
        "{paths:?}"
    );
}

/// A clean file system skipped by fsck.ext4 -p is named by its label, as
/// e2fsck names it ("mylabel: clean, ..."), not by its path.
#[test]
fn a_skipped_file_system_is_named_by_its_label() {
    if !have_all(&["mke2fs", "e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("label");
    let img = scratch.path("l.img");
    mke2fs(&[
        "-t",
        "ext4",
        "-L",
        "mylabel",
        img.to_str().expect("path"),
        "16M",
    ]);
    let theirs = scratch.path("e.img");
    std::fs::copy(&img, &theirs).expect("copy");
    let e2 = tool("e2fsck", &["-p", theirs.to_str().expect("path")]);
    let ours = common::run_as("fsck.ext4", &["-p", img.to_str().expect("path")]);
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&e2.stdout)
    );
    assert!(String::from_utf8_lossy(&ours.stdout).starts_with("mylabel: clean"));
}

/// The help and the man page say what the command takes: one DEVICE,
/// and the values of options (-C FD, -E OPTIONS, -b BLOCK).
#[test]
fn the_usage_names_one_device_and_option_values() {
    let out = common::run(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Usage: ext4chk [OPTIONS] DEVICE\n"), "{text}");
    let man = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ext4chk.8"))
        .expect("the man page");
    let synopsis = man
        .split(".SH SYNOPSIS")
        .nth(1)
        .and_then(|s| s.split(".SH").next())
        .expect("a synopsis");
    for want in [
        "\\fB\\-C\\fR \\fIFD\\fR",
        "\\fB\\-E\\fR \\fIOPTIONS\\fR",
        "\\fB\\-\\-superblock\\fR \\fIBLOCK\\fR",
        "\\fIDEVICE\\fR",
    ] {
        assert!(synopsis.contains(want), "{want} not in {synopsis}");
    }
}

/// fsck.ext4 on a mounted device, with no terminal to ask at: e2fsck
/// says the device is mounted and that it cannot go on (exit 8); so does
/// ext4chk (it said to give -p or -y, which are then refused). Needs
/// root and loop devices.
#[test]
fn a_mounted_device_without_a_terminal_is_said_to_be_mounted() {
    if !have_all(&["mke2fs", "e2fsck", "losetup", "mount", "umount"]) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let scratch = Scratch::new("mounted");
    let img = scratch.path("m.img");
    mke2fs(&["-t", "ext4", img.to_str().expect("path"), "32M"]);
    let dev = tool("losetup", &["-f", "--show", img.to_str().expect("path")]);
    let dev = String::from_utf8_lossy(&dev.stdout).trim().to_string();
    if dev.is_empty() {
        return;
    }
    let mnt = scratch.path("mnt");
    std::fs::create_dir_all(&mnt).expect("mkdir");
    let mounted = tool("mount", &[&dev, mnt.to_str().expect("path")]);
    if !mounted.status.success() {
        tool("losetup", &["-d", &dev]);
        return;
    }
    let e2 = tool("e2fsck", &[&dev]);
    let ours = common::run_as("fsck.ext4", &[&dev]);
    tool("umount", &[mnt.to_str().expect("path")]);
    tool("losetup", &["-d", &dev]);
    assert_eq!(common::code(&e2), 8);
    assert_eq!(common::code(&ours), 8);
    let text = String::from_utf8_lossy(&ours.stdout);
    assert!(text.contains(&format!("{dev} is mounted.")), "{text}");
    let err = String::from_utf8_lossy(&ours.stderr);
    assert!(err.contains("cannot continue"), "{err}");
    assert!(!err.contains("needs a terminal"), "{err}");
}
