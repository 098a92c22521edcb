//! Checking one directory block: its checksum, its entries, '.' and '..',
//! and what each entry points at. The result records everything that
//! depends on the order blocks are processed in, so it can be applied
//! later in e2fsck's order whatever thread produced it.

use ext4_layout::dirent::{self, ft, leaf_checksum, DirEntry, DirTail, DIR_TAIL_SIZE};
use ext4_layout::dirhash::{dirhash, version};
use ext4_layout::features::IncompatFeatures;
use ext4_layout::group_desc::BG_INODE_UNINIT;
use ext4_layout::htree::{self, DxEntries, DxNode, DxRoot};
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
pub(crate) enum DxKind {
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
    pub(crate) kind: DxKind,
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
    pub dup: Option<Vec<u8>>,
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
    /// Under a repair: inodes whose entry's check deallocates them
    /// (e2fsck's deallocate_inode in pass 2).
    pub deallocated: Vec<u32>,
    /// Under a repair: directories whose '..' entry is not counted as a
    /// reference to the inode it is recorded as naming: (directory, what
    /// the entry counts for, 0 when it is cleared).
    pub dotdot_refs: Vec<(u32, u32)>,
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
        let rl = dirent::raw_rec_len_at(block, pos);
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
    if DirEntry::new(&block[top..], bs, true).is_some_and(|e| e.is_tail()) {
        TailStatus::Found
    } else {
        TailStatus::NoSpace
    }
}

/// The library's whole-block checksum test: a leaf tail, else an index
/// block's tail, else failure.
fn block_csum_ok(block: &[u8], seed: u32) -> bool {
    if tail_status(block) == TailStatus::Found {
        return DirTail::find(block)
            .is_some_and(|t| t.det_checksum() == leaf_checksum(block, seed));
    }
    let bs = block.len();
    let rl0 = dirent::raw_rec_len_at(block, 0);
    let entries =
        if rl0 == bs && dirent::name_len_at(block, 0) == 0 && dirent::file_type_at(block, 0) == 0 {
            DxNode::new(block).map(|n| n.entries())
        } else if rl0 == 12 {
            let root = DxRoot::new(block);
            if dirent::raw_rec_len_at(block, 12) != bs - 12
                || root.is_none_or(|r| r.reserved_zero() != 0 || r.info_length() != 8)
            {
                return false;
            }
            root.map(|r| r.entries())
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

fn name_of(b: &[u8]) -> Vec<u8> {
    b.to_vec()
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
pub(crate) fn check_block(
    cx: &P2Ctx<'_>,
    io: &mut Io<'_>,
    acc: &mut P2Acc,
    work: &DirWork,
    data: Option<&[u8]>,
) {
    let mut out = Special::default();
    // Under a repair, a block the disk will not give whole is read sector
    // by sector (the sectors that fail read as zeros) and judged as that,
    // as e2fsck -y ignores the error and rewrites the block; the repair
    // writes it as read here.
    let salvaged = (data.is_none()
        && cx.yes
        && work.pblk != 0
        && work.inline.is_none()
        && work.pblk < cx.fs.geo.blocks_count)
        .then(|| {
            let mut b = vec![0u8; cx.fs.block_size()];
            let failed = crate::io::salvage_block(cx.fs, work.pblk, &mut b);
            out.findings.push(
                Finding::new(Code::DirBlockUnreadable)
                    .dir(work.meta.ino)
                    .blk(work.pblk)
                    .sectors(failed as u64, b.len().div_ceil(crate::io::SECTOR) as u64),
            );
            b
        });
    let data = salvaged.as_deref().or(data);
    if cx.maps.used(work.meta.ino) {
        BlockCheck {
            cx,
            io,
            acc,
            work,
            out: &mut out,
            cleared: false,
        }
        .run(data);
    }
    if !out.findings.is_empty() || out.abort.is_some() || out.dup.is_some() || out.dx.is_some() {
        acc.specials.push((work.key(cx.dir_index), out));
    }
}

/// The check of a block ends here (a fatal problem was recorded).
struct Stop;

/// What the tests of '.' and '..' (and of an entry naming its own
/// directory) leave of an entry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dots {
    /// Nothing wrong found.
    Kept,
    /// A bad second entry, which a repair rewrites as '..'.
    Rewritten,
    /// A later entry naming the directory itself, which a repair clears.
    Cleared,
}

/// One directory block under check, and what it has found so far.
struct BlockCheck<'c, 'a, 'f> {
    cx: &'c P2Ctx<'a>,
    io: &'c mut Io<'f>,
    acc: &'c mut P2Acc,
    work: &'c DirWork,
    out: &'c mut Special,
    /// The entry just checked was cleared by a yes answer.
    cleared: bool,
}

/// Where a block's entries are, once its checksum and htree role are known.
#[derive(Clone, Copy)]
struct Layout<'d> {
    /// The whole block (or the inline data).
    data: &'d [u8],
    /// The part holding entries: no checksum tail; for inline data, the
    /// part this logical block covers.
    region: &'d [u8],
    /// Where `region` starts in `data`.
    region_start: usize,
    /// How far entries may reach (60 for inline `i_block`, which holds
    /// the synthetic '.' and '..').
    region_len: usize,
    inline: bool,
    failed_csum: bool,
    is_leaf: bool,
}

