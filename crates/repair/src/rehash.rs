//! Rewriting a directory's blocks, as e2fsck's pass 3A does: rebuilding
//! the hash index of a directory whose index was dropped (the entries,
//! sorted by hash, spread over the blocks it has after a new root and, for
//! a large directory, one level of index nodes), and, with `-D`,
//! optimizing every directory (packed linear when small, otherwise
//! indexed with leaves filled to 80%, and the blocks no longer needed
//! freed).

use ext4_layout::types::{Ino, PhysBlock};
use std::collections::BTreeSet;

use ext4_layout::dirent::{self, rec_len_for, write_tail, DirWalk, DIR_TAIL_SIZE};
use ext4_layout::dirhash::{dirhash, version};
use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use ext4_layout::htree;
use ext4_layout::htree::{field as dxf, DxRootMut};
use ext4_layout::inode::field;
use ext4_layout::inode::{flags, Inode};

use super::stage::{Kind, Staging};
use check_core::fs::Fs;

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

/// Why a directory is left as it is.
pub type Skip = &'static str;

/// A directory read for rewriting.
struct Collected {
    /// Its '..'.
    parent: u32,
    /// Its other live entries, in block order.
    entries: Vec<Entry>,
    /// Its (logical, physical) blocks, 0 to n - 1 without holes.
    blocks: Vec<(u64, PhysBlock)>,
    /// The hash version an index would record.
    base_version: u8,
    /// Whether hashes could be computed (and so an index built).
    hashed: bool,
}

/// What every layout needs to know of the file system.
struct Geo {
    bs: usize,
    csum: bool,
    filetype: bool,
}

impl Geo {
    fn of(fs: &Fs) -> Geo {
        Geo {
            bs: fs.block_size(),
            csum: fs.metadata_csum(),
            filetype: fs.geo.incompat.contains(IncompatFeatures::FILETYPE),
        }
    }

    /// Bytes of a leaf that entries may use.
    fn room(&self) -> usize {
        self.bs - if self.csum { DIR_TAIL_SIZE } else { 0 }
    }
}

