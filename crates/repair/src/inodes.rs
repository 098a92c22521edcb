//! The superblock, group descriptors and pass 1: inode fields, flags,
//! extended attributes, block pointers and sizes, each fixed the way
//! e2fsck answers "yes".

use ext4_layout::types::{Ino, PhysBlock};
use std::collections::{BTreeMap, BTreeSet};

use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::flags;
use ext4_layout::inode::{field, I_BLOCK};
use ext4_layout::walk::{self, BlockMapEditor, BlockSource};

use super::blocks;
use super::map::staged_editor;
use super::raw::{
    clear_feature, clear_inode, now, sbf, set_feature, set_flags, set_i_blocks, set_size,
};
use super::stage::{Kind, Round, Staging};
use check_core::engine::CheckState;
use check_core::problem::{Code, Finding};
use check_core::sink::{FixSink, LocalFix};

/// Whether the superblock names inode `ino` (journal, quota files, the
/// orphan file): the check walks such an inode's blocks whatever its link
/// count.
fn named_in_superblock(fs: &check_core::fs::Fs, ino: u32) -> bool {
    let sb = fs.sb();
    [
        sb.s_journal_inum(),
        sb.s_usr_quota_inum(),
        sb.s_grp_quota_inum(),
        sb.s_prj_quota_inum(),
        sb.s_orphan_file_inum(),
    ]
    .contains(&ino)
}

/// Clears from the bad blocks inode every block number `drop` picks: its
/// own pointers, and the entries of the indirect blocks they lead to
/// (out-of-range pointers are always dropped: nothing can be read there).
fn clear_bad_block_entries<'f>(
    stage: &mut Staging<'f>,
    drop: impl Fn(u64) -> bool,
) -> std::io::Result<()> {
    let raw = stage.inode_copy(Ino::BAD)?;
    let mut i_block = raw[I_BLOCK].to_vec();
    let mut ed = BadBlockList {
        stage,
        drop: &drop,
        seen: BTreeSet::new(),
    };
    if walk::edit_block_map(&mut ed, &mut i_block)? {
        stage.inode(Ino::BAD)?[I_BLOCK].copy_from_slice(&i_block);
    }
    Ok(())
}

/// The edit of the bad blocks inode's map: data pointers that `drop`
/// picks or that lie outside the file system are cleared, and map
/// blocks outside it too; each map block is edited once.
struct BadBlockList<'s, 'f, 'd> {
    stage: &'s mut Staging<'f>,
    drop: &'d dyn Fn(u64) -> bool,
    seen: BTreeSet<u64>,
}

staged_editor!(BadBlockList<'_, '_, '_>);

impl BlockMapEditor for BadBlockList<'_, '_, '_> {
    fn pointer(&mut self, blk: u64, level: u32, _lblk: u64) -> std::io::Result<u64> {
        let gone = !self.holds(blk) || (level == 0 && (self.drop)(blk));
        Ok(if gone { 0 } else { blk })
    }

    fn enter(&mut self, blk: u64, _level: u32) -> std::io::Result<bool> {
        Ok(self.seen.insert(blk))
    }

    fn write_block(&mut self, blk: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.write_staged(blk, bytes)
    }
}

/// Applies an inode-local fix (the problem table's
/// [`FixPolicy::inode_local`](check_core::problem::FixPolicy::inode_local))
/// to the raw inode; the caller recomputes its checksum.
pub fn inode_local_fix(raw: &mut [u8], f: &Finding) -> bool {
    match (f.code, f.expected()) {
        (Code::SetDtime, _) => field::i_dtime.set(raw, 0),
        (Code::BadIBlocks, Some(v)) => set_i_blocks(raw, v),
        (Code::BadISize, Some(v)) => set_size(raw, v),
        (Code::InodeOnlyCsumInvalid, _) => {}
        _ => return false,
    }
    true
}

/// The sink pass 1's workers send inode-local fixes to under a repair:
/// each fixed inode goes to the fixer as one write, which it makes while
/// the check goes on.
pub struct Streamed<'a>(pub &'a fixer::Fixer);

impl FixSink for Streamed<'_> {
    fn fix_inode(&self, fix: LocalFix<'_>) -> bool {
        let mut new = fix.raw.to_vec();
        if !fix.findings.iter().all(|f| inode_local_fix(&mut new, f)) {
            return false;
        }
        if let Some(seed) = fix.csum_seed {
            ext4_layout::edit::set_inode_checksum(&mut new, seed, fix.ino);
        }
        self.0
            .request(fixer::Write {
                offset: fix.offset,
                data: new,
            })
            .is_ok()
    }
}

/// Which group metadata a relocation moves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Meta {
    BlockBitmap,
    InodeBitmap,
    InodeTable,
}

