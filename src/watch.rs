//! `ext4chk --watch`: listens for the errors ext4 reports to fanotify
//! (FAN_FS_ERROR, Linux 5.16) and checks the file system online when one
//! comes.
//!
//! Each watched file system is marked with `FAN_MARK_FILESYSTEM`; the
//! kernel then sends an event for every metadata error it meets (a
//! directory block that fails its checksum, an inode that makes no
//! sense), with the error number, how many errors there were since the
//! last event, and the handle of the inode involved where it has one.
//! The watch names that inode by its path, writes an `event` record and
//! runs `ext4chk --online` on the file system (in a process of its own,
//! which dies with the watch: its thaw watchdog then thaws anything it
//! froze). The check's outcome is a `check` record, each confirmed
//! problem a `finding` record. Checks are paced: one at a time per file
//! system, at most one per `--min-interval` for the kernel's events;
//! events met meanwhile are counted, and checked once the interval has
//! passed. `--every` adds checks on a schedule, at idle I/O priority.
//!
//! Records are JSON objects, one per line, on standard output or
//! appended to `--log`; `docs/watch.md` describes them. Nothing is
//! written to a watched file system but what `--online` records (a
//! confirmed problem asks for a full check at the next boot; the error
//! state the kernel set is left as it is).

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use crate::cli::{Invocation, Watch};
use crate::online::{self, Mount};

/// Ended by SIGINT or SIGTERM (or its output closed).
pub const STOPPED: i32 = 0;
/// Could not go on: the log cannot be written, fanotify failed.
pub const OPERATIONAL: i32 = 8;
/// Not run as root.
pub const NOT_ROOT: i32 = 20;
/// The kernel does not report file system errors to fanotify.
pub const NO_FS_ERROR: i32 = 21;
/// A mount point given is not an ext2/3/4 mount.
pub const NOT_EXT: i32 = 22;

/// fanotify's event metadata version and sizes.
const METADATA_VERSION: u8 = 3;
const METADATA_LEN: usize = 24;
const INFO_FID: u8 = 1;
const INFO_ERROR: u8 = 5;
const FAN_Q_OVERFLOW: u64 = 0x4000;
/// `FILEID_INO32_GEN` and `FILEID_INO32_GEN_PARENT`: ext4's handles.
const FILEID_INO32_GEN: i32 = 1;
const FILEID_INO32_GEN_PARENT: i32 = 2;

/// How often the watch looks at the mount table and its checks.
const TICK: Duration = Duration::from_millis(250);

/// One error the kernel reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsError {
    /// The file system's id, as statfs gives it.
    pub fsid: [i32; 2],
    /// The error number (74, EFSBADCRC: a checksum; 117, EFSCORRUPTED).
    pub error: i32,
    /// Errors since the last event.
    pub count: u32,
    /// The handle of the inode involved: its type and bytes.
    pub handle: Option<(i32, Vec<u8>)>,
}

impl FsError {
    /// The inode and generation the handle names, for ext4's handles.
    pub fn inode(&self) -> Option<(u32, u32)> {
        let (kind, b) = self.handle.as_ref()?;
        if !matches!(*kind, FILEID_INO32_GEN | FILEID_INO32_GEN_PARENT) || b.len() < 8 {
            return None;
        }
        let ino = u32::from_ne_bytes(b[0..4].try_into().ok()?);
        let gen = u32::from_ne_bytes(b[4..8].try_into().ok()?);
        (ino != 0).then_some((ino, gen))
    }
}

/// What one read of the fanotify descriptor held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivered {
    /// An error event.
    Error(FsError),
    /// The kernel's queue overflowed: events were lost.
    Overflow,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The events in `buf`, as read from a fanotify descriptor made with
/// `FAN_REPORT_FID`. A record that does not fit is the end.
pub fn parse_events(buf: &[u8]) -> Vec<Delivered> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + METADATA_LEN <= buf.len() {
        let (Some(len), Some(mlen), Some(mask)) = (
            u32_at(buf, off).map(|v| v as usize),
            u16_at(buf, off + 6).map(usize::from),
            u64_at(buf, off + 8),
        ) else {
            break;
        };
        if buf[off + 4] != METADATA_VERSION
            || len < mlen
            || mlen < METADATA_LEN
            || off + len > buf.len()
        {
            break;
        }
        let event = &buf[off..off + len];
        if mask & FAN_Q_OVERFLOW != 0 {
            out.push(Delivered::Overflow);
        }
        if mask & libc::FAN_FS_ERROR != 0 {
            out.push(Delivered::Error(error_event(&event[mlen..])));
        }
        off += len;
    }
    out
}

