//! Clean images must check clean, with the same inode and block counts
//! (and fragmentation figure) that e2fsck reports.

mod common;

use std::path::Path;

use common::{code, fixture_images, gunzip, run, summary_counts, tool, Scratch, FIXTURES};

fn last_line(s: &[u8]) -> String {
    String::from_utf8_lossy(s)
        .lines()
        .last()
        .unwrap_or("")
        .to_string()
}

/// The images committed to the repository need no tools at all.
#[test]
fn committed_images_check_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/images");
    let scratch = Scratch::new("committed");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures/images") {
        let p = entry.expect("entry").path();
        let Some(name) = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".img.gz"))
        else {
            continue;
        };
        seen += 1;
        let img = scratch.path(&format!("{name}.img"));
        gunzip(&p, &img);
        let out = run(&["-n", img.to_str().expect("path")]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(code(&out), 0, "{name} should be clean:\n{text}");
        let want =
            std::fs::read_to_string(dir.join(format!("{name}.counts"))).expect("counts file");
        let got = summary_counts(&last_line(&out.stdout)).expect("summary line");
        assert_eq!(
            format!("{}/{} {}% {}/{}", got.0, got.1, got.2, got.3, got.4),
            want.trim(),
            "{name}: counts differ from e2fsck's"
        );
    }
    assert!(seen >= 2, "expected committed images in {}", dir.display());
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.img");
    let out = run(&[demo.to_str().expect("path")]);
    assert_eq!(code(&out), 0, "the demo image should be clean");
}

/// Every generated configuration is clean, and the counts match e2fsck.
#[test]
fn generated_images_match_e2fsck_counts() {
    let Some(dir) = fixture_images() else {
        eprintln!("mke2fs is not installed: skipping the generated fixtures");
        return;
    };
    for name in FIXTURES {
        let img = dir.join(format!("{name}.img"));
        let p = img.to_str().expect("path");
        let ours = run(&["-n", p]);
        let text = String::from_utf8_lossy(&ours.stdout);
        assert_eq!(code(&ours), 0, "{name} should be clean:\n{text}");
        let theirs = tool("e2fsck", &["-fn", p]);
        assert_eq!(theirs.status.code(), Some(0), "e2fsck calls {name} unclean");
        let a = summary_counts(&last_line(&ours.stdout)).expect("our summary");
        let b = summary_counts(&last_line(&theirs.stdout)).expect("e2fsck summary");
        assert_eq!(a, b, "{name}: counts differ (ours vs e2fsck)");
        // The JSON report agrees with the text one.
        let json = run(&["-n", "--format", "json", p]);
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("valid JSON");
        assert_eq!(v["exit_code"], 0);
        assert_eq!(v["summary"]["inodes_used"], a.0);
        assert_eq!(v["summary"]["blocks_used"], a.3);
    }
}
