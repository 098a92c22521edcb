//! The journal superblock, in the first block of the journal.

use super::{blocktype, BlockHeader};
use crate::bytes::{be_u32, sub};
use crate::csum::{crc32c_raw, CRC32C_INIT};
use crate::on_disk;

/// Byte offset of `s_checksum`.
pub const S_CHECKSUM_OFFSET: usize = 0xFC;
/// Bytes covered by the superblock checksum.
pub const SUPERBLOCK_CSUM_SIZE: usize = 1024;
/// `s_checksum_type` for crc32c.
pub const CSUM_TYPE_CRC32C: u8 = 4;

/// Journal feature bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct JournalFeatures {
    /// `s_feature_compat`.
    pub compat: u32,
    /// `s_feature_incompat`.
    pub incompat: u32,
    /// `s_feature_ro_compat`.
    pub ro_compat: u32,
}

impl JournalFeatures {
    /// compat: commit blocks carry a crc32 (checksum v1).
    pub const COMPAT_CHECKSUM: u32 = 0x1;
    /// incompat: revoke blocks are used.
    pub const INCOMPAT_REVOKE: u32 = 0x1;
    /// incompat: block numbers are 64 bits.
    pub const INCOMPAT_64BIT: u32 = 0x2;
    /// incompat: commit blocks may be written before the data.
    pub const INCOMPAT_ASYNC_COMMIT: u32 = 0x4;
    /// incompat: checksum v2.
    pub const INCOMPAT_CSUM_V2: u32 = 0x8;
    /// incompat: checksum v3.
    pub const INCOMPAT_CSUM_V3: u32 = 0x10;
    /// incompat: fast commit area present.
    pub const INCOMPAT_FAST_COMMIT: u32 = 0x20;
    /// Every incompat bit this crate understands.
    pub const KNOWN_INCOMPAT: u32 = 0x3F;
    /// Every compat bit this crate understands.
    pub const KNOWN_COMPAT: u32 = 0x1;

    /// Whether checksum v2 or v3 is on.
    pub fn csum_v2v3(&self) -> bool {
        self.incompat & (Self::INCOMPAT_CSUM_V2 | Self::INCOMPAT_CSUM_V3) != 0
    }

    /// Whether 64-bit block numbers are on.
    pub fn is_64bit(&self) -> bool {
        self.incompat & Self::INCOMPAT_64BIT != 0
    }

    /// Size of one descriptor tag, without the optional UUID.
    pub fn tag_size(&self) -> usize {
        if self.incompat & Self::INCOMPAT_CSUM_V3 != 0 {
            return 16;
        }
        let mut sz = 12;
        if self.incompat & Self::INCOMPAT_CSUM_V2 != 0 {
            sz += 2;
        }
        if self.is_64bit() {
            sz
        } else {
            sz - 4
        }
    }
}

/// A view of the journal superblock.
#[derive(Clone, Copy)]
pub struct JournalSuperblock<'a>(&'a [u8]);

impl<'a> JournalSuperblock<'a> {
    /// Wraps the first 1024 bytes of the journal.
    pub fn new(b: &'a [u8]) -> Option<Self> {
        b.get(..SUPERBLOCK_CSUM_SIZE).map(JournalSuperblock)
    }

    /// The common header.
    pub fn header(&self) -> BlockHeader {
        BlockHeader::parse(self.0).unwrap_or(BlockHeader {
            h_magic: 0,
            h_blocktype: 0,
            h_sequence: 0,
        })
    }

    /// `s_errno` as a signed value.
    pub fn s_errno(&self) -> i32 {
        i32::from_be_bytes(self.s_errno_raw().to_be_bytes())
    }

    /// 0x30: the journal UUID.
    pub fn s_uuid(&self) -> [u8; 16] {
        let mut u = [0u8; 16];
        let s = sub(self.0, 0x30, 16);
        if s.len() == 16 {
            u.copy_from_slice(s);
        }
        u
    }

    /// Whether this is a version 2 superblock (with feature fields).
    pub fn is_v2(&self) -> bool {
        self.header().h_blocktype == blocktype::SUPERBLOCK_V2
    }

    /// The features; all zero for a v1 superblock.
    pub fn features(&self) -> JournalFeatures {
        if self.is_v2() {
            JournalFeatures {
                compat: self.s_feature_compat(),
                incompat: self.s_feature_incompat(),
                ro_compat: self.s_feature_ro_compat(),
            }
        } else {
            JournalFeatures::default()
        }
    }

    /// The seed of every journal checksum: crc32c of the journal UUID.
    pub fn csum_seed(&self) -> u32 {
        crc32c_raw(CRC32C_INIT, &self.s_uuid())
    }

    /// The superblock checksum: crc32c over 1024 bytes with `s_checksum` zero.
    pub fn computed_checksum(&self) -> u32 {
        let mut c = crc32c_raw(CRC32C_INIT, sub(self.0, 0, S_CHECKSUM_OFFSET));
        c = crc32c_raw(c, &[0u8; 4]);
        crc32c_raw(
            c,
            sub(
                self.0,
                S_CHECKSUM_OFFSET + 4,
                SUPERBLOCK_CSUM_SIZE - S_CHECKSUM_OFFSET - 4,
            ),
        )
    }

    /// Whether `s_checksum` matches.
    pub fn checksum_ok(&self) -> bool {
        be_u32(self.0, S_CHECKSUM_OFFSET) == self.computed_checksum()
    }
}

/// Where the journal superblock's `s_uuid` lies.
pub const S_UUID: std::ops::Range<usize> = 0x30..0x40;
/// Where the version 2 fields begin (`s_feature_compat` on): a version 1
/// superblock has zeros there.
pub const V2_FIELDS: usize = 0x24;

on_disk! {
    read JournalSuperblock, write JournalSuperblockMut, be;
    /// 0x0C: journal block size.
    s_blocksize: u32 @ 0x0C;
    /// 0x10: total blocks in the journal.
    s_maxlen: u32 @ 0x10;
    /// 0x14: first block of log information.
    s_first: u32 @ 0x14;
    /// 0x18: first commit ID expected in the log.
    s_sequence: u32 @ 0x18;
    /// 0x1C: block where the log starts; 0 means the journal is clean.
    s_start: u32 @ 0x1C;
    /// 0x20: error value set by jbd2_journal_abort (signed).
    s_errno_raw: u32 @ 0x20;
    /// 0x24: compatible features (v2).
    s_feature_compat: u32 @ 0x24;
    /// 0x28: incompatible features (v2).
    s_feature_incompat: u32 @ 0x28;
    /// 0x2C: read-only compatible features (v2).
    s_feature_ro_compat: u32 @ 0x2C;
    /// 0x40: number of file systems sharing the journal.
    s_nr_users: u32 @ 0x40;
    /// 0x44: dynamic superblock copy location.
    s_dynsuper: u32 @ 0x44;
    /// 0x48: limit of journal blocks per transaction.
    s_max_transaction: u32 @ 0x48;
    /// 0x4C: limit of data blocks per transaction.
    s_max_trans_data: u32 @ 0x4C;
    /// 0x50: checksum type (4 = crc32c).
    s_checksum_type: u8 @ 0x50;
    /// 0x54: blocks of the fast commit area.
    s_num_fc_blks: u32 @ 0x54;
    /// 0xFC: crc32c of the superblock.
    s_checksum: u32 @ 0xFC;
}
