//! Inode validity rules shared by pass 1 (which first notices a bad
//! inode), pass 2 (which reports it when an entry points at it) and pass 4.

use ext4_layout::extent::{ExtentNode, EXT4_EXT_MAGIC};
use ext4_layout::inode::{flags, Inode};

use crate::io::Io;
use crate::xattr_read;

/// Whether a device, FIFO or socket inode is valid: no index or extents
/// flag, and an immutable or append-only one must not use `i_block[4..]`.
pub(crate) fn device_ok(inode: &Inode<'_>) -> bool {
    if inode.has_flag(flags::INDEX) || inode.has_flag(flags::EXTENTS) {
        return false;
    }
    if inode.has_flag(flags::IMMUTABLE) || inode.has_flag(flags::APPEND) {
        return (4..15).all(|i| inode.i_block_word(i) == 0);
    }
    true
}

/// Whether a symlink inode is valid: its target fits where it is stored,
/// is NUL-terminated within it, and is exactly `i_size` bytes.
/// `csum_ok` says whether the inode's own checksum is good (the library
/// re-reads the inode to size inline data, which fails otherwise).
pub(crate) fn symlink_ok(io: &mut Io<'_>, inode: &Inode<'_>, csum_ok: bool) -> bool {
    let fs = io.fs;
    let size = inode.size();
    if inode.i_size_high() != 0 || size == 0 || inode.has_flag(flags::INDEX) {
        return false;
    }
    if inode.has_flag(flags::INLINE_DATA) {
        if inode.has_flag(flags::EXTENTS) {
            return false;
        }
        return match xattr_read::inline_data_size(io, inode, csum_ok) {
            Some(n) => size == n,
            None => false,
        };
    }
    let bs = fs.block_size();
    let mut buf;
    let data: &[u8] = if size < 60 {
        if inode.has_flag(flags::EXTENTS) {
            return false;
        }
        inode.i_block()
    } else {
        let blk = if inode.has_flag(flags::EXTENTS) {
            let Some(root) = ExtentNode::new(inode.i_block()) else {
                return false;
            };
            if root.eh_magic() != EXT4_EXT_MAGIC || root.eh_depth() != 0 || root.eh_entries() != 1 {
                return false;
            }
            let e = root.leaf(0);
            if e.ee_block != 0 || e.len() != 1 {
                return false;
            }
            e.start
        } else {
            if (1..15).any(|i| inode.i_block_word(i) != 0) {
                return false;
            }
            u64::from(inode.i_block_word(0))
        };
        if !fs.geo.block_in_range(blk) {
            return false;
        }
        buf = vec![0u8; bs];
        if !io.read_block_ok(blk, &mut buf) {
            return false;
        }
        &buf
    };
    let len = if inode.has_flag(flags::ENCRYPT) {
        usize::from(u16::from_le_bytes([data[0], data[1]])) + 2
    } else {
        data.iter().position(|&b| b == 0).unwrap_or(data.len())
    };
    len < data.len() && len as u64 == size
}
