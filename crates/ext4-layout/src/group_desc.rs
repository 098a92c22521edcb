//! Block group descriptors: 32 bytes, or `s_desc_size` (64 or more) bytes
//! under the 64bit feature.

use crate::bytes::{le_u16, le_u32, u32_from_hi_lo, u64_from_hi_lo};
use crate::csum::{crc16, crc32c_raw};
use crate::field::Split;
use crate::on_disk;

/// `bg_flags`: the inode table and bitmap are not initialised.
pub const BG_INODE_UNINIT: u16 = 0x0001;
/// `bg_flags`: the block bitmap is not initialised.
pub const BG_BLOCK_UNINIT: u16 = 0x0002;
/// `bg_flags`: the inode table is zeroed.
pub const BG_INODE_ZEROED: u16 = 0x0004;

/// Byte offset of `bg_checksum`.
pub const BG_CHECKSUM_OFFSET: usize = 0x1E;
/// Size of the original descriptor.
pub const DESC_SIZE_32: usize = 32;
/// Size of the 64bit descriptor.
pub const DESC_SIZE_64: usize = 64;

/// A view of one group descriptor. Fields past the end of a 32-byte
/// descriptor read as zero, so the high halves are zero there.
#[derive(Clone, Copy)]
pub struct GroupDesc<'a>(&'a [u8]);

impl<'a> GroupDesc<'a> {
    /// Wraps a descriptor of at least 32 bytes.
    pub fn new(bytes: &'a [u8]) -> Option<Self> {
        if bytes.len() >= DESC_SIZE_32 {
            Some(GroupDesc(bytes))
        } else {
            None
        }
    }

