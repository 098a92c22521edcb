//! Whether a check is due: e2fsck's rule for skipping a file system that
//! was unmounted cleanly and has not reached its mount count or check
//! interval. A boot-time `fsck -a` relies on it to be quick.

use ext4_layout::features::{CompatFeatures, RoCompatFeatures};
use ext4_layout::superblock::{max_mnt_count_signed, Superblock, STATE_ERROR, STATE_VALID};

/// Why a check must run although it was not forced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `s_state` records errors.
    Errors,
    /// `s_state` lacks the valid bit: not cleanly unmounted.
    NotClean,
    /// The primary superblock's features, size or UUID differ from the
    /// first backup's.
    BackupDiffers,
    /// Mounted this many times since the last check.
    MountCount(u16),
    /// The last check is in the future.
    LastCheckInFuture,
    /// This many days since the last check.
    Interval(u64),
    /// The orphan file may hold orphans (`orphan_present`): checked
    /// without a word, as e2fsck 1.47.4 checks it.
    OrphanPresent,
}

impl Reason {
    /// e2fsck's wording, after the device name.
    pub fn describe(&self) -> String {
        match self {
            Reason::Errors => "contains a file system with errors".into(),
            Reason::NotClean => "was not cleanly unmounted".into(),
            Reason::BackupDiffers => "primary superblock features different from backup".into(),
            Reason::MountCount(n) => format!("has been mounted {n} times without being checked"),
            Reason::LastCheckInFuture => "has filesystem last checked time in the future".into(),
            Reason::Interval(d) => format!("has gone {d} days without being checked"),
            Reason::OrphanPresent => String::new(),
        }
    }

    /// Whether e2fsck says "..., check forced." for it.
    pub fn is_said(&self) -> bool {
        !matches!(self, Reason::OrphanPresent)
    }
}

/// The verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// Check now, for this reason.
    Now(Reason),
    /// Skip; `note` is e2fsck's hint about the next check, if any
    /// (" (check in 3 mounts)").
    Skip {
        /// The hint, with its leading space.
        note: Option<String>,
    },
}

/// The superblock's counts of a file system that was not checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Inodes in use.
    pub inodes_used: u64,
    /// Inodes.
    pub inodes_count: u64,
    /// Blocks in use.
    pub blocks_used: u64,
    /// Blocks.
    pub blocks_count: u64,
    /// e2fsck's hint about the next check (" (check in 3 mounts)").
    pub note: Option<String>,
    /// The free counts corrected in the superblock: (what, was, now).
    pub counts_set: Vec<(&'static str, u64, u64)>,
    /// `-E journal_only`: the journal was all that was asked for.
    pub journal_only: bool,
    /// The volume label.
    pub label: String,
    /// The check interval was not applied because the clock is declared
    /// broken (e2fsck.conf's broken_system_clock).
    pub interval_ignored: bool,
}

impl Skipped {
    /// The counts as the superblock has them.
    pub fn from_super(sb: &Superblock<'_>, note: Option<String>) -> Skipped {
        Skipped {
            inodes_used: u64::from(sb.s_inodes_count().saturating_sub(sb.s_free_inodes_count())),
            inodes_count: u64::from(sb.s_inodes_count()),
            blocks_used: sb.blocks_count().saturating_sub(sb.free_blocks_count()),
            blocks_count: sb.blocks_count(),
            note,
            counts_set: Vec::new(),
            journal_only: false,
            interval_ignored: false,
            label: {
                let l = sb.s_volume_name();
                let end = l.iter().position(|&b| b == 0).unwrap_or(l.len());
                String::from_utf8_lossy(&l[..end]).into_owned()
            },
        }
    }
}

/// How the clock and power supply look.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// Seconds since the epoch.
    pub now: u64,
    /// Running on battery: mount-count and interval checks wait until
    /// twice their limit.
    pub on_battery: bool,
    /// The clock is declared wrong (e2fsck.conf's broken_system_clock):
    /// no rule goes by the time.
    pub broken: bool,
    /// How far ahead of the clock a last check may be and be forgiven
    /// (e2fsck.conf's accept_time_fudge: a day, or nothing).
    pub fudge: u64,
}

