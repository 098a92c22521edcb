//! Pass 2: directory blocks walked again the way e2fsck walks them when
//! it answers "yes": broken entries salvaged, '.' and '..' restored, bad
//! entries cleared, file types and names fixed; htree indexes that cannot
//! be trusted dropped (the directory stays complete, unindexed);
//! duplicate names dropped or renamed; holes filled.

use ext4_layout::types::{Ino, PhysBlock};
use std::collections::{BTreeMap, BTreeSet};
use std::io;

use ext4_layout::dirent::{self, ft, DIR_TAIL_SIZE};
use ext4_layout::features::{IncompatFeatures, RoCompatFeatures};
use ext4_layout::group_desc as gd;
use ext4_layout::group_desc::BG_INODE_UNINIT;
use ext4_layout::htree;
use ext4_layout::inode::{field, i_block_word, I_BLOCK_OFFSET};
use ext4_layout::inode::{flags, FileType, Inode};
use ext4_layout::xattr::InodeXattrs;

use super::raw::{sbf, set_feature};
use super::stage::{Kind, Round, Staging};
use check_core::engine::CheckState;
use check_core::problem::{Code, Finding};

/// Problems whose fix deallocates the inode an entry points at.
fn deallocates(code: Code) -> bool {
    code.deallocates_inode()
}

/// Problems whose fix drops a directory's htree index.
fn drops_index(code: Code) -> bool {
    code.policy().drops_index
}

/// What the walk of one directory needs to know.
struct DirFix<'a> {
    ino: Ino,
    /// (target, name) entries to clear: extra links to a directory.
    link_dir: BTreeSet<(u32, Vec<u8>)>,
    /// Entries to clear by target (bad policy, unencrypted file...).
    clear_targets: BTreeSet<u32>,
    /// Inodes deallocated this round.
    dead: &'a BTreeSet<u32>,
    /// (target, name) entries whose fix was declined: left in place.
    kept: BTreeSet<(u32, Vec<u8>)>,
    /// (target, name) entries whose file type fix was declined.
    kept_type: BTreeSet<(u32, Vec<u8>)>,
    /// Logical blocks that are holes.
    holes: BTreeSet<u64>,
    encrypted: bool,
    casefold_strict: bool,
    /// An inline directory whose size the check found bad: set right
    /// before its entries are walked.
    inline_size_bad: bool,
    /// Set by the walk: a leaf has no room for its checksum tail, so the
    /// directory is rewritten by pass 3A (as e2fsck rehashes it).
    full_leaf: bool,
}

/// Pass 2's repairs.
pub fn fix_pass2<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding]) {
    // Unreadable directory blocks first.
    let rest = r.stage_salvaged(mine, Code::DirBlockUnreadable);
    let mine = &rest[..];
    let dead = fix_entry_inodes(r, mine);
    let (st, stage, fixed) = (r.st, &mut *r.stage, &mut r.fixed);
    let declined = &r.declined;
    let fs = &st.fs;
    for f in mine {
        match f.code {
            Code::FeatureLargeFiles => {
                set_feature(stage, sbf::RO_COMPAT, RoCompatFeatures::LARGE_FILE.0);
                fixed.push(f);
            }
            Code::InorefBgInoUninit | Code::InorefInUnused => {
                if let Some(t) = f.ino {
                    let g = (t - 1) / fs.geo.inodes_per_group;
                    let d = stage.gd_mut(g);
                    if f.code == Code::InorefBgInoUninit {
                        let fl = gd::field::bg_flags.get(d) & !BG_INODE_UNINIT;
                        gd::field::bg_flags.set(d, fl);
                    } else {
                        gd::ITABLE_UNUSED.set(d, 0);
                    }
                    fixed.push(f);
                }
            }
            _ => {}
        }
    }
    // Directories with problems in their entries.
    let mut dirs: BTreeMap<Ino, Vec<&'a Finding>> = BTreeMap::new();
    for f in mine {
        if let Some(d) = f.directory() {
            dirs.entry(d).or_default().push(f);
        }
    }
    let mut rehash = Vec::new();
    for (dir, fs_) in dirs {
        let codes: BTreeSet<Code> = fs_.iter().map(|f| f.code).collect();
        let mut fx = dir_fix(dir, &fs_, &codes, &dead);
        for f in declined.iter().filter(|f| f.directory() == Some(dir)) {
            let (Some(t), Some(n)) = (f.ino, &f.name) else {
                continue;
            };
            let entry = (t, n.clone());
            if matches!(
                f.code,
                Code::BadFiletype | Code::SetFiletype | Code::ClearFiletype
            ) {
                fx.kept_type.insert(entry);
            } else {
                fx.kept.insert(entry);
            }
        }
        let drop_index = codes.iter().any(|&c| drops_index(c));
        let dups = codes.contains(&Code::ReportDupDirent);
        if let Ok(true) = fix_directory(st, stage, &mut fx, drop_index, dups) {
            // The walk mends what the check found in the directory, but
            // for the codes the table says no repair fixes, and the
            // checksums of leaves too full for a tail, which pass 3A's
            // rewrite mends.
            let waits = |f: &&Finding| {
                fx.full_leaf && matches!(f.code, Code::LeafMissingCsum | Code::LeafOnlyCsumInvalid)
            };
            fixed.extend(
                fs_.iter()
                    .copied()
                    .filter(|f| !f.code.policy().no_fix && !waits(f)),
            );
            if fx.full_leaf {
                rehash.push((dir, fs_.iter().copied().filter(waits).collect()));
            }
        }
    }
    r.rehash.extend(rehash);
}

