//! The io_uring path: a ring per worker, batches submitted with one
//! syscall and reaped together. Short reads are finished with pread.

use std::io;
use std::os::fd::AsRawFd;

use io_uring::{opcode, types, IoUring};

use crate::read::{ReadReq, Window};

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
    w: Window,
    /// The file refused RWF_NOWAIT once: reads skip the cached try.
    nowait_refused: bool,
    /// No ring could be made after a failure: every read uses pread.
    broken: bool,
}

impl UringReader {
    pub(crate) fn new(w: Window) -> io::Result<Self> {
        Ok(UringReader {
            ring: IoUring::new(RING_ENTRIES)?,
            w,
            nowait_refused: false,
            broken: false,
        })
    }

    /// Reads `reqs` (at most the ring's size), calling `done` as each
    /// completes. Every read is first tried without waiting, which only
    /// succeeds from the page cache; the kernel is then told about all
    /// the others at once (POSIX_FADV_WILLNEED), so the device sees one
    /// deep queue, and they are read again normally.
    fn run_chunk(&mut self, reqs: &mut [ReadReq<'_>], done: &mut dyn FnMut(usize, &ReadReq<'_>)) {
        if self.nowait_refused {
            self.submit_and_reap(reqs, None, 0, done);
            return;
        }
        let mut missing = vec![false; reqs.len()];
        let mut refused = false;
        self.submit_and_reap(reqs, None, libc::RWF_NOWAIT, &mut |i, r| {
            match &r.result {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => missing[i] = true,
                // A file system that does not take RWF_NOWAIT (tmpfs on
                // some kernels, FUSE, ...) answers EOPNOTSUPP or EINVAL;
                // the read is simply made again without the flag.
                Err(e) if refuses_flag(e) => {
                    missing[i] = true;
                    refused = true;
                }
                _ => done(i, r),
            }
        });
        if refused {
            self.nowait_refused = true;
        }
        let n = missing.iter().filter(|&&m| m).count();
        if n == 0 {
            return;
        }
        if n > 1 && !refused {
            for (r, _) in reqs.iter().zip(&missing).filter(|(_, &m)| m) {
                if let (Ok(off), Ok(len)) = (
                    i64::try_from(self.w.dev_offset(r.offset)),
                    i64::try_from(r.buf.len()),
                ) {
                    let _ = nix::fcntl::posix_fadvise(
                        self.w.file.as_ref(),
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
    /// completes. A read the ring refuses or fails is made again with
    /// pread, so the ring's limits never fail the check; only the pread
    /// result of that request counts.
    fn submit_and_reap(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        only: Option<&[bool]>,
        rw_flags: i32,
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let nowait = rw_flags & libc::RWF_NOWAIT != 0;
        let fd = types::Fd(self.w.file.as_raw_fd());
        let mut queued = 0usize;
        let mut pending = vec![false; reqs.len()];
        for (i, r) in reqs.iter_mut().enumerate() {
            if only.is_some_and(|o| !o[i]) {
                continue;
            }
            if !self.w.holds(r.offset, r.buf.len()) {
                r.result = self.w.read_exact_at(r.buf, r.offset);
                done(i, r);
                continue;
            }
            let len = u32::try_from(r.buf.len()).unwrap_or(u32::MAX);
            let sqe = opcode::Read::new(fd, r.buf.as_mut_ptr(), len)
                .offset(self.w.dev_offset(r.offset))
                .rw_flags(rw_flags)
                .build()
                .user_data(i as u64);
            // SAFETY: the buffer belongs to `reqs`, which outlives this
            // function, and every queued read is waited for before this
            // function returns (see `wait_all`), so the kernel never
            // writes into memory we no longer own.
            let pushed = unsafe { self.ring.submission().push(&sqe) };
            if pushed.is_err() {
                r.result = self.w.read_exact_at(r.buf, r.offset);
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
                let transient = matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                );
                if !transient {
                    // The ring cannot be entered (a seccomp filter, a
                    // revoked permission): wait out what the kernel
                    // already holds, then finish the rest with pread.
                    self.abandon_ring(reqs, &mut pending, queued - finished, done);
                    return;
                }
                // Interrupted, or the kernel is short of resources: the
                // reads already queued still complete.
                if self.ring.completion().is_empty() {
                    std::thread::yield_now();
                }
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
                    let e = io::Error::from_raw_os_error(-res);
                    if nowait {
                        Err(e)
                    } else {
                        // Refused (EOPNOTSUPP, EINVAL, EPERM...) or failed:
                        // pread decides.
                        self.w.read_exact_at(r.buf, r.offset)
                    }
                } else if res as usize == r.buf.len() {
                    Ok(())
                } else if nowait {
                    // Partly cached: read it again normally.
                    Err(io::Error::from_raw_os_error(libc::EAGAIN))
                } else {
                    // Short read: finish the rest synchronously.
                    let got = res as usize;
                    self.w
                        .read_exact_at(&mut r.buf[got..], r.offset + got as u64)
                };
                r.cached = nowait && r.result.is_ok();
                done(i, r);
            }
        }
    }

    /// The ring failed while reads were queued. Every read the kernel has
    /// taken is waited for (its completion lands in the shared queue
    /// whether or not the ring can be entered again); entries it never
    /// took are dropped with the ring, which is replaced. Only then are
    /// the buffers reused, for pread.
    fn abandon_ring(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        pending: &mut [bool],
        outstanding: usize,
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let mut sq = self.ring.submission();
        sq.sync();
        let never_taken = sq.len();
        drop(sq);
        let mut in_kernel = outstanding.saturating_sub(never_taken);
        while in_kernel > 0 {
            let mut got = 0;
            for c in self.ring.completion() {
                got += 1;
                if let Some(p) = pending.get_mut(c.user_data() as usize) {
                    if *p {
                        *p = false;
                        if let Some(r) = reqs.get_mut(c.user_data() as usize) {
                            r.result = if c.result() >= 0 && c.result() as usize == r.buf.len() {
                                Ok(())
                            } else {
                                self.w.read_exact_at(r.buf, r.offset)
                            };
                            done(c.user_data() as usize, r);
                        }
                    }
                }
            }
            in_kernel = in_kernel.saturating_sub(got);
            if got == 0 && in_kernel > 0 {
                // Entering the ring failed; a short sleep is a system call
                // on whose return the kernel posts finished reads.
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        // The entries the kernel never took die with the old ring, so
        // no read can land in the buffers after this point.
        if let Ok(fresh) = IoUring::new(RING_ENTRIES) {
            self.ring = fresh;
        } else {
            self.broken = true;
        }
        for (i, r) in reqs.iter_mut().enumerate() {
            if pending[i] {
                pending[i] = false;
                r.result = self.w.read_exact_at(r.buf, r.offset);
                done(i, r);
            }
        }
    }
}

/// Errors by which a file system or a seccomp filter refuses a read
/// flag or io_uring itself, rather than failing the read.
fn refuses_flag(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::EPERM) | Some(libc::ENOSYS)
    )
}

impl crate::Reader for UringReader {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        // A lone read gains nothing from the ring.
        self.w.read_exact_at(buf, offset)
    }

    fn read_batch_with(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        if self.broken {
            for (i, r) in reqs.iter_mut().enumerate() {
                r.result = self.w.read_exact_at(r.buf, r.offset);
                done(i, r);
            }
            return;
        }
        let step = RING_ENTRIES as usize;
        for (k, chunk) in reqs.chunks_mut(step).enumerate() {
            self.run_chunk(chunk, &mut |i, r| done(k * step + i, r));
        }
    }
}
