//! Checking one directory block: its checksum, its entries, '.' and '..',
//! and what each entry points at. The result records everything that
//! depends on the order blocks are processed in, so it can be applied
//! later in e2fsck's order whatever thread produced it.

use ext4_layout::bytes::{le_u16, le_u32, le_u8};
use ext4_layout::dirent::{decode_rec_len, leaf_checksum, DIR_TAIL_SIZE};
use ext4_layout::dirhash::{dirhash, version};
use ext4_layout::features::IncompatFeatures;
use ext4_layout::group_desc::BG_INODE_UNINIT;
use ext4_layout::htree::{DxEntries, DxNode, DxRoot};
use ext4_layout::inode::{flags, inode_csum_seed};

use super::badinode::{process_bad_inode, BadInodeOutcome};
use super::ctx::{P2Ctx, TailStatus};
use crate::error::InodeReadError;
use crate::io::Io;
use crate::pass1::DirMeta;
use crate::pass1::{BlockKey, DirWork};
use crate::problem::{Code, Finding};

/// What kind of htree block this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DxKind {
    /// The root (logical block 0).
    Root,
    /// An interior index node.
    Node,
    /// A leaf of names.
    Leaf,
}

/// The htree facts of one block, applied to the directory's records later.
#[derive(Clone, Debug)]
pub struct DxBlock {
    /// Root, node or leaf.
    pub kind: DxKind,
    /// Lowest name hash in a leaf (u32::MAX when empty).
    pub min_hash: u32,
    /// Highest name hash in a leaf.
    pub max_hash: u32,
    /// For index blocks: where the entries start.
    pub entries_start: usize,
    /// For index blocks: `limit` and `count`.
    pub limit: u16,
    /// Entries in use.
    pub count: u16,
    /// For index blocks: (hash, logical block) of each entry.
    pub entries: Vec<(u32, u32)>,
    /// Whether the index block failed its checksum.
    pub failed_csum: bool,
}

/// What a block leaves behind when it has something that must be applied
/// in e2fsck's block order: findings, a fatal problem, a duplicate name
/// or htree facts. Most blocks leave nothing.
#[derive(Debug, Default)]
pub struct Special {
    /// Findings, in entry order.
    pub findings: Vec<Finding>,
    /// A fatal problem that stops the check after this block.
    pub abort: Option<String>,
    /// The first duplicate name found in this block.
    pub dup: Option<String>,
    /// Htree facts, for indexed directories.
    pub dx: Option<DxBlock>,
}

/// An entry naming a directory (other than '.' and '..'): which of these
/// comes first in e2fsck's order decides the directory's parent.
#[derive(Clone, Copy, Debug)]
pub struct DirLink {
    /// The directory named.
    pub target: u32,
    /// The directory holding the entry.
    pub dir: u32,
    /// The block holding the entry (0 for inline data).
    pub pblk: u64,
    /// Its logical block.
    pub lblk: u32,
    /// The entry's byte offset in the block (or in the inline data).
    pub off: u32,
}

impl DirLink {
    /// The link's place in e2fsck's order.
    pub fn key(&self, dir_index: bool) -> (BlockKey, u32) {
        (
            BlockKey {
                class: u8::from(dir_index && self.lblk != 0),
                pblk: self.pblk,
                ino: self.dir,
                lblk: u64::from(self.lblk),
            },
            self.off,
        )
    }
}

/// A worker's pass-2 output and scratch space.
#[derive(Default)]
pub struct P2Acc {
    /// Entries naming directories.
    pub links: Vec<DirLink>,
    /// Each directory's '..': (directory, target).
    pub dotdots: Vec<(u32, u32)>,
    /// Blocks with something to apply in order.
    pub specials: Vec<(BlockKey, Special)>,
    /// Names of the current block, for the duplicate test:
    /// (hash, entry index, start in `arena`, length, offset in block).
    names: Vec<(u64, u32, u32, u16, u32)>,
    arena: Vec<u8>,
}

