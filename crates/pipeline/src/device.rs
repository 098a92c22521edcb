//! Opening a device or image file and choosing an I/O path.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::read::{ReadReq, Reader};

/// Which I/O path to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    /// Probe io_uring and fall back to pread when it is unavailable.
    Auto,
    /// Require io_uring.
    Uring,
    /// Use pread only.
    Pread,
}

/// What kind of file the device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// A regular image file.
    File,
    /// A block device.
    BlockDevice,
}

/// Why a device could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The path could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The path is neither a regular file nor a block device.
    #[error("{path} is not a regular file or block device")]
    NotAFileOrDevice {
        /// The path.
        path: PathBuf,
    },
    /// The size could not be determined.
    #[error("cannot get the size of {path}: {source}")]
    Size {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// io_uring was required but is not available.
    #[error("io_uring is not available: {0}")]
    UringUnavailable(io::Error),
    /// The offset lies past the end of the device.
    #[error("{path}: offset {offset} is past the end of the device ({size} bytes)")]
    OffsetPastEnd {
        /// The path.
        path: PathBuf,
        /// The offset asked for.
        offset: u64,
        /// The device's size.
        size: u64,
    },
}

/// Where a file system lives: a file or block device, and the window of
/// it that holds the file system (all of it, or a partition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The image file or block device.
    pub path: PathBuf,
    /// Where the file system starts, in bytes.
    pub offset: u64,
    /// How many bytes it may use; `None` for the rest of the device.
    pub len: Option<u64>,
}

/// Why a device specification was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    /// An option after `?` that is not known.
    #[error("unknown device option '{0}' (only offset=BYTES is known)")]
    UnknownOption(String),
    /// `offset=` without a number.
    #[error("invalid offset '{0}': expected a number of bytes")]
    BadOffset(String),
}

impl Target {
    /// The whole of `path`.
    pub fn whole(path: impl Into<PathBuf>) -> Target {
        Target {
            path: path.into(),
            offset: 0,
            len: None,
        }
    }

    /// Parses e2fsprogs' device syntax: `PATH`, or `PATH?offset=BYTES`
    /// (options after `?`, separated by `&`).
    pub fn parse(spec: &str) -> Result<Target, SpecError> {
        let Some((path, opts)) = spec.split_once('?') else {
            return Ok(Target::whole(spec));
        };
        let mut t = Target::whole(path);
        for opt in opts.split('&').filter(|o| !o.is_empty()) {
            match opt.split_once('=') {
                Some(("offset", v)) => {
                    t.offset = v.parse().map_err(|_| SpecError::BadOffset(v.to_string()))?;
                }
                _ => return Err(SpecError::UnknownOption(opt.to_string())),
            }
        }
        Ok(t)
    }
}

/// Bytes written but not yet on the device (a superblock a repair holds
/// back until its last write, say), laid over what readers return.
pub trait Overlay: Send + Sync {
    /// Whether any of `len` bytes at `offset` are covered.
    fn covers(&self, offset: u64, len: usize) -> bool;
    /// Overwrites the covered part of `buf`, read at `offset`.
    fn patch(&self, offset: u64, buf: &mut [u8]);
}

/// A reader that counts the bytes it reads (into its device's count).
struct Counted {
    inner: Box<dyn Reader>,
    read: Arc<AtomicU64>,
}

impl Reader for Counted {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.read_at(buf, offset)
    }

    fn read_batch_with(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let n: u64 = reqs.iter().map(|r| r.buf.len() as u64).sum();
        self.read.fetch_add(n, Ordering::Relaxed);
        self.inner.read_batch_with(reqs, done);
    }
}

/// A reader whose results get the overlay's bytes.
struct Overlaid {
    inner: Box<dyn Reader>,
    overlay: Arc<dyn Overlay>,
}

