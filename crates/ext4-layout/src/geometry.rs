//! File system geometry derived from a superblock: sizes, counts and where
//! each group's superblock copy and descriptor blocks lie.

use crate::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use crate::superblock::{Superblock, EXT2_MAGIC};
use crate::types::{Group, PhysBlock};

/// Why a superblock cannot describe a file system we can walk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// `s_magic` is not 0xEF53.
    #[error("bad magic number 0x{0:04x} in superblock")]
    BadMagic(u16),
    /// `s_rev_level` is newer than any known revision.
    #[error("unknown revision level {0}")]
    BadRevision(u32),
    /// `s_log_block_size` is out of range.
    #[error("block size 1024<<{0} is out of range")]
    BadBlockSize(u32),
    /// `s_log_cluster_size` is out of range or smaller than the block size.
    #[error("cluster size 1024<<{0} is out of range")]
    BadClusterSize(u32),
    /// A per-group count is zero or too large for one bitmap block.
    #[error("{what} is {value}, outside 1..={max}")]
    BadPerGroup {
        /// Which count.
        what: &'static str,
        /// The value found.
        value: u64,
        /// The largest allowed value.
        max: u64,
    },
    /// The inode size is not a power of two between 128 and the block size.
    #[error("inode size {0} is invalid")]
    BadInodeSize(u16),
    /// `s_first_data_block` is past the end of the file system.
    #[error("first data block {first} is not below block count {count}")]
    BadFirstDataBlock {
        /// `s_first_data_block`.
        first: u64,
        /// Total blocks.
        count: u64,
    },
    /// The group descriptor size is invalid for a 64bit file system.
    #[error("group descriptor size {0} is invalid")]
    BadDescSize(u16),
    /// groups × inodes per group does not fit in 32 bits.
    #[error("inode count {found} should be {expected}, which is too large")]
    BadInodesCount {
        /// `s_inodes_count`.
        found: u32,
        /// groups × `s_inodes_per_group`.
        expected: u64,
    },
    /// No block groups at all.
    #[error("the file system has no block groups")]
    NoGroups,
    /// The first non-reserved inode is out of range.
    #[error("first inode {0} is out of range")]
    BadFirstIno(u32),
}

/// Validated sizes and counts of a file system.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Block size in bytes.
    pub block_size: u32,
    /// log2 of the block size.
    pub block_size_bits: u32,
    /// Blocks per cluster (1 without bigalloc).
    pub cluster_ratio: u32,
    /// log2 of `cluster_ratio`.
    pub cluster_bits: u32,
    /// Total blocks.
    pub blocks_count: u64,
    /// `s_first_data_block`.
    pub first_data_block: u64,
    /// Blocks per group.
    pub blocks_per_group: u32,
    /// Clusters per group.
    pub clusters_per_group: u32,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// Total inodes.
    pub inodes_count: u32,
    /// Number of block groups.
    pub group_count: u32,
    /// Group descriptor size in bytes.
    pub desc_size: u32,
    /// Group descriptors per block.
    pub desc_per_block: u32,
    /// Blocks holding the group descriptor table.
    pub desc_blocks: u32,
    /// Inode size in bytes.
    pub inode_size: u32,
    /// Inodes per block.
    pub inodes_per_block: u32,
    /// Blocks of inode table per group.
    pub inode_blocks_per_group: u32,
    /// First non-reserved inode.
    pub first_ino: u32,
    /// `s_reserved_gdt_blocks`.
    pub reserved_gdt_blocks: u32,
    /// `s_first_meta_bg`.
    pub first_meta_bg: u32,
    /// `s_log_groups_per_flex` (0 without flex_bg).
    pub log_groups_per_flex: u32,
    /// Compat features.
    pub compat: CompatFeatures,
    /// Incompat features.
    pub incompat: IncompatFeatures,
    /// Ro-compat features.
    pub ro_compat: RoCompatFeatures,
    /// Seed of metadata checksums.
    pub csum_seed: u32,
    /// Groups that hold superblock backups under sparse_super2.
    pub backup_bgs: [u32; 2],
}

