//! A device wrapper for the fault-injection and power-cut tests, loaded
//! into a checker with `LD_PRELOAD`. It stands between the program and
//! two files, the device (`FAULT_DEV`) and the undo file (`FAULT_UNDO`),
//! and leaves every other file alone.
//!
//! It can (environment variables, all optional):
//! * `FAULT_READ_EIO=B`: fail every device read that touches the bad
//!   region, bytes `B` to `B + FAULT_READ_LEN` (1 by default), with EIO;
//! * `FAULT_READ_SHORT=B`: end every device read that touches the bad
//!   region just before it (a short read; a read starting inside it gets
//!   nothing);
//! * `FAULT_WRITE_EIO=N`: fail the `N`th device write (from 1) with EIO;
//! * `FAULT_FLUSH_EIO=N`: fail the `N`th device flush with EIO;
//! * `FAULT_UNDO_ENOSPC=N`: fail the `N`th undo-file write with ENOSPC;
//! * `FAULT_HEAL_ON_WRITE=1`: a device write that touches the bad
//!   region makes it readable again, as a disk remaps a sector it is
//!   asked to write;
//! * `FAULT_READ_DELAY_US=N`: make every device read take `N`
//!   microseconds longer (a slow disk, for stopping a run midway);
//! * `FAULT_LOG=PATH`: append a record of every device and undo-file
//!   read, write and flush to `PATH`, in the order they happen: a kind
//!   byte, a little-endian u64 offset and u32 length, then the bytes of a
//!   write. Kinds: 1 device write, 2 undo write, 3 device flush, 4 undo
//!   flush, 5 device read, 6 device write refused, 7 undo write refused.
//!
//! Reads and writes are positioned (pread, pwrite) or plain (read, write
//! at the file position), which e2fsprogs falls back to. Vectored
//! non-blocking reads (preadv2) of the device are refused as unsupported,
//! so a caller takes its plain path; io_uring is not seen at all, so the
//! checker is run with `--io pread`.
//!
//! Built by the tests with `rustc --crate-type cdylib`; it needs no crates.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

type Off = i64;

const EIO: c_int = 5;
const ENOSPC: c_int = 28;
const EOPNOTSUPP: c_int = 95;
const SEEK_CUR: c_int = 1;
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;
const O_WRONLY: c_int = 1;
const O_CREAT: c_int = 0o100;
const O_APPEND: c_int = 0o2000;
const O_CLOEXEC: c_int = 0o2000000;

#[repr(C)]
pub struct IoVec {
    base: *mut c_void,
    len: usize,
}

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn __errno_location() -> *mut c_int;
    fn readlink(path: *const c_char, buf: *mut c_char, len: usize) -> isize;
    fn lseek64(fd: c_int, off: Off, whence: c_int) -> Off;
    fn open(path: *const c_char, flags: c_int, mode: c_int) -> c_int;
}

struct Config {
    dev: Option<Vec<u8>>,
    undo: Option<Vec<u8>>,
    read_eio: Option<u64>,
    read_short: Option<u64>,
    read_len: u64,
    write_eio: Option<u64>,
    flush_eio: Option<u64>,
    undo_enospc: Option<u64>,
    read_delay_us: Option<u64>,
    heal_on_write: bool,
    log: c_int,
}

/// The bad region was written (with `FAULT_HEAL_ON_WRITE`): reads of it
/// succeed from then on.
static HEALED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

static DEV_WRITES: AtomicU64 = AtomicU64::new(0);
static DEV_FLUSHES: AtomicU64 = AtomicU64::new(0);
static UNDO_WRITES: AtomicU64 = AtomicU64::new(0);