impl<'d> Layout<'d> {
    /// The same layout over `copy`, a changed copy of the data.
    fn over<'e>(&self, copy: &'e [u8]) -> Layout<'e>
    where
        'd: 'e,
    {
        let end = self.region_start + self.region.len();
        Layout {
            data: copy,
            region: &copy[self.region_start..end.min(copy.len())],
            ..*self
        }
    }
}

/// How a directory's names are hashed, folded and checked.
struct NameRules {
    /// The htree hash version (unsigned variants folded in).
    hash_version: Option<u8>,
    seed: [u32; 4],
    casefold_fs: bool,
    /// Names are compared case-folded (strict case-folding).
    fold_for_dups: bool,
    casefolded: bool,
    encrypted: bool,
    /// Names are checked against the encoding.
    check_encoding: bool,
    /// Entries carry their hash (encrypted and case-folded).
    hash_in_dirent: bool,
    filetype: bool,
}

impl NameRules {
    fn of(cx: &P2Ctx<'_>, dir: &DirMeta) -> NameRules {
        let fs = cx.fs;
        let sb = fs.sb();
        let hash_version = dir.dx.as_ref().map(|d| {
            let v = d.hash_version;
            if v <= 2 && sb.s_flags() & ext4_layout::superblock::FLAGS_UNSIGNED_HASH != 0 {
                v + 3
            } else {
                v
            }
        });
        let casefold_fs = fs.geo.incompat.contains(IncompatFeatures::CASEFOLD);
        let cf_inode = casefold_fs && cx.maps.inode_casefold.get(u64::from(dir.ino - 1));
        let strict = sb.s_encoding_flags() & 1 != 0;
        let casefolded = dir.iflags & flags::CASEFOLD != 0;
        NameRules {
            hash_version,
            seed: sb.s_hash_seed(),
            casefold_fs,
            fold_for_dups: cf_inode && strict,
            casefolded,
            encrypted: dir.encrypted,
            // In strict mode, or when asked (`-E check_encoding`).
            check_encoding: cf_inode && (strict || cx.check_encoding),
            hash_in_dirent: casefolded && dir.iflags & flags::ENCRYPT != 0,
            filetype: fs.geo.incompat.contains(IncompatFeatures::FILETYPE),
        }
    }
}

/// One entry: read from the block, or the synthetic '.' and '..' of an
/// inline directory.
struct Entry<'d> {
    ino: u32,
    rec_len: usize,
    name_len: usize,
    ftype: u8,
    name: &'d [u8],
    /// Offset in the region.
    off: usize,
    /// Offset in the data.
    abs: usize,
}

impl<'c> BlockCheck<'c, '_, '_> {
    fn ino(&self) -> u32 {
        self.work.meta.ino
    }

    fn push(&mut self, f: Finding) {
        self.out.findings.push(f);
    }

    /// Records a fatal problem.
    fn stop(&mut self, why: String) -> Stop {
        self.out.abort = Some(why);
        Stop
    }

    /// A finding about an entry: its directory, target and name.
    fn about(&self, code: Code, e: &Entry<'_>) -> Finding {
        Finding::new(code)
            .dir(self.ino())
            .ino(e.ino)
            .name(name_of(e.name))
    }

    fn run(mut self, data: Option<&[u8]>) {
        let Ok((lay, mut dx)) = self.layout(data) else {
            return;
        };
        let rules = NameRules::of(self.cx, &self.work.meta);
        let salvaged = if self.cx.yes && !lay.inline && !rules.hash_in_dirent {
            self.salvage(&lay, &rules)
        } else {
            None
        };
        let lay = match &salvaged {
            Some(copy) => lay.over(copy),
            None => lay,
        };
        let hashes = self.entries(&lay, &rules, dx.as_ref());
        // A duplicate name stops the test at the first one even when the
        // block goes on to fail.
        if let Some(at) = self.acc.first_duplicate() {
            let name = match at {
                SYNTHETIC_DOT => &b"."[..],
                x if x == SYNTHETIC_DOT + 1 => &b".."[..],
                off => {
                    let off = off as usize;
                    let nl = dirent::name_len_at(lay.data, off);
                    lay.data.get(off + 8..off + 8 + nl).unwrap_or(&[])
                }
            };
            self.out.dup = Some(name_of(name));
        }
        if self.out.abort.is_some() {
            return;
        }
        if let Some(d) = dx.as_mut() {
            finish_dx(d, &lay, hashes, self.cx.fs.block_size());
        }
        // A block salvaged under a repair is written anew with its
        // checksum: only one that passes every other check has its
        // checksum alone to fix, as e2fsck judges it.
        if lay.is_leaf && lay.failed_csum && salvaged.is_none() {
            let f = Finding::new(Code::LeafOnlyCsumInvalid)
                .dir(self.ino())
                .logical(self.work.lblk);
            self.push(f);
        }
        self.out.dx = dx;
    }

