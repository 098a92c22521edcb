//! The result of a check: findings sorted into a stable order, the
//! summary counts, and the exit code e2fsck would give.

use crate::problem::Finding;

/// e2fsck's exit status bits.
pub mod exit {
    /// No errors.
    pub const OK: i32 = 0;
    /// Errors were corrected.
    pub const CORRECTED: i32 = 1;
    /// Errors were corrected and the system should be rebooted.
    pub(crate) const REBOOT: i32 = 2;
    /// Errors were left uncorrected.
    pub const UNCORRECTED: i32 = 4;
    /// Operational error.
    pub const OPERATIONAL: i32 = 8;
    /// Usage or syntax error.
    pub const USAGE: i32 = 16;
    /// Cancelled by the user.
    pub const CANCELLED: i32 = 32;
}

/// The counts in the closing summary line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Inodes in use.
    pub inodes_used: u64,
    /// Total inodes.
    pub inodes_count: u64,
    /// Blocks in use.
    pub blocks_used: u64,
    /// Total blocks.
    pub blocks_count: u64,
    /// Files whose blocks are not contiguous.
    pub non_contiguous: u64,
    /// Regular files.
    pub regular: u64,
    /// Directories.
    pub directories: u64,
    /// Character devices.
    pub chardev: u64,
    /// Block devices.
    pub blockdev: u64,
    /// FIFOs.
    pub fifos: u64,
    /// Sockets.
    pub sockets: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Fast symbolic links (target in the inode).
    pub fast_symlinks: u64,
    /// Links (directory entries other than '.' and '..').
    pub links: u64,
    /// References beyond each inode's first one (e2fsck's link count).
    pub extra_links: u64,
    /// Regular files whose blocks are not contiguous.
    pub fragmented_files: u64,
    /// Directories whose blocks are not contiguous.
    pub fragmented_dirs: u64,
    /// Block-mapped inodes with an indirect, double indirect and triple
    /// indirect block.
    pub ind_dind_tind: [u64; 3],
    /// Extent-mapped inodes by tree depth.
    pub extent_depth: Vec<u64>,
    /// Blocks on the bad-block list.
    pub bad_blocks: u64,
    /// Regular files of 2 GiB or more.
    pub large_files: u64,
}

/// Everything a check produced.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The device or image checked.
    pub device: String,
    /// The volume label, if any.
    pub label: String,
    /// Findings, sorted.
    pub findings: Vec<Finding>,
    /// Summary counts (absent when the check stopped before pass 5).
    pub summary: Option<Summary>,
    /// Why the check stopped partway, if it did.
    pub aborted: Option<String>,
    /// Whether the file system was modified.
    pub modified: bool,
    /// Notes printed before the findings (I/O path, backup superblock...).
    pub notes: Vec<String>,
    /// The stop counts as leaving errors even without an error finding.
    pub forced_uncorrected: bool,
    /// A repair stopped because a write to the device or the undo file
    /// failed: the exit code is 8, or 12 when errors remain, whatever was
    /// fixed before.
    pub write_failed: bool,
    /// Preen met a problem it may not fix on its own and stopped (e2fsck's
    /// "UNEXPECTED INCONSISTENCY"): the exit code is 4, whatever was
    /// fixed before.
    pub preen_halt: Option<String>,
    /// At an interactive repair's plan, the person chose to quit: nothing
    /// was written.
    pub quit_at_plan: bool,
    /// A repair was interrupted (SIGINT or SIGTERM) at a safe point.
    pub cancelled: bool,
    /// In an interactive repair, whether a question was answered no
    /// (`None` when nobody was asked). A canceled run counts its errors as
    /// left only then, as e2fsck counts a file system as invalid only once
    /// a fix has been declined.
    pub declined: Option<bool>,
    /// An online check's record (`--online`): its exit code is e2scrub's.
    pub online: Option<OnlineRecord>,
    /// The repaired file system is the root, mounted read-only: once it
    /// has been changed the system must be rebooted.
    pub mounted_root: bool,
    /// How the run went (scheduling, deferrals): shown with `-v` on
    /// stderr, never part of the text or JSON report, which depend only
    /// on the file system.
    pub diagnostics: Vec<String>,
    /// The check was skipped: the file system is clean and not due (only
    /// when asked to skip, as e2fsck does without -f).
    pub skipped: Option<crate::due::Skipped>,
    /// Why a check that could have been skipped was made.
    pub forced: Option<crate::due::Reason>,
    /// A repair rewrote directories or mappings without a problem asking
    /// for it (pass 3A's indexing, `-D`, `bmap2extent`).
    pub restructured: bool,
    /// A dry run: nothing was written, and this many blocks would have
    /// been.
    pub dry_run: Option<u64>,
    /// Lines printed under pass 1's heading (`-E fragcheck`).
    pub pass1_lines: Vec<String>,
    /// Wall time of each phase of the last check, in seconds (for `-tt`).
    pub phases: Vec<(String, f64)>,
    /// How a repair went, round by round (`None` for a check).
    pub repair: Option<RepairRecord>,
}

/// How a repair went: each check it ran (the first, one after each
/// round's writes, the last of which verifies the result) and each round
/// of fixes between them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RepairRecord {
    /// Each check, in order.
    pub checks: Vec<CheckRecord>,
    /// Each round of fixes.
    pub rounds: Vec<RoundRecord>,
    /// Orphaned inodes released before the check.
    pub orphans_released: u64,
    /// Blocks replayed from the journal.
    pub journal_blocks_replayed: u64,
    /// Committed transactions replayed from the journal.
    pub journal_transactions_replayed: u64,
}