/// Where the tail of a leaf stands (the library's walk over raw rec_lens).
pub fn tail_status(block: &[u8]) -> TailStatus {
    let bs = block.len();
    let top = bs - DIR_TAIL_SIZE;
    let mut pos = 0usize;
    while pos < top {
        let rl = usize::from(le_u16(block, pos + 4));
        if rl < 8 || rl % 4 != 0 {
            return TailStatus::Corrupted;
        }
        pos += rl;
    }
    if pos > bs {
        return TailStatus::Corrupted;
    }
    if pos != top {
        return TailStatus::NoSpace;
    }
    if le_u32(block, top) != 0
        || le_u16(block, top + 4) != DIR_TAIL_SIZE as u16
        || le_u16(block, top + 6) != 0xDE00
    {
        return TailStatus::NoSpace;
    }
    TailStatus::Found
}

/// The library's whole-block checksum test: a leaf tail, else an index
/// block's tail, else failure.
fn block_csum_ok(block: &[u8], seed: u32) -> bool {
    if tail_status(block) == TailStatus::Found {
        let stored = le_u32(block, block.len() - 4);
        return stored == leaf_checksum(block, seed);
    }
    let bs = block.len();
    let rl0 = usize::from(le_u16(block, 4));
    let entries = if rl0 == bs && le_u16(block, 6) == 0 {
        DxNode::new(block).map(|n| n.entries())
    } else if rl0 == 12 {
        let rl1 = usize::from(le_u16(block, 16));
        if rl1 != bs - 12 || le_u32(block, 24) != 0 || le_u8(block, 29) != 8 {
            return false;
        }
        DxRoot::new(block).map(|r| r.entries())
    } else {
        return false;
    };
    let Some(e) = entries else {
        return false;
    };
    let max_sane = (bs - e.offset()) / 8;
    if usize::from(e.limit()) > max_sane || usize::from(e.count()) > max_sane {
        return false;
    }
    e.checksum_ok(seed)
}

