//! The fixer thread.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::undo::UndoLog;

/// One write: `data` goes to byte `offset` of the device.
#[derive(Clone, Debug)]
pub struct Write {
    /// Byte offset on the device.
    pub offset: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

/// Why a commit did not happen (or did not finish).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// SIGINT or SIGTERM arrived before the commit started; nothing of it
    /// was written.
    #[error("interrupted before the changes were written")]
    Interrupted,
    /// A write past the end of the device was asked for.
    #[error("a write at byte {0} would go past the end of the device")]
    OutOfRange(u64),
    /// The undo file or the device failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The undo file could not be written; nothing of the commit reached
    /// the device.
    #[error("the undo file could not be written ({0}); nothing more was written to the device")]
    Undo(io::Error),
    /// A write to the device failed.
    #[error("writing {len} bytes at byte {offset} of the device failed ({source})")]
    Write {
        /// Where, relative to the file system's start.
        offset: u64,
        /// How many bytes.
        len: usize,
        /// What the device said.
        source: io::Error,
    },
    /// The device could not make the writes durable.
    #[error("the device failed to flush its writes ({0})")]
    Flush(io::Error),
    /// An earlier write failed; the fixer writes nothing more.
    #[error("{0}")]
    Stopped(String),
    /// The fixer thread is gone.
    #[error("the fixer thread has stopped")]
    Gone,
    /// Discarding cannot be undone, so it is refused with an undo file.
    #[error("free space is not discarded while an undo file is kept (a discard cannot be undone)")]
    DiscardWithUndo,
}

/// What the fixer did.
#[derive(Clone, Copy, Debug, Default)]
pub struct FixerStats {
    /// Commits applied.
    pub commits: u64,
    /// Writes applied.
    pub writes: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Regions saved in the undo file.
    pub undo_keys: u64,
}

enum Cmd {
    Commit(Vec<Write>, Sender<Result<(), CommitError>>),
    Discard(Vec<(u64, u64)>, Sender<Result<u64, CommitError>>),
    Request(Write),
    Barrier(Sender<Result<u64, CommitError>>),
    Finish(Sender<Result<FixerStats, CommitError>>),
    Failure(Sender<Option<String>>),
}

/// The primary superblock's bytes (1024..2048 of the file system) as the
/// repair has written them but the device does not yet hold them.
///
/// A fixer started with [`Fixer::start_holding_super`] keeps every write
/// to the primary superblock here and puts it on the device once, as its
/// last write, when it finishes (e2fsck, too, writes the superblock when
/// it closes the file system). Until then the device keeps the
/// superblock the undo file's copy describes, so a crash at any point
/// before that last write leaves an undo file that e2undo accepts as it
/// is. Readers lay these bytes over what they read ([`Held::patch`]), so
/// the checks between commits see the file system as the repair left it.
#[derive(Default)]
pub struct Held {
    any: AtomicBool,
    bytes: RwLock<Option<Vec<u8>>>,
}

/// Where the primary superblock is, relative to the file system's start.
const SUPER_OFFSET: u64 = 1024;
const SUPER_LEN: usize = 1024;

