//! Standard output and standard error that a closed pipe cannot crash.
//!
//! `ext4chk -n IMG | head -2` closes the pipe while ext4chk still has
//! lines to print. e2fsck is ended by SIGPIPE then, quietly; so is a
//! read-only ext4chk. A run that may be writing to the device is not cut
//! short by its reader going away: from then on its output is dropped,
//! and it finishes what it started and exits with its own code.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set while the device may be written: a closed pipe must not end the
/// process then.
static WRITING: AtomicBool = AtomicBool::new(false);
/// Standard output's reader has gone.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
/// Standard error's reader has gone.
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Marks the stretch of the run in which the device may be written
/// (dropped: the stretch has ended).
pub struct Writing(());

impl Writing {
    /// Begins such a stretch.
    pub fn begin() -> Writing {
        WRITING.store(true, Ordering::SeqCst);
        Writing(())
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        WRITING.store(false, Ordering::SeqCst);
    }
}

/// Writes `s` to standard output.
pub fn stdout(s: &str) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_all(s.as_bytes()).and_then(|()| o.flush()) {
        drop(o);
        gone(&STDOUT_GONE, &e);
    }
}

/// Writes `s` to standard error.
pub fn stderr(s: &str) {
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut o = io::stderr().lock();
    if let Err(e) = o.write_all(s.as_bytes()) {
        drop(o);
        gone(&STDERR_GONE, &e);
    }
}

/// Flushes standard output, as the last thing a run does.
pub fn flush() {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = io::stdout().flush() {
        gone(&STDOUT_GONE, &e);
    }
}

/// A write failed. A closed pipe ends a read-only run as SIGPIPE ends
/// e2fsck; under a repair the stream is only dropped. Any other error
/// (a full disk behind a redirection) drops the stream too: the check's
/// verdict is still its exit code.
fn gone(flag: &AtomicBool, e: &io::Error) {
    flag.store(true, Ordering::Relaxed);
    if e.kind() == io::ErrorKind::BrokenPipe && !WRITING.load(Ordering::SeqCst) {
        die_of_sigpipe();
    }
}

/// Ends the process as the default action of SIGPIPE does.
fn die_of_sigpipe() -> ! {
    use nix::sys::signal::{raise, signal, SigHandler, Signal};
    // SAFETY: restoring the default action installs no handler of ours.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
    let _ = raise(Signal::SIGPIPE);
    // SIGPIPE is blocked: the shell's code for it.
    std::process::exit(128 + libc::SIGPIPE)
}

/// `print!` that a closed pipe cannot crash.
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::stdout(&format!($($arg)*)) };
}

/// `println!` that a closed pipe cannot crash.
macro_rules! outln {
    () => { $crate::out::stdout("\n") };
    ($($arg:tt)*) => { $crate::out::stdout(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that a closed pipe cannot crash.
macro_rules! err {
    ($($arg:tt)*) => { $crate::out::stderr(&format!($($arg)*)) };
}

/// `eprintln!` that a closed pipe cannot crash.
macro_rules! errln {
    () => { $crate::out::stderr("\n") };
    ($($arg:tt)*) => { $crate::out::stderr(&format!("{}\n", format_args!($($arg)*))) };
}