    /// Under a repair, a block whose entries do not chain is salvaged as
    /// e2fsck -y salvages it while it checks, with '.' and '..' restored,
    /// on a copy: its entries are then judged as the repair leaves them,
    /// and the check goes on past the damage instead of stopping there.
    /// `None` when the entries chain.
    fn salvage(&mut self, lay: &Layout<'_>, rules: &NameRules) -> Option<Vec<u8>> {
        let max = lay.region_len;
        let bs = lay.data.len();
        let ok = |b: &[u8], at: usize| {
            if max - at < 8 {
                return false;
            }
            let rl = dirent::rec_len_at(b, at, bs);
            let nl = dirent::name_len_at(b, at);
            at + rl <= max && rl >= 12 && rl % 4 == 0 && dirent::rec_len_for(nl) <= rl
        };
        let mut at = 0;
        while at < max && ok(lay.data, at) {
            at += dirent::rec_len_at(lay.data, at, bs);
        }
        let (ino, lblk) = (self.ino(), self.work.lblk);
        // A '.' with room for another entry is split first (the walk
        // then goes through what it covered), as e2fsck -y does.
        let big_dot = lblk == 0 && ok(lay.data, 0) && dirent::rec_len_at(lay.data, 0, bs) > 24;
        let split_yes = big_dot
            && self
                .cx
                .says_yes(&Finding::new(Code::SplitDot).dir(ino).found(0));
        if at >= max && !split_yes {
            return None;
        }
        // Salvaging is the answer to the first damage found.
        let first = Finding::new(Code::DirCorrupted)
            .dir(ino)
            .offset(lblk, at as u64);
        if at < max && !split_yes && !self.cx.says_yes(&first) {
            return None;
        }
        let mut b = lay.data.to_vec();
        let icount = self.cx.fs.sb().s_inodes_count();
        let ft_dir = if rules.filetype { ft::DIR } else { 0 };
        let mut offset = 0;
        let mut prev = None;
        let mut dot_state = if lblk == 0 { 0 } else { 2 };
        let mut guard = 0;
        while offset < max && guard <= bs {
            guard += 1;
            if !ok(&b, offset) {
                let f = Finding::new(Code::DirCorrupted)
                    .dir(ino)
                    .offset(lblk, offset as u64);
                self.push(f);
                dirent::salvage(&mut b, &mut offset, prev, max, icount);
                continue;
            }
            let rl = dirent::rec_len_at(&b, offset, bs);
            // e2fsck splits a big '.' before it walks on, so what lies
            // past it is never salvaged. Only the split changes where
            // the walk goes; the rest of '.' and '..' is left for their
            // checks on the copy to find and report.
            if dot_state == 0 && rl > 24 {
                // A '.' that is made anew (missing, or another entry in
                // its place) is split without a word, as e2fsck does when
                // it has just made it; a real '.' is split as asked.
                let split = Finding::new(Code::SplitDot).dir(ino).found(rl as u64);
                let remade = dot_problem(&b, offset)
                    .filter(|&c| self.cx.says_yes(&Finding::new(c).dir(ino)));
                if let Some(c) = remade {
                    // The entry in its place becomes '.' (and is reported
                    // here, by the name it had): split, it no longer
                    // holds that name.
                    let nl = dirent::name_len_at(&b, offset);
                    let name = b.get(offset + 8..offset + 8 + nl).unwrap_or(&[]);
                    let f = Finding::new(c).dir(ino).name(name_of(name));
                    self.push(f);
                    dirent::fix_dot(&mut b, offset, rl, ino, ft_dir);
                } else if self.cx.says_yes(&split) {
                    self.push(split);
                    dirent::split_dot(&mut b, offset, rl, ft_dir);
                }
            }
            prev = Some(offset);
            offset += dirent::rec_len_at(&b, offset, bs);
            dot_state += 1;
        }
        Some(b)
    }

