//! The pread path: one positioned read per request.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::ReadReq;

/// The file system's window of a device: `size` bytes from `base`.
#[derive(Clone)]
pub(crate) struct Window {
    pub(crate) file: Arc<File>,
    pub(crate) base: u64,
    pub(crate) size: u64,
    /// `file` was opened with O_DIRECT: reads go through an aligned
    /// buffer.
    pub(crate) direct: bool,
}

impl Window {
    /// Reads `buf.len()` bytes at window offset `offset`.
    pub(crate) fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.direct && self.holds(offset, buf.len()) {
            return crate::direct::read_direct(&self.file, buf, self.base + offset, &mut None);
        }
        // Past the end, this fails before reading.
        read_exact_at(&self.file, buf, offset, self.size, self.base)
    }

    /// Whether `len` bytes at `offset` lie inside the window.
    pub(crate) fn holds(&self, offset: u64, len: usize) -> bool {
        offset
            .checked_add(len as u64)
            .is_some_and(|e| e <= self.size)
    }

    /// The device offset of a window offset.
    pub(crate) fn dev_offset(&self, offset: u64) -> u64 {
        self.base + offset
    }
}

/// Reads `buf.len()` bytes at `offset` (relative to `base`), failing
/// cleanly past `size`.
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64, size: u64, base: u64) -> io::Result<()> {
    let end = offset
        .checked_add(buf.len() as u64)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read offset overflows"))?;
    if end > size {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "read of {} bytes at {offset} is past the end of the device ({size} bytes)",
                buf.len()
            ),
        ));
    }
    file.read_exact_at(buf, base + offset)
}

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
