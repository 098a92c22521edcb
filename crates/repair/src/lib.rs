//! Repair: the check runs (in parallel, read-only) on the device as it is,
//! the problems of the earliest pass that has any are turned into changes,
//! and the changes go through the fixer in one ordered commit; then the
//! check runs again on the result. Each round fixes what the one before
//! uncovered (a cleared inode leaves entries that point at nothing, then
//! wrong link counts, then wrong bitmaps), as e2fsck's later passes do in
//! one run, until a check finds nothing or nothing more can be fixed.
//!
//! Every write goes through [`fixer::Fixer`]; nothing here opens the
//! device for writing itself.

mod alloc;
pub mod badblocks;
mod blocks;
mod connect;
mod convert;
mod dirs;
mod discard;
mod fastcommit;
mod finish;
mod inodes;
pub use inodes::{inode_local_fix, is_inode_local};
mod journal;
mod map;
mod mkjournal;
pub(crate) mod orphan;
mod quota;
mod rebuild;
mod rehash;
mod skip;
pub mod stage;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ext4_layout::bytes::le_u32;
use ext4_layout::features::CompatFeatures;
use fixer::safety::MountPolicy;
use pipeline::{open_device, Device, IoMode, Target};

use crate::ctx::CheckOptions;
use crate::engine::{check_fixing, check_with_state, CheckState, Checked};
use crate::io::Io;
use crate::problem::{Code, Finding, Pass, Severity};
use crate::report::Report;

pub use stage::Staging;

/// How much to repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Everything (`-y`).
    All,
    /// Only what e2fsck's preen mode repairs on its own (`-p`).
    Preen,
}

/// Options of a repair.
#[derive(Clone, Debug)]
pub struct RepairOptions {
    /// How the checks run.
    pub check: CheckOptions,
    /// The I/O path for reads.
    pub io: IoMode,
    /// What to repair.
    pub mode: Mode,
    /// Where to write an undo file.
    pub undo: Option<PathBuf>,
    /// The most check-and-fix rounds before giving up.
    pub max_rounds: usize,
    /// Skip the check of a file system that is clean and not due, once
    /// its journal and orphans are dealt with (e2fsck without -f).
    pub skip_if_clean: Option<crate::due::Clock>,
    /// With `skip_if_clean`: stop once the journal is replayed.
    pub journal_only: bool,
    /// Changes to the bad-block list (`-c`, `-l`, `-L`), made before the
    /// passes.
    pub bad_blocks: Option<badblocks::Change>,
    /// `-D`: once nothing is left to fix, rewrite every directory compactly.
    pub optimize_dirs: bool,
    /// `-E bmap2extent`: once nothing is left to fix, give block-mapped
    /// files and directories extent trees.
    pub bmap2extent: bool,
    /// `-E discard`: discard the free space of a file system the repair
    /// found clean and did not change.
    pub discard: bool,
    /// `--dry-run`: the device is opened read-only and every write is kept
    /// in memory, where each round's check reads it; nothing reaches the
    /// device.
    pub dry_run: bool,
}

/// The outcome of a repair.
pub struct Repaired {
    /// Everything found and fixed, then what the last check still finds.
    pub report: Report,
    /// Check-and-fix rounds run.
    pub rounds: usize,
}

/// Problems past which checking falls back to one thread, as pFSCK does
/// when nearly every item needs the fixer.
const SERIAL_FALLBACK: usize = 10_000;

fn fail(device: &Path, why: String, notes: Vec<String>) -> Repaired {
    Repaired {
        report: Report {
            device: device.display().to_string(),
            aborted: Some(why),
            notes,
            ..Default::default()
        },
        rounds: 0,
    }
}

