//! Finding free blocks and inodes for repairs that need new ones.

use std::collections::{BTreeMap, BTreeSet};

use check_core::ctx::Maps;
use check_core::fs::Fs;

/// What a round changed in the record of what is in use: clusters taken
/// or freed, and inodes taken or freed (with whether each is then a
/// directory). The last change to each wins; what a round did not change
/// is as the check found it (the check's maps are never written).
#[derive(Default)]
struct Changes {
    clusters: BTreeMap<u64, bool>,
    /// Inode to (in use, directory).
    inodes: BTreeMap<u32, (bool, bool)>,
}

/// Hands out blocks and inodes that the last check found free, never the
/// same one twice in a round, and keeps the round's own record of what
/// is in use over the check's.
pub struct Allocator<'a> {
    fs: &'a Fs,
    maps: &'a Maps,
    /// When the check stopped before it saw every inode: the clusters the
    /// on-disk bitmaps mark in use (relative to the first data cluster),
    /// which are then never handed out either.
    disk_used: Option<check_core::fs::BitSet>,
    taken_blocks: BTreeSet<u64>,
    taken_inodes: BTreeSet<u32>,
    /// Blocks the check saw in use that a fix of this round stopped
    /// using (an extent tree written anew): free once the round's
    /// summaries are rebuilt, but not handed out again in the round.
    released: BTreeSet<u64>,
    changes: Changes,
}

impl<'a> Allocator<'a> {
    /// An allocator over the state of the last check.
    pub fn new(fs: &'a Fs, maps: &'a Maps, complete: bool) -> Self {
        let disk_used = (!complete).then(|| {
            let mut io = check_core::io::Io::new(fs);
            check_core::walk::read_bitmaps(fs, &mut io).blocks
        });
        Allocator {
            fs,
            maps,
            disk_used,
            taken_blocks: BTreeSet::new(),
            taken_inodes: BTreeSet::new(),
            released: BTreeSet::new(),
            changes: Changes::default(),
        }
    }

    /// Whether cluster `c` is in use: as the round left it, else as the
    /// check found it.
    pub fn cluster_used(&self, c: u64) -> bool {
        match self.changes.clusters.get(&c) {
            Some(&used) => used,
            None => self.maps.block_found.get(c),
        }
    }

    /// Records that cluster `c` is (or is no longer) in use.
    pub fn mark_cluster(&mut self, c: u64, used: bool) {
        self.changes.clusters.insert(c, used);
    }

    /// Whether cluster `c` was claimed more than once at the check.
    pub fn claimed_twice(&self, c: u64) -> bool {
        self.maps.block_dup.get(c)
    }

    /// Whether inode `ino` is in use, as the round left it.
    pub fn inode_used(&self, ino: u32) -> bool {
        match self.changes.inodes.get(&ino) {
            Some(&(used, _)) => used,
            None => self.maps.used(ino),
        }
    }

    /// Whether inode `ino` is a directory, as the round left it.
    pub fn is_dir(&self, ino: u32) -> bool {
        match self.changes.inodes.get(&ino) {
            Some(&(_, dir)) => dir,
            None => self.maps.is_dir(ino),
        }
    }

    /// Records that inode `ino` is in use (and whether as a directory), or
    /// free (and then no directory).
    pub fn mark_inode(&mut self, ino: u32, used: bool, dir: bool) {
        if ino != 0 {
            self.changes.inodes.insert(ino, (used, used && dir));
        }
    }

