//! The data pass 1's modules share: the pass's inputs and outputs, the
//! per-inode state a worker carries, and what it hands to pass 2.

use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::{flags, FileType, Inode, S_IFDIR, S_IFMT, S_IFREG};

use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
use crate::io::Io;
use crate::problem::Finding;
use crate::sink::FixSink;

/// What pass 2 needs to know about a directory; sent with each of its blocks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DirMeta {
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
    /// Whether pass 3A would index it (a linear directory of three blocks
    /// or more, see [`P1Out::linear_dirs`]): under a repair, its leaves'
    /// checksums are left to that rewrite, as e2fsck leaves them.
    pub to_index: bool,
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
pub(crate) enum Policy {
    /// A version this checker does not know.
    Unrecognized,
    /// The policy bytes.
    Known(Vec<u8>),
}

/// One directory block for pass 2.
#[derive(Clone, Debug)]
pub struct DirWork {
    /// The directory.
    pub(crate) meta: DirMeta,
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
pub(crate) struct EaRef {
    /// The EA block.
    pub blk: u64,
    /// The inode.
    pub ino: u32,
    /// The inode's generation.
    pub gen: u32,
}

/// Counts gathered in pass 1.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
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
pub(crate) const EXTENT_DEPTH_SLOTS: usize = 5;

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

