//! The e2fsprogs regression corpus, read-only: ext4chk must reach the same
//! verdict as `e2fsck -fn` (clean or not), never crash, and never change a
//! byte of the image.

mod common;

use common::{code, gunzip, known_list, manifest, par_map, run, shared, Row, Scratch};

/// Rows whose oracle is not a verdict: e2fsck crashed, hung, or upstream
/// checks the image with other options.
fn excluded(r: &Row) -> Option<&'static str> {
    if r.notes.contains("crashes") {
        Some("e2fsck 1.47.0 crashes on it")
    } else if r.fn_exit == "timeout" || r.notes.contains("never finishes") {
        Some("e2fsck 1.47.0 never finishes")
    } else if r.special_opts != "-" {
        Some("upstream checks it with special options")
    } else {
        None
    }
}

struct Outcome {
    test: String,
    expected: String,
    got: i32,
    unchanged: bool,
    excluded: Option<&'static str>,
}

#[test]
fn corpus_read_only_verdicts_match_e2fsck() {
    let rows = manifest();
    assert!(
        rows.len() > 200,
        "the corpus should have about 209 images, found {}",
        rows.len()
    );
    let scratch = Scratch::new("corpus-ro");
    let outcomes = par_map(&rows, |r| {
        let gz = shared()
            .join("corpus/e2fsprogs")
            .join(&r.test)
            .join("image.gz");
        let img = scratch.path(&format!("{}.img", r.test));
        gunzip(&gz, &img);
        let before = std::fs::read(&img).expect("image");
        let out = run(&["-n", img.to_str().expect("utf-8 path")]);
        let after = std::fs::read(&img).expect("image");
        let _ = std::fs::remove_file(&img);
        Outcome {
            test: r.test.clone(),
            expected: r.fn_exit.clone(),
            got: code(&out),
            unchanged: before == after,
            excluded: excluded(r),
        }
    });
    let known = known_list("corpus-readonly.txt");
    let mut agree = 0;
    let mut total = 0;
    let mut problems = Vec::new();
    for o in &outcomes {
        // Every run ends with one of e2fsck's exit codes: no panic, no signal.
        if ![0, 4, 8, 12].contains(&o.got) {
            problems.push(format!("{}: crashed or bad exit code {}", o.test, o.got));
        }
        if !o.unchanged {
            problems.push(format!("{}: the read-only check changed the image", o.test));
        }
        if o.expected == "timeout" && o.got == 0 {
            problems.push(format!(
                "{}: e2fsck never finishes here; ext4chk must report errors",
                o.test
            ));
        }
        if o.excluded.is_some() {
            continue;
        }
        total += 1;
        let same = (o.expected == "0") == (o.got == 0);
        let listed = known.contains(&o.test);
        match (same, listed) {
            (true, false) => agree += 1,
            (true, true) => problems.push(format!(
                "{}: now agrees with e2fsck; remove it from tests/known/corpus-readonly.txt",
                o.test
            )),
            (false, true) => {}
            (false, false) => problems.push(format!(
                "{}: e2fsck -fn exits {}, ext4chk -n exits {}",
                o.test, o.expected, o.got
            )),
        }
    }
    eprintln!(
        "corpus read-only agreement: {agree}/{total} (excluded {})",
        outcomes.len() - total
    );
    assert!(
        problems.is_empty(),
        "corpus problems:\n{}",
        problems.join("\n")
    );
    assert!(
        agree * 100 >= total * 95,
        "agreement {agree}/{total} is below 95%"
    );
}
