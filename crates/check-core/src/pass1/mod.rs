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

use ext4_layout::inode::FileType;

use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
use crate::io::Io;
use crate::problem::Finding;

pub use badblocks::read_bad_blocks_list;
pub use blocks::collect_extents;
pub use inode::has_valid_blocks as inode_has_valid_blocks;
pub use meta::mark_table_blocks;

/// What pass 2 needs to know about a directory; sent with each of its blocks.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirMeta {
    /// Inode number.
    pub ino: u32,
    /// `i_generation` (seeds its block checksums).
    pub generation: u32,
    /// `i_flags`.
    pub iflags: u32,
    /// Whether its inode checksum is good.
    pub csum_ok: bool,
    /// Whether it is encrypted with a readable policy.
    pub encrypted: bool,
    /// For indexed directories: the htree facts pass 2 checks against.
    pub dx: Option<DxInfo>,
}

/// Htree facts about an indexed directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DxInfo {
    /// Logical blocks the directory has (last mapped + 1).
    pub numblocks: u64,
    /// Whether the directory is case-folded.
    pub casefolded: bool,
    /// The root's hash version (0 if the root could not be read).
    pub hash_version: u8,
    /// The root's indirect levels.
    pub indirect_levels: u8,
}

/// An encryption policy: the context without its nonce.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Policy {
    /// A version this checker does not know.
    Unrecognized,
    /// The policy bytes.
    Known(Vec<u8>),
}

/// One directory block for pass 2.
#[derive(Clone, Debug)]
pub struct DirWork {
    /// The directory.
    pub meta: DirMeta,
    /// Physical block (0 for a hole or inline data).
    pub pblk: u64,
    /// Logical block within the directory.
    pub lblk: u64,
    /// For an inline directory: `i_block` and the system.data value.
    pub inline: Option<std::sync::Arc<[u8]>>,
}

/// The position of a directory block in e2fsck's processing order: with
/// dir_index every directory's first block comes first, then by
/// physical block, inode and logical block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BlockKey {
    /// 1 for blocks after the first ones (dir_index only), else 0.
    pub class: u8,
    /// Physical block.
    pub pblk: u64,
    /// Directory inode.
    pub ino: u32,
    /// Logical block.
    pub lblk: u64,
}

impl DirWork {
    /// The block's place in e2fsck's order.
    pub fn key(&self, dir_index: bool) -> BlockKey {
        BlockKey {
            class: u8::from(dir_index && self.lblk != 0),
            pblk: self.pblk,
            ino: self.meta.ino,
            lblk: self.lblk,
        }
    }
}

/// The directory being checked by a worker, collected until its inode is done.
#[derive(Default)]
pub(crate) struct CurDir {
    pub(crate) meta: DirMeta,
    pub(crate) blocks: Vec<(u64, u64)>,
    pub(crate) inline: Option<std::sync::Arc<[u8]>>,
}

/// A leaf extent kept by a repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafExtent {
    /// First logical block.
    pub lblk: u64,
    /// First physical block.
    pub pblk: u64,
    /// Length in blocks.
    pub len: u64,
    /// Whether it is marked uninitialised.
    pub uninit: bool,
}

/// A reference from an inode to an EA block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EaRef {
    /// The EA block.
    pub blk: u64,
    /// The inode.
    pub ino: u32,
    /// The inode's generation.
    pub gen: u32,
}

/// Counts gathered in pass 1.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Regular files.
    pub regular: u64,
    /// Directories.
    pub directories: u64,
    /// Character devices.
    pub chardev: u64,
    /// Block devices.
    pub blockdev: u64,
    /// FIFOs.
    pub fifos: u64,
    /// Sockets.
    pub sockets: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Fast symbolic links.
    pub fast_symlinks: u64,
    /// Fragmented files.
    pub fragmented: u64,
    /// Fragmented directories.
    pub fragmented_dir: u64,
    /// Regular files of 2 GiB or more.
    pub large_files: u64,
    /// Directories needing large_dir.
    pub large_dirs: u64,
    /// Block-mapped inodes with an indirect block.
    pub ind: u64,
    /// Block-mapped inodes with a double indirect block.
    pub dind: u64,
    /// Block-mapped inodes with a triple indirect block.
    pub tind: u64,
    /// Extent-mapped inodes by tree depth (the last slot counts deeper trees too).
    pub extent_depth: [u64; EXTENT_DEPTH_SLOTS],
}