    pub(crate) fn count_type(&mut self, t: FileType) {
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
pub use ext4_layout::quota::Usage as QuotaUse;

/// What one worker (or the whole pass) produced.
#[derive(Default)]
pub struct P1Out {
    /// Problems found.
    pub findings: Vec<Finding>,
    /// Directory blocks found, not yet handed to pass 2.
    pub dir_work: Vec<DirWork>,
    /// Indexed directories.
    pub dx_dirs: Vec<(u32, DxInfo)>,
    /// Directories whose index the repair drops (a problem with the
    /// index that e2fsck answers by clearing the flag): read as linear.
    pub dx_dropped: Vec<u32>,
    /// On a file system with dir_index, the directories e2fsck's pass 1
    /// queues for indexing in pass 3A: not indexed, not inline, three
    /// blocks long or more.
    pub linear_dirs: Vec<u32>,
    /// References to EA blocks.
    pub(crate) ea_refs: Vec<EaRef>,
    /// EA inodes referenced by attributes (one entry per reference).
    pub ea_inode_refs: Vec<u32>,
    /// Encrypted inodes and their policies.
    pub(crate) policies: Vec<(u32, Policy)>,
    /// Counts.
    pub(crate) stats: Stats,
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
        self.dx_dropped.append(&mut o.dx_dropped);
        self.linear_dirs.append(&mut o.linear_dirs);
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
pub(crate) const CHUNK_INODES: u32 = 2048;

/// Cuts the inode tables into chunks of whole inode-table blocks. A
/// group whose descriptor puts its inode table at block 0 has none to
/// read: as e2fsck's scan skips a missing table, none of its inodes is
/// read (a repair relocates the table first).
pub fn chunks(fs: &Fs) -> Vec<Chunk> {
    let ipb = fs.geo.inodes_per_block.max(1);
    let per = (CHUNK_INODES / ipb).max(1) * ipb;
    let mut v = Vec::new();
    for g in 0..fs.geo.group_count {
        let n = if fs.gd(g).inode_table() == 0 {
            0
        } else {
            fs.inodes_to_scan(g)
        };
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
pub(crate) fn chunk_extent(fs: &Fs, chunk: &Chunk) -> (u64, u64) {
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
    /// problems concern its own fields (see [`crate::sink`]), so it goes on
    /// checking while the fix is written. `None` in a read-only check.
    pub sink: Option<&'a dyn FixSink>,
    /// e2fsck's `-E` choices.
    pub choices: crate::ctx::Choices,
    /// Whether a repair runs this check (see
    /// [`crate::ctx::CheckOptions::repairing`]).
    pub repairing: bool,
    /// Who answers the repair's questions (see
    /// [`crate::ctx::CheckOptions::answers`]).
    pub answers: Option<std::sync::Arc<dyn crate::answers::Answers>>,
    /// Inodes an earlier round judged not to be directories (see
    /// [`crate::ctx::CheckOptions::not_dirs`]).
    pub not_dirs: std::sync::Arc<[u32]>,
    /// On a mounted file system in use: its orphans (sorted), which are
    /// live (open files deleted, truncations in flight), not damage.
    pub live_orphans: std::sync::Arc<[u32]>,
}

/// One pass-1 worker: its reader and its own output.
pub struct Worker<'p, 'f, 'io> {
    /// The shared pass context.
    pub p: &'p Pass1<'f>,
    /// The worker's reader.
    pub io: &'io mut Io<'f>,
    /// What this worker found.
    pub out: P1Out,
    /// Scratch block buffer.
    pub blockbuf: Vec<u8>,
    /// The directory being checked, if the current inode is one.
    pub(super) cur_dir: Option<CurDir>,
    /// Set while working something out whose problems are reported
    /// elsewhere: findings and aborts are dropped.
    pub(super) silent: bool,
    /// When set, the extents kept by the walk (those e2fsck would keep
    /// when answering "yes") are collected here.
    pub(crate) collect: Option<Vec<super::LeafExtent>>,
    /// While collecting, the extent tree nodes the walk keeps (those the
    /// check claims for the inode).
    pub(crate) collected_nodes: Vec<u64>,
    /// When set, blocks are not claimed in the shared maps (a walk made
    /// for a repair, after the check).
    pub(crate) no_claims: bool,
    /// Clusters this worker has claimed so far.
    pub(crate) claims: u64,
    /// The inode being checked as a fix made before its first checks
    /// leaves it, and that fix's code, reported where e2fsck meets it
    /// (see `Worker::answered_early`).
    pub(super) answered_early: Option<(u32, crate::problem::Code)>,
}

/// Facts about the inode being checked, passed between the checks.
pub(crate) struct Cur<'b> {
    /// Inode number.
    pub ino: u32,
    /// The inode.
    pub inode: Inode<'b>,
    /// Whether its checksum fails.
    pub csum_bad: bool,
    /// Quota blocks charged by in-inode EA values stored in EA inodes.
    pub ea_ibody_quota_blocks: u64,
    /// Where this inode's findings start in the worker's list.
    pub findings_from: usize,
}

/// How the scan hands an inode over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanStatus {
    /// Read fine.
    Ok,
    /// Its checksum does not match.
    CsumInvalid,
    /// Its inode-table block looks like garbage.
    Garbage,
    /// It lies in a block listed as bad.
    BadBlock,
}

/// Whether an inode has blocks to walk (the library's rule, as of
/// e2fsprogs 1.47.4): devices and fast symlinks do not; an inline-data
/// file does not.
pub fn has_valid_blocks(fs: &crate::fs::Fs, inode: &Inode<'_>) -> bool {
    let t = inode.i_mode() & S_IFMT;
    if t != S_IFDIR && t != S_IFREG && t != 0o120000 {
        return false;
    }
    if t == 0o120000 {
        let acl = inode.file_acl(fs.geo.incompat.contains(IncompatFeatures::BIT64));
        if acl == 0 {
            // Without an attribute block, blocks counted on a short link
            // belong to its attributes (a value in an EA inode), not to
            // a target block: the target is in i_block.
            if inode.i_blocks_lo() == 0 {
                return false;
            }
            let size = inode.size();
            return !(size != 0 && size < 60);
        } else {
            let size = u64::from(inode.i_size_lo());
            return size >= 60 || (size > 4 && inode.i_block_word(1) == 0);
        }
    }
    !inode.has_flag(flags::INLINE_DATA)
}
