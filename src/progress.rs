//! Showing a check's progress: e2fsck's `-C FD` protocol (lines of
//! "PASS CURRENT MAX DEVICE", as systemd-fsck and libblockdev parse
//! them), its `-C 0` text bar, and, on a terminal without `-C`, a bar with
//! an estimate of the time left.
//!
//! A thread reads the check's counters every few milliseconds; the check
//! never waits for it.

use std::io::Write;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use check_core::progress::{Progress, Snapshot};

use crate::cli::ProgressTo;

/// Whether `-C -N` lines are on; SIGUSR1 turns them on, SIGUSR2 off (as
/// fsck(8) hands the display from one check to the next).
static FD_ENABLED: AtomicBool = AtomicBool::new(true);

extern "C" fn on_usr1(_: libc::c_int) {
    FD_ENABLED.store(true, Ordering::SeqCst);
}

extern "C" fn on_usr2(_: libc::c_int) {
    FD_ENABLED.store(false, Ordering::SeqCst);
}

fn install_toggles() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    for (sig, h) in [
        (Signal::SIGUSR1, on_usr1 as extern "C" fn(libc::c_int)),
        (Signal::SIGUSR2, on_usr2 as extern "C" fn(libc::c_int)),
    ] {
        let act = SigAction::new(SigHandler::Handler(h), SaFlags::SA_RESTART, SigSet::empty());
        // SAFETY: the handlers only store to an atomic.
        let _ = unsafe { sigaction(sig, &act) };
    }
}

/// e2fsck's share of the whole run at the start of each pass, in percent.
const PASS_BASE: [f64; 6] = [0.0, 70.0, 90.0, 92.0, 95.0, 100.0];

/// The (current, max) e2fsck reports for a pass, in its units: groups
/// for passes 1 and 4, directory blocks for pass 2, directories for pass
/// 3, twice the groups for pass 5.
fn pass_position(pass: u8, s: &Snapshot, done: bool) -> (u64, u64) {
    let scale = |num: u64, den: u64, of: u64| {
        if den == 0 {
            of
        } else {
            ((num.min(den) as u128 * of as u128) / den as u128) as u64
        }
    };
    match pass {
        1 => (scale(s.inodes_done, s.inodes_total, s.groups), s.groups),
        2 => (
            if done {
                s.dir_blocks_found
            } else {
                s.dir_blocks_done.min(s.dir_blocks_found)
            },
            s.dir_blocks_found,
        ),
        3 => (if done { s.dirs } else { 0 }, s.dirs),
        4 => (if done { s.groups } else { 0 }, s.groups),
        _ => (if done { 2 * s.groups } else { 0 }, 2 * s.groups),
    }
}

/// e2fsck's overall percentage for a pass position.
fn percent(pass: u8, cur: u64, max: u64) -> f64 {
    if pass == 0 {
        return 0.0;
    }
    if pass > 5 || max == 0 {
        return 100.0;
    }
    let i = usize::from(pass);
    PASS_BASE[i - 1] + (cur as f64 / max as f64) * (PASS_BASE[i] - PASS_BASE[i - 1])
}

/// The share of the whole run a bar shows for passes 3 to 5.
const AFTER: f64 = 0.05;

/// The share of the pipelined passes 1 and 2 done: inodes and directory
/// blocks weighted by what each costs (a directory block about three
/// inodes), with the directory blocks still to be found estimated from
/// those found per inode so far.
fn work_12(s: &Snapshot) -> f64 {
    const DIR_BLOCK_WEIGHT: f64 = 3.0;
    if s.phase >= 3 {
        return 1.0;
    }
    let it = s.inodes_total.max(1) as f64;
    let id = (s.inodes_done as f64).min(it);
    let total = it + DIR_BLOCK_WEIGHT * dir_blocks_expected(s);
    let done = id + DIR_BLOCK_WEIGHT * (s.dir_blocks_done as f64).min(s.dir_blocks_found as f64);
    (done / total.max(1.0)).min(1.0)
}

