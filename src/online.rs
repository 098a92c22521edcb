//! `ext4chk --online`: a read-only check of a mounted ext2/3/4 file
//! system that stays in use.
//!
//! The check reads the block device through the page cache, where the
//! kernel's metadata buffers live, so it sees what the kernel has written
//! so far; every block it reads is recorded. A live file system changes
//! while it is read, so a finding may be a change caught half way. When
//! the live check finds errors, the file system is frozen (FIFREEZE: the
//! kernel commits its journal and writes its metadata back), the recorded
//! blocks are taken, and it is thawed; what was taken is one consistent
//! state, and a second check of that state decides. Blocks are taken as
//! copies within a budget and as 64-bit sums past it (`sums`), so that
//! memory stays bounded on a large file system: the second check reads a
//! summed block from the device and uses it while it still has its sum.
//! Blocks the second check needs and the state lacks, or that changed
//! after the thaw, are copied in another freeze. Every freeze is bounded
//! (`--max-freeze`); a watchdog process thaws the file system if ext4chk
//! dies or the limit passes. Nothing is written to the device; the
//! outcome is recorded as e2scrub records it (tune2fs).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use check_core::problem::{Code, Finding, Severity};
use check_core::Report;
use pipeline::{open_device, IoMode, Overlay, Target};

use crate::cli::Invocation;

mod log;
mod sums;

use sums::{join, sum, sum_ranges, Sums};

/// e2scrub's exit codes.
const CLEAN: i32 = 0;
const CORRUPT: i32 = 6;
const OPERATIONAL: i32 = 8;

/// How many freezes one check may take to gather a consistent copy.
const MAX_FREEZES: usize = 8;
/// Tries of the live check when one stops short.
const LIVE_TRIES: usize = 3;

/// `_IOWR('X', 119, int)` and `_IOWR('X', 120, int)`.
const FIFREEZE: libc::c_ulong = 0xC004_5877;
const FITHAW: libc::c_ulong = 0xC004_5878;

/// A mounted file system, as /proc/self/mountinfo gives it.
#[derive(Clone, Debug)]
pub(crate) struct Mount {
    /// The mount's id (a new one for each mount, also of the same device).
    pub id: u32,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The file system type.
    pub fstype: String,
    /// The device number (major, minor).
    pub devno: (u32, u32),
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let esc = (b[i] == b'\\')
            .then(|| s.get(i + 1..i + 4))
            .flatten()
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match esc {
            Some(v) => {
                out.push(v);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mounts of this mount namespace.
pub(crate) fn mounts() -> Vec<Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let (maj, min) = f.get(2)?.split_once(':')?;
            let r: Vec<&str> = right.split(' ').collect();
            Some(Mount {
                id: f.first()?.parse().ok()?,
                mount_point: PathBuf::from(unescape(f.get(4)?)),
                fstype: (*r.first()?).to_string(),
                devno: (maj.parse().ok()?, min.parse().ok()?),
            })
        })
        .collect()
}

/// The mount a path names: a mount point, or a mounted block device.
fn find_mount(path: &Path) -> Result<Mount, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let all = mounts();
    if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        let devno = (
            ((rdev >> 8) & 0xfff) as u32 | ((rdev >> 32) & !0xfff) as u32,
            ((rdev & 0xff) | ((rdev >> 12) & !0xff)) as u32,
        );
        return all
            .into_iter()
            .rev()
            .find(|m| m.devno == devno)
            .ok_or_else(|| {
                format!(
                    "{} is not mounted; check it with ext4chk {}",
                    path.display(),
                    path.display()
                )
            });
    }
    let canon = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    all.into_iter()
        .rev()
        .find(|m| m.mount_point == canon)
        .ok_or_else(|| format!("{} is not a mount point", path.display()))
}

/// The device node of a device number.
pub(crate) fn device_node(devno: (u32, u32)) -> Option<PathBuf> {
    let uevent =
        std::fs::read_to_string(format!("/sys/dev/block/{}:{}/uevent", devno.0, devno.1)).ok()?;
    let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
    Some(Path::new("/dev").join(name))
}

/// Block ranges read by a check, as (offset, length), joined as they
/// come in so that what it holds stays near the number of runs read, not
/// the number of reads.
#[derive(Default)]
struct Recorder {
    ranges: Mutex<(Vec<(u64, u64)>, usize)>,
}

impl Recorder {
    fn note(&self, offset: u64, len: usize) {
        if let Ok(mut g) = self.ranges.lock() {
            let (v, join_at) = &mut *g;
            v.push((offset, len as u64));
            if v.len() > (*join_at).max(1 << 16) {
                join(v);
                *join_at = v.len() * 2;
            }
        }
    }

    /// The ranges, sorted and joined.
    fn merged(&self) -> Vec<(u64, u64)> {
        let mut v = self.ranges.lock().map(|g| g.0.clone()).unwrap_or_default();
        join(&mut v);
        v
    }
}

impl Overlay for Recorder {
    fn covers(&self, offset: u64, len: usize) -> bool {
        self.note(offset, len);
        false
    }

