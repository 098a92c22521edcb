//! Extended attributes: a whole block (header, entries growing down,
//! values growing up) or the area after an inode's extra fields (magic,
//! then entries, values located from the first entry).

use crate::bytes::{le_u16, le_u32, le_u8, sub};
use crate::csum::crc32c_raw;
use crate::on_disk;

/// Magic at the start of an EA block and of the in-inode EA area.
pub const EA_MAGIC: u32 = 0xEA02_0000;
/// `h_magic` of the first version of extended attribute blocks, whose
/// entries have no name index.
pub const EA_MAGIC_V1: u32 = 0xEA01_0000;
/// Size of the EA block header.
pub const EA_BLOCK_HEADER: usize = 32;
/// Size of the fixed part of an entry.
pub const EA_ENTRY_HEADER: usize = 16;
/// Byte offset of `h_checksum` in the block header.
pub const H_CHECKSUM_OFFSET: usize = 0x10;

on_disk! {
    read XattrBlock, write XattrBlockMut, le;
    /// 0x00: magic, 0xEA020000.
    h_magic: u32 @ 0x00;
    /// 0x04: how many inodes point at this block.
    h_refcount: u32 @ 0x04;
    /// 0x08: blocks used, must be 1.
    h_blocks: u32 @ 0x08;
    /// 0x0C: hash of all entries.
    h_hash: u32 @ 0x0C;
    /// 0x10: crc32c checksum.
    h_checksum: u32 @ 0x10;
}

/// Rounds a length up to the 4-byte alignment entries and values use.
pub fn ea_round(n: usize) -> usize {
    (n + 3) & !3
}

/// A view of an EA block.
#[derive(Clone, Copy)]
pub struct XattrBlock<'a>(&'a [u8]);

impl<'a> XattrBlock<'a> {
    /// Wraps a block.
    pub fn new(block: &'a [u8]) -> Option<Self> {
        (block.len() >= EA_BLOCK_HEADER).then_some(XattrBlock(block))
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The entries, starting after the header; value offsets count from
    /// the start of the block.
    pub fn entries(&self) -> XattrEntries<'a> {
        XattrEntries {
            area: self.0,
            pos: EA_BLOCK_HEADER,
            value_base: 0,
            done: false,
        }
    }

    /// The checksum of an EA block: crc32c from the file system seed over
    /// the little-endian block number, then the block with `h_checksum` zero.
    pub fn computed_checksum(&self, fs_seed: u32, block_nr: u64) -> u32 {
        let mut c = crc32c_raw(fs_seed, &block_nr.to_le_bytes());
        c = crc32c_raw(c, sub(self.0, 0, H_CHECKSUM_OFFSET));
        c = crc32c_raw(c, &[0u8; 4]);
        crc32c_raw(c, self.0.get(H_CHECKSUM_OFFSET + 4..).unwrap_or(&[]))
    }

    /// Whether `h_checksum` matches.
    pub fn checksum_ok(&self, fs_seed: u32, block_nr: u64) -> bool {
        self.h_checksum() == self.computed_checksum(fs_seed, block_nr)
    }
}

/// The in-inode EA area (after `i_extra_isize`).
#[derive(Clone, Copy)]
pub struct InodeXattrs<'a>(&'a [u8]);

impl<'a> InodeXattrs<'a> {
    /// Wraps the bytes after an inode's extra fields.
    pub fn new(area: &'a [u8]) -> Option<Self> {
        (area.len() >= 4).then_some(InodeXattrs(area))
    }

    /// The leading magic; 0xEA020000 when attributes are present.
    pub fn magic(&self) -> u32 {
        le_u32(self.0, 0)
    }

    /// Whether the magic says attributes are present.
    pub fn present(&self) -> bool {
        self.magic() == EA_MAGIC
    }

    /// Bytes available for entries and values (after the magic).
    pub fn body(&self) -> &'a [u8] {
        self.0.get(4..).unwrap_or(&[])
    }

    /// The entries; value offsets count from the first entry.
    pub fn entries(&self) -> XattrEntries<'a> {
        XattrEntries {
            area: self.body(),
            pos: 0,
            value_base: 0,
            done: false,
        }
    }
}

/// The in-inode attribute area of an inode's bytes, whose extra fields
/// take `extra_isize` bytes, when the inode has room for one.
pub fn inode_area(inode: &[u8], extra_isize: usize) -> Option<InodeXattrs<'_>> {
    InodeXattrs::new(inode.get(crate::inode::GOOD_OLD_INODE_SIZE + extra_isize..)?)
}

