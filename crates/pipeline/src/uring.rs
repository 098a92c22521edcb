//! The io_uring path: a ring per worker, batches submitted with one
//! syscall and reaped together. Short reads are finished with pread.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use io_uring::{opcode, types, IoUring};

use crate::pread::read_exact_at;
use crate::ReadReq;

/// Submission queue depth per worker.
const RING_ENTRIES: u32 = 256;

/// Checks that io_uring can be used: the sysctl allows it and a ring can
/// be created and a no-op completed.
pub(crate) fn probe() -> io::Result<()> {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        if s.trim() == "2" {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "kernel.io_uring_disabled is 2",
            ));
        }
    }
    let mut ring = IoUring::new(2)?;
    let nop = opcode::Nop::new().build().user_data(7);
    // SAFETY: a NOP references no memory.
    unsafe {
        ring.submission()
            .push(&nop)
            .map_err(|_| io::Error::other("submission queue full"))?;
    }
    ring.submit_and_wait(1)?;
    let ok = ring
        .completion()
        .any(|c| c.user_data() == 7 && c.result() >= 0);
    if ok {
        Ok(())
    } else {
        Err(io::Error::other("io_uring no-op did not complete"))
    }
}

pub(crate) struct UringReader {
    ring: IoUring,
    file: Arc<File>,
    size: u64,
}

impl UringReader {
    pub(crate) fn new(file: Arc<File>, size: u64) -> io::Result<Self> {
        Ok(UringReader {
            ring: IoUring::new(RING_ENTRIES)?,
            file,
            size,
        })
    }

    /// Reads `reqs` (at most the ring's size), calling `done` as each
    /// completes. Every read is first tried without waiting, which only
    /// succeeds from the page cache; the kernel is then told about all
    /// the others at once (POSIX_FADV_WILLNEED), so the device sees one
    /// deep queue, and they are read again normally.
    fn run_chunk(&mut self, reqs: &mut [ReadReq<'_>], done: &mut dyn FnMut(usize, &ReadReq<'_>)) {
        let mut missing = vec![false; reqs.len()];
        self.submit_and_reap(reqs, None, libc::RWF_NOWAIT, &mut |i, r| {
            if matches!(&r.result, Err(e) if e.raw_os_error() == Some(libc::EAGAIN)) {
                missing[i] = true;
            } else {
                done(i, r);
            }
        });
        let n = missing.iter().filter(|&&m| m).count();
        if n == 0 {
            return;
        }
        if n > 1 {
            for (r, _) in reqs.iter().zip(&missing).filter(|(_, &m)| m) {
                if let (Ok(off), Ok(len)) = (i64::try_from(r.offset), i64::try_from(r.buf.len())) {
                    let _ = nix::fcntl::posix_fadvise(
                        self.file.as_ref(),
                        off,
                        len,
                        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED,
                    );
                }
            }
        }
        self.submit_and_reap(reqs, Some(&missing), 0, done);
    }

    /// Submits the reads of `reqs` (those flagged in `only`, if given)
    /// with `rw_flags` and waits for all of them, calling `done` as each
    /// completes.
    fn submit_and_reap(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        only: Option<&[bool]>,
        rw_flags: i32,
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let fd = types::Fd(self.file.as_raw_fd());
        let mut queued = 0usize;
        let mut pending = vec![false; reqs.len()];
        for (i, r) in reqs.iter_mut().enumerate() {
            if only.is_some_and(|o| !o[i]) {
                continue;
            }
            let end = r.offset.checked_add(r.buf.len() as u64);
            if end.is_none_or(|e| e > self.size) {
                r.result = read_exact_at(&self.file, r.buf, r.offset, self.size);
                done(i, r);
                continue;
            }
            let len = u32::try_from(r.buf.len()).unwrap_or(u32::MAX);
            let sqe = opcode::Read::new(fd, r.buf.as_mut_ptr(), len)
                .offset(r.offset)
                .rw_flags(rw_flags)
                .build()
                .user_data(i as u64);
            // SAFETY: the buffer belongs to `reqs`, which outlives this
            // function, and we wait for every queued read before returning,
            // so the kernel never writes into memory we no longer own.
            let pushed = unsafe { self.ring.submission().push(&sqe) };
            if pushed.is_err() {
                r.result = read_exact_at(&self.file, r.buf, r.offset, self.size);
                done(i, r);
                continue;
            }
            pending[i] = true;
            queued += 1;
        }
        let mut completed: Vec<(u64, i32)> = Vec::with_capacity(queued);
        let mut finished = 0usize;
        while finished < queued {
            // Wait for one completion at a time so that the caller can
            // work on what has arrived while the rest is in flight.
            if let Err(e) = self.ring.submit_and_wait(1) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The ring failed: wait for nothing more from it and finish
                // the outstanding requests with pread. The kernel may still
                // hold the buffers, so drain completions first.
                self.drain_after_error(reqs, &pending, queued - finished, done);
                return;
            }
            completed.clear();
            completed.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
            for &(idx, res) in &completed {
                finished += 1;
                let i = idx as usize;
                let Some(r) = reqs.get_mut(i) else {
                    continue;
                };
                pending[i] = false;
                r.result = if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else if res as usize == r.buf.len() {
                    Ok(())
                } else if rw_flags & libc::RWF_NOWAIT != 0 {
                    // Partly cached: read it again normally.
                    Err(io::Error::from_raw_os_error(libc::EAGAIN))
                } else {
                    // Short read: finish the rest synchronously.
                    let got = res as usize;
                    read_exact_at(
                        &self.file,
                        &mut r.buf[got..],
                        r.offset + got as u64,
                        self.size,
                    )
                };
                r.cached = rw_flags & libc::RWF_NOWAIT != 0 && r.result.is_ok();
                done(i, r);
            }
        }
    }

    fn drain_after_error(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        pending: &[bool],
        mut outstanding: usize,
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let mut spins = 0;
        while outstanding > 0 && spins < 1000 {
            let n = self.ring.completion().count();
            outstanding = outstanding.saturating_sub(n);
            if n == 0 {
                let _ = self.ring.submit_and_wait(1);
                spins += 1;
            }
        }
        for (i, r) in reqs.iter_mut().enumerate() {
            if pending[i] {
                r.result = read_exact_at(&self.file, r.buf, r.offset, self.size);
                done(i, r);
            }
        }
    }
}

impl crate::Reader for UringReader {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        // A lone read gains nothing from the ring.
        read_exact_at(&self.file, buf, offset, self.size)
    }

    fn read_batch_with(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let step = RING_ENTRIES as usize;
        for (k, chunk) in reqs.chunks_mut(step).enumerate() {
            self.run_chunk(chunk, &mut |i, r| done(k * step + i, r));
        }
    }
}
