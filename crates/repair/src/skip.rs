//! A repair that may skip the check, as e2fsck does without `-f`: once
//! the journal is replayed and the orphans released, a file system that
//! is marked clean and not due for a check only has its superblock's free
//! counts brought in line with the group descriptors.

use crate::error::Error;
use std::sync::Arc;

use ext4_layout::superblock::Superblock;
use pipeline::Device;

use super::stage::Staging;
use check_core::due::{self, Clock, Due, Reason, Skipped};
use check_core::fs::{open_fs, Fs, OpenOptions};

/// What the decision came to.
pub(super) enum Decision {
    /// Check: not clean, or due.
    Check(Reason),
    /// Skipped; the superblock was brought in line.
    Skip(Skipped),
}

/// Whether the first backup superblock differs from the primary.
fn first_backup_differs(fs: &Fs) -> bool {
    if fs.geo.group_count < 2 || !fs.geo.group_has_super(ext4_layout::Group(1)) {
        return false;
    }
    let blk = u64::from(fs.geo.blocks_per_group) + fs.geo.first_data_block;
    let mut raw = vec![0u8; 1024];
    if fs
        .dev
        .read_at(&mut raw, blk * u64::from(fs.geo.block_size))
        .is_err()
    {
        return false;
    }
    match Superblock::new(&raw) {
        Some(b) => {
            b.s_magic() == ext4_layout::superblock::EXT2_MAGIC && due::backup_differs(&fs.sb(), &b)
        }
        None => false,
    }
}

/// Decides, and for a skipped file system writes the corrected free
/// counts through the fixer.
pub(super) fn decide(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    clock: Clock,
) -> Result<Decision, Error> {
    let opened = open_fs(dev.clone(), OpenOptions::default())?;
    let fs = opened.fs;
    if fs.backup_in_use {
        return Ok(Decision::Check(Reason::Errors));
    }
    let verdict = due::check_due(&fs.sb(), clock, first_backup_differs(&fs));
    let note = match verdict {
        Due::Now(r) => return Ok(Decision::Check(r)),
        Due::Skip { note } => note,
    };
    let (mut free_inodes, mut free_blocks) = (0u64, 0u64);
    for g in 0..fs.geo.group_count {
        let gd = fs.gd(g);
        free_inodes += u64::from(gd.free_inodes_count());
        free_blocks += u64::from(gd.free_blocks_count());
    }
    free_blocks = free_blocks.saturating_mul(u64::from(fs.geo.cluster_ratio));
    let sb = fs.sb();
    let mut skipped = Skipped::from_super(&sb, note);
    skipped.interval_ignored = clock.broken && sb.s_checkinterval() != 0;
    let old_inodes = u64::from(sb.s_free_inodes_count());
    let old_blocks = sb.free_blocks_count();
    if old_inodes == free_inodes && old_blocks == free_blocks {
        return Ok(Decision::Skip(skipped));
    }
    let maps = check_core::ctx::Maps::new(&fs);
    let mut stage = Staging::new(&fs, &maps, false);
    let raw = stage.sb_mut();
    if old_inodes != free_inodes {
        ext4_layout::superblock::field::s_free_inodes_count.set(raw, free_inodes as u32);
        skipped.counts_set.push(("inodes", old_inodes, free_inodes));
    }
    if old_blocks != free_blocks {
        // _hi only with 64bit.
        ext4_layout::superblock::field::s_free_blocks_count_lo.set(raw, free_blocks as u32);
        if fs
            .geo
            .incompat
            .contains(ext4_layout::features::IncompatFeatures::BIT64)
        {
            ext4_layout::superblock::field::s_free_blocks_count_hi
                .set(raw, (free_blocks >> 32) as u32);
        }
        skipped.counts_set.push(("blocks", old_blocks, free_blocks));
    }
    fx.commit(stage.into_writes())?;
    skipped.inodes_used = skipped.inodes_count.saturating_sub(free_inodes);
    skipped.blocks_used = skipped.blocks_count.saturating_sub(free_blocks);
    Ok(Decision::Skip(skipped))
}
