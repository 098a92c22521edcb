//! Block and inode reads for one worker.

use std::io;

use pipeline::Reader;

use crate::fs::{read_locating, BlockReadError, Fs};

/// A worker's reader bound to the file system.
pub struct Io<'f> {
    /// The file system.
    pub fs: &'f Fs,
    rd: Box<dyn Reader>,
}

/// The mapping walkers read through a worker's reader.
impl ext4_layout::walk::BlockSource for Io<'_> {
    type Error = io::Error;

    fn block_size(&self) -> usize {
        self.fs.block_size()
    }

    fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_blocks(blk, buf)
    }

    fn holds(&self, blk: u64) -> bool {
        self.fs.geo.block_in_range(blk)
    }
}

impl<'f> Io<'f> {
    /// A reader for one worker.
    pub fn new(fs: &'f Fs) -> Self {
        Io {
            fs,
            rd: fs.dev.reader(),
        }
    }

    /// The underlying reader (for batched reads).
    pub fn reader(&mut self) -> &mut dyn Reader {
        self.rd.as_mut()
    }

    /// Reads `buf.len()` bytes starting at block `blk`. When the read
    /// fails, the error names the first block that cannot be read (see
    /// `fs::blockread::failed_block`).
    pub fn read_blocks(&mut self, blk: u64, buf: &mut [u8]) -> io::Result<()> {
        let bs = u64::from(self.fs.geo.block_size);
        let rd = &mut self.rd;
        read_locating(blk, bs, buf, |b, off| rd.read_at(b, off))
    }

    /// Reads one block, returning false on any error (which is noted for
    /// the report: the check goes on without the block).
    pub(crate) fn read_block_ok(&mut self, blk: u64, buf: &mut [u8]) -> bool {
        match self.read_blocks(blk, buf) {
            Ok(()) => true,
            Err(e) => {
                // A block past the device's end is the image's size, not a
                // read error.
                if e.kind() != io::ErrorKind::InvalidInput && blk < self.fs.dev_blocks {
                    self.fs.note_read_error(&e);
                }
                false
            }
        }
    }

    /// The byte offset of an inode in its inode table.
    pub fn inode_offset(fs: &Fs, ino: u32) -> Option<u64> {
        if ino == 0 || ino > fs.geo.inodes_count {
            return None;
        }
        let idx = ino - 1;
        let g = idx / fs.geo.inodes_per_group;
        let within = u64::from(idx % fs.geo.inodes_per_group);
        let table = fs.gd(g).inode_table();
        if table == 0 {
            return None;
        }
        table
            .checked_mul(u64::from(fs.geo.block_size))?
            .checked_add(within * u64::from(fs.geo.inode_size))
    }

    /// Reads inode `ino` (`inode_size` bytes) into `buf`.
    pub(crate) fn read_inode(&mut self, ino: u32, buf: &mut [u8]) -> io::Result<()> {
        let off = Self::inode_offset(self.fs, ino).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("inode {ino} has no location"),
            )
        })?;
        let n = (self.fs.geo.inode_size as usize).min(buf.len());
        self.rd.read_at(&mut buf[..n], off).map_err(|source| {
            io::Error::new(
                source.kind(),
                BlockReadError {
                    block: off / u64::from(self.fs.geo.block_size),
                    source,
                },
            )
        })
    }
}

/// Bytes of a sector, the unit a disk fails in.
pub const SECTOR: usize = 512;

/// Reads block `blk` into `out` one sector at a time, as a repair reads a
/// block the disk will not give whole: the sectors that fail are left as
/// zeros. Returns how many failed.
pub fn salvage_block(fs: &Fs, blk: u64, out: &mut [u8]) -> usize {
    let base = blk * u64::from(fs.geo.block_size);
    // An aligned buffer, for a device read around the page cache.
    let mut raw = vec![0u8; 2 * SECTOR + 4096];
    let skip = raw.as_ptr().align_offset(4096).min(4096);
    let mut failed = 0;
    for (i, dst) in out.chunks_mut(SECTOR).enumerate() {
        let sector = &mut raw[skip..skip + SECTOR];
        match fs.dev.read_at(sector, base + (i * SECTOR) as u64) {
            Ok(()) => dst.copy_from_slice(&sector[..dst.len()]),
            Err(_) => {
                dst.fill(0);
                failed += 1;
            }
        }
    }
    failed
}
