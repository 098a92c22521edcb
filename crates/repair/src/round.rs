//! One round's plan: which findings are fixed together, in which pass's
//! order, and what a repair may fix at all (the problem table's policy).

use ext4_layout::inode::field;
use ext4_layout::types::Ino;
use std::io::Write as _;

use check_core::engine::CheckState;
use check_core::problem::{Code, Finding, Pass, Severity};
use check_core::report::Report;

use crate::stage::{Round, Staging};
use crate::{connect, dirs, inodes, mkjournal, orphan, quota, rebuild, rehash};

/// Whether a finding calls for a change: an error, or a notice the
/// problem table marks `fix`.
pub(crate) fn wants_fix(f: &Finding) -> bool {
    !f.fixed && (f.code.severity() == Severity::Error || f.code.policy().fix_notice)
}

/// Whether a finding about a directory entry is moot because another
/// finding clears that entry (e2fsck checks nothing more of an entry it
/// has just cleared, so preen never meets the rest).
pub(crate) fn entry_cleared(f: &Finding, all: &[&Finding]) -> bool {
    matches!(
        f.code,
        Code::BadFiletype | Code::SetFiletype | Code::ClearFiletype
    ) && all.iter().any(|g| {
        g.code == Code::UnusedInode && g.dir == f.dir && g.ino == f.ino && g.name == f.name
    })
}

/// The pass a finding's fix belongs to (1B goes with 1).
fn stage_of(f: &Finding) -> Pass {
    match f.code.pass() {
        Pass::P1B => Pass::P1,
        p => p,
    }
}

