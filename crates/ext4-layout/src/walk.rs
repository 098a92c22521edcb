//! Walking a file's block mapping: one walker for extent trees, one for
//! block maps.
//!
//! Both read the mapping blocks they go down to through a [`BlockSource`]
//! and leave every judgement to a visitor: which entries to take, which
//! blocks to go down to, and what a block that cannot be read means. A
//! checker, a collector of a file's blocks and a repair all walk a file
//! the same way, in the same order, each with its own visitor.
//!
//! Collecting the data blocks of a file held in an image in memory:
//!
//! ```
//! use ext4_layout::walk::{self, BlockSource, ExtentVisitor, SliceSource, WalkEntry};
//!
//! struct Blocks<'a> {
//!     src: SliceSource<'a>,
//!     found: Vec<(u64, u64)>,
//! }
//!
//! impl BlockSource for Blocks<'_> {
//!     type Error = walk::OutsideImage;
//!     fn block_size(&self) -> usize {
//!         self.src.block_size()
//!     }
//!     fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
//!         self.src.read_block(blk, buf)
//!     }
//! }
//!
//! impl ExtentVisitor for Blocks<'_> {
//!     type Place = ();
//!     type Break = u64;
//!     fn leaf(&mut self, _: &mut (), e: WalkEntry) -> Result<(), u64> {
//!         self.found.extend((0..e.len).map(|k| (e.lblk + k, e.pblk + k)));
//!         Ok(())
//!     }
//!     fn index(&mut self, _: &mut (), _: u16, _: WalkEntry) -> Result<Option<()>, u64> {
//!         Ok(Some(()))
//!     }
//!     fn unreadable(&mut self, blk: u64, _: walk::OutsideImage) -> u64 {
//!         blk
//!     }
//!     fn cycle(&mut self, blk: u64) -> u64 {
//!         blk
//!     }
//! }
//!
//! // An inode's i_block holding one extent: 3 blocks at logical 0 from block 100.
//! let mut i_block = [0u8; 60];
//! ext4_layout::extent::put_header(&mut i_block, 1, 4, 0);
//! let e = ext4_layout::extent::encode_extent(0, 3, false, 100);
//! ext4_layout::extent::put_entry(&mut i_block, 0, &e);
//!
//! let image = vec![0u8; 1024 * 128];
//! let mut v = Blocks { src: SliceSource::new(&image, 1024), found: Vec::new() };
//! walk::walk_extent_tree(&mut v, &i_block, u64::MAX, ()).unwrap();
//! assert_eq!(v.found, [(0, 100), (1, 101), (2, 102)]);
//! ```

use crate::blockmap::{DIND_BLOCK, IND_BLOCK, NDIR_BLOCKS, TIND_BLOCK};
use crate::bytes::{le_u32, put_le_u32};
use crate::extent::ExtentNode;

/// Where the walkers read mapping blocks from: a device, an image, or an
/// overlay of changes not yet written.
pub trait BlockSource {
    /// Why a block could not be read.
    type Error;
    /// The file system's block size in bytes.
    fn block_size(&self) -> usize;
    /// Reads block `blk` into `buf` (one block long).
    fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> Result<(), Self::Error>;
    /// Whether `blk` is a block of the file system (the walkers leave
    /// that judgement to their visitors; [`find_block`] refuses a map
    /// block outside it).
    fn holds(&self, blk: u64) -> bool {
        let _ = blk;
        true
    }
}

/// A block past the end of a [`SliceSource`]'s bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("block {0} lies outside the image")]
pub struct OutsideImage(pub u64);

/// An image held in memory.
#[derive(Clone, Copy)]
pub struct SliceSource<'a> {
    bytes: &'a [u8],
    block_size: usize,
}

impl<'a> SliceSource<'a> {
    /// The image `bytes`, in blocks of `block_size` bytes.
    pub fn new(bytes: &'a [u8], block_size: usize) -> Self {
        SliceSource { bytes, block_size }
    }
}

