//! Claiming the fixed metadata of every group before any inode is read.

use crate::ctx::Maps;
use crate::fs::{for_each_super_and_bgd, Fs};
use crate::problem::{Code, Finding};

/// Marks superblock copies, descriptor blocks, inode tables and bitmaps in
/// the found and metadata maps, reporting any that lie on top of metadata
/// claimed before them (in group order, as e2fsck does).
pub fn mark_table_blocks(fs: &Fs, maps: &mut Maps) -> Vec<Finding> {
    let geo = &fs.geo;
    let bits = geo.cluster_bits;
    let mut out = Vec::new();
    // Conflicts are judged per block, before the map becomes per cluster.
    let mut found = crate::fs::BitSet::new(geo.blocks_count);
    for g in fs.groups() {
        for_each_super_and_bgd(geo, g, |b, n| {
            for x in b..b + n {
                found.test_and_set(x);
                maps.metadata.test_and_set(x);
            }
        });
        let gd = fs.gd(g.0);
        let it = gd.inode_table();
        if it != 0 {
            for b in it..it.saturating_add(u64::from(geo.inode_blocks_per_group)) {
                if b >= geo.blocks_count {
                    break;
                }
                if found.test_and_set(b) {
                    out.push(Finding::new(Code::InodeTableConflict).group(g.0).blk(b));
                } else {
                    maps.metadata.test_and_set(b);
                }
            }
        }
        for (loc, code) in [
            (gd.block_bitmap(), Code::BlockBitmapConflict),
            (gd.inode_bitmap(), Code::InodeBitmapConflict),
        ] {
            if loc == 0 || loc >= geo.blocks_count {
                continue;
            }
            if found.test_and_set(loc) {
                out.push(Finding::new(code).group(g.0).blk(loc));
            } else {
                maps.metadata.test_and_set(loc);
            }
        }
    }
    let mut b = 0u64;
    while b < geo.blocks_count {
        if found.get(b) {
            maps.block_found.test_and_set(b >> bits);
        }
        b += 1;
    }
    let sb = fs.sb();
    if geo
        .incompat
        .contains(ext4_layout::features::IncompatFeatures::MMP)
    {
        let m = sb.s_mmp_block();
        if m > geo.first_data_block && m < geo.blocks_count {
            maps.block_found.test_and_set(m >> bits);
        }
    }
    out
}
