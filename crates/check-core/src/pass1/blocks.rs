//! `check_blocks`: walk an inode's blocks (block map, extent tree or
//! inline data), claim them, and check `i_size` and `i_blocks`.

use ext4_layout::extent::{self, ExtentNode};
use ext4_layout::features::{IncompatFeatures, RoCompatFeatures};
use ext4_layout::htree::DxRoot;
use ext4_layout::inode::{flags, inode_csum_seed, Inode};
use ext4_layout::superblock::OS_HURD;
use ext4_layout::walk::{self, BlockMapVisitor, BlockSource, ExtentVisitor, MapStep, WalkEntry};

use super::types::{
    has_valid_blocks, Cur, DxInfo, LeafExtent, Pass1, QuotaUse, Worker, EXTENT_DEPTH_SLOTS,
};
use crate::error::ExtentWalkError;
use crate::problem::{Code, Finding};
use crate::xattr_read;

/// Per-inode state of the block walk (e2fsck's process_block_struct).
struct Walk {
    ino: u32,
    is_dir: bool,
    is_reg: bool,
    size_high: u32,
    num_blocks: u64,
    max_blocks: u64,
    /// Highest logical block accepted; `u64::MAX` (i.e. -1) before any.
    last_block: u64,
    last_init_lblock: i64,
    last_db_block: i64,
    num_illegal: u32,
    /// Under a repair: the inode is to be cleared for too many illegal
    /// blocks, and its walk goes no further (e2fsck's BLOCK_ABORT).
    cleared: bool,
    previous_block: u64,
    fragmented: bool,
    next_lblock: u64,
    /// Set when the walk failed in a way e2fsck treats as fatal.
    error: Option<String>,
    /// Blocks the quota charge gains (or loses) from a change the repair
    /// is to make that the block count above does not show yet: an
    /// extent tree rebuilt smaller.
    quota_delta: i64,
}

impl Walk {
    /// e2fsck's `fragcheck` letter: d for a directory, f for a file.
    fn type_char(&self) -> char {
        if self.is_dir {
            'd'
        } else if self.is_reg {
            'f'
        } else {
            '?'
        }
    }

    fn new(geo: &ext4_layout::Geometry, inode: &Inode<'_>, ino: u32) -> Self {
        Walk {
            ino,
            is_dir: inode.is_dir(),
            is_reg: inode.is_reg(),
            size_high: inode.i_size_high(),
            num_blocks: 0,
            max_blocks: 1u64 << (31 - (geo.block_size_bits - 10)),
            last_block: u64::MAX,
            last_init_lblock: -1,
            last_db_block: -1,
            num_illegal: 0,
            cleared: false,
            previous_block: 0,
            fragmented: false,
            next_lblock: 0,
            error: None,
            quota_delta: 0,
        }
    }
}

/// The extents of an inode that a repair keeps: the walk of the check,
/// dropping every extent (and every subtree) it finds a problem with,
/// as e2fsck does when it answers "yes". `Err` if the tree cannot be
/// walked to the end (the extents found before that are returned too).
pub fn collect_extents<'f>(
    p: &Pass1<'f>,
    io: &mut crate::io::Io<'f>,
    ino: u32,
    raw: &[u8],
) -> (Vec<LeafExtent>, bool) {
    let t = collect_tree(p, io, ino, raw);
    (t.leaves, t.ok)
}

/// What a repair keeps of an extent tree (see [`collect_tree`]).
#[derive(Debug, Default)]
pub struct KeptTree {
    /// The leaf extents e2fsck keeps.
    pub leaves: Vec<LeafExtent>,
    /// The tree nodes (below the root) the walk keeps, each a block the
    /// check claims for the inode.
    pub nodes: Vec<u64>,
    /// Whether the walk got through the tree.
    pub ok: bool,
}

/// [`collect_extents`], with the tree nodes the walk keeps.
pub fn collect_tree<'f>(
    p: &Pass1<'f>,
    io: &mut crate::io::Io<'f>,
    ino: u32,
    raw: &[u8],
) -> KeptTree {
    let Some(inode) = Inode::new(raw) else {
        return KeptTree::default();
    };
    let mut w = Worker::new(p, io);
    w.silent = true;
    w.no_claims = true;
    w.collect = Some(Vec::new());
    let cur = Cur {
        ino,
        inode,
        csum_bad: false,
        ea_ibody_quota_blocks: 0,
        findings_from: 0,
    };
    let mut walk = Walk::new(&p.fs.geo, &inode, ino);
    w.check_extents(&cur, &mut walk);
    KeptTree {
        leaves: w.collect.take().unwrap_or_default(),
        nodes: std::mem::take(&mut w.collected_nodes),
        ok: walk.error.is_none(),
    }
}

/// Why a block-map walk stopped.
enum MapErr {
    BadInd(u64),
    Read(u64),
}