impl Held {
    /// Overwrites the part of `buf` (the bytes read at file system offset
    /// `offset`) that the held superblock covers.
    pub fn patch(&self, offset: u64, buf: &mut [u8]) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let Some(end) = offset.checked_add(buf.len() as u64) else {
            return;
        };
        let (from, to) = (
            offset.max(SUPER_OFFSET),
            end.min(SUPER_OFFSET + SUPER_LEN as u64),
        );
        if from >= to {
            return;
        }
        let guard = self.bytes.read().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = guard.as_ref() {
            let src = &b[(from - SUPER_OFFSET) as usize..(to - SUPER_OFFSET) as usize];
            buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
        }
    }

    /// Whether any of `len` bytes at file system offset `offset` are held.
    pub fn covers(&self, offset: u64, len: usize) -> bool {
        self.any.load(Ordering::Acquire)
            && offset < SUPER_OFFSET + SUPER_LEN as u64
            && offset.saturating_add(len as u64) > SUPER_OFFSET
    }

    fn set(&self, bytes: Option<Vec<u8>>) {
        let mut guard = self.bytes.write().unwrap_or_else(|e| e.into_inner());
        self.any.store(bytes.is_some(), Ordering::Release);
        *guard = bytes;
    }

    fn get(&self) -> Option<Vec<u8>> {
        self.bytes.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Writes kept in memory instead of reaching the device: a dry run's
/// copy-on-write overlay. Readers lay it over what they read
/// ([`Staged::patch`]), so every check of a dry run sees the file system
/// as the repair would have left it.
pub struct Staged {
    any: AtomicBool,
    /// The overlay's unit (the file system's block size), in bytes.
    unit: u64,
    pages: RwLock<HashMap<u64, Box<[u8]>>>,
}

impl Staged {
    fn new(unit: u64) -> Staged {
        Staged {
            any: AtomicBool::new(false),
            unit: unit.max(512),
            pages: RwLock::new(HashMap::new()),
        }
    }

    /// Whether any of `len` bytes at file system offset `offset` were
    /// written.
    pub fn covers(&self, offset: u64, len: usize) -> bool {
        if !self.any.load(Ordering::Acquire) || len == 0 {
            return false;
        }
        let end = offset.saturating_add(len as u64);
        let pages = self.pages.read().unwrap_or_else(|e| e.into_inner());
        (offset / self.unit..end.div_ceil(self.unit)).any(|p| pages.contains_key(&p))
    }

    /// Overwrites the parts of `buf` (read at file system offset
    /// `offset`) that were written.
    pub fn patch(&self, offset: u64, buf: &mut [u8]) {
        if !self.any.load(Ordering::Acquire) || buf.is_empty() {
            return;
        }
        let end = offset.saturating_add(buf.len() as u64);
        let pages = self.pages.read().unwrap_or_else(|e| e.into_inner());
        for p in offset / self.unit..end.div_ceil(self.unit) {
            let Some(page) = pages.get(&p) else {
                continue;
            };
            let (from, to) = ((p * self.unit).max(offset), ((p + 1) * self.unit).min(end));
            let src = &page[(from - p * self.unit) as usize..(to - p * self.unit) as usize];
            buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
        }
    }

    /// How many distinct blocks were written.
    pub fn blocks(&self) -> u64 {
        self.pages.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }

    /// Keeps `data` as written at `offset`; a page written for the first
    /// time starts from what `base` holds there.
    fn write(&self, offset: u64, data: &[u8], base: impl Fn(u64, &mut [u8])) {
        let end = offset + data.len() as u64;
        let mut pages = self.pages.write().unwrap_or_else(|e| e.into_inner());
        for p in offset / self.unit..end.div_ceil(self.unit) {
            let page = pages.entry(p).or_insert_with(|| {
                let mut b = vec![0u8; self.unit as usize].into_boxed_slice();
                base(p * self.unit, &mut b);
                b
            });
            let (from, to) = ((p * self.unit).max(offset), ((p + 1) * self.unit).min(end));
            page[(from - p * self.unit) as usize..(to - p * self.unit) as usize]
                .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
        }
        self.any.store(true, Ordering::Release);
    }
}

/// Requests queued before they are written together (one undo flush and
/// one device flush per batch).
const REQUEST_BATCH: usize = 256;

/// The handle through which repairs reach the device.
pub struct Fixer {
    tx: Sender<Cmd>,
    thread: Option<JoinHandle<()>>,
    held: Option<Arc<Held>>,
    staged: Option<Arc<Staged>>,
}

struct State {
    dev: Arc<File>,
    /// Where the file system starts on the device.
    base: u64,
    /// The file system's window of the device, in bytes.
    size: u64,
    undo: Option<UndoLog>,
    stats: FixerStats,
    /// Requests received and not yet written.
    pending: Vec<Write>,
    /// Requests written since the last barrier.
    applied: u64,
    /// The first failure of a batch of requests (later ones are dropped).
    failed: Option<CommitError>,
    /// The first write, flush or undo failure: from then on nothing more
    /// is written, to the device or to the undo file.
    broken: Option<String>,
    /// The primary superblock, held back until the end.
    held: Option<Arc<Held>>,
    /// A dry run: writes go here, never to the device.
    staged: Option<Arc<Staged>>,
}

impl Fixer {
    /// Starts the fixer thread on a device opened for writing, with an
    /// optional undo file. The file system is the `size` bytes that start
    /// `base` bytes into the device; write offsets are relative to it.
    pub fn start(dev: Arc<File>, base: u64, size: u64, undo: Option<UndoLog>) -> Fixer {
        Self::spawn(dev, base, size, undo, None, None)
    }

    /// A fixer for a dry run: `dev` may be opened read-only, and every
    /// write is kept in memory ([`Fixer::staged`]); nothing reaches the
    /// device. Written blocks are counted in units of `block_size`.
    pub fn start_in_memory(dev: Arc<File>, base: u64, size: u64, block_size: u32) -> Fixer {
        let staged = Arc::new(Staged::new(u64::from(block_size)));
        Self::spawn(dev, base, size, None, None, Some(staged))
    }

    /// A dry run's writes, for readers to lay over what they read.
    pub fn staged(&self) -> Option<Arc<Staged>> {
        self.staged.clone()
    }

    /// As [`Fixer::start`], for a device that holds an ext2/3/4 file
    /// system: writes to the primary superblock are held back and land
    /// once, last, when the fixer finishes (or is dropped). Readers see
    /// them through [`Fixer::held`].
    pub fn start_holding_super(
        dev: Arc<File>,
        base: u64,
        size: u64,
        undo: Option<UndoLog>,
    ) -> Fixer {
        Self::spawn(dev, base, size, undo, Some(Arc::new(Held::default())), None)
    }

    /// The superblock held back, for readers to lay over what they read.
    pub fn held(&self) -> Option<Arc<Held>> {
        self.held.clone()
    }

    fn spawn(
        dev: Arc<File>,
        base: u64,
        size: u64,
        undo: Option<UndoLog>,
        held: Option<Arc<Held>>,
        staged: Option<Arc<Staged>>,
    ) -> Fixer {
        let (tx, rx) = bounded::<Cmd>(4);
        let mut st = State {
            dev,
            base,
            size,
            undo,
            stats: FixerStats::default(),
            pending: Vec::new(),
            applied: 0,
            failed: None,
            broken: None,
            held: held.clone(),
            staged: staged.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("ext4chk-fixer".into())
            .spawn(move || serve(&mut st, &rx))
            .ok();
        Fixer {
            tx,
            thread,
            held,
            staged,
        }
    }

    /// Applies `writes` in order and returns when they are on the device:
    /// the regions they cover are first saved to the undo file (made
    /// durable), then written, the superblock last, then flushed.
    pub fn commit(&self, writes: Vec<Write>) -> Result<(), CommitError> {
        if writes.is_empty() {
            return Ok(());
        }
        let (rtx, rrx) = bounded(1);
        self.tx
            .send(Cmd::Commit(writes, rtx))
            .map_err(|_| CommitError::Gone)?;
        rrx.recv().map_err(|_| CommitError::Gone)?
    }

    /// Sends one repair a checker worker can make on the spot (an inode's
    /// own fields, say) and returns at once: the worker goes on checking.
    /// Requests are written in the order they arrive, in batches, each
    /// batch saved to the undo file first like a commit. Unlike a commit,
    /// a batch is written even after SIGINT or SIGTERM: every request
    /// stands alone, so the file system is consistent after each one.
    pub fn request(&self, w: Write) -> Result<(), CommitError> {
        self.tx.send(Cmd::Request(w)).map_err(|_| CommitError::Gone)
    }

    /// Discards byte ranges of the file system (free blocks): a block
    /// device is asked to trim them (BLKDISCARD), an image file gets holes
    /// punched (which read back as zeros). Returns the bytes discarded.
    /// Refused when an undo file is kept: nothing could put the data back.
    pub fn discard(&self, ranges: Vec<(u64, u64)>) -> Result<u64, CommitError> {
        if ranges.is_empty() {
            return Ok(0);
        }
        let (rtx, rrx) = bounded(1);
        self.tx
            .send(Cmd::Discard(ranges, rtx))
            .map_err(|_| CommitError::Gone)?;
        rrx.recv().map_err(|_| CommitError::Gone)?
    }

    /// Waits until every request sent so far is on the device; returns
    /// how many were written since the last barrier, or the first error
    /// (requests after a failed batch are dropped).
    pub fn barrier(&self) -> Result<u64, CommitError> {
        let (rtx, rrx) = bounded(1);
        self.tx
            .send(Cmd::Barrier(rtx))
            .map_err(|_| CommitError::Gone)?;
        rrx.recv().map_err(|_| CommitError::Gone)?
    }

    /// The first write, flush or undo-file failure, if any: after one,
    /// nothing more is written and every call fails.
    pub fn failure(&self) -> Option<String> {
        let (rtx, rrx) = bounded(1);
        self.tx.send(Cmd::Failure(rtx)).ok()?;
        rrx.recv().ok().flatten()
    }

    /// Finishes: marks the undo file complete and stops the thread.
    pub fn finish(mut self) -> Result<FixerStats, CommitError> {
        let (rtx, rrx) = bounded(1);
        self.tx
            .send(Cmd::Finish(rtx))
            .map_err(|_| CommitError::Gone)?;
        let r = rrx.recv().map_err(|_| CommitError::Gone)?;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        r
    }
}

impl Drop for Fixer {
    /// A fixer dropped without [`Fixer::finish`] still lands the held
    /// superblock before its thread ends, and waits for it.
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let (rtx, _rrx) = bounded(1);
            let _ = self.tx.send(Cmd::Finish(rtx));
            let _ = t.join();
        }
    }
}