impl BlockSource for SliceSource<'_> {
    type Error = OutsideImage;

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> Result<(), OutsideImage> {
        let start = usize::try_from(blk)
            .ok()
            .and_then(|b| b.checked_mul(self.block_size))
            .ok_or(OutsideImage(blk))?;
        let src = self
            .bytes
            .get(start..start + buf.len())
            .ok_or(OutsideImage(blk))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// An entry of an extent node as the walker hands it over: a leaf's
/// extent, or an index entry and the logical range it covers (up to the
/// next entry's first block, or to the end of its node's range, as a
/// 32-bit count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkEntry {
    /// First logical block.
    pub lblk: u64,
    /// First physical block (for an index entry, the child node's block).
    pub pblk: u64,
    /// Blocks covered.
    pub len: u64,
    /// Whether a leaf extent is uninitialised (never for an index entry).
    pub uninit: bool,
}

/// What to do at each step of an extent tree walk.
///
/// The walker goes through a node's entries in order. A leaf entry goes
/// to [`leaf`](Self::leaf). An index entry goes to
/// [`index`](Self::index), and when that returns a place for the child,
/// the walker reads the child (a block already on the path from the root
/// stops the walk through [`cycle`](Self::cycle)), shows it to
/// [`node`](Self::node), walks its entries if allowed, and then calls
/// [`done`](Self::done) with the child's place. Any `Err` stops the walk.
pub trait ExtentVisitor: BlockSource {
    /// What the visitor keeps for each node on the path.
    type Place;
    /// Why the walk stopped.
    type Break;

    /// A leaf extent of the node at `at`.
    fn leaf(&mut self, at: &mut Self::Place, e: WalkEntry) -> Result<(), Self::Break>;

    /// An index entry of the node at `at`, which lies `level` below the
    /// root: the child's place to go down to it, `None` to pass it by.
    fn index(
        &mut self,
        at: &mut Self::Place,
        level: u16,
        e: WalkEntry,
    ) -> Result<Option<Self::Place>, Self::Break>;

    /// The child at `blk` could not be read.
    fn unreadable(&mut self, blk: u64, err: Self::Error) -> Self::Break;

    /// The child at `blk` is already on the path from the root.
    fn cycle(&mut self, blk: u64) -> Self::Break;

    /// The child at `blk` as read, before its entries: whether to walk
    /// them. The default takes any node whose header has the magic.
    fn node(&mut self, at: &mut Self::Place, blk: u64, bytes: &[u8]) -> Result<bool, Self::Break> {
        let _ = (at, blk);
        Ok(ExtentNode::new(bytes).is_some_and(|n| n.validate(false).is_ok()))
    }

    /// After the entries of a node: `blk` is `None` for the root.
    fn done(&mut self, at: Self::Place, blk: Option<u64>) -> Result<(), Self::Break> {
        let _ = (at, blk);
        Ok(())
    }
}

/// One node on the walker's path.
struct Frame<P> {
    bytes: Vec<u8>,
    blk: Option<u64>,
    place: P,
    next: usize,
    end: u64,
}

/// Walks the extent tree rooted in `root` (an inode's `i_block`), whose
/// logical range ends at `end`, depth first in logical order. Which level
/// holds the leaves is the root's `eh_depth`. A root too short for a
/// header walks nothing. The walk keeps its path on the heap, so a deep
/// or looping tree cannot exhaust the stack.
pub fn walk_extent_tree<V: ExtentVisitor>(
    v: &mut V,
    root: &[u8],
    end: u64,
    place: V::Place,
) -> Result<(), V::Break> {
    let Some(node) = ExtentNode::new(root) else {
        return Ok(());
    };
    let depth = node.eh_depth();
    if depth == 0 {
        // Most files: the leaves are in the inode, and nothing is read.
        let mut place = place;
        for x in node.leaves() {
            v.leaf(&mut place, leaf_entry(&x))?;
        }
        return v.done(place, None);
    }
    let mut path = vec![Frame {
        bytes: root.to_vec(),
        blk: None,
        place,
        next: 0,
        end,
    }];
    loop {
        let level = path.len().saturating_sub(1) as u16;
        let Some(top) = path.last_mut() else {
            break;
        };
        let Some(node) = ExtentNode::new(&top.bytes) else {
            return Ok(());
        };
        let count = node.entry_count();
        let i = top.next;
        if i >= count {
            if let Some(f) = path.pop() {
                v.done(f.place, f.blk)?;
            }
            continue;
        }
        top.next += 1;
        if level == depth {
            v.leaf(&mut top.place, leaf_entry(&node.leaf(i)))?;
            continue;
        }
        let ix = node.index(i);
        let lblk = u64::from(ix.ei_block);
        let next_start = if i + 1 < count {
            u64::from(node.index(i + 1).ei_block)
        } else {
            top.end
        };
        let e = WalkEntry {
            lblk,
            pblk: ix.leaf,
            len: u64::from(next_start.wrapping_sub(lblk) as u32),
            uninit: false,
        };
        let Some(mut child) = v.index(&mut top.place, level, e)? else {
            continue;
        };
        if path.iter().any(|f| f.blk == Some(e.pblk)) {
            return Err(v.cycle(e.pblk));
        }
        let mut bytes = vec![0u8; v.block_size()];
        if let Err(err) = v.read_block(e.pblk, &mut bytes) {
            return Err(v.unreadable(e.pblk, err));
        }
        if v.node(&mut child, e.pblk, &bytes)? {
            path.push(Frame {
                bytes,
                blk: Some(e.pblk),
                place: child,
                next: 0,
                end: next_start,
            });
        }
    }
    Ok(())
}