/// Repairs the file system at `target`.
pub fn repair(target: &Target, opts: &RepairOptions) -> Repaired {
    let path = target.path.as_path();
    // From here on SIGINT and SIGTERM only ask the repair to stop between
    // two commits.
    let _ = fixer::safety::install_interrupt_handler();
    if let Err(e) = std::fs::metadata(path) {
        return fail(path, format!("cannot open it: {e}"), Vec::new());
    }
    let mounted_root = match fixer::safety::mounted(path).map(|m| fixer::safety::mount_policy(&m)) {
        Ok(MountPolicy::Free) => false,
        Ok(MountPolicy::ReadOnlyRoot) => true,
        Ok(MountPolicy::Refuse(m)) => {
            return fail(
                path,
                format!(
                    "it is mounted on {} ({}{}); unmount it before repairing",
                    m.mount_point,
                    m.source,
                    if m.read_only { ", read-only" } else { "" }
                ),
                Vec::new(),
            )
        }
        Err(e) => {
            return fail(
                path,
                format!("cannot tell whether it is mounted: {e}"),
                Vec::new(),
            )
        }
    };
    let opened = if opts.dry_run {
        std::fs::File::open(path)
    } else {
        fixer::safety::open_for_repair(path, !mounted_root)
    };
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc_ebusy()) => {
            return fail(
                path,
                "the device is in use (mounted or held by another program)".into(),
                Vec::new(),
            )
        }
        Err(e) => return fail(path, format!("cannot open it for writing: {e}"), Vec::new()),
    };
    let dev = match open_device(target, opts.io) {
        Ok(d) => Arc::new(d),
        Err(e) => return fail(path, e.to_string(), Vec::new()),
    };
    let mut check_opts = opts.check.clone();
    let (block_size, fs_bytes, on_backup) = match crate::fs::open_fs(
        dev.clone(),
        crate::fs::OpenOptions {
            read_only: true,
            superblock: check_opts.superblock,
        },
    ) {
        Ok(o) => (
            o.fs.geo.block_size,
            o.fs.geo.blocks_count * u64::from(o.fs.geo.block_size),
            o.fs.backup_in_use,
        ),
        Err(_) => {
            // The file system cannot even be opened: nothing to repair that
            // a check could vouch for.
            return Repaired {
                report: check_with_state(dev.clone(), &check_opts).report,
                rounds: 0,
            };
        }
    };
    // As e2fsck -p, which does not go looking for backups: a primary
    // superblock that cannot be used stops preen before anything else.
    let chosen_backup = check_opts.superblock.is_some();
    let had_shared_blocks = crate::fs::open_fs(dev.clone(), crate::fs::OpenOptions::default())
        .is_ok_and(|o| {
            o.fs.geo
                .ro_compat
                .contains(ext4_layout::features::RoCompatFeatures::SHARED_BLOCKS)
        });
    if on_backup && !chosen_backup && opts.mode == Mode::Preen {
        return fail(
            path,
            "the primary superblock is unusable; run ext4chk --repair without -p, which uses a backup"
                .into(),
            Vec::new(),
        );
    }
    // A file system longer than its device: the superblock or the
    // partition table is wrong, and writing either way could destroy
    // data. As e2fsck, stop before anything is written.
    if fs_bytes > dev.size() {
        let mut r = fail(
            path,
            format!(
                "the superblock says the file system is {fs_bytes} bytes long but the device \
                 holds only {}; the superblock or the partition table is likely corrupt, so \
                 nothing was changed (ext4chk -n checks it as it is)",
                dev.size()
            ),
            Vec::new(),
        );
        if opts.mode == Mode::Preen {
            // As e2fsck -p: an inconsistency preen leaves to the admin.
            r.report.preen_halt = r.report.aborted.take();
        }
        return r;
    }
    let undo = match opts.undo.as_ref().filter(|_| !opts.dry_run) {
        Some(p) => match fixer::undo::UndoLog::create(p, block_size, &file, dev.base()) {
            Ok(u) => Some(u),
            Err(e) => {
                return fail(
                    path,
                    format!("cannot create the undo file: {e}"),
                    Vec::new(),
                )
            }
        },
        None => None,
    };
    let mut notes = Vec::new();
    if let Some(p) = opts.undo.as_ref().filter(|_| !opts.dry_run) {
        notes.push(format!(
            "Changes are saved in {}; `e2undo {} {}` puts them back.",
            p.display(),
            p.display(),
            path.display()
        ));
    }
    // The primary superblock is held back and written last, once: until
    // then the device keeps the superblock the undo file's copy describes.
    let fx = if opts.dry_run {
        fixer::Fixer::start_in_memory(Arc::new(file), dev.base(), dev.size(), block_size)
    } else {
        fixer::Fixer::start_holding_super(Arc::new(file), dev.base(), dev.size(), undo)
    };
    let staged = fx.staged();
    let unwritten = match (fx.held(), &staged) {
        (Some(h), _) => Some(Unwritten::Held(h)),
        (None, Some(s)) => Some(Unwritten::Staged(s.clone())),
        (None, None) => None,
    };
    if let Some(u) = unwritten {
        dev.lay_over(Arc::new(u));
    }
    let mut fixed_all: Vec<Finding> = Vec::new();
    let mut modified = false;
    let mut rounds = 0;
    let mut stop_reason: Option<String> = None;
    let mut cancelled = false;
    let mut round_times: Vec<String> = Vec::new();
    let mut journal_removed = false;
    // Changes that are not fixes but change the file system (indexing,
    // conversion), which e2fsck's exit code notices.
    let mut restructured = false;
    if chosen_backup {
        // As e2fsck -b: the chosen superblock and its descriptors become
        // the primary ones before anything else, and everything after
        // works on them.
        match restore_primary(&dev, &fx, &check_opts) {
            Ok(f) => {
                fixed_all.push(f);
                modified = true;
                check_opts.superblock = None;
            }
            Err(why) => stop_reason = Some(why),
        }
    }
    // An external journal gets a writer of its own: replay empties it.
    let jfx = match &check_opts.external_journal {
        Some(j) if opts.dry_run => match std::fs::File::open(j.path()) {
            Ok(f) => Some(fixer::Fixer::start_in_memory(
                Arc::new(f),
                j.base(),
                j.size(),
                block_size,
            )),
            Err(e) => {
                stop_reason = Some(format!(
                    "cannot open the external journal {}: {e}",
                    j.path().display()
                ));
                None
            }
        },
        Some(j) => match fixer::safety::open_for_repair(j.path(), !mounted_root) {
            Ok(f) => Some(fixer::Fixer::start(Arc::new(f), j.base(), j.size(), None)),
            Err(e) => {
                stop_reason = Some(format!(
                    "cannot open the external journal {} for writing: {e}",
                    j.path().display()
                ));
                None
            }
        },
        None => None,
    };
    let external = match (&check_opts.external_journal, &jfx) {
        (Some(dev), Some(fx)) => Some(journal::External { dev, fx }),
        _ => None,
    };
    if stop_reason.is_none() {
        match fix_inode_count(&dev, &fx) {
            Ok(Some(f)) => {
                fixed_all.push(f);
                modified = true;
            }
            Ok(None) => {}
            Err(why) => stop_reason = Some(why),
        }
    }
    if stop_reason.is_none() {
        match journal::before_passes(&dev, &fx, external.as_ref(), true) {
            Ok(pre) => {
                journal_removed = pre.journal_removed;
                notes.extend(pre.notes);
                fixed_all.extend(pre.fixed);
                modified |= pre.modified;
            }
            Err(_) if fixer::safety::interrupted() => cancelled = true,
            Err(why) => stop_reason = Some(why),
        }
    }
    let mut forced = None;
    if let Some(clock) = opts
        .skip_if_clean
        .filter(|_| stop_reason.is_none() && !cancelled)
    {
        let decision = if opts.journal_only {
            Ok(skip::Decision::Skip(crate::due::Skipped {
                journal_only: true,
                ..Default::default()
            }))
        } else {
            skip::decide(&dev, &fx, clock)
        };
        match decision {
            Ok(skip::Decision::Skip(s)) => {
                let stats = fx.finish();
                if let Err(e) = stats {
                    notes.push(format!("The fixer failed at the end: {e}"));
                }
                let mut report = Report {
                    device: path.display().to_string(),
                    notes,
                    findings: fixed_all,
                    skipped: Some(s),
                    modified,
                    dry_run: staged.as_ref().map(|s| s.blocks()),
                    ..Default::default()
                };
                report.finish();
                return Repaired { report, rounds: 0 };
            }
            Ok(skip::Decision::Check(r)) => forced = Some(r),
            // The file system cannot be opened: the check says why.
            Err(_) => {}
        }
    }
    if let Some(change) = opts
        .bad_blocks
        .as_ref()
        .filter(|_| stop_reason.is_none() && !cancelled)
    {
        match update_bad_blocks(&dev, &fx, &check_opts, change, path) {
            Ok((more_notes, fixed)) => {
                notes.extend(more_notes);
                fixed_all.extend(fixed);
                modified = true;
            }
            Err(why) => stop_reason = Some(why),
        }
    }
    // Pass 1's workers send inode-local fixes to the fixer while they
    // check, except when preening (which must know that every problem is
    // one it may fix before it writes anything).
    let sink = (opts.mode != Mode::Preen && stop_reason.is_none() && !cancelled).then_some(&fx);
    check_opts.repairing = true;
    let mut current: Checked = check_fixing(dev.clone(), &check_opts, sink);
    if let Some(st) = &current.state {
        let bad = &st.maps.inode_not_dir;
        let mut v = Vec::new();
        let mut at = 0;
        while let Some(i) = bad.next_set(at) {
            v.push(u32::try_from(i + 1).unwrap_or(u32::MAX));
            at = i + 1;
        }
        check_opts.not_dirs = Arc::from(v);
    }
    let mut streamed = 0u64;
    if stop_reason.is_none() {
        match settle_streamed(&fx, &mut current, &mut fixed_all) {
            Ok(n) => streamed = n,
            Err(e) => stop_reason = Some(e),
        }
    }
    modified |= streamed > 0;
    // Directories indexed before the repair: one whose index a fix drops
    // gets a new one at the end, as in e2fsck's pass 3A.
    let indexed_before: Vec<u32> = current
        .state
        .as_ref()
        .map(|s| s.dx_dirs.iter().map(|&(d, _)| d).collect())
        .unwrap_or_default();
    let mut serial_noted = false;
    let mut lpf_checked = false;
    let mut journal_rechecked = false;
    let mut preen_halt: Option<String> = None;
    // Pass 3A's rewrites are checked again; what that check finds (a
    // rebuilt directory's duplicate names, say) gets the rounds once more.
    let mut after_pass_3a = false;
    loop {
        while stop_reason.is_none() && !cancelled {
            if fixer::safety::interrupted() {
                cancelled = true;
                break;
            }
            let Some(st) = current.state.as_ref() else {
                break;
            };
            // With nothing else left, /lost+found is made usable, as e2fsck
            // does on every repair (once: the next check confirms it).
            if !lpf_checked && st.abort.is_none() && !current.report.findings.iter().any(wants_fix)
            {
                lpf_checked = true;
                let mut io = Io::new(&st.fs);
                let mut trial = Staging::new(&st.fs, &st.maps, true);
                match connect::lost_found_findings(st, &mut trial, &mut io) {
                    Ok(found) => current.report.findings.extend(found),
                    Err(why) => notes.push(format!("/lost+found cannot be created: {why}.")),
                }
                let indexed_now: Vec<u32> = st.dx_dirs.iter().map(|&(d, _)| d).collect();
                for d in rehash::dropped(&indexed_before, &indexed_now, |d| st.maps.is_dir(d)) {
                    current
                        .report
                        .findings
                        .push(Finding::new(Code::RehashDir).ino(d));
                }
                // And a journal removed as unusable is made anew, as e2fsck
                // does at the end of its repair.
                if journal_removed && !st.fs.geo.compat.contains(CompatFeatures::HAS_JOURNAL) {
                    match mkjournal::default_blocks(st.fs.geo.blocks_count) {
                        Some(_) => current
                            .report
                            .findings
                            .push(Finding::new(Code::RecreateJournal)),
                        None => notes.push(
                            "The file system is too small for a journal: it is left without one."
                                .into(),
                        ),
                    }
                }
            }
            let nothing_left = !current.report.findings.iter().any(wants_fix);
            if nothing_left && streamed > 0 && rounds < opts.max_rounds {
                // The check's workers fixed what it found: check again, so
                // that the last word is a fresh check.
                rounds += 1;
                round_times.push(format!(
                "round {rounds}: {streamed} problems fixed by pass 1's workers during the check"
            ));
                let t_check = std::time::Instant::now();
                current = check_fixing(dev.clone(), &check_opts, sink);
                round_times.push(format!(
                    "check after round {rounds}: {:.3} s",
                    t_check.elapsed().as_secs_f64()
                ));
                match settle_streamed(&fx, &mut current, &mut fixed_all) {
                    Ok(n) => streamed = n,
                    Err(e) => stop_reason = Some(e),
                }
                modified |= streamed > 0;
                continue;
            }
            let to_fix: Vec<&Finding> = current
                .report
                .findings
                .iter()
                .filter(|f| wants_fix(f))
                .collect();
            if to_fix.is_empty() && !journal_rechecked && rounds < opts.max_rounds {
                // Fixes to the journal inode (a size, blocks it should not
                // have) can leave it unusable, the journal then found only
                // through the superblock's copy of its map: the journal is
                // looked at again as at the start, so that the next run finds
                // nothing to do.
                journal_rechecked = true;
                match journal::before_passes(&dev, &fx, external.as_ref(), false) {
                    Ok(pre) if pre.modified => {
                        journal_removed |= pre.journal_removed;
                        notes.extend(pre.notes);
                        fixed_all.extend(pre.fixed);
                        modified = true;
                        lpf_checked = false;
                        rounds += 1;
                        round_times.push(format!("round {rounds}: the journal looked at again"));
                        current = check_fixing(dev.clone(), &check_opts, sink);
                        match settle_streamed(&fx, &mut current, &mut fixed_all) {
                            Ok(n) => streamed = n,
                            Err(e) => stop_reason = Some(e),
                        }
                        modified |= streamed > 0;
                        continue;
                    }
                    Ok(_) => {}
                    Err(why) => {
                        stop_reason = Some(why);
                        break;
                    }
                }
            }
            if to_fix.is_empty() || rounds >= opts.max_rounds {
                break;
            }
            if opts.mode == Mode::Preen {
                if let Some(f) = to_fix
                    .iter()
                    .find(|f| !preen_ok(f.code) && !entry_cleared(f, &to_fix))
                {
                    preen_halt = Some(format!(
                        "UNEXPECTED INCONSISTENCY ({}); run ext4chk --repair without -p",
                        f.message()
                    ));
                    break;
                }
            }
            rounds += 1;
            let mut io = Io::new(&st.fs);
            let complete = st.abort.as_ref().is_none_or(|a| a.pass > Pass::P1B);
            let mut stage = Staging::new(&st.fs, &st.maps, complete);
            let t_plan = std::time::Instant::now();
            let fixed = plan_round(st, &current.report, &to_fix, &mut stage, &mut io);
            let planned = t_plan.elapsed().as_secs_f64();
            if fixed.is_empty() || stage.is_empty() {
                break;
            }
            let writes = stage.into_writes(&mut io);
            let nwrites = writes.len();
            let t_commit = std::time::Instant::now();
            let committed = fx.commit(writes);
            round_times.push(format!(
                "round {rounds}: {} of {} problems fixed, planned in {planned:.3} s, \
             {nwrites} blocks written in {:.3} s{}",
                fixed.len(),
                to_fix.len(),
                t_commit.elapsed().as_secs_f64(),
                if streamed > 0 {
                    format!("; {streamed} more fixed by pass 1's workers during the check")
                } else {
                    String::new()
                }
            ));
            match committed {
                Ok(()) => modified = true,
                Err(fixer::CommitError::Interrupted) => {
                    cancelled = true;
                    break;
                }
                Err(e) => {
                    stop_reason = Some(format!("the repair stopped: {e}"));
                    break;
                }
            }
            if std::env::var_os("EXT4CHK_DEBUG_ROUNDS").is_some() {
                for f in &fixed {
                    eprintln!("round {rounds}: {}", f.message());
                }
            }
            for f in fixed {
                let mut f = f.clone();
                f.fixed = true;
                fixed_all.push(f);
            }
            if current.report.findings.len() > SERIAL_FALLBACK && check_opts.threads > 1 {
                check_opts.threads = 1;
                check_opts.auto_threads = false;
                if !serial_noted {
                    serial_noted = true;
                    notes.push(format!(
                        "More than {SERIAL_FALLBACK} problems: checking goes on with one thread."
                    ));
                }
            }
            drop(io);
            let t_check = std::time::Instant::now();
            current = check_fixing(dev.clone(), &check_opts, sink);
            match settle_streamed(&fx, &mut current, &mut fixed_all) {
                Ok(n) => streamed = n,
                Err(e) => stop_reason = Some(e),
            }
            modified |= streamed > 0;
            round_times.push(format!(
                "check after round {rounds}: {:.3} s",
                t_check.elapsed().as_secs_f64()
            ));
        }
        if after_pass_3a {
            break;
        }
        if opts.bmap2extent && !cancelled && stop_reason.is_none() {
            match convert_to_extents(&current, &fx) {
                Ok(n) => {
                    modified = true;
                    restructured = true;
                    round_times.push(format!("bmap2extent: {n} inodes converted"));
                    current = check_fixing(dev.clone(), &check_opts, None);
                }
                Err(why) => notes.push(format!("Files could not be converted to extents: {why}.")),
            }
        }
        if !cancelled && stop_reason.is_none() {
            let which = if opts.optimize_dirs {
                Rehash::All
            } else {
                Rehash::Linear
            };
            match optimize_directories(&current, &fx, which) {
                Ok(0) => {}
                Ok(n) => {
                    modified = true;
                    restructured = true;
                    round_times.push(format!("pass 3A: {n} directories rewritten"));
                    current = check_fixing(dev.clone(), &check_opts, None);
                }
                Err(why) => notes.push(format!("Directories could not be optimized: {why}.")),
            }
        }
        after_pass_3a = true;
        let more = current.report.findings.iter().any(wants_fix);
        if !more || rounds >= opts.max_rounds || cancelled || stop_reason.is_some() {
            break;
        }
    }
    // A repair that moved the journal's blocks (cloning them, say) leaves
    // the superblock's backup of its map stale: it is brought up to date
    // last, so that the next repair has nothing to do.
    if modified && stop_reason.is_none() && !cancelled {
        let mut post = journal::PrePass::default();
        if journal::backup_journal_map(&dev, &fx, &mut post).is_ok() {
            fixed_all.extend(post.fixed);
        }
    }
    if opts.discard
        && !modified
        && !cancelled
        && stop_reason.is_none()
        && current.report.findings.is_empty()
    {
        if let Err(why) = discard_free_space(&current, &fx) {
            notes.push(format!("Free space was not discarded: {why}."));
        }
    }
    // The superblock records the check, as e2fsck's last write does.
    if !cancelled && stop_reason.is_none() && current.report.aborted.is_none() {
        let outcome = if preen_halt.is_some() {
            finish::Outcome::PreenHalt
        } else if current.report.has_uncorrected_errors() {
            finish::Outcome::Invalid
        } else {
            finish::Outcome::Valid
        };
        match finish::record_check(&dev, &fx, outcome, check_opts.choices.unshare_blocks) {
            Ok(f) => fixed_all.extend(f),
            Err(_) if fx.failure().is_some() => {}
            Err(e) => notes.push(format!("The record of the check could not be written: {e}")),
        }
    }
    // A failed write stops everything at once (the fixer writes nothing
    // after it), whichever step met it: that failure is why the repair
    // stopped.
    let mut write_failure = fx.failure();
    let stats = fx.finish();
    if let (Err(e), None) = (&stats, &write_failure) {
        // Marking the undo file complete failed: the device holds the
        // whole repair, and the undo file still covers all of it.
        write_failure = Some(e.to_string());
    }
    if let Some(j) = jfx {
        if let Err(e) = j.finish() {
            notes.push(format!(
                "The external journal's writer failed at the end: {e}"
            ));
        }
    }
    if check_opts.choices.unshare_blocks && had_shared_blocks {
        // Giving files their own copies of blocks the file system allowed
        // them to share is what was asked, not a repair (e2fsck does not
        // count it either): said, but not counted.
        let (unshared, rest): (Vec<Finding>, Vec<Finding>) = fixed_all
            .into_iter()
            .partition(|f| f.code.pass() == Pass::P1B);
        fixed_all = rest;
        let files: std::collections::BTreeSet<u32> =
            unshared.iter().filter_map(|f| f.ino).collect();
        if !files.is_empty() {
            notes.push(format!(
                "{} files that shared blocks now have copies of their own; the shared_blocks feature is cleared.",
                files.len()
            ));
        }
    }
    let mut report = current.report;
    report.diagnostics.extend(round_times);
    report.notes.splice(0..0, notes);
    report.findings.extend(fixed_all);
    report.finish();
    report.modified = modified;
    report.cancelled = cancelled;
    report.mounted_root = mounted_root;
    report.preen_halt = preen_halt;
    report.forced = forced;
    report.restructured = restructured;
    report.dry_run = staged.as_ref().map(|s| s.blocks());
    if modified && mounted_root {
        report.notes.push(
            "This is the root file system, mounted read-only, and it was changed: reboot now, before the kernel writes its old view back."
                .into(),
        );
    }
    if cancelled {
        report.notes.push(
            "Interrupted: the repair stopped between two complete sets of changes; run it again to finish."
                .into(),
        );
    }
    if let Some(why) = write_failure {
        // Errors remain unless the failure came after the last check
        // found nothing left (in the final record of the check).
        report.forced_uncorrected = report.has_uncorrected_errors() || stop_reason.is_some();
        report.write_failed = true;
        report.aborted = Some(format!("the repair stopped: {why}"));
    } else if let Some(why) = stop_reason {
        // Why the repair stopped says more than where a check of the
        // file system as it was would have stopped.
        report.aborted = Some(why);
        report.forced_uncorrected = true;
    }
    Repaired { report, rounds }
}