    /// Reads the block's checksum and htree role, and finds its entries.
    fn layout<'d>(&mut self, data: Option<&'d [u8]>) -> Result<(Layout<'d>, Option<DxBlock>), Stop>
    where
        'c: 'd,
    {
        let (work, cx) = (self.work, self.cx);
        let geo = &cx.fs.geo;
        let (ino, lblk) = (work.meta.ino, work.lblk);
        let inline = work.meta.iflags & flags::INLINE_DATA != 0
            && geo.incompat.contains(IncompatFeatures::INLINE_DATA);
        if work.pblk == 0 && !inline {
            if !geo.incompat.contains(IncompatFeatures::LARGEDIR) {
                self.push(Finding::new(Code::DirectoryHole).dir(ino).logical(lblk));
            }
            return Err(Stop);
        }
        let inline_size = work.inline.as_ref().map_or(0, |d| d.len());
        let mut failed_csum = false;
        let data: &'d [u8] = if inline {
            if inline_size % 4 != 0 || (inline_size > 60 && inline_size < 72) {
                let f = Finding::new(Code::BadInlineDirSize)
                    .dir(ino)
                    .found(inline_size as u64);
                self.push(f);
            }
            work.inline.as_deref().unwrap_or(&[])
        } else {
            let Some(d) = data else {
                self.push(Finding::new(Code::ReadDirBlock).dir(ino).blk(work.pblk));
                return Err(self.stop(format!(
                    "cannot read block {} of directory {ino}",
                    work.pblk
                )));
            };
            failed_csum = self.csum_failed(d);
            d
        };
        let dx = self.classify_dx(data)?;
        let is_leaf = dx.as_ref().is_none_or(|d| d.kind == DxKind::Leaf);
        let mut tail = if self.cx.fs.metadata_csum() && is_leaf {
            DIR_TAIL_SIZE
        } else {
            0
        };
        if is_leaf && !inline && failed_csum && tail_status(data) == TailStatus::NoSpace {
            // A leaf without room for its checksum tail. Under a repair, a
            // directory pass 3A rewrites anyway is left to it; any other
            // is rewritten by pass 3A once the problem is fixed. Either
            // way the checksum is no longer judged (e2fsck's order).
            tail = 0;
            if self.cx.yes && work.meta.to_index && self.cx.lost_found != Some(ino) {
                failed_csum = false;
            } else {
                let f = Finding::new(Code::LeafMissingCsum).dir(ino).logical(lblk);
                failed_csum = !self.cx.says_yes(&f);
                self.push(f);
            }
        }
        let (region_start, max_size) = if !inline {
            (0, self.cx.fs.block_size() - tail)
        } else if lblk == 0 {
            (0, 60usize.min(data.len()))
        } else if inline_size <= 60 {
            return Err(Stop);
        } else {
            (60, data.len())
        };
        let end = region_start
            + max_size
                .saturating_sub(region_start)
                .min(data.len() - region_start);
        let region = &data[region_start..end];
        let region_len = if inline && lblk == 0 {
            60
        } else {
            region.len()
        };
        let lay = Layout {
            data,
            region,
            region_start,
            region_len,
            inline,
            failed_csum,
            is_leaf,
        };
        Ok((lay, dx))
    }

    /// Whether a block fails its checksum (never, without metadata_csum).
    fn csum_failed(&self, block: &[u8]) -> bool {
        let fs = self.cx.fs;
        if !fs.metadata_csum() {
            return false;
        }
        let dir = &self.work.meta;
        !dir.csum_ok
            || !block_csum_ok(
                block,
                inode_csum_seed(fs.geo.csum_seed, dir.ino, dir.generation),
            )
    }

    /// The block's place in an indexed directory: root, node or leaf.
    fn classify_dx(&mut self, data: &[u8]) -> Result<Option<DxBlock>, Stop> {
        let work = self.work;
        let Some(info) = work.meta.dx.as_ref().filter(|d| d.numblocks != 0) else {
            return Ok(None);
        };
        let fs = self.cx.fs;
        let (ino, lblk) = (work.meta.ino, work.lblk);
        if lblk >= info.numblocks {
            self.push(
                Finding::new(Code::UnexpectedHtreeBlock)
                    .dir(ino)
                    .logical(lblk),
            );
            return Err(self.stop(format!(
                "directory {ino} has an unexpected htree block {lblk}"
            )));
        }
        let kind = if lblk == 0 {
            let max_levels = if fs.geo.incompat.contains(IncompatFeatures::LARGEDIR) {
                3
            } else {
                2
            };
            if DxRoot::new(data).is_none_or(|rt| {
                rt.reserved_zero() != 0
                    || rt.info_length() < 8
                    || rt.indirect_levels() >= max_levels
            }) {
                self.push(Finding::new(Code::HtreeBadRoot).dir(ino));
            }
            DxKind::Root
        } else if htree::looks_like_node(data, fs.metadata_csum()) {
            DxKind::Node
        } else {
            DxKind::Leaf
        };
        Ok(Some(DxBlock {
            kind,
            min_hash: u32::MAX,
            max_hash: 0,
            entries_start: 0,
            limit: 0,
            count: 0,
            entries: Vec::new(),
            failed_csum: false,
        }))
    }

    /// Checks every entry; returns the lowest and highest name hash.
    fn entries(&mut self, lay: &Layout<'_>, rules: &NameRules, dx: Option<&DxBlock>) -> (u32, u32) {
        self.acc.names.clear();
        self.acc.arena.clear();
        let hashing = rules.hash_version.is_some() && dx.is_some_and(|d| d.kind != DxKind::Node);
        let synthetic_dots = lay.inline && self.work.lblk == 0;
        let mut dot_state = if self.work.lblk == 0 { 0 } else { 2 };
        let (mut min_hash, mut max_hash, mut hash) = (u32::MAX, 0u32, 0u32);
        let mut offset = 0usize;
        let mut index = 0u32;
        while offset < lay.region_len {
            let Ok(e) = self.read_entry(lay, rules, &mut offset, dot_state) else {
                break;
            };
            let mark = self.out.findings.len();
            let dots = self.check_dots(lay, &e, dot_state);
            // Under a repair, '.' and '..' are judged as fixed when every
            // problem found in them is answered yes.
            let cx = self.cx;
            let dots_yes = cx.yes && self.out.findings[mark..].iter().all(|f| cx.says_yes(f));
            let counted_as = match self.entry_fate(rules, &e, dot_state, dots, dots_yes) {
                Err(Stop) => break,
                Ok(t) => t,
            };
            if let Some(target) = counted_as {
                if hashing {
                    hash = entry_hash(lay, rules, &e, dot_state, hash);
                    min_hash = min_hash.min(hash);
                    max_hash = max_hash.max(hash);
                }
                self.record(lay, rules, &e, dot_state, index, target);
                index += 1;
            }
            if synthetic_dots && dot_state <= 1 {
                if dot_state == 1 {
                    offset = 4;
                }
            } else {
                offset += e.rec_len;
            }
            dot_state += 1;
        }
        (min_hash, max_hash)
    }

    /// Reads the entry at `offset`; a malformed one ends the block.
    fn read_entry<'d>(
        &mut self,
        lay: &Layout<'d>,
        rules: &NameRules,
        offset: &mut usize,
        dot_state: u32,
    ) -> Result<Entry<'d>, Stop> {
        let ino = self.ino();
        let lblk = self.work.lblk;
        if lay.inline && lblk == 0 {
            let ftype = if rules.filetype { ft::DIR } else { 0 };
            let at = *offset;
            let dot = |ino, name: &'static [u8]| Entry {
                ino,
                rec_len: 12,
                name_len: name.len(),
                ftype,
                name,
                off: at,
                abs: lay.region_start + at,
            };
            match dot_state {
                0 => return Ok(dot(ino, b".")),
                1 => return Ok(dot(dirent::inode_at(lay.data, 0), b"..")),
                _ => *offset = at.max(4),
            }
        }
        let base = *offset;
        let extended = dot_state > 1 && rules.hash_in_dirent;
        let min_len = if extended { 20 } else { 12 };
        let e = &lay.region[base.min(lay.region.len())..];
        let rec_len = if lay.region_len.saturating_sub(base) < 8 {
            min_len
        } else {
            dirent::rec_len_at(e, 0, self.cx.fs.block_size())
        };
        let name_len = dirent::name_len_at(e, 0);
        let min_for_name = (8 + name_len + if extended { 8 } else { 0 } + 3) & !3;
        if base + rec_len > lay.region_len
            || rec_len < min_len
            || rec_len % 4 != 0
            || min_for_name > rec_len
        {
            let f = Finding::new(Code::DirCorrupted)
                .dir(ino)
                .offset(lblk, (base + lay.region_start) as u64);
            self.push(f);
            return Err(self.stop(format!("directory {ino} block {lblk} is corrupt")));
        }
        Ok(Entry {
            ino: dirent::inode_at(e, 0),
            rec_len,
            name_len,
            ftype: dirent::file_type_at(e, 0),
            name: e.get(8..8 + name_len).unwrap_or(&[]),
            off: base,
            abs: lay.region_start + base,
        })
    }

    /// What becomes of an entry after its checks: the inode it is counted
    /// as a reference to, or `None` when it counts for nothing.
    ///
    /// A read-only check answers no, as e2fsck -n: an entry is counted
    /// whatever is wrong with it, unless its inode number is out of range.
    /// Under a repair the check answers as e2fsck -y does, so that later
    /// passes judge the file system as the repair leaves it: an entry the
    /// repair clears counts for nothing, and only its first problem is
    /// reported; '.' counts for the directory itself and a bad second
    /// entry, made '..' naming the root, for the root (pass 3 then
    /// points it at the parent).
    fn entry_fate(
        &mut self,
        rules: &NameRules,
        e: &Entry<'_>,
        dot_state: u32,
        dots: Dots,
        yes: bool,
    ) -> Result<Option<u32>, Stop> {
        let ino = self.ino();
        if yes && dot_state == 0 {
            // '.' counts for the directory whatever its fix; an intact
            // one still has its file type judged, as any entry's.
            if e.ino == ino && e.name == b"." {
                self.check_filetype(rules, e, false)?;
            }
            return Ok(Some(ino));
        }
        if yes && dots == Dots::Rewritten {
            self.acc.dotdot_refs.push((ino, 2));
            return Ok(Some(2));
        }
        if e.ino == 0 || (yes && dots == Dots::Cleared) {
            return Ok(None);
        }
        self.cleared = false;
        let kept = self.check_entry(rules, e, dot_state)?;
        if self.cleared && dot_state == 1 && !kept {
            self.acc.dotdot_refs.push((ino, 0));
        }
        Ok(kept.then_some(e.ino))
    }

    /// The tests of '.' (the first entry) and '..' (the second), and of
    /// later entries that name the directory itself.
    fn check_dots(&mut self, lay: &Layout<'_>, e: &Entry<'_>, dot_state: u32) -> Dots {
        let ino = self.ino();
        let name = name_of(e.name);
        // The byte after the name must be NUL in a real entry.
        let unterminated =
            |len: usize| !lay.inline && lay.region.get(e.off + 8 + len).is_some_and(|&b| b != 0);
        match dot_state {
            0 => {
                let problem = if e.ino == 0 {
                    Some(Code::MissingDot)
                } else if e.name_len != 1 || e.name.first() != Some(&b'.') {
                    Some(Code::FirstNotDot)
                } else if unterminated(1) {
                    Some(Code::DotNullTerm)
                } else {
                    None
                };
                // '.' made anew (the problem's fix) names the directory
                // and is split without a word, as e2fsck makes it.
                let mut remade = false;
                if let Some(c) = problem {
                    let f = Finding::new(c).dir(ino).name(name);
                    remade = self.cx.says_yes(&f);
                    self.push(f);
                }
                if e.ino != ino && !remade {
                    self.push(Finding::new(Code::BadInodeDot).dir(ino).ino(e.ino));
                }
                if e.rec_len > 24 && !remade {
                    self.push(
                        Finding::new(Code::SplitDot)
                            .dir(ino)
                            .found(e.rec_len as u64),
                    );
                }
            }
            1 => {
                let problem = if e.ino == 0 {
                    Some(Code::MissingDotDot)
                } else if e.name_len != 2 || e.name != b".." {
                    Some(Code::SecondNotDotDot)
                } else if unterminated(2) {
                    Some(Code::DotDotNullTerm)
                } else {
                    None
                };
                match problem {
                    Some(c) => {
                        self.push(Finding::new(c).dir(ino).name(name));
                        return Dots::Rewritten;
                    }
                    None => self.acc.dotdots.push((ino, e.ino)),
                }
            }
            _ if e.ino == ino => {
                self.push(Finding::new(Code::LinkDot).dir(ino).name(name));
                return Dots::Cleared;
            }
            _ => {}
        }
        Dots::Kept
    }

    /// The tests of what a used entry names. `Ok(false)`: the entry names
    /// no valid inode (or, under a repair, is cleared) and is not looked
    /// at further.
    fn check_entry(
        &mut self,
        rules: &NameRules,
        e: &Entry<'_>,
        dot_state: u32,
    ) -> Result<bool, Stop> {
        if let Some(c) = self.entry_problem(e, dot_state) {
            let f = self.about(c, e);
            // Each of these problems clears the entry under -y.
            let clear = self.cx.says_yes(&f);
            self.push(f);
            if clear {
                self.cleared = true;
                return Ok(false);
            }
            if c == Code::BadIno {
                return Ok(false);
            }
        }
        let Some(bad) = self.check_target(e)? else {
            return Ok(false);
        };
        self.check_filetype(rules, e, bad)?;
        self.check_name(rules, e, dot_state)
    }

    /// The first problem of an entry's inode number and name, if any.
    fn entry_problem(&self, e: &Entry<'_>, dot_state: u32) -> Option<Code> {
        let geo = &self.cx.fs.geo;
        let later = dot_state > 1;
        if (e.ino != 2 && e.ino < geo.first_ino)
            || e.ino > self.cx.fs.sb().s_inodes_count()
            || self.cx.special.contains(&e.ino)
        {
            Some(Code::BadIno)
        } else if self.cx.maps.inode_bb.get(u64::from(e.ino - 1)) {
            Some(Code::BbInode)
        } else if later && e.name == b"." {
            Some(Code::DupDot)
        } else if later && e.name == b".." {
            Some(Code::DupDotDot)
        } else if later && e.ino == 2 {
            Some(Code::LinkRoot)
        } else if later && e.name_len == 0 {
            Some(Code::NullName)
        } else {
            None
        }
    }

    /// The target inode: a bad one is examined again, and it must be in
    /// use and in an initialized part of its group. Returns whether it is
    /// still bad, or `None` when, under a repair, the entry is cleared.
    fn check_target(&mut self, e: &Entry<'_>) -> Result<Option<bool>, Stop> {
        let cx = self.cx;
        let geo = &cx.fs.geo;
        let mut bad = cx.maps.is_bad(e.ino);
        if bad {
            match process_bad_inode(cx, self.io, e.ino) {
                BadInodeOutcome::Fatal(why) => return Err(self.stop(why)),
                BadInodeOutcome::Reported {
                    findings,
                    still_bad,
                } => {
                    let dealloc = findings
                        .iter()
                        .any(|f| f.code.deallocates_inode() && cx.says_yes(f));
                    // Under a repair the entry goes with the inode: the
                    // finding says which entry, so that its directory is
                    // fixed in the same round.
                    let dir = self.ino();
                    self.out.findings.extend(findings.into_iter().map(|f| {
                        if dealloc && f.code.deallocates_inode() {
                            f.dir(dir).name(name_of(e.name))
                        } else {
                            // Named by the entry that reached it, as e2fsck
                            // names it ("inode 35 (/data/f3)").
                            f.via_entry(dir, e.name)
                        }
                    }));
                    if dealloc {
                        self.acc.deallocated.push(e.ino);
                        return Ok(None);
                    }
                    bad = still_bad;
                }
                BadInodeOutcome::Clean => bad = false,
            }
        }
        let g = (e.ino - 1) / geo.inodes_per_group;
        let gd = cx.fs.gd(g);
        // In e2fsck's 32-bit arithmetic: an unused count larger than the
        // group wraps past every inode, marking none.
        let first_unused =
            (g * geo.inodes_per_group + 1 + geo.inodes_per_group).wrapping_sub(gd.itable_unused());
        // Under -y, an entry into a group's unused part fixes the group
        // and restarts the check, and is not cleared meanwhile.
        let restart = if gd.has_flag(BG_INODE_UNINIT) {
            Some(self.about(Code::InorefBgInoUninit, e))
        } else if e.ino >= first_unused {
            Some(self.about(Code::InorefInUnused, e))
        } else {
            None
        };
        let suppressed = restart.as_ref().is_some_and(|f| cx.says_yes(f));
        if let Some(f) = restart {
            self.push(f);
        }
        if !cx.maps.used(e.ino) && !suppressed {
            let f = self.about(Code::UnusedInode, e);
            let clear = cx.says_yes(&f);
            self.push(f);
            if clear {
                self.cleared = true;
                return Ok(None);
            }
        }
        Ok(Some(bad))
    }

    /// The entry's file type against its inode's mode.
    fn check_filetype(&mut self, rules: &NameRules, e: &Entry<'_>, bad: bool) -> Result<(), Stop> {
        if !rules.filetype {
            if e.ftype != 0 {
                self.push(self.about(Code::ClearFiletype, e));
            }
            return Ok(());
        }
        let maps = self.cx.maps;
        let should = if maps.is_dir(e.ino) {
            ft::DIR
        } else if maps.is_reg(e.ino) {
            ft::REG
        } else if bad {
            ft::UNKNOWN
        } else {
            match self.cx.mode_type(self.io, e.ino) {
                Ok(t) => t,
                Err(why) => return Err(self.stop(why.to_string())),
            }
        };
        if e.ftype != should {
            let code = if e.ftype != 0 {
                Code::BadFiletype
            } else {
                Code::SetFiletype
            };
            let f = self
                .about(code, e)
                .mismatch(u64::from(e.ftype), u64::from(should));
            self.push(f);
        }
        Ok(())
    }

    /// The name: its encryption policy in an encrypted directory, else its
    /// encoding and its characters. False when, under a repair, the entry
    /// is cleared (a bad name or policy in an encrypted directory).
    fn check_name(
        &mut self,
        rules: &NameRules,
        e: &Entry<'_>,
        dot_state: u32,
    ) -> Result<bool, Stop> {
        let ino = self.ino();
        if rules.encrypted {
            if dot_state > 1 {
                if e.name_len < 16 {
                    let f = Finding::new(Code::BadEncryptedName)
                        .dir(ino)
                        .found(e.name_len as u64);
                    let clear = self.cx.says_yes(&f);
                    self.push(f);
                    if clear {
                        self.cleared = true;
                        return Ok(false);
                    }
                }
                match check_policy(self.cx, self.io, ino, e.ino, e.ftype) {
                    Ok(Some(c)) => {
                        let f = self.about(c, e);
                        let clear = self.cx.says_yes(&f);
                        self.push(f);
                        if clear {
                            self.cleared = true;
                            return Ok(false);
                        }
                    }
                    Ok(None) => {}
                    Err(why) => return Err(self.stop(why.to_string())),
                }
            }
            return Ok(true);
        }
        if rules.check_encoding && !utf8_ok(e.name) {
            self.push(
                Finding::new(Code::BadEncodedName)
                    .dir(ino)
                    .name(name_of(e.name)),
            );
        }
        if e.name.iter().any(|&b| b == b'/' || b == 0) {
            self.push(Finding::new(Code::BadName).dir(ino).name(name_of(e.name)));
        }
        Ok(true)
    }

    /// Records a checked entry: a link if it names a directory, its name
    /// for the duplicate test, and a reference to `target` (its inode, or
    /// what a repair makes it name).
    fn record(
        &mut self,
        lay: &Layout<'_>,
        rules: &NameRules,
        e: &Entry<'_>,
        dot_state: u32,
        index: u32,
        target: u32,
    ) {
        let synthetic = lay.inline && self.work.lblk == 0 && dot_state <= 1;
        if dot_state > 1 && self.cx.maps.is_dir(e.ino) {
            self.acc.links.push(DirLink {
                target: e.ino,
                dir: self.ino(),
                pblk: self.work.pblk,
                lblk: self.work.lblk as u32,
                off: e.abs as u32,
            });
        }
        // The first two entries of block 0 are '.' and '..' once pass 2
        // is done with them, whatever a damaged block held there.
        let name: &[u8] = match dot_state {
            0 if !lay.inline && self.work.lblk == 0 => b".",
            1 if !lay.inline && self.work.lblk == 0 => b"..",
            _ => e.name,
        };
        let acc = &mut *self.acc;
        let start = acc.arena.len() as u32;
        if rules.fold_for_dups {
            acc.arena.extend_from_slice(&casefold(name));
        } else {
            acc.arena.extend_from_slice(name);
        }
        let klen = acc.arena.len() as u32 - start;
        let h = name_hash(&acc.arena[start as usize..]);
        // The synthetic '.' and '..' of an inline directory have no place
        // in the data.
        let at = if synthetic {
            SYNTHETIC_DOT + dot_state
        } else {
            e.abs as u32
        };
        acc.names.push((h, index, start, klen as u16, at));
        self.cx.count_ref(target);
    }
}

