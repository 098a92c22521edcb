//! One run, from a validated command line to an exit code: find the file
//! system, decide whether a check is due (as e2fsck), check or repair, and
//! print the result.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use check_core::answers::Answers;
use check_core::due::{self, Clock, Due, Skipped};
use check_core::fs::{open_fs, OpenOptions, SbLoc};
use check_core::progress::Progress;
use check_core::{CheckOptions, Report};
use pipeline::{open_device, IoMode, Target};

use crate::cli::{DirectIo, Invocation, Io, Mode, Personality};
use crate::error::TargetError;
use crate::progress;
use crate::render::{self, text as output};

/// Runs the invocation; returns the exit code.
pub fn run(inv: &Invocation) -> i32 {
    let started = Instant::now();
    let target = match resolve_target(inv) {
        Ok(t) => t,
        Err(why) => return refused(inv, &why.to_string(), false),
    };
    if inv.flush {
        if let Err(e) = flush(&target.path) {
            let why = format!(
                "{}: cannot flush the device's buffers: {e}",
                target.path.display()
            );
            return refused(inv, &why, false);
        }
    }
    let journal = match external_journal(inv, &target) {
        Ok(j) => j,
        // As e2fsck: the file system was recognised, its journal not.
        Err(why) => return refused(inv, &why.to_string(), true),
    };
    let display = progress_display(inv, &target);
    // A read-only check's text report goes out pass by pass when it is
    // read from a pipe or a file (a log shows the check as it goes); on a
    // terminal the bar shows progress and the report comes at the end.
    let stream = (inv.mode == Mode::Check
        && inv.format == crate::cli::Format::Text
        && !std::io::IsTerminal::is_terminal(&std::io::stdout()))
    .then(|| Arc::new(render::text::Stream::default()));
    let mut report = match inv.mode {
        Mode::Check => check_only(inv, &target, journal, stream.clone()),
        Mode::Preen | Mode::Repair => repair(inv, &target, journal, None),
        Mode::Interactive => interactive(inv, &target, journal),
    };
    // A file system skipped as clean was never opened by a check: its
    // label (the name e2fsck gives it) comes from the superblock.
    if report.label.is_empty() && report.aborted.is_none() {
        report.label = peek_label(&target).unwrap_or_default();
    }
    // A repair that never ran (quit at the plan) or stopped (preen) was
    // summed up as it would have left the file system: the counts are
    // the disk's instead.
    if report.preen_halt.is_some() || report.quit_at_plan {
        counts_on_disk(&target, &mut report);
    }
    if let Some(d) = display {
        d.stop();
    }
    let mut code = finish(inv, &report, stream.as_deref());
    // e2fsck.conf's allow_cancellation: a canceled run that left no
    // errors behind is not a failure.
    if code == check_core::report::exit::CANCELLED && crate::conf::get().allow_cancellation {
        code = 0;
    }
    if inv.timing > 0 && report.skipped.is_none() {
        out!("{}", output::timing(Some(&report), inv.timing, started));
    }
    code
}

/// A run that cannot start: one line on stderr and exit code 8 (12 when
/// the file system is left with errors); with `--format json`, also a
/// report that says why, so that a pipeline reading it gets a document.
fn refused(inv: &Invocation, why: &str, uncorrected: bool) -> i32 {
    errln!("{}: {why}", inv.prog);
    let report = Report {
        device: inv.device.clone(),
        aborted: Some(why.to_string()),
        forced_uncorrected: uncorrected,
        ..Default::default()
    };
    if let Some(doc) = render::document(inv.format, &report) {
        out!("{doc}");
    }
    report.exit_code()
}

/// The file system's place: the path, `?offset=`, `--partition`.
fn resolve_target(inv: &Invocation) -> Result<Target, TargetError> {
    let target = Target::parse(&inv.device).map_err(|source| TargetError::Spec {
        device: inv.device.clone(),
        source,
    })?;
    let meta = std::fs::metadata(&target.path).map_err(|source| TargetError::Open {
        path: target.path.clone(),
        source,
    })?;
    if meta.is_dir() {
        return Err(TargetError::Directory(target.path.clone()));
    }
    let Some(n) = inv.partition else {
        return Ok(target);
    };
    let p =
        pipeline::partition::find_in(&target.path, n).map_err(|source| TargetError::Partition {
            path: target.path.clone(),
            source,
        })?;
    Ok(Target {
        path: target.path,
        offset: target.offset + p.offset,
        len: Some(p.len),
    })
}

