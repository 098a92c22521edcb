//! Orphan file blocks (`orphan_file` feature).
//!
//! Each block of the orphan file is an array of 32-bit inode numbers (0 for
//! a free slot) followed by an 8-byte tail: the magic number, then, with
//! `metadata_csum`, a crc32c over the entries seeded with the file
//! system's checksum seed, the orphan file's inode number and generation
//! and the block's physical number.

use crate::bytes::{le_u32, put_le_u32};
use crate::csum::crc32c_raw;

/// The magic number in every orphan file block's tail.
pub const MAGIC: u32 = 0x0B10_CA04;

/// Bytes of tail (magic, checksum) at the end of each block.
pub const TAIL: usize = 8;

/// Where a block's checksum comes from: the file system's seed, the
/// orphan file's inode and generation, and the block's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsumKey {
    /// The file system's checksum seed.
    pub seed: u32,
    /// The orphan file's inode number.
    pub ino: u32,
    /// Its generation.
    pub generation: u32,
    /// The block's physical number.
    pub block: u64,
}

/// The checksum of an orphan file block `data` (its entries, not its
/// tail).
pub fn block_csum(key: CsumKey, data: &[u8]) -> u32 {
    let entries = &data[..data.len().saturating_sub(TAIL)];
    let mut c = crc32c_raw(key.seed, &key.ino.to_le_bytes());
    c = crc32c_raw(c, &key.generation.to_le_bytes());
    c = crc32c_raw(c, &key.block.to_le_bytes());
    crc32c_raw(c, entries)
}

/// A read-only view of one orphan file block.
#[derive(Clone, Copy, Debug)]
pub struct OrphanBlock<'a> {
    data: &'a [u8],
}

impl<'a> OrphanBlock<'a> {
    /// Wraps a whole block.
    pub fn new(data: &'a [u8]) -> Self {
        OrphanBlock { data }
    }

    fn tail(&self) -> usize {
        self.data.len().saturating_sub(TAIL)
    }

    /// The magic number from the tail.
    pub fn magic(&self) -> u32 {
        le_u32(self.data, self.tail())
    }

    /// The checksum stored in the tail.
    pub fn checksum(&self) -> u32 {
        le_u32(self.data, self.tail() + 4)
    }

    /// Whether the magic is right and, given a key, the checksum too.
    pub fn is_valid(&self, key: Option<CsumKey>) -> bool {
        self.data.len() > TAIL
            && self.magic() == MAGIC
            && key.is_none_or(|k| self.checksum() == block_csum(k, self.data))
    }

    /// Whether every entry slot is free.
    pub fn is_empty(&self) -> bool {
        self.data[..self.tail()].iter().all(|&b| b == 0)
    }

    /// Every slot with its index, free ones (0) included.
    pub fn slots(&self) -> impl Iterator<Item = (usize, u32)> + 'a {
        self.data[..self.tail()]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .enumerate()
    }

    /// The inode numbers the block lists, free slots skipped.
    pub fn entries(&self) -> impl Iterator<Item = u32> + 'a {
        self.data[..self.tail()]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .filter(|&i| i != 0)
    }
}

/// Writes `data` (a whole block) as an empty orphan block: free slots,
/// the magic, and with a key the checksum.
pub fn write_empty(data: &mut [u8], key: Option<CsumKey>) {
    let tail = data.len().saturating_sub(TAIL);
    data[..tail].fill(0);
    put_le_u32(data, tail, MAGIC);
    let c = key.map_or(0, |k| block_csum(k, data));
    put_le_u32(data, tail + 4, c);
}

/// Frees slot `slot` of an orphan block (the checksum is left to
/// [`set_checksum`]).
pub fn clear_slot(data: &mut [u8], slot: usize) {
    let tail = data.len().saturating_sub(TAIL);
    if let Some(at) = slot.checked_mul(4).filter(|&a| a + 4 <= tail) {
        put_le_u32(data, at, 0);
    }
}

/// Recomputes an orphan block's checksum after its slots changed; without
/// a key (no `metadata_csum`) the tail is left as it is.
pub fn set_checksum(data: &mut [u8], key: Option<CsumKey>) {
    if let Some(k) = key {
        let tail = data.len().saturating_sub(TAIL);
        let c = block_csum(k, data);
        put_le_u32(data, tail + 4, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_block_reads_back_valid_and_empty() {
        let key = CsumKey {
            seed: 0x1234_5678,
            ino: 12,
            generation: 7,
            block: 900,
        };
        let mut b = vec![0xAAu8; 1024];
        write_empty(&mut b, Some(key));
        let v = OrphanBlock::new(&b);
        assert!(v.is_valid(Some(key)));
        assert!(v.is_empty());
        assert_eq!(v.entries().count(), 0);
        assert!(!v.is_valid(Some(CsumKey { block: 901, ..key })));
        b[8..12].copy_from_slice(&33u32.to_le_bytes());
        let v = OrphanBlock::new(&b);
        assert!(v.is_valid(None));
        assert!(!v.is_valid(Some(key)));
        assert_eq!(v.entries().collect::<Vec<_>>(), vec![33]);
        assert_eq!(v.slots().nth(2), Some((2, 33)));
        clear_slot(&mut b, 2);
        set_checksum(&mut b, Some(key));
        let v = OrphanBlock::new(&b);
        assert!(v.is_valid(Some(key)) && v.is_empty());
    }
}
