//! Fast commits (jbd2's `fast_commit` feature): after the regular
//! transactions, the journal's last blocks may hold a log of small
//! changes (extents added or removed, names linked or unlinked, inodes
//! rewritten), each a tag, a length and a value. A log counts up to the
//! last tail tag whose transaction id and checksum match; replay then
//! applies its tags in order, as e2fsck does after a regular replay.

use ext4_layout::types::Ino;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

use ext4_layout::csum::crc32c_raw;
use ext4_layout::dirent::{self, ft, DIR_TAIL_SIZE};
use ext4_layout::extent;
use ext4_layout::features::IncompatFeatures;
use ext4_layout::htree;
use ext4_layout::inode::{field, I_BLOCK, I_BLOCK_OFFSET};
use ext4_layout::inode::{flags, FileType, Inode};
use ext4_layout::journal::fast_commit::{self as fc, Tag};
use ext4_layout::xattr;

use super::stage::{Kind, Staging};
use check_core::fs::Fs;
use check_core::walk::LeafExtent;

/// One change of a fast commit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Blocks mapped into a file (replacing what was mapped there).
    AddRange { ino: Ino, ext: LeafExtent },
    /// A logical range unmapped.
    DelRange { ino: Ino, lblk: u64, len: u64 },
    /// A name linked (hard-linked, or the new name of a rename) in a
    /// directory.
    Link {
        parent: Ino,
        ino: Ino,
        name: Vec<u8>,
    },
    /// A name created in a directory for a new inode (a new directory
    /// gets its '.' and '..' here: the log never holds directory blocks).
    Create {
        parent: Ino,
        ino: Ino,
        name: Vec<u8>,
    },
    /// A name removed from a directory.
    Unlink {
        parent: Ino,
        /// The inode the record names (the unlink goes by name).
        ino: u32,
        name: Vec<u8>,
    },
    /// An inode's fields as they were at the commit.
    Inode { ino: Ino, raw: Vec<u8> },
    /// The end of one fast commit.
    Tail,
}

/// The validated log: the changes of every fast commit up to the last
/// tail that matches, read from the fast commit blocks `blocks` (in
/// order). `expected_tid` is the transaction the log must continue.
pub fn scan(blocks: &[Vec<u8>], expected_tid: u32) -> Vec<Change> {
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let mut crc = 0u32;
    if !blocks.first().is_some_and(|b| fc::starts_with_head(b)) {
        return out;
    }
    for b in blocks {
        let mut records = fc::Records::new(b);
        for rec in records.by_ref() {
            match rec.decode() {
                Some(Tag::Head { features, tid }) => {
                    if features != 0 || tid != expected_tid {
                        return out;
                    }
                    crc = crc32c_raw(crc, rec.bytes);
                }
                Some(Tag::Tail { tid, crc: stored }) => {
                    // The checksum covers the tail's tag, length and tid.
                    crc = crc32c_raw(crc, &rec.bytes[..fc::TL_SIZE + 4]);
                    if tid != expected_tid || stored != crc {
                        return out;
                    }
                    pending.push(Change::Tail);
                    out.append(&mut pending);
                    crc = 0;
                }
                Some(Tag::Pad) => crc = crc32c_raw(crc, rec.bytes),
                Some(tag) => {
                    crc = crc32c_raw(crc, rec.bytes);
                    pending.extend(change_of(tag));
                }
                None => return out,
            }
        }
        if records.cut_short() {
            return out;
        }
    }
    out
}

/// The change a record asks for; none for a record naming inode 0, which
/// no change can apply to.
fn change_of(tag: Tag<'_>) -> Option<Change> {
    Some(match tag {
        Tag::AddRange { ino, extent } => Change::AddRange {
            ino: Ino::new(ino)?,
            ext: LeafExtent {
                lblk: u64::from(extent.ee_block),
                pblk: extent.start,
                len: u64::from(extent.len()),
                uninit: extent.is_uninit(),
            },
        },
        Tag::DelRange { ino, lblk, len } => Change::DelRange {
            ino: Ino::new(ino)?,
            lblk: u64::from(lblk),
            len: u64::from(len),
        },
        Tag::Dentry {
            tag,
            parent,
            ino,
            name,
        } => {
            let name = name.to_vec();
            let parent = Ino::new(parent)?;
            if tag == fc::TAG_UNLINK {
                Change::Unlink { parent, ino, name }
            } else if tag == fc::TAG_CREAT {
                let ino = Ino::new(ino)?;
                Change::Create { parent, ino, name }
            } else {
                let ino = Ino::new(ino)?;
                Change::Link { parent, ino, name }
            }
        }
        Tag::Inode { ino, raw } => Change::Inode {
            ino: Ino::new(ino)?,
            raw: raw.to_vec(),
        },
        Tag::Head { .. } | Tag::Tail { .. } | Tag::Pad => return None,
    })
}

