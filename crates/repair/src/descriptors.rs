//! The group descriptor fixes e2fsck makes before pass 1, while it reads
//! the descriptors: what a descriptor says is unused decides which inodes
//! pass 1 reads at all, so a descriptor that cannot be trusted must be
//! put right before the check, or pass 1 never sees the files it hides.
//!
//! For each group, in e2fsck's order:
//!
//! * a wrong descriptor checksum: the descriptor cannot be trusted to say
//!   what is unused, so its uninit flags and unused-inode count go;
//! * uninit flags or an unused-inode count without descriptor checksums:
//!   they go too;
//! * the last group's block bitmap marked uninitialised: the mark goes;
//! * more unused inodes than the group has free inodes, or than it has
//!   inodes: the count goes.
//!
//! Every changed descriptor is written with a new checksum. None of these
//! counts towards the exit code (as in e2fsck), but any of them makes the
//! check run: a boot-time check does not skip a file system it just
//! changed.

use std::sync::Arc;

use ext4_layout::group_desc::{self as gd, GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use pipeline::Device;

use super::prepass::{commit, open, PrePass};
use super::stage::Staging;
use check_core::problem::{Code, Finding};

/// Fixes the descriptors; returns whether anything changed.
pub(crate) fn fix(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    pre: &mut PrePass,
) -> Result<bool, crate::Error> {
    let fs = open(dev)?;
    let geo = &fs.geo;
    let csum_flag = geo.has_gdt_csum();
    let uuid = fs.sb().s_uuid();
    let maps = check_core::ctx::Maps::new(&fs);
    let mut st = Staging::new(&fs, &maps, false);
    let mut fixed = Vec::new();
    for g in 0..geo.group_count {
        let d = st.gd(g).to_vec();
        let view = GroupDesc::over(&d);
        let mut flags = gd::field::bg_flags.get(&d);
        let mut unused = view.itable_unused();
        let mut found = Vec::new();
        let want = view.computed_checksum(g, fs.metadata_csum(), geo.csum_seed, &uuid);
        if csum_flag && view.bg_checksum() != want {
            found.push(
                Finding::new(Code::GroupDescChecksum)
                    .group(g)
                    .mismatch(u64::from(view.bg_checksum()), u64::from(want)),
            );
            flags &= !(BG_BLOCK_UNINIT | BG_INODE_UNINIT);
            unused = 0;
        }
        if !csum_flag && (flags & (BG_BLOCK_UNINIT | BG_INODE_UNINIT) != 0 || unused != 0) {
            found.push(Finding::new(Code::GroupUninitWithoutCsum).group(g));
            flags &= !(BG_BLOCK_UNINIT | BG_INODE_UNINIT);
            unused = 0;
        }
        if g + 1 == geo.group_count && flags & BG_BLOCK_UNINIT != 0 {
            found.push(Finding::new(Code::LastGroupBlockUninit).group(g));
            flags &= !BG_BLOCK_UNINIT;
        }
        if csum_flag && (unused > view.free_inodes_count() || unused > geo.inodes_per_group) {
            found.push(
                Finding::new(Code::GroupItableUnusedInvalid)
                    .group(g)
                    .found(u64::from(unused)),
            );
            unused = 0;
        }
        if found.is_empty() {
            continue;
        }
        let m = st.gd_mut(g);
        gd::field::bg_flags.set(m, flags);
        gd::ITABLE_UNUSED.set(m, u64::from(unused));
        fixed.extend(found);
    }
    if fixed.is_empty() {
        return Ok(false);
    }
    for f in &mut fixed {
        f.fixed = true;
    }
    commit(fx, st, pre)?;
    pre.fixed.extend(fixed);
    Ok(true)
}
