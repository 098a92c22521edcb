//! Extent trees: a 12-byte header followed by index entries (interior
//! nodes) or leaf extents, all 12 bytes. A node in a block ends with a
//! crc32c tail right after `eh_max` entries.

use crate::bytes::{le_u16, le_u32, put_le_u16, put_le_u32, u64_from_hi_lo};
use crate::csum::crc32c_raw;
use crate::on_disk;

/// `eh_magic`.
pub const EXT4_EXT_MAGIC: u16 = 0xF30A;
/// Size of the header and of each entry.
pub const ENTRY_SIZE: usize = 12;
/// Longest initialised extent.
pub const EXT_INIT_MAX_LEN: u32 = 1 << 15;
/// Longest uninitialised extent.
pub const EXT_UNINIT_MAX_LEN: u32 = EXT_INIT_MAX_LEN - 1;
/// Deepest tree the kernel builds.
pub const EXT4_MAX_DEPTH: u16 = 5;
/// Entries the root node in an inode's `i_block` holds.
pub const ROOT_ENTRIES: u64 = 4;

/// Why a node cannot be read as an extent node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeError {
    /// `eh_magic` is wrong.
    BadMagic,
    /// `eh_entries` exceeds `eh_max`.
    TooManyEntries,
    /// `eh_max` does not fit the node (or is too small for its size).
    BadMax,
}

/// A view of one extent tree node: the inode's `i_block` or a tree block.
#[derive(Clone, Copy)]
pub struct ExtentNode<'a>(&'a [u8]);

impl<'a> ExtentNode<'a> {
    /// Wraps a node without validating it (needs room for the header).
    pub fn new(bytes: &'a [u8]) -> Option<Self> {
        if bytes.len() >= ENTRY_SIZE {
            Some(ExtentNode(bytes))
        } else {
            None
        }
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    /// How many entries fit in this node's bytes (no tail for i_block).
    pub fn capacity(&self, has_tail: bool) -> usize {
        let usable = if has_tail {
            self.0.len().saturating_sub(4)
        } else {
            self.0.len()
        };
        usable.saturating_sub(ENTRY_SIZE) / ENTRY_SIZE
    }

    /// Validates the header the way libext2fs does. `eh_max` is compared
    /// with the node's size; `_in_inode` documents which node is meant.
    pub fn validate(&self, _in_inode: bool) -> Result<(), NodeError> {
        if self.eh_magic() != EXT4_EXT_MAGIC {
            return Err(NodeError::BadMagic);
        }
        if self.eh_entries() > self.eh_max() {
            return Err(NodeError::TooManyEntries);
        }
        let cap = self.capacity(false);
        let max = usize::from(self.eh_max());
        // eh_max may be up to two entries short of what fits, which leaves
        // room for the checksum tail in a tree block.
        if max > cap || max + 2 < cap {
            return Err(NodeError::BadMax);
        }
        // The depth is not judged here: the library leaves that to callers.
        Ok(())
    }

    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.eh_depth() == 0
    }

    /// The valid entries (bounded by the bytes present).
    pub fn entry_count(&self) -> usize {
        usize::from(self.eh_entries()).min(self.capacity(false))
    }

    /// Leaf entry `i`.
    pub fn leaf(&self, i: usize) -> Extent {
        let off = ENTRY_SIZE * (i + 1);
        let b = self.0;
        let raw_len = le_u16(b, off + 4);
        Extent {
            ee_block: le_u32(b, off),
            raw_len,
            start: u64_from_hi_lo(u32::from(le_u16(b, off + 6)), le_u32(b, off + 8)),
        }
    }

    /// Index entry `i`.
    pub fn index(&self, i: usize) -> ExtentIndex {
        let off = ENTRY_SIZE * (i + 1);
        let b = self.0;
        ExtentIndex {
            ei_block: le_u32(b, off),
            leaf: u64_from_hi_lo(u32::from(le_u16(b, off + 8)), le_u32(b, off + 4)),
        }
    }