/// `-E discard`: the free blocks (and, in an image file, the unused ends
/// of the inode tables, whose groups are then marked zeroed).
fn discard_free_space(current: &Checked, fx: &fixer::Fixer) -> Result<(), String> {
    let Some(st) = current.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err("the check did not complete".into());
    };
    let tables = st.fs.dev.kind() == pipeline::DeviceKind::File;
    let (ranges, zeroed) = discard::ranges(st, tables);
    fx.discard(ranges).map_err(|e| e.to_string())?;
    if !zeroed.is_empty() {
        let mut io = Io::new(&st.fs);
        let mut stage = Staging::new(&st.fs, &st.maps, true);
        discard::mark_zeroed(&mut stage, &zeroed);
        fx.commit(stage.into_writes(&mut io))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `-E bmap2extent`: every block-mapped file and directory converted in
/// one commit, then the group summaries follow the freed indirect blocks
/// and the new tree blocks.
fn convert_to_extents(current: &Checked, fx: &fixer::Fixer) -> Result<usize, String> {
    let Some(st) = current.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err("the check did not complete".into());
    };
    let mut io = Io::new(&st.fs);
    let mut stage = Staging::new(&st.fs, &st.maps, true);
    let n = convert::to_extents(st, &mut stage, &mut io);
    rebuild::rebuild_with_allocations(st, &mut stage, &mut io).map_err(|e| e.to_string())?;
    fx.commit(stage.into_writes(&mut io))
        .map_err(|e| format!("the repair stopped: {e}"))?;
    Ok(n)
}

