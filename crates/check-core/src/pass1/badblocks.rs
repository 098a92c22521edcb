//! The bad blocks inode (inode 1): its list is read before pass 1, and
//! its own blocks are checked in pass 1.

use ext4_layout::blockmap::IndirectBlock;
use ext4_layout::inode::Inode;

use super::types::{Cur, Worker};
use crate::fs::Fs;
use crate::io::Io;
use crate::problem::{Code, Finding};

/// Reads the list of bad blocks from inode 1, ignoring out-of-range
/// entries as e2fsck does. Returns the sorted list and a note if the list
/// could not be read completely.
pub(crate) fn read_bad_blocks_list(fs: &Fs, io: &mut Io<'_>) -> (Vec<u64>, Option<String>) {
    let mut ib = vec![0u8; fs.geo.inode_size as usize];
    if io.read_inode(1, &mut ib).is_err() {
        return (Vec::new(), Some("cannot read the bad blocks inode".into()));
    }
    let Some(inode) = Inode::new(&ib) else {
        return (Vec::new(), None);
    };
    let mut list = Vec::new();
    let mut note = None;
    let geo = &fs.geo;
    for i in 0..12 {
        let b = u64::from(inode.i_block_word(i));
        if b != 0 && geo.block_in_range(b) {
            list.push(b);
        }
    }
    let mut buf = vec![0u8; fs.block_size()];
    for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
        let b = u64::from(inode.i_block_word(slot));
        if b == 0 {
            continue;
        }
        if !collect(fs, io, b, level, &mut list, &mut buf) {
            note = Some(
                "the bad blocks inode has an illegal indirect block; ignoring the rest of its list"
                    .into(),
            );
            break;
        }
    }
    list.sort_unstable();
    list.dedup();
    (list, note)
}

fn collect(
    fs: &Fs,
    io: &mut Io<'_>,
    blk: u64,
    level: u32,
    list: &mut Vec<u64>,
    buf: &mut [u8],
) -> bool {
    if !fs.geo.block_in_range(blk) || io.read_blocks(blk, buf).is_err() {
        return false;
    }
    let entries: Vec<u64> = IndirectBlock::new(buf).iter().map(u64::from).collect();
    for b in entries {
        if b == 0 {
            continue;
        }
        if level == 1 {
            if fs.geo.block_in_range(b) {
                list.push(b);
            }
        } else {
            let mut child = vec![0u8; buf.len()];
            if !collect(fs, io, b, level - 1, list, &mut child) {
                return false;
            }
        }
    }
    true
}

impl Worker<'_, '_, '_> {
    /// Checks the blocks listed in the bad blocks inode.
    pub(super) fn check_bad_blocks_inode(&mut self, cur: &Cur<'_>) {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let inode = cur.inode;
        let mut bbcheck = false;
        let mut failed = None;
        for i in 0..12 {
            let b = u64::from(inode.i_block_word(i));
            if b != 0 {
                self.bad_block(b, i as i64, &inode, &mut bbcheck);
            }
        }
        let mut buf = vec![0u8; fs.block_size()];
        for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
            let b = u64::from(inode.i_block_word(slot));
            if b == 0 {
                continue;
            }
            self.bad_block(b, -(level as i64), &inode, &mut bbcheck);
            if !geo.block_in_range(b) || self.io.read_blocks(b, &mut buf).is_err() {
                failed = Some(b);
                continue;
            }
            let entries: Vec<u64> = IndirectBlock::new(&buf).iter().map(u64::from).collect();
            for e in entries {
                if e == 0 {
                    continue;
                }
                if level == 1 {
                    self.bad_block(e, 0, &inode, &mut bbcheck);
                } else {
                    // Deeper lists are treated as map blocks then data.
                    self.bad_block(e, -1, &inode, &mut bbcheck);
                    let mut child = vec![0u8; fs.block_size()];
                    if geo.block_in_range(e) && self.io.read_blocks(e, &mut child).is_ok() {
                        let inner: Vec<u64> =
                            IndirectBlock::new(&child).iter().map(u64::from).collect();
                        for x in inner.into_iter().filter(|&x| x != 0) {
                            self.bad_block(x, 0, &inode, &mut bbcheck);
                        }
                    } else {
                        failed = Some(e);
                    }
                }
            }
        }
        if let Some(b) = failed {
            self.abort(
                1,
                format!("the bad blocks inode has an illegal or unreadable indirect block {b}"),
            );
            return;
        }
        if bbcheck {
            self.report(Finding::new(Code::BbinodeBadMetablock).ino(1));
            self.abort(1, "a bad block is used as file system metadata");
        }
    }

    fn bad_block(&mut self, blk: u64, blockcnt: i64, inode: &Inode<'_>, bbcheck: &mut bool) {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let maps = self.p.maps;
        if blk == 0 {
            return;
        }
        if !geo.block_in_range(blk) {
            self.report(Finding::new(Code::BadBlockInBadBlockInode).ino(1).blk(blk));
            return;
        }
        let c = blk >> geo.cluster_bits;
        if blockcnt < 0 {
            if maps.metadata.get(blk) || maps.block_found.get(c) {
                *bbcheck = true;
                self.report(Finding::new(Code::BbinodeBadMetablock).ino(1).blk(blk));
            } else {
                self.mark_block_used(blk);
            }
            return;
        }
        if !maps.block_found.test_and_set(c) {
            return;
        }
        // Already claimed: see which metadata it hits.
        for g in fs.groups() {
            let first = geo.group_first_block(g).0;
            if geo.group_has_super(g) {
                if blk == first && g.0 == 0 {
                    self.report(
                        Finding::new(Code::BbinodeBadMetablock)
                            .ino(1)
                            .blk(blk)
                            .detail("primary superblock"),
                    );
                    return;
                }
                if blk > first && blk <= first + u64::from(geo.desc_blocks) && g.0 == 0 {
                    self.report(
                        Finding::new(Code::BbinodeBadMetablock)
                            .ino(1)
                            .blk(blk)
                            .detail("primary group descriptors"),
                    );
                    return;
                }
                if blk == first || (blk > first && blk <= first + u64::from(geo.desc_blocks)) {
                    return;
                }
            }
            let gd = fs.gd(g.0);
            if blk == gd.block_bitmap() {
                self.report(Finding::new(Code::BlockBitmapConflict).group(g.0).blk(blk));
                return;
            }
            if blk == gd.inode_bitmap() {
                self.report(Finding::new(Code::InodeBitmapConflict).group(g.0).blk(blk));
                return;
            }
            let it = gd.inode_table();
            if blk >= it && blk < it + u64::from(geo.inode_blocks_per_group) {
                return;
            }
        }
        if (12..15).any(|i| u64::from(inode.i_block_word(i)) == blk) {
            *bbcheck = true;
        }
    }
}
