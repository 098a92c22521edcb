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
use pipeline::{open_device, IoMode, Target};
use repair::{repair, Mode, RepairOptions};

/// An anonymous in-memory file holding `bytes`, and a path that opens it.
struct MemFile {
    file: File,
    path: PathBuf,
}

impl MemFile {
    fn new(bytes: &[u8]) -> Result<MemFile, String> {
        // SAFETY: the name is a NUL-terminated literal; the call has no
        // other preconditions.
        let fd = unsafe { libc::memfd_create(c"ext4chk-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let mut file = unsafe { File::from_raw_fd(fd) };
        file.write_all(bytes)
            .map_err(|e| format!("writing the image: {e}"))?;
        Ok(MemFile {
            file,
            path: PathBuf::from(format!("/proc/self/fd/{fd}")),
        })
    }

    fn contents(&self) -> Result<Vec<u8>, String> {
        use std::os::unix::fs::FileExt;
        let len = self
            .file
            .metadata()
            .map_err(|e| format!("stat: {e}"))?
            .len();
        let mut v = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut v, 0)
            .map_err(|e| format!("reading back: {e}"))?;
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

fn run_check(mem: &MemFile, threads: usize) -> Result<Report, String> {
    let dev =
        open_device(&Target::whole(&mem.path), IoMode::Pread).map_err(|e| format!("open: {e}"))?;
    Ok(check(Arc::new(dev), &check_opts(threads)))
}

fn broken(r: &Report) -> bool {
    r.aborted.is_some() || r.has_uncorrected_errors()
}

/// The rounds a repair may take here (the command line allows 16).
pub const MAX_ROUNDS: usize = 16;

/// Runs check, repair and check on `image`; returns what happened, or
/// which property failed.
pub fn exercise(image: &[u8], threads: usize) -> Result<Outcome, String> {
    exercise_keeping(image, threads, false)
}

/// [`exercise`], also returning the repaired image when `keep` is set.
pub fn exercise_keeping(image: &[u8], threads: usize, keep: bool) -> Result<Outcome, String> {
    let ro = MemFile::new(image)?;
    let first = run_check(&ro, threads)?;
    if ro.contents()? != image {
        return Err("the read-only check changed the image".into());
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
        return Err(format!("the repair ran {} rounds", repaired.rounds));
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
        return Err(format!(
            "the repair finished ({} rounds) but the check after it finds: {}",
            repaired.rounds,
            found.join("; ")
        ));
    }
    out.repaired = true;
    if keep {
        out.after = Some(rw.contents()?);
    }
    Ok(out)
}
