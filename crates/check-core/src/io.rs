//! Block and inode reads for one worker.

use std::io;

use pipeline::Reader;

use crate::fs::Fs;

/// A worker's reader bound to the file system.
pub struct Io<'f> {
    /// The file system.
    pub fs: &'f Fs,
    rd: Box<dyn Reader>,
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

    /// Reads `buf.len()` bytes starting at block `blk`.
    pub fn read_blocks(&mut self, blk: u64, buf: &mut [u8]) -> io::Result<()> {
        let off = blk
            .checked_mul(u64::from(self.fs.geo.block_size))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "block number overflows"))?;
        self.rd.read_at(buf, off)
    }

    /// Reads one block, returning false on any error.
    pub fn read_block_ok(&mut self, blk: u64, buf: &mut [u8]) -> bool {
        self.read_blocks(blk, buf).is_ok()
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
    pub fn read_inode(&mut self, ino: u32, buf: &mut [u8]) -> io::Result<()> {
        let off = Self::inode_offset(self.fs, ino).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("inode {ino} has no location"),
            )
        })?;
        let n = (self.fs.geo.inode_size as usize).min(buf.len());
        self.rd.read_at(&mut buf[..n], off)
    }
}
