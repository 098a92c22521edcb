//! O_DIRECT's building blocks: 4 KiB-aligned memory, opening a file for
//! direct reads, and one direct read of any range through an aligned
//! bounce buffer.

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Alignment of offsets, lengths and memory for O_DIRECT (a multiple of
/// every logical block size in use: 512 and 4096).
pub const ALIGN: usize = 4096;
/// [`ALIGN`] as a byte count.
pub(crate) const ALIGN64: u64 = ALIGN as u64;

/// `x` rounded down to a multiple of [`ALIGN`].
pub(crate) fn align_down(x: u64) -> u64 {
    x / ALIGN64 * ALIGN64
}

/// `x` rounded up to a multiple of [`ALIGN`].
pub(crate) fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN64).saturating_mul(ALIGN64)
}

/// Zeroed memory whose start is aligned to 4 KiB.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer owns its allocation outright, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// The start of the memory, for io_uring's buffer registration and
    /// reads into a part of it.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// A zeroed buffer of `len` bytes (at least one page is allocated).
    pub fn new(len: usize) -> AlignedBuf {
        let layout = Self::layout(len);
        // SAFETY: the layout's size is non-zero (at least ALIGN).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = std::ptr::NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        let size = len.div_ceil(ALIGN).max(1) * ALIGN;
        Layout::from_size_align(size, ALIGN).unwrap_or(Layout::new::<[u8; ALIGN]>())
    }

    /// The bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `len` initialized (zeroed) bytes owned
        // by `self`, borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as in `as_mut_slice`, borrowed shared.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// Opens `path` for O_DIRECT reads and checks that an aligned read at
/// `probe_at` works: a file system or device that refuses O_DIRECT (at
/// open, as tmpfs did before Linux 6.6, or at the first read) is found
/// here, and the caller keeps the buffered path.
pub(crate) fn open_direct(path: &Path, probe_at: u64) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let mut b = AlignedBuf::new(ALIGN);
    f.read_at(b.as_mut_slice(), align_down(probe_at))?;
    Ok(f)
}

/// Reads `buf.len()` bytes at device offset `at` from an O_DIRECT file,
/// through `bounce` (grown as needed) when `buf` is not aligned.
pub(crate) fn read_direct(
    file: &File,
    buf: &mut [u8],
    at: u64,
    bounce: &mut Option<AlignedBuf>,
) -> io::Result<()> {
    let start = align_down(at);
    let end = at
        .checked_add(buf.len() as u64)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read offset overflows"))?;
    let span = usize::try_from(align_up(end) - start)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "read too large"))?;
    if bounce.as_ref().is_none_or(|b| b.len() < span) {
        *bounce = Some(AlignedBuf::new(span));
    }
    let Some(b) = bounce.as_mut() else {
        return Err(io::Error::other("no bounce buffer"));
    };
    let mem = &mut b.as_mut_slice()[..span];
    let need = (end - start) as usize;
    let got = fill(file, mem, start, need)?;
    if got < need {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read of {} bytes at {at} ended early", buf.len()),
        ));
    }
    let from = (at - start) as usize;
    buf.copy_from_slice(&mem[from..from + buf.len()]);
    Ok(())
}

/// Reads into `mem` from `at` until `need` bytes are in or the file
/// ends; the number of bytes read.
pub(crate) fn fill(file: &File, mem: &mut [u8], at: u64, need: usize) -> io::Result<usize> {
    let mut got = 0usize;
    while got < need {
        match file.read_at(&mut mem[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if got % ALIGN != 0 {
                    // A short, unaligned read: the end of the device.
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