/// The cluster size as (blocks per cluster, log2 of it): one block
/// without bigalloc.
fn cluster_shape(sb: &Superblock<'_>) -> Result<(u32, u32), GeometryError> {
    if !sb.ro_compat().contains(RoCompatFeatures::BIGALLOC) {
        return Ok((1, 0));
    }
    let log = sb.s_log_block_size();
    let clog = sb.s_log_cluster_size();
    if clog < log || clog > log + 16 {
        return Err(GeometryError::BadClusterSize(clog));
    }
    Ok((1u32 << (clog - log), clog - log))
}

/// Blocks and clusters per group, checked against what one bitmap block
/// can describe.
fn group_blocks(
    sb: &Superblock<'_>,
    block_size: u32,
    cluster_ratio: u32,
) -> Result<(u32, u32), GeometryError> {
    let bits_per_bitmap = u64::from(block_size) * 8;
    let blocks_per_group = sb.s_blocks_per_group();
    let clusters_per_group = if cluster_ratio > 1 {
        sb.s_clusters_per_group()
    } else {
        blocks_per_group
    };
    if clusters_per_group == 0 || u64::from(clusters_per_group) > bits_per_bitmap {
        return Err(GeometryError::BadPerGroup {
            what: "clusters per group",
            value: clusters_per_group.into(),
            max: bits_per_bitmap,
        });
    }
    let bpg_expected = u64::from(clusters_per_group) * u64::from(cluster_ratio);
    if blocks_per_group == 0 || u64::from(blocks_per_group) != bpg_expected {
        return Err(GeometryError::BadPerGroup {
            what: "blocks per group",
            value: blocks_per_group.into(),
            max: bpg_expected,
        });
    }
    Ok((blocks_per_group, clusters_per_group))
}

/// Inodes per group, checked against what one bitmap block can describe
/// and the inodes of one table block.
fn group_inodes(
    sb: &Superblock<'_>,
    block_size: u32,
    inodes_per_block: u32,
) -> Result<u32, GeometryError> {
    let bits_per_bitmap = u64::from(block_size) * 8;
    let inodes_per_group = sb.s_inodes_per_group();
    let ipg_max = bits_per_bitmap.min(u64::from(u32::MAX));
    if inodes_per_group == 0
        || u64::from(inodes_per_group) > ipg_max
        || inodes_per_group < inodes_per_block
    {
        return Err(GeometryError::BadPerGroup {
            what: "inodes per group",
            value: inodes_per_group.into(),
            max: ipg_max,
        });
    }
    Ok(inodes_per_group)
}