fn name_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Case-folds a name for hashing and comparison (lower-case; names that
/// are not UTF-8 are used as they are).
pub fn casefold(name: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(name) {
        Ok(s) => s
            .chars()
            .flat_map(char::to_lowercase)
            .collect::<String>()
            .into_bytes(),
        Err(_) => name.to_vec(),
    }
}

/// Whether a name is well-formed UTF-8 up to its first NUL.
fn utf8_ok(name: &[u8]) -> bool {
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    std::str::from_utf8(&name[..end]).is_ok()
}

/// Where the synthetic '.' of an inline directory is said to be ('..' is
/// one more).
const SYNTHETIC_DOT: u32 = u32::MAX - 1;

/// A 64-bit FNV-1a hash of a name, for the duplicate test.
fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl P2Acc {
    /// Finds the first entry (in entry order) whose name repeats an
    /// earlier one; returns where it is (see `names`).
    fn first_duplicate(&mut self) -> Option<u32> {
        if self.names.len() < 2 {
            return None;
        }
        self.names.sort_unstable_by_key(|n| (n.0, n.1));
        let key = |arena: &[u8], n: &(u64, u32, u32, u16, u32)| -> Vec<u8> {
            arena[n.2 as usize..n.2 as usize + usize::from(n.3)].to_vec()
        };
        let mut best: Option<(u32, u32)> = None;
        let mut i = 0;
        while i < self.names.len() {
            let mut j = i + 1;
            while j < self.names.len() && self.names[j].0 == self.names[i].0 {
                j += 1;
            }
            if j - i > 1 {
                // Same hash: compare the names themselves (in index order).
                for b in i + 1..j {
                    let kb = key(&self.arena, &self.names[b]);
                    if (i..b).any(|a| key(&self.arena, &self.names[a]) == kb)
                        && best.is_none_or(|x| self.names[b].1 < x.0)
                    {
                        best = Some((self.names[b].1, self.names[b].4));
                    }
                }
            }
            i = j;
        }
        best.map(|(_, at)| at)
    }
}

/// Checks one directory block. `data` is the block (or, for an inline
/// directory, `i_block` and the system.data value); `None` if it could
/// not be read.
pub fn check_block(
    cx: &P2Ctx<'_>,
    io: &mut Io<'_>,
    acc: &mut P2Acc,
    work: &DirWork,
    data: Option<&[u8]>,
) {
    let dir = &work.meta;
    let key = work.key(cx.dir_index);
    let mut findings: Vec<Finding> = Vec::new();
    let mut abort: Option<String> = None;
    let mut dup: Option<String> = None;
    let mut dx: Option<DxBlock> = None;
    check_block_inner(
        cx,
        io,
        acc,
        work,
        dir,
        data,
        &mut findings,
        &mut abort,
        &mut dup,
        &mut dx,
    );
    if !findings.is_empty() || abort.is_some() || dup.is_some() || dx.is_some() {
        acc.specials.push((
            key,
            Special {
                findings,
                abort,
                dup,
                dx,
            },
        ));
    }
}

#[allow(clippy::too_many_arguments)]
fn check_block_inner(
    cx: &P2Ctx<'_>,
    io: &mut Io<'_>,
    acc: &mut P2Acc,
    work: &DirWork,
    dir: &DirMeta,
    data: Option<&[u8]>,
    findings: &mut Vec<Finding>,
    abort: &mut Option<String>,
    dup_out: &mut Option<String>,
    dx_out: &mut Option<DxBlock>,
) {
    let fs = cx.fs;
    let geo = &fs.geo;
    let bs = fs.block_size();
    let ino = dir.ino;
    let lblk = work.lblk;
    let maps = cx.maps;
    if !maps.used(ino) {
        return;
    }
    let inline = dir.iflags & flags::INLINE_DATA != 0
        && geo.incompat.contains(IncompatFeatures::INLINE_DATA);
    let metadata_csum = fs.metadata_csum();
    let mut de_csum = if metadata_csum { DIR_TAIL_SIZE } else { 0 };
    let dx_csum = if metadata_csum { 8 } else { 0 };
    let inline_size = work.inline.as_ref().map_or(0, |d| d.len());
    if work.pblk == 0 && !inline {
        if !geo.incompat.contains(IncompatFeatures::LARGEDIR) {
            findings.push(Finding::new(Code::DirectoryHole).dir(ino).num(lblk));
        }
        return;
    }
    let mut failed_csum = false;
    let data: &[u8] = if inline {
        if inline_size % 4 != 0 || (inline_size > 60 && inline_size < 72) {
            findings.push(
                Finding::new(Code::BadInlineDirSize)
                    .dir(ino)
                    .num(inline_size as u64),
            );
        }
        work.inline.as_deref().unwrap_or(&[])
    } else {
        let Some(d) = data else {
            findings.push(Finding::new(Code::ReadDirBlock).dir(ino).blk(work.pblk));
            *abort = Some(format!(
                "cannot read block {} of directory {ino}",
                work.pblk
            ));
            return;
        };
        if metadata_csum {
            let seed = if dir.csum_ok {
                Some(inode_csum_seed(geo.csum_seed, ino, dir.generation))
            } else {
                None
            };
            failed_csum = seed.is_none_or(|s| !block_csum_ok(d, s));
        }
        d
    };
    let mut dot_state = if lblk == 0 { 0 } else { 2 };
    // Htree classification.
    let mut dx: Option<DxBlock> = None;
    if let Some(info) = dir.dx.as_ref().filter(|d| d.numblocks != 0) {
        if lblk >= info.numblocks {
            findings.push(Finding::new(Code::UnexpectedHtreeBlock).dir(ino).num(lblk));
            *abort = Some(format!(
                "directory {ino} has an unexpected htree block {lblk}"
            ));
            return;
        }
        let mut kind = DxKind::Leaf;
        if lblk == 0 {
            kind = DxKind::Root;
            let root = DxRoot::new(data);
            let max_levels = if geo.incompat.contains(IncompatFeatures::LARGEDIR) {
                3
            } else {
                2
            };
            if root.is_none_or(|rt| {
                rt.reserved_zero() != 0
                    || rt.info_length() < 8
                    || rt.indirect_levels() >= max_levels
            }) {
                findings.push(Finding::new(Code::HtreeBadRoot).dir(ino));
            }
        } else if le_u32(data, 0) == 0
            && decode_rec_len(le_u16(data, 4), bs) == bs
            && le_u8(data, 6) == 0
            && usize::from(le_u16(data, 8)) == (bs - (8 + dx_csum)) / 8
        {
            kind = DxKind::Node;
        }
        dx = Some(DxBlock {
            kind,
            min_hash: u32::MAX,
            max_hash: 0,
            entries_start: 0,
            limit: 0,
            count: 0,
            entries: Vec::new(),
            failed_csum: false,
        });
    }
    let is_leaf = dx.as_ref().is_none_or(|d| d.kind == DxKind::Leaf);
    if is_leaf && !inline && failed_csum && tail_status(data) == TailStatus::NoSpace {
        de_csum = 0;
        findings.push(Finding::new(Code::LeafMissingCsum).dir(ino).num(lblk));
    }
    if !is_leaf {
        de_csum = 0;
    }
    let (region_start, max_size) = if inline {
        if lblk == 0 {
            (0usize, 60usize.min(data.len()))
        } else {
            if inline_size <= 60 {
                return;
            }
            (60usize, data.len())
        }
    } else {
        (0, bs - de_csum)
    };
    let region = &data[region_start
        ..region_start
            + max_size
                .saturating_sub(region_start)
                .min(data.len() - region_start)];
    let region_len = if inline && lblk == 0 {
        60
    } else {
        region.len()
    };
    // Htree hash settings.
    let hash_version = dir.dx.as_ref().map(|d| {
        let v = d.hash_version;
        if v <= 2 && fs.sb().s_flags() & ext4_layout::superblock::FLAGS_UNSIGNED_HASH != 0 {
            v + 3
        } else {
            v
        }
    });
    let seed = fs.sb().s_hash_seed();
    let casefold_fs = geo.incompat.contains(IncompatFeatures::CASEFOLD);
    let cf_inode = casefold_fs && maps.inode_casefold.get(u64::from(ino - 1));
    let strict = fs.sb().s_encoding_flags() & 1 != 0;
    let cf_dir = cf_inode && strict;
    let casefolded = dir.iflags & flags::CASEFOLD != 0;
    let encrypted = dir.encrypted;
    // Names are checked against the encoding in strict mode, or when
    // asked (`-E check_encoding`).
    let check_names = cf_inode && (strict || cx.check_encoding);
    let hash_in_dirent = casefolded && dir.iflags & flags::ENCRYPT != 0;
    acc.names.clear();
    acc.arena.clear();
    let filetype = geo.incompat.contains(IncompatFeatures::FILETYPE);
    let first_ino = geo.first_ino;
    let icount = fs.sb().s_inodes_count();
    let mut offset = 0usize;
    let mut min_hash = u32::MAX;
    let mut max_hash = 0u32;
    let mut hash = 0u32;
    let mut index = 0u32;
    while offset < region_len {
        let extended = dot_state > 1 && hash_in_dirent;
        let min_len = if extended { 20 } else { 12 };
        // The entry: real, or the synthetic '.' and '..' of an inline dir.
        let mut entry_abs = region_start + offset;
        let (e_ino, rec_len, name_len, ftype, name): (u32, usize, usize, u8, &[u8]) =
            if inline && lblk == 0 && dot_state <= 1 {
                if dot_state == 0 {
                    (ino, 12, 1, if filetype { 2 } else { 0 }, b".")
                } else {
                    (le_u32(data, 0), 12, 2, if filetype { 2 } else { 0 }, b"..")
                }
            } else {
                let base = if inline && lblk == 0 {
                    offset.max(4)
                } else {
                    offset
                };
                if inline && lblk == 0 && offset < 4 {
                    offset = 4;
                }
                entry_abs = region_start + base;
                let remaining = region_len.saturating_sub(base);
                let e = &region[base.min(region.len())..];
                let rl = if remaining < 8 {
                    min_len
                } else {
                    decode_rec_len(le_u16(e, 4), bs)
                };
                let nl = usize::from(le_u8(e, 6));
                let min_for_name = (8 + nl + if extended { 8 } else { 0 } + 3) & !3;
                if base + rl > region_len || rl < min_len || rl % 4 != 0 || min_for_name > rl {
                    findings.push(
                        Finding::new(Code::DirCorrupted)
                            .dir(ino)
                            .num(lblk)
                            .num2((base + region_start) as u64),
                    );
                    *abort = Some(format!("directory {ino} block {lblk} is corrupt"));
                    break;
                }
                let name = e.get(8..8 + nl).unwrap_or(&[]);
                let ft = le_u8(e, 7);
                (le_u32(e, 0), rl, nl, ft, name)
            };
        let entry_off = offset;
        let mut skip_rest = false;
        // '.' and '..'.
        if dot_state == 0 {
            let problem = if e_ino == 0 {
                Some(Code::MissingDot)
            } else if name_len != 1 || name.first() != Some(&b'.') {
                Some(Code::FirstNotDot)
            } else if !inline && le_u8(region, entry_off + 9) != 0 {
                Some(Code::DotNullTerm)
            } else {
                None
            };
            if let Some(c) = problem {
                findings.push(Finding::new(c).dir(ino).str(name_of(name)));
            }
            if e_ino != ino {
                findings.push(Finding::new(Code::BadInodeDot).dir(ino).ino(e_ino));
            }
            if rec_len > 24 {
                findings.push(Finding::new(Code::SplitDot).dir(ino).num(rec_len as u64));
            }
        } else if dot_state == 1 {
            let problem = if e_ino == 0 {
                Some(Code::MissingDotDot)
            } else if name_len != 2 || name != b".." {
                Some(Code::SecondNotDotDot)
            } else if !inline && le_u8(region, entry_off + 10) != 0 {
                Some(Code::DotDotNullTerm)
            } else {
                None
            };
            match problem {
                Some(c) => findings.push(Finding::new(c).dir(ino).str(name_of(name))),
                None => acc.dotdots.push((ino, e_ino)),
            }
        } else if e_ino == ino {
            findings.push(Finding::new(Code::LinkDot).dir(ino).str(name_of(name)));
        }
        if e_ino != 0 {
            let mut problem = None;
            if (e_ino != 2 && e_ino < first_ino) || e_ino > icount || cx.special.contains(&e_ino) {
                problem = Some(Code::BadIno);
            } else if maps.inode_bb.get(u64::from(e_ino - 1)) {
                problem = Some(Code::BbInode);
            } else if dot_state > 1 && name == b"." {
                problem = Some(Code::DupDot);
            } else if dot_state > 1 && name == b".." {
                problem = Some(Code::DupDotDot);
            } else if dot_state > 1 && e_ino == 2 {
                problem = Some(Code::LinkRoot);
            } else if dot_state > 1 && name_len == 0 {
                problem = Some(Code::NullName);
            }
            if let Some(c) = problem {
                findings.push(Finding::new(c).dir(ino).ino(e_ino).str(name_of(name)));
                if c == Code::BadIno {
                    skip_rest = true;
                }
            }
            if !skip_rest {
                let mut bad = maps.is_bad(e_ino);
                if bad {
                    match process_bad_inode(cx, io, e_ino) {
                        BadInodeOutcome::Fatal(why) => {
                            *abort = Some(why);
                            break;
                        }
                        BadInodeOutcome::Reported {
                            findings: f,
                            still_bad,
                        } => {
                            findings.extend(f);
                            bad = still_bad;
                        }
                        BadInodeOutcome::Clean => bad = false,
                    }
                }
                // Entries into the unused part of a group.
                let g = (e_ino - 1) / geo.inodes_per_group;
                let gd = fs.gd(g);
                // In e2fsck's 32-bit arithmetic: an unused count larger
                // than the group wraps past every inode, marking none.
                let first_unused = (g * geo.inodes_per_group + 1 + geo.inodes_per_group)
                    .wrapping_sub(gd.itable_unused());
                if gd.has_flag(BG_INODE_UNINIT) {
                    findings.push(
                        Finding::new(Code::InorefBgInoUninit)
                            .dir(ino)
                            .ino(e_ino)
                            .str(name_of(name)),
                    );
                } else if e_ino >= first_unused {
                    findings.push(
                        Finding::new(Code::InorefInUnused)
                            .dir(ino)
                            .ino(e_ino)
                            .str(name_of(name)),
                    );
                }
                if !maps.used(e_ino) {
                    findings.push(
                        Finding::new(Code::UnusedInode)
                            .dir(ino)
                            .ino(e_ino)
                            .str(name_of(name)),
                    );
                }
                // File type.
                if !filetype {
                    if ftype != 0 {
                        findings.push(
                            Finding::new(Code::ClearFiletype)
                                .dir(ino)
                                .ino(e_ino)
                                .str(name_of(name)),
                        );
                    }
                } else {
                    let should = if maps.is_dir(e_ino) {
                        Some(2)
                    } else if maps.is_reg(e_ino) {
                        Some(1)
                    } else if bad {
                        Some(0)
                    } else {
                        match cx.mode_type(io, e_ino) {
                            Ok(t) => Some(t),
                            Err(why) => {
                                *abort = Some(why.to_string());
                                break;
                            }
                        }
                    };
                    if let Some(should) = should {
                        if ftype != should {
                            let code = if ftype != 0 {
                                Code::BadFiletype
                            } else {
                                Code::SetFiletype
                            };
                            findings.push(
                                Finding::new(code)
                                    .dir(ino)
                                    .ino(e_ino)
                                    .str(name_of(name))
                                    .num(u64::from(ftype))
                                    .num2(u64::from(should)),
                            );
                        }
                    }
                }
                // Names.
                if encrypted {
                    if dot_state > 1 {
                        if name_len < 16 {
                            findings.push(
                                Finding::new(Code::BadEncryptedName)
                                    .dir(ino)
                                    .num(name_len as u64),
                            );
                        }
                        match check_policy(cx, io, ino, e_ino, ftype) {
                            Ok(Some(c)) => findings
                                .push(Finding::new(c).dir(ino).ino(e_ino).str(name_of(name))),
                            Ok(None) => {}
                            Err(why) => {
                                *abort = Some(why.to_string());
                                break;
                            }
                        }
                    }
                } else {
                    if check_names && !utf8_ok(name) {
                        findings.push(
                            Finding::new(Code::BadEncodedName)
                                .dir(ino)
                                .str(name_of(name)),
                        );
                    }
                    if name.iter().any(|&b| b == b'/' || b == 0) {
                        findings.push(Finding::new(Code::BadName).dir(ino).str(name_of(name)));
                    }
                }
                // Htree hash of the entry.
                if let (Some(d), Some(v)) = (dx.as_mut(), hash_version) {
                    if d.kind == DxKind::Leaf || d.kind == DxKind::Root {
                        if v == version::SIPHASH {
                            if dot_state > 1 {
                                let at =
                                    if inline { 0 } else { entry_off } + 8 + ((name_len + 3) & !3);
                                hash = le_u32(region, at);
                            }
                        } else if casefolded && casefold_fs {
                            hash = dirhash(&casefold(name), v, &seed).map_or(0, |h| h.major);
                        } else {
                            hash = dirhash(name, v, &seed).map_or(0, |h| h.major);
                        }
                        min_hash = min_hash.min(hash);
                        max_hash = max_hash.max(hash);
                    }
                }
                if dot_state > 1 && maps.is_dir(e_ino) {
                    acc.links.push(DirLink {
                        target: e_ino,
                        dir: ino,
                        pblk: work.pblk,
                        lblk: lblk as u32,
                        off: entry_abs as u32,
                    });
                }
                let start = acc.arena.len() as u32;
                if cf_dir {
                    acc.arena.extend_from_slice(&casefold(name));
                } else {
                    acc.arena.extend_from_slice(name);
                }
                let klen = acc.arena.len() as u32 - start;
                let h = name_hash(&acc.arena[start as usize..]);
                // The synthetic '.' and '..' of an inline directory have
                // no place in the data.
                let at = if inline && lblk == 0 && dot_state <= 1 {
                    SYNTHETIC_DOT + dot_state as u32
                } else {
                    entry_abs as u32
                };
                acc.names.push((h, index, start, klen as u16, at));
                index += 1;
                cx.count_ref(e_ino);
            }
        }
        // Advance.
        if inline && lblk == 0 && dot_state <= 1 {
            if dot_state == 1 {
                offset = 4;
            }
        } else {
            offset += rec_len;
        }
        dot_state += 1;
    }
    // A duplicate name stops the test at the first one even when the
    // block goes on to fail.
    if let Some(at) = acc.first_duplicate() {
        let name = match at {
            SYNTHETIC_DOT => &b"."[..],
            x if x == SYNTHETIC_DOT + 1 => &b".."[..],
            off => {
                let off = off as usize;
                let nl = usize::from(le_u8(data, off + 6));
                data.get(off + 8..off + 8 + nl).unwrap_or(&[])
            }
        };
        *dup_out = Some(name_of(name));
    }
    if abort.is_some() {
        return;
    }
    if let Some(d) = dx.as_mut() {
        d.min_hash = min_hash;
        d.max_hash = max_hash;
        if d.kind != DxKind::Leaf {
            let entries: Option<DxEntries<'_>> = if d.kind == DxKind::Root {
                DxRoot::new(data).map(|rt| rt.entries())
            } else {
                DxNode::new(data).map(|n| n.entries())
            };
            if let Some(e) = entries {
                d.entries_start = e.offset();
                d.limit = e.limit();
                d.count = e.count();
                let room = (bs.saturating_sub(e.offset())) / 8;
                let n = usize::from(e.count()).min(room);
                d.entries = (0..n).map(|i| e.get(i)).collect();
            }
            d.failed_csum = failed_csum;
        }
    }
    if is_leaf && failed_csum {
        findings.push(Finding::new(Code::LeafOnlyCsumInvalid).dir(ino).num(lblk));
    }
    *dx_out = dx;
}

/// The encryption-policy check of an entry in an encrypted directory.
fn check_policy(
    cx: &P2Ctx<'_>,
    io: &mut Io<'_>,
    dir: u32,
    target: u32,
    ftype: u8,
) -> Result<Option<Code>, InodeReadError> {
    use crate::pass1::Policy;
    let (file, dpol) = cx.policies.pair(target, dir);
    match (file, dpol) {
        (Some(f), Some(d)) if f == d => Ok(None),
        (None, _) => {
            let needs = match ftype {
                1 | 2 | 7 => true,
                0 => {
                    if cx.maps.is_reg(target) || cx.maps.is_dir(target) {
                        true
                    } else {
                        let t = cx.mode_type(io, target)?;
                        matches!(t, 1 | 2 | 7)
                    }
                }
                _ => false,
            };
            Ok(needs.then_some(Code::UnencryptedFile))
        }
        (Some(Policy::Unrecognized), Some(Policy::Unrecognized)) => Ok(None),
        _ => Ok(Some(Code::InconsistentEncryptionPolicy)),
    }
}