/// Moves a group's bitmap or inode table to newly allocated blocks (in
/// the group, or anywhere with flex_bg), copying what it held when its
/// old place is inside the file system.
fn relocate<'f>(st: &'f CheckState, stage: &mut Staging<'f>, g: u32, what: Meta) -> bool {
    let fs = &st.fs;
    let geo = &fs.geo;
    let n = if what == Meta::InodeTable {
        u64::from(geo.inode_blocks_per_group)
    } else {
        1
    };
    let (lo, hi) = check_core::fs::allowed_range(geo, ext4_layout::Group(g));
    let Some(new) = stage
        .alloc_run_in(PhysBlock(lo), PhysBlock(hi), n)
        .or_else(|| {
            stage.alloc_run_in(
                PhysBlock(geo.first_data_block),
                PhysBlock(geo.blocks_count - 1),
                n,
            )
        })
    else {
        return false;
    };
    let at = match what {
        Meta::BlockBitmap => ext4_layout::group_desc::BLOCK_BITMAP,
        Meta::InodeBitmap => ext4_layout::group_desc::INODE_BITMAP,
        Meta::InodeTable => ext4_layout::group_desc::INODE_TABLE,
    };
    // A 32-byte descriptor has no high half: it reads as 0, and is not
    // written.
    let old = at.get(stage.gd(g));
    let bs = fs.block_size();
    for k in 0..n {
        let mut b = vec![0u8; bs];
        if old != 0 && old + k < geo.blocks_count && old >= geo.first_data_block {
            let _ = stage.read(PhysBlock(old + k), &mut b);
        }
        let kind = if what == Meta::InodeTable {
            Kind::InodeTable
        } else {
            Kind::Plain
        };
        stage.fresh_block(new + k, kind).copy_from_slice(&b);
    }
    at.set(stage.gd_mut(g), new.0);
    true
}

/// Pre-pass repairs (superblock and descriptors).
pub fn fix_super<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding]) {
    let (st, stage, fixed) = (r.st, &mut *r.stage, &mut r.fixed);
    for f in mine {
        if matches!(
            f.code,
            Code::SuperblockUsedBackup | Code::DescriptorsUsedBackup
        ) {
            // The check runs on the backup; writing the superblock and the
            // descriptor table puts them back in the primary place (the
            // primary superblock belongs to group 0). A backup chosen with
            // `-b` (superblock-from-backup) was made primary before the
            // check, by `steps::restore_primary`.
            ext4_layout::superblock::field::s_block_group_nr.set(stage.sb_mut(), 0);
            let _ = stage.gd_mut(0);
            fixed.push(f);
            continue;
        }
        // Superblock fields e2fsck resets: the extra inode sizes to the
        // size its large inodes have (32), a first_meta_bg past the
        // descriptor table with the meta_bg feature.
        match f.code {
            Code::FutureLastMount
            | Code::FutureLastMountFudged
            | Code::FutureLastWrite
            | Code::FutureLastWriteFudged => {
                // As e2fsck: the time becomes now (the check's clock).
                use ext4_layout::superblock::field as sb_field;
                let now = f.numbers.found().and_then(|ahead| {
                    let sb = st.fs.sb();
                    let (lo, hi) =
                        if matches!(f.code, Code::FutureLastMount | Code::FutureLastMountFudged) {
                            (sb.s_mtime(), sb.s_mtime_hi())
                        } else {
                            (sb.s_wtime(), sb.s_wtime_hi())
                        };
                    (u64::from(lo) | (u64::from(hi) << 32)).checked_sub(ahead)
                });
                if let Some(now) = now {
                    let b = stage.sb_mut();
                    if matches!(f.code, Code::FutureLastMount | Code::FutureLastMountFudged) {
                        sb_field::s_mtime.set(b, now as u32);
                        sb_field::s_mtime_hi.set(b, (now >> 32) as u8);
                    } else {
                        sb_field::s_wtime.set(b, now as u32);
                        sb_field::s_wtime_hi.set(b, (now >> 32) as u8);
                    }
                    fixed.push(f);
                }
                continue;
            }
            Code::Rev0WithFeatures => {
                super::raw::dynamic_revision(stage);
                fixed.push(f);
                continue;
            }
            Code::BadMinExtraIsize => {
                ext4_layout::superblock::field::s_min_extra_isize.set(stage.sb_mut(), 32);
                fixed.push(f);
                continue;
            }
            Code::BadWantExtraIsize => {
                ext4_layout::superblock::field::s_want_extra_isize.set(stage.sb_mut(), 32);
                fixed.push(f);
                continue;
            }
            Code::ResizeInodeInvalid => {
                // Made again, as e2fsck makes it: its blocks change hands,
                // so the round stops here and the next check judges the
                // rest (the table does not mark it `keeps`).
                if crate::resize::recreate(st, stage).is_ok() {
                    fixed.push(f);
                }
                continue;
            }
            Code::FirstMetaBgTooBig => {
                clear_feature(
                    stage,
                    sbf::INCOMPAT,
                    ext4_layout::features::IncompatFeatures::META_BG.0,
                );
                ext4_layout::superblock::field::s_first_meta_bg.set(stage.sb_mut(), 0);
                fixed.push(f);
                continue;
            }
            _ => {}
        }
        if f.code == Code::InvalidQuotaInode {
            // As e2fsck: the superblock stops naming it.
            use ext4_layout::superblock::field as sb_field;
            let at = match f.detail.as_deref() {
                Some("user") => sb_field::s_usr_quota_inum,
                Some("group") => sb_field::s_grp_quota_inum,
                Some("project") => sb_field::s_prj_quota_inum,
                _ => continue,
            };
            at.set(stage.sb_mut(), 0);
            fixed.push(f);
            continue;
        }
        let Some(g) = f.group else { continue };
        // The descriptor checksums and uninit flags were put right before
        // the check, by `descriptors::fix`, as e2fsck does while it reads
        // the descriptors.
        let ok = match f.code {
            Code::BlockBitmapNotInGroup => relocate(st, stage, g, Meta::BlockBitmap),
            Code::InodeBitmapNotInGroup => relocate(st, stage, g, Meta::InodeBitmap),
            Code::InodeTableNotInGroup => relocate(st, stage, g, Meta::InodeTable),
            _ => false,
        };
        if ok {
            fixed.push(f);
        }
    }
}

