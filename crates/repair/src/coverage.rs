//! Every problem a repair acts on has a fix, or the problem table says it
//! has none.

use check_core::problem::{Code, Pass};
use check_core::Severity;

/// The repair's source, comments left out.
fn repair_source() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the repair crate's source")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("coverage.rs"))
        .collect();
    files.sort();
    assert!(files.len() > 20, "the repair's source files: {files:?}");
    let mut out = String::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a source file");
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Whether `text` names `Code::{name}` (and not a longer name).
fn names(text: &str, code: Code) -> bool {
    let needle = format!("Code::{code:?}");
    text.match_indices(&needle).any(|(at, _)| {
        !text[at + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[test]
fn every_code_a_repair_acts_on_has_a_fix_or_says_it_has_none() {
    let source = repair_source();
    let mut without = Vec::new();
    let mut counted = [0usize; 4];
    for &code in Code::ALL {
        let p = code.policy();
        let acts = code.severity() == Severity::Error || p.fix_notice;
        let named = names(&source, code);
        if p.no_fix {
            assert!(
                !named,
                "{}: the table says none, yet a planner names it",
                code.name()
            );
            counted[3] += 1;
            continue;
        }
        if !acts {
            continue;
        }
        // A column a planner reads for every code it holds.
        let by_column = p.clears_inode
            || p.deallocates
            || p.block_map
            || p.rereads_blocks
            || p.drops_index
            || p.rebuilt_by_pass5
            || p.restarts
            || p.optional;
        // Pass 2 walks each directory it found a problem in again, as
        // e2fsck's entry loop answering yes, and mends what it finds.
        let by_walk = code.pass() == Pass::P2 && code.names_directory();
        match (named, by_column, by_walk) {
            (true, _, _) => counted[0] += 1,
            (false, true, _) => counted[1] += 1,
            (false, false, true) => counted[2] += 1,
            _ => without.push(code.name()),
        }
    }
    assert!(
        without.is_empty(),
        "codes a repair acts on with no fix and no `none` in the table: {without:?}"
    );
    // Each way is in use (a broken scan would find no names at all).
    assert!(counted.iter().all(|&n| n > 0), "{counted:?}");
}

#[test]
fn a_code_name_is_matched_whole() {
    let text = "match f.code { Code::BadIno => 1, Code::BadInodeDot => 2 }";
    assert!(names(text, Code::BadIno));
    assert!(names(text, Code::BadInodeDot));
    assert!(!names("Code::BadInodeDotX", Code::BadInodeDot));
    assert!(!names(text, Code::LinkDot));
}
