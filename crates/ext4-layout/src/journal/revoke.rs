//! Revoke blocks: `r_count` bytes used (header included), then block
//! numbers of 4 or 8 bytes that must not be replayed.

use super::JournalFeatures;
use crate::bytes::{be_u32, be_u64};

/// Offset of the first record.
pub const RECORDS_OFFSET: usize = 0x10;

/// A view of a revoke block.
#[derive(Clone, Copy)]
pub struct RevokeBlock<'a> {
    bytes: &'a [u8],
    features: JournalFeatures,
}

impl<'a> RevokeBlock<'a> {
    /// Wraps a revoke block.
    pub fn new(bytes: &'a [u8], features: JournalFeatures) -> Self {
        RevokeBlock { bytes, features }
    }

    /// 0x0C: bytes used in this block, header included.
    pub fn r_count(&self) -> u32 {
        be_u32(self.bytes, 0x0C)
    }

    /// Whether `r_count` fits the block (leaving the tail when checksummed).
    pub fn r_count_valid(&self) -> bool {
        let limit = if self.features.csum_v2v3() {
            self.bytes.len().saturating_sub(super::BLOCK_TAIL_SIZE)
        } else {
            self.bytes.len()
        };
        let rc = self.r_count() as usize;
        rc >= RECORDS_OFFSET && rc <= limit
    }

    /// The revoked block numbers (empty when `r_count` is invalid).
    pub fn records(&self) -> impl Iterator<Item = u64> + 'a {
        let rec = if self.features.is_64bit() { 8 } else { 4 };
        let end = if self.r_count_valid() {
            self.r_count() as usize
        } else {
            RECORDS_OFFSET
        };
        let b = self.bytes;
        (RECORDS_OFFSET..end)
            .step_by(rec)
            .filter(move |o| o + rec <= end)
            .map(move |o| {
                if rec == 8 {
                    be_u64(b, o)
                } else {
                    u64::from(be_u32(b, o))
                }
            })
    }
}