/// Problems whose fix is to clear the whole inode.
fn clears_inode(code: Code) -> bool {
    code.policy().clears_inode
}

/// Clearing problems that come from reading the inode's blocks.
fn is_block_clear(code: Code) -> bool {
    code.policy().clears_from_blocks
}

/// The problems of one inode whose fixes are block-level (pointers,
/// extents, sizes), done after the field fixes. Rebuilding a tree makes
/// it as shallow as it can be (e2fsck's pass 1E).
fn is_block_problem(code: Code) -> bool {
    code.policy().block_map
}

/// Pass 1's repairs: group metadata that must move comes first (and
/// alone); then, inode by inode, features, clearing, field fixes and
/// block fixes; then EA blocks; then sizes and block counts.
pub fn fix_pass1<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding]) {
    // Unreadable inode-table blocks first.
    let rest = r.stage_salvaged(mine, Code::InodeTableBlockUnreadable);
    let mine = &rest[..];
    if relocate_metadata(r, mine) {
        return;
    }
    let by_ino = features_then_by_inode(r, mine);
    // Multiply-claimed blocks are cloned after pass 1 has fixed
    // everything else, as e2fsck does.
    let dups: Vec<&'a Finding> = mine
        .iter()
        .copied()
        .filter(|f| matches!(f.code, Code::DupBlocks | Code::DupBlocksMetadata))
        .collect();
    if !dups.is_empty() && by_ino.is_empty() {
        if blocks::clone_duplicates(r.st, r.stage).is_ok() {
            r.fixed.extend(dups);
        }
        return;
    }
    let fixed_before = r.fixed.len();
    let mut changed_blocks: BTreeSet<u32> = BTreeSet::new();
    let mut recounted: BTreeSet<u32> = BTreeSet::new();
    let mut stopped_at = u32::MAX;
    let mut feature_changed = false;
    for (&ino, list) in &by_ino {
        // A feature turned on changes what every later inode's checks
        // find: the rest waits for the next check.
        if feature_changed {
            stopped_at = ino;
            break;
        }
        let Some(inode) = Ino::new(ino) else {
            continue;
        };
        let done = fix_inode(r, inode, list);
        feature_changed = done.feature_changed;
        if done.blocks_changed {
            // Not after a fix that changes how the blocks are read (or
            // zeroes the inode): the check's size and count were worked
            // out from the blocks as it read them.
            let stale = list
                .iter()
                .any(|f| reinterprets(f.code) || zeroes_inode(f.code));
            let holds = !stale
                && (blocks::rewrites_kept_tree(list)
                    || (!r.stage.is_dir(inode) && blocks::file_size_holds(list)));
            if !holds {
                changed_blocks.insert(ino);
            } else if blocks::gives_back_old_nodes(r.st, ino, list) {
                // Its block count is counted again from the new tree.
                recounted.insert(ino);
            }
        }
    }
    fix_ea_blocks(r, mine, stopped_at);
    fix_sizes(r, mine, stopped_at, &changed_blocks, &recounted);
    features_for_large_sizes(r, fixed_before);
    // Then the clones, as e2fsck's passes 1B to 1D follow pass 1, when
    // no fix changed which blocks an inode holds (the check's record of
    // the blocks claimed twice then still holds).
    let moved_blocks = !changed_blocks.is_empty()
        || stopped_at != u32::MAX
        || r.fixed[fixed_before..]
            .iter()
            .any(|f| clears_inode(f.code) || is_block_problem(f.code) || zeroes_inode(f.code));
    if !dups.is_empty() && !moved_blocks && blocks::clone_duplicates(r.st, r.stage).is_ok() {
        r.fixed.extend(dups);
    }
}