/// Removes `[lblk, lblk + len)` from an extent list; with `add`, maps
/// `add` there instead. The list stays sorted, without empty extents,
/// neighbours that continue each other merged.
fn modify(list: &mut Vec<LeafExtent>, lblk: u64, len: u64, add: Option<LeafExtent>) {
    let end = lblk + len;
    let mut out = Vec::with_capacity(list.len() + 2);
    for &e in list.iter() {
        let e_end = e.lblk + e.len;
        if e_end <= lblk || e.lblk >= end {
            out.push(e);
            continue;
        }
        if e.lblk < lblk {
            out.push(LeafExtent {
                len: lblk - e.lblk,
                ..e
            });
        }
        if e_end > end {
            let skip = end - e.lblk;
            out.push(LeafExtent {
                lblk: end,
                pblk: e.pblk + skip,
                len: e_end - end,
                uninit: e.uninit,
            });
        }
    }
    if let Some(a) = add.filter(|a| a.len > 0) {
        out.push(a);
    }
    out.sort_by_key(|e| e.lblk);
    let mut merged: Vec<LeafExtent> = Vec::with_capacity(out.len());
    for e in out {
        match merged.last_mut() {
            Some(m)
                if m.lblk + m.len == e.lblk && m.pblk + m.len == e.pblk && m.uninit == e.uninit =>
            {
                m.len += e.len
            }
            _ => merged.push(e),
        }
    }
    *list = merged;
}

