//! The file system being checked: the superblock and group descriptors in
//! use, the geometry derived from them, and block-level reads.

mod blockread;
mod layout;
mod open;

pub(crate) use blockread::read_locating;
pub(crate) use blockread::{failed_block, BlockReadError};
pub(crate) use layout::for_each_super_and_bgd;
pub use layout::{allowed_range, metadata_outside_group, BitSet};

pub use open::Opened;
pub use open::{open_fs, open_primary, OpenFailure, OpenOptions, SbLoc};

use std::io;
use std::sync::Arc;

use ext4_layout::group_desc::GroupDesc;
use ext4_layout::superblock::Superblock;
use ext4_layout::{Geometry, Group};
use pipeline::Device;

/// The file system as the checker sees it. Shared read-only by all workers.
pub struct Fs {
    /// The device.
    pub dev: Arc<Device>,
    /// The superblock in use (the primary, or a backup if the primary was bad).
    pub sb: Box<[u8; 1024]>,
    /// Geometry derived from `sb`.
    pub geo: Geometry,
    /// The group descriptor table, `group_count * desc_size` bytes.
    pub gdt: Vec<u8>,
    /// Block number of the superblock in use, in file system blocks; 0 for the primary.
    pub sb_block: u64,
    /// Whether a backup superblock is in use.
    pub backup_in_use: bool,
    /// The device size in file system blocks.
    pub dev_blocks: u64,
    /// Reads that failed where the check goes on (a block taken as
    /// unusable), reported at the end as e2fsck reports them.
    pub read_errors: std::sync::Mutex<Vec<String>>,
}

impl Fs {
    /// A view of the superblock in use.
    pub fn sb(&self) -> Superblock<'_> {
        Superblock::from_array(&self.sb)
    }

    /// The descriptor of group `g`.
    pub fn gd(&self, g: u32) -> GroupDesc<'_> {
        let ds = self.geo.desc_size as usize;
        let off = g as usize * ds;
        GroupDesc::over(self.gdt.get(off..off + ds).unwrap_or(&[]))
    }

    /// Notes a read that failed where the check goes on.
    pub(crate) fn note_read_error(&self, e: &io::Error) {
        if let Ok(mut v) = self.read_errors.lock() {
            let m = e.to_string();
            if v.len() < 64 && !v.contains(&m) {
                v.push(m);
            }
        }
    }

    /// Starts reading `blocks` ahead of the reads that will want them (a
    /// hint): sorted, each block once, a run of adjacent blocks as one
    /// request.
    pub(crate) fn prefetch_blocks(&self, blocks: &mut [u64]) {
        blocks.sort_unstable();
        let bs = u64::from(self.geo.block_size);
        let mut i = 0;
        while i < blocks.len() {
            let start = blocks[i];
            let mut end = start.saturating_add(1);
            i += 1;
            while i < blocks.len() && blocks[i] <= end {
                end = end.max(blocks[i].saturating_add(1));
                i += 1;
            }
            self.dev
                .prefetch(start.saturating_mul(bs), (end - start).saturating_mul(bs));
        }
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> usize {
        self.geo.block_size as usize
    }

    /// Whether group descriptors carry checksums (gdt_csum or metadata_csum).
    pub fn has_gdt_csum(&self) -> bool {
        self.geo.has_gdt_csum()
    }

    /// Whether metadata_csum is on.
    pub fn metadata_csum(&self) -> bool {
        self.geo.metadata_csum()
    }

    /// Whether a group's descriptor checksum matches.
    pub(crate) fn gd_csum_ok(&self, g: u32) -> bool {
        if !self.has_gdt_csum() {
            return true;
        }
        let gd = self.gd(g);
        gd.bg_checksum()
            == gd.computed_checksum(
                g,
                self.metadata_csum(),
                self.geo.csum_seed,
                &self.sb().s_uuid(),
            )
    }

    /// The number of inodes the inode scan visits in group `g`: all of
    /// them, less `bg_itable_unused` when descriptors are checksummed, and
    /// none for an INODE_UNINIT group.
    pub fn inodes_to_scan(&self, g: u32) -> u32 {
        let ipg = self.geo.inodes_per_group;
        if !self.has_gdt_csum() {
            return ipg;
        }
        let gd = self.gd(g);
        if gd.has_flag(ext4_layout::group_desc::BG_INODE_UNINIT) {
            return 0;
        }
        ipg.saturating_sub(gd.itable_unused())
    }

    /// Reads whole blocks starting at `blk` into `buf` (a multiple of the block size).
    /// A failed read names the first block that cannot be read.
    pub fn read_blocks(&self, blk: u64, buf: &mut [u8]) -> io::Result<()> {
        read_locating(blk, u64::from(self.geo.block_size), buf, |b, off| {
            self.dev.read_at(b, off)
        })
    }

    /// Groups in order.
    pub fn groups(&self) -> impl Iterator<Item = Group> {
        (0..self.geo.group_count).map(Group)
    }
}
