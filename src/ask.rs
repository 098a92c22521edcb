//! Interactive repair: each problem is shown at the terminal as it is
//! found and answered with one keystroke, as e2fsck asks: `y`, `n`, `a`
//! (yes to this and everything after), Enter or space for the default;
//! Ctrl-C stops.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use check_core::answers::{Answers, ProblemKey};
use check_core::prompt::Prompt;
use check_core::{Finding, Pass};

/// What a keystroke (or the end of the input) means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// `y`.
    Yes,
    /// `n`.
    No,
    /// `a`: yes to this and every later question.
    All,
    /// Enter, space or Escape: the default.
    Default,
    /// Ctrl-C.
    Cancel,
    /// A key with no meaning here (ignored).
    Other,
}

impl Key {
    /// The meaning of byte `b`.
    pub fn of(b: u8) -> Key {
        match b {
            b'y' | b'Y' => Key::Yes,
            b'n' | b'N' => Key::No,
            b'a' | b'A' => Key::All,
            b'\n' | b'\r' | b' ' | 27 => Key::Default,
            3 => Key::Cancel,
            _ => Key::Other,
        }
    }
}

/// How many yes answers in a row bring the hint about `a`, and for how
/// many questions it shows.
const HINT_AFTER: u32 = 9;
const HINT_FOR: u32 = 4;

struct State {
    answered: HashMap<ProblemKey, bool>,
    shown: HashSet<ProblemKey>,
    yes_to_all: bool,
    /// Yes answers in a row (`None` once the hint has been shown or the
    /// streak broken by anything but `y`).
    streak: Option<u32>,
    heading: Option<Pass>,
    /// The input has ended: every later question takes its default.
    input_ended: bool,
}