/// Works out one round's changes: the problems of the earliest pass that
/// has any, and, while every fix made so far leaves block ownership,
/// inode use and the directory tree as the check saw them, the problems
/// of the passes after it too (the check's findings for those passes
/// still hold). Returns the findings fixed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_round<'a, 'f>(
    st: &'f CheckState,
    report: &'a Report,
    to_fix: &[&'a Finding],
    stage: &mut Staging<'f>,
    stopped: &mut Option<String>,
    made: &mut Vec<Finding>,
    quiet: &mut Vec<&'a Finding>,
    pass3a: &mut Pass3A,
) -> Vec<&'a Finding> {
    // By address: a check can report hundreds of thousands of problems
    // (the holes of a huge directory), too many to compare pairwise.
    let asked: std::collections::HashSet<*const Finding> =
        to_fix.iter().map(|f| *f as *const Finding).collect();
    let declined = report
        .findings
        .iter()
        .filter(|f| wants_fix(f) && !asked.contains(&(*f as *const Finding)))
        .cloned()
        .collect();
    let mut r = Round {
        st,
        stage,
        fixed: Vec::new(),
        declined,
        rehash: Vec::new(),
        quiet: Vec::new(),
    };
    // Entries that name inodes in a group's unused area or in a group
    // marked INODE_UNINIT: pass 1 never read those inodes, so what the
    // check says of them and of everything that depends on them is
    // unfounded. As e2fsck, only the descriptors are fixed, and the check
    // runs again from the start (its restart); nothing else is touched,
    // so no entry is cleared for an inode that was merely not read.
    let restart: Vec<&'a Finding> = to_fix
        .iter()
        .copied()
        .filter(|f| f.code.policy().restarts)
        .collect();
    if !restart.is_empty() {
        dirs::fix_pass2(&mut r, &restart);
        *stopped = Some(
            "entries name inodes in a group's unused area: the group is fixed and the check starts again, as e2fsck restarts".into(),
        );
        return r.fixed;
    }
    // A missing root comes first: until it exists, every entry naming it
    // looks wrong.
    // (Superblock and descriptor fixes still go first: until a bad
    // descriptor checksum is fixed, the check may not see the root it
    // would create.)
    // And group metadata that must move goes before it: the root's inode
    // may live in an inode table that is not there yet (e2fsck relocates
    // in pass 1, restarts, and only then makes the root).
    if to_fix.iter().any(|f| f.code == Code::NoRootInode)
        && !to_fix
            .iter()
            .any(|f| stage_of(f) == Pass::Super || moves_group_metadata(f.code))
    {
        let mine: Vec<&'a Finding> = to_fix
            .iter()
            .copied()
            .filter(|f| stage_of(f) == Pass::P3)
            .collect();
        connect::fix_pass3(&mut r, &mine);
        *stopped = Some("the root directory is made: the next check judges the rest".into());
        return r.fixed;
    }
    let mut after: Option<Pass> = None;
    let mut reached_end = true;
    while let Some(pass) = to_fix
        .iter()
        .map(|f| stage_of(f))
        .filter(|&p| after.is_none_or(|a| p > a))
        .min()
    {
        let mine: Vec<&'a Finding> = to_fix
            .iter()
            .copied()
            .filter(|f| stage_of(f) == pass)
            .collect();
        let t_pass = std::time::Instant::now();
        if pass == Pass::P5 {
            reindex_dropped(&mut r, made, pass3a);
        }
        match pass {
            Pass::P5 => {
                // Quota files first: blocks they gain are then counted in
                // use by the rebuild of the group summaries.
                for f in &mine {
                    if f.code == Code::QuotaMismatch && quota::fix(st, r.stage, f) {
                        r.fixed.push(f);
                    }
                }
                orphan::fix(&mut r, &mine);
                for f in mine.iter().filter(|f| f.code == Code::RecreateJournal) {
                    if mkjournal::create(st, r.stage).is_ok() {
                        r.fixed.push(f);
                    }
                }
                // What this round allocated (quota file, lost+found or
                // journal blocks, a new lost+found) counts as in use.
                if rebuild::rebuild_with_allocations(st, r.stage).is_ok() {
                    r.fixed.extend(
                        mine.iter()
                            .copied()
                            .filter(|f| f.code.policy().rebuilt_by_pass5),
                    );
                }
            }
            Pass::P4 => connect::fix_pass4(&mut r, &mine, &report.findings),
            Pass::P3 => connect::fix_pass3(&mut r, &mine),
            Pass::P2 => dirs::fix_pass2(&mut r, &mine),
            Pass::P1 | Pass::P1B => inodes::fix_pass1(&mut r, &mine),
            Pass::Super => inodes::fix_super(&mut r, &mine),
        }
        if std::env::var_os("EXT4CHK_DEBUG_ROUNDS").is_some() {
            // A debugging aid: a closed stderr must not stop a repair.
            let _ = writeln!(
                std::io::stderr(),
                "pass {}: {} findings planned in {:.3} s",
                pass.name(),
                mine.len(),
                t_pass.elapsed().as_secs_f64()
            );
        }
        let valid = if pass == Pass::P4 {
            p4_settled_for_p5(&mine, &report.findings, r.stage)
        } else {
            // A resize inode that could not be made again changed nothing.
            let unmade = |f: &Finding| {
                f.code == Code::ResizeInodeInvalid && !r.fixed.iter().any(|x| std::ptr::eq(*x, f))
            };
            mine.iter()
                .all(|f| leaves_check_valid(st, r.stage, f, &mine) || unmade(f))
        };
        if !valid {
            reached_end = false;
            let later = to_fix.iter().any(|f| stage_of(f) > pass);
            if later {
                let why: std::collections::BTreeSet<&str> = mine
                    .iter()
                    .filter(|f| pass == Pass::P4 || !leaves_check_valid(st, r.stage, f, &mine))
                    .filter(|f| pass != Pass::P4 || !settles_for_p5(f.code))
                    .map(|f| f.code.name())
                    .collect();
                let why: Vec<&str> = why.into_iter().collect();
                *stopped = Some(format!(
                    "the fixes of pass {} change what later passes judge ({}): the next check judges them",
                    pass.name(),
                    why.join(", ")
                ));
            }
            break;
        }
        after = Some(pass);
    }
    // Every pass's fixes were made on a check that still holds: what the
    // round allocated and freed goes into the group summaries now, when
    // pass 5 had nothing of its own to fix.
    if reached_end && after.is_some_and(|p| p < Pass::P5) {
        reindex_dropped(&mut r, made, pass3a);
        let _ = rebuild::rebuild_with_allocations(st, r.stage);
    }
    let mut seen = std::collections::BTreeSet::new();
    r.fixed.retain(|f| seen.insert(std::ptr::from_ref(*f)));
    *quiet = std::mem::take(&mut r.quiet);
    r.fixed
}

