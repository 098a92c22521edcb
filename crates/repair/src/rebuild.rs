//! Pass 5's repair: every group's bitmaps, free counts, directory count,
//! flags and unused-inode mark, and the superblock's totals, rewritten
//! from what the passes found in use.

use std::io;

use ext4_layout::bytes::{le_u16, put_le_u16};
use ext4_layout::edit;
use ext4_layout::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4_layout::inode::FileType;

use super::stage::{Kind, Staging};
use check_core::ctx::Maps;
use check_core::io::Io;

/// Marks what this round allocated (blocks, and inodes with whether they
/// are directories) in use in the check's maps, then rewrites the group
/// summaries from them.
pub fn rebuild_with_allocations<'f>(
    st: &'f check_core::engine::CheckState,
    stage: &mut Staging<'f>,
    io: &mut Io<'f>,
) -> io::Result<()> {
    let bits = st.fs.geo.cluster_bits;
    let (blocks, inodes) = stage.allocated();
    for b in blocks {
        st.maps.block_found.test_and_set(b >> bits);
    }
    for ino in inodes {
        let dir = stage
            .inode_copy(io, ino)
            .is_ok_and(|r| FileType::from_mode(le_u16(&r, 0)) == Some(FileType::Directory));
        st.maps.inode_used.test_and_set(u64::from(ino - 1));
        if dir {
            st.maps.inode_dir.test_and_set(u64::from(ino - 1));
        }
    }
    rebuild_group_summaries(stage, io, &st.maps)
}

/// Rewrites the bitmaps and counts of every group and the superblock.
pub fn rebuild_group_summaries(
    st: &mut Staging<'_>,
    io: &mut Io<'_>,
    maps: &Maps,
) -> io::Result<()> {
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
    for g in 0..geo.group_count {
        // Blocks: one bit per cluster, bits past the end of the file
        // system and bytes past the bitmap set.
        let mut bmap = vec![0xFFu8; bs];
        let base = first_cluster + u64::from(g) * cpg;
        let mut free = 0u64;
        for i in 0..cpg {
            let c = base + i;
            let used = c > last_cluster || maps.block_found.get(c);
            if !used {
                free += 1;
                bmap[(i / 8) as usize] &= !(1 << (i % 8));
            }
        }
        total_free_clusters += free;
        // Inodes.
        let mut imap = vec![0xFFu8; bs];
        let ibase = u64::from(g) * ipg;
        let mut ifree = 0u64;
        let mut dirs = 0u64;
        let mut last_used = None;
        for i in 0..ipg {
            let idx = ibase + i;
            if maps.inode_used.get(idx) {
                last_used = Some(i);
                if maps.inode_dir.get(idx) {
                    dirs += 1;
                }
            } else {
                ifree += 1;
                imap[(i / 8) as usize] &= !(1 << (i % 8));
            }
        }
        total_free_inodes += ifree;
        let (bb, ib) = {
            let d = ext4_layout::group_desc::GroupDesc::over(st.gd(g));
            (d.block_bitmap(), d.inode_bitmap())
        };
        let nb = (cpg as usize).div_ceil(8).min(bs);
        let ni = (ipg as usize).div_ceil(8).min(bs);
        if bb != 0 && bb < geo.blocks_count {
            st.fresh_block(bb, Kind::Plain).copy_from_slice(&bmap);
        }
        if ib != 0 && ib < geo.blocks_count {
            st.fresh_block(ib, Kind::Plain).copy_from_slice(&imap);
        }
        let large = geo.desc_size >= 64;
        let d = st.gd_mut(g);
        let mut flags = u16::from_le_bytes([d[0x12], d[0x13]]) & !BG_BLOCK_UNINIT;
        put_counts(d, free as u32, ifree as u32, dirs as u32, large);
        if gdt_csum {
            // As the library does when it writes descriptors: a group
            // with no inode in use is uninitialised, otherwise the unused
            // tail of its inode table is marked.
            if ifree == ipg {
                flags |= BG_INODE_UNINIT;
                put_split(d, 0x1C, 0x32, ipg as u32, large);
            } else {
                flags &= !BG_INODE_UNINIT;
                let used_to = last_used.map_or(ipg, |l| l + 1);
                put_split(d, 0x1C, 0x32, (ipg - used_to) as u32, large);
            }
            // (The library compares a cluster count with blocks per group.)
            if free == u64::from(geo.blocks_per_group) && g + 1 != geo.group_count {
                flags |= BG_BLOCK_UNINIT;
            }
        } else {
            flags &= !BG_INODE_UNINIT;
        }
        put_le_u16(d, 0x12, flags);
        if csum {
            edit::set_bitmap_checksum(d, false, seed, &bmap[..nb]);
            edit::set_bitmap_checksum(d, true, seed, &imap[..ni]);
        }
    }
    let free_blocks = total_free_clusters << bits;
    let sb = st.sb_mut();
    ext4_layout::bytes::put_le_u32(sb, 0x0C, free_blocks as u32);
    ext4_layout::bytes::put_le_u32(sb, 0x158, (free_blocks >> 32) as u32);
    ext4_layout::bytes::put_le_u32(sb, 0x10, total_free_inodes as u32);
    let _ = io;
    Ok(())
}

/// Reads a value split into low and high 16-bit halves (the high half
/// only in 64-byte descriptors).
pub fn get_split(d: &[u8], lo: usize, hi: usize, large: bool) -> u32 {
    u32::from(le_u16(d, lo))
        | if large {
            u32::from(le_u16(d, hi)) << 16
        } else {
            0
        }
}

/// Stores a value split into low and high 16-bit halves.
pub fn put_split(d: &mut [u8], lo: usize, hi: usize, v: u32, large: bool) {
    put_le_u16(d, lo, v as u16);
    if large {
        put_le_u16(d, hi, (v >> 16) as u16);
    }
}

fn put_counts(d: &mut [u8], free_blocks: u32, free_inodes: u32, dirs: u32, large: bool) {
    put_split(d, 0x0C, 0x2C, free_blocks, large);
    put_split(d, 0x0E, 0x2E, free_inodes, large);
    put_split(d, 0x10, 0x30, dirs, large);
}