/// Reads directory `dir`'s entries. The hashes are those an index would
/// use; a directory whose names this repair cannot hash (case-folded,
/// encrypted, SipHash) is read without them.
fn collect<'f>(
    fs: &'f Fs,
    stage: &mut Staging<'f>,
    dir: Ino,
    raw: &[u8],
) -> Result<Collected, Skip> {
    let inode = Inode::new(raw).ok_or("bad inode")?;
    let sb = fs.sb();
    let base_version = sb.s_def_hash_version();
    let hashed = base_version <= version::TEA
        && !inode.has_flag(flags::ENCRYPT)
        && !inode.has_flag(flags::CASEFOLD);
    let unsigned = sb.s_flags() & ext4_layout::superblock::FLAGS_UNSIGNED_HASH != 0;
    let hv = if unsigned {
        base_version + 3
    } else {
        base_version
    };
    let seed = sb.s_hash_seed();
    let g = Geo::of(fs);
    let blocks = super::map::blocks_of(stage, dir).map_err(|_| "unreadable blocks")?;
    if blocks.first().map(|&(l, _)| l) != Some(0)
        || blocks.iter().enumerate().any(|(i, &(l, _))| l != i as u64)
    {
        return Err("holes");
    }
    let mut parent = None;
    let mut entries = Vec::new();
    let mut buf = vec![0u8; g.bs];
    for &(l, p) in &blocks {
        stage.read(p, &mut buf).map_err(|_| "unreadable block")?;
        let mut walk = DirWalk::new(&buf, g.bs, g.filetype);
        for (k, w) in walk.by_ref().enumerate() {
            let e = w.entry;
            let (ino, name) = (e.inode(), e.name());
            if ino == 0 || e.raw_type_byte() == dirent::DIR_TAIL_FT {
                continue;
            }
            if l == 0 && k == 0 && name == b"." {
            } else if l == 0 && k == 1 && name == b".." {
                parent = Some(ino);
            } else {
                let (hash, minor) = if hashed {
                    let h = dirhash(name, hv, &seed).ok_or("no hash")?;
                    (h.major & !1, h.minor)
                } else {
                    (0, 0)
                };
                entries.push(Entry {
                    hash,
                    minor,
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
    Ok(Collected {
        parent: parent.ok_or("no '..'")?,
        entries,
        blocks,
        base_version,
        hashed,
    })
}

/// The inode of a directory that can be rewritten, or why not.
fn rewritable<'f>(stage: &mut Staging<'f>, dir: Ino) -> Result<Vec<u8>, Skip> {
    let raw = stage.inode_copy(dir).map_err(|_| "unreadable inode")?;
    let inode = Inode::new(&raw).ok_or("bad inode")?;
    if inode.has_flag(flags::INLINE_DATA) {
        return Err("inline");
    }
    Ok(raw)
}

/// Rebuilds the index of directory `dir`. Directories the hashes of
/// which this repair cannot compute (case-folded, encrypted, SipHash),
/// inline ones, ones with fewer entries than blocks to spread them over,
/// and ones that would need more than two index levels stay linear
/// (`Err` says why); nothing is changed then.
pub fn rebuild<'f>(fs: &'f Fs, stage: &mut Staging<'f>, dir: Ino) -> Result<(), Skip> {
    if !fs.geo.compat.contains(CompatFeatures::DIR_INDEX) {
        return Err("no dir_index feature");
    }
    let raw = rewritable(stage, dir)?;
    let inode = Inode::new(&raw).ok_or("bad inode")?;
    if inode.has_flag(flags::INDEX) {
        return Err("already indexed");
    }
    let mut c = collect(fs, stage, dir, &raw)?;
    if !c.hashed {
        return Err("a hash this repair does not compute");
    }
    let g = Geo::of(fs);
    // Entries that fit in one block need no index (e2fsck leaves such a
    // directory linear too).
    let bytes: usize = c.entries.iter().map(Entry::size).sum::<usize>() + 24;
    if bytes <= g.room() {
        return Err("small enough to stay linear");
    }
    sort_by_hash(&mut c.entries);
    // Leaves: spread over the blocks the directory has (one is the root),
    // more if they do not fit; never an empty leaf.
    let total: usize = c.entries.iter().map(Entry::size).sum();
    let mut want = (c.blocks.len().saturating_sub(1))
        .max(total.div_ceil(g.room()))
        .max(1);
    let leaves = loop {
        if c.entries.len() < want {
            return Err("fewer entries than blocks");
        }
        match spread(&c.entries, want, g.room()) {
            Some(l) => break l,
            None => want += 1,
        }
    };
    let needed = htree_blocks(&g, leaves.len())?;
    if needed < c.blocks.len() {
        return Err("fewer entries than blocks");
    }
    let extents = inode.has_flag(flags::EXTENTS);
    let phys = blocks_for(stage, dir, &c.blocks, needed, extents)?;
    write_htree(stage, dir, &g, &c, &leaves, &phys);
    if extents && needed > c.blocks.len() {
        map_extents(stage, dir, &phys)?;
    }
    let r = stage.inode(dir).map_err(|_| "unwritable inode")?;
    let fl = field::i_flags.get(r) | flags::INDEX;
    field::i_flags.set(r, fl);
    super::raw::grow_size(r, (needed * g.bs) as u64);
    if needed > c.blocks.len() {
        super::map::recount_i_blocks(stage, dir).map_err(|_| "cannot count blocks")?;
    }
    Ok(())
}

/// Share of a leaf left free by `-D` in an indexed directory, as
/// e2fsck's default `indexed_dir_slack_percentage`.
const SLACK_PERCENT: usize = 20;

/// `-D`: rewrites directory `dir` as e2fsck's optimization does. A
/// directory that fits in one block, spans fewer than two, or lives on a
/// file system without dir_index is packed linear (after '.' and '..',
/// by inode number); any other is indexed, its leaves filled to 80% in
/// hash order. Blocks past the new end are unmapped and returned, to be
/// freed, except for lost+found (`keep_size`), which keeps its size with
/// empty blocks. Directories whose names cannot be hashed here are only
/// packed when small enough to stay linear.
pub fn optimize<'f>(
    fs: &'f Fs,
    stage: &mut Staging<'f>,
    dir: Ino,
    keep_size: bool,
) -> Result<Vec<PhysBlock>, Skip> {
    let raw = rewritable(stage, dir)?;
    let inode = Inode::new(&raw).ok_or("bad inode")?;
    if inode.has_flag(flags::ENCRYPT) {
        return Err("encrypted");
    }
    let mut c = collect(fs, stage, dir, &raw)?;
    let before = super::map::all_blocks_of(stage, dir).map_err(|_| "unreadable blocks")?;
    let extents = inode.has_flag(flags::EXTENTS);
    let g = Geo::of(fs);
    let bytes: usize = c.entries.iter().map(Entry::size).sum();
    let linear = !fs.geo.compat.contains(CompatFeatures::DIR_INDEX)
        || inode.size() / (g.bs as u64) < 2
        || bytes < g.bs - 24;
    let (needed, phys) = if linear {
        c.entries.sort_by_key(|e| e.ino);
        let leaves = pack_linear(&g, &c.entries);
        let phys = blocks_for(stage, dir, &c.blocks, leaves.len(), extents)?;
        write_linear(stage, dir, &g, &c, &leaves, &phys);
        (leaves.len(), phys)
    } else {
        if !c.hashed {
            return Err("a hash this repair does not compute");
        }
        sort_by_hash(&mut c.entries);
        let slack = (g.room() * SLACK_PERCENT / 100).max(12);
        let leaves = fill(&c.entries, g.room(), slack);
        let needed = htree_blocks(&g, leaves.len())?;
        let phys = blocks_for(stage, dir, &c.blocks, needed, extents)?;
        write_htree(stage, dir, &g, &c, &leaves, &phys);
        (needed, phys)
    };
    // Under bigalloc a cluster is freed only whole: the directory keeps
    // its blocks, the ones past the entries left empty.
    let keep_size = keep_size || fs.geo.cluster_ratio > 1;
    let end = if keep_size && phys.len() > needed {
        // lost+found keeps every block, empty past the entries, so that
        // a later repair can reconnect files without allocating.
        for &p in &phys[needed..] {
            let b = stage.fresh_block(p, Kind::DirLeaf(dir));
            dirent::put_header(b, 0, g.bs, 0, g.room());
            if g.csum {
                write_tail(b, 0);
            }
        }
        phys.len()
    } else {
        needed
    };
    if extents {
        if end != c.blocks.len() {
            map_extents(stage, dir, &phys[..end])?;
        }
    } else if end < phys.len() {
        super::map::truncate_map(stage, dir, end as u64)
            .map_err(|_| "cannot unmap the blocks past the end")?;
    }
    let after: BTreeSet<PhysBlock> = super::map::all_blocks_of(stage, dir)
        .map_err(|_| "unreadable blocks")?
        .into_iter()
        .collect();
    let freed: Vec<PhysBlock> = before.into_iter().filter(|b| !after.contains(b)).collect();
    let r = stage.inode(dir).map_err(|_| "unwritable inode")?;
    let mut fl = field::i_flags.get(r);
    if linear {
        fl &= !flags::INDEX;
    } else {
        fl |= flags::INDEX;
    }
    field::i_flags.set(r, fl);
    super::raw::set_size(r, (end * g.bs) as u64);
    super::map::recount_i_blocks(stage, dir).map_err(|_| "cannot count blocks")?;
    Ok(freed)
}

fn sort_by_hash(entries: &mut [Entry]) {
    entries.sort_by(|a, b| (a.hash, a.minor, &a.name).cmp(&(b.hash, b.minor, &b.name)));
}

/// Blocks an index over `leaves` leaves takes: the root, the leaves, and
/// the index nodes of a second level when the root cannot hold them all.
fn htree_blocks(g: &Geo, leaves: usize) -> Result<usize, Skip> {
    let root_limit = htree::root_limit(g.bs, g.csum);
    let node_limit = htree::node_limit(g.bs, g.csum);
    if leaves <= root_limit {
        return Ok(1 + leaves);
    }
    let n = leaves.div_ceil(node_limit);
    if n > root_limit {
        return Err("too large for two index levels");
    }
    Ok(1 + leaves + n)
}

/// The directory's physical blocks for logical blocks 0 to `needed - 1`:
/// those it has, then new ones. A block-mapped directory maps each new
/// block at once; an extent-mapped one gets its whole tree written by
/// [`map_extents`] afterwards, so that no tree is written twice.
fn blocks_for<'f>(
    stage: &mut Staging<'f>,
    dir: Ino,
    blocks: &[(u64, PhysBlock)],
    needed: usize,
    extents: bool,
) -> Result<Vec<PhysBlock>, Skip> {
    let mut phys: Vec<PhysBlock> = blocks.iter().map(|&(_, p)| p).collect();
    if needed > phys.len() && stage.fs().geo.cluster_ratio > 1 {
        // A new block would have to share its cluster with its logical
        // neighbours (bigalloc's rule); this rewrite does not place them.
        return Err("bigalloc: no block can be added");
    }
    while phys.len() < needed {
        let goal = phys.last().copied().unwrap_or(PhysBlock(0));
        let b = stage.alloc_block(goal).ok_or("no free block")?;
        if !extents {
            super::map::map_block(stage, dir, phys.len() as u64, b).map_err(|_| "cannot map")?;
        }
        phys.push(b);
    }
    Ok(phys)
}

/// Maps `phys` as the logical blocks 0.. of an extent-mapped directory,
/// in one new tree.
fn map_extents<'f>(stage: &mut Staging<'f>, dir: Ino, phys: &[PhysBlock]) -> Result<(), Skip> {
    let mut runs: Vec<check_core::walk::LeafExtent> = Vec::new();
    for (l, &p) in phys.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.pblk + r.len == p.0 && r.lblk + r.len == l as u64 => r.len += 1,
            _ => runs.push(check_core::walk::LeafExtent {
                lblk: l as u64,
                pblk: p.0,
                len: 1,
                uninit: false,
            }),
        }
    }
    super::tree::write_extent_tree(stage, dir, &runs).map_err(|_| "cannot map")
}

