//! Zero-copy views over the on-disk structures of ext2, ext3 and ext4 and
//! of the jbd2 journal.
//!
//! Every view wraps a byte slice and reads fields on demand at their
//! on-disk offsets, keeping the kernel's field names. Nothing here does
//! I/O, allocates per field, or panics on bad bytes: a short or corrupt
//! buffer reads as zeros or as an error value, never as a crash. Every
//! checksum the format defines can be computed and verified.
//!
//! Each structure's fields are defined once (see [`field`]): the read view
//! (`Inode`, `Superblock`, `GroupDesc`, ...) gets a getter per field and the
//! write view (`InodeMut`, `SuperblockMut`, ...) a setter for any of them;
//! [`edit`] recomputes the checksums a write invalidates. [`walk`] walks a
//! file's block mapping (extent tree or block map) over any
//! [`walk::BlockSource`], and rewrites a block map pointer by pointer.
//!
//! Reading an inode of an image and writing it back, with nothing but this
//! crate and the standard library:
//!
//! ```no_run
//! use std::fs::File;
//! use std::os::unix::fs::FileExt;
//!
//! use ext4_layout::group_desc::GroupDesc;
//! use ext4_layout::inode::{field, Inode, InodeMut};
//! use ext4_layout::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
//! use ext4_layout::{edit, Geometry};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let img = File::options().read(true).write(true).open("fs.img")?;
//! let mut sb_bytes = [0u8; SUPERBLOCK_SIZE];
//! img.read_exact_at(&mut sb_bytes, SUPERBLOCK_OFFSET)?;
//! let sb = Superblock::new(&sb_bytes).ok_or("not a superblock")?;
//! let geo = Geometry::from_superblock(&sb)?;
//! let bs = u64::from(geo.block_size);
//!
//! // Inode 12: its group's descriptor, then its slot in the inode table.
//! let ino = 12u32;
//! let group = (ino - 1) / geo.inodes_per_group;
//! let table = geo.descriptor_block(geo.first_data_block, group / geo.desc_per_block);
//! let mut desc = vec![0u8; geo.desc_size as usize];
//! let at = (group % geo.desc_per_block) as u64 * u64::from(geo.desc_size);
//! img.read_exact_at(&mut desc, table.0 * bs + at)?;
//! let index = u64::from((ino - 1) % geo.inodes_per_group);
//! let pos = GroupDesc::over(&desc).inode_table() * bs + index * u64::from(geo.inode_size);
//! let mut raw = vec![0u8; geo.inode_size as usize];
//! img.read_exact_at(&mut raw, pos)?;
//! println!("inode {ino}: {} bytes", Inode::new(&raw).ok_or("short inode")?.size());
//!
//! // Mark it deleted now, fix its checksum, and write it back.
//! let mut w = InodeMut::new(&mut raw);
//! w.set(field::i_links_count, 0);
//! w.set(field::i_dtime, 1_700_000_000);
//! if geo.metadata_csum() {
//!     edit::set_inode_checksum(&mut raw, geo.csum_seed, ino);
//! }
//! img.write_all_at(&raw, pos)?;
//! # Ok(())
//! # }
//! ```

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
pub mod foreign;
pub mod geometry;
pub mod group_desc;
pub mod htree;
pub mod inline;
pub mod inode;
pub mod journal;
pub mod mmp;
pub mod orphan;
pub mod quota;
pub mod superblock;
pub mod types;
pub mod walk;
pub mod xattr;

pub use geometry::{Geometry, GeometryError};
pub use types::{FileBlock, Group, Ino, PhysBlock};
