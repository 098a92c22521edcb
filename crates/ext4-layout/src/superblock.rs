//! The ext2/3/4 superblock: 1024 bytes at byte offset 1024 of the device
//! (and copies at the start of some groups).

use crate::bytes::{le_u32, sub, u64_from_hi_lo};
use crate::csum::{crc32c_raw, CRC32C_INIT};
use crate::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use crate::field::{Field, Split};
use crate::on_disk;

/// Size of the superblock in bytes.
pub const SUPERBLOCK_SIZE: usize = 1024;
/// Byte offset of the primary superblock on the device.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// `s_magic` of every ext2/3/4 file system.
pub const EXT2_MAGIC: u16 = 0xEF53;
/// Byte offset of `s_checksum`, which covers every byte before it.
pub const S_CHECKSUM_OFFSET: usize = 0x3FC;
/// `s_checksum_type` for crc32c, the only one defined.
pub const CHECKSUM_TYPE_CRC32C: u8 = 1;
/// `s_rev_level` of the original format with fixed inode size.
pub const GOOD_OLD_REV: u32 = 0;
/// `s_rev_level` with dynamic inode sizes and feature flags.
pub const DYNAMIC_REV: u32 = 1;
/// Inode size and first inode of a revision-0 file system.
pub const GOOD_OLD_INODE_SIZE: u16 = 128;
/// First non-reserved inode of a revision-0 file system.
pub const GOOD_OLD_FIRST_INO: u32 = 11;

/// `s_state`: unmounted cleanly.
pub const STATE_VALID: u16 = 0x0001;
/// `s_state`: errors were detected.
pub const STATE_ERROR: u16 = 0x0002;
/// `s_state`: orphans are being recovered.
pub const STATE_ORPHAN: u16 = 0x0004;

/// `s_flags`: directory hashes use signed chars.
pub const FLAGS_SIGNED_HASH: u32 = 0x0001;
/// `s_flags`: directory hashes use unsigned chars.
pub const FLAGS_UNSIGNED_HASH: u32 = 0x0002;
/// `s_flags`: a test file system.
pub const FLAGS_TEST_FILESYS: u32 = 0x0004;

/// `s_creator_os` value for the Hurd, which lays out some inode fields differently.
pub const OS_HURD: u32 = 1;
/// `mmp_magic`, the first word of the multiple-mount protection block
/// that `s_mmp_block` names.
pub const MMP_MAGIC: u32 = 0x004D_4D50;

/// Whether a block holds a multiple-mount protection record.
pub fn is_mmp_block(block: &[u8]) -> bool {
    crate::bytes::le_u32(block, 0) == MMP_MAGIC
}

/// `s_errors`: carry on after an error.
pub const ERRORS_CONTINUE: u16 = 1;
/// `s_default_mount_opts`: `user_xattr`.
pub const DEFM_XATTR_USER: u32 = 0x0004;
/// `s_default_mount_opts`: `acl`.
pub const DEFM_ACL: u32 = 0x0008;

/// A read-only view of a superblock.
#[derive(Clone, Copy)]
pub struct Superblock<'a>(&'a [u8]);

impl<'a> Superblock<'a> {
    /// Wraps 1024 bytes; `None` when the slice is shorter.
    pub fn new(bytes: &'a [u8]) -> Option<Self> {
        bytes.get(..SUPERBLOCK_SIZE).map(Superblock)
    }

    /// Wraps exactly one superblock's bytes.
    pub fn from_array(bytes: &'a [u8; SUPERBLOCK_SIZE]) -> Self {
        Superblock(bytes)
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    /// 0x68: the file system UUID.
    pub fn s_uuid(&self) -> [u8; 16] {
        array16(self.0, 0x68)
    }

    /// 0x78: the volume label bytes.
    pub fn s_volume_name(&self) -> &'a [u8] {
        sub(self.0, 0x78, 16)
    }

    /// 0xD0: the UUID of an external journal.
    pub fn s_journal_uuid(&self) -> [u8; 16] {
        array16(self.0, 0xD0)
    }

