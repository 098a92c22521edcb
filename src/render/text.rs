//! The text report: e2fsck's lines, the findings grouped by pass, the
//! preen lines, the `-v` statistics and the `-t` timing.

use check_core::problem::{Finding, Pass, Severity};
use check_core::report::exit;
use check_core::{Report, Summary};

use crate::cli::{Invocation, Mode, Personality};

/// What a report printed as the check went has shown already: the
/// passes, the notes, and how many of each code (e2fsck.conf's limits
/// run over the whole report).
#[derive(Debug, Default)]
struct Streamed {
    passes: Vec<Pass>,
    notes: usize,
    shown: Option<Shown>,
    /// The findings printed so far.
    findings: Vec<Finding>,
}

/// A read-only check's text report, printed pass by pass as the check
/// ends each one (a check of a large file system shows its progress in a
/// log, not only at its end); [`print`] then prints the rest.
#[derive(Debug, Default)]
pub struct Stream {
    state: std::sync::Mutex<Streamed>,
}

impl check_core::answers::PassListener for Stream {
    fn pass_done(&self, pass: Pass, found: &[Finding], notes: &[String], lines: &[String]) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let mut out = String::new();
        for n in notes.iter().skip(st.notes) {
            out.push_str(n);
            out.push('\n');
        }
        st.notes = notes.len();
        let mut shown = st.shown.take().unwrap_or_else(Shown::read_only);
        let mine: Vec<&Finding> = found.iter().collect();
        // A pass's heading once; passes 1 to 5 have one even when they
        // found nothing (the report printed whole has them too).
        let heading_printed = st.passes.contains(&pass);
        if !(heading_printed && mine.is_empty()) {
            let part = section(pass, &mine, lines, &mut shown, false, true);
            let part = if heading_printed {
                part.split_once('\n')
                    .map_or(part.clone(), |(_, rest)| rest.to_string())
            } else {
                part
            };
            out.push_str(&part);
        }
        st.shown = Some(shown);
        if !heading_printed {
            st.passes.push(pass);
        }
        st.findings.extend(found.iter().cloned());
        crate::out::stdout(&out);
    }
}

/// Prints the text report.
pub fn print(inv: &Invocation, report: &Report) {
    print_after(inv, report, None);
}

/// Prints the text report, less what `stream` printed already.
pub fn print_after(inv: &Invocation, report: &Report, stream: Option<&Stream>) {
    let e2fsck = inv.personality == Personality::E2fsck;
    let preen = inv.mode == Mode::Preen;
    let notices = if e2fsck {
        closing_notices(report, preen)
    } else {
        String::new()
    };
    if e2fsck && preen {
        out!("{}", preen_text(report, &notices));
    } else {
        // An interactive repair has shown every problem already.
        let list = inv.mode != Mode::Interactive;
        let mut streamed =
            stream.and_then(|s| s.state.lock().ok().map(|mut g| std::mem::take(&mut *g)));
        out!("{}", text(report, &notices, list, streamed.as_mut()));
    }
    if inv.verbose {
        if let Some(s) = &report.summary {
            out!("{}", verbose_stats(s));
        }
    }
}

/// e2fsck.conf's limits on what is printed: `max_count_problems` and a
/// code's own `max_count` (past the limit, its findings are suppressed,
/// with one line saying so), and `no_nomsg` (a problem left by -n or by
/// `force_no` is not printed). The JSON report keeps every finding.
#[derive(Debug)]
struct Shown {
    counts: std::collections::HashMap<check_core::problem::Code, i64>,
    max: i64,
    read_only: bool,
}

impl Shown {
    fn new(r: &Report) -> Shown {
        Shown {
            counts: std::collections::HashMap::new(),
            max: crate::conf::get().max_count_problems,
            read_only: r.repair.is_none() && r.dry_run.is_none(),
        }
    }

    /// For a read-only check's report.
    fn read_only() -> Shown {
        Shown {
            counts: std::collections::HashMap::new(),
            max: crate::conf::get().max_count_problems,
            read_only: true,
        }
    }