/// Inode-level problems found through an entry: fields cleared, or the
/// inode deallocated. Returns the inodes deallocated (their entries are
/// cleared with their directories).
fn fix_entry_inodes<'a>(r: &mut Round<'_, 'a, '_>, mine: &[&'a Finding]) -> BTreeSet<u32> {
    let (st, stage, fixed) = (r.st, &mut *r.stage, &mut r.fixed);
    let fs = &st.fs;
    let mut dead = BTreeSet::new();
    for f in mine {
        let Some(ino) = f.inode() else { continue };
        // A finding about an entry is the directory walk's, except the
        // deallocation of the inode it names (which also names the entry).
        if f.dir.is_some() && !deallocates(f.code) {
            continue;
        }
        if dead.contains(&ino.get()) {
            fixed.push(f);
            continue;
        }
        if deallocates(f.code) {
            // Its blocks are free from now on, for the rewrite of the
            // group summaries (blocks another inode also claims stay).
            forget_blocks(st, stage, ino);
        }
        let Ok(raw) = stage.inode(ino) else {
            continue;
        };
        let ok = match f.code {
            c if deallocates(c) => {
                super::raw::clear_inode(raw, ino.get(), fs.geo.first_ino, super::raw::now());
                dead.insert(ino.get());
                true
            }
            Code::FaddrZero => {
                field::i_faddr.set(raw, 0);
                true
            }
            Code::FragZero => {
                field::h_i_frag.set(raw, 0);
                true
            }
            Code::FsizeZero => {
                field::h_i_fsize.set(raw, 0);
                true
            }
            Code::BlocksHiZero => {
                field::l_i_blocks_high.set(raw, 0);
                true
            }
            Code::IFileAclHiZero => {
                field::l_i_file_acl_high.set(raw, 0);
                true
            }
            Code::FileAclBad | Code::FileAclZero => {
                ext4_layout::inode::FILE_ACL.set(raw, 0);
                true
            }
            Code::DirSizeHighZero => {
                field::i_size_high.set(raw, 0);
                true
            }
            _ => false,
        };
        if ok {
            fixed.push(f);
        }
    }
    dead
}

/// Marks the blocks of inode `ino` free in the check's maps, except those
/// another inode claims too. An inode whose block words hold no block
/// numbers (a fast symlink, inline data, a device) frees nothing, as
/// e2fsck frees nothing for it: what those words hold may look like the
/// number of a block in use by the file system.
fn forget_blocks<'f>(st: &'f CheckState, stage: &mut Staging<'f>, ino: Ino) {
    let bits = st.fs.geo.cluster_bits;
    let has_blocks = stage.inode_copy(ino).is_ok_and(|raw| {
        Inode::new(&raw).is_some_and(|i| check_core::walk::inode_has_valid_blocks(&st.fs, &i))
    });
    if let Some(all) = has_blocks
        .then(|| super::map::all_blocks_of(stage, ino).ok())
        .flatten()
    {
        for b in all {
            let c = b.0 >> bits;
            if !stage.shared(c) {
                stage.free_block(b);
            }
        }
    }
    stage.mark_inode(ino, false, false);
}