impl Geometry {
    /// Derives the geometry, rejecting values that make the layout
    /// impossible to walk.
    pub fn from_superblock(sb: &Superblock<'_>) -> Result<Geometry, GeometryError> {
        if sb.s_magic() != EXT2_MAGIC {
            return Err(GeometryError::BadMagic(sb.s_magic()));
        }
        if sb.s_rev_level() > crate::superblock::DYNAMIC_REV {
            return Err(GeometryError::BadRevision(sb.s_rev_level()));
        }
        let log = sb.s_log_block_size();
        let block_size = sb.block_size().ok_or(GeometryError::BadBlockSize(log))?;
        let block_size_bits = 10 + log;
        let ro_compat = sb.ro_compat();
        let (cluster_ratio, cluster_bits) = cluster_shape(sb)?;
        let (blocks_per_group, clusters_per_group) = group_blocks(sb, block_size, cluster_ratio)?;
        let inode_size = sb.inode_size();
        if inode_size < 128 || !inode_size.is_power_of_two() || u32::from(inode_size) > block_size {
            return Err(GeometryError::BadInodeSize(inode_size));
        }
        let inodes_per_block = block_size / u32::from(inode_size);
        let inodes_per_group = group_inodes(sb, block_size, inodes_per_block)?;
        let blocks_count = sb.blocks_count();
        let first_data_block = u64::from(sb.s_first_data_block());
        if first_data_block >= blocks_count {
            return Err(GeometryError::BadFirstDataBlock {
                first: first_data_block,
                count: blocks_count,
            });
        }
        let groups = (blocks_count - first_data_block).div_ceil(u64::from(blocks_per_group));
        if groups == 0 {
            return Err(GeometryError::NoGroups);
        }
        let group_count = u32::try_from(groups).map_err(|_| GeometryError::NoGroups)?;
        // A wrong s_inodes_count is a finding, not a reason to stop: the
        // walk uses groups × inodes per group, as the inode tables do.
        let inodes_count = u32::try_from(groups * u64::from(inodes_per_group)).map_err(|_| {
            GeometryError::BadInodesCount {
                found: sb.s_inodes_count(),
                expected: groups * u64::from(inodes_per_group),
            }
        })?;
        let incompat = sb.incompat();
        // Any size that fits a block can be walked; e2fsck's rules (a
        // power of two, 64 to 1024 bytes) are the opener's to apply, and
        // it loads a superblock that breaks them "despite errors".
        let desc_size = u32::from(sb.desc_size());
        if incompat.contains(IncompatFeatures::BIT64) && (desc_size == 0 || desc_size > block_size)
        {
            return Err(GeometryError::BadDescSize(sb.desc_size()));
        }
        let desc_per_block = block_size / desc_size;
        let desc_blocks = group_count.div_ceil(desc_per_block);
        let first_ino = sb.first_ino();
        if first_ino < crate::superblock::GOOD_OLD_FIRST_INO || first_ino > inodes_count {
            return Err(GeometryError::BadFirstIno(first_ino));
        }
        let inode_blocks_per_group = u32::try_from(
            (u64::from(inodes_per_group) * u64::from(inode_size)).div_ceil(u64::from(block_size)),
        )
        .unwrap_or(u32::MAX);
        let compat = sb.compat();
        let log_groups_per_flex = if incompat.contains(IncompatFeatures::FLEX_BG) {
            u32::from(sb.s_log_groups_per_flex())
        } else {
            0
        };
        Ok(Geometry {
            block_size,
            block_size_bits,
            cluster_ratio,
            cluster_bits,
            blocks_count,
            first_data_block,
            blocks_per_group,
            clusters_per_group,
            inodes_per_group,
            inodes_count,
            group_count,
            desc_size,
            desc_per_block,
            desc_blocks,
            inode_size: u32::from(inode_size),
            inodes_per_block,
            inode_blocks_per_group,
            first_ino,
            reserved_gdt_blocks: u32::from(sb.s_reserved_gdt_blocks()),
            first_meta_bg: sb.s_first_meta_bg(),
            log_groups_per_flex,
            compat,
            incompat,
            ro_compat,
            csum_seed: sb.csum_seed(),
            backup_bgs: [sb.s_backup_bgs_0(), sb.s_backup_bgs_1()],
        })
    }

    /// Whether metadata_csum is on.
    pub fn metadata_csum(&self) -> bool {
        self.ro_compat.contains(RoCompatFeatures::METADATA_CSUM)
    }

    /// Whether group descriptors carry checksums (gdt_csum or metadata_csum).
    pub fn has_gdt_csum(&self) -> bool {
        self.ro_compat
            .intersects(RoCompatFeatures::METADATA_CSUM.union(RoCompatFeatures::GDT_CSUM))
    }

    /// The first block of a group.
    pub fn group_first_block(&self, g: Group) -> PhysBlock {
        PhysBlock(self.first_data_block + u64::from(g.0) * u64::from(self.blocks_per_group))
    }

    /// The last block of a group (the last group may be short).
    pub fn group_last_block(&self, g: Group) -> PhysBlock {
        let end = self.group_first_block(g).0 + u64::from(self.blocks_per_group) - 1;
        PhysBlock(end.min(self.blocks_count - 1))
    }

    /// Number of blocks in a group.
    pub fn blocks_in_group(&self, g: Group) -> u32 {
        (self.group_last_block(g).0 - self.group_first_block(g).0 + 1) as u32
    }

    /// The group a block belongs to.
    pub fn group_of_block(&self, b: PhysBlock) -> Group {
        Group(
            ((b.0.saturating_sub(self.first_data_block)) / u64::from(self.blocks_per_group)) as u32,
        )
    }

    /// The group an inode belongs to (inode numbers start at 1).
    pub fn group_of_ino(&self, ino: u32) -> Group {
        Group(ino.saturating_sub(1) / self.inodes_per_group)
    }

    /// Whether a block number lies inside the file system's data area.
    pub fn block_in_range(&self, b: u64) -> bool {
        b >= self.first_data_block && b < self.blocks_count
    }

    /// The flex group size, 1 without flex_bg.
    pub fn groups_per_flex(&self) -> u32 {
        if self.log_groups_per_flex < 31 {
            1u32 << self.log_groups_per_flex
        } else {
            1
        }
    }

