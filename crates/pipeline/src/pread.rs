//! The pread path: one positioned read per request.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use crate::read::{ReadReq, Window};

/// A reader that issues one pread per request.
pub(crate) struct PreadReader {
    w: Window,
}

impl PreadReader {
    pub(crate) fn new(w: Window) -> Self {
        PreadReader { w }
    }
}

/// Reads `buf` at `offset` only if the page cache already holds it:
/// `Ok(true)` when it did, `Ok(false)` when the read would have to wait
/// for the device (or the kernel cannot tell).
fn read_cached(file: &File, buf: &mut [u8], offset: u64) -> io::Result<bool> {
    let Ok(off) = libc::off_t::try_from(offset) else {
        return Ok(false);
    };
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: the iovec describes `buf`, which is valid and writable for
    // its whole length during the call; the fd is open.
    let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, off, libc::RWF_NOWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN)
            | Some(libc::EOPNOTSUPP)
            | Some(libc::ENOSYS)
            | Some(libc::EINVAL) => Ok(false),
            _ => Err(e),
        };
    }
    Ok(n as usize == buf.len())
}

impl crate::Reader for PreadReader {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.w.read_exact_at(buf, offset)
    }

    /// Blocks already in the page cache are read at once; the kernel is
    /// told about all the others together (POSIX_FADV_WILLNEED), so the
    /// device gets them as one deep queue, and they are then read one by
    /// one as they arrive.
    fn read_batch_with(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let mut missing = Vec::new();
        for (i, r) in reqs.iter_mut().enumerate() {
            let in_range = self.w.holds(r.offset, r.buf.len());
            match in_range.then(|| read_cached(&self.w.file, r.buf, self.w.dev_offset(r.offset))) {
                Some(Ok(true)) => {
                    r.result = Ok(());
                    r.cached = true;
                    done(i, r);
                }
                Some(Err(e)) => {
                    r.result = Err(e);
                    done(i, r);
                }
                _ => missing.push(i),
            }
        }
        if missing.len() > 1 {
            for &i in &missing {
                let r = &reqs[i];
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
        for i in missing {
            let r = &mut reqs[i];
            r.result = self.w.read_exact_at(r.buf, r.offset);
            done(i, r);
        }
    }
}