    /// Whether `f` is printed, and the line that says its code is
    /// suppressed from here on (once).
    fn take(&mut self, f: &Finding) -> (bool, Option<String>) {
        if !f.fixed && f.code.no_nomsg() && (self.read_only || f.code.force_no()) {
            return (false, None);
        }
        let limit = f.code.max_count().unwrap_or(self.max);
        if limit <= 0 {
            return (true, None);
        }
        let n = self.counts.entry(f.code).or_insert(0);
        *n += 1;
        match (*n).cmp(&(limit + 1)) {
            std::cmp::Ordering::Less => (true, None),
            std::cmp::Ordering::Equal => (
                false,
                Some(format!(
                    "...problem 0x{:06x} ({}) suppressed",
                    f.code.e2fsck_code(),
                    f.code.name()
                )),
            ),
            std::cmp::Ordering::Greater => (false, None),
        }
    }
}

/// The human-readable report: findings grouped by pass, then `notices`
/// (e2fsck's closing lines, under its names) and the summary.
fn text(r: &Report, notices: &str, list: bool, streamed: Option<&mut Streamed>) -> String {
    let mut out = String::new();
    let (done, notes_done, mut shown, printed) = match streamed {
        Some(s) => (
            std::mem::take(&mut s.passes),
            s.notes,
            s.shown.take().unwrap_or_else(|| Shown::new(r)),
            std::mem::take(&mut s.findings),
        ),
        None => (Vec::new(), 0, Shown::new(r), Vec::new()),
    };
    if let Some(blocks) = r.dry_run {
        out.push_str(&format!(
            "Dry run: nothing is written to {}; below is what the repair would do \
             ({blocks} blocks written).\n",
            r.device
        ));
    }
    for n in r.notes.iter().skip(notes_done) {
        out.push_str(n);
        out.push('\n');
    }
    for p in super::mark::PASSES.into_iter().filter(|_| list) {
        // What the stream printed is not printed again.
        let mine: Vec<&Finding> = r
            .findings
            .iter()
            .filter(|f| f.code.pass() == p && !printed.contains(f))
            .collect();
        if done.contains(&p) && mine.is_empty() {
            continue;
        }
        let always = r.summary.is_some() && !done.contains(&p);
        out.push_str(&section(
            p,
            &mine,
            &r.pass1_lines,
            &mut shown,
            r.dry_run.is_some(),
            always,
        ));
    }
    if let Some(reason) = &r.aborted {
        out.push_str(&format!("{}: check stopped: {}\n", r.device, reason));
    }
    if let Some(reason) = &r.preen_halt {
        out.push_str(&format!("{}: {}\n", r.device, reason));
    }
    out.push_str(notices);
    let state = match r.exit_code() {
        0 => "clean",
        c if c & exit::OPERATIONAL != 0 => "check incomplete",
        c if c & exit::CANCELLED != 0 => "canceled",
        c if c & exit::UNCORRECTED != 0 => "errors found",
        _ if r.dry_run.is_some() => "errors would be corrected",
        _ => "errors corrected",
    };
    if let Some(s) = &r.summary {
        // Per ten thousand, rounded half up to one decimal, as e2fsck does.
        let t = (10000 * s.non_contiguous)
            .checked_div(s.inodes_used)
            .map_or(0, |x| (x + 5) / 10);
        out.push_str(&format!(
            "{}: {}, {}/{} files ({}.{}% non-contiguous), {}/{} blocks\n",
            r.device,
            state,
            s.inodes_used,
            s.inodes_count,
            t / 10,
            t % 10,
            s.blocks_used,
            s.blocks_count
        ));
    } else {
        out.push_str(&format!("{}: {}\n", r.device, state));
    }
    out
}

