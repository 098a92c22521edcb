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
pub use inode::has_valid_blocks as inode_has_valid_blocks;
pub use meta::mark_table_blocks;

/// A directory found in pass 1, with what pass 2 needs to know about it.
#[derive(Clone, Debug, Default)]
pub struct DirRec {
    /// Inode number.
    pub ino: u32,
    /// `i_generation` (seeds its block checksums).
    pub generation: u32,
    /// `i_flags`.
    pub iflags: u32,
    /// `i_size`.
    pub size: u64,
    /// Whether its inode checksum is good.
    pub csum_ok: bool,
    /// For inline directories: `i_block` plus the system.data value.
    pub inline: Option<Vec<u8>>,
    /// For indexed directories: the htree facts pass 2 checks against.
    pub dx: Option<DxInfo>,
    /// The encryption policy, if the directory is encrypted.
    pub policy: Option<Policy>,
}

/// Htree facts about an indexed directory.
#[derive(Clone, Debug, Default)]
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

/// One directory block to check in pass 2 (`pblk` 0 is a hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirBlock {
    /// Physical block (0 for a hole or inline data).
    pub pblk: u64,
    /// Directory inode.
    pub ino: u32,
    /// Logical block within the directory.
    pub lblk: u64,
}

/// A reference from an inode to an EA block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EaRef {
    /// The EA block.
    pub blk: u64,
    /// The inode.
    pub ino: u32,
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
}

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
    /// Directories, in inode order.
    pub dirs: Vec<DirRec>,
    /// Directory blocks.
    pub dir_blocks: Vec<DirBlock>,
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
    pub quota: Vec<((u8, u32), QuotaUse)>,
}

impl P1Out {
    /// Appends another worker's output (outputs are appended in chunk order).
    pub fn append(&mut self, mut o: P1Out) {
        self.findings.append(&mut o.findings);
        self.dirs.append(&mut o.dirs);
        self.dir_blocks.append(&mut o.dir_blocks);
        self.ea_refs.append(&mut o.ea_refs);
        self.ea_inode_refs.append(&mut o.ea_inode_refs);
        self.policies.append(&mut o.policies);
        self.stats.add(&o.stats);
        self.abort = AbortAt::earliest(self.abort.take(), o.abort);
        self.quota.append(&mut o.quota);
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
}

impl<'a> Pass1<'a> {
    /// Checks one chunk of inodes with a worker's reader.
    pub fn check_chunk(&self, io: &mut Io<'a>, chunk: Chunk) -> P1Out {
        let mut w = inode::Worker::new(self, io);
        scan::scan_chunk(&mut w, chunk);
        w.finish()
    }
}

/// Runs pass 1 over every inode table chunk on `pool`, then the
/// end-of-pass checks (EA block reference counts, large directories).
pub fn run(fs: &Fs, maps: &Maps, bad_blocks: &[u64], pool: &rayon::ThreadPool) -> P1Out {
    use rayon::prelude::*;
    let sb = fs.sb();
    let icount = sb.s_inodes_count();
    // Clock values smaller than the inode count mean a test image whose
    // dtimes cannot be told apart from orphan-list links.
    let low_dtime_check = ![sb.s_wtime(), sb.s_mtime(), sb.s_mkfs_time()]
        .iter()
        .any(|&t| t != 0 && t < icount);
    let p1 = Pass1 {
        fs,
        maps,
        bad_blocks,
        low_dtime_check,
    };
    let mut out = P1Out::default();
    // A group whose inode table lies outside the file system stops the
    // scan when it is reached.
    let mut table_abort = None;
    for g in 0..fs.geo.group_count {
        let it = fs.gd(g).inode_table();
        if it != 0
            && (it < fs.geo.first_data_block
                || it + u64::from(fs.geo.inode_blocks_per_group) > fs.geo.blocks_count)
        {
            table_abort = Some(AbortAt::new(
                crate::problem::Pass::P1,
                g * fs.geo.inodes_per_group + 1,
                format!("the inode table of group {g} is outside the file system"),
            ));
            break;
        }
    }
    let all = chunks(fs);
    let limit = table_abort.as_ref().map_or(u32::MAX, |a| a.ino);
    let work: Vec<Chunk> = all
        .into_iter()
        .filter(|c| c.group * fs.geo.inodes_per_group + c.first + 1 < limit)
        .collect();
    let outs: Vec<P1Out> = pool.install(|| {
        work.par_iter()
            .map_init(|| Io::new(fs), |io, c| p1.check_chunk(io, *c))
            .collect()
    });
    for o in outs {
        out.append(o);
    }
    out.abort = AbortAt::earliest(out.abort.take(), table_abort);
    if out.abort.is_some() {
        return out;
    }
    let mut io = Io::new(fs);
    ea_refcounts(fs, &mut io, &mut out);
    if out.stats.large_dirs > 0
        && !fs
            .geo
            .incompat
            .contains(ext4_layout::features::IncompatFeatures::LARGEDIR)
    {
        out.findings
            .push(Finding::new(crate::problem::Code::FeatureLargeDirs));
    }
    out
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