/// The information records of one error event.
fn error_event(mut info: &[u8]) -> FsError {
    let mut e = FsError {
        fsid: [0, 0],
        error: 0,
        count: 0,
        handle: None,
    };
    while info.len() >= 4 {
        let kind = info[0];
        let len = u16_at(info, 2).map_or(0, usize::from);
        if len < 4 || len > info.len() {
            break;
        }
        let rec = &info[..len];
        match kind {
            INFO_FID => {
                let a = u32_at(rec, 4).unwrap_or(0) as i32;
                let b = u32_at(rec, 8).unwrap_or(0) as i32;
                e.fsid = [a, b];
                if let (Some(n), Some(t)) = (u32_at(rec, 12), u32_at(rec, 16)) {
                    let bytes = rec.get(20..20 + n as usize).unwrap_or(&[]);
                    if n > 0 && !bytes.is_empty() {
                        e.handle = Some((t as i32, bytes.to_vec()));
                    }
                }
            }
            INFO_ERROR => {
                e.error = u32_at(rec, 4).unwrap_or(0) as i32;
                e.count = u32_at(rec, 8).unwrap_or(0);
            }
            _ => {}
        }
        info = &info[len..];
    }
    e
}

/// The name ext4 gives an error number, where it has its own.
pub fn error_name(errno: i32) -> String {
    match errno {
        libc::EBADMSG => "EFSBADCRC".into(),
        libc::EUCLEAN => "EFSCORRUPTED".into(),
        libc::EIO => "EIO".into(),
        libc::ENOMEM => "ENOMEM".into(),
        libc::EROFS => "EROFS".into(),
        libc::ENOSPC => "ENOSPC".into(),
        n => {
            let s = std::io::Error::from_raw_os_error(n).to_string();
            s.split(" (os error").next().unwrap_or(&s).to_string()
        }
    }
}

/// A duration of the Unix epoch as RFC 3339 UTC, to the millisecond.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// When the checks of one file system may run.
#[derive(Clone, Debug, Default)]
pub struct Pace {
    /// When the last check for the kernel's events started.
    last_start: Option<Instant>,
    /// Events not yet covered by a check that started after them.
    pending: u64,
    /// When the first of them came.
    first_pending: Option<Instant>,
}

impl Pace {
    /// An event came at `now`.
    pub fn event(&mut self, now: Instant) {
        self.pending += 1;
        self.first_pending.get_or_insert(now);
    }

    /// When a check for the pending events may start: now, or once the
    /// interval since the last one has passed. None with nothing pending.
    pub fn next(&self, now: Instant, min_interval: Duration) -> Option<Instant> {
        if self.pending == 0 {
            return None;
        }
        Some(match self.last_start {
            Some(t) if now.duration_since(t) < min_interval => t + min_interval,
            _ => now,
        })
    }

    /// A check for the pending events starts at `now`: how many it
    /// covers and when the first came.
    pub fn start(&mut self, now: Instant) -> (u64, Option<Instant>) {
        self.last_start = Some(now);
        (std::mem::take(&mut self.pending), self.first_pending.take())
    }
}

/// Why a check runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Event,
    Schedule,
}

impl Cause {
    fn name(self) -> &'static str {
        match self {
            Cause::Event => "event",
            Cause::Schedule => "schedule",
        }
    }
}

/// A check that runs.
struct Running {
    child: Child,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
    started: Instant,
    cause: Cause,
    events: u64,
    first_event: Option<Instant>,
}

/// A file system watched.
struct Watched {
    mount: Mount,
    device: String,
    fsid: [i32; 2],
    pace: Pace,
    running: Option<Running>,
    next_scrub: Option<Instant>,
    /// The paths of the inodes the kernel's events named, for findings
    /// the check could not name.
    named: HashMap<u32, String>,
}

/// Where the records go.
struct Log {
    out: Box<dyn Write>,
    closed: bool,
}

impl Log {
    fn open(path: Option<&Path>) -> std::io::Result<Log> {
        let out: Box<dyn Write> = match path {
            Some(p) => Box::new(
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(p)?,
            ),
            None => Box::new(std::io::stdout()),
        };
        Ok(Log { out, closed: false })
    }

