//! Allocation statistics kept in step with single changes: the bitmaps,
//! group counts and superblock counts after clusters or an inode are freed
//! or taken (orphan release, fast-commit replay).

use check_core::fs::Fs;
use ext4_layout::group_desc as gd;
use ext4_layout::superblock as sbl;
use ext4_layout::types::PhysBlock;

use crate::stage::{Kind, Staging};

/// Brings the bitmaps and free counts up to date with clusters freed and
/// taken, and an inode freed or taken (`(ino, is_dir, freed)`), as
/// e2fsck's allocation statistics do when it releases an orphan or
/// replays a fast commit. Groups whose bitmaps are
/// not initialised are left alone (nothing of theirs was in use).
pub(crate) fn account<'f>(
    fs: &'f Fs,
    st: &mut Staging<'f>,
    freed: &[u64],
    taken: &[u64],
    inode: Option<(u32, bool, bool)>,
) {
    let geo = &fs.geo;
    let bs = fs.block_size();
    let seed = geo.csum_seed;
    let csum = fs.metadata_csum();
    let cpg = u64::from(geo.clusters_per_group);
    let first = geo.first_data_block >> geo.cluster_bits;
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let mut sb_blocks_delta: i64 = 0;
    for (&c, free) in freed
        .iter()
        .map(|c| (c, true))
        .chain(taken.iter().map(|c| (c, false)))
        .collect::<Vec<_>>()
        .iter()
    {
        let Some(rel) = c.checked_sub(first) else {
            continue;
        };
        let g = (rel / cpg) as u32;
        let bit = (rel % cpg) as usize;
        if g >= geo.group_count {
            continue;
        }
        let (bb, flags) = {
            let d = st.gd(g);
            (
                ext4_layout::group_desc::GroupDesc::over(d).block_bitmap(),
                gd::field::bg_flags.get(d),
            )
        };
        if flags & ext4_layout::group_desc::BG_BLOCK_UNINIT != 0 || bb == 0 {
            continue;
        }
        let Ok(b) = st.block(PhysBlock(bb), Kind::Plain) else {
            continue;
        };
        let was = b[bit / 8] & (1 << (bit % 8)) != 0;
        if *free == was {
            if *free {
                b[bit / 8] &= !(1 << (bit % 8));
            } else {
                b[bit / 8] |= 1 << (bit % 8);
            }
            let bmap = b[..(cpg as usize).div_ceil(8).min(bs)].to_vec();
            let d = st.gd_mut(g);
            let n = gd::FREE_BLOCKS.get(d);
            gd::FREE_BLOCKS.set(d, if *free { n + 1 } else { n.saturating_sub(1) });
            if csum {
                ext4_layout::edit::set_bitmap_checksum(d, false, seed, &bmap);
            }
            sb_blocks_delta += if *free { ratio as i64 } else { -(ratio as i64) };
        }
    }
    if sb_blocks_delta != 0 {
        let sb = st.sb_mut();
        let cur = sbl::FREE_BLOCKS_COUNT.get(sb);
        let v = (cur as i64 + sb_blocks_delta).max(0) as u64;
        sbl::FREE_BLOCKS_COUNT.set(sb, v);
    }
    if let Some((ino, dir, free)) = inode {
        let ipg = geo.inodes_per_group;
        let g = (ino - 1) / ipg;
        let bit = ((ino - 1) % ipg) as usize;
        let (ib, flags) = {
            let d = st.gd(g);
            (
                ext4_layout::group_desc::GroupDesc::over(d).inode_bitmap(),
                gd::field::bg_flags.get(d),
            )
        };
        if flags & ext4_layout::group_desc::BG_INODE_UNINIT == 0 && ib != 0 {
            if let Ok(b) = st.block(PhysBlock(ib), Kind::Plain) {
                let was = b[bit / 8] & (1 << (bit % 8)) != 0;
                if was == free {
                    if free {
                        b[bit / 8] &= !(1 << (bit % 8));
                    } else {
                        b[bit / 8] |= 1 << (bit % 8);
                    }
                    let imap = b[..(ipg as usize).div_ceil(8).min(bs)].to_vec();
                    let d = st.gd_mut(g);
                    let n = gd::FREE_INODES.get(d);
                    gd::FREE_INODES.set(d, if free { n + 1 } else { n.saturating_sub(1) });
                    if dir {
                        let nd = gd::USED_DIRS.get(d);
                        gd::USED_DIRS.set(d, if free { nd.saturating_sub(1) } else { nd + 1 });
                    }
                    if csum {
                        ext4_layout::edit::set_bitmap_checksum(d, true, seed, &imap);
                    }
                    let sb = st.sb_mut();
                    let f = sbl::field::s_free_inodes_count.get(sb);
                    sbl::field::s_free_inodes_count
                        .set(sb, if free { f + 1 } else { f.saturating_sub(1) });
                }
            }
        }
    }
}

/// Whether cluster `c` is marked in use in its group's block bitmap as
/// this round leaves it. A group whose bitmap is not initialised has
/// nothing in use but its own metadata, which no orphan holds.
pub(crate) fn block_in_use<'f>(fs: &'f Fs, st: &mut Staging<'f>, c: u64) -> bool {
    let geo = &fs.geo;
    let first = geo.first_data_block >> geo.cluster_bits;
    let cpg = u64::from(geo.clusters_per_group);
    let Some(rel) = c.checked_sub(first) else {
        return false;
    };
    let Ok(g) = u32::try_from(rel / cpg) else {
        return false;
    };
    if g >= geo.group_count {
        return false;
    }
    let bit = (rel % cpg) as usize;
    let (bb, flags) = {
        let d = st.gd(g);
        (
            ext4_layout::group_desc::GroupDesc::over(d).block_bitmap(),
            gd::field::bg_flags.get(d),
        )
    };
    if flags & ext4_layout::group_desc::BG_BLOCK_UNINIT != 0 || bb == 0 {
        return false;
    }
    st.block(PhysBlock(bb), Kind::Plain)
        .is_ok_and(|b| b.get(bit / 8).is_some_and(|&x| x & (1 << (bit % 8)) != 0))
}
