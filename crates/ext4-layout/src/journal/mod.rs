//! The jbd2 journal: big-endian blocks, each starting with a 12-byte
//! header (magic, block type, transaction sequence).

pub mod commit;
pub mod descriptor;
pub mod fast_commit;
pub mod revoke;
pub mod superblock;

pub use commit::CommitBlock;
pub use descriptor::{BlockTag, DescriptorBlock, TagFlags};
pub use revoke::RevokeBlock;
pub use superblock::{JournalFeatures, JournalSuperblock};

use crate::bytes::be_u32;

/// `h_magic` of every journal metadata block.
pub const JBD2_MAGIC: u32 = 0xC03B_3998;
/// Size of the common block header.
pub const HEADER_SIZE: usize = 12;
/// Size of the checksum tail of descriptor and revoke blocks.
pub const BLOCK_TAIL_SIZE: usize = 4;

/// Journal block types (`h_blocktype`).
pub mod blocktype {
    /// A descriptor block: tags for the data blocks that follow.
    pub const DESCRIPTOR: u32 = 1;
    /// A commit block ends a transaction.
    pub const COMMIT: u32 = 2;
    /// Version 1 journal superblock.
    pub const SUPERBLOCK_V1: u32 = 3;
    /// Version 2 journal superblock.
    pub const SUPERBLOCK_V2: u32 = 4;
    /// A revoke block lists blocks not to replay.
    pub const REVOKE: u32 = 5;
}

/// The header shared by every journal metadata block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// 0x00: magic.
    pub h_magic: u32,
    /// 0x04: block type.
    pub h_blocktype: u32,
    /// 0x08: transaction sequence.
    pub h_sequence: u32,
}

impl BlockHeader {
    /// Reads the header at the start of a block.
    pub fn parse(b: &[u8]) -> Option<BlockHeader> {
        (b.len() >= HEADER_SIZE).then(|| BlockHeader {
            h_magic: be_u32(b, 0),
            h_blocktype: be_u32(b, 4),
            h_sequence: be_u32(b, 8),
        })
    }

    /// Writes the header at the start of a block.
    pub fn write(&self, b: &mut [u8]) {
        crate::bytes::put_be_u32(b, 0, self.h_magic);
        crate::bytes::put_be_u32(b, 4, self.h_blocktype);
        crate::bytes::put_be_u32(b, 8, self.h_sequence);
    }

    /// Whether the magic is right.
    pub fn is_journal_block(&self) -> bool {
        self.h_magic == JBD2_MAGIC
    }
}

/// The checksum tail of descriptor and revoke blocks: crc32c from the
/// journal seed over the block with the tail zeroed.
pub fn block_tail_checksum(block: &[u8], journal_seed: u32) -> u32 {
    let end = block.len().saturating_sub(BLOCK_TAIL_SIZE);
    let c = crate::csum::crc32c_raw(journal_seed, block.get(..end).unwrap_or(&[]));
    crate::csum::crc32c_raw(c, &[0u8; 4])
}

/// Whether a descriptor or revoke block's tail checksum matches.
pub fn block_tail_ok(block: &[u8], journal_seed: u32) -> bool {
    let off = block.len().saturating_sub(BLOCK_TAIL_SIZE);
    be_u32(block, off) == block_tail_checksum(block, journal_seed)
}
