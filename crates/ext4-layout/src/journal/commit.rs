//! Commit blocks end a transaction.

use crate::bytes::{be_u32, be_u64, le_u8};
use crate::csum::crc32c_raw;

/// Byte offset of the first checksum word.
pub const H_CHKSUM_OFFSET: usize = 0x10;

/// A view of a commit block.
#[derive(Clone, Copy)]
pub struct CommitBlock<'a>(&'a [u8]);

impl<'a> CommitBlock<'a> {
    /// Wraps a commit block.
    pub fn new(b: &'a [u8]) -> Self {
        CommitBlock(b)
    }

    /// 0x0C: checksum type (checksum v1).
    pub fn h_chksum_type(&self) -> u8 {
        le_u8(self.0, 0x0C)
    }

    /// 0x0D: checksum size (checksum v1).
    pub fn h_chksum_size(&self) -> u8 {
        le_u8(self.0, 0x0D)
    }

    /// 0x10: first checksum word.
    pub fn h_chksum0(&self) -> u32 {
        be_u32(self.0, H_CHKSUM_OFFSET)
    }

    /// 0x30: commit time, seconds.
    pub fn h_commit_sec(&self) -> u64 {
        be_u64(self.0, 0x30)
    }

    /// 0x38: commit time, nanoseconds.
    pub fn h_commit_nsec(&self) -> u32 {
        be_u32(self.0, 0x38)
    }

    /// Checksum v2/v3 of the commit block: crc32c from the journal seed
    /// over the whole block with the first checksum word zeroed.
    pub fn computed_checksum(&self, journal_seed: u32) -> u32 {
        let b = self.0;
        let mut c = crc32c_raw(journal_seed, b.get(..H_CHKSUM_OFFSET).unwrap_or(&[]));
        c = crc32c_raw(c, &[0u8; 4]);
        crc32c_raw(c, b.get(H_CHKSUM_OFFSET + 4..).unwrap_or(&[]))
    }
}
