//! The command line: e2fsck 1.47's options (getopt rules: `-fy`, `-C0`,
//! `-b32768`, repeats, `--`) plus ext4chk's long options, validated in
//! e2fsck's order so that every error exits with e2fsck's code.
//!
//! The clap definition below is the one source of the options: it parses,
//! and it also renders `--help`, the man page and the shell completions.

use std::path::PathBuf;

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, ValueEnum};

use crate::error::BadThreads;
use crate::extended::{self, Extended};
use check_core::report::exit;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Findings grouped by pass, then a summary line.
    Text,
    /// One JSON document.
    Json,
    /// JUnit XML, for CI systems.
    Junit,
}

/// I/O paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Io {
    /// io_uring when the kernel allows it, else pread.
    Auto,
    /// io_uring only.
    Uring,
    /// pread only.
    Pread,
}

/// Whether a check reads around the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DirectIo {
    /// O_DIRECT for a block device; the page cache for an image file.
    Auto,
    /// O_DIRECT whenever the file or device takes it.
    On,
    /// Always the page cache.
    Off,
}

/// Check and repair an ext2/ext3/ext4 file system, using every core.
///
/// Takes e2fsck's options and exit codes. Installed (or linked) as
/// fsck.ext4, fsck.ext3, fsck.ext2 or e2fsck, it also skips a file system
/// that is marked clean and not due for a check unless -f is given, as
/// e2fsck does at boot; as ext4chk it always checks fully.
#[derive(Parser, Debug)]
#[command(
    name = "ext4chk",
    version,
    about,
    long_about,
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    // One device is taken (the argument is a list only so that a second
    // one gets e2fsck's usage error).
    override_usage = "ext4chk [OPTIONS] DEVICE"
)]
pub struct Args {
    /// The file system: an image file or a block device. IMAGE?offset=BYTES
    /// checks the file system that starts BYTES into IMAGE.
    #[arg(value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Repair what is safe to repair without asking; anything else stops
    /// with exit 4 (-a is the same).
    #[arg(short = 'p', visible_short_alias = 'a', long = "preen", action = ArgAction::Count)]
    pub preen: u8,
    /// Check without changing anything; the device is opened read-only.
    #[arg(short = 'n', long = "read-only", action = ArgAction::Count)]
    pub read_only: u8,
    /// Repair every problem found.
    #[arg(short = 'y', long = "repair", action = ArgAction::Count)]
    pub repair: u8,
    /// Ask about each problem at the terminal before fixing it (what
    /// fsck.ext4 and e2fsck do when given none of -n, -p and -y). A
    /// summary of the whole repair comes first.
    #[arg(long = "interactive", action = ArgAction::Count)]
    pub interactive: u8,
    /// Check even if the file system is marked clean.
    #[arg(short = 'f', long = "force", action = ArgAction::Count)]
    pub force: u8,
    /// Scan the whole device for unreadable blocks and add them to the
    /// bad-block list; twice (-cc), a non-destructive read-write test.
    #[arg(short = 'c', long = "check-blocks", action = ArgAction::Count)]
    pub check_blocks: u8,
    /// Progress: 0 draws a bar on standard output; a descriptor N > 0 gets
    /// e2fsck's "PASS CURRENT MAX DEVICE" lines (a negative N starts
    /// silent until SIGUSR1).
    #[arg(short = 'C', value_name = "FD", allow_hyphen_values = true, action = ArgAction::Append)]
    pub progress: Vec<String>,
    /// Use the backup superblock at this block (and write it back to the
    /// primary after a repair).
    #[arg(short = 'b', long = "superblock", value_name = "BLOCK", allow_hyphen_values = true, action = ArgAction::Append)]
    pub superblock: Vec<String>,
    /// The block size to read the -b superblock with (else every size is
    /// tried).
    #[arg(short = 'B', long = "blocksize", value_name = "BYTES", allow_hyphen_values = true, action = ArgAction::Append)]
    pub blocksize: Vec<String>,
    /// Debugging output: how the run went (I/O path, threads, scheduling,
    /// phase times) on standard error.
    #[arg(short = 'd', long = "debug", action = ArgAction::Count)]
    pub debug: u8,
    /// Optimize every directory: rebuild its hash index and compress it.
    #[arg(short = 'D', long = "optimize-dirs", action = ArgAction::Count)]
    pub optimize_dirs: u8,
    /// Extended options, separated by commas (see the EXTENDED OPTIONS
    /// section of the man page); only the last -E counts, as in e2fsck.
    #[arg(short = 'E', value_name = "OPTIONS", allow_hyphen_values = true, action = ArgAction::Append)]
    pub extended: Vec<String>,
    /// Flush the device's buffers before checking.
    #[arg(short = 'F', long = "flush", action = ArgAction::Count)]
    pub flush: u8,
    /// The external journal device (for a file system whose journal is
    /// not inside it).
    #[arg(short = 'j', long = "external-journal", value_name = "DEVICE", action = ArgAction::Append)]
    pub journal: Vec<String>,
    /// With -c: keep the blocks already on the bad-block list.
    #[arg(short = 'k', long = "keep-badblocks", action = ArgAction::Count)]
    pub keep_badblocks: u8,
    /// Add the blocks listed in FILE (one number per line) to the
    /// bad-block list.
    #[arg(short = 'l', long = "add-badblocks", value_name = "FILE", action = ArgAction::Append)]
    pub add_badblocks: Vec<String>,
    /// Replace the bad-block list with the blocks listed in FILE.
    #[arg(short = 'L', long = "set-badblocks", value_name = "FILE", action = ArgAction::Append)]
    pub set_badblocks: Vec<String>,
    /// Accepted for compatibility with e2fsck (its old "interactive"
    /// flag); does nothing.
    #[arg(short = 'r', action = ArgAction::Count)]
    pub r: u8,
    /// Byte-swap the file system (removed from e2fsck): refused, exit 16.
    #[arg(short = 's', action = ArgAction::Count)]
    pub swap: u8,
    /// Byte-swap the whole file system (removed from e2fsck): refused, exit 16.
    #[arg(short = 'S', action = ArgAction::Count)]
    pub swap_all: u8,
    /// e2fsck's memory-tracing option (absent from its normal builds): refused.
    #[arg(short = 'M', action = ArgAction::Append, hide = true)]
    pub mtrace: Vec<String>,
    /// e2fsck's inode-table buffer size, in blocks: accepted (it must be
    /// a number), not needed.
    #[arg(short = 'I', value_name = "BLOCKS", action = ArgAction::Append, allow_hyphen_values = true)]
    pub inode_buffer_blocks: Vec<String>,
    /// e2fsck's process_inode_size: accepted (it must be a number), not
    /// needed.
    #[arg(short = 'P', value_name = "SIZE", action = ArgAction::Append, allow_hyphen_values = true)]
    pub process_inode_size: Vec<String>,
    /// The name to show for the device in messages and progress lines.
    #[arg(short = 'N', action = ArgAction::Append, hide = true)]
    pub device_name: Vec<String>,
    /// Print timing and memory statistics; twice (-tt), for each phase too.
    #[arg(short = 't', long = "timing", action = ArgAction::Count)]
    pub timing: u8,
    /// Print detailed statistics at the end.
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,
    /// Print the version and exit.
    #[arg(short = 'V', long = "version", action = ArgAction::Count)]
    pub version: u8,
    /// With a repair: save everything overwritten in FILE, in e2fsprogs'
    /// undo format (`e2undo FILE DEVICE` puts it back).
    #[arg(short = 'z', long = "undo", value_name = "FILE", action = ArgAction::Append)]
    pub undo: Vec<String>,
    /// Worker threads: a number, or "auto" for every core, giving CPUs back
    /// while other programs need them.
    #[arg(long, value_name = "N|auto", default_value = "auto", value_parser = ThreadsValue, hide_possible_values = true)]
    pub threads: String,
    /// Report format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// I/O path.
    #[arg(long = "io", value_enum, default_value = "auto")]
    pub io: Io,
    /// Read-only checks: read with O_DIRECT, around the page cache (the
    /// check reads ahead into memory of its own instead). A repair always
    /// reads through the page cache.
    #[arg(long = "direct-io", value_enum, default_value = "auto")]
    pub direct_io: DirectIo,
    /// Run the workers at idle priority (SCHED_IDLE), so that anything
    /// else on the machine comes first.
    #[arg(long, action = ArgAction::Count)]
    pub nice: u8,
    /// Check partition N of a whole-disk image or disk (GPT or MBR;
    /// numbered from 1).
    #[arg(long, value_name = "N")]
    pub partition: Option<String>,
    /// With --repair (-y) or --preen (-p): run the repair without writing
    /// anything, and report what it would do. The device is opened
    /// read-only; every write is kept in memory, where each of the
    /// repair's checks reads it.
    #[arg(long = "dry-run", action = ArgAction::Count)]
    pub dry_run: u8,
    /// Check a mounted ext2/3/4 file system while it stays in use: DEVICE
    /// is its mount point or its device. Read-only; what the live check
    /// finds is confirmed in the file system's frozen state before it is
    /// reported. Exit codes are e2scrub's: 0 clean, 6 damage, 8 could not
    /// check.
    #[arg(long = "online", action = ArgAction::Count)]
    pub online: u8,
    /// With --online: the longest a freeze may last, in milliseconds.
    #[arg(long = "max-freeze", value_name = "MS", default_value = "200")]
    pub max_freeze: String,
    /// Watch mounted ext2/3/4 file systems for the errors the kernel
    /// reports (fanotify FAN_FS_ERROR) and check each one online when it
    /// reports one. The arguments are mount points; with none, every
    /// mounted ext2/3/4 file system, following mounts and unmounts. Runs
    /// until SIGINT or SIGTERM, writing one JSON object per line. Never
    /// repairs.
    #[arg(long = "watch", action = ArgAction::Count)]
    pub watch: u8,
    /// With --online: a clean outcome leaves the mount count and the last
    /// check time as they are (what --watch runs after a kernel error).
    #[arg(long = "keep-fsck-times", action = ArgAction::Count, hide = true)]
    pub keep_fsck_times: u8,
    /// With --watch: append the JSON lines to FILE instead of standard
    /// output.
    #[arg(long = "log", value_name = "FILE")]
    pub log: Vec<String>,
    /// With --watch: run COMMAND (with sh -c) when an online check
    /// confirms damage, the check's JSON report on its standard input.
    #[arg(long = "on-error", value_name = "COMMAND")]
    pub on_error: Vec<String>,
    /// With --watch: the least time between two online checks of one
    /// file system started by the kernel's reports (90s, 10m, 2h, 1d).
    #[arg(long = "min-interval", value_name = "DURATION", default_value = "10m")]
    pub min_interval: String,
    /// With --watch: also check each watched file system online on this
    /// schedule (10m, 6h, 1d), at idle I/O priority.
    #[arg(long = "every", value_name = "DURATION")]
    pub every: Vec<String>,
    /// Print help.
    #[arg(long = "help", action = ArgAction::Help)]
    pub help: Option<bool>,
}

