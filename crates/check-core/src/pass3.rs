//! Pass 3: every directory must be reachable from the root, and its '..'
//! must name the directory that links to it. Then pass 3A: directories
//! with duplicate names.

use std::collections::{BTreeSet, HashMap};

use ext4_layout::dirent::DirWalk;
use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::{flags, Inode};

use crate::bitmap::AtomicBitmap;
use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
use crate::io::Io;
use crate::pass2::P2Out;
use crate::problem::{Code, Finding, Pass};

/// What pass 3 produced.
pub(crate) struct P3Out {
    /// Findings.
    pub findings: Vec<Finding>,
    /// A fatal problem (no usable root).
    pub abort: Option<AbortAt>,
}

/// Runs pass 3 over the directories and pass 2's parents.
pub fn run(fs: &Fs, maps: &Maps, p2: &P2Out) -> P3Out {
    let mut out = P3Out {
        findings: Vec::new(),
        abort: None,
    };
    if maps.used(2) {
        if !maps.is_dir(2) {
            out.findings
                .push(Finding::new(Code::RootNotDirAbort).ino(2));
            out.abort = Some(AbortAt::new(
                Pass::P3,
                0,
                "the root inode is not a directory",
            ));
            return out;
        }
    } else {
        out.findings.push(Finding::new(Code::NoRootInode).ino(2));
        out.abort = Some(AbortAt::new(Pass::P3, 2, "the root directory is missing"));
        return out;
    }
    let n = fs.geo.inodes_count;
    let idx = |ino: u32| (maps.is_dir(ino) && ino >= 1 && ino <= n).then_some(ino);
    let parent_of = |ino: u32| p2.dirs.parent(ino);
    let dotdot_of = |ino: u32| p2.dirs.dotdot(ino);
    let done = AtomicBitmap::new(u64::from(fs.geo.inodes_count) + 1);
    done.test_and_set(2);
    let mut loop_map: Vec<bool> = Vec::new();
    let mut next = maps.inode_dir.next_set(0);
    while let Some(bit) = next {
        next = maps.inode_dir.next_set(bit + 1);
        let dir = bit as u32 + 1;
        let mut ino = dir;
        let mut loop_pass = false;
        let mut steps = 0u32;
        loop {
            if done.test_and_set(u64::from(ino)) {
                break;
            }
            let Some(i) = idx(ino) else {
                out.abort = Some(AbortAt::new(
                    Pass::P3,
                    dir,
                    format!("no directory record for inode {ino}"),
                ));
                return out;
            };
            let parent = parent_of(i);
            let looped = loop_pass && loop_map.get(parent as usize).copied().unwrap_or(false);
            if parent == 0 || looped {
                let shown = if parent != 0 { parent } else { dotdot_of(i) };
                out.findings.push(
                    Finding::new(Code::UnconnectedDir)
                        .ino(ino)
                        .ino2(shown)
                        .detail(shown.to_string()),
                );
                break;
            }
            ino = parent;
            if loop_pass {
                if let Some(x) = loop_map.get_mut(ino as usize) {
                    *x = true;
                }
            } else {
                steps += 1;
                if steps > 2048 {
                    loop_pass = true;
                    loop_map = vec![false; fs.geo.inodes_count as usize + 1];
                    ino = dir;
                }
            }
        }
        if dotdot_of(dir) != parent_of(dir) {
            out.findings.push(
                Finding::new(Code::BadDotDot)
                    .ino(dir)
                    .mismatch(u64::from(dotdot_of(dir)), u64::from(parent_of(dir))),
            );
        }
    }
    // Pass 3A: a directory with a duplicate name gets the rename question.
    for (d, name) in &p2.dup_dirs {
        if maps.is_dir(*d) {
            out.findings
                .push(Finding::new(Code::NonUniqueFile).dir(*d).name(name.clone()));
        }
    }
    out
}

