//! Block maps of ext2/3 files: 12 direct pointers in `i_block`, then one
//! single, one double and one triple indirect block. Indirect blocks are
//! arrays of little-endian block numbers; 0 is a hole.

use crate::bytes::le_u32;

/// Direct pointers in `i_block`.
pub const NDIR_BLOCKS: usize = 12;
/// Index of the single indirect pointer in `i_block`.
pub const IND_BLOCK: usize = 12;
/// Index of the double indirect pointer in `i_block`.
pub const DIND_BLOCK: usize = 13;
/// Index of the triple indirect pointer in `i_block`.
pub const TIND_BLOCK: usize = 14;

/// A view of one indirect block.
#[derive(Clone, Copy)]
pub struct IndirectBlock<'a>(&'a [u8]);

impl<'a> IndirectBlock<'a> {
    /// Wraps a block.
    pub fn new(bytes: &'a [u8]) -> Self {
        IndirectBlock(bytes)
    }

    /// Number of pointers.
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }

    /// Whether the block holds no pointers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pointer `i`.
    pub fn get(&self, i: usize) -> u32 {
        le_u32(self.0, i * 4)
    }

    /// All pointers in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        let b = self.0;
        (0..b.len() / 4).map(move |i| le_u32(b, i * 4))
    }
}

/// Pointer `k` of an indirect block held in `block` (0 past its end).
pub fn pointer(block: &[u8], k: usize) -> u32 {
    le_u32(block, 4 * k)
}

/// Sets pointer `k` of an indirect block held in `block`.
pub fn put_pointer(block: &mut [u8], k: usize, blk: u32) {
    crate::bytes::put_le_u32(block, 4 * k, blk);
}

/// How many logical blocks each level of a block map addresses.
#[derive(Clone, Copy, Debug)]
pub struct MapLimits {
    /// Pointers per indirect block.
    pub per_block: u64,
}

impl MapLimits {
    /// Limits for a block size.
    pub fn new(block_size: u32) -> Self {
        MapLimits {
            per_block: u64::from(block_size / 4),
        }
    }

    /// First logical block mapped through the single indirect block.
    pub fn ind_start(&self) -> u64 {
        NDIR_BLOCKS as u64
    }

    /// First logical block mapped through the double indirect block.
    pub fn dind_start(&self) -> u64 {
        self.ind_start() + self.per_block
    }

    /// First logical block mapped through the triple indirect block.
    pub fn tind_start(&self) -> u64 {
        self.dind_start() + self.per_block * self.per_block
    }

    /// One past the last logical block a block map can address.
    pub fn end(&self) -> u64 {
        self.tind_start() + self.per_block * self.per_block * self.per_block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_for_4k() {
        let l = MapLimits::new(4096);
        assert_eq!(l.dind_start(), 12 + 1024);
        assert_eq!(l.tind_start(), 12 + 1024 + 1024 * 1024);
    }

    #[test]
    fn indirect_iter() {
        let b = [1u8, 0, 0, 0, 2, 0, 0, 0];
        let v: Vec<u32> = IndirectBlock::new(&b).iter().collect();
        assert_eq!(v, vec![1, 2]);
    }
}