    /// 0xEC: the directory hash seed, four little-endian words.
    pub fn s_hash_seed(&self) -> [u32; 4] {
        [0, 1, 2, 3].map(|i| le_u32(self.0, 0xEC + 4 * i))
    }

    /// 0x10C: the backup of the journal inode's `i_block` and size.
    pub fn s_jnl_blocks(&self) -> [u32; 17] {
        let mut out = [0u32; 17];
        for (i, v) in out.iter_mut().enumerate() {
            *v = le_u32(self.0, 0x10C + 4 * i);
        }
        out
    }

    /// The compatible features.
    pub fn compat(&self) -> CompatFeatures {
        CompatFeatures(self.s_feature_compat_raw())
    }

    /// The incompatible features.
    pub fn incompat(&self) -> IncompatFeatures {
        IncompatFeatures(self.s_feature_incompat_raw())
    }

    /// The read-only compatible features.
    pub fn ro_compat(&self) -> RoCompatFeatures {
        RoCompatFeatures(self.s_feature_ro_compat_raw())
    }

    /// Whether the 64bit feature is on.
    pub fn is_64bit(&self) -> bool {
        self.incompat().contains(IncompatFeatures::BIT64)
    }

    /// Whether metadata checksums (crc32c) are on.
    pub fn has_metadata_csum(&self) -> bool {
        self.ro_compat().contains(RoCompatFeatures::METADATA_CSUM)
    }

    /// Whether group descriptors carry a checksum of either kind.
    pub fn has_group_desc_csum(&self) -> bool {
        self.ro_compat()
            .intersects(RoCompatFeatures::METADATA_CSUM.union(RoCompatFeatures::GDT_CSUM))
    }

    /// Total blocks, joining the high half only under 64bit.
    pub fn blocks_count(&self) -> u64 {
        self.hi_lo(self.s_blocks_count_hi(), self.s_blocks_count_lo())
    }

    /// Reserved blocks, joining the high half only under 64bit.
    pub fn r_blocks_count(&self) -> u64 {
        self.hi_lo(self.s_r_blocks_count_hi(), self.s_r_blocks_count_lo())
    }

    /// Free blocks, joining the high half only under 64bit.
    pub fn free_blocks_count(&self) -> u64 {
        self.hi_lo(self.s_free_blocks_count_hi(), self.s_free_blocks_count_lo())
    }

    fn hi_lo(&self, hi: u32, lo: u32) -> u64 {
        if self.is_64bit() {
            u64_from_hi_lo(hi, lo)
        } else {
            u64::from(lo)
        }
    }

    /// The inode size: 128 for revision 0, else `s_inode_size`.
    pub fn inode_size(&self) -> u16 {
        if self.s_rev_level() == GOOD_OLD_REV {
            GOOD_OLD_INODE_SIZE
        } else {
            self.s_inode_size_raw()
        }
    }

    /// The first non-reserved inode: 11 for revision 0, else `s_first_ino`.
    pub fn first_ino(&self) -> u32 {
        if self.s_rev_level() == GOOD_OLD_REV {
            GOOD_OLD_FIRST_INO
        } else {
            self.s_first_ino_raw()
        }
    }

    /// The group descriptor size: 32 unless 64bit, else `s_desc_size`.
    /// The raw value is not validated here.
    pub fn desc_size(&self) -> u16 {
        if self.is_64bit() {
            self.s_desc_size_raw()
        } else {
            32
        }
    }

    /// The block size, when `s_log_block_size` is in the range ext4 allows
    /// (1 KiB to 64 KiB).
    pub fn block_size(&self) -> Option<u32> {
        let log = self.s_log_block_size();
        if log <= 6 {
            Some(1024u32 << log)
        } else {
            None
        }
    }

    /// The cluster size under bigalloc, else the block size.
    pub fn cluster_size(&self) -> Option<u32> {
        if self.ro_compat().contains(RoCompatFeatures::BIGALLOC) {
            let log = self.s_log_cluster_size();
            if log <= 29 {
                Some(1024u32 << log)
            } else {
                None
            }
        } else {
            self.block_size()
        }
    }

