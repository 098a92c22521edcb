//! Passes 3 and 4: the root and lost+found, reconnecting directories and
//! files, '..' entries, and link counts.

use crate::error::Error;
use std::io;

use ext4_layout::dirent::{self, rec_len_for, DirWalk, DIR_TAIL_SIZE};
use ext4_layout::features::{IncompatFeatures, RoCompatFeatures};
use ext4_layout::inode::field;
use ext4_layout::inode::{flags, FileType, Inode};
use ext4_layout::types::{Ino, PhysBlock};

use super::raw::{clear_inode, now, sbf, set_feature};
use super::stage::{Kind, Round, Staging};
use check_core::engine::CheckState;
use check_core::fs::Fs;
use check_core::problem::{Code, Finding};

/// The blocks of a directory, in logical order, as this round leaves it.
fn dir_blocks<'f>(stage: &mut Staging<'f>, dir: Ino) -> io::Result<Vec<(u64, PhysBlock)>> {
    super::map::blocks_of(stage, dir)
}

/// Where a name sits in a directory.
struct Found {
    /// The block holding the entry.
    pblk: PhysBlock,
    /// The entry's offset in it.
    at: usize,
    /// The inode it names.
    ino: Ino,
    /// The block's bytes.
    block: Vec<u8>,
}

/// Finds `name` in directory `dir`.
fn find_entry<'f>(stage: &mut Staging<'f>, dir: Ino, name: &[u8]) -> io::Result<Option<Found>> {
    let fs = stage.fs();
    let bs = fs.block_size();
    let filetype = fs.geo.incompat.contains(IncompatFeatures::FILETYPE);
    let mut buf = vec![0u8; bs];
    for (_, pblk) in dir_blocks(stage, dir)? {
        stage.read(pblk, &mut buf)?;
        let hit = DirWalk::new(&buf, bs, filetype)
            .find(|w| w.entry.inode() != 0 && w.entry.name() == name)
            .and_then(|w| Some((w.offset, Ino::new(w.entry.inode())?)));
        if let Some((at, ino)) = hit {
            return Ok(Some(Found {
                pblk,
                at,
                ino,
                block: buf,
            }));
        }
    }
    Ok(None)
}

/// Looks a name up in a directory: the inode it names.
pub(super) fn lookup<'f>(
    stage: &mut Staging<'f>,
    dir: Ino,
    name: &[u8],
) -> io::Result<Option<Ino>> {
    Ok(find_entry(stage, dir, name)?.map(|f| f.ino))
}

/// Adds an entry `name` -> `target` to directory `dir`, in the first
/// slot with room; a full directory gets one more block.
pub fn add_entry<'f>(
    fs: &'f Fs,
    stage: &mut Staging<'f>,
    dir: Ino,
    target: Ino,
    name: &[u8],
    ft: u8,
) -> io::Result<()> {
    let bs = fs.block_size();
    let csum = fs.metadata_csum();
    let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
    let need = rec_len_for(name.len());
    let blocks = dir_blocks(stage, dir)?;
    for &(_, pblk) in &blocks {
        let mut b = vec![0u8; bs];
        stage.read(pblk, &mut b)?;
        let mut at = 0;
        while at + 8 <= end {
            let rl = dirent::rec_len_at(&b, at, bs);
            if rl < 8 || at + rl > bs {
                break;
            }
            let e = dirent::inode_at(&b, at);
            let nl = dirent::name_len_at(&b, at);
            let used = if e == 0 { 0 } else { rec_len_for(nl) };
            if rl >= used + need {
                let (slot, slot_len) = if e == 0 {
                    (at, rl)
                } else {
                    dirent::set_rec_len(&mut b, at, bs, used);
                    (at + used, rl - used)
                };
                dirent::put_entry(&mut b, slot, bs, target.get(), slot_len, name, ft);
                for x in &mut b[slot + 8 + name.len()..slot + need] {
                    *x = 0;
                }
                stage.block(pblk, Kind::DirLeaf(dir))?.copy_from_slice(&b);
                return Ok(());
            }
            at += rl;
        }
    }
    // No room: a new block at the end of the directory.
    let next = blocks.last().map_or(0, |&(l, _)| l + 1);
    let goal = blocks.last().map_or(PhysBlock(0), |&(_, p)| p);
    let blk = stage
        .alloc_block(goal)
        .ok_or_else(|| io::Error::other("no free block to expand the directory"))?;
    {
        let b = stage.fresh_block(blk, Kind::DirLeaf(dir));
        dirent::put_entry(b, 0, bs, target.get(), end, name, ft);
        if csum {
            ext4_layout::dirent::write_tail(b, 0);
        }
    }
    super::map::map_block(stage, dir, next, blk)?;
    super::map::recount_i_blocks(stage, dir)?;
    super::raw::grow_size(stage.inode(dir)?, (next + 1) * bs as u64);
    Ok(())
}