/// Which directories pass 3A rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rehash {
    /// Every one (`-D`).
    All,
    /// Those e2fsck indexes on every repair: linear directories of three
    /// blocks or more on a file system with dir_index, lost+found aside.
    Linear,
}

/// Whether e2fsck's pass 1 would queue directory `dir` for indexing.
fn linear_to_index<'f>(
    fs: &'f crate::fs::Fs,
    stage: &Staging<'f>,
    io: &mut Io<'f>,
    dir: u32,
    lost_found: Option<u32>,
) -> bool {
    if !fs.geo.compat.contains(CompatFeatures::DIR_INDEX) || Some(dir) == lost_found {
        return false;
    }
    let Ok(raw) = stage.inode_copy(io, dir) else {
        return false;
    };
    let Some(inode) = ext4_layout::inode::Inode::new(&raw) else {
        return false;
    };
    !inode.has_flag(ext4_layout::inode::flags::INDEX)
        && !inode.has_flag(ext4_layout::inode::flags::INLINE_DATA)
        && inode.size() / u64::from(fs.geo.block_size) >= 3
}

/// `-D`: every directory rewritten compactly in one commit (those that
/// cannot be are left as they are), then the group summaries follow the
/// blocks freed and taken. Returns how many were rewritten.
fn optimize_directories(
    current: &Checked,
    fx: &fixer::Fixer,
    which: Rehash,
) -> Result<usize, String> {
    let Some(st) = current.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err("the check did not complete".into());
    };
    let fs = &st.fs;
    let mut io = Io::new(fs);
    let mut stage = Staging::new(fs, &st.maps, true);
    let lost_found = connect::lookup(&stage, &mut io, 2, b"lost+found")
        .ok()
        .flatten();
    let bits = fs.geo.cluster_bits;
    let mut n = 0;
    for idx in 0..u64::from(fs.geo.inodes_count) {
        if !st.maps.inode_dir.get(idx) {
            continue;
        }
        let dir = idx as u32 + 1;
        if which == Rehash::Linear && !linear_to_index(fs, &stage, &mut io, dir, lost_found) {
            continue;
        }
        if let Ok(freed) = rehash::optimize(fs, &mut stage, &mut io, dir, Some(dir) == lost_found) {
            for b in freed {
                st.maps.block_found.test_and_clear(b >> bits);
            }
            n += 1;
        }
    }
    if n == 0 {
        return Ok(0);
    }
    rebuild::rebuild_with_allocations(st, &mut stage, &mut io).map_err(|e| e.to_string())?;
    fx.commit(stage.into_writes(&mut io))
        .map_err(|e| format!("the repair stopped: {e}"))?;
    Ok(n)
}

