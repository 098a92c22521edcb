//! Repair: the check runs (in parallel, read-only) on the device as it is,
//! and a round turns its problems into changes, pass by pass in e2fsck's
//! order, staged in memory ([`Staging`]) and written through the fixer in
//! one ordered commit. Then a check of the result verifies it.
//!
//! - **One round where e2fsck takes one run.** A round goes on from one
//!   pass's fixes to the next pass's as long as the fixes leave the later
//!   passes' findings valid: the problem table says which do
//!   (`keeps`), and under a repair the check already judges the later
//!   passes as e2fsck -y leaves them (`yes`: an entry to be cleared is
//!   not counted, a dropped index is read as the linear directory it
//!   becomes). Pass 3A is made in the round too: directories whose index
//!   the check or the round's fixes drop are indexed again, and linear
//!   directories of three blocks or more (also those a size fix makes so)
//!   are indexed. Pass 5's summaries are rebuilt from the check's maps
//!   and the round's allocations.
//! - **Fixes during the check.** Pass 1's workers send fixes that touch
//!   only an inode's own fields to the fixer while they check.
//! - **Rounds after the first.** A round whose fixes change what a later
//!   pass judges (a block map rebuilt, a root made) stops early and says
//!   why; the next check judges the rest, as e2fsck judges it only after
//!   those fixes, and restarts where e2fsck restarts. The repair ends
//!   with a check that finds nothing to fix, or when nothing more can be.
//! - **What was read.** Every check is a full check of the file system's
//!   metadata; the report lists each with its time and the blocks it read
//!   (`RepairRecord::checks`).
//!
//! Every write goes through [`fixer::Fixer`]; nothing here opens the
//! device for writing itself.
//!
//! ```no_run
//! use pipeline::{IoMode, Target};
//! use repair::{repair, Mode, RepairOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let opts = RepairOptions {
//!     check: check_core::CheckOptions::default(),
//!     io: IoMode::Auto,
//!     mode: Mode::All,
//!     undo: Some("fs.undo".into()),
//!     max_rounds: 16,
//!     skip_if_clean: None,
//!     journal_only: false,
//!     bad_blocks: None,
//!     optimize_dirs: false,
//!     bmap2extent: false,
//!     discard: false,
//!     dry_run: false,
//! };
//! let done = repair(&Target::parse("fs.img")?, &opts);
//! println!("{} rounds, exit code {}", done.rounds, done.report.exit_code());
//! # Ok(())
//! # }
//! ```

mod account;
mod alloc;
pub mod badblocks;
mod blocks;
mod connect;
mod convert;
#[cfg(test)]
mod coverage;
mod descriptors;
mod dirs;
mod discard;
mod error;
mod fastcommit;
mod finish;
mod inodes;
pub use inodes::{inode_local_fix, Streamed};
mod journal;
mod map;
mod mkjournal;
mod mmp;
pub(crate) mod orphan;
mod prepass;
mod quota;
mod raw;
mod rebuild;
mod rehash;
mod release;
mod resize;
mod round;
mod run;
mod skip;
pub mod stage;
mod steps;
mod tree;

use std::path::PathBuf;

use check_core::ctx::CheckOptions;
use check_core::report::Report;
use pipeline::IoMode;

pub use error::Error;
pub use run::repair;
pub use stage::Staging;

/// How much to repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Everything (`-y`).
    All,
    /// Only what e2fsck's preen mode repairs on its own (`-p`).
    Preen,
}

/// Options of a repair.
#[derive(Clone, Debug)]
pub struct RepairOptions {
    /// How the checks run.
    pub check: CheckOptions,
    /// The I/O path for reads.
    pub io: IoMode,
    /// What to repair.
    pub mode: Mode,
    /// Where to write an undo file.
    pub undo: Option<PathBuf>,
    /// The most check-and-fix rounds before giving up.
    pub max_rounds: usize,
    /// Skip the check of a file system that is clean and not due, once
    /// its journal and orphans are dealt with (e2fsck without -f).
    pub skip_if_clean: Option<check_core::due::Clock>,
    /// With `skip_if_clean`: stop once the journal is replayed.
    pub journal_only: bool,
    /// Changes to the bad-block list (`-c`, `-l`, `-L`), made before the
    /// passes.
    pub bad_blocks: Option<badblocks::Change>,
    /// `-D`: once nothing is left to fix, rewrite every directory compactly.
    pub optimize_dirs: bool,
    /// `-E bmap2extent`: once nothing is left to fix, give block-mapped
    /// files and directories extent trees.
    pub bmap2extent: bool,
    /// `-E discard`: discard the free space of a file system the repair
    /// found clean and did not change.
    pub discard: bool,
    /// `--dry-run`: the device is opened read-only and every write is kept
    /// in memory, where each round's check reads it; nothing reaches the
    /// device.
    pub dry_run: bool,
}

/// The outcome of a repair.
pub struct Repaired {
    /// Everything found and fixed, then what the last check still finds.
    pub report: Report,
    /// Check-and-fix rounds run.
    pub rounds: usize,
}