/// A fix that zeroes a special inode the file system no longer uses (the
/// journal, a quota or the orphan file), and with it every block it held.
fn zeroes_inode(code: Code) -> bool {
    matches!(
        code,
        Code::JournalInodeNotClear | Code::QuotaInodeNotClear | Code::OrphanFileNotClear
    )
}

/// Moves group metadata (bitmaps, inode tables) that collides with
/// something else; true if anything moved (the rest of pass 1's fixes
/// then wait for the next check).
fn relocate_metadata<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding]) -> bool {
    let mut moved = false;
    let mut done_meta = BTreeSet::new();
    for f in mine {
        let Some(g) = f.group else { continue };
        let what = match f.code {
            Code::BlockBitmapConflict => Meta::BlockBitmap,
            Code::InodeBitmapConflict => Meta::InodeBitmap,
            Code::InodeTableConflict => Meta::InodeTable,
            Code::RelocateMetadata => match f.detail.as_deref() {
                Some("block bitmap") => Meta::BlockBitmap,
                Some("inode bitmap") => Meta::InodeBitmap,
                _ => Meta::InodeTable,
            },
            _ => continue,
        };
        let key = (g, what as u8);
        if done_meta.contains(&key) {
            r.fixed.push(f);
            continue;
        }
        if relocate(r.st, r.stage, g, what) {
            done_meta.insert(key);
            r.fixed.push(f);
            moved = true;
        }
    }
    moved
}

/// Turns on the features findings without an inode ask for, and sorts
/// the rest by inode (duplicate blocks aside: they are cloned later).
fn features_then_by_inode<'a>(
    r: &mut Round<'_, 'a, '_>,
    mine: &[&'a Finding],
) -> BTreeMap<u32, Vec<&'a Finding>> {
    let mut by_ino: BTreeMap<u32, Vec<&'a Finding>> = BTreeMap::new();
    for f in mine {
        match (f.code, f.ino) {
            (Code::FeatureLargeDirs, _) => {
                set_feature(r.stage, sbf::INCOMPAT, IncompatFeatures::LARGEDIR.0);
                r.fixed.push(f);
            }
            (Code::DupBlocks | Code::DupBlocksMetadata, _) => {}
            (_, Some(ino)) => by_ino.entry(ino).or_default().push(f),
            _ => {}
        }
    }
    by_ino
}

/// What fixing one inode changed beyond the inode.
#[derive(Default)]
struct InodeDone {
    /// A feature was turned on.
    feature_changed: bool,
    /// The inode's blocks, or how they are read, changed.
    blocks_changed: bool,
}