/// The values of `--threads` as the shell completes them: "auto" (a number
/// is accepted too, and checked after parsing).
#[derive(Clone, Copy, Debug)]
struct ThreadsValue;

impl clap::builder::TypedValueParser for ThreadsValue {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(std::iter::once(
            clap::builder::PossibleValue::new("auto"),
        )))
    }
}

/// Which program ext4chk is standing in for, chosen by the name it was
/// invoked under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Personality {
    /// `ext4chk`: always a full check.
    Ext4chk,
    /// `fsck.ext[234]` or `e2fsck`: e2fsck's behaviour, including skipping
    /// a clean file system that is not due for a check.
    E2fsck,
}

impl Personality {
    /// The personality for a program name (argv[0]).
    pub fn from_argv0(argv0: &str) -> Personality {
        let base = argv0.rsplit('/').next().unwrap_or(argv0);
        match base {
            "e2fsck" | "fsck.ext2" | "fsck.ext3" | "fsck.ext4" | "fsck.ext4dev" => {
                Personality::E2fsck
            }
            _ => Personality::Ext4chk,
        }
    }
}

/// What to do with the file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Check only (-n, and ext4chk's default).
    Check,
    /// Preen (-p, -a).
    Preen,
    /// Repair everything (-y).
    Repair,
    /// Ask at the terminal (no -n, -p or -y; `--interactive`).
    Interactive,
}