/// One attribute entry.
#[derive(Clone, Copy, Debug)]
pub struct XattrEntry<'a> {
    /// Byte offset of the entry in its area.
    pub offset: usize,
    /// 0x00: name length.
    pub e_name_len: u8,
    /// 0x01: name prefix index (user., trusted., system. ...).
    pub e_name_index: u8,
    /// 0x02: value offset.
    pub e_value_offs: u16,
    /// 0x04: inode holding the value (ea_inode), or 0.
    pub e_value_inum: u32,
    /// 0x08: value size.
    pub e_value_size: u32,
    /// 0x0C: hash of name and value.
    pub e_hash: u32,
    /// The name bytes (may be short if the entry runs off the area).
    pub name: &'a [u8],
}

impl XattrEntry<'_> {
    /// Total bytes the entry takes, padded to 4.
    pub fn size(&self) -> usize {
        ea_round(EA_ENTRY_HEADER + usize::from(self.e_name_len))
    }
}

/// The entry at byte `pos` of an attribute area (fields past the area's
/// end read as zero; the name is cut short at it).
pub fn entry_at(area: &[u8], pos: usize) -> XattrEntry<'_> {
    let b = area.get(pos..).unwrap_or_default();
    let name_len = le_u8(b, 0);
    XattrEntry {
        offset: pos,
        e_name_len: name_len,
        e_name_index: le_u8(b, 1),
        e_value_offs: le_u16(b, 2),
        e_value_inum: le_u32(b, 4),
        e_value_size: le_u32(b, 8),
        e_hash: le_u32(b, ENTRY_HASH_OFFSET),
        name: sub(b, EA_ENTRY_HEADER, usize::from(name_len)),
    }
}

/// Byte offset of `e_hash` in an entry.
const ENTRY_HASH_OFFSET: usize = 0x0C;

/// Whether the entries of an area end at `pos`: four zero bytes there
/// (or the area's end).
pub fn entries_end_at(area: &[u8], pos: usize) -> bool {
    le_u32(area.get(pos..).unwrap_or_default(), 0) == 0
}

/// Writes `e_value_size` of the entry at byte `pos` of an attribute area.
pub fn put_entry_value_size(area: &mut [u8], pos: usize, size: u32) {
    if let Some(b) = area.get_mut(pos + 8..pos + 12) {
        b.copy_from_slice(&size.to_le_bytes());
    }
}

/// Writes `e_hash` of the entry at byte `pos` of an attribute area.
pub fn put_entry_hash(area: &mut [u8], pos: usize, hash: u32) {
    if let Some(b) = area.get_mut(pos + ENTRY_HASH_OFFSET..pos + ENTRY_HASH_OFFSET + 4) {
        b.copy_from_slice(&hash.to_le_bytes());
    }
}

/// Starts an inode's attribute area (the bytes after its extra fields,
/// which take `extra_isize` bytes) with the magic; the entries follow.
pub fn start_inode_area(inode: &mut [u8], extra_isize: usize) {
    let at = crate::inode::GOOD_OLD_INODE_SIZE + extra_isize;
    if let Some(b) = inode.get_mut(at..at + 4) {
        b.copy_from_slice(&EA_MAGIC.to_le_bytes());
    }
}

/// Writes an entry whose value is stored in place at byte `pos` of an
/// attribute area: its name (with its prefix index), the value's offset
/// and size, and a zero hash (which the format allows for in-inode
/// entries). Returns where the next entry starts.
pub fn put_entry(
    area: &mut [u8],
    pos: usize,
    name_index: u8,
    name: &[u8],
    value_offs: u16,
    value_size: u32,
) -> usize {
    let len = ea_round(EA_ENTRY_HEADER + name.len());
    if let Some(e) = area.get_mut(pos..pos + len) {
        e.fill(0);
        e[0] = name.len() as u8;
        e[1] = name_index;
        e[2..4].copy_from_slice(&value_offs.to_le_bytes());
        e[8..12].copy_from_slice(&value_size.to_le_bytes());
        e[EA_ENTRY_HEADER..EA_ENTRY_HEADER + name.len()].copy_from_slice(name);
    }
    pos + len
}

/// Why walking entries stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryWalkError {
    /// An entry runs past the end of the area.
    Overrun {
        /// Offset of the entry.
        offset: usize,
    },
}

