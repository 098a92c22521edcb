//! Reading inode tables and classifying each inode before it is checked:
//! in a bad block, checksum failure, or part of a "garbage" block.

use ext4_layout::extent::ExtentNode;
use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::{flags, Inode, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG};

use super::types::{Chunk, ScanStatus, Worker};
use crate::ctx::AbortAt;
use crate::problem::{Code, Finding, Pass};

/// Whether an inode makes its block look like garbage: a bad checksum, a
/// broken extent header, or a block map with more than seven pointers out
/// of range.
fn insane(w: &Worker<'_, '_, '_>, inode: &Inode<'_>, csum_bad: bool) -> bool {
    if csum_bad {
        return true;
    }
    if inode.has_flag(flags::EXTENTS) {
        return ExtentNode::new(inode.i_block()).is_none_or(|n| n.validate(true).is_err());
    }
    if inode.has_flag(flags::INLINE_DATA) {
        return false;
    }
    let t = inode.i_mode() & S_IFMT;
    if t != S_IFREG && t != S_IFDIR && t != S_IFLNK {
        return false;
    }
    if t == S_IFLNK && inode.size() <= 60 {
        return false;
    }
    if inode.i_links_count() == 0 {
        return false;
    }
    let geo = &w.p.fs.geo;
    let bad = (0..15)
        .map(|i| u64::from(inode.i_block_word(i)))
        .filter(|&b| b != 0 && !geo.block_in_range(b))
        .count();
    bad > 7
}

/// Reads blocks `i..j` of a chunk whose whole read failed, one block at a
/// time, and the blocks that still fail one sector at a time (the
/// sectors that fail read as zeros); each such block is a finding, which
/// the repair fixes by writing the block as it was read here.
fn salvage_run(
    w: &mut Worker<'_, '_, '_>,
    group: u32,
    first_blk: u64,
    i: usize,
    j: usize,
    buf: &mut [u8],
) {
    let fs = w.p.fs;
    let bs = fs.geo.block_size as usize;
    for k in i..j {
        let blk = first_blk + k as u64;
        let dst = &mut buf[k * bs..(k + 1) * bs];
        if w.io.read_blocks(blk, dst).is_ok() {
            continue;
        }
        let failed = crate::io::salvage_block(fs, blk, dst);
        w.out.findings.push(
            Finding::new(Code::InodeTableBlockUnreadable)
                .blk(blk)
                .group(group)
                .sectors(failed as u64, bs.div_ceil(crate::io::SECTOR) as u64),
        );
    }
}

/// Which inodes of a chunk to check.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Only {
    /// Every inode except the bad blocks inode.
    AllButBadBlocksInode,
    /// Just the bad blocks inode.
    BadBlocksInode,
}