impl Clock {
    /// A working clock reading `now`, on mains power.
    pub fn at(now: u64) -> Clock {
        Clock {
            now,
            on_battery: false,
            broken: false,
            fudge: DAY,
        }
    }

    /// Whether rules that go by the time apply: the clock is not declared
    /// broken and reads after 2010.
    pub fn trusted(&self) -> bool {
        !self.broken && self.now >= SANE_CLOCK
    }
}

/// A day in seconds; also e2fsck's allowance for a last-check time a
/// little in the future (clock skew between the kernel and the rescue
/// system).
const DAY: u64 = 86_400;
/// Before 2010 the clock is taken to be unset: time-based rules are off.
const SANE_CLOCK: u64 = 1_262_304_000;

/// Decides, as e2fsck's check_if_skip does, from the superblock (and,
/// when the device may be written, whether the first backup differs).
pub fn check_due(sb: &Superblock<'_>, clock: Clock, backup_differs: bool) -> Due {
    if sb.compat().contains(CompatFeatures::ORPHAN_FILE)
        && sb.ro_compat().contains(RoCompatFeatures::ORPHAN_PRESENT)
    {
        return Due::Now(Reason::OrphanPresent);
    }
    let state = sb.s_state();
    if state & STATE_ERROR != 0 {
        return Due::Now(Reason::Errors);
    }
    if state & STATE_VALID == 0 {
        return Due::Now(Reason::NotClean);
    }
    if backup_differs {
        return Due::Now(Reason::BackupDiffers);
    }
    let max = i32::from(max_mnt_count_signed(sb));
    let count = i32::from(sb.s_mnt_count());
    let battery_slack = |limit: i64, value: i64| clock.on_battery && value < 2 * limit;
    if max > 0 && count >= max && !battery_slack(i64::from(max), i64::from(count)) {
        return Due::Now(Reason::MountCount(sb.s_mnt_count()));
    }
    let interval = i64::from(sb.s_checkinterval());
    let raw_last = i64::from(sb.s_lastcheck()) | (i64::from(sb.s_lastcheck_hi()) << 32);
    let now = i64::try_from(clock.now).unwrap_or(i64::MAX);
    let timed = interval != 0 && clock.trusted();
    // A last check a little ahead of this clock is forgiven (a day).
    let last = if raw_last > now {
        raw_last - i64::try_from(clock.fudge).unwrap_or(0)
    } else {
        raw_last
    };
    if timed && now < last {
        if !clock.on_battery {
            return Due::Now(Reason::LastCheckInFuture);
        }
    } else if timed && now - last >= interval {
        let elapsed = now - raw_last;
        if !battery_slack(interval, elapsed) {
            return Due::Now(Reason::Interval(u64::try_from(elapsed).unwrap_or(0) / DAY));
        }
    }
    let mut next: i64 = 100_000;
    if max > 0 {
        next = i64::from(max - count).max(1);
    }
    if timed && now - raw_last >= interval {
        next = 1;
    }
    let note = match next {
        1 if clock.on_battery => Some(" (check deferred; on battery)".to_string()),
        1 => Some(" (check after next mount)".to_string()),
        2..=5 => Some(format!(" (check in {next} mounts)")),
        _ => None,
    };
    Due::Skip { note }
}

/// Whether the machine runs on battery, as e2fsck tells: an AC adapter
/// that reports off-line.
pub fn on_battery() -> bool {
    if let Ok(s) = std::fs::read_to_string("/sys/class/power_supply/AC/online") {
        return s.trim() == "0";
    }
    if let Ok(dir) = std::fs::read_dir("/proc/acpi/ac_adapter") {
        for e in dir.flatten() {
            if let Ok(s) = std::fs::read_to_string(e.path().join("state")) {
                if s.contains("off-line") {
                    return true;
                }
            }
        }
    }
    false
}