    /// Writes one record with `type`, `time` and the fields given.
    fn record(&mut self, kind: &str, fields: Map<String, Value>) {
        let mut m = Map::new();
        m.insert("type".into(), kind.into());
        m.insert("time".into(), rfc3339(SystemTime::now()).into());
        m.extend(fields);
        let mut line = Value::Object(m).to_string();
        line.push('\n');
        if self
            .out
            .write_all(line.as_bytes())
            .and_then(|()| self.out.flush())
            .is_err()
        {
            self.closed = true;
        }
    }
}

/// The fields that name a file system in every record.
fn fs_fields(w: &Watched) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "mount".into(),
        w.mount.mount_point.display().to_string().into(),
    );
    m.insert("device".into(), w.device.clone().into());
    m
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The file system's id, as fanotify's events carry it.
fn fsid_of(path: &Path) -> std::io::Result<[i32; 2]> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid string and `st` a valid statfs to fill.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fsid_t is two ints (its fields are private in libc).
    Ok(unsafe { std::ptr::read_unaligned(std::ptr::from_ref(&st.f_fsid).cast::<[i32; 2]>()) })
}

/// Marks the file system mounted at `path` for its errors.
fn mark(fan: &OwnedFd, path: &Path) -> std::io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid descriptor and string.
    let r = unsafe {
        libc::fanotify_mark(
            fan.as_raw_fd(),
            libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM,
            libc::FAN_FS_ERROR,
            libc::AT_FDCWD,
            c.as_ptr(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The path, inside its file system, of the inode a handle names.
fn path_of(mount_point: &Path, kind: i32, bytes: &[u8]) -> Option<String> {
    let dir = File::open(mount_point).ok()?;
    // struct file_handle: its length and type, then the bytes; kept in
    // u32s for its alignment.
    let mut words = vec![0u32; 2 + bytes.len().div_ceil(4)];
    words[0] = u32::try_from(bytes.len()).ok()?;
    words[1] = kind as u32;
    // SAFETY: the bytes go after the two words, inside the vector.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            words.as_mut_ptr().add(2).cast::<u8>(),
            bytes.len(),
        );
    }
    // SAFETY: `words` holds a file_handle of the length it says.
    let fd = unsafe {
        libc::open_by_handle_at(
            dir.as_raw_fd(),
            words.as_mut_ptr().cast::<libc::file_handle>(),
            libc::O_PATH | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor just opened, owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let rel = link.strip_prefix(mount_point).ok()?;
    Some(format!("/{}", rel.display()))
}

/// The ext2/3/4 mounts to watch: those at the mount points wanted, or
/// all of them; one per device.
fn wanted_mounts(wanted: &[PathBuf]) -> Vec<Mount> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for m in online::mounts() {
        if !matches!(m.fstype.as_str(), "ext2" | "ext3" | "ext4") || seen.contains(&m.devno) {
            continue;
        }
        if wanted.is_empty() || wanted.contains(&m.mount_point) {
            seen.push(m.devno);
            out.push(m);
        }
    }
    out
}

/// Starts `ext4chk --online` on one file system.
fn spawn_check(
    inv: &Invocation,
    w: &Watch,
    mount: &Path,
    cause: Cause,
) -> std::io::Result<Running> {
    let exe = std::env::current_exe()?;
    let mut c = Command::new(exe);
    c.args(["--online", "--format", "json", "--max-freeze"])
        .arg(w.max_freeze_ms.to_string())
        .arg("--threads")
        .arg(if inv.threads.1 {
            "auto".to_string()
        } else {
            inv.threads.0.to_string()
        });
    match cause {
        // After the kernel's error, a clean outcome is not recorded as a
        // check (the kernel's error state asks for one at boot).
        Cause::Event => c.arg("--keep-fsck-times"),
        Cause::Schedule => c.arg("--nice"),
    };
    c.arg(mount)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: prctl is async-signal-safe; the check dies with the watch
    // (its watchdog then thaws what it froze).
    unsafe {
        c.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c.spawn()?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    Ok(Running {
        child,
        stdout,
        stderr,
        started: Instant::now(),
        cause,
        events: 0,
        first_event: None,
    })
}

/// Names a finding's inode or directory by the path an event gave, where
/// the check could not name it.
fn name_from_events(f: &mut Map<String, Value>, named: &HashMap<u32, String>) {
    for (ino, path) in [("ino", "ino_path"), ("dir", "dir_path")] {
        let known = f
            .get(ino)
            .and_then(Value::as_u64)
            .and_then(|i| named.get(&u32::try_from(i).ok()?));
        if let (Some(p), false) = (known, f.contains_key(path)) {
            f.insert(path.into(), p.clone().into());
        }
    }
}

/// Runs `--on-error` with the report on its standard input.
fn on_error(command: &str, report: &[u8], w: &Watched) {
    let child = Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .env("EXT4CHK_MOUNT", &w.mount.mount_point)
        .env("EXT4CHK_DEVICE", &w.device)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn();
    if let Ok(mut child) = child {
        let report = report.to_vec();
        std::thread::spawn(move || {
            if let Some(mut i) = child.stdin.take() {
                let _ = i.write_all(&report);
            }
            let _ = child.wait();
        });
    }
}

/// The watch.
struct Watcher<'a> {
    inv: &'a Invocation,
    w: &'a Watch,
    fan: OwnedFd,
    log: Log,
    wanted: Vec<PathBuf>,
    fs: HashMap<(u32, u32), Watched>,
}

impl Watcher<'_> {
    /// Watches what the mount table now has, and lets go of what left it.
    fn follow_mounts(&mut self, at_start: bool) -> Result<(), (i32, String)> {
        let now_mounted = wanted_mounts(&self.wanted);
        let gone: Vec<(u32, u32)> = self
            .fs
            .iter()
            .filter(|(_, w)| !now_mounted.iter().any(|m| m.id == w.mount.id))
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            if let Some(mut w) = self.fs.remove(&k) {
                if let Some(r) = w.running.as_mut() {
                    let _ = r.child.kill();
                    let _ = r.child.wait();
                }
                let mut f = fs_fields(&w);
                f.insert("state".into(), "unmounted".into());
                self.log.record("watch", f);
            }
        }
        for m in now_mounted {
            if self.fs.contains_key(&m.devno) {
                continue;
            }
            let device = online::device_node(m.devno).map_or_else(
                || format!("{}:{}", m.devno.0, m.devno.1),
                |p| p.display().to_string(),
            );
            let marked = mark(&self.fan, &m.mount_point).and_then(|()| fsid_of(&m.mount_point));
            let fsid = match marked {
                Ok(f) => f,
                Err(e) if at_start && e.raw_os_error() == Some(libc::EINVAL) => {
                    return Err((
                        NO_FS_ERROR,
                        "this kernel does not report file system errors to fanotify (FAN_FS_ERROR, Linux 5.16 and later)".into(),
                    ));
                }
                Err(e) => {
                    self.log.record(
                        "error",
                        obj(json!({
                            "mount": m.mount_point.display().to_string(),
                            "device": device,
                            "message": format!("cannot watch {}: {e}", m.mount_point.display()),
                        })),
                    );
                    continue;
                }
            };
            let w = Watched {
                next_scrub: self.w.every.map(|d| Instant::now() + d),
                mount: m.clone(),
                device,
                fsid,
                pace: Pace::default(),
                running: None,
                named: HashMap::new(),
            };
            let mut f = fs_fields(&w);
            f.insert("state".into(), "watching".into());
            self.log.record("watch", f);
            self.fs.insert(m.devno, w);
        }
        Ok(())
    }

    /// Reads what the kernel sent.
    fn read_events(&mut self) -> Result<(), String> {
        let mut buf = vec![0u8; 16 << 10];
        loop {
            // SAFETY: reading into a buffer of the length given.
            let n = unsafe {
                libc::read(
                    self.fan.as_raw_fd(),
                    buf.as_mut_ptr().cast::<libc::c_void>(),
                    buf.len(),
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(()),
                    _ => Err(format!("reading the kernel's events: {e}")),
                };
            }
            if n == 0 {
                return Ok(());
            }
            let now = Instant::now();
            for d in parse_events(&buf[..n as usize]) {
                match d {
                    Delivered::Overflow => {
                        // Lost events: every file system is checked.
                        self.log.record(
                            "error",
                            obj(json!({"message": "the kernel's event queue overflowed: events were lost; every watched file system is checked"})),
                        );
                        for w in self.fs.values_mut() {
                            w.pace.event(now);
                        }
                    }
                    Delivered::Error(e) => self.event(&e, now),
                }
            }
        }
    }

    /// One error the kernel reported.
    fn event(&mut self, e: &FsError, now: Instant) {
        let min = self.w.min_interval;
        let Some(w) = self.fs.values_mut().find(|w| w.fsid == e.fsid) else {
            self.log.record(
                "event",
                obj(json!({
                    "mount": null, "device": null, "error": e.error,
                    "error_name": error_name(e.error), "errors": e.count,
                    "inode": e.inode().map(|i| i.0), "path": null, "check": "none",
                })),
            );
            return;
        };
        w.pace.event(now);
        let path = e
            .handle
            .as_ref()
            .and_then(|(k, b)| path_of(&w.mount.mount_point, *k, b));
        let check = match (&w.running, w.pace.next(now, min)) {
            (Some(_), _) => "after-running".to_string(),
            (None, Some(t)) if t <= now => "now".to_string(),
            (None, Some(t)) => format!("in {} s", (t - now).as_secs()),
            (None, None) => "none".to_string(),
        };
        if let (Some((ino, _)), Some(p)) = (e.inode(), &path) {
            w.named.insert(ino, p.clone());
        }
        let mut f = fs_fields(w);
        f.extend(obj(json!({
            "error": e.error,
            "error_name": error_name(e.error),
            "errors": e.count,
            "inode": e.inode().map(|i| i.0),
            "generation": e.inode().map(|i| i.1),
            "path": path,
            "check": check,
        })));
        self.log.record("event", f);
    }

    /// Starts the checks that are due.
    fn start_due(&mut self) {
        let now = Instant::now();
        let keys: Vec<(u32, u32)> = self.fs.keys().copied().collect();
        for k in keys {
            let Some(w) = self.fs.get_mut(&k) else {
                continue;
            };
            if w.running.is_some() {
                continue;
            }
            let cause = if w
                .pace
                .next(now, self.w.min_interval)
                .is_some_and(|t| t <= now)
            {
                Cause::Event
            } else if w.next_scrub.is_some_and(|t| t <= now) {
                Cause::Schedule
            } else {
                continue;
            };
            match spawn_check(self.inv, self.w, &w.mount.mount_point, cause) {
                Ok(mut r) => {
                    if cause == Cause::Event {
                        (r.events, r.first_event) = w.pace.start(now);
                    } else {
                        w.next_scrub = self.w.every.map(|d| now + d);
                    }
                    w.running = Some(r);
                }
                Err(e) => {
                    let mut f = fs_fields(w);
                    f.insert(
                        "message".into(),
                        format!("cannot start a check: {e}").into(),
                    );
                    self.log.record("error", f);
                    if cause == Cause::Event {
                        w.pace.start(now);
                    } else {
                        w.next_scrub = self.w.every.map(|d| now + d);
                    }
                }
            }
        }
    }

    /// Reports the checks that ended.
    fn reap(&mut self) {
        let keys: Vec<(u32, u32)> = self.fs.keys().copied().collect();
        for k in keys {
            let Some(w) = self.fs.get_mut(&k) else {
                continue;
            };
            let ended = match w.running.as_mut().map(|r| r.child.try_wait()) {
                Some(Ok(Some(status))) => status,
                _ => continue,
            };
            let Some(r) = w.running.take() else {
                continue;
            };
            let out = r.stdout.join().unwrap_or_default();
            let err = r.stderr.join().unwrap_or_default();
            let code = ended.code().unwrap_or(-1);
            let report: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
            let w = &*w;
            let result = match code {
                0 => "clean",
                6 => "damage",
                32 => "interrupted",
                8 if report["online"].is_object() => "unconfirmed",
                _ => "failed",
            };
            let mut f = fs_fields(w);
            f.extend(obj(json!({
                "cause": r.cause.name(),
                "events": r.events,
                "result": result,
                "exit_code": code,
                "seconds": r.started.elapsed().as_secs_f64(),
                "since_event_seconds": r.first_event.map(|t| t.elapsed().as_secs_f64()),
                "findings": report["findings"].as_array().map_or(0, Vec::len),
                "freezes": report["online"]["freezes"],
                "freeze_longest_ms": report["online"]["freeze_longest_ms"],
            })));
            self.log.record("check", f);
            if result == "failed" {
                let message = report["error"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| {
                        String::from_utf8_lossy(&err)
                            .lines()
                            .next()
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| format!("the check ended with status {ended}"));
                let mut f = fs_fields(w);
                f.insert("message".into(), message.into());
                self.log.record("error", f);
            }
            if result == "damage" {
                for finding in report["findings"].as_array().into_iter().flatten() {
                    let mut f = fs_fields(w);
                    f.extend(obj(finding.clone()));
                    name_from_events(&mut f, &w.named);
                    self.log.record("finding", f);
                }
                if let Some(cmd) = &self.w.on_error {
                    on_error(cmd, &out, w);
                }
            }
        }
    }

    /// Ends the checks that run (they thaw what they froze).
    fn stop(&mut self) {
        for w in self.fs.values_mut() {
            if let Some(r) = w.running.as_mut() {
                // SAFETY: a signal to our own child.
                unsafe { libc::kill(r.child.id() as i32, libc::SIGTERM) };
            }
        }
        for w in self.fs.values_mut() {
            if let Some(r) = w.running.as_mut() {
                let _ = r.child.wait();
            }
        }
        self.reap();
        let mut ended: Vec<&Watched> = self.fs.values().collect();
        ended.sort_by(|a, b| a.mount.mount_point.cmp(&b.mount.mount_point));
        for w in ended {
            let mut f = fs_fields(w);
            f.insert("state".into(), "stopped".into());
            self.log.record("watch", f);
        }
    }
}

/// `ext4chk --watch [MOUNTPOINT...]`: returns its exit code.
pub fn run(inv: &Invocation, w: &Watch) -> i32 {
    let refuse = |code: i32, why: String| {
        errln!("{}: {why}", inv.prog);
        code
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return refuse(
            NOT_ROOT,
            "--watch needs root: it listens to the kernel's file system errors and freezes file systems to check them".into(),
        );
    }
    let mut wanted = Vec::new();
    for m in &w.mounts {
        let canon = std::fs::canonicalize(m).unwrap_or_else(|_| PathBuf::from(m));
        match online::mounts()
            .into_iter()
            .rev()
            .find(|x| x.mount_point == canon)
        {
            Some(x) if matches!(x.fstype.as_str(), "ext2" | "ext3" | "ext4") => {
                wanted.push(canon);
            }
            Some(x) => {
                return refuse(
                    NOT_EXT,
                    format!("{m} is a {} mount, not ext2/3/4", x.fstype),
                )
            }
            None => return refuse(NOT_EXT, format!("{m} is not a mount point")),
        }
    }
    // SAFETY: fanotify_init takes flags only.
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK | libc::FAN_REPORT_FID,
            (libc::O_RDONLY | libc::O_LARGEFILE) as libc::c_uint,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EPERM) => refuse(NOT_ROOT, format!("--watch needs CAP_SYS_ADMIN: {e}")),
            Some(libc::EINVAL) => refuse(
                NO_FS_ERROR,
                "this kernel does not report file system errors to fanotify (FAN_FS_ERROR, Linux 5.16 and later)".into(),
            ),
            _ => refuse(OPERATIONAL, format!("fanotify: {e}")),
        };
    }
    // SAFETY: a descriptor just made, owned here.
    let fan = unsafe { OwnedFd::from_raw_fd(fd) };
    let log = match Log::open(w.log.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            let p = w.log.as_deref().unwrap_or(Path::new("-"));
            return refuse(OPERATIONAL, format!("{}: {e}", p.display()));
        }
    };
    if let Err(e) = fixer::safety::install_interrupt_handler() {
        return refuse(OPERATIONAL, format!("cannot handle signals: {e}"));
    }
    let mut watcher = Watcher {
        inv,
        w,
        fan,
        log,
        wanted,
        fs: HashMap::new(),
    };
    if let Err((code, why)) = watcher.follow_mounts(true) {
        return refuse(code, why);
    }
    let mut code = STOPPED;
    while !fixer::safety::interrupted() && !watcher.log.closed {
        let mut pfd = libc::pollfd {
            fd: watcher.fan.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, TICK.as_millis() as libc::c_int) };
        if n > 0 {
            if let Err(why) = watcher.read_events() {
                errln!("{}: {why}", inv.prog);
                code = OPERATIONAL;
                break;
            }
        }
        watcher.reap();
        if let Err((c, why)) = watcher.follow_mounts(false) {
            errln!("{}: {why}", inv.prog);
            code = c;
            break;
        }
        watcher.start_due();
    }
    watcher.stop();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event as the kernel delivered it for a directory block that
    /// failed its checksum (inode 12): the metadata, the FID record and
    /// the error record.
    fn captured() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&64u32.to_ne_bytes());
        b.extend_from_slice(&[METADATA_VERSION, 0]);
        b.extend_from_slice(&24u16.to_ne_bytes());
        b.extend_from_slice(&libc::FAN_FS_ERROR.to_ne_bytes());
        b.extend_from_slice(&(-1i32).to_ne_bytes());
        b.extend_from_slice(&0i32.to_ne_bytes());
        // FID: header, fsid, handle (8 bytes, type 1: ino 12, gen).
        b.extend_from_slice(&[INFO_FID, 0]);
        b.extend_from_slice(&28u16.to_ne_bytes());
        b.extend_from_slice(&1_105_365_060i32.to_ne_bytes());
        b.extend_from_slice(&214_031_092i32.to_ne_bytes());
        b.extend_from_slice(&8u32.to_ne_bytes());
        b.extend_from_slice(&1i32.to_ne_bytes());
        b.extend_from_slice(&12u32.to_ne_bytes());
        b.extend_from_slice(&0x1f12_2886u32.to_ne_bytes());
        // Error: header, error, count.
        b.extend_from_slice(&[INFO_ERROR, 0]);
        b.extend_from_slice(&12u16.to_ne_bytes());
        b.extend_from_slice(&74i32.to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes());
        assert_eq!(b.len(), 64);
        b
    }

    #[test]
    fn an_error_event_is_read_with_its_inode() {
        let mut two = captured();
        two.extend(captured());
        let got = parse_events(&two);
        assert_eq!(got.len(), 2);
        let Delivered::Error(e) = &got[0] else {
            panic!("{got:?}");
        };
        assert_eq!(e.fsid, [1_105_365_060, 214_031_092]);
        assert_eq!((e.error, e.count), (74, 1));
        assert_eq!(e.inode(), Some((12, 0x1f12_2886)));
        assert_eq!(error_name(e.error), "EFSBADCRC");
    }

    #[test]
    fn a_short_or_foreign_record_ends_the_read() {
        let full = captured();
        for cut in 0..full.len() {
            assert!(parse_events(&full[..cut]).is_empty(), "cut at {cut}");
        }
        let mut wrong = captured();
        wrong[4] = 2;
        assert!(parse_events(&wrong).is_empty());
        // A record length of 0 inside the event stops the info walk.
        let mut zero = captured();
        zero[26] = 0;
        zero[27] = 0;
        let got = parse_events(&zero);
        assert_eq!(
            got,
            vec![Delivered::Error(FsError {
                fsid: [0, 0],
                error: 0,
                count: 0,
                handle: None
            })]
        );
    }

    #[test]
    fn an_overflow_is_reported() {
        let mut b = captured();
        b[8..16].copy_from_slice(&FAN_Q_OVERFLOW.to_ne_bytes());
        assert_eq!(parse_events(&b), vec![Delivered::Overflow]);
    }

    #[test]
    fn checks_are_paced_by_the_interval() {
        let t0 = Instant::now();
        let min = Duration::from_secs(600);
        let mut p = Pace::default();
        assert_eq!(p.next(t0, min), None);
        p.event(t0);
        assert_eq!(p.next(t0, min), Some(t0));
        assert_eq!(p.start(t0), (1, Some(t0)));
        assert_eq!(p.next(t0, min), None);
        let t1 = t0 + Duration::from_secs(5);
        p.event(t1);
        p.event(t1 + Duration::from_secs(1));
        assert_eq!(p.next(t1, min), Some(t0 + min));
        let t2 = t0 + min;
        assert_eq!(p.next(t2, min), Some(t2));
        assert_eq!(p.start(t2), (2, Some(t1)));
    }

    #[test]
    fn findings_without_a_path_are_named_by_the_event() {
        let named = HashMap::from([(2050, "/cold/d".to_string())]);
        let mut f = obj(json!({"dir": 2050, "code": "dir-corrupted"}));
        name_from_events(&mut f, &named);
        assert_eq!(f["dir_path"], "/cold/d");
        let mut g = obj(json!({"ino": 2050, "ino_path": "/elsewhere", "dir": 7}));
        name_from_events(&mut g, &named);
        assert_eq!(g["ino_path"], "/elsewhere");
        assert!(!g.contains_key("dir_path"));
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_960_800_123);
        assert_eq!(rfc3339(t), "2026-11-29T14:00:00.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }
}
