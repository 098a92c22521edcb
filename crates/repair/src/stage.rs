//! The changes one repair round makes, held in memory until they are
//! committed: whole blocks read from the device and edited, plus the
//! superblock and group descriptors. Reads go through the overlay, so
//! each fix sees the fixes made before it. At commit every touched
//! structure gets its checksum recomputed and the blocks become an
//! ordered list of writes for the fixer.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use ext4_layout::edit;
use ext4_layout::group_desc as gd;
use ext4_layout::inode::{inode_csum_seed, Inode};
use ext4_layout::types::{Ino, PhysBlock};

use check_core::fs::Fs;
use check_core::io::Io;

/// What kind of block a staged block is, for its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Data, bitmaps, anything without a checksum of its own.
    Plain,
    /// A directory leaf block of directory `ino`.
    DirLeaf(Ino),
    /// An htree root of directory `ino`.
    DxRoot(Ino),
    /// An htree interior node of directory `ino`.
    DxNode(Ino),
    /// An extent tree block of inode `ino`.
    Extent(Ino),
    /// An extended attribute block.
    Xattr,
    /// An inode table block (inodes get their checksums one by one).
    InodeTable,
    /// An indirect block of a file's block map.
    FileMap,
}

impl Kind {
    /// Whether the block belongs to a file (its data structures: a
    /// directory block, an extent or indirect block, an attribute block)
    /// rather than to the file system.
    fn of_a_file(self) -> bool {
        matches!(
            self,
            Kind::DirLeaf(_)
                | Kind::DxRoot(_)
                | Kind::DxNode(_)
                | Kind::Extent(_)
                | Kind::Xattr
                | Kind::FileMap
        )
    }
}

/// A repair's edit session: the blocks and metadata it has changed, the
/// reader for everything it has not, and its allocator (what it took and
/// freed over what the last check found in use). Every planner edits the
/// file system through one of these, and nothing reaches the device until
/// [`Staging::into_writes`] hands the whole set to the fixer.
pub struct Staging<'f> {
    fs: &'f Fs,
    /// The reader for blocks not yet staged.
    pub(crate) io: Io<'f>,
    alloc: super::alloc::Allocator<'f>,
    blocks: BTreeMap<u64, (Vec<u8>, Kind)>,
    inodes: BTreeSet<Ino>,
    /// The superblock in use, as it will be written.
    pub sb: Vec<u8>,
    /// The group descriptor table, as it will be written.
    pub gdt: Vec<u8>,
    sb_dirty: bool,
    gdt_dirty: bool,
    /// Clusters the check found claimed more than once that the round's
    /// clones left with one claim.
    unshared: BTreeSet<u64>,
}

impl<'f> Staging<'f> {
    /// An empty overlay over `fs`, allocating from what `maps` (the last
    /// check's) shows free; `complete` says whether that check saw every
    /// inode (if not, blocks the on-disk bitmaps mark are avoided too).
    pub fn new(fs: &'f Fs, maps: &'f check_core::ctx::Maps, complete: bool) -> Self {
        Staging {
            fs,
            io: Io::new(fs),
            alloc: super::alloc::Allocator::new(fs, maps, complete),
            blocks: BTreeMap::new(),
            inodes: BTreeSet::new(),
            sb: fs.sb.to_vec(),
            gdt: fs.gdt.clone(),
            sb_dirty: false,
            gdt_dirty: false,
            unshared: BTreeSet::new(),
        }
    }

    /// Cluster `c`, claimed more than once at the check, has one claim
    /// left after this round's clones.
    pub fn unshare(&mut self, c: u64) {
        self.unshared.insert(c);
    }

    /// Whether cluster `c` is still claimed more than once: so the check
    /// found it, and no clone of this round took a claim off it.
    pub fn shared(&self, c: u64) -> bool {
        self.alloc.claimed_twice(c) && !self.unshared.contains(&c)
    }