/// Packs entries into linear blocks after '.' and '..', each as small
/// as it can be; a block is closed when the next entry does not fit.
fn pack_linear(g: &Geo, entries: &[Entry]) -> Vec<Vec<usize>> {
    let room = g.room();
    let mut leaves: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = 24; // '.' and '..'
    for (i, e) in entries.iter().enumerate() {
        if used + e.size() > room {
            leaves.push(Vec::new());
            used = 0;
        }
        if let Some(l) = leaves.last_mut() {
            l.push(i);
        }
        used += e.size();
    }
    leaves
}

/// Fills leaves in order until less than `slack` bytes would be left.
fn fill(entries: &[Entry], room: usize, slack: usize) -> Vec<Vec<usize>> {
    let mut leaves: Vec<Vec<usize>> = vec![Vec::new()];
    let mut left = room;
    for (i, e) in entries.iter().enumerate() {
        let s = e.size();
        if s > left || left < slack {
            leaves.push(Vec::new());
            left = room;
        }
        if let Some(l) = leaves.last_mut() {
            l.push(i);
        }
        left -= s;
    }
    leaves.retain(|l| !l.is_empty());
    if leaves.is_empty() {
        leaves.push(Vec::new());
    }
    leaves
}

/// Writes one entry; returns where the next one starts.
fn put_entry(b: &mut [u8], at: usize, g: &Geo, ino: u32, rl: usize, name: &[u8], ft: u8) -> usize {
    let ft = if g.filetype { ft } else { 0 };
    dirent::put_entry(b, at, g.bs, ino, rl, name, ft)
}