impl Worker<'_, '_, '_> {
    /// Records a `fragcheck` line for `ino`.
    fn frag_line(&mut self, ino: u32, text: String) {
        let n = self
            .out
            .frag_lines
            .iter()
            .rev()
            .take_while(|l| l.0 == ino)
            .count() as u32;
        self.out.frag_lines.push((ino, n, text));
    }

    /// Claims a cluster; a second claim marks it multiply claimed.
    pub(super) fn mark_block_used(&mut self, blk: u64) {
        if self.no_claims {
            return;
        }
        let fs = self.p.fs;
        let c = blk >> fs.geo.cluster_bits;
        let maps = self.p.maps;
        self.claims += 1;
        if maps.block_found.test_and_set(c) && !self.p.blocks_may_be_shared() {
            maps.block_dup.test_and_set(c);
        }
    }

    fn mark_blocks_used(&mut self, start: u64, n: u64) {
        let bits = self.p.fs.geo.cluster_bits;
        if n == 0 || self.no_claims {
            return;
        }
        let first = start >> bits;
        let last = (start + n - 1) >> bits;
        self.claims += last - first + 1;
        let maps = self.p.maps;
        let shared = self.p.blocks_may_be_shared();
        maps.block_found
            .test_and_set_range(first, last - first + 1, |c| {
                if !shared {
                    maps.block_dup.test_and_set(c);
                }
            });
    }

    /// Checks and claims all blocks of an inode, then its size and block count.
    pub(super) fn check_blocks(&mut self, cur: &mut Cur<'_>) {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let inode = cur.inode;
        let ino = cur.ino;
        let mut w = Walk::new(geo, &inode, ino);
        w.num_blocks = cur.ea_ibody_quota_blocks >> geo.cluster_bits;
        let ea = self.check_ext_attr(cur);
        if ea.counted {
            w.num_blocks += 1 + (ea.quota_blocks >> geo.cluster_bits);
        }
        if self.out.abort.is_some() {
            return;
        }
        let extent_fs = geo.incompat.contains(IncompatFeatures::EXTENTS);
        let inline_fs = geo.incompat.contains(IncompatFeatures::INLINE_DATA);
        if inline_fs && inode.has_flag(flags::INLINE_DATA) {
            self.check_inline_data(cur, &mut w);
        } else if has_valid_blocks(fs, &inode) {
            if extent_fs && inode.has_flag(flags::EXTENTS) {
                self.check_extents(cur, &mut w);
            } else {
                if inode.has_flag(flags::EXTENTS) {
                    self.walk_foreign_extents(cur, &mut w);
                } else if let Err(e) = self.walk_block_map(cur, &mut w) {
                    w.error = Some(match e {
                        MapErr::BadInd(b) => format!("illegal indirect block {b}"),
                        MapErr::Read(b) => format!("cannot read indirect block {b}"),
                    });
                }
                w.last_init_lblock = w.last_block as i64;
            }
        }
        if let Some(why) = w.error.take() {
            self.abort(
                ino,
                format!("error while iterating over the blocks of inode {ino}: {why}"),
            );
            return;
        }
        if w.fragmented && w.num_blocks < u64::from(geo.blocks_per_group) {
            if w.is_dir {
                self.out.stats.fragmented_dir += 1;
            } else {
                self.out.stats.fragmented += 1;
            }
        }
        if inode.has_flag(flags::INDEX) {
            self.handle_htree(cur, &w);
        }
        if w.num_blocks == 0 && w.is_dir && !inode.has_flag(flags::INLINE_DATA) {
            self.report(Finding::new(Code::ZeroLengthDir).ino(ino));
        }
        self.charge_quota(cur, w.num_blocks.saturating_add_signed(w.quota_delta));
        let huge = geo.ro_compat.contains(RoCompatFeatures::HUGE_FILE);
        let mut expect = w.num_blocks;
        if !huge || !inode.has_flag(flags::HUGE_FILE) {
            expect = expect.saturating_mul(u64::from(geo.block_size / 512));
        }
        expect = expect.saturating_mul(u64::from(geo.cluster_ratio));
        // e2fsck counts a large file by its size as its answer leaves it.
        let size = self.check_size(cur, &w);
        if inode.is_reg() && size >= 0x8000_0000 {
            self.out.stats.large_files += 1;
        }
        let actual = inode.blocks_raw(huge);
        if fs.sb().s_creator_os() != OS_HURD
            && (expect != actual
                || (huge && inode.has_flag(flags::HUGE_FILE) && inode.l_i_blocks_high() != 0))
        {
            self.report(
                Finding::new(Code::BadIBlocks)
                    .ino(ino)
                    .mismatch(actual, expect),
            );
        }
    }

    /// Reports a wrong size; returns the size as the answer leaves it.
    fn check_size(&mut self, cur: &Cur<'_>, w: &Walk) -> u64 {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let inode = cur.inode;
        let size = inode.size();
        let bs = u64::from(geo.block_size);
        let mut bad = false;
        let mut expect = w.last_block.wrapping_add(1).wrapping_mul(bs);
        if w.is_dir {
            let nblock = u64::from((size >> geo.block_size_bits) as u32);
            let have = w.last_block.wrapping_add(1);
            if inode.has_flag(flags::INLINE_DATA) {
                match xattr_read::inline_data_size(self.io, &inode, true) {
                    Some(sz) if sz == size => {}
                    other => {
                        bad = true;
                        expect = other.unwrap_or(0);
                    }
                }
            } else {
                let prealloc = u64::from(fs.sb().s_prealloc_dir_blocks());
                bad = size & (bs - 1) != 0
                    || nblock > have
                    || (nblock < have && have - nblock > prealloc);
            }
        } else {
            let extents =
                geo.incompat.contains(IncompatFeatures::EXTENTS) && inode.has_flag(flags::EXTENTS);
            let past_eof = w.last_init_lblock >= 0
                && size < (w.last_init_lblock as u64).wrapping_mul(bs)
                && !inode.has_flag(flags::VERITY);
            let too_big = if extents {
                // A file mapping the last logical block cannot have the
                // size that block implies (one byte past what extents can
                // address): it gets the largest size there is, which
                // still covers that block. (e2fsck offers the first and
                // then finds it too big again, forever.)
                let cap = (1u64 << (32 + geo.block_size_bits)) - 1;
                expect = expect.min(cap);
                size > cap
            } else {
                size > max_blockmap_size(geo.block_size_bits)
            };
            bad = past_eof || too_big;
        }
        if bad && !inode.is_symlink() {
            let f = Finding::new(Code::BadISize)
                .ino(cur.ino)
                .mismatch(size, expect);
            let fixed = self.p.says_yes(&f);
            self.report(f);
            if fixed {
                return expect;
            }
        }
        size
    }

    fn charge_quota(&mut self, cur: &Cur<'_>, num_blocks: u64) {
        let fs = self.p.fs;
        if !fs.geo.ro_compat.contains(RoCompatFeatures::QUOTA) {
            return;
        }
        let sb = fs.sb();
        let ino = cur.ino;
        let inode = cur.inode;
        if ino == sb.s_prj_quota_inum()
            || ino == sb.s_orphan_file_inum()
            || !(ino == 2 || ino >= fs.geo.first_ino)
            || inode.has_flag(flags::EA_INODE)
        {
            return;
        }
        let space = num_blocks * (u64::from(fs.geo.block_size) << fs.geo.cluster_bits);
        let mut charge = |key: (u8, u32)| {
            let e: &mut QuotaUse = self.out.quota.entry(key).or_default();
            e.space += space;
            e.inodes += 1;
        };
        charge((0, inode.uid()));
        charge((1, inode.gid()));
        if fs.geo.inode_size > 128 {
            charge((2, inode.i_projid().unwrap_or(0)));
        }
    }

    /// Records a directory block for pass 2.
    fn add_dir_block(&mut self, ino: u32, pblk: u64, lblk: u64) {
        if let Some(d) = self.cur_dir.as_mut().filter(|d| d.meta.ino == ino) {
            d.blocks.push((pblk, lblk));
        }
    }

    /// e2fsck's per-block callback for block-mapped files. Returns true
    /// when it cleared the (in-memory) pointer, so the walk skips it.
    fn process_block(&mut self, w: &mut Walk, blk: u64, blockcnt: i64, ref_block: u64) -> bool {
        let fs = self.p.fs;
        let geo = &fs.geo;
        if w.is_dir && blockcnt == 0 && blk == 0 {
            self.add_dir_block(w.ino, 0, 0);
            w.last_db_block += 1;
        }
        if blk == 0 || w.cleared {
            return w.cleared;
        }
        if w.previous_block != 0 && w.ino != 7 && w.previous_block + 1 != blk {
            w.fragmented = true;
            if self.p.choices.fragcheck && !self.silent {
                let text = format!(
                    "{:6}({}): expecting {:6} got phys {:6} (blkcnt {})",
                    w.ino,
                    w.type_char(),
                    w.previous_block + 1,
                    blk,
                    blockcnt
                );
                self.frag_line(w.ino, text);
            }
        }
        let mut problem = None;
        if w.is_dir
            && !geo.incompat.contains(IncompatFeatures::LARGEDIR)
            && w.size_high == 0
            && blockcnt > (1i64 << (21 - (geo.block_size_bits - 10)))
        {
            problem = Some(Code::TooBig);
        }
        if (w.is_dir || w.is_reg) && w.num_blocks + 1 >= w.max_blocks {
            problem = Some(Code::TooBig);
        }
        if !w.is_dir && !w.is_reg && blockcnt > 0 {
            problem = Some(Code::TooBig);
        }
        if !geo.block_in_range(blk) {
            problem = Some(Code::IllegalBlock);
        }
        let maps = self.p.maps;
        if blockcnt < 0
            && w.ino != 7
            && blk < u64::from(fs.sb().s_blocks_count_lo())
            && maps.metadata.get(blk)
        {
            self.report(
                Finding::new(Code::CriticalMetadataCollision)
                    .ino(w.ino)
                    .blk(blk),
            );
        }
        if let Some(code) = problem {
            w.num_illegal += 1;
            // A bad pointer inside a map block that sits on metadata is
            // dropped silently: pass 1B will move the map block first.
            if w.ino != 7 && ref_block != 0 && maps.metadata.get(ref_block) {
                return true;
            }
            // Every twelfth, e2fsck offers to clear the inode: declining
            // changes nothing, and a repair clears it and walks no more.
            if w.num_illegal % 12 == 0 && self.p.repairing {
                let many = Finding::new(Code::TooManyBadBlocks).ino(w.ino);
                let clear = self.p.says_yes(&many);
                self.report(many);
                if clear {
                    w.cleared = true;
                    return true;
                }
            }
            let f = Finding::new(code).ino(w.ino).blk(blk);
            let f = if code == Code::IllegalBlock {
                f.detail(describe_blockcnt(blockcnt))
            } else {
                f.logical(blockcnt.max(0) as u64)
            };
            self.report(f);
            return false;
        }
        if w.ino == 7 {
            if blockcnt == -2 {
                self.mark_block_used(blk);
            }
            w.num_blocks += 1;
        } else {
            let bits = geo.cluster_bits;
            let mask = (1u64 << bits) - 1;
            let same_cluster = bits > 0
                && w.previous_block != 0
                && (blk >> bits) == (w.previous_block >> bits)
                && (blk & mask) == (blockcnt as u64 & mask);
            if !same_cluster {
                self.mark_block_used(blk);
                w.num_blocks += 1;
            }
        }
        if blockcnt >= 0 {
            w.last_block = blockcnt as u64;
        }
        w.previous_block = blk;
        if w.is_dir && blockcnt >= 0 {
            w.last_db_block += 1;
            while w.last_db_block < blockcnt {
                self.add_dir_block(w.ino, 0, w.last_db_block as u64);
                w.last_db_block += 1;
            }
            self.add_dir_block(w.ino, blk, blockcnt as u64);
        }
        false
    }

    /// Walks a block map in the library's order: direct blocks, then the
    /// single, double and triple indirect trees, each map block reported
    /// before its entries.
    fn walk_block_map(&mut self, cur: &Cur<'_>, w: &mut Walk) -> Result<(), MapErr> {
        let i_block = cur.inode.i_block();
        // A directory's first block is registered even when it is a hole.
        if w.is_dir && cur.inode.i_block_word(0) == 0 {
            self.process_block(w, 0, 0, 0);
        }
        let mut v = MapCheck {
            per: u64::from(self.p.fs.geo.block_size / 4),
            w: self,
            walk: w,
            err: None,
            top: (0, 0),
            at: 0,
            shift: 0,
        };
        walk::walk_block_map(&mut v, i_block);
        v.err.map_or(Ok(()), Err)
    }

    /// An inode with the extents flag on a file system without extents:
    /// the library still walks it as an extent tree.
    fn walk_foreign_extents(&mut self, cur: &Cur<'_>, w: &mut Walk) {
        let ib = cur.inode.i_block();
        if ib.iter().all(|&b| b == 0) {
            return;
        }
        // The library cannot open such a tree and silently walks nothing.
        if ExtentNode::new(ib).is_none_or(|n| n.validate(true).is_err()) {
            return;
        }
        let mut v = ForeignCheck { w: self, walk: w };
        if let Err(why) = walk::walk_extent_tree(&mut v, ib, u64::MAX, ()) {
            w.error = Some(why.to_string());
        }
    }

    fn check_inline_data(&mut self, cur: &Cur<'_>, w: &mut Walk) {
        if !w.is_dir {
            return;
        }
        let ino = cur.ino;
        self.add_dir_block(ino, 0, 0);
        let Some(size) = xattr_read::inline_data_size(self.io, &cur.inode, true) else {
            return;
        };
        if size > 60 {
            self.add_dir_block(ino, 0, 1);
        }
        let data = xattr_read::inline_data(self.io, &cur.inode);
        if let Some(d) = self.cur_dir.as_mut().filter(|d| d.meta.ino == ino) {
            d.inline = data.map(std::sync::Arc::from);
        }
    }

    /// Checks an extent tree.
    fn check_extents(&mut self, cur: &Cur<'_>, w: &mut Walk) {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let inode = cur.inode;
        let ib = inode.i_block();
        let Some(root) = ExtentNode::new(ib).filter(|n| n.validate(true).is_ok()) else {
            self.report(Finding::new(Code::ExtentHeaderInvalid).ino(cur.ino));
            return;
        };
        let depth_slot = usize::from(root.eh_depth()).min(EXTENT_DEPTH_SLOTS - 1);
        self.out.stats.extent_depth[depth_slot] += 1;
        let max_depth = max_extent_depth(geo.block_size);
        // A tree too deep is rebuilt when the repair takes the fix, and
        // is then not weighed for a smaller one (e2fsck's force_rebuild).
        let mut rebuilt_anyway = false;
        if root.eh_depth() > max_depth {
            let f = Finding::new(Code::ExtentBadMaxDepth)
                .ino(cur.ino)
                .over_limit(u64::from(root.eh_depth()), u64::from(max_depth));
            rebuilt_anyway = self.p.says_yes(&f);
            self.report(f);
        }
        let bs = u64::from(geo.block_size);
        let size = inode.size();
        let end_blk = size.div_ceil(bs);
        let eof = end_blk.wrapping_sub(1);
        let seed = if cur.csum_bad {
            None
        } else {
            Some(inode_csum_seed(
                geo.csum_seed,
                cur.ino,
                inode.i_generation(),
            ))
        };
        let tree = Tree {
            max_depth: root.eh_depth(),
            eof,
            seed,
            is_verity: inode.has_flag(flags::VERITY),
        };
        let root_place = NodePlace {
            level: 0,
            start_block: 0,
            end_block: 0,
            try_repairs: true,
            failed_csum: false,
            last_pblk: 0,
        };
        let mut shape = TreeShape::default();
        shape.node(0, root.eh_entries(), root.eh_max());
        let mut v = ExtentCheck {
            w: self,
            cur,
            walk: w,
            tree,
            shape,
        };
        let walked = walk::walk_extent_tree(&mut v, ib, end_blk, root_place);
        let shape = v.shape;
        if let Err(why) = walked {
            self.report(
                Finding::new(Code::ExtentIterateFailure)
                    .ino(cur.ino)
                    .detail(why.to_string()),
            );
            w.error = Some(why.to_string());
            return;
        }
        if !rebuilt_anyway {
            self.offer_smaller_tree(cur, w, &shape, root.eh_depth());
        }
    }

    /// e2fsck's offer to rebuild an extent tree that could be shorter or
    /// narrower (its pass 1E), weighed on the tree as walked. Under a
    /// repair that takes the offer, the quota charge counts the tree
    /// blocks the rebuilt tree takes instead of the old ones.
    fn offer_smaller_tree(&mut self, cur: &Cur<'_>, w: &mut Walk, shape: &TreeShape, depth: u16) {
        let choices = &self.p.choices;
        if !choices.optimize_extents || (w.is_dir && choices.rehash_dirs) {
            return;
        }
        let geo = &self.p.fs.geo;
        let per = extent::entries_per_block(geo.block_size as usize) as u64;
        let Some((code, level)) = shape.offer(depth, per) else {
            return;
        };
        let f = Finding::new(code).ino(cur.ino).level(level);
        // e2fsck asks about any inode, but rebuilds only the root and
        // ordinary inodes.
        let rebuilt = cur.ino == 2 || cur.ino >= geo.first_ino;
        if rebuilt && self.p.says_yes(&f) {
            let bs = geo.block_size as usize;
            let new = extent::packed_tree_blocks(shape.runs, bs);
            w.quota_delta = new as i64 - shape.nodes as i64;
        }
        self.report(f);
    }

    /// The first problem of an extent-node entry, if any (a leaf extent
    /// without one moves the file's next expected block on).
    fn extent_problem(
        &self,
        w: &mut Walk,
        t: &Tree,
        e: &WalkEntry,
        is_leaf: bool,
        at: &NodePlace,
    ) -> Option<Code> {
        let geo = &self.p.fs.geo;
        let (lblk, pblk, len) = (e.lblk, e.pblk, e.len);
        let last_lblk = last_of(e);
        let problem = if pblk == 0 || pblk < geo.first_data_block || pblk >= geo.blocks_count {
            Some(Code::ExtentBadStart)
        } else if lblk < at.start_block {
            Some(Code::OutOfOrderExtents)
        } else if at.end_block != 0
            && last_lblk > at.end_block
            && !(last_lblk > t.eof && (e.uninit || t.is_verity))
        {
            Some(Code::ExtentEndOutOfBounds)
        } else if is_leaf && len == 0 {
            Some(Code::ExtentLengthZero)
        } else if is_leaf && pblk + len > geo.blocks_count {
            Some(Code::ExtentEndsBeyond)
        } else if is_leaf
            && w.is_dir
            && w.size_high == 0
            && !geo.incompat.contains(IncompatFeatures::LARGEDIR)
            && lblk + len > (1u64 << (21 - (geo.block_size_bits - 10)))
        {
            Some(Code::TooBig)
        } else {
            None
        };
        if is_leaf && problem.is_none() && len > 0 {
            if lblk < w.next_lblock {
                return Some(Code::ExtentCollision);
            }
            w.next_lblock = w.next_lblock.max(lblk + len);
        }
        problem
    }

    /// Reports an extent-node entry's problem, when the node's problems
    /// are reported; returns whether the entry is dropped. A node an
    /// entry is deleted from (under a repair that takes the fix, or when
    /// collecting what a repair keeps) is written anew, so its checksum
    /// is no longer a problem of its own, as e2fsck forgets it then.
    fn drop_entry(
        &mut self,
        ino: u32,
        e: &WalkEntry,
        at: &mut NodePlace,
        problem: Option<Code>,
    ) -> bool {
        let Some(code) = problem.filter(|_| at.try_repairs) else {
            return false;
        };
        let f = Finding::new(code).ino(ino).blk(e.pblk);
        let f = if code == Code::ExtentEndOutOfBounds {
            f.tree_level(e.lblk, u64::from(at.level))
        } else {
            f.extent(e.lblk, e.len)
        };
        if self.collect.is_some() || self.p.says_yes(&f) {
            at.failed_csum = false;
        }
        self.report(f);
        true
    }

    /// A child node as read, before its entries: header, checksum and
    /// first block. Whether to walk it.
    fn check_child_node(
        &mut self,
        ino: u32,
        t: &Tree,
        at: &mut NodePlace,
        pblk: u64,
        bytes: &[u8],
    ) -> Result<bool, ExtentWalkError> {
        let fs = self.p.fs;
        let lblk = at.start_block;
        let Some(cn) = ExtentNode::new(bytes).filter(|c| c.validate(false).is_ok()) else {
            if !at.try_repairs {
                return Err(ExtentWalkError::Bad(pblk));
            }
            self.report(
                Finding::new(Code::ExtentNodeInvalid)
                    .ino(ino)
                    .blk(pblk)
                    .detail(format!("bad header, logical block {lblk}")),
            );
            return Ok(false);
        };
        at.failed_csum = fs.geo.metadata_csum() && t.seed.is_none_or(|s| !cn.checksum_ok(s));
        if cn.eh_entries() == 0 {
            return Err(ExtentWalkError::Empty(pblk));
        }
        let child_first = if at.level == t.max_depth {
            u64::from(cn.leaf(0).ee_block)
        } else {
            u64::from(cn.index(0).ei_block)
        };
        if child_first != lblk {
            self.report(
                Finding::new(Code::ExtentIndexStartInvalid)
                    .ino(ino)
                    .mismatch(lblk, child_first)
                    .blk(pblk),
            );
            at.failed_csum = false;
        }
        at.start_block = child_first;
        Ok(true)
    }

    /// Takes a leaf extent that passed its checks: fragmentation, the
    /// directory's blocks, cluster alignment, the blocks it claims.
    /// Returns its last logical block.
    fn take_extent(&mut self, cur: &Cur<'_>, w: &mut Walk, e: WalkEntry, try_repairs: bool) -> u64 {
        let geo = &self.p.fs.geo;
        let ino = cur.ino;
        let WalkEntry {
            mut lblk,
            pblk,
            len,
            uninit,
        } = e;
        if w.previous_block != 0 && w.previous_block + 1 != pblk {
            w.fragmented = true;
            if self.p.choices.fragcheck && !self.silent {
                let text = format!(
                    "{:6}({}): expecting {:6} actual extent phys {:6} log {} len {}",
                    ino,
                    w.type_char(),
                    w.previous_block + 1,
                    pblk,
                    lblk,
                    len
                );
                self.frag_line(ino, text);
            }
        }
        if w.is_dir {
            if try_repairs && w.last_block.wrapping_add(1) < lblk {
                let f = Finding::new(Code::CollapseDblock).ino(ino).logical(lblk);
                let moved = self.collect.is_some() || self.p.says_yes(&f);
                self.report(f);
                if moved {
                    // The repair moves the extent down to close the gap;
                    // under bigalloc only to the next logical cluster, at
                    // the block's offset in its physical cluster (the gap
                    // left is holes that pass 2 fills).
                    lblk = collapsed_lblk(w.last_block.wrapping_add(1), pblk, geo.cluster_bits);
                }
            }
            self.add_extent_dir_blocks(ino, w, lblk, pblk, len);
        }
        let bits = geo.cluster_bits;
        if unaligned_cluster_map(bits, w.previous_block, w.last_block, pblk, lblk) {
            for i in 0..len {
                self.report(
                    Finding::new(Code::MisalignedCluster)
                        .ino(ino)
                        .blk(lblk + i)
                        .blk2(pblk + i),
                );
                self.mark_block_used(pblk + i);
                self.mark_block_used(pblk + i);
            }
        }
        let start =
            if bits > 0 && w.previous_block != 0 && (pblk >> bits) == (w.previous_block >> bits) {
                ((pblk >> bits) + 1) << bits
            } else {
                (pblk >> bits) << bits
            };
        if start < pblk + len {
            self.mark_blocks_used(start, pblk + len - start);
            w.num_blocks += (pblk + len - start).div_ceil(1u64 << bits);
        }
        if let Some(c) = self.collect.as_mut() {
            c.push(LeafExtent {
                lblk,
                pblk,
                len,
                uninit: uninit && !w.is_dir,
            });
        }
        w.previous_block = pblk + len - 1;
        let last_lblk = lblk.wrapping_add(len).wrapping_sub(1);
        w.last_block = last_lblk;
        if !w.is_dir && !uninit {
            w.last_init_lblock = last_lblk as i64;
        }
        last_lblk
    }

    /// Registers a directory extent's blocks, and holes before it.
    fn add_extent_dir_blocks(&mut self, ino: u32, w: &mut Walk, lblk: u64, pblk: u64, len: u64) {
        w.last_db_block += 1;
        while w.last_db_block < lblk as i64 {
            self.add_dir_block(ino, 0, w.last_db_block as u64);
            w.last_db_block += 1;
        }
        for j in 0..len {
            self.add_dir_block(ino, pblk + j, lblk + j);
        }
        if len > 0 {
            w.last_db_block = (lblk + len - 1) as i64;
        } else {
            w.last_db_block -= 1;
        }
    }

    /// Checks the htree root of an indexed directory and registers it.
    /// Under a repair that takes the fix, a problem e2fsck answers by
    /// clearing the index flag ends the check here and drops the
    /// registration, so pass 2 reads the directory as a linear one, as
    /// e2fsck -y's pass 2 does.
    fn handle_htree(&mut self, cur: &Cur<'_>, w: &Walk) {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let ino = cur.ino;
        let inode = cur.inode;
        self.register_dx(ino, inode, w);
        if !inode.is_dir() && self.index_cleared(Finding::new(Code::HtreeNodir).ino(ino)) {
            return;
        }
        if !geo
            .compat
            .contains(ext4_layout::features::CompatFeatures::DIR_INDEX)
            && self.index_cleared(Finding::new(Code::HtreeSet).ino(ino))
        {
            return;
        }
        let blk = match map_logical(self, &inode, ino, 0) {
            Some(b) if b != 0 && geo.block_in_range(b) => b,
            _ => {
                self.index_cleared(Finding::new(Code::HtreeRootBad).ino(ino));
                return;
            }
        };
        let mut buf = vec![0u8; fs.block_size()];
        if self.io.read_blocks(blk, &mut buf).is_err()
            && self.index_cleared(Finding::new(Code::HtreeRootBad).ino(ino))
        {
            return;
        }
        let Some(r) = DxRoot::new(&buf) else {
            return;
        };
        if let Some(d) = self.cur_dir.as_mut().filter(|d| d.meta.ino == ino) {
            if let Some(dx) = d.meta.dx.as_mut() {
                dx.hash_version = r.hash_version();
                dx.indirect_levels = r.indirect_levels();
            }
        }
        if (r.reserved_zero() != 0 || r.info_length() < 8)
            && self.index_cleared(Finding::new(Code::HtreeRootBad).ino(ino))
        {
            return;
        }
        let hv = r.hash_version();
        if !matches!(hv, 0 | 1 | 2 | 6)
            && self.index_cleared(Finding::new(Code::HtreeHashv).ino(ino).found(u64::from(hv)))
        {
            return;
        }
        if inode.has_flag(flags::ENCRYPT) && inode.has_flag(flags::CASEFOLD) {
            if hv != 6 && self.index_cleared(Finding::new(Code::HtreeNeedsSiphash).ino(ino)) {
                return;
            }
        } else if hv == 6 && self.index_cleared(Finding::new(Code::HtreeCannotSiphash).ino(ino)) {
            return;
        }
        if r.unused_flags() & 1 != 0
            && self.index_cleared(Finding::new(Code::HtreeIncompat).ino(ino))
        {
            return;
        }
        let levels = r.indirect_levels();
        if levels > 3
            && self.index_cleared(
                Finding::new(Code::HtreeDepth)
                    .ino(ino)
                    .found(u64::from(levels)),
            )
        {
            return;
        }
        let largedir = geo.incompat.contains(IncompatFeatures::LARGEDIR);
        let max_levels = if largedir { 3 } else { 2 };
        if levels > max_levels && !largedir {
            // e2fsck compares against a maximal two-level tree, with its
            // 32-bit arithmetic.
            let blockbits = geo.block_size_bits + 10;
            let idx_pb: u32 = 1u32.wrapping_shl(blockbits - 3);
            let prod = idx_pb.wrapping_sub(1).wrapping_mul(idx_pb.wrapping_sub(2));
            let size_lim = prod.wrapping_shl(blockbits);
            let blocks_lim = prod.wrapping_shl(blockbits - 9);
            if inode.size() < u64::from(size_lim)
                && inode.i_blocks_lo() < blocks_lim
                && self.index_cleared(
                    Finding::new(Code::HtreeDepth)
                        .ino(ino)
                        .found(u64::from(levels)),
                )
            {
                return;
            }
        }
        if levels > 2 || inode.size() >= 0x8000_0000 {
            self.out.stats.large_dirs += 1;
        }
    }

    /// Reports an htree problem e2fsck fixes by clearing the index flag;
    /// when the repair takes that fix, the directory is no longer
    /// registered as indexed. Returns whether it was cleared.
    fn index_cleared(&mut self, f: Finding) -> bool {
        let ino = f.ino;
        let yes = self.p.says_yes(&f);
        self.report(f);
        if yes {
            if let Some(d) = self.cur_dir.as_mut().filter(|d| Some(d.meta.ino) == ino) {
                if d.meta.dx.take().is_some() {
                    self.out.dx_dropped.push(d.meta.ino);
                }
            }
        }
        yes
    }

    fn register_dx(&mut self, ino: u32, inode: Inode<'_>, w: &Walk) {
        if let Some(d) = self.cur_dir.as_mut().filter(|d| d.meta.ino == ino) {
            d.meta.dx = Some(DxInfo {
                numblocks: w.last_block.wrapping_add(1),
                casefolded: inode.has_flag(flags::CASEFOLD),
                hash_version: 0,
                indirect_levels: 0,
            });
        }
    }
}