/// What the walk of one directory is to fix, from its findings.
fn dir_fix<'d>(
    dir: Ino,
    fs_: &[&Finding],
    codes: &BTreeSet<Code>,
    dead: &'d BTreeSet<u32>,
) -> DirFix<'d> {
    let mut fx = DirFix {
        ino: dir,
        link_dir: BTreeSet::new(),
        clear_targets: BTreeSet::new(),
        dead,
        kept: BTreeSet::new(),
        kept_type: BTreeSet::new(),
        holes: BTreeSet::new(),
        encrypted: false,
        // A name the check found badly encoded (strict mode, or
        // `-E check_encoding`) is fixed by the encoding rule.
        casefold_strict: codes.contains(&Code::BadEncodedName),
        inline_size_bad: codes.contains(&Code::BadInlineDirSize),
        full_leaf: false,
    };
    for f in fs_ {
        match f.code {
            // The entry itself is cleared, not the inode it names.
            Code::LinkDir | Code::EaInodeDirLink => {
                if let (Some(t), Some(n)) = (f.ino, &f.name) {
                    fx.link_dir.insert((t, n.clone()));
                }
            }
            Code::DirectoryHole => {
                if let Some(l) = f.numbers.logical() {
                    fx.holes.insert(l);
                }
            }
            Code::UnencryptedFile | Code::InconsistentEncryptionPolicy => {
                if let Some(t) = f.ino {
                    fx.clear_targets.insert(t);
                }
            }
            _ => {}
        }
    }
    fx
}

/// Walks every block of directory `fx.ino`, fixing what e2fsck fixes.
/// Returns whether the directory could be walked.
fn fix_directory<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    fx: &mut DirFix<'_>,
    drop_index: bool,
    dups: bool,
) -> io::Result<bool> {
    let fs = &st.fs;
    let ino = fx.ino;
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| io::Error::other("bad inode"))?;
    fx.encrypted = inode.has_flag(flags::ENCRYPT);
    fx.casefold_strict = fs.geo.incompat.contains(IncompatFeatures::CASEFOLD)
        && inode.has_flag(flags::CASEFOLD)
        && (fs.sb().s_encoding_flags() & 1 != 0 || fx.casefold_strict);
    if inode.has_flag(flags::INLINE_DATA) {
        return fix_inline_dir(st, stage, fx, &raw);
    }
    let indexed = inode.has_flag(flags::INDEX) && !drop_index;
    if inode.has_flag(flags::INDEX) && drop_index {
        let r = stage.inode(ino)?;
        let v = field::i_flags.get(r) & !flags::INDEX;
        field::i_flags.set(r, v);
    }
    // Holes first: a new block for each (the block list below sees them).
    if !fx.holes.is_empty() {
        let holes = fx.holes.clone();
        fill_holes(st, stage, ino, &holes)?;
    }
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| io::Error::other("bad inode"))?;
    let blocks = super::map::blocks_of(stage, ino).unwrap_or_default();
    let bs = fs.block_size();
    let csum = fs.metadata_csum();
    let mut buf = vec![0u8; bs];
    for &(lblk, pblk) in &blocks {
        if !fs.geo.block_in_range(pblk.0) {
            continue;
        }
        stage.read(pblk, &mut buf)?;
        let kind = if !indexed {
            BlockKind::Leaf
        } else if lblk == 0 {
            BlockKind::Root
        } else if htree::looks_like_node(&buf, csum) {
            BlockKind::Node
        } else {
            BlockKind::Leaf
        };
        let mut b = buf.clone();
        let was_index = !indexed && inode.has_flag(flags::INDEX)
            || (drop_index && looks_like_index(&buf, lblk, csum));
        let mut modified = false;
        if was_index {
            // A former index block becomes an ordinary leaf.
            reformat_index_block(&mut b, lblk, ino.get(), csum, st);
            modified = true;
        }
        modified |= walk_block(st, stage, &mut b, lblk, kind, fx, csum);
        if kind == BlockKind::Leaf
            && csum
            && check_core::walk::tail_status(&b) != check_core::walk::TailStatus::Found
        {
            if insert_tail(&mut b) {
                modified = true;
            } else {
                fx.full_leaf = true;
            }
        }
        let k = match kind {
            BlockKind::Leaf => Kind::DirLeaf(ino),
            BlockKind::Root => Kind::DxRoot(ino),
            BlockKind::Node => Kind::DxNode(ino),
        };
        // A block whose checksum alone is wrong is rewritten as it is.
        if modified || b != buf || csum {
            stage.block(pblk, k)?.copy_from_slice(&b);
        }
    }
    if dups {
        dedup_directory(st, stage, ino, &blocks)?;
    }
    Ok(true)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Leaf,
    Root,
    Node,
}

fn looks_like_index(b: &[u8], lblk: u64, csum: bool) -> bool {
    if lblk == 0 {
        htree::looks_like_root(b)
    } else {
        htree::looks_like_node(b, csum)
    }
}