/// The bad-block list changes asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BadBlocks {
    /// `-c` count: 1 read-only scan, 2 read-write test.
    pub scan: u8,
    /// `-k`: keep the current list when scanning.
    pub keep: bool,
    /// `-l`/`-L`: a file of block numbers, and whether it replaces the
    /// list (`-L`).
    pub file: Option<(PathBuf, bool)>,
}

impl BadBlocks {
    /// Whether anything is to change.
    pub fn any(&self) -> bool {
        self.scan > 0 || self.file.is_some()
    }
}

/// Progress reporting asked for with `-C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressTo {
    /// `-C 0`: e2fsck's text bar on standard output.
    Bar,
    /// `-C N`: lines on descriptor N; `enabled` is false for `-C -N`
    /// until SIGUSR1.
    Fd {
        /// The descriptor.
        fd: i32,
        /// Whether lines are written from the start.
        enabled: bool,
    },
}

/// A validated command line.
#[derive(Clone, Debug)]
pub struct Invocation {
    /// The program name, for messages.
    pub prog: String,
    /// Which program ext4chk stands in for.
    pub personality: Personality,
    /// The device as given (possibly with `?offset=`).
    pub device: String,
    /// What to do.
    pub mode: Mode,
    /// `-f`.
    pub force: bool,
    /// `-c`, `-k`, `-l`, `-L`.
    pub bad_blocks: BadBlocks,
    /// `-C`.
    pub progress: Option<ProgressTo>,
    /// `-b`: the superblock to use (0 is the primary).
    pub superblock: Option<u64>,
    /// `-B`: its block size.
    pub blocksize: Option<u32>,
    /// `-d`.
    pub debug: bool,
    /// `-D`.
    pub optimize_dirs: bool,
    /// `-E`.
    pub ext: Extended,
    /// `-F`.
    pub flush: bool,
    /// `-j`.
    pub journal: Option<PathBuf>,
    /// `-t` count.
    pub timing: u8,
    /// `-v`.
    pub verbose: bool,
    /// `-z` / `--undo`.
    pub undo: Option<PathBuf>,
    /// `-N`.
    pub device_name: Option<String>,
    /// `--threads`: the count and whether it is automatic.
    pub threads: (usize, bool),
    /// `--format`.
    pub format: Format,
    /// `--io`.
    pub io: Io,
    /// `--direct-io`.
    pub direct_io: DirectIo,
    /// `--nice`.
    pub nice: bool,
    /// `--partition`.
    pub partition: Option<u32>,
    /// `--dry-run`: repair in memory only.
    pub dry_run: bool,
    /// `--online`: the longest freeze, in milliseconds.
    pub online: Option<u64>,
    /// `--watch`: what to watch and how.
    pub watch: Option<Watch>,
    /// `--keep-fsck-times`: an online check records no clean outcome.
    pub keep_fsck_times: bool,
}

