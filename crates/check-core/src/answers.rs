//! The answers to a repair's questions. e2fsck asks, for each problem,
//! whether to fix it ("Clear inode? yes"), and judges what follows as
//! the answer leaves it. A check inside a repair does the same: where a
//! pass's judgement depends on whether an earlier problem is fixed (a
//! cleared inode's entries, a declined '..' fix), it asks its
//! [`Answers`].

use std::fmt;

use crate::problem::{Code, Finding, Numbers};

/// Who answers: everything yes (`-y`), or a person at a terminal.
pub trait Answers: Send + Sync + fmt::Debug {
    /// Whether problem `f` is to be fixed. The same problem may be asked
    /// again (by a later check of the same repair): the answer must be the
    /// same.
    fn yes(&self, f: &Finding) -> bool;

    /// A pass has ended; `found` holds what it found, in report order.
    /// Problems nothing asked about during the pass can be asked now,
    /// before the next pass starts.
    fn pass_done(&self, found: &[Finding]) {
        let _ = found;
    }

    /// Whether the person answering has asked to stop (Ctrl-C at a
    /// question).
    fn cancelled(&self) -> bool {
        false
    }
}

/// Told of each pass of a read-only check as it ends: what it found,
/// sorted as the report sorts it and named (paths) as the report names
/// it, so that a report can be printed as the check goes. Passes come in
/// report order; the checks before pass 1 and passes 1, 1B and 2 come
/// together once pass 2 is over (pass 2 names what pass 1 found).
pub trait PassListener: Send + Sync + fmt::Debug {
    /// `pass` has ended and found `found`; `notes` are the report's notes
    /// so far, and `lines` pass 1's `-E fragcheck` lines (with pass 1).
    fn pass_done(
        &self,
        pass: crate::problem::Pass,
        found: &[Finding],
        notes: &[String],
        lines: &[String],
    );
}

/// What identifies a problem across the checks of one repair: its code,
/// where it is and what was found there, not what was expected (a count
/// that a fix of something else changes is still the same question).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProblemKey {
    code: Code,
    ino: Option<u32>,
    ino2: Option<u32>,
    dir: Option<u32>,
    blk: Option<u64>,
    blk2: Option<u64>,
    group: Option<u32>,
    numbers: Numbers,
    name: Option<Vec<u8>>,
    detail: Option<String>,
}

impl ProblemKey {
    /// The key of `f`.
    pub fn of(f: &Finding) -> ProblemKey {
        ProblemKey {
            code: f.code,
            ino: f.ino,
            ino2: f.ino2,
            dir: f.dir,
            blk: f.blk,
            blk2: f.blk2,
            group: f.group,
            numbers: f.numbers.without_expected(),
            name: f.name.clone(),
            detail: f.detail.clone(),
        }
    }
}

/// Yes to everything (e2fsck -y).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllYes;

impl Answers for AllYes {
    fn yes(&self, _f: &Finding) -> bool {
        true
    }
}

/// The answers with e2fsck.conf's `force_no` problems always declined
/// (see [`crate::overrides`]), and, when preening, its `no_default` ones
/// too (preen takes the default answer); the rest go to `inner` (yes when
/// `None`).
#[derive(Debug)]
pub struct Configured {
    /// Who answers the rest.
    pub inner: Option<std::sync::Arc<dyn Answers>>,
    /// The repair preens.
    pub preen: bool,
}

impl Answers for Configured {
    fn yes(&self, f: &Finding) -> bool {
        let declined = f.code.force_no() || (self.preen && f.code.no_default());
        !declined && self.inner.as_ref().is_none_or(|a| a.yes(f))
    }

    fn pass_done(&self, found: &[Finding]) {
        if let Some(a) = &self.inner {
            a.pass_done(found);
        }
    }

    fn cancelled(&self) -> bool {
        self.inner.as_ref().is_some_and(|a| a.cancelled())
    }
}