/// The check's visitors read mapping blocks through their worker's reader.
macro_rules! reads_through_worker {
    ($visitor:ty) => {
        impl BlockSource for $visitor {
            type Error = std::io::Error;

            fn block_size(&self) -> usize {
                self.w.io.block_size()
            }

            fn read_block(&mut self, blk: u64, buf: &mut [u8]) -> std::io::Result<()> {
                self.w.io.read_blocks(blk, buf)
            }
        }
    };
}

/// Where an extent node sits in its tree, and what its parent expects.
#[derive(Clone, Copy)]
struct NodePlace {
    /// Its depth below the root (0 for the root).
    level: u16,
    /// The first logical block it may map.
    start_block: u64,
    /// The last logical block it may map (0: no limit).
    end_block: u64,
    /// Problems here are reported and the entry skipped (not when the
    /// node collides with critical metadata: the walk then stops).
    try_repairs: bool,
    /// The node failed its checksum and nothing else was found wrong.
    failed_csum: bool,
    /// The physical block of its latest entry.
    last_pblk: u64,
}

/// What the whole extent tree of the inode being checked shares.
struct Tree {
    max_depth: u16,
    eof: u64,
    seed: Option<u32>,
    is_verity: bool,
}

/// The last logical block of an extent-node entry.
fn last_of(e: &WalkEntry) -> u64 {
    e.lblk.wrapping_add(e.len).wrapping_sub(1)
}