/// Applies a validated log to the staged file system, as the kernel's
/// replay applies it at mount. Returns how many changes were applied; a
/// change the kernel would skip (an inode or directory not in use, a
/// name already there or already gone) is skipped.
///
/// The kernel's rules, change by change:
/// * a change to an inode that is not in use (no links) does nothing,
///   and neither does a name change in a directory that is not in use;
/// * a link adds the name unless it is there already, and counts a link;
/// * an unlink finds the name; the entry goes only if it names the
///   logged inode, and the inode loses a link; at none it is deleted
///   (its blocks and attribute block freed, its block map emptied), so a
///   later change that reuses its number starts from an empty inode;
/// * a create follows the logged inode, and for a directory makes its
///   first block ('.' and '..');
/// * an inode's fields come from the log, its block map from the disk
///   and the ranges.
///
/// Beyond the kernel, so that the result is consistent (the kernel leaves
/// these for fsck): a new directory has two links and raises its
/// parent's count; an unlinked directory is deleted and lowers it; an
/// indexed directory that gains a name is indexed again at the end.
/// The bitmaps and counts follow every inode the log touched.
pub fn apply<'f>(fs: &'f Fs, stage: &mut Staging<'f>, log: &[Change]) -> io::Result<usize> {
    // Blocks the log maps are in use, whatever the bitmaps say.
    for c in log {
        if let Change::AddRange { ext, .. } = c {
            for b in ext.pblk..ext.pblk + ext.len {
                stage.reserve_block(ext4_layout::types::PhysBlock(b));
            }
        }
    }
    // What every inode the log names held before, to bring the bitmaps up
    // to date afterwards (as the kernel marks them at the end of its
    // replay).
    let bits = fs.geo.cluster_bits;
    let clusters_of = |stage: &mut Staging<'f>, ino: Ino| -> BTreeSet<u64> {
        super::map::all_blocks_of(stage, ino)
            .map(|v| v.into_iter().map(|b| b.0 >> bits).collect())
            .unwrap_or_default()
    };
    let mut before: BTreeMap<Ino, BTreeSet<u64>> = BTreeMap::new();
    for c in log {
        for ino in c.inodes() {
            if let std::collections::btree_map::Entry::Vacant(v) = before.entry(ino) {
                v.insert(clusters_of(stage, ino));
            }
        }
    }
    let mut r = Replay {
        fs,
        stage,
        cached: None,
        reindex: BTreeSet::new(),
        born: BTreeSet::new(),
        deleted: BTreeSet::new(),
        freed_xattr: Vec::new(),
    };
    let mut applied = 0;
    for c in log {
        // The extents gathered for one inode are written when the log
        // moves on to something else.
        let keep = match c {
            Change::AddRange { ino, .. } | Change::DelRange { ino, .. } => Some(*ino),
            Change::Inode { ino, .. } => Some(*ino),
            _ => None,
        };
        if r.cached.as_ref().is_some_and(|(i, _)| Some(*i) != keep) {
            r.flush()?;
        }
        let ok = match c {
            Change::AddRange { ino, ext } => r.range(*ino, ext.lblk, ext.len, Some(*ext)),
            Change::DelRange { ino, lblk, len } => r.range(*ino, *lblk, *len, None),
            Change::Link { parent, ino, name } => r.link(*parent, *ino, name).unwrap_or(false),
            Change::Create { parent, ino, name } => r.create(*parent, *ino, name).unwrap_or(false),
            Change::Unlink { parent, ino, name } => r.unlink(*parent, *ino, name).unwrap_or(false),
            Change::Inode { ino, raw } => {
                let ok = replay_inode(fs, r.stage, *ino, raw).is_ok();
                if ok && field::i_links_count.get(raw) != 0 {
                    r.born.insert(*ino);
                    r.deleted.remove(ino);
                }
                ok
            }
            Change::Tail => true,
        };
        if ok {
            applied += 1;
        }
    }
    r.flush()?;
    // Indexed directories that gained names: indexed again (one too small
    // for an index stays linear).
    for dir in std::mem::take(&mut r.reindex) {
        if loaded(r.stage, dir) {
            let _ = super::rehash::rebuild(fs, r.stage, dir);
        }
    }
    let Replay {
        stage,
        born,
        deleted,
        freed_xattr,
        ..
    } = r;
    // Bitmaps: clusters the changes freed and took, inodes in use or not.
    let mut freed: BTreeSet<u64> = freed_xattr.into_iter().collect();
    let mut taken = BTreeSet::new();
    for (&ino, old) in &before {
        let now = clusters_of(stage, ino);
        freed.extend(old.difference(&now).copied());
        taken.extend(now.difference(old).copied());
    }
    let both: Vec<u64> = freed.intersection(&taken).copied().collect();
    for c in both {
        freed.remove(&c);
        taken.remove(&c);
    }
    let freed: Vec<u64> = freed.into_iter().collect();
    let taken: Vec<u64> = taken.into_iter().collect();
    super::account::account(fs, stage, &freed, &taken, None);
    for ino in born.iter().chain(deleted.iter()) {
        if let Ok(raw) = stage.inode_copy(*ino) {
            let links = field::i_links_count.get(&raw);
            let dir = FileType::from_mode(field::i_mode.get(&raw)) == Some(FileType::Directory);
            super::account::account(fs, stage, &[], &[], Some((ino.get(), dir, links == 0)));
        }
    }
    free_counts_from_groups(fs, stage);
    Ok(applied)
}

/// The superblock's free counts as the sums of the groups', as the
/// kernel writes them when the replayed file system is unmounted (it
/// keeps them lazily while mounted, so a crash leaves them stale).
fn free_counts_from_groups<'f>(fs: &'f Fs, stage: &mut Staging<'f>) {
    use ext4_layout::group_desc as gd;
    use ext4_layout::superblock as sbl;
    let (mut blocks, mut inodes) = (0u64, 0u64);
    for g in 0..fs.geo.group_count {
        let d = stage.gd(g);
        blocks += gd::FREE_BLOCKS.get(d);
        inodes += gd::FREE_INODES.get(d);
    }
    let sb = stage.sb_mut();
    sbl::FREE_BLOCKS_COUNT.set(sb, blocks << fs.geo.cluster_bits);
    sbl::field::s_free_inodes_count.set(sb, u32::try_from(inodes).unwrap_or(u32::MAX));
}

