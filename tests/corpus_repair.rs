//! The e2fsprogs regression corpus, repaired: for every image that
//! `e2fsck -fy` repairs to clean, `ext4chk --repair` must leave a file
//! system the real `e2fsck -fn` calls clean, a second repair must find
//! nothing, and every regular file e2fsck's own repair keeps (path and
//! content) must be kept too. No image may crash the repair.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    code, corpus_image, files_lost, find_tool, gunzip, have, known_list, manifest, par_map, run,
    Row, Scratch,
};

/// The e2fsck an image is judged by: 1.47.4 where ext4chk follows it
/// (and it is built), else the installed one.
fn oracle(r: &Row) -> Option<PathBuf> {
    if r.follows_1474 {
        common::e2fsck_1474()
    } else {
        find_tool("e2fsck")
    }
}

/// e2fsck, bounded in time: on a few damaged images it never finishes.
fn e2fsck_fn(r: &Row, img: &Path) -> i32 {
    let Some(e2fsck) = oracle(r) else {
        return -1;
    };
    let out = Command::new("timeout")
        .args(["-s", "KILL", "30"])
        .arg(e2fsck)
        .args(["-fn", img.to_str().expect("path")])
        .env("E2FSCK_CONFIG", "/dev/null")
        .output()
        .expect("e2fsck runs");
    code(&out)
}

fn e2fsck_fy(r: &Row, img: &Path) -> i32 {
    let Some(e2fsck) = oracle(r) else {
        return -1;
    };
    let out = Command::new("timeout")
        .args(["-s", "KILL", "30"])
        .arg(e2fsck)
        .args(["-fy", img.to_str().expect("path")])
        .env("E2FSCK_CONFIG", "/dev/null")
        .output()
        .expect("e2fsck runs");
    code(&out)
}

struct Outcome {
    test: String,
    first: i32,
    fn_after: i32,
    second: i32,
    lost: Vec<String>,
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn corpus_repairs_leave_clean_file_systems() {
    if !have("e2fsck") || !have("debugfs") {
        eprintln!("e2fsprogs is not installed: skipping the corpus repair test");
        return;
    }
    let Some(rows) = manifest() else {
        return;
    };
    let scratch = Scratch::new("corpus-rep");
    let outcomes = par_map(&rows, |r| {
        let gz = corpus_image(&r.test);
        let img = scratch.path(&format!("{}.img", r.test));
        gunzip(&gz, &img);
        let first = code(&run(&["-y", img.to_str().expect("path")]));
        // An image judged by 1.47.4 counts where 1.47.4 is built.
        let counted = r.fn_after_fy == "0" && oracle(r).is_some();
        let (mut fn_after, mut second, mut lost) = (0, 0, Vec::new());
        // What e2fsck's own repair keeps, also where e2fsck does not leave
        // the file system clean: a file it keeps is a file to keep.
        // (Without its oracle, an image is not compared.)
        let theirs = scratch.path(&format!("{}.e2fsck.img", r.test));
        gunzip(&gz, &theirs);
        let trees = scratch.path(&format!("{}.trees", r.test));
        if e2fsck_fy(r, &theirs) >= 0 {
            if let Some((gone, _)) = files_lost(&theirs, &img, &trees) {
                lost = gone;
            }
        }
        let _ = std::fs::remove_dir_all(&trees);
        let _ = std::fs::remove_file(&theirs);
        if counted {
            fn_after = e2fsck_fn(r, &img);
            second = code(&run(&["-y", img.to_str().expect("path")]));
        }
        let _ = std::fs::remove_file(&img);
        Outcome {
            test: r.test.clone(),
            first,
            fn_after,
            second,
            lost,
        }
    });
    let known = known_list("corpus-repair.txt");
    let known_loss = known_list("corpus-repair-loss.txt");
    let counted: Vec<&str> = rows
        .iter()
        .filter(|r| r.fn_after_fy == "0" && oracle(r).is_some())
        .map(|r| r.test.as_str())
        .collect();
    let mut problems = Vec::new();
    let mut clean = 0;
    for o in &outcomes {
        // Any combination of e2fsck's exit bits; a signal or a panic is a crash.
        if o.first < 0 || o.first >= 64 || o.first & 16 != 0 {
            problems.push(format!(
                "{}: the repair crashed or exited {}",
                o.test, o.first
            ));
        }
        if !counted.contains(&o.test.as_str()) {
            continue;
        }
        let ok = o.fn_after == 0 && o.second == 0;
        let listed = known.contains(&o.test);
        match (ok, listed) {
            (true, false) => clean += 1,
            (true, true) => problems.push(format!(
                "{}: now repaired; remove it from tests/known/corpus-repair.txt",
                o.test
            )),
            (false, true) => {}
            (false, false) => problems.push(format!(
                "{}: after ext4chk -y, e2fsck -fn exits {} and a second ext4chk -y exits {}",
                o.test, o.fn_after, o.second
            )),
        }
        let loss_listed = known_loss.contains(&o.test);
        match (o.lost.is_empty(), loss_listed) {
            (false, false) => problems.push(format!(
                "{}: files e2fsck keeps are lost or changed: {}",
                o.test,
                o.lost.join(", ")
            )),
            (true, true) if ok => problems.push(format!(
                "{}: no longer loses files; remove it from tests/known/corpus-repair-loss.txt",
                o.test
            )),
            _ => {}
        }
    }
    eprintln!(
        "corpus repair: {clean}/{} clean after repair",
        counted.len()
    );
    // The first repair's exit code against e2fsck -fy's, on the counted
    // images checked without special options. e2fsck exits 0 after some
    // repairs it does not count as changes (orphans released, checksum-only
    // fixes, a journal moved, extent trees optimised): every one agrees.
    let same_exit = outcomes
        .iter()
        .filter(|o| {
            rows.iter().any(|r| {
                r.test == o.test
                    && r.fn_after_fy == "0"
                    && r.special_opts == "-"
                    && r.fy_exit == o.first.to_string()
            })
        })
        .count();
    let exit_counted = rows
        .iter()
        .filter(|r| r.fn_after_fy == "0" && r.special_opts == "-")
        .count();
    eprintln!("corpus repair: first exit code as e2fsck -fy's on {same_exit}/{exit_counted}");
    for o in &outcomes {
        if let Some(r) = rows.iter().find(|r| {
            r.test == o.test
                && r.fn_after_fy == "0"
                && r.special_opts == "-"
                && r.fy_exit != o.first.to_string()
        }) {
            eprintln!(
                "  {}: ext4chk -y exits {}, e2fsck -fy {}",
                o.test, o.first, r.fy_exit
            );
        }
    }
    assert_eq!(
        same_exit, exit_counted,
        "exit codes agree with e2fsck -fy on only {same_exit}/{exit_counted} images"
    );
    assert!(
        problems.is_empty(),
        "corpus repair problems:\n{}",
        problems.join("\n")
    );
    assert!(
        clean * 100 >= counted.len() * 90,
        "only {clean}/{} images are clean after repair",
        counted.len()
    );
}
