//! State shared by the passes: per-inode and per-block maps that workers
//! update without locks, and the results merged at pass boundaries.

use crate::bitmap::AtomicBitmap;
use crate::counts::TypeAndLinks;
use crate::fs::{BitSet, Fs};
use crate::problem::{Finding, Pass};

/// Options that change how the checker runs (never what it finds).
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Worker threads for the parallel passes (at least 1).
    pub threads: usize,
    /// Let the thread budget follow the machine's load (`--threads auto`).
    pub auto_threads: bool,
    /// Run the workers at idle priority (`--nice`).
    pub idle_priority: bool,
    /// Check from this superblock instead of the primary (`-b`).
    pub superblock: Option<crate::fs::SbLoc>,
    /// Counters to update for a progress display.
    pub progress: Option<&'static crate::progress::Progress>,
    /// The journal device of a file system whose journal is not inside
    /// it (`-j`).
    pub external_journal: Option<std::sync::Arc<pipeline::Device>>,
    /// e2fsck's extended options that change what is checked or shown.
    pub choices: Choices,
    /// Whether the check is a round of a repair: e2fsck would already
    /// have written (with a good checksum) an inode it fixed earlier in
    /// pass 1, which changes what pass 1 then makes of it.
    pub repairing: bool,
    /// Under a repair, after its first check: the inodes that check found
    /// not to be directories because their checksum failed (sorted).
    /// e2fsck decides that once, on the inodes as found; later rounds,
    /// after their checksums were fixed, decide the same way.
    pub not_dirs: std::sync::Arc<[u32]>,
    /// Under a repair: who answers its questions (`None`: yes to all, as
    /// e2fsck -y). The passes judge what follows a problem as the answer
    /// leaves it.
    pub answers: Option<std::sync::Arc<dyn crate::answers::Answers>>,
    /// The superblock's time checks (a last mount or write time in the
    /// future); `None` when the clock is declared broken (e2fsck.conf's
    /// broken_system_clock) or reads before 2010.
    pub times: Option<TimeCheck>,
    /// Set (by a signal handler) to stop the check: the passes stop at
    /// their next unit of work and the report lists what was found so
    /// far, marked as cancelled.
    pub interrupt: Option<&'static std::sync::atomic::AtomicBool>,
    /// This process holds the multiple-mount protection block (a repair
    /// marked it as being checked): the mark is its own.
    pub mmp_held: bool,
    /// The file system is mounted and in use (`--online`): the inodes on
    /// its orphan list and in its orphan file are live.
    pub live: bool,
    /// Told of each pass as it ends, with what it found (a report
    /// printed as the check goes).
    pub stream: Option<std::sync::Arc<dyn crate::answers::PassListener>>,
}