/// Depths in the extent depth histogram, as e2fsck's.
pub const EXTENT_DEPTH_SLOTS: usize = 5;

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.regular += o.regular;
        self.directories += o.directories;
        self.chardev += o.chardev;
        self.blockdev += o.blockdev;
        self.fifos += o.fifos;
        self.sockets += o.sockets;
        self.symlinks += o.symlinks;
        self.fast_symlinks += o.fast_symlinks;
        self.fragmented += o.fragmented;
        self.fragmented_dir += o.fragmented_dir;
        self.large_files += o.large_files;
        self.large_dirs += o.large_dirs;
        self.ind += o.ind;
        self.dind += o.dind;
        self.tind += o.tind;
        for (a, b) in self.extent_depth.iter_mut().zip(o.extent_depth) {
            *a += b;
        }
    }

    fn count_type(&mut self, t: FileType) {
        match t {
            FileType::Regular => self.regular += 1,
            FileType::Directory => self.directories += 1,
            FileType::CharDevice => self.chardev += 1,
            FileType::BlockDevice => self.blockdev += 1,
            FileType::Fifo => self.fifos += 1,
            FileType::Socket => self.sockets += 1,
            FileType::Symlink => self.symlinks += 1,
        }
    }
}

/// Usage charged to one quota id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaUse {
    /// Bytes of space.
    pub space: u64,
    /// Inodes.
    pub inodes: u64,
}

/// What one worker (or the whole pass) produced.
#[derive(Default)]
pub struct P1Out {
    /// Problems found.
    pub findings: Vec<Finding>,
    /// Directory blocks found, not yet handed to pass 2.
    pub dir_work: Vec<DirWork>,
    /// Indexed directories.
    pub dx_dirs: Vec<(u32, DxInfo)>,
    /// References to EA blocks.
    pub ea_refs: Vec<EaRef>,
    /// EA inodes referenced by attributes (one entry per reference).
    pub ea_inode_refs: Vec<u32>,
    /// Encrypted inodes and their policies.
    pub policies: Vec<(u32, Policy)>,
    /// Counts.
    pub stats: Stats,
    /// Where a fatal problem stopped the pass.
    pub abort: Option<AbortAt>,
    /// Quota usage by (type, id): type 0 user, 1 group, 2 project.
    pub quota: std::collections::HashMap<(u8, u32), QuotaUse>,
    /// `fragcheck` lines: (inode, order within the inode, text).
    pub frag_lines: Vec<(u32, u32, String)>,
}

impl P1Out {
    /// Appends another worker's output (outputs are appended in chunk order).
    pub fn append(&mut self, mut o: P1Out) {
        self.findings.append(&mut o.findings);
        self.dir_work.append(&mut o.dir_work);
        self.dx_dirs.append(&mut o.dx_dirs);
        self.ea_refs.append(&mut o.ea_refs);
        self.ea_inode_refs.append(&mut o.ea_inode_refs);
        self.policies.append(&mut o.policies);
        self.frag_lines.append(&mut o.frag_lines);
        self.stats.add(&o.stats);
        self.abort = AbortAt::earliest(self.abort.take(), o.abort);
        for (k, v) in o.quota {
            let e = self.quota.entry(k).or_default();
            e.space += v.space;
            e.inodes += v.inodes;
        }
    }
}

/// A slice of one group's inode table: inodes `first..first + count`
/// (zero-based within the group).
#[derive(Clone, Copy, Debug)]
pub struct Chunk {
    /// The group.
    pub group: u32,
    /// First inode index within the group.
    pub first: u32,
    /// Number of inodes.
    pub count: u32,
}

