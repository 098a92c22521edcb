//! Where a check run inside a repair sends the fixes it can make on the
//! spot.
//!
//! check-core knows nothing of the writer: a repair hands the check a
//! [`FixSink`], and pass 1's workers offer it every inode whose problems
//! all concern that inode's own fields (the problem table's inode-local
//! column). The sink decides how to fix and write it.

use crate::problem::Finding;

/// One inode whose every problem just found is inode-local.
#[derive(Clone, Copy, Debug)]
pub struct LocalFix<'a> {
    /// The inode's number.
    pub ino: u32,
    /// Where the inode lives on the device, in bytes.
    pub offset: u64,
    /// The inode as read: the file system's inode size in bytes.
    pub raw: &'a [u8],
    /// The problems found in it.
    pub findings: &'a [Finding],
    /// The checksum seed, when inodes carry checksums (`metadata_csum`).
    pub csum_seed: Option<u32>,
}

/// Takes the fixes a check's workers find as they go.
pub trait FixSink: Sync {
    /// Takes the fix of one inode. True when the fix was made (or queued
    /// to be made), so that its findings count as fixed.
    fn fix_inode(&self, fix: LocalFix<'_>) -> bool;
}
