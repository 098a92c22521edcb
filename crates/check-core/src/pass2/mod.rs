//! Pass 2: directory structure.
//!
//! Each directory block is checked on its own (in parallel); what depends
//! on the order e2fsck processes blocks in — which link to a directory
//! comes first, where a fatal problem stops the pass, htree references —
//! is applied afterwards, walking the results in e2fsck's block order.

mod badinode;
mod block;
mod ctx;
mod dirtable;
mod htree;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use ext4_layout::inode::Inode;

pub(crate) use badinode::{process_bad_inode, BadInodeOutcome};
pub(crate) use block::check_block;
pub use block::DirLink;
pub use block::{tail_status, P2Acc};
pub use ctx::{P2Ctx, TailStatus};
pub(crate) use ctx::{P2Out, RefCounts};
use dirtable::Claim;
pub(crate) use dirtable::DirTable;

use crate::ctx::AbortAt;
use crate::fs::Fs;
use crate::io::Io;
use crate::pass1::{BlockKey, DirWork, DxInfo};
use crate::problem::{Code, Finding, Pass};

/// Checks a batch of directory blocks, read together through `rd` (one
/// queue of reads; each block is checked as soon as it arrives). With
/// `last` false, blocks that depend on unfinished pass-1 work go to
/// `defer`.
#[allow(clippy::too_many_arguments)]
pub fn check_batch(
    cx: &P2Ctx<'_>,
    io: &mut Io<'_>,
    rd: &mut dyn pipeline::Reader,
    acc: &mut P2Acc,
    bufs: &mut Vec<u8>,
    batch: &mut Vec<DirWork>,
    last: bool,
    defer: &mut dyn FnMut(DirWork),
) {
    let bs = cx.fs.block_size();
    batch.sort_unstable_by_key(|w| w.pblk);
    let mut items: Vec<Option<DirWork>> = batch.drain(..).map(Some).collect();
    // Holes and inline directories have nothing to read.
    for slot in items.iter_mut() {
        if slot
            .as_ref()
            .is_some_and(|w| w.pblk == 0 || w.inline.is_some())
        {
            if let Some(w) = slot.take() {
                if !last && !cx.ready(&w, &[]) {
                    defer(w);
                } else {
                    check_block(cx, io, acc, &w, None);
                }
            }
        }
    }
    let need = items.len() * bs;
    if bufs.len() < need {
        bufs.resize(need, 0);
    }
    let mut reqs = Vec::with_capacity(items.len());
    let mut idx = Vec::with_capacity(items.len());
    for (i, chunk) in bufs.chunks_mut(bs).take(items.len()).enumerate() {
        let Some(w) = items[i].as_ref() else {
            continue;
        };
        match w.pblk.checked_mul(bs as u64) {
            Some(off) => {
                reqs.push(pipeline::ReadReq::new(off, chunk));
                idx.push(i);
            }
            None => {
                if let Some(w) = items[i].take() {
                    check_block(cx, io, acc, &w, None);
                }
            }
        }
    }
    let total = reqs.len();
    let mut cached = 0usize;
    rd.read_batch_with(&mut reqs, &mut |k, r| {
        cached += usize::from(r.cached);
        let Some(w) = idx.get(k).and_then(|&i| items[i].take()) else {
            return;
        };
        if !last && !cx.ready(&w, r.buf) {
            defer(w);
            return;
        }
        let data = r.result.is_ok().then_some(&r.buf[..]);
        check_block(cx, io, acc, &w, data);
    });
    cx.note_reads(cached, total);
}