/// The check's visitor over an extent tree (e2fsck's scan of each node):
/// each entry is judged, a problem reported and the entry dropped, a
/// good leaf taken and a good index entry gone down.
struct ExtentCheck<'v, 'p, 'f, 'io, 'c> {
    w: &'v mut Worker<'p, 'f, 'io>,
    cur: &'v Cur<'c>,
    walk: &'v mut Walk,
    tree: Tree,
    shape: TreeShape,
}

/// The levels e2fsck weighs when it offers a smaller tree.
const SHAPE_LEVELS: usize = 8;

/// What e2fsck weighs to offer a shorter or narrower extent tree: per
/// level, the entries in use and the room; the tree blocks walked; and
/// the runs of blocks (extents joined where they meet) a rebuilt tree
/// would hold.
#[derive(Default)]
struct TreeShape {
    /// (entries, room) per level, 0 the root.
    levels: [(u64, u64); SHAPE_LEVELS],
    nodes: u64,
    runs: u64,
    /// The run being extended: its logical and physical end, length and
    /// whether it is uninitialised.
    last: Option<(u64, u64, u64, bool)>,
}

impl TreeShape {
    /// A node at `level` as walked. A block that is not full counts one
    /// entry less of room, as e2fsck counts it: appending splits a block
    /// and leaves one entry free, which must not make every such tree
    /// look too wide.
    fn node(&mut self, level: u16, entries: u16, max: u16) {
        let Some(l) = self.levels.get_mut(usize::from(level)) else {
            return;
        };
        l.0 += u64::from(entries);
        l.1 += u64::from(max);
        if level > 0 && entries < max {
            l.1 -= 1;
        }
    }

