//! Inodes: a 128-byte base, optionally followed by `i_extra_isize` bytes of
//! extra fields and then in-inode extended attributes.

use crate::bytes::{le_u16, le_u32, sub, u32_from_hi_lo, u64_from_hi_lo};
use crate::csum::crc32c_raw;
use crate::field::{Field, Split};
use crate::on_disk;

/// Size of the original inode.
pub const GOOD_OLD_INODE_SIZE: usize = 128;
/// Byte offset of `i_block`.
pub const I_BLOCK_OFFSET: usize = 0x28;
/// Size of `i_block` in bytes (15 words).
pub const I_BLOCK_SIZE: usize = 60;
/// Where `i_block` lies in an inode.
pub const I_BLOCK: std::ops::Range<usize> = I_BLOCK_OFFSET..I_BLOCK_OFFSET + I_BLOCK_SIZE;

/// Word `k` of `i_block`: block pointer `k` of a block-mapped file
/// (0 to 11 direct, 12 to 14 the indirect roots).
pub const fn i_block_word(k: usize) -> crate::field::Field<u32> {
    crate::field::Field::le(I_BLOCK_OFFSET + 4 * k)
}
/// Byte offset of `l_i_checksum_lo`.
pub const I_CHECKSUM_LO_OFFSET: usize = 0x7C;
/// Byte offset of `i_checksum_hi`.
pub const I_CHECKSUM_HI_OFFSET: usize = 0x82;
/// `i_extra_isize` needed to hold `i_checksum_hi`.
pub const CSUM_HI_EXTRA_END: u16 = 4;
/// `i_extra_isize` needed to hold every extra field up to `i_projid`.
pub const EXTRA_ISIZE_FULL: u16 = 32;

/// Mode type bits.
pub const S_IFMT: u16 = 0o170000;
/// FIFO.
pub const S_IFIFO: u16 = 0o010000;
/// Character device.
pub const S_IFCHR: u16 = 0o020000;
/// Directory.
pub const S_IFDIR: u16 = 0o040000;
/// Block device.
pub const S_IFBLK: u16 = 0o060000;
/// Regular file.
pub const S_IFREG: u16 = 0o100000;
/// Symbolic link.
pub const S_IFLNK: u16 = 0o120000;
/// Socket.
pub const S_IFSOCK: u16 = 0o140000;

/// Inode flag bits (`i_flags`).
pub mod flags {
    /// Secure deletion.
    pub const SECRM: u32 = 0x0000_0001;
    /// Undelete.
    pub const UNRM: u32 = 0x0000_0002;
    /// Compressed file.
    pub const COMPR: u32 = 0x0000_0004;
    /// Synchronous updates.
    pub const SYNC: u32 = 0x0000_0008;
    /// Immutable file.
    pub const IMMUTABLE: u32 = 0x0000_0010;
    /// Append only.
    pub const APPEND: u32 = 0x0000_0020;
    /// Do not dump.
    pub const NODUMP: u32 = 0x0000_0040;
    /// Do not update atime.
    pub const NOATIME: u32 = 0x0000_0080;
    /// Compression: dirty.
    pub const DIRTY: u32 = 0x0000_0100;
    /// Compression: compressed clusters.
    pub const COMPRBLK: u32 = 0x0000_0200;
    /// Compression: do not compress.
    pub const NOCOMPR: u32 = 0x0000_0400;
    /// Encrypted inode.
    pub const ENCRYPT: u32 = 0x0000_0800;
    /// Hash-indexed directory.
    pub const INDEX: u32 = 0x0000_1000;
    /// AFS magic directory.
    pub const IMAGIC: u32 = 0x0000_2000;
    /// Journal file data.
    pub const JOURNAL_DATA: u32 = 0x0000_4000;
    /// No tail merging.
    pub const NOTAIL: u32 = 0x0000_8000;
    /// Synchronous directory updates.
    pub const DIRSYNC: u32 = 0x0001_0000;
    /// Top of a directory hierarchy.
    pub const TOPDIR: u32 = 0x0002_0000;
    /// `i_blocks` counts file system blocks, not sectors.
    pub const HUGE_FILE: u32 = 0x0004_0000;
    /// `i_block` holds an extent tree.
    pub const EXTENTS: u32 = 0x0008_0000;
    /// Verity-protected file.
    pub const VERITY: u32 = 0x0010_0000;
    /// The inode stores a large extended attribute value.
    pub const EA_INODE: u32 = 0x0020_0000;
    /// Blocks allocated past EOF (obsolete).
    pub const EOFBLOCKS: u32 = 0x0040_0000;
    /// Snapshot file.
    pub const SNAPFILE: u32 = 0x0100_0000;
    /// Deleted snapshot.
    pub const SNAPFILE_DELETED: u32 = 0x0400_0000;
    /// Shrunk snapshot.
    pub const SNAPFILE_SHRUNK: u32 = 0x0800_0000;
    /// Data stored inline in the inode.
    pub const INLINE_DATA: u32 = 0x1000_0000;
    /// Children inherit the project id.
    pub const PROJINHERIT: u32 = 0x2000_0000;
    /// Case-insensitive directory.
    pub const CASEFOLD: u32 = 0x4000_0000;
}

