//! Linear directory blocks: a chain of variable-length entries, each
//! `inode` (4), `rec_len` (2), `name_len` (1 or 2) and `file_type` (1),
//! then the name. With metadata_csum, a 12-byte tail entry ends the block.

use crate::bytes::{le_u16, le_u32, le_u8, put_le_u32, sub};
use crate::csum::crc32c_raw;

/// Size of the fixed part of an entry.
pub const DIRENT_HEADER: usize = 8;
/// Size of the checksum tail entry.
pub const DIR_TAIL_SIZE: usize = 12;
/// `file_type` byte of the checksum tail.
pub const DIR_TAIL_FT: u8 = 0xDE;
/// Longest name.
pub const NAME_MAX: usize = 255;

/// Directory entry file type codes.
pub mod ft {
    /// Unknown.
    pub const UNKNOWN: u8 = 0;
    /// Regular file.
    pub const REG: u8 = 1;
    /// Directory.
    pub const DIR: u8 = 2;
    /// Character device.
    pub const CHRDEV: u8 = 3;
    /// Block device.
    pub const BLKDEV: u8 = 4;
    /// FIFO.
    pub const FIFO: u8 = 5;
    /// Socket.
    pub const SOCK: u8 = 6;
    /// Symbolic link.
    pub const SYMLINK: u8 = 7;
    /// Highest valid code.
    pub const MAX: u8 = 7;
}

/// The smallest `rec_len` that holds a name of `name_len` bytes.
pub fn rec_len_for(name_len: usize) -> usize {
    (DIRENT_HEADER + name_len + 3) & !3
}

/// Decodes an on-disk `rec_len`. Blocks of 64 KiB and more store the
/// length with its two low bits moved up, and 0 or 65535 means the whole block.
pub fn decode_rec_len(raw: u16, block_size: usize) -> usize {
    let len = usize::from(raw);
    if block_size < 65536 {
        return len;
    }
    if raw == 65535 || raw == 0 {
        return block_size;
    }
    (len & 65532) | ((len & 3) << 16)
}

/// Encodes a `rec_len` for a block size (the inverse of [`decode_rec_len`]).
pub fn encode_rec_len(len: usize, block_size: usize) -> u16 {
    if block_size < 65536 {
        return len as u16;
    }
    if len == block_size {
        return if block_size == 65536 { 65535 } else { 0 };
    }
    ((len & 65532) | ((len >> 16) & 3)) as u16
}

/// An entry's fields, relative to its start.
pub mod field {
    use crate::field::Field;

    /// 0x00: inode number, 0 for an unused entry.
    pub const INODE: Field<u32> = Field::le(0x00);
    /// 0x04: record length, encoded (see [`super::encode_rec_len`]).
    pub const REC_LEN: Field<u16> = Field::le(0x04);
    /// 0x06: name length.
    pub const NAME_LEN: Field<u8> = Field::le(0x06);
    /// 0x07: file type (with the filetype feature).
    pub const FILE_TYPE: Field<u8> = Field::le(0x07);
}

/// Writes an entry's inode and record length at `at` in a block of
/// `block_size` bytes, leaving its name alone (an unused entry spanning
/// `rec_len` bytes, say).
pub fn put_header(block: &mut [u8], at: usize, block_size: usize, ino: u32, rec_len: usize) {
    let e = block.get_mut(at..).unwrap_or_default();
    field::INODE.set(e, ino);
    field::REC_LEN.set(e, encode_rec_len(rec_len, block_size));
}

/// The inode of the entry at `at` (0 past the end of `block`).
pub fn inode_at(block: &[u8], at: usize) -> u32 {
    field::INODE.get(block.get(at..).unwrap_or_default())
}

/// The decoded record length of the entry at `at`.
pub fn rec_len_at(block: &[u8], at: usize, block_size: usize) -> usize {
    decode_rec_len(
        field::REC_LEN.get(block.get(at..).unwrap_or_default()),
        block_size,
    )
}

