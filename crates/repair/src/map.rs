//! An inode's block mapping as this round's changes leave it: walking it
//! and adding blocks to it, reading every mapping block through the
//! overlay.

use ext4_layout::types::{Ino, PhysBlock};
use std::io;

use ext4_layout::blockmap;
use ext4_layout::inode::{flags, Inode};
use ext4_layout::inode::{i_block_word, I_BLOCK};
use ext4_layout::walk::{
    self, BlockMapEditor, BlockMapVisitor, BlockSource, ExtentVisitor, MapStep, WalkEntry,
};

use super::stage::{Kind, Staging};
use check_core::walk::LeafExtent;

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// An editor of block maps reads map blocks through the overlay, and
/// writes the ones it changes into it. The type has `stage` and `io`
/// fields.
macro_rules! staged_editor {
    ($editor:ty) => {
        impl ext4_layout::walk::BlockSource for $editor {
            type Error = std::io::Error;

            fn block_size(&self) -> usize {
                self.stage.fs().block_size()
            }

            fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> std::io::Result<()> {
                self.stage.read(ext4_layout::types::PhysBlock(blk), buf)
            }

            fn holds(&self, blk: u64) -> bool {
                self.stage.fs().geo.block_in_range(blk)
            }
        }

        impl $editor {
            /// Writes a changed map block into the overlay.
            fn write_staged(&mut self, blk: u64, bytes: &[u8]) -> std::io::Result<()> {
                let b = self.stage.block(
                    ext4_layout::types::PhysBlock(blk),
                    super::stage::Kind::FileMap,
                )?;
                b.copy_from_slice(bytes);
                Ok(())
            }
        }
    };
}
pub(crate) use staged_editor;

/// Cuts a block map at logical block `keep`: pointers from there on are
/// cleared, and map blocks left mapping nothing are dropped.
struct Truncate<'s, 'f> {
    stage: &'s mut Staging<'f>,
    keep: u64,
}

staged_editor!(Truncate<'_, '_>);

impl BlockMapEditor for Truncate<'_, '_> {
    fn pointer(&mut self, blk: u64, _level: u32, lblk: u64) -> io::Result<u64> {
        Ok(if lblk >= self.keep { 0 } else { blk })
    }

    fn enter(&mut self, blk: u64, _level: u32) -> io::Result<bool> {
        if self.holds(blk) {
            Ok(true)
        } else {
            Err(bad("indirect block out of range"))
        }
    }

    fn map_done(&mut self, blk: u64, _level: u32, maps_any: bool) -> u64 {
        if maps_any {
            blk
        } else {
            0
        }
    }

    fn write_block(&mut self, blk: u64, bytes: &[u8]) -> io::Result<()> {
        self.write_staged(blk, bytes)
    }
}

/// A walk of an inode's mapping as this round leaves it: every mapping
/// block is read through the overlay.
struct Staged<'s, 'f> {
    stage: &'s mut Staging<'f>,
    leaves: Vec<LeafExtent>,
    /// Mapped (logical, physical) blocks of a block map.
    data: Vec<(u64, PhysBlock)>,
    /// The extent tree nodes or indirect blocks.
    tree: Vec<PhysBlock>,
    /// The first map block that could not be read.
    err: Option<io::Error>,
}

impl<'s, 'f> Staged<'s, 'f> {
    fn new(stage: &'s mut Staging<'f>) -> Self {
        Staged {
            stage,
            leaves: Vec::new(),
            data: Vec::new(),
            tree: Vec::new(),
            err: None,
        }
    }
}

impl BlockSource for Staged<'_, '_> {
    type Error = io::Error;

    fn block_size(&self) -> usize {
        self.stage.fs().block_size()
    }

    fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> io::Result<()> {
        self.stage.read(PhysBlock(blk), buf)
    }

    fn holds(&self, blk: u64) -> bool {
        self.stage.fs().geo.block_in_range(blk)
    }
}

impl ExtentVisitor for Staged<'_, '_> {
    type Place = ();
    type Break = io::Error;

    fn leaf(&mut self, _: &mut (), e: WalkEntry) -> io::Result<()> {
        self.leaves.push(LeafExtent {
            lblk: e.lblk,
            pblk: e.pblk,
            len: e.len,
            uninit: e.uninit,
        });
        Ok(())
    }

    fn index(&mut self, _: &mut (), _level: u16, e: WalkEntry) -> io::Result<Option<()>> {
        if !self.holds(e.pblk) {
            return Err(bad("extent index out of range"));
        }
        self.tree.push(PhysBlock(e.pblk));
        Ok(Some(()))
    }

    fn unreadable(&mut self, _blk: u64, err: io::Error) -> io::Error {
        err
    }

    fn cycle(&mut self, _blk: u64) -> io::Error {
        bad("extent tree loops")
    }

    /// The overlay's nodes are this round's own: taken as they are.
    fn node(&mut self, _: &mut (), _blk: u64, _bytes: &[u8]) -> io::Result<bool> {
        Ok(true)
    }
}