/// Turns an htree root into '.', '..' and free space, and an interior
/// node into one empty entry (each with a checksum tail when needed).
fn reformat_index_block(b: &mut [u8], lblk: u64, ino: u32, csum: bool, st: &CheckState) {
    let bs = b.len();
    let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
    let filetype = st.fs.geo.incompat.contains(IncompatFeatures::FILETYPE);
    let ft = if filetype { 2 } else { 0 };
    if lblk == 0 {
        let parent = dirent::inode_at(b, 12);
        b.fill(0);
        put_dirent(b, 0, ino, 12, b".", ft);
        put_dirent(b, 12, parent, end - 12, b"..", ft);
    } else {
        b.fill(0);
        put_dirent(b, 0, 0, end, b"", 0);
    }
    if csum {
        ext4_layout::dirent::write_tail(b, 0);
    }
}

fn put_dirent(b: &mut [u8], at: usize, ino: u32, rec_len: usize, name: &[u8], ft: u8) {
    dirent::put_entry(b, at, b.len(), ino, rec_len, name, ft);
    // Padding after the name is zero.
    let padded = (8 + name.len() + 3) & !3;
    for x in &mut b[at + 8 + name.len()..at + padded.min(rec_len)] {
        *x = 0;
    }
}

fn min_rec(name_len: usize, extended: bool) -> usize {
    (8 + name_len + if extended { 8 } else { 0 } + 3) & !3
}

/// The file type code an entry to `target` should carry.
fn wanted_type(st: &CheckState, stage: &mut Staging<'_>, target: u32) -> u8 {
    let m = &st.maps;
    let Some(ino) = Ino::new(target) else {
        return 0;
    };
    if stage.is_dir(ino) {
        2
    } else if m.is_reg(target) {
        1
    } else if m.is_bad(target) {
        0
    } else {
        let t = m.ftype(target);
        if t != 0 {
            return t;
        }
        stage
            .inode_copy(ino)
            .ok()
            .and_then(|r| Inode::new(&r).and_then(|i| i.file_type()))
            .map_or(0, FileType::dirent_code)
    }
}

/// e2fsck's entry loop over one block, answering "yes". Returns whether
/// the block changed.
#[allow(clippy::too_many_arguments)]
fn walk_block(
    st: &CheckState,
    stage: &mut Staging<'_>,
    b: &mut [u8],
    lblk: u64,
    kind: BlockKind,
    fx: &DirFix<'_>,
    csum: bool,
) -> bool {
    let fs = &st.fs;
    let geo = &fs.geo;
    let bs = b.len();
    let max = if kind == BlockKind::Leaf
        && csum
        && check_core::walk::tail_status(b) == check_core::walk::TailStatus::Found
    {
        bs - DIR_TAIL_SIZE
    } else {
        bs
    };
    let filetype = geo.incompat.contains(IncompatFeatures::FILETYPE);
    let icount = fs.sb().s_inodes_count();
    let mut offset = 0usize;
    let mut prev: Option<usize> = None;
    let mut dot_state = if lblk == 0 { 0 } else { 2 };
    let mut modified = false;
    let mut guard = 0;
    while offset < max {
        guard += 1;
        if guard > bs {
            break;
        }
        let remaining = max - offset;
        let rl = if remaining < 8 {
            12
        } else {
            dirent::rec_len_at(b, offset, bs)
        };
        let nl = if remaining < 8 {
            0
        } else {
            dirent::name_len_at(b, offset)
        };
        if offset + rl > max || rl < 12 || rl % 4 != 0 || min_rec(nl, false) > rl {
            dirent::salvage(b, &mut offset, prev, max, icount);
            modified = true;
            continue;
        }
        let ft_dir = if filetype { ft::DIR } else { 0 };
        match dot_state {
            0 => modified |= dirent::fix_dot(b, offset, rl, fx.ino.get(), ft_dir),
            1 => modified |= dirent::fix_dotdot(b, offset, ft_dir),
            _ => {}
        }
        let ft_byte = offset + 7;
        let rl = dirent::rec_len_at(b, offset, bs);
        let nl = dirent::name_len_at(b, offset);
        let target = dirent::inode_at(b, offset);
        let name: Vec<u8> = b[offset + 8..offset + 8 + nl].to_vec();
        let entry = (target, name.clone());
        // A declined clear keeps the entry (what else was answered yes of
        // it is still fixed).
        let mut clear = target != 0
            && !fx.kept.contains(&entry)
            && entry_goes(st, stage, fx, target, &name, dot_state);
        if clear && dot_state <= 1 {
            // '.' and '..' are never emptied: '..' is pointed at the root
            // until pass 3 puts the parent there.
            if dot_state == 1 {
                dirent::set_inode(b, offset, 2);
                modified = true;
            }
            clear = false;
        }
        if clear {
            dirent::set_inode(b, offset, 0);
            modified = true;
        } else if target != 0 {
            let want = if filetype {
                wanted_type(st, stage, target)
            } else {
                0
            };
            if b[ft_byte] != want && !fx.kept_type.contains(&entry) {
                b[ft_byte] = want;
                modified = true;
            }
            modified |= fix_names(b, offset, nl, fx);
        }
        prev = Some(offset);
        offset += rl;
        dot_state += 1;
    }
    modified
}