fn leaf_entry(x: &crate::extent::Extent) -> WalkEntry {
    WalkEntry {
        lblk: u64::from(x.ee_block),
        pblk: x.start,
        len: u64::from(x.len()),
        uninit: x.is_uninit(),
    }
}

/// What a block map walk does with a map (indirect) block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapStep {
    /// Read it and walk its entries.
    Descend,
    /// Pass it by; the walk goes on after it.
    Skip,
    /// Leave the rest of its top-level tree (single, double or triple
    /// indirect), as when it cannot be read.
    Abandon,
}

/// What to do at each step of a block map walk.
pub trait BlockMapVisitor: BlockSource {
    /// A data block pointer that is not zero: logical block `lblk`, held
    /// by map block `parent` (0 for the inode itself).
    fn data(&mut self, blk: u64, lblk: u64, parent: u64);

    /// A map block at `level` (1 for a single indirect block) whose range
    /// starts at logical block `lblk`, held by `parent` (0: the inode).
    fn map_block(&mut self, blk: u64, level: u32, lblk: u64, parent: u64) -> MapStep;

    /// Map block `blk` could not be read: the walk leaves its top-level
    /// tree and goes on with the next.
    fn unreadable(&mut self, blk: u64, err: Self::Error);
}

/// Walks the block map in `i_block` (an inode's 60 bytes): the direct
/// blocks, then the single, double and triple indirect trees, each map
/// block before its entries. Zero pointers are holes and are not shown.
pub fn walk_block_map<V: BlockMapVisitor>(v: &mut V, i_block: &[u8]) {
    let per = (v.block_size() / 4) as u64;
    let word = |k: usize| u64::from(le_u32(i_block, 4 * k));
    for k in 0..NDIR_BLOCKS {
        let b = word(k);
        if b != 0 {
            v.data(b, k as u64, 0);
        }
    }
    let mut lblk = NDIR_BLOCKS as u64;
    for (slot, level) in [(IND_BLOCK, 1u32), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
        let b = word(slot);
        if b != 0 {
            walk_map_block(v, b, level, lblk, 0);
        }
        lblk = lblk.saturating_add(per.saturating_pow(level));
    }
}

/// One map block and what it maps; false if its top-level tree was left.
fn walk_map_block<V: BlockMapVisitor>(
    v: &mut V,
    blk: u64,
    level: u32,
    lblk: u64,
    parent: u64,
) -> bool {
    match v.map_block(blk, level, lblk, parent) {
        MapStep::Descend => {}
        MapStep::Skip => return true,
        MapStep::Abandon => return false,
    }
    let mut buf = vec![0u8; v.block_size()];
    if let Err(err) = v.read_block(blk, &mut buf) {
        v.unreadable(blk, err);
        return false;
    }
    let per = buf.len() / 4;
    let span = (per as u64).saturating_pow(level - 1);
    for k in 0..per {
        let b = u64::from(le_u32(&buf, 4 * k));
        if b == 0 {
            continue;
        }
        let at = lblk.saturating_add(k as u64 * span);
        if level == 1 {
            v.data(b, at, blk);
        } else if !walk_map_block(v, b, level - 1, at, blk) {
            return false;
        }
    }
    true
}

