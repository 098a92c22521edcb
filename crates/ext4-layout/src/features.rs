//! Feature flags as typed sets, one type per word of the superblock.

use std::fmt;

macro_rules! flag_set {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$fm:meta])* $flag:ident = $bit:expr, $text:literal; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub u32);

        impl $name {
            $( $(#[$fm])* #[doc = concat!("The `", $text, "` feature.")] pub const $flag: $name = $name($bit); )*

            /// Every flag this type names.
            pub const ALL_NAMED: &'static [($name, &'static str)] = &[
                $( ($name($bit), $text), )*
            ];

            /// The empty set.
            pub const fn empty() -> Self {
                $name(0)
            }

            /// Whether every bit of `other` is set in `self`.
            #[inline]
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any bit of `other` is set in `self`.
            #[inline]
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// The union of two sets.
            #[inline]
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            /// The bits of `self` that are not in `other`.
            #[inline]
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }

            /// Whether no bit is set.
            #[inline]
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// The names of the set bits, with unknown bits as hex.
            pub fn names(self) -> Vec<String> {
                let mut out = Vec::new();
                let mut rest = self.0;
                for (flag, text) in Self::ALL_NAMED {
                    if self.contains(*flag) && flag.0 != 0 {
                        out.push((*text).to_string());
                        rest &= !flag.0;
                    }
                }
                let mut bit = 0u32;
                while rest != 0 && bit < 32 {
                    if rest & (1 << bit) != 0 {
                        out.push(format!("FEATURE_{}{}", stringify!($name).chars().next().unwrap_or('X'), bit));
                        rest &= !(1 << bit);
                    }
                    bit += 1;
                }
                out
            }
        }

        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                self.union(rhs)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.names().join("|"))
            }
        }
    };
}

flag_set! {
    /// `s_feature_compat`: features an older kernel may ignore.
    CompatFeatures {
        DIR_PREALLOC = 0x0001, "dir_prealloc";
        IMAGIC_INODES = 0x0002, "imagic_inodes";
        HAS_JOURNAL = 0x0004, "has_journal";
        EXT_ATTR = 0x0008, "ext_attr";
        RESIZE_INODE = 0x0010, "resize_inode";
        DIR_INDEX = 0x0020, "dir_index";
        LAZY_BG = 0x0040, "lazy_bg";
        EXCLUDE_BITMAP = 0x0100, "snapshot_bitmap";
        SPARSE_SUPER2 = 0x0200, "sparse_super2";
        FAST_COMMIT = 0x0400, "fast_commit";
        STABLE_INODES = 0x0800, "stable_inodes";
        ORPHAN_FILE = 0x1000, "orphan_file";
    }
}

flag_set! {
    /// `s_feature_incompat`: features a kernel must understand to mount.
    IncompatFeatures {
        COMPRESSION = 0x0001, "compression";
        FILETYPE = 0x0002, "filetype";
        RECOVER = 0x0004, "needs_recovery";
        JOURNAL_DEV = 0x0008, "journal_dev";
        META_BG = 0x0010, "meta_bg";
        EXTENTS = 0x0040, "extent";
        BIT64 = 0x0080, "64bit";
        MMP = 0x0100, "mmp";
        FLEX_BG = 0x0200, "flex_bg";
        EA_INODE = 0x0400, "ea_inode";
        DIRDATA = 0x1000, "dirdata";
        CSUM_SEED = 0x2000, "metadata_csum_seed";
        LARGEDIR = 0x4000, "large_dir";
        INLINE_DATA = 0x8000, "inline_data";
        ENCRYPT = 0x10000, "encrypt";
        CASEFOLD = 0x20000, "casefold";
    }
}

flag_set! {
    /// `s_feature_ro_compat`: features a kernel must understand to write.
    RoCompatFeatures {
        SPARSE_SUPER = 0x0001, "sparse_super";
        LARGE_FILE = 0x0002, "large_file";
        BTREE_DIR = 0x0004, "btree_dir";
        HUGE_FILE = 0x0008, "huge_file";
        GDT_CSUM = 0x0010, "uninit_bg";
        DIR_NLINK = 0x0020, "dir_nlink";
        EXTRA_ISIZE = 0x0040, "extra_isize";
        HAS_SNAPSHOT = 0x0080, "snapshot";
        QUOTA = 0x0100, "quota";
        BIGALLOC = 0x0200, "bigalloc";
        METADATA_CSUM = 0x0400, "metadata_csum";
        REPLICA = 0x0800, "replica";
        READONLY = 0x1000, "read-only";
        PROJECT = 0x2000, "project";
        SHARED_BLOCKS = 0x4000, "shared_blocks";
        VERITY = 0x8000, "verity";
        ORPHAN_PRESENT = 0x10000, "orphan_present";
    }
}

/// The compat features ext4chk understands. Unknown compat features are
/// harmless by definition and never stop a check.
pub const SUPPORTED_COMPAT: CompatFeatures = CompatFeatures(0x1FFF);

/// The incompat features ext4chk can check. Compression and dirdata are
/// not supported, as in e2fsck.
pub const SUPPORTED_INCOMPAT: IncompatFeatures = IncompatFeatures(
    IncompatFeatures::FILETYPE.0
        | IncompatFeatures::RECOVER.0
        | IncompatFeatures::JOURNAL_DEV.0
        | IncompatFeatures::META_BG.0
        | IncompatFeatures::EXTENTS.0
        | IncompatFeatures::BIT64.0
        | IncompatFeatures::MMP.0
        | IncompatFeatures::FLEX_BG.0
        | IncompatFeatures::EA_INODE.0
        | IncompatFeatures::CSUM_SEED.0
        | IncompatFeatures::LARGEDIR.0
        | IncompatFeatures::INLINE_DATA.0
        | IncompatFeatures::ENCRYPT.0
        | IncompatFeatures::CASEFOLD.0,
);

/// The ro_compat features ext4chk can check.
pub const SUPPORTED_RO_COMPAT: RoCompatFeatures = RoCompatFeatures(
    RoCompatFeatures::SPARSE_SUPER.0
        | RoCompatFeatures::LARGE_FILE.0
        | RoCompatFeatures::HUGE_FILE.0
        | RoCompatFeatures::GDT_CSUM.0
        | RoCompatFeatures::DIR_NLINK.0
        | RoCompatFeatures::EXTRA_ISIZE.0
        | RoCompatFeatures::QUOTA.0
        | RoCompatFeatures::BIGALLOC.0
        | RoCompatFeatures::METADATA_CSUM.0
        | RoCompatFeatures::READONLY.0
        | RoCompatFeatures::PROJECT.0
        | RoCompatFeatures::SHARED_BLOCKS.0
        | RoCompatFeatures::VERITY.0
        | RoCompatFeatures::ORPHAN_PRESENT.0,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_unknown_bits() {
        let f = IncompatFeatures(IncompatFeatures::FILETYPE.0 | 0x8000_0000);
        assert_eq!(
            f.names(),
            vec!["filetype".to_string(), "FEATURE_I31".into()]
        );
    }

    #[test]
    fn supported_sets() {
        assert!(!SUPPORTED_INCOMPAT.contains(IncompatFeatures::COMPRESSION));
        assert!(SUPPORTED_RO_COMPAT.contains(RoCompatFeatures::METADATA_CSUM));
    }
}
