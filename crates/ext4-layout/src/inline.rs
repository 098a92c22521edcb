//! Inline data: a small file's bytes live in `i_block` (60 bytes) and
//! continue in the "system.data" extended attribute. An inline directory
//! starts with the parent's inode number (4 bytes) instead of '.' and '..'.

/// `e_name_index` of the "system." prefix.
pub const EA_INDEX_SYSTEM: u8 = 7;
/// The attribute name (after the prefix) holding the rest of the data.
pub const EA_DATA_NAME: &[u8] = b"data";
/// Bytes of inline data that fit in `i_block`.
pub const INLINE_IBLOCK_SIZE: usize = 60;
/// Size of the parent inode field of an inline directory.
pub const INLINE_DIR_PARENT_SIZE: usize = 4;

/// Whether an EA entry is the one that holds inline data.
pub fn is_inline_data_entry(name_index: u8, name: &[u8]) -> bool {
    name_index == EA_INDEX_SYSTEM && name == EA_DATA_NAME
}