/// One pass's part of the report: its heading (for passes 1 to 5 when
/// `always`, else only when it found something), pass 1's `-E fragcheck`
/// lines, and its findings.
fn section(
    p: Pass,
    mine: &[&Finding],
    pass1_lines: &[String],
    shown: &mut Shown,
    dry_run: bool,
    always: bool,
) -> String {
    let mut out = String::new();
    let heading_always =
        always && matches!(p, Pass::P1 | Pass::P2 | Pass::P3 | Pass::P4 | Pass::P5);
    if mine.is_empty() && !heading_always {
        return out;
    }
    out.push_str(p.heading());
    out.push('\n');
    if p == Pass::P1 {
        for l in pass1_lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    for f in mine {
        let (show, said) = shown.take(f);
        if let Some(line) = said {
            out.push_str(&format!("  {line}\n"));
        }
        if !show {
            continue;
        }
        let mark = super::mark::mark(f, dry_run);
        out.push_str(&format!(
            "  {}: {} [{} 0x{:06x}]\n",
            mark,
            f.message(),
            f.code.name(),
            f.code.e2fsck_code()
        ));
    }
    out
}

/// What e2fsck prints at the end of a run under its own names: that the
/// file system was changed (not when preening), that the system must be
/// rebooted (the root, mounted read-only, was changed), and that errors
/// are left.
fn closing_notices(r: &Report, preen: bool) -> String {
    let mut out = String::new();
    let code = r.exit_code();
    // A skipped file system ends with e2fsck's "clean" line alone.
    let changed = r.modified && r.dry_run.is_none() && r.skipped.is_none();
    if changed && !preen {
        out.push_str(&format!(
            "\n{}: ***** FILE SYSTEM WAS MODIFIED *****\n",
            r.device
        ));
    }
    if changed && r.mounted_root {
        out.push_str(&format!("{}: ***** REBOOT SYSTEM *****\n", r.device));
    }
    if code & exit::UNCORRECTED != 0 && r.preen_halt.is_none() && r.skipped.is_none() {
        out.push_str(&format!(
            "\n{}: ********** WARNING: Filesystem still has errors **********\n\n",
            r.device
        ));
    }
    out
}

/// e2fsck -p's output: each problem on one line after the device name,
/// then `notices` and the summary line.
fn preen_text(r: &Report, notices: &str) -> String {
    let mut out = String::new();
    for n in &r.notes {
        out.push_str(&format!("{}: {n}\n", r.device));
    }
    let mut shown = Shown::new(r);
    // Stopped: what preen fixed, then the problem it stopped at, as
    // e2fsck -p prints them (the rest was never reached).
    let halted = r.preen_halt.is_some();
    for f in &r.findings {
        if f.code.preen_nomessage() || (halted && !f.fixed) {
            continue;
        }
        let (show, said) = shown.take(f);
        if let Some(line) = said {
            out.push_str(&format!("{line}\n"));
        }
        if !show {
            continue;
        }
        let what = match (f.code.severity(), f.fixed) {
            (_, true) => f.code.prompt().done(),
            // Declined by e2fsck.conf, in e2fsck's word.
            (Severity::Error, false) if f.code.force_no() || f.code.no_default() => "IGNORED",
            (Severity::Error, false) => "NOT FIXED",
            (Severity::Notice, false) => continue,
        };
        out.push_str(&format!("{}: {}  {what}.\n", r.device, f.message()));
    }
    if let Some(reason) = &r.aborted {
        out.push_str(&format!("{}: check stopped: {reason}\n", r.device));
    }
    if let Some(why) = &r.preen_halt {
        out.push_str(&format!("{}: {why}\n", r.device));
        return out;
    }
    out.push_str(notices);
    if let Some(s) = &r.summary {
        out.push_str(&format!(
            "{}: {}/{} files ({} non-contiguous), {}/{} blocks\n",
            r.device,
            s.inodes_used,
            s.inodes_count,
            permille(s.non_contiguous, s.inodes_used),
            s.blocks_used,
            s.blocks_count
        ));
    }
    out
}

/// A share of the used inodes as e2fsck prints it: per ten thousand,
/// rounded half up to one decimal.
fn permille(part: u64, whole: u64) -> String {
    let t = (10000 * part)
        .checked_div(whole)
        .map_or(0, |x| (x + 5) / 10);
    format!("{}.{}%", t / 10, t % 10)
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n:12} {}", if n == 1 { one } else { many })
}

