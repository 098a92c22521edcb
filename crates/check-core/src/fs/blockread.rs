//! Block reads that name the first block that cannot be read.

use std::io;

/// A read that failed, and the first block of it that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("error reading block {block} ({source})")]
pub(crate) struct BlockReadError {
    /// The block.
    pub block: u64,
    /// What the device said.
    pub source: io::Error,
}

/// The block a read error names, if it came from a block read.
pub(crate) fn failed_block(e: &io::Error) -> Option<u64> {
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