impl BlockMapVisitor for Staged<'_, '_> {
    fn data(&mut self, blk: u64, lblk: u64, _parent: u64) {
        self.data.push((lblk, PhysBlock(blk)));
    }

    /// A map block outside the file system maps nothing.
    fn map_block(&mut self, blk: u64, _level: u32, _lblk: u64, _parent: u64) -> MapStep {
        if !self.holds(blk) {
            return MapStep::Skip;
        }
        self.tree.push(PhysBlock(blk));
        MapStep::Descend
    }

    fn unreadable(&mut self, _blk: u64, err: io::Error) {
        self.err.get_or_insert(err);
    }
}

/// The leaf extents of an extent-mapped inode.
pub fn extents_of<'f>(stage: &mut Staging<'f>, raw: &[u8]) -> io::Result<Vec<LeafExtent>> {
    let mut v = Staged::new(stage);
    walk::walk_extent_tree(&mut v, &raw[I_BLOCK], u64::MAX, ())?;
    Ok(v.leaves)
}

/// Every mapped (logical, physical) data block of an inode, in logical
/// order.
pub fn blocks_of<'f>(stage: &mut Staging<'f>, ino: Ino) -> io::Result<Vec<(u64, PhysBlock)>> {
    Ok(mapping_of(stage, ino)?.0)
}

/// An inode's mapped (logical, physical) data blocks, in logical order,
/// and the blocks that hold the mapping (extent tree nodes or indirect
/// blocks).
type Mapping = (Vec<(u64, PhysBlock)>, Vec<PhysBlock>);

/// The extents of inode `ino` as this round leaves it (none unless it is
/// extent-mapped).
pub fn extents_of_inode<'f>(stage: &mut Staging<'f>, ino: Ino) -> io::Result<Vec<LeafExtent>> {
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| bad("bad inode"))?;
    if !inode.has_flag(flags::EXTENTS) || inode.has_flag(flags::INLINE_DATA) {
        return Ok(Vec::new());
    }
    extents_of(stage, &raw)
}

/// Every block an inode's mapping holds: data blocks and the extent tree
/// nodes or indirect blocks that map them.
pub fn all_blocks_of<'f>(stage: &mut Staging<'f>, ino: Ino) -> io::Result<Vec<PhysBlock>> {
    let (data, mut tree) = mapping_of(stage, ino)?;
    tree.extend(data.into_iter().map(|(_, p)| p));
    Ok(tree)
}

/// The blocks that hold an inode's mapping: extent tree nodes or
/// indirect blocks.
pub fn tree_blocks_of<'f>(stage: &mut Staging<'f>, ino: Ino) -> io::Result<Vec<PhysBlock>> {
    Ok(mapping_of(stage, ino)?.1)
}

/// The [`Mapping`] of an inode as this round leaves it.
fn mapping_of<'f>(stage: &mut Staging<'f>, ino: Ino) -> io::Result<Mapping> {
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| bad("bad inode"))?;
    if inode.has_flag(flags::INLINE_DATA) {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut v = Staged::new(stage);
    if inode.has_flag(flags::EXTENTS) {
        walk::walk_extent_tree(&mut v, &raw[I_BLOCK], u64::MAX, ())?;
        let mut data: Vec<(u64, PhysBlock)> = v
            .leaves
            .iter()
            .flat_map(|e| (0..e.len).map(move |k| (e.lblk + k, PhysBlock(e.pblk + k))))
            .collect();
        data.sort_unstable();
        return Ok((data, v.tree));
    }
    walk::walk_block_map(&mut v, &raw[I_BLOCK]);
    match v.err {
        Some(e) => Err(e),
        None => Ok((v.data, v.tree)),
    }
}

/// Unmaps every block of `ino` from logical block `keep` on, with the
/// mapping blocks that then map nothing; returns the blocks no longer
/// held (data and mapping blocks), for the caller to free.
pub fn truncate_map<'f>(
    stage: &mut Staging<'f>,
    ino: Ino,
    keep: u64,
) -> io::Result<Vec<PhysBlock>> {
    let before = all_blocks_of(stage, ino)?;
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| bad("bad inode"))?;
    if inode.has_flag(flags::INLINE_DATA) {
        return Ok(Vec::new());
    }
    if inode.has_flag(flags::EXTENTS) {
        let mut kept = Vec::new();
        for mut e in extents_of(stage, &raw)? {
            if e.lblk >= keep {
                continue;
            }
            e.len = e.len.min(keep - e.lblk);
            kept.push(e);
        }
        super::tree::write_extent_tree(stage, ino, &kept)?;
    } else {
        let mut i_block = raw[I_BLOCK].to_vec();
        let mut cut = Truncate { stage, keep };
        if walk::edit_block_map(&mut cut, &mut i_block)? {
            stage.inode(ino)?[I_BLOCK].copy_from_slice(&i_block);
        }
    }
    let after: std::collections::BTreeSet<PhysBlock> =
        all_blocks_of(stage, ino)?.into_iter().collect();
    Ok(before.into_iter().filter(|b| !after.contains(b)).collect())
}