/// Writes the queued requests as one batch.
fn flush_requests(st: &mut State) {
    if st.pending.is_empty() {
        return;
    }
    let batch = std::mem::take(&mut st.pending);
    if st.failed.is_some() {
        return;
    }
    let n = batch.len() as u64;
    match apply(st, batch) {
        Ok(()) => st.applied += n,
        Err(e) => st.failed = Some(e),
    }
}

fn serve(st: &mut State, rx: &Receiver<Cmd>) {
    while let Ok(cmd) = rx.recv() {
        match cmd {
            Cmd::Request(w) => {
                st.pending.push(w);
                if st.pending.len() >= REQUEST_BATCH {
                    flush_requests(st);
                }
            }
            Cmd::Barrier(reply) => {
                flush_requests(st);
                let r = match st.failed.take() {
                    Some(e) => Err(e),
                    None => Ok(st.applied),
                };
                st.applied = 0;
                let _ = reply.send(r);
            }
            Cmd::Discard(ranges, reply) => {
                flush_requests(st);
                let r = if let Some(why) = &st.broken {
                    Err(CommitError::Stopped(why.clone()))
                } else if st.undo.is_some() {
                    Err(CommitError::DiscardWithUndo)
                } else {
                    discard(st, &ranges)
                };
                let _ = reply.send(r);
            }
            Cmd::Commit(writes, reply) => {
                // Requests sent before a commit land before it.
                flush_requests(st);
                let r = if crate::safety::interrupted() {
                    Err(CommitError::Interrupted)
                } else {
                    apply(st, writes)
                };
                let _ = reply.send(r);
            }
            Cmd::Failure(reply) => {
                flush_requests(st);
                let _ = reply.send(st.broken.clone());
            }
            Cmd::Finish(reply) => {
                flush_requests(st);
                if let Some(why) = &st.broken {
                    // The undo file is left as it was before the failure:
                    // it covers every write that reached the device.
                    let _ = reply.send(Err(CommitError::Stopped(why.clone())));
                    return;
                }
                if let Err(e) = land_held(st) {
                    st.broken = Some(e.to_string());
                    let _ = reply.send(Err(e));
                    return;
                }
                let r = match st.undo.as_mut() {
                    Some(u) => u
                        .finish(&st.dev)
                        .map(|()| {
                            st.stats.undo_keys = u.keys();
                            st.stats
                        })
                        .map_err(CommitError::from),
                    None => Ok(st.stats),
                };
                let _ = reply.send(r);
                return;
            }
        }
    }
}

