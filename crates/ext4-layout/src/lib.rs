//! Zero-copy views over the on-disk structures of ext2, ext3 and ext4 and
//! of the jbd2 journal.
//!
//! Every view wraps a byte slice and reads fields on demand at their
//! on-disk offsets, keeping the kernel's field names. Nothing here does
//! I/O, allocates per field, or panics on bad bytes: a short or corrupt
//! buffer reads as zeros or as an error value, never as a crash. Every
//! checksum the format defines can be computed and verified.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod blockmap;
pub mod bytes;
pub mod csum;
pub mod dirent;
pub mod dirhash;
pub mod edit;
pub mod extent;
pub mod features;
pub mod field;
pub mod geometry;
pub mod group_desc;
pub mod htree;
pub mod inline;
pub mod inode;
pub mod journal;
pub mod orphan;
pub mod superblock;
pub mod types;
pub mod xattr;

pub use geometry::{Geometry, GeometryError};
pub use types::{FileBlock, Group, Ino, PhysBlock};
