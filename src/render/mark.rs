//! What both the text and the JUnit reports say of findings: the pass
//! order, and what happened to each.

use check_core::problem::{Finding, Pass, Severity};

/// The passes in report order.
pub const PASSES: [Pass; 7] = [
    Pass::Super,
    Pass::P1,
    Pass::P1B,
    Pass::P2,
    Pass::P3,
    Pass::P4,
    Pass::P5,
];

/// What happened to a finding, in a word: its fix's word (what a dry run
/// would do), or whether it is an error or a note left as found.
pub fn mark(f: &Finding, dry_run: bool) -> &'static str {
    match (f.code.severity(), f.fixed) {
        (_, true) if dry_run => f.code.prompt().would(),
        (_, true) => f.code.prompt().done(),
        (Severity::Error, false) => "error",
        (Severity::Notice, false) => "note",
    }
}