/// The kind of file an inode's mode says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// Regular file.
    Regular,
    /// Directory.
    Directory,
    /// Character device.
    CharDevice,
    /// Block device.
    BlockDevice,
    /// FIFO.
    Fifo,
    /// Socket.
    Socket,
    /// Symbolic link.
    Symlink,
}

impl FileType {
    /// Decodes the type bits of a mode; `None` for a value no file type uses.
    pub fn from_mode(mode: u16) -> Option<FileType> {
        Some(match mode & S_IFMT {
            S_IFREG => FileType::Regular,
            S_IFDIR => FileType::Directory,
            S_IFCHR => FileType::CharDevice,
            S_IFBLK => FileType::BlockDevice,
            S_IFIFO => FileType::Fifo,
            S_IFSOCK => FileType::Socket,
            S_IFLNK => FileType::Symlink,
            _ => return None,
        })
    }

    /// The directory entry file type code for this kind (1..=7).
    pub fn dirent_code(self) -> u8 {
        match self {
            FileType::Regular => 1,
            FileType::Directory => 2,
            FileType::CharDevice => 3,
            FileType::BlockDevice => 4,
            FileType::Fifo => 5,
            FileType::Socket => 6,
            FileType::Symlink => 7,
        }
    }
}

/// A view of one on-disk inode.
#[derive(Clone, Copy)]
pub struct Inode<'a>(&'a [u8]);