    /// A leaf extent the tree keeps, in logical order.
    fn leaf(&mut self, e: &WalkEntry) {
        let joins = self.last.is_some_and(|(lend, pend, len, uninit)| {
            lend == e.lblk
                && pend == e.pblk
                && uninit == e.uninit
                && len + e.len <= u64::from(extent::EXT_UNINIT_MAX_LEN)
        });
        let len = match self.last {
            Some((_, _, len, _)) if joins => len + e.len,
            _ => {
                self.runs += 1;
                e.len
            }
        };
        self.last = Some((e.lblk + e.len, e.pblk + e.len, len, e.uninit));
    }

    /// Whether the tree, `depth` levels below its root, could be shorter
    /// (a level holds no more entries than a level above it has room
    /// for) or narrower (a level has more than a block's worth, `per`,
    /// of room to spare), and at which level.
    fn offer(&self, depth: u16, per: u64) -> Option<(Code, u64)> {
        if usize::from(depth) >= SHAPE_LEVELS {
            return Some((Code::ExtentTreeShorter, u64::from(depth)));
        }
        for i in 0..=usize::from(depth) {
            let (entries, room) = self.levels[i];
            if room.saturating_sub(entries) > per {
                return Some((Code::ExtentTreeNarrower, i as u64));
            }
            if self.levels[..i].iter().any(|&(_, above)| entries < above) {
                return Some((Code::ExtentTreeShorter, i as u64));
            }
        }
        None
    }
}

