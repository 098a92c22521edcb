//! Quota files rewritten with the usage the check found, as e2fsck does
//! when it updates quota information: a fresh v2 (revision 1) quota tree
//! holding every id that owns something or had limits, the limits, grace
//! times and flags of the old file kept where it can still be read.
//!
//! The file format: 1 KiB quota blocks. Block 0 is the header (magic,
//! version, then the grace times, flags, block count and the heads of the
//! free lists). Block 1 is the root of a four-level radix tree over the
//! bytes of the id, most significant first; each tree block holds 256
//! block numbers, and the last level points at data blocks, which start
//! with a 16-byte header and hold 72-byte entries.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use ext4_layout::bytes::{le_u32, put_le_u16, put_le_u32, put_le_u64};
use ext4_layout::inode::Inode;

use super::stage::{Kind, Staging};
use check_core::engine::CheckState;
use check_core::io::Io;
use check_core::pass1::QuotaUse;
use check_core::problem::Finding;

use check_core::quota_file::{
    read_quota_tree, QuotaTree, DATA_HEADER, DEPTH, ENTRY_V1, MAGICS, QT_BLK,
};

const PER_BLOCK: usize = (QT_BLK - DATA_HEADER) / ENTRY_V1;
/// The grace period a new quota file gets (seven days, as quotatools).
const DEFAULT_GRACE: u32 = 7 * 24 * 3600;
/// Quota files larger than this are not read back (their limits are lost).
const MAX_OLD: u64 = 64 << 20;

/// The bytes of a new quota file of type `qtype` holding `usage`, with
/// what `old` kept.
fn build(qtype: usize, old: Option<&QuotaTree>, usage: &BTreeMap<u32, QuotaUse>) -> Vec<u8> {
    let mut ids: BTreeSet<u32> = usage.keys().copied().collect();
    if let Some(o) = old {
        ids.extend(o.entries.keys().copied());
    }
    // Block 0: header; block 1: the root of the tree.
    let mut blocks: Vec<Vec<u8>> = vec![vec![0u8; QT_BLK], vec![0u8; QT_BLK]];
    let mut data_blk = 0u32;
    let mut in_block = PER_BLOCK;
    for id in ids {
        if in_block == PER_BLOCK {
            blocks.push(vec![0u8; QT_BLK]);
            data_blk = (blocks.len() - 1) as u32;
            in_block = 0;
        }
        // The entry.
        let u = usage.get(&id).copied().unwrap_or_default();
        let l = old
            .and_then(|o| o.entries.get(&id))
            .map(|e| e.1)
            .unwrap_or_default();
        {
            let b = &mut blocks[data_blk as usize];
            let at = DATA_HEADER + in_block * ENTRY_V1;
            let e = &mut b[at..at + ENTRY_V1];
            put_le_u32(e, 0, id);
            put_le_u64(e, 8, l.ihard);
            put_le_u64(e, 16, l.isoft);
            put_le_u64(e, 24, u.inodes);
            put_le_u64(e, 32, l.bhard);
            put_le_u64(e, 40, l.bsoft);
            put_le_u64(e, 48, u.space);
            put_le_u64(e, 56, l.btime);
            put_le_u64(e, 64, l.itime);
            // An all-zero entry reads as a free slot: mark it used.
            if e.iter().all(|&x| x == 0) {
                put_le_u64(e, 64, 1);
            }
            in_block += 1;
            put_le_u16(b, 8, in_block as u16);
        }
        // Its path through the tree.
        let mut node = 1usize;
        for depth in 0..DEPTH {
            let slot = ((id >> ((DEPTH - 1 - depth) * 8)) & 0xFF) as usize * 4;
            if depth == DEPTH - 1 {
                put_le_u32(&mut blocks[node], slot, data_blk);
            } else {
                let child = le_u32(&blocks[node], slot);
                node = if child != 0 {
                    child as usize
                } else {
                    blocks.push(vec![0u8; QT_BLK]);
                    let c = blocks.len() - 1;
                    put_le_u32(&mut blocks[node], slot, c as u32);
                    c
                };
            }
        }
    }
    // A data block with room left heads the free-entry list.
    let free_entry = if data_blk != 0 && in_block < PER_BLOCK {
        data_blk
    } else {
        0
    };
    let total = blocks.len() as u32;
    let h = &mut blocks[0];
    put_le_u32(h, 0, MAGICS[qtype]);
    put_le_u32(h, 4, 1);
    let (bgrace, igrace, flags) = old.map_or((DEFAULT_GRACE, DEFAULT_GRACE, 0), |o| {
        (o.bgrace, o.igrace, o.flags)
    });
    put_le_u32(h, 8, bgrace);
    put_le_u32(h, 12, igrace);
    put_le_u32(h, 16, flags);
    put_le_u32(h, 20, total);
    put_le_u32(h, 24, 0);
    put_le_u32(h, 28, free_entry);
    blocks.concat()
}