    /// Wraps any slice; fields past its end read as zero.
    pub fn over(bytes: &'a [u8]) -> Self {
        GroupDesc(bytes)
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    fn wide(&self) -> bool {
        self.0.len() >= DESC_SIZE_64
    }

    fn hi16(&self, v: u16) -> u16 {
        if self.wide() {
            v
        } else {
            0
        }
    }

    fn hi32(&self, v: u32) -> u32 {
        if self.wide() {
            v
        } else {
            0
        }
    }

    /// Block bitmap location.
    pub fn block_bitmap(&self) -> u64 {
        u64_from_hi_lo(
            self.hi32(self.bg_block_bitmap_hi()),
            self.bg_block_bitmap_lo(),
        )
    }

    /// Inode bitmap location.
    pub fn inode_bitmap(&self) -> u64 {
        u64_from_hi_lo(
            self.hi32(self.bg_inode_bitmap_hi()),
            self.bg_inode_bitmap_lo(),
        )
    }

    /// Inode table location.
    pub fn inode_table(&self) -> u64 {
        u64_from_hi_lo(
            self.hi32(self.bg_inode_table_hi()),
            self.bg_inode_table_lo(),
        )
    }

    /// Free blocks (clusters under bigalloc).
    pub fn free_blocks_count(&self) -> u32 {
        u32_from_hi_lo(
            self.hi16(self.bg_free_blocks_count_hi()),
            self.bg_free_blocks_count_lo(),
        )
    }

    /// Free inodes.
    pub fn free_inodes_count(&self) -> u32 {
        u32_from_hi_lo(
            self.hi16(self.bg_free_inodes_count_hi()),
            self.bg_free_inodes_count_lo(),
        )
    }

    /// Directories.
    pub fn used_dirs_count(&self) -> u32 {
        u32_from_hi_lo(
            self.hi16(self.bg_used_dirs_count_hi()),
            self.bg_used_dirs_count_lo(),
        )
    }

    /// Unused inodes at the end of the inode table.
    pub fn itable_unused(&self) -> u32 {
        u32_from_hi_lo(
            self.hi16(self.bg_itable_unused_hi()),
            self.bg_itable_unused_lo(),
        )
    }

    /// Block bitmap checksum; only the low half exists in 32-byte descriptors.
    pub fn block_bitmap_csum(&self) -> u32 {
        u32_from_hi_lo(
            self.hi16(self.bg_block_bitmap_csum_hi()),
            self.bg_block_bitmap_csum_lo(),
        )
    }

    /// Inode bitmap checksum; only the low half exists in 32-byte descriptors.
    pub fn inode_bitmap_csum(&self) -> u32 {
        u32_from_hi_lo(
            self.hi16(self.bg_inode_bitmap_csum_hi()),
            self.bg_inode_bitmap_csum_lo(),
        )
    }

    /// Whether a flag bit is set.
    pub fn has_flag(&self, flag: u16) -> bool {
        self.bg_flags() & flag != 0
    }

    /// The checksum this descriptor should carry.
    ///
    /// With metadata_csum it is the low 16 bits of crc32c(seed, group,
    /// descriptor with a zero checksum field). Otherwise (gdt_csum) it is
    /// crc16 over the UUID, the group and the descriptor without the
    /// checksum field.
    pub fn computed_checksum(
        &self,
        group: u32,
        metadata_csum: bool,
        csum_seed: u32,
        uuid: &[u8; 16],
    ) -> u16 {
        let head = self.0.get(..BG_CHECKSUM_OFFSET).unwrap_or(&[]);
        let tail = self.0.get(BG_CHECKSUM_OFFSET + 2..).unwrap_or(&[]);
        let group_le = group.to_le_bytes();
        if metadata_csum {
            let mut c = crc32c_raw(csum_seed, &group_le);
            c = crc32c_raw(c, head);
            c = crc32c_raw(c, &[0, 0]);
            c = crc32c_raw(c, tail);
            (c & 0xFFFF) as u16
        } else {
            let mut c = crc16(!0, uuid);
            c = crc16(c, &group_le);
            c = crc16(c, head);
            crc16(c, tail)
        }
    }
}

on_disk! {
    read GroupDesc, write GroupDescMut, le;
    /// 0x00: block bitmap location, low 32 bits.
    bg_block_bitmap_lo: u32 @ 0x00;
    /// 0x04: inode bitmap location, low 32 bits.
    bg_inode_bitmap_lo: u32 @ 0x04;
    /// 0x08: inode table location, low 32 bits.
    bg_inode_table_lo: u32 @ 0x08;
    /// 0x0C: free blocks, low 16 bits.
    bg_free_blocks_count_lo: u16 @ 0x0C;
    /// 0x0E: free inodes, low 16 bits.
    bg_free_inodes_count_lo: u16 @ 0x0E;
    /// 0x10: directories, low 16 bits.
    bg_used_dirs_count_lo: u16 @ 0x10;
    /// 0x12: INODE_UNINIT, BLOCK_UNINIT, ITABLE_ZEROED.
    bg_flags: u16 @ 0x12;
    /// 0x14: snapshot exclude bitmap, low 32 bits.
    bg_exclude_bitmap_lo: u32 @ 0x14;
    /// 0x18: block bitmap checksum, low 16 bits.
    bg_block_bitmap_csum_lo: u16 @ 0x18;
    /// 0x1A: inode bitmap checksum, low 16 bits.
    bg_inode_bitmap_csum_lo: u16 @ 0x1A;
    /// 0x1C: unused inodes at the end of the table, low 16 bits.
    bg_itable_unused_lo: u16 @ 0x1C;
    /// 0x1E: descriptor checksum (crc16 or truncated crc32c).
    bg_checksum: u16 @ 0x1E;
    /// 0x20: block bitmap location, high 32 bits.
    bg_block_bitmap_hi: u32 @ 0x20;
    /// 0x24: inode bitmap location, high 32 bits.
    bg_inode_bitmap_hi: u32 @ 0x24;
    /// 0x28: inode table location, high 32 bits.
    bg_inode_table_hi: u32 @ 0x28;
    /// 0x2C: free blocks, high 16 bits.
    bg_free_blocks_count_hi: u16 @ 0x2C;
    /// 0x2E: free inodes, high 16 bits.
    bg_free_inodes_count_hi: u16 @ 0x2E;
    /// 0x30: directories, high 16 bits.
    bg_used_dirs_count_hi: u16 @ 0x30;
    /// 0x32: unused inodes, high 16 bits.
    bg_itable_unused_hi: u16 @ 0x32;
    /// 0x34: exclude bitmap, high 32 bits.
    bg_exclude_bitmap_hi: u32 @ 0x34;
    /// 0x38: block bitmap checksum, high 16 bits.
    bg_block_bitmap_csum_hi: u16 @ 0x38;
    /// 0x3A: inode bitmap checksum, high 16 bits.
    bg_inode_bitmap_csum_hi: u16 @ 0x3A;
}

/// `bg_block_bitmap_lo`/`_hi`.
pub const BLOCK_BITMAP: Split<u32, u32> =
    Split::<u32, u32>::new(field::bg_block_bitmap_lo, field::bg_block_bitmap_hi);
/// `bg_inode_bitmap_lo`/`_hi`.
pub const INODE_BITMAP: Split<u32, u32> =
    Split::<u32, u32>::new(field::bg_inode_bitmap_lo, field::bg_inode_bitmap_hi);
/// `bg_inode_table_lo`/`_hi`.
pub const INODE_TABLE: Split<u32, u32> =
    Split::<u32, u32>::new(field::bg_inode_table_lo, field::bg_inode_table_hi);
/// `bg_free_blocks_count_lo`/`_hi`.
pub const FREE_BLOCKS: Split<u16, u16> = Split::<u16, u16>::new(
    field::bg_free_blocks_count_lo,
    field::bg_free_blocks_count_hi,
);
/// `bg_free_inodes_count_lo`/`_hi`.
pub const FREE_INODES: Split<u16, u16> = Split::<u16, u16>::new(
    field::bg_free_inodes_count_lo,
    field::bg_free_inodes_count_hi,
);
/// `bg_used_dirs_count_lo`/`_hi`.
pub const USED_DIRS: Split<u16, u16> =
    Split::<u16, u16>::new(field::bg_used_dirs_count_lo, field::bg_used_dirs_count_hi);
/// `bg_itable_unused_lo`/`_hi`.
pub const ITABLE_UNUSED: Split<u16, u16> =
    Split::<u16, u16>::new(field::bg_itable_unused_lo, field::bg_itable_unused_hi);

/// Reads the stored checksum bytes without a view (handy for patching).
pub fn stored_checksum(desc: &[u8]) -> u16 {
    le_u16(desc, BG_CHECKSUM_OFFSET)
}

/// Reads a 32-bit field of a raw descriptor.
pub fn raw_u32(desc: &[u8], off: usize) -> u32 {
    le_u32(desc, off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_le_u32;

    #[test]
    fn narrow_descriptor_has_no_high_halves() {
        let mut b = vec![0u8; 64];
        put_le_u32(&mut b, 0x00, 10); // bg_block_bitmap_lo
        put_le_u32(&mut b, 0x20, 1); // bg_block_bitmap_hi
        assert_eq!(GroupDesc::new(&b[..32]).unwrap().block_bitmap(), 10);
        assert_eq!(GroupDesc::new(&b).unwrap().block_bitmap(), (1 << 32) | 10);
    }

    #[test]
    fn checksum_ignores_the_checksum_field() {
        let mut b = vec![7u8; 32];
        let uuid = [1u8; 16];
        let a = GroupDesc::new(&b)
            .unwrap()
            .computed_checksum(3, false, 0, &uuid);
        b[BG_CHECKSUM_OFFSET] = 0;
        let c = GroupDesc::new(&b)
            .unwrap()
            .computed_checksum(3, false, 0, &uuid);
        assert_eq!(a, c);
        let d = GroupDesc::new(&b)
            .unwrap()
            .computed_checksum(4, false, 0, &uuid);
        assert_ne!(a, d);
    }
}
