//! Every block an inode owns, in the library's iteration order: for a
//! block map the direct blocks, then each indirect block before its
//! entries; for an extent tree each index block before its subtree. The
//! EA block is not included. Used where only ownership matters (pass 1B).

use ext4_layout::blockmap::IndirectBlock;
use ext4_layout::extent::ExtentNode;
use ext4_layout::inode::{flags, Inode};

use crate::io::Io;

/// Calls `f(block, logical)` for every block of `inode` (`logical` is -1
/// for map and index blocks). Returns false if the walk hit an
/// unreadable or invalid map block (the blocks before it were visited).
pub fn for_each_block(io: &mut Io<'_>, inode: &Inode<'_>, f: &mut dyn FnMut(u64, i64)) -> bool {
    if inode.has_flag(flags::INLINE_DATA) {
        return true;
    }
    if inode.has_flag(flags::EXTENTS) {
        let ib = inode.i_block();
        if ib.iter().all(|&b| b == 0) {
            return true;
        }
        let Some(root) = ExtentNode::new(ib).filter(|n| n.validate(true).is_ok()) else {
            return false;
        };
        let depth = root.eh_depth();
        return walk_extent(io, ib, depth, f, 0);
    }
    for i in 0..12 {
        let b = u64::from(inode.i_block_word(i));
        if b != 0 {
            f(b, i as i64);
        }
    }
    let per = i64::from(io.fs.geo.block_size / 4);
    let mut lblk = 12i64;
    let mut ok = true;
    for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
        let b = u64::from(inode.i_block_word(slot));
        if b == 0 {
            lblk += per.pow(level);
            continue;
        }
        ok &= walk_ind(io, b, level, &mut lblk, f);
    }
    ok
}

fn walk_ind(
    io: &mut Io<'_>,
    blk: u64,
    level: u32,
    lblk: &mut i64,
    f: &mut dyn FnMut(u64, i64),
) -> bool {
    f(blk, -1);
    let geo = &io.fs.geo;
    let per = i64::from(geo.block_size / 4);
    if !geo.block_in_range(blk) {
        return false;
    }
    let mut buf = vec![0u8; geo.block_size as usize];
    if io.read_blocks(blk, &mut buf).is_err() {
        return false;
    }
    let entries: Vec<u64> = IndirectBlock::new(&buf).iter().map(u64::from).collect();
    for b in entries {
        if level == 1 {
            if b != 0 {
                f(b, *lblk);
            }
            *lblk += 1;
        } else if b == 0 {
            *lblk += per.pow(level - 1);
        } else if !walk_ind(io, b, level - 1, lblk, f) {
            return false;
        }
    }
    true
}

fn walk_extent(
    io: &mut Io<'_>,
    node: &[u8],
    depth: u16,
    f: &mut dyn FnMut(u64, i64),
    guard: u32,
) -> bool {
    let Some(n) = ExtentNode::new(node) else {
        return false;
    };
    if guard > 8 {
        return false;
    }
    if depth == 0 {
        for e in n.leaves() {
            for j in 0..u64::from(e.len()) {
                f(e.start + j, i64::from(e.ee_block) + j as i64);
            }
        }
        return true;
    }
    let bs = io.fs.geo.block_size as usize;
    for ix in n.indexes() {
        f(ix.leaf, -1);
        if !io.fs.geo.block_in_range(ix.leaf) {
            return false;
        }
        let mut buf = vec![0u8; bs];
        if io.read_blocks(ix.leaf, &mut buf).is_err() {
            return false;
        }
        if ExtentNode::new(&buf).is_none_or(|c| c.validate(false).is_err()) {
            return false;
        }
        if !walk_extent(io, &buf, depth - 1, f, guard + 1) {
            return false;
        }
    }
    true
}

/// Maps logical block `lblk` of an inode to its physical block (0 for a
/// hole). `None` when the map cannot be read.
pub fn bmap(io: &mut Io<'_>, inode: &Inode<'_>, lblk: u64) -> Option<u64> {
    let geo = &io.fs.geo;
    let bs = geo.block_size as usize;
    if inode.has_flag(flags::EXTENTS) {
        let mut node = inode.i_block().to_vec();
        let root = ExtentNode::new(&node)?;
        root.validate(true).ok()?;
        let mut depth = root.eh_depth();
        let mut guard = 0;
        loop {
            let n = ExtentNode::new(&node)?;
            if depth == 0 {
                for e in n.leaves() {
                    if lblk >= u64::from(e.ee_block) && lblk < e.logical_end() {
                        return Some(e.start + (lblk - u64::from(e.ee_block)));
                    }
                }
                return Some(0);
            }
            let mut next = None;
            for ix in n.indexes() {
                if u64::from(ix.ei_block) <= lblk {
                    next = Some(ix.leaf);
                } else {
                    break;
                }
            }
            let b = next?;
            let mut buf = vec![0u8; bs];
            io.read_blocks(b, &mut buf).ok()?;
            ExtentNode::new(&buf)?.validate(false).ok()?;
            node = buf;
            depth -= 1;
            guard += 1;
            if guard > 8 {
                return None;
            }
        }
    }
    if lblk < 12 {
        return Some(u64::from(inode.i_block_word(lblk as usize)));
    }
    let per = u64::from(geo.block_size / 4);
    let mut rel = lblk - 12;
    let (mut blk, levels) = if rel < per {
        (u64::from(inode.i_block_word(12)), 1u32)
    } else {
        rel -= per;
        if rel < per * per {
            (u64::from(inode.i_block_word(13)), 2)
        } else {
            rel -= per * per;
            (u64::from(inode.i_block_word(14)), 3)
        }
    };
    let mut buf = vec![0u8; bs];
    for l in (0..levels).rev() {
        if blk == 0 {
            return Some(0);
        }
        if !geo.block_in_range(blk) {
            return None;
        }
        io.read_blocks(blk, &mut buf).ok()?;
        let idx = (rel / per.pow(l)) % per;
        blk = u64::from(IndirectBlock::new(&buf).get(idx as usize));
    }
    Some(blk)
}

/// Whether an extent-mapped inode's root header is valid.
pub fn journal_extent_ok(inode: &Inode<'_>) -> bool {
    ExtentNode::new(inode.i_block()).is_some_and(|n| n.validate(true).is_ok())
}