/// The bad-block list's update, as its own round before the passes: a
/// check tells which blocks are in use, the list is rewritten, and the
/// group summaries follow (pass-5 problems the check found are fixed by
/// the same rebuild, and reported so).
fn update_bad_blocks(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    check_opts: &CheckOptions,
    change: &badblocks::Change,
    path: &Path,
) -> Result<(Vec<String>, Vec<Finding>), String> {
    let pre = check_with_state(dev.clone(), check_opts);
    let Some(st) = pre.state.as_ref().filter(|s| s.abort.is_none()) else {
        return Err(
            "the bad-block list cannot be updated: the check stopped before it could tell which blocks are in use"
                .into(),
        );
    };
    let mut io = Io::new(&st.fs);
    let mut stage = Staging::new(&st.fs, &st.maps, true);
    let done = badblocks::stage_update(
        st,
        change,
        &mut stage,
        &mut io,
        &path.display().to_string(),
        Some(fx),
    )?;
    fx.commit(stage.into_writes(&mut io))
        .map_err(|e| format!("the repair stopped: {e}"))?;
    let fixed = pre
        .report
        .findings
        .iter()
        .filter(|f| rebuilt_by_pass5(f.code))
        .map(|f| {
            let mut f = f.clone();
            f.fixed = true;
            f
        })
        .collect();
    Ok((done.notes, fixed))
}