/// `--watch` and the options that go with it.
#[derive(Clone, Debug)]
pub struct Watch {
    /// The mount points given; none means every ext2/3/4 mount.
    pub mounts: Vec<String>,
    /// `--log`.
    pub log: Option<PathBuf>,
    /// `--on-error`.
    pub on_error: Option<String>,
    /// `--min-interval`.
    pub min_interval: std::time::Duration,
    /// `--every`.
    pub every: Option<std::time::Duration>,
    /// `--max-freeze`, in milliseconds.
    pub max_freeze_ms: u64,
}

/// The end of a run decided by the command line alone: what to print and
/// the exit code.
#[derive(Debug, PartialEq, Eq)]
pub struct Early {
    /// e2fsck's exit code.
    pub code: i32,
    /// Printed on standard error.
    pub stderr: String,
    /// Printed on standard output.
    pub stdout: String,
}

impl Early {
    fn err(code: i32, line: String) -> Early {
        Early {
            code,
            stderr: format!("{line}\n"),
            stdout: String::new(),
        }
    }
}

/// The version line.
pub fn version_line() -> String {
    format!("ext4chk {}", env!("CARGO_PKG_VERSION"))
}

/// What the command line asks for, in argument order, for the checks
/// e2fsck makes while it reads its options.
enum Event<'a> {
    Mode(char),
    Numeric(char, &'a str),
    Removed(char),
}

/// Parses and validates `argv` (including argv[0]), in e2fsck's order:
/// the options as read, -V, the device, the options that need a writable
/// device, the extended options, then ext4chk's own.
pub fn parse(argv: &[String]) -> Result<Invocation, Early> {
    let argv0 = argv.first().map_or("ext4chk", String::as_str);
    let personality = Personality::from_argv0(argv0);
    let prog = argv0.rsplit('/').next().unwrap_or(argv0).to_string();
    let matches = match Args::command().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => return Err(clap_error(&prog, &e)),
    };
    let args = match Args::from_arg_matches(&matches) {
        Ok(a) => a,
        Err(e) => return Err(clap_error(&prog, &e)),
    };
    let InOrder {
        mode,
        progress,
        superblock,
    } = read_in_order(&prog, &option_events(&matches, &args))?;
    if let Some(early) = version_request(&args, personality) {
        return Err(early);
    }
    let watch = watch_fits(&prog, &args, mode)?;
    if watch.is_none() {
        one_device(&prog, &args)?;
    }
    let device = args.devices.first().cloned().unwrap_or_default();
    let read_only = mode == Some(Mode::Check) || watch.is_some();
    let bad_file = args
        .set_badblocks
        .last()
        .or(args.add_badblocks.last())
        .map(|f| (PathBuf::from(f), !args.set_badblocks.is_empty()));
    writable_options(&prog, &args, read_only, bad_file.is_some())?;
    let ext = extended_options(&prog, &args, read_only, bad_file.is_some())?;
    let (threads, partition) = own_options(&prog, &args)?;
    let mode = match watch {
        Some(_) => Mode::Check,
        None => chosen_mode(&prog, mode, personality, &device)?,
    };
    dry_run_fits(&prog, &args, mode)?;
    let online = online_fits(&prog, &args, mode)?;
    Ok(Invocation {
        prog,
        personality,
        device: device.clone(),
        mode,
        force: args.force > 0,
        bad_blocks: BadBlocks {
            scan: args.check_blocks.min(2),
            keep: args.keep_badblocks > 0,
            file: bad_file,
        },
        progress,
        superblock: superblock.filter(|&b| b != 0),
        blocksize: args
            .blocksize
            .last()
            .map(|s| scan_int(s).unwrap_or(0) as u32),
        debug: args.debug > 0,
        optimize_dirs: args.optimize_dirs > 0,
        ext,
        flush: args.flush > 0,
        journal: args.journal.last().map(PathBuf::from),
        timing: args.timing,
        verbose: args.verbose > 0,
        undo: args.undo.last().and_then(|u| undo_path(u, &device)),
        device_name: args.device_name.last().cloned(),
        threads,
        format: args.format,
        io: args.io,
        direct_io: args.direct_io,
        nice: args.nice > 0,
        partition,
        dry_run: args.dry_run > 0,
        online,
        watch,
        keep_fsck_times: args.keep_fsck_times > 0,
    })
}

/// A duration as `--min-interval` and `--every` take it: a number with
/// an optional unit (s, m, h, d; seconds without one).
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let scale = match unit {
        "" | "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(n.checked_mul(scale)?))
}

