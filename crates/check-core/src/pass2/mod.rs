//! Pass 2: directory structure.
//!
//! Each directory block is checked on its own (in parallel); what depends
//! on the order e2fsck processes blocks in — which link to a directory
//! comes first, where a fatal problem stops the pass, htree references —
//! is applied afterwards, walking the results in e2fsck's block order.

mod badinode;
mod block;
mod htree;

use ext4_layout::features::CompatFeatures;
use ext4_layout::inode::{FileType, Inode};

pub use badinode::{process_bad_inode, BadInodeOutcome};
pub use block::{casefold, check_block, BlockResult, DxBlock, DxKind};

use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
use crate::io::Io;
use crate::pass1::{DirBlock, DirRec, P1Out, Policy};
use crate::problem::{Code, Finding, Pass};

/// Where a leaf block's checksum tail stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailStatus {
    /// A well-formed tail ends the entry chain.
    Found,
    /// The chain does not end where a tail would be.
    NoSpace,
    /// The chain itself is broken.
    Corrupted,
}

/// What pass 2 shares with its workers.
pub struct P2Ctx<'a> {
    /// The file system.
    pub fs: &'a Fs,
    /// Pass-1 maps.
    pub maps: &'a Maps,
    /// Directories by inode (sorted).
    pub dirs: &'a [DirRec],
    /// Encryption policies by inode (sorted).
    pub policies: &'a [(u32, Policy)],
}

impl P2Ctx<'_> {
    /// The directory record of `ino`.
    pub fn dir(&self, ino: u32) -> Option<&DirRec> {
        self.dirs
            .binary_search_by_key(&ino, |d| d.ino)
            .ok()
            .map(|i| &self.dirs[i])
    }

    /// The encryption policy of an inode.
    pub fn policy_of(&self, ino: u32) -> Option<&Policy> {
        self.policies
            .binary_search_by_key(&ino, |p| p.0)
            .ok()
            .map(|i| &self.policies[i].1)
    }

    /// Reads an inode the way e2fsck's "read or die" does: a checksum
    /// failure stops the check.
    pub fn read_inode_checked(
        &self,
        io: &mut Io<'_>,
        ino: u32,
        buf: &mut [u8],
    ) -> Result<(), String> {
        if io.read_inode(ino, buf).is_err() {
            return Err(format!("cannot read inode {ino}"));
        }
        let csum_bad = if self.maps.inode_scanned.get(u64::from(ino - 1)) {
            self.maps.inode_csum_bad.get(u64::from(ino - 1))
        } else {
            self.fs.metadata_csum()
                && Inode::new(buf).is_some_and(|i| !i.checksum_ok(self.fs.geo.csum_seed, ino))
        };
        if csum_bad {
            return Err(format!(
                "inode {ino} fails its checksum and cannot be read reliably"
            ));
        }
        Ok(())
    }

    /// The directory entry type an inode's mode calls for (reads the inode).
    pub fn mode_type(&self, io: &mut Io<'_>, ino: u32) -> Result<u8, String> {
        if self.maps.used(ino) && !self.maps.inode_csum_bad.get(u64::from(ino - 1)) {
            let t = self.maps.ftype(ino);
            if t != 0 {
                return Ok(t);
            }
        }
        let mut buf = vec![0u8; self.fs.geo.inode_size as usize];
        self.read_inode_checked(io, ino, &mut buf)?;
        Ok(Inode::new(&buf)
            .and_then(|i| i.file_type())
            .map_or(0, FileType::dirent_code))
    }
}

/// Everything pass 2 hands on.
#[derive(Default)]
pub struct P2Out {
    /// Findings.
    pub findings: Vec<Finding>,
    /// References found per inode (index `ino - 1`), '.' and '..' included.
    pub counted: Vec<u32>,
    /// `dir_info` parent of each directory (index as in `dirs`).
    pub parent: Vec<u32>,
    /// `dir_info` dotdot of each directory.
    pub dotdot: Vec<u32>,
    /// Directories with duplicate names, for pass 3A.
    pub dup_dirs: Vec<u32>,
    /// Where a fatal problem stopped the check.
    pub abort: Option<AbortAt>,
}

/// The order e2fsck checks directory blocks in: with dir_index every
/// directory's first block comes first, then by physical block.
pub fn sort_blocks(fs: &Fs, blocks: &mut [DirBlock]) {
    if fs.geo.compat.contains(CompatFeatures::DIR_INDEX) {
        blocks.sort_by_key(|b| (b.lblk != 0, b.pblk, b.ino, b.lblk));
    } else {
        blocks.sort_by_key(|b| (b.pblk, b.ino, b.lblk));
    }
}

/// Runs pass 2.
pub fn run(fs: &Fs, maps: &Maps, p1: &mut P1Out, pool: &rayon::ThreadPool) -> P2Out {
    use rayon::prelude::*;
    let mut blocks = std::mem::take(&mut p1.dir_blocks);
    sort_blocks(fs, &mut blocks);
    p1.policies.sort_by_key(|p| p.0);
    let cx = P2Ctx {
        fs,
        maps,
        dirs: &p1.dirs,
        policies: &p1.policies,
    };
    let results: Vec<BlockResult> = pool.install(|| {
        blocks
            .par_iter()
            .map_init(
                || Io::new(fs),
                |io, b| match cx.dir(b.ino) {
                    Some(d) => check_block(&cx, io, b, d),
                    None => BlockResult::default(),
                },
            )
            .collect()
    });
    merge(&cx, &blocks, results)
}

/// Applies block results in order: parents, '..', references, aborts,
/// then the htree verification.
pub fn merge(cx: &P2Ctx<'_>, blocks: &[DirBlock], results: Vec<BlockResult>) -> P2Out {
    let fs = cx.fs;
    let ndirs = cx.dirs.len();
    let mut out = P2Out {
        counted: vec![0; fs.geo.inodes_count as usize],
        parent: vec![0; ndirs],
        dotdot: vec![0; ndirs],
        ..Default::default()
    };
    let idx = |ino: u32| cx.dirs.binary_search_by_key(&ino, |d| d.ino).ok();
    if let Some(i) = idx(2) {
        out.parent[i] = 2;
    }
    let mut dx = htree::DxState::new(cx);
    let mut dup_set = std::collections::BTreeSet::new();
    for (b, r) in blocks.iter().zip(results) {
        let BlockResult {
            findings,
            abort,
            dotdot,
            refs,
            dir_links,
            dup,
            dx: dxb,
        } = r;
        out.findings.extend(findings);
        if let Some(d) = dotdot {
            if let Some(i) = idx(b.ino) {
                out.dotdot[i] = d;
            }
        }
        for (target, name) in dir_links {
            if let Some(i) = idx(target) {
                if out.parent[i] != 0 {
                    out.findings
                        .push(Finding::new(Code::LinkDir).dir(b.ino).ino(target).str(name));
                } else {
                    out.parent[i] = b.ino;
                }
            }
        }
        for t in refs {
            if let Some(c) = out.counted.get_mut(t as usize - 1) {
                *c = c.saturating_add(1);
            }
        }
        if let Some(name) = dup {
            if dup_set.insert(b.ino) {
                out.findings
                    .push(Finding::new(Code::ReportDupDirent).dir(b.ino).str(name));
            }
        }
        if let Some(d) = dxb {
            dx.apply(&mut out.findings, b, d);
        }
        if let Some(why) = abort {
            out.abort = Some(AbortAt::new(Pass::P2, u32::MAX, why));
            return out;
        }
    }
    dx.verify(&mut out.findings, &dup_set);
    out.dup_dirs = dup_set.into_iter().collect();
    out
}