fn config() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| {
        let num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse().ok());
        let path = |k: &str| std::env::var(k).ok().map(|v| v.into_bytes());
        let log = match std::env::var("FAULT_LOG") {
            Ok(p) => {
                let c = std::ffi::CString::new(p).unwrap_or_default();
                // SAFETY: `c` is a NUL-terminated string that outlives the call.
                unsafe { open(c.as_ptr(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644) }
            }
            Err(_) => -1,
        };
        Config {
            dev: path("FAULT_DEV"),
            undo: path("FAULT_UNDO"),
            read_eio: num("FAULT_READ_EIO"),
            read_short: num("FAULT_READ_SHORT"),
            read_len: num("FAULT_READ_LEN").unwrap_or(1).max(1),
            write_eio: num("FAULT_WRITE_EIO"),
            flush_eio: num("FAULT_FLUSH_EIO"),
            undo_enospc: num("FAULT_UNDO_ENOSPC"),
            read_delay_us: num("FAULT_READ_DELAY_US"),
            heal_on_write: std::env::var_os("FAULT_HEAL_ON_WRITE").is_some(),
            log,
        }
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Dev,
    Undo,
    Other,
}

fn which(fd: c_int) -> Which {
    if fd < 0 {
        return Which::Other;
    }
    let c = config();
    if c.dev.is_none() && c.undo.is_none() {
        return Which::Other;
    }
    let link = format!("/proc/self/fd/{fd}\0");
    let mut buf = [0u8; 4096];
    // SAFETY: `link` is NUL-terminated; `buf` is writable for its length.
    let n = unsafe { readlink(link.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
        return Which::Other;
    }
    let target = &buf[..n as usize];
    if c.dev.as_deref() == Some(target) {
        Which::Dev
    } else if c.undo.as_deref() == Some(target) {
        Which::Undo
    } else {
        Which::Other
    }
}

fn real<T>(name: &CStr) -> T {
    // SAFETY: RTLD_NEXT lookup of a libc symbol; the caller names a symbol
    // whose type is `T` (a function pointer of the same size as a pointer).
    unsafe {
        let p = dlsym(RTLD_NEXT, name.as_ptr());
        assert!(!p.is_null(), "no next {name:?}");
        std::mem::transmute_copy(&p)
    }
}

fn fail(errno: c_int) -> isize {
    // SAFETY: the thread's errno location is always valid.
    unsafe { *__errno_location() = errno };
    -1
}

fn log(kind: u8, off: u64, len: usize, data: &[u8]) {
    let fd = config().log;
    if fd < 0 {
        return;
    }
    let mut rec = Vec::with_capacity(13 + data.len());
    rec.push(kind);
    rec.extend_from_slice(&off.to_le_bytes());
    rec.extend_from_slice(&(len as u32).to_le_bytes());
    rec.extend_from_slice(data);
    let w: unsafe extern "C" fn(c_int, *const c_void, usize) -> isize = real(c"write");
    // SAFETY: `rec` is valid for its length; one write keeps a record whole
    // (O_APPEND).
    unsafe { w(fd, rec.as_ptr().cast(), rec.len()) };
}

/// What a read of `len` bytes at `off` of the device may return: `Err`
/// an errno, `Ok(n)` the most bytes it may return.
fn read_rule(off: u64, len: usize) -> Result<usize, c_int> {
    let c = config();
    let end = off.saturating_add(len as u64);
    let touches = |b: u64| off < b.saturating_add(c.read_len) && b < end;
    if HEALED.load(Ordering::SeqCst) {
        return Ok(len);
    }
    if let Some(b) = c.read_eio {
        if touches(b) {
            return Err(EIO);
        }
    }
    if let Some(b) = c.read_short {
        if touches(b) {
            return Ok(b.saturating_sub(off) as usize);
        }
    }
    Ok(len)
}

unsafe fn read_common(fd: c_int, buf: *mut c_void, n: usize, off: Option<Off>) -> isize {
    type Pread = unsafe extern "C" fn(c_int, *mut c_void, usize, Off) -> isize;
    type Read = unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize;
    let mut n = n;
    if which(fd) == Which::Dev {
        let at = match off {
            Some(o) => o,
            None => lseek64(fd, 0, SEEK_CUR),
        };
        if let Some(us) = config().read_delay_us {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
        if at >= 0 {
            log(5, at as u64, n, &[]);
            match read_rule(at as u64, n) {
                Err(e) => return fail(e),
                Ok(m) => n = m,
            }
        }
    }
    match off {
        Some(o) => real::<Pread>(c"pread64")(fd, buf, n, o),
        None => real::<Read>(c"read")(fd, buf, n),
    }
}

unsafe fn write_common(fd: c_int, buf: *const c_void, n: usize, off: Option<Off>) -> isize {
    type Pwrite = unsafe extern "C" fn(c_int, *const c_void, usize, Off) -> isize;
    type Write = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;
    let w = which(fd);
    if w != Which::Other {
        let c = config();
        let at = match off {
            Some(o) => o,
            None => lseek64(fd, 0, SEEK_CUR),
        } as u64;
        let (count, limit, errno, kind) = match w {
            Which::Dev => (&DEV_WRITES, c.write_eio, EIO, 1u8),
            _ => (&UNDO_WRITES, c.undo_enospc, ENOSPC, 2u8),
        };
        let k = count.fetch_add(1, Ordering::SeqCst) + 1;
        if limit == Some(k) {
            log(kind + 5, at, n, &[]);
            return fail(errno);
        }
        let data = std::slice::from_raw_parts(buf.cast::<u8>(), n);
        if w == Which::Dev && c.heal_on_write {
            let end = at.saturating_add(n as u64);
            for b in [c.read_eio, c.read_short].into_iter().flatten() {
                if at < b.saturating_add(c.read_len) && b < end {
                    HEALED.store(true, Ordering::SeqCst);
                }
            }
        }
        let r = match off {
            Some(o) => real::<Pwrite>(c"pwrite64")(fd, buf, n, o),
            None => real::<Write>(c"write")(fd, buf, n),
        };
        if r > 0 {
            log(kind, at, r as usize, &data[..r as usize]);
        }
        return r;
    }
    match off {
        Some(o) => real::<Pwrite>(c"pwrite64")(fd, buf, n, o),
        None => real::<Write>(c"write")(fd, buf, n),
    }
}

unsafe fn flush_common(fd: c_int, name: &CStr) -> c_int {
    type Sync = unsafe extern "C" fn(c_int) -> c_int;
    match which(fd) {
        Which::Dev => {
            let k = DEV_FLUSHES.fetch_add(1, Ordering::SeqCst) + 1;
            if config().flush_eio == Some(k) {
                fail(EIO);
                return -1;
            }
            let r = real::<Sync>(name)(fd);
            if r == 0 {
                log(3, 0, 0, &[]);
            }
            r
        }
        Which::Undo => {
            let r = real::<Sync>(name)(fd);
            if r == 0 {
                log(4, 0, 0, &[]);
            }
            r
        }
        Which::Other => real::<Sync>(name)(fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: usize, off: Off) -> isize {
    read_common(fd, buf, n, Some(off))
}

#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: usize, off: Off) -> isize {
    read_common(fd, buf, n, Some(off))
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    read_common(fd, buf, n, None)
}

#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: usize, off: Off) -> isize {
    write_common(fd, buf, n, Some(off))
}

#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: usize, off: Off) -> isize {
    write_common(fd, buf, n, Some(off))
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    write_common(fd, buf, n, None)
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    flush_common(fd, c"fdatasync")
}

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    flush_common(fd, c"fsync")
}

#[no_mangle]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    iov: *const IoVec,
    cnt: c_int,
    off: Off,
    flags: c_int,
) -> isize {
    type Preadv2 = unsafe extern "C" fn(c_int, *const IoVec, c_int, Off, c_int) -> isize;
    if which(fd) == Which::Dev {
        return fail(EOPNOTSUPP);
    }
    real::<Preadv2>(c"preadv2")(fd, iov, cnt, off, flags)
}