    /// The crc32c this superblock should carry in `s_checksum`.
    pub fn computed_checksum(&self) -> u32 {
        crc32c_raw(CRC32C_INIT, sub(self.0, 0, S_CHECKSUM_OFFSET))
    }

    /// Whether `s_checksum` matches (only meaningful with metadata_csum).
    pub fn checksum_ok(&self) -> bool {
        self.computed_checksum() == self.s_checksum()
    }

    /// The seed every other metadata checksum starts from: `s_checksum_seed`
    /// under metadata_csum_seed, else crc32c of the UUID.
    pub fn csum_seed(&self) -> u32 {
        if self.incompat().contains(IncompatFeatures::CSUM_SEED) {
            self.s_checksum_seed()
        } else {
            crc32c_raw(CRC32C_INIT, &self.s_uuid())
        }
    }

    /// The hash signedness the file system asks for: `Some(true)` for
    /// unsigned, `Some(false)` for signed, `None` when neither flag is set.
    pub fn unsigned_hash(&self) -> Option<bool> {
        let f = self.s_flags();
        if f & FLAGS_UNSIGNED_HASH != 0 {
            Some(true)
        } else if f & FLAGS_SIGNED_HASH != 0 {
            Some(false)
        } else {
            None
        }
    }
}

on_disk! {
    read Superblock, write SuperblockMut, le;
    /// 0x00: total number of inodes.
    s_inodes_count: u32 @ 0x00;
    /// 0x04: total number of blocks, low 32 bits.
    s_blocks_count_lo: u32 @ 0x04;
    /// 0x08: blocks reserved for the super user, low 32 bits.
    s_r_blocks_count_lo: u32 @ 0x08;
    /// 0x0C: free blocks, low 32 bits.
    s_free_blocks_count_lo: u32 @ 0x0C;
    /// 0x10: free inodes.
    s_free_inodes_count: u32 @ 0x10;
    /// 0x14: first data block (1 for 1 KiB blocks, else 0).
    s_first_data_block: u32 @ 0x14;
    /// 0x18: block size is 1024 << this.
    s_log_block_size: u32 @ 0x18;
    /// 0x1C: cluster size is 1024 << this (bigalloc).
    s_log_cluster_size: u32 @ 0x1C;
    /// 0x20: blocks per group.
    s_blocks_per_group: u32 @ 0x20;
    /// 0x24: clusters per group.
    s_clusters_per_group: u32 @ 0x24;
    /// 0x28: inodes per group.
    s_inodes_per_group: u32 @ 0x28;
    /// 0x2C: last mount time.
    s_mtime: u32 @ 0x2C;
    /// 0x30: last write time.
    s_wtime: u32 @ 0x30;
    /// 0x34: mounts since the last check.
    s_mnt_count: u16 @ 0x34;
    /// 0x36: mounts allowed before a check (signed on disk).
    s_max_mnt_count: u16 @ 0x36;
    /// 0x38: magic, 0xEF53.
    s_magic: u16 @ 0x38;
    /// 0x3A: file system state bits.
    s_state: u16 @ 0x3A;
    /// 0x3C: behaviour when errors are detected.
    s_errors: u16 @ 0x3C;
    /// 0x3E: minor revision level.
    s_minor_rev_level: u16 @ 0x3E;
    /// 0x40: time of the last check.
    s_lastcheck: u32 @ 0x40;
    /// 0x44: maximum time between checks.
    s_checkinterval: u32 @ 0x44;
    /// 0x48: creator operating system.
    s_creator_os: u32 @ 0x48;
    /// 0x4C: revision level.
    s_rev_level: u32 @ 0x4C;
    /// 0x50: default uid for reserved blocks.
    s_def_resuid: u16 @ 0x50;
    /// 0x52: default gid for reserved blocks.
    s_def_resgid: u16 @ 0x52;
    /// 0x54: first non-reserved inode (dynamic revision).
    s_first_ino_raw: u32 @ 0x54;
    /// 0x58: inode size in bytes (dynamic revision).
    s_inode_size_raw: u16 @ 0x58;
    /// 0x5A: group number of this superblock copy.
    s_block_group_nr: u16 @ 0x5A;
    /// 0x5C: compatible feature set.
    s_feature_compat_raw: u32 @ 0x5C;
    /// 0x60: incompatible feature set.
    s_feature_incompat_raw: u32 @ 0x60;
    /// 0x64: read-only compatible feature set.
    s_feature_ro_compat_raw: u32 @ 0x64;
    /// 0xC8: compression algorithms in use.
    s_algorithm_usage_bitmap: u32 @ 0xC8;
    /// 0xCC: blocks to preallocate for files.
    s_prealloc_blocks: u8 @ 0xCC;
    /// 0xCD: blocks to preallocate for directories.
    s_prealloc_dir_blocks: u8 @ 0xCD;
    /// 0xCE: group descriptor blocks reserved for online growth.
    s_reserved_gdt_blocks: u16 @ 0xCE;
    /// 0xE0: journal inode number.
    s_journal_inum: u32 @ 0xE0;
    /// 0xE4: journal device number.
    s_journal_dev: u32 @ 0xE4;
    /// 0xE8: head of the orphan inode list.
    s_last_orphan: u32 @ 0xE8;
    /// 0xFC: default directory hash version.
    s_def_hash_version: u8 @ 0xFC;
    /// 0xFD: what `s_jnl_blocks` holds (1 = a copy of the journal's i_block).
    s_jnl_backup_type: u8 @ 0xFD;
    /// 0xFE: group descriptor size (64bit only).
    s_desc_size_raw: u16 @ 0xFE;
    /// 0x100: default mount options.
    s_default_mount_opts: u32 @ 0x100;
    /// 0x104: first meta block group (meta_bg).
    s_first_meta_bg: u32 @ 0x104;
    /// 0x108: file system creation time.
    s_mkfs_time: u32 @ 0x108;
    /// 0x150: total number of blocks, high 32 bits.
    s_blocks_count_hi: u32 @ 0x150;
    /// 0x154: reserved blocks, high 32 bits.
    s_r_blocks_count_hi: u32 @ 0x154;
    /// 0x158: free blocks, high 32 bits.
    s_free_blocks_count_hi: u32 @ 0x158;
    /// 0x15C: every inode has at least this much extra space.
    s_min_extra_isize: u16 @ 0x15C;
    /// 0x15E: new inodes should have this much extra space.
    s_want_extra_isize: u16 @ 0x15E;
    /// 0x160: miscellaneous flags (hash signedness, test file system).
    s_flags: u32 @ 0x160;
    /// 0x164: RAID stride.
    s_raid_stride: u16 @ 0x164;
    /// 0x166: MMP update interval in seconds.
    s_mmp_update_interval: u16 @ 0x166;
    /// 0x168: block holding the MMP structure.
    s_mmp_block: u64 @ 0x168;
    /// 0x170: RAID stripe width.
    s_raid_stripe_width: u32 @ 0x170;
    /// 0x174: flex group size is 2 to this power.
    s_log_groups_per_flex: u8 @ 0x174;
    /// 0x175: metadata checksum algorithm (1 = crc32c).
    s_checksum_type: u8 @ 0x175;
    /// 0x176: encryption level.
    s_encryption_level: u8 @ 0x176;
    /// 0x178: kilobytes written over the file system's life.
    s_kbytes_written: u64 @ 0x178;
    /// 0x180: inode of the active snapshot.
    s_snapshot_inum: u32 @ 0x180;
    /// 0x184: id of the active snapshot.
    s_snapshot_id: u32 @ 0x184;
    /// 0x188: blocks reserved for the active snapshot.
    s_snapshot_r_blocks_count: u64 @ 0x188;
    /// 0x190: head of the snapshot list.
    s_snapshot_list: u32 @ 0x190;
    /// 0x194: number of errors seen.
    s_error_count: u32 @ 0x194;
    /// 0x198: time of the first error.
    s_first_error_time: u32 @ 0x198;
    /// 0x19C: inode of the first error.
    s_first_error_ino: u32 @ 0x19C;
    /// 0x1A0: block of the first error.
    s_first_error_block: u64 @ 0x1A0;
    /// 0x1C8: source line of the first error.
    s_first_error_line: u32 @ 0x1C8;
    /// 0x1CC: time of the last error.
    s_last_error_time: u32 @ 0x1CC;
    /// 0x1D0: inode of the last error.
    s_last_error_ino: u32 @ 0x1D0;
    /// 0x1D4: source line of the last error.
    s_last_error_line: u32 @ 0x1D4;
    /// 0x1D8: block of the last error.
    s_last_error_block: u64 @ 0x1D8;
    /// 0x240: user quota inode.
    s_usr_quota_inum: u32 @ 0x240;
    /// 0x244: group quota inode.
    s_grp_quota_inum: u32 @ 0x244;
    /// 0x248: overhead clusters.
    s_overhead_clusters: u32 @ 0x248;
    /// 0x24C: first backup group (sparse_super2).
    s_backup_bgs_0: u32 @ 0x24C;
    /// 0x250: second backup group (sparse_super2).
    s_backup_bgs_1: u32 @ 0x250;
    /// 0x268: lost+found inode hint.
    s_lpf_ino: u32 @ 0x268;
    /// 0x26C: project quota inode.
    s_prj_quota_inum: u32 @ 0x26C;
    /// 0x270: crc32c(uuid) when metadata_csum_seed is set.
    s_checksum_seed: u32 @ 0x270;
    /// 0x274: high byte of s_wtime.
    s_wtime_hi: u8 @ 0x274;
    /// 0x275: high byte of s_mtime.
    s_mtime_hi: u8 @ 0x275;
    /// 0x276: high byte of s_mkfs_time.
    s_mkfs_time_hi: u8 @ 0x276;
    /// 0x277: high byte of s_lastcheck.
    s_lastcheck_hi: u8 @ 0x277;
    /// 0x278: high byte of s_first_error_time.
    s_first_error_time_hi: u8 @ 0x278;
    /// 0x279: high byte of s_last_error_time.
    s_last_error_time_hi: u8 @ 0x279;
    /// 0x27A: error code of the first error.
    s_first_error_errcode: u8 @ 0x27A;
    /// 0x27B: error code of the last error.
    s_last_error_errcode: u8 @ 0x27B;
    /// 0x27C: file name encoding (casefold).
    s_encoding: u16 @ 0x27C;
    /// 0x27E: file name encoding flags.
    s_encoding_flags: u16 @ 0x27E;
    /// 0x280: orphan file inode.
    s_orphan_file_inum: u32 @ 0x280;
    /// 0x3FC: crc32c of the bytes before it.
    s_checksum: u32 @ 0x3FC;
}

