//! The repair's steps outside its rounds: a superblock restored from a
//! backup, the inode count, bad-block list updates, `-E discard`,
//! `-E bmap2extent` and pass 3A's directory rewrites.

use ext4_layout::types::Ino;
use std::path::Path;
use std::sync::Arc;

use ext4_layout::features::CompatFeatures;
use pipeline::Device;

use check_core::ctx::CheckOptions;
use check_core::engine::{check_with_state, Checked};
use check_core::problem::{Code, Finding};

use crate::error::Error;
use crate::raw::sbf;
use crate::stage::Staging;
use crate::{badblocks, connect, convert, discard, rebuild, rehash};

/// `-E discard`: the free blocks (and, in an image file, the unused ends
/// of the inode tables, whose groups are then marked zeroed).
pub(crate) fn discard_free_space(current: &Checked, fx: &fixer::Fixer) -> Result<(), Error> {
    let Some(st) = current.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err(Error::CheckIncomplete);
    };
    let tables = st.fs.dev.kind() == pipeline::DeviceKind::File;
    let (ranges, zeroed) = discard::ranges(st, tables);
    fx.discard(ranges)?;
    if !zeroed.is_empty() {
        let mut stage = Staging::new(&st.fs, &st.maps, true);
        discard::mark_zeroed(&mut stage, &zeroed);
        fx.commit(stage.into_writes())?;
    }
    Ok(())
}

/// `-E bmap2extent`: every block-mapped file and directory converted in
/// one commit, then the group summaries follow the freed indirect blocks
/// and the new tree blocks.
pub(crate) fn convert_to_extents(current: &Checked, fx: &fixer::Fixer) -> Result<usize, Error> {
    let Some(st) = current.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err(Error::CheckIncomplete);
    };
    let mut stage = Staging::new(&st.fs, &st.maps, true);
    let n = convert::to_extents(st, &mut stage);
    rebuild::rebuild_with_allocations(st, &mut stage)?;
    fx.commit(stage.into_writes()).map_err(Error::Stopped)?;
    Ok(n)
}

/// Which directories pass 3A rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rehash {
    /// Every one (`-D`).
    All,
    /// Those e2fsck indexes on every repair: linear directories of three
    /// blocks or more on a file system with dir_index, lost+found aside.
    Linear,
}

/// Whether e2fsck's pass 1 would queue directory `dir` for indexing.
pub(crate) fn linear_to_index<'f>(
    fs: &'f check_core::fs::Fs,
    stage: &mut Staging<'f>,
    dir: Ino,
    lost_found: Option<Ino>,
) -> bool {
    if !fs.geo.compat.contains(CompatFeatures::DIR_INDEX) || Some(dir) == lost_found {
        return false;
    }
    let Ok(raw) = stage.inode_copy(dir) else {
        return false;
    };
    let Some(inode) = ext4_layout::inode::Inode::new(&raw) else {
        return false;
    };
    !inode.has_flag(ext4_layout::inode::flags::INDEX)
        && !inode.has_flag(ext4_layout::inode::flags::INLINE_DATA)
        && inode.size() / u64::from(fs.geo.block_size) >= 3
}

/// `-D`: every directory rewritten compactly in one commit (those that
/// cannot be are left as they are), then the group summaries follow the
/// blocks freed and taken. Returns how many were rewritten.
pub(crate) fn optimize_directories(
    current: &Checked,
    fx: &fixer::Fixer,
    which: Rehash,
) -> Result<usize, Error> {
    let Some(st) = current.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err(Error::CheckIncomplete);
    };
    let fs = &st.fs;
    let mut stage = Staging::new(fs, &st.maps, true);
    let lost_found = connect::lookup(&mut stage, Ino::ROOT, b"lost+found")
        .ok()
        .flatten();
    let mut n = 0;
    // Linear: the directories the check's pass 1 found linear, three
    // blocks or more, on a file system with dir_index (what
    // `linear_to_index` asks of a directory), lost+found aside; all:
    // every directory.
    let dirs: Box<dyn Iterator<Item = Ino>> = match which {
        Rehash::Linear => Box::new(
            st.linear_dirs
                .iter()
                .copied()
                .filter_map(Ino::new)
                .filter(|&d| Some(d) != lost_found),
        ),
        Rehash::All => Box::new((1..=fs.geo.inodes_count).filter_map(Ino::new)),
    };
    for dir in dirs {
        if !stage.is_dir(dir) {
            continue;
        }
        if let Ok(freed) = rehash::optimize(fs, &mut stage, dir, Some(dir) == lost_found) {
            for b in freed {
                stage.mark_block(b, false);
            }
            n += 1;
        }
    }
    if n == 0 {
        return Ok(0);
    }
    rebuild::rebuild_with_allocations(st, &mut stage)?;
    fx.commit(stage.into_writes()).map_err(Error::Stopped)?;
    Ok(n)
}