/// Whether the first backup superblock disagrees with the primary on
/// what e2fsck compares: the feature sets (less the bits the kernel
/// changes in the primary alone), the block and inode counts, the UUID.
pub fn backup_differs(primary: &Superblock<'_>, backup: &Superblock<'_>) -> bool {
    use ext4_layout::features::{IncompatFeatures, RoCompatFeatures};
    // Bits the kernel or tune2fs set in the primary before the backups.
    let incompat_ignore = IncompatFeatures::RECOVER.0 | IncompatFeatures::MMP.0;
    let ro_ignore = RoCompatFeatures::ORPHAN_PRESENT.0;
    primary.s_feature_compat_raw() != backup.s_feature_compat_raw()
        || (primary.s_feature_incompat_raw() & !incompat_ignore)
            != (backup.s_feature_incompat_raw() & !incompat_ignore)
        || (primary.s_feature_ro_compat_raw() & !ro_ignore)
            != (backup.s_feature_ro_compat_raw() & !ro_ignore)
        || primary.blocks_count() != backup.blocks_count()
        || primary.s_inodes_count() != backup.s_inodes_count()
        || primary.s_uuid() != backup.s_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4_layout::superblock::field;

    const NOW: u64 = 1_800_000_000;

    fn sb() -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        field::s_magic.set(&mut b, 0xEF53);
        field::s_state.set(&mut b, STATE_VALID);
        field::s_max_mnt_count.set(&mut b, 0xFFFF);
        field::s_lastcheck.set(&mut b, NOW as u32 - 100);
        b
    }

    fn due(b: &[u8]) -> Due {
        check_due(&Superblock::new(b).unwrap(), Clock::at(NOW), false)
    }

    #[test]
    fn clean_is_skipped() {
        assert_eq!(due(&sb()), Due::Skip { note: None });
    }

    #[test]
    fn state_forces() {
        let mut b = sb();
        field::s_state.set(&mut b, 0);
        assert_eq!(due(&b), Due::Now(Reason::NotClean));
        field::s_state.set(&mut b, STATE_VALID | STATE_ERROR);
        assert_eq!(due(&b), Due::Now(Reason::Errors));
    }

    #[test]
    fn a_present_orphan_file_forces_a_silent_check() {
        let mut b = sb();
        field::s_feature_ro_compat_raw.set(&mut b, RoCompatFeatures::ORPHAN_PRESENT.0);
        assert_eq!(due(&b), Due::Skip { note: None }, "no orphan file");
        field::s_feature_compat_raw.set(&mut b, CompatFeatures::ORPHAN_FILE.0);
        assert_eq!(due(&b), Due::Now(Reason::OrphanPresent));
        assert!(!Reason::OrphanPresent.is_said());
        field::s_feature_ro_compat_raw.set(&mut b, 0);
        assert_eq!(due(&b), Due::Skip { note: None });
    }

    #[test]
    fn mount_counts() {
        let mut b = sb();
        field::s_max_mnt_count.set(&mut b, 20);
        for (count, want) in [
            (20u16, Due::Now(Reason::MountCount(20))),
            (25, Due::Now(Reason::MountCount(25))),
            (
                19,
                Due::Skip {
                    note: Some(" (check after next mount)".into()),
                },
            ),
            (
                17,
                Due::Skip {
                    note: Some(" (check in 3 mounts)".into()),
                },
            ),
            (
                15,
                Due::Skip {
                    note: Some(" (check in 5 mounts)".into()),
                },
            ),
            (14, Due::Skip { note: None }),
        ] {
            field::s_mnt_count.set(&mut b, count);
            assert_eq!(due(&b), want, "count {count}");
        }
    }

    #[test]
    fn intervals() {
        let mut b = sb();
        field::s_checkinterval.set(&mut b, 86_400);
        field::s_lastcheck.set(&mut b, (NOW - 3 * 86_400 - 5) as u32);
        assert_eq!(due(&b), Due::Now(Reason::Interval(3)));
        field::s_lastcheck.set(&mut b, (NOW + 3 * 86_400) as u32);
        assert_eq!(due(&b), Due::Now(Reason::LastCheckInFuture));
        // Within a day's skew it is not "in the future".
        field::s_lastcheck.set(&mut b, (NOW + 3600) as u32);
        assert_eq!(due(&b), Due::Skip { note: None });
        // Without an interval, a future time does not matter.
        field::s_checkinterval.set(&mut b, 0);
        field::s_lastcheck.set(&mut b, (NOW + 3 * 86_400) as u32);
        assert_eq!(due(&b), Due::Skip { note: None });
    }
}
