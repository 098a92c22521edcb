//! One repair from the opening of the device to its report: the steps
//! before the passes, the rounds of check and fix, pass 3A, and the
//! record of the check.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use fixer::safety::MountPolicy;
use pipeline::{open_device, Device, Target};

use check_core::ctx::CheckOptions;
use check_core::engine::{check_fixing, check_with_state, Checked};
use check_core::problem::{Code, Finding, Numbers, Pass};
use check_core::report::Report;
use check_core::sink::FixSink;

use crate::error::Error;
use crate::round::{entry_cleared, plan_round, wants_fix, Pass3A};
use crate::stage::Staging;
use crate::steps::{
    convert_to_extents, discard_free_space, fix_superblock_fields, optimize_directories,
    restore_primary, update_bad_blocks, Rehash,
};
use crate::{connect, finish, journal, mkjournal, rehash, skip, Streamed};
use crate::{Mode, RepairOptions, Repaired};

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
    let mut run = match Run::start(target, opts) {
        Ok(run) => run,
        Err(done) => return *done,
    };
    if let Some(skipped) = run.before_passes() {
        return run.into_skipped(skipped);
    }
    let mut current = run.first_check();
    run.rounds_and_pass_3a(&mut current);
    run.after_rounds(&current);
    run.into_repaired(current)
}

/// One repair's state, from the opened device to the report.
struct Run<'a> {
    opts: &'a RepairOptions,
    path: &'a Path,
    dev: Arc<Device>,
    /// The one writer of the file system.
    fx: fixer::Fixer,
    /// The external journal's writer, when there is one.
    jfx: Option<fixer::Fixer>,
    /// A dry run's writes.
    staged: Option<Arc<fixer::Staged>>,
    check_opts: CheckOptions,
    block_size: u32,
    /// The first ordinary inode.
    first_ino: u32,
    mounted_root: bool,
    had_shared_blocks: bool,
    /// Whether pass 1's workers send inode-local fixes during checks.
    streaming: bool,
    notes: Vec<String>,
    fixed_all: Vec<Finding>,
    modified: bool,
    /// Changes that are not fixes but change the file system (indexing,
    /// conversion), which e2fsck's exit code notices.
    restructured: bool,
    rounds: usize,
    stop_reason: Option<String>,
    cancelled: bool,
    round_times: Vec<String>,
    journal_removed: bool,
    forced: Option<check_core::due::Reason>,
    preen_halt: Option<String>,
    /// Fixes pass 1's workers made during the last check.
    streamed: u64,
    lpf_checked: bool,
    journal_rechecked: bool,
    /// Directories indexed before the repair: one whose index a fix drops
    /// gets a new one at the end, as in e2fsck's pass 3A.
    indexed_before: Vec<u32>,
    /// A fix before the passes means the file system is not skipped as
    /// clean.
    must_check: bool,
    /// Each check's time and each round's fixes, for the report.
    record: check_core::report::RepairRecord,
    /// The multiple-mount protection block, marked by this repair.
    mmp: Option<crate::mmp::Held>,
}

/// Why a repair ends before its first check.
fn refuse(path: &Path, why: String) -> Box<Repaired> {
    Box::new(fail(path, why, Vec::new()))
}

/// Whether the device at `path` may be repaired, and whether it is the
/// root file system mounted read-only.
fn mount_state(path: &Path) -> Result<bool, Box<Repaired>> {
    if let Err(e) = std::fs::metadata(path) {
        return Err(refuse(path, format!("cannot open it: {e}")));
    }
    match fixer::safety::mounted(path).map(|m| fixer::safety::mount_policy(&m)) {
        Ok(MountPolicy::Free) => Ok(false),
        Ok(MountPolicy::ReadOnlyRoot) => Ok(true),
        Ok(MountPolicy::Refuse(m)) => Err(refuse(
            path,
            format!(
                "it is mounted on {} ({}{}); unmount it before repairing",
                m.mount_point,
                m.source,
                if m.read_only { ", read-only" } else { "" }
            ),
        )),
        Err(e) => Err(refuse(
            path,
            format!("cannot tell whether it is mounted: {e}"),
        )),
    }
}

/// As e2fsck -p, which never goes looking for backups: a primary
/// superblock that cannot be used at all stops preen before anything else
/// (exit 8); one e2fsck loads despite its errors, whose inode count
/// disagrees with its groups, or whose group descriptors place a bitmap
/// or an inode table outside its group, is an inconsistency preen leaves
/// to the admin (exit 4). Descriptors whose metadata lies inside the
/// groups but collides (a bitmap on the superblock) e2fsck -p relocates in
/// pass 1; preen goes on with the backup descriptors then.
fn preen_primary(dev: &Arc<Device>, path: &Path, on_backup: bool) -> Result<(), Box<Repaired>> {
    let unusable = || {
        refuse(
            path,
            "the primary superblock is unusable; run ext4chk --repair without -p, which uses a backup"
                .into(),
        )
    };
    let Ok(primary) = check_core::fs::open_primary(dev.clone()) else {
        return if on_backup { Err(unusable()) } else { Ok(()) };
    };
    let geo = &primary.fs.geo;
    let want = u64::from(geo.group_count) * u64::from(geo.inodes_per_group);
    let have = u64::from(primary.fs.sb().s_inodes_count());
    if have != want {
        let mut r = refuse(path, String::new());
        r.report.aborted = None;
        r.report.preen_halt = Some(format!(
            "the inode count in the superblock is {have}, should be {want}"
        ));
        return Err(r);
    }
    if on_backup {
        // The superblock is sound: its descriptors sent the check to a
        // backup.
        let why = check_core::fs::metadata_outside_group(&primary.fs)
            .or_else(|| missing_metadata_preen_stops_at(dev, &primary.fs));
        if let Some(why) = why {
            let mut r = refuse(path, String::new());
            r.report.aborted = None;
            r.report.preen_halt = Some(why);
            return Err(r);
        }
    }
    Ok(())
}