impl CheckOptions {
    /// Whether the check was told to stop.
    pub fn interrupted(&self) -> bool {
        self.interrupt
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// How the superblock's times are judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeCheck {
    /// Seconds since the epoch.
    pub now: u64,
    /// How far ahead a time may be and still be taken as the clock's
    /// fault, fixed without asking (e2fsck.conf's accept_time_fudge: a
    /// day, or 0).
    pub fudge: u64,
    /// Whether the check was forced (`-f`): without it, times are judged
    /// only on a file system with a check interval, as e2fsck does.
    pub forced: bool,
}

impl CheckOptions {
    /// Whether the check, inside a repair, takes problem `f` as fixed.
    pub fn says_yes(&self, f: &Finding) -> bool {
        answered_yes(self.repairing, self.answers.as_deref(), f)
    }
}

/// Whether a check inside a repair (`repairing`) takes `f` as fixed,
/// given who answers.
pub(crate) fn answered_yes(
    repairing: bool,
    answers: Option<&dyn crate::answers::Answers>,
    f: &Finding,
) -> bool {
    repairing && answers.is_none_or(|a| a.yes(f))
}

/// e2fsck's `-E` choices that change what a check reports or prints
/// (unlike the rest of [`CheckOptions`]).
#[derive(Clone, Copy, Debug)]
pub struct Choices {
    /// The version of extended attribute blocks accepted (1 or 2).
    pub ea_ver: u8,
    /// List every discontinuity in a file's blocks (`fragcheck`).
    pub fragcheck: bool,
    /// Check names in case-folded directories against the encoding.
    pub check_encoding: bool,
    /// How far ahead of the workers inode tables are read, in KiB;
    /// `None` for the default, 0 for none.
    pub readahead_kb: Option<u64>,
    /// Treat blocks shared under the shared_blocks feature as claimed
    /// twice, so that a repair gives each file its own copy
    /// (`unshare_blocks`).
    pub unshare_blocks: bool,
    /// Offer to rebuild extent trees that could be shorter or narrower,
    /// as e2fsck does unless told `no_optimize_extents` or `fixes_only`.
    pub optimize_extents: bool,
    /// Every directory is to be rewritten (`-D`): their extent trees are
    /// not offered for rebuilding.
    pub rehash_dirs: bool,
}

impl Default for Choices {
    fn default() -> Self {
        Choices {
            ea_ver: 2,
            fragcheck: false,
            check_encoding: false,
            readahead_kb: None,
            unshare_blocks: false,
            optimize_extents: true,
            rehash_dirs: false,
        }
    }
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            threads: 1,
            auto_threads: false,
            idle_priority: false,
            superblock: None,
            progress: None,
            external_journal: None,
            choices: Choices::default(),
            repairing: false,
            not_dirs: std::sync::Arc::from([]),
            answers: None,
            times: None,
            interrupt: None,
            mmp_held: false,
            live: false,
            stream: None,
        }
    }
}

/// Inode-indexed and block-indexed maps built in pass 1 and read later.
/// Inode maps are indexed by `ino - 1`; block maps by cluster number.
pub struct Maps {
    /// Inodes in use.
    pub inode_used: AtomicBitmap,
    /// Directories.
    pub inode_dir: AtomicBitmap,
    /// Regular files.
    pub inode_reg: AtomicBitmap,
    /// Inodes with problems deferred to pass 2 or 4.
    pub inode_bad: AtomicBitmap,
    /// Inodes lying in bad blocks of the inode table.
    pub inode_bb: AtomicBitmap,
    /// Inodes with the imagic flag (imagic_inodes feature).
    pub inode_imagic: AtomicBitmap,
    /// Inodes pass 1 did not take for directories because their checksum
    /// failed (see [`CheckOptions::not_dirs`]).
    pub inode_not_dir: AtomicBitmap,
    /// Inodes whose checksum does not match (unfixed).
    pub inode_csum_bad: AtomicBitmap,
    /// Inodes with the casefold flag.
    pub inode_casefold: AtomicBitmap,
    /// Inodes visited by the pass-1 scan.
    pub inode_scanned: AtomicBitmap,
    /// Inodes whose pass-1 check has finished (set with release ordering,
    /// after everything the check wrote about the inode).
    pub inode_done: AtomicBitmap,
    /// `i_links_count` of in-use inodes and the directory-entry file type
    /// their mode gives: a byte an inode (link counts of 31 and more kept
    /// aside).
    pub(crate) type_links: TypeAndLinks,
    /// Clusters found in use.
    pub block_found: AtomicBitmap,
    /// Clusters claimed more than once.
    pub block_dup: AtomicBitmap,
    /// Blocks of critical metadata (superblocks, descriptors, bitmaps, inode tables).
    pub metadata: BitSet,
    /// EA blocks already claimed by some inode.
    pub ea_claimed: AtomicBitmap,
}