/// e2fsck -v's statistics block.
pub fn verbose_stats(s: &Summary) -> String {
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let dir_links = (2 * s.directories).saturating_sub(1);
    let mut out = String::new();
    out.push_str(&format!(
        "\n{} ({:.2}%, out of {})\n",
        plural(s.inodes_used, "inode used", "inodes used"),
        pct(s.inodes_used, s.inodes_count),
        s.inodes_count
    ));
    out.push_str(&format!(
        "{} ({})\n",
        plural(
            s.fragmented_files,
            "non-contiguous file",
            "non-contiguous files"
        ),
        permille(s.fragmented_files, s.inodes_used)
    ));
    out.push_str(&format!(
        "{} ({})\n",
        plural(
            s.fragmented_dirs,
            "non-contiguous directory",
            "non-contiguous directories"
        ),
        permille(s.fragmented_dirs, s.inodes_used)
    ));
    let [i, d, t] = s.ind_dind_tind;
    out.push_str(&format!(
        "             # of inodes with ind/dind/tind blocks: {i}/{d}/{t}\n"
    ));
    if !s.extent_depth.is_empty() {
        let h: Vec<String> = s.extent_depth.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "             Extent depth histogram: {}\n",
            h.join("/")
        ));
    }
    out.push_str(&format!(
        "{} ({:.2}%, out of {})\n",
        plural(s.blocks_used, "block used", "blocks used"),
        pct(s.blocks_used, s.blocks_count),
        s.blocks_count
    ));
    out.push_str(&format!(
        "{}\n",
        plural(s.bad_blocks, "bad block", "bad blocks")
    ));
    out.push_str(&format!(
        "{}\n",
        plural(s.large_files, "large file", "large files")
    ));
    out.push_str(&format!(
        "\n{}\n",
        plural(s.regular, "regular file", "regular files")
    ));
    out.push_str(&format!(
        "{}\n",
        plural(s.directories, "directory", "directories")
    ));
    out.push_str(&format!(
        "{}\n",
        plural(s.chardev, "character device file", "character device files")
    ));
    out.push_str(&format!(
        "{}\n",
        plural(s.blockdev, "block device file", "block device files")
    ));
    out.push_str(&format!("{}\n", plural(s.fifos, "fifo", "fifos")));
    out.push_str(&format!(
        "{}\n",
        plural(s.extra_links.saturating_sub(dir_links), "link", "links")
    ));
    out.push_str(&format!(
        "{} ({} fast symbolic link{})\n",
        plural(s.symlinks, "symbolic link", "symbolic links"),
        s.fast_symlinks,
        if s.fast_symlinks == 1 { "" } else { "s" }
    ));
    out.push_str(&format!("{}\n", plural(s.sockets, "socket", "sockets")));
    out.push_str("------------\n");
    out.push_str(&format!(
        "{}\n",
        plural(s.links.saturating_sub(dir_links), "file", "files")
    ));
    out
}

/// `-t`: memory, time and I/O of the whole run (and, with `-tt`, the
/// time of each phase of the last check).
pub fn timing(report: Option<&Report>, level: u8, started: std::time::Instant) -> String {
    let mut out = String::new();
    if level >= 2 {
        if let Some(r) = report {
            for (what, secs) in &r.phases {
                out.push_str(&format!("{what}: time: {secs:5.2}\n"));
            }
        }
    }
    let (user, sys, maxrss) = rusage();
    out.push_str(&format!(
        "Memory used: {maxrss}k, time: {:5.2}/{user:5.2}/{sys:5.2}\n",
        started.elapsed().as_secs_f64()
    ));
    let (read, written) = io_bytes();
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    out.push_str(&format!(
        "I/O read: {}MB, write: {}MB, rate: {:.2}MB/s\n",
        read.div_ceil(1 << 20),
        written.div_ceil(1 << 20),
        (read + written) as f64 / (1u64 << 20) as f64 / secs
    ));
    out
}

/// User and system seconds, and the peak resident set in KiB.
fn rusage() -> (f64, f64, i64) {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            (tv(u.user_time()), tv(u.system_time()), u.max_rss())
        }
        Err(_) => (0.0, 0.0, 0),
    }
}

/// Bytes this process has read and written (from /proc/self/io).
fn io_bytes() -> (u64, u64) {
    let Ok(s) = std::fs::read_to_string("/proc/self/io") else {
        return (0, 0);
    };
    let get = |key: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (get("rchar:"), get("wchar:"))
}
