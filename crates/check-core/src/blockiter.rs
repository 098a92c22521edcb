//! Every block an inode owns, in the library's iteration order: for a
//! block map the direct blocks, then each indirect block before its
//! entries; for an extent tree each index block before its subtree. The
//! EA block is not included. Used where only ownership matters (pass 1B,
//! the journal, the post-pass).

use std::io;

use ext4_layout::extent::ExtentNode;
use ext4_layout::inode::{flags, Inode};
use ext4_layout::walk::{self, BlockMapVisitor, BlockSource, ExtentVisitor, MapStep, WalkEntry};

use crate::io::Io;

/// A walk that hands every block to a callback and notes whether the
/// mapping could be walked to its end.
struct Owned<'a, 'f> {
    io: &'a mut Io<'f>,
    f: &'a mut dyn FnMut(u64, i64),
    ok: bool,
}

impl BlockSource for Owned<'_, '_> {
    type Error = io::Error;

    fn block_size(&self) -> usize {
        self.io.block_size()
    }

    fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> io::Result<()> {
        self.io.read_block(blk, buf)
    }
}

impl BlockMapVisitor for Owned<'_, '_> {
    fn data(&mut self, blk: u64, lblk: u64, _parent: u64) {
        (self.f)(blk, lblk as i64);
    }

    fn map_block(&mut self, blk: u64, _level: u32, _lblk: u64, _parent: u64) -> MapStep {
        (self.f)(blk, -1);
        if self.io.holds(blk) {
            MapStep::Descend
        } else {
            self.ok = false;
            MapStep::Abandon
        }
    }

    fn unreadable(&mut self, _blk: u64, _err: io::Error) {
        self.ok = false;
    }
}

impl ExtentVisitor for Owned<'_, '_> {
    type Place = ();
    type Break = ();

    fn leaf(&mut self, _: &mut (), e: WalkEntry) -> Result<(), ()> {
        for j in 0..e.len {
            (self.f)(e.pblk + j, (e.lblk + j) as i64);
        }
        Ok(())
    }

    fn index(&mut self, _: &mut (), _level: u16, e: WalkEntry) -> Result<Option<()>, ()> {
        (self.f)(e.pblk, -1);
        if self.io.holds(e.pblk) {
            Ok(Some(()))
        } else {
            Err(())
        }
    }

    fn unreadable(&mut self, _blk: u64, _err: io::Error) {}

    fn cycle(&mut self, _blk: u64) {}

    fn node(&mut self, _: &mut (), _blk: u64, bytes: &[u8]) -> Result<bool, ()> {
        match ExtentNode::new(bytes).map(|n| n.validate(false)) {
            Some(Ok(())) => Ok(true),
            _ => Err(()),
        }
    }
}

/// Calls `f(block, logical)` for every block of `inode` (`logical` is -1
/// for map and index blocks). Returns false if the walk hit an
/// unreadable or invalid map block (the blocks before it were visited).
pub fn for_each_block(io: &mut Io<'_>, inode: &Inode<'_>, f: &mut dyn FnMut(u64, i64)) -> bool {
    if inode.has_flag(flags::INLINE_DATA) {
        return true;
    }
    let ib = inode.i_block();
    let mut v = Owned { io, f, ok: true };
    if inode.has_flag(flags::EXTENTS) {
        if ib.iter().all(|&b| b == 0) {
            return true;
        }
        if !journal_extent_ok(inode) {
            return false;
        }
        return walk::walk_extent_tree(&mut v, ib, u64::MAX, ()).is_ok();
    }
    walk::walk_block_map(&mut v, ib);
    v.ok
}

/// Maps logical block `lblk` of an inode to its physical block (0 for a
/// hole). `None` when the map cannot be read.
pub fn bmap(io: &mut Io<'_>, inode: &Inode<'_>, lblk: u64) -> Option<u64> {
    walk::find_block(io, inode.i_block(), inode.has_flag(flags::EXTENTS), lblk)
}

/// Whether an extent-mapped inode's root header is valid.
pub(crate) fn journal_extent_ok(inode: &Inode<'_>) -> bool {
    ExtentNode::new(inode.i_block()).is_some_and(|n| n.validate(true).is_ok())
}
