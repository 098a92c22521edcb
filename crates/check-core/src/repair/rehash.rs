//! Rebuilding a directory's hash index, as e2fsck's pass 3A does for the
//! directories whose index it had to drop: the entries are sorted by
//! hash and laid out over the directory's blocks after a new root (and,
//! for a large directory, one level of index nodes).

use std::collections::BTreeSet;

use ext4_layout::bytes::{le_u32, put_le_u16, put_le_u32};
use ext4_layout::dirent::{encode_rec_len, rec_len_for, write_tail, DirWalk, DIR_TAIL_SIZE};
use ext4_layout::dirhash::{dirhash, version};
use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use ext4_layout::inode::{flags, Inode};

use super::inodes::off;
use super::stage::{Kind, Staging};
use crate::fs::Fs;
use crate::io::Io;

/// One entry to place.
struct Entry {
    hash: u32,
    minor: u32,
    ino: u32,
    ft: u8,
    name: Vec<u8>,
}

impl Entry {
    fn size(&self) -> usize {
        rec_len_for(self.name.len())
    }
}

/// Why a directory keeps its linear layout.
pub type Skip = &'static str;

/// Rebuilds the index of directory `dir`. Directories the hashes of
/// which this repair cannot compute (case-folded, encrypted, SipHash),
/// inline ones, ones with fewer entries than blocks to spread them over,
/// and ones that would need more than two index levels stay linear
/// (`Err` says why); nothing is changed then.
pub fn rebuild<'f>(
    fs: &'f Fs,
    stage: &mut Staging<'f>,
    io: &mut Io<'f>,
    dir: u32,
) -> Result<(), Skip> {
    let geo = &fs.geo;
    if !geo.compat.contains(CompatFeatures::DIR_INDEX) {
        return Err("no dir_index feature");
    }
    let raw = stage.inode_copy(io, dir).map_err(|_| "unreadable inode")?;
    let inode = Inode::new(&raw).ok_or("bad inode")?;
    if inode.has_flag(flags::INLINE_DATA)
        || inode.has_flag(flags::ENCRYPT)
        || inode.has_flag(flags::CASEFOLD)
        || inode.has_flag(flags::INDEX)
    {
        return Err("inline, encrypted, case-folded or already indexed");
    }
    let sb = fs.sb();
    let base_version = sb.s_def_hash_version();
    if base_version > version::TEA {
        return Err("a hash this repair does not compute");
    }
    let unsigned = sb.s_flags() & ext4_layout::superblock::FLAGS_UNSIGNED_HASH != 0;
    let hv = if unsigned {
        base_version + 3
    } else {
        base_version
    };
    let seed = sb.s_hash_seed();
    let bs = fs.block_size();
    let csum = fs.metadata_csum();
    let tail = if csum { DIR_TAIL_SIZE } else { 0 };
    let filetype = geo.incompat.contains(IncompatFeatures::FILETYPE);
    // The entries, and '..'.
    let blocks = super::map::blocks_of(stage, io, dir).map_err(|_| "unreadable blocks")?;
    if blocks.first().map(|&(l, _)| l) != Some(0)
        || blocks.iter().enumerate().any(|(i, &(l, _))| l != i as u64)
    {
        return Err("holes");
    }
    let mut parent = None;
    let mut entries = Vec::new();
    let mut buf = vec![0u8; bs];
    for &(l, p) in &blocks {
        stage
            .read(io, p, &mut buf)
            .map_err(|_| "unreadable block")?;
        let mut walk = DirWalk::new(&buf, bs, filetype);
        for (k, w) in walk.by_ref().enumerate() {
            let e = w.entry;
            let (ino, name) = (e.inode(), e.name());
            if ino == 0 || e.raw_type_byte() == 0xDE {
                continue;
            }
            if l == 0 && k == 0 && name == b"." {
            } else if l == 0 && k == 1 && name == b".." {
                parent = Some(ino);
            } else {
                let h = dirhash(name, hv, &seed).ok_or("no hash")?;
                entries.push(Entry {
                    hash: h.major & !1,
                    minor: h.minor,
                    ino,
                    ft: e.raw_type_byte(),
                    name: name.to_vec(),
                });
            }
        }
        if walk.stopped_at().is_some() {
            return Err("a damaged block");
        }
    }
    let parent = parent.ok_or("no '..'")?;
    // Entries that fit in one block need no index (e2fsck leaves such a
    // directory linear too).
    let bytes: usize = entries.iter().map(Entry::size).sum::<usize>() + 24;
    if bytes <= bs - if csum { DIR_TAIL_SIZE } else { 0 } {
        return Err("small enough to stay linear");
    }
    entries.sort_by(|a, b| (a.hash, a.minor, &a.name).cmp(&(b.hash, b.minor, &b.name)));
    // Leaves: spread over the blocks the directory has (one is the root),
    // more if they do not fit; never an empty leaf.
    let room = bs - tail;
    let total: usize = entries.iter().map(Entry::size).sum();
    let mut want = (blocks.len().saturating_sub(1))
        .max(total.div_ceil(room))
        .max(1);
    let leaves = loop {
        if entries.len() < want {
            return Err("fewer entries than blocks");
        }
        match spread(&entries, want, room) {
            Some(l) => break l,
            None => want += 1,
        }
    };
    let root_limit = (bs - 0x20 - if csum { 8 } else { 0 }) / 8;
    let node_limit = (bs - 8 - if csum { 8 } else { 0 }) / 8;
    let two_levels = leaves.len() > root_limit;
    let nodes = if two_levels {
        let n = leaves.len().div_ceil(node_limit);
        if n > root_limit {
            return Err("too large for two index levels");
        }
        n
    } else {
        0
    };
    // Logical layout: 0 the root, 1..=L the leaves, then the nodes.
    let needed = 1 + leaves.len() + nodes;
    if needed < blocks.len() {
        return Err("fewer entries than blocks");
    }
    let mut phys: Vec<u64> = blocks.iter().map(|&(_, p)| p).collect();
    while phys.len() < needed {
        let goal = phys.last().copied().unwrap_or(0);
        let b = stage.alloc_block(goal).ok_or("no free block")?;
        super::map::map_block(stage, io, dir, phys.len() as u64, b).map_err(|_| "cannot map")?;
        phys.push(b);
    }
    let ft_dir = if filetype { 2 } else { 0 };
    // Leaves.
    let mut first_hash: Vec<u32> = Vec::with_capacity(leaves.len());
    let mut prev_last: Option<u32> = None;
    for (i, leaf) in leaves.iter().enumerate() {
        let b = stage.fresh_block(phys[1 + i], Kind::DirLeaf(dir));
        let mut at = 0;
        for (j, &e) in leaf.iter().enumerate() {
            let en = &entries[e];
            let rl = if j + 1 == leaf.len() {
                room - at
            } else {
                en.size()
            };
            put_le_u32(b, at, en.ino);
            put_le_u16(b, at + 4, encode_rec_len(rl, bs));
            b[at + 6] = en.name.len() as u8;
            b[at + 7] = if filetype { en.ft } else { 0 };
            b[at + 8..at + 8 + en.name.len()].copy_from_slice(&en.name);
            at += rl;
        }
        if csum {
            write_tail(b, 0);
        }
        let h = entries[leaf[0]].hash;
        // A leaf that goes on with the hash the one before ended with.
        first_hash.push(if prev_last == Some(h) { h | 1 } else { h });
        prev_last = leaf.last().map(|&e| entries[e].hash);
    }
    // Index nodes (two levels): each takes a run of leaves.
    let mut root_children: Vec<(u32, u32)> = Vec::new();
    if two_levels {
        for (n, chunk) in (0..leaves.len())
            .collect::<Vec<_>>()
            .chunks(node_limit)
            .enumerate()
        {
            let lblk = 1 + leaves.len() + n;
            let b = stage.fresh_block(phys[lblk], Kind::DxNode(dir));
            put_le_u32(b, 0, 0);
            put_le_u16(b, 4, encode_rec_len(bs, bs));
            put_le_u16(b, 8, node_limit as u16);
            put_le_u16(b, 10, chunk.len() as u16);
            for (k, &leaf) in chunk.iter().enumerate() {
                let at = 8 + k * 8;
                if k > 0 {
                    put_le_u32(b, at, first_hash[leaf]);
                }
                put_le_u32(b, at + 4, (1 + leaf) as u32);
            }
            root_children.push((first_hash[chunk[0]], lblk as u32));
        }
    } else {
        for (i, &h) in first_hash.iter().enumerate() {
            root_children.push((h, (1 + i) as u32));
        }
    }
    // The root.
    {
        let b = stage.fresh_block(phys[0], Kind::DxRoot(dir));
        put_le_u32(b, 0, dir);
        put_le_u16(b, 4, encode_rec_len(12, bs));
        b[6] = 1;
        b[7] = ft_dir;
        b[8] = b'.';
        put_le_u32(b, 12, parent);
        put_le_u16(b, 16, encode_rec_len(bs - 12, bs));
        b[18] = 2;
        b[19] = ft_dir;
        b[20] = b'.';
        b[21] = b'.';
        b[0x1C] = base_version;
        b[0x1D] = 8;
        b[0x1E] = u8::from(two_levels);
        put_le_u16(b, 0x20, root_limit as u16);
        put_le_u16(b, 0x22, root_children.len() as u16);
        for (k, &(h, child)) in root_children.iter().enumerate() {
            let at = 0x20 + k * 8;
            if k > 0 {
                put_le_u32(b, at, h);
            }
            put_le_u32(b, at + 4, child);
        }
    }
    // The inode: indexed, as long as its blocks.
    let r = stage.inode(io, dir).map_err(|_| "unwritable inode")?;
    let fl = le_u32(r, off::FLAGS) | flags::INDEX;
    put_le_u32(r, off::FLAGS, fl);
    super::inodes::grow_size(r, (needed * bs) as u64);
    if needed > blocks.len() {
        super::map::recount_i_blocks(stage, io, dir).map_err(|_| "cannot count blocks")?;
    }
    Ok(())
}