nix::ioctl_write_ptr!(blkdiscard, 0x12, 119, [u64; 2]);

fn discard(st: &mut State, ranges: &[(u64, u64)]) -> Result<u64, CommitError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileTypeExt;
    if st.staged.is_some() {
        // A dry run only counts what would be discarded.
        return Ok(ranges.iter().map(|r| r.1).sum());
    }
    let block_dev = st.dev.metadata()?.file_type().is_block_device();
    let mut total = 0;
    for &(off, len) in ranges {
        let end = off.checked_add(len);
        if len == 0 || end.is_none_or(|e| e > st.size) {
            return Err(CommitError::OutOfRange(off));
        }
        let at = st.base + off;
        if block_dev {
            let range = [at, len];
            // SAFETY: BLKDISCARD reads two u64s (start, length) through
            // the pointer, valid for the call; the descriptor is open.
            unsafe { blkdiscard(st.dev.as_raw_fd(), &range) }.map_err(io::Error::from)?;
        } else {
            nix::fcntl::fallocate(
                st.dev.as_ref(),
                nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE
                    | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
                at as i64,
                len as i64,
            )
            .map_err(io::Error::from)?;
        }
        total += len;
    }
    st.dev.sync_data()?;
    Ok(total)
}

/// Whether a write touches the primary superblock (bytes 1024..2048).
fn touches_super(w: &Write) -> bool {
    w.offset < 2048 && w.offset + w.data.len() as u64 > 1024
}

