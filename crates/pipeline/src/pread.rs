//! The pread path: one positioned read per request.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Reads `buf.len()` bytes at `offset`, failing cleanly past `size`.
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64, size: u64) -> io::Result<()> {
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
    file.read_exact_at(buf, offset)
}

/// A reader that issues one pread per request.
pub(crate) struct PreadReader {
    file: Arc<File>,
    size: u64,
}

impl PreadReader {
    pub(crate) fn new(file: Arc<File>, size: u64) -> Self {
        PreadReader { file, size }
    }
}

impl crate::Reader for PreadReader {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_exact_at(&self.file, buf, offset, self.size)
    }
}