    /// The file system.
    pub fn fs(&self) -> &'f Fs {
        self.fs
    }

    /// A free block, the first at or after `goal`.
    pub fn alloc_block(&mut self, goal: PhysBlock) -> Option<PhysBlock> {
        self.alloc.block(goal.0).map(PhysBlock)
    }

    /// Block `b` is no longer used by anything (see
    /// [`super::alloc::Allocator::release`]).
    pub fn release_block(&mut self, b: PhysBlock) {
        self.alloc.release(b.0);
    }

    /// Block `b` is free from now on, whether the round gave it or the
    /// check found it in use (see [`super::alloc::Allocator::free`]).
    pub fn free_block(&mut self, b: PhysBlock) {
        self.alloc.free(b.0);
    }

    /// Records that block `b`'s cluster is in use (or no longer is), for
    /// the rebuild of the group summaries; nothing else changes.
    pub fn mark_block(&mut self, b: PhysBlock, used: bool) {
        self.alloc
            .mark_cluster(b.0 >> self.fs.geo.cluster_bits, used);
    }

    /// Whether inode `ino` is in use, as the round leaves it.
    pub fn inode_used(&self, ino: Ino) -> bool {
        self.alloc.inode_used(ino.get())
    }

    /// Whether inode `ino` is a directory, as the round leaves it.
    pub fn is_dir(&self, ino: Ino) -> bool {
        self.alloc.is_dir(ino.get())
    }

    /// Records that inode `ino` is in use (a directory or not), or free.
    pub fn mark_inode(&mut self, ino: Ino, used: bool, dir: bool) {
        self.alloc.mark_inode(ino.get(), used, dir);
    }

    /// The round's changes to clusters `range` (see [`Staging::mark_block`]).
    pub fn cluster_changes(&self, range: std::ops::Range<u64>) -> Vec<(u64, bool)> {
        self.alloc.cluster_changes(range).collect()
    }

    /// The round's changes to inodes `range`: (inode, in use, directory).
    pub fn inode_changes(&self, range: std::ops::Range<u32>) -> Vec<(u32, bool, bool)> {
        self.alloc.inode_changes(range).collect()
    }

    /// Blocks in use at the check that the round released.
    pub fn released(&self) -> Vec<PhysBlock> {
        self.alloc.released().into_iter().map(PhysBlock).collect()
    }

    /// A run of `n` free blocks inside `[lo, hi]`.
    pub fn alloc_run_in(&mut self, lo: PhysBlock, hi: PhysBlock, n: u64) -> Option<PhysBlock> {
        self.alloc.run_in(lo.0, hi.0, n).map(PhysBlock)
    }

    /// `n` free blocks as extents from logical block 0: one run at or
    /// after `goal` when there is one, else block by block.
    pub fn alloc_extents(
        &mut self,
        goal: PhysBlock,
        n: u64,
    ) -> Option<Vec<check_core::walk::LeafExtent>> {
        use check_core::walk::LeafExtent;
        if let Some(b) = self.alloc_run(goal, n) {
            return Some(vec![LeafExtent {
                lblk: 0,
                pblk: b.0,
                len: n,
                uninit: false,
            }]);
        }
        let mut runs: Vec<LeafExtent> = Vec::new();
        let mut g = goal;
        for got in 0..n {
            let b = self.alloc_block(g)?;
            match runs.last_mut() {
                Some(r) if r.pblk + r.len == b.0 => r.len += 1,
                _ => runs.push(LeafExtent {
                    lblk: got,
                    pblk: b.0,
                    len: 1,
                    uninit: false,
                }),
            }
            g = b + 1;
        }
        Some(runs)
    }

    /// A run of `n` free blocks, the first at or after `goal`.
    pub fn alloc_run(&mut self, goal: PhysBlock, n: u64) -> Option<PhysBlock> {
        self.alloc.run(goal.0, n).map(PhysBlock)
    }

    /// A free inode near `near`. If its group's descriptor marks it
    /// unused (uninitialised group, or the unused tail of the table), the
    /// mark is moved past it, as the library does when it allocates.
    pub fn alloc_inode(&mut self, near: Ino) -> Option<Ino> {
        let ino = Ino::new(self.alloc.inode(near.get())?)?;
        self.note_inode_used(ino);
        Some(ino)
    }

    /// Makes sure inode `ino`'s group does not mark it unused (an
    /// uninitialised group, or the unused tail of the inode table).
    pub fn note_inode_used(&mut self, ino: Ino) {
        let fs = self.fs;
        if fs.has_gdt_csum() {
            let ipg = fs.geo.inodes_per_group;
            let g = ino.index() / ipg;
            let idx = ino.index() % ipg;
            if idx >= fs.inodes_to_scan(g) {
                let d = self.gd_mut(g);
                let fl = gd::field::bg_flags.get(d) & !gd::BG_INODE_UNINIT;
                gd::field::bg_flags.set(d, fl);
                gd::ITABLE_UNUSED.set(d, u64::from(ipg - (idx + 1)));
            }
        }
    }

    /// Keeps block `b` from being allocated (it is in use though the maps
    /// do not say so).
    pub fn reserve_block(&mut self, b: PhysBlock) {
        self.alloc.reserve(b.0);
    }

    /// The blocks and inodes allocated in this round.
    pub fn allocated(&self) -> (Vec<PhysBlock>, Vec<Ino>) {
        let (blocks, inodes) = self.alloc.taken();
        (
            blocks.into_iter().map(PhysBlock).collect(),
            inodes.into_iter().filter_map(Ino::new).collect(),
        )
    }

    /// Whether nothing has been changed.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty() && !self.sb_dirty && !self.gdt_dirty
    }

    /// Number of blocks changed.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// A block for editing (read from the device the first time).
    ///
    /// A block of the file system's own metadata (a superblock or its
    /// descriptors, a bitmap, an inode table) is never edited as a file's
    /// block: a file that claims one has a bad pointer, and writing
    /// through it would destroy what the metadata holds (e2fsck copies
    /// such a block to a new one before it edits it).
    pub fn block(&mut self, blk: PhysBlock, kind: Kind) -> io::Result<&mut Vec<u8>> {
        if kind.of_a_file() && self.alloc.is_metadata(blk.0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("block {blk} holds the file system's metadata; a file's pointer to it is not written through"),
            ));
        }
        let blk = blk.0;
        if !self.blocks.contains_key(&blk) {
            if blk >= self.fs.geo.blocks_count {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("block {blk} is outside the file system"),
                ));
            }
            let mut b = vec![0u8; self.fs.block_size()];
            self.io.read_blocks(blk, &mut b)?;
            self.blocks.insert(blk, (b, kind));
        }
        let e = self
            .blocks
            .get_mut(&blk)
            .ok_or_else(|| io::Error::other("staged block vanished"))?;
        if kind != Kind::Plain {
            e.1 = kind;
        }
        Ok(&mut e.0)
    }

    /// A block to be overwritten whole (not read first).
    pub fn fresh_block(&mut self, blk: PhysBlock, kind: Kind) -> &mut Vec<u8> {
        let blk = blk.0;
        let bs = self.fs.block_size();
        let e = self
            .blocks
            .entry(blk)
            .or_insert_with(|| (vec![0u8; bs], kind));
        e.1 = kind;
        e.0.fill(0);
        &mut e.0
    }

    /// Reads a block through the overlay.
    pub fn read(&mut self, blk: PhysBlock, buf: &mut [u8]) -> io::Result<()> {
        match self.blocks.get(&blk.0) {
            Some((b, _)) => {
                buf.copy_from_slice(&b[..buf.len()]);
                Ok(())
            }
            None => self.io.read_blocks(blk.0, buf),
        }
    }

    /// Whether a block has been staged.
    pub fn has(&self, blk: PhysBlock) -> bool {
        self.blocks.contains_key(&blk.0)
    }

    /// Where inode `ino` lives: (block, byte offset in it).
    pub fn inode_location(&self, ino: Ino) -> Option<(PhysBlock, usize)> {
        let off = Io::inode_offset(self.fs, ino.get())?;
        let bs = self.fs.block_size() as u64;
        Some((PhysBlock(off / bs), (off % bs) as usize))
    }

    /// Inode `ino`'s block, its offset there, and the inode size; an
    /// inode number outside the file system is an error.
    fn inode_place(&self, ino: Ino) -> io::Result<(PhysBlock, usize, usize)> {
        let (blk, off) = self.inode_location(ino).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("inode {ino} has no place"),
            )
        })?;
        Ok((blk, off, self.fs.geo.inode_size as usize))
    }

    /// Inode `ino`'s bytes for editing; its checksum is redone at commit.
    pub fn inode(&mut self, ino: Ino) -> io::Result<&mut [u8]> {
        let (blk, off, isz) = self.inode_place(ino)?;
        self.inodes.insert(ino);
        let b = self.block(blk, Kind::InodeTable)?;
        b.get_mut(off..off + isz)
            .ok_or_else(|| io::Error::other("inode beyond its block"))
    }

    /// A copy of inode `ino` as it is now (through the overlay).
    pub fn inode_copy(&mut self, ino: Ino) -> io::Result<Vec<u8>> {
        let (blk, off, isz) = self.inode_place(ino)?;
        let mut b = vec![0u8; self.fs.block_size()];
        self.read(blk, &mut b)?;
        Ok(b[off..off + isz].to_vec())
    }

    /// Marks the superblock changed.
    pub fn sb_mut(&mut self) -> &mut [u8] {
        self.sb_dirty = true;
        &mut self.sb
    }

    /// Group `g`'s descriptor for editing.
    pub fn gd_mut(&mut self, g: u32) -> &mut [u8] {
        self.gdt_dirty = true;
        let ds = self.fs.geo.desc_size as usize;
        let off = g as usize * ds;
        &mut self.gdt[off..off + ds]
    }

    /// Group `g`'s descriptor as staged.
    pub fn gd(&self, g: u32) -> &[u8] {
        let ds = self.fs.geo.desc_size as usize;
        let off = g as usize * ds;
        &self.gdt[off..off + ds]
    }

    /// The generation of inode `ino` (through the overlay), for the
    /// checksums of the blocks it owns.
    fn generation(&mut self, ino: Ino) -> u32 {
        self.inode_copy(ino)
            .ok()
            .and_then(|raw| Inode::new(&raw).map(|i| i.i_generation()))
            .unwrap_or(0)
    }

    /// Turns the overlay into writes: checksums recomputed, data blocks
    /// first, then inode tables, descriptors and the superblock.
    pub fn into_writes(mut self) -> Vec<fixer::Write> {
        let fs = self.fs;
        let geo = &fs.geo;
        let csum = fs.metadata_csum();
        let seed = geo.csum_seed;
        let bs = fs.block_size() as u64;
        if csum {
            let kinds: Vec<(u64, Kind)> = self.blocks.iter().map(|(&b, (_, k))| (b, *k)).collect();
            for (blk, kind) in kinds {
                let iseed = match kind {
                    Kind::DirLeaf(ino)
                    | Kind::DxRoot(ino)
                    | Kind::DxNode(ino)
                    | Kind::Extent(ino) => {
                        Some(inode_csum_seed(seed, ino.get(), self.generation(ino)))
                    }
                    _ => None,
                };
                let Some((b, _)) = self.blocks.get_mut(&blk) else {
                    continue;
                };
                match (kind, iseed) {
                    (Kind::DirLeaf(_), Some(s))
                        if ext4_layout::dirent::DirTail::find(b).is_some() =>
                    {
                        ext4_layout::dirent::write_tail(b, s);
                    }
                    (Kind::DxRoot(_), Some(s)) => edit::set_dx_checksum(b, s, true),
                    (Kind::DxNode(_), Some(s)) => edit::set_dx_checksum(b, s, false),
                    (Kind::Extent(_), Some(s)) => edit::set_extent_block_checksum(b, s),
                    (Kind::Xattr, _) => edit::set_xattr_block_checksum(b, seed, blk),
                    _ => {}
                }
            }
            let inodes: Vec<Ino> = self.inodes.iter().copied().collect();
            for ino in inodes {
                if let Some((blk, off)) = self.inode_location(ino) {
                    let isz = geo.inode_size as usize;
                    if let Some((b, _)) = self.blocks.get_mut(&blk.0) {
                        edit::set_inode_checksum(&mut b[off..off + isz], seed, ino.get());
                    }
                }
            }
        }
        let mut data = Vec::new();
        let mut tables = Vec::new();
        for (blk, (b, kind)) in std::mem::take(&mut self.blocks) {
            let w = fixer::Write {
                offset: blk * bs,
                data: b,
            };
            if kind == Kind::InodeTable {
                tables.push(w);
            } else {
                data.push(w);
            }
        }
        data.extend(tables);
        if self.gdt_dirty {
            data.extend(self.gdt_writes());
        }
        if self.sb_dirty || self.gdt_dirty {
            if csum {
                edit::set_superblock_checksum(&mut self.sb);
            }
            data.push(fixer::Write {
                offset: 1024,
                data: self.sb.clone(),
            });
            // On a backup superblock (the primary's descriptors are
            // unusable), the check reads the backup again after this
            // commit: it gets the change too, under its own group number,
            // or a fix of it (a journal cleared) would not be seen.
            if fs.backup_in_use && fs.sb_block != 0 {
                let mut backup = self.sb.clone();
                let nr = fs.sb().s_block_group_nr();
                ext4_layout::superblock::field::s_block_group_nr.set(&mut backup, nr);
                if csum {
                    edit::set_superblock_checksum(&mut backup);
                }
                data.push(fixer::Write {
                    offset: fs.sb_block * bs,
                    data: backup,
                });
            }
        }
        data
    }

    /// The primary descriptor table as writes, checksums redone.
    fn gdt_writes(&mut self) -> Vec<fixer::Write> {
        let fs = self.fs;
        let geo = &fs.geo;
        let ds = geo.desc_size as usize;
        let uuid = ext4_layout::superblock::Superblock::new(&self.sb)
            .map(|s| s.s_uuid())
            .unwrap_or([0; 16]);
        if geo.has_gdt_csum() {
            for g in 0..geo.group_count {
                let off = g as usize * ds;
                edit::set_group_desc_checksum(
                    &mut self.gdt[off..off + ds],
                    g,
                    geo.metadata_csum(),
                    geo.csum_seed,
                    &uuid,
                );
            }
        }
        let bs = fs.block_size();
        let group_block = geo.first_data_block;
        let zero_adjust = u64::from(group_block == 0 && bs == 1024);
        let desc_blocks = geo.desc_blocks as usize;
        let first_meta = if geo
            .incompat
            .contains(ext4_layout::features::IncompatFeatures::META_BG)
        {
            (geo.first_meta_bg as usize).min(desc_blocks)
        } else {
            desc_blocks
        };
        let mut out = Vec::new();
        // On a backup, the table beside it gets the same blocks (its
        // meta_bg part aside), as the superblock does (see `into_writes`).
        let backup = (fs.backup_in_use && fs.sb_block != 0).then_some(fs.sb_block);
        for i in 0..desc_blocks {
            let blk = if i < first_meta {
                group_block + zero_adjust + 1 + i as u64
            } else {
                geo.descriptor_block(group_block, i as u32).0 + if i == 0 { zero_adjust } else { 0 }
            };
            let beside_backup = backup.filter(|_| i < first_meta).map(|b| b + 1 + i as u64);
            let mut b = vec![0u8; bs];
            // Bytes past the last descriptor keep what the device has.
            let _ = self.io.read_blocks(blk, &mut b);
            let lo = i * bs;
            let hi = ((i + 1) * bs).min(self.gdt.len());
            if lo < hi {
                b[..hi - lo].copy_from_slice(&self.gdt[lo..hi]);
            }
            if let Some(at) = beside_backup {
                out.push(fixer::Write {
                    offset: at * bs as u64,
                    data: b.clone(),
                });
            }
            out.push(fixer::Write {
                offset: blk * bs as u64,
                data: b,
            });
        }
        out
    }
}