/// Fixes one inode's findings, in the order e2fsck asks about them.
fn fix_inode<'a>(r: &mut Round<'_, 'a, '_>, ino: Ino, list: &[&'a Finding]) -> InodeDone {
    let mut out = InodeDone::default();
    // The EA-inode flag is set on the EA inode, not this one.
    for f in list.iter().filter(|f| f.code == Code::AttrSetEaInodeFlag) {
        if let Some(target) = f.inode2() {
            if let Ok(raw) = r.stage.inode(target) {
                set_flags(raw, flags::EA_INODE, 0);
                r.fixed.push(f);
            }
        }
    }
    let codes = asked_codes(list);
    out.feature_changed = turn_features_on(r, list, &codes);
    if clears_whole_inode(list, &codes) {
        clear_whole_inode(r, ino, list, &codes);
        return out;
    }
    // Illegal numbers in the bad blocks list are cleared wherever they
    // sit (its indirect blocks included). So are the primary superblock
    // and descriptor blocks: e2fsck offers to take them off the list and
    // hope they are good.
    let primary: BTreeSet<u64> = list
        .iter()
        .filter(|f| {
            f.code == Code::BbinodeBadMetablock
                && matches!(
                    f.detail.as_deref(),
                    Some("primary superblock" | "primary group descriptors")
                )
        })
        .filter_map(|f| f.blk)
        .collect();
    let bb_cleared = ino == Ino::BAD
        && (codes.contains(&Code::BadBlockInBadBlockInode) || !primary.is_empty())
        && clear_bad_block_entries(r.stage, |b| primary.contains(&b)).is_ok();
    let fs = &r.st.fs;
    let Ok(raw) = r.stage.inode(ino) else {
        return out;
    };
    let cx = FieldFix {
        fs,
        codes: &codes,
        links: field::i_links_count.get(raw),
        now: now(),
        bb_cleared,
        primary: &primary,
    };
    let mut done: Vec<&'a Finding> = Vec::new();
    let mut ordered: Vec<&'a Finding> = list.to_vec();
    ordered.sort_by_key(|f| e2fsck_order(f.code));
    for f in ordered {
        if cx.fix(f, raw) {
            done.push(f);
        }
    }
    drop_bad_ea_block(fs, raw, list, &mut done);
    // A fix that changes how the inode's blocks are read makes the block
    // findings stale: they wait for the next check. So does one that
    // zeroes the inode: e2fsck clears it before it meets the rest.
    if done
        .iter()
        .any(|f| reinterprets(f.code) || zeroes_inode(f.code))
    {
        out.blocks_changed = true;
        push_new(&mut r.fixed, done);
        return out;
    }
    // Block-level problems: pointers and extents.
    let block_probs: Vec<&'a Finding> = list
        .iter()
        .copied()
        .filter(|f| is_block_problem(f.code))
        .collect();
    if !block_probs.is_empty() {
        if let Ok(touched) = blocks::fix_inode_blocks(r.st, r.stage, ino, &block_probs) {
            out.blocks_changed = true;
            // Pointers cleared only in indirect blocks: e2fsck writes
            // those blocks without marking the file system changed.
            if !touched {
                r.quiet.extend(block_probs.iter().copied());
            }
            done.extend(block_probs);
            // The block count the check found wrong is counted anew from
            // what the inode now maps, as e2fsck counts it after the
            // pointers it cleared (else the next check finds it).
            let wrong_count: Vec<&'a Finding> = list
                .iter()
                .copied()
                .filter(|f| f.code == Code::BadIBlocks)
                .collect();
            if !wrong_count.is_empty() && crate::map::recount_i_blocks(r.stage, ino).is_ok() {
                done.extend(wrong_count);
            }
        }
    }
    // A tree that could be shorter or narrower is built again packed,
    // as e2fsck's pass 1E does (a tree rebuilt above already is). Its
    // block count is counted anew, which settles a wrong one too.
    let smaller: Vec<&'a Finding> = list
        .iter()
        .copied()
        .filter(|f| f.code.policy().optional)
        .collect();
    if !smaller.is_empty() {
        if out.blocks_changed {
            done.extend(smaller);
        } else if blocks::pack_extent_tree(r.st, r.stage, ino).is_ok() {
            done.extend(smaller);
            done.extend(list.iter().copied().filter(|f| f.code == Code::BadIBlocks));
        }
    }
    // Extent tree blocks whose checksum alone is wrong: rewritten where
    // they are (the commit sets the checksum), as e2fsck rewrites them;
    // a tree just rebuilt has fresh checksums already.
    for f in list
        .iter()
        .filter(|f| f.code == Code::ExtentOnlyCsumInvalid)
    {
        if out.blocks_changed {
            done.push(f);
        } else if let Some(node) = f.blk2 {
            if r.stage.block(PhysBlock(node), Kind::Extent(ino)).is_ok() {
                done.push(f);
            }
        }
    }
    push_new(&mut r.fixed, done);
    out
}

/// Adds to `fixed` the findings it does not hold yet.
fn push_new<'a>(fixed: &mut Vec<&'a Finding>, done: Vec<&'a Finding>) {
    for f in done {
        if !fixed.iter().any(|x| std::ptr::eq(*x, f)) {
            fixed.push(f);
        }
    }
}

/// The codes of an inode's findings that get their own answer: where
/// e2fsck first offers to turn a feature on, "yes" keeps the inode, so
/// the question about the inode's flag is never asked.
fn asked_codes(list: &[&Finding]) -> BTreeSet<Code> {
    let cascade = codes_has(list, Code::ClearInlineDataForExtent)
        || codes_has(list, Code::ClearExtentForInlineData)
        || codes_has(list, Code::ClearExtentInlineDataFlags);
    list.iter()
        .map(|f| f.code)
        .filter(|&c| {
            !(c == Code::ExtentsSet && codes_has(list, Code::ExtentFeature)
                || c == Code::InlineDataSet && codes_has(list, Code::InlineDataFeature)
                || c == Code::ClearExtentInlineDataInode && cascade)
        })
        .collect()
}

