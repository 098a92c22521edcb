//! Writing a file's extent tree anew from its leaf extents.

use ext4_layout::types::{Ino, PhysBlock};
use std::io;

use check_core::walk::LeafExtent;
use ext4_layout::extent::{self, EXT_INIT_MAX_LEN, EXT_UNINIT_MAX_LEN};
use ext4_layout::inode::{field, flags, I_BLOCK};

use crate::stage::{Kind, Staging};

/// The longest initialised extent.
pub(crate) const MAX_INIT_LEN: u64 = EXT_INIT_MAX_LEN as u64;
/// The longest uninitialised extent.
pub(crate) const MAX_UNINIT_LEN: u64 = EXT_UNINIT_MAX_LEN as u64;

/// Writes an extent tree holding `leaves` for inode `ino`: in the inode
/// when four extents or fewer, else in newly allocated blocks. The old
/// tree blocks are no longer referenced (pass 5 frees them).
pub fn write_extent_tree(
    stage: &mut Staging<'_>,
    ino: Ino,
    leaves: &[LeafExtent],
) -> io::Result<()> {
    let mut ext: Vec<LeafExtent> = Vec::with_capacity(leaves.len());
    for &l in leaves {
        let max = if l.uninit {
            MAX_UNINIT_LEN
        } else {
            MAX_INIT_LEN
        };
        let mut done = 0;
        while done < l.len {
            let n = (l.len - done).min(max);
            ext.push(LeafExtent {
                lblk: l.lblk + done,
                pblk: l.pblk + done,
                len: n,
                uninit: l.uninit,
            });
            done += n;
        }
    }
    ext.sort_by_key(|e| e.lblk);
    let bs = stage.fs().block_size();
    let per = extent::entries_per_block(bs);
    let goal = PhysBlock(ext.first().map_or(0, |e| e.pblk));
    // Level 0 holds the extents; each level above holds index entries
    // (first logical block, child block) until four fit in the inode.
    let mut level: Vec<(u64, [u8; 12])> = ext
        .iter()
        .map(|e| {
            let b = extent::encode_extent(e.lblk as u32, e.len as u16, e.uninit, e.pblk);
            (e.lblk, b)
        })
        .collect();
    let mut depth = 0u16;
    // (The shape `extent::packed_tree_blocks` counts.)
    while level.len() as u64 > extent::ROOT_ENTRIES {
        let mut up = Vec::new();
        for chunk in level.chunks(per) {
            let blk = stage
                .alloc_block(goal)
                .ok_or_else(|| io::Error::other("no free block for an extent tree"))?;
            let b = stage.fresh_block(blk, Kind::Extent(ino));
            extent::put_header(b, chunk.len() as u16, per as u16, depth);
            for (k, (_, e)) in chunk.iter().enumerate() {
                extent::put_entry(b, k, e);
            }
            up.push((chunk[0].0, extent::encode_index(chunk[0].0 as u32, blk.0)));
        }
        level = up;
        depth += 1;
    }
    let r = stage.inode(ino)?;
    let root = &mut r[I_BLOCK];
    root.fill(0);
    extent::put_header(root, level.len() as u16, 4, depth);
    for (k, (_, e)) in level.iter().enumerate() {
        extent::put_entry(root, k, e);
    }
    let fl = field::i_flags.get(r) | flags::EXTENTS;
    field::i_flags.set(r, fl);
    Ok(())
}