/// A superblock whose inode count disagrees with its groups: e2fsck sets
/// the count from the groups before anything else (the check stops on it
/// until then).
fn fix_inode_count(dev: &Arc<Device>, fx: &fixer::Fixer) -> Result<Option<Finding>, String> {
    let Ok(opened) = crate::fs::open_fs(dev.clone(), crate::fs::OpenOptions::default()) else {
        return Ok(None);
    };
    let fs = opened.fs;
    let want = u64::from(fs.geo.group_count) * u64::from(fs.geo.inodes_per_group);
    let have = u64::from(fs.sb().s_inodes_count());
    if have == want || fs.backup_in_use || want > u64::from(u32::MAX) {
        return Ok(None);
    }
    let maps = crate::ctx::Maps::new(&fs);
    let mut stage = Staging::new(&fs, &maps, false);
    let mut io = Io::new(&fs);
    // s_inodes_count
    ext4_layout::bytes::put_le_u32(stage.sb_mut(), 0x00, want as u32);
    fx.commit(stage.into_writes(&mut io))
        .map_err(|e| format!("the repair stopped: {e}"))?;
    let mut f = Finding::new(Code::InodeCountWrong).num(have).num2(want);
    f.fixed = true;
    Ok(Some(f))
}

/// Writes the superblock the user chose (`-b`) and its descriptor table
/// to the primary place.
fn restore_primary(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    check_opts: &CheckOptions,
) -> Result<Finding, String> {
    let opened = crate::fs::open_fs(
        dev.clone(),
        crate::fs::OpenOptions {
            read_only: true,
            superblock: check_opts.superblock,
        },
    )
    .map_err(|f| f.message)?;
    let fs = opened.fs;
    let Some(mut f) = opened
        .findings
        .into_iter()
        .find(|f| f.code == Code::SuperblockFromBackup)
    else {
        return Err("the chosen superblock was not used".into());
    };
    let maps = crate::ctx::Maps::new(&fs);
    let mut stage = Staging::new(&fs, &maps, false);
    let mut io = Io::new(&fs);
    // s_block_group_nr: the primary belongs to group 0.
    ext4_layout::bytes::put_le_u16(stage.sb_mut(), 0x5A, 0);
    let _ = stage.gd_mut(0);
    fx.commit(stage.into_writes(&mut io))
        .map_err(|e| format!("the repair stopped: {e}"))?;
    f.fixed = true;
    Ok(f)
}

/// After a check whose pass-1 workers may have sent fixes: waits until
/// the fixer has written them, and moves the findings they fixed to
/// `fixed_all`. Returns how many were written. If the fixer failed, the
/// findings count as not fixed and the repair stops.
fn settle_streamed(
    fx: &fixer::Fixer,
    current: &mut Checked,
    fixed_all: &mut Vec<Finding>,
) -> Result<u64, String> {
    match fx.barrier() {
        Ok(n) => {
            let (done, rest): (Vec<Finding>, Vec<Finding>) =
                std::mem::take(&mut current.report.findings)
                    .into_iter()
                    .partition(|f| f.fixed);
            current.report.findings = rest;
            fixed_all.extend(done);
            Ok(n)
        }
        Err(e) => {
            for f in &mut current.report.findings {
                f.fixed = false;
            }
            Err(format!("the repair stopped: {e}"))
        }
    }
}

