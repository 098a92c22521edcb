//! Htree verification: index entries point at blocks in hash order, each
//! block is referenced once, and each leaf's hashes lie within the range
//! its parent gives it.

use std::collections::{BTreeMap, BTreeSet};

use super::block::{DxBlock, DxKind};
use crate::pass1::DxInfo;
use crate::problem::{Code, Finding};

const REFERENCED: u8 = 1;
const DUP_REF: u8 = 2;
const FIRST: u8 = 4;
const LAST: u8 = 8;

/// Records beyond this many blocks are not tracked (such a directory is
/// unreasonable and its other problems are reported anyway).
const MAX_TRACKED: u64 = 1 << 24;

#[derive(Clone, Copy, Default)]
struct Rec {
    kind: Option<DxKind>,
    flags: u8,
    parent: u64,
    previous: u64,
    min_hash: u32,
    max_hash: u32,
    node_min: u32,
    node_max: u32,
}

struct DxDir {
    numblocks: u64,
    depth: u32,
    recs: Vec<Rec>,
}

/// Htree records of every indexed directory.
pub(crate) struct DxState {
    dirs: BTreeMap<u32, DxDir>,
    block_size: usize,
    metadata_csum: bool,
}

impl DxState {
    /// Empty records for every indexed directory.
    pub fn new(dx_dirs: &[(u32, DxInfo)], block_size: usize, metadata_csum: bool) -> Self {
        let mut dirs = BTreeMap::new();
        for &(ino, x) in dx_dirs {
            if x.numblocks == 0 || x.numblocks > MAX_TRACKED {
                continue;
            }
            dirs.insert(
                ino,
                DxDir {
                    numblocks: x.numblocks,
                    depth: u32::from(x.indirect_levels) + 1,
                    recs: vec![Rec::default(); x.numblocks as usize],
                },
            );
        }
        DxState {
            dirs,
            block_size,
            metadata_csum,
        }
    }

    /// Applies one block's facts (e2fsck does this while checking it).
    /// A problem answered yes clears the directory's index, as e2fsck
    /// clears it: its other blocks and the final verification then judge
    /// nothing more of it (the repair rebuilds it).
    pub fn apply(
        &mut self,
        findings: &mut Vec<Finding>,
        ino: u32,
        lblk: u64,
        d: DxBlock,
        yes: &dyn Fn(&Finding) -> bool,
    ) {
        if self.judge(findings, ino, lblk, d, yes) {
            self.dirs.remove(&ino);
        }
    }

    /// [`DxState::apply`]'s checks, in e2fsck's order; true when a problem
    /// answered yes clears the index.
    fn judge(
        &mut self,
        findings: &mut Vec<Finding>,
        ino: u32,
        lblk: u64,
        d: DxBlock,
        yes: &dyn Fn(&Finding) -> bool,
    ) -> bool {
        let mut found = |f: Finding| {
            let clear = yes(&f);
            findings.push(f);
            clear
        };
        let bs = self.block_size;
        let csum = if self.metadata_csum { 8 } else { 0 };
        let Some(dir) = self.dirs.get_mut(&ino) else {
            return false;
        };
        let Some(rec) = dir.recs.get_mut(lblk as usize) else {
            return false;
        };
        rec.kind = Some(d.kind);
        rec.min_hash = d.min_hash;
        rec.max_hash = d.max_hash;
        if d.kind == DxKind::Root {
            rec.flags |= FIRST | LAST;
        }
        if d.kind == DxKind::Leaf {
            return false;
        }
        if d.failed_csum {
            let c = if d.kind == DxKind::Root {
                Code::HtreeRootCsum
            } else {
                Code::HtreeNodeCsum
            };
            if found(Finding::new(c).dir(ino).logical(lblk)) {
                return true;
            }
        }
        let expect = (bs.saturating_sub(csum).saturating_sub(d.entries_start) / 8) as u16;
        if d.limit != expect
            && found(
                Finding::new(Code::HtreeBadLimit)
                    .dir(ino)
                    .blk(lblk)
                    .mismatch(u64::from(d.limit), u64::from(expect)),
            )
        {
            return true;
        }
        let mut count = d.count;
        if count > expect {
            if found(
                Finding::new(Code::HtreeBadCount)
                    .dir(ino)
                    .blk(lblk)
                    .over_limit(u64::from(count), u64::from(expect)),
            ) {
                return true;
            }
            count = expect;
        }
        let n = usize::from(count).min(d.entries.len());
        let mut prev_hash;
        let mut min = u32::MAX;
        let mut max = 0u32;
        let mut hash = 0u32;
        for i in 0..n {
            prev_hash = hash;
            hash = if i == 0 { 0 } else { d.entries[i].0 & !1 };
            let blk = ext4_layout::htree::entry_block(d.entries[i].1);
            if blk >= dir.numblocks {
                if found(Finding::new(Code::HtreeBadBlk).dir(ino).logical(blk)) {
                    return true;
                }
                continue;
            }
            if hash < prev_hash && found(Finding::new(Code::HtreeHashOrder).dir(ino).blk(lblk)) {
                return true;
            }
            let previous = if i > 0 {
                ext4_layout::htree::entry_block(d.entries[i - 1].1)
            } else {
                0
            };
            let next_hash = if i + 1 < n {
                Some(d.entries[i + 1].0 & !1)
            } else {
                None
            };
            let t = &mut dir.recs[blk as usize];
            if t.flags & REFERENCED != 0 {
                t.flags |= DUP_REF;
            } else {
                t.flags |= REFERENCED;
                t.parent = lblk;
            }
            t.previous = previous;
            t.node_min = hash;
            match next_hash {
                Some(h) => t.node_max = h,
                None => {
                    t.node_max = 0xFFFF_FFFE;
                    t.flags |= LAST;
                }
            }
            if i == 0 {
                t.flags |= FIRST;
            }
            min = min.min(hash);
            max = max.max(hash);
        }
        let rec = &mut dir.recs[lblk as usize];
        rec.min_hash = min;
        rec.max_hash = max;
        false
    }