/// The person at the terminal, as the repair's [`Answers`].
pub struct Console {
    state: Mutex<State>,
    cancelled: AtomicBool,
    declined: AtomicBool,
    /// The file system as the device holds it, to name directories by
    /// path in the questions (as e2fsck does).
    fs: Option<check_core::fs::Fs>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

/// Whether a finding calls for a change (and so for a question).
pub fn calls_for_fix(f: &Finding) -> bool {
    f.code.severity() == check_core::Severity::Error || f.code.policy().fix_notice
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl Console {
    /// A console reading standard input.
    pub fn new() -> Console {
        Console {
            state: Mutex::new(State {
                answered: HashMap::new(),
                shown: HashSet::new(),
                yes_to_all: false,
                streak: Some(0),
                heading: None,
                input_ended: false,
            }),
            cancelled: AtomicBool::new(false),
            declined: AtomicBool::new(false),
            fs: None,
        }
    }

    /// A console that names directories in its questions by their paths
    /// in `fs`.
    pub fn naming_paths_in(mut self, fs: check_core::fs::Fs) -> Console {
        self.fs = Some(fs);
        self
    }

    /// `f` with the paths a question shows: the directory an entry is in,
    /// and the directory pass 3 judges, read from the device.
    fn with_paths(&self, f: &Finding) -> Finding {
        let mut f = f.clone();
        let Some(fs) = &self.fs else {
            return f;
        };
        if let (Some(d), None) = (f.dir, &f.dir_path) {
            f.dir_path = check_core::paths::pathname(fs, d);
        }
        if f.code.pass() == Pass::P3 && f.ino_path.is_none() {
            if let Some(i) = f.ino {
                f.ino_path = check_core::paths::pathname(fs, i);
            }
        }
        f
    }

    /// Whether a question was answered no.
    pub fn declined(&self) -> bool {
        self.declined.load(Ordering::SeqCst)
    }

    /// Whether a pass heading is due before a line about `f`.
    fn heading(st: &mut State, out: &mut impl Write, f: &Finding) {
        let p = f.code.pass();
        if st.heading != Some(p) {
            st.heading = Some(p);
            let _ = writeln!(out, "{}", p.heading());
        }
    }

    fn ask(&self, st: &mut State, f: &Finding) -> bool {
        let named = self.with_paths(f);
        let f = &named;
        let mut out = io::stdout().lock();
        Self::heading(st, &mut out, f);
        let prompt = match f.code.prompt() {
            Prompt::None | Prompt::Null => Prompt::Fix,
            p => p,
        };
        let default = !f.code.no_default();
        if st.yes_to_all {
            let _ = write!(out, "{}.  {}? yes\n\n", f.message(), prompt.question());
            let _ = out.flush();
            return true;
        }
        let hint = match st.streak {
            Some(n) if (HINT_AFTER..HINT_AFTER + HINT_FOR).contains(&n) => " ('a' = yes to all) ",
            _ => "",
        };
        let _ = write!(
            out,
            "{}.  {}{hint}<{}>? ",
            f.message(),
            prompt.question(),
            if default { "y" } else { "n" }
        );
        let _ = out.flush();
        drop(out);
        let key = if st.input_ended {
            Key::Default
        } else {
            match read_key() {
                Some(k) => k,
                None => {
                    st.input_ended = true;
                    Key::Default
                }
            }
        };
        let (yes, word) = match key {
            Key::Yes => (true, "yes"),
            Key::No => (false, "no"),
            Key::All => {
                st.yes_to_all = true;
                (true, "yes to all")
            }
            Key::Cancel => {
                self.cancelled.store(true, Ordering::SeqCst);
                let _ = writeln!(io::stdout());
                return false;
            }
            Key::Default | Key::Other => (default, if default { "yes" } else { "no" }),
        };
        st.streak = match (key, st.streak) {
            (Key::Yes, Some(n)) if n + 1 < HINT_AFTER + HINT_FOR => Some(n + 1),
            _ => None,
        };
        let _ = writeln!(io::stdout(), "{word}");
        if !yes {
            self.declined.store(true, Ordering::SeqCst);
        }
        yes
    }
}

impl Answers for Console {
    fn yes(&self, f: &Finding) -> bool {
        if self.cancelled.load(Ordering::SeqCst) || fixer::safety::interrupted() {
            self.cancelled.store(true, Ordering::SeqCst);
            return false;
        }
        let key = ProblemKey::of(f);
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        if let Some(&a) = st.answered.get(&key) {
            return a;
        }
        let a = self.ask(&mut st, f);
        if !self.cancelled.load(Ordering::SeqCst) {
            st.answered.insert(key.clone(), a);
            st.shown.insert(key);
        }
        a
    }

    fn pass_done(&self, found: &[Finding]) {
        for f in found {
            if self.cancelled.load(Ordering::SeqCst) {
                return;
            }
            if calls_for_fix(f) {
                self.yes(f);
                continue;
            }
            // A notice: shown once, nothing to answer.
            let Ok(mut st) = self.state.lock() else {
                return;
            };
            if st.shown.insert(ProblemKey::of(f)) {
                let mut out = io::stdout().lock();
                Self::heading(&mut st, &mut out, f);
                let _ = writeln!(out, "{}.", self.with_paths(f).message());
            }
        }
    }

    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// The terminal settings of standard input, put back when dropped.
struct RawMode {
    saved: Option<nix::sys::termios::Termios>,
}

impl RawMode {
    /// Single keystrokes, no echo (signals still come: Ctrl-C is SIGINT).
    fn enter() -> RawMode {
        use nix::sys::termios::{
            tcgetattr, tcsetattr, LocalFlags, SetArg, SpecialCharacterIndices,
        };
        let fd = io::stdin();
        let Ok(saved) = tcgetattr(fd.as_fd()) else {
            return RawMode { saved: None };
        };
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO);
        raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        let _ = tcsetattr(fd.as_fd(), SetArg::TCSANOW, &raw);
        RawMode { saved: Some(saved) }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let _ = nix::sys::termios::tcsetattr(
                io::stdin().as_fd(),
                nix::sys::termios::SetArg::TCSANOW,
                t,
            );
        }
    }
}

/// Waits for a key that means something; `None` when the input ends.
pub fn read_key() -> Option<Key> {
    loop {
        match Key::of(read_byte()?) {
            Key::Other => continue,
            k => return Some(k),
        }
    }
}

/// Waits for one keystroke; `None` when the input ends. Ctrl-C arrives
/// as SIGINT (the terminal keeps its signals), which the wait notices
/// within a tenth of a second and returns as byte 3.
pub fn read_byte() -> Option<u8> {
    let _raw = RawMode::enter();
    let stdin = io::stdin();
    let mut failures = 0;
    loop {
        if fixer::safety::interrupted() {
            return Some(3);
        }
        if !readable(stdin.as_fd(), Duration::from_millis(100)) {
            continue;
        }
        let mut b = [0u8; 1];
        match stdin.lock().read(&mut b) {
            Ok(0) => return None,
            Ok(_) => return Some(b[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                failures += 1;
                if failures > 100 {
                    return None;
                }
            }
        }
    }
}

/// Whether `fd` has input (or an end of input) within `wait`.
fn readable(fd: BorrowedFd<'_>, wait: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(wait.as_millis() as i32).unwrap_or(PollTimeout::MAX);
    matches!(poll(&mut fds, ms), Ok(n) if n > 0)
}

/// Whether standard input and output are both terminals (e2fsck's test
/// for asking questions), or `E2FSCK_FORCE_INTERACTIVE` is set.
pub fn can_ask() -> bool {
    if std::env::var_os("E2FSCK_FORCE_INTERACTIVE").is_some() {
        return true;
    }
    stdin_is_terminal() && nix::unistd::isatty(io::stdout().as_fd()).unwrap_or(false)
}

/// Whether standard input is a terminal.
pub fn stdin_is_terminal() -> bool {
    nix::unistd::isatty(io::stdin().as_fd()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_mean_what_e2fsck_takes_them_to_mean() {
        assert_eq!(Key::of(b'y'), Key::Yes);
        assert_eq!(Key::of(b'N'), Key::No);
        assert_eq!(Key::of(b'a'), Key::All);
        assert_eq!(Key::of(b'\n'), Key::Default);
        assert_eq!(Key::of(b' '), Key::Default);
        assert_eq!(Key::of(3), Key::Cancel);
        assert_eq!(Key::of(b'q'), Key::Other);
        assert_eq!(Key::of(4), Key::Other, "Ctrl-D is just a byte in raw mode");
    }
}