/// The directory blocks pass 1 will have found once it ends, from those
/// found per inode so far.
fn dir_blocks_expected(s: &Snapshot) -> f64 {
    let it = s.inodes_total.max(1) as f64;
    let id = (s.inodes_done as f64).min(it);
    let found = s.dir_blocks_found as f64;
    if id > 0.0 {
        (found * it / id).max(found)
    } else {
        found
    }
}

/// The fraction of the run done, for the bar: passes 1 and 2 by their
/// work, the passes after them a small fixed share.
pub fn fraction(s: &Snapshot) -> f64 {
    if s.phase >= 6 {
        return 1.0;
    }
    if s.phase >= 3 {
        return (1.0 - AFTER) + AFTER * f64::from(s.phase - 3) / 3.0;
    }
    (1.0 - AFTER) * work_12(s)
}

/// Seconds the passes after 1 and 2 take, from the sizes they walk: the
/// directory blocks pass 2 merges, the inodes pass 4 counts and the
/// blocks pass 5 compares. They use no reads, so a cold cache does not
/// slow them; the costs are those measured on 1M-inode file systems
/// (BENCHMARKS.md), with the last of the run (freeing the maps) added.
fn after_secs(s: &Snapshot, from_phase: u8) -> f64 {
    const PER_DIR_BLOCK: f64 = 50e-9;
    const PER_INODE: f64 = 5e-9;
    const PER_BLOCK: f64 = 8e-9;
    const LAST: f64 = 0.005;
    let merge_3 = PER_DIR_BLOCK * dir_blocks_expected(s);
    let pass_4 = PER_INODE * s.inodes_total as f64;
    let pass_5 = PER_BLOCK * s.blocks as f64;
    let parts = [merge_3, pass_4, pass_5];
    let skip = usize::from(from_phase.saturating_sub(3)).min(parts.len());
    parts[skip..].iter().sum::<f64>() + LAST
}

/// The time-left estimate: the pipelined passes' remaining work at the
/// rate of the most recent fifth of the work done (their rate changes
/// along the disk, so the rate since the start lags), sped up where the
/// rate has been rising along the second half of the work so far (as it
/// does on a cold cache), plus the passes after them, estimated from
/// their sizes.
#[derive(Default)]
struct Estimate {
    /// (seconds, work_12) as the check went.
    seen: std::collections::VecDeque<(f64, f64)>,
    /// (seconds, work_12) each time another twentieth of the work is done.
    steps: Vec<(f64, f64)>,
    /// The check the samples are from.
    check: u64,
}

impl Estimate {
    /// The share of the recent work the rate is taken over.
    const RECENT: f64 = 0.2;
    /// The least time the rate is taken over, so one burst does not decide.
    const MIN_SPAN: f64 = 0.1;
    /// The work between two steps of the rate's trend.
    const STEP: f64 = 0.05;
    /// The most the trend may speed the recent rate up.
    const TREND_CAP: f64 = 1.5;
    /// The least time the trend is taken over: steps shorter than a few
    /// of the display's samples give rates too coarse to have one.
    const TREND_SPAN: f64 = 0.2;

    fn left(&mut self, s: &Snapshot) -> Option<f64> {
        if s.checks != self.check {
            self.check = s.checks;
            self.seen.clear();
            self.steps.clear();
        }
        if s.phase >= 6 {
            return Some(0.0);
        }
        if s.phase >= 3 {
            return Some(after_secs(s, s.phase));
        }
        let w = work_12(s);
        let t = s.elapsed;
        if self.seen.back().is_none_or(|&(_, lw)| w > lw) {
            self.seen.push_back((t, w));
        }
        if w >= self.steps.last().map_or(0.0, |&(_, lw)| lw) + Self::STEP {
            self.steps.push((t, w));
        }
        if w < 0.02 || t < 0.05 {
            return None;
        }
        // Samples older than the recent window are dropped, but one is
        // kept from before it, so the window spans it.
        while self.seen.len() > 2 {
            let (t1, w1) = self.seen[1];
            if w1 <= w * (1.0 - Self::RECENT) && t - t1 >= Self::MIN_SPAN {
                self.seen.pop_front();
            } else {
                break;
            }
        }
        let (t0, w0) = self.seen.front().copied().unwrap_or((0.0, 0.0));
        let rate = if w - w0 > 0.0 && t - t0 >= Self::MIN_SPAN {
            (w - w0) / (t - t0)
        } else {
            w / t
        };
        Some(self.pipelined_secs(w, rate) + after_secs(s, 3))
    }

