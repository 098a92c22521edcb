//! The state pass 2's modules share: the context every directory block
//! is checked in, and the counts the pass builds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use ext4_layout::dirent;
use ext4_layout::features::CompatFeatures;
use ext4_layout::inode::{FileType, Inode};

use crate::counts::Counts;
use crate::ctx::{AbortAt, Maps};
use crate::error::InodeReadError;
use crate::fs::Fs;
use crate::io::Io;
use crate::pass1::{DirWork, Policy};
use crate::problem::Finding;

use super::dirtable::DirTable;

/// Where a leaf block's checksum tail stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailStatus {
    /// A well-formed tail ends the entry chain.
    Found,
    /// The chain does not end where a tail would be.
    NoSpace,
    /// The chain itself is broken.
    Corrupted,
}

/// Encryption policies of encrypted inodes, filled in by pass 1 (they are
/// rare, so a lock is cheap here).
#[derive(Default)]
pub(crate) struct Policies {
    inner: Mutex<BTreeMap<u32, Policy>>,
}

impl Policies {
    /// Adds policies found by a pass-1 worker.
    pub fn add(&self, v: Vec<(u32, Policy)>) {
        if v.is_empty() {
            return;
        }
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.extend(v);
    }

    /// The policies of two inodes.
    pub(crate) fn pair(&self, a: u32, b: u32) -> (Option<Policy>, Option<Policy>) {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (m.get(&a).cloned(), m.get(&b).cloned())
    }
}

/// What pass 2 shares with its workers: the file system, pass 1's maps
/// and the counters every block updates.
pub struct P2Ctx<'a> {
    /// The file system.
    pub fs: &'a Fs,
    /// Check names in case-folded directories against the encoding even
    /// when the file system is not strict (`-E check_encoding`).
    pub check_encoding: bool,
    /// Pass-1 maps.
    pub maps: &'a Maps,
    /// Encryption policies.
    pub(crate) policies: Policies,
    /// References found per inode (index `ino - 1`), '.' and '..' included:
    /// half a byte an inode, the rare count of 15 or more kept aside.
    pub(crate) counted: Counts,
    /// Inodes pass 1 scans in each group (the rest are never checked).
    scan_limit: Vec<u32>,
    /// Whether blocks are taken in dir_index order.
    pub dir_index: bool,
    /// Quota and orphan file inodes, which no entry may name.
    pub special: [u32; 4],
    /// Under a repair: entries are judged as e2fsck -y judges them (see
    /// the entry checks), so that passes 3 to 5 see what the repair leaves.
    pub(crate) yes: bool,
    /// Who answers (see [`crate::ctx::CheckOptions::answers`]).
    pub answers: Option<std::sync::Arc<dyn crate::answers::Answers>>,
    /// The inode the root's "lost+found" entry names, as the device holds
    /// it: pass 3A never rewrites it, so it is never judged as rewritten.
    pub lost_found: Option<u32>,
    /// Of late, how many directory-block reads (per thousand) had to wait
    /// for the device: a moving average that decides whether pass 1
    /// fetches directory blocks ahead. It starts high (assume a cold cache).
    miss_permille: AtomicU32,
}

impl<'a> P2Ctx<'a> {
    /// The pass-2 context of a file system.
    pub fn new(fs: &'a Fs, maps: &'a Maps) -> Self {
        let n = fs.geo.inodes_count as usize;
        let sb = fs.sb();
        P2Ctx {
            fs,
            check_encoding: false,
            maps,
            policies: Policies::default(),
            counted: Counts::new(n as u64),
            scan_limit: (0..fs.geo.group_count)
                .map(|g| fs.inodes_to_scan(g))
                .collect(),
            dir_index: fs.geo.compat.contains(CompatFeatures::DIR_INDEX),
            special: [
                sb.s_usr_quota_inum(),
                sb.s_grp_quota_inum(),
                sb.s_prj_quota_inum(),
                sb.s_orphan_file_inum(),
            ]
            .map(|x| if x == 0 { u32::MAX } else { x }),
            miss_permille: AtomicU32::new(1000),
            yes: false,
            answers: None,
            lost_found: crate::paths::entry_of_root(fs, b"lost+found"),
        }
    }

    /// Whether, under a repair, problem `f` is taken as fixed.
    pub(crate) fn says_yes(&self, f: &crate::problem::Finding) -> bool {
        crate::ctx::answered_yes(self.yes, self.answers.as_deref(), f)
    }

    /// Records how many reads of a batch came from the page cache.
    pub(crate) fn note_reads(&self, cached: usize, total: usize) {
        if total == 0 {
            return;
        }
        let now = ((total - cached) * 1000 / total) as u32;
        let old = self.miss_permille.load(Ordering::Relaxed);
        // A racy moving average is good enough for a hint.
        self.miss_permille
            .store((old * 3 + now) / 4, Ordering::Relaxed);
    }

    /// Whether blocks should be fetched ahead as they are found (directory
    /// blocks, and the blocks pass 1's checks read one at a time): only
    /// while reads keep missing the page cache.
    pub(crate) fn wants_prefetch(&self) -> bool {
        self.miss_permille.load(Ordering::Relaxed) > 200
    }