/// Whether an entry goes: its inode number is invalid, it is a link
/// pass 2 refused, or its inode is being cleared or was never in use.
fn entry_goes(
    st: &CheckState,
    stage: &Staging<'_>,
    fx: &DirFix<'_>,
    target: u32,
    name: &[u8],
    dot_state: u32,
) -> bool {
    let fs = &st.fs;
    let maps = &st.maps;
    let sb = fs.sb();
    let special = [
        sb.s_usr_quota_inum(),
        sb.s_grp_quota_inum(),
        sb.s_prj_quota_inum(),
        sb.s_orphan_file_inum(),
    ];
    let bad_number = (target != 2 && target < fs.geo.first_ino)
        || target > sb.s_inodes_count()
        || special.contains(&target)
        || maps.inode_bb.get(u64::from(target - 1));
    let bad_link = dot_state > 1
        && (target == fx.ino.get()
            || name == b"."
            || name == b".."
            || target == 2
            || name.is_empty()
            || fx.link_dir.contains(&(target, name.to_vec()))
            || (fx.encrypted && name.len() < 16));
    let bad_target = fx.dead.contains(&target)
        || Ino::new(target).is_some_and(|t| !stage.inode_used(t) && !in_unused_area(fs, target))
        || fx.clear_targets.contains(&target);
    bad_number || bad_link || bad_target
}

/// Whether an inode lies where the check does not look (an uninitialised
/// group, or past the group's unused mark): an entry naming it is kept,
/// and the group's mark is moved instead.
fn in_unused_area(fs: &check_core::fs::Fs, ino: u32) -> bool {
    let ipg = fs.geo.inodes_per_group;
    let g = (ino - 1) / ipg;
    (ino - 1) % ipg >= fs.inodes_to_scan(g)
}

/// Applies the '/'/NUL name rule (or the encoding rule in strict
/// case-folded directories).
fn fix_names(b: &mut [u8], at: usize, nl: usize, fx: &DirFix<'_>) -> bool {
    if fx.encrypted {
        return false;
    }
    let name = &mut b[at + 8..at + 8 + nl];
    let mut changed = false;
    if fx.casefold_strict {
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        if let Err(e) = std::str::from_utf8(&name[..end]) {
            for x in &mut name[e.valid_up_to()..end] {
                *x = b'.';
            }
            return true;
        }
    }
    for x in name.iter_mut() {
        if *x == b'/' || *x == 0 {
            *x = b'.';
            changed = true;
        }
    }
    changed
}

/// Makes room for a checksum tail at the end of a leaf: the last entry is
/// shortened to end 12 bytes before the end of the block.
fn insert_tail(b: &mut [u8]) -> bool {
    let bs = b.len();
    let top = bs - DIR_TAIL_SIZE;
    let mut at = 0usize;
    let mut last = None;
    while at < top {
        let rl = dirent::rec_len_at(b, at, bs);
        if rl < 8 || rl % 4 != 0 || at + rl > bs {
            return false;
        }
        last = Some(at);
        at += rl;
    }
    let Some(l) = last else {
        return false;
    };
    let nl = dirent::name_len_at(b, l);
    if l + min_rec(nl, false) > top {
        return false;
    }
    dirent::set_rec_len(b, l, bs, top - l);
    ext4_layout::dirent::write_tail(b, 0);
    true
}

/// Gives each hole of a directory (by logical block) a fresh block, and
/// grows the size to cover them.
fn fill_holes<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    ino: Ino,
    holes: &BTreeSet<u64>,
) -> io::Result<()> {
    let fs = &st.fs;
    let bs = fs.block_size() as u64;
    // Under bigalloc a logical cluster lives in one physical cluster, each
    // block at its own offset: a hole goes into the cluster its logical
    // neighbours already have, else into a new cluster at its offset.
    let bits = fs.geo.cluster_bits;
    let mask = (1u64 << bits) - 1;
    let mut clusters: std::collections::BTreeMap<u64, u64> = if bits > 0 {
        super::map::blocks_of(stage, ino)?
            .into_iter()
            .map(|(l, p)| (l >> bits, p.0 >> bits))
            .collect()
    } else {
        std::collections::BTreeMap::new()
    };
    let mut goal = PhysBlock(0);
    for &lblk in holes {
        let b = match clusters.get(&(lblk >> bits)) {
            Some(&c) => PhysBlock((c << bits) | (lblk & mask)),
            None => {
                let b = stage
                    .alloc_block(goal)
                    .ok_or_else(|| io::Error::other("no free block"))?;
                clusters.insert(lblk >> bits, b.0 >> bits);
                PhysBlock((b.0 & !mask) | (lblk & mask))
            }
        };
        goal = b;
        init_dir_block(stage, fs, b, lblk, ino);
        super::map::map_block(stage, ino, lblk, b)?;
    }
    if let Some(&last) = holes.iter().next_back() {
        super::raw::grow_size(stage.inode(ino)?, (last + 1) * bs);
    }
    // The new blocks count, as e2fsck's allocation counts them: the check
    // after the round then finds the directory as this round leaves it.
    super::map::recount_i_blocks(stage, ino)
}

