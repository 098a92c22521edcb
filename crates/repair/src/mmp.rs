//! Multiple-mount protection, as e2fsck runs it before it writes to a
//! file system with the `mmp` feature (shared storage: a SAN, Lustre):
//! watch the protection block for twice the update interval to see
//! whether another node is using the file system, claim it with a number
//! of our own and watch again (two checkers starting together), then mark
//! it as being checked for as long as the repair runs, and clean when it
//! ends, on an error too. A read-only check only reads it (the check
//! refuses a block marked by another checker).

use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use ext4_layout::mmp::{self, Mmp, MmpMut, Seq};
use pipeline::{Device, DeviceKind};

/// Where the block is and how it is written.
#[derive(Clone, Debug)]
struct Place {
    /// Byte offset of the block.
    offset: u64,
    block_size: usize,
    /// The checksum seed, with metadata_csum.
    seed: Option<u32>,
    /// The superblock's update interval, at least the minimum.
    interval: u32,
    /// Read around the page cache (another node writes the device).
    direct: bool,
}

/// The block, marked as being checked by this process.
#[derive(Debug)]
pub(crate) struct Held {
    place: Place,
    /// The block as this process last wrote it.
    block: Vec<u8>,
}

/// Why the repair may not start.
#[derive(Debug)]
pub(crate) struct Refused {
    /// One line.
    pub why: String,
    /// Whether errors count as left (exit 12, as e2fsck's refusal of a
    /// block marked by another checker), or not (exit 8).
    pub uncorrected: bool,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A sequence number of our own: in the range users write, and not
/// `avoid`.
fn our_seq(avoid: u32) -> u32 {
    let mut x = now() ^ (u64::from(std::process::id()) << 17) ^ 0x9E37_79B9_7F4A_7C15;
    loop {
        // xorshift: a few rounds of mixing.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let s = (x % u64::from(mmp::SEQ_MAX)) as u32 + 1;
        if s != avoid {
            return s;
        }
    }
}

impl Place {
    /// Reads the whole block, around the page cache for a block device.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        if self.direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let f = opts.open(path)?;
        // O_DIRECT wants an aligned buffer: take an aligned window of a
        // larger one.
        let align = 4096usize.max(self.block_size);
        let mut raw = vec![0u8; self.block_size + align];
        let skip = raw.as_ptr().align_offset(align).min(align);
        let buf = &mut raw[skip..skip + self.block_size];
        f.read_exact_at(buf, self.offset)?;
        Ok(buf.to_vec())
    }

    /// Writes `block` through the fixer (recorded in the undo file, made
    /// durable before the call returns).
    fn write(&self, fx: &fixer::Fixer, block: &[u8]) -> io::Result<()> {
        fx.commit(vec![fixer::Write {
            offset: self.offset,
            data: block.to_vec(),
        }])
        .map_err(|e| io::Error::other(e.to_string()))
    }

    /// `block` with its record rewritten: sequence `seq`, the time now,
    /// this node's names, a fresh checksum.
    fn stamped(&self, block: &[u8], seq: u32, bdev: &str) -> Vec<u8> {
        let mut b = block.to_vec();
        let rec = mmp::fresh(
            seq,
            now(),
            &hostname(),
            bdev,
            u16::try_from(self.interval).unwrap_or(u16::MAX),
            self.seed,
        );
        b[..mmp::RECORD_SIZE].copy_from_slice(&rec);
        b
    }
}

/// Sleeps `d`, waking early (false) when SIGINT or SIGTERM arrives.
fn wait(d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if fixer::safety::interrupted() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100).min(until - Instant::now()));
    }
    true
}

fn seq_of(block: &[u8]) -> Option<u32> {
    Mmp::new(block).map(|m| m.mmp_seq())
}

fn describe(block: &[u8]) -> String {
    Mmp::new(block).map_or_else(String::new, |m| {
        format!("node '{}', device '{}'", m.mmp_nodename(), m.mmp_bdevname())
    })
}