/// Under a repair, what pass 3's fixes do to the references pass 4
/// counts, as e2fsck -y's reconnections and '..' fixes adjust its counts
/// while it makes them: a directory moved to /lost+found gains its entry
/// there, its '..' stops counting for its old parent and counts for
/// /lost+found; a '..' pointed at the right parent moves its reference
/// there. A '..' that pass 2 cleared counted for nothing. /lost+found
/// itself is looked up in the root, as e2fsck does; when it is missing
/// or unusable the findings say so (every repair creates it) and the
/// root gains the new directory's '..'.
pub(crate) fn answer_yes(
    fs: &Fs,
    maps: &Maps,
    io: &mut Io<'_>,
    p2: &P2Out,
    out: &mut P3Out,
    answers: Option<&dyn crate::answers::Answers>,
) {
    if out.abort.is_some() {
        return;
    }
    let yes = |f: &Finding| answers.is_none_or(|a| a.yes(f));
    let counted = &p2.counted.counts;
    // As e2fsck_adjust_inode_count: the references counted and the link
    // count recorded move together (the repair writes the new link count
    // as it links or unlinks), so pass 4 only reports what was wrong
    // before.
    let add = |ino: u32| {
        counted.add_one(ino - 1);
        let l = maps.links(ino);
        if l != u16::MAX {
            maps.set_links(ino, l + 1);
        }
    };
    let sub = |ino: u32| {
        counted.sub_one(ino - 1);
        let l = maps.links(ino);
        if l != 0 {
            maps.set_links(ino, l - 1);
        }
    };
    let refs: HashMap<u32, u32> = p2.dotdot_refs.iter().copied().collect();
    let dotdot_counts_for = |d: u32| refs.get(&d).copied().unwrap_or_else(|| p2.dirs.dotdot(d));
    let lf = match lost_found(fs, maps, io) {
        LostFound::Usable(i) => Some(i),
        LostFound::Unusable(i, code) => {
            out.findings.push(Finding::new(code).ino(i));
            out.findings.push(Finding::new(Code::NoLostFound));
            // The root's entry for it goes, and the new directory's '..'
            // counts for the root.
            sub(i);
            add(2);
            None
        }
        LostFound::Missing => {
            out.findings.push(Finding::new(Code::NoLostFound));
            add(2);
            None
        }
        LostFound::Unknown => return,
    };
    let mut moved = BTreeSet::new();
    for f in &out.findings {
        let (Code::UnconnectedDir, Some(d)) = (f.code, f.ino) else {
            continue;
        };
        if !yes(f) {
            continue;
        }
        add(d);
        let old = dotdot_counts_for(d);
        if old != 0 {
            sub(old);
        }
        if let Some(l) = lf {
            add(l);
        }
        moved.insert(d);
    }
    out.findings
        .retain(|f| !(f.code == Code::BadDotDot && f.ino.is_some_and(|d| moved.contains(&d))));
    for f in &out.findings {
        let (Code::BadDotDot, Some(d), Some(parent)) = (f.code, f.ino, f.expected()) else {
            continue;
        };
        if !yes(f) {
            continue;
        }
        let old = dotdot_counts_for(d);
        if old != 0 {
            sub(old);
        }
        if parent != 0 {
            add(parent as u32);
        }
    }
}

/// What the root's "lost+found" entry names.
enum LostFound {
    /// A directory a repair can use.
    Usable(u32),
    /// Something a repair unlinks before making a new one: the finding.
    Unusable(u32, Code),
    /// No such entry (or one naming an inode that is not in use).
    Missing,
    /// The root cannot be read.
    Unknown,
}

fn lost_found(fs: &Fs, maps: &Maps, io: &mut Io<'_>) -> LostFound {
    let isz = fs.geo.inode_size as usize;
    let mut raw = vec![0u8; isz];
    if io.read_inode(2, &mut raw).is_err() {
        return LostFound::Unknown;
    }
    let Some(root) = Inode::new(&raw) else {
        return LostFound::Unknown;
    };
    if root.has_flag(flags::INLINE_DATA) {
        return LostFound::Unknown;
    }
    let mut blocks = Vec::new();
    crate::blockiter::for_each_block(io, &root, &mut |b, l| {
        if l >= 0 {
            blocks.push(b);
        }
    });
    let bs = fs.block_size();
    let filetype = fs.geo.incompat.contains(IncompatFeatures::FILETYPE);
    let mut buf = vec![0u8; bs];
    let mut found = None;
    for b in blocks {
        if io.read_blocks(b, &mut buf).is_err() {
            continue;
        }
        found = DirWalk::new(&buf, bs, filetype)
            .find(|w| w.entry.inode() != 0 && w.entry.name() == b"lost+found")
            .map(|w| w.entry.inode());
        if found.is_some() {
            break;
        }
    }
    let Some(i) = found.filter(|&i| i <= fs.geo.inodes_count && maps.used(i)) else {
        return LostFound::Missing;
    };
    if io.read_inode(i, &mut raw).is_err() {
        return LostFound::Unknown;
    }
    let Some(inode) = Inode::new(&raw) else {
        return LostFound::Unknown;
    };
    if inode.has_flag(flags::INLINE_DATA) {
        LostFound::Unusable(i, Code::LostFoundInline)
    } else if inode.has_flag(flags::ENCRYPT) {
        LostFound::Unusable(i, Code::LostFoundEncrypted)
    } else if !maps.is_dir(i) {
        LostFound::Unusable(i, Code::LostFoundNotDir)
    } else {
        LostFound::Usable(i)
    }
}