/// What to do at each pointer of a block map being rewritten.
///
/// The edit goes in the walk's order. Each pointer that is not zero goes
/// to [`pointer`](Self::pointer), which says what to put in its place: the
/// same block, another (a copy), or 0 to clear it (a map block cleared
/// takes its subtree with it). The walk then goes down the map block the
/// pointer became, if [`enter`](Self::enter) agrees, edits its entries,
/// asks [`map_done`](Self::map_done) whether to keep it, and writes it
/// back through [`write_block`](Self::write_block) when an entry changed.
pub trait BlockMapEditor: BlockSource {
    /// Pointer `blk` to a data block (`level` 0) or to a map block at
    /// `level` whose range starts at logical block `lblk`: what it becomes.
    fn pointer(&mut self, blk: u64, level: u32, lblk: u64) -> Result<u64, Self::Error>;

    /// Whether to go down map block `blk` (what a pointer became). The
    /// default goes down any block of the file system.
    fn enter(&mut self, blk: u64, level: u32) -> Result<bool, Self::Error> {
        let _ = level;
        Ok(self.holds(blk))
    }

    /// After the entries of map block `blk`: what its pointer becomes,
    /// given whether it still maps anything. The default keeps it.
    fn map_done(&mut self, blk: u64, level: u32, maps_any: bool) -> u64 {
        let _ = (level, maps_any);
        blk
    }

    /// Writes map block `blk`, whose entries changed.
    fn write_block(&mut self, blk: u64, bytes: &[u8]) -> Result<(), Self::Error>;
}

/// Rewrites the block map in `i_block` (an inode's 60 bytes) pointer by
/// pointer, in the order of [`walk_block_map`]. Returns whether `i_block`
/// changed; map blocks that changed have been written.
pub fn edit_block_map<V: BlockMapEditor>(v: &mut V, i_block: &mut [u8]) -> Result<bool, V::Error> {
    let per = (v.block_size() / 4) as u64;
    let mut changed = false;
    for k in 0..NDIR_BLOCKS {
        let b = u64::from(le_u32(i_block, 4 * k));
        if b != 0 {
            let n = v.pointer(b, 0, k as u64)?;
            if n != b {
                put_le_u32(i_block, 4 * k, n as u32);
                changed = true;
            }
        }
    }
    let mut lblk = NDIR_BLOCKS as u64;
    for (slot, level) in [(IND_BLOCK, 1u32), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
        let b = u64::from(le_u32(i_block, 4 * slot));
        if b != 0 {
            let n = edit_map_block(v, b, level, lblk)?;
            if n != b {
                put_le_u32(i_block, 4 * slot, n as u32);
                changed = true;
            }
        }
        lblk = lblk.saturating_add(per.saturating_pow(level));
    }
    Ok(changed)
}

/// One map block's pointer and, below it, its entries: what the pointer
/// becomes.
fn edit_map_block<V: BlockMapEditor>(
    v: &mut V,
    blk: u64,
    level: u32,
    lblk: u64,
) -> Result<u64, V::Error> {
    let me = v.pointer(blk, level, lblk)?;
    if me == 0 || !v.enter(me, level)? {
        return Ok(me);
    }
    let mut buf = vec![0u8; v.block_size()];
    v.read_block(me, &mut buf)?;
    let per = buf.len() / 4;
    let span = (per as u64).saturating_pow(level - 1);
    let mut changed = false;
    let mut maps_any = false;
    for k in 0..per {
        let b = u64::from(le_u32(&buf, 4 * k));
        if b == 0 {
            continue;
        }
        let at = lblk.saturating_add(k as u64 * span);
        let n = if level == 1 {
            v.pointer(b, 0, at)?
        } else {
            edit_map_block(v, b, level - 1, at)?
        };
        if n != b {
            put_le_u32(&mut buf, 4 * k, n as u32);
            changed = true;
        }
        maps_any |= n != 0;
    }
    let kept = v.map_done(me, level, maps_any);
    if changed && kept != 0 {
        v.write_block(me, &buf)?;
    }
    Ok(kept)
}

/// Finds the physical block that maps logical block `lblk` of a file
/// whose mapping is `i_block`, going down the one path that holds it:
/// `Some(0)` for a hole, `None` when the mapping cannot be followed (a
/// bad header, an unreadable or outside map block, no index entry
/// covering `lblk`).
pub fn find_block<S: BlockSource>(
    src: &mut S,
    i_block: &[u8],
    extents: bool,
    lblk: u64,
) -> Option<u64> {
    if extents {
        find_in_extents(src, i_block, lblk)
    } else {
        find_in_block_map(src, i_block, lblk)
    }
}

