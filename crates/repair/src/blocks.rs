//! Changing which blocks an inode maps: dropping bad pointers and bad
//! extents, rebuilding extent trees, and cloning blocks claimed more than
//! once (e2fsck's passes 1B to 1D).

use ext4_layout::types::{Ino, PhysBlock};
use std::collections::{BTreeMap, BTreeSet};
use std::io;

use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::{flags, Inode, I_BLOCK};
use ext4_layout::walk::{self, BlockMapEditor};

use super::map::staged_editor;
use super::stage::{Kind, Staging};
use super::tree::{write_extent_tree, MAX_UNINIT_LEN};
use check_core::engine::CheckState;
use check_core::problem::{Code, Finding};
use check_core::walk::{collect_extents, collect_tree, LeafExtent, Pass1};

/// What to do with one block pointer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decision {
    Keep,
    Zero,
    /// Copy the block to a new one and point there.
    Clone,
}

fn invalid() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "unreadable inode")
}

/// Writes inode `ino`'s extent tree again, packed: the same extents,
/// joined where they meet, in as few tree blocks as they fit (e2fsck's
/// pass 1E). The old tree blocks are released and `i_blocks` counted
/// anew.
pub fn pack_extent_tree<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    ino: Ino,
) -> io::Result<()> {
    let fs = &st.fs;
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(invalid)?;
    if !inode.has_flag(flags::EXTENTS) {
        return Err(invalid());
    }
    let p1 = Pass1::new(fs, &st.maps, &st.bad_blocks);
    let (leaves, ok) = collect_extents(&p1, &mut stage.io, ino.get(), &raw);
    if !ok {
        return Err(io::Error::other("the extent tree cannot be walked"));
    }
    let old_nodes = super::map::tree_blocks_of(stage, ino)?;
    write_extent_tree(stage, ino, &merge_runs(leaves))?;
    // With bigalloc a node's cluster is freed once nothing of the file is
    // left in it (e2fsck frees it as part of the rebuild: no bitmap
    // difference follows); without, each old node is given back.
    let bits = fs.geo.cluster_bits;
    let kept: BTreeSet<u64> = if bits > 0 {
        super::map::all_blocks_of(stage, ino)?
            .into_iter()
            .map(|b| b.0 >> bits)
            .collect()
    } else {
        BTreeSet::new()
    };
    for b in old_nodes {
        if bits > 0 && !kept.contains(&(b.0 >> bits)) {
            stage.free_block(b);
        } else {
            stage.release_block(b);
        }
    }
    super::map::recount_i_blocks(stage, ino)
}

/// Whether an inode's block problems leave its tree to be written anew
/// from what the check kept: directory extents moved down to close gaps
/// (a move the check under a repair made too), extents and subtrees the
/// walk drops (never claimed), index starts corrected, a tree too deep
/// made shallow, a directory's extents no longer uninitialised. The
/// size and
/// block count the check found then still hold.
pub fn rewrites_kept_tree(probs: &[&Finding]) -> bool {
    probs
        .iter()
        .all(|f| drops_from_tree(f.code) || !f.code.policy().block_map)
}

/// Whether the size and block count the check found for a file that is
/// not a directory still hold after its block problems are fixed: its
/// tree written anew from what the check kept, or illegal and too-far
/// pointers of a block map cleared where they are (the check's walk
/// never counted them).
pub fn file_size_holds(probs: &[&Finding]) -> bool {
    probs.iter().all(|f| {
        drops_from_tree(f.code)
            || matches!(f.code, Code::IllegalBlock | Code::TooBig)
            || !f.code.policy().block_map
    })
}

/// The extent tree problems whose fix is the tree written anew from the
/// extents the check's walk keeps, with nothing else to it.
pub fn drops_from_tree(code: Code) -> bool {
    matches!(
        code,
        Code::CollapseDblock
            | Code::ExtentNodeInvalid
            | Code::ExtentIndexStartInvalid
            | Code::ExtentBadStart
            | Code::ExtentEndsBeyond
            | Code::ExtentLengthZero
            | Code::OutOfOrderExtents
            | Code::ExtentEndOutOfBounds
            | Code::ExtentCollision
            | Code::ExtentBadMaxDepth
            | Code::UninitExtentOnDir
    )
}

