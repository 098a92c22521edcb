//! The bad-block list (inode 1): scanned for with `-c`, read from a file
//! with `-l` (added) or `-L` (replacing), and written back as e2fsck
//! writes it, before the passes.

use crate::error::Error;
use ext4_layout::types::{Ino, PhysBlock};
use std::path::PathBuf;

use ext4_layout::inode::Inode;
use ext4_layout::inode::{field, I_BLOCK};
use pipeline::scan;

use super::raw::now;
use super::stage::Staging;
use check_core::engine::CheckState;

/// What to do to the bad-block list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// `-c`: 1 reads every block; 2 also writes a pattern to each and puts
    /// the data back (`-cc`).
    pub scan: u8,
    /// `-k`: keep the blocks already listed when scanning.
    pub keep: bool,
    /// `-l FILE` (false) or `-L FILE` (true: replace the list).
    pub file: Option<(PathBuf, bool)>,
}

impl Change {
    /// Whether the current list is dropped first (`-L`, or `-c` without `-k`).
    fn replaces(&self) -> bool {
        matches!(self.file, Some((_, true))) || (self.scan > 0 && !self.keep)
    }
}

/// Reads a list of block numbers as e2fsprogs does: one number at the
/// start of each line (after blanks); lines that do not start with a
/// digit are skipped, anything after the number ignored.
pub fn parse_list(text: &str) -> Result<Vec<u64>, Error> {
    let mut v = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        let end = t
            .bytes()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(t.len());
        if end == 0 {
            continue;
        }
        let n: u64 = t[..end]
            .parse()
            .map_err(|_| Error::BadBlockText(t[..end].to_string()))?;
        if n > u64::from(u32::MAX) {
            return Err(Error::BadBlockTooLarge(n));
        }
        v.push(n);
    }
    Ok(v)
}

/// What the update did, for the report.
pub(super) struct Updated {
    /// Lines to show (illegal or out-of-range blocks, the update).
    pub notes: Vec<String>,
}

/// Works out the new list and stages inode 1, its mapping blocks and the
/// group summaries; `device` names the device in messages.
pub(super) fn stage_update<'f>(
    st: &'f CheckState,
    change: &Change,
    stage: &mut Staging<'f>,
    device: &str,
    writer: Option<&fixer::Fixer>,
) -> Result<Updated, Error> {
    let fs = &st.fs;
    let geo = &fs.geo;
    let bits = geo.cluster_bits;
    let mut notes = Vec::new();
    let in_range = |b: u64| b >= geo.first_data_block && b < geo.blocks_count;
    // The current list and its mapping blocks.
    let raw = stage.inode_copy(Ino::BAD).map_err(Error::BadBlocksInode)?;
    let mut old_data = Vec::new();
    let mut old_all = Vec::new();
    if let Some(inode) = Inode::new(&raw) {
        check_core::blockiter::for_each_block(&mut stage.io, &inode, &mut |b, l| {
            if !in_range(b) {
                notes.push(format!(
                    "Warning: illegal block {b} found in bad block inode.  Cleared."
                ));
                return;
            }
            old_all.push(b);
            if l >= 0 {
                old_data.push(b);
            }
        });
    }
    let mut list = if change.replaces() {
        Vec::new()
    } else {
        old_data.clone()
    };
    if let Some((path, _)) = &change.file {
        let text = std::fs::read_to_string(path).map_err(|source| Error::BadBlockFile {
            path: path.clone(),
            source,
        })?;
        for b in parse_list(&text).map_err(|e| Error::BadBlockList {
            path: path.clone(),
            source: Box::new(e),
        })? {
            if in_range(b) {
                list.push(b);
            } else {
                notes.push(format!("Bad block {b} out of range; ignored."));
            }
        }
    }
    if change.scan > 0 {
        list.extend(scan_device(st, change.scan >= 2, writer)?);
    }
    list.sort_unstable();
    list.dedup();
    notes.push(format!("{device}: Updating bad block inode."));
    // The old blocks are free again (unless something else claims them),
    // the new ones in use before any mapping block is allocated.
    for &b in &old_all {
        if !stage.shared(b >> bits) {
            stage.mark_block(PhysBlock(b), false);
        }
    }
    for &b in &list {
        stage.mark_block(PhysBlock(b), true);
    }
    {
        let r = stage.inode(Ino::BAD)?;
        r[I_BLOCK].fill(0);
    }
    for (i, &b) in list.iter().enumerate() {
        super::map::map_block(stage, Ino::BAD, i as u64, PhysBlock(b))
            .map_err(|source| Error::MapBadBlock { block: b, source })?;
    }
    let bs = u64::from(geo.block_size);
    let t = now();
    let r = stage.inode(Ino::BAD)?;
    let size = list.len() as u64 * bs;
    // As the library: i_blocks counts the bad blocks, not the mapping.
    super::raw::set_size(r, size);
    field::i_blocks_lo.set(r, (list.len() as u64 * (bs / 512)) as u32);
    field::i_atime.set(r, t);
    field::i_mtime.set(r, t);
    if field::i_ctime.get(r) == 0 {
        field::i_ctime.set(r, t);
    }
    super::rebuild::rebuild_with_allocations(st, stage)?;
    Ok(Updated { notes })
}