/// Turns on the features an inode's findings ask for; the flag questions
/// they make moot count as fixed. True if a feature was turned on.
fn turn_features_on<'a>(
    r: &mut Round<'_, 'a, '_>,
    list: &[&'a Finding],
    codes: &BTreeSet<Code>,
) -> bool {
    let mut changed = false;
    for f in list {
        match f.code {
            Code::ExtentFeature => {
                set_feature(r.stage, sbf::INCOMPAT, IncompatFeatures::EXTENTS.0);
                r.fixed.push(f);
                changed = true;
            }
            Code::InlineDataFeature => {
                set_feature(r.stage, sbf::INCOMPAT, IncompatFeatures::INLINE_DATA.0);
                r.fixed.push(f);
                changed = true;
            }
            // Nothing is read differently: the attributes were read with
            // their EA inodes already.
            Code::EaInodeFeature => {
                set_feature(r.stage, sbf::INCOMPAT, IncompatFeatures::EA_INODE.0);
                r.fixed.push(f);
            }
            Code::ExtentsSet | Code::InlineDataSet | Code::ClearExtentInlineDataInode
                if !codes.contains(&f.code) =>
            {
                r.fixed.push(f)
            }
            _ => {}
        }
    }
    changed
}

/// Whether the inode is cleared as a whole.
fn clears_whole_inode(list: &[&Finding], codes: &BTreeSet<Code>) -> bool {
    // Block findings made before a fix that changes how the blocks are
    // read (the extents flag, say) do not count against the inode.
    let reinterpreted = list.iter().any(|f| reinterprets(f.code));
    let block_clear = !reinterpreted
        && list
            .iter()
            .filter(|f| matches!(f.code, Code::IllegalBlock | Code::TooBig))
            .count()
            >= 12;
    block_clear
        || codes
            .iter()
            .any(|&c| clears_inode(c) && !(reinterpreted && is_block_clear(c)))
}

/// Clears an inode; every finding about it is then fixed.
fn clear_whole_inode<'a>(
    r: &mut Round<'_, 'a, '_>,
    ino: Ino,
    list: &[&'a Finding],
    codes: &BTreeSet<Code>,
) {
    let fs = &r.st.fs;
    let first_ino = fs.geo.first_ino;
    let Ok(raw) = r.stage.inode(ino) else {
        return;
    };
    clear_inode(raw, ino.get(), first_ino, now());
    // A reserved inode is checked on after it is cleared, as in e2fsck:
    // its bad mode goes too, or the next check finds it again.
    if ino.get() < first_ino && codes.contains(&Code::ReservedBadMode) {
        field::i_mode.set(raw, 0);
    }
    // So is an inode the superblock names (a quota file, the orphan
    // file): its blocks are walked whatever its link count, so a cleared
    // one must map nothing.
    if named_in_superblock(fs, ino.get()) {
        raw[I_BLOCK].fill(0);
    }
    r.fixed.extend(list.iter().copied());
}

/// EA block problems clear the inode's reference to the block.
fn drop_bad_ea_block<'a>(
    fs: &check_core::fs::Fs,
    raw: &mut [u8],
    list: &[&'a Finding],
    done: &mut Vec<&'a Finding>,
) {
    let bad = list.iter().any(|f| {
        matches!(
            f.code,
            Code::EaBlockBad | Code::EaBlockHeader | Code::EaBlockMultiple | Code::EaBlockEntry
        ) || (matches!(
            f.code,
            Code::AttrHash | Code::AttrValueSize | Code::AttrValueEaInode | Code::AttrNoEaInodeFlag
        ) && f.blk.is_some())
    });
    if !bad {
        return;
    }
    field::i_file_acl_lo.set(raw, 0);
    if fs.geo.incompat.contains(IncompatFeatures::BIT64) {
        field::l_i_file_acl_high.set(raw, 0);
    }
    done.extend(list.iter().copied().filter(|f| {
        matches!(
            f.code,
            Code::EaBlockBad
                | Code::EaBlockHeader
                | Code::EaBlockMultiple
                | Code::EaBlockEntry
                | Code::EaBlockCsum
        ) || f.blk.is_some()
    }));
}

/// What one inode's field fixes need to know.
struct FieldFix<'x> {
    fs: &'x check_core::fs::Fs,
    /// The codes asked about (see `asked_codes`).
    codes: &'x BTreeSet<Code>,
    /// The link count before any fix.
    links: u16,
    now: u32,
    /// Whether the bad blocks list was cleaned.
    bb_cleared: bool,
    /// Primary superblock and descriptor blocks taken off the list.
    primary: &'x BTreeSet<u64>,
}