/// Whether a tree rewritten from what the check kept gives its old
/// nodes back and is counted again, so that the blocks it holds are
/// those the check found it claims: without bigalloc (whose clusters
/// the check's count already settles), and for an inode that shares no
/// block with another (pass 1B's clones come first). The nodes given
/// back are those the check's walk kept, the inode's own; e2fsck's edit
/// of the tree leaves none behind. After any other problem a node may
/// be a block of something else, and stays as found.
pub fn gives_back_old_nodes(st: &CheckState, ino: u32, probs: &[&Finding]) -> bool {
    st.fs.geo.cluster_bits == 0 && !st.dup_inodes.contains_key(&ino) && rewrites_kept_tree(probs)
}

/// Fixes the block-level problems of one inode: a block map loses its
/// illegal pointers, an extent tree is rebuilt from the extents e2fsck
/// keeps. Returns whether the inode itself changed (not only indirect
/// blocks).
pub fn fix_inode_blocks<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    ino: Ino,
    probs: &[&Finding],
) -> io::Result<bool> {
    let fs = &st.fs;
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(invalid)?;
    let extent_fs = fs.geo.incompat.contains(IncompatFeatures::EXTENTS);
    if extent_fs && inode.has_flag(flags::EXTENTS) {
        let p1 = Pass1::new(fs, &st.maps, &st.bad_blocks);
        let kept = collect_tree(&p1, &mut stage.io, ino.get(), &raw);
        write_extent_tree(stage, ino, &kept.leaves)?;
        if gives_back_old_nodes(st, ino.get(), probs) {
            for b in kept.nodes {
                stage.release_block(PhysBlock(b));
            }
            super::map::recount_i_blocks(stage, ino)?;
        }
        return Ok(true);
    }
    // Block map: pointers out of range, and those the check found too
    // far out for the file, are cleared.
    let toobig: BTreeSet<(u64, i64)> = probs
        .iter()
        .filter(|f| f.code == Code::TooBig)
        .filter_map(|f| Some((f.blk?, f.numbers.logical()? as i64)))
        .collect();
    let geo = &fs.geo;
    walk_block_map(stage, ino, &mut |blk, cnt| {
        if !geo.block_in_range(blk) || toobig.contains(&(blk, cnt)) {
            Decision::Zero
        } else {
            Decision::Keep
        }
    })
}

/// Rewrites an inode's block map (direct, then single, double and triple
/// indirect), letting `decide` keep, clear or clone each pointer (map
/// blocks are judged with e2fsck's negative block counts); a cleared map
/// block takes its subtree with it. Returns whether the pointers in the
/// inode itself changed.
fn walk_block_map<'f>(
    stage: &mut Staging<'f>,
    ino: Ino,
    decide: &mut dyn FnMut(u64, i64) -> Decision,
) -> io::Result<bool> {
    let raw = stage.inode_copy(ino)?;
    let mut i_block = raw[I_BLOCK].to_vec();
    let mut ed = Decide { stage, decide };
    let changed = walk::edit_block_map(&mut ed, &mut i_block)?;
    if changed {
        stage.inode(ino)?[I_BLOCK].copy_from_slice(&i_block);
    }
    Ok(changed)
}

/// A block map rewrite by a decision per pointer.
struct Decide<'s, 'f, 'd> {
    stage: &'s mut Staging<'f>,
    decide: &'d mut dyn FnMut(u64, i64) -> Decision,
}

staged_editor!(Decide<'_, '_, '_>);

impl BlockMapEditor for Decide<'_, '_, '_> {
    fn pointer(&mut self, blk: u64, level: u32, lblk: u64) -> io::Result<u64> {
        let cnt = if level == 0 {
            lblk as i64
        } else {
            -i64::from(level)
        };
        match (self.decide)(blk, cnt) {
            Decision::Keep => Ok(blk),
            Decision::Zero => Ok(0),
            Decision::Clone => clone_block(self.stage, PhysBlock(blk)).map(|b| b.0),
        }
    }

    fn write_block(&mut self, blk: u64, bytes: &[u8]) -> io::Result<()> {
        self.write_staged(blk, bytes)
    }
}