/// The bad-block list's update, as its own round before the passes: a
/// check tells which blocks are in use, the list is rewritten, and the
/// group summaries follow (pass-5 problems the check found are fixed by
/// the same rebuild, and reported so).
pub(crate) fn update_bad_blocks(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    check_opts: &CheckOptions,
    change: &badblocks::Change,
    path: &Path,
) -> Result<(Vec<String>, Vec<Finding>), Error> {
    let pre = check_with_state(dev.clone(), check_opts);
    let Some(st) = pre.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err(Error::BadBlocksNoCheck);
    };
    let mut stage = Staging::new(&st.fs, &st.maps, true);
    let done = badblocks::stage_update(
        st,
        change,
        &mut stage,
        &path.display().to_string(),
        Some(fx),
    )?;
    fx.commit(stage.into_writes()).map_err(Error::Stopped)?;
    let fixed = pre
        .report
        .findings
        .iter()
        .filter(|f| f.code.policy().rebuilt_by_pass5)
        .map(|f| {
            let mut f = f.clone();
            f.fixed = true;
            f
        })
        .collect();
    Ok((done.notes, fixed))
}

/// Superblock fields e2fsck's superblock stage sets right before its
/// passes (the check reads everything after through them), in one
/// commit: an inode count that disagrees with the groups (the check
/// stops on it until then); and feature pairs that cannot stand together
/// (uninit_bg comes off beside metadata_csum, metadata_csum_seed and the
/// seed off without metadata_csum, extents goes on beside 64bit), for
/// which someone answering the repair's questions is asked first, as
/// e2fsck asks.
pub(crate) fn fix_superblock_fields(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    answers: Option<&dyn check_core::answers::Answers>,
) -> Result<Vec<Finding>, Error> {
    use ext4_layout::features::{IncompatFeatures, RoCompatFeatures};
    use ext4_layout::superblock::field as sb_field;
    let Ok(opened) = check_core::fs::open_fs(dev.clone(), check_core::fs::OpenOptions::default())
    else {
        return Ok(Vec::new());
    };
    let fs = opened.fs;
    if fs.backup_in_use {
        return Ok(Vec::new());
    }
    let (ro, incompat) = (fs.geo.ro_compat, fs.geo.incompat);
    let maps = check_core::ctx::Maps::new(&fs);
    let mut stage = Staging::new(&fs, &maps, false);
    let mut counted = None;
    let want = u64::from(fs.geo.group_count) * u64::from(fs.geo.inodes_per_group);
    let have = u64::from(fs.sb().s_inodes_count());
    // e2fsck checks the superblock's values first, and stops on one out
    // of range (a zero inode count among them) before this fix.
    if have != want && want <= u64::from(u32::MAX) && check_core::values_in_range(&fs) {
        sb_field::s_inodes_count.set(stage.sb_mut(), want as u32);
        counted = Some(Finding::new(Code::InodeCountWrong).mismatch(have, want));
    }
    let mut fixed = Vec::new();
    let yes = |c: Code| answers.is_none_or(|a| a.yes(&Finding::new(c)));
    if ro.contains(RoCompatFeatures::METADATA_CSUM)
        && ro.contains(RoCompatFeatures::GDT_CSUM)
        && yes(Code::MetaAndGdtCsum)
    {
        crate::raw::clear_feature(&mut stage, sbf::RO_COMPAT, RoCompatFeatures::GDT_CSUM.0);
        fixed.push(Code::MetaAndGdtCsum);
    }
    if incompat.contains(IncompatFeatures::CSUM_SEED)
        && !ro.contains(RoCompatFeatures::METADATA_CSUM)
        && yes(Code::CsumSeedWithoutMetaCsum)
    {
        crate::raw::clear_feature(&mut stage, sbf::INCOMPAT, IncompatFeatures::CSUM_SEED.0);
        sb_field::s_checksum_seed.set(stage.sb_mut(), 0);
        fixed.push(Code::CsumSeedWithoutMetaCsum);
    }
    if incompat.contains(IncompatFeatures::BIT64)
        && !incompat.contains(IncompatFeatures::EXTENTS)
        && yes(Code::Bit64WithoutExtents)
    {
        crate::raw::set_feature(&mut stage, sbf::INCOMPAT, IncompatFeatures::EXTENTS.0);
        fixed.push(Code::Bit64WithoutExtents);
    }
    if fixed.is_empty() && counted.is_none() {
        return Ok(Vec::new());
    }
    fx.commit(stage.into_writes()).map_err(Error::Stopped)?;
    Ok(counted
        .into_iter()
        .chain(fixed.into_iter().map(Finding::new))
        .map(|mut f| {
            f.fixed = true;
            f
        })
        .collect())
}

/// Writes the superblock the user chose (`-b`) and its descriptor table
/// to the primary place.
pub(crate) fn restore_primary(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    check_opts: &CheckOptions,
) -> Result<Finding, Error> {
    let opened = check_core::fs::open_fs(
        dev.clone(),
        check_core::fs::OpenOptions {
            read_only: true,
            superblock: check_opts.superblock,
        },
    )?;
    let fs = opened.fs;
    let Some(mut f) = opened
        .findings
        .into_iter()
        .find(|f| f.code == Code::SuperblockFromBackup)
    else {
        return Err(Error::BackupNotUsed);
    };
    let maps = check_core::ctx::Maps::new(&fs);
    let mut stage = Staging::new(&fs, &maps, false);
    // s_block_group_nr: the primary belongs to group 0.
    ext4_layout::superblock::field::s_block_group_nr.set(stage.sb_mut(), 0);
    let _ = stage.gd_mut(0);
    fx.commit(stage.into_writes()).map_err(Error::Stopped)?;
    f.fixed = true;
    Ok(f)
}