reads_through_worker!(ExtentCheck<'_, '_, '_, '_, '_>);

impl ExtentVisitor for ExtentCheck<'_, '_, '_, '_, '_> {
    type Place = NodePlace;
    type Break = ExtentWalkError;

    fn leaf(&mut self, at: &mut NodePlace, e: WalkEntry) -> Result<(), ExtentWalkError> {
        let ino = self.cur.ino;
        at.last_pblk = e.pblk;
        let problem = self.w.extent_problem(self.walk, &self.tree, &e, true, at);
        if at.try_repairs && self.walk.is_dir && problem.is_none() && e.uninit {
            self.w.report(
                Finding::new(Code::UninitExtentOnDir)
                    .ino(ino)
                    .logical(e.lblk)
                    .blk(e.pblk),
            );
        }
        if !self.w.drop_entry(ino, &e, at, problem) {
            self.shape.leaf(&e);
            at.start_block = self.w.take_extent(self.cur, self.walk, e, at.try_repairs);
        }
        Ok(())
    }

    fn index(
        &mut self,
        at: &mut NodePlace,
        _level: u16,
        e: WalkEntry,
    ) -> Result<Option<NodePlace>, ExtentWalkError> {
        let ino = self.cur.ino;
        at.last_pblk = e.pblk;
        let problem = self.w.extent_problem(self.walk, &self.tree, &e, false, at);
        if self.w.drop_entry(ino, &e, at, problem) {
            return Ok(None);
        }
        let mut child = NodePlace {
            level: at.level + 1,
            start_block: e.lblk,
            end_block: last_of(&e),
            try_repairs: true,
            failed_csum: false,
            last_pblk: 0,
        };
        let fs = self.w.p.fs;
        if ino != 7
            && e.pblk < u64::from(fs.sb().s_blocks_count_lo())
            && self.w.p.maps.metadata.get(e.pblk)
        {
            child.try_repairs = false;
            self.w.report(
                Finding::new(Code::CriticalMetadataCollision)
                    .ino(ino)
                    .blk(e.pblk),
            );
        }
        Ok(Some(child))
    }

    fn unreadable(&mut self, blk: u64, _err: std::io::Error) -> ExtentWalkError {
        ExtentWalkError::Unreadable(blk)
    }

    fn cycle(&mut self, blk: u64) -> ExtentWalkError {
        ExtentWalkError::Cycle(blk)
    }

    fn node(
        &mut self,
        at: &mut NodePlace,
        blk: u64,
        bytes: &[u8],
    ) -> Result<bool, ExtentWalkError> {
        let walk = self
            .w
            .check_child_node(self.cur.ino, &self.tree, at, blk, bytes)?;
        if walk {
            if let Some(n) = ExtentNode::new(bytes) {
                self.shape.node(at.level, n.eh_entries(), n.eh_max());
            }
        }
        Ok(walk)
    }

    fn done(&mut self, at: NodePlace, blk: Option<u64>) -> Result<(), ExtentWalkError> {
        if at.failed_csum {
            // The extent e2fsck names (its last), and the tree block
            // whose checksum fails, which a repair rewrites.
            let mut f = Finding::new(Code::ExtentOnlyCsumInvalid)
                .ino(self.cur.ino)
                .blk(at.last_pblk);
            if let Some(node) = blk {
                f = f.blk2(node);
            }
            self.w.report(f);
        }
        if let Some(blk) = blk {
            self.w.mark_block_used(blk);
            if self.w.collect.is_some() {
                self.w.collected_nodes.push(blk);
            }
            self.walk.num_blocks += 1;
            self.shape.nodes += 1;
        }
        Ok(())
    }
}