/// The name length of the entry at `at`.
pub fn name_len_at(block: &[u8], at: usize) -> usize {
    usize::from(field::NAME_LEN.get(block.get(at..).unwrap_or_default()))
}

/// The name of the entry at `at` (cut short at the end of `block`).
pub fn name_at(block: &[u8], at: usize) -> &[u8] {
    let len = name_len_at(block, at);
    let start = at + 8;
    block
        .get(start..(start + len).min(block.len()))
        .unwrap_or_default()
}

/// The file type byte of the entry at `at`.
pub fn file_type_at(block: &[u8], at: usize) -> u8 {
    field::FILE_TYPE.get(block.get(at..).unwrap_or_default())
}

/// The record length of the entry at `at` as stored, not decoded.
pub fn raw_rec_len_at(block: &[u8], at: usize) -> usize {
    usize::from(field::REC_LEN.get(block.get(at..).unwrap_or_default()))
}

/// The name hash an entry of a casefolded, encrypted directory keeps
/// after its name (padded to 4): `at` is the entry's start.
pub fn stored_hash_at(block: &[u8], at: usize, name_len: usize) -> u32 {
    let pos = at + 8 + ((name_len + 3) & !3);
    crate::bytes::le_u32(block, pos)
}

/// Sets the record length of the entry at `at`.
pub fn set_rec_len(block: &mut [u8], at: usize, block_size: usize, rec_len: usize) {
    let e = block.get_mut(at..).unwrap_or_default();
    field::REC_LEN.set(e, encode_rec_len(rec_len, block_size));
}

/// Sets the inode of the entry at `at`.
pub fn set_inode(block: &mut [u8], at: usize, ino: u32) {
    field::INODE.set(block.get_mut(at..).unwrap_or_default(), ino);
}

/// Writes a whole entry at `at`: inode, record length, name length, file
/// type byte (pass 0 without the filetype feature) and name. Returns
/// where the next entry starts. Bytes past the end of `block` are not
/// written.
pub fn put_entry(
    block: &mut [u8],
    at: usize,
    block_size: usize,
    ino: u32,
    rec_len: usize,
    name: &[u8],
    file_type: u8,
) -> usize {
    put_header(block, at, block_size, ino, rec_len);
    put_name(block, at, name, file_type);
    at + rec_len
}

/// Writes an entry's name length, file type byte and name, leaving its
/// inode and record length alone.
pub fn put_name(block: &mut [u8], at: usize, name: &[u8], file_type: u8) {
    let e = block.get_mut(at..).unwrap_or_default();
    field::NAME_LEN.set(e, name.len() as u8);
    field::FILE_TYPE.set(e, file_type);
    if let Some(dst) = e.get_mut(DIRENT_HEADER..DIRENT_HEADER + name.len()) {
        dst.copy_from_slice(name);
    }
}

/// Writes '.' (12 bytes, naming `dir`) and '..' (naming `parent`, up to
/// byte `end`) at the start of a directory's first block. Returns `end`.
pub fn put_dots(
    block: &mut [u8],
    block_size: usize,
    dir: u32,
    parent: u32,
    end: usize,
    file_type: u8,
) -> usize {
    let dot = rec_len_for(1);
    put_entry(block, 0, block_size, dir, dot, b".", file_type);
    put_entry(block, dot, block_size, parent, end - dot, b"..", file_type)
}

/// A view of the directory entry at the start of `bytes`.
#[derive(Clone, Copy)]
pub struct DirEntry<'a> {
    bytes: &'a [u8],
    block_size: usize,
    filetype: bool,
}

impl<'a> DirEntry<'a> {
    /// Wraps the entry at the start of `bytes`; needs the 8-byte header.
    /// `filetype` says whether the file system has the filetype feature
    /// (which splits the old 16-bit `name_len`).
    pub fn new(bytes: &'a [u8], block_size: usize, filetype: bool) -> Option<Self> {
        (bytes.len() >= DIRENT_HEADER).then_some(DirEntry {
            bytes,
            block_size,
            filetype,
        })
    }

