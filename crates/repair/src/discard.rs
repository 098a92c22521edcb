//! `-E discard`: once a check finds the file system clean and nothing was
//! changed, its free blocks are discarded (each group's runs of free
//! clusters), and on an image file, where a punched hole reads back as
//! zeros, the inode-table blocks that hold only unused inodes too, their
//! groups then marked as having zeroed tables, as e2fsck's pass 5 does.

use ext4_layout::group_desc as gd;

use super::stage::Staging;
use check_core::engine::CheckState;

/// `bg_flags`: the group's inode table is zeroed.
use ext4_layout::group_desc::BG_INODE_ZEROED;

/// The byte ranges to discard, and the groups whose inode tables then
/// read as zeros past their last inode in use.
pub(super) fn ranges(st: &CheckState, tables: bool) -> (Vec<(u64, u64)>, Vec<u32>) {
    let fs = &st.fs;
    let geo = &fs.geo;
    let bs = u64::from(geo.block_size);
    let bits = geo.cluster_bits;
    let ratio = u64::from(geo.cluster_ratio);
    let mut out = Vec::new();
    let mut zeroed = Vec::new();
    for g in 0..geo.group_count {
        let first = geo.group_first_block(ext4_layout::Group(g)).0 >> bits;
        let last = geo.group_last_block(ext4_layout::Group(g)).0 >> bits;
        let mut c = first;
        while c <= last {
            if st.maps.block_found.get(c) {
                c += 1;
                continue;
            }
            let start = c;
            while c <= last && !st.maps.block_found.get(c) {
                c += 1;
            }
            out.push((start * ratio * bs, (c - start) * ratio * bs));
        }
        if !tables || !fs.has_gdt_csum() {
            continue;
        }
        let table = fs.gd(g).inode_table();
        let ipg = u64::from(geo.inodes_per_group);
        let isz = u64::from(geo.inode_size);
        let base = u64::from(g) * ipg;
        let used_to = (0..ipg)
            .rev()
            .find(|&i| st.maps.inode_used.get(base + i))
            .map_or(0, |i| i + 1);
        let keep = (used_to * isz).div_ceil(bs);
        let total = (ipg * isz).div_ceil(bs);
        if table != 0 && keep < total {
            out.push(((table + keep) * bs, (total - keep) * bs));
        }
        zeroed.push(g);
    }
    (out, zeroed)
}

/// Marks groups as having zeroed inode tables.
pub(super) fn mark_zeroed(stage: &mut Staging<'_>, groups: &[u32]) {
    for &g in groups {
        let d = stage.gd_mut(g);
        let fl = gd::field::bg_flags.get(d);
        if fl & BG_INODE_ZEROED == 0 {
            gd::field::bg_flags.set(d, fl | BG_INODE_ZEROED);
        }
    }
}