impl Reader for Overlaid {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)?;
        self.overlay.patch(offset, buf);
        Ok(())
    }

    fn read_batch_with(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        // Reads the overlay covers are handed on once patched, after the
        // batch; the others as they finish.
        let overlay = &self.overlay;
        let mut later = Vec::new();
        self.inner.read_batch_with(reqs, &mut |i, r| {
            if r.result.is_ok() && overlay.covers(r.offset, r.buf.len()) {
                later.push(i);
            } else {
                done(i, r);
            }
        });
        for i in later {
            let r = &mut reqs[i];
            overlay.patch(r.offset, r.buf);
            done(i, r);
        }
    }
}

/// An opened device: its size and a way to make readers. Offsets are
/// relative to the start of the file system's window of the device.
pub struct Device {
    file: Arc<File>,
    /// Where the window starts on the device.
    base: u64,
    /// The window's length.
    size: u64,
    kind: DeviceKind,
    uring: bool,
    path: PathBuf,
    overlay: OnceLock<Arc<dyn Overlay>>,
    /// The O_DIRECT file and its read-ahead, once [`Device::go_direct`]
    /// has switched to them.
    direct: Option<(Arc<File>, Arc<crate::direct::Ahead>)>,
    /// Bytes its readers and [`Device::read_at`] were asked for.
    read: Arc<AtomicU64>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("path", &self.path)
            .field("base", &self.base)
            .field("size", &self.size)
            .field("io", &self.io_path())
            .finish()
    }
}

impl Device {
    /// The size of the file system's window of the device, in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where the window starts on the device, in bytes.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Whether it is a file or a block device.
    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name of the I/O path in use, for `-v`.
    pub fn io_path(&self) -> &'static str {
        match (self.uring, self.direct.is_some()) {
            (true, false) => "io_uring",
            (false, false) => "pread",
            (true, true) => "io_uring, O_DIRECT",
            (false, true) => "pread, O_DIRECT",
        }
    }

    /// Whether reads bypass the page cache (see [`Device::go_direct`]).
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// Bytes read ahead on the direct path, bytes of those a reader took,
    /// and the nanoseconds readers waited for reads in flight; `None` on
    /// the buffered path.
    pub fn read_ahead_counts(&self) -> Option<(u64, u64, u64)> {
        self.direct.as_ref().map(|(_, a)| a.counts())
    }

    /// Switches every later read to O_DIRECT: nothing enters or comes
    /// from the page cache, and [`Device::prefetch`] reads ahead into a
    /// bounded store of the device's own. Refused (and the device stays
    /// as it was) when the file or device does not take O_DIRECT reads.
    /// Only for a device nobody writes through while it is read: the
    /// store does not see writes made after it read a range.
    pub fn go_direct(&mut self) -> io::Result<()> {
        if self.direct.is_some() {
            return Ok(());
        }
        let file = Arc::new(crate::aligned::open_direct(&self.path, self.base)?);
        let ahead = crate::direct::Ahead::start(file.clone(), self.uring);
        self.direct = Some((file, ahead));
        Ok(())
    }

    /// Makes a reader for one worker.
    pub fn reader(&self) -> Box<dyn Reader> {
        let inner: Box<dyn Reader> = Box::new(Counted {
            inner: self.plain_reader(),
            read: self.read.clone(),
        });
        match self.overlay.get() {
            Some(o) => Box::new(Overlaid {
                inner,
                overlay: o.clone(),
            }),
            None => inner,
        }
    }

    /// Bytes read from it so far: what its readers and
    /// [`Device::read_at`] were asked for, whether the page cache, the
    /// device, an overlay or the read-ahead store served them (read-ahead
    /// itself is not counted again).
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    fn plain_reader(&self) -> Box<dyn Reader> {
        if let Some((_, ahead)) = &self.direct {
            return Box::new(crate::direct::DirectReader::new(
                self.window(),
                Some(ahead.clone()),
                self.uring,
            ));
        }
        if self.uring {
            if let Ok(r) = crate::uring::UringReader::new(self.window()) {
                return Box::new(r);
            }
        }
        Box::new(crate::pread::PreadReader::new(self.window()))
    }

    /// Lays `overlay` over every read from now on (readers made before
    /// keep reading the device alone). Set once; later calls are ignored.
    pub fn lay_over(&self, overlay: Arc<dyn Overlay>) {
        let _ = self.overlay.set(overlay);
    }

    fn window(&self) -> crate::read::Window {
        match &self.direct {
            Some((f, _)) => crate::read::Window {
                file: f.clone(),
                base: self.base,
                size: self.size,
                direct: true,
            },
            None => crate::read::Window {
                file: self.file.clone(),
                base: self.base,
                size: self.size,
                direct: false,
            },
        }
    }

    /// Starts reading `len` bytes at `offset` ahead of the readers that
    /// will want them (inode tables ahead of the workers): into the
    /// page cache for an image file, into the device's own store on the
    /// direct path. A hint: failures are ignored.
    pub fn prefetch(&self, offset: u64, len: u64) {
        if let Some((_, ahead)) = &self.direct {
            if len > 0 && offset < self.size {
                ahead.want(self.base + offset, len.min(self.size - offset));
            }
            return;
        }
        if self.kind != DeviceKind::File || len == 0 {
            return;
        }
        let (Ok(off), Ok(len)) = (i64::try_from(self.base + offset), i64::try_from(len)) else {
            return;
        };
        let _ = nix::fcntl::posix_fadvise(
            self.file.as_ref(),
            off,
            len,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED,
        );
    }

    /// A one-off read through pread (for start-up reads such as the superblock).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.window().read_exact_at(buf, offset)?;
        if let Some(o) = self.overlay.get() {
            o.patch(offset, buf);
        }
        Ok(())
    }
}