/// Rewrites quota file `ino` of type `qtype` (0 user, 1 group, 2 project)
/// with the usage the check found. The file keeps its blocks where it
/// can and gets more when it grows; blocks it no longer needs are zeroed
/// and stay in the file.
pub fn rewrite<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    io: &mut Io<'f>,
    qtype: usize,
    ino: u32,
) -> io::Result<()> {
    let fs = &st.fs;
    let bs = fs.block_size();
    let raw = stage.inode_copy(io, ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| io::Error::other("bad quota inode"))?;
    let old_size = inode.size();
    let mapped = super::map::blocks_of(stage, io, ino)?;
    let old = if old_size <= MAX_OLD {
        let mut data = vec![0u8; old_size as usize];
        let mut buf = vec![0u8; bs];
        for &(l, p) in &mapped {
            let at = l * bs as u64;
            if at >= old_size {
                continue;
            }
            stage.read(io, p, &mut buf)?;
            let n = (old_size - at).min(bs as u64) as usize;
            data[at as usize..at as usize + n].copy_from_slice(&buf[..n]);
        }
        read_quota_tree(&data, qtype)
    } else {
        None
    };
    let usage: BTreeMap<u32, QuotaUse> = st
        .quota
        .iter()
        .filter(|(&(t, _), _)| usize::from(t) == qtype)
        .map(|(&(_, id), &u)| (id, u))
        .collect();
    let content = build(qtype, old.as_ref(), &usage);
    let need = content.len().div_ceil(bs) as u64;
    let by_logical: BTreeMap<u64, u64> = mapped.iter().copied().collect();
    let mut goal = mapped.last().map_or(0, |&(_, p)| p);
    for l in 0..need {
        let p = match by_logical.get(&l) {
            Some(&p) => p,
            None => {
                let p = stage
                    .alloc_block(goal)
                    .ok_or_else(|| io::Error::other("no free block for the quota file"))?;
                super::map::map_block(stage, io, ino, l, p)?;
                p
            }
        };
        goal = p;
        let at = l as usize * bs;
        let end = (at + bs).min(content.len());
        stage.fresh_block(p, Kind::Plain)[..end - at].copy_from_slice(&content[at..end]);
    }
    for (&l, &p) in by_logical.range(need..) {
        if l * (bs as u64) < old_size {
            stage.fresh_block(p, Kind::Plain);
        }
    }
    super::map::recount_i_blocks(stage, io, ino)?;
    let size = (content.len() as u64).max(old_size);
    let r = stage.inode(io, ino)?;
    super::raw::set_size(r, size);
    Ok(())
}

/// Fixes a quota-mismatch finding: the file named by its inode, of the
/// type its text names, is rewritten.
pub fn fix<'f>(st: &'f CheckState, stage: &mut Staging<'f>, io: &mut Io<'f>, f: &Finding) -> bool {
    let qtype = match f.str.as_deref() {
        Some("user") => 0,
        Some("group") => 1,
        Some("project") => 2,
        _ => return false,
    };
    f.ino
        .is_some_and(|ino| rewrite(st, stage, io, qtype, ino).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use check_core::quota_file::Limits;

    fn usage(v: &[(u32, u64, u64)]) -> BTreeMap<u32, QuotaUse> {
        v.iter()
            .map(|&(id, space, inodes)| (id, QuotaUse { space, inodes }))
            .collect()
    }

    /// Reads a file back: id -> (usage, limits).
    fn read_back(data: &[u8], qtype: usize) -> BTreeMap<u32, (QuotaUse, Limits)> {
        read_quota_tree(data, qtype).expect("parses").entries
    }

    #[test]
    fn a_new_file_reads_back_with_every_id() {
        // Ids spread over every level of the tree, more than one data
        // block's worth, and id 0 with nothing charged to it.
        let mut v = vec![(0, 0, 0), (100, 2048, 2), (70_000, 4096, 1)];
        for k in 0..40 {
            v.push((1_000_000 + k * 977, 1024 * u64::from(k), u64::from(k) + 1));
        }
        let u = usage(&v);
        let data = build(1, None, &u);
        assert_eq!(data.len() % QT_BLK, 0);
        assert_eq!(le_u32(&data, 0), MAGICS[1]);
        assert_eq!(le_u32(&data, 20) as usize, data.len() / QT_BLK);
        let back = read_back(&data, 1);
        assert_eq!(back.len(), u.len());
        for (id, q) in &u {
            assert_eq!(back[id].0, *q, "id {id}");
        }
    }

    #[test]
    fn limits_and_grace_times_are_kept() {
        let mut old = QuotaTree {
            bgrace: 3600,
            igrace: 7200,
            flags: 0,
            entries: BTreeMap::new(),
            corrupt: false,
        };
        let l = Limits {
            ihard: 10,
            isoft: 5,
            bhard: 1 << 20,
            bsoft: 1 << 19,
            btime: 0,
            itime: 0,
        };
        old.entries.insert(100, (QuotaUse::default(), l));
        // Id 200 had limits but owns nothing now: it stays, at zero.
        old.entries.insert(
            200,
            (
                QuotaUse {
                    space: 9,
                    inodes: 9,
                },
                l,
            ),
        );
        let data = build(0, Some(&old), &usage(&[(100, 1024, 1)]));
        assert_eq!((le_u32(&data, 8), le_u32(&data, 12)), (3600, 7200));
        let back = read_back(&data, 0);
        assert_eq!(
            back[&100],
            (
                QuotaUse {
                    space: 1024,
                    inodes: 1
                },
                l
            )
        );
        assert_eq!(back[&200], (QuotaUse::default(), l));
    }

    #[test]
    fn garbage_is_not_read_as_a_quota_file() {
        assert!(read_quota_tree(&[0u8; 4096], 0).is_none());
        let mut d = build(0, None, &usage(&[(1, 1, 1)]));
        // A tree pointing at itself is walked once per level.
        put_le_u32(&mut d, QT_BLK, 1);
        assert!(read_quota_tree(&d, 0).is_some());
        assert!(read_quota_tree(&d, 1).is_none(), "wrong type");
    }
}