    /// The leaves of this node, in order.
    pub fn leaves(&self) -> impl Iterator<Item = Extent> + '_ {
        (0..self.entry_count()).map(move |i| self.leaf(i))
    }

    /// The index entries of this node, in order.
    pub fn indexes(&self) -> impl Iterator<Item = ExtentIndex> + '_ {
        (0..self.entry_count()).map(move |i| self.index(i))
    }

    /// Byte offset of the checksum tail: right after `eh_max` entries.
    pub fn tail_offset(&self) -> usize {
        ENTRY_SIZE * (usize::from(self.eh_max()) + 1)
    }

    /// The stored tail checksum, if the tail lies within the node.
    pub fn stored_checksum(&self) -> Option<u32> {
        let off = self.tail_offset();
        (off + 4 <= self.0.len()).then(|| le_u32(self.0, off))
    }

    /// The checksum of a tree block: crc32c from the inode seed over
    /// everything before the tail.
    pub fn computed_checksum(&self, inode_seed: u32) -> u32 {
        let end = self.tail_offset().min(self.0.len());
        crc32c_raw(inode_seed, self.0.get(..end).unwrap_or(&[]))
    }

    /// Whether a tree block's tail checksum matches.
    pub fn checksum_ok(&self, inode_seed: u32) -> bool {
        self.stored_checksum() == Some(self.computed_checksum(inode_seed))
    }
}

on_disk! {
    read ExtentNode, write ExtentNodeMut, le;
    /// 0x00: magic, 0xF30A.
    eh_magic: u16 @ 0x00;
    /// 0x02: valid entries.
    eh_entries: u16 @ 0x02;
    /// 0x04: capacity in entries.
    eh_max: u16 @ 0x04;
    /// 0x06: depth of this node; 0 is a leaf.
    eh_depth: u16 @ 0x06;
    /// 0x08: generation (unused by ext4).
    eh_generation: u32 @ 0x08;
}

/// The 12 bytes of a leaf entry: `len` blocks (at most
/// [`EXT_INIT_MAX_LEN`], or [`EXT_UNINIT_MAX_LEN`] when `uninit`) from
/// logical block `lblk` at physical block `pblk`.
pub fn encode_extent(lblk: u32, len: u16, uninit: bool, pblk: u64) -> [u8; ENTRY_SIZE] {
    let raw_len = if uninit {
        len.wrapping_add(EXT_INIT_MAX_LEN as u16)
    } else {
        len
    };
    let mut b = [0u8; ENTRY_SIZE];
    put_le_u32(&mut b, 0, lblk);
    put_le_u16(&mut b, 4, raw_len);
    put_le_u16(&mut b, 6, (pblk >> 32) as u16);
    put_le_u32(&mut b, 8, pblk as u32);
    b
}

/// The 12 bytes of an index entry: the subtree at physical block `child`
/// covers logical blocks from `lblk`.
pub fn encode_index(lblk: u32, child: u64) -> [u8; ENTRY_SIZE] {
    let mut b = [0u8; ENTRY_SIZE];
    put_le_u32(&mut b, 0, lblk);
    put_le_u32(&mut b, 4, child as u32);
    put_le_u16(&mut b, 8, (child >> 32) as u16);
    b
}

/// The entries an extent tree block of `block_size` bytes holds.
pub fn entries_per_block(block_size: usize) -> usize {
    (block_size - ENTRY_SIZE) / ENTRY_SIZE
}

/// The tree blocks a packed tree of `extents` leaf extents takes: none
/// when the inode's four entries hold them; else full leaf blocks, and
/// full index blocks above them, level by level, until four entries are
/// left for the inode. This is the shape of a tree rebuilt from its
/// extents, whose size a check weighs against the tree found.
pub fn packed_tree_blocks(extents: u64, block_size: usize) -> u64 {
    let per = entries_per_block(block_size).max(1) as u64;
    let mut level = extents;
    let mut blocks = 0;
    while level > ROOT_ENTRIES {
        level = level.div_ceil(per);
        blocks += level;
    }
    blocks
}

/// Writes a node header: the magic, `entries` in use of room for `max`,
/// the node's depth (0 for a leaf) and a zero generation.
pub fn put_header(node: &mut [u8], entries: u16, max: u16, depth: u16) {
    let mut h = ExtentNodeMut::new(node);
    h.set(field::eh_magic, EXT4_EXT_MAGIC);
    h.set(field::eh_entries, entries);
    h.set(field::eh_max, max);
    h.set(field::eh_depth, depth);
    h.set(field::eh_generation, 0);
}

/// Writes entry `k` (its 12 bytes from [`encode_extent`] or
/// [`encode_index`]) after a node's header.
pub fn put_entry(node: &mut [u8], k: usize, entry: &[u8; ENTRY_SIZE]) {
    let at = ENTRY_SIZE * (k + 1);
    if let Some(dst) = node.get_mut(at..at + ENTRY_SIZE) {
        dst.copy_from_slice(entry);
    }
}

