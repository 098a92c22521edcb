//! Reading inode tables and classifying each inode before it is checked:
//! in a bad block, checksum failure, or part of a "garbage" block.

use ext4_layout::extent::ExtentNode;
use ext4_layout::inode::{flags, Inode, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG};

use super::types::{Chunk, ScanStatus, Worker};
use crate::ctx::AbortAt;
use crate::problem::Pass;

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

/// Which inodes of a chunk to check.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Only {
    /// Every inode except the bad blocks inode.
    AllButBadBlocksInode,
    /// Just the bad blocks inode.
    BadBlocksInode,
}

/// Reads one chunk of an inode table and checks each inode in it.
pub(crate) fn scan_chunk(w: &mut Worker<'_, '_, '_>, chunk: Chunk, only: Only) {
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
