//! What ext4chk prints, as those who read it see it: a reader that goes
//! away early (`| head`), a JSON document with `-C 0`, output that
//! streams while the check runs.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
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