impl<'a> Inode<'a> {
    /// Wraps an inode of at least 128 bytes (the slice should be
    /// `s_inode_size` long).
    pub fn new(bytes: &'a [u8]) -> Option<Self> {
        if bytes.len() >= GOOD_OLD_INODE_SIZE {
            Some(Inode(bytes))
        } else {
            None
        }
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    /// Whether the inode has room past 128 bytes.
    pub fn is_large(&self) -> bool {
        self.0.len() > GOOD_OLD_INODE_SIZE
    }

    /// `i_extra_isize`, or 0 for 128-byte inodes.
    pub fn i_extra_isize(&self) -> u16 {
        if self.is_large() {
            self.i_extra_isize_raw()
        } else {
            0
        }
    }

    /// Whether an extra field ending `end` bytes past 128 is present.
    fn has_extra(&self, end: u16) -> bool {
        self.is_large()
            && self.i_extra_isize() >= end
            && GOOD_OLD_INODE_SIZE + usize::from(self.i_extra_isize()) <= self.0.len()
    }

    /// 0x82: inode checksum, high 16 bits, when present.
    pub fn i_checksum_hi(&self) -> Option<u16> {
        self.has_extra(CSUM_HI_EXTRA_END)
            .then(|| le_u16(self.0, I_CHECKSUM_HI_OFFSET))
    }

    /// 0x84: extra change time bits, when present.
    pub fn i_ctime_extra(&self) -> Option<u32> {
        self.has_extra(8).then(|| extra::I_CTIME_EXTRA.get(self.0))
    }

    /// 0x88: extra modification time bits, when present.
    pub fn i_mtime_extra(&self) -> Option<u32> {
        self.has_extra(12).then(|| extra::I_MTIME_EXTRA.get(self.0))
    }

    /// 0x8C: extra access time bits, when present.
    pub fn i_atime_extra(&self) -> Option<u32> {
        self.has_extra(16).then(|| extra::I_ATIME_EXTRA.get(self.0))
    }

    /// 0x90: creation time, when present.
    pub fn i_crtime(&self) -> Option<u32> {
        self.has_extra(20).then(|| extra::I_CRTIME.get(self.0))
    }

    /// 0x94: extra creation time bits, when present.
    pub fn i_crtime_extra(&self) -> Option<u32> {
        self.has_extra(24)
            .then(|| extra::I_CRTIME_EXTRA.get(self.0))
    }

    /// 0x9C: project id, when present.
    pub fn i_projid(&self) -> Option<u32> {
        self.has_extra(EXTRA_ISIZE_FULL)
            .then(|| le_u32(self.0, 0x9C))
    }

    /// 0x28: the 60 bytes of `i_block`.
    pub fn i_block(&self) -> &'a [u8] {
        sub(self.0, I_BLOCK_OFFSET, I_BLOCK_SIZE)
    }

    /// Word `i` (0..15) of `i_block`.
    pub fn i_block_word(&self, i: usize) -> u32 {
        if i < 15 {
            le_u32(self.0, I_BLOCK_OFFSET + 4 * i)
        } else {
            0
        }
    }

