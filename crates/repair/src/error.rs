//! Why a repair, or one step of it, stops.

use std::io;
use std::path::PathBuf;

use check_core::fs::OpenFailure;

/// What stopped a repair step. Every variant names the block, inode,
/// group or transaction concerned; the message is the one-line reason the
/// report carries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file system could not be opened again between steps.
    #[error("{}", .0.message)]
    Open(OpenFailure),
    /// A read failed (the message names the block when it can).
    #[error(transparent)]
    Read(#[from] io::Error),
    /// The fixer did not make a commit of the step.
    #[error(transparent)]
    Commit(#[from] fixer::CommitError),
    /// The fixer did not make a commit of a round's changes.
    #[error("the repair stopped: {0}")]
    Stopped(fixer::CommitError),
    /// A step that needs a complete check ran after one that stopped.
    #[error("the check did not complete")]
    CheckIncomplete,
    /// The journal inode's backup copy cannot go back into its table.
    #[error(
        "the journal inode cannot be written back: the inode table of group {group} \
         (block {block}) is outside the file system"
    )]
    JournalTableOutside {
        /// The journal inode's group.
        group: u32,
        /// Where that group's inode table claims to be.
        block: u64,
    },
    /// The journal cannot be used, for the reason its check gave.
    #[error("{0}")]
    JournalUnusable(String),
    /// The journal's blocks cannot be mapped.
    #[error("the journal cannot be read")]
    JournalUnreadable,
    /// The journal maps no block.
    #[error("the journal has no blocks")]
    JournalEmpty,
    /// A block of the journal's log lies past its end.
    #[error("journal block {0} is past its end")]
    JournalPastEnd(u64),
    /// A block of the journal's log is a hole.
    #[error("journal block {0} is not mapped")]
    JournalUnmapped(u64),
    /// A logged block could not be read.
    #[error("journal block {0} cannot be read")]
    JournalBlockUnreadable(u64),
    /// A logged block's tag checksum does not match it.
    #[error("journal block {0} has a bad checksum")]
    JournalBlockChecksum(u64),
    /// A commit block's checksum is wrong.
    #[error("transaction {0} has a bad checksum")]
    TransactionChecksum(u32),
    /// A revoke block claims more records than it holds.
    #[error("a revoke block has a bad count")]
    RevokeCount,
    /// The fast-commit log could not be applied.
    #[error("the fast commit log cannot be replayed: {0}")]
    FastCommit(io::Error),
    /// The journal superblock is shorter than its fields.
    #[error("short journal superblock")]
    ShortJournalSuperblock,
    /// No run of free blocks is long enough for a new journal.
    #[error("no room for the journal")]
    NoRoomForJournal,
    /// The read-write bad-block test was asked for without a writer.
    #[error("the read-write test needs a writable device")]
    NeedsWritable,
    /// The superblock the user chose was not the one the check used.
    #[error("the chosen superblock was not used")]
    BackupNotUsed,
    /// The bad-block list needs a complete check first.
    #[error(
        "the bad-block list cannot be updated: the check stopped before it could tell which blocks are in use"
    )]
    BadBlocksNoCheck,
    /// An inode that cannot be parsed.
    #[error("bad inode")]
    BadInode(u32),
    /// The file system is too small for a journal.
    #[error("the file system is too small")]
    TooSmallForJournal,
    /// A new journal needs extents on a bigalloc file system.
    #[error("bigalloc without extents")]
    BigallocWithoutExtents,
    /// The journal inode could not be read.
    #[error("the journal inode cannot be read: {0}")]
    JournalInode(io::Error),
    /// The new journal's blocks could not be mapped.
    #[error("the journal cannot be mapped: {0}")]
    JournalMap(io::Error),
    /// No inode or block is free for /lost+found.
    #[error("no free inode or block for /lost+found")]
    NoLostFound,
    /// An entry of a bad-blocks list is not a block number.
    #[error("'{0}' is too large for a block number")]
    BadBlockText(String),
    /// A bad-blocks list names a block past 32 bits.
    #[error("{0} is too large for a block number")]
    BadBlockTooLarge(u64),
    /// A bad-blocks list file has an entry that is not a block number.
    #[error("{}: {source}", path.display())]
    BadBlockList {
        /// The list file.
        path: PathBuf,
        /// What is wrong in it.
        source: Box<Error>,
    },
    /// The bad-blocks inode could not be read.
    #[error("cannot read the bad blocks inode: {0}")]
    BadBlocksInode(io::Error),
    /// A bad-blocks list file could not be read.
    #[error("cannot read the bad blocks list {}: {source}", path.display())]
    BadBlockFile {
        /// The list file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A bad block could not be added to the bad-blocks inode's map.
    #[error("cannot map bad block {block}: {source}")]
    MapBadBlock {
        /// The bad block.
        block: u64,
        /// Why.
        source: io::Error,
    },
    /// SIGINT or SIGTERM stopped the read-write test.
    #[error("interrupted")]
    Interrupted,
    /// The read-write test's pattern could not be written.
    #[error("the read-write test could not write: {0}")]
    ScanWrite(fixer::CommitError),
    /// The read-write test could not restore a block's data.
    #[error("the read-write test could not put the data back: {0}")]
    ScanRestore(fixer::CommitError),
}

impl From<OpenFailure> for Error {
    fn from(f: OpenFailure) -> Self {
        Error::Open(f)
    }
}