/// Copies a block to a newly allocated one.
fn clone_block(stage: &mut Staging<'_>, blk: PhysBlock) -> io::Result<PhysBlock> {
    let new = stage
        .alloc_block(blk)
        .ok_or_else(|| io::Error::other("no free block to clone into"))?;
    let mut b = vec![0u8; stage.fs().block_size()];
    stage.read(blk, &mut b)?;
    stage.fresh_block(new, Kind::Plain).copy_from_slice(&b);
    Ok(new)
}

/// Passes 1B-1D: every inode that shares blocks, in inode order, gets its
/// own copies of the blocks still shared, so the last owner keeps the
/// originals (blocks shared with the file system's metadata are always
/// copied).
pub fn clone_duplicates<'f>(st: &'f CheckState, stage: &mut Staging<'f>) -> io::Result<()> {
    let fs = &st.fs;
    let maps = &st.maps;
    let geo = &fs.geo;
    let bits = geo.cluster_bits;
    let dup_inodes = &st.dup_inodes;
    let mut count: BTreeMap<u64, u32> = BTreeMap::new();
    for clusters in dup_inodes.values() {
        for &c in clusters {
            *count.entry(c).or_default() += 1;
        }
    }
    for (&c, n) in count.iter_mut() {
        if (0..u64::from(geo.cluster_ratio)).any(|k| maps.metadata.get((c << bits) + k)) {
            *n += 1;
        }
    }
    let extent_fs = geo.incompat.contains(IncompatFeatures::EXTENTS);
    for (&ino, clusters) in dup_inodes {
        let Some(ino) = Ino::new(ino).filter(|&i| i != Ino::BAD && i != Ino::RESIZE) else {
            continue;
        };
        let before = count.clone();
        if clone_inode(st, stage, ino, clusters, &mut count, extent_fs).is_err() {
            // No room for the copies: as e2fsck does, the file is deleted
            // and the others keep the blocks.
            count = before;
            for c in clusters {
                if let Some(n) = count.get_mut(c) {
                    *n = n.saturating_sub(1);
                }
            }
            let raw = stage.inode(ino)?;
            super::raw::clear_inode(raw, ino.get(), geo.first_ino, super::raw::now());
        }
    }
    // As e2fsck unmarks a block once one claim is left: freeing the
    // inode that keeps it (a later pass clearing it) then frees it.
    for (&c, &n) in &count {
        if n <= 1 {
            stage.unshare(c);
        }
    }
    Ok(())
}