    /// 0x00: inode number, 0 for an unused entry.
    pub fn inode(&self) -> u32 {
        le_u32(self.bytes, 0)
    }

    /// 0x04: record length, decoded.
    pub fn rec_len(&self) -> usize {
        decode_rec_len(le_u16(self.bytes, 4), self.block_size)
    }

    /// 0x06: name length (one byte with filetype, else the low byte of a
    /// 16-bit field whose high byte must be zero).
    pub fn name_len(&self) -> usize {
        usize::from(le_u8(self.bytes, 6))
    }

    /// 0x07: file type (filetype feature) or the high byte of the old
    /// 16-bit name length.
    pub fn raw_type_byte(&self) -> u8 {
        le_u8(self.bytes, 7)
    }

    /// The file type code when the filetype feature is on, else 0.
    pub fn file_type(&self) -> u8 {
        if self.filetype {
            self.raw_type_byte()
        } else {
            0
        }
    }

    /// Whether the filetype feature interpretation is in use.
    pub fn has_filetype(&self) -> bool {
        self.filetype
    }

    /// The name bytes (truncated to what is present).
    pub fn name(&self) -> &'a [u8] {
        let n = self
            .name_len()
            .min(self.bytes.len().saturating_sub(DIRENT_HEADER));
        sub(self.bytes, DIRENT_HEADER, n)
    }

    /// Whether this looks like a checksum tail entry: inode 0, rec_len
    /// 12, name_len 0 and file type 0xDE.
    pub fn is_tail(&self) -> bool {
        self.inode() == 0
            && le_u16(self.bytes, 4) == DIR_TAIL_SIZE as u16
            && le_u8(self.bytes, 6) == 0
            && le_u8(self.bytes, 7) == DIR_TAIL_FT
    }
}

/// The checksum tail at the end of a leaf block, if the block ends with one.
#[derive(Clone, Copy)]
pub struct DirTail<'a>(&'a [u8]);

impl<'a> DirTail<'a> {
    /// Finds the tail in the last 12 bytes of `block`.
    pub fn find(block: &'a [u8]) -> Option<Self> {
        let start = block.len().checked_sub(DIR_TAIL_SIZE)?;
        let t = &block[start..];
        let e = DirEntry::new(t, block.len(), true)?;
        e.is_tail().then_some(DirTail(t))
    }

    /// 0x08: the stored checksum.
    pub fn det_checksum(&self) -> u32 {
        le_u32(self.0, 8)
    }
}

/// The checksum of a leaf block: crc32c from the inode seed over every
/// byte before the tail.
pub fn leaf_checksum(block: &[u8], inode_seed: u32) -> u32 {
    let end = block.len().saturating_sub(DIR_TAIL_SIZE);
    crc32c_raw(inode_seed, sub(block, 0, end))
}

/// Writes a fresh tail with the right checksum into the last 12 bytes.
pub fn write_tail(block: &mut [u8], inode_seed: u32) {
    let Some(start) = block.len().checked_sub(DIR_TAIL_SIZE) else {
        return;
    };
    let t = &mut block[start..];
    t.fill(0);
    t[4] = DIR_TAIL_SIZE as u8;
    t[7] = DIR_TAIL_FT;
    let c = leaf_checksum(block, inode_seed);
    put_le_u32(block, start + 8, c);
}

/// One step of a walk over a leaf block.
#[derive(Clone, Copy)]
pub struct WalkItem<'a> {
    /// Byte offset of the entry in the block.
    pub offset: usize,
    /// The entry.
    pub entry: DirEntry<'a>,
}