    /// Whether a group carries a superblock backup (and, without meta_bg,
    /// a copy of the descriptor table).
    pub fn group_has_super(&self, g: Group) -> bool {
        let g = g.0;
        if g == 0 {
            return true;
        }
        if self.compat.contains(CompatFeatures::SPARSE_SUPER2) {
            return g == self.backup_bgs[0] || g == self.backup_bgs[1];
        }
        if g <= 1 || !self.ro_compat.contains(RoCompatFeatures::SPARSE_SUPER) {
            return true;
        }
        if g & 1 == 0 {
            return false;
        }
        is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7)
    }

    /// Blocks of the old-style descriptor table that follow a superblock
    /// copy: the whole table plus the reserved GDT blocks, or only the
    /// groups before `s_first_meta_bg` under meta_bg.
    pub fn old_desc_blocks(&self) -> u32 {
        if self.incompat.contains(IncompatFeatures::META_BG) {
            self.first_meta_bg
        } else {
            self.desc_blocks.saturating_add(self.reserved_gdt_blocks)
        }
    }

    /// Where a group's superblock copy and descriptor blocks lie.
    pub fn super_and_bgd_loc(&self, g: Group) -> GroupMetaLayout {
        let mut group_block = self.group_first_block(g).0;
        if group_block == 0 && self.block_size == 1024 {
            group_block = 1;
        }
        let has_super = self.group_has_super(g);
        let mut out = GroupMetaLayout {
            super_block: None,
            old_desc: None,
            new_desc: None,
            used_blocks: 0,
        };
        if has_super {
            out.super_block = Some(PhysBlock(group_block));
            out.used_blocks += 1;
        }
        let meta_bg_size = self.desc_per_block;
        let meta_bg = g.0 / meta_bg_size;
        if !self.incompat.contains(IncompatFeatures::META_BG) || meta_bg < self.first_meta_bg {
            if has_super {
                let n = self.old_desc_blocks();
                out.old_desc = Some((PhysBlock(group_block + 1), n));
                out.used_blocks += n;
            }
        } else {
            let r = g.0 % meta_bg_size;
            if r == 0 || r == 1 || r == meta_bg_size - 1 {
                out.new_desc = Some(PhysBlock(group_block + u64::from(has_super)));
                out.used_blocks += 1;
            }
        }
        out
    }

    /// The block holding descriptor block `i` of the table whose superblock
    /// copy is at `sb_block` (the primary is at `s_first_data_block`).
    pub fn descriptor_block(&self, sb_block: u64, i: u32) -> PhysBlock {
        if !self.incompat.contains(IncompatFeatures::META_BG) || i < self.first_meta_bg {
            return PhysBlock(sb_block + u64::from(i) + 1);
        }
        let bg = self.desc_per_block.saturating_mul(i);
        let mut has_super = u64::from(self.group_has_super(Group(bg)));
        let mut ret = self.group_first_block(Group(bg)).0;
        if sb_block != self.first_data_block
            && ret + has_super + u64::from(self.blocks_per_group) < self.blocks_count
        {
            ret += u64::from(self.blocks_per_group);
            has_super = u64::from(self.group_has_super(Group(bg + 1)));
        }
        PhysBlock(ret + has_super)
    }

    /// Groups that hold superblock copies, in order.
    pub fn backup_groups(&self) -> impl Iterator<Item = Group> + '_ {
        (1..self.group_count)
            .map(Group)
            .filter(|g| self.group_has_super(*g))
    }
}

/// The superblock and descriptor blocks at the start of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupMetaLayout {
    /// The superblock copy, if the group has one.
    pub super_block: Option<PhysBlock>,
    /// The old-style descriptor table copy: first block and length
    /// (including reserved GDT blocks).
    pub old_desc: Option<(PhysBlock, u32)>,
    /// The meta_bg descriptor block, if this group holds one.
    pub new_desc: Option<PhysBlock>,
    /// How many blocks these take.
    pub used_blocks: u32,
}

fn is_power_of(mut n: u32, base: u32) -> bool {
    while n > 1 {
        if n % base != 0 {
            return false;
        }
        n /= base;
    }
    n == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers() {
        assert!(is_power_of(1, 3));
        assert!(is_power_of(27, 3));
        assert!(is_power_of(49, 7));
        assert!(!is_power_of(15, 3));
    }
}