/// `--watch` never repairs: with -y, -p, --interactive or --dry-run it
/// is refused, as are its own options without it.
fn watch_fits(prog: &str, args: &Args, mode: Option<Mode>) -> Result<Option<Watch>, Early> {
    let usage = |why: String| Err(Early::err(exit::USAGE, format!("{prog}: {why}")));
    if args.watch == 0 {
        for (given, name) in [
            (!args.log.is_empty(), "--log"),
            (!args.on_error.is_empty(), "--on-error"),
            (!args.every.is_empty(), "--every"),
        ] {
            if given {
                return usage(format!("{name} goes with --watch"));
            }
        }
        return Ok(None);
    }
    if mode.is_some_and(|m| m != Mode::Check) || args.dry_run > 0 {
        return usage(
            "--watch never repairs a mounted file system: it cannot be given with -y, -p, --interactive or --dry-run"
                .into(),
        );
    }
    let Some(min_interval) = parse_duration(&args.min_interval) else {
        return usage(format!(
            "--min-interval wants a duration such as 90s, 10m or 2h, not '{}'",
            args.min_interval
        ));
    };
    let every = match args.every.last() {
        None => None,
        Some(e) => match parse_duration(e) {
            Some(d) if !d.is_zero() => Some(d),
            _ => {
                return usage(format!(
                    "--every wants a duration above 0 such as 10m, 6h or 1d, not '{e}'"
                ))
            }
        },
    };
    let max_freeze_ms = match args.max_freeze.parse::<u64>() {
        Ok(ms) if ms > 0 => ms,
        _ => {
            return usage(format!(
                "--max-freeze wants a number of milliseconds above 0, not '{}'",
                args.max_freeze
            ))
        }
    };
    Ok(Some(Watch {
        mounts: args.devices.clone(),
        log: args.log.last().map(PathBuf::from),
        on_error: args.on_error.last().cloned(),
        min_interval,
        every,
        max_freeze_ms,
    }))
}

/// `--online` checks only: with a repair, or as fsck.ext4, it is refused.
fn online_fits(prog: &str, args: &Args, mode: Mode) -> Result<Option<u64>, Early> {
    if args.online == 0 {
        return Ok(None);
    }
    if mode != Mode::Check {
        return Err(Early::err(
            exit::USAGE,
            format!(
                "{prog}: --online only checks: it cannot be given with -y, -p or --interactive"
            ),
        ));
    }
    match args.max_freeze.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Some(ms)),
        _ => Err(Early::err(
            exit::USAGE,
            format!(
                "{prog}: --max-freeze wants a number of milliseconds above 0, not '{}'",
                args.max_freeze
            ),
        )),
    }
}