impl FieldFix<'_> {
    /// Applies one finding's fix to the inode; false if it has none here.
    fn fix(&self, f: &Finding, raw: &mut [u8]) -> bool {
        if let Some(ok) = self.fix_times_and_flags(f.code, raw) {
            return ok;
        }
        match f.code {
            Code::InlineDataNoAttr => {
                // Nothing left to do if an earlier fix took the inline
                // data flag away.
                if field::i_flags.get(raw) & flags::INLINE_DATA != 0 {
                    set_size(raw, 0);
                    set_flags(raw, 0, flags::INLINE_DATA);
                    raw[I_BLOCK].fill(0);
                }
                true
            }
            Code::UnsetExtentFlag => {
                // Only while i_block still holds a valid extent root (an
                // earlier fix may have emptied it).
                let root = ext4_layout::extent::ExtentNode::new(&raw[I_BLOCK])
                    .is_some_and(|n| n.validate(true).is_ok());
                if root {
                    set_flags(raw, flags::EXTENTS, 0);
                }
                true
            }
            Code::InvalidBadInode | Code::BadblocksInBadblocks => {
                raw[..128].fill(0);
                true
            }
            Code::BadBlockInBadBlockInode => self.bb_cleared,
            Code::BbinodeBadMetablock => {
                self.bb_cleared && f.blk.is_some_and(|b| self.primary.contains(&b))
            }
            Code::JournalBadMode | Code::QuotaBadMode | Code::OrphanFileBadMode => {
                field::i_mode.set(raw, 0o100000);
                true
            }
            c if zeroes_inode(c) => {
                raw.fill(0);
                true
            }
            Code::ReservedBadMode => {
                field::i_mode.set(raw, 0);
                true
            }
            Code::ExtraIsize => {
                self.fix_extra_isize(raw);
                true
            }
            Code::InodeEaAllocCollision
            | Code::AttrNameLen
            | Code::AttrValueSize
            | Code::AttrHash
            | Code::AttrValueEaInode
            | Code::AttrNoEaInodeFlag
                if f.blk.is_none() =>
            {
                // Drops every attribute stored in the inode (unless the
                // flag goes on the EA inode instead).
                if !(self.codes.contains(&Code::AttrSetEaInodeFlag)
                    && f.code == Code::AttrNoEaInodeFlag)
                {
                    let at = 128 + usize::from(field::i_extra_isize_raw.get(raw));
                    if at + 4 <= raw.len() {
                        raw[at..at + 4].fill(0);
                    }
                }
                true
            }
            Code::EaTimeOutOfRange => {
                for (t, x) in ext4_layout::inode::TIMES_WITH_EXTRA {
                    if x.end() <= raw.len() && t.get(raw) & 0x8000_0000 != 0 && x.get(raw) & 3 == 3
                    {
                        x.set(raw, x.get(raw) & !3);
                    }
                }
                true
            }
            Code::TreatAsDirectory => {
                let m = field::i_mode.get(raw);
                field::i_mode.set(raw, (m & 0o7777) | 0o40000);
                true
            }
            Code::SetNonzeroSize => {
                set_size(raw, 0);
                true
            }
            // Rewriting the inode recomputes its checksum.
            Code::InodeOnlyCsumInvalid => true,
            _ => false,
        }
    }

    /// The fixes that set a time or clear flags; `None` for other codes.
    fn fix_times_and_flags(&self, code: Code, raw: &mut [u8]) -> Option<bool> {
        let clear = match code {
            Code::LowDtime => {
                field::i_dtime.set(raw, if self.links != 0 { 0 } else { self.now });
                return Some(true);
            }
            Code::ZeroDtime => {
                field::i_dtime.set(raw, self.now);
                return Some(true);
            }
            Code::SetDtime | Code::RootDtime => {
                field::i_dtime.set(raw, 0);
                return Some(true);
            }
            Code::ClearExtentForInlineData
                if self.codes.contains(&Code::ClearInlineDataForExtent) =>
            {
                return Some(false);
            }
            Code::ClearExtentInlineDataFlags
                if self.codes.contains(&Code::ClearInlineDataForExtent)
                    || self.codes.contains(&Code::ClearExtentForInlineData) =>
            {
                return Some(false);
            }
            Code::CasefoldNondir | Code::CasefoldFeature => flags::CASEFOLD,
            Code::EaInodeNonreg => flags::EA_INODE,
            Code::SpecialExtentsIdata | Code::ClearExtentInlineDataFlags => {
                flags::EXTENTS | flags::INLINE_DATA
            }
            Code::ClearInlineDataForExtent => flags::INLINE_DATA,
            Code::ClearExtentForInlineData | Code::FastSymlinkExtentFlag => flags::EXTENTS,
            Code::SetImagic => flags::IMAGIC,
            Code::MissingEncryptionXattr => flags::ENCRYPT,
            Code::SetImmutable => flags::IMMUTABLE | flags::APPEND,
            c if c.policy().drops_index => flags::INDEX,
            _ => return None,
        };
        set_flags(raw, 0, clear);
        Some(true)
    }

    /// Sets `i_extra_isize` to what the file system wants, or rounds it
    /// up to a multiple of four.
    fn fix_extra_isize(&self, raw: &mut [u8]) {
        let v = check_core::fixes::fixed_extra_isize(
            self.fs.geo.inode_size,
            self.fs.sb().s_want_extra_isize(),
            field::i_extra_isize_raw.get(raw),
        );
        field::i_extra_isize_raw.set(raw, v);
    }
}