    fn patch(&self, offset: u64, buf: &mut [u8]) {
        self.note(offset, buf.len());
    }
}

/// A copy of part of the device: some blocks' bytes, and the sums of
/// others (see `sums`), which hold 8 bytes a block where a copy holds the
/// block.
#[derive(Default)]
struct Layer {
    /// Start offset -> bytes.
    blocks: BTreeMap<u64, Vec<u8>>,
    sums: Sums,
}

/// The ranges of `map` overlapping `[offset, offset + len)`.
fn overlapping(
    map: &BTreeMap<u64, Vec<u8>>,
    offset: u64,
    len: u64,
) -> impl Iterator<Item = (&u64, &Vec<u8>)> {
    let end = offset + len;
    let first = map.range(..=offset).next_back().map_or(offset, |(&s, _)| s);
    map.range(first..end)
        .filter(move |(&s, b)| s + b.len() as u64 > offset)
}

impl Layer {
    /// Bytes of `[offset, offset + len)` the copied blocks hold.
    fn covered(&self, offset: u64, len: u64) -> u64 {
        let end = offset + len;
        let mut total = 0;
        let mut reach = offset;
        for (&s, b) in overlapping(&self.blocks, offset, len) {
            let a = s.max(reach);
            let b = (s + b.len() as u64).min(end);
            if b > a {
                total += b - a;
                reach = b;
            }
        }
        total
    }

    /// Copies what the copied blocks hold of `[offset, offset +
    /// buf.len())` into `buf`.
    fn copy_into(&self, offset: u64, buf: &mut [u8]) {
        let len = buf.len() as u64;
        for (&s, b) in overlapping(&self.blocks, offset, len) {
            let from = s.max(offset);
            let to = (s + b.len() as u64).min(offset + len);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&b[(from - s) as usize..(to - s) as usize]);
        }
    }
}

/// The frozen state, laid over the device: what was taken while the file
/// system was frozen (`top`), over what was taken while it ran (`under`:
/// blocks the journal says did not change since). Copied blocks are
/// served from the copy. A summed block is served from the device when
/// its bytes still have the sum. A block that changed since, or one that
/// neither layer holds, is recorded as a miss.
struct Snapshot {
    top: Layer,
    under: Arc<Layer>,
    /// The unit of the sums (the file system's block size).
    unit: u64,
    /// The device, to read the whole of a summed block a read covers in
    /// part.
    dev: Option<File>,
    misses: Recorder,
    missed: AtomicU64,
}

/// Where the bytes of one unit of a read come from.
enum Source {
    /// A copy holds all of it.
    Copy,
    /// The device, if the unit still has this sum; `true` when the sum
    /// was taken frozen (then the running copy's bytes are older).
    Sum(u64, bool),
    /// Neither layer holds it.
    Nothing,
}

impl Snapshot {
    fn miss(&self, offset: u64, len: u64) {
        if len > 0 {
            self.misses.note(offset, len as usize);
            self.missed.fetch_add(len, Ordering::Relaxed);
        }
    }

    /// Where `[a, b)`, within one unit, comes from.
    fn source(&self, a: u64, b: u64) -> Source {
        let start = a / self.unit * self.unit;
        if self.top.covered(a, b - a) == b - a {
            return Source::Copy;
        }
        if let Some(s) = self.top.sums.get(start) {
            return Source::Sum(s, true);
        }
        if self.under.covered(a, b - a) + self.top.covered(a, b - a) >= b - a {
            return Source::Copy;
        }
        match self.under.sums.get(start) {
            Some(s) => Source::Sum(s, false),
            None => Source::Nothing,
        }
    }

    /// The units of `[offset, end)`, each as `[a, b)` within it.
    fn units(&self, offset: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let unit = self.unit;
        let first = offset / unit * unit;
        (first..end)
            .step_by(unit as usize)
            .map(move |u| (u.max(offset), (u + unit).min(end)))
    }
}

impl Overlay for Snapshot {
    fn covers(&self, offset: u64, len: usize) -> bool {
        // Reads this answers true for are judged in `patch`; the others
        // are misses.
        let end = offset + len as u64;
        let held = self
            .units(offset, end)
            .any(|(a, b)| !matches!(self.source(a, b), Source::Nothing))
            || self.top.covered(offset, len as u64) > 0
            || self.under.covered(offset, len as u64) > 0;
        if !held {
            self.miss(offset, len as u64);
        }
        held
    }

