//! What the steps before the passes share: their outcome, the file
//! system as each step opens it afresh, and the commit of a step's
//! changes through the fixer.

use std::sync::Arc;

use ext4_layout::superblock as sbl;
use pipeline::Device;

use crate::error::Error;
use crate::stage::Staging;
use check_core::fs::{open_fs, Fs, OpenOptions};
use check_core::problem::Finding;

/// What the journal and orphan steps did.
#[derive(Default)]
pub struct PrePass {
    /// Problems fixed.
    pub fixed: Vec<Finding>,
    /// Lines for the report.
    pub notes: Vec<String>,
    /// Whether anything was written.
    pub modified: bool,
    /// Whether an unusable journal was removed (a new one is made once
    /// the file system is clean).
    pub journal_removed: bool,
    /// Whether the journal inode was rewritten from the superblock's copy
    /// of its block map.
    pub journal_restored: bool,
    /// Whether group descriptors were fixed (the check then runs, as
    /// e2fsck does not skip a file system whose descriptors it fixed).
    pub descriptors_fixed: bool,
    /// Whether a fast-commit log was replayed (the check then runs: the
    /// replay rebuilt directories and inodes the journal never held).
    pub fast_commits_replayed: bool,
    /// Orphaned inodes released.
    pub orphans_released: u64,
    /// Blocks replayed from the journal.
    pub journal_blocks_replayed: u64,
    /// Committed transactions replayed from the journal.
    pub journal_transactions_replayed: u64,
}

const STATE_VALID: u16 = 1;

/// Opens the file system as the device now holds it.
pub(crate) fn open(dev: &Arc<Device>) -> Result<Fs, Error> {
    open_fs(
        dev.clone(),
        OpenOptions {
            read_only: true,
            superblock: None,
        },
    )
    .map(|o| o.fs)
    .map_err(Error::from)
}

/// Commits a step's staged changes, if any.
pub(crate) fn commit(fx: &fixer::Fixer, st: Staging<'_>, pre: &mut PrePass) -> Result<(), Error> {
    if st.is_empty() {
        return Ok(());
    }
    fx.commit(st.into_writes())?;
    pre.modified = true;
    Ok(())
}

/// Clears the superblock's "cleanly unmounted" state, so the full check runs.
pub(crate) fn clear_valid(sb: &mut [u8]) {
    let s = sbl::field::s_state.get(sb) & !STATE_VALID;
    sbl::field::s_state.set(sb, s);
}
