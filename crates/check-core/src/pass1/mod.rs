//! Pass 1: every inode, its blocks and its size.
//!
//! The inode tables are cut into chunks that workers check independently.
//! Each worker owns its output; the outputs are concatenated in chunk
//! order, so the result does not depend on the number of threads. Block
//! ownership is tracked in a shared atomic bitmap: a test-and-set that
//! finds the bit already set records a multiply-claimed block.

mod badblocks;
mod blocks;
mod ea;
mod inode;
mod meta;
mod scan;
mod types;

use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
use crate::io::Io;
use crate::problem::Finding;

pub(crate) use badblocks::read_bad_blocks_list;
pub use blocks::{collect_extents, collect_tree, KeptTree};
pub use meta::mark_table_blocks;
pub use types::has_valid_blocks as inode_has_valid_blocks;
pub(crate) use types::Worker;
pub(crate) use types::{chunk_extent, DirMeta, Policy, Stats, CHUNK_INODES};
pub use types::{chunks, Chunk, LeafExtent, Pass1, QuotaUse};
pub use types::{BlockKey, DirWork, DxInfo, P1Out};

impl<'a> Pass1<'a> {
    /// Whether, under a repair, problem `f` is taken as fixed.
    pub(crate) fn says_yes(&self, f: &crate::problem::Finding) -> bool {
        crate::ctx::answered_yes(self.repairing, self.answers.as_deref(), f)
    }

    /// Whether a block claimed twice is accepted: the shared_blocks
    /// feature says files may share blocks, unless they are to be
    /// unshared.
    pub(crate) fn blocks_may_be_shared(&self) -> bool {
        self.fs
            .geo
            .ro_compat
            .contains(ext4_layout::features::RoCompatFeatures::SHARED_BLOCKS)
            && !self.choices.unshare_blocks
    }

    /// The shared context of pass 1.
    pub fn new(fs: &'a Fs, maps: &'a Maps, bad_blocks: &'a [u64]) -> Self {
        let sb = fs.sb();
        let icount = sb.s_inodes_count();
        // Clock values smaller than the inode count mean a test image whose
        // dtimes cannot be told apart from orphan-list links.
        let low_dtime_check = ![sb.s_wtime(), sb.s_mtime(), sb.s_mkfs_time()]
            .iter()
            .any(|&t| t != 0 && t < icount);
        Pass1 {
            fs,
            maps,
            bad_blocks,
            low_dtime_check,
            choices: crate::ctx::Choices::default(),
            repairing: false,
            answers: None,
            not_dirs: std::sync::Arc::from([]),
            live_orphans: std::sync::Arc::from([]),
            sink: None,
        }
    }

    /// Checks one chunk of inodes with a worker's reader. Inode 1 is
    /// skipped: `Pass1::check_bad_blocks_inode` checks it first. With
    /// `read_ahead` (reads are missing the cache), the blocks the inodes'
    /// checks read one at a time are asked for together first.
    pub fn check_chunk(&self, io: &mut Io<'a>, chunk: Chunk, read_ahead: bool) -> P1Out {
        let mut w = Worker::new(self, io);
        scan::scan_chunk(&mut w, chunk, scan::Only::AllButBadBlocksInode, read_ahead);
        w.finish()
    }

    /// Checks the bad blocks inode, before any other: what it lists is
    /// judged against the metadata alone, as in e2fsck's inode order.
    pub(crate) fn check_bad_blocks_inode(&self, io: &mut Io<'a>) -> P1Out {
        let mut w = Worker::new(self, io);
        if self.fs.inodes_to_scan(0) > 0 && self.fs.gd(0).inode_table() != 0 {
            let chunk = Chunk {
                group: 0,
                first: 0,
                count: self.fs.geo.inodes_per_block.min(self.fs.inodes_to_scan(0)),
            };
            scan::scan_chunk(&mut w, chunk, scan::Only::BadBlocksInode, false);
        }
        w.finish()
    }

