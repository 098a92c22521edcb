//! Distinct index types, so a block number can never be passed as an inode
//! number or a group number.

use std::fmt;
use std::num::NonZeroU32;

/// A physical block number on the device (in file system blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PhysBlock(pub u64);

/// A logical block number within a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileBlock(pub u32);

/// A block group number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Group(pub u32);

/// An inode number. Inode numbers start at 1; 0 means "no inode" on disk
/// and is represented by `Option<Ino>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ino(NonZeroU32);

impl Ino {
    /// The bad blocks inode.
    pub const BAD: Ino = Ino::from_const(1);
    /// The root directory.
    pub const ROOT: Ino = Ino::from_const(2);
    /// The user quota inode (old style).
    pub const USR_QUOTA: Ino = Ino::from_const(3);
    /// The group quota inode (old style).
    pub const GRP_QUOTA: Ino = Ino::from_const(4);
    /// The boot loader inode.
    pub const BOOT_LOADER: Ino = Ino::from_const(5);
    /// The undelete directory inode.
    pub const UNDEL_DIR: Ino = Ino::from_const(6);
    /// The reserved group descriptor (resize) inode.
    pub const RESIZE: Ino = Ino::from_const(7);
    /// The journal inode.
    pub const JOURNAL: Ino = Ino::from_const(8);
    /// The exclude inode (snapshots).
    pub const EXCLUDE: Ino = Ino::from_const(9);
    /// The replica inode.
    pub const REPLICA: Ino = Ino::from_const(10);

    const fn from_const(n: u32) -> Ino {
        match NonZeroU32::new(n) {
            Some(v) => Ino(v),
            None => panic!("inode constant must be non-zero"),
        }
    }

    /// Makes an inode number from a raw on-disk value; 0 gives `None`.
    #[inline]
    pub fn new(n: u32) -> Option<Ino> {
        NonZeroU32::new(n).map(Ino)
    }

    /// The raw inode number.
    #[inline]
    pub fn get(self) -> u32 {
        self.0.get()
    }

    /// The zero-based index of this inode in the inode tables.
    #[inline]
    pub fn index(self) -> u32 {
        self.0.get() - 1
    }
}

impl fmt::Display for Ino {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for PhysBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for FileBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::ops::Add<u64> for PhysBlock {
    type Output = PhysBlock;

    /// The block `n` blocks further on.
    #[inline]
    fn add(self, n: u64) -> PhysBlock {
        PhysBlock(self.0 + n)
    }
}