/// The check's visitor over a block map: every pointer goes through
/// e2fsck's per-block callback, with e2fsck's numbering of logical
/// blocks (after a map block fails, the later trees are numbered as if
/// the failed one had ended where it failed).
struct MapCheck<'v, 'p, 'f, 'io> {
    w: &'v mut Worker<'p, 'f, 'io>,
    walk: &'v mut Walk,
    per: u64,
    /// The latest map-block failure: a later map block read clears it.
    err: Option<MapErr>,
    /// The top-level tree being walked: its first logical block and level.
    top: (u64, u32),
    /// The first logical block of the latest map block met.
    at: u64,
    /// How far the numbering lags the blocks' places, after failures.
    shift: u64,
}

impl MapCheck<'_, '_, '_, '_> {
    /// Notes that the top-level tree was left at the latest map block.
    fn left_tree(&mut self, why: MapErr) {
        self.err = Some(why);
        let (start, level) = self.top;
        let end = start.saturating_add(self.per.saturating_pow(level));
        self.shift += end.saturating_sub(self.at);
    }
}

reads_through_worker!(MapCheck<'_, '_, '_, '_>);

impl BlockMapVisitor for MapCheck<'_, '_, '_, '_> {
    fn data(&mut self, blk: u64, lblk: u64, parent: u64) {
        let n = lblk.saturating_sub(self.shift) as i64;
        self.w.process_block(self.walk, blk, n, parent);
    }