    fn patch(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        let mut whole = Vec::new();
        for (a, b) in self.units(offset, end) {
            let part = &mut buf[(a - offset) as usize..(b - offset) as usize];
            let source = self.source(a, b);
            match source {
                Source::Copy => {}
                Source::Nothing => {
                    let have = self.under.covered(a, b - a).max(self.top.covered(a, b - a));
                    self.miss(a, b - a - have);
                }
                Source::Sum(want, _) => {
                    let start = a / self.unit * self.unit;
                    let ok = if b - a == self.unit {
                        sum(part) == want
                    } else {
                        // Part of a block: its sum is of the whole block.
                        whole.resize(self.unit as usize, 0);
                        let read = self
                            .dev
                            .as_ref()
                            .is_some_and(|d| d.read_exact_at(&mut whole, start).is_ok());
                        let ok = read && sum(&whole) == want;
                        if ok {
                            part.copy_from_slice(
                                &whole[(a - start) as usize..(b - start) as usize],
                            );
                        }
                        ok
                    };
                    if !ok {
                        self.miss(a, b - a);
                    }
                }
            }
            // Copied bytes win over sums of their own layer or below:
            // the running copy's, then the frozen one's.
            if !matches!(source, Source::Sum(_, true)) {
                self.under.copy_into(a, part);
            }
            self.top.copy_into(a, part);
        }
    }
}

/// The watchdog: a process of its own that thaws the file system when
/// ext4chk dies while it is frozen, or when a freeze outlives its limit.
/// It reads one byte per event on its standard input: `F` (frozen from
/// now), `T` (thawed); the end of its input is ext4chk's end.
struct Watchdog {
    child: Child,
    tell: ChildStdin,
}

impl Watchdog {
    fn start(mount_point: &Path, limit_ms: u64) -> std::io::Result<Watchdog> {
        let mut child = Command::new("/proc/self/exe")
            .arg("--online-watchdog")
            .arg(mount_point)
            .arg(limit_ms.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let tell = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no pipe to the watchdog"))?;
        Ok(Watchdog { child, tell })
    }

    fn say(&mut self, b: u8) -> std::io::Result<()> {
        self.tell.write_all(&[b])?;
        self.tell.flush()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.say(b'Q');
        let _ = self.child.wait();
    }
}

/// The watchdog process (`ext4chk --online-watchdog MOUNT LIMIT_MS`).
pub fn watchdog(mount_point: &str, limit_ms: &str) -> i32 {
    let Ok(dir) = File::open(mount_point) else {
        return OPERATIONAL;
    };
    let limit = Duration::from_millis(limit_ms.parse().unwrap_or(200));
    let thaw = || {
        // SAFETY: an ioctl on a descriptor we own; FITHAW takes no
        // argument it writes through.
        unsafe { libc::ioctl(dir.as_raw_fd(), FITHAW as _, 0) };
    };
    let mut frozen_at: Option<Instant> = None;
    let stdin = std::io::stdin();
    let fd = stdin.as_raw_fd();
    loop {
        let wait_ms = match frozen_at {
            Some(t) => limit.saturating_sub(t.elapsed()).as_millis() as i32,
            None => 1000,
        };
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, wait_ms.max(0)) };
        if n == 0 {
            if frozen_at.take().is_some() {
                thaw();
            }
            continue;
        }
        // One byte, unbuffered: a buffered read would take the bytes that
        // follow too, and poll would not see them again.
        let mut b = [0u8; 1];
        // SAFETY: a read of one byte into a buffer of one byte.
        let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        let got = if n == 1 { Ok(1) } else { Err(()) };
        match got {
            Ok(1) if b[0] == b'F' => frozen_at = Some(Instant::now()),
            Ok(1) if b[0] == b'T' => frozen_at = None,
            Ok(1) if b[0] == b'Q' => return CLEAN,
            Ok(_) => {}
            // ext4chk is gone: whatever it was doing, thaw.
            _ => {
                if frozen_at.is_some() {
                    thaw();
                }
                return CLEAN;
            }
        }
    }
}

/// One freeze's length.
struct Freezes {
    lengths: Vec<Duration>,
    /// Bytes copied or summed under them.
    bytes: u64,
    /// The copies were the journal's changes over a running copy.
    from_journal: bool,
}

/// What a freeze gave.
#[derive(Debug, PartialEq)]
enum Copy {
    /// The copy is in.
    Taken,
    /// The limit passed first; the copy is not used.
    TooLong,
    /// The journal could not say what changed; nothing is used.
    NoLog,
}

/// What was taken of the blocks the live check read while the file system
/// ran, and the journal's position when it began.
type Running = (Arc<Layer>, log::Mark);

/// Bytes of a copy held as bytes; past them, blocks are held as sums.
/// A file system whose metadata fits is copied whole, as before sums
/// were kept; a larger one costs 8 bytes a block beyond it.
const COPY_BUDGET: u64 = 16 << 20;

/// `COPY_BUDGET`, or what `EXT4CHK_ONLINE_COPY_BYTES` says (for tests:
/// 0 takes every block as a sum).
fn copy_budget() -> u64 {
    std::env::var("EXT4CHK_ONLINE_COPY_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(COPY_BUDGET)
}

/// What a freeze takes: blocks to copy, and blocks to take as a `Layer`
/// (copied within `COPY_BUDGET`, summed past it).
struct Want<'a> {
    bytes: &'a [(u64, u64)],
    all: &'a [(u64, u64)],
    /// The unit of the sums (the file system's block size).
    unit: u64,
}

