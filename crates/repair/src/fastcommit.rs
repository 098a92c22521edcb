//! Fast commits (jbd2's `fast_commit` feature): after the regular
//! transactions, the journal's last blocks may hold a log of small
//! changes (extents added or removed, names linked or unlinked, inodes
//! rewritten), each a tag, a length and a value. A log counts up to the
//! last tail tag whose transaction id and checksum match; replay then
//! applies its tags in order, as e2fsck does after a regular replay.

use ext4_layout::types::Ino;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

use ext4_layout::csum::crc32c_raw;
use ext4_layout::extent;
use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::{field, I_BLOCK, I_BLOCK_OFFSET};
use ext4_layout::inode::{flags, FileType};
use ext4_layout::journal::fast_commit::{self as fc, Tag};

use super::stage::Staging;
use check_core::fs::Fs;
use check_core::walk::LeafExtent;

/// One change of a fast commit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Blocks mapped into a file (replacing what was mapped there).
    AddRange { ino: Ino, ext: LeafExtent },
    /// A logical range unmapped.
    DelRange { ino: Ino, lblk: u64, len: u64 },
    /// A name linked (created or hard-linked) in a directory.
    Link {
        parent: Ino,
        ino: Ino,
        name: Vec<u8>,
    },
    /// A name removed from a directory.
    Unlink {
        parent: Ino,
        /// The inode the record names (the unlink goes by name).
        ino: u32,
        name: Vec<u8>,
    },
    /// An inode's fields as they were at the commit.
    Inode { ino: Ino, raw: Vec<u8> },
    /// The end of one fast commit.
    Tail,
}

/// The validated log: the changes of every fast commit up to the last
/// tail that matches, read from the fast commit blocks `blocks` (in
/// order). `expected_tid` is the transaction the log must continue.
pub fn scan(blocks: &[Vec<u8>], expected_tid: u32) -> Vec<Change> {
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let mut crc = 0u32;
    if !blocks.first().is_some_and(|b| fc::starts_with_head(b)) {
        return out;
    }
    for b in blocks {
        let mut records = fc::Records::new(b);
        for rec in records.by_ref() {
            match rec.decode() {
                Some(Tag::Head { features, tid }) => {
                    if features != 0 || tid != expected_tid {
                        return out;
                    }
                    crc = crc32c_raw(crc, rec.bytes);
                }
                Some(Tag::Tail { tid, crc: stored }) => {
                    // The checksum covers the tail's tag, length and tid.
                    crc = crc32c_raw(crc, &rec.bytes[..fc::TL_SIZE + 4]);
                    if tid != expected_tid || stored != crc {
                        return out;
                    }
                    pending.push(Change::Tail);
                    out.append(&mut pending);
                    crc = 0;
                }
                Some(Tag::Pad) => crc = crc32c_raw(crc, rec.bytes),
                Some(tag) => {
                    crc = crc32c_raw(crc, rec.bytes);
                    pending.extend(change_of(tag));
                }
                None => return out,
            }
        }
        if records.cut_short() {
            return out;
        }
    }
    out
}

/// The change a record asks for; none for a record naming inode 0, which
/// no change can apply to.
fn change_of(tag: Tag<'_>) -> Option<Change> {
    Some(match tag {
        Tag::AddRange { ino, extent } => Change::AddRange {
            ino: Ino::new(ino)?,
            ext: LeafExtent {
                lblk: u64::from(extent.ee_block),
                pblk: extent.start,
                len: u64::from(extent.len()),
                uninit: extent.is_uninit(),
            },
        },
        Tag::DelRange { ino, lblk, len } => Change::DelRange {
            ino: Ino::new(ino)?,
            lblk: u64::from(lblk),
            len: u64::from(len),
        },
        Tag::Dentry {
            tag,
            parent,
            ino,
            name,
        } => {
            let name = name.to_vec();
            let parent = Ino::new(parent)?;
            if tag == fc::TAG_UNLINK {
                Change::Unlink { parent, ino, name }
            } else {
                let ino = Ino::new(ino)?;
                Change::Link { parent, ino, name }
            }
        }
        Tag::Inode { ino, raw } => Change::Inode {
            ino: Ino::new(ino)?,
            raw: raw.to_vec(),
        },
        Tag::Head { .. } | Tag::Tail { .. } | Tag::Pad => return None,
    })
}