fn find_in_extents<S: BlockSource>(src: &mut S, i_block: &[u8], lblk: u64) -> Option<u64> {
    let root = ExtentNode::new(i_block)?;
    root.validate(true).ok()?;
    let mut node = i_block.to_vec();
    // Levels are counted down from the root's depth; a path longer than
    // any real tree is refused.
    let depth = root.eh_depth();
    for level in 0..=depth.min(MAX_FIND_DEPTH) {
        let n = ExtentNode::new(&node)?;
        if level == depth {
            let hit = n
                .leaves()
                .find(|e| lblk >= u64::from(e.ee_block) && lblk < e.logical_end());
            return Some(hit.map_or(0, |e| e.start + (lblk - u64::from(e.ee_block))));
        }
        let child = n
            .indexes()
            .take_while(|ix| u64::from(ix.ei_block) <= lblk)
            .last()?
            .leaf;
        let mut buf = vec![0u8; src.block_size()];
        src.read_block(child, &mut buf).ok()?;
        ExtentNode::new(&buf)?.validate(false).ok()?;
        node = buf;
    }
    None
}

/// The most levels [`find_block`] goes down an extent tree.
const MAX_FIND_DEPTH: u16 = 8;

fn find_in_block_map<S: BlockSource>(src: &mut S, i_block: &[u8], lblk: u64) -> Option<u64> {
    let word = |k: usize| u64::from(le_u32(i_block, 4 * k));
    if lblk < NDIR_BLOCKS as u64 {
        return Some(word(lblk as usize));
    }
    let per = (src.block_size() / 4) as u64;
    let mut rel = lblk - NDIR_BLOCKS as u64;
    let mut slot_level = None;
    for (slot, level) in [(IND_BLOCK, 1u32), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
        let span = per.saturating_pow(level);
        if rel < span || level == 3 {
            slot_level = Some((slot, level));
            break;
        }
        rel -= span;
    }
    let (slot, levels) = slot_level?;
    let mut blk = word(slot);
    let mut buf = vec![0u8; src.block_size()];
    for l in (0..levels).rev() {
        if blk == 0 {
            return Some(0);
        }
        if !src.holds(blk) {
            return None;
        }
        src.read_block(blk, &mut buf).ok()?;
        let k = (rel / per.pow(l)) % per;
        blk = u64::from(le_u32(&buf, 4 * k as usize));
    }
    Some(blk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_le_u32;
    use crate::extent::{encode_extent, encode_index, put_entry, put_header};

    const BS: usize = 1024;

    /// Records everything a walk shows.
    struct Log<'a> {
        src: SliceSource<'a>,
        seen: Vec<String>,
        skip: Option<u64>,
    }

    impl BlockSource for Log<'_> {
        type Error = OutsideImage;
        fn block_size(&self) -> usize {
            BS
        }
        fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> Result<(), OutsideImage> {
            self.src.read_block(blk, buf)
        }
    }

    impl ExtentVisitor for Log<'_> {
        type Place = u16;
        type Break = String;
        fn leaf(&mut self, at: &mut u16, e: WalkEntry) -> Result<(), String> {
            self.seen
                .push(format!("leaf@{at} {}+{}->{}", e.lblk, e.len, e.pblk));
            Ok(())
        }
        fn index(&mut self, _: &mut u16, level: u16, e: WalkEntry) -> Result<Option<u16>, String> {
            self.seen
                .push(format!("index {}+{}->{}", e.lblk, e.len, e.pblk));
            Ok((self.skip != Some(e.pblk)).then_some(level + 1))
        }
        fn unreadable(&mut self, blk: u64, _: OutsideImage) -> String {
            format!("unreadable {blk}")
        }
        fn cycle(&mut self, blk: u64) -> String {
            format!("cycle {blk}")
        }
        fn done(&mut self, at: u16, blk: Option<u64>) -> Result<(), String> {
            self.seen.push(format!("done@{at} {blk:?}"));
            Ok(())
        }
    }

    impl BlockMapVisitor for Log<'_> {
        fn data(&mut self, blk: u64, lblk: u64, parent: u64) {
            self.seen.push(format!("data {lblk}->{blk} in {parent}"));
        }
        fn map_block(&mut self, blk: u64, level: u32, lblk: u64, _: u64) -> MapStep {
            self.seen.push(format!("map L{level} {lblk} at {blk}"));
            if self.skip == Some(blk) {
                MapStep::Skip
            } else {
                MapStep::Descend
            }
        }
        fn unreadable(&mut self, blk: u64, _: OutsideImage) {
            self.seen.push(format!("unreadable {blk}"));
        }
    }

    fn leaf_block(image: &mut [u8], blk: usize, extents: &[(u32, u16, u64)]) {
        let node = &mut image[blk * BS..(blk + 1) * BS];
        put_header(node, extents.len() as u16, 84, 0);
        for (k, &(l, n, p)) in extents.iter().enumerate() {
            put_entry(node, k, &encode_extent(l, n, false, p));
        }
    }

    #[test]
    fn an_extent_tree_is_walked_in_order_with_index_ranges() {
        let mut image = vec![0u8; 16 * BS];
        leaf_block(&mut image, 5, &[(0, 2, 100)]);
        leaf_block(&mut image, 6, &[(10, 1, 200), (11, 1, 300)]);
        let mut root = [0u8; 60];
        put_header(&mut root, 2, 4, 1);
        put_entry(&mut root, 0, &encode_index(0, 5));
        put_entry(&mut root, 1, &encode_index(10, 6));
        let mut v = Log {
            src: SliceSource::new(&image, BS),
            seen: Vec::new(),
            skip: None,
        };
        walk_extent_tree(&mut v, &root, 20, 0).unwrap();
        assert_eq!(
            v.seen,
            [
                "index 0+10->5",
                "leaf@1 0+2->100",
                "done@1 Some(5)",
                "index 10+10->6",
                "leaf@1 10+1->200",
                "leaf@1 11+1->300",
                "done@1 Some(6)",
                "done@0 None",
            ]
        );
    }

    #[test]
    fn a_looping_or_unreadable_extent_tree_stops_the_walk() {
        let mut image = vec![0u8; 8 * BS];
        // Block 3 is an index node pointing at itself.
        let node = &mut image[3 * BS..4 * BS];
        put_header(node, 1, 84, 1);
        put_entry(node, 0, &encode_index(0, 3));
        let mut root = [0u8; 60];
        put_header(&mut root, 1, 4, 2);
        put_entry(&mut root, 0, &encode_index(0, 3));
        let mut v = Log {
            src: SliceSource::new(&image, BS),
            seen: Vec::new(),
            skip: None,
        };
        assert_eq!(walk_extent_tree(&mut v, &root, 1, 0), Err("cycle 3".into()));
        put_entry(&mut root, 0, &encode_index(0, 99));
        assert_eq!(
            walk_extent_tree(&mut v, &root, 1, 0),
            Err("unreadable 99".into())
        );
    }

    #[test]
    fn find_block_follows_the_one_path_that_holds_a_block() {
        let mut image = vec![0u8; 16 * BS];
        leaf_block(&mut image, 5, &[(0, 2, 100)]);
        leaf_block(&mut image, 6, &[(10, 1, 200)]);
        let mut root = [0u8; 60];
        put_header(&mut root, 2, 4, 1);
        put_entry(&mut root, 0, &encode_index(0, 5));
        put_entry(&mut root, 1, &encode_index(10, 6));
        let mut src = SliceSource::new(&image, BS);
        assert_eq!(find_block(&mut src, &root, true, 1), Some(101));
        assert_eq!(find_block(&mut src, &root, true, 10), Some(200));
        assert_eq!(find_block(&mut src, &root, true, 5), Some(0));
        let mut i_block = [0u8; 60];
        put_le_u32(&mut i_block, 4 * DIND_BLOCK, 9);
        put_le_u32(&mut image, 9 * BS + 4, 10);
        put_le_u32(&mut image, 10 * BS + 8, 77);
        let mut src = SliceSource::new(&image, BS);
        let lblk = 12 + 256 + 256 + 2;
        assert_eq!(find_block(&mut src, &i_block, false, lblk), Some(77));
        assert_eq!(find_block(&mut src, &i_block, false, 12), Some(0));
        put_le_u32(&mut i_block, 4 * DIND_BLOCK, 999);
        assert_eq!(find_block(&mut src, &i_block, false, lblk), None);
    }

    /// An image in memory that a block map edit cuts at `keep`.
    struct Cut {
        image: Vec<u8>,
        keep: u64,
        written: Vec<u64>,
    }

    impl BlockSource for Cut {
        type Error = OutsideImage;
        fn block_size(&self) -> usize {
            BS
        }
        fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> Result<(), OutsideImage> {
            SliceSource::new(&self.image, BS).read_block(blk, buf)
        }
    }

    impl BlockMapEditor for Cut {
        fn pointer(&mut self, blk: u64, _level: u32, lblk: u64) -> Result<u64, OutsideImage> {
            Ok(if lblk >= self.keep { 0 } else { blk })
        }
        fn map_done(&mut self, blk: u64, _level: u32, maps_any: bool) -> u64 {
            if maps_any {
                blk
            } else {
                0
            }
        }
        fn write_block(&mut self, blk: u64, bytes: &[u8]) -> Result<(), OutsideImage> {
            let at = blk as usize * BS;
            self.image[at..at + BS].copy_from_slice(bytes);
            self.written.push(blk);
            Ok(())
        }
    }

    #[test]
    fn a_block_map_edit_rewrites_pointers_and_drops_emptied_map_blocks() {
        let mut image = vec![0u8; 16 * BS];
        let mut i_block = [0u8; 60];
        put_le_u32(&mut i_block, 4 * 11, 7);
        put_le_u32(&mut i_block, 4 * IND_BLOCK, 8);
        put_le_u32(&mut i_block, 4 * DIND_BLOCK, 9);
        // Logical 12 and 13 in the single indirect block.
        put_le_u32(&mut image, 8 * BS, 11);
        put_le_u32(&mut image, 8 * BS + 4, 12);
        put_le_u32(&mut image, 9 * BS, 10);
        put_le_u32(&mut image, 10 * BS, 13);
        let mut cut = Cut {
            image,
            keep: 13,
            written: Vec::new(),
        };
        assert!(edit_block_map(&mut cut, &mut i_block).unwrap());
        // Block 7 (logical 11) and block 11 (logical 12) stay; the rest goes.
        assert_eq!(le_u32(&i_block, 4 * 11), 7);
        assert_eq!(le_u32(&i_block, 4 * IND_BLOCK), 8);
        assert_eq!(le_u32(&i_block, 4 * DIND_BLOCK), 0);
        assert_eq!(cut.written, [8]);
        assert_eq!(le_u32(&cut.image, 8 * BS), 11);
        assert_eq!(le_u32(&cut.image, 8 * BS + 4), 0);
        // Nothing left to cut: the map is unchanged.
        assert!(!edit_block_map(&mut cut, &mut i_block).unwrap());
    }

    #[test]
    fn a_block_map_is_walked_map_block_first_and_can_skip_a_tree() {
        let mut image = vec![0u8; 16 * BS];
        let mut i_block = [0u8; 60];
        put_le_u32(&mut i_block, 0, 7);
        put_le_u32(&mut i_block, 4 * IND_BLOCK, 8);
        put_le_u32(&mut i_block, 4 * DIND_BLOCK, 9);
        put_le_u32(&mut image, 8 * BS + 4, 11);
        put_le_u32(&mut image, 9 * BS, 10);
        put_le_u32(&mut image, 10 * BS, 12);
        let mut v = Log {
            src: SliceSource::new(&image, BS),
            seen: Vec::new(),
            skip: None,
        };
        walk_block_map(&mut v, &i_block);
        assert_eq!(
            v.seen,
            [
                "data 0->7 in 0",
                "map L1 12 at 8",
                "data 13->11 in 8",
                "map L2 268 at 9",
                "map L1 268 at 10",
                "data 268->12 in 10",
            ]
        );
        v.seen.clear();
        v.skip = Some(8);
        put_le_u32(&mut i_block, 4 * TIND_BLOCK, 999);
        walk_block_map(&mut v, &i_block);
        assert_eq!(v.seen[1], "map L1 12 at 8");
        assert_eq!(v.seen[2], "map L2 268 at 9");
        assert_eq!(v.seen.last().map(String::as_str), Some("unreadable 999"));
    }
}