/// Reads one chunk of an inode table and checks each inode in it, first
/// asking for the blocks the checks will read on their own when
/// `read_ahead` says reads are missing the cache.
pub(crate) fn scan_chunk(w: &mut Worker<'_, '_, '_>, chunk: Chunk, only: Only, read_ahead: bool) {
    let fs = w.p.fs;
    let geo = &fs.geo;
    let bs = geo.block_size as usize;
    let isz = geo.inode_size as usize;
    let ipb = geo.inodes_per_block as usize;
    let table = fs.gd(chunk.group).inode_table();
    let first_blk = table + u64::from(chunk.first) / ipb as u64;
    let nblocks = (chunk.count as usize).div_ceil(ipb);
    let mut buf = vec![0u8; nblocks * bs];
    let base_ino = chunk.group * geo.inodes_per_group + chunk.first + 1;
    // Read whole runs of good blocks; blocks listed as bad are not read.
    let mut bad_blk = vec![false; nblocks];
    for (i, b) in bad_blk.iter_mut().enumerate() {
        *b =
            w.p.bad_blocks
                .binary_search(&(first_blk + i as u64))
                .is_ok();
    }
    let mut i = 0;
    while i < nblocks {
        if bad_blk[i] {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < nblocks && !bad_blk[j] {
            j += 1;
        }
        if let Err(e) =
            w.io.read_blocks(first_blk + i as u64, &mut buf[i * bs..j * bs])
        {
            if w.p.repairing {
                // As e2fsck -y goes on past an unreadable block (and
                // rewrites it), block by block, and beyond it, sector by
                // sector: what can be read is kept.
                salvage_run(w, chunk.group, first_blk, i, j, &mut buf);
                i = j;
                continue;
            }
            let bad = crate::fs::failed_block(&e)
                .unwrap_or(first_blk + i as u64)
                .saturating_sub(first_blk) as usize;
            w.out.abort = AbortAt::earliest(
                w.out.abort.take(),
                Some(AbortAt::new(
                    Pass::P1,
                    base_ino + (bad * ipb) as u32,
                    format!("{e} while reading the inode table of group {}", chunk.group),
                )),
            );
            return;
        }
        i = j;
    }
    let metadata_csum = fs.metadata_csum();
    let seed = geo.csum_seed;
    let mut csum_bad = vec![false; chunk.count as usize];
    for (k, bad) in csum_bad.iter_mut().enumerate() {
        let raw = &buf[k * isz..(k + 1) * isz];
        if metadata_csum {
            if let Some(ino) = Inode::new(raw) {
                *bad = !ino.checksum_ok(seed, base_ino + k as u32);
            }
        }
    }
    if read_ahead {
        prefetch_side_blocks(w, &buf, &csum_bad, &bad_blk);
    }
    for (b, &block_bad) in bad_blk.iter().enumerate() {
        let lo = b * ipb;
        let hi = ((b + 1) * ipb).min(chunk.count as usize);
        // The garbage test looks at a block's inodes until more than half
        // of a full block's worth are insane.
        let mut garbage = false;
        if ipb >= 2 && !block_bad {
            let mut badness = 0;
            for (k, &cb) in csum_bad.iter().enumerate().take(hi).skip(lo) {
                let raw = &buf[k * isz..(k + 1) * isz];
                if let Some(inode) = Inode::new(raw) {
                    if insane(w, &inode, cb) {
                        badness += 1;
                        if badness > ipb / 2 {
                            garbage = true;
                            break;
                        }
                    }
                }
            }
        }
        let csums_ok = !csum_bad[lo..hi].iter().any(|&x| x);
        for (k, &cb) in csum_bad.iter().enumerate().take(hi).skip(lo) {
            let ino = base_ino + k as u32;
            if (ino == 1) != (only == Only::BadBlocksInode) {
                continue;
            }
            let raw = &buf[k * isz..(k + 1) * isz];
            let mut status = if block_bad {
                ScanStatus::BadBlock
            } else if !csums_ok && cb {
                ScanStatus::CsumInvalid
            } else {
                ScanStatus::Ok
            };
            if garbage && status != ScanStatus::BadBlock {
                status = ScanStatus::Garbage;
            }
            w.check_inode(ino, raw, status, cb);
            w.p.maps.inode_done.set_release(u64::from(ino - 1));
            if w.out.abort.is_some() {
                return;
            }
        }
    }
}

/// The blocks the check of one inode reads on its own, one at a time: an
/// extended-attribute block, a slow symlink's target, the extent tree's
/// nodes below the root, the first level of a block map. Only in-use
/// inodes of the three types that map blocks; nothing is checked here.
fn side_blocks(inode: &Inode<'_>, is_64bit: bool, out: &mut Vec<u64>) {
    if inode.i_links_count() == 0 {
        return;
    }
    let acl = inode.file_acl(is_64bit);
    if acl != 0 {
        out.push(acl);
    }
    let t = inode.i_mode() & S_IFMT;
    if t != S_IFREG && t != S_IFDIR && t != S_IFLNK {
        return;
    }
    if inode.has_flag(flags::INLINE_DATA) || (t == S_IFLNK && inode.size() <= 60) {
        return;
    }
    if inode.has_flag(flags::EXTENTS) {
        let Some(root) = ExtentNode::new(inode.i_block()).filter(|n| n.validate(true).is_ok())
        else {
            return;
        };
        if !root.is_leaf() {
            out.extend(root.indexes().map(|x| x.leaf));
        } else if t == S_IFLNK {
            out.extend(root.leaves().take(1).map(|e| e.start));
        }
    } else if t == S_IFLNK {
        out.push(u64::from(inode.i_block_word(0)));
    } else {
        out.extend((12..15).map(|k| u64::from(inode.i_block_word(k))));
    }
}

/// Starts reading the blocks the checks of a chunk's inodes will read one
/// at a time ([`side_blocks`]), in address order and joined where
/// adjacent, so that they are on their way together instead of costing
/// the device a round trip each when their inode comes up. A hint:
/// inodes in bad blocks or whose checksum failed are left out, and
/// blocks out of range are dropped.
fn prefetch_side_blocks(w: &Worker<'_, '_, '_>, buf: &[u8], csum_bad: &[bool], bad_blk: &[bool]) {
    let fs = w.p.fs;
    let geo = &fs.geo;
    let isz = geo.inode_size as usize;
    let ipb = geo.inodes_per_block as usize;
    let is_64bit = geo.incompat.contains(IncompatFeatures::BIT64);
    let mut blocks = Vec::new();
    for (k, &cb) in csum_bad.iter().enumerate() {
        if cb || bad_blk.get(k / ipb.max(1)).copied().unwrap_or(true) {
            continue;
        }
        if let Some(inode) = buf.get(k * isz..(k + 1) * isz).and_then(Inode::new) {
            side_blocks(&inode, is_64bit, &mut blocks);
        }
    }
    blocks.retain(|&b| b != 0 && geo.block_in_range(b));
    fs.prefetch_blocks(&mut blocks);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4_layout::extent::{encode_extent, encode_index, put_entry, put_header};
    use ext4_layout::inode::{field, i_block_word, InodeMut};

    fn inode(mode: u16, size: u64, f: impl FnOnce(&mut InodeMut<'_>)) -> Vec<u8> {
        let mut raw = vec![0u8; 256];
        let mut w = InodeMut::new(&mut raw);
        w.set(field::i_mode, mode);
        w.set(field::i_links_count, 1);
        w.set_size(size);
        f(&mut w);
        raw
    }

    fn side(raw: &[u8]) -> Vec<u64> {
        let mut out = Vec::new();
        side_blocks(&Inode::new(raw).expect("an inode"), true, &mut out);
        out
    }

    #[test]
    fn side_blocks_are_the_ones_a_check_reads_alone() {
        // An extent tree of depth 1: its two leaves, and the EA block.
        let tree = inode(0o100644, 1 << 30, |w| {
            w.change_flags(flags::EXTENTS, 0);
            w.set_file_acl(900);
            let root = w.i_block();
            put_header(root, 2, 4, 1);
            put_entry(root, 0, &encode_index(0, 500));
            put_entry(root, 1, &encode_index(1000, 7_000_000_000));
        });
        assert_eq!(side(&tree), vec![900, 500, 7_000_000_000]);

        // A depth-0 file reads nothing more; a slow symlink its target.
        let flat = inode(0o100644, 4096, |w| {
            w.change_flags(flags::EXTENTS, 0);
            let root = w.i_block();
            put_header(root, 1, 4, 0);
            put_entry(root, 0, &encode_extent(0, 1, false, 600));
        });
        assert!(side(&flat).is_empty());
        let link = inode(0o120777, 100, |w| {
            w.change_flags(flags::EXTENTS, 0);
            let root = w.i_block();
            put_header(root, 1, 4, 0);
            put_entry(root, 0, &encode_extent(0, 1, false, 601));
        });
        assert_eq!(side(&link), vec![601]);

        // A block map: the first level of its indirect blocks.
        let mapped = inode(0o40755, 1 << 20, |w| {
            for (k, b) in [(0, 10), (12, 20), (13, 21), (14, 0)] {
                i_block_word(k).set(w.bytes(), b);
            }
        });
        assert_eq!(side(&mapped), vec![20, 21, 0]);

        // Fast symlinks, devices and unused inodes read nothing.
        let fast = inode(0o120777, 20, |w| i_block_word(0).set(w.bytes(), 77));
        assert!(side(&fast).is_empty());
        let dev = inode(0o20644, 0, |w| i_block_word(12).set(w.bytes(), 77));
        assert!(side(&dev).is_empty());
        let unused = inode(0o100644, 1 << 20, |w| {
            w.set(field::i_links_count, 0);
            w.set_file_acl(900);
        });
        assert!(side(&unused).is_empty());
    }
}
