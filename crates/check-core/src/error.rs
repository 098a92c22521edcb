//! Why a part of the check cannot go on. Each message is the one-line
//! reason a report gives, and each variant names its inode or block.

/// An inode that cannot be read well enough to decide on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InodeReadError {
    /// The read failed.
    #[error("cannot read inode {0}")]
    Unreadable(u32),
    /// It was read but its checksum is wrong.
    #[error("inode {0} fails its checksum and cannot be read reliably")]
    Checksum(u32),
}

/// Why the walk of an extent tree stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ExtentWalkError {
    /// A tree block was met twice.
    #[error("extent tree cycle at block {0}")]
    Cycle(u64),
    /// A tree block could not be read.
    #[error("cannot read extent block {0}")]
    Unreadable(u64),
    /// A tree block is not an extent node.
    #[error("bad extent block {0}")]
    Bad(u64),
    /// A tree block holds no entry.
    #[error("extent block {0} has no entries")]
    Empty(u64),
}

/// A bitmap block that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why} while reading the {which} bitmap of group {group}")]
pub(crate) struct BitmapReadError {
    /// What the read said.
    pub why: String,
    /// "block" or "inode".
    pub which: &'static str,
    /// The group.
    pub group: u32,
}

/// Why the journal inode cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum JournalInodeError {
    /// Not a regular file with links, or encrypted.
    #[error("the journal inode is not a regular file in use")]
    NotInUse,
    /// Fewer than 1,024 blocks.
    #[error("the journal is too small")]
    TooSmall,
    /// Its extent tree is not valid.
    #[error("the journal inode's extent tree is invalid")]
    BadExtentTree,
    /// A hole or a block outside the file system before its end.
    #[error("the journal inode has holes or blocks outside the file system")]
    Holes,
    /// Its first block is not mapped.
    #[error("the first journal block cannot be mapped")]
    FirstBlockUnmapped,
}