/// Gives one inode its own copies of the blocks it still shares.
fn clone_inode<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    ino: Ino,
    clusters: &[u64],
    count: &mut BTreeMap<u64, u32>,
    extent_fs: bool,
) -> io::Result<()> {
    let fs = &st.fs;
    let maps = &st.maps;
    let geo = &fs.geo;
    let bits = geo.cluster_bits;
    let raw = stage.inode_copy(ino)?;
    let Some(inode) = Inode::new(&raw) else {
        return Ok(());
    };
    if extent_fs && inode.has_flag(flags::EXTENTS) {
        let p1 = Pass1::new(fs, maps, &st.bad_blocks);
        let (leaves, _) = collect_extents(&p1, &mut stage.io, ino.get(), &raw);
        // A shared tree node is not copied: the tree is written anew, in
        // the inode or in fresh blocks.
        let mut tree_shared = false;
        for t in super::map::tree_blocks_of(stage, ino)? {
            if let Some(n) = count.get_mut(&(t.0 >> bits)).filter(|n| **n > 1) {
                *n -= 1;
                tree_shared = true;
            }
        }
        if bits == 0 {
            return clone_extents_by_block(stage, ino, leaves, count, tree_shared);
        }
        // Each cluster still shared gets new clusters, one for each
        // logical cluster of this file it holds, and each block goes to
        // its logical offset inside the new one (bigalloc needs that). A
        // cluster only this file claims twice (blocks out of place in
        // their cluster) moves too: that is what puts them in place.
        let mask = (1u64 << bits) - 1;
        let mut moving: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
        let mine: std::collections::BTreeSet<u64> = clusters.iter().copied().collect();
        for c in mine {
            match count.get_mut(&c) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    moving.insert(c);
                }
                Some(1) => {
                    moving.insert(c);
                }
                _ => {}
            }
        }
        if moving.is_empty() && !tree_shared {
            return Ok(());
        }
        let mut remap: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        let bs = fs.block_size();
        let mut out = Vec::new();
        for l in leaves {
            let mut j = 0;
            while j < l.len {
                let moved = |b: u64| moving.contains(&(b >> bits));
                let s = moved(l.pblk + j);
                let mut k = j + 1;
                while k < l.len && moved(l.pblk + k) == s {
                    k += 1;
                }
                if s {
                    for x in j..k {
                        let old = l.pblk + x;
                        let lb = l.lblk + x;
                        let key = (old >> bits, lb >> bits);
                        let newc = match remap.get(&key) {
                            Some(&c) => c,
                            None => {
                                let nb =
                                    stage.alloc_block(PhysBlock(old & !mask)).ok_or_else(|| {
                                        io::Error::other("no free block to clone into")
                                    })?;
                                remap.insert(key, nb.0 >> bits);
                                nb.0 >> bits
                            }
                        };
                        let new = (newc << bits) | (lb & mask);
                        let mut b = vec![0u8; bs];
                        stage.read(PhysBlock(old), &mut b)?;
                        stage
                            .fresh_block(PhysBlock(new), Kind::Plain)
                            .copy_from_slice(&b);
                        out.push(LeafExtent {
                            lblk: lb,
                            pblk: new,
                            len: 1,
                            uninit: l.uninit,
                        });
                    }
                } else {
                    out.push(LeafExtent {
                        lblk: l.lblk + j,
                        pblk: l.pblk + j,
                        len: k - j,
                        uninit: l.uninit,
                    });
                }
                j = k;
            }
        }
        let merged = merge_runs(out);
        write_extent_tree(stage, ino, &merged)?;
        // The new tree may take blocks of its own (more runs than the
        // inode holds), which i_blocks counts, as e2fsck's clone does.
        super::map::recount_i_blocks(stage, ino)?;
    } else if check_core::walk::inode_has_valid_blocks(fs, &inode) {
        walk_block_map(stage, ino, &mut |blk, _| {
            let c = blk >> bits;
            match count.get_mut(&c) {
                Some(n) if *n > 1 && geo.block_in_range(blk) => {
                    *n -= 1;
                    Decision::Clone
                }
                _ => Decision::Keep,
            }
        })?;
    }
    Ok(())
}

/// Cloning without bigalloc: each shared block (each occurrence, so a
/// file that maps a block twice gets a copy for one of them) is copied
/// while someone else still holds it.
fn clone_extents_by_block<'f>(
    stage: &mut Staging<'f>,
    ino: Ino,
    leaves: Vec<LeafExtent>,
    count: &mut BTreeMap<u64, u32>,
    tree_shared: bool,
) -> io::Result<()> {
    let mut out = Vec::new();
    let mut moved = tree_shared;
    for l in leaves {
        for x in 0..l.len {
            let old = l.pblk + x;
            let shared = count.get(&old).is_some_and(|&n| n > 1);
            let pblk = if shared {
                moved = true;
                if let Some(n) = count.get_mut(&old) {
                    *n -= 1;
                }
                clone_block(stage, PhysBlock(old))?.0
            } else {
                old
            };
            out.push(LeafExtent {
                lblk: l.lblk + x,
                pblk,
                len: 1,
                uninit: l.uninit,
            });
        }
    }
    if moved {
        write_extent_tree(stage, ino, &merge_runs(out))?;
        // The new tree may take blocks of its own (more runs than the
        // inode holds), which i_blocks counts, as e2fsck's clone does.
        super::map::recount_i_blocks(stage, ino)?;
    }
    Ok(())
}

/// Joins extents that continue one another.
fn merge_runs(v: Vec<LeafExtent>) -> Vec<LeafExtent> {
    let mut out: Vec<LeafExtent> = Vec::with_capacity(v.len());
    for e in v {
        if let Some(last) = out.last_mut() {
            if last.lblk + last.len == e.lblk
                && last.pblk + last.len == e.pblk
                && last.uninit == e.uninit
                && last.len + e.len <= MAX_UNINIT_LEN
            {
                last.len += e.len;
                continue;
            }
        }
        out.push(e);
    }
    out
}