/// Writes a new, empty directory block (with '.' and '..' for block 0).
fn init_dir_block(
    stage: &mut Staging<'_>,
    fs: &check_core::fs::Fs,
    blk: PhysBlock,
    lblk: u64,
    ino: Ino,
) {
    let csum = fs.metadata_csum();
    let bs = fs.block_size();
    let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
    let ft = if fs.geo.incompat.contains(IncompatFeatures::FILETYPE) {
        2
    } else {
        0
    };
    let b = stage.fresh_block(blk, Kind::DirLeaf(ino));
    if lblk == 0 {
        put_dirent(b, 0, ino.get(), 12, b".", ft);
        put_dirent(b, 12, 2, end - 12, b"..", ft);
    } else {
        put_dirent(b, 0, 0, end, b"", 0);
    }
    if csum {
        ext4_layout::dirent::write_tail(b, 0);
    }
}

/// Pass 3A for directory `ino`: duplicate names dropped or renamed.
pub fn dedup<'f>(st: &'f CheckState, stage: &mut Staging<'f>, ino: Ino) -> io::Result<()> {
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| io::Error::other("bad inode"))?;
    if inode.has_flag(flags::INLINE_DATA) {
        return Err(io::Error::other("inline directories are not rehashed"));
    }
    if inode.has_flag(flags::INDEX) {
        // The rebuilt directory is not indexed.
        let r = stage.inode(ino)?;
        let v = field::i_flags.get(r) & !flags::INDEX;
        field::i_flags.set(r, v);
    }
    let blocks = super::map::blocks_of(stage, ino)?;
    if blocks.is_empty() {
        return Err(io::Error::other("the directory has no blocks"));
    }
    dedup_directory(st, stage, ino, &blocks)
}

/// Pass 3A for a directory with duplicate names: the same name for the
/// same inode is dropped, the same name for another inode renamed with a
/// "~N" suffix, in the order e2fsck sorts entries (by name, then inode
/// descending).
fn dedup_directory<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    ino: Ino,
    blocks: &[(u64, PhysBlock)],
) -> io::Result<()> {
    let fs = &st.fs;
    let bs = fs.block_size();
    let csum = fs.metadata_csum();
    let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
    let encrypted = stage
        .inode_copy(ino)
        .ok()
        .and_then(|r| Inode::new(&r).map(|i| i.has_flag(flags::ENCRYPT)))
        .unwrap_or(false);
    let mut entries = live_entries(stage, blocks, end)?;
    let drop = resolve_duplicates(&mut entries, encrypted);
    let live: Vec<&Entry> = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, e)| e)
        .collect();
    let mut it = live.into_iter().peekable();
    write_compactly(st, stage, ino, blocks, &mut it)?;
    if it.peek().is_some() {
        return Err(io::Error::other(
            "the directory has no room left after renaming",
        ));
    }
    Ok(())
}

/// An entry as the duplicate fix keeps it: inode, name, file type.
type Entry = (u32, Vec<u8>, u8);

/// Every live entry of a directory's blocks but '.' and '..', in block
/// order.
fn live_entries<'f>(
    stage: &mut Staging<'f>,
    blocks: &[(u64, PhysBlock)],
    end: usize,
) -> io::Result<Vec<Entry>> {
    let bs = stage.fs().block_size();
    let mut entries: Vec<Entry> = Vec::new();
    let mut buf = vec![0u8; bs];
    for &(lblk, pblk) in blocks {
        stage.read(pblk, &mut buf)?;
        let mut at = 0;
        let mut idx = 0;
        while at + 8 <= end {
            let rl = dirent::rec_len_at(&buf, at, bs);
            if rl < 8 {
                break;
            }
            let e = dirent::inode_at(&buf, at);
            let nl = usize::from(buf[at + 6]);
            if e != 0 && !(lblk == 0 && idx < 2) {
                entries.push((e, buf[at + 8..at + 8 + nl].to_vec(), buf[at + 7]));
            }
            at += rl;
            idx += 1;
        }
    }
    Ok(entries)
}