/// Takes `ranges` of the device: the first `budget` bytes of them
/// copied, the rest as sums of whole units. False when the deadline
/// (`(start, limit)`) passed first.
fn take(
    dev: &File,
    ranges: &[(u64, u64)],
    unit: u64,
    budget: u64,
    deadline: Option<(Instant, Duration)>,
) -> (Layer, bool) {
    let mut copied = Vec::new();
    let mut summed = Vec::new();
    let mut left = budget / unit * unit;
    for &(o, l) in ranges {
        // Whole units: a unit is copied or summed, never split.
        let (a, b) = (o / unit * unit, (o + l).div_ceil(unit) * unit);
        if left >= b - a {
            copied.push((o, l));
            left -= b - a;
        } else if left > 0 {
            let cut = a + left;
            copied.push((o, cut - o));
            summed.push((cut, o + l - cut));
            left = 0;
        } else {
            summed.push((o, l));
        }
    }
    let (blocks, in_time) = copy_pieces(dev, &copied, deadline);
    if !in_time {
        return (Layer::default(), false);
    }
    let (sums, in_time) = sum_ranges(dev, &summed, unit, deadline);
    (Layer { blocks, sums }, in_time)
}

/// Freezes the file system, copies `want.bytes` of the device and takes
/// `want.all` (see `take`), and thaws it, within `limit`. With
/// `changes`, the blocks the journal says changed since the mark are
/// copied too, and the superblock (which ext4 writes outside the
/// journal).
#[allow(clippy::too_many_arguments)]
fn freeze_and_copy(
    dir: &File,
    dog: &mut Watchdog,
    dev: &File,
    want: &Want<'_>,
    into: &mut Layer,
    limit: Duration,
    freezes: &mut Freezes,
    changes: Option<(&log::Journal, log::Mark)>,
) -> Result<Copy, String> {
    let hold = std::env::var("EXT4CHK_ONLINE_HOLD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    dog.say(b'F')
        .map_err(|e| format!("the watchdog is gone: {e}"))?;
    // SAFETY: an ioctl on a descriptor we own.
    let r = unsafe { libc::ioctl(dir.as_raw_fd(), FIFREEZE as _, 0) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        let _ = dog.say(b'T');
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                "may not freeze the file system (it needs CAP_SYS_ADMIN)".into()
            }
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => {
                format!("the file system cannot be frozen: {e}")
            }
            Some(libc::EBUSY) => "the file system is already frozen".into(),
            _ => format!("cannot freeze the file system: {e}"),
        });
    }
    let budget = copy_budget();
    let t = Instant::now();
    let mut wanted: Vec<(u64, u64)> = want.bytes.to_vec();
    let mut no_log = false;
    if let Some((j, mark)) = changes {
        match j.changed_since(dev, &mark) {
            Some(blocks) => {
                wanted.push((0, j.offset(1).max(2048)));
                wanted.extend(blocks.iter().map(|&b| (j.offset(b), j.offset(1))));
            }
            None => no_log = true,
        }
    }
    let (copied, mut layer, in_time) = if no_log {
        (BTreeMap::new(), Layer::default(), true)
    } else {
        let (copied, in_time) = copy_pieces(dev, &wanted, Some((t, limit)));
        let (layer, taken_in_time) = if in_time {
            take(dev, want.all, want.unit, budget, Some((t, limit)))
        } else {
            (Layer::default(), false)
        };
        (copied, layer, in_time && taken_in_time)
    };
    if let Some(h) = hold {
        std::thread::sleep(h);
    }
    // SAFETY: an ioctl on a descriptor we own.
    unsafe { libc::ioctl(dir.as_raw_fd(), FITHAW as _, 0) };
    let took = t.elapsed();
    let _ = dog.say(b'T');
    freezes.lengths.push(took);
    freezes.bytes += copied
        .values()
        .chain(layer.blocks.values())
        .map(|b: &Vec<u8>| b.len() as u64)
        .sum::<u64>()
        + layer.sums.len() as u64 * layer.sums.unit();
    if no_log {
        Ok(Copy::NoLog)
    } else if in_time && took <= limit {
        // Both were read in this freeze: where two pieces start at the
        // same place, the longer is kept.
        for (at, b) in copied {
            let e = layer.blocks.entry(at).or_default();
            if b.len() > e.len() {
                *e = b;
            }
        }
        *into = layer;
        Ok(Copy::Taken)
    } else {
        Ok(Copy::TooLong)
    }
}

/// Copies `ranges` of the device in pieces of at most 1 MiB, so that a
/// deadline (`(start, limit)`) is seen in time; false if it passed first.
fn copy_pieces(
    dev: &File,
    ranges: &[(u64, u64)],
    deadline: Option<(Instant, Duration)>,
) -> (BTreeMap<u64, Vec<u8>>, bool) {
    const PIECE: u64 = 1 << 20;
    let mut out = BTreeMap::new();
    let mut ranges = ranges.to_vec();
    join(&mut ranges);
    for (o, l) in ranges {
        let mut at = o;
        while at < o + l {
            if deadline.is_some_and(|(t, limit)| t.elapsed() >= limit) {
                return (out, false);
            }
            let n = PIECE.min(o + l - at);
            let mut b = vec![0u8; n as usize];
            if dev.read_exact_at(&mut b, at).is_ok() {
                out.insert(at, b);
            }
            at += n;
        }
    }
    (out, true)
}