/// Opens the target read-only and picks the I/O path.
pub fn open_device(target: &Target, mode: IoMode) -> Result<Device, OpenError> {
    let path = target.path.as_path();
    let file = File::open(path).map_err(|source| OpenError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let meta = file.metadata().map_err(|source| OpenError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let ft = meta.file_type();
    let (kind, size) = if ft.is_file() {
        (DeviceKind::File, meta.len())
    } else if ft.is_block_device() {
        let size = block_device_size(&file).map_err(|source| OpenError::Size {
            path: path.to_path_buf(),
            source,
        })?;
        (DeviceKind::BlockDevice, size)
    } else {
        return Err(OpenError::NotAFileOrDevice {
            path: path.to_path_buf(),
        });
    };
    if target.offset > size {
        return Err(OpenError::OffsetPastEnd {
            path: path.to_path_buf(),
            offset: target.offset,
            size,
        });
    }
    let size = match target.len {
        Some(l) => l.min(size - target.offset),
        None => size - target.offset,
    };
    if kind == DeviceKind::File {
        // The checker's reads are small and scattered (directory blocks
        // between file data); the kernel's sequential read-ahead would
        // fetch the data in between. Inode tables, the one sequential
        // stream, are fetched ahead explicitly (`prefetch`).
        let _ = nix::fcntl::posix_fadvise(
            &file,
            0,
            0,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_RANDOM,
        );
    }
    let file = Arc::new(file);
    let uring = match mode {
        IoMode::Pread => false,
        IoMode::Auto => crate::uring::probe().is_ok(),
        IoMode::Uring => {
            crate::uring::probe().map_err(OpenError::UringUnavailable)?;
            true
        }
    };
    Ok(Device {
        file,
        base: target.offset,
        size,
        kind,
        uring,
        path: path.to_path_buf(),
        overlay: OnceLock::new(),
        direct: None,
        read: Arc::default(),
    })
}

nix::ioctl_read!(blkgetsize64, 0x12, 114, u64);

fn block_device_size(file: &File) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is
    // valid for the duration of the call; the fd is open.
    unsafe { blkgetsize64(file.as_raw_fd(), &mut size) }.map_err(io::Error::from)?;
    Ok(size)
}