/// Step 1: What e2fsck checks as it reads each option, in argument order.
fn option_events<'a>(matches: &clap::ArgMatches, args: &'a Args) -> Vec<(usize, Event<'a>)> {
    let mut events: Vec<(usize, Event<'_>)> = Vec::new();
    // Indices of what the command line gave (a count's default has one too).
    let given = |id: &str| {
        (matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
            .then(|| matches.indices_of(id))
            .flatten()
    };
    for (id, c) in [
        ("preen", 'p'),
        ("read_only", 'n'),
        ("repair", 'y'),
        ("interactive", 'i'),
    ] {
        if let Some(ix) = given(id) {
            events.extend(ix.map(|i| (i, Event::Mode(c))));
        }
    }
    for (id, c, vals) in [
        ("progress", 'C', &args.progress),
        ("superblock", 'b', &args.superblock),
        ("inode_buffer_blocks", 'I', &args.inode_buffer_blocks),
        ("process_inode_size", 'P', &args.process_inode_size),
    ] {
        if let Some(ix) = given(id) {
            events.extend(ix.zip(vals.iter()).map(|(i, v)| (i, Event::Numeric(c, v))));
        }
    }
    for (id, c) in [("swap", 's'), ("swap_all", 'S'), ("mtrace", 'M')] {
        if let Some(ix) = given(id) {
            events.extend(ix.map(|i| (i, Event::Removed(c))));
        }
    }
    events.sort_by_key(|e| e.0);
    events
}

/// What the options read in order give.
struct InOrder {
    mode: Option<Mode>,
    progress: Option<ProgressTo>,
    superblock: Option<u64>,
}

/// The mode, progress descriptor and superblock the options give, read
/// in order so that the first conflict is the one reported.
fn read_in_order(prog: &str, events: &[(usize, Event<'_>)]) -> Result<InOrder, Early> {
    let mut mode: Option<Mode> = None;
    let mut progress: Option<ProgressTo> = None;
    let mut superblock: Option<u64> = None;
    for (_, ev) in events {
        match *ev {
            Event::Mode(c) => {
                let m = match c {
                    'p' => Mode::Preen,
                    'n' => Mode::Check,
                    'i' => Mode::Interactive,
                    _ => Mode::Repair,
                };
                if mode.is_some_and(|old| old != m) {
                    return Err(Early::err(
                        exit::OPERATIONAL,
                        format!("{prog}: only one of the options -p/-a, -n, -y or --interactive may be given"),
                    ));
                }
                mode = Some(m);
            }
            Event::Numeric(c, v) => {
                let Some(n) = scan_int(v) else {
                    // e2fsck exits 1 here, not with its usage code.
                    return Err(Early::err(
                        exit::CORRECTED,
                        format!("{prog}: invalid non-numeric argument to -{c} (\"{v}\")"),
                    ));
                };
                match c {
                    'C' => progress = Some(progress_to(prog, n)?),
                    // %llu: a minus sign wraps, as in e2fsck.
                    'b' => superblock = Some(n as u64),
                    _ => {}
                }
            }
            Event::Removed(c) => {
                return Err(Early::err(
                    exit::USAGE,
                    format!(
                        "{prog}: -{c} is not supported (e2fsck removed byte swapping); see {prog} --help"
                    ),
                ));
            }
        }
    }
    Ok(InOrder {
        mode,
        progress,
        superblock,
    })
}

/// Step 2: -V wins over everything but the conflicts above.
fn version_request(args: &Args, personality: Personality) -> Option<Early> {
    if args.version > 0 {
        return Some(Early {
            code: exit::OK,
            stdout: match personality {
                Personality::Ext4chk => format!("{}\n", version_line()),
                Personality::E2fsck => String::new(),
            },
            stderr: match personality {
                Personality::Ext4chk => String::new(),
                Personality::E2fsck => format!("{} (e2fsck 1.47 compatible)\n", version_line()),
            },
        });
    }
    None
}

/// Step 3: Exactly one device.
fn one_device(prog: &str, args: &Args) -> Result<(), Early> {
    if args.devices.len() != 1 {
        return Err(Early::err(
            exit::USAGE,
            format!(
                "{prog}: {} (usage: {prog} [OPTIONS] DEVICE; see {prog} --help)",
                if args.devices.is_empty() {
                    "no device given".to_string()
                } else {
                    format!("one device expected, {} given", args.devices.len())
                }
            ),
        ));
    }
    Ok(())
}

/// Step 4: Options that need a writable device.
fn writable_options(prog: &str, args: &Args, read_only: bool, bad_file: bool) -> Result<(), Early> {
    for (given, what) in [
        (args.optimize_dirs > 0, "-D"),
        (args.check_blocks > 0, "-c"),
        (bad_file, "-l/-L"),
    ] {
        if read_only && given {
            return Err(Early::err(
                exit::OPERATIONAL,
                format!("{prog}: the -n and {what} options are incompatible"),
            ));
        }
    }
    Ok(())
}

/// Step 5: Extended options (only the last -E, as e2fsck), and the options
/// that cannot go with them.
fn extended_options(
    prog: &str,
    args: &Args,
    read_only: bool,
    bad_file: bool,
) -> Result<Extended, Early> {
    let mut ext = match args.extended.last() {
        Some(list) => extended::parse(list).map_err(|why| {
            Early::err(
                exit::CORRECTED,
                format!("{prog}: {why} (valid: {})", extended::VALID.join(", ")),
            )
        })?,
        None => Extended::default(),
    };
    if read_only {
        ext.discard = false;
    }
    // e2scrub's way of asking for -E fixes_only.
    if std::env::var_os("E2FSCK_FIXES_ONLY").is_some() {
        ext.fixes_only = true;
    }
    if args.optimize_dirs > 0 && ext.fixes_only {
        return Err(Early::err(
            exit::OPERATIONAL,
            format!("{prog}: the -D and -E fixes_only options are incompatible"),
        ));
    }
    if ext.bmap2extent && ext.fixes_only {
        return Err(Early::err(
            exit::OPERATIONAL,
            format!("{prog}: the -E bmap2extent and fixes_only options are incompatible"),
        ));
    }
    if args.check_blocks > 0 && bad_file {
        return Err(Early::err(
            exit::USAGE,
            format!("{prog}: the -c and the -l/-L options may not be used together"),
        ));
    }
    Ok(ext)
}

/// ext4chk's own options: the thread count and the partition.
fn own_options(prog: &str, args: &Args) -> Result<((usize, bool), Option<u32>), Early> {
    let threads = parse_threads(&args.threads).map_err(|why| {
        Early::err(
            exit::USAGE,
            format!("{prog}: invalid --threads value: {why}"),
        )
    })?;
    let partition = match &args.partition {
        None => None,
        Some(s) => match s.parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(Early::err(
                    exit::USAGE,
                    format!(
                    "{prog}: invalid --partition value '{s}': expected a partition number from 1"
                ),
                ))
            }
        },
    };
    Ok((threads, partition))
}

/// The mode: as given, or what the name the program runs under implies.
fn chosen_mode(
    prog: &str,
    mode: Option<Mode>,
    personality: Personality,
    device: &str,
) -> Result<Mode, Early> {
    let mode = match (mode, personality) {
        (Some(m), _) => m,
        (None, Personality::Ext4chk) => Mode::Check,
        // As e2fsck: with none of -n, -p and -y it asks.
        (None, Personality::E2fsck) => Mode::Interactive,
    };
    if mode == Mode::Interactive && !crate::ask::can_ask() {
        // As e2fsck, a mounted file system is named first: it is the
        // reason nothing can be done, whatever the options.
        let path = device.split_once('?').map_or(device, |(p, _)| p);
        if fixer::safety::mounted(std::path::Path::new(path)).is_ok_and(|m| !m.is_empty()) {
            return Err(Early {
                code: exit::OPERATIONAL,
                stdout: format!("{device} is mounted.\n"),
                stderr: format!("{prog}: cannot continue, aborting.\n"),
            });
        }
        // As e2fsck, before the file system is opened, clean or not.
        return Err(Early::err(
            exit::OPERATIONAL,
            format!(
                "{prog}: an interactive repair needs a terminal; give -n (check only), -p (safe repairs) or -y (repair everything)"
            ),
        ));
    }
    Ok(mode)
}

/// --dry-run goes with a repair that writes nothing but the device.
fn dry_run_fits(prog: &str, args: &Args, mode: Mode) -> Result<(), Early> {
    if args.dry_run > 0 {
        let why = if mode != Mode::Preen && mode != Mode::Repair {
            Some("--dry-run shows what a repair would do: give it with --repair (-y) or --preen (-p)")
        } else if !args.undo.is_empty() {
            Some("--dry-run writes nothing, so it keeps no undo file (-z)")
        } else if args.check_blocks > 1 {
            Some("--dry-run cannot run the read-write bad-block test (-cc)")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Early::err(exit::USAGE, format!("{prog}: {why}")));
        }
    }
    Ok(())
}

/// One line for a clap error, with e2fsck's usage exit code (help is 0).
fn clap_error(prog: &str, e: &clap::Error) -> Early {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if matches!(e.kind(), ErrorKind::DisplayHelp) {
        return Early {
            code: exit::OK,
            stdout: e.to_string(),
            stderr: String::new(),
        };
    }
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    let value = match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    let line = match e.kind() {
        ErrorKind::UnknownArgument => format!("invalid option '{arg}'"),
        ErrorKind::NoEquals | ErrorKind::InvalidValue if value.is_empty() => {
            format!("option '{arg}' requires an argument")
        }
        ErrorKind::InvalidValue => {
            let valid = match e.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(v)) => format!(" (one of: {})", v.join(", ")),
                _ => String::new(),
            };
            format!("invalid value '{value}' for '{arg}'{valid}")
        }
        _ => e
            .to_string()
            .lines()
            .next()
            .unwrap_or("invalid command line")
            .trim_start_matches("error: ")
            .to_string(),
    };
    Early::err(exit::USAGE, format!("{prog}: {line}; see {prog} --help"))
}

