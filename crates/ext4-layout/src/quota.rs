//! The v2 quota file format, as ext4 keeps it in its hidden quota inodes:
//! 1 KiB quota blocks. Block 0 is the header (magic, version, grace
//! times, flags, the block count and the heads of the free lists).
//! Block 1 is the root of a four-level radix tree over the bytes of the
//! id, most significant first; each tree block holds 256 block numbers,
//! and the last level points at data blocks, which start with a 16-byte
//! header and hold entries (72 bytes in revision 1, 48 in revision 0).

use std::collections::{BTreeMap, BTreeSet};

use crate::field::Field;

/// Quota block size.
pub const QT_BLK: usize = 1024;
/// Header magic of each quota type (user, group, project).
pub const MAGICS: [u32; 3] = [0xd9c0_1f11, 0xd9c0_1927, 0xd9c0_3f14];
/// Entry size in revision 1.
pub const ENTRY_V1: usize = 72;
/// Entry size in revision 0.
pub const ENTRY_V0: usize = 48;
/// Header of a data block.
pub const DATA_HEADER: usize = 16;
/// Tree levels.
pub const DEPTH: u32 = 4;
/// The tree's root block.
pub const TREE_ROOT: u32 = 1;
/// Revision 1 entries in one data block.
pub const PER_BLOCK: usize = (QT_BLK - DATA_HEADER) / ENTRY_V1;
/// The grace period a new quota file gets (seven days, as quotatools).
pub const DEFAULT_GRACE: u32 = 7 * 24 * 3600;

/// The header's fields (block 0).
pub mod header {
    use crate::field::Field;

    /// 0x00: the quota type's magic.
    pub const MAGIC: Field<u32> = Field::le(0x00);
    /// 0x04: revision (0 or 1).
    pub const VERSION: Field<u32> = Field::le(0x04);
    /// 0x08: block grace period.
    pub const BGRACE: Field<u32> = Field::le(0x08);
    /// 0x0C: inode grace period.
    pub const IGRACE: Field<u32> = Field::le(0x0C);
    /// 0x10: flags.
    pub const FLAGS: Field<u32> = Field::le(0x10);
    /// 0x14: blocks in the file.
    pub const BLOCKS: Field<u32> = Field::le(0x14);
    /// 0x18: the first free block.
    pub const FREE_BLK: Field<u32> = Field::le(0x18);
    /// 0x1C: the first data block with a free entry.
    pub const FREE_ENTRY: Field<u32> = Field::le(0x1C);
}

/// A data block's header field: entries in use.
pub const DATA_ENTRIES: Field<u16> = Field::le(0x08);

/// The fields of a revision 1 entry.
pub mod entry_v1 {
    use crate::field::Field;

    /// 0x00: the id.
    pub const ID: Field<u32> = Field::le(0x00);
    /// 0x08: inode hard limit.
    pub const IHARD: Field<u64> = Field::le(0x08);
    /// 0x10: inode soft limit.
    pub const ISOFT: Field<u64> = Field::le(0x10);
    /// 0x18: inodes in use.
    pub const INODES: Field<u64> = Field::le(0x18);
    /// 0x20: space hard limit.
    pub const BHARD: Field<u64> = Field::le(0x20);
    /// 0x28: space soft limit.
    pub const BSOFT: Field<u64> = Field::le(0x28);
    /// 0x30: bytes in use.
    pub const SPACE: Field<u64> = Field::le(0x30);
    /// 0x38: space grace deadline.
    pub const BTIME: Field<u64> = Field::le(0x38);
    /// 0x40: inode grace deadline.
    pub const ITIME: Field<u64> = Field::le(0x40);
}

/// The fields of a revision 0 entry.
pub mod entry_v0 {
    use crate::field::Field;

    /// 0x00: the id.
    pub const ID: Field<u32> = Field::le(0x00);
    /// 0x04: inode hard limit.
    pub const IHARD: Field<u32> = Field::le(0x04);
    /// 0x08: inode soft limit.
    pub const ISOFT: Field<u32> = Field::le(0x08);
    /// 0x0C: inodes in use.
    pub const INODES: Field<u32> = Field::le(0x0C);
    /// 0x10: space hard limit.
    pub const BHARD: Field<u32> = Field::le(0x10);
    /// 0x14: space soft limit.
    pub const BSOFT: Field<u32> = Field::le(0x14);
    /// 0x18: bytes in use.
    pub const SPACE: Field<u64> = Field::le(0x18);
    /// 0x20: space grace deadline.
    pub const BTIME: Field<u64> = Field::le(0x20);
    /// 0x28: inode grace deadline.
    pub const ITIME: Field<u64> = Field::le(0x28);
}