/// An inode table the primary descriptors put at block 0 (the backup's
/// descriptors are used): what stops preen there, if anything. e2fsck -p
/// reads the bad blocks inode from group 0's table before anything else
/// and stops when there is none. Elsewhere it relocates in pass 1, to
/// fresh blocks: a group whose inodes are in use (by the backup's count)
/// would lose them all, where a repair on the backup keeps them, so
/// preen stops and leaves that to the repair; a group with none in use
/// loses nothing, and preen goes on with the backup, as e2fsck -p goes
/// on (exit 1).
fn missing_metadata_preen_stops_at(
    dev: &Arc<Device>,
    primary: &check_core::fs::Fs,
) -> Option<String> {
    if primary.gd(0).inode_table() == 0 {
        return Some(
            "a block group is missing an inode table while reading the bad blocks inode".into(),
        );
    }
    let backup =
        check_core::fs::open_fs(dev.clone(), check_core::fs::OpenOptions::default()).ok()?;
    let ipg = primary.geo.inodes_per_group;
    (1..primary.geo.group_count).find_map(|g| {
        // A bitmap moved to a fresh block is rebuilt by pass 5; only a
        // fresh inode table loses what the group held.
        if primary.gd(g).inode_table() != 0 {
            return None;
        }
        let bgd = backup.fs.gd(g);
        let uninit = backup.fs.has_gdt_csum()
            && bgd.has_flag(ext4_layout::group_desc::BG_INODE_UNINIT);
        let used = if uninit {
            0
        } else {
            ipg.saturating_sub(bgd.free_inodes_count())
        };
        (used > 0).then(|| {
            format!(
                "the primary descriptors of group {g} put its metadata at block 0; relocating it would lose the group's {used} inodes in use"
            )
        })
    })
}

/// Whether preen may fix `f`: the problem table's preen column, and the
/// backup descriptors the check went to when the primary ones collide
/// with other metadata inside the groups ([`preen_primary`] has stopped
/// preen where they lie outside them), as e2fsck -p relocates that
/// metadata.
fn preen_may_fix(f: &Finding) -> bool {
    f.code.preen_ok() || f.code == Code::DescriptorsUsedBackup
}

/// The fixer, a dry run's staged writes, and the notes the set-up made.
type Writer = (fixer::Fixer, Option<Arc<fixer::Staged>>, Vec<String>);

/// The undo file and the fixer (in memory for a dry run), with what the
/// fixer has not yet written laid over the device's readers.
fn start_fixer(
    opts: &RepairOptions,
    path: &Path,
    file: std::fs::File,
    dev: &Arc<Device>,
    block_size: u32,
) -> Result<Writer, Box<Repaired>> {
    let undo_path = opts.undo.as_ref().filter(|_| !opts.dry_run);
    let undo = match undo_path {
        Some(p) => match fixer::undo::UndoLog::create(p, block_size, &file, dev.base()) {
            Ok(u) => Some(u),
            Err(e) => return Err(refuse(path, format!("cannot create the undo file: {e}"))),
        },
        None => None,
    };
    let mut notes = Vec::new();
    if let Some(p) = undo_path {
        notes.push(format!(
            "Changes are saved in {}; `e2undo {} {}` puts them back.",
            p.display(),
            p.display(),
            path.display()
        ));
    }
    // The primary superblock is held back and written last, once:
    // until then the device keeps the superblock the undo file's copy
    // describes.
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
    Ok((fx, staged, notes))
}

