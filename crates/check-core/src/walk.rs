//! What a repair's planner needs of the passes, and no more: an inode's
//! extents as pass 1 reads them, whether its block pointers can be
//! walked, a directory block's checksum tail as pass 2 judges it, and the
//! bitmaps on disk as pass 5 reads them. The passes themselves are
//! private to the crate.

pub use crate::pass1::{
    collect_extents, collect_tree, inode_has_valid_blocks, KeptTree, LeafExtent, Pass1, QuotaUse,
};
pub use crate::pass2::{tail_status, TailStatus};
pub use crate::pass5::{read_bitmaps, DiskBitmaps};