/// The reference to the next level that a tree block at `depth` holds
/// for `id`: one of its 256 block numbers.
pub fn tree_ref(id: u32, depth: u32) -> Field<u32> {
    let slot = (id >> ((DEPTH - 1 - depth) * 8)) & 0xFF;
    Field::le(slot as usize * 4)
}

/// Usage charged to one id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of space.
    pub space: u64,
    /// Inodes.
    pub inodes: u64,
}

/// What an entry keeps besides the usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Inode hard limit.
    pub ihard: u64,
    /// Inode soft limit.
    pub isoft: u64,
    /// Space hard limit.
    pub bhard: u64,
    /// Space soft limit.
    pub bsoft: u64,
    /// Space grace deadline.
    pub btime: u64,
    /// Inode grace deadline.
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
    pub entries: BTreeMap<u32, (Usage, Limits)>,
    /// Whether the tree refers to a block past the count its header
    /// gives (e2fsck then takes the whole file for unreadable); `entries`
    /// holds what was read before that.
    pub corrupt: bool,
}

/// Reads a v2 quota file of type `qtype` (0 user, 1 group, 2 project):
/// `None` when its magic or version is wrong. The tree is walked once per
/// (block, level), whatever loops a damaged file holds.
pub fn read_tree(data: &[u8], qtype: usize) -> Option<QuotaTree> {
    if header::MAGIC.get(data) != *MAGICS.get(qtype)? {
        return None;
    }
    let entry = match header::VERSION.get(data) {
        0 => ENTRY_V0,
        1 => ENTRY_V1,
        _ => return None,
    };
    let mut old = QuotaTree {
        bgrace: header::BGRACE.get(data),
        igrace: header::IGRACE.get(data),
        flags: header::FLAGS.get(data),
        entries: BTreeMap::new(),
        corrupt: false,
    };
    let nblocks = (data.len() / QT_BLK) as u32;
    let header_blocks = header::BLOCKS.get(data);
    let mut seen = BTreeSet::new();
    let mut stack = vec![(TREE_ROOT, 0u32)];
    while let Some((blk, depth)) = stack.pop() {
        if blk == 0 || blk >= nblocks || !seen.insert((blk, depth)) {
            continue;
        }
        let b = &data[blk as usize * QT_BLK..(blk as usize + 1) * QT_BLK];
        if depth < DEPTH {
            for r in b.chunks_exact(4).map(|c| Field::<u32>::le(0).get(c)) {
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
            let parsed = if entry == ENTRY_V1 {
                read_entry_v1(e)
            } else {
                read_entry_v0(e)
            };
            old.entries.insert(entry_v1::ID.get(e), parsed);
        }
    }
    Some(old)
}

fn read_entry_v1(e: &[u8]) -> (Usage, Limits) {
    use entry_v1 as f;
    let u = Usage {
        inodes: f::INODES.get(e),
        space: f::SPACE.get(e),
    };
    let l = Limits {
        ihard: f::IHARD.get(e),
        isoft: f::ISOFT.get(e),
        bhard: f::BHARD.get(e),
        bsoft: f::BSOFT.get(e),
        btime: f::BTIME.get(e),
        itime: f::ITIME.get(e),
    };
    (u, l)
}

fn read_entry_v0(e: &[u8]) -> (Usage, Limits) {
    use entry_v0 as f;
    let u = Usage {
        inodes: u64::from(f::INODES.get(e)),
        space: f::SPACE.get(e),
    };
    let l = Limits {
        ihard: u64::from(f::IHARD.get(e)),
        isoft: u64::from(f::ISOFT.get(e)),
        bhard: u64::from(f::BHARD.get(e)),
        bsoft: u64::from(f::BSOFT.get(e)),
        btime: f::BTIME.get(e),
        itime: f::ITIME.get(e),
    };
    (u, l)
}

/// Writes a revision 1 entry.
fn write_entry_v1(e: &mut [u8], id: u32, u: &Usage, l: &Limits) {
    use entry_v1 as f;
    f::ID.set(e, id);
    f::IHARD.set(e, l.ihard);
    f::ISOFT.set(e, l.isoft);
    f::INODES.set(e, u.inodes);
    f::BHARD.set(e, l.bhard);
    f::BSOFT.set(e, l.bsoft);
    f::SPACE.set(e, u.space);
    f::BTIME.set(e, l.btime);
    f::ITIME.set(e, l.itime);
    // An all-zero entry reads as a free slot: mark it used.
    if e.iter().all(|&x| x == 0) {
        f::ITIME.set(e, 1);
    }
}

/// The bytes of a new revision 1 quota file of type `qtype` holding
/// every id of `usage` and of `old`, with the limits, grace times and
/// flags `old` kept (the defaults without it).
pub fn write_tree(qtype: usize, old: Option<&QuotaTree>, usage: &BTreeMap<u32, Usage>) -> Vec<u8> {
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
        let u = usage.get(&id).copied().unwrap_or_default();
        let l = old
            .and_then(|o| o.entries.get(&id))
            .map(|e| e.1)
            .unwrap_or_default();
        let b = &mut blocks[data_blk as usize];
        let at = DATA_HEADER + in_block * ENTRY_V1;
        write_entry_v1(&mut b[at..at + ENTRY_V1], id, &u, &l);
        in_block += 1;
        DATA_ENTRIES.set(b, in_block as u16);
        // Its path through the tree.
        let mut node = TREE_ROOT as usize;
        for depth in 0..DEPTH {
            let slot = tree_ref(id, depth);
            if depth == DEPTH - 1 {
                slot.set(&mut blocks[node], data_blk);
            } else {
                let child = slot.get(&blocks[node]);
                node = if child != 0 {
                    child as usize
                } else {
                    blocks.push(vec![0u8; QT_BLK]);
                    let c = blocks.len() - 1;
                    slot.set(&mut blocks[node], c as u32);
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
    let (bgrace, igrace, flags) = old.map_or((DEFAULT_GRACE, DEFAULT_GRACE, 0), |o| {
        (o.bgrace, o.igrace, o.flags)
    });
    let h = &mut blocks[0];
    header::MAGIC.set(h, MAGICS[qtype]);
    header::VERSION.set(h, 1);
    header::BGRACE.set(h, bgrace);
    header::IGRACE.set(h, igrace);
    header::FLAGS.set(h, flags);
    header::BLOCKS.set(h, total);
    header::FREE_BLK.set(h, 0);
    header::FREE_ENTRY.set(h, free_entry);
    blocks.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(v: &[(u32, u64, u64)]) -> BTreeMap<u32, Usage> {
        v.iter()
            .map(|&(id, space, inodes)| (id, Usage { space, inodes }))
            .collect()
    }

    /// Reads a file back: id -> (usage, limits).
    fn read_back(data: &[u8], qtype: usize) -> BTreeMap<u32, (Usage, Limits)> {
        read_tree(data, qtype).expect("parses").entries
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
        let data = write_tree(1, None, &u);
        assert_eq!(data.len() % QT_BLK, 0);
        assert_eq!(header::MAGIC.get(&data), MAGICS[1]);
        assert_eq!(header::BLOCKS.get(&data) as usize, data.len() / QT_BLK);
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
        old.entries.insert(100, (Usage::default(), l));
        // Id 200 had limits but owns nothing now: it stays, at zero.
        old.entries.insert(
            200,
            (
                Usage {
                    space: 9,
                    inodes: 9,
                },
                l,
            ),
        );
        let data = write_tree(0, Some(&old), &usage(&[(100, 1024, 1)]));
        assert_eq!(
            (header::BGRACE.get(&data), header::IGRACE.get(&data)),
            (3600, 7200)
        );
        let back = read_back(&data, 0);
        assert_eq!(
            back[&100],
            (
                Usage {
                    space: 1024,
                    inodes: 1
                },
                l
            )
        );
        assert_eq!(back[&200], (Usage::default(), l));
    }

    #[test]
    fn garbage_is_not_read_as_a_quota_file() {
        assert!(read_tree(&[0u8; 4096], 0).is_none());
        let mut d = write_tree(0, None, &usage(&[(1, 1, 1)]));
        // A tree pointing at itself is walked once per level.
        Field::<u32>::le(QT_BLK).set(&mut d, 1);
        assert!(read_tree(&d, 0).is_some());
        assert!(read_tree(&d, 1).is_none(), "wrong type");
    }
}
