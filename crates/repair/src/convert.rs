//! `-E bmap2extent`: block-mapped files, directories and symbolic links
//! whose target lives in a block get extent trees, as e2fsck's pass 1E
//! converts them, and the file system gets the extent feature.

use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::{flags, Inode};
use ext4_layout::types::{Ino, PhysBlock};

use super::raw::{sbf, set_feature};
use super::stage::Staging;
use check_core::engine::CheckState;
use check_core::walk::LeafExtent;

/// Whether inode `ino` is one e2fsck converts: the root or a user inode
/// in use, block-mapped, with blocks of its own (a fast symbolic link,
/// inline data and the reserved inodes are left alone).
fn convertible(st: &CheckState, ino: u32, inode: &Inode<'_>) -> bool {
    (ino == 2 || ino >= st.fs.geo.first_ino)
        && inode.i_links_count() > 0
        && !inode.has_flag(flags::EXTENTS)
        && !inode.has_flag(flags::INLINE_DATA)
        && (inode.is_reg() || inode.is_dir() || inode.is_symlink())
        && check_core::walk::inode_has_valid_blocks(&st.fs, inode)
}

/// Runs of consecutive blocks, as leaf extents.
fn runs(blocks: &[(u64, PhysBlock)]) -> Vec<LeafExtent> {
    let mut out: Vec<LeafExtent> = Vec::new();
    for &(l, p) in blocks {
        match out.last_mut() {
            Some(r) if r.lblk + r.len == l && r.pblk + r.len == p.0 => r.len += 1,
            _ => out.push(LeafExtent {
                lblk: l,
                pblk: p.0,
                len: 1,
                uninit: false,
            }),
        }
    }
    out
}

/// Stages the conversion of every convertible inode; their indirect
/// blocks are freed in the check's maps (the caller rebuilds the group
/// summaries). Returns how many inodes were converted.
pub(super) fn to_extents<'f>(st: &'f CheckState, stage: &mut Staging<'f>) -> usize {
    let fs = &st.fs;
    let bits = fs.geo.cluster_bits;
    if !fs.geo.incompat.contains(IncompatFeatures::EXTENTS) {
        set_feature(stage, sbf::INCOMPAT, IncompatFeatures::EXTENTS.0);
    }
    let mut n = 0;
    for idx in 0..u64::from(fs.geo.inodes_count) {
        let Some(ino) = Ino::new(idx as u32 + 1) else {
            continue;
        };
        if !stage.inode_used(ino) {
            continue;
        }
        let Ok(raw) = stage.inode_copy(ino) else {
            continue;
        };
        let Some(inode) = Inode::new(&raw) else {
            continue;
        };
        if !convertible(st, ino.get(), &inode) {
            continue;
        }
        let (Ok(blocks), Ok(tree)) = (
            super::map::blocks_of(stage, ino),
            super::map::tree_blocks_of(stage, ino),
        ) else {
            continue;
        };
        if super::tree::write_extent_tree(stage, ino, &runs(&blocks)).is_err() {
            continue;
        }
        for b in tree {
            if !stage.shared(b.0 >> bits) {
                stage.mark_block(b, false);
            }
        }
        let _ = super::map::recount_i_blocks(stage, ino);
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_blocks_make_one_extent() {
        let r = runs(
            &[(0, 100), (1, 101), (2, 102), (3, 200), (5, 202)].map(|(l, p)| (l, PhysBlock(p))),
        );
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].lblk, r[0].pblk, r[0].len), (0, 100, 3));
        assert_eq!((r[1].lblk, r[1].pblk, r[1].len), (3, 200, 1));
        assert_eq!((r[2].lblk, r[2].pblk, r[2].len), (5, 202, 1));
    }
}