/// One check a repair ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckRecord {
    /// What it read.
    pub kind: CheckKind,
    /// Its wall time, in seconds.
    pub seconds: f64,
    /// File system blocks it read (from the page cache, the device or
    /// the repair's own writes).
    pub blocks_read: u64,
}

/// What a check of a repair read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckKind {
    /// The whole file system's metadata, as a check reads it.
    #[default]
    Full,
}

impl CheckKind {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::Full => "full",
        }
    }
}

/// How an online check went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OnlineRecord {
    /// Where the file system is mounted.
    pub mount_point: String,
    /// Each freeze's length, in seconds.
    pub freezes: Vec<f64>,
    /// Problems the frozen copy confirmed (the report's findings).
    pub confirmed: usize,
    /// Problems seen while live that the frozen copy did not show (changes
    /// caught half way), by code name.
    pub dropped: Vec<String>,
    /// e2scrub's exit code: 0 clean, 6 confirmed damage, 8 could not check.
    pub exit_code: i32,
    /// Bytes copied while the file system was frozen, in all freezes.
    pub frozen_bytes: u64,
    /// The freezes copied only the blocks the journal said had changed
    /// since a copy taken while the file system ran.
    pub from_journal: bool,
}

/// One round of a repair.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoundRecord {
    /// Findings the round's plan fixed.
    pub fixed: u64,
    /// Findings pass 1's workers fixed while the check before it ran.
    pub fixed_during_check: u64,
    /// Blocks written.
    pub blocks_written: u64,
    /// Time to plan the fixes, in seconds.
    pub plan_seconds: f64,
    /// Time to write them, in seconds.
    pub write_seconds: f64,
    /// Why the round left problems to the next check (a restart), if it
    /// did.
    pub stopped_early: Option<String>,
}

impl Report {
    /// Sorts findings into their stable order and drops exact duplicates.
    pub fn finish(&mut self) {
        self.findings
            .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        self.findings.dedup();
    }

    /// Whether any unfixed finding is an error.
    pub fn has_uncorrected_errors(&self) -> bool {
        self.findings
            .iter()
            .any(|f| f.code.counts_as_error() && !f.fixed)
    }

    /// The e2fsck-compatible exit code.
    pub fn exit_code(&self) -> i32 {
        if let Some(o) = &self.online {
            return o.exit_code;
        }
        if self.preen_halt.is_some() {
            return exit::UNCORRECTED;
        }
        if self.skipped.is_some() && self.aborted.is_none() {
            // As e2fsck: a skipped file system exits 0, even after its
            // journal was replayed and its orphans released.
            return if self.cancelled {
                exit::CANCELLED
            } else {
                exit::OK
            };
        }
        if self.write_failed {
            return exit::OPERATIONAL
                | if self.forced_uncorrected {
                    exit::UNCORRECTED
                } else {
                    exit::OK
                };
        }
        if self.cancelled && self.aborted.is_none() {
            // As e2fsck: a canceled run does not count its fixes, and
            // counts errors as left once one was seen and not fixed.
            let left = self
                .declined
                .unwrap_or_else(|| self.has_uncorrected_errors());
            return exit::CANCELLED | if left { exit::UNCORRECTED } else { exit::OK };
        }
        let mut code = exit::OK;
        if self.has_uncorrected_errors() {
            code |= exit::UNCORRECTED;
        }
        // As e2fsck: a fix counts when the file system was changed, and
        // the descriptor fixes e2fsck makes while reading the descriptors
        // do not change it on their own. An optimisation is the reverse:
        // it changes the file system but is no fix.
        let fixed = self
            .findings
            .iter()
            .any(|f| f.fixed && !f.code.policy().optional);
        let changed = self.restructured
            || self.findings.iter().any(|f| {
                f.fixed && ((!f.quiet && f.code.counts_as_fix()) || f.code.policy().optional)
            });
        if fixed && changed {
            code |= exit::CORRECTED;
        }
        if self.modified && self.mounted_root {
            code |= exit::CORRECTED | exit::REBOOT;
        }
        if code & exit::UNCORRECTED != 0 {
            // As e2fsck: errors left take back the "corrected" bit.
            code &= !exit::CORRECTED;
        }
        if self.cancelled {
            code |= exit::CANCELLED;
        }
        if self.aborted.is_some() {
            code |= exit::OPERATIONAL;
            if self.forced_uncorrected {
                code |= exit::UNCORRECTED;
            }
        }
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Code, Finding};

    #[test]
    fn exit_codes_follow_e2fsck() {
        let mut r = Report::default();
        assert_eq!(r.exit_code(), 0);
        r.findings.push(Finding::new(Code::JournalNeedsRecovery));
        assert_eq!(r.exit_code(), 0, "a notice is not an error");
        r.findings
            .push(Finding::new(Code::BadISize).ino(12).mismatch(1, 2));
        assert_eq!(r.exit_code(), 4);
        r.aborted = Some("x".into());
        assert_eq!(r.exit_code(), 12);
    }

    #[test]
    fn a_preen_halt_exits_4_whatever_was_fixed() {
        let mut r = Report::default();
        let mut f = Finding::new(Code::BadISize).ino(12).mismatch(1, 2);
        f.fixed = true;
        r.findings.push(f);
        r.preen_halt = Some("UNEXPECTED INCONSISTENCY".into());
        assert_eq!(r.exit_code(), 4);
    }

    #[test]
    fn a_changed_mounted_root_asks_for_a_reboot() {
        let mut r = Report {
            mounted_root: true,
            ..Default::default()
        };
        assert_eq!(r.exit_code(), 0, "nothing changed, nothing to reboot for");
        let mut f = Finding::new(Code::BadISize).ino(12).mismatch(1, 2);
        f.fixed = true;
        r.findings.push(f);
        r.modified = true;
        assert_eq!(r.exit_code(), 3);
    }
}