impl Change {
    /// The inodes the change names (the directory of a name change too).
    fn inodes(&self) -> Vec<Ino> {
        match self {
            Change::AddRange { ino, .. } | Change::DelRange { ino, .. } => vec![*ino],
            Change::Inode { ino, .. } => vec![*ino],
            Change::Link { parent, ino, .. } | Change::Create { parent, ino, .. } => {
                vec![*parent, *ino]
            }
            Change::Unlink { parent, ino, .. } => {
                let mut v = vec![*parent];
                v.extend(Ino::new(*ino));
                v
            }
            Change::Tail => Vec::new(),
        }
    }
}

/// Whether the kernel's replay can load `ino`: it is in use (has links).
fn loaded(stage: &mut Staging<'_>, ino: Ino) -> bool {
    stage
        .inode_copy(ino)
        .is_ok_and(|r| field::i_links_count.get(&r) != 0)
}

/// A replay under way: the staged changes and what they did so far.
struct Replay<'s, 'f> {
    fs: &'f Fs,
    stage: &'s mut Staging<'f>,
    /// The extent list of the inode whose ranges are being gathered.
    cached: Option<(Ino, Vec<LeafExtent>)>,
    /// Indexed directories that gained names (their index was dropped).
    reindex: BTreeSet<Ino>,
    /// Inodes the replay brought into use.
    born: BTreeSet<Ino>,
    /// Inodes it deleted.
    deleted: BTreeSet<Ino>,
    /// Clusters of attribute blocks whose last reference went.
    freed_xattr: Vec<u64>,
}

