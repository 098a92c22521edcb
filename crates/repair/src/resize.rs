//! The resize inode (inode 7), made again when the check finds it
//! invalid, as e2fsck recreates it.
//!
//! Its layout: one double indirect block (the only block its map names
//! directly) whose slots point at the primary reserved descriptor blocks;
//! each of those, read as an indirect block, lists the same reserved block
//! in every group that holds a backup of the descriptors, in group order.
//! The file's size is what a double indirect map can address, so that the
//! kernel's online resize finds every reserved block where it expects it.

use ext4_layout::types::{Ino, PhysBlock};
use std::io;

use ext4_layout::blockmap::put_pointer;
use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::field;

use check_core::engine::CheckState;

use crate::raw::{now, set_i_blocks, set_size};
use crate::stage::{Kind, Staging};

/// The resize inode's number.
/// `i_block` slot of the double indirect block.
const DIND_SLOT: usize = 13;

/// Rewrites inode 7 as a fresh resize inode over the reserved descriptor
/// blocks. The old double indirect block is given back first when nothing
/// claims it, so that the new one usually lands where it was. Blocks the
/// old inode mapped otherwise are left to the next check's pass 5.
pub(crate) fn recreate<'f>(st: &'f CheckState, stage: &mut Staging<'f>) -> io::Result<()> {
    let fs = &st.fs;
    let geo = &fs.geo;
    if geo.incompat.contains(IncompatFeatures::META_BG) {
        return Err(io::Error::other(
            "meta_bg file systems have no resize inode",
        ));
    }
    let bs = fs.block_size();
    let per = (bs / 4) as u64;
    let reserved = u64::from(fs.sb().s_reserved_gdt_blocks());
    // With 1 KiB blocks the superblock is block 1, also under bigalloc
    // (whose first data block is 0).
    let sb_blk = if bs == 1024 && geo.first_data_block == 0 {
        1
    } else {
        geo.first_data_block
    };
    let first_reserved = sb_blk + 1 + u64::from(geo.desc_blocks);
    // With none reserved, the inode is its double indirect block alone.
    if reserved > 0 && !geo.block_in_range(first_reserved + reserved - 1) {
        return Err(io::Error::other("no reserved descriptor blocks"));
    }
    let old = stage.inode_copy(Ino::RESIZE)?;
    let old_dind =
        u64::from(ext4_layout::inode::Inode::new(&old).map_or(0, |i| i.i_block_word(DIND_SLOT)));
    // The old double indirect block, when nothing claims it (the check
    // found no owner), is free to take again. One that something claims
    // (inode 7's old map, or another file's) stays; the next check's
    // pass 5 frees it if only the old map held it.
    if old_dind != 0
        && geo.block_in_range(old_dind)
        && !st.maps.metadata.get(old_dind)
        && !st.maps.block_found.get(old_dind >> geo.cluster_bits)
    {
        stage.free_block(PhysBlock(old_dind));
    }
    let goal =
        sb_blk + u64::from(geo.desc_blocks) + reserved + 2 + u64::from(geo.inode_blocks_per_group);
    let dind = stage
        .alloc_block(PhysBlock(goal))
        .ok_or_else(|| io::Error::other("no free block for the double indirect block"))?;
    let dind32 = u32::try_from(dind.0)
        .map_err(|_| io::Error::other("a block past 2^32 for the resize inode"))?;
    let backups: Vec<u64> = geo.backup_groups().map(|g| u64::from(g.0)).collect();
    // Blocks the inode counts: the double indirect block, each primary
    // reserved block, and each backup it lists.
    let mut blocks = 1u64;
    let mut slots = vec![0u8; bs];
    for i in 0..reserved {
        let primary = first_reserved + i;
        let slot = ((u64::from(geo.desc_blocks) + i) % per) as usize;
        put_pointer(&mut slots, slot, primary as u32);
        blocks += 1;
        let b = stage.fresh_block(PhysBlock(primary), Kind::Plain);
        b.fill(0);
        for (k, &g) in backups.iter().take(per as usize).enumerate() {
            put_pointer(b, k, (primary + g * u64::from(geo.blocks_per_group)) as u32);
            blocks += 1;
        }
    }
    stage.fresh_block(dind, Kind::Plain).copy_from_slice(&slots);
    let isz = geo.inode_size as usize;
    let t = now();
    let r = stage.inode(Ino::RESIZE)?;
    r.fill(0);
    field::i_mode.set(r, 0o100_600);
    field::i_links_count.set(r, 1);
    put_pointer(&mut r[ext4_layout::inode::I_BLOCK], DIND_SLOT, dind32);
    set_size(r, (per * per + per + 12) * bs as u64);
    set_i_blocks(r, blocks * (bs as u64 / 512));
    for time in ext4_layout::inode::TIMES {
        time.set(r, t);
    }
    if isz > 128 {
        field::i_extra_isize_raw.set(r, 32.min((isz - 128) as u16));
        if isz >= 128 + 32 {
            ext4_layout::inode::extra::I_CRTIME.set(r, t);
        }
    }
    Ok(())
}