/// As e2fsck does: sort by name then inode (highest first); an entry
/// whose name equals the one before it is dropped if the inode is the
/// same (a dropped entry keeps its name but counts as inode 0), else
/// renamed; repeat until nothing changes. Returns the entries dropped.
fn resolve_duplicates(entries: &mut [Entry], encrypted: bool) -> BTreeSet<usize> {
    let mut drop = BTreeSet::new();
    let mut names: BTreeSet<Vec<u8>> = entries.iter().map(|e| e.1.clone()).collect();
    for _ in 0..entries.len().max(1) {
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by(|&a, &b| {
            entries[a]
                .1
                .cmp(&entries[b].1)
                .then(entries[b].0.cmp(&entries[a].0))
        });
        let mut changed = false;
        for w in 1..order.len() {
            let (a, b2) = (order[w - 1], order[w]);
            if drop.contains(&b2) || entries[a].1 != entries[b2].1 {
                continue;
            }
            let prev_ino = if drop.contains(&a) { 0 } else { entries[a].0 };
            if prev_ino == entries[b2].0 || encrypted {
                // Same inode twice, or an encrypted name that cannot be
                // changed: the entry goes.
                drop.insert(b2);
            } else {
                let mut n = entries[b2].1.clone();
                loop {
                    mutate_name(&mut n);
                    if !names.contains(&n) {
                        break;
                    }
                }
                names.insert(n.clone());
                entries[b2].1 = n;
            }
            changed = true;
        }
        if !changed {
            break;
        }
    }
    drop
}

/// Rewrites a directory's blocks compactly from `it`: '.' and '..' stay
/// in block 0. What does not fit is left in `it`.
fn write_compactly<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    ino: Ino,
    blocks: &[(u64, PhysBlock)],
    it: &mut std::iter::Peekable<std::vec::IntoIter<&Entry>>,
) -> io::Result<()> {
    let fs = &st.fs;
    let bs = fs.block_size();
    let csum = fs.metadata_csum();
    let end = if csum { bs - DIR_TAIL_SIZE } else { bs };
    let ft = fs.geo.incompat.contains(IncompatFeatures::FILETYPE);
    let mut first = vec![0u8; bs];
    stage.read(blocks[0].1, &mut first)?;
    let dot = dirent::inode_at(&first, 0);
    let dotdot = dirent::inode_at(&first, 12);
    for (k, &(lblk, pblk)) in blocks.iter().enumerate() {
        let b = stage.block(pblk, Kind::DirLeaf(ino))?;
        b.fill(0);
        let mut at = 0;
        let mut last: Option<usize> = None;
        if lblk == 0 && k == 0 {
            put_dirent(b, 0, dot, 12, b".", if ft { 2 } else { 0 });
            put_dirent(b, 12, dotdot, 12, b"..", if ft { 2 } else { 0 });
            last = Some(12);
            at = 24;
        }
        while let Some(e) = it.peek() {
            let need = min_rec(e.1.len(), false);
            if at + need > end {
                break;
            }
            put_dirent(b, at, e.0, need, &e.1, e.2);
            last = Some(at);
            at += need;
            it.next();
        }
        match last {
            Some(l) => {
                let rl = end - l;
                dirent::set_rec_len(b, l, bs, rl);
            }
            None => put_dirent(b, 0, 0, end, b"", 0),
        }
        if csum {
            ext4_layout::dirent::write_tail(b, 0);
        }
    }
    Ok(())
}

/// The next name e2fsck tries for a duplicate: "~0" takes the last two
/// characters of the name rounded up to the entry's 4-byte padding (the
/// entry keeps its size), and a name already ending in "~digits" counts
/// up.
fn mutate_name(n: &mut Vec<u8>) {
    let l = n.len();
    if l == 0 {
        n.extend_from_slice(b"~0");
        return;
    }
    let mut i = l - 1;
    while i > 0 && n[i].is_ascii_digit() {
        i -= 1;
    }
    if i == l - 1 || n[i] != b'~' {
        let nl = if (l - 1) & 3 < 2 { l + 2 } else { (l + 3) & !3 }.min(255);
        n.resize(nl, 0);
        n[nl - 2] = b'~';
        n[nl - 1] = b'0';
        return;
    }
    // Count up the digits after the '~', carrying into new places.
    let mut k = l;
    loop {
        if k == 0 {
            break;
        }
        k -= 1;
        if n[k].is_ascii_digit() {
            if n[k] == b'9' {
                n[k] = b'0';
                continue;
            }
            n[k] += 1;
            return;
        }
        // Every digit rolled over: make room for one more.
        if k >= 1 {
            n[k] = b'1';
            n[k - 1] = b'~';
        } else {
            n[0] = n[0].wrapping_add(1);
        }
        return;
    }
}

