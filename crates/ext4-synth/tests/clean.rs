//! Every image ext4-synth writes is one the real e2fsck calls clean, with
//! the inode count and tree it was asked for.

use std::path::{Path, PathBuf};
use std::process::Command;

fn find(tool: &str) -> Option<PathBuf> {
    ["/sbin", "/usr/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.exists())
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("synth-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch");
    d.join(name)
}

/// Runs the binary as scripts do and returns the e2fsck -fn output.
fn make_and_check(name: &str, args: &[&str]) -> Option<(i32, String)> {
    let e2fsck = find("e2fsck")?;
    let img = scratch(name);
    let out = Command::new(env!("CARGO_BIN_EXE_ext4-synth"))
        .args(args)
        .arg(&img)
        .output()
        .expect("ext4-synth runs");
    assert!(
        out.status.success(),
        "ext4-synth {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = Command::new(e2fsck)
        .args(["-fn", img.to_str().expect("path")])
        .env("E2FSCK_CONFIG", "/dev/null")
        .output()
        .expect("e2fsck runs");
    let _ = std::fs::remove_file(&img);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    Some((o.status.code().unwrap_or(-1), text))
}

/// `U/T files` from e2fsck's summary line.
fn files_used(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains(" files ("))?;
    let ut = line.split(" files (").next()?.rsplit(' ').next()?;
    ut.split('/').next()?.parse().ok()
}

#[test]
fn images_of_every_shape_are_clean() {
    let cases: &[(&str, &[&str])] = &[
        ("small", &["--inodes", "500"]),
        (
            "indexed",
            &[
                "--inodes",
                "6000",
                "--files-per-dir",
                "2500",
                "--dir-fanout",
                "2",
            ],
        ),
        (
            "many-groups",
            &[
                "--inodes",
                "40000",
                "--inodes-per-group",
                "1024",
                "--files-per-dir",
                "30",
                "--file-blocks",
                "3",
            ],
        ),
        (
            "empty-files",
            &[
                "--inodes",
                "3000",
                "--file-blocks",
                "0",
                "--symlink-every",
                "0",
                "--hardlink-every",
                "0",
                "--xattr-every",
                "0",
            ],
        ),
        (
            "big-files",
            &[
                "--inodes",
                "300",
                "--file-blocks",
                "20000",
                "--files-per-dir",
                "20",
            ],
        ),
    ];
    for (name, args) in cases {
        let Some((code, text)) = make_and_check(name, args) else {
            eprintln!("e2fsck is not installed: skipping");
            return;
        };
        assert_eq!(code, 0, "{name}: e2fsck -fn exits {code}:\n{text}");
        let want: u64 = args[1].parse().expect("count");
        let used = files_used(&text).unwrap_or(0);
        assert!(
            used >= want,
            "{name}: {used} inodes in use, asked for {want}:\n{text}"
        );
    }
}

#[test]
fn bad_specs_are_refused_with_one_line() {
    let img = scratch("refused");
    for args in [
        &["--inodes", "100", "--inodes-per-group", "100"][..],
        &["--inodes", "100", "--dir-fanout", "0"][..],
        &["--inodes", "100", "--files-per-dir", "70000"][..],
        &[
            "--inodes",
            "200000",
            "--file-blocks",
            "60000",
            "--files-per-dir",
            "10",
        ][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ext4-synth"))
            .args(args)
            .arg(&img)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ext4-synth: "), "{err}");
    }
    let _ = std::fs::remove_file(&img);
}
