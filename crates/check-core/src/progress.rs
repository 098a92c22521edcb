//! Progress counters a check updates as it goes. They are plain atomics:
//! the workers never wait for whoever displays them, and a check without
//! a display pays one relaxed add per inode-table chunk and directory
//! batch.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The counters of a check (and of each check a repair makes).
#[derive(Debug, Default)]
pub struct Progress {
    /// The pass under way after the pipelined passes 1 and 2: 0 while
    /// they run, then 3, 4, 5, and 6 once the check is over.
    phase: AtomicU8,
    /// Block groups.
    groups: AtomicU64,
    /// Blocks in the file system.
    blocks: AtomicU64,
    /// Inodes pass 1 will look at.
    inodes_total: AtomicU64,
    /// Inodes pass 1 has looked at.
    inodes_done: AtomicU64,
    /// Directory blocks pass 1 has found so far.
    dir_blocks_found: AtomicU64,
    /// Directory blocks pass 2 has checked.
    dir_blocks_done: AtomicU64,
    /// Directories, from the group descriptors.
    dirs: AtomicU64,
    /// Checks started (a repair checks once per round).
    checks: AtomicU64,
    /// When the current check started.
    started: std::sync::Mutex<Option<std::time::Instant>>,
}

/// A consistent-enough reading of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// See [`Progress`]: 0 during passes 1 and 2, then 3 to 6.
    pub phase: u8,
    /// Block groups.
    pub groups: u64,
    /// Blocks in the file system.
    pub blocks: u64,
    /// Inodes to look at in pass 1.
    pub inodes_total: u64,
    /// Inodes looked at.
    pub inodes_done: u64,
    /// Directory blocks found.
    pub dir_blocks_found: u64,
    /// Directory blocks checked.
    pub dir_blocks_done: u64,
    /// Directories.
    pub dirs: u64,
    /// Checks started.
    pub checks: u64,
    /// Seconds since the current check started.
    pub elapsed: f64,
}

impl Snapshot {
    /// e2fsck's pass number for this state (1 to 5; 6 when done).
    pub fn pass(&self) -> u8 {
        match self.phase {
            0 if self.inodes_done < self.inodes_total => 1,
            0 => 2,
            p => p,
        }
    }
}

impl Progress {
    /// Fresh counters.
    pub const fn new() -> Progress {
        Progress {
            phase: AtomicU8::new(0),
            groups: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            inodes_total: AtomicU64::new(0),
            inodes_done: AtomicU64::new(0),
            dir_blocks_found: AtomicU64::new(0),
            dir_blocks_done: AtomicU64::new(0),
            dirs: AtomicU64::new(0),
            checks: AtomicU64::new(0),
            started: std::sync::Mutex::new(None),
        }
    }

    /// A check starts, with its totals.
    pub(crate) fn start(&self, groups: u64, blocks: u64, inodes_total: u64, dirs: u64) {
        if let Ok(mut t) = self.started.lock() {
            *t = Some(std::time::Instant::now());
        }
        self.phase.store(0, Ordering::Relaxed);
        self.inodes_done.store(0, Ordering::Relaxed);
        self.dir_blocks_found.store(0, Ordering::Relaxed);
        self.dir_blocks_done.store(0, Ordering::Relaxed);
        self.groups.store(groups, Ordering::Relaxed);
        self.blocks.store(blocks, Ordering::Relaxed);
        self.inodes_total.store(inodes_total, Ordering::Relaxed);
        self.dirs.store(dirs, Ordering::Relaxed);
        self.checks.fetch_add(1, Ordering::Relaxed);
    }

    /// Pass 1 looked at `n` more inodes and found `dir_blocks` directory blocks.
    pub(crate) fn inodes(&self, n: u64, dir_blocks: u64) {
        self.dir_blocks_found
            .fetch_add(dir_blocks, Ordering::Relaxed);
        self.inodes_done.fetch_add(n, Ordering::Relaxed);
    }

    /// Pass 2 checked `n` more directory blocks.
    pub(crate) fn dir_blocks(&self, n: u64) {
        self.dir_blocks_done.fetch_add(n, Ordering::Relaxed);
    }

    /// Pass 1 is over (whatever was left, e.g. after a stop).
    pub(crate) fn pass1_over(&self) {
        let t = self.inodes_total.load(Ordering::Relaxed);
        self.inodes_done.store(t, Ordering::Relaxed);
    }

    /// A later pass begins (3, 4, 5), or the check is over (6).
    pub(crate) fn phase(&self, p: u8) {
        self.phase.store(p, Ordering::Relaxed);
    }

    /// Reads the counters.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            phase: self.phase.load(Ordering::Relaxed),
            groups: self.groups.load(Ordering::Relaxed),
            blocks: self.blocks.load(Ordering::Relaxed),
            inodes_total: self.inodes_total.load(Ordering::Relaxed),
            inodes_done: self.inodes_done.load(Ordering::Relaxed),
            dir_blocks_found: self.dir_blocks_found.load(Ordering::Relaxed),
            dir_blocks_done: self.dir_blocks_done.load(Ordering::Relaxed),
            dirs: self.dirs.load(Ordering::Relaxed),
            checks: self.checks.load(Ordering::Relaxed),
            elapsed: self
                .started
                .lock()
                .ok()
                .and_then(|t| t.map(|t| t.elapsed().as_secs_f64()))
                .unwrap_or(0.0),
        }
    }
}