/// Writes leaf entries at `start` in `b`, the last one taking the rest
/// of the room.
fn write_leaf(b: &mut [u8], start: usize, g: &Geo, entries: &[Entry], leaf: &[usize]) {
    let room = g.room();
    let mut at = start;
    for (j, &e) in leaf.iter().enumerate() {
        let en = &entries[e];
        let rl = if j + 1 == leaf.len() {
            room - at
        } else {
            en.size()
        };
        at = put_entry(b, at, g, en.ino, rl, &en.name, en.ft);
    }
    if leaf.is_empty() && start < room {
        // An empty block: one unused entry over the room.
        dirent::put_header(b, start, g.bs, 0, room - start);
    }
    if g.csum {
        write_tail(b, 0);
    }
}

/// The linear layout: '.' and '..' open the first block.
fn write_linear(
    stage: &mut Staging<'_>,
    dir: Ino,
    g: &Geo,
    c: &Collected,
    leaves: &[Vec<usize>],
    phys: &[PhysBlock],
) {
    let ft_dir = ext4_layout::dirent::ft::DIR;
    for (i, leaf) in leaves.iter().enumerate() {
        let b = stage.fresh_block(phys[i], Kind::DirLeaf(dir));
        let mut start = 0;
        if i == 0 {
            start = put_entry(b, 0, g, dir.get(), 12, b".", ft_dir);
            let rl = if leaf.is_empty() { g.room() - 12 } else { 12 };
            start = put_entry(b, start, g, c.parent, rl, b"..", ft_dir);
            if leaf.is_empty() {
                if g.csum {
                    write_tail(b, 0);
                }
                continue;
            }
        }
        write_leaf(b, start, g, &c.entries, leaf);
    }
}