/// Inodes per chunk: enough to amortise a read, small enough to balance.
pub const CHUNK_INODES: u32 = 2048;

/// Cuts the inode tables into chunks of whole inode-table blocks.
pub fn chunks(fs: &Fs) -> Vec<Chunk> {
    let ipb = fs.geo.inodes_per_block.max(1);
    let per = (CHUNK_INODES / ipb).max(1) * ipb;
    let mut v = Vec::new();
    for g in 0..fs.geo.group_count {
        let n = fs.inodes_to_scan(g);
        let mut first = 0;
        while first < n {
            let count = per.min(n - first);
            v.push(Chunk {
                group: g,
                first,
                count,
            });
            first += count;
        }
    }
    v
}

/// Where a chunk's part of the inode table lies: byte offset and length.
pub fn chunk_extent(fs: &Fs, chunk: &Chunk) -> (u64, u64) {
    let ipb = u64::from(fs.geo.inodes_per_block.max(1));
    let bs = u64::from(fs.geo.block_size);
    let first = fs.gd(chunk.group).inode_table() + u64::from(chunk.first) / ipb;
    let n = u64::from(chunk.count).div_ceil(ipb);
    (first.saturating_mul(bs), n * bs)
}

/// Read-only context of pass 1 shared by all workers.
pub struct Pass1<'a> {
    /// The file system.
    pub fs: &'a Fs,
    /// The shared maps.
    pub maps: &'a Maps,
    /// Blocks listed in the bad blocks inode.
    pub bad_blocks: &'a [u64],
    /// Whether the orphan-list "low dtime" test applies.
    pub low_dtime_check: bool,
    /// Under a repair: where a worker sends the fix of an inode whose only
    /// problems concern its own fields (see
    /// [`crate::repair::inode_local_fix`]), so it goes on checking while
    /// the fixer writes. `None` in a read-only check.
    pub sink: Option<&'a fixer::Fixer>,
    /// e2fsck's `-E` choices.
    pub choices: crate::ctx::Choices,
    /// Whether a repair runs this check (see
    /// [`crate::ctx::CheckOptions::repairing`]).
    pub repairing: bool,
    /// Inodes an earlier round judged not to be directories (see
    /// [`crate::ctx::CheckOptions::not_dirs`]).
    pub not_dirs: std::sync::Arc<[u32]>,
}

impl<'a> Pass1<'a> {
    /// Whether a block claimed twice is accepted: the shared_blocks
    /// feature says files may share blocks, unless they are to be
    /// unshared.
    pub fn blocks_may_be_shared(&self) -> bool {
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
            not_dirs: std::sync::Arc::from([]),
            sink: None,
        }
    }

    /// Checks one chunk of inodes with a worker's reader. Inode 1 is
    /// skipped: [`Pass1::check_bad_blocks_inode`] checks it first.
    pub fn check_chunk(&self, io: &mut Io<'a>, chunk: Chunk) -> P1Out {
        let mut w = inode::Worker::new(self, io);
        scan::scan_chunk(&mut w, chunk, scan::Only::AllButBadBlocksInode);
        w.finish()
    }

    /// Checks the bad blocks inode, before any other: what it lists is
    /// judged against the metadata alone, as in e2fsck's inode order.
    pub fn check_bad_blocks_inode(&self, io: &mut Io<'a>) -> P1Out {
        let mut w = inode::Worker::new(self, io);
        if self.fs.inodes_to_scan(0) > 0 {
            let chunk = Chunk {
                group: 0,
                first: 0,
                count: self.fs.geo.inodes_per_block.min(self.fs.inodes_to_scan(0)),
            };
            scan::scan_chunk(&mut w, chunk, scan::Only::BadBlocksInode);
        }
        w.finish()
    }

    /// A group whose inode table lies outside the file system stops the
    /// scan when it is reached: the first such inode, if any.
    pub fn table_abort(&self) -> Option<AbortAt> {
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
        let mut w = inode::Worker::new(self, io);
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
                .num(u64::from(h))
                .num2(u64::from(users)),
        );
    }
}
