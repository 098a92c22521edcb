//! Pass 5's repair: every group's bitmaps, free counts, directory count,
//! flags and unused-inode mark, and the superblock's totals, rewritten
//! from what the passes found in use.

use ext4_layout::group_desc as gd;
use std::io;

use ext4_layout::edit;
use ext4_layout::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4_layout::inode::FileType;

use super::stage::{Kind, Staging};
use check_core::ctx::Maps;

/// Records what this round allocated (blocks, and inodes with whether
/// they are directories) and released in the round's record of what is in
/// use, then rewrites the group summaries from the check's maps with the
/// round's changes over them.
pub fn rebuild_with_allocations<'f>(
    st: &'f check_core::engine::CheckState,
    stage: &mut Staging<'f>,
) -> io::Result<()> {
    let (blocks, inodes) = stage.allocated();
    for b in blocks {
        stage.mark_block(b, true);
    }
    for b in stage.released() {
        stage.mark_block(b, false);
    }
    for ino in inodes {
        let dir = stage.inode_copy(ino).is_ok_and(|r| {
            FileType::from_mode(ext4_layout::inode::field::i_mode.get(&r))
                == Some(FileType::Directory)
        });
        stage.mark_inode(ino, true, dir);
    }
    rebuild_group_summaries(stage, &st.maps)
}

/// Rewrites the bitmaps and counts of every group and the superblock.
pub fn rebuild_group_summaries(st: &mut Staging<'_>, maps: &Maps) -> io::Result<()> {
    let fs = st.fs();
    let geo = &fs.geo;
    let bs = fs.block_size();
    let bits = geo.cluster_bits;
    let cpg = u64::from(geo.clusters_per_group);
    let ipg = u64::from(geo.inodes_per_group);
    let first_cluster = geo.first_data_block >> bits;
    let last_cluster = (geo.blocks_count - 1) >> bits;
    let csum = fs.metadata_csum();
    let gdt_csum = fs.has_gdt_csum();
    let seed = geo.csum_seed;
    let mut total_free_clusters = 0u64;
    let mut total_free_inodes = 0u64;
    let mut cur = vec![0u8; bs];
    for g in 0..geo.group_count {
        // Blocks: one bit per cluster, bits past the end of the file
        // system and bytes past the bitmap set.
        let mut bmap = vec![0xFFu8; bs];
        let base = first_cluster + u64::from(g) * cpg;
        let mut free = 0u64;
        let mut changed = st.cluster_changes(base..base + cpg).into_iter().peekable();
        for i in 0..cpg {
            let c = base + i;
            let mut used = maps.block_found.get(c);
            if let Some((_, u)) = changed.next_if(|&(x, _)| x == c) {
                used = u;
            }
            if !(used || c > last_cluster) {
                free += 1;
                // The library writes whole bytes of a bitmap and sets the
                // rest of the block: a last partial byte stays set.
                if i < cpg / 8 * 8 {
                    bmap[(i / 8) as usize] &= !(1 << (i % 8));
                }
            }
        }
        total_free_clusters += free;
        // Inodes.
        let mut imap = vec![0xFFu8; bs];
        let ibase = u64::from(g) * ipg;
        let mut ifree = 0u64;
        let mut dirs = 0u64;
        let mut last_used = None;
        let first_ino = ibase as u32 + 1;
        let mut changed = st
            .inode_changes(first_ino..first_ino + ipg as u32)
            .into_iter()
            .peekable();
        for i in 0..ipg {
            let idx = ibase + i;
            let (mut used, mut dir) = (maps.inode_used.get(idx), maps.inode_dir.get(idx));
            if let Some((_, u, d)) = changed.next_if(|&(x, _, _)| u64::from(x) == idx + 1) {
                (used, dir) = (u, d);
            }
            if used {
                last_used = Some(i);
                if dir {
                    dirs += 1;
                }
            } else {
                ifree += 1;
                if i < ipg / 8 * 8 {
                    imap[(i / 8) as usize] &= !(1 << (i % 8));
                }
            }
        }
        total_free_inodes += ifree;
        let (bb, ib) = {
            let d = ext4_layout::group_desc::GroupDesc::over(st.gd(g));
            (d.block_bitmap(), d.inode_bitmap())
        };
        // The checksums cover the whole bytes, as the library's.
        let nb = (cpg as usize / 8).min(bs);
        let ni = (ipg as usize / 8).min(bs);
        // A bitmap that already says this is left as it is.
        for (blk, want) in [(bb, &bmap), (ib, &imap)] {
            if blk != 0 && blk < geo.blocks_count {
                let blk = ext4_layout::types::PhysBlock(blk);
                let same = st.read(blk, &mut cur).is_ok() && cur == *want;
                if !same {
                    st.fresh_block(blk, Kind::Plain).copy_from_slice(want);
                }
            }
        }
        let d = st.gd_mut(g);
        let mut flags = gd::field::bg_flags.get(d) & !BG_BLOCK_UNINIT;
        put_counts(d, free, ifree, dirs);
        if gdt_csum {
            // As the library does when it writes descriptors: a group
            // with no inode in use is uninitialised, otherwise the unused
            // tail of its inode table is marked.
            if ifree == ipg {
                flags |= BG_INODE_UNINIT;
                gd::ITABLE_UNUSED.set(d, ipg);
            } else {
                flags &= !BG_INODE_UNINIT;
                let used_to = last_used.map_or(ipg, |l| l + 1);
                gd::ITABLE_UNUSED.set(d, ipg - used_to);
            }
            // (The library compares a cluster count with blocks per group.)
            if free == u64::from(geo.blocks_per_group) && g + 1 != geo.group_count {
                flags |= BG_BLOCK_UNINIT;
            }
        } else {
            flags &= !BG_INODE_UNINIT;
        }
        gd::field::bg_flags.set(d, flags);
        if csum {
            edit::set_bitmap_checksum(d, false, seed, &bmap[..nb]);
            edit::set_bitmap_checksum(d, true, seed, &imap[..ni]);
        }
    }
    let free_blocks = total_free_clusters << bits;
    let sb = st.sb_mut();
    ext4_layout::superblock::FREE_BLOCKS_COUNT.set(sb, free_blocks);
    ext4_layout::superblock::field::s_free_inodes_count.set(sb, total_free_inodes as u32);
    Ok(())
}

fn put_counts(d: &mut [u8], free_blocks: u64, free_inodes: u64, dirs: u64) {
    gd::FREE_BLOCKS.set(d, free_blocks);
    gd::FREE_INODES.set(d, free_inodes);
    gd::USED_DIRS.set(d, dirs);
}