impl<'f> Replay<'_, 'f> {
    /// Writes the extent list being gathered.
    fn flush(&mut self) -> io::Result<()> {
        if let Some((i, list)) = self.cached.take() {
            super::tree::write_extent_tree(self.stage, i, &list)?;
            super::map::recount_i_blocks(self.stage, i)?;
        }
        Ok(())
    }

    /// A range mapped (`add`) or unmapped in a file in use.
    fn range(&mut self, ino: Ino, lblk: u64, len: u64, add: Option<LeafExtent>) -> bool {
        if self.cached.as_ref().is_none_or(|(i, _)| *i != ino) {
            if !loaded(self.stage, ino) {
                return false;
            }
            let Ok(list) = super::map::extents_of_inode(self.stage, ino) else {
                return false;
            };
            self.cached = Some((ino, list));
        }
        match self.cached.as_mut() {
            Some((_, list)) => {
                modify(list, lblk, len, add);
                true
            }
            None => false,
        }
    }

    /// A link: the name added unless it is there, and a link counted.
    fn link(&mut self, parent: Ino, ino: Ino, name: &[u8]) -> io::Result<bool> {
        if !loaded(self.stage, ino) || !loaded(self.stage, parent) {
            return Ok(false);
        }
        if !self.add_name(parent, ino, name)? {
            return Ok(true);
        }
        let r = self.stage.inode(ino)?;
        let links = field::i_links_count.get(r);
        field::i_links_count.set(r, links.saturating_add(1));
        Ok(true)
    }

    /// A create: the inode (logged just before) gets its name, with one
    /// link; a directory first gets its block of '.' and '..', two links,
    /// and its parent one more.
    fn create(&mut self, parent: Ino, ino: Ino, name: &[u8]) -> io::Result<bool> {
        if !loaded(self.stage, ino) {
            return Ok(false);
        }
        let mode = field::i_mode.get(&self.stage.inode_copy(ino)?);
        let dir = FileType::from_mode(mode) == Some(FileType::Directory);
        if dir && (!loaded(self.stage, parent) || !self.make_dir_block(ino, parent)?) {
            return Ok(false);
        }
        if !loaded(self.stage, parent) {
            return Ok(false);
        }
        self.add_name(parent, ino, name)?;
        self.born.insert(ino);
        self.deleted.remove(&ino);
        field::i_links_count.set(self.stage.inode(ino)?, if dir { 2 } else { 1 });
        if dir {
            adjust_dir_links(self.stage.inode(parent)?, 1);
        }
        Ok(true)
    }

    /// An unlink: the entry goes when it names the logged inode, and the
    /// inode loses a link (at none, or for a directory, it is deleted).
    fn unlink(&mut self, parent: Ino, ino: u32, name: &[u8]) -> io::Result<bool> {
        let Some(ino) = Ino::new(ino) else {
            return Ok(false);
        };
        if !loaded(self.stage, ino) || !loaded(self.stage, parent) {
            return Ok(false);
        }
        let Some(named) = super::connect::lookup(self.stage, parent, name)? else {
            return Ok(false);
        };
        if named == ino {
            super::connect::remove_entry(self.stage, parent, name)?;
        }
        let raw = self.stage.inode_copy(ino)?;
        let dir = FileType::from_mode(field::i_mode.get(&raw)) == Some(FileType::Directory);
        let links = field::i_links_count.get(&raw);
        // A directory is only ever unlinked whole (rmdir): its '.' and its
        // entry in the parent go together.
        let left = if dir { 0 } else { links.saturating_sub(1) };
        field::i_links_count.set(self.stage.inode(ino)?, left);
        if dir {
            adjust_dir_links(self.stage.inode(parent)?, -1);
        }
        if left == 0 {
            self.delete(ino)?;
        }
        Ok(true)
    }

    /// Adds `name` -> `ino` to `parent` unless a name so spelled is there
    /// already (the kernel's "exists"): whether it added it. An indexed
    /// directory loses its index first, and is indexed again at the end.
    fn add_name(&mut self, parent: Ino, ino: Ino, name: &[u8]) -> io::Result<bool> {
        if super::connect::lookup(self.stage, parent, name)?.is_some() {
            return Ok(false);
        }
        let pf = field::i_flags.get(&self.stage.inode_copy(parent)?);
        if pf & flags::INLINE_DATA != 0 {
            return Err(io::Error::other("an inline directory"));
        }
        if pf & flags::INDEX != 0 {
            self.unindex(parent)?;
        }
        let mode = field::i_mode.get(&self.stage.inode_copy(ino)?);
        let ft = FileType::from_mode(mode)
            .ok_or_else(|| io::Error::other("unknown file type"))?
            .dirent_code();
        let ft = if self.fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
            ft
        } else {
            0
        };
        super::connect::add_entry(self.fs, self.stage, parent, ino, name, ft)?;
        Ok(true)
    }

    /// Drops a directory's htree index: the root becomes '.', '..' and
    /// room, each interior node one empty entry (with their checksum
    /// tails), so names can be added to any block; the directory is
    /// indexed again once the replay is over.
    fn unindex(&mut self, dir: Ino) -> io::Result<()> {
        let fs = self.fs;
        let bs = fs.block_size();
        let csum = fs.metadata_csum();
        let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
        let ft = if fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
            ft::DIR
        } else {
            0
        };
        let mut b = vec![0u8; bs];
        for (lblk, pblk) in super::map::blocks_of(self.stage, dir)? {
            self.stage.read(pblk, &mut b)?;
            let index = if lblk == 0 {
                htree::looks_like_root(&b)
            } else {
                htree::looks_like_node(&b, csum)
            };
            if !index {
                continue;
            }
            let parent = dirent::inode_at(&b, 12);
            let nb = self.stage.block(pblk, Kind::DirLeaf(dir))?;
            nb.fill(0);
            if lblk == 0 {
                dirent::put_dots(nb, bs, dir.get(), parent, end, ft);
            } else {
                dirent::put_entry(nb, 0, bs, 0, end, b"", 0);
            }
            if csum {
                dirent::write_tail(nb, 0);
            }
        }
        let r = self.stage.inode(dir)?;
        let fl = field::i_flags.get(r);
        field::i_flags.set(r, fl & !flags::INDEX);
        self.reindex.insert(dir);
        Ok(())
    }

    /// A new directory's first block: '.' and '..', at logical block 0
    /// (refused, as the kernel refuses, when something is mapped there).
    fn make_dir_block(&mut self, ino: Ino, parent: Ino) -> io::Result<bool> {
        self.flush()?;
        if !super::map::blocks_of(self.stage, ino)?.is_empty() {
            return Ok(false);
        }
        let fs = self.fs;
        let bs = fs.block_size();
        let csum = fs.metadata_csum();
        let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
        let ft = if fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
            ft::DIR
        } else {
            0
        };
        let goal = super::map::blocks_of(self.stage, parent)?
            .first()
            .map_or(ext4_layout::types::PhysBlock(0), |&(_, p)| p);
        let blk = self
            .stage
            .alloc_block(goal)
            .ok_or_else(|| io::Error::other("no free block for a directory"))?;
        {
            let b = self.stage.fresh_block(blk, Kind::DirLeaf(ino));
            dirent::put_dots(b, bs, ino.get(), parent.get(), end, ft);
            if csum {
                dirent::write_tail(b, 0);
            }
        }
        super::map::map_block(self.stage, ino, 0, blk)?;
        super::map::recount_i_blocks(self.stage, ino)?;
        super::raw::set_size(self.stage.inode(ino)?, bs as u64);
        Ok(true)
    }

    /// Deletes an inode as the kernel's eviction of its last link does:
    /// its blocks go (the bitmaps follow at the end of the replay), its
    /// attribute block loses this reference, and it is marked deleted.
    fn delete(&mut self, ino: Ino) -> io::Result<()> {
        self.flush()?;
        let fs = self.fs;
        let raw = self.stage.inode_copy(ino)?;
        let inode = Inode::new(&raw).ok_or_else(|| io::Error::other("bad inode"))?;
        if check_core::walk::inode_has_valid_blocks(fs, &inode) {
            super::map::truncate_map(self.stage, ino, 0)?;
        }
        let is64 = fs.geo.incompat.contains(IncompatFeatures::BIT64);
        let acl = inode.file_acl(is64);
        if acl != 0 && fs.geo.block_in_range(acl) {
            let blk = ext4_layout::types::PhysBlock(acl);
            let b = self.stage.block(blk, Kind::Xattr)?;
            let magic = xattr::field::h_magic.get(b);
            if magic == xattr::EA_MAGIC && xattr::field::h_blocks.get(b) == 1 {
                let count = xattr::field::h_refcount.get(b).saturating_sub(1);
                xattr::field::h_refcount.set(b, count);
                if count == 0 {
                    self.freed_xattr.push(acl >> fs.geo.cluster_bits);
                }
            }
        }
        let r = self.stage.inode(ino)?;
        ext4_layout::inode::FILE_ACL.set(r, 0);
        field::i_links_count.set(r, 0);
        field::i_dtime.set(r, super::raw::now());
        super::raw::set_size(r, 0);
        super::map::recount_i_blocks(self.stage, ino)?;
        self.deleted.insert(ino);
        self.born.remove(&ino);
        Ok(())
    }
}

