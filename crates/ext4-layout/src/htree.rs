//! Hash-tree (htree) directory index blocks. The root block starts with
//! fake '.' and '..' entries, then `dx_root_info` and the index entries.
//! Interior nodes start with one fake empty entry spanning the block.
//! Index entries are (hash, block) pairs; the first one's hash slot holds
//! `limit` and `count` instead.

use crate::bytes::{le_u16, le_u32, sub};
use crate::csum::crc32c_raw;
use crate::on_disk;

/// Offset of `dx_root_info` in the root block.
pub const DX_ROOT_INFO_OFFSET: usize = 0x18;
/// Offset of the count/limit header in the root block.
pub const DX_ROOT_COUNT_OFFSET: usize = 0x20;
/// Offset of the count/limit header in an interior node.
pub const DX_NODE_COUNT_OFFSET: usize = 0x08;
/// Size of one index entry.
pub const DX_ENTRY_SIZE: usize = 8;
/// The logical block an index entry's block field leads to: its top
/// four bits are not part of the number.
pub fn entry_block(raw: u32) -> u64 {
    u64::from(raw & 0x0FFF_FFFF)
}

/// `info_length` of a root's `dx_root_info`.
pub const DX_ROOT_INFO_LEN: u8 = 8;
/// Size of the checksum tail after the index entries.
pub const DX_TAIL_SIZE: usize = 8;

/// Entries a root block has room for: after '.', '..' and an 8-byte
/// info, less the checksum tail when there is one.
pub fn root_limit(block_size: usize, metadata_csum: bool) -> usize {
    let tail = if metadata_csum { DX_TAIL_SIZE } else { 0 };
    block_size.saturating_sub(DX_ROOT_COUNT_OFFSET + tail) / DX_ENTRY_SIZE
}

/// Entries an interior node has room for.
pub fn node_limit(block_size: usize, metadata_csum: bool) -> usize {
    let tail = if metadata_csum { DX_TAIL_SIZE } else { 0 };
    block_size.saturating_sub(DX_NODE_COUNT_OFFSET + tail) / DX_ENTRY_SIZE
}

/// Whether a block is laid out as an interior index node: one empty
/// entry spanning the block, then a `limit` that fits the block.
pub fn looks_like_node(block: &[u8], metadata_csum: bool) -> bool {
    let bs = block.len();
    crate::dirent::inode_at(block, 0) == 0
        && crate::dirent::rec_len_at(block, 0, bs) == bs
        && crate::dirent::name_len_at(block, 0) == 0
        && usize::from(le_u16(block, DX_NODE_COUNT_OFFSET)) == node_limit(bs, metadata_csum)
}

/// Whether a directory's first block is laid out as an index root: a
/// 12-byte '.', a '..' over the rest of the block, and an 8-byte info.
pub fn looks_like_root(block: &[u8]) -> bool {
    let bs = block.len();
    crate::dirent::rec_len_at(block, 0, bs) == 12
        && crate::dirent::rec_len_at(block, 12, bs) == bs - 12
        && DxRoot::new(block).is_some_and(|r| r.info_length() == 8)
}

/// Writes an index's `limit` and `count`, which sit where its first
/// entry's hash would (`start` is [`DX_ROOT_COUNT_OFFSET`] for a root
/// with an 8-byte info, [`DX_NODE_COUNT_OFFSET`] for a node).
pub fn put_limit_count(block: &mut [u8], start: usize, limit: u16, count: u16) {
    crate::bytes::put_le_u16(block, start, limit);
    crate::bytes::put_le_u16(block, start + 2, count);
}

/// Writes index entry `k` of the index at `start`: its hash (not for
/// entry 0, whose hash slot holds `limit` and `count`) and the logical
/// block it leads to.
pub fn put_index_entry(block: &mut [u8], start: usize, k: usize, hash: u32, lblk: u32) {
    let at = start + k * DX_ENTRY_SIZE;
    if k > 0 {
        crate::bytes::put_le_u32(block, at, hash);
    }
    crate::bytes::put_le_u32(block, at + 4, lblk);
}

/// A view of a `dx_root` block.
#[derive(Clone, Copy)]
pub struct DxRoot<'a>(&'a [u8]);

impl<'a> DxRoot<'a> {
    /// Wraps a directory's first block.
    pub fn new(block: &'a [u8]) -> Option<Self> {
        (block.len() >= DX_ROOT_COUNT_OFFSET + DX_ENTRY_SIZE).then_some(DxRoot(block))
    }

    /// The index entries, located by `info_length`.
    pub fn entries(&self) -> DxEntries<'a> {
        let off = DX_ROOT_INFO_OFFSET + usize::from(self.info_length());
        DxEntries::at(self.0, off)
    }
}

on_disk! {
    read DxRoot, write DxRootMut, le;
    /// 0x18: must be zero.
    reserved_zero: u32 @ 0x18;
    /// 0x1C: hash version.
    hash_version: u8 @ 0x1C;
    /// 0x1D: length of the info structure, 8.
    info_length: u8 @ 0x1D;
    /// 0x1E: levels of interior nodes below the root.
    indirect_levels: u8 @ 0x1E;
    /// 0x1F: flags, must be zero.
    unused_flags: u8 @ 0x1F;
    /// 0x20: entries the root has room for (with an 8-byte info).
    root_limit: u16 @ 0x20;
    /// 0x22: entries in use, the first one included (with an 8-byte info).
    root_count: u16 @ 0x22;
}

