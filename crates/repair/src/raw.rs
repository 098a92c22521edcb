//! Edits of single on-disk fields the fixes share: an inode's size,
//! flags and "clear inode", superblock feature bits, a descriptor's uninit
//! marks, and the time stamped on cleared inodes.

use ext4_layout::field::Field;
use ext4_layout::inode::{field, I_BLOCK};

use crate::stage::Staging;

/// The superblock's three feature words.
pub mod sbf {
    use ext4_layout::field::Field;
    use ext4_layout::superblock::field;

    /// `s_feature_compat`.
    pub const COMPAT: Field<u32> = field::s_feature_compat_raw;
    /// `s_feature_incompat`.
    pub const INCOMPAT: Field<u32> = field::s_feature_incompat_raw;
    /// `s_feature_ro_compat`.
    pub const RO_COMPAT: Field<u32> = field::s_feature_ro_compat_raw;
}

/// Sets bits in a superblock feature word.
pub fn set_feature(stage: &mut Staging<'_>, word: Field<u32>, bits: u32) {
    let sb = stage.sb_mut();
    let v = word.get(sb) | bits;
    word.set(sb, v);
}

/// Makes a revision 0 superblock a dynamic-revision one, with the first
/// inode and inode size that revision 0 implies written out, so that its
/// feature words count.
pub fn dynamic_revision(stage: &mut Staging<'_>) {
    use ext4_layout::superblock::field;
    if field::s_rev_level.get(&stage.sb) != ext4_layout::superblock::GOOD_OLD_REV {
        return;
    }
    let sb = stage.sb_mut();
    field::s_rev_level.set(sb, ext4_layout::superblock::DYNAMIC_REV);
    field::s_first_ino_raw.set(sb, 11);
    field::s_inode_size_raw.set(sb, 128);
}

/// Clears bits in a superblock feature word.
pub fn clear_feature(stage: &mut Staging<'_>, word: Field<u32>, bits: u32) {
    let sb = stage.sb_mut();
    let v = word.get(sb) & !bits;
    word.set(sb, v);
}

pub(crate) fn set_flags(raw: &mut [u8], set: u32, clear: u32) {
    let v = (field::i_flags.get(raw) | set) & !clear;
    field::i_flags.set(raw, v);
}

/// Sets an inode's size.
pub fn set_size(raw: &mut [u8], v: u64) {
    ext4_layout::inode::SIZE.set(raw, v);
}

/// Raises an inode's size to `want` if it is smaller.
pub fn grow_size(raw: &mut [u8], want: u64) {
    let size = ext4_layout::inode::SIZE.get(raw);
    if size < want {
        set_size(raw, want);
    }
}

/// e2fsck's "clear inode": no links, deleted now, no flags; reserved
/// inodes also lose their block pointers, and inode 1 its first 128 bytes.
pub fn clear_inode(raw: &mut [u8], ino: u32, first_ino: u32, now: u32) {
    if ino == 1 {
        raw[..128].fill(0);
        return;
    }
    field::i_flags.set(raw, 0);
    field::i_links_count.set(raw, 0);
    field::i_dtime.set(raw, now);
    if ino < first_ino {
        raw[I_BLOCK].fill(0);
    }
}

pub(crate) fn set_i_blocks(raw: &mut [u8], v: u64) {
    ext4_layout::inode::BLOCKS.set(raw, v);
}

/// The time to stamp on cleared inodes: `E2FSCK_TIME` where it is set
/// (as e2fsck takes its clock from it), else the system's.
pub fn now() -> u32 {
    let set = std::env::var("E2FSCK_TIME").ok().and_then(|t| {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => t.parse::<u32>().ok(),
        }
    });
    set.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32)
    })
}