/// C's `sscanf("%d")`/`("%llu")` on an option value: leading blanks, a
/// sign, then digits; anything after them is ignored. `None` when no
/// digit comes first.
pub fn scan_int(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    let v: i64 = digits[..end].parse().unwrap_or(i64::MAX);
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `-C N`: 0 is the bar; otherwise the descriptor must be open.
fn progress_to(prog: &str, n: i64) -> Result<ProgressTo, Early> {
    if n == 0 {
        return Ok(ProgressTo::Bar);
    }
    let fd = i32::try_from(n.unsigned_abs()).unwrap_or(i32::MAX);
    if nix::fcntl::fcntl(unsafe_borrow_fd(fd), nix::fcntl::FcntlArg::F_GETFD).is_err() {
        return Err(Early::err(
            exit::OPERATIONAL,
            format!("{prog}: invalid progress file descriptor {fd}: it is not open"),
        ));
    }
    Ok(ProgressTo::Fd { fd, enabled: n > 0 })
}

/// A borrowed descriptor number for a query that cannot harm it.
fn unsafe_borrow_fd(fd: i32) -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: F_GETFD only asks the kernel whether the number is open;
    // an unopened number gives EBADF, and nothing is read or closed.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
}

/// `--threads`.
fn parse_threads(s: &str) -> Result<(usize, bool), BadThreads> {
    if s == "auto" {
        return Ok((
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            true,
        ));
    }
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok((n, false)),
        _ => Err(BadThreads(s.to_string())),
    }
}