/// Splits the sorted entries into `n` leaves of at most `room` bytes,
/// each holding at least one entry, filled about evenly; `None` if they
/// do not fit.
fn spread(entries: &[Entry], n: usize, room: usize) -> Option<Vec<Vec<usize>>> {
    let total: usize = entries.iter().map(Entry::size).sum();
    let target = total.div_ceil(n);
    let mut leaves: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let s = e.size();
        let left_entries = entries.len() - i;
        let left_leaves = n - leaves.len();
        let cur_nonempty = !leaves.last().is_some_and(Vec::is_empty);
        let start_new = cur_nonempty
            && left_leaves > 0
            && (used + s > room || used >= target || left_entries <= left_leaves);
        if start_new {
            leaves.push(Vec::new());
            used = 0;
        }
        if used + s > room {
            return None;
        }
        leaves.last_mut()?.push(i);
        used += s;
    }
    (leaves.len() == n && leaves.iter().all(|l| !l.is_empty())).then_some(leaves)
}

/// The directories this repair dropped the index of, still directories
/// and not indexed now: the ones to rebuild.
pub fn dropped(before: &[u32], now_indexed: &[u32], is_dir: impl Fn(u32) -> bool) -> Vec<u32> {
    let now: BTreeSet<u32> = now_indexed.iter().copied().collect();
    let gone: BTreeSet<u32> = before
        .iter()
        .copied()
        .filter(|d| !now.contains(d) && is_dir(*d))
        .collect();
    gone.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(len: usize) -> Entry {
        Entry {
            hash: 0,
            minor: 0,
            ino: 1,
            ft: 1,
            name: vec![b'x'; len],
        }
    }

    #[test]
    fn entries_spread_over_every_leaf() {
        let v: Vec<Entry> = (0..10).map(|_| e(8)).collect(); // 16 bytes each
        let l = spread(&v, 3, 1012).expect("fits");
        assert_eq!(l.len(), 3);
        assert!(l.iter().all(|x| !x.is_empty()));
        assert_eq!(l.iter().map(Vec::len).sum::<usize>(), 10);
        assert!(spread(&v, 11, 1012).is_none(), "more leaves than entries");
        assert!(spread(&v, 1, 100).is_none(), "too little room");
    }

    #[test]
    fn dropped_indexes_are_the_ones_gone() {
        assert_eq!(dropped(&[12, 20, 30], &[20], |d| d != 30), vec![12]);
    }
}