    /// The final check of every indexed directory not scheduled for rebuild.
    pub(crate) fn verify(&mut self, findings: &mut Vec<Finding>, rehash: &BTreeSet<u32>) {
        for (&ino, dir) in self.dirs.iter_mut() {
            if rehash.contains(&ino) || dir.numblocks == 0 {
                continue;
            }
            let recs = &mut dir.recs;
            if recs[0].flags & REFERENCED != 0 {
                recs[0].flags |= DUP_REF;
            } else {
                recs[0].flags |= REFERENCED;
            }
            for kind in [DxKind::Leaf, DxKind::Node] {
                for b in 0..recs.len() {
                    if recs[b].kind != Some(kind) {
                        continue;
                    }
                    let r = recs[b];
                    let p = r.parent as usize;
                    if p >= recs.len() {
                        continue;
                    }
                    if r.flags & FIRST != 0 {
                        recs[p].min_hash = r.min_hash;
                        let prev = recs[p].previous as usize;
                        if prev != 0 && prev < recs.len() {
                            recs[prev].node_max = recs[p].min_hash;
                        }
                    }
                    if r.flags & LAST != 0 {
                        recs[p].max_hash = r.max_hash;
                    }
                }
            }
            let mut bad = false;
            for b in 0..recs.len() {
                let r = recs[b];
                let blk = b as u64;
                if r.flags & FIRST == 0 && r.min_hash < r.node_min {
                    findings.push(Finding::new(Code::HtreeMinHash).dir(ino).logical(blk));
                    bad = true;
                }
                if r.kind == Some(DxKind::Leaf) {
                    let mut depth = 0u32;
                    let mut cur = b;
                    while recs[cur].kind != Some(DxKind::Root) && depth < 32000 {
                        cur = recs[cur].parent as usize;
                        if cur >= recs.len() {
                            break;
                        }
                        depth += 1;
                    }
                    if depth != dir.depth {
                        findings.push(Finding::new(Code::HtreeBadDepth).dir(ino).logical(blk));
                        bad = true;
                    }
                }
                if b != 0 && r.max_hash > r.node_max {
                    findings.push(Finding::new(Code::HtreeMaxHash).dir(ino).logical(blk));
                    bad = true;
                }
                if r.flags & REFERENCED == 0 {
                    findings.push(Finding::new(Code::HtreeNotRef).dir(ino).logical(blk));
                    bad = true;
                } else if r.flags & DUP_REF != 0 {
                    findings.push(Finding::new(Code::HtreeDupRef).dir(ino).logical(blk));
                    bad = true;
                }
            }
            if bad {
                findings.push(Finding::new(Code::HtreeClear).dir(ino));
            }
        }
    }
}