/// Removes `[lblk, lblk + len)` from an extent list; with `add`, maps
/// `add` there instead. The list stays sorted, without empty extents,
/// neighbours that continue each other merged.
fn modify(list: &mut Vec<LeafExtent>, lblk: u64, len: u64, add: Option<LeafExtent>) {
    let end = lblk + len;
    let mut out = Vec::with_capacity(list.len() + 2);
    for &e in list.iter() {
        let e_end = e.lblk + e.len;
        if e_end <= lblk || e.lblk >= end {
            out.push(e);
            continue;
        }
        if e.lblk < lblk {
            out.push(LeafExtent {
                len: lblk - e.lblk,
                ..e
            });
        }
        if e_end > end {
            let skip = end - e.lblk;
            out.push(LeafExtent {
                lblk: end,
                pblk: e.pblk + skip,
                len: e_end - end,
                uninit: e.uninit,
            });
        }
    }
    if let Some(a) = add.filter(|a| a.len > 0) {
        out.push(a);
    }
    out.sort_by_key(|e| e.lblk);
    let mut merged: Vec<LeafExtent> = Vec::with_capacity(out.len());
    for e in out {
        match merged.last_mut() {
            Some(m)
                if m.lblk + m.len == e.lblk && m.pblk + m.len == e.pblk && m.uninit == e.uninit =>
            {
                m.len += e.len
            }
            _ => merged.push(e),
        }
    }
    *list = merged;
}

/// Applies a validated log to the staged file system. Returns how many
/// changes were applied; a change that cannot be applied (a name in an
/// inline directory, say) is skipped, as e2fsck goes on past it.
pub fn apply<'f>(fs: &'f Fs, stage: &mut Staging<'f>, log: &[Change]) -> io::Result<usize> {
    // Blocks the log maps are in use, whatever the bitmaps say.
    for c in log {
        if let Change::AddRange { ext, .. } = c {
            for b in ext.pblk..ext.pblk + ext.len {
                stage.reserve_block(ext4_layout::types::PhysBlock(b));
            }
        }
    }
    // What the ranges' inodes held before, to bring the bitmaps up to date
    // afterwards (as e2fsck marks them while it replays).
    let bits = fs.geo.cluster_bits;
    let clusters_of = |stage: &mut Staging<'f>, ino: Ino| -> BTreeSet<u64> {
        super::map::all_blocks_of(stage, ino)
            .map(|v| v.into_iter().map(|b| b.0 >> bits).collect())
            .unwrap_or_default()
    };
    let mut before: BTreeMap<Ino, BTreeSet<u64>> = BTreeMap::new();
    for c in log {
        if let Change::AddRange { ino, .. } | Change::DelRange { ino, .. } = c {
            if !before.contains_key(ino) {
                let b = clusters_of(stage, *ino);
                before.insert(*ino, b);
            }
        }
    }
    let mut cached: Option<(Ino, Vec<LeafExtent>)> = None;
    let mut applied = 0;
    for c in log {
        // The extents gathered for one inode are written when the log
        // moves on to something else.
        let keep = match c {
            Change::AddRange { ino, .. } | Change::DelRange { ino, .. } => Some(*ino),
            Change::Inode { ino, .. } => Some(*ino),
            _ => None,
        };
        if cached.as_ref().is_some_and(|(i, _)| Some(*i) != keep) {
            if let Some((i, list)) = cached.take() {
                flush(stage, i, &list)?;
            }
        }
        let ok = match c {
            Change::AddRange { ino, ext } => {
                let list = extent_list(stage, &mut cached, *ino);
                if let Some(list) = list {
                    modify(list, ext.lblk, ext.len, Some(*ext));
                }
                cached.is_some()
            }
            Change::DelRange { ino, lblk, len } => {
                let list = extent_list(stage, &mut cached, *ino);
                if let Some(list) = list {
                    modify(list, *lblk, *len, None);
                }
                cached.is_some()
            }
            Change::Link { parent, ino, name } => link(fs, stage, *parent, *ino, name).is_ok(),
            Change::Unlink { parent, name, .. } => {
                super::connect::remove_entry(stage, *parent, name).is_ok()
            }
            Change::Inode { ino, raw } => replay_inode(fs, stage, *ino, raw).is_ok(),
            Change::Tail => true,
        };
        if ok {
            applied += 1;
        }
    }
    if let Some((i, list)) = cached.take() {
        flush(stage, i, &list)?;
    }
    // Bitmaps: clusters the ranges freed and took, inodes in use or not.
    let mut freed = BTreeSet::new();
    let mut taken = BTreeSet::new();
    for (&ino, old) in &before {
        let now = clusters_of(stage, ino);
        freed.extend(old.difference(&now).copied());
        taken.extend(now.difference(old).copied());
    }
    let both: Vec<u64> = freed.intersection(&taken).copied().collect();
    for c in both {
        freed.remove(&c);
        taken.remove(&c);
    }
    let freed: Vec<u64> = freed.into_iter().collect();
    let taken: Vec<u64> = taken.into_iter().collect();
    super::account::account(fs, stage, &freed, &taken, None);
    let inodes: BTreeSet<Ino> = log
        .iter()
        .filter_map(|c| match c {
            Change::Inode { ino, .. } => Some(*ino),
            _ => None,
        })
        .collect();
    for ino in inodes {
        if let Ok(r) = stage.inode_copy(ino) {
            let links = field::i_links_count.get(&r);
            let dir = FileType::from_mode(field::i_mode.get(&r)) == Some(FileType::Directory);
            super::account::account(fs, stage, &[], &[], Some((ino.get(), dir, links == 0)));
        }
    }
    Ok(applied)
}

