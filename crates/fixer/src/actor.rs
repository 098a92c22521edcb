//! The fixer thread.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
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

/// Requests queued before they are written together (one undo flush and
/// one device flush per batch).
const REQUEST_BATCH: usize = 256;

/// The handle through which repairs reach the device.
pub struct Fixer {
    tx: Sender<Cmd>,
    thread: Option<JoinHandle<()>>,
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
}

impl Fixer {
    /// Starts the fixer thread on a device opened for writing, with an
    /// optional undo file. The file system is the `size` bytes that start
    /// `base` bytes into the device; write offsets are relative to it.
    pub fn start(dev: Arc<File>, base: u64, size: u64, undo: Option<UndoLog>) -> Fixer {
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
        };
        let thread = std::thread::Builder::new()
            .name("ext4chk-fixer".into())
            .spawn(move || serve(&mut st, &rx))
            .ok();
        Fixer { tx, thread }
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

fn apply_once(st: &mut State, mut writes: Vec<Write>) -> Result<(), CommitError> {
    for w in &writes {
        let end = w.offset.checked_add(w.data.len() as u64);
        if end.is_none_or(|e| e > st.size) {
            return Err(CommitError::OutOfRange(w.offset));
        }
    }
    // The primary superblock goes last: until it is written, the undo
    // file's copy of it still matches the device.
    let (sup, mut rest): (Vec<Write>, Vec<Write>) = writes.drain(..).partition(touches_super);
    rest.extend(sup);
    if let Some(u) = st.undo.as_mut() {
        for w in &rest {
            u.save(&st.dev, st.size, w.offset, w.data.len() as u64)
                .map_err(CommitError::Undo)?;
        }
        u.sync(&st.dev).map_err(CommitError::Undo)?;
    }
    for w in &rest {
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
    st.stats.commits += 1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_land_in_order() {
        let p = std::env::temp_dir().join(format!("fixer-actor-{}", std::process::id()));
        std::fs::write(&p, vec![0u8; 8192]).unwrap();
        let f = Arc::new(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .unwrap(),
        );
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
        let p = std::env::temp_dir().join(format!("fixer-req-{}", std::process::id()));
        std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
        let f = Arc::new(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .unwrap(),
        );
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
}