/// Applies a commit; the first failure of the device or the undo file
/// stops the fixer for good.
fn apply(st: &mut State, writes: Vec<Write>) -> Result<(), CommitError> {
    if let Some(why) = &st.broken {
        return Err(CommitError::Stopped(why.clone()));
    }
    let r = apply_once(st, writes);
    if let Err(e @ (CommitError::Undo(_) | CommitError::Write { .. } | CommitError::Flush(_))) = &r
    {
        st.broken = Some(e.to_string());
    }
    r
}

fn apply_once(st: &mut State, writes: Vec<Write>) -> Result<(), CommitError> {
    for w in &writes {
        let end = w.offset.checked_add(w.data.len() as u64);
        if end.is_none_or(|e| e > st.size) {
            return Err(CommitError::OutOfRange(w.offset));
        }
    }
    if let Some(staged) = &st.staged {
        let (dev, base, size) = (&st.dev, st.base, st.size);
        for w in &writes {
            staged.write(w.offset, &w.data, |at, buf| {
                let n = size.saturating_sub(at).min(buf.len() as u64) as usize;
                // What cannot be read stays zero; the write covers it.
                let _ = dev.read_exact_at(&mut buf[..n], base + at);
            });
            st.stats.writes += 1;
            st.stats.bytes += w.data.len() as u64;
        }
        st.stats.commits += 1;
        return Ok(());
    }
    // With the superblock held back, the bytes of each write that fall on
    // it are kept aside and the rest goes to the device now.
    let (writes, to_hold) = match &st.held {
        Some(_) => split_super(writes),
        None => (writes, Vec::new()),
    };
    // Otherwise the primary superblock goes last: until it is written, the
    // undo file's copy of it still matches the device.
    let (sup, mut rest): (Vec<Write>, Vec<Write>) = writes.into_iter().partition(touches_super);
    rest.extend(sup);
    if !rest.is_empty() {
        write_durably(st, &rest)?;
    }
    if !to_hold.is_empty() {
        // Only once the rest of the commit is on the device do readers see
        // the superblock that goes with it.
        let mut sb = match st.held.as_ref().and_then(|h| h.get()) {
            Some(b) => b,
            None => {
                let mut b = vec![0u8; SUPER_LEN];
                st.dev
                    .read_exact_at(&mut b, st.base + SUPER_OFFSET)
                    .map_err(CommitError::Io)?;
                b
            }
        };
        for w in &to_hold {
            let at = (w.offset - SUPER_OFFSET) as usize;
            sb[at..at + w.data.len()].copy_from_slice(&w.data);
        }
        if let Some(h) = &st.held {
            h.set(Some(sb));
        }
    }
    st.stats.commits += 1;
    Ok(())
}

/// Splits writes into the parts outside the primary superblock and the
/// parts on it (in order).
fn split_super(writes: Vec<Write>) -> (Vec<Write>, Vec<Write>) {
    let (lo, hi) = (SUPER_OFFSET, SUPER_OFFSET + SUPER_LEN as u64);
    let mut out = Vec::with_capacity(writes.len());
    let mut held = Vec::new();
    for w in writes {
        if !touches_super(&w) {
            out.push(w);
            continue;
        }
        let end = w.offset + w.data.len() as u64;
        let part = |a: u64, b: u64| Write {
            offset: a,
            data: w.data[(a - w.offset) as usize..(b - w.offset) as usize].to_vec(),
        };
        if w.offset < lo {
            out.push(part(w.offset, lo));
        }
        held.push(part(w.offset.max(lo), end.min(hi)));
        if end > hi {
            out.push(part(hi, end));
        }
    }
    (out, held)
}