/// Sets an inode's `i_blocks` to what its staged mapping and extended
/// attribute block hold: every block (one count per cluster with
/// bigalloc), in 512-byte units or, for a huge file, in blocks.
pub fn recount_i_blocks<'f>(stage: &mut Staging<'f>, ino: Ino) -> io::Result<()> {
    let (data, tree) = mapping_of(stage, ino)?;
    let fs = stage.fs();
    let bits = fs.geo.cluster_bits;
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| bad("bad inode"))?;
    let acl = inode.file_acl(
        fs.geo
            .incompat
            .contains(ext4_layout::features::IncompatFeatures::BIT64),
    );
    let mut clusters: Vec<u64> = data
        .iter()
        .map(|&(_, p)| p)
        .chain(tree)
        // An attribute block counts only where it can be one (e2fsck
        // counts it once it has judged it; one out of range, or on a file
        // system without ext_attr, is cleared, never counted).
        .chain(
            (acl != 0
                && fs.geo.block_in_range(acl)
                && fs
                    .geo
                    .compat
                    .contains(ext4_layout::features::CompatFeatures::EXT_ATTR))
            .then_some(PhysBlock(acl)),
        )
        .map(|b| b.0 >> bits)
        .collect();
    clusters.sort_unstable();
    clusters.dedup();
    let blocks = (clusters.len() as u64) << bits;
    let huge = fs
        .geo
        .ro_compat
        .contains(ext4_layout::features::RoCompatFeatures::HUGE_FILE)
        && inode.has_flag(flags::HUGE_FILE);
    let v = if huge {
        blocks
    } else {
        blocks * (fs.block_size() as u64 / 512)
    };
    let r = stage.inode(ino)?;
    ext4_layout::inode::BLOCKS.set(r, v);
    Ok(())
}

/// Maps logical block `lblk` of inode `ino` to `blk`, allocating mapping
/// blocks as needed.
pub fn map_block<'f>(
    stage: &mut Staging<'f>,
    ino: Ino,
    lblk: u64,
    blk: PhysBlock,
) -> io::Result<()> {
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| bad("bad inode"))?;
    if inode.has_flag(flags::EXTENTS) {
        let mut leaves = extents_of(stage, &raw)?;
        leaves.push(LeafExtent {
            lblk,
            pblk: blk.0,
            len: 1,
            uninit: false,
        });
        leaves.sort_by_key(|e| e.lblk);
        // Join with the extent before it when the blocks follow on.
        let mut merged: Vec<LeafExtent> = Vec::new();
        for e in leaves {
            if let Some(l) = merged.last_mut() {
                if l.lblk + l.len == e.lblk
                    && l.pblk + l.len == e.pblk
                    && l.uninit == e.uninit
                    && l.len + e.len <= 32767
                {
                    l.len += e.len;
                    continue;
                }
            }
            merged.push(e);
        }
        // The tree is written anew: its old blocks go back.
        let old = tree_blocks_of(stage, ino)?;
        super::tree::write_extent_tree(stage, ino, &merged)?;
        for b in old {
            stage.release_block(b);
        }
        return Ok(());
    }
    let per = (stage.fs().block_size() / 4) as u64;
    if lblk < 12 {
        let r = stage.inode(ino)?;
        i_block_word(lblk as usize).set(r, blk.0 as u32);
        return Ok(());
    }
    let (slot, rel, level) = if lblk < 12 + per {
        (12usize, lblk - 12, 1u32)
    } else if lblk < 12 + per + per * per {
        (13usize, lblk - 12 - per, 2u32)
    } else {
        return Err(bad("the block is beyond what this repair maps"));
    };
    let mut top = PhysBlock(u64::from(i_block_word(slot).get(&raw)));
    if top.0 == 0 {
        top = stage.alloc_block(blk).ok_or_else(|| bad("no free block"))?;
        stage.fresh_block(top, Kind::Plain);
        let r = stage.inode(ino)?;
        i_block_word(slot).set(r, top.0 as u32);
    }
    let mut cur = top;
    let mut rel = rel;
    let mut level = level;
    while level > 1 {
        let span = per.pow(level - 1);
        let k = (rel / span) as usize;
        rel %= span;
        let b = stage.block(cur, Kind::Plain)?;
        let mut next = PhysBlock(u64::from(blockmap::pointer(b, k)));
        if next.0 == 0 {
            next = stage.alloc_block(blk).ok_or_else(|| bad("no free block"))?;
            stage.fresh_block(next, Kind::Plain);
            let b = stage.block(cur, Kind::Plain)?;
            blockmap::put_pointer(b, k, next.0 as u32);
        }
        cur = next;
        level -= 1;
    }
    let b = stage.block(cur, Kind::Plain)?;
    blockmap::put_pointer(b, rel as usize, blk.0 as u32);
    Ok(())
}