impl Maps {
    /// Empty maps sized for `fs`.
    pub fn new(fs: &Fs) -> Self {
        let ni = u64::from(fs.geo.inodes_count);
        let clusters = fs
            .geo
            .blocks_count
            .div_ceil(u64::from(fs.geo.cluster_ratio));
        Maps {
            inode_used: AtomicBitmap::new(ni),
            inode_dir: AtomicBitmap::new(ni),
            inode_reg: AtomicBitmap::new(ni),
            inode_bad: AtomicBitmap::new(ni),
            inode_bb: AtomicBitmap::new(ni),
            inode_imagic: AtomicBitmap::new(ni),
            inode_csum_bad: AtomicBitmap::new(ni),
            inode_not_dir: AtomicBitmap::new(ni),
            inode_casefold: AtomicBitmap::new(ni),
            inode_scanned: AtomicBitmap::new(ni),
            inode_done: AtomicBitmap::new(ni),
            type_links: TypeAndLinks::new(ni),
            block_found: AtomicBitmap::new(clusters),
            block_dup: AtomicBitmap::new(clusters),
            metadata: BitSet::new(fs.geo.blocks_count),
            ea_claimed: AtomicBitmap::new(fs.geo.blocks_count),
        }
    }

    /// Whether inode `ino` is in use.
    #[inline]
    pub fn used(&self, ino: u32) -> bool {
        ino != 0 && self.inode_used.get(u64::from(ino - 1))
    }

    /// Whether inode `ino` is a directory.
    #[inline]
    pub fn is_dir(&self, ino: u32) -> bool {
        ino != 0 && self.inode_dir.get(u64::from(ino - 1))
    }

    /// Whether inode `ino` is a regular file.
    #[inline]
    pub fn is_reg(&self, ino: u32) -> bool {
        ino != 0 && self.inode_reg.get(u64::from(ino - 1))
    }

    /// Whether inode `ino` is marked bad.
    #[inline]
    pub fn is_bad(&self, ino: u32) -> bool {
        ino != 0 && self.inode_bad.get(u64::from(ino - 1))
    }

    /// Sets a bit of an inode map.
    #[inline]
    pub fn mark(map: &AtomicBitmap, ino: u32) {
        if ino != 0 {
            map.test_and_set(u64::from(ino - 1));
        }
    }

    /// The stored link count of an inode.
    #[inline]
    pub fn links(&self, ino: u32) -> u16 {
        ino.checked_sub(1)
            .map_or(0, |i| self.type_links.links(i) as u16)
    }

    /// Records the link count of an inode.
    #[inline]
    pub(crate) fn set_links(&self, ino: u32, n: u16) {
        if let Some(i) = ino.checked_sub(1) {
            self.type_links.set_links(i, u32::from(n));
        }
    }

    /// The file type code recorded for an inode.
    #[inline]
    pub fn ftype(&self, ino: u32) -> u8 {
        ino.checked_sub(1)
            .map_or(0, |i| self.type_links.file_type(i))
    }

    /// Records the file type code of an inode.
    #[inline]
    pub(crate) fn set_ftype(&self, ino: u32, t: u8) {
        if let Some(i) = ino.checked_sub(1) {
            self.type_links.set_file_type(i, t);
        }
    }
}

/// Where a fatal problem stopped the check, so that findings the original
/// sequential order would never have reached can be dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortAt {
    /// The pass that stopped.
    pub pass: Pass,
    /// The inode (or directory) being processed, 0 if none.
    pub ino: u32,
    /// Why.
    pub reason: String,
}

impl AbortAt {
    /// An abort at an inode of a pass.
    pub fn new(pass: Pass, ino: u32, reason: impl Into<String>) -> Self {
        AbortAt {
            pass,
            ino,
            reason: reason.into(),
        }
    }

    /// Keeps the earlier of two aborts.
    pub fn earliest(a: Option<AbortAt>, b: Option<AbortAt>) -> Option<AbortAt> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if (y.pass, y.ino) < (x.pass, x.ino) {
                y
            } else {
                x
            }),
            (x, None) => x,
            (None, y) => y,
        }
    }

    /// Whether a finding comes after this abort point.
    pub(crate) fn is_after(&self, f: &Finding) -> bool {
        let p = f.code.pass();
        if p != self.pass {
            return p > self.pass;
        }
        f.ino.or(f.dir).unwrap_or(0) > self.ino
    }
}