/// The indexed layout over `phys`: 0 the root, 1..=L the leaves, then
/// the index nodes.
fn write_htree(
    stage: &mut Staging<'_>,
    dir: Ino,
    g: &Geo,
    c: &Collected,
    leaves: &[Vec<usize>],
    phys: &[PhysBlock],
) {
    let entries = &c.entries;
    let root_limit = htree::root_limit(g.bs, g.csum);
    let node_limit = htree::node_limit(g.bs, g.csum);
    let two_levels = leaves.len() > root_limit;
    // Leaves.
    let mut first_hash: Vec<u32> = Vec::with_capacity(leaves.len());
    let mut prev_last: Option<u32> = None;
    for (i, leaf) in leaves.iter().enumerate() {
        let b = stage.fresh_block(phys[1 + i], Kind::DirLeaf(dir));
        write_leaf(b, 0, g, entries, leaf);
        let h = leaf.first().map_or(0, |&e| entries[e].hash);
        // A leaf that goes on with the hash the one before ended with.
        first_hash.push(if prev_last == Some(h) { h | 1 } else { h });
        prev_last = leaf.last().map(|&e| entries[e].hash);
    }
    // Index nodes (two levels): each takes a run of leaves.
    let mut root_children: Vec<(u32, u32)> = Vec::new();
    if two_levels {
        let ids: Vec<usize> = (0..leaves.len()).collect();
        for (n, chunk) in ids.chunks(node_limit).enumerate() {
            let lblk = 1 + leaves.len() + n;
            let b = stage.fresh_block(phys[lblk], Kind::DxNode(dir));
            // A node opens with one empty entry over the whole block.
            dirent::put_header(b, 0, g.bs, 0, g.bs);
            let start = htree::DX_NODE_COUNT_OFFSET;
            htree::put_limit_count(b, start, node_limit as u16, chunk.len() as u16);
            for (k, &leaf) in chunk.iter().enumerate() {
                htree::put_index_entry(b, start, k, first_hash[leaf], (1 + leaf) as u32);
            }
            root_children.push((first_hash[chunk[0]], lblk as u32));
        }
    } else {
        for (i, &h) in first_hash.iter().enumerate() {
            root_children.push((h, (1 + i) as u32));
        }
    }
    // The root.
    let ft_dir = if g.filetype { 2 } else { 0 };
    let b = stage.fresh_block(phys[0], Kind::DxRoot(dir));
    // '..' spans the block; the index info and entries sit inside it.
    dirent::put_dots(b, g.bs, dir.get(), c.parent, g.bs, ft_dir);
    let mut root = DxRootMut::new(b);
    root.set(dxf::hash_version, c.base_version);
    root.set(dxf::info_length, 8);
    root.set(dxf::indirect_levels, u8::from(two_levels));
    root.set(dxf::root_limit, root_limit as u16);
    root.set(dxf::root_count, root_children.len() as u16);
    for (k, &(h, child)) in root_children.iter().enumerate() {
        htree::put_index_entry(b, htree::DX_ROOT_COUNT_OFFSET, k, h, child);
    }
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
    fn leaves_fill_up_to_the_slack() {
        let v: Vec<Entry> = (0..100).map(|_| e(8)).collect(); // 16 bytes each
        let l = fill(&v, 1000, 200);
        // 50 entries make 800 bytes, leaving exactly the slack.
        assert_eq!(l[0].len(), 51);
        assert_eq!(l.iter().map(Vec::len).sum::<usize>(), 100);
        let g = Geo {
            bs: 1024,
            csum: false,
            filetype: true,
        };
        let p = pack_linear(&g, &v);
        assert_eq!(p[0].len(), 62, "(1024 - 24) / 16 entries after . and ..");
        assert_eq!(p.iter().map(Vec::len).sum::<usize>(), 100);
    }

    #[test]
    fn dropped_indexes_are_the_ones_gone() {
        assert_eq!(dropped(&[12, 20, 30], &[20], |d| d != 30), vec![12]);
    }
}
