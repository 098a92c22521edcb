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
const RING_ENTRIES: u32 = 64;

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

    /// Submits reads `reqs[start..start+n]` and waits for all of them.
    fn run_chunk(&mut self, reqs: &mut [ReadReq<'_>]) {
        let fd = types::Fd(self.file.as_raw_fd());
        let mut queued = 0usize;
        for (i, r) in reqs.iter_mut().enumerate() {
            let end = r.offset.checked_add(r.buf.len() as u64);
            if end.is_none_or(|e| e > self.size) {
                r.result = read_exact_at(&self.file, r.buf, r.offset, self.size);
                continue;
            }
            let len = u32::try_from(r.buf.len()).unwrap_or(u32::MAX);
            let sqe = opcode::Read::new(fd, r.buf.as_mut_ptr(), len)
                .offset(r.offset)
                .build()
                .user_data(i as u64);
            // SAFETY: the buffer belongs to `reqs`, which outlives this
            // function, and we wait for every queued read before returning,
            // so the kernel never writes into memory we no longer own.
            let pushed = unsafe { self.ring.submission().push(&sqe) };
            if pushed.is_err() {
                r.result = read_exact_at(&self.file, r.buf, r.offset, self.size);
                continue;
            }
            r.result = Err(io::Error::other("read not completed"));
            queued += 1;
        }
        let mut done = 0usize;
        while done < queued {
            if let Err(e) = self.ring.submit_and_wait(queued - done) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The ring failed: wait for nothing more from it and finish
                // the outstanding requests with pread. The kernel may still
                // hold the buffers, so drain completions first.
                self.drain_after_error(reqs, queued - done);
                return;
            }
            let completed: Vec<(u64, i32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (idx, res) in completed {
                done += 1;
                let Some(r) = reqs.get_mut(idx as usize) else {
                    continue;
                };
                r.result = if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else if res as usize == r.buf.len() {
                    Ok(())
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
            }
        }
    }

    fn drain_after_error(&mut self, reqs: &mut [ReadReq<'_>], mut outstanding: usize) {
        let mut spins = 0;
        while outstanding > 0 && spins < 1000 {
            let n = self.ring.completion().count();
            outstanding = outstanding.saturating_sub(n);
            if n == 0 {
                let _ = self.ring.submit_and_wait(1);
                spins += 1;
            }
        }
        for r in reqs.iter_mut() {
            if r.result.is_err() {
                r.result = read_exact_at(&self.file, r.buf, r.offset, self.size);
            }
        }
    }
}

impl crate::Reader for UringReader {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        // A lone read gains nothing from the ring.
        read_exact_at(&self.file, buf, offset, self.size)
    }

    fn read_batch(&mut self, reqs: &mut [ReadReq<'_>]) {
        for chunk in reqs.chunks_mut(RING_ENTRIES as usize) {
            self.run_chunk(chunk);
        }
    }
}