/// Writes a new directory inode with one block holding '.' and '..'.
fn make_dir<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    ino: Ino,
    parent: Ino,
    mode: u16,
) -> io::Result<()> {
    let fs = &st.fs;
    let bs = fs.block_size();
    let csum = fs.metadata_csum();
    let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
    let ft = if fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
        2
    } else {
        0
    };
    let blk = stage
        .alloc_block(PhysBlock(0))
        .ok_or_else(|| io::Error::other("no free block for a directory"))?;
    {
        let b = stage.fresh_block(blk, Kind::DirLeaf(ino));
        dirent::put_dots(b, bs, ino.get(), parent.get(), end, ft);
        if csum {
            ext4_layout::dirent::write_tail(b, 0);
        }
    }
    // In use from now on, also in the eyes of its group's descriptor (a
    // group marked INODE_UNINIT, or the unused tail of its inode table,
    // would hide it from the next check).
    stage.mark_inode(ino, true, true);
    stage.note_inode_used(ino);
    let isz = fs.geo.inode_size as usize;
    let t = now();
    let r = stage.inode(ino)?;
    r.fill(0);
    field::i_mode.set(r, mode);
    field::i_size_lo.set(r, bs as u32);
    for time in ext4_layout::inode::TIMES {
        time.set(r, t);
    }
    field::i_links_count.set(r, 2);
    field::i_blocks_lo.set(r, (bs / 512) as u32 * fs.geo.cluster_ratio);
    if isz > 128 {
        field::i_extra_isize_raw.set(r, 32.min((isz - 128) as u16));
    }
    if fs.geo.ro_compat.contains(RoCompatFeatures::BIGALLOC) {
        // Block maps cannot address clusters: one extent. (Elsewhere new
        // directories are block-mapped, as e2fsck makes them.)
        field::i_flags.set(r, flags::EXTENTS);
        let leaf = check_core::walk::LeafExtent {
            lblk: 0,
            pblk: blk.0,
            len: 1,
            uninit: false,
        };
        super::tree::write_extent_tree(stage, ino, &[leaf])?;
    } else {
        ext4_layout::inode::i_block_word(0).set(r, blk.0 as u32);
    }
    Ok(())
}

/// The round's view of lost+found.
pub struct LostFound {
    ino: Option<Ino>,
    tried: bool,
}

impl LostFound {
    /// Nothing looked up yet.
    pub fn new() -> Self {
        LostFound {
            ino: None,
            tried: false,
        }
    }

