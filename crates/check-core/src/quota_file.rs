//! The v2 quota file format (1 KiB quota blocks: a header, then a
//! four-level radix tree over the bytes of the id whose last level points
//! at data blocks of entries), read by the check and by the repair that
//! rewrites it.

use std::collections::{BTreeMap, BTreeSet};

use ext4_layout::bytes::{le_u32, le_u64};

use crate::pass1::QuotaUse;

/// Quota block size.
pub const QT_BLK: usize = 1024;
/// Header magic of each quota type.
pub const MAGICS: [u32; 3] = [0xd9c0_1f11, 0xd9c0_1927, 0xd9c0_3f14];
/// Entry size in revision 1.
pub const ENTRY_V1: usize = 72;
/// Entry size in revision 0.
pub const ENTRY_V0: usize = 48;
/// Header of a data block.
pub const DATA_HEADER: usize = 16;
/// Tree levels.
pub const DEPTH: u32 = 4;

/// What an entry keeps besides the usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub ihard: u64,
    pub isoft: u64,
    pub bhard: u64,
    pub bsoft: u64,
    pub btime: u64,
    pub itime: u64,
}

/// What a quota file holds: its grace times and flags, and every entry.
#[derive(Debug, Default)]
pub struct QuotaTree {
    /// Block grace period.
    pub bgrace: u32,
    /// Inode grace period.
    pub igrace: u32,
    /// Info flags.
    pub flags: u32,
    /// Each id's usage as the file had it, and its limits.
    pub entries: BTreeMap<u32, (QuotaUse, Limits)>,
    /// Whether the tree refers to a block past the count its header
    /// gives (e2fsck then takes the whole file for unreadable); `entries`
    /// holds what was read before that.
    pub corrupt: bool,
}

/// Reads a v2 quota file of type `qtype` (0 user, 1 group, 2 project):
/// `None` when its magic or version is wrong. The tree is walked once per
/// (block, level), whatever loops a damaged file holds.
pub fn read_quota_tree(data: &[u8], qtype: usize) -> Option<QuotaTree> {
    if le_u32(data, 0) != *MAGICS.get(qtype)? {
        return None;
    }
    let entry = match le_u32(data, 4) {
        0 => ENTRY_V0,
        1 => ENTRY_V1,
        _ => return None,
    };
    let mut old = QuotaTree {
        bgrace: le_u32(data, 8),
        igrace: le_u32(data, 12),
        flags: le_u32(data, 16),
        entries: BTreeMap::new(),
        corrupt: false,
    };
    let nblocks = (data.len() / QT_BLK) as u32;
    let header_blocks = le_u32(data, 20);
    let mut seen = BTreeSet::new();
    let mut stack = vec![(1u32, 0u32)];
    while let Some((blk, depth)) = stack.pop() {
        if blk == 0 || blk >= nblocks || !seen.insert((blk, depth)) {
            continue;
        }
        let b = &data[blk as usize * QT_BLK..(blk as usize + 1) * QT_BLK];
        if depth < DEPTH {
            for i in 0..QT_BLK / 4 {
                let r = le_u32(b, i * 4);
                // As e2fsck: every reference to a data block is checked,
                // a reference to another tree block only when set.
                if (r != 0 || depth == DEPTH - 1) && r >= header_blocks {
                    old.corrupt = true;
                    return Some(old);
                }
                if r != 0 {
                    stack.push((r, depth + 1));
                }
            }
            continue;
        }
        for e in b[DATA_HEADER..].chunks_exact(entry) {
            if e.iter().all(|&x| x == 0) {
                continue;
            }
            let (u, l) = if entry == ENTRY_V1 {
                let u = QuotaUse {
                    inodes: le_u64(e, 24),
                    space: le_u64(e, 48),
                };
                let l = Limits {
                    ihard: le_u64(e, 8),
                    isoft: le_u64(e, 16),
                    bhard: le_u64(e, 32),
                    bsoft: le_u64(e, 40),
                    btime: le_u64(e, 56),
                    itime: le_u64(e, 64),
                };
                (u, l)
            } else {
                let u = QuotaUse {
                    inodes: u64::from(le_u32(e, 12)),
                    space: le_u64(e, 24),
                };
                let l = Limits {
                    ihard: u64::from(le_u32(e, 4)),
                    isoft: u64::from(le_u32(e, 8)),
                    bhard: u64::from(le_u32(e, 16)),
                    bsoft: u64::from(le_u32(e, 20)),
                    btime: le_u64(e, 32),
                    itime: le_u64(e, 40),
                };
                (u, l)
            };
            old.entries.insert(le_u32(e, 0), (u, l));
        }
    }
    Some(old)
}