/// Saves what `writes` cover to the undo file (durably), writes them in
/// order and flushes the device. A write to the primary superblock
/// refreshes the undo file's copy of it at once.
fn write_durably(st: &mut State, writes: &[Write]) -> Result<(), CommitError> {
    if let Some(u) = st.undo.as_mut() {
        for w in writes {
            u.save(&st.dev, st.size, w.offset, w.data.len() as u64)
                .map_err(CommitError::Undo)?;
        }
        u.sync(&st.dev).map_err(CommitError::Undo)?;
    }
    for w in writes {
        let mut old_super = Vec::new();
        if touches_super(w) {
            // Everything before the superblock is durable first.
            st.dev.sync_data().map_err(CommitError::Flush)?;
            old_super = vec![0u8; w.data.len()];
            st.dev
                .read_exact_at(&mut old_super, st.base + w.offset)
                .map_err(CommitError::Undo)?;
        }
        st.dev
            .write_all_at(&w.data, st.base + w.offset)
            .map_err(|source| CommitError::Write {
                offset: w.offset,
                len: w.data.len(),
                source,
            })?;
        st.stats.writes += 1;
        st.stats.bytes += w.data.len() as u64;
        if touches_super(w) {
            if let Some(u) = st.undo.as_mut() {
                // Refresh the undo file's superblock copy at once. If that
                // fails, the old superblock goes back on the device, so
                // that it matches the undo file's copy again (e2undo
                // refuses a file system whose superblock differs).
                if let Err(e) = u.sync(&st.dev) {
                    let _ = st
                        .dev
                        .write_all_at(&old_super, st.base + w.offset)
                        .and_then(|()| st.dev.sync_data());
                    return Err(CommitError::Undo(e));
                }
            }
        }
    }
    st.dev.sync_data().map_err(CommitError::Flush)?;
    Ok(())
}