/// An entry's htree hash (a siphash directory stores it after the name;
/// '.' and '..' keep the previous value there).
fn entry_hash(
    lay: &Layout<'_>,
    rules: &NameRules,
    e: &Entry<'_>,
    dot_state: u32,
    prev: u32,
) -> u32 {
    let Some(v) = rules.hash_version else {
        return prev;
    };
    if v == version::SIPHASH {
        if dot_state <= 1 {
            return prev;
        }
        let at = if lay.inline { 0 } else { e.off };
        return dirent::stored_hash_at(lay.region, at, e.name_len);
    }
    let major = |name: &[u8]| dirhash(name, v, &rules.seed).map_or(0, |h| h.major);
    if rules.casefolded && rules.casefold_fs {
        major(&casefold(e.name))
    } else {
        major(e.name)
    }
}

/// Fills in an htree block's facts once its entries are checked.
fn finish_dx(d: &mut DxBlock, lay: &Layout<'_>, (min_hash, max_hash): (u32, u32), bs: usize) {
    d.min_hash = min_hash;
    d.max_hash = max_hash;
    if d.kind == DxKind::Leaf {
        return;
    }
    let entries: Option<DxEntries<'_>> = if d.kind == DxKind::Root {
        DxRoot::new(lay.data).map(|rt| rt.entries())
    } else {
        DxNode::new(lay.data).map(|n| n.entries())
    };
    if let Some(e) = entries {
        d.entries_start = e.offset();
        d.limit = e.limit();
        d.count = e.count();
        let room = (bs.saturating_sub(e.offset())) / 8;
        let n = usize::from(e.count()).min(room);
        d.entries = (0..n).map(|i| e.get(i)).collect();
    }
    d.failed_csum = lay.failed_csum;
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

/// The problem of a first entry that is not a proper '.' (missing,
/// another name, or its name not ended by a NUL), as pass 2 judges '.'.
fn dot_problem(b: &[u8], at: usize) -> Option<Code> {
    let nl = dirent::name_len_at(b, at);
    if dirent::inode_at(b, at) == 0 {
        Some(Code::MissingDot)
    } else if nl != 1 || b.get(at + 8) != Some(&b'.') {
        Some(Code::FirstNotDot)
    } else if b.get(at + 9).is_some_and(|&c| c != 0) {
        Some(Code::DotNullTerm)
    } else {
        None
    }
}
