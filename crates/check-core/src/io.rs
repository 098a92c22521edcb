//! Block and inode reads for one worker.

use std::io;

use pipeline::Reader;

use crate::fs::Fs;

/// A read that failed, and the first block of it that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("error reading block {block} ({source})")]
pub struct BlockReadError {
    /// The block.
    pub block: u64,
    /// What the device said.
    pub source: io::Error,
}

/// The block a read error names, if it came from a block read.
pub fn failed_block(e: &io::Error) -> Option<u64> {
    e.get_ref()?
        .downcast_ref::<BlockReadError>()
        .map(|b| b.block)
}

/// Reads whole blocks from `blk` into `buf` with `read(buf, byte offset)`;
/// when that fails, reads block by block (as e2fsck retries) to find the
/// first block that cannot be read, and names it in the error.
pub(crate) fn read_locating(
    blk: u64,
    bs: u64,
    buf: &mut [u8],
    mut read: impl FnMut(&mut [u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let off = blk
        .checked_mul(bs)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "block number overflows"))?;
    let first = match read(buf, off) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if first.kind() == io::ErrorKind::InvalidInput || failed_block(&first).is_some() {
        return Err(first);
    }
    let mut source = first;
    let mut block = blk;
    if buf.len() as u64 > bs {
        for (i, chunk) in buf.chunks_mut(bs as usize).enumerate() {
            let b = blk + i as u64;
            if let Err(e) = read(chunk, b * bs) {
                source = e;
                block = b;
                break;
            }
        }
    }
    Err(io::Error::new(
        source.kind(),
        BlockReadError { block, source },
    ))
}

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

    /// Reads `buf.len()` bytes starting at block `blk`. When the read
    /// fails, the error names the first block that cannot be read (see
    /// [`failed_block`]).
    pub fn read_blocks(&mut self, blk: u64, buf: &mut [u8]) -> io::Result<()> {
        let bs = u64::from(self.fs.geo.block_size);
        let rd = &mut self.rd;
        read_locating(blk, bs, buf, |b, off| rd.read_at(b, off))
    }

    /// Reads one block, returning false on any error (which is noted for
    /// the report: the check goes on without the block).
    pub fn read_block_ok(&mut self, blk: u64, buf: &mut [u8]) -> bool {
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
    pub fn read_inode(&mut self, ino: u32, buf: &mut [u8]) -> io::Result<()> {
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
