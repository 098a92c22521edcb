//! Where each group's fixed metadata lies: superblock copies, descriptor
//! blocks, reserved GDT blocks, bitmaps and inode tables.

use ext4_layout::features::IncompatFeatures;
use ext4_layout::{Geometry, Group};

use super::Fs;

/// Calls `f(first, count)` for the superblock copy and descriptor blocks
/// (old-style table plus reserved GDT blocks, or the meta_bg block) of group
/// `g`, clipped to the file system. Block 0 of a 1 KiB bigalloc file system
/// is reported with group 0.
pub(crate) fn for_each_super_and_bgd(geo: &Geometry, g: Group, mut f: impl FnMut(u64, u64)) {
    let l = geo.super_and_bgd_loc(g);
    let end = geo.blocks_count;
    if let Some(sb) = l.super_block {
        f(sb.0, 1);
    } else if g.0 == 0 {
        f(geo.group_first_block(g).0, 1);
    }
    if g.0 == 0 && geo.block_size == 1024 && geo.cluster_ratio > 1 {
        f(0, 1);
    }
    if let Some((start, n)) = l.old_desc {
        let n = u64::from(n).min(end.saturating_sub(start.0));
        if n > 0 {
            f(start.0, n);
        }
    }
    if let Some(b) = l.new_desc {
        if b.0 < end {
            f(b.0, 1);
        }
    }
}

/// The range a group's bitmaps and inode table must lie in: the whole
/// file system with flex_bg, else the group itself.
pub fn allowed_range(geo: &Geometry, g: Group) -> (u64, u64) {
    if geo.incompat.contains(IncompatFeatures::FLEX_BG) {
        (geo.first_data_block, geo.blocks_count - 1)
    } else {
        (geo.group_first_block(g).0, geo.group_last_block(g).0)
    }
}

/// The first group whose descriptor puts a bitmap or its inode table
/// outside the blocks [`allowed_range`] allows, with what lies outside.
/// e2fsck's superblock stage asks to relocate such metadata before
/// anything else, which preen may not do; a location inside the range
/// that collides with other metadata is relocated by pass 1 instead.
pub fn metadata_outside_group(fs: &Fs) -> Option<String> {
    let geo = &fs.geo;
    for g in fs.groups() {
        let gd = fs.gd(g.0);
        let (first, last) = allowed_range(geo, g);
        let outside = |b: u64| b < first || b > last;
        let end = gd
            .inode_table()
            .saturating_add(u64::from(geo.inode_blocks_per_group))
            .saturating_sub(1);
        let what = if outside(gd.block_bitmap()) {
            "block bitmap"
        } else if outside(gd.inode_bitmap()) {
            "inode bitmap"
        } else if outside(gd.inode_table()) || outside(end) {
            "inode table"
        } else {
            continue;
        };
        return Some(format!("the {what} of group {} is not in the group", g.0));
    }
    None
}

/// A plain bitset for sequential work (the atomic one is for workers).
#[derive(Clone)]
pub struct BitSet {
    words: Vec<u64>,
    len: u64,
}

impl BitSet {
    /// `len` clear bits.
    pub fn new(len: u64) -> Self {
        BitSet {
            words: vec![0; len.div_ceil(64) as usize],
            len,
        }
    }

    /// Number of bits.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads bit `i` (false out of range).
    #[inline]
    pub fn get(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Sets bit `i`, returning the old value (true out of range).
    #[inline]
    pub fn test_and_set(&mut self, i: u64) -> bool {
        if i >= self.len {
            return true;
        }
        let w = &mut self.words[(i / 64) as usize];
        let m = 1u64 << (i % 64);
        let old = *w & m != 0;
        *w |= m;
        old
    }

    /// Clears bit `i`.
    #[inline]
    pub fn clear(&mut self, i: u64) {
        if i < self.len {
            self.words[(i / 64) as usize] &= !(1u64 << (i % 64));
        }
    }
}

/// Why `check_desc` rejected the descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DescError {
    /// The descriptor size is not a power of two.
    DescSize,
    /// A block bitmap is out of range or overlaps other metadata.
    BlockMap(u32),
    /// An inode bitmap is out of range or overlaps other metadata.
    InodeMap(u32),
    /// An inode table is out of range or overlaps other metadata.
    InodeTable(u32),
}

impl DescError {
    /// A short description.
    pub fn describe(&self) -> String {
        match self {
            DescError::DescSize => "the group descriptor size is invalid".into(),
            DescError::BlockMap(g) => format!("bad block bitmap location in group {g}"),
            DescError::InodeMap(g) => format!("bad inode bitmap location in group {g}"),
            DescError::InodeTable(g) => format!("bad inode table location in group {g}"),
        }
    }
}

/// Validates every group's bitmap and inode table locations: inside the
/// allowed range and not on top of other metadata (the library's
/// check_desc rules). Descriptor checksums are not looked at here.
pub(crate) fn check_desc(fs: &Fs) -> Result<(), DescError> {
    let geo = &fs.geo;
    if !geo.desc_size.is_power_of_two() {
        return Err(DescError::DescSize);
    }
    let mut used = BitSet::new(geo.blocks_count);
    for g in fs.groups() {
        for_each_super_and_bgd(geo, g, |b, n| {
            for x in b..b + n {
                used.test_and_set(x);
            }
        });
    }
    for g in fs.groups() {
        let gd = fs.gd(g.0);
        let (first, last) = allowed_range(geo, g);
        let bb = gd.block_bitmap();
        if bb < first || bb > last || used.test_and_set(bb) {
            return Err(DescError::BlockMap(g.0));
        }
        let ib = gd.inode_bitmap();
        if ib < first || ib > last || used.test_and_set(ib) {
            return Err(DescError::InodeMap(g.0));
        }
        let it = gd.inode_table();
        let n = u64::from(geo.inode_blocks_per_group);
        if it < first || it.saturating_add(n).saturating_sub(1) > last {
            return Err(DescError::InodeTable(g.0));
        }
        for b in it..it + n {
            if used.test_and_set(b) {
                return Err(DescError::InodeTable(g.0));
            }
        }
    }
    Ok(())
}