    /// The file type from the mode.
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_mode(self.i_mode())
    }

    /// Whether the mode says directory.
    pub fn is_dir(&self) -> bool {
        self.i_mode() & S_IFMT == S_IFDIR
    }

    /// Whether the mode says regular file.
    pub fn is_reg(&self) -> bool {
        self.i_mode() & S_IFMT == S_IFREG
    }

    /// Whether the mode says symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.i_mode() & S_IFMT == S_IFLNK
    }

    /// Whether a flag bit is set.
    pub fn has_flag(&self, f: u32) -> bool {
        self.i_flags() & f != 0
    }

    /// The size in bytes (`i_size_high` is used for every file type).
    pub fn size(&self) -> u64 {
        u64_from_hi_lo(self.i_size_high(), self.i_size_lo())
    }

    /// `i_blocks` as stored: the high half is used only with huge_file.
    pub fn blocks_raw(&self, huge_file: bool) -> u64 {
        if huge_file {
            u64::from(self.i_blocks_lo()) | (u64::from(self.l_i_blocks_high()) << 32)
        } else {
            u64::from(self.i_blocks_lo())
        }
    }

    /// `i_blocks` in 512-byte units: with huge_file and the HUGE_FILE
    /// flag the stored value counts file system blocks.
    pub fn blocks_512(&self, huge_file: bool, block_size: u32) -> u64 {
        let raw = self.blocks_raw(huge_file);
        if huge_file && self.has_flag(flags::HUGE_FILE) {
            raw.saturating_mul(u64::from(block_size / 512))
        } else {
            raw
        }
    }

    /// The extended attribute block: the high half only under 64bit.
    pub fn file_acl(&self, is_64bit: bool) -> u64 {
        let hi = if is_64bit {
            u32::from(self.l_i_file_acl_high())
        } else {
            0
        };
        u64_from_hi_lo(hi, self.i_file_acl_lo())
    }

    /// The owner uid with its high half.
    pub fn uid(&self) -> u32 {
        u32_from_hi_lo(self.l_i_uid_high(), self.i_uid())
    }

    /// The group id with its high half.
    pub fn gid(&self) -> u32 {
        u32_from_hi_lo(self.l_i_gid_high(), self.i_gid())
    }

    /// Whether the checksum has a high half: as e2fsprogs and the kernel
    /// decide it, from `i_extra_isize` alone, even when that value is too
    /// large for the inode (a damaged inode is checksummed the same way
    /// by everyone).
    pub fn csum_has_hi(&self) -> bool {
        self.is_large() && self.i_extra_isize() >= CSUM_HI_EXTRA_END
    }

    /// The stored checksum: 32 bits when the high half exists, else 16.
    pub fn stored_checksum(&self) -> (u32, bool) {
        if self.csum_has_hi() {
            let hi = le_u16(self.0, I_CHECKSUM_HI_OFFSET);
            (u32_from_hi_lo(hi, self.l_i_checksum_lo()), true)
        } else {
            (u32::from(self.l_i_checksum_lo()), false)
        }
    }

    /// The checksum this inode should carry, given the file system seed.
    /// Covers the whole inode with the checksum fields read as zero,
    /// seeded by the inode number and generation.
    pub fn computed_checksum(&self, fs_seed: u32, ino: u32) -> u32 {
        let seed = inode_csum_seed(fs_seed, ino, self.i_generation());
        let b = self.0;
        let has_hi = self.csum_has_hi();
        let lo_end = I_CHECKSUM_LO_OFFSET + 2;
        let mut c = crc32c_raw(seed, sub(b, 0, I_CHECKSUM_LO_OFFSET));
        c = crc32c_raw(c, &[0, 0]);
        if has_hi {
            c = crc32c_raw(c, sub(b, lo_end, I_CHECKSUM_HI_OFFSET - lo_end));
            c = crc32c_raw(c, &[0, 0]);
            c = crc32c_raw(c, b.get(I_CHECKSUM_HI_OFFSET + 2..).unwrap_or(&[]));
        } else {
            c = crc32c_raw(c, b.get(lo_end..).unwrap_or(&[]));
        }
        if has_hi {
            c
        } else {
            c & 0xFFFF
        }
    }

    /// Whether the stored checksum matches. An inode whose first 128
    /// bytes are all zero also passes, as e2fsprogs accepts it.
    pub fn checksum_ok(&self, fs_seed: u32, ino: u32) -> bool {
        let (stored, _) = self.stored_checksum();
        if stored == self.computed_checksum(fs_seed, ino) {
            return true;
        }
        sub(self.0, 0, GOOD_OLD_INODE_SIZE).iter().all(|&b| b == 0)
    }

    /// The in-inode extended attribute area: the bytes after the extra
    /// fields, when `i_extra_isize` leaves room for the 4-byte magic.
    pub fn inline_xattr_area(&self) -> Option<&'a [u8]> {
        if !self.is_large() {
            return None;
        }
        let start = GOOD_OLD_INODE_SIZE + usize::from(self.i_extra_isize());
        if start + 4 > self.0.len() {
            return None;
        }
        self.0.get(start..)
    }
}