    /// The round's changes to clusters `range`, in order.
    pub fn cluster_changes(
        &self,
        range: std::ops::Range<u64>,
    ) -> impl Iterator<Item = (u64, bool)> + '_ {
        self.changes.clusters.range(range).map(|(&c, &u)| (c, u))
    }

    /// The round's changes to inodes `range`, in order: (inode, in use,
    /// directory).
    pub fn inode_changes(
        &self,
        range: std::ops::Range<u32>,
    ) -> impl Iterator<Item = (u32, bool, bool)> + '_ {
        self.changes
            .inodes
            .range(range)
            .map(|(&i, &(used, dir))| (i, used, dir))
    }

    /// Whether block `b` holds critical metadata, as the check mapped it.
    pub fn is_metadata(&self, b: u64) -> bool {
        b < self.fs.geo.blocks_count && self.maps.metadata.get(b)
    }

    fn block_free(&self, b: u64) -> bool {
        let geo = &self.fs.geo;
        let c = b >> geo.cluster_bits;
        b >= geo.first_data_block
            && b < geo.blocks_count
            && !self.cluster_used(c)
            && !self
                .disk_used
                .as_ref()
                .is_some_and(|d| d.get(c - (geo.first_data_block >> geo.cluster_bits)))
            && !self.maps.metadata.get(b)
            && !self.taken_blocks.contains(&b)
            && !self.released.contains(&b)
    }

    /// A free block, the first at or after `goal` (wrapping around).
    pub fn block(&mut self, goal: u64) -> Option<u64> {
        let geo = &self.fs.geo;
        let start = goal.clamp(geo.first_data_block, geo.blocks_count.saturating_sub(1));
        let found = (start..geo.blocks_count)
            .chain(geo.first_data_block..start)
            .find(|&b| self.block_free(b))?;
        // With bigalloc a cluster is handed out whole.
        let bits = geo.cluster_bits;
        let c = found >> bits;
        for x in (c << bits)..((c + 1) << bits) {
            self.taken_blocks.insert(x);
        }
        Some(found)
    }

    /// `n` free blocks in one run inside `[lo, hi]`.
    pub fn run_in(&mut self, lo: u64, hi: u64, n: u64) -> Option<u64> {
        let mut b = lo.max(self.fs.geo.first_data_block);
        while n > 0 && b + n - 1 <= hi.min(self.fs.geo.blocks_count.saturating_sub(1)) {
            match (b..b + n).find(|&x| !self.block_free(x)) {
                None => {
                    for x in b..b + n {
                        self.taken_blocks.insert(x);
                    }
                    return Some(b);
                }
                Some(x) => b = x + 1,
            }
        }
        None
    }

    /// `n` free blocks in one run, the first at or after `goal`, else
    /// anywhere from the start of the file system.
    pub fn run(&mut self, goal: u64, n: u64) -> Option<u64> {
        let first = self.fs.geo.first_data_block;
        let last = self.fs.geo.blocks_count.saturating_sub(1);
        self.run_in(goal, last, n).or_else(|| {
            (goal > first)
                .then(|| self.run_in(first, last, n))
                .flatten()
        })
    }

    /// Never hands out block `b` (something not in the maps uses it).
    pub fn reserve(&mut self, b: u64) {
        self.taken_blocks.insert(b);
    }

    /// Block `b` is no longer used: handed back if this round took it,
    /// else counted free when the summaries are rebuilt (not with
    /// bigalloc, where the rest of its cluster may still be in use).
    pub fn release(&mut self, b: u64) {
        if self.taken_blocks.remove(&b) {
            return;
        }
        if self.fs.geo.cluster_bits == 0 {
            self.released.insert(b);
        }
    }

    /// Block `b` is free from now on: released, and out of the round's
    /// record of blocks in use (the group summaries are rebuilt from it).
    pub fn free(&mut self, b: u64) {
        self.release(b);
        self.mark_cluster(b >> self.fs.geo.cluster_bits, false);
    }

    /// The blocks released by [`Allocator::release`] that were in use.
    pub fn released(&self) -> Vec<u64> {
        self.released.iter().copied().collect()
    }

    /// The blocks and inodes handed out so far.
    pub fn taken(&self) -> (Vec<u64>, Vec<u32>) {
        (
            self.taken_blocks.iter().copied().collect(),
            self.taken_inodes.iter().copied().collect(),
        )
    }

    /// A free inode for a new directory or file: the first one from the
    /// start of `near`'s group (the caller makes sure its group's unused
    /// mark no longer covers it).
    pub fn inode(&mut self, near: u32) -> Option<u32> {
        let geo = &self.fs.geo;
        let ipg = geo.inodes_per_group;
        let start_group = near.saturating_sub(1) / ipg;
        for k in 0..geo.group_count {
            let g = (start_group + k) % geo.group_count;
            for i in 0..ipg {
                let ino = g * ipg + i + 1;
                if ino < geo.first_ino {
                    continue;
                }
                if !self.inode_used(ino) && !self.taken_inodes.contains(&ino) {
                    self.taken_inodes.insert(ino);
                    return Some(ino);
                }
            }
        }
        None
    }
}
