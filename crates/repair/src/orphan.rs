//! The orphan file (`orphan_file` feature): its entries are released
//! before the passes, as the orphan list is, and after them the file is
//! made clean again: dirty blocks rewritten empty, a broken file
//! recreated, a file without a journal removed, and the `orphan_present`
//! flag dropped, as e2fsck does once the check is over.

use ext4_layout::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use ext4_layout::inode::field;
use ext4_layout::inode::{flags, Inode};
use ext4_layout::orphan::{self, CsumKey};
use ext4_layout::types::{Ino, PhysBlock};

use super::raw::{clear_feature, now, sbf, set_size};
use super::stage::{Kind, Round, Staging};
use check_core::engine::CheckState;
use check_core::fs::Fs;
use check_core::problem::{Code, Finding};

/// The orphan file's inode, generation and blocks in logical order, when
/// it is usable: a size that is a number of blocks and, when block-mapped,
/// no holes before its end (in an extent-mapped file, e2fsck takes every
/// mapped block as it is).
fn layout<'f>(fs: &Fs, stage: &mut Staging<'f>) -> Option<(Ino, u32, Vec<PhysBlock>)> {
    let ino = Ino::new(fs.sb().s_orphan_file_inum()).filter(|i| i.get() <= fs.geo.inodes_count)?;
    let raw = stage.inode_copy(ino).ok()?;
    let inode = Inode::new(&raw)?;
    let bs = fs.block_size() as u64;
    if inode.size() % bs != 0 {
        return None;
    }
    let n = inode.size() / bs;
    let mapped = super::map::blocks_of(stage, ino).ok()?;
    if inode.has_flag(flags::EXTENTS) {
        let blocks = mapped.iter().map(|&(_, p)| p).collect();
        return Some((ino, inode.i_generation(), blocks));
    }
    let blocks: Vec<PhysBlock> = mapped
        .iter()
        .take_while(|&&(l, _)| l < n)
        .map(|&(_, p)| p)
        .collect();
    let whole = blocks.len() as u64 == n
        && mapped
            .iter()
            .enumerate()
            .all(|(i, &(l, _))| l >= n || l == i as u64);
    whole.then(|| (ino, inode.i_generation(), blocks))
}

/// Writes block `blk` as an empty orphan block of inode `ino`.
fn write_clean(stage: &mut Staging<'_>, csum: Option<u32>, ino: Ino, gen: u32, blk: PhysBlock) {
    let b = stage.fresh_block(blk, Kind::Plain);
    let key = csum.map(|seed| CsumKey {
        seed,
        ino: ino.get(),
        generation: gen,
        block: blk.0,
    });
    orphan::write_empty(b, key);
}

/// How many blocks a new orphan file gets: 32 on small file systems, one
/// 4096th of the blocks up to 512, a whole number of clusters.
fn default_blocks(fs: &Fs) -> u64 {
    let n = fs.geo.blocks_count;
    let blocks = if n < 128 * 1024 {
        32
    } else if n < 2 * 1024 * 1024 {
        n / 4096
    } else {
        512
    };
    let ratio = u64::from(fs.geo.cluster_ratio.max(1));
    blocks.div_ceil(ratio) * ratio
}

/// Frees every block of inode `ino` (data and mapping) in the check's
/// maps, so that the rebuild of the group summaries counts them free.
fn forget_blocks<'f>(stage: &mut Staging<'f>, ino: Ino) {
    if let Ok(all) = super::map::all_blocks_of(stage, ino) {
        for b in all {
            stage.mark_block(b, false);
        }
    }
}

/// A new, empty orphan file in inode `ino` (extent-mapped; `None` when
/// the file system has no extents or no room).
fn recreate<'f>(st: &'f CheckState, stage: &mut Staging<'f>, ino: Ino) -> Option<()> {
    let fs = &st.fs;
    if !fs.geo.incompat.contains(IncompatFeatures::EXTENTS) {
        return None;
    }
    forget_blocks(stage, ino);
    let n = default_blocks(fs);
    let leaves = stage.alloc_extents(PhysBlock(0), n)?;
    let bs = fs.block_size() as u64;
    let isz = fs.geo.inode_size as usize;
    {
        let r = stage.inode(ino).ok()?;
        r.fill(0);
        field::i_mode.set(r, 0o100_600);
        field::i_links_count.set(r, 1);
        set_size(r, n * bs);
        let t = now();
        for time in ext4_layout::inode::TIMES {
            time.set(r, t);
        }
        field::i_flags.set(r, flags::EXTENTS);
        if isz > 128 {
            field::i_extra_isize_raw.set(r, 32.min((isz - 128) as u16));
        }
    }
    super::tree::write_extent_tree(stage, ino, &leaves).ok()?;
    super::map::recount_i_blocks(stage, ino).ok()?;
    let csum = fs.metadata_csum().then_some(fs.geo.csum_seed);
    for l in &leaves {
        for k in 0..l.len {
            write_clean(stage, csum, ino, 0, PhysBlock(l.pblk + k));
        }
    }
    ext4_layout::superblock::field::s_orphan_file_inum.set(stage.sb_mut(), ino.get());
    stage.mark_inode(ino, true, false);
    Some(())
}

/// Fixes the orphan file findings of pass 5 (`mine`), as e2fsck's
/// -y answers do after its passes.
pub fn fix<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding]) {
    let (st, stage, fixed) = (r.st, &mut *r.stage, &mut r.fixed);
    let fs = &st.fs;
    let orphan_codes = [
        Code::OrphanFileWithoutJournal,
        Code::OrphanBlockDirty,
        Code::OrphanFileCorrupted,
        Code::OrphanPresentCleanFile,
        Code::OrphanPresentNoFile,
    ];
    let ours: Vec<&'a Finding> = mine
        .iter()
        .copied()
        .filter(|f| orphan_codes.contains(&f.code))
        .collect();
    if ours.is_empty() {
        return;
    }
    let has = |c: Code| ours.iter().any(|f| f.code == c);
    let present = RoCompatFeatures::ORPHAN_PRESENT.0;
    let ino = Ino::new(fs.sb().s_orphan_file_inum()).filter(|i| i.get() <= fs.geo.inodes_count);
    let done = if has(Code::OrphanFileWithoutJournal) {
        // No journal, no use for the file: it goes, with the features.
        if let Some(ino) = ino {
            forget_blocks(stage, ino);
            if let Ok(r) = stage.inode(ino) {
                r.fill(0);
            }
            stage.mark_inode(ino, false, false);
        }
        clear_feature(stage, sbf::COMPAT, CompatFeatures::ORPHAN_FILE.0);
        clear_feature(stage, sbf::RO_COMPAT, present);
        true
    } else if has(Code::OrphanFileCorrupted) || has(Code::OrphanBlockDirty) {
        let csum = fs.metadata_csum().then_some(fs.geo.csum_seed);
        match layout(fs, stage) {
            // Whole: every block is rewritten empty.
            Some((ino, gen, blocks)) => {
                for b in blocks {
                    write_clean(stage, csum, ino, gen, b);
                }
                clear_feature(stage, sbf::RO_COMPAT, present);
                true
            }
            // Holes or a wrong size: a new file.
            None => {
                let ok = ino.is_some_and(|ino| recreate(st, stage, ino).is_some());
                if ok {
                    clear_feature(stage, sbf::RO_COMPAT, present);
                }
                ok
            }
        }
    } else {
        clear_feature(stage, sbf::RO_COMPAT, present);
        true
    };
    if done {
        fixed.extend(ours);
    }
}