/// The file system's block size, from the superblock on `dev` (the unit
/// sums are kept in); 4 KiB when it cannot be read.
fn block_size(dev: &File) -> u64 {
    let mut b = [0u8; 4];
    match dev.read_exact_at(&mut b, 1024 + 24) {
        Ok(()) if u32::from_le_bytes(b) <= 6 => 1024 << u32::from_le_bytes(b),
        _ => 4096,
    }
}

/// Findings a live file system shows that say nothing about damage: its
/// orphans (files deleted while open, truncations in flight), which the
/// kernel releases itself, and what a mounted journal and lazily kept
/// counts look like.
fn expected_live(f: &Finding, orphans: &[u32]) -> bool {
    if f.ino.is_some_and(|i| orphans.contains(&i)) {
        return true;
    }
    matches!(
        f.code,
        Code::FreeBlocksTotal
            | Code::FreeInodesTotal
            | Code::OrphanBlockDirty
            | Code::OrphanFileCorrupted
            | Code::OrphanPresentCleanFile
            | Code::OrphanPresentNoFile
    ) || f.code.severity() == Severity::Notice
}

/// The inodes on the orphan list and in the orphan file, read from the
/// copy (`dev`).
fn orphans(dev: &Arc<pipeline::Device>) -> Vec<u32> {
    check_core::fs::open_fs(dev.clone(), check_core::fs::OpenOptions::default())
        .map(|o| check_core::orphans::listed(&o.fs))
        .unwrap_or_default()
}

/// Runs a check of `target` with `overlay` laid over every read.
fn check_with(
    inv: &Invocation,
    target: &Target,
    overlay: Arc<dyn Overlay>,
) -> Result<(Report, Arc<pipeline::Device>), String> {
    let dev = open_device(target, IoMode::Pread).map_err(|e| e.to_string())?;
    dev.lay_over(overlay);
    let dev = Arc::new(dev);
    let mut opts = crate::run::check_options_for(inv);
    opts.mmp_held = true;
    opts.live = true;
    if fixer::safety::install_interrupt_handler().is_ok() {
        opts.interrupt = Some(fixer::safety::interrupt_flag());
    }
    Ok((check_core::check(dev.clone(), &opts), dev))
}

/// `ext4chk --online PATH`.
pub fn run(inv: &Invocation, max_freeze_ms: u64) -> i32 {
    match check_mount(inv, max_freeze_ms, !inv.keep_fsck_times) {
        Ok(done) => {
            if inv.debug {
                for d in &done.report.diagnostics {
                    errln!("{}: {d}", inv.prog);
                }
            }
            crate::render::print(inv, &done.report);
            done.code
        }
        Err(why) => {
            errln!("{}: {why}", inv.prog);
            if let Some(doc) =
                crate::render::error_document(inv.format, &inv.device, &why, OPERATIONAL)
            {
                out!("{doc}");
            }
            OPERATIONAL
        }
    }
}

/// What an online check came to: e2scrub's exit code and the report
/// (the frozen copy's, with the confirmed findings, or the live one).
pub struct Outcome {
    /// 0 clean, 6 damage confirmed, 8 could not confirm, 32 interrupted.
    pub code: i32,
    /// The report as `--online` prints it.
    pub report: Report,
}

