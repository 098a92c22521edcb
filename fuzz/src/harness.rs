//! The whole checker on one image held in memory: the read-only check,
//! then the repair of a copy, then a check of the repaired copy.
//!
//! What must hold, whatever the image:
//! * nothing panics, and the repair's rounds are bounded;
//! * the read-only check does not change a byte;
//! * after a repair that did not stop and left no error, the next check
//!   finds the file system clean.

use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::sync::Arc;

use check_core::{check, CheckOptions, Report};
use pipeline::{open_device, IoMode, OpenError, Target};
use repair::{repair, Mode, RepairOptions};

/// Which property failed, or what kept the run from testing it.
#[derive(Debug)]
pub enum Failure {
    /// The in-memory image could not be made or read back.
    Memory(&'static str, std::io::Error),
    /// The image could not be opened as a device.
    Open(OpenError),
    /// The read-only check wrote to the image.
    CheckChangedImage,
    /// The repair went past its round limit.
    TooManyRounds(usize),
    /// The repair finished, and the check after it still finds problems.
    NotClean {
        /// Rounds the repair ran.
        rounds: usize,
        /// The first problems found.
        found: Vec<String>,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Memory(what, e) => write!(f, "{what}: {e}"),
            Failure::Open(e) => write!(f, "open: {e}"),
            Failure::CheckChangedImage => f.write_str("the read-only check changed the image"),
            Failure::TooManyRounds(n) => write!(f, "the repair ran {n} rounds"),
            Failure::NotClean { rounds, found } => write!(
                f,
                "the repair finished ({rounds} rounds) but the check after it finds: {}",
                found.join("; ")
            ),
        }
    }
}

impl std::error::Error for Failure {}

/// An anonymous in-memory file holding `bytes`, and a path that opens it.
struct MemFile {
    file: File,
    path: PathBuf,
}

impl MemFile {
    fn new(bytes: &[u8]) -> Result<MemFile, Failure> {
        // SAFETY: the name is a NUL-terminated literal; the call has no
        // other preconditions.
        let fd = unsafe { libc::memfd_create(c"ext4chk-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(Failure::Memory(
                "memfd_create",
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let mut file = unsafe { File::from_raw_fd(fd) };
        file.write_all(bytes)
            .map_err(|e| Failure::Memory("writing the image", e))?;
        Ok(MemFile {
            file,
            path: PathBuf::from(format!("/proc/self/fd/{fd}")),
        })
    }

    fn contents(&self) -> Result<Vec<u8>, Failure> {
        use std::os::unix::fs::FileExt;
        let len = self
            .file
            .metadata()
            .map_err(|e| Failure::Memory("stat", e))?
            .len();
        let mut v = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut v, 0)
            .map_err(|e| Failure::Memory("reading back", e))?;
        Ok(v)
    }
}

/// What a run found, for statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the first check found errors (or stopped).
    pub damaged: bool,
    /// Whether the repair left a clean file system.
    pub repaired: bool,
    /// Check-and-fix rounds the repair ran.
    pub rounds: usize,
    /// The image after the repair, when asked for.
    pub after: Option<Vec<u8>>,
}

fn check_opts(threads: usize) -> CheckOptions {
    CheckOptions {
        threads,
        ..CheckOptions::default()
    }
}

fn run_check(mem: &MemFile, threads: usize) -> Result<Report, Failure> {
    let dev = open_device(&Target::whole(&mem.path), IoMode::Pread).map_err(Failure::Open)?;
    Ok(check(Arc::new(dev), &check_opts(threads)))
}

fn broken(r: &Report) -> bool {
    r.aborted.is_some() || r.has_uncorrected_errors()
}

/// The rounds a repair may take here (the command line allows 16).
pub const MAX_ROUNDS: usize = 16;

/// Runs check, repair and check on `image`; returns what happened, or
/// which property failed.
pub fn exercise(image: &[u8], threads: usize) -> Result<Outcome, Failure> {
    exercise_keeping(image, threads, false)
}

/// [`exercise`], also returning the repaired image when `keep` is set.
pub fn exercise_keeping(image: &[u8], threads: usize, keep: bool) -> Result<Outcome, Failure> {
    let ro = MemFile::new(image)?;
    let first = run_check(&ro, threads)?;
    if ro.contents()? != image {
        return Err(Failure::CheckChangedImage);
    }
    drop(ro);
    let rw = MemFile::new(image)?;
    let opts = RepairOptions {
        check: check_opts(threads),
        io: IoMode::Pread,
        mode: Mode::All,
        undo: None,
        max_rounds: MAX_ROUNDS,
        skip_if_clean: None,
        journal_only: false,
        bad_blocks: None,
        optimize_dirs: false,
        bmap2extent: false,
        discard: false,
        dry_run: false,
    };
    let repaired = repair(&Target::whole(&rw.path), &opts);
    let mut out = Outcome {
        damaged: broken(&first),
        repaired: false,
        rounds: repaired.rounds,
        after: None,
    };
    if repaired.rounds > MAX_ROUNDS {
        return Err(Failure::TooManyRounds(repaired.rounds));
    }
    if broken(&repaired.report) || repaired.report.cancelled {
        return Ok(out);
    }
    let second = run_check(&rw, threads)?;
    if broken(&second) {
        let what: Vec<String> = second
            .findings
            .iter()
            .filter(|f| !f.fixed)
            .take(5)
            .map(|f| f.message())
            .collect();
        let mut found: Vec<String> = second.aborted.iter().cloned().collect();
        found.extend(what);
        return Err(Failure::NotClean {
            rounds: repaired.rounds,
            found,
        });
    }
    out.repaired = true;
    if keep {
        out.after = Some(rw.contents()?);
    }
    Ok(out)
}