/// Walks entries by `rec_len` without judging them; stops at the first
/// entry whose header or `rec_len` cannot be followed (the caller decides
/// what that means) and reports where it stopped.
pub struct DirWalk<'a> {
    block: &'a [u8],
    end: usize,
    pos: usize,
    filetype: bool,
    stopped: Option<usize>,
}

impl<'a> DirWalk<'a> {
    /// Walks `block[..end]` (pass `block.len() - 12` to leave out a tail).
    pub fn new(block: &'a [u8], end: usize, filetype: bool) -> Self {
        DirWalk {
            block,
            end: end.min(block.len()),
            pos: 0,
            filetype,
            stopped: None,
        }
    }

    /// Where the walk stopped on a bad entry, if it did.
    pub fn stopped_at(&self) -> Option<usize> {
        self.stopped
    }
}

impl<'a> Iterator for DirWalk<'a> {
    type Item = WalkItem<'a>;

    fn next(&mut self) -> Option<WalkItem<'a>> {
        if self.pos >= self.end || self.stopped.is_some() {
            return None;
        }
        let rest = &self.block[self.pos..self.end];
        let entry = match DirEntry::new(rest, self.block.len(), self.filetype) {
            Some(e) => e,
            None => {
                self.stopped = Some(self.pos);
                return None;
            }
        };
        let rl = entry.rec_len();
        if rl < DIRENT_HEADER
            || rl % 4 != 0
            || rl > rest.len()
            || entry.name_len() + DIRENT_HEADER > rl
        {
            self.stopped = Some(self.pos);
            return None;
        }
        let item = WalkItem {
            offset: self.pos,
            entry: DirEntry::new(&rest[..rl], self.block.len(), self.filetype)?,
        };
        self.pos += rl;
        Some(item)
    }
}

// --- e2fsck's in-place repairs of a directory block, shared by the
// check (which judges what a repair leaves) and the repair (which
// writes it).

/// Writes a short name and the NUL after it, as e2fsck writes '.' and
/// '..' (the entry has room: it is at least 12 bytes).
fn put_terminated_name(b: &mut [u8], offset: usize, name: &[u8], file_type: u8) {
    put_name(b, offset, name, file_type);
    if let Some(nul) = b.get_mut(offset + DIRENT_HEADER + name.len()) {
        *nul = 0;
    }
}

/// Makes the entry at `offset` a '.' naming `ino` if it is not one, and
/// splits off the room past its 12 bytes (as an empty entry, unless '..'
/// is already there). True if anything changed.
pub fn fix_dot(b: &mut [u8], offset: usize, rl: usize, ino: u32, ft_dir: u8) -> bool {
    let mut modified = false;
    let e = inode_at(b, offset);
    let name = &b[offset + 8..offset + 10];
    if e == 0 || name_len_at(b, offset) != 1 || name != b".\0" {
        set_inode(b, offset, ino);
        put_terminated_name(b, offset, b".", ft_dir);
        modified = true;
    } else if e != ino {
        set_inode(b, offset, ino);
        modified = true;
    }
    modified |= split_dot(b, offset, rl, ft_dir);
    modified
}

/// Splits a '.' entry of `rl` bytes that has room for another entry
/// after it (e2fsck's "entry for '.' is big"): '.' keeps 12 bytes, and
/// the rest becomes an empty entry unless what follows already reads as
/// '..' (its name bytes "..\0"), which is left for the '..' checks. True
/// if it split.
pub fn split_dot(b: &mut [u8], offset: usize, rl: usize, ft_dir: u8) -> bool {
    let bs = b.len();
    if rl <= 24 || offset + rl > bs {
        return false;
    }
    set_rec_len(b, offset, bs, 12);
    let n = offset + 12;
    let keeps = b.get(n + 8..n + 11) == Some(&b"..\0"[..]);
    if !keeps {
        put_entry(b, n, bs, 0, rl - 12, b"", ft_dir);
    }
    true
}