    /// Seconds for the pipelined passes' work from `w` to the end: at the
    /// recent rate, or faster where the rate's trend over the second half
    /// of the work so far (a line through the rate of each step) rises,
    /// at most [`Estimate::TREND_CAP`] times the recent rate.
    fn pipelined_secs(&self, w: f64, recent: f64) -> f64 {
        // (work at the step's middle, its rate), and when it began.
        let mut rates = Vec::new();
        let mut starts = Vec::new();
        let mut prev = (0.0, 0.0);
        for &(t, x) in &self.steps {
            if t > prev.0 {
                rates.push(((x + prev.1) / 2.0, (x - prev.1) / (t - prev.0)));
                starts.push(prev.0);
            }
            prev = (t, x);
        }
        let k = rates.len() / 2;
        let span = starts.get(k).map_or(0.0, |&since| prev.0 - since);
        let trend = (span >= Self::TREND_SPAN)
            .then(|| line_through(&rates[k..]))
            .flatten();
        let Some((a, b)) = trend else {
            return (1.0 - w) / recent;
        };
        const D: f64 = 0.01;
        let mut secs = 0.0;
        let mut x = w;
        while x < 1.0 {
            let d = D.min(1.0 - x);
            let r = (a + b * (x + d / 2.0)).clamp(recent, Self::TREND_CAP * recent);
            secs += d / r;
            x += d;
        }
        secs
    }
}