/// Where `s_uuid` lies.
pub const S_UUID: std::ops::Range<usize> = 0x68..0x78;
/// Where `s_volume_name` lies.
pub const S_VOLUME_NAME: std::ops::Range<usize> = 0x78..0x88;
/// Where `s_hash_seed` lies: four little-endian words.
pub const S_HASH_SEED: std::ops::Range<usize> = 0xEC..0xFC;
/// Where `s_journal_uuid` lies.
pub const S_JOURNAL_UUID: std::ops::Range<usize> = 0xD0..0xE0;
/// The error record, `s_error_count` to `s_last_error_block` and the
/// mount options after it, up to `s_usr_quota_inum`.
pub const S_ERROR_INFO: std::ops::Range<usize> = 0x194..0x200;
/// Where `s_jnl_blocks` lies: the journal inode's `i_block` (15 words),
/// then its `i_size_high` and `i_size`.
pub const S_JNL_BLOCKS: std::ops::Range<usize> = 0x10C..0x150;
/// `s_jnl_blocks`' copy of the journal inode's `i_block`.
pub const S_JNL_IBLOCK: std::ops::Range<usize> = 0x10C..0x148;
/// `s_jnl_blocks[15]`: the journal inode's `i_size_high`.
pub const S_JNL_SIZE_HIGH: Field<u32> = Field::le(0x148);
/// `s_jnl_blocks[16]`: the journal inode's `i_size`.
pub const S_JNL_SIZE: Field<u32> = Field::le(0x14C);
/// `s_jnl_backup_type` when `s_jnl_blocks` holds a copy of the journal
/// inode's map.
pub const JNL_BACKUP_BLOCKS: u8 = 1;

