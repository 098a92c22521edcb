//! The fast commit area (jbd2's `fast_commit` feature): the journal's
//! last blocks, holding tag-length-value records. Each record is a
//! 16-bit tag and a 16-bit value length, then the value; a block's
//! records end where one no longer fits.

use crate::bytes::{le_u16, le_u32};
use crate::extent::Extent;

/// Blocks mapped into a file.
pub const TAG_ADD_RANGE: u16 = 1;
/// A logical range unmapped.
pub const TAG_DEL_RANGE: u16 = 2;
/// A file created (a name linked to a new inode).
pub const TAG_CREAT: u16 = 3;
/// A name linked.
pub const TAG_LINK: u16 = 4;
/// A name removed.
pub const TAG_UNLINK: u16 = 5;
/// An inode's fields.
pub const TAG_INODE: u16 = 6;
/// Padding.
pub const TAG_PAD: u16 = 7;
/// The end of one fast commit: its transaction id and checksum.
pub const TAG_TAIL: u16 = 8;
/// The start of the area: features and transaction id.
pub const TAG_HEAD: u16 = 9;
/// Size of a record's tag and length.
pub const TL_SIZE: usize = 4;

/// One record as stored.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Its tag.
    pub tag: u16,
    /// Its value.
    pub value: &'a [u8],
    /// The whole record (tag, length and value).
    pub bytes: &'a [u8],
}

impl<'a> Record<'a> {
    /// What the record says, if its tag is known and its value long
    /// enough.
    pub fn decode(&self) -> Option<Tag<'a>> {
        let v = self.value;
        let word = |at: usize| le_u32(v, at);
        Some(match self.tag {
            TAG_HEAD if v.len() >= 8 => Tag::Head {
                features: word(0),
                tid: word(4),
            },
            TAG_TAIL if v.len() >= 8 => Tag::Tail {
                tid: word(0),
                crc: word(4),
            },
            TAG_PAD => Tag::Pad,
            TAG_ADD_RANGE if v.len() >= 16 => Tag::AddRange {
                ino: word(0),
                extent: Extent {
                    ee_block: word(4),
                    raw_len: le_u16(v, 8),
                    start: (u64::from(le_u16(v, 10)) << 32) | u64::from(word(12)),
                },
            },
            TAG_DEL_RANGE if v.len() >= 12 => Tag::DelRange {
                ino: word(0),
                lblk: word(4),
                len: word(8),
            },
            TAG_CREAT | TAG_LINK | TAG_UNLINK if v.len() >= 8 => Tag::Dentry {
                tag: self.tag,
                parent: word(0),
                ino: word(4),
                name: &v[8..],
            },
            TAG_INODE if v.len() >= 4 + 128 => Tag::Inode {
                ino: word(0),
                raw: &v[4..],
            },
            _ => return None,
        })
    }
}

/// What a record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag<'a> {
    /// The head of the area.
    Head {
        /// Fast commit features.
        features: u32,
        /// The transaction the log continues.
        tid: u32,
    },
    /// The end of one fast commit.
    Tail {
        /// Its transaction.
        tid: u32,
        /// crc32c of every record since the last tail, this one's tag,
        /// length and tid included.
        crc: u32,
    },
    /// Padding.
    Pad,
    /// An extent mapped into inode `ino`.
    AddRange {
        /// The inode.
        ino: u32,
        /// The extent (as a leaf extent is stored).
        extent: Extent,
    },
    /// Logical blocks `[lblk, lblk + len)` of inode `ino` unmapped.
    DelRange {
        /// The inode.
        ino: u32,
        /// First logical block.
        lblk: u32,
        /// Blocks.
        len: u32,
    },
    /// A name linked or unlinked (`tag` says which).
    Dentry {
        /// [`TAG_CREAT`], [`TAG_LINK`] or [`TAG_UNLINK`].
        tag: u16,
        /// The directory.
        parent: u32,
        /// The inode named.
        ino: u32,
        /// The name.
        name: &'a [u8],
    },
    /// Inode `ino`'s on-disk bytes.
    Inode {
        /// The inode.
        ino: u32,
        /// Its bytes.
        raw: &'a [u8],
    },
}

/// The records of one block, in order: the walk ends at the block's last
/// byte (which never starts a record) or at a record that does not fit;
/// [`Records::cut_short`] then says which.
pub struct Records<'a> {
    block: &'a [u8],
    at: usize,
    cut: bool,
}

impl<'a> Records<'a> {
    /// The records of `block`.
    pub fn new(block: &'a [u8]) -> Self {
        Records {
            block,
            at: 0,
            cut: false,
        }
    }

    /// Whether the walk ended at a record whose value runs past the block.
    pub fn cut_short(&self) -> bool {
        self.cut
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        // A record may start anywhere before the block's last byte, and
        // its tag and length must fit (a zero-length pad can take the
        // block's last four bytes, and counts in the checksum).
        if self.cut
            || self.at >= self.block.len().saturating_sub(1)
            || self.at + TL_SIZE > self.block.len()
        {
            return None;
        }
        let at = self.at;
        let tag = le_u16(self.block, at);
        let len = usize::from(le_u16(self.block, at + 2));
        let Some(value) = self.block.get(at + TL_SIZE..at + TL_SIZE + len) else {
            self.cut = true;
            return None;
        };
        self.at = at + TL_SIZE + len;
        Some(Record {
            tag,
            value,
            bytes: &self.block[at..self.at],
        })
    }
}

/// Whether a fast commit area starts with a head record.
pub fn starts_with_head(first_block: &[u8]) -> bool {
    first_block.len() >= TL_SIZE && le_u16(first_block, 0) == TAG_HEAD
}