/// One round's planning state: the check it plans from, where its changes
/// are staged, the reader it reads through, and the findings fixed so far.
/// Each pass's fix function takes it with the findings it is to fix.
pub struct Round<'r, 'a, 'f> {
    /// The check the round plans from.
    pub st: &'f check_core::engine::CheckState,
    /// The staged changes.
    pub stage: &'r mut Staging<'f>,
    /// What the round has fixed.
    pub fixed: Vec<&'a check_core::problem::Finding>,
    /// Problems the person at the terminal declined to fix: whatever else
    /// the round changes leaves them as they are.
    pub declined: Vec<check_core::problem::Finding>,
    /// Directories pass 2 left for pass 3A to rewrite (a leaf without room
    /// for its checksum tail), with the findings counted fixed only once
    /// the rewrite is staged.
    pub rehash: Vec<(Ino, Vec<&'a check_core::problem::Finding>)>,
    /// Fixes that change nothing e2fsck counts as a change (see
    /// [`check_core::problem::Finding::quiet`]).
    pub quiet: Vec<&'a check_core::problem::Finding>,
}

impl<'a> Round<'_, 'a, '_> {
    /// Stages each block named by a finding of `code` (a block the check
    /// could not read whole) as the check read it: its readable sectors,
    /// zeros for the rest, so that the pass's other fixes start from that.
    /// Returns the other findings.
    pub fn stage_salvaged(
        &mut self,
        mine: &[&'a check_core::problem::Finding],
        code: check_core::problem::Code,
    ) -> Vec<&'a check_core::problem::Finding> {
        let (salvaged, rest): (Vec<_>, Vec<_>) = mine.iter().copied().partition(|f| f.code == code);
        for f in salvaged {
            let Some(blk) = f.blk else { continue };
            let mut data = vec![0u8; self.st.fs.block_size()];
            check_core::io::salvage_block(&self.st.fs, blk, &mut data);
            self.stage
                .fresh_block(PhysBlock(blk), Kind::Plain)
                .copy_from_slice(&data);
            self.fixed.push(f);
        }
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The demo image's check state (no writes: everything is staged).
    fn demo() -> check_core::engine::CheckState {
        let img = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo.img");
        let dev = pipeline::open_device(&pipeline::Target::whole(img), pipeline::IoMode::Pread)
            .expect("the demo image opens");
        check_core::engine::check_with_state(Arc::new(dev), &check_core::CheckOptions::default())
            .state
            .expect("the demo image is checked")
    }

    #[test]
    fn a_file_block_on_metadata_is_never_staged() {
        let st = demo();
        let mut stage = Staging::new(&st.fs, &st.maps, true);
        let table = PhysBlock(st.fs.gd(0).inode_table());
        let bitmap = PhysBlock(st.fs.gd(0).block_bitmap());
        let dir = Ino::ROOT;
        for kind in [
            Kind::DirLeaf(dir),
            Kind::DxNode(dir),
            Kind::Extent(dir),
            Kind::Xattr,
            Kind::FileMap,
        ] {
            for blk in [table, bitmap] {
                assert!(
                    stage.block(blk, kind).is_err(),
                    "{kind:?} staged on metadata block {blk}"
                );
            }
        }
        assert!(
            !stage.has(table) && !stage.has(bitmap),
            "nothing was staged"
        );
        // The file system's own writers still reach them.
        assert!(stage.block(table, Kind::InodeTable).is_ok());
        assert!(stage.block(bitmap, Kind::Plain).is_ok());
    }
}
