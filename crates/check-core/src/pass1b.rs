//! Pass 1B: blocks claimed by more than one inode (or by an inode and the
//! file system's own metadata). Every inode sharing a block is reported.

use std::collections::BTreeMap;

use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use ext4_layout::inode::Inode;

use crate::blockiter::for_each_block;
use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
use crate::io::Io;
use crate::pass1::inode_has_valid_blocks;
use crate::problem::{Code, Finding, Pass};

/// The result of pass 1B.
pub struct P1bOut {
    /// Findings.
    pub findings: Vec<Finding>,
    /// Set if the pass could not run.
    pub abort: Option<AbortAt>,
    /// Inodes that share blocks, with the clusters they share.
    pub dup_inodes: BTreeMap<u32, Vec<u64>>,
}

/// Finds every owner of every multiply-claimed cluster.
pub fn run(fs: &Fs, maps: &Maps) -> P1bOut {
    let mut out = P1bOut {
        findings: Vec::new(),
        abort: None,
        dup_inodes: BTreeMap::new(),
    };
    if maps.block_dup.count_ones() == 0 {
        return out;
    }
    // The rescan verifies inode checksums; a bad one stops it.
    if let Some(i) = maps.inode_csum_bad.next_set(0) {
        out.abort = Some(AbortAt::new(
            Pass::P1B,
            0,
            format!(
                "inode {} has a bad checksum while rescanning for multiply-claimed blocks",
                i + 1
            ),
        ));
        return out;
    }
    let geo = &fs.geo;
    let bits = geo.cluster_bits;
    let mut io = Io::new(fs);
    let mut ib = vec![0u8; geo.inode_size as usize];
    let mut tables = TableChunk::default();
    let mut owners: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut per_inode: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let ext_attr = geo.compat.contains(CompatFeatures::EXT_ATTR);
    let is64 = geo.incompat.contains(IncompatFeatures::BIT64);
    let mut ino_idx = maps.inode_used.next_set(0);
    while let Some(idx) = ino_idx {
        let ino = idx as u32 + 1;
        ino_idx = maps.inode_used.next_set(idx + 1);
        if maps.inode_bb.get(idx) || !tables.inode(&mut io, ino, &mut ib) {
            continue;
        }
        let Some(inode) = Inode::new(&ib) else {
            continue;
        };
        let mut mine: Vec<u64> = Vec::new();
        if ino == 1 || inode_has_valid_blocks(fs, &inode) {
            let mut last_cluster = u64::MAX;
            let mut last_lblk_cluster = i64::MIN;
            for_each_block(&mut io, &inode, &mut |b, lblk| {
                if b == 0 || !geo.block_in_range(b) {
                    return;
                }
                let c = b >> bits;
                if !maps.block_dup.get(c) {
                    return;
                }
                let lc = if lblk < 0 { lblk } else { lblk >> bits };
                if lblk < 0 || c != last_cluster || lc != last_lblk_cluster {
                    mine.push(c);
                }
                last_cluster = c;
                last_lblk_cluster = lc;
            });
        }
        let acl = inode.file_acl(is64);
        if ext_attr && acl != 0 && geo.block_in_range(acl) && maps.block_dup.get(acl >> bits) {
            mine.push(acl >> bits);
        }
        if mine.is_empty() {
            continue;
        }
        for &c in &mine {
            owners.entry(c).or_default().push(ino);
        }
        per_inode.insert(ino, mine);
    }
    let mut shares_meta = false;
    for (&ino, clusters) in &per_inode {
        if ino == 1 || ino == 7 {
            continue;
        }
        let mut shared: Vec<u32> = Vec::new();
        for c in clusters {
            if (0..u64::from(geo.cluster_ratio)).any(|k| maps.metadata.get((c << bits) + k)) {
                shares_meta = true;
            }
            for &o in owners.get(c).map(|v| v.as_slice()).unwrap_or(&[]) {
                if o != ino && !shared.contains(&o) {
                    shared.push(o);
                }
            }
        }
        shared.sort_unstable();
        let list: Vec<String> = shared.iter().map(|o| o.to_string()).collect();
        let mut text = list.join(", ");
        if shares_meta {
            if !text.is_empty() {
                text.push_str(", ");
            }
            text.push_str("file system metadata");
        }
        out.findings.push(
            Finding::new(Code::DupBlocks)
                .ino(ino)
                .shared(
                    clusters.len() as u64,
                    shared.len() as u64 + u64::from(shares_meta),
                )
                .detail(text),
        );
    }
    out.dup_inodes = per_inode;
    out
}

/// A run of one group's inode table, read at once: the rescan reads the
/// tables in large pieces instead of one inode at a time (ten million
/// reads on a ten-million-inode file system).
#[derive(Default)]
struct TableChunk {
    /// The first inode held, and the bytes of the inodes from it on.
    first: u32,
    bytes: Vec<u8>,
    /// Inodes whose piece could not be read (read one by one).
    failed: std::ops::Range<u32>,
}

/// How much of an inode table one read takes.
const CHUNK_BYTES: u64 = 4 << 20;

impl TableChunk {
    /// Copies inode `ino` into `buf`; false when it cannot be read.
    fn inode(&mut self, io: &mut Io<'_>, ino: u32, buf: &mut [u8]) -> bool {
        let fs = io.fs;
        let isz = fs.geo.inode_size as usize;
        if self.failed.contains(&ino) {
            return io.read_inode(ino, buf).is_ok();
        }
        let held = (self.bytes.len() / isz.max(1)) as u32;
        if ino < self.first || ino >= self.first.saturating_add(held) {
            self.load(io, ino);
        }
        let at = (ino - self.first) as usize * isz;
        match self.bytes.get(at..at + isz) {
            Some(raw) => {
                buf[..isz].copy_from_slice(raw);
                true
            }
            // The piece could not be read: the inode alone, as before.
            None => io.read_inode(ino, buf).is_ok(),
        }
    }

    /// Reads from `ino` to the end of its group's table (at most
    /// [`CHUNK_BYTES`]).
    fn load(&mut self, io: &mut Io<'_>, ino: u32) {
        let fs = io.fs;
        let ipg = fs.geo.inodes_per_group;
        let isz = u64::from(fs.geo.inode_size);
        self.first = ino;
        self.bytes.clear();
        let Some(off) = Io::inode_offset(fs, ino) else {
            return;
        };
        let in_group = (ino - 1) % ipg;
        let left = u64::from(ipg - in_group);
        let n = left.min((CHUNK_BYTES / isz).max(1));
        let mut bytes = vec![0u8; (n * isz) as usize];
        if io.reader().read_at(&mut bytes, off).is_ok() {
            self.bytes = bytes;
        } else {
            self.failed = ino..ino.saturating_add(n as u32);
        }
    }
}