    /// /lost+found, created if it is missing (a non-directory of that name
    /// is unlinked first).
    pub fn get<'f>(&mut self, st: &'f CheckState, stage: &mut Staging<'f>) -> Option<Ino> {
        if self.tried {
            return self.ino;
        }
        self.tried = true;
        if !stage.is_dir(Ino::ROOT) {
            return None;
        }
        if let Ok(Some(i)) = lookup(stage, Ino::ROOT, b"lost+found") {
            let ok = stage.is_dir(i)
                && stage
                    .inode_copy(i)
                    .ok()
                    .and_then(|r| {
                        Inode::new(&r)
                            .map(|x| !x.has_flag(flags::INLINE_DATA) && !x.has_flag(flags::ENCRYPT))
                    })
                    .unwrap_or(false);
            if ok {
                self.ino = Some(i);
                return self.ino;
            }
            // Not usable: unlink it from the root.
            if remove_entry(stage, Ino::ROOT, b"lost+found").is_ok() {
                adjust_links(stage, i.get(), -1);
            }
        }
        let ino = stage.alloc_inode(Ino::ROOT)?;
        make_dir(st, stage, ino, Ino::ROOT, 0o40700).ok()?;
        let ft = if st.fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
            2
        } else {
            0
        };
        add_entry(&st.fs, stage, Ino::ROOT, ino, b"lost+found", ft).ok()?;
        self.ino = Some(ino);
        self.ino
    }
}

/// What a repair must do about /lost+found, which e2fsck creates
/// whenever it repairs: nothing when it is a usable directory; otherwise
/// the findings to report (an unusable entry, then the missing
/// directory). `None` also when the root is not a directory, or when
/// there is no room to create it (`Err` with the reason).
pub fn lost_found_findings<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
) -> Result<Vec<Finding>, Error> {
    if !stage.is_dir(Ino::ROOT) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    match lookup(stage, Ino::ROOT, b"lost+found") {
        Ok(Some(i)) => {
            let raw = stage.inode_copy(i)?;
            let inode = Inode::new(&raw).ok_or(Error::BadInode(i.get()))?;
            let code = if inode.has_flag(flags::INLINE_DATA) {
                Code::LostFoundInline
            } else if inode.has_flag(flags::ENCRYPT) {
                Code::LostFoundEncrypted
            } else if !stage.is_dir(i) {
                Code::LostFoundNotDir
            } else {
                return Ok(Vec::new());
            };
            out.push(Finding::new(code).ino(i.get()));
        }
        Ok(None) => {}
        Err(e) => return Err(Error::from(e)),
    }
    out.push(Finding::new(Code::NoLostFound));
    // Try it on this throwaway staging: only report what can be fixed.
    match LostFound::new().get(st, stage) {
        Some(_) => Ok(out),
        None => Err(Error::NoLostFound),
    }
}

/// Does what e2fsck does silently when it creates /lost+found: the
/// root's link count goes up by one, and the new inode and blocks are
/// marked in use in the bitmaps and counts. (Only when nothing else is
/// being fixed: the rewrite of the group summaries starts from what the
/// check found in use.)
fn settle_new_lost_found<'f>(st: &'f CheckState, stage: &mut Staging<'f>) {
    if let Ok(raw) = stage.inode(Ino::ROOT) {
        let links = field::i_links_count.get(raw);
        // A count of 1 means "too many to count" (dir_nlink).
        if links > 1 && links < u16::MAX {
            field::i_links_count.set(raw, links + 1);
        }
    }
    let _ = super::rebuild::rebuild_with_allocations(st, stage);
}

/// Clears the entry `name` of a directory.
pub fn remove_entry<'f>(stage: &mut Staging<'f>, dir: Ino, name: &[u8]) -> io::Result<()> {
    if let Some(mut f) = find_entry(stage, dir, name)? {
        dirent::set_inode(&mut f.block, f.at, 0);
        stage
            .block(f.pblk, Kind::DirLeaf(dir))?
            .copy_from_slice(&f.block);
    }
    Ok(())
}