/// Iterates entries until the 4-byte zero terminator.
pub struct XattrEntries<'a> {
    area: &'a [u8],
    pos: usize,
    value_base: usize,
    done: bool,
}

impl<'a> XattrEntries<'a> {
    /// The area the entries and values live in.
    pub fn area(&self) -> &'a [u8] {
        self.area
    }

    /// Where value offsets count from.
    pub fn value_base(&self) -> usize {
        self.value_base
    }
}

impl<'a> Iterator for XattrEntries<'a> {
    type Item = Result<XattrEntry<'a>, EntryWalkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let b = self.area;
        let off = self.pos;
        if off + 4 > b.len() {
            self.done = true;
            return Some(Err(EntryWalkError::Overrun { offset: off }));
        }
        if le_u32(b, off) == 0 {
            self.done = true;
            return None;
        }
        if off + EA_ENTRY_HEADER > b.len() {
            self.done = true;
            return Some(Err(EntryWalkError::Overrun { offset: off }));
        }
        let e = entry_at(b, off);
        if off + e.size() > b.len() {
            self.done = true;
            return Some(Err(EntryWalkError::Overrun { offset: off }));
        }
        self.pos = off + e.size();
        Some(Ok(e))
    }
}

/// The hash of one entry: its name, then (for values stored in place)
/// its value as little-endian words. `signed` reproduces the variant that
/// treats name bytes as signed chars, which older tools wrote.
pub fn entry_hash(name: &[u8], value: Option<&[u8]>, signed: bool) -> u32 {
    let mut h = 0u32;
    for &c in name {
        let v = if signed {
            i32::from(c as i8) as u32
        } else {
            u32::from(c)
        };
        h = (h << 5) ^ (h >> 27) ^ v;
    }
    if let Some(val) = value {
        for chunk in val.chunks(4) {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            h = (h << 16) ^ (h >> 16) ^ u32::from_le_bytes(w);
        }
    }
    h
}

/// The hash of an entry whose value lives in an EA inode: the name hash
/// folded with the EA inode's stored value hash.
pub fn entry_hash_ea_inode(name: &[u8], value_hash: u32, signed: bool) -> u32 {
    let h = entry_hash(name, None, signed);
    (h << 16) ^ (h >> 16) ^ value_hash
}

/// The block hash: entry hashes folded together; 0 if any entry hash is 0.
pub fn block_hash<'a>(entry_hashes: impl IntoIterator<Item = &'a u32>) -> u32 {
    let mut h = 0u32;
    for &e in entry_hashes {
        if e == 0 {
            return 0;
        }
        h = (h << 16) ^ (h >> 16) ^ e;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_le_u32;

    #[test]
    fn walk_block_entries() {
        let mut b = vec![0u8; 1024];
        put_le_u32(&mut b, 0, EA_MAGIC);
        // One entry: name "ab", value of 3 bytes at 1000.
        b[32] = 2;
        b[33] = 1;
        b[34..36].copy_from_slice(&1000u16.to_le_bytes());
        put_le_u32(&mut b, 40, 3);
        b[48..50].copy_from_slice(b"ab");
        let x = XattrBlock::new(&b).unwrap();
        let v: Vec<_> = x.entries().collect();
        assert_eq!(v.len(), 1);
        let e = v[0].unwrap();
        assert_eq!(e.name, b"ab");
        assert_eq!(e.size(), 20);
    }

    #[test]
    fn overrun_is_reported() {
        let b = vec![0xFFu8; 10];
        let x = InodeXattrs::new(&b).unwrap();
        let v: Vec<_> = x.entries().collect();
        assert!(matches!(v[0], Err(EntryWalkError::Overrun { .. })));
    }

    #[test]
    fn hash_signedness() {
        assert_eq!(
            entry_hash(b"abc", None, true),
            entry_hash(b"abc", None, false)
        );
        assert_ne!(
            entry_hash(&[0xE9], None, true),
            entry_hash(&[0xE9], None, false)
        );
        assert_eq!(block_hash(&[1, 0, 3]), 0);
    }

    #[test]
    fn block_checksum_round_trip() {
        let mut b = vec![0u8; 1024];
        put_le_u32(&mut b, 0, EA_MAGIC);
        let c = XattrBlock::new(&b).unwrap().computed_checksum(5, 77);
        put_le_u32(&mut b, H_CHECKSUM_OFFSET, c);
        assert!(XattrBlock::new(&b).unwrap().checksum_ok(5, 77));
        assert!(!XattrBlock::new(&b).unwrap().checksum_ok(5, 78));
    }
}
