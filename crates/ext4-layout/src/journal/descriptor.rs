//! Descriptor blocks: a header, then one tag per data block that follows
//! in the log. A tag without SAME_UUID is followed by a 16-byte UUID.

use super::{JournalFeatures, HEADER_SIZE};
use crate::bytes::{be_u16, be_u32};

/// Tag flag bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagFlags(pub u32);

impl TagFlags {
    /// The data block's magic was escaped (zeroed) on write.
    pub const ESCAPE: u32 = 0x1;
    /// No UUID follows; it is the same as the previous tag's.
    pub const SAME_UUID: u32 = 0x2;
    /// The block was deleted by this transaction.
    pub const DELETED: u32 = 0x4;
    /// The last tag of this descriptor.
    pub const LAST_TAG: u32 = 0x8;

    /// Whether a flag is set.
    pub fn has(&self, f: u32) -> bool {
        self.0 & f != 0
    }
}

/// One tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockTag {
    /// The file system block this log block belongs at.
    pub blocknr: u64,
    /// Tag flags.
    pub flags: TagFlags,
    /// The data block checksum (16 bits for v2, 32 for v3).
    pub checksum: u32,
}

/// A view of a descriptor block.
#[derive(Clone, Copy)]
pub struct DescriptorBlock<'a> {
    bytes: &'a [u8],
    features: JournalFeatures,
}

impl<'a> DescriptorBlock<'a> {
    /// Wraps a descriptor block read with the journal's features.
    pub fn new(bytes: &'a [u8], features: JournalFeatures) -> Self {
        DescriptorBlock { bytes, features }
    }

    /// The tags, stopping at LAST_TAG or where the next tag would not fit
    /// before the checksum tail.
    pub fn tags(&self) -> impl Iterator<Item = BlockTag> + 'a {
        let bytes = self.bytes;
        let f = self.features;
        let tag_size = f.tag_size();
        let end = if f.csum_v2v3() {
            bytes.len().saturating_sub(super::BLOCK_TAIL_SIZE)
        } else {
            bytes.len()
        };
        let mut pos = HEADER_SIZE;
        let mut done = false;
        std::iter::from_fn(move || {
            if done || pos + tag_size > end {
                return None;
            }
            let csum_v3 = f.incompat & JournalFeatures::INCOMPAT_CSUM_V3 != 0;
            let tag = if csum_v3 {
                let lo = be_u32(bytes, pos);
                let flags = be_u32(bytes, pos + 4);
                let hi = if f.is_64bit() {
                    be_u32(bytes, pos + 8)
                } else {
                    0
                };
                BlockTag {
                    blocknr: (u64::from(hi) << 32) | u64::from(lo),
                    flags: TagFlags(flags),
                    checksum: be_u32(bytes, pos + 12),
                }
            } else {
                let lo = be_u32(bytes, pos);
                let checksum = u32::from(be_u16(bytes, pos + 4));
                let flags = u32::from(be_u16(bytes, pos + 6));
                let hi = if f.is_64bit() {
                    be_u32(bytes, pos + 8)
                } else {
                    0
                };
                BlockTag {
                    blocknr: (u64::from(hi) << 32) | u64::from(lo),
                    flags: TagFlags(flags),
                    checksum,
                }
            };
            pos += tag_size;
            if !tag.flags.has(TagFlags::SAME_UUID) {
                pos += 16;
            }
            if tag.flags.has(TagFlags::LAST_TAG) {
                done = true;
            }
            Some(tag)
        })
    }
}
