//! What a reader is: one read of a batch, the reader trait every I/O path
//! implements, and the file system's window of the device they read.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// One read of a batch: fill `buf` from byte `offset`.
pub struct ReadReq<'a> {
    /// Byte offset on the device.
    pub offset: u64,
    /// Destination; its length is the read size.
    pub buf: &'a mut [u8],
    /// Set by the reader: `Ok` when the whole buffer was filled.
    pub result: io::Result<()>,
    /// Set by the reader: whether the data came from the page cache
    /// without waiting for the device (when the reader can tell).
    pub cached: bool,
}

impl<'a> ReadReq<'a> {
    /// A read request not yet done.
    pub fn new(offset: u64, buf: &'a mut [u8]) -> Self {
        ReadReq {
            offset,
            buf,
            result: Ok(()),
            cached: false,
        }
    }
}

/// A per-worker reader. Each worker owns one, so no reader state is shared.
pub trait Reader: Send {
    /// Fills `buf` from byte `offset`; a read past the end is an error.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Performs a batch of reads, setting each request's `result`.
    fn read_batch(&mut self, reqs: &mut [ReadReq<'_>]) {
        self.read_batch_with(reqs, &mut |_, _| {});
    }

    /// Performs a batch of reads and calls `done(i, &reqs[i])` as each
    /// finishes (in any order), so the caller can work on the first
    /// blocks while the rest are still being read.
    fn read_batch_with(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        for (i, r) in reqs.iter_mut().enumerate() {
            r.result = self.read_at(r.buf, r.offset);
            done(i, r);
        }
    }
}

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
            return crate::aligned::read_direct(&self.file, buf, self.base + offset, &mut None);
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