on_disk! {
    read Inode, write InodeMut, le;
    /// 0x00: file mode (type and permissions).
    i_mode: u16 @ 0x00;
    /// 0x02: owner uid, low 16 bits.
    i_uid: u16 @ 0x02;
    /// 0x04: size in bytes, low 32 bits.
    i_size_lo: u32 @ 0x04;
    /// 0x08: access time.
    i_atime: u32 @ 0x08;
    /// 0x0C: inode change time.
    i_ctime: u32 @ 0x0C;
    /// 0x10: modification time.
    i_mtime: u32 @ 0x10;
    /// 0x14: deletion time (or the next orphan's inode number).
    i_dtime: u32 @ 0x14;
    /// 0x18: group id, low 16 bits.
    i_gid: u16 @ 0x18;
    /// 0x1A: hard link count.
    i_links_count: u16 @ 0x1A;
    /// 0x1C: block count, low 32 bits.
    i_blocks_lo: u32 @ 0x1C;
    /// 0x20: inode flags.
    i_flags: u32 @ 0x20;
    /// 0x24: version (Linux) or translator (Hurd).
    l_i_version: u32 @ 0x24;
    /// 0x64: file version, for NFS.
    i_generation: u32 @ 0x64;
    /// 0x68: extended attribute block, low 32 bits.
    i_file_acl_lo: u32 @ 0x68;
    /// 0x6C: size in bytes, high 32 bits.
    i_size_high: u32 @ 0x6C;
    /// 0x70: obsolete fragment address.
    i_faddr: u32 @ 0x70;
    /// 0x74: block count, high 16 bits (Linux).
    l_i_blocks_high: u16 @ 0x74;
    /// 0x76: extended attribute block, high 16 bits (Linux).
    l_i_file_acl_high: u16 @ 0x76;
    /// 0x78: owner uid, high 16 bits.
    l_i_uid_high: u16 @ 0x78;
    /// 0x7A: group id, high 16 bits.
    l_i_gid_high: u16 @ 0x7A;
    /// 0x7C: inode checksum, low 16 bits.
    l_i_checksum_lo: u16 @ 0x7C;
    /// 0x7E: reserved.
    l_i_reserved: u16 @ 0x7E;
    /// 0x74: fragment number (Hurd).
    h_i_frag: u8 @ 0x74;
    /// 0x75: fragment size (Hurd).
    h_i_fsize: u8 @ 0x75;
    /// 0x80: size of the extra fields past 128 bytes.
    i_extra_isize_raw: u16 @ 0x80;
}

/// The fields past the first 128 bytes that `i_extra_isize` may not
/// cover: their getters on [`Inode`] say whether they are present; these
/// read and write them unconditionally.
pub mod extra {
    use crate::field::Field;

    /// 0x84: extra change time bits (epoch and nanoseconds).
    pub const I_CTIME_EXTRA: Field<u32> = Field::le(0x84);
    /// 0x88: extra modification time bits.
    pub const I_MTIME_EXTRA: Field<u32> = Field::le(0x88);
    /// 0x8C: extra access time bits.
    pub const I_ATIME_EXTRA: Field<u32> = Field::le(0x8C);
    /// 0x90: creation time.
    pub const I_CRTIME: Field<u32> = Field::le(0x90);
    /// 0x94: extra creation time bits.
    pub const I_CRTIME_EXTRA: Field<u32> = Field::le(0x94);
}

/// The access, change and modification times (each 32-bit seconds).
pub const TIMES: [Field<u32>; 3] = [field::i_atime, field::i_ctime, field::i_mtime];

/// Each time with its extra bits, in the order e2fsck tests them: access,
/// change, creation, modification.
pub const TIMES_WITH_EXTRA: [(Field<u32>, Field<u32>); 4] = [
    (field::i_atime, extra::I_ATIME_EXTRA),
    (field::i_ctime, extra::I_CTIME_EXTRA),
    (extra::I_CRTIME, extra::I_CRTIME_EXTRA),
    (field::i_mtime, extra::I_MTIME_EXTRA),
];

/// `i_size_lo` and `i_size_high` together.
pub const SIZE: Split<u32, u32> = Split::<u32, u32>::new(field::i_size_lo, field::i_size_high);
/// `i_blocks_lo` and `l_i_blocks_high` together.
pub const BLOCKS: Split<u32, u16> =
    Split::<u32, u16>::new(field::i_blocks_lo, field::l_i_blocks_high);
/// An extended-attribute inode's reference count: its low half in
/// `l_i_version`, its high half in `i_ctime`.
pub const EA_INODE_REFCOUNT: Split<u32, u32> =
    Split::<u32, u32>::new(field::l_i_version, field::i_ctime);