/// `s_blocks_count_lo`/`_hi`.
pub const BLOCKS_COUNT: Split<u32, u32> =
    Split::<u32, u32>::new(field::s_blocks_count_lo, field::s_blocks_count_hi);
/// `s_r_blocks_count_lo`/`_hi`.
pub const R_BLOCKS_COUNT: Split<u32, u32> =
    Split::<u32, u32>::new(field::s_r_blocks_count_lo, field::s_r_blocks_count_hi);
/// `s_free_blocks_count_lo`/`_hi`.
pub const FREE_BLOCKS_COUNT: Split<u32, u32> =
    Split::<u32, u32>::new(field::s_free_blocks_count_lo, field::s_free_blocks_count_hi);

fn array16(b: &[u8], off: usize) -> [u8; 16] {
    let mut out = [0u8; 16];
    let s = sub(b, off, 16);
    if s.len() == 16 {
        out.copy_from_slice(s);
    }
    out
}

/// Reads the signed mount-count limit.
pub fn max_mnt_count_signed(sb: &Superblock<'_>) -> i16 {
    i16::from_le_bytes(sb.s_max_mnt_count().to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_le_u16, put_le_u32};

    fn blank() -> Vec<u8> {
        let mut b = vec![0u8; SUPERBLOCK_SIZE];
        put_le_u16(&mut b, 0x38, EXT2_MAGIC); // s_magic
        put_le_u32(&mut b, 0x4C, DYNAMIC_REV); // s_rev_level
        put_le_u16(&mut b, 0x58, 256); // s_inode_size
        put_le_u32(&mut b, 0x54, 11); // s_first_ino
        b
    }

    #[test]
    fn short_slice_is_rejected() {
        assert!(Superblock::new(&[0u8; 1000]).is_none());
    }

    #[test]
    fn blocks_count_high_half_needs_64bit() {
        let mut b = blank();
        put_le_u32(&mut b, 0x04, 100); // s_blocks_count_lo
        put_le_u32(&mut b, 0x150, 1); // s_blocks_count_hi
        assert_eq!(Superblock::new(&b).unwrap().blocks_count(), 100);
        put_le_u32(&mut b, 0x60, IncompatFeatures::BIT64.0); // s_feature_incompat
        assert_eq!(Superblock::new(&b).unwrap().blocks_count(), (1 << 32) | 100);
    }

    #[test]
    fn rev0_fixes_inode_size() {
        let mut b = blank();
        put_le_u32(&mut b, 0x4C, GOOD_OLD_REV);
        let sb = Superblock::new(&b).unwrap();
        assert_eq!(sb.inode_size(), 128);
        assert_eq!(sb.first_ino(), 11);
    }

    #[test]
    fn block_size_range() {
        let mut b = blank();
        put_le_u32(&mut b, 0x18, 2);
        assert_eq!(Superblock::new(&b).unwrap().block_size(), Some(4096));
        put_le_u32(&mut b, 0x18, 7);
        assert_eq!(Superblock::new(&b).unwrap().block_size(), None);
    }

    #[test]
    fn checksum_round_trip() {
        let mut b = blank();
        let c = Superblock::new(&b).unwrap().computed_checksum();
        put_le_u32(&mut b, S_CHECKSUM_OFFSET, c);
        assert!(Superblock::new(&b).unwrap().checksum_ok());
        b[0x100] ^= 1;
        assert!(!Superblock::new(&b).unwrap().checksum_ok());
    }
}