/// Whether fixing `code` moves a group's bitmap or inode table.
fn moves_group_metadata(code: Code) -> bool {
    matches!(
        code,
        Code::RelocateMetadata
            | Code::BlockBitmapConflict
            | Code::InodeBitmapConflict
            | Code::InodeTableConflict
    )
}

/// Pass 4's fixes that leave block ownership as the check saw it.
fn settles_for_p5(code: Code) -> bool {
    code.policy().settles_for_pass5
}

/// Whether pass 5's rebuild can follow pass 4's fixes in the same round:
/// they only set link counts, reconnect files to lost+found (blocks and
/// inodes that takes are marked in use before the rebuild) and clear
/// unattached empty inodes, which are marked free here.
fn p4_settled_for_p5<'f>(mine: &[&Finding], all: &[Finding], stage: &mut Staging<'f>) -> bool {
    let simple = mine.iter().all(|f| settles_for_p5(f.code));
    if !simple {
        return false;
    }
    let mut freed = Vec::new();
    for f in mine.iter().filter(|f| f.code == Code::UnattachedInode) {
        let Some(ino) = f.inode() else { continue };
        if !all
            .iter()
            .any(|z| z.code == Code::ZeroLenInode && z.inode() == Some(ino))
        {
            continue;
        }
        // Cleared: free only if it held no block at all.
        match stage.inode_copy(ino) {
            Ok(r) if field::i_blocks_lo.get(&r) == 0 && field::i_file_acl_lo.get(&r) == 0 => {
                freed.push(ino)
            }
            _ => return false,
        }
    }
    for ino in freed {
        stage.mark_inode(ino, false, false);
    }
    true
}

/// Whether fixing `f` leaves the later passes' findings as they are: the
/// problem table's `keeps` column; or, from a check that judged the later
/// passes as the repair leaves them, its `answered` column, or an inode
/// the repair clears that the check already took for unused.
fn leaves_check_valid(
    st: &CheckState,
    stage: &Staging<'_>,
    f: &Finding,
    mine: &[&Finding],
) -> bool {
    let policy = f.code.policy();
    policy.keeps_check(f.inode().map(|i| stage.is_dir(i)))
        || dir_size_keeps_check(st, f)
        || kept_tree_keeps_check(st, stage, f, mine)
        || (st.answered_yes
            && (policy.answered
                || (f.code.clears_inode() && f.inode().is_some_and(|i| !stage.inode_used(i)))))
}

/// An extent tree problem of a file that is not a directory leaves the
/// later passes as the check judged them when the tree is written anew
/// from what the check kept and its old nodes are given back
/// ([`super::blocks::gives_back_old_nodes`]): the blocks the file then
/// holds are those the check found it claims, and the blocks it drops,
/// never claimed, are pass 5's to free. (A directory's dropped blocks
/// change what pass 2 reads of it, and wait for the next check.)
fn kept_tree_keeps_check(
    st: &CheckState,
    stage: &Staging<'_>,
    f: &Finding,
    mine: &[&Finding],
) -> bool {
    let Some(ino) = f.inode() else {
        return false;
    };
    if !super::blocks::drops_from_tree(f.code) || stage.is_dir(ino) {
        return false;
    }
    let of_inode: Vec<&Finding> = mine.iter().copied().filter(|g| g.ino == f.ino).collect();
    super::blocks::gives_back_old_nodes(st, ino.get(), &of_inode)
}

/// A directory's size set to the blocks pass 1 found leaves pass 2 as
/// it was: pass 2 reads the blocks pass 1 found (and the holes before
/// the last), not the size. Not so for inline data, whose entries the
/// size bounds.
fn dir_size_keeps_check(st: &CheckState, f: &Finding) -> bool {
    f.code == Code::BadISize
        && !st
            .fs
            .geo
            .incompat
            .contains(ext4_layout::features::IncompatFeatures::INLINE_DATA)
}

/// Pass 3A's indexing of linear directories, in the round.
#[derive(Debug, Default)]
pub(crate) struct Pass3A {
    /// Whether the round indexes them (not with `-E bmap2extent`, which
    /// converts files before pass 3A).
    pub wanted: bool,
    /// How many it rewrote.
    pub rewritten: usize,
}