    /// A group whose inode table lies outside the file system stops the
    /// scan when it is reached: the first such inode, if any.
    pub(crate) fn table_abort(&self) -> Option<AbortAt> {
        let fs = self.fs;
        for g in 0..fs.geo.group_count {
            let it = fs.gd(g).inode_table();
            if it != 0
                && (it < fs.geo.first_data_block
                    || it + u64::from(fs.geo.inode_blocks_per_group) > fs.geo.blocks_count)
            {
                return Some(AbortAt::new(
                    crate::problem::Pass::P1,
                    g * fs.geo.inodes_per_group + 1,
                    format!("the inode table of group {g} is outside the file system"),
                ));
            }
        }
        None
    }

    /// The end of pass 1: EA blocks (each judged once, for the lowest
    /// inode that uses it) and their reference counts, and large
    /// directories without large_dir.
    pub fn finish(&self, io: &mut Io<'a>, out: &mut P1Out) {
        // A block is judged when its lowest user is checked, which the
        // sequential order only reaches if that inode comes no later than
        // where the pass stopped.
        let reached = out.abort.as_ref().map_or(u32::MAX, |a| a.ino);
        let mut refs = std::mem::take(&mut out.ea_refs);
        refs.retain(|r| r.ino <= reached);
        refs.sort_unstable();
        let mut w = Worker::new(self, io);
        let mut i = 0;
        while i < refs.len() {
            let first = refs[i];
            w.validate_ea(first.ino, first.gen, first.blk);
            while i < refs.len() && refs[i].blk == first.blk {
                i += 1;
            }
        }
        let extra = w.finish();
        out.findings.extend(extra.findings);
        out.ea_inode_refs.extend(extra.ea_inode_refs);
        out.abort = AbortAt::earliest(out.abort.take(), extra.abort);
        out.ea_refs = refs;
        if out.abort.is_some() {
            return;
        }
        ea_refcounts(self.fs, io, out);
        if out.stats.large_dirs > 0
            && !self
                .fs
                .geo
                .incompat
                .contains(ext4_layout::features::IncompatFeatures::LARGEDIR)
        {
            out.findings
                .push(Finding::new(crate::problem::Code::FeatureLargeDirs));
        }
    }
}

/// Compares each EA block's reference count with the inodes that use it.
fn ea_refcounts(fs: &Fs, io: &mut Io<'_>, out: &mut P1Out) {
    use crate::problem::Code;
    use ext4_layout::xattr::{XattrBlock, EA_MAGIC};
    let mut refs = out.ea_refs.clone();
    refs.sort_unstable();
    let mut buf = vec![0u8; fs.block_size()];
    let mut i = 0;
    while i < refs.len() {
        let blk = refs[i].blk;
        let mut j = i;
        while j < refs.len() && refs[j].blk == blk {
            j += 1;
        }
        let users = (j - i) as u32;
        i = j;
        if io.read_blocks(blk, &mut buf).is_err() {
            continue;
        }
        let Some(x) = XattrBlock::new(&buf) else {
            continue;
        };
        let h = x.h_refcount();
        if h == users {
            continue;
        }
        // The count has to be rewritten, which needs a sound block.
        let sound = x.h_magic() == EA_MAGIC
            && x.h_blocks() == 1
            && (!fs.metadata_csum() || x.checksum_ok(fs.geo.csum_seed, blk));
        if !sound {
            out.abort = AbortAt::earliest(
                out.abort.take(),
                Some(AbortAt::new(
                    crate::problem::Pass::P1,
                    u32::MAX,
                    format!("extended attribute block {blk} needs its reference count fixed but cannot be read cleanly"),
                )),
            );
            return;
        }
        out.findings.push(
            Finding::new(Code::EaBlockRefcount)
                .blk(blk)
                .mismatch(u64::from(h), u64::from(users)),
        );
    }
}