/// Runs the protocol on the file system at `path` before a repair writes
/// anything. `Ok(None)`: there is no `mmp` feature. A block marked by
/// another checker is refused here, before anything is written. With
/// `fix_bad`, a block with a bad magic number or checksum is first
/// written afresh, clean (as e2fsck fixes it before it opens the file
/// system; `notes` says so), and a block number outside the file system
/// stops the repair (exit 8, as e2fsck's); without, the check reports
/// both.
pub(crate) fn start(
    dev: &std::sync::Arc<Device>,
    fx: &fixer::Fixer,
    path: &Path,
    fix_bad: bool,
    notes: &mut Vec<String>,
) -> Result<Option<Held>, Refused> {
    let Ok(opened) = check_core::fs::open_fs(dev.clone(), check_core::fs::OpenOptions::default())
    else {
        return Ok(None);
    };
    let fs = opened.fs;
    if !fs
        .geo
        .incompat
        .contains(ext4_layout::features::IncompatFeatures::MMP)
    {
        return Ok(None);
    }
    let sb = fs.sb();
    let blk = sb.s_mmp_block();
    if blk <= fs.geo.first_data_block || blk >= fs.geo.blocks_count {
        if !fix_bad {
            return Ok(None);
        }
        return Err(Refused {
            why: format!(
                "the superblock names multiple-mount protection block {blk}, outside the file system; if no node uses it, turn the protection off with 'tune2fs -f -O ^mmp {}' and check again",
                path.display()
            ),
            uncorrected: false,
        });
    }
    let mut place = Place {
        offset: blk * u64::from(fs.geo.block_size),
        block_size: fs.block_size(),
        seed: fs.metadata_csum().then_some(fs.geo.csum_seed),
        interval: u32::from(sb.s_mmp_update_interval()).max(mmp::MIN_INTERVAL),
        direct: dev.kind() == DeviceKind::BlockDevice,
    };
    let bdev = path.display().to_string();
    let unreadable = |e: io::Error| Refused {
        why: format!("the multiple-mount protection block cannot be read: {e}"),
        uncorrected: false,
    };
    let mut first = place.read(path).map_err(unreadable)?;
    let bad = if !ext4_layout::superblock::is_mmp_block(&first) {
        Some("magic number")
    } else if place
        .seed
        .is_some_and(|s| !Mmp::new(&first).is_some_and(|m| m.checksum_ok(s)))
    {
        Some("checksum")
    } else {
        None
    };
    if let Some(what) = bad {
        if !fix_bad {
            return Ok(None);
        }
        // Written afresh, clean; the protocol below then claims it.
        let fresh = place.stamped(&vec![0u8; place.block_size], mmp::SEQ_CLEAN, &bdev);
        place.write(fx, &fresh).map_err(|e| Refused {
            why: format!("the multiple-mount protection block cannot be written: {e}"),
            uncorrected: false,
        })?;
        notes.push(format!(
            "The multiple-mount protection block (block {blk}) had a bad {what}: it was written afresh."
        ));
        first = fresh;
    }
    let seq = seq_of(&first).unwrap_or(mmp::SEQ_CLEAN);
    let rec = Mmp::new(&first).map(|m| m.seq());
    if matches!(rec, Some(Seq::Fsck | Seq::Unknown(_))) {
        let why = check_core::mmp_refusal(path, &first).unwrap_or_default();
        return Err(Refused {
            why,
            uncorrected: true,
        });
    }
    let period = |i: u32| Duration::from_secs(u64::from((2 * i + 1).min(i + 60)));
    let stopped = || Refused {
        why:
            "interrupted while waiting on the multiple-mount protection block; nothing was changed"
                .into(),
        uncorrected: false,
    };
    if let Some(Seq::InUse(_)) = rec {
        // Someone wrote it: watch for their next update.
        let theirs = Mmp::new(&first).map_or(0, |m| u32::from(m.mmp_check_interval()));
        place.interval = place.interval.max(theirs).min(mmp::MAX_INTERVAL);
        if !wait(period(place.interval)) {
            return Err(stopped());
        }
        let again = place.read(path).map_err(unreadable)?;
        if seq_of(&again) != Some(seq) {
            return Err(Refused {
                why: format!(
                    "the file system is in use on another node ({}): its multiple-mount protection block changed within {} s",
                    describe(&again),
                    period(place.interval).as_secs()
                ),
                uncorrected: false,
            });
        }
    }
    // Claim it with a number of our own, and watch for a second claimer.
    let mine = our_seq(seq);
    let claimed = place.stamped(&first, mine, &bdev);
    place.write(fx, &claimed).map_err(|e| Refused {
        why: format!("the multiple-mount protection block cannot be written: {e}"),
        uncorrected: false,
    })?;
    let restore = |place: &Place| {
        let _ = place.write(fx, &place.stamped(&first, mmp::SEQ_CLEAN, &bdev));
    };
    if !wait(period(place.interval)) {
        restore(&place);
        return Err(stopped());
    }
    let again = place.read(path).map_err(unreadable)?;
    if seq_of(&again) != Some(mine) {
        return Err(Refused {
            why: format!(
                "the file system is in use on another node ({}): it claimed the multiple-mount protection block while ext4chk waited",
                describe(&again)
            ),
            uncorrected: false,
        });
    }
    let marked = place.stamped(&again, mmp::SEQ_FSCK, &bdev);
    place.write(fx, &marked).map_err(|e| Refused {
        why: format!("the multiple-mount protection block cannot be written: {e}"),
        uncorrected: false,
    })?;
    Ok(Some(Held {
        place,
        block: marked,
    }))
}

impl Held {
    /// Ends the mark: the block is written clean, unless someone else
    /// changed it meanwhile (then it is left as they wrote it, and the
    /// returned note says so).
    pub(crate) fn release(self, fx: &fixer::Fixer, path: &Path) -> Option<String> {
        let now_on_disk = match self.place.read(path) {
            Ok(b) => b,
            Err(e) => {
                return Some(format!(
                    "The multiple-mount protection block could not be read back to clear it: {e}."
                ))
            }
        };
        if now_on_disk[..mmp::RECORD_SIZE] != self.block[..mmp::RECORD_SIZE] {
            return Some(format!(
                "The multiple-mount protection block was changed while the repair ran ({}): another node may be using the file system; it was left as found.",
                describe(&now_on_disk)
            ));
        }
        let mut clean = now_on_disk;
        {
            let mut m = MmpMut::new(&mut clean[..mmp::RECORD_SIZE]);
            m.set(mmp::field::mmp_seq, mmp::SEQ_CLEAN);
            m.set(mmp::field::mmp_time, now());
            if let Some(s) = self.place.seed {
                m.update_checksum(s);
            }
        }
        match self.place.write(fx, &clean) {
            Ok(()) => None,
            Err(e) => Some(format!(
                "The multiple-mount protection block could not be marked clean: {e}."
            )),
        }
    }
}