/// Pass 3A for the directories whose index this round drops: once every
/// earlier pass's fixes are staged, each that pass 3A would index (three
/// blocks or more) is rewritten with a new index from what the round
/// leaves in it, as e2fsck -y's pass 3A does in the same run (else the
/// rewrite waits for a check after the round, and that needs another).
/// With `pass3a.wanted`, so are the linear directories pass 3A would
/// index: those the check found, and those whose size the round set to
/// three blocks or more.
fn reindex_dropped(r: &mut Round<'_, '_, '_>, made: &mut Vec<Finding>, pass3a: &mut Pass3A) {
    let fs = &r.st.fs;
    let resized: Vec<Ino> = if pass3a.wanted {
        r.fixed
            .iter()
            .filter(|f| f.code == Code::BadISize)
            .filter_map(|f| f.inode())
            .collect()
    } else {
        Vec::new()
    };
    let linear = pass3a.wanted && !(r.st.linear_dirs.is_empty() && resized.is_empty());
    // Indexed directories the round's fixes touched: those whose index
    // the round clears are indexed again below, as e2fsck's pass 3A
    // rebuilds an index its pass 2 cleared in the same run.
    let touched: Vec<Ino> = if r.st.dx_dirs.is_empty() {
        Vec::new()
    } else {
        let indexed: std::collections::HashSet<u32> =
            r.st.dx_dirs.iter().map(|&(d, _)| d).collect();
        let mut v: Vec<Ino> = r
            .fixed
            .iter()
            .flat_map(|f| [f.directory(), f.inode()])
            .flatten()
            .filter(|d| indexed.contains(&d.get()))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    if r.rehash.is_empty() && r.st.dx_dropped.is_empty() && !linear && touched.is_empty() {
        return;
    }
    let lost_found = connect::lookup(r.stage, Ino::ROOT, b"lost+found")
        .ok()
        .flatten();
    // Directories with a leaf too full for its checksum tail: rewritten
    // whole, as e2fsck's pass 3A rehashes them.
    for (dir, waiting) in std::mem::take(&mut r.rehash) {
        if !r.stage.is_dir(dir) {
            continue;
        }
        if rewrite(r.stage, dir, Some(dir) == lost_found) {
            r.fixed.extend(waiting);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let reindexed = |dir: Ino| {
        let mut f = Finding::new(Code::RehashDir).ino(dir.get());
        f.fixed = true;
        f
    };
    for dir in r.st.dx_dropped.iter().copied().filter_map(Ino::new) {
        if !seen.insert(dir)
            || !r.stage.is_dir(dir)
            || !crate::steps::linear_to_index(fs, r.stage, dir, lost_found)
        {
            continue;
        }
        if rewrite(r.stage, dir, false) {
            made.push(reindexed(dir));
        }
    }
    // Those whose index this round's fixes cleared get a new one as the
    // check after the round would give it (a directory still indexed, or
    // small enough to stay linear, is left as it is).
    for dir in touched {
        if Some(dir) == lost_found || !r.stage.is_dir(dir) || !seen.insert(dir) {
            continue;
        }
        if super::rehash::rebuild(fs, r.stage, dir).is_ok() {
            made.push(reindexed(dir));
        }
    }
    if !linear {
        return;
    }
    let dirs =
        r.st.linear_dirs
            .iter()
            .copied()
            .filter_map(Ino::new)
            .chain(resized);
    for dir in dirs {
        if !seen.insert(dir)
            || !r.stage.is_dir(dir)
            || !crate::steps::linear_to_index(fs, r.stage, dir, lost_found)
        {
            continue;
        }
        if rewrite(r.stage, dir, false) {
            pass3a.rewritten += 1;
        }
    }
}

/// Pass 3A's rewrite of directory `dir`, the blocks it no longer needs
/// freed; false if it could not be rewritten.
fn rewrite(stage: &mut Staging<'_>, dir: Ino, keep_size: bool) -> bool {
    let fs = stage.fs();
    match rehash::optimize(fs, stage, dir, keep_size) {
        Ok(freed) => {
            for b in freed {
                stage.free_block(b);
            }
            true
        }
        Err(_) => false,
    }
}