/// A view of an interior `dx_node` block.
#[derive(Clone, Copy)]
pub struct DxNode<'a>(&'a [u8]);

impl<'a> DxNode<'a> {
    /// Wraps an interior node block.
    pub fn new(block: &'a [u8]) -> Option<Self> {
        (block.len() >= DX_NODE_COUNT_OFFSET + DX_ENTRY_SIZE).then_some(DxNode(block))
    }

    /// The fake entry's inode (0).
    pub fn fake_inode(&self) -> u32 {
        le_u32(self.0, 0)
    }

    /// The fake entry's raw rec_len (the whole block).
    pub fn fake_rec_len(&self) -> u16 {
        le_u16(self.0, 4)
    }

    /// The index entries.
    pub fn entries(&self) -> DxEntries<'a> {
        DxEntries::at(self.0, DX_NODE_COUNT_OFFSET)
    }
}

/// The count/limit header and entries of a root or interior node.
#[derive(Clone, Copy)]
pub struct DxEntries<'a> {
    block: &'a [u8],
    offset: usize,
}

impl<'a> DxEntries<'a> {
    fn at(block: &'a [u8], offset: usize) -> Self {
        DxEntries { block, offset }
    }

    /// Byte offset of the count/limit header in the block.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Capacity in entries.
    pub fn limit(&self) -> u16 {
        le_u16(self.block, self.offset)
    }

    /// Entries in use (including the first, hashless one).
    pub fn count(&self) -> u16 {
        le_u16(self.block, self.offset + 2)
    }

    /// How many entries fit between the header and the end of the block,
    /// leaving room for a checksum tail if `csum`.
    pub fn room(&self, csum: bool) -> usize {
        let avail = self.block.len().saturating_sub(self.offset);
        let avail = if csum {
            avail.saturating_sub(DX_TAIL_SIZE)
        } else {
            avail
        };
        avail / DX_ENTRY_SIZE
    }

    /// Entry `i`: (hash, block). Entry 0's hash is reported as 0.
    pub fn get(&self, i: usize) -> (u32, u32) {
        let off = self.offset + i * DX_ENTRY_SIZE;
        let hash = if i == 0 { 0 } else { le_u32(self.block, off) };
        (hash, le_u32(self.block, off + 4))
    }

    /// The entries in use, bounded by what fits in the block.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let n = usize::from(self.count()).min(self.room(false));
        (0..n).map(move |i| self.get(i))
    }

    /// Byte offset of the checksum tail: right after `limit` entries.
    pub fn tail_offset(&self) -> usize {
        self.offset + usize::from(self.limit()) * DX_ENTRY_SIZE
    }

    /// The stored tail checksum, if the tail fits in the block.
    pub fn stored_checksum(&self) -> Option<u32> {
        let off = self.tail_offset();
        (off + DX_TAIL_SIZE <= self.block.len()).then(|| le_u32(self.block, off + 4))
    }

    /// The checksum of this node: crc32c from the inode seed over the
    /// bytes up to the last used entry, then the tail's reserved word and
    /// a zeroed checksum word.
    pub fn computed_checksum(&self, inode_seed: u32) -> Option<u32> {
        let used = self.offset + usize::from(self.count()) * DX_ENTRY_SIZE;
        let tail = self.tail_offset();
        if used > self.block.len() || tail + DX_TAIL_SIZE > self.block.len() {
            return None;
        }
        let mut c = crc32c_raw(inode_seed, sub(self.block, 0, used));
        c = crc32c_raw(c, sub(self.block, tail, 4));
        Some(crc32c_raw(c, &[0u8; 4]))
    }

    /// Whether the tail checksum matches.
    pub fn checksum_ok(&self, inode_seed: u32) -> bool {
        match (self.stored_checksum(), self.computed_checksum(inode_seed)) {
            (Some(s), Some(c)) => s == c,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_le_u16, put_le_u32};

    #[test]
    fn root_fields_and_entries() {
        let mut b = vec![0u8; 1024];
        b[DX_ROOT_INFO_OFFSET + 4] = 1; // hash_version
        b[DX_ROOT_INFO_OFFSET + 5] = 8; // info_length
        put_le_u16(&mut b, 0x20, 123); // limit
        put_le_u16(&mut b, 0x22, 2); // count
        put_le_u32(&mut b, 0x24, 1); // block of entry 0
        put_le_u32(&mut b, 0x28, 0x100); // hash of entry 1
        put_le_u32(&mut b, 0x2C, 2); // block of entry 1
        let r = DxRoot::new(&b).unwrap();
        assert_eq!(r.hash_version(), 1);
        let e = r.entries();
        assert_eq!(e.limit(), 123);
        assert_eq!(e.iter().collect::<Vec<_>>(), vec![(0, 1), (0x100, 2)]);
        assert_eq!(e.room(true), (1024 - 0x20 - 8) / 8);
    }

    #[test]
    fn node_checksum_round_trip() {
        let mut b = vec![0u8; 1024];
        put_le_u16(&mut b, 4, 1024); // fake rec_len
        let limit = ((1024 - 8 - 8) / 8) as u16;
        put_le_u16(&mut b, 8, limit);
        put_le_u16(&mut b, 10, 1);
        let e = DxNode::new(&b).unwrap().entries();
        let c = e.computed_checksum(77).unwrap();
        let off = e.tail_offset() + 4;
        put_le_u32(&mut b, off, c);
        assert!(DxNode::new(&b).unwrap().entries().checksum_ok(77));
    }
}