/// Applies the workers' results in e2fsck's block order: where a fatal
/// problem stops the pass, which link to a directory comes first (its
/// parent; later ones are extra links), duplicate names, and the htree
/// records, which are then verified.
pub(crate) fn merge(
    cx: &mut P2Ctx<'_>,
    io: &mut Io<'_>,
    accs: Vec<P2Acc>,
    dx_dirs: &[(u32, DxInfo)],
    ea_inode_refs: &[u32],
) -> P2Out {
    let fs = cx.fs;
    let n = fs.geo.inodes_count as usize;
    let mut specials = Vec::new();
    let mut links = Vec::new();
    let mut dirs = DirTable::new(&cx.maps.inode_dir);
    let mut out = P2Out::default();
    for a in accs {
        specials.extend(a.specials);
        links.extend(a.links);
        for (dir, to) in a.dotdots {
            dirs.set_dotdot(dir, to);
        }
        out.deallocated.extend(a.deallocated);
        out.dotdot_refs.extend(a.dotdot_refs);
    }
    out.deallocated.sort_unstable();
    out.deallocated.dedup();
    // Under a repair, an inode its entry's check deallocates is gone for
    // the passes that follow, as in e2fsck.
    for &ino in &out.deallocated {
        let i = u64::from(ino - 1);
        cx.maps.inode_used.test_and_clear(i);
        cx.maps.inode_dir.test_and_clear(i);
        cx.maps.inode_reg.test_and_clear(i);
    }
    specials.sort_unstable_by_key(|s| s.0);
    let stop: Option<BlockKey> = specials.iter().find(|s| s.1.abort.is_some()).map(|s| s.0);
    let mut dx = htree::DxState::new(dx_dirs, fs.block_size(), fs.metadata_csum());
    let mut dup_set = BTreeMap::new();
    for (key, sp) in specials {
        if stop.is_some_and(|k| key > k) {
            break;
        }
        out.findings.extend(sp.findings);
        if let Some(name) = sp.dup {
            if let Entry::Vacant(v) = dup_set.entry(key.ino) {
                out.findings.push(
                    Finding::new(Code::ReportDupDirent)
                        .dir(key.ino)
                        .name(name.clone()),
                );
                v.insert(name);
            }
        }
        if let Some(d) = sp.dx {
            dx.apply(&mut out.findings, key.ino, key.lblk, d, &|f| cx.says_yes(f));
        }
        if let Some(why) = sp.abort {
            out.abort = Some(AbortAt::new(Pass::P2, u32::MAX, why));
        }
    }
    // Parents: the first link to each directory, in block order.
    dirs.claim_parent(2, 2);
    let di = cx.dir_index;
    links.sort_unstable_by_key(|l| (l.target, l.key(di)));
    let mut bs_buf = vec![0u8; fs.block_size()];
    for l in &links {
        if stop.is_some_and(|k| l.key(di).0 > k) {
            continue;
        }
        if l.target == 0 || l.target as usize > n {
            continue;
        }
        if dirs.claim_parent(l.target, l.dir) == Claim::Taken {
            // A second link to a directory: a repair clears it, so it
            // counts for nothing.
            let name = link_name(fs, io, l, &mut bs_buf);
            let f = Finding::new(Code::LinkDir)
                .dir(l.dir)
                .ino(l.target)
                .name(name);
            if cx.says_yes(&f) {
                cx.counted.sub_one(l.target - 1);
            }
            out.findings.push(f);
        }
    }
    drop(links);
    if stop.is_none() && !ea_inode_refs.is_empty() {
        ea_inode_entries(cx, ea_inode_refs, &mut out.findings);
    }
    if out.abort.is_none() {
        let rehashed: BTreeSet<u32> = dup_set.keys().copied().collect();
        dx.verify(&mut out.findings, &rehashed);
    }
    out.dirs = dirs;
    out.counted = RefCounts {
        counts: std::mem::take(&mut cx.counted),
    };
    out.dup_dirs = dup_set.into_iter().collect();
    out
}

/// Entries that name an inode an attribute keeps its value in: the
/// inode is no file of the tree, and a repair clears the entry (e2fsck
/// 1.47.4's check). Which inodes those are is known only once pass 1 has
/// read every attribute, so the directories are read again for them, and
/// only when such an inode was found named.
fn ea_inode_entries(cx: &mut P2Ctx<'_>, ea_inode_refs: &[u32], findings: &mut Vec<Finding>) {
    let named: std::collections::HashSet<u32> = ea_inode_refs
        .iter()
        .copied()
        .filter(|&t| t != 0 && cx.counted.get(t - 1) > 0)
        .collect();
    if named.is_empty() {
        return;
    }
    for (dir, name, target) in crate::paths::entries_naming(cx.fs, cx.maps, &named) {
        let f = Finding::new(Code::EaInodeDirLink)
            .dir(dir)
            .ino(target)
            .name(name);
        if cx.says_yes(&f) {
            cx.counted.sub_one(target - 1);
        }
        findings.push(f);
    }
}

/// The name of the entry a link comes from, read again for the message.
fn link_name(fs: &Fs, io: &mut Io<'_>, l: &DirLink, buf: &mut [u8]) -> Vec<u8> {
    let off = l.off as usize;
    let name_at = |d: &[u8]| -> Vec<u8> {
        let name = ext4_layout::dirent::name_at(d, off);
        if name.len() < ext4_layout::dirent::name_len_at(d, off) {
            return Vec::new();
        }
        name.to_vec()
    };
    if l.pblk != 0 {
        if io.read_blocks(l.pblk, buf).is_err() {
            return Vec::new();
        }
        return name_at(buf);
    }
    let mut ib = vec![0u8; fs.geo.inode_size as usize];
    if io.read_inode(l.dir, &mut ib).is_err() {
        return Vec::new();
    }
    let Some(inode) = Inode::new(&ib) else {
        return Vec::new();
    };
    match crate::xattr_read::inline_data(io, &inode) {
        Some(d) => name_at(&d),
        None => Vec::new(),
    }
}
