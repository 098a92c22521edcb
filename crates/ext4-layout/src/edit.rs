//! Writing checksums back after an edit. Each function recomputes the
//! checksum the matching view verifies and stores it in place; the bytes
//! are the caller's, and nothing here allocates or does I/O.

use crate::bytes::{le_u16, put_le_u16, put_le_u32};
use crate::csum::crc32c_raw;
use crate::extent::ExtentNode;
use crate::group_desc::GroupDesc;
use crate::htree::{DxNode, DxRoot};
use crate::inode::{Inode, I_CHECKSUM_HI_OFFSET, I_CHECKSUM_LO_OFFSET};
use crate::superblock::S_CHECKSUM_OFFSET;
use crate::xattr::XattrBlock;

/// Stores an inode's checksum (low half, and the high half when the
/// inode has room for it).
pub fn set_inode_checksum(raw: &mut [u8], fs_seed: u32, ino: u32) {
    let Some(i) = Inode::new(raw) else {
        return;
    };
    let has_hi = i.csum_has_hi();
    let c = i.computed_checksum(fs_seed, ino);
    put_le_u16(raw, I_CHECKSUM_LO_OFFSET, c as u16);
    if has_hi {
        put_le_u16(raw, I_CHECKSUM_HI_OFFSET, (c >> 16) as u16);
    }
}

/// Stores a superblock's crc32c (the 1024-byte superblock).
pub fn set_superblock_checksum(raw: &mut [u8]) {
    if raw.len() < S_CHECKSUM_OFFSET + 4 {
        return;
    }
    let c = crc32c_raw(!0, &raw[..S_CHECKSUM_OFFSET]);
    put_le_u32(raw, S_CHECKSUM_OFFSET, c);
}

/// Byte offset of `bg_checksum` in a group descriptor.
pub const BG_CHECKSUM: usize = 0x1E;

/// Stores a group descriptor's checksum (crc32c low half with
/// metadata_csum, else crc16 for gdt_csum).
pub fn set_group_desc_checksum(
    desc: &mut [u8],
    group: u32,
    metadata_csum: bool,
    csum_seed: u32,
    uuid: &[u8; 16],
) {
    let Some(d) = GroupDesc::new(desc) else {
        return;
    };
    let c = d.computed_checksum(group, metadata_csum, csum_seed, uuid);
    put_le_u16(desc, BG_CHECKSUM, c);
}

/// Stores the checksum of a bitmap in its group descriptor: `inode`
/// selects the inode bitmap field, else the block bitmap field; the high
/// half exists only in 64-byte descriptors.
pub fn set_bitmap_checksum(desc: &mut [u8], inode: bool, csum_seed: u32, bitmap: &[u8]) {
    let c = crc32c_raw(csum_seed, bitmap);
    let (lo, hi) = if inode { (0x1A, 0x3A) } else { (0x18, 0x38) };
    put_le_u16(desc, lo, c as u16);
    if desc.len() >= hi + 2 {
        put_le_u16(desc, hi, (c >> 16) as u16);
    }
}

/// Stores the tail checksum of an extent tree block.
pub fn set_extent_block_checksum(block: &mut [u8], inode_seed: u32) {
    let Some(n) = ExtentNode::new(block) else {
        return;
    };
    let off = n.tail_offset();
    let c = n.computed_checksum(inode_seed);
    if off + 4 <= block.len() {
        put_le_u32(block, off, c);
    }
}

/// Stores the tail checksum of an htree root or interior node.
pub fn set_dx_checksum(block: &mut [u8], inode_seed: u32, root: bool) {
    let entries = if root {
        DxRoot::new(block).map(|r| r.entries())
    } else {
        DxNode::new(block).map(|n| n.entries())
    };
    let Some(e) = entries else {
        return;
    };
    let tail = e.tail_offset();
    if let Some(c) = e.computed_checksum(inode_seed) {
        put_le_u32(block, tail + 4, c);
    }
}

/// Stores the checksum of an extended attribute block.
pub fn set_xattr_block_checksum(block: &mut [u8], fs_seed: u32, block_nr: u64) {
    let Some(x) = XattrBlock::new(block) else {
        return;
    };
    let c = x.computed_checksum(fs_seed, block_nr);
    put_le_u32(block, 0x10, c);
}

/// Reads a 16-bit field (for callers patching raw structures).
pub fn get_le_u16(b: &[u8], off: usize) -> u16 {
    le_u16(b, off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superblock_checksum_verifies() {
        let mut sb = vec![0u8; 1024];
        sb[0x38] = 0x53;
        sb[0x39] = 0xEF;
        set_superblock_checksum(&mut sb);
        let c = crc32c_raw(!0, &sb[..S_CHECKSUM_OFFSET]);
        assert_eq!(crate::bytes::le_u32(&sb, S_CHECKSUM_OFFSET), c);
    }

    #[test]
    fn inode_checksum_verifies() {
        let mut raw = vec![0u8; 256];
        raw[0] = 0xA4;
        raw[1] = 0x81;
        put_le_u16(&mut raw, 0x80, 32);
        set_inode_checksum(&mut raw, 0x1234_5678, 12);
        assert!(Inode::new(&raw).unwrap().checksum_ok(0x1234_5678, 12));
    }
}