fn libc_ebusy() -> i32 {
    16
}

/// Whether a finding calls for a change.
fn wants_fix(f: &Finding) -> bool {
    if f.fixed {
        return false;
    }
    f.code.severity() == Severity::Error
        || matches!(
            f.code,
            Code::InvalidQuotaInode
                | Code::SuperblockUsedBackup
                | Code::SuperblockFromBackup
                | Code::DescriptorsUsedBackup
                | Code::BadMinExtraIsize
                | Code::BadWantExtraIsize
                | Code::FirstMetaBgTooBig
                | Code::GroupUninitWithoutCsum
                | Code::ExtentBadMaxDepth
                | Code::RecreateJournal
                | Code::RehashDir
                | Code::FreeBlocksTotal
                | Code::FreeInodesTotal
                | Code::GroupDescChecksum
                | Code::SplitDot
                | Code::BlockBitmapNotInGroup
                | Code::InodeBitmapNotInGroup
                | Code::InodeTableNotInGroup
                | Code::SetFiletype
                | Code::SetImmutable
                | Code::SpecialExtentsIdata
                | Code::EaTimeOutOfRange
        )
}

/// Whether e2fsck's preen mode fixes a problem without asking: the
/// problems e2fsck's table marks "preen OK", plus the notices this
/// checker reports that e2fsck handles silently.
fn preen_ok(code: Code) -> bool {
    matches!(
        code,
        Code::MetaAndGdtCsum
            | Code::CsumSeedWithoutMetaCsum
            | Code::Bit64WithoutExtents
            | Code::GroupDescChecksum
            | Code::GroupUninitWithoutCsum
            | Code::LastGroupBlockUninit
            | Code::GroupItableUnusedInvalid
            | Code::FutureLastMount
            | Code::FutureLastWrite
            | Code::JournalBadInode
            | Code::JournalBadSuper
            | Code::JournalRecoverWithoutJournal
            | Code::JournalFlagMissing
            | Code::JournalNeedsRecovery
            | Code::JournalRecoveryFlagClear
            | Code::JournalErrno
            | Code::MmpInvalid
            | Code::OrphanFileWithoutJournal
            | Code::OrphanBlockDirty
            | Code::OrphanPresentCleanFile
            | Code::OrphanPresentNoFile
            | Code::OrphanFileCorrupted
            | Code::QuotaMismatch
            | Code::RootDtime
            | Code::ReservedBadMode
            | Code::ZeroDtime
            | Code::SetDtime
            | Code::SetImmutable
            | Code::SetNonzeroSize
            | Code::JournalInodeNotClear
            | Code::JournalBadMode
            | Code::ExtraIsize
            | Code::AttrNameLen
            | Code::AttrValueSize
            | Code::AttrHash
            | Code::AttrValueEaInode
            | Code::AttrNoEaInodeFlag
            | Code::AttrSetEaInodeFlag
            | Code::EaTimeOutOfRange
            | Code::UnsetExtentFlag
            | Code::QuotaBadMode
            | Code::QuotaInodeNotClear
            | Code::InodeOnlyCsumInvalid
            | Code::InlineDataFeature
            | Code::SpecialExtentsIdata
            | Code::OrphanFileBadMode
            | Code::OrphanFileNotClear
            | Code::RelocateMetadata
            | Code::BadIBlocks
            | Code::BadISize
            | Code::ZeroLengthDir
            | Code::ExtentBadMaxDepth
            | Code::HtreeNodir
            | Code::HtreeSet
            | Code::HtreeRootBad
            | Code::HtreeHashv
            | Code::HtreeNeedsSiphash
            | Code::HtreeCannotSiphash
            | Code::HtreeIncompat
            | Code::HtreeDepth
            | Code::ExtentTreeOptimize
            | Code::UninitExtentOnDir
            | Code::UnusedInode
            | Code::SetFiletype
            | Code::ClearFiletype
            | Code::FeatureLargeFiles
            | Code::FeatureLargeDirs
            | Code::HtreeBadRoot
            | Code::HtreeBadLimit
            | Code::HtreeBadCount
            | Code::HtreeHashOrder
            | Code::InorefBgInoUninit
            | Code::InorefInUnused
            | Code::IFileAclHiZero
            | Code::HtreeRootCsum
            | Code::HtreeNodeCsum
            | Code::LeafMissingCsum
            | Code::LeafOnlyCsumInvalid
            | Code::NoLostFound
            | Code::RecreateJournal
            | Code::RehashDir
            | Code::ZeroLenInode
            | Code::BadRefCount
            | Code::EaInodeRefCount
    ) || rebuilt_by_pass5(code)
}