/// A line `y = a + b x` through three points or more that one stray point
/// cannot tilt (Theil and Sen's: the median of the slopes between every
/// two points, then the median intercept), so a single jump in the rate
/// does not read as a trend.
fn line_through(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 3 {
        return None;
    }
    let mut slopes = Vec::new();
    for (i, p) in points.iter().enumerate() {
        for q in &points[i + 1..] {
            if q.0 != p.0 {
                slopes.push((q.1 - p.1) / (q.0 - p.0));
            }
        }
    }
    let b = median(&mut slopes)?;
    let mut at_zero: Vec<f64> = points.iter().map(|p| p.1 - b * p.0).collect();
    Some((median(&mut at_zero)?, b))
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A running display.
pub struct Display {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Display {
    /// Starts the display the invocation asks for, if any: `-C`, else a
    /// bar on a terminal (standard error), else nothing. With `debug`, the
    /// time-left estimate made half way is also checked against the time
    /// it really took, on standard error.
    pub fn start(
        to: Option<ProgressTo>,
        name: &str,
        p: &'static Progress,
        debug: bool,
        eta: bool,
        bar_on_stderr: bool,
    ) -> Option<Display> {
        let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
        if debug {
            sinks.push(Box::new(EtaCheck::default()));
        }
        let main: Option<Box<dyn Sink>> = match to {
            Some(ProgressTo::Fd { fd, enabled }) => {
                FD_ENABLED.store(enabled, Ordering::SeqCst);
                install_toggles();
                // SAFETY: the descriptor was checked to be open; it is
                // duplicated so closing ours leaves the caller's alone.
                let dup =
                    nix::unistd::dup(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).ok()?;
                let file = unsafe { std::fs::File::from_raw_fd(dup.into_raw_fd()) };
                Some(Box::new(FdLines {
                    out: file,
                    name: name.to_string(),
                    last: (0, 0, 0),
                }))
            }
            Some(ProgressTo::Bar) => Some(Box::new(TextBar::new(name, bar_on_stderr))),
            None => (eta && std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .then(|| Box::new(Eta::new(name)) as Box<dyn Sink>),
        };
        sinks.extend(main);
        if sinks.is_empty() {
            return None;
        }
        let mut sink = Fanout(sinks);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        // With -d the half-way estimate is taken nearer half way.
        let tick = Duration::from_millis(if debug { 10 } else { 25 });
        let thread = std::thread::Builder::new()
            .name("ext4chk-progress".into())
            .spawn(move || {
                let mut pass_shown = 0u8;
                let mut checks = 0u64;
                loop {
                    let ending = stop2.load(Ordering::SeqCst);
                    let s = p.snapshot();
                    if s.checks > 0 {
                        if s.checks != checks && checks != 0 {
                            // A repair's next check: the display does not
                            // go back; it holds at the end until done.
                        } else {
                            checks = s.checks;
                            let pass = s.pass().min(6);
                            // Passes the reader missed end as they end.
                            while pass_shown < pass && pass_shown < 6 {
                                if pass_shown >= 1 {
                                    let (c, m) = pass_position(pass_shown, &s, true);
                                    sink.show(pass_shown, c, m, &s);
                                }
                                pass_shown += 1;
                                if pass_shown <= 5 {
                                    let (_, m) = pass_position(pass_shown, &s, false);
                                    sink.show(pass_shown, 0, m, &s);
                                }
                            }
                            if pass <= 5 {
                                let (c, m) = pass_position(pass, &s, false);
                                sink.show(pass, c, m, &s);
                            }
                        }
                    }
                    if ending {
                        sink.finish();
                        return;
                    }
                    std::thread::sleep(tick);
                }
            })
            .ok()?;
        Some(Display {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the display (after a last look at the counters).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

trait Sink: Send {
    fn show(&mut self, pass: u8, cur: u64, max: u64, s: &Snapshot);
    fn finish(&mut self);
}

/// Several displays at once.
struct Fanout(Vec<Box<dyn Sink>>);

impl Sink for Fanout {
    fn show(&mut self, pass: u8, cur: u64, max: u64, s: &Snapshot) {
        for k in &mut self.0 {
            k.show(pass, cur, max, s);
        }
    }

    fn finish(&mut self) {
        for k in &mut self.0 {
            k.finish();
        }
    }
}

/// `-d`: the estimate made half way through the first check, and how
/// long the rest of that check really took (a repair's planning and its
/// later checks are not part of it).
#[derive(Default)]
struct EtaCheck {
    estimate: Estimate,
    /// When half way was passed, the estimate then, and the check.
    half: Option<(Instant, f64, u64)>,
    /// When that check ended.
    ended: Option<Instant>,
}

impl Sink for EtaCheck {
    fn show(&mut self, _: u8, _: u64, _: u64, s: &Snapshot) {
        let left = self.estimate.left(s);
        match self.half {
            None if fraction(s) >= 0.5 => {
                if let Some(l) = left {
                    self.half = Some((Instant::now(), l, s.checks));
                }
            }
            Some((_, _, check)) if self.ended.is_none() && (s.checks != check || s.phase >= 6) => {
                self.ended = Some(Instant::now());
            }
            _ => {}
        }
    }

    fn finish(&mut self) {
        if let Some((at, said, _)) = self.half {
            let took = self
                .ended
                .unwrap_or_else(Instant::now)
                .duration_since(at)
                .as_secs_f64();
            errln!(
                "ext4chk: progress: half way, {said:.2} s were estimated to be left; the rest took {took:.2} s ({:+.0}%)",
                if took > 0.0 { 100.0 * (said - took) / took } else { 0.0 }
            );
        }
    }
}

struct FdLines {
    out: std::fs::File,
    name: String,
    last: (u8, u64, u64),
}

impl Sink for FdLines {
    fn show(&mut self, pass: u8, cur: u64, max: u64, _: &Snapshot) {
        if (pass, cur, max) == self.last || !FD_ENABLED.load(Ordering::SeqCst) {
            return;
        }
        self.last = (pass, cur, max);
        let _ = writeln!(self.out, "{pass} {cur} {max} {}", self.name);
    }

    fn finish(&mut self) {
        let _ = self.out.flush();
    }
}

/// `-C 0`: e2fsck's bar on standard output (on standard error when
/// standard output carries a JSON or JUnit document).
struct TextBar {
    on_stderr: bool,
    label: String,
    /// `\x01` and `\x02` around each draw when not interactive, for
    /// logsave to strip.
    marks: (&'static str, &'static str),
    spin: usize,
    last_tenths: i64,
    last_tick: Option<Instant>,
}

impl TextBar {
    fn new(label: &str, on_stderr: bool) -> TextBar {
        use std::io::IsTerminal;
        let interactive = std::io::stdin().is_terminal()
            && if on_stderr {
                std::io::stderr().is_terminal()
            } else {
                std::io::stdout().is_terminal()
            };
        TextBar {
            on_stderr,
            label: label.to_string(),
            marks: if interactive {
                ("", "")
            } else {
                ("\x01", "\x02")
            },
            spin: 0,
            last_tenths: -1,
            last_tick: None,
        }
    }

    /// Draws a line (a closed pipe ends the run as any output's does).
    fn draw(&self, l: &str) {
        if self.on_stderr {
            crate::out::stderr(l);
        } else {
            crate::out::stdout(l);
        }
    }

    fn line(&mut self, pct: f64) -> String {
        const SPIN: [char; 4] = ['\\', '|', '/', '-'];
        let width = 8 * (66usize.saturating_sub(self.label.len()) / 8);
        let filled = ((pct * width as f64 + 50.0) / 100.0) as usize;
        let filled = filled.min(width);
        let c = if pct >= 100.0 {
            '|'
        } else {
            SPIN[self.spin % 4]
        };
        self.spin += 1;
        format!(
            "{}{}: |{}{}{} {:4.1}%   \r{}",
            self.marks.0,
            self.label,
            "=".repeat(filled),
            " ".repeat(width - filled),
            c,
            pct,
            self.marks.1
        )
    }
}

impl Sink for TextBar {
    fn show(&mut self, pass: u8, cur: u64, max: u64, _: &Snapshot) {
        let pct = percent(pass, cur, max);
        let tenths = (pct * 10.0).round() as i64;
        if tenths == self.last_tenths {
            return;
        }
        // At most one draw per eighth of a second, but always 0% and 100%.
        let now = Instant::now();
        if tenths != 0 && tenths != 1000 {
            if let Some(t) = self.last_tick {
                if now.duration_since(t) < Duration::from_millis(125) {
                    return;
                }
            }
        }
        self.last_tenths = tenths;
        self.last_tick = Some(now);
        let l = self.line(pct);
        self.draw(&l);
    }

    fn finish(&mut self) {
        if self.last_tenths >= 0 {
            let l = format!("{}{}\r{}", self.marks.0, " ".repeat(79), self.marks.1);
            self.draw(&l);
        }
    }
}

/// A terminal bar with the time left, on standard error.
struct Eta {
    bar: indicatif::ProgressBar,
    estimate: Estimate,
}

/// Positions of the terminal bar.
const ETA_STEPS: u64 = 10_000;

impl Eta {
    fn new(name: &str) -> Eta {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(ETA_STEPS),
            indicatif::ProgressDrawTarget::stderr_with_hz(8),
        );
        // At most 79 columns: a name of up to 14, a bar of 20, the share
        // and a message of up to 37.
        let style =
            indicatif::ProgressStyle::with_template("{prefix} [{bar:20}] {percent:>3}% {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(short_name(name, 14));
        Eta {
            bar,
            estimate: Estimate::default(),
        }
    }
}

impl Sink for Eta {
    fn show(&mut self, pass: u8, _: u64, _: u64, s: &Snapshot) {
        let f = fraction(s);
        let left = match self.estimate.left(s) {
            Some(l) => format!(", {} left", human(l)),
            None => String::new(),
        };
        let msg = match pass {
            1 | 2 => format!("passes 1-2{left}"),
            p => format!("pass {p}{left}"),
        };
        self.bar.set_message(msg);
        self.bar.set_position((f * ETA_STEPS as f64) as u64);
    }

    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// The end of a device's name, `width` characters at most ("…" before
/// what is cut).
fn short_name(name: &str, width: usize) -> String {
    let base = std::path::Path::new(name)
        .file_name()
        .map_or(name.to_string(), |b| b.to_string_lossy().into_owned());
    let n = base.chars().count();
    if n <= width {
        return base;
    }
    let tail: String = base.chars().skip(n + 1 - width).collect();
    format!("…{tail}")
}

/// Seconds as a person reads them.
fn human(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fits_80_columns() {
        // The longest message: a pass of passes 1-2 with hours left.
        let msg = format!("passes 1-2, {} left", human(3600.0 * 99.0 + 59.0 * 60.0));
        let name = short_name("/dev/disk/by-id/nvme-a-very-long-device-name-part1", 14);
        let width = name.chars().count() + 2 + 20 + 2 + 4 + 1 + msg.chars().count();
        assert!(width <= 80, "{width} columns: {name} {msg}");
        assert_eq!(short_name("/tmp/a.img", 14), "a.img");
    }

    #[test]
    fn e2fsck_percentages() {
        assert_eq!(percent(1, 0, 10), 0.0);
        assert_eq!(percent(1, 5, 10), 35.0);
        assert_eq!(percent(2, 10, 10), 90.0);
        assert_eq!(percent(5, 8, 8), 100.0);
        assert_eq!(percent(3, 0, 0), 100.0);
    }

    #[test]
    fn the_text_bar_has_e2fsck_s_shape() {
        let mut b = TextBar {
            on_stderr: false,
            label: "p.img".into(),
            marks: ("\x01", "\x02"),
            spin: 1,
            last_tenths: -1,
            last_tick: None,
        };
        let l = b.line(17.5);
        assert_eq!(
            l,
            format!(
                "\x01p.img: |{}{}| 17.5%   \r\x02",
                "=".repeat(10),
                " ".repeat(46)
            )
        );
    }

    #[test]
    fn the_fraction_grows_with_the_work() {
        let mut s = Snapshot {
            inodes_total: 1000,
            ..Default::default()
        };
        let mut last = -1.0;
        for i in 0..=10 {
            s.inodes_done = i * 100;
            s.dir_blocks_found = i * 20;
            s.dir_blocks_done = i * 18;
            let f = fraction(&s);
            assert!(f > last && f <= 1.0);
            last = f;
        }
        s.phase = 6;
        assert_eq!(fraction(&s), 1.0);
    }

    /// A check whose pipelined passes speed up half way (as a cold one
    /// does where the disk's later part reads faster): the estimate
    /// follows the recent rate, not the rate since the start.
    #[test]
    fn the_estimate_follows_the_recent_rate() {
        let mut e = Estimate::default();
        let mut s = Snapshot {
            inodes_total: 1_000_000,
            checks: 1,
            ..Default::default()
        };
        // 100,000 inodes a second for 3 s, then 300,000 a second.
        let mut left = None;
        for step in 1..=40 {
            let t = f64::from(step) * 0.1;
            s.elapsed = t;
            s.inodes_done = if t <= 3.0 {
                (t * 100_000.0) as u64
            } else {
                300_000 + ((t - 3.0) * 300_000.0) as u64
            };
            left = e.left(&s);
        }
        // At 4 s, 600,000 inodes are done: 400,000 are left, 1.33 s at
        // the recent rate (the rate since the start says 2.67 s).
        let l = left.expect("an estimate once work is done");
        let rest = after_secs(&s, 3);
        assert!((l - rest - 4.0 / 3.0).abs() < 0.1, "{l}");
    }

    /// A check whose rate keeps rising along the work (a cold cache, the
    /// disk reading faster further on): the estimate counts on the rise
    /// going on (up to half again the recent rate); a steady rate is
    /// estimated as it is.
    #[test]
    fn a_rising_rate_is_followed_a_little_way() {
        let run = |accel: f64| {
            let mut e = Estimate::default();
            let mut s = Snapshot {
                inodes_total: 1_000_000,
                checks: 1,
                ..Default::default()
            };
            // The rate at work w is 100,000 (1 + accel w) inodes a second.
            let (mut t, mut done, mut left) = (0.0, 0.0f64, None);
            while done < 0.6 {
                let r = 0.1 * (1.0 + accel * done);
                done += r * 0.01;
                t += 0.01;
                s.elapsed = t;
                s.inodes_done = (done * 1e6) as u64;
                left = e.left(&s);
            }
            let rest = after_secs(&s, 3);
            // What the rest really takes at that rate.
            let truth = if accel == 0.0 {
                (1.0 - done) / 0.1
            } else {
                ((1.0 + accel) / (1.0 + accel * done)).ln() / (0.1 * accel)
            };
            (left.expect("an estimate") - rest, truth)
        };
        let (steady, truth) = run(0.0);
        assert!((steady - truth).abs() < 0.05 * truth, "{steady} {truth}");
        // The rate tripling along the work: the recent rate alone would
        // overestimate the rest by a quarter.
        let (rising, truth) = run(2.0);
        assert!((rising - truth).abs() < 0.1 * truth, "{rising} {truth}");
    }

    /// `-d`'s half-way line times the rest of the check it was made in,
    /// not the checks after it.
    #[test]
    fn the_half_way_check_ends_with_its_check() {
        let mut c = EtaCheck::default();
        let mut s = Snapshot {
            inodes_total: 1000,
            checks: 1,
            ..Default::default()
        };
        for step in 1..=10u32 {
            s.elapsed = f64::from(step) * 0.1;
            s.inodes_done = u64::from(step) * 100;
            c.show(1, 0, 0, &s);
        }
        assert!(c.half.is_some_and(|(_, _, check)| check == 1));
        assert!(c.ended.is_none());
        // The next check starts before the first's end was seen.
        s.checks = 2;
        s.inodes_done = 0;
        c.show(1, 0, 0, &s);
        let ended = c.ended.expect("the first check's end");
        c.show(1, 0, 0, &s);
        assert_eq!(c.ended, Some(ended));
    }

    /// The passes after 1 and 2 are estimated from their sizes, and the
    /// estimate shrinks as they pass.
    #[test]
    fn the_later_passes_are_sized() {
        let mut s = Snapshot {
            inodes_total: 1_000_000,
            inodes_done: 1_000_000,
            dir_blocks_found: 500_000,
            dir_blocks_done: 500_000,
            blocks: 4_000_000,
            checks: 1,
            elapsed: 2.0,
            phase: 3,
            ..Default::default()
        };
        let mut e = Estimate::default();
        let mut last = f64::MAX;
        for phase in 3..=5 {
            s.phase = phase;
            let l = e.left(&s).expect("an estimate");
            assert!(l > 0.0 && l < last, "{phase}: {l}");
            last = l;
        }
        s.phase = 6;
        assert_eq!(e.left(&s), Some(0.0));
    }

    /// A repair's next check starts its own estimate.
    #[test]
    fn a_new_check_starts_afresh() {
        let mut e = Estimate::default();
        let mut s = Snapshot {
            inodes_total: 1000,
            inodes_done: 900,
            checks: 1,
            elapsed: 1.0,
            ..Default::default()
        };
        assert!(e.left(&s).is_some());
        s.checks = 2;
        s.inodes_done = 10;
        s.elapsed = 0.01;
        assert_eq!(e.left(&s), None);
        assert_eq!(e.seen.len(), 1);
    }
}