impl<'a> Run<'a> {
    /// Opens the device and the fixer, after the checks that must pass
    /// before anything is written.
    fn start(target: &'a Target, opts: &'a RepairOptions) -> Result<Self, Box<Repaired>> {
        let path = target.path.as_path();
        // From here on SIGINT and SIGTERM only ask the repair to stop
        // between two commits.
        let _ = fixer::safety::install_interrupt_handler();
        let mounted_root = mount_state(path)?;
        let opened = if opts.dry_run {
            std::fs::File::open(path)
        } else {
            fixer::safety::open_for_repair(path, !mounted_root)
        };
        let file = match opened {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc_ebusy()) => {
                return Err(refuse(
                    path,
                    "the device is in use (mounted or held by another program)".into(),
                ))
            }
            Err(e) => return Err(refuse(path, format!("cannot open it for writing: {e}"))),
        };
        let dev = match open_device(target, opts.io) {
            Ok(d) => Arc::new(d),
            Err(e) => return Err(refuse(path, e.to_string())),
        };
        let check_opts = opts.check.clone();
        let (block_size, fs_bytes, on_backup, first_ino) = match check_core::fs::open_fs(
            dev.clone(),
            check_core::fs::OpenOptions {
                read_only: true,
                superblock: check_opts.superblock,
            },
        ) {
            Ok(o) => (
                o.fs.geo.block_size,
                o.fs.geo.blocks_count * u64::from(o.fs.geo.block_size),
                o.fs.backup_in_use,
                o.fs.geo.first_ino,
            ),
            Err(_) => {
                // The file system cannot even be opened: nothing to repair
                // that a check could vouch for.
                return Err(Box::new(Repaired {
                    report: check_with_state(dev.clone(), &check_opts).report,
                    rounds: 0,
                }));
            }
        };
        let had_shared_blocks =
            check_core::fs::open_fs(dev.clone(), check_core::fs::OpenOptions::default()).is_ok_and(
                |o| {
                    o.fs.geo
                        .ro_compat
                        .contains(ext4_layout::features::RoCompatFeatures::SHARED_BLOCKS)
                },
            );
        if opts.mode == Mode::Preen && check_opts.superblock.is_none() {
            preen_primary(&dev, path, on_backup)?;
        }
        // A file system longer than its device: the superblock or the
        // partition table is wrong, and writing either way could destroy
        // data. As e2fsck, stop before anything is written.
        if fs_bytes > dev.size() {
            let mut r = refuse(
                path,
                format!(
                    "the superblock says the file system is {fs_bytes} bytes long but the device \
                     holds only {}; the superblock or the partition table is likely corrupt, so \
                     nothing was changed (ext4chk -n checks what the device holds)",
                    dev.size()
                ),
            );
            if opts.mode == Mode::Preen {
                // As e2fsck -p: an inconsistency preen leaves to the admin.
                r.report.preen_halt = r.report.aborted.take();
            }
            return Err(r);
        }
        let (fx, staged, mut notes) = start_fixer(opts, path, file, &dev, block_size)?;
        // Shared storage: nothing is written until the protection block
        // says no other node uses the file system (a dry run only reads;
        // the check refuses a block another checker marked).
        let mmp = if opts.dry_run {
            None
        } else {
            // Someone answering the questions is not asked about the
            // block: it is left, and the check refuses it.
            let fix_bad = opts.check.answers.is_none();
            match crate::mmp::start(&dev, &fx, path, fix_bad, &mut notes) {
                Ok(h) => h,
                Err(refused) => {
                    let _ = fx.finish();
                    let mut r = fail(path, refused.why, notes);
                    r.report.forced_uncorrected = refused.uncorrected;
                    return Err(Box::new(r));
                }
            }
        };
        let mut check_opts = check_opts;
        check_opts.mmp_held = mmp.is_some();
        Ok(Run {
            opts,
            path,
            dev,
            fx,
            jfx: None,
            staged,
            check_opts,
            block_size,
            first_ino,
            mounted_root,
            had_shared_blocks,
            streaming: false,
            notes,
            fixed_all: Vec::new(),
            modified: false,
            restructured: false,
            rounds: 0,
            stop_reason: None,
            cancelled: false,
            round_times: Vec::new(),
            journal_removed: false,
            forced: None,
            preen_halt: None,
            streamed: 0,
            lpf_checked: false,
            journal_rechecked: false,
            indexed_before: Vec::new(),
            must_check: false,
            record: Default::default(),
            mmp,
        })
    }

    /// Whether the repair goes on: nothing stopped it, no signal came.
    fn going(&self) -> bool {
        self.stop_reason.is_none() && !self.cancelled
    }

    /// Whether a finding is to be fixed: it calls for a change and, when
    /// someone answers the repair's questions, was answered yes.
    fn fixable(&self, f: &Finding) -> bool {
        wants_fix(f)
            && self.check_opts.answers.as_ref().is_none_or(|a| a.yes(f))
            && (!f.code.policy().optional || self.takes_optimisation(f))
    }

    /// Whether an optimisation the check offers is made: never by preen
    /// (e2fsck -p answers no), and only for the root and ordinary inodes
    /// (e2fsck asks about the others too, but leaves them).
    fn takes_optimisation(&self, f: &Finding) -> bool {
        self.opts.mode != Mode::Preen
            && f.inode()
                .is_some_and(|i| i == ext4_layout::types::Ino::ROOT || i.get() >= self.first_ino)
    }

    /// The external journal gets a writer of its own: replay empties it.
    fn open_external_journal(&mut self) -> Option<fixer::Fixer> {
        let block_size = self.block_size;
        let j = self.check_opts.external_journal.as_ref()?;
        let (opened, how) = if self.opts.dry_run {
            (std::fs::File::open(j.path()), "")
        } else {
            (
                fixer::safety::open_for_repair(j.path(), !self.mounted_root),
                " for writing",
            )
        };
        match opened {
            Ok(f) if self.opts.dry_run => Some(fixer::Fixer::start_in_memory(
                Arc::new(f),
                j.base(),
                j.size(),
                block_size,
            )),
            Ok(f) => Some(fixer::Fixer::start(Arc::new(f), j.base(), j.size(), None)),
            Err(e) => {
                self.stop_reason = Some(format!(
                    "cannot open the external journal {}{how}: {e}",
                    j.path().display()
                ));
                None
            }
        }
    }

    fn external(&self) -> Option<journal::External<'_>> {
        match (&self.check_opts.external_journal, &self.jfx) {
            (Some(dev), Some(fx)) => Some(journal::External { dev, fx }),
            _ => None,
        }
    }

    /// Records a step's outcome: its fixes, or why the repair stops.
    fn take_step(&mut self, step: Result<Option<Finding>, Error>) {
        match step {
            Ok(Some(f)) => {
                self.fixed_all.push(f);
                self.modified = true;
            }
            Ok(None) => {}
            Err(why) => self.stop_reason = Some(why.to_string()),
        }
    }

    /// What e2fsck does before its passes: the chosen backup superblock
    /// made primary, the inode count, the journal, orphans, the decision
    /// to skip a clean file system, and the bad-block list. Returns what
    /// was done when the file system is skipped.
    fn before_passes(&mut self) -> Option<check_core::due::Skipped> {
        if self.check_opts.superblock.is_some() {
            // As e2fsck -b: the chosen superblock and its descriptors
            // become the primary ones before anything else, and
            // everything after works on them.
            let step = restore_primary(&self.dev, &self.fx, &self.check_opts);
            if step.is_ok() {
                self.check_opts.superblock = None;
            }
            self.take_step(step.map(Some));
        }
        self.jfx = self.open_external_journal();
        if self.stop_reason.is_none() {
            match fix_superblock_fields(&self.dev, &self.fx, self.check_opts.answers.as_deref()) {
                Ok(fixed) => {
                    self.modified |= !fixed.is_empty();
                    self.fixed_all.extend(fixed);
                }
                Err(why) => self.stop_reason = Some(why.to_string()),
            }
        }
        if self.stop_reason.is_none() {
            let pre = journal::before_passes(&self.dev, &self.fx, self.external().as_ref(), true);
            match pre {
                Ok(pre) => {
                    self.record.orphans_released += pre.orphans_released;
                    self.record.journal_blocks_replayed += pre.journal_blocks_replayed;
                    self.record.journal_transactions_replayed += pre.journal_transactions_replayed;
                    // A fast-commit replay rebuilt names and inodes from
                    // a log: the check vouches for what it made before
                    // the file system is called clean.
                    self.must_check |= pre.descriptors_fixed || pre.fast_commits_replayed;
                    self.journal_removed = pre.journal_removed;
                    self.notes.extend(pre.notes);
                    self.fixed_all.extend(pre.fixed);
                    self.modified |= pre.modified;
                }
                Err(_) if fixer::safety::interrupted() => self.cancelled = true,
                Err(why) => self.stop_reason = Some(why.to_string()),
            }
        }
        if let Some(clock) = self
            .opts
            .skip_if_clean
            .filter(|_| self.going() && !self.must_check)
        {
            if let Some(skipped) = self.skip_if_clean(clock) {
                return Some(skipped);
            }
        }
        if let Some(change) = self.opts.bad_blocks.as_ref().filter(|_| self.going()) {
            match update_bad_blocks(&self.dev, &self.fx, &self.check_opts, change, self.path) {
                Ok((more_notes, fixed)) => {
                    self.notes.extend(more_notes);
                    self.fixed_all.extend(fixed);
                    self.modified = true;
                }
                Err(why) => self.stop_reason = Some(why.to_string()),
            }
        }
        None
    }

    /// e2fsck without -f: a clean file system that is not due is skipped,
    /// its counts set right.
    fn skip_if_clean(&mut self, clock: check_core::due::Clock) -> Option<check_core::due::Skipped> {
        let decision = if self.opts.journal_only {
            Ok(skip::Decision::Skip(check_core::due::Skipped {
                journal_only: true,
                ..Default::default()
            }))
        } else {
            skip::decide(&self.dev, &self.fx, clock)
        };
        match decision {
            Ok(skip::Decision::Skip(s)) => Some(s),
            Ok(skip::Decision::Check(r)) => {
                self.forced = Some(r);
                None
            }
            // The file system cannot be opened: the check says why.
            Err(_) => None,
        }
    }

    /// Marks the protection block clean again (before the writer stops).
    fn release_mmp(&mut self) {
        if let Some(h) = self.mmp.take() {
            if let Some(note) = h.release(&self.fx, self.path) {
                self.notes.push(note);
            }
        }
    }

    /// The report of a file system skipped as clean.
    fn into_skipped(mut self, skipped: check_core::due::Skipped) -> Repaired {
        self.release_mmp();
        let mut notes = self.notes;
        if let Err(e) = self.fx.finish() {
            notes.push(format!("The fixer failed at the end: {e}"));
        }
        let mut report = Report {
            device: self.path.display().to_string(),
            notes,
            findings: self.fixed_all,
            skipped: Some(skipped),
            modified: self.modified,
            dry_run: self.staged.as_ref().map(|s| s.blocks()),
            ..Default::default()
        };
        report.finish();
        Repaired { report, rounds: 0 }
    }

    /// A check of the file system as the fixer has left it, with pass 1's
    /// workers streaming fixes when the repair allows it.
    fn check(&self) -> Checked {
        let streamed = Streamed(&self.fx);
        let sink = self.streaming.then_some(&streamed as &dyn FixSink);
        check_fixing(self.dev.clone(), &self.check_opts, sink)
    }

    /// Checks again, waits for the fixes the check's workers sent, and
    /// says how long the check took.
    fn check_again(&mut self, current: &mut Checked) -> f64 {
        // The last check's state goes before the next check builds its
        // own: holding both would double the check's memory at its peak.
        current.state = None;
        let t = self.timed();
        *current = self.check();
        let took = self.record_check(t);
        self.settle(current);
        took
    }

    /// A check without fixes from pass 1's workers, timed for the report.
    fn check_quietly(&mut self) -> Checked {
        let t = self.timed();
        let c = check_fixing(self.dev.clone(), &self.check_opts, None);
        self.record_check(t);
        c
    }

    /// When a check starts: the time and the bytes read so far.
    fn timed(&self) -> (std::time::Instant, u64) {
        (std::time::Instant::now(), self.dev.bytes_read())
    }

    /// Records a full check that started at `started` (from `timed`);
    /// its wall time in seconds.
    fn record_check(&mut self, started: (std::time::Instant, u64)) -> f64 {
        let seconds = started.0.elapsed().as_secs_f64();
        let bytes = self.dev.bytes_read().saturating_sub(started.1);
        self.record.checks.push(check_core::report::CheckRecord {
            kind: check_core::report::CheckKind::Full,
            seconds,
            blocks_read: bytes / u64::from(self.block_size.max(1)),
        });
        seconds
    }

    /// Waits for the fixes pass 1's workers sent during `current`.
    fn settle(&mut self, current: &mut Checked) {
        match settle_streamed(&self.fx, current, &mut self.fixed_all) {
            Ok(n) => self.streamed = n,
            Err(e) => self.stop_reason = Some(e.to_string()),
        }
        self.modified |= self.streamed > 0;
    }

    /// The first check of the repair.
    fn first_check(&mut self) -> Checked {
        // Pass 1's workers send inode-local fixes to the fixer while they
        // check, except when preening (which must know that every problem
        // is one it may fix before it writes anything).
        self.streaming =
            self.opts.mode != Mode::Preen && self.check_opts.answers.is_none() && self.going();
        self.check_opts.repairing = true;
        let t = self.timed();
        let mut current = self.check();
        self.record_check(t);
        if let Some(st) = &current.state {
            let bad = &st.maps.inode_not_dir;
            let mut v = Vec::new();
            let mut at = 0;
            while let Some(i) = bad.next_set(at) {
                v.push(u32::try_from(i + 1).unwrap_or(u32::MAX));
                at = i + 1;
            }
            self.check_opts.not_dirs = Arc::from(v);
        }
        if self.stop_reason.is_none() {
            self.settle(&mut current);
        }
        // The directories indexed at the start, with those whose index the
        // first check reads as dropped (the round that drops it rewrites
        // them when it can: round::reindex_dropped).
        self.indexed_before = current
            .state
            .as_ref()
            .map(|s| {
                s.dx_dirs
                    .iter()
                    .map(|&(d, _)| d)
                    .chain(s.dx_dropped.iter().copied())
                    .collect()
            })
            .unwrap_or_default();
        current
    }

    /// The rounds of check and fix, then pass 3A (and `-E bmap2extent`);
    /// what pass 3A's check finds (a rebuilt directory's duplicate names,
    /// say) gets the rounds once more.
    fn rounds_and_pass_3a(&mut self, current: &mut Checked) {
        let mut after_pass_3a = false;
        loop {
            self.rounds(current);
            // A preen that stops writes nothing more: pass 3A waits for
            // the repair the admin runs.
            if after_pass_3a || self.preen_halt.is_some() {
                break;
            }
            self.restructure(current);
            after_pass_3a = true;
            let more = current.report.findings.iter().any(|f| self.fixable(f));
            if !more || self.rounds >= self.opts.max_rounds || !self.going() {
                break;
            }
        }
    }

    /// With nothing else left, /lost+found is made usable, as e2fsck does
    /// on every repair (once: the next check confirms it); dropped indexes
    /// are rebuilt, and a journal removed as unusable is made anew.
    fn last_findings(&mut self, current: &mut Checked) {
        let Some(st) = current.state.as_ref() else {
            return;
        };
        self.lpf_checked = true;
        let mut found = Vec::new();
        let mut trial = Staging::new(&st.fs, &st.maps, true);
        match connect::lost_found_findings(st, &mut trial) {
            Ok(f) => found.extend(f),
            Err(why) => self
                .notes
                .push(format!("/lost+found cannot be created: {why}.")),
        }
        let indexed_now: Vec<u32> = st.dx_dirs.iter().map(|&(d, _)| d).collect();
        let done_in_round: std::collections::BTreeSet<u32> = self
            .fixed_all
            .iter()
            .filter(|f| f.code == Code::RehashDir)
            .filter_map(|f| f.ino)
            .collect();
        for d in rehash::dropped(&self.indexed_before, &indexed_now, |d| st.maps.is_dir(d)) {
            if !done_in_round.contains(&d) {
                found.push(Finding::new(Code::RehashDir).ino(d));
            }
        }
        if self.journal_removed && !st.fs.geo.compat.contains(CompatFeatures::HAS_JOURNAL) {
            match mkjournal::default_blocks(st.fs.geo.blocks_count) {
                Some(_) => found.push(Finding::new(Code::RecreateJournal)),
                None => self.notes.push(
                    "The file system is too small for a journal: it is left without one.".into(),
                ),
            }
        }
        current.report.findings.extend(found);
    }

    /// Fixes to the journal inode (a size, blocks it should not have) can
    /// leave it unusable, the journal then found only through the
    /// superblock's copy of its map: the journal is looked at again as at
    /// the start, so that the next run finds nothing to do. Returns
    /// whether it changed anything (and the file system was checked
    /// again).
    fn recheck_journal(&mut self, current: &mut Checked) -> bool {
        self.journal_rechecked = true;
        match journal::before_passes(&self.dev, &self.fx, self.external().as_ref(), false) {
            Ok(pre) if pre.modified => {
                self.journal_removed |= pre.journal_removed;
                self.notes.extend(pre.notes);
                self.fixed_all.extend(pre.fixed);
                self.modified = true;
                self.lpf_checked = false;
                self.rounds += 1;
                self.round_times.push(format!(
                    "round {}: the journal looked at again",
                    self.rounds
                ));
                self.check_again(current);
                true
            }
            Ok(_) => false,
            Err(why) => {
                self.stop_reason = Some(why.to_string());
                false
            }
        }
    }

    /// Check-and-fix rounds until nothing is left to fix, nothing more can
    /// be fixed, or the repair stops.
    fn rounds(&mut self, current: &mut Checked) {
        while self.going() {
            if fixer::safety::interrupted() {
                self.cancelled = true;
                break;
            }
            let Some(st) = current.state.as_ref() else {
                break;
            };
            if !self.lpf_checked
                && st.abort.is_none()
                && !current.report.findings.iter().any(|f| self.fixable(f))
            {
                self.last_findings(current);
            }
            let nothing_left = !current.report.findings.iter().any(|f| self.fixable(f));
            if nothing_left && self.streamed > 0 && self.rounds < self.opts.max_rounds {
                // The check's workers fixed what it found: check again, so
                // that the last word is a fresh check.
                self.rounds += 1;
                self.round_times.push(format!(
                    "round {}: {} problems fixed by pass 1's workers during the check",
                    self.rounds, self.streamed
                ));
                self.record.rounds.push(check_core::report::RoundRecord {
                    fixed_during_check: self.streamed,
                    ..Default::default()
                });
                let took = self.check_again(current);
                self.round_times
                    .push(format!("check after round {}: {took:.3} s", self.rounds));
                continue;
            }
            if nothing_left
                && !self.journal_rechecked
                && self.rounds < self.opts.max_rounds
                && self.recheck_journal(current)
            {
                continue;
            }
            if !self.going() || !self.fix_round(current) {
                break;
            }
        }
    }

    /// Plans and commits one round's fixes, then checks again. False when
    /// the rounds are over.
    fn fix_round(&mut self, current: &mut Checked) -> bool {
        let Some(st) = current.state.as_ref() else {
            return false;
        };
        let to_fix: Vec<&Finding> = current
            .report
            .findings
            .iter()
            .filter(|f| self.fixable(f))
            // With meta_bg, e2fsck drops resize_inode and clears the inode
            // instead of making it again.
            .filter(|f| {
                f.code != Code::ResizeInodeInvalid
                    || !st.fs.geo.incompat.contains(IncompatFeatures::META_BG)
            })
            .collect();
        if to_fix.is_empty() || self.rounds >= self.opts.max_rounds {
            return false;
        }
        // As e2fsck -p: a problem preen may not fix stops the repair
        // before anything is written. One no repair fixes stops it now.
        let blocker = (self.opts.mode == Mode::Preen)
            .then(|| {
                to_fix
                    .iter()
                    .copied()
                    .find(|f| !preen_may_fix(f) && !entry_cleared(f, &to_fix))
            })
            .flatten();
        if let Some(f) = blocker.filter(|f| f.code.policy().no_fix) {
            self.preen_halt = Some(f.message());
            return false;
        }
        let complete = st.abort.as_ref().is_none_or(|a| a.pass > Pass::P1B);
        let mut stage = Staging::new(&st.fs, &st.maps, complete);
        let t_plan = std::time::Instant::now();
        let mut stopped = None;
        let mut made = Vec::new();
        let mut quiet = Vec::new();
        let mut pass3a = Pass3A {
            wanted: !self.opts.bmap2extent,
            rewritten: 0,
        };
        let fixed = plan_round(
            st,
            &current.report,
            &to_fix,
            &mut stage,
            &mut stopped,
            &mut made,
            &mut quiet,
            &mut pass3a,
        );
        let planned = t_plan.elapsed().as_secs_f64();
        // The rest stops it if this round would fix it, or would fix
        // nothing else. A problem the round leaves to the next check,
        // because a fix that comes before it in e2fsck's order changes it
        // (an inode's blocks read again once its extents flag is back,
        // blocks no longer shared once the inode that also claimed them
        // is cleared), is judged by that check, as e2fsck judges it only
        // after the fixes before it.
        if self.opts.mode == Mode::Preen {
            // An inode preen clears takes the problems e2fsck would meet
            // after it with it (those of later passes, and the size and
            // block count); one met before it in pass 1 (a bad extent
            // header before the directory is found to have no blocks)
            // still stops preen.
            let cleared = |f: &Finding| {
                fixed.iter().any(|g| {
                    g.ino.is_some()
                        && g.ino == f.ino
                        && g.code.clears_inode()
                        && g.code.preen_ok()
                        && (f.code.pass() != Pass::P1
                            || f.code.policy().inode_order > g.code.policy().inode_order)
                })
            };
            if let Some(f) = fixed
                .iter()
                .copied()
                .find(|f| !preen_may_fix(f) && !entry_cleared(f, &to_fix) && !cleared(f))
                .or(blocker.filter(|_| fixed.is_empty()))
            {
                self.preen_halt = Some(f.message());
                return false;
            }
        }
        if fixed.is_empty() || stage.is_empty() {
            return false;
        }
        self.rounds += 1;
        let rounds = self.rounds;
        let writes = stage.into_writes();
        let nwrites = writes.len();
        let t_commit = std::time::Instant::now();
        let committed = self.fx.commit(writes);
        self.round_times.push(format!(
            "round {rounds}: {} of {} problems fixed, planned in {planned:.3} s, \
             {nwrites} blocks written in {:.3} s{}",
            fixed.len(),
            to_fix.len(),
            t_commit.elapsed().as_secs_f64(),
            if self.streamed > 0 {
                format!(
                    "; {} more fixed by pass 1's workers during the check",
                    self.streamed
                )
            } else {
                String::new()
            }
        ));
        if rounds > 1 {
            // What a verifying check still found: each is a fix the
            // round before should have made.
            let mut by_code: std::collections::BTreeMap<&str, usize> = Default::default();
            for f in &fixed {
                *by_code.entry(f.code.name()).or_default() += 1;
            }
            let list: Vec<String> = by_code.iter().map(|(c, n)| format!("{c} x{n}")).collect();
            self.round_times
                .push(format!("round {rounds} fixed: {}", list.join(", ")));
        }
        if let Some(why) = &stopped {
            self.round_times
                .push(format!("round {rounds} stopped early: {why}"));
        }
        if pass3a.rewritten > 0 {
            // Pass 3A's rewrites, made in the round: a change, not a fix.
            self.restructured = true;
            self.round_times.push(format!(
                "round {rounds}: pass 3A: {} directories rewritten",
                pass3a.rewritten
            ));
        }
        self.record.rounds.push(check_core::report::RoundRecord {
            fixed: fixed.len() as u64,
            fixed_during_check: self.streamed,
            blocks_written: nwrites as u64,
            plan_seconds: planned,
            write_seconds: t_commit.elapsed().as_secs_f64(),
            stopped_early: stopped,
        });
        match committed {
            Ok(()) => self.modified = true,
            Err(fixer::CommitError::Interrupted) => {
                self.cancelled = true;
                return false;
            }
            Err(e) => {
                self.stop_reason = Some(Error::Stopped(e).to_string());
                return false;
            }
        }
        if std::env::var_os("EXT4CHK_DEBUG_ROUNDS").is_some() {
            for f in &fixed {
                let _ = writeln!(std::io::stderr(), "round {rounds}: {}", f.message());
            }
        }
        let quiet: std::collections::HashSet<*const Finding> =
            quiet.into_iter().map(std::ptr::from_ref).collect();
        let fixed: Vec<Finding> = fixed
            .into_iter()
            .map(|f| {
                let mut g = f.clone();
                g.fixed = true;
                g.quiet = quiet.contains(&std::ptr::from_ref(f));
                g
            })
            .collect();
        self.fixed_all.extend(fixed);
        self.fixed_all.extend(made);
        let took = self.check_again(current);
        self.round_times
            .push(format!("check after round {rounds}: {took:.3} s"));
        true
    }

    /// `-E bmap2extent`, then pass 3A's directory rewrites, each followed
    /// by a check.
    fn restructure(&mut self, current: &mut Checked) {
        if self.opts.bmap2extent && self.going() {
            match convert_to_extents(current, &self.fx) {
                Ok(n) => {
                    self.modified = true;
                    self.restructured = true;
                    self.round_times
                        .push(format!("bmap2extent: {n} inodes converted"));
                    current.state = None;
                    *current = self.check_quietly();
                }
                Err(why) => self
                    .notes
                    .push(format!("Files could not be converted to extents: {why}.")),
            }
        }
        if self.going() {
            let which = if self.opts.optimize_dirs {
                Rehash::All
            } else {
                Rehash::Linear
            };
            match optimize_directories(current, &self.fx, which) {
                Ok(0) => {}
                Ok(n) => {
                    self.modified = true;
                    self.restructured = true;
                    self.round_times
                        .push(format!("pass 3A: {n} directories rewritten"));
                    current.state = None;
                    *current = self.check_quietly();
                }
                Err(why) => self
                    .notes
                    .push(format!("Directories could not be optimized: {why}.")),
            }
        }
    }

    /// The journal map's backup, `-E discard`, and the superblock's record
    /// of the check.
    fn after_rounds(&mut self, current: &Checked) {
        // A repair that moved the journal's blocks (cloning them, say)
        // leaves the superblock's backup of its map stale: it is brought
        // up to date last, so that the next repair has nothing to do.
        if self.modified && self.going() {
            let mut post = journal::PrePass::default();
            if journal::backup_journal_map(&self.dev, &self.fx, &mut post).is_ok() {
                self.fixed_all.extend(post.fixed);
            }
        }
        if self.opts.discard && !self.modified && self.going() && current.report.findings.is_empty()
        {
            if let Err(why) = discard_free_space(current, &self.fx) {
                self.notes
                    .push(format!("Free space was not discarded: {why}."));
            }
        }
        // The superblock records the check, as e2fsck's last write does.
        if self.going() && current.report.aborted.is_none() {
            let outcome = if self.preen_halt.is_some() {
                finish::Outcome::PreenHalt
            } else if current.report.has_uncorrected_errors() {
                finish::Outcome::Invalid
            } else {
                finish::Outcome::Valid
            };
            let unshare = self.check_opts.choices.unshare_blocks;
            let halted = outcome == finish::Outcome::PreenHalt;
            match finish::record_check(&self.dev, &self.fx, outcome, unshare) {
                Ok(f) => {
                    self.fixed_all.extend(f);
                    if halted {
                        // The one write of a stopped preen after its
                        // check: said, as every write is.
                        self.modified = true;
                        self.notes.push(
                            "The superblock is marked as having errors, so that the next check is a full one."
                                .into(),
                        );
                    }
                }
                Err(_) if self.fx.failure().is_some() => {}
                Err(e) => self
                    .notes
                    .push(format!("The record of the check could not be written: {e}")),
            }
        }
    }

    /// Stops the writers and makes the report: the last check's findings,
    /// everything fixed, and why the repair stopped if it did.
    fn into_repaired(mut self, current: Checked) -> Repaired {
        self.release_mmp();
        let Run {
            fx,
            jfx,
            mut notes,
            mut fixed_all,
            check_opts,
            had_shared_blocks,
            staged,
            ..
        } = self;
        // A failed write stops everything at once (the fixer writes
        // nothing after it), whichever step met it: that failure is why
        // the repair stopped.
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
            uncount_unsharing(&mut fixed_all, &mut notes);
        }
        if let Some(st) = &current.state {
            values_as_written(&mut fixed_all, &st.fs);
        }
        let mut report = current.report;
        report.diagnostics.extend(self.round_times);
        report
            .diagnostics
            .extend(self.record.checks.iter().enumerate().map(|(i, c)| {
                format!(
                    "check {} of the repair: {}, {:.3} s, {} blocks read",
                    i + 1,
                    c.kind.name(),
                    c.seconds,
                    c.blocks_read
                )
            }));
        report.notes.splice(0..0, notes);
        report.findings.extend(fixed_all);
        report.finish();
        report.modified = self.modified;
        report.cancelled = self.cancelled;
        report.mounted_root = self.mounted_root;
        report.preen_halt = self.preen_halt;
        report.forced = self.forced;
        report.restructured = self.restructured;
        report.dry_run = staged.as_ref().map(|s| s.blocks());
        report.repair = Some(self.record);
        if self.modified && self.mounted_root {
            report.notes.push(
                "This is the root file system, mounted read-only, and it was changed: reboot now, before the kernel writes its old view back."
                    .into(),
            );
        }
        if self.cancelled {
            report.notes.push(if self.modified {
                "Interrupted: the repair stopped between two complete sets of changes; run it again to finish."
                    .into()
            } else {
                "Interrupted before anything was written: the file system is as it was.".into()
            });
        }
        if let Some(why) = write_failure {
            // Errors remain unless the failure came after the last check
            // found nothing left (in the final record of the check).
            report.forced_uncorrected =
                report.has_uncorrected_errors() || self.stop_reason.is_some();
            report.write_failed = true;
            report.aborted = Some(format!("the repair stopped: {why}"));
        } else if let Some(why) = self.stop_reason {
            // Why the repair stopped says more than where a check of the
            // file system as it was would have stopped.
            report.aborted = Some(why);
            report.forced_uncorrected = true;
        }
        Repaired {
            report,
            rounds: self.rounds,
        }
    }
}