    /// Counts a reference to `ino`.
    #[inline]
    pub(crate) fn count_ref(&self, ino: u32) {
        if let Some(i) = ino.checked_sub(1) {
            self.counted.add_one(i);
        }
    }

    /// Whether pass 1 has said all it will about `ino`: checked, never
    /// to be scanned, or not an inode at all.
    #[inline]
    pub fn settled(&self, ino: u32) -> bool {
        let Some(i) = ino.checked_sub(1) else {
            return true;
        };
        if i >= self.fs.geo.inodes_count {
            return true;
        }
        let ipg = self.fs.geo.inodes_per_group;
        let g = (i / ipg) as usize;
        if self.scan_limit.get(g).is_none_or(|&l| i % ipg >= l) {
            return true;
        }
        self.maps.inode_done.get_acquire(u64::from(i))
    }

    /// Whether a block can be checked before pass 1 ends: every inode
    /// its entries name is settled. Encrypted and inline directories wait
    /// for the end (they are rare, and need every policy).
    pub fn ready(&self, w: &DirWork, data: &[u8]) -> bool {
        if w.meta.encrypted || w.inline.is_some() {
            return false;
        }
        if w.pblk == 0 {
            return true;
        }
        let bs = data.len();
        let mut pos = 0usize;
        while pos + 8 <= bs {
            let ino = dirent::inode_at(data, pos);
            if ino != 0 && !self.settled(ino) {
                return false;
            }
            let rl = dirent::rec_len_at(data, pos, bs);
            if rl < 8 {
                break;
            }
            pos += rl;
        }
        true
    }

    /// Reads an inode the way e2fsck's "read or die" does: a checksum
    /// failure stops the check.
    pub(crate) fn read_inode_checked(
        &self,
        io: &mut Io<'_>,
        ino: u32,
        buf: &mut [u8],
    ) -> Result<(), InodeReadError> {
        if io.read_inode(ino, buf).is_err() {
            return Err(InodeReadError::Unreadable(ino));
        }
        let csum_bad = if self.maps.inode_scanned.get(u64::from(ino - 1)) {
            self.maps.inode_csum_bad.get(u64::from(ino - 1))
        } else {
            self.fs.metadata_csum()
                && Inode::new(buf).is_some_and(|i| !i.checksum_ok(self.fs.geo.csum_seed, ino))
        };
        if csum_bad {
            return Err(InodeReadError::Checksum(ino));
        }
        Ok(())
    }

    /// The directory entry type an inode's mode calls for (reads the inode).
    pub(crate) fn mode_type(&self, io: &mut Io<'_>, ino: u32) -> Result<u8, InodeReadError> {
        if self.maps.used(ino) && !self.maps.inode_csum_bad.get(u64::from(ino - 1)) {
            let t = self.maps.ftype(ino);
            if t != 0 {
                return Ok(t);
            }
        }
        let mut buf = [0u8; 1024];
        let n = (self.fs.geo.inode_size as usize).min(buf.len());
        self.read_inode_checked(io, ino, &mut buf[..n])?;
        Ok(Inode::new(&buf[..n])
            .and_then(|i| i.file_type())
            .map_or(0, FileType::dirent_code))
    }
}

/// References pass 2 found per inode (index `ino - 1`).
#[derive(Default)]
pub(crate) struct RefCounts {
    pub(crate) counts: Counts,
}

impl RefCounts {
    /// The references to the inode of index `idx` (`ino - 1`).
    pub fn get(&self, idx: usize) -> u32 {
        u32::try_from(idx).map_or(0, |i| self.counts.get(i))
    }

    /// Every count, in inode order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.counts.iter()
    }
}

#[derive(Default)]
pub(crate) struct P2Out {
    /// Findings.
    pub findings: Vec<Finding>,
    /// References found per inode (index `ino - 1`), '.' and '..' included.
    pub counted: RefCounts,
    /// Each directory's '..' and parent (e2fsck's `dir_info`).
    pub dirs: DirTable,
    /// Directories with duplicate names, each with the first name found
    /// twice, for pass 3A.
    pub dup_dirs: Vec<(u32, Vec<u8>)>,
    /// Where a fatal problem stopped the check.
    pub abort: Option<AbortAt>,
    /// Under a repair: inodes deallocated through their entries.
    pub deallocated: Vec<u32>,
    /// Under a repair: directories whose '..' entry counts for something
    /// other than the inode recorded as its '..' (0: for nothing).
    pub dotdot_refs: Vec<(u32, u32)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_counts_past_any_small_width_are_kept_whole() {
        let counts = Counts::new(6);
        for _ in 0..65_545 {
            counts.add_one(0);
        }
        for _ in 0..3 {
            counts.add_one(1);
        }
        for _ in 0..10 {
            counts.add_one(5);
        }
        let counts = RefCounts { counts };
        assert_eq!(counts.get(0), 65_545);
        assert_eq!(counts.get(1), 3);
        assert_eq!(counts.get(5), 10);
        assert_eq!(counts.get(99), 0, "past the end: no references");
        assert_eq!(counts.iter().map(u64::from).sum::<u64>(), 65_545 + 3 + 10);
    }
}