/// Puts the held superblock on the device: the last write of a repair.
/// Between this write and the undo file's new copy of the superblock
/// (written right after) is the one moment at which a crash leaves a
/// device whose superblock differs from the undo file's copy.
fn land_held(st: &mut State) -> Result<(), CommitError> {
    let Some(sb) = st.held.as_ref().and_then(|h| h.get()) else {
        return Ok(());
    };
    let mut on_disk = vec![0u8; SUPER_LEN];
    st.dev
        .read_exact_at(&mut on_disk, st.base + SUPER_OFFSET)
        .map_err(CommitError::Io)?;
    if on_disk != sb {
        write_durably(
            st,
            &[Write {
                offset: SUPER_OFFSET,
                data: sb,
            }],
        )?;
    }
    if let Some(h) = &st.held {
        h.set(None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_land_in_order() {
        let (p, f) = scratch("actor", 8192);
        let fx = Fixer::start(f, 0, 8192, None);
        fx.commit(vec![
            Write {
                offset: 4096,
                data: vec![1; 10],
            },
            Write {
                offset: 4100,
                data: vec![2; 2],
            },
        ])
        .unwrap();
        assert!(matches!(
            fx.commit(vec![Write {
                offset: 8190,
                data: vec![3; 4]
            }]),
            Err(CommitError::OutOfRange(8190))
        ));
        let stats = fx.finish().unwrap();
        assert_eq!(stats.writes, 2);
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[4096..4106], &[1, 1, 1, 1, 2, 2, 1, 1, 1, 1]);
        assert_eq!(b[8190], 0, "a refused commit writes nothing");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn requests_land_by_the_barrier_and_before_a_later_commit() {
        let (p, f) = scratch("req", 1 << 20);
        let fx = Fixer::start(f, 0, 1 << 20, None);
        // More than one batch's worth, from several threads at once.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let fx = &fx;
                s.spawn(move || {
                    for i in 0..200u64 {
                        let at = (t * 200 + i) * 16;
                        fx.request(Write {
                            offset: at,
                            data: vec![(t + 1) as u8; 16],
                        })
                        .unwrap();
                    }
                });
            }
        });
        assert_eq!(fx.barrier().unwrap(), 800);
        assert_eq!(fx.barrier().unwrap(), 0, "the count restarts");
        let b = std::fs::read(&p).unwrap();
        for t in 0..4usize {
            assert!(b[t * 3200..(t + 1) * 3200]
                .iter()
                .all(|&x| x == t as u8 + 1));
        }
        // A request, then a commit over the same bytes: the commit wins.
        fx.request(Write {
            offset: 0,
            data: vec![7; 4],
        })
        .unwrap();
        fx.commit(vec![Write {
            offset: 2,
            data: vec![9; 4],
        }])
        .unwrap();
        // A request past the end fails the batch, and the barrier says so.
        fx.request(Write {
            offset: (1 << 20) - 2,
            data: vec![1; 4],
        })
        .unwrap();
        assert!(matches!(fx.barrier(), Err(CommitError::OutOfRange(_))));
        let stats = fx.finish().unwrap();
        assert_eq!(
            stats.commits, 6,
            "four batches, the request flushed before the commit, the commit"
        );
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..6], &[7, 7, 9, 9, 9, 9]);
        let _ = std::fs::remove_file(&p);
    }
    fn scratch(tag: &str, len: usize) -> (std::path::PathBuf, Arc<File>) {
        let p = std::env::temp_dir().join(format!("fixer-{tag}-{}", std::process::id()));
        std::fs::write(&p, vec![0u8; len]).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        (p, Arc::new(f))
    }

    #[test]
    fn the_held_superblock_lands_once_at_the_end() {
        let (p, f) = scratch("held", 16384);
        let fx = Fixer::start_holding_super(f, 0, 16384, None);
        let held = fx.held().unwrap();
        fx.commit(vec![
            Write {
                offset: 1000,
                data: vec![5; 100],
            },
            Write {
                offset: 8192,
                data: vec![7; 4],
            },
        ])
        .unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[8192..8196], &[7; 4], "the rest lands at once");
        assert_eq!(&b[1000..1024], &[5; 24], "bytes before the superblock too");
        assert_eq!(&b[1024..1100], &[0; 76], "the superblock waits");
        assert!(held.covers(1024, 1) && !held.covers(0, 1024) && !held.covers(2048, 10));
        let mut view = vec![0u8; 4096];
        held.patch(0, &mut view);
        assert_eq!(&view[1024..1100], &[5; 76], "readers see it");
        assert_eq!(&view[1000..1024], &[0; 24], "only the superblock is held");
        fx.finish().unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[1000..1100], &[5; 100]);
        assert!(!held.covers(1024, 1), "nothing is held once it landed");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_dry_run_keeps_every_write_in_memory() {
        let (p, _) = scratch("dry", 16384);
        std::fs::write(&p, (0..16384u32).map(|i| i as u8).collect::<Vec<_>>()).unwrap();
        let ro = Arc::new(File::open(&p).unwrap());
        let fx = Fixer::start_in_memory(ro, 0, 16384, 4096);
        let staged = fx.staged().unwrap();
        fx.commit(vec![
            Write {
                offset: 4090,
                data: vec![0xAA; 12],
            },
            Write {
                offset: 1024,
                data: vec![0xBB; 4],
            },
        ])
        .unwrap();
        assert_eq!(fx.discard(vec![(8192, 4096)]).unwrap(), 4096);
        fx.finish().unwrap();
        let disk = std::fs::read(&p).unwrap();
        assert!(
            disk.iter().enumerate().all(|(i, &b)| b == i as u8),
            "nothing reached the file"
        );
        assert_eq!(staged.blocks(), 2, "blocks 0 and 1");
        assert!(staged.covers(4000, 100) && !staged.covers(8192, 4096));
        let mut view = disk[4000..4200].to_vec();
        staged.patch(4000, &mut view);
        assert_eq!(&view[90..102], &[0xAA; 12]);
        assert_eq!(view[89], (4089u32 & 0xff) as u8, "the rest is the file's");
        assert_eq!(view[102], (4102u32 & 0xff) as u8);
        let _ = std::fs::remove_file(&p);
    }
}
