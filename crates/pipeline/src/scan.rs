//! A surface scan: read every block of the device, many megabytes at a
//! time from several threads, and find the blocks that cannot be read.
//! Block devices are read with O_DIRECT, so the scan measures the medium
//! and not the page cache.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes read at a time by one thread.
const CHUNK: u64 = 4 << 20;
/// Threads reading at once (the queue depth the device sees).
const THREADS: usize = 4;
pub use crate::aligned::AlignedBuf;

/// Opens `path` for the scan's reads: O_DIRECT for a block device when the
/// kernel allows it, else a normal read-only open.
pub fn open_for_scan(path: &Path) -> io::Result<(File, bool)> {
    let meta = std::fs::metadata(path)?;
    if meta.file_type().is_block_device() {
        if let Ok(f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            return Ok((f, true));
        }
    }
    Ok((File::open(path)?, false))
}

/// Reads `[base, base + count * unit)` of `file` and returns the units
/// (numbered from 0) that could not be read. `done(bytes)` is called as
/// the scan advances. Reads are aligned for O_DIRECT when `unit` and
/// `base` are multiples of 4 KiB; otherwise the device must be opened
/// without it.
pub fn unreadable(
    file: &File,
    base: u64,
    unit: u64,
    count: u64,
    done: &(dyn Fn(u64) + Sync),
) -> Vec<u64> {
    let total = count.saturating_mul(unit);
    let chunk = (CHUNK / unit).max(1) * unit;
    let next = AtomicU64::new(0);
    let bad = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let mut buf = AlignedBuf::new(chunk as usize);
                loop {
                    let at = next.fetch_add(chunk, Ordering::Relaxed);
                    if at >= total {
                        return;
                    }
                    let len = chunk.min(total - at);
                    let b = &mut buf.as_mut_slice()[..len as usize];
                    if read_all(file, b, base + at).is_err() {
                        // Find the units that fail, one at a time.
                        let mut mine = Vec::new();
                        for k in 0..len / unit {
                            let off = at + k * unit;
                            let one = &mut buf.as_mut_slice()[..unit as usize];
                            if read_all(file, one, base + off).is_err() {
                                mine.push(off / unit);
                            }
                        }
                        if let Ok(mut v) = bad.lock() {
                            v.extend(mine);
                        }
                    }
                    done(len);
                }
            });
        }
    });
    let mut v = bad.into_inner().unwrap_or_default();
    v.sort_unstable();
    v
}

/// Drops a range from the page cache, so that the next read of it goes
/// to the device (a hint: failures are ignored).
pub fn forget_cached(file: &File, offset: u64, len: u64) {
    if let (Ok(o), Ok(l)) = (i64::try_from(offset), i64::try_from(len)) {
        let _ = nix::fcntl::posix_fadvise(
            file,
            o,
            l,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
        );
    }
}

/// Reads the whole buffer (a short read past the end is an error).
pub fn read_all(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aligned::ALIGN;

    #[test]
    fn a_readable_file_has_no_bad_blocks() {
        let p = std::env::temp_dir().join(format!("scan-{}", std::process::id()));
        std::fs::write(&p, vec![7u8; 10 * 4096 + 100]).unwrap();
        let (f, direct) = open_for_scan(&p).unwrap();
        assert!(!direct);
        let seen = AtomicU64::new(0);
        let bad = unreadable(&f, 0, 4096, 10, &|n| {
            seen.fetch_add(n, Ordering::Relaxed);
        });
        assert!(bad.is_empty());
        assert_eq!(seen.load(Ordering::Relaxed), 10 * 4096);
        // Units past the end of the file cannot be read.
        let bad = unreadable(&f, 0, 4096, 12, &|_| {});
        assert_eq!(bad, vec![10, 11]);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn aligned_buffers_are_aligned() {
        let mut b = AlignedBuf::new(8192);
        assert_eq!(b.as_mut_slice().as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.as_slice().len(), 8192);
    }
}