/// The extent list of `ino` being gathered, read from its tree first.
fn extent_list<'c, 'f>(
    stage: &mut Staging<'f>,
    cached: &'c mut Option<(Ino, Vec<LeafExtent>)>,
    ino: Ino,
) -> Option<&'c mut Vec<LeafExtent>> {
    if cached.as_ref().is_none_or(|(i, _)| *i != ino) {
        let list = super::map::extents_of_inode(stage, ino).ok()?;
        *cached = Some((ino, list));
    }
    cached.as_mut().map(|(_, l)| l)
}

fn flush<'f>(stage: &mut Staging<'f>, ino: Ino, list: &[LeafExtent]) -> io::Result<()> {
    super::tree::write_extent_tree(stage, ino, list)?;
    super::map::recount_i_blocks(stage, ino)
}

/// Links `name` in `parent` to `ino` (an entry of that name is replaced).
fn link<'f>(
    fs: &'f Fs,
    stage: &mut Staging<'f>,
    parent: Ino,
    ino: Ino,
    name: &[u8],
) -> io::Result<()> {
    let mode = field::i_mode.get(&stage.inode_copy(ino)?);
    let ft = FileType::from_mode(mode)
        .ok_or_else(|| io::Error::other("unknown file type"))?
        .dirent_code();
    let ft = if fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
        ft
    } else {
        0
    };
    {
        let p = stage.inode(parent)?;
        let pf = field::i_flags.get(p);
        if pf & flags::INLINE_DATA != 0 {
            return Err(io::Error::other("an inline directory"));
        }
        // An entry added out of hash order would break an index: the
        // directory is read linearly from now on.
        if pf & flags::INDEX != 0 {
            field::i_flags.set(p, pf & !flags::INDEX);
        }
    }
    super::connect::remove_entry(stage, parent, name)?;
    super::connect::add_entry(fs, stage, parent, ino, name, ft)
}