/// Makes the entry at `offset` a '..' if it is not one; it names the
/// root until pass 3 puts the parent there. True if it changed.
pub fn fix_dotdot(b: &mut [u8], offset: usize, ft_dir: u8) -> bool {
    let ok = inode_at(b, offset) != 0
        && name_len_at(b, offset) == 2
        && &b[offset + 8..offset + 11] == b"..\0";
    if !ok {
        set_inode(b, offset, 2);
        put_terminated_name(b, offset, b"..", ft_dir);
    }
    !ok
}

/// e2fsck's salvage of a broken entry at `offset`.
pub fn salvage(b: &mut [u8], offset: &mut usize, prev: Option<usize>, max: usize, icount: u32) {
    let bs = b.len();
    let at = *offset;
    let left_total = max - at;
    let (nl, rl) = if left_total < 8 {
        (0usize, left_total)
    } else {
        (name_len_at(b, at), rec_len_at(b, at, bs))
    };
    let left = left_total as i64 - rl as i64;
    if left >= 12 && rl == 8 {
        let n = left as usize;
        b.copy_within(at + 8..at + 8 + n, at);
        b[at + n..at + n + 8].fill(0);
        return;
    }
    if left < 0
        && (rl as i64 + left) > 8
        && rec_len_for(nl) as i64 <= rl as i64 + left
        && inode_at(b, at) <= icount
        && !b[at + 8..(at + 8 + nl).min(bs)].contains(&0)
    {
        set_rec_len(b, at, bs, (rl as i64 + left) as usize);
        return;
    }
    if let Some(p) = prev {
        if rl != 0 && rl % 4 == 0 && at + rl <= max {
            let prl = rec_len_at(b, p, bs);
            set_rec_len(b, p, bs, prl + rl);
            *offset += rl;
            return;
        }
        let prl = rec_len_at(b, p, bs);
        set_rec_len(b, p, bs, prl + max - at);
        *offset = max;
        return;
    }
    put_entry(b, at, bs, 0, max - at, b"", 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_le_u16;

    fn entry(b: &mut [u8], off: usize, ino: u32, rec_len: u16, name: &[u8], ft: u8) {
        put_le_u32(b, off, ino);
        put_le_u16(b, off + 4, rec_len);
        b[off + 6] = name.len() as u8;
        b[off + 7] = ft;
        b[off + 8..off + 8 + name.len()].copy_from_slice(name);
    }

    #[test]
    fn walk_and_tail() {
        let mut b = vec![0u8; 1024];
        entry(&mut b, 0, 2, 12, b".", ft::DIR);
        entry(&mut b, 12, 2, 1024 - 12 - 12, b"..", ft::DIR);
        write_tail(&mut b, 5);
        let items: Vec<_> = DirWalk::new(&b, 1024 - 12, true).collect();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].entry.name(), b"..");
        let tail = DirTail::find(&b).unwrap();
        assert_eq!(tail.det_checksum(), leaf_checksum(&b, 5));
    }

    #[test]
    fn walk_stops_on_bad_rec_len() {
        let mut b = vec![0u8; 1024];
        entry(&mut b, 0, 2, 12, b".", ft::DIR);
        entry(&mut b, 12, 2, 6, b"..", ft::DIR);
        let mut w = DirWalk::new(&b, 1024, true);
        assert_eq!(w.by_ref().count(), 1);
        assert_eq!(w.stopped_at(), Some(12));
    }

    #[test]
    fn big_block_rec_len() {
        assert_eq!(decode_rec_len(0, 65536), 65536);
        assert_eq!(decode_rec_len(65535, 65536), 65536);
        assert_eq!(decode_rec_len(12, 65536), 12);
        for len in [12usize, 4096, 65532, 65536, 131072 - 4] {
            assert_eq!(decode_rec_len(encode_rec_len(len, 262144), 262144), len);
        }
        assert_eq!(rec_len_for(1), 12);
        assert_eq!(rec_len_for(5), 16);
    }
}