/// Raises or lowers a directory's link count by one, leaving a count of
/// one (dir_nlink's "too many to count") as it is.
fn adjust_dir_links(raw: &mut [u8], by: i32) {
    let links = field::i_links_count.get(raw);
    if links > 1 {
        let n = (i32::from(links) + by).clamp(2, i32::from(u16::MAX - 1));
        field::i_links_count.set(raw, n as u16);
    }
}

/// Replays an inode: its fields from the log, its block map or extent
/// tree as the range tags left it, `i_blocks` recounted.
fn replay_inode<'f>(fs: &'f Fs, stage: &mut Staging<'f>, ino: Ino, fc: &[u8]) -> io::Result<()> {
    let isz = fs.geo.inode_size as usize;
    let mut len = 128;
    if isz > 128 {
        let extra = usize::from(field::i_extra_isize_raw.get(fc));
        if extra < 4 || extra > isz - 128 {
            return Err(io::Error::other("bad extra inode size"));
        }
        len += extra;
    }
    if fc.len() < len {
        return Err(io::Error::other("short inode"));
    }
    {
        let r = stage.inode(ino)?;
        r[..I_BLOCK_OFFSET].copy_from_slice(&fc[..I_BLOCK_OFFSET]);
        let gen_on = field::i_generation.offset();
        r[gen_on..len].copy_from_slice(&fc[gen_on..len]);
        let fl = field::i_flags.get(r);
        if fl & flags::EXTENTS != 0 {
            let root = &mut r[I_BLOCK];
            if extent::field::eh_magic.get(root) != extent::EXT4_EXT_MAGIC {
                // An empty extent root in place of what was there.
                extent::put_header(root, 0, 4, 0);
            }
        } else if fl & flags::INLINE_DATA != 0 {
            r[I_BLOCK].copy_from_slice(&fc[I_BLOCK]);
        }
    }
    // An inode in use is not in its group's unused area (the bitmaps are
    // left to pass 5).
    if field::i_links_count.get(fc) != 0 {
        stage.note_inode_used(ino);
    }
    super::map::recount_i_blocks(stage, ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fc::{TAG_ADD_RANGE, TAG_HEAD, TAG_LINK, TAG_TAIL};

    fn tlv(tag: u16, val: &[u8]) -> Vec<u8> {
        let mut v = tag.to_le_bytes().to_vec();
        v.extend_from_slice(&(val.len() as u16).to_le_bytes());
        v.extend_from_slice(val);
        v
    }

    fn block(parts: &[Vec<u8>], tid: u32, good_crc: bool) -> Vec<u8> {
        let mut b: Vec<u8> = parts.concat();
        let crc = crc32c_raw(0, &b);
        let mut tail_tl = TAG_TAIL.to_le_bytes().to_vec();
        tail_tl.extend_from_slice(&8u16.to_le_bytes());
        tail_tl.extend_from_slice(&tid.to_le_bytes());
        let crc = crc32c_raw(crc, &tail_tl);
        b.extend_from_slice(&tail_tl);
        b.extend_from_slice(&(if good_crc { crc } else { crc ^ 1 }).to_le_bytes());
        b.resize(1024, 0);
        b
    }

    fn head(tid: u32) -> Vec<u8> {
        let mut v = 0u32.to_le_bytes().to_vec();
        v.extend_from_slice(&tid.to_le_bytes());
        tlv(TAG_HEAD, &v)
    }

    fn add_range(ino: u32, lblk: u32, len: u16, pblk: u32) -> Vec<u8> {
        let mut v = ino.to_le_bytes().to_vec();
        v.extend_from_slice(&lblk.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&pblk.to_le_bytes());
        tlv(TAG_ADD_RANGE, &v)
    }

    #[test]
    fn a_log_counts_up_to_its_last_good_tail() {
        let link = {
            let mut v = 2u32.to_le_bytes().to_vec();
            v.extend_from_slice(&12u32.to_le_bytes());
            v.extend_from_slice(b"new");
            tlv(TAG_LINK, &v)
        };
        let b = block(&[head(7), add_range(12, 0, 4, 100), link], 7, true);
        let log = scan(std::slice::from_ref(&b), 7);
        assert_eq!(log.len(), 3);
        assert!(matches!(log[0], Change::AddRange { ino, .. } if ino.get() == 12));
        assert_eq!(
            log[1],
            Change::Link {
                parent: Ino::ROOT,
                ino: Ino::new(12).expect("12 is an inode number"),
                name: b"new".to_vec()
            }
        );
        assert_eq!(log[2], Change::Tail);
        assert!(
            scan(std::slice::from_ref(&b), 8).is_empty(),
            "another transaction"
        );
        let bad = block(&[head(7), add_range(12, 0, 4, 100)], 7, false);
        assert!(scan(&[bad], 7).is_empty(), "a bad checksum");
        assert!(scan(&[vec![0u8; 1024]], 7).is_empty(), "no head");
    }

    #[test]
    fn ranges_replace_what_they_cover() {
        let e = |lblk, pblk, len| LeafExtent {
            lblk,
            pblk,
            len,
            uninit: false,
        };
        let mut l = vec![e(0, 100, 10)];
        modify(&mut l, 3, 2, Some(e(3, 500, 2)));
        assert_eq!(l, vec![e(0, 100, 3), e(3, 500, 2), e(5, 105, 5)]);
        modify(&mut l, 3, 2, Some(e(3, 103, 2)));
        assert_eq!(l, vec![e(0, 100, 10)], "merged back");
        modify(&mut l, 0, 4, None);
        assert_eq!(l, vec![e(4, 104, 6)]);
        modify(&mut l, 0, 100, None);
        assert!(l.is_empty());
    }
}