/// Inline directories: the entries in `i_block` after the parent number,
/// and those in the system.data attribute when it is stored in the inode.
fn fix_inline_dir<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    fx: &DirFix<'_>,
    raw: &[u8],
) -> io::Result<bool> {
    let fs = &st.fs;
    let mut inode = raw.to_vec();
    let mut modified = false;
    let parent = i_block_word(0).get(&inode);
    let icount = fs.sb().s_inodes_count();
    if parent > icount || !Ino::new(parent).is_some_and(|p| stage.is_dir(p)) {
        i_block_word(0).set(&mut inode, 2);
        modified = true;
    }
    let mut region = inode[I_BLOCK_OFFSET + 4..I_BLOCK_OFFSET + 60].to_vec();
    if walk_block(st, stage, &mut region, 1, BlockKind::Leaf, fx, false) {
        inode[I_BLOCK_OFFSET + 4..I_BLOCK_OFFSET + 60].copy_from_slice(&region);
        modified = true;
    }
    if fx.inline_size_bad {
        modified |= fix_inline_size(&mut inode);
    }
    // The rest of the directory, in the in-inode system.data value.
    if let Some((vstart, vlen, entry)) = system_data_in_inode(&inode) {
        let mut value = inode[vstart..vstart + vlen].to_vec();
        if !value.is_empty() && walk_block(st, stage, &mut value, 1, BlockKind::Leaf, fx, false) {
            inode[vstart..vstart + vlen].copy_from_slice(&value);
            if ext4_layout::xattr::entry_at(&inode, entry).e_hash != 0 {
                let h = ext4_layout::xattr::entry_hash(b"data", Some(&value), false);
                ext4_layout::xattr::put_entry_hash(&mut inode, entry, h);
            }
            modified = true;
        }
    }
    if modified {
        stage.inode(fx.ino)?.copy_from_slice(&inode);
    }
    Ok(true)
}

/// An inline directory's size (the 60 bytes of `i_block` and its
/// system.data value) made what its entries can fill, as e2fsck makes it:
/// too short for an entry past the first 60 bytes, the value is emptied;
/// otherwise it grows, zero-filled, to the next multiple of four (room the
/// value already has, as values are padded to four bytes) for the entry
/// walk to salvage. The inode's size follows. Whether it changed.
fn fix_inline_size(inode: &mut [u8]) -> bool {
    let Some((vstart, vlen, entry)) = system_data_in_inode(inode) else {
        return false;
    };
    let old = 60 + vlen;
    let new_vlen = if old > 60 && old < 72 {
        0
    } else if old % 4 != 0 {
        vlen + (4 - old % 4)
    } else {
        return false;
    };
    if vstart + vlen.max(new_vlen) > inode.len() || new_vlen > (vlen + 3) & !3 {
        return false;
    }
    inode[vstart + new_vlen.min(vlen)..vstart + vlen.max(new_vlen)].fill(0);
    ext4_layout::xattr::put_entry_value_size(inode, entry, new_vlen as u32);
    if ext4_layout::xattr::entry_at(inode, entry).e_hash != 0 {
        let value = &inode[vstart..vstart + new_vlen];
        let h = ext4_layout::xattr::entry_hash(b"data", Some(value), false);
        ext4_layout::xattr::put_entry_hash(inode, entry, h);
    }
    crate::raw::set_size(inode, (60 + new_vlen) as u64);
    true
}

/// Where the value of an inode's in-inode "system.data" attribute lies:
/// (value start, value length, entry start), all offsets in the inode.
fn system_data_in_inode(inode: &[u8]) -> Option<(usize, usize, usize)> {
    let isz = inode.len();
    if isz <= 128 {
        return None;
    }
    let area = 128 + usize::from(field::i_extra_isize_raw.get(inode));
    let xattrs = InodeXattrs::new(inode.get(area..)?).filter(|x| x.present())?;
    // Entries and value offsets count from right after the magic.
    let first = area + 4;
    for e in xattrs.entries() {
        let e = e.ok()?;
        if e.e_name_index == 7 && e.name == b"data" && e.e_value_inum == 0 {
            let v = first + usize::from(e.e_value_offs);
            let size = e.e_value_size as usize;
            return (v + size <= isz).then_some((v, size, first + e.offset));
        }
    }
    None
}