/// Replays an inode: its fields from the log, its block map or extent
/// tree as the range tags left it, `i_blocks` recounted.
fn replay_inode<'f>(fs: &'f Fs, stage: &mut Staging<'f>, ino: Ino, fc: &[u8]) -> io::Result<()> {
    let isz = fs.geo.inode_size as usize;
    let mut len = 128;
    if isz > 128 {
        let extra = usize::from(field::i_extra_isize_raw.get(fc));
        if extra < 4 || extra > isz - 128 {
            return Err(io::Error::other("bad extra inode size"));
        }
        len += extra;
    }
    if fc.len() < len {
        return Err(io::Error::other("short inode"));
    }
    {
        let r = stage.inode(ino)?;
        r[..I_BLOCK_OFFSET].copy_from_slice(&fc[..I_BLOCK_OFFSET]);
        let gen_on = field::i_generation.offset();
        r[gen_on..len].copy_from_slice(&fc[gen_on..len]);
        let fl = field::i_flags.get(r);
        if fl & flags::EXTENTS != 0 {
            let root = &mut r[I_BLOCK];
            if extent::field::eh_magic.get(root) != extent::EXT4_EXT_MAGIC {
                // An empty extent root in place of what was there.
                extent::put_header(root, 0, 4, 0);
            }
        } else if fl & flags::INLINE_DATA != 0 {
            r[I_BLOCK].copy_from_slice(&fc[I_BLOCK]);
        }
    }
    // An inode in use is not in its group's unused area (the bitmaps are
    // left to pass 5).
    if field::i_links_count.get(fc) != 0 {
        stage.note_inode_used(ino);
    }
    super::map::recount_i_blocks(stage, ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fc::{TAG_ADD_RANGE, TAG_HEAD, TAG_LINK, TAG_TAIL};

    fn tlv(tag: u16, val: &[u8]) -> Vec<u8> {
        let mut v = tag.to_le_bytes().to_vec();
        v.extend_from_slice(&(val.len() as u16).to_le_bytes());
        v.extend_from_slice(val);
        v
    }

    fn block(parts: &[Vec<u8>], tid: u32, good_crc: bool) -> Vec<u8> {
        let mut b: Vec<u8> = parts.concat();
        let crc = crc32c_raw(0, &b);
        let mut tail_tl = TAG_TAIL.to_le_bytes().to_vec();
        tail_tl.extend_from_slice(&8u16.to_le_bytes());
        tail_tl.extend_from_slice(&tid.to_le_bytes());
        let crc = crc32c_raw(crc, &tail_tl);
        b.extend_from_slice(&tail_tl);
        b.extend_from_slice(&(if good_crc { crc } else { crc ^ 1 }).to_le_bytes());
        b.resize(1024, 0);
        b
    }

    fn head(tid: u32) -> Vec<u8> {
        let mut v = 0u32.to_le_bytes().to_vec();
        v.extend_from_slice(&tid.to_le_bytes());
        tlv(TAG_HEAD, &v)
    }

    fn add_range(ino: u32, lblk: u32, len: u16, pblk: u32) -> Vec<u8> {
        let mut v = ino.to_le_bytes().to_vec();
        v.extend_from_slice(&lblk.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&pblk.to_le_bytes());
        tlv(TAG_ADD_RANGE, &v)
    }

    #[test]
    fn a_log_counts_up_to_its_last_good_tail() {
        let link = {
            let mut v = 2u32.to_le_bytes().to_vec();
            v.extend_from_slice(&12u32.to_le_bytes());
            v.extend_from_slice(b"new");
            tlv(TAG_LINK, &v)
        };
        let b = block(&[head(7), add_range(12, 0, 4, 100), link], 7, true);
        let log = scan(std::slice::from_ref(&b), 7);
        assert_eq!(log.len(), 3);
        assert!(matches!(log[0], Change::AddRange { ino, .. } if ino.get() == 12));
        assert_eq!(
            log[1],
            Change::Link {
                parent: Ino::ROOT,
                ino: Ino::new(12).expect("12 is an inode number"),
                name: b"new".to_vec()
            }
        );
        assert_eq!(log[2], Change::Tail);
        assert!(
            scan(std::slice::from_ref(&b), 8).is_empty(),
            "another transaction"
        );
        let bad = block(&[head(7), add_range(12, 0, 4, 100)], 7, false);
        assert!(scan(&[bad], 7).is_empty(), "a bad checksum");
        assert!(scan(&[vec![0u8; 1024]], 7).is_empty(), "no head");
    }

    #[test]
    fn ranges_replace_what_they_cover() {
        let e = |lblk, pblk, len| LeafExtent {
            lblk,
            pblk,
            len,
            uninit: false,
        };
        let mut l = vec![e(0, 100, 10)];
        modify(&mut l, 3, 2, Some(e(3, 500, 2)));
        assert_eq!(l, vec![e(0, 100, 3), e(3, 500, 2), e(5, 105, 5)]);
        modify(&mut l, 3, 2, Some(e(3, 103, 2)));
        assert_eq!(l, vec![e(0, 100, 10)], "merged back");
        modify(&mut l, 0, 4, None);
        assert_eq!(l, vec![e(4, 104, 6)]);
        modify(&mut l, 0, 100, None);
        assert!(l.is_empty());
    }
}