/// The online check of the file system mounted at (or from)
/// `inv.device`. Confirmed damage is recorded for the next boot; a clean
/// outcome is recorded as e2scrub records it only with `record_clean`.
/// An error is a check that could not start or go on (one line).
pub fn check_mount(
    inv: &Invocation,
    max_freeze_ms: u64,
    record_clean: bool,
) -> Result<Outcome, String> {
    let refuse = Err::<Outcome, String>;
    let mount = match find_mount(Path::new(&inv.device)) {
        Ok(m) => m,
        Err(why) => return refuse(why),
    };
    if !matches!(mount.fstype.as_str(), "ext2" | "ext3" | "ext4") {
        return refuse(format!(
            "{} is a {} mount, not ext2/3/4",
            mount.mount_point.display(),
            mount.fstype
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return refuse(
            "an online check needs root: it reads the device and freezes the file system".into(),
        );
    }
    let Some(node) = device_node(mount.devno) else {
        return refuse(format!(
            "cannot find the device of {} ({}:{})",
            mount.mount_point.display(),
            mount.devno.0,
            mount.devno.1
        ));
    };
    let target = Target {
        path: node.clone(),
        offset: 0,
        len: None,
    };
    let limit = Duration::from_millis(max_freeze_ms.max(1));
    let started = Instant::now();
    let mut freezes = Freezes {
        lengths: Vec::new(),
        bytes: 0,
        from_journal: false,
    };

    // The live check. One that stops short (a superblock read half way
    // through the kernel's update of it fails its checksum) is run again:
    // a check that stopped reads too little for the copy to be gathered
    // from. What each try read is kept.
    let rec = Arc::new(Recorder::default());
    let mut tries = 0;
    let (live, live_dev) = loop {
        let (r, dev) = match check_with(inv, &target, rec.clone()) {
            Ok(r) => r,
            Err(why) => return refuse(why),
        };
        tries += 1;
        if r.aborted.is_none() || r.cancelled || tries == LIVE_TRIES {
            break (r, dev);
        }
        std::thread::sleep(Duration::from_millis(20 * tries as u64));
    };
    if live.cancelled {
        return Ok(finish(inv, &live, &[], &[], &freezes, started, 32));
    }
    let live_orphans = orphans(&live_dev);
    drop(live_dev);
    let suspicious: Vec<&Finding> = live
        .findings
        .iter()
        .filter(|f| !expected_live(f, &live_orphans))
        .collect();
    if suspicious.is_empty() && live.aborted.is_none() {
        if record_clean {
            record_outcome(&node, true);
        }
        return Ok(finish(inv, &live, &[], &[], &freezes, started, CLEAN));
    }

    // Confirm: a consistent copy, gathered under freezes.
    let dir = match File::open(&mount.mount_point) {
        Ok(d) => d,
        Err(e) => return refuse(format!("{}: {e}", mount.mount_point.display())),
    };
    let devf = match File::open(&node) {
        Ok(f) => f,
        Err(e) => return refuse(format!("{}: {e}", node.display())),
    };
    let mut dog = match Watchdog::start(&mount.mount_point, max_freeze_ms) {
        Ok(d) => d,
        Err(e) => return refuse(format!("cannot start the thaw watchdog: {e}")),
    };
    let mut copy = Layer::default();
    let mut frozen_check: Option<Report> = None;
    let mut orphans_frozen = Vec::new();
    // With a journal, what the live check read is taken while the file
    // system runs, and a freeze copies only what the journal says changed
    // since that began (and what a check of the copy then lacked).
    // Without one, or when the journal cannot tell, each freeze takes all
    // of it again. Past COPY_BUDGET, blocks are taken as sums.
    let unit = block_size(&devf);
    let journal = open_device(&target, IoMode::Pread)
        .ok()
        .and_then(|d| log::Journal::open(&Arc::new(d), &devf));
    let all = rec.merged();
    drop(rec);
    let mut running: Option<Running> = None;
    if let Some(j) = &journal {
        if let Some(mark) = j.mark(&devf) {
            let (layer, _) = take(&devf, &all, unit, copy_budget(), None);
            running = Some((Arc::new(layer), mark));
        }
    }
    // Blocks copied in each freeze: what checks of earlier copies lacked.
    let mut extra: Vec<(u64, u64)> = Vec::new();
    for attempt in 0..MAX_FREEZES {
        let changes = match (&journal, &running) {
            (Some(j), Some((_, mark))) => Some((j, mark.clone())),
            _ => None,
        };
        let want = Want {
            bytes: &extra,
            all: if running.is_some() { &[] } else { &all },
            unit,
        };
        match freeze_and_copy(
            &dir,
            &mut dog,
            &devf,
            &want,
            &mut copy,
            limit,
            &mut freezes,
            changes,
        ) {
            Ok(Copy::Taken) => {}
            Ok(Copy::TooLong) => {
                // Past the limit: thawed; try again a little later.
                std::thread::sleep(Duration::from_millis(200 * (attempt as u64 + 1)));
                continue;
            }
            Ok(Copy::NoLog) => {
                // The journal could not tell: take everything from now on.
                running = None;
                continue;
            }
            Err(why) => return refuse(why),
        }
        let under = running.as_ref().map(|(r, _)| r.clone()).unwrap_or_default();
        let snap = Arc::new(Snapshot {
            top: std::mem::take(&mut copy),
            under,
            unit,
            dev: devf.try_clone().ok(),
            misses: Recorder::default(),
            missed: AtomicU64::new(0),
        });
        let (r, dev) = match check_with(inv, &target, snap.clone()) {
            Ok(r) => r,
            Err(why) => return refuse(why),
        };
        let missed = snap.missed.load(Ordering::Relaxed);
        if missed == 0 {
            orphans_frozen = orphans(&dev);
            frozen_check = Some(r);
            break;
        }
        // The copy lacked blocks the check then read, or held sums of
        // blocks that changed after the thaw: copy them in the next
        // freeze, with the rest again (so that it is one state; with the
        // journal, the blocks it names are taken again anyway), and with
        // their neighbourhood (64 KiB): blocks a busy file system
        // allocates next tend to lie beside the last.
        const AROUND: u64 = 64 << 10;
        let merged = Recorder::default();
        for &(o, l) in &extra {
            merged.note(o, l as usize);
        }
        for (o, l) in snap.misses.merged() {
            let start = o / AROUND * AROUND;
            let end = (o + l).div_ceil(AROUND) * AROUND;
            merged.note(start, (end - start) as usize);
        }
        drop(dev);
        extra = merged.merged();
    }
    drop(dog);
    freezes.from_journal = running.is_some();
    let Some(frozen) = frozen_check else {
        return Ok(finish(
            inv,
            &live,
            &[],
            &suspicious.iter().map(|f| (*f).clone()).collect::<Vec<_>>(),
            &freezes,
            started,
            OPERATIONAL,
        ));
    };
    let confirmed: Vec<Finding> = frozen
        .findings
        .iter()
        .filter(|f| !expected_live(f, &orphans_frozen))
        .cloned()
        .collect();
    let dropped: Vec<Finding> = suspicious
        .iter()
        .filter(|f| {
            !confirmed
                .iter()
                .any(|c| c.code == f.code && c.ino == f.ino && c.blk == f.blk)
        })
        .map(|f| (*f).clone())
        .collect();
    let code = if !confirmed.is_empty() {
        record_outcome(&node, false);
        CORRUPT
    } else if frozen.aborted.is_some() {
        // The frozen copy could not be checked to its end either.
        OPERATIONAL
    } else {
        if record_clean {
            record_outcome(&node, true);
        }
        CLEAN
    };
    Ok(finish(
        inv, &frozen, &confirmed, &dropped, &freezes, started, code,
    ))
}

/// The outcome: the frozen copy's report with the confirmed findings, or
/// the live one, and e2scrub's exit code.
#[allow(clippy::too_many_arguments)]
fn finish(
    inv: &Invocation,
    report: &Report,
    confirmed: &[Finding],
    dropped: &[Finding],
    freezes: &Freezes,
    started: Instant,
    code: i32,
) -> Outcome {
    let from_journal = freezes.from_journal;
    let frozen_bytes = freezes.bytes;
    let freezes = &freezes.lengths[..];
    let mut r = report.clone();
    r.device = inv.device.clone();
    if code != 32 {
        r.findings = confirmed.to_vec();
        r.cancelled = false;
    }
    let longest = freezes.iter().max().copied().unwrap_or_default();
    let total: Duration = freezes.iter().sum();
    r.notes.push(match code {
        CLEAN if dropped.is_empty() => "Online check: clean.".to_string(),
        CLEAN => format!(
            "Online check: clean; {} problem(s) seen while the file system was in use were not there in its frozen state (changes caught half way).",
            dropped.len()
        ),
        CORRUPT => format!(
            "Online check: {} problem(s) confirmed in the frozen state; the next boot runs a full check.",
            confirmed.len()
        ),
        32 => "Online check: interrupted.".to_string(),
        _ => "Online check: the frozen state could not be copied within --max-freeze; nothing is confirmed.".to_string(),
    });
    if !freezes.is_empty() {
        r.notes.push(format!(
            "{} freeze(s), the longest {:.1} ms, {:.1} ms in all; {:.2} s in all.",
            freezes.len(),
            longest.as_secs_f64() * 1000.0,
            total.as_secs_f64() * 1000.0,
            started.elapsed().as_secs_f64()
        ));
    }
    r.online = Some(check_core::report::OnlineRecord {
        mount_point: find_mount(Path::new(&inv.device))
            .map(|m| m.mount_point.display().to_string())
            .unwrap_or_default(),
        freezes: freezes.iter().map(Duration::as_secs_f64).collect(),
        confirmed: confirmed.len(),
        dropped: dropped.iter().map(|f| f.code.name().to_string()).collect(),
        exit_code: code,
        frozen_bytes,
        from_journal,
    });
    if code == CLEAN {
        r.summary = report.summary.clone();
    }
    Outcome { code, report: r }
}

/// Records the outcome on the file system as e2scrub does: a clean check
/// resets the mount count and the last check time; confirmed errors ask
/// for a full check at the next boot.
fn record_outcome(node: &Path, clean: bool) {
    let Some(tune2fs) = ["/sbin/tune2fs", "/usr/sbin/tune2fs"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        return;
    };
    let args: &[&str] = if clean {
        &["-C", "0", "-T", "now"]
    } else {
        &["-E", "force_fsck"]
    };
    let _ = Command::new(tune2fs)
        .args(args)
        .arg(node)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_ranges_are_joined() {
        let r = Recorder::default();
        r.note(4096, 4096);
        r.note(0, 4096);
        r.note(16384, 1024);
        r.note(8192, 100);
        assert_eq!(r.merged(), vec![(0, 8292), (16384, 1024)]);
    }

    fn snapshot(top: Layer, under: Layer, unit: u64, dev: Option<File>) -> Snapshot {
        Snapshot {
            top,
            under: Arc::new(under),
            unit,
            dev,
            misses: Recorder::default(),
            missed: AtomicU64::new(0),
        }
    }

    fn copied(blocks: &[(u64, Vec<u8>)]) -> Layer {
        Layer {
            blocks: blocks.iter().cloned().collect(),
            sums: Sums::new(1024),
        }
    }

    #[test]
    fn a_snapshot_serves_what_it_holds_and_counts_the_rest() {
        let s = snapshot(copied(&[(100, vec![7u8; 100])]), Layer::default(), 1, None);
        let mut buf = vec![0u8; 50];
        s.patch(120, &mut buf);
        assert!(buf.iter().all(|&b| b == 7));
        assert_eq!(s.missed.load(Ordering::Relaxed), 0);
        let mut buf = vec![0u8; 100];
        s.patch(150, &mut buf);
        assert!(buf[..50].iter().all(|&b| b == 7) && buf[50..].iter().all(|&b| b == 0));
        assert_eq!(s.missed.load(Ordering::Relaxed), 50);
        assert!(!s.covers(300, 10));
    }

    /// The copy taken under a freeze wins over the one taken while the
    /// file system ran; together they cover what either holds.
    #[test]
    fn the_frozen_copy_lies_over_the_running_one() {
        let s = snapshot(
            copied(&[(1024, vec![2u8; 1024]), (4096, vec![3u8; 1024])]),
            copied(&[(0, vec![1u8; 4096])]),
            1024,
            None,
        );
        let mut buf = vec![0u8; 5120];
        s.patch(0, &mut buf);
        assert!(buf[..1024].iter().all(|&b| b == 1));
        assert!(buf[1024..2048].iter().all(|&b| b == 2));
        assert!(buf[2048..4096].iter().all(|&b| b == 1));
        assert!(buf[4096..].iter().all(|&b| b == 3));
        assert_eq!(s.missed.load(Ordering::Relaxed), 0);
        assert_eq!(s.top.covered(512, 1024), 512);
        assert_eq!(s.top.covered(4608, 1024), 512);
    }

    /// A block held as a sum is served from the device while it keeps the
    /// sum, and is a miss once it changed; a part of one is judged by the
    /// whole block, read again.
    #[test]
    fn summed_blocks_are_served_while_they_keep_their_sum() {
        let path = std::env::temp_dir().join(format!("ext4chk-snap-{}", std::process::id()));
        let data: Vec<u8> = (0..8192u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let dev = File::open(&path).unwrap();
        let (under, done) = take(&dev, &[(0, 8192)], 4096, 4096, None);
        assert!(done);
        assert_eq!(
            under.blocks.len(),
            1,
            "the first block within the budget is copied"
        );
        assert_eq!(under.sums.get(4096), Some(sum(&data[4096..])));
        assert_eq!(under.sums.get(0), None);
        let s = snapshot(Layer::default(), under, 4096, dev.try_clone().ok());
        // Unchanged: served, no miss.
        let mut buf = data[4096..].to_vec();
        assert!(s.covers(4096, 4096));
        s.patch(4096, &mut buf);
        assert_eq!(buf, data[4096..]);
        let mut part = vec![0u8; 1024];
        s.patch(5120, &mut part);
        assert_eq!(part, data[5120..6144]);
        assert_eq!(s.missed.load(Ordering::Relaxed), 0);
        // Changed on the device: a miss, of the part read.
        let mut changed = data.clone();
        changed[6000] ^= 0xff;
        std::fs::write(&path, &changed).unwrap();
        let mut buf = changed[4096..].to_vec();
        s.patch(4096, &mut buf);
        assert_eq!(s.missed.load(Ordering::Relaxed), 4096);
        let mut part = vec![0u8; 1024];
        s.patch(7168, &mut part);
        assert_eq!(s.missed.load(Ordering::Relaxed), 5120);
        assert_eq!(s.misses.merged(), vec![(4096, 4096)]);
        // The copied block is served from the copy whatever the device
        // holds.
        std::fs::write(&path, vec![0u8; 8192]).unwrap();
        let mut buf = vec![0u8; 4096];
        s.patch(0, &mut buf);
        assert_eq!(buf, data[..4096]);
        assert_eq!(s.missed.load(Ordering::Relaxed), 5120);
        // Sums taken frozen win over the running copy's bytes.
        let top = Layer {
            blocks: BTreeMap::new(),
            sums: sum_ranges(&dev, &[(0, 4096)], 4096, None).0,
        };
        let s2 = snapshot(top, Arc::try_unwrap(s.under).ok().unwrap(), 4096, None);
        let mut buf = vec![0u8; 4096];
        s2.patch(0, &mut buf);
        assert_eq!(buf, vec![0u8; 4096]);
        assert_eq!(s2.missed.load(Ordering::Relaxed), 0);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn take_copies_within_the_budget_and_sums_past_it() {
        let path = std::env::temp_dir().join(format!("ext4chk-take-{}", std::process::id()));
        std::fs::write(&path, vec![5u8; 65536]).unwrap();
        let dev = File::open(&path).unwrap();
        let (l, done) = take(
            &dev,
            &[(1024, 2048), (8192, 16384), (40960, 4096)],
            4096,
            12288,
            None,
        );
        assert!(done);
        let copied: u64 = l.blocks.values().map(|b| b.len() as u64).sum();
        // 1024..3072 (one unit) and 8192..16384 (two units) are copied;
        // the rest is summed, unit by unit.
        assert_eq!(copied, 2048 + 8192);
        assert_eq!(l.sums.len(), 3);
        assert_eq!(l.sums.get(16384), Some(sum(&[5u8; 4096])));
        assert_eq!(l.sums.get(40960), Some(sum(&[5u8; 4096])));
        assert_eq!(l.sums.get(8192), None);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