/// Whether a finding about a directory entry is moot because another
/// finding clears that entry (e2fsck checks nothing more of an entry it
/// has just cleared, so preen never meets the rest).
fn entry_cleared(f: &Finding, all: &[&Finding]) -> bool {
    matches!(
        f.code,
        Code::BadFiletype | Code::SetFiletype | Code::ClearFiletype
    ) && all
        .iter()
        .any(|g| g.code == Code::UnusedInode && g.dir == f.dir && g.ino == f.ino && g.str == f.str)
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
fn plan_round<'a, 'f>(
    st: &'f CheckState,
    report: &Report,
    to_fix: &[&'a Finding],
    stage: &mut Staging<'f>,
    io: &mut Io<'f>,
) -> Vec<&'a Finding> {
    let mut fixed = Vec::new();
    // A missing root comes first: until it exists, every entry naming it
    // looks wrong.
    // (Superblock and descriptor fixes still go first: until a bad
    // descriptor checksum is fixed, the check may not see the root it
    // would create.)
    if to_fix.iter().any(|f| f.code == Code::NoRootInode)
        && !to_fix.iter().any(|f| stage_of(f) == Pass::Super)
    {
        let mine: Vec<&'a Finding> = to_fix
            .iter()
            .copied()
            .filter(|f| stage_of(f) == Pass::P3)
            .collect();
        connect::fix_pass3(st, &mine, stage, io, &mut fixed);
        return fixed;
    }
    let mut after: Option<Pass> = None;
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
        match pass {
            Pass::P5 => {
                // Quota files first: blocks they gain are then counted in
                // use by the rebuild of the group summaries.
                for f in &mine {
                    if f.code == Code::QuotaMismatch && quota::fix(st, stage, io, f) {
                        fixed.push(f);
                    }
                }
                orphan::fix(st, &mine, stage, io, &mut fixed);
                for f in mine.iter().filter(|f| f.code == Code::RecreateJournal) {
                    if mkjournal::create(st, stage, io).is_ok() {
                        fixed.push(f);
                    }
                }
                // What this round allocated (quota file, lost+found or
                // journal blocks, a new lost+found) counts as in use.
                if rebuild::rebuild_with_allocations(st, stage, io).is_ok() {
                    fixed.extend(mine.iter().copied().filter(|f| rebuilt_by_pass5(f.code)));
                }
            }
            Pass::P4 => connect::fix_pass4(st, &mine, &report.findings, stage, io, &mut fixed),
            Pass::P3 => connect::fix_pass3(st, &mine, stage, io, &mut fixed),
            Pass::P2 => dirs::fix_pass2(st, &mine, stage, io, &mut fixed),
            Pass::P1 | Pass::P1B => inodes::fix_pass1(st, &mine, stage, io, &mut fixed),
            Pass::Super => inodes::fix_super(st, &mine, stage, io, &mut fixed),
        }
        let valid = if pass == Pass::P4 {
            p4_settled_for_p5(st, &mine, &report.findings, stage, io)
        } else {
            mine.iter().all(|f| leaves_check_valid(st, f))
        };
        if !valid {
            break;
        }
        after = Some(pass);
    }
    fixed
}

/// Whether pass 5's rebuild can follow pass 4's fixes in the same round:
/// they only set link counts, reconnect files to lost+found (blocks and
/// inodes that takes are marked in use before the rebuild) and clear
/// unattached empty inodes, which are marked free here.
fn p4_settled_for_p5<'f>(
    st: &'f CheckState,
    mine: &[&Finding],
    all: &[Finding],
    stage: &Staging<'f>,
    io: &mut Io<'f>,
) -> bool {
    let simple = mine.iter().all(|f| {
        matches!(
            f.code,
            Code::UnattachedInode
                | Code::BadRefCount
                | Code::EaInodeRefCount
                | Code::DirNlinkFeature
        )
    });
    if !simple {
        return false;
    }
    let mut freed = Vec::new();
    for f in mine.iter().filter(|f| f.code == Code::UnattachedInode) {
        let Some(ino) = f.ino else { continue };
        if !all
            .iter()
            .any(|z| z.code == Code::ZeroLenInode && z.ino == Some(ino))
        {
            continue;
        }
        // Cleared: free only if it held no block at all.
        match stage.inode_copy(io, ino) {
            Ok(r) if le_u32(&r, 0x1C) == 0 && le_u32(&r, 0x68) == 0 => freed.push(ino),
            _ => return false,
        }
    }
    for ino in freed {
        st.maps.inode_used.test_and_clear(u64::from(ino - 1));
        st.maps.inode_dir.test_and_clear(u64::from(ino - 1));
    }
    true
}

/// Whether fixing `f` leaves the later passes' findings as they are: it
/// changes one inode's fields or a count, never which blocks or inodes
/// are in use nor any directory entry.
fn leaves_check_valid(st: &CheckState, f: &Finding) -> bool {
    match f.code {
        Code::SetDtime
        | Code::RootDtime
        | Code::BadIBlocks
        | Code::EaTimeOutOfRange
        | Code::InodeOnlyCsumInvalid
        | Code::BadRefCount
        | Code::EaInodeRefCount => true,
        // A directory's size bounds what pass 2 reads of it.
        Code::BadISize => f.ino.is_some_and(|i| !st.maps.is_dir(i)),
        _ => false,
    }
}

/// The pass-5 problems a rebuild of the group summaries fixes.
fn rebuilt_by_pass5(code: Code) -> bool {
    matches!(
        code,
        Code::BlockBitmapDiff
            | Code::InodeBitmapDiff
            | Code::BlockUninit
            | Code::InodeUninit
            | Code::FreeBlocksGroup
            | Code::FreeInodesGroup
            | Code::DirsCountGroup
            | Code::FreeBlocksTotal
            | Code::FreeInodesTotal
            | Code::InodeBmapPadding
            | Code::BlockBmapPadding
            | Code::InodeBitmapCsum
            | Code::BlockBitmapCsum
    )
}

/// What the fixer has not put on the device (the superblock it holds
/// back, or a dry run's writes), as the readers' overlay.
enum Unwritten {
    Held(Arc<fixer::Held>),
    Staged(Arc<fixer::Staged>),
}

impl pipeline::Overlay for Unwritten {
    fn covers(&self, offset: u64, len: usize) -> bool {
        match self {
            Unwritten::Held(h) => h.covers(offset, len),
            Unwritten::Staged(s) => s.covers(offset, len),
        }
    }

    fn patch(&self, offset: u64, buf: &mut [u8]) {
        match self {
            Unwritten::Held(h) => h.patch(offset, buf),
            Unwritten::Staged(s) => s.patch(offset, buf),
        }
    }
}