/// Points the '..' entry of `dir` at `parent`.
fn fix_dotdot<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    dir: Ino,
    parent: Ino,
) -> io::Result<bool> {
    let raw = stage.inode_copy(dir)?;
    let inode = Inode::new(&raw).ok_or_else(|| io::Error::other("bad inode"))?;
    if inode.has_flag(flags::INLINE_DATA) {
        let r = stage.inode(dir)?;
        // An inline directory's '..' is i_block's first word.
        let word = ext4_layout::inode::i_block_word(0);
        let old = word.get(r);
        word.set(r, parent.get());
        adjust_links(stage, old, -1);
        adjust_links(stage, parent.get(), 1);
        return Ok(true);
    }
    let bs = st.fs.block_size();
    let ft = if st.fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
        2
    } else {
        0
    };
    for (_, pblk) in dir_blocks(stage, dir)? {
        let mut b = vec![0u8; bs];
        stage.read(pblk, &mut b)?;
        let mut at = 0;
        while at + 8 <= bs {
            let rl = dirent::rec_len_at(&b, at, bs);
            if rl < 8 || at + rl > bs {
                break;
            }
            if dirent::name_len_at(&b, at) == 2 && &b[at + 8..at + 10] == b".." {
                let old = dirent::inode_at(&b, at);
                dirent::set_inode(&mut b, at, parent.get());
                dirent::field::FILE_TYPE.set(&mut b[at..], ft);
                let kind = if inode.has_flag(flags::INDEX) {
                    Kind::DxRoot(dir)
                } else {
                    Kind::DirLeaf(dir)
                };
                stage.block(pblk, kind)?.copy_from_slice(&b);
                adjust_links(stage, old, -1);
                adjust_links(stage, parent.get(), 1);
                return Ok(true);
            }
            at += rl;
        }
    }
    Ok(false)
}

/// Moves inode `ino`'s link count by one as a link to it is made or
/// removed, as e2fsck does while it reconnects and fixes '..' entries (a
/// count of 65535 is not raised, 0 not lowered). `ino` is the raw number
/// an entry held: 0 (no inode) and numbers past the inode count are left.
fn adjust_links<'f>(stage: &mut Staging<'f>, ino: u32, by: i32) {
    let Some(ino) = Ino::new(ino).filter(|i| i.get() <= stage.fs().geo.inodes_count) else {
        return;
    };
    if let Ok(raw) = stage.inode(ino) {
        let n = field::i_links_count.get(raw);
        match by {
            1 if n != u16::MAX => field::i_links_count.set(raw, n + 1),
            -1 if n != 0 => field::i_links_count.set(raw, n - 1),
            _ => {}
        }
    }
}

/// The file type code of an inode's mode.
fn type_of<'f>(stage: &mut Staging<'f>, ino: Ino, filetype: bool) -> u8 {
    if !filetype {
        return 0;
    }
    stage
        .inode_copy(ino)
        .ok()
        .and_then(|r| Inode::new(&r).and_then(|i| i.file_type()))
        .map_or(0, FileType::dirent_code)
}

/// Links `ino` into lost+found as "#ino".
fn reconnect<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    lf: &mut LostFound,
    ino: Ino,
) -> Option<Ino> {
    let l = lf.get(st, stage)?;
    let filetype = st.fs.geo.incompat.contains(IncompatFeatures::FILETYPE);
    let ft = type_of(stage, ino, filetype);
    let name = format!("#{ino}");
    add_entry(&st.fs, stage, l, ino, name.as_bytes(), ft).ok()?;
    Some(l)
}