/// `-F`: flush the device's buffers (a block device's buffer cache; an
/// image file's dirty pages, which are then dropped from the cache).
fn flush(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let f = std::fs::File::open(path)?;
    f.sync_all()?;
    if f.metadata()?.file_type().is_block_device() {
        nix::ioctl_none!(blkflsbuf, 0x12, 97);
        use std::os::fd::AsRawFd;
        // SAFETY: BLKFLSBUF takes no argument; the descriptor is open.
        unsafe { blkflsbuf(f.as_raw_fd()) }.map_err(std::io::Error::from)?;
    } else {
        nix::fcntl::posix_fadvise(
            &f,
            0,
            0,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
        )
        .map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// The check's progress counters, for the whole process.
static PROGRESS: Progress = Progress::new();

/// Starts the progress display the invocation asks for (`-C`, or, as
/// `ext4chk`, a line on a terminal), named as e2fsck names the device. An
/// interactive repair draws nothing on the terminal it asks on (a
/// descriptor given to `-C` still gets its lines).
fn progress_display(inv: &Invocation, target: &Target) -> Option<progress::Display> {
    if inv.progress.is_none() && inv.format != crate::cli::Format::Text && !inv.debug {
        return None;
    }
    let asking = inv.mode == Mode::Interactive;
    let to = match inv.progress {
        Some(crate::cli::ProgressTo::Bar) if asking => None,
        to => to,
    };
    let eta = inv.personality == Personality::Ext4chk && !asking;
    let label = peek_label(target).unwrap_or_default();
    let probe = Report {
        label,
        ..Default::default()
    };
    // A JSON or JUnit document owns standard output: -C 0's bar goes to
    // standard error.
    let machine = inv.format != crate::cli::Format::Text;
    progress::Display::start(
        to,
        &display_name(inv, &probe),
        &PROGRESS,
        inv.debug,
        eta,
        machine,
    )
}

/// The summary's counts as the primary superblock on the device holds
/// them.
fn counts_on_disk(target: &Target, report: &mut Report) {
    let (Some(raw), Some(s)) = (peek_super(target), report.summary.as_mut()) else {
        return;
    };
    let Some(sb) = ext4_layout::superblock::Superblock::new(&raw) else {
        return;
    };
    s.inodes_count = u64::from(sb.s_inodes_count());
    s.inodes_used = s
        .inodes_count
        .saturating_sub(u64::from(sb.s_free_inodes_count()));
    s.blocks_count = sb.blocks_count();
    s.blocks_used = s.blocks_count.saturating_sub(sb.free_blocks_count());
}

/// The volume label, read straight from the primary superblock.
fn peek_label(target: &Target) -> Option<String> {
    let sb = peek_super(target)?;
    let name = ext4_layout::superblock::Superblock::new(&sb)?.s_volume_name();
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
}

fn io_mode(io: Io) -> IoMode {
    match io {
        Io::Auto => IoMode::Auto,
        Io::Uring => IoMode::Uring,
        Io::Pread => IoMode::Pread,
    }
}

/// The journal device of a file system whose journal is outside it:
/// `-j`, else the device udev names by the journal's UUID, else the one
/// with the device number the superblock records.
fn external_journal(
    inv: &Invocation,
    target: &Target,
) -> Result<Option<Arc<pipeline::Device>>, TargetError> {
    let Some((uuid, devno)) = peek_super(target).and_then(|sb| {
        let s = ext4_layout::superblock::Superblock::new(&sb)?;
        let u = s.s_journal_uuid();
        (u != [0; 16]).then(|| (u, s.s_journal_dev()))
    }) else {
        return Ok(None);
    };
    let path = match &inv.journal {
        Some(p) => Some(p.clone()),
        None => find_journal_device(&uuid, devno),
    };
    let Some(path) = path else {
        // The check says it cannot be found, with e2fsck's exit code.
        return Ok(None);
    };
    open_device(&Target::whole(&path), IoMode::Pread)
        .map(|d| Some(Arc::new(d)))
        .map_err(|source| TargetError::Journal {
            device: inv.device.clone(),
            source,
        })
}

/// Looks for a journal device as blkid would: by UUID under
/// /dev/disk/by-uuid, then by device number.
fn find_journal_device(uuid: &[u8; 16], devno: u32) -> Option<std::path::PathBuf> {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    let text = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    let by_uuid = Path::new("/dev/disk/by-uuid").join(&text);
    if by_uuid.exists() {
        return Some(by_uuid);
    }
    if devno == 0 {
        return None;
    }
    // The old 16-bit encoding and the kernel's new one.
    let (major, minor) = (
        (devno >> 8) & 0xfff,
        (devno & 0xff) | ((devno >> 12) & 0xfff00),
    );
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
    Some(Path::new("/dev").join(name))
}

/// The primary superblock's bytes.
fn peek_super(target: &Target) -> Option<Vec<u8>> {
    let dev = open_device(target, IoMode::Pread).ok()?;
    let mut sb = vec![0u8; 1024];
    dev.read_at(&mut sb, 1024).ok()?;
    Some(sb)
}

/// The check's options for an invocation (no external journal).
pub(crate) fn check_options_for(inv: &Invocation) -> CheckOptions {
    let mut o = check_options(inv, None);
    o.progress = None;
    o
}

fn check_options(inv: &Invocation, journal: Option<Arc<pipeline::Device>>) -> CheckOptions {
    CheckOptions {
        threads: inv.threads.0,
        auto_threads: inv.threads.1,
        idle_priority: inv.nice,
        superblock: inv.superblock.map(|block| SbLoc {
            block,
            block_size: inv.blocksize.filter(|&b| b != 0),
        }),
        progress: Some(&PROGRESS),
        external_journal: journal,
        choices: check_core::Choices {
            ea_ver: inv.ext.ea_ver,
            fragcheck: inv.ext.fragcheck,
            check_encoding: inv.ext.check_encoding,
            // -E readahead_kb, else e2fsck.conf's.
            readahead_kb: inv.ext.readahead_kb.or(crate::conf::get().readahead_kb),
            // A read-only run has nothing to unshare: as e2fsck's
            // simulation, shared blocks stay acceptable.
            unshare_blocks: inv.ext.unshare_blocks && inv.mode != Mode::Check,
            // As e2fsck: -E optimize_extents / no_optimize_extents, then
            // e2fsck.conf's no_optimize_extents when it is true; never
            // with fixes_only. Preen declines the offer (e2fsck -p
            // answers no), so it is not weighed.
            optimize_extents: !inv.ext.fixes_only
                && inv.mode != Mode::Preen
                && inv.ext.optimize_extents != Some(false)
                && crate::conf::get().no_optimize_extents != Some(true),
            rehash_dirs: inv.optimize_dirs,
        },
        times: time_check(inv),
        ..CheckOptions::default()
    }
}

/// Whether e2fsck would check even a clean file system.
fn forced(inv: &Invocation) -> bool {
    inv.personality == Personality::Ext4chk
        || inv.force
        || inv.bad_blocks.any()
        || inv.ext.unshare_blocks
}

/// The clock as e2fsck sees it: `E2FSCK_TIME` or the system's, and what
/// e2fsck.conf says of it and of running on battery.
fn clock() -> Clock {
    let conf = crate::conf::get();
    let set = std::env::var("E2FSCK_TIME")
        .ok()
        .and_then(|t| crate::conf::parse_int(t.trim()))
        .and_then(|t| u64::try_from(t).ok());
    let now = set.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    let mut c = Clock::at(now);
    c.on_battery = conf.defer_check_on_battery && due::on_battery();
    c.fudge = if conf.accept_time_fudge { 86_400 } else { 0 };
    // A clock before 2010 is taken as unset, unless E2FSCK_TIME set it.
    c.broken = conf.broken_system_clock || (set.is_none() && !c.trusted());
    c
}

/// The superblock's time checks, as the clock allows them.
fn time_check(inv: &Invocation) -> Option<check_core::TimeCheck> {
    let c = clock();
    (!c.broken).then_some(check_core::TimeCheck {
        now: c.now,
        fudge: c.fudge,
        forced: forced(inv),
    })
}

/// A read-only check (`-n`).
fn check_only(
    inv: &Invocation,
    target: &Target,
    journal: Option<Arc<pipeline::Device>>,
    stream: Option<Arc<render::text::Stream>>,
) -> Report {
    let mut opts = check_options(inv, journal);
    opts.stream = stream.map(|s| s as Arc<dyn check_core::answers::PassListener>);
    // Ctrl-C and SIGTERM stop the passes at their next unit of work; the
    // findings so far are reported, and the exit code is e2fsck's 32.
    if fixer::safety::install_interrupt_handler().is_ok() {
        opts.interrupt = Some(fixer::safety::interrupt_flag());
    }
    if let Some(m) = fixer::safety::mounted(&target.path)
        .ok()
        .and_then(|m| m.into_iter().next())
    {
        errln!(
            "{}: warning: {} is mounted on {}; a check of a mounted file system can report problems that are not there",
            inv.prog,
            target.path.display(),
            m.mount_point
        );
    }
    let dev = match open_device(target, io_mode(inv.io)) {
        Ok(mut d) => {
            let direct = match inv.direct_io {
                DirectIo::Auto => d.kind() == pipeline::DeviceKind::BlockDevice,
                DirectIo::On => true,
                DirectIo::Off => false,
            };
            if direct {
                if let Err(e) = d.go_direct() {
                    if inv.debug || inv.direct_io == DirectIo::On {
                        errln!(
                            "{}: {}: O_DIRECT refused ({e}); reading through the page cache",
                            inv.prog,
                            inv.device
                        );
                    }
                }
            }
            Arc::new(d)
        }
        Err(e) => {
            return Report {
                device: inv.device.clone(),
                aborted: Some(e.to_string()),
                ..Default::default()
            }
        }
    };
    if inv.debug {
        errln!(
            "{}: {}: using {} I/O, {} thread(s){}{}",
            inv.prog,
            inv.device,
            dev.io_path(),
            opts.threads,
            if opts.auto_threads {
                " at most, fewer while the machine is busy"
            } else {
                ""
            },
            if opts.idle_priority {
                ", idle priority"
            } else {
                ""
            }
        );
    }
    let mut forced_by = None;
    if !forced(inv) {
        if let Ok(o) = open_fs(
            dev.clone(),
            OpenOptions {
                read_only: true,
                superblock: opts.superblock,
            },
        ) {
            let sb = o.fs.sb();
            if inv.ext.journal_only {
                return skipped_report(
                    inv,
                    Skipped {
                        journal_only: true,
                        ..Default::default()
                    },
                );
            }
            if sb
                .incompat()
                .contains(ext4_layout::features::IncompatFeatures::RECOVER)
            {
                outln!("Warning: skipping journal recovery because doing a read-only filesystem check.");
            }
            let clock = clock();
            match due::check_due(&sb, clock, false) {
                Due::Skip { note } => {
                    let mut s = Skipped::from_super(&sb, note);
                    s.interval_ignored = clock.broken && sb.s_checkinterval() != 0;
                    return skipped_report(inv, s);
                }
                Due::Now(r) => forced_by = Some(r),
            }
        }
    }
    // Streamed, the reason the check runs comes first, as it does at the
    // end of a report printed whole.
    if let (Some(r), true) = (
        forced_by.as_ref().filter(|r| r.is_said()),
        opts.stream.is_some(),
    ) {
        let probe = Report {
            label: peek_label(target).unwrap_or_default(),
            device: inv.device.clone(),
            ..Default::default()
        };
        outln!(
            "{} {}, check forced.",
            display_name(inv, &probe),
            r.describe()
        );
    }
    let mut report = check_core::check(dev.clone(), &opts);
    if opts.stream.is_none() {
        report.forced = forced_by;
    }
    if let Some((fetched, taken, waited_ns)) = dev.read_ahead_counts() {
        report.diagnostics.push(format!(
            "direct reads: {} MiB read ahead, {} MiB of it used; readers waited {:.3} s for reads in flight",
            fetched >> 20,
            taken >> 20,
            waited_ns as f64 / 1e9
        ));
    }
    report
}

fn skipped_report(inv: &Invocation, s: Skipped) -> Report {
    Report {
        device: inv.device.clone(),
        skipped: Some(s),
        ..Default::default()
    }
}

/// A repair (`-y`, or interactive when someone `answers`) or preen
/// (`-p`).
fn repair(
    inv: &Invocation,
    target: &Target,
    journal: Option<Arc<pipeline::Device>>,
    answers: Option<Arc<dyn Answers>>,
) -> Report {
    // ext4chk's own e2fsck.conf setting ([ext4chk] undo = true): every
    // repair keeps an undo file, named as -z with no name names it.
    let undo = inv.undo.clone().or_else(|| {
        (crate::conf::get().undo_always && !inv.dry_run)
            .then(|| crate::cli::undo_path("", &inv.device))
            .flatten()
    });
    let mut check = check_options(inv, journal);
    // e2fsck.conf's force_no problems are declined, even under -y.
    let preen = inv.mode == Mode::Preen;
    if answers.is_some()
        || check_core::overrides::any_force_no()
        || (preen && check_core::overrides::any_no_default())
    {
        check.answers = Some(Arc::new(check_core::answers::Configured {
            inner: answers,
            preen,
        }));
    }
    let opts = repair::RepairOptions {
        check,
        io: io_mode(inv.io),
        mode: if inv.mode == Mode::Preen {
            repair::Mode::Preen
        } else {
            repair::Mode::All
        },
        undo: undo.clone(),
        max_rounds: 16,
        skip_if_clean: (!forced(inv)).then(clock),
        journal_only: inv.ext.journal_only,
        bad_blocks: inv.bad_blocks.any().then(|| repair::badblocks::Change {
            scan: inv.bad_blocks.scan,
            keep: inv.bad_blocks.keep,
            file: inv.bad_blocks.file.clone(),
        }),
        optimize_dirs: inv.optimize_dirs,
        bmap2extent: inv.ext.bmap2extent,
        discard: inv.ext.discard,
        dry_run: inv.dry_run,
    };
    if let Some(u) = &undo {
        if inv.mode != Mode::Check && !inv.dry_run {
            outln!(
                "Overwriting existing filesystem; this can be undone using the command:\n    e2undo {} {}\n",
                u.display(),
                inv.device
            );
        }
    }
    // A closed pipe must not end the run while it may be writing.
    let r = {
        let _writing = (!inv.dry_run).then(crate::out::Writing::begin);
        repair::repair(target, &opts)
    };
    if inv.debug {
        errln!("{}: {} check-and-fix round(s)", inv.prog, r.rounds);
    }
    r.report
}

/// An interactive repair: on a terminal, a summary of everything the
/// repair would do and a choice (all of it, one by one, or nothing);
/// then each problem is asked as it is found, as e2fsck asks.
fn interactive(
    inv: &Invocation,
    target: &Target,
    journal: Option<Arc<pipeline::Device>>,
) -> Report {
    if crate::ask::stdin_is_terminal() && inv.format == crate::cli::Format::Text {
        let mut dry = inv.clone();
        dry.dry_run = true;
        dry.undo = None;
        let plan = repair(&dry, target, journal.clone(), None);
        let fixes: Vec<&check_core::Finding> = plan.findings.iter().filter(|f| f.fixed).collect();
        if plan.aborted.is_none() && plan.skipped.is_none() && !fixes.is_empty() {
            out!("{}", crate::plan::summary(&fixes));
            match crate::plan::choose() {
                crate::plan::Choice::All => return repair(inv, target, journal, None),
                crate::plan::Choice::OneByOne => {}
                crate::plan::Choice::Quit => {
                    let mut r = plan;
                    r.quit_at_plan = true;
                    r.dry_run = None;
                    r.modified = false;
                    r.repair = None;
                    for f in &mut r.findings {
                        f.fixed = false;
                    }
                    r.notes.push("Nothing was changed.".into());
                    return r;
                }
            }
        }
    }
    // Questions come in the order of the check, one thread's order, as
    // e2fsck asks them: a person answering sets the pace, not the disk.
    let mut one = inv.clone();
    one.threads = (1, false);
    let mut console = crate::ask::Console::new();
    // The questions name directories by path, read from the device as it
    // is when they are asked (the first check's, before any write).
    if let Ok(dev) = open_device(target, IoMode::Pread) {
        if let Ok(o) = open_fs(Arc::new(dev), OpenOptions::default()) {
            console = console.naming_paths_in(o.fs);
        }
    }
    let console = Arc::new(console);
    let mut report = repair(&one, target, journal, Some(console.clone()));
    if console.cancelled() {
        report.cancelled = true;
    }
    report.declined = Some(console.declined());
    report
}

/// The name e2fsck shows for the device: `-N`, else the volume label,
/// else the path; blanks and colons become underscores.
pub fn display_name(inv: &Invocation, report: &Report) -> String {
    let name = inv
        .device_name
        .clone()
        .or_else(|| {
            (inv.personality == Personality::E2fsck && !report.label.is_empty())
                .then(|| report.label.clone())
        })
        .unwrap_or_else(|| inv.device.clone());
    name.chars()
        .map(|c| {
            if c.is_whitespace() || c == ':' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// Prints the outcome and returns the exit code.
fn finish(inv: &Invocation, report: &Report, stream: Option<&render::text::Stream>) -> i32 {
    let mut report = report.clone();
    if inv.personality == Personality::E2fsck || inv.device_name.is_some() {
        report.device = display_name(inv, &report);
    }
    if inv.debug {
        for d in &report.diagnostics {
            errln!("{}: {d}", inv.prog);
        }
    }
    if report.cancelled && report.skipped.is_none() && inv.format == crate::cli::Format::Text {
        match inv.personality {
            Personality::E2fsck => outln!("{}: e2fsck canceled.", report.device),
            Personality::Ext4chk => outln!("{}: canceled.", report.device),
        }
    }
    // Nothing was checked (not an ext2/3/4 image, an unsupported
    // feature, a refused device): one line, the device named once, and
    // no report of a check that never ran.
    let nothing_checked = report.aborted.is_some()
        && report.skipped.is_none()
        && report.summary.is_none()
        && report.findings.is_empty()
        && !report.modified;
    let one_line = |why: &str| {
        if why.starts_with(report.device.as_str()) {
            errln!("{}: {why}", inv.prog);
        } else {
            errln!("{}: {}: {why}", inv.prog, report.device);
        }
    };
    if let Some(s) = &report.skipped {
        print_skipped(inv, &report, s);
    } else if nothing_checked && inv.format == crate::cli::Format::Text {
        // (the line follows below)
    } else {
        if let Some(r) = report.forced.as_ref().filter(|r| r.is_said()) {
            outln!("{} {}, check forced.", report.device, r.describe());
        }
        match (stream, inv.format) {
            (Some(s), crate::cli::Format::Text) => render::text::print_after(inv, &report, Some(s)),
            _ => render::print(inv, &report),
        }
    }
    if let Some(why) = &report.aborted {
        one_line(why);
    } else if let Some(why) = &report.preen_halt {
        // e2fsck's words, which boot scripts and admins know, then what
        // stopped preen and what to run instead.
        let (ask, all) = match inv.personality {
            Personality::E2fsck => (
                format!("{} {}", inv.prog, inv.device),
                format!("{} -y {}", inv.prog, inv.device),
            ),
            Personality::Ext4chk => (
                format!("{} --interactive {}", inv.prog, inv.device),
                format!("{} --repair {}", inv.prog, inv.device),
            ),
        };
        errln!(
            "\n\n{dev}: UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY.\n\t(i.e., without -a or -p options)\n\
             {dev}: preen cannot fix: {why}; run \"{ask}\" to be asked about each problem, or \"{all}\" to fix them all",
            dev = report.device,
        );
    }
    report.exit_code()
}

/// e2fsck's lines for a file system it did not check.
fn print_skipped(inv: &Invocation, r: &Report, s: &Skipped) {
    if s.journal_only {
        return;
    }
    if inv.mode != Mode::Preen {
        for (what, was, now) in &s.counts_set {
            outln!("Setting free {what} count to {now} (was {was})");
        }
    }
    if s.interval_ignored && inv.format == crate::cli::Format::Text {
        outln!(
            "{}: ignoring check interval, broken_system_clock set",
            r.device
        );
    }
    match render::document(inv.format, r) {
        Some(doc) => out!("{doc}"),
        None => outln!(
            "{}: clean, {}/{} files, {}/{} blocks{}",
            r.device,
            s.inodes_used,
            s.inodes_count,
            s.blocks_used,
            s.blocks_count,
            s.note.as_deref().unwrap_or("")
        ),
    }
}