/// The counts a repair fixed, as the last check found them on disk: what
/// was written, not what the check that found them expected (other fixes
/// of the same round, such as new blocks for /lost+found, move them). A
/// count that ends as the check found it was not changed, and is not
/// reported as fixed: the fixes made before pass 5 had made it right, as
/// e2fsck, which counts as it fixes, never finds it wrong.
fn values_as_written(fixed: &mut Vec<Finding>, fs: &check_core::fs::Fs) {
    let sb = fs.sb();
    fixed.retain_mut(|f| {
        if !f.fixed {
            return true;
        }
        let on_disk = match (f.code, f.group) {
            (Code::FreeBlocksGroup, Some(g)) if g < fs.geo.group_count => {
                u64::from(fs.gd(g).free_blocks_count())
            }
            (Code::FreeInodesGroup, Some(g)) if g < fs.geo.group_count => {
                u64::from(fs.gd(g).free_inodes_count())
            }
            (Code::DirsCountGroup, Some(g)) if g < fs.geo.group_count => {
                u64::from(fs.gd(g).used_dirs_count())
            }
            (Code::FreeBlocksTotal, _) => sb.free_blocks_count(),
            (Code::FreeInodesTotal, _) => u64::from(sb.s_free_inodes_count()),
            _ => return true,
        };
        match &mut f.numbers {
            Numbers::Mismatch { found, .. } if *found == on_disk => false,
            Numbers::Mismatch { expected, .. } => {
                *expected = on_disk;
                true
            }
            _ => true,
        }
    });
}