    fn map_block(&mut self, blk: u64, level: u32, lblk: u64, parent: u64) -> MapStep {
        if parent == 0 {
            self.top = (lblk, level);
        }
        self.at = lblk;
        if self
            .w
            .process_block(self.walk, blk, -i64::from(level), parent)
        {
            return MapStep::Skip;
        }
        let geo = &self.w.p.fs.geo;
        if blk >= geo.blocks_count || blk < geo.first_data_block {
            // A repair clears the pointer and goes on with the next one;
            // a read-only check cannot read the map block and leaves the
            // tree.
            let p = self.w.p;
            if p.repairing && self.w.out.findings.last().is_none_or(|f| p.says_yes(f)) {
                return MapStep::Skip;
            }
            self.left_tree(MapErr::BadInd(blk));
            return MapStep::Abandon;
        }
        self.err = None;
        MapStep::Descend
    }

    fn unreadable(&mut self, blk: u64, _err: std::io::Error) {
        self.left_tree(MapErr::Read(blk));
    }
}

/// The check's visitor over an extent tree on a file system without
/// extents: the library walks it without judging its entries.
struct ForeignCheck<'v, 'p, 'f, 'io> {
    w: &'v mut Worker<'p, 'f, 'io>,
    walk: &'v mut Walk,
}

reads_through_worker!(ForeignCheck<'_, '_, '_, '_>);

impl ExtentVisitor for ForeignCheck<'_, '_, '_, '_> {
    type Place = ();
    type Break = ExtentWalkError;

    fn leaf(&mut self, _: &mut (), e: WalkEntry) -> Result<(), ExtentWalkError> {
        for j in 0..e.len {
            self.w
                .process_block(self.walk, e.pblk + j, (e.lblk + j) as i64, 0);
        }
        Ok(())
    }

    fn index(
        &mut self,
        _: &mut (),
        _level: u16,
        e: WalkEntry,
    ) -> Result<Option<()>, ExtentWalkError> {
        self.w.process_block(self.walk, e.pblk, -1, 0);
        Ok(Some(()))
    }

    fn unreadable(&mut self, blk: u64, _err: std::io::Error) -> ExtentWalkError {
        ExtentWalkError::Unreadable(blk)
    }

    fn cycle(&mut self, blk: u64) -> ExtentWalkError {
        ExtentWalkError::Cycle(blk)
    }

    fn node(&mut self, _: &mut (), blk: u64, bytes: &[u8]) -> Result<bool, ExtentWalkError> {
        let ok =
            ExtentNode::new(bytes).is_some_and(|c| c.validate(false).is_ok() && c.eh_entries() > 0);
        if ok {
            Ok(true)
        } else {
            Err(ExtentWalkError::Bad(blk))
        }
    }
}

/// The deepest extent tree e2fsck accepts for a block size.
pub(crate) fn max_extent_depth(block_size: u32) -> u16 {
    let cap = (block_size - 12) / 12;
    let lg = 31 - cap.leading_zeros();
    (1 + 29 / lg) as u16
}

/// The largest file a block map can address.
fn max_blockmap_size(bits: u32) -> u64 {
    let bpp = 1u64 << (bits - 2);
    (12 + bpp + bpp * bpp + bpp * bpp * bpp) << bits
}

fn describe_blockcnt(blockcnt: i64) -> String {
    match blockcnt {
        -1 => "the indirect block".into(),
        -2 => "the double indirect block".into(),
        -3 => "the triple indirect block".into(),
        n => format!("logical block {n}"),
    }
}

/// Maps logical block `lblk` of an inode to its physical block (0 for a
/// hole). `None` if the map is unreadable.
pub(crate) fn map_logical(
    w: &mut Worker<'_, '_, '_>,
    inode: &Inode<'_>,
    _ino: u32,
    lblk: u64,
) -> Option<u64> {
    crate::blockiter::bmap(w.io, inode, lblk)
}

/// On bigalloc, whether a block's place in its logical cluster differs
/// from its place in the physical cluster, or a logical cluster spans two
/// physical ones (e2fsck's rule).
fn unaligned_cluster_map(bits: u32, last_pblk: u64, last_lblk: u64, pblk: u64, lblk: u64) -> bool {
    if bits == 0 {
        return false;
    }
    let mask = (1u64 << bits) - 1;
    if lblk & mask != pblk & mask {
        return true;
    }
    last_pblk != 0
        && lblk & mask != 0
        && lblk >> bits == last_lblk >> bits
        && pblk >> bits != last_pblk >> bits
}

/// Where e2fsck moves a directory extent at `pblk` whose logical start
/// leaves a gap after `next` (the block after the last one mapped): to
/// `next`, or under bigalloc to the first logical cluster at or past it,
/// at `pblk`'s offset within its cluster, so the cluster rule holds.
fn collapsed_lblk(next: u64, pblk: u64, cluster_bits: u32) -> u64 {
    if cluster_bits == 0 {
        return next;
    }
    let mask = (1u64 << cluster_bits) - 1;
    ((next + mask) & !mask) | (pblk & mask)
}

#[cfg(test)]
mod tests {
    use super::collapsed_lblk;

    #[test]
    fn a_gap_closes_to_the_next_block_without_bigalloc() {
        assert_eq!(collapsed_lblk(2, 137, 0), 2);
        assert_eq!(collapsed_lblk(0, 5000, 0), 0);
    }

    #[test]
    fn a_gap_closes_to_the_next_cluster_at_the_block_offset_with_bigalloc() {
        // 16 blocks a cluster: block 137 is at offset 9 of its cluster.
        assert_eq!(collapsed_lblk(2, 137, 4), 25);
        // Already at a cluster's start: that cluster, at the offset.
        assert_eq!(collapsed_lblk(16, 130, 4), 18);
        assert_eq!(collapsed_lblk(17, 128, 4), 32);
    }
}