/// `-z FILE`; an empty name asks for e2fsprogs' default place
/// (`$E2FSPROGS_UNDO_DIR`, else /var/lib/e2fsprogs) and name; "none"
/// there means no undo file.
pub(crate) fn undo_path(given: &str, device: &str) -> Option<PathBuf> {
    if !given.is_empty() {
        return Some(PathBuf::from(given));
    }
    // The environment, then e2fsck.conf's [defaults] undo_dir.
    let dir = std::env::var("E2FSPROGS_UNDO_DIR")
        .ok()
        .or_else(|| crate::conf::get().undo_dir.clone())
        .unwrap_or_else(|| "/var/lib/e2fsprogs".into());
    if dir.is_empty() || dir == "none" {
        return None;
    }
    let base = device
        .split('?')
        .next()
        .unwrap_or(device)
        .rsplit('/')
        .next()
        .unwrap_or(device);
    Some(PathBuf::from(dir).join(format!("e2fsck-{base}.e2undo")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Invocation, Early> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&v)
    }

    fn code(args: &[&str]) -> i32 {
        match p(args) {
            Ok(_) => -1,
            Err(e) => e.code,
        }
    }

    #[test]
    fn combined_and_repeated_flags() {
        let i = p(&["ext4chk", "-fy", "img"]).unwrap();
        assert_eq!(i.mode, Mode::Repair);
        assert!(i.force);
        let i = p(&["ext4chk", "--repair", "-y", "-y", "img"]).unwrap();
        assert_eq!(i.mode, Mode::Repair);
        let i = p(&["fsck.ext4", "-a", "-C0", "img"]).unwrap();
        assert_eq!(i.mode, Mode::Preen);
        assert_eq!(i.progress, Some(ProgressTo::Bar));
        assert_eq!(i.personality, Personality::E2fsck);
        let i = p(&["ext4chk", "-pf", "-b32768", "-B", "4096", "img"]).unwrap();
        assert_eq!(i.superblock, Some(32768));
        assert_eq!(i.blocksize, Some(4096));
        let i = p(&["ext4chk", "img", "-n"]).unwrap();
        assert_eq!(i.mode, Mode::Check);
        let i = p(&["ext4chk", "-n", "--", "-img"]).unwrap();
        assert_eq!(i.device, "-img");
        let i = p(&["ext4chk", "-cc", "-tt", "-y", "img"]).unwrap();
        assert_eq!(i.bad_blocks.scan, 2);
        assert_eq!(i.timing, 2);
    }

    #[test]
    fn exit_codes_follow_e2fsck() {
        // Mode conflicts: 8, checked as the options are read.
        assert_eq!(code(&["e2fsck", "-n", "-y", "img"]), 8);
        assert_eq!(code(&["e2fsck", "-fy", "-n", "img"]), 8);
        assert_eq!(code(&["e2fsck", "-a", "--repair", "img"]), 8);
        // Non-numeric values: 1; the first problem in argument order wins.
        assert_eq!(code(&["e2fsck", "-n", "-C", "abc", "img"]), 1);
        assert_eq!(code(&["e2fsck", "-C", "abc", "-n", "-y", "img"]), 1);
        assert_eq!(code(&["e2fsck", "-n", "-y", "-C", "abc", "img"]), 8);
        assert_eq!(code(&["e2fsck", "-n", "-b", "x", "img"]), 1);
        // A descriptor that is not open: 8.
        assert_eq!(code(&["e2fsck", "-n", "-C", "987", "img"]), 8);
        // Removed and unknown options, missing values, device count: 16.
        assert_eq!(code(&["e2fsck", "-n", "-s", "img"]), 16);
        assert_eq!(code(&["e2fsck", "-n", "-Q", "img"]), 16);
        assert_eq!(code(&["e2fsck", "-n", "-C"]), 16);
        assert_eq!(code(&["e2fsck", "-n"]), 16);
        assert_eq!(code(&["e2fsck", "-n", "a", "b"]), 16);
        // -V: 0, even with a bad device count.
        assert_eq!(code(&["e2fsck", "-V"]), 0);
        // Options that need writing, with -n: 8.
        assert_eq!(code(&["e2fsck", "-nD", "img"]), 8);
        assert_eq!(code(&["e2fsck", "-nc", "img"]), 8);
        assert_eq!(code(&["e2fsck", "-n", "-l", "f", "img"]), 8);
        // -c with -l: 16.
        assert_eq!(code(&["e2fsck", "-y", "-c", "-l", "f", "img"]), 16);
        // Extended options: unknown ones exit 1; only the last -E counts.
        assert_eq!(code(&["e2fsck", "-n", "-E", "foo", "img"]), 1);
        assert!(p(&["e2fsck", "-n", "-E", "foo", "-E", "fragcheck", "img"]).is_ok());
        assert_eq!(code(&["e2fsck", "-y", "-D", "-E", "fixes_only", "img"]), 8);
        // No mode as e2fsck: 8 (it would need a terminal).
        assert_eq!(code(&["fsck.ext4", "img"]), 8);
        assert!(p(&["ext4chk", "img"]).is_ok());
    }

    #[test]
    fn scanf_numbers() {
        assert_eq!(scan_int("12x"), Some(12));
        assert_eq!(scan_int(" 7"), Some(7));
        assert_eq!(scan_int("-3"), Some(-3));
        assert_eq!(scan_int("x1"), None);
        assert_eq!(scan_int(""), None);
    }

    #[test]
    fn personalities() {
        assert_eq!(
            Personality::from_argv0("/sbin/fsck.ext4"),
            Personality::E2fsck
        );
        assert_eq!(Personality::from_argv0("e2fsck"), Personality::E2fsck);
        assert_eq!(
            Personality::from_argv0("/usr/bin/ext4chk"),
            Personality::Ext4chk
        );
    }
}