/// `i_file_acl_lo` and `l_i_file_acl_high` together.
pub const FILE_ACL: Split<u32, u16> =
    Split::<u32, u16>::new(field::i_file_acl_lo, field::l_i_file_acl_high);

impl InodeMut<'_> {
    /// Sets the size, both halves.
    pub fn set_size(&mut self, v: u64) {
        SIZE.set(self.bytes(), v)
    }

    /// Sets `i_blocks` as stored, both halves.
    pub fn set_blocks(&mut self, v: u64) {
        BLOCKS.set(self.bytes(), v)
    }

    /// Sets the extended attribute block, both halves.
    pub fn set_file_acl(&mut self, v: u64) {
        FILE_ACL.set(self.bytes(), v)
    }

    /// Sets and clears flags in `i_flags`.
    pub fn change_flags(&mut self, set: u32, clear: u32) {
        let v = (self.get(field::i_flags) | set) & !clear;
        self.set(field::i_flags, v)
    }

    /// `i_block`: the block map, the extent tree's root or inline data.
    pub fn i_block(&mut self) -> &mut [u8] {
        let b = self.bytes();
        let end = (I_BLOCK_OFFSET + I_BLOCK_SIZE).min(b.len());
        &mut b[I_BLOCK_OFFSET.min(end)..end]
    }
}

/// The seed of every per-inode checksum: crc32c over the inode number and
/// generation, each little-endian, starting from the file system seed.
pub fn inode_csum_seed(fs_seed: u32, ino: u32, generation: u32) -> u32 {
    let c = crc32c_raw(fs_seed, &ino.to_le_bytes());
    crc32c_raw(c, &generation.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_le_u16, put_le_u32};

    #[test]
    fn size_joins_high_half() {
        let mut b = vec![0u8; 256];
        put_le_u32(&mut b, 0x04, 5); // i_size_lo
        put_le_u32(&mut b, 0x6C, 2); // i_size_high
        assert_eq!(Inode::new(&b).unwrap().size(), (2 << 32) | 5);
    }

    #[test]
    fn checksum_round_trip_large_and_small() {
        for size in [128usize, 256] {
            let mut b = vec![0x5Au8; size];
            if size > 128 {
                put_le_u16(&mut b, 0x80, 32); // i_extra_isize
            }
            let ino = Inode::new(&b).unwrap();
            let c = ino.computed_checksum(0x1234, 12);
            put_le_u16(&mut b, I_CHECKSUM_LO_OFFSET, (c & 0xFFFF) as u16);
            if size > 128 {
                put_le_u16(&mut b, I_CHECKSUM_HI_OFFSET, (c >> 16) as u16);
            }
            let ino = Inode::new(&b).unwrap();
            assert!(ino.checksum_ok(0x1234, 12), "size {size}");
            assert!(!ino.checksum_ok(0x1234, 13), "size {size}");
        }
    }

    #[test]
    fn extra_fields_need_extra_isize() {
        let mut b = vec![0u8; 256];
        put_le_u16(&mut b, 0x80, 4); // i_extra_isize
        let ino = Inode::new(&b).unwrap();
        assert!(ino.i_checksum_hi().is_some());
        assert!(ino.i_crtime().is_none());
        assert!(Inode::new(&b[..128]).unwrap().i_checksum_hi().is_none());
    }

    #[test]
    fn huge_file_blocks() {
        let mut b = vec![0u8; 128];
        put_le_u32(&mut b, 0x1C, 8); // i_blocks_lo
        put_le_u32(&mut b, 0x20, flags::HUGE_FILE); // i_flags
        let ino = Inode::new(&b).unwrap();
        assert_eq!(ino.blocks_512(false, 4096), 8);
        assert_eq!(ino.blocks_512(true, 4096), 64);
    }
}