/// Pass 3's repairs.
pub fn fix_pass3<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding]) {
    let (st, stage, fixed) = (r.st, &mut *r.stage, &mut r.fixed);
    let mut lf = LostFound::new();
    for f in mine {
        if f.code == Code::NoRootInode {
            if make_dir(st, stage, Ino::ROOT, Ino::ROOT, 0o40755).is_ok() {
                fixed.push(f);
            }
            // Everything else waits for the next check.
            return;
        }
    }
    for f in mine {
        let ok = match f.code {
            Code::UnconnectedDir => f.inode().is_some_and(|d| {
                reconnect(st, stage, &mut lf, d).is_some_and(|l| {
                    adjust_links(stage, d.get(), 1);
                    fix_dotdot(st, stage, d, l).unwrap_or(false)
                })
            }),
            Code::BadDotDot => match (
                f.inode(),
                f.expected().and_then(|p| Ino::new(u32::try_from(p).ok()?)),
            ) {
                (Some(d), Some(p)) => fix_dotdot(st, stage, d, p).unwrap_or(false),
                _ => false,
            },
            Code::RehashDir => f
                .inode()
                .is_some_and(|d| super::rehash::rebuild(&st.fs, stage, d).is_ok()),
            Code::NoLostFound
            | Code::LostFoundNotDir
            | Code::LostFoundInline
            | Code::LostFoundEncrypted => {
                lf.get(st, stage).is_some() && {
                    if f.code == Code::NoLostFound {
                        settle_new_lost_found(st, stage);
                    }
                    true
                }
            }
            Code::NonUniqueFile | Code::DuplicateDirent | Code::NonUniqueFileNoRename => f
                .directory()
                .or(f.inode())
                .is_some_and(|d| super::dirs::dedup(st, stage, d).is_ok()),
            _ => false,
        };
        if ok {
            fixed.push(f);
        }
    }
}

/// Pass 4's repairs.
pub fn fix_pass4<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding], all: &'a [Finding]) {
    let (st, stage, fixed) = (r.st, &mut *r.stage, &mut r.fixed);
    let fs = &st.fs;
    let mut lf = LostFound::new();
    for f in mine {
        let ok = match f.code {
            Code::BadRefCount | Code::DirOverflowRefCount => match (f.inode(), f.expected()) {
                (Some(ino), Some(n)) => stage
                    .inode(ino)
                    .map(|raw| field::i_links_count.set(raw, n.min(u64::from(u16::MAX)) as u16))
                    .is_ok(),
                _ => false,
            },
            Code::UnattachedInode => f.inode().is_some_and(|ino| {
                let zero_len = all
                    .iter()
                    .find(|z| z.code == Code::ZeroLenInode && z.inode() == Some(ino));
                if let Some(z) = zero_len {
                    // Cleared: what was fixed is the zero-length inode,
                    // as e2fsck says it, not a reconnection.
                    if stage
                        .inode(ino)
                        .map(|raw| clear_inode(raw, ino.get(), fs.geo.first_ino, now()))
                        .is_ok()
                    {
                        fixed.push(z);
                    }
                    false
                } else {
                    // Once reconnected, a file other than a directory has
                    // exactly one link: its new entry in lost+found. A
                    // directory also counts the '..' of its subdirectories,
                    // which the next check settles.
                    reconnect(st, stage, &mut lf, ino).is_some()
                        && stage
                            .inode(ino)
                            .map(|raw| {
                                if FileType::from_mode(field::i_mode.get(raw))
                                    != Some(FileType::Directory)
                                {
                                    field::i_links_count.set(raw, 1);
                                }
                            })
                            .is_ok()
                }
            }),
            Code::DirNlinkFeature => {
                set_feature(stage, sbf::RO_COMPAT, RoCompatFeatures::DIR_NLINK.0);
                true
            }
            // The inode holds no attribute's value: a regular file.
            Code::EaInodeSpuriousFlag => f.inode().is_some_and(|ino| {
                stage
                    .inode(ino)
                    .map(|raw| super::raw::set_flags(raw, 0, flags::EA_INODE))
                    .is_ok()
            }),
            Code::EaInodeRefCount => match (f.inode(), f.expected()) {
                (Some(ino), Some(n)) => stage
                    .inode(ino)
                    .map(|raw| {
                        ext4_layout::inode::EA_INODE_REFCOUNT.set(raw, n);
                    })
                    .is_ok(),
                _ => false,
            },
            _ => false,
        };
        if ok {
            fixed.push(f);
        }
    }
}