/// `-c`: the blocks of the file system that cannot be read; with
/// `write_test`, also those that do not give back what was written
/// (each block's data is put back at once, through the fixer).
fn scan_device(
    st: &CheckState,
    write_test: bool,
    writer: Option<&fixer::Fixer>,
) -> Result<Vec<u64>, Error> {
    let fs = &st.fs;
    let bs = u64::from(fs.geo.block_size);
    let (file, _) = scan::open_for_scan(fs.dev.path())?;
    let base = fs.dev.base();
    let count = fs.geo.blocks_count.min(fs.dev.size() / bs);
    let mut bad = scan::unreadable(&file, base, bs, count, &|_| {});
    if write_test {
        let fx = writer.ok_or(Error::NeedsWritable)?;
        bad.extend(write_test_blocks(st, &file, fx, count, &bad)?);
        bad.sort_unstable();
        bad.dedup();
    }
    Ok(bad)
}

/// The non-destructive read-write test: for each run of blocks, the
/// data is read, its complement written and read back, and the data
/// written back. The write of the data back does not wait for an
/// interrupt to be honoured: it always happens.
fn write_test_blocks(
    st: &CheckState,
    file: &std::fs::File,
    fx: &fixer::Fixer,
    count: u64,
    skip: &[u64],
) -> Result<Vec<u64>, Error> {
    let fs = &st.fs;
    let bs = u64::from(fs.geo.block_size);
    let run = ((1u64 << 20) / bs).max(1);
    let base = fs.dev.base();
    let mut bad = Vec::new();
    let mut orig = scan::AlignedBuf::new((run * bs) as usize);
    let mut back = scan::AlignedBuf::new((run * bs) as usize);
    let mut b = 0;
    while b < count {
        let n = run.min(count - b);
        let len = (n * bs) as usize;
        let unreadable = skip.iter().any(|&x| x >= b && x < b + n);
        if unreadable
            || scan::read_all(file, &mut orig.as_mut_slice()[..len], base + b * bs).is_err()
        {
            b += n;
            continue;
        }
        let pattern: Vec<u8> = orig.as_slice()[..len].iter().map(|x| !x).collect();
        match fx.commit(vec![fixer::Write {
            offset: b * bs,
            data: pattern.clone(),
        }]) {
            Ok(()) => {}
            Err(fixer::CommitError::Interrupted) => return Err(Error::Interrupted),
            Err(e) => return Err(Error::ScanWrite(e)),
        }
        scan::forget_cached(file, base + b * bs, len as u64);
        let read_back = scan::read_all(file, &mut back.as_mut_slice()[..len], base + b * bs);
        // The data goes back whatever happened.
        fx.request(fixer::Write {
            offset: b * bs,
            data: orig.as_slice()[..len].to_vec(),
        })
        .and_then(|()| fx.barrier().map(|_| ()))
        .map_err(Error::ScanRestore)?;
        for k in 0..n {
            let lo = (k * bs) as usize;
            let hi = lo + bs as usize;
            let ok = read_back.is_ok() && back.as_slice()[lo..hi] == pattern[lo..hi];
            if !ok {
                bad.push(b + k);
            }
        }
        b += n;
    }
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_read_as_e2fsprogs_reads_them() {
        let v = parse_list("5000\n 5001 x\nfoo\n\n99999\n0\n").unwrap();
        assert_eq!(v, vec![5000, 5001, 99999, 0]);
        assert!(parse_list("4294967296\n").is_err());
    }
}