/// Giving files their own copies of blocks the file system allowed them
/// to share is what was asked, not a repair (e2fsck does not count it
/// either): said, but not counted.
fn uncount_unsharing(fixed_all: &mut Vec<Finding>, notes: &mut Vec<String>) {
    let (unshared, rest): (Vec<Finding>, Vec<Finding>) = std::mem::take(fixed_all)
        .into_iter()
        .partition(|f| f.code.pass() == Pass::P1B);
    *fixed_all = rest;
    let files: std::collections::BTreeSet<u32> = unshared.iter().filter_map(|f| f.ino).collect();
    if !files.is_empty() {
        notes.push(format!(
            "{} files that shared blocks now have copies of their own; the shared_blocks feature is cleared.",
            files.len()
        ));
    }
}

/// After a check whose pass-1 workers may have sent fixes: waits until
/// the fixer has written them, and moves the findings they fixed to
/// `fixed_all`. Returns how many were written. If the fixer failed, the
/// findings count as not fixed and the repair stops.
fn settle_streamed(
    fx: &fixer::Fixer,
    current: &mut Checked,
    fixed_all: &mut Vec<Finding>,
) -> Result<u64, Error> {
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
            Err(Error::Stopped(e))
        }
    }
}

fn libc_ebusy() -> i32 {
    16
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
