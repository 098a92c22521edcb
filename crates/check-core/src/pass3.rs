//! Pass 3: every directory must be reachable from the root, and its '..'
//! must name the directory that links to it. Then pass 3A: directories
//! with duplicate names.

use crate::bitmap::AtomicBitmap;
use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
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
                        .num(u64::from(shown)),
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
                    .num(u64::from(dotdot_of(dir)))
                    .num2(u64::from(parent_of(dir))),
            );
        }
    }
    // Pass 3A: a directory with a duplicate name gets the rename question.
    for &d in &p2.dup_dirs {
        if maps.is_dir(d) {
            out.findings.push(Finding::new(Code::NonUniqueFile).dir(d));
        }
    }
    out
}