/// EA block checksums and reference counts.
fn fix_ea_blocks<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding], stopped_at: u32) {
    for f in mine {
        if f.ino.is_some_and(|i| i >= stopped_at) {
            continue;
        }
        match f.code {
            Code::EaBlockCsum if !r.fixed.iter().any(|x| std::ptr::eq(*x, *f)) => {
                if let Some(b) = f.blk {
                    if r.stage.block(PhysBlock(b), Kind::Xattr).is_ok() {
                        r.fixed.push(f);
                    }
                }
            }
            Code::EaBlockRefcount => {
                if let (Some(b), Some(n)) = (f.blk, f.expected()) {
                    if let Ok(buf) = r.stage.block(PhysBlock(b), Kind::Xattr) {
                        ext4_layout::xattr::field::h_refcount.set(buf, n as u32);
                        r.fixed.push(f);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Sizes and block counts, fixed only for inodes whose blocks did not
/// change this round (the next check recomputes them otherwise).
fn fix_sizes<'a>(
    r: &mut Round<'_, 'a, '_>,
    mine: &[&'a Finding],
    stopped_at: u32,
    changed_blocks: &BTreeSet<u32>,
    recounted: &BTreeSet<u32>,
) {
    // What the inode fixes already settled, looked up once: a count set
    // by a tree rebuilt packed, and the inodes cleared.
    let settled: std::collections::HashSet<*const Finding> =
        r.fixed.iter().map(|x| std::ptr::from_ref(*x)).collect();
    let cleared: BTreeSet<u32> = r
        .fixed
        .iter()
        .filter(|x| clears_inode(x.code) || zeroes_inode(x.code))
        .filter_map(|x| x.ino)
        .collect();
    for f in mine {
        let Some(inode) = f.inode() else {
            continue;
        };
        let ino = inode.get();
        if ino >= stopped_at
            || changed_blocks.contains(&ino)
            || !matches!(f.code, Code::BadIBlocks | Code::BadISize)
            || (f.code == Code::BadIBlocks && recounted.contains(&ino))
            || settled.contains(&std::ptr::from_ref(*f))
            || cleared.contains(&ino)
        {
            continue;
        }
        // The value the check worked out; a finding without one is left
        // (never a size or count of 0 made up for it).
        let Some(v) = f.expected() else {
            continue;
        };
        let Ok(raw) = r.stage.inode(inode) else {
            continue;
        };
        if f.code == Code::BadIBlocks {
            set_i_blocks(raw, v);
        } else {
            set_size(raw, v);
        }
        r.fixed.push(f);
    }
}

/// A size of 2 GiB or more set by this round's fixes turns on the
/// feature that allows it (large_file for a regular file, largedir for a
/// directory), and a revision 0 superblock becomes a dynamic one, as
/// e2fsck's library does without a word whenever it writes such a size.
fn features_for_large_sizes(r: &mut Round<'_, '_, '_>, from: usize) {
    const LARGE: u64 = 0x8000_0000;
    let mut ro_compat = 0u32;
    let mut incompat = 0u32;
    let sizes: Vec<(Ino, u64)> = r.fixed[from..]
        .iter()
        .filter(|f| f.code == Code::BadISize)
        .filter_map(|f| Some((f.inode()?, f.expected()?)))
        .filter(|&(_, v)| v >= LARGE)
        .collect();
    for (ino, _) in sizes {
        let Ok(raw) = r.stage.inode_copy(ino) else {
            continue;
        };
        match ext4_layout::inode::Inode::new(&raw).and_then(|i| i.file_type()) {
            Some(ext4_layout::inode::FileType::Regular) => {
                ro_compat |= ext4_layout::features::RoCompatFeatures::LARGE_FILE.0;
            }
            Some(ext4_layout::inode::FileType::Directory) => {
                incompat |= IncompatFeatures::LARGEDIR.0;
            }
            _ => {}
        }
    }
    let sb = &r.stage.sb;
    let missing_ro = ro_compat & !super::raw::sbf::RO_COMPAT.get(sb);
    let missing_in = incompat & !super::raw::sbf::INCOMPAT.get(sb);
    if missing_ro == 0 && missing_in == 0 {
        return;
    }
    super::raw::set_feature(r.stage, super::raw::sbf::RO_COMPAT, missing_ro);
    super::raw::set_feature(r.stage, super::raw::sbf::INCOMPAT, missing_in);
    super::raw::dynamic_revision(r.stage);
}

/// Fixes that change how an inode's blocks are interpreted.
fn reinterprets(c: Code) -> bool {
    c.policy().rereads_blocks
}

/// Where a problem comes in e2fsck's sequence of per-inode checks.
fn e2fsck_order(c: Code) -> u8 {
    c.policy().inode_order
}

fn codes_has(fs_: &[&Finding], c: Code) -> bool {
    fs_.iter().any(|f| f.code == c)
}