/// A leaf extent: `len` blocks from logical `ee_block` at physical `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First logical block.
    pub ee_block: u32,
    /// `ee_len` as stored; above 32768 the extent is uninitialised.
    pub raw_len: u16,
    /// First physical block (`ee_start_hi` and `ee_start_lo` joined).
    pub start: u64,
}

impl Extent {
    /// Whether the extent is uninitialised (preallocated).
    pub fn is_uninit(&self) -> bool {
        u32::from(self.raw_len) > EXT_INIT_MAX_LEN
    }

    /// Length in blocks.
    pub fn len(&self) -> u32 {
        let l = u32::from(self.raw_len);
        if l > EXT_INIT_MAX_LEN {
            l - EXT_INIT_MAX_LEN
        } else {
            l
        }
    }

    /// Whether the extent covers no block.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One past the last logical block, as u64 so it cannot overflow.
    pub fn logical_end(&self) -> u64 {
        u64::from(self.ee_block) + u64::from(self.len())
    }
}

/// An index entry: the subtree at `leaf` covers logical blocks from `ei_block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtentIndex {
    /// First logical block covered.
    pub ei_block: u32,
    /// Physical block of the child node.
    pub leaf: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_le_u16, put_le_u32};

    #[test]
    fn a_packed_tree_takes_full_blocks_level_by_level() {
        // 1 KiB blocks hold 84 entries, 4 KiB blocks 340.
        assert_eq!(entries_per_block(1024), 84);
        assert_eq!(entries_per_block(4096), 340);
        assert_eq!(packed_tree_blocks(0, 1024), 0);
        assert_eq!(packed_tree_blocks(4, 1024), 0);
        assert_eq!(packed_tree_blocks(5, 1024), 1);
        assert_eq!(packed_tree_blocks(84 * 4, 1024), 4);
        // Five leaves do not fit in the inode: one index block above.
        assert_eq!(packed_tree_blocks(84 * 4 + 1, 1024), 6);
        assert_eq!(packed_tree_blocks(340 * 4 + 1, 4096), 6);
    }

    fn root(entries: u16, depth: u16) -> Vec<u8> {
        let mut b = vec![0u8; 60];
        put_le_u16(&mut b, 0, EXT4_EXT_MAGIC); // eh_magic
        put_le_u16(&mut b, 2, entries); // eh_entries
        put_le_u16(&mut b, 4, 4); // eh_max
        put_le_u16(&mut b, 6, depth); // eh_depth
        b
    }

    #[test]
    fn root_validates() {
        assert_eq!(ExtentNode::new(&root(1, 0)).unwrap().validate(true), Ok(()));
        assert_eq!(
            ExtentNode::new(&root(5, 0)).unwrap().validate(true),
            Err(NodeError::TooManyEntries)
        );
        let mut b = root(1, 0);
        b[0] = 0;
        assert_eq!(
            ExtentNode::new(&b).unwrap().validate(true),
            Err(NodeError::BadMagic)
        );
    }

    #[test]
    fn uninit_length() {
        let mut b = root(1, 0);
        put_le_u32(&mut b, 12, 7); // ee_block
        put_le_u16(&mut b, 16, 32768 + 5); // ee_len
        put_le_u16(&mut b, 18, 1); // ee_start_hi
        put_le_u32(&mut b, 20, 9); // ee_start_lo
        let e = ExtentNode::new(&b).unwrap().leaf(0);
        assert!(e.is_uninit());
        assert_eq!(e.len(), 5);
        assert_eq!(e.start, (1 << 32) | 9);
        assert_eq!(e.logical_end(), 12);
    }

    #[test]
    fn block_checksum_round_trip() {
        let mut b = vec![0u8; 1024];
        put_le_u16(&mut b, 0, EXT4_EXT_MAGIC);
        put_le_u16(&mut b, 4, 84); // eh_max for 1 KiB: (1024-12)/12 = 84
        let node = ExtentNode::new(&b).unwrap();
        assert_eq!(node.validate(false), Ok(()));
        let c = node.computed_checksum(99);
        let off = node.tail_offset();
        put_le_u32(&mut b, off, c);
        assert!(ExtentNode::new(&b).unwrap().checksum_ok(99));
    }
}
