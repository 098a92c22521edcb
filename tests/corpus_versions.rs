//! The e2fsprogs corpus against the newest e2fsck (1.47.4, built by
//! `.ci/run` from `../shared/oracle`) beside the installed one (1.47.0,
//! whose verdicts `MANIFEST.tsv` records). Where the two disagree, ext4chk
//! follows 1.47.4 unless 1.47.4 is itself wrong, and
//! `tests/known/corpus-versions.txt` names each such image, the version
//! followed and why. This test runs 1.47.4 on every image: no image may
//! differ from 1.47.0 without being listed, each listed image must still
//! give what the list says, ext4chk's `-n` must reach 1.47.4's verdict
//! and its `-y` 1.47.4's exit code, and 1.47.4's `-fn` must find clean
//! every image ext4chk repaired where 1.47.4's own repair ends clean.

mod common;

use std::path::Path;
use std::process::Command;

use common::{code, corpus_image, corpus_versions, gunzip, manifest_1470, par_map, run, Scratch};

/// e2fsck 1.47.4 on an image, killed after `secs`: it can hang under
/// `-n` (a lock taken twice after a write it cannot make). Exit 137 then.
fn e4(bin: &Path, args: &[&str], img: &Path, secs: u32) -> i32 {
    let out = Command::new("timeout")
        .args(["-s", "KILL", &secs.to_string()])
        .arg(bin)
        .args(args)
        .arg(img)
        .env("LC_ALL", "C")
        .env("TZ", "GMT0")
        .env("E2FSCK_CONFIG", "/dev/null")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("timeout runs");
    code(&out)
}

struct Seen {
    test: String,
    e4n: i32,
    e4y: i32,
    e4_after_own: i32,
    n: i32,
    y: i32,
    e4_after_ours: i32,
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn the_corpus_follows_e2fsck_1474_where_it_fixes_1470() {
    let Some(bin) = common::e2fsck_1474() else {
        let tarball =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/oracle/e2fsprogs-1.47.4.tar.gz");
        assert!(
            !(tarball.is_file() && std::env::var_os("EXT4CHK_REQUIRE_ALL").is_some()),
            "EXT4CHK_REQUIRE_ALL is set and the 1.47.4 source is there, but its e2fsck is not built"
        );
        eprintln!("skipped: e2fsck 1.47.4 is not built (.ci/run builds it into target/)");
        return;
    };
    let Some(rows) = manifest_1470() else {
        return;
    };
    let listed = corpus_versions();
    let scratch = Scratch::new("corpus-versions");
    // Images whose 1.47.4 -fn is known to hang are not run under -n again.
    let hangs = |t: &str| listed.iter().any(|v| v.test == t && v.version == "1.47.0");
    let seen = par_map(&rows, |r| {
        let img = scratch.path(&format!("{}.img", r.test));
        let theirs = scratch.path(&format!("{}.e4.img", r.test));
        let ours = scratch.path(&format!("{}.ours.img", r.test));
        gunzip(&corpus_image(&r.test), &img);
        std::fs::copy(&img, &theirs).expect("copy");
        std::fs::copy(&img, &ours).expect("copy");
        let e4n = if hangs(&r.test) {
            137
        } else {
            e4(&bin, &["-fn"], &img, 60)
        };
        let e4y = e4(&bin, &["-fy"], &theirs, 60);
        let e4_after_own = e4(&bin, &["-fn"], &theirs, 60);
        let n = code(&run(&["-n", img.to_str().expect("path")]));
        let y = code(&run(&["-y", ours.to_str().expect("path")]));
        let e4_after_ours = e4(&bin, &["-fn"], &ours, 60);
        for p in [&img, &theirs, &ours] {
            let _ = std::fs::remove_file(p);
        }
        Seen {
            test: r.test.clone(),
            e4n,
            e4y,
            e4_after_own,
            n,
            y,
            e4_after_ours,
        }
    });
    let mut problems = Vec::new();
    let (mut n_same, mut n_exit_same, mut n_total) = (0, 0, 0);
    let (mut y_same, mut y_total, mut clean, mut clean_total) = (0, 0, 0, 0);
    let mut differ = Vec::new();
    for (r, s) in rows.iter().zip(&seen) {
        let listing = listed.iter().find(|v| v.test == s.test);
        let e4n = s.e4n.to_string();
        let e4y = s.e4y.to_string();
        let differs = r.fn_exit != e4n || r.fy_exit != e4y;
        if differs {
            differ.push(format!(
                "{}: -fn {} / {}, -fy {} / {}",
                s.test, r.fn_exit, e4n, r.fy_exit, e4y
            ));
        }
        match listing {
            None if differs => problems.push(format!(
                "{}: e2fsck 1.47.0 gives -fn {} -fy {}, 1.47.4 -fn {e4n} -fy {e4y}: list it in tests/known/corpus-versions.txt",
                s.test, r.fn_exit, r.fy_exit
            )),
            Some(v) if v.version == "1.47.4" && (v.fn_exit != e4n || v.fy_exit != e4y) => {
                problems.push(format!(
                    "{}: listed as 1.47.4's -fn {} -fy {}, but 1.47.4 gives {e4n} and {e4y}",
                    s.test, v.fn_exit, v.fy_exit
                ))
            }
            Some(_) if !differs => problems.push(format!(
                "{}: 1.47.0 and 1.47.4 agree now; take it off tests/known/corpus-versions.txt",
                s.test
            )),
            _ => {}
        }
        // The verdicts ext4chk must match: 1.47.4's, but where it hangs
        // or crashes (a signal, or exit 8 where 1.47.0 crashes too) or
        // upstream runs the image with other options.
        let crashed = s.e4n >= 128 || (s.e4n == 8 && r.notes.contains("crashes"));
        let judged = !crashed && r.special_opts == "-";
        if judged {
            n_total += 1;
            if (s.n == 0) == (s.e4n == 0) {
                n_same += 1;
            } else {
                problems.push(format!(
                    "{}: ext4chk -n exits {}, e2fsck 1.47.4 -fn {}",
                    s.test, s.n, s.e4n
                ));
            }
            if s.n == s.e4n {
                n_exit_same += 1;
            }
        }
        // Repairs: where 1.47.4's own repair ends clean.
        if s.e4_after_own == 0 && s.e4y < 8 && r.special_opts == "-" {
            y_total += 1;
            clean_total += 1;
            if s.y == s.e4y {
                y_same += 1;
            } else {
                problems.push(format!(
                    "{}: ext4chk -y exits {}, e2fsck 1.47.4 -fy {}",
                    s.test, s.y, s.e4y
                ));
            }
            if s.e4_after_ours == 0 {
                clean += 1;
            } else {
                problems.push(format!(
                    "{}: e2fsck 1.47.4 -fn exits {} after ext4chk -y",
                    s.test, s.e4_after_ours
                ));
            }
        }
    }
    eprintln!(
        "1.47.0 and 1.47.4 differ on {} of {} images:\n  {}",
        differ.len(),
        rows.len(),
        differ.join("\n  ")
    );
    eprintln!(
        "against e2fsck 1.47.4: -n verdict {n_same}/{n_total} (exit code {n_exit_same}/{n_total}); \
         -y exit code {y_same}/{y_total}; clean after ext4chk -y {clean}/{clean_total}"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
