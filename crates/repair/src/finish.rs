//! The last write of a repair, as e2fsck makes it: the superblock records
//! that the file system was checked (clean or not, when, and with the
//! mount count reset), so that the next boot's `fsck -a` skips a file
//! system that was repaired and checks one that still has errors.

use crate::error::Error;
use std::sync::Arc;

use ext4_layout::features::RoCompatFeatures;
use ext4_layout::superblock::{field as f, STATE_ERROR, STATE_VALID};
use pipeline::Device;

use super::raw::now;
use super::stage::Staging;
use check_core::fs::{open_fs, OpenOptions};
use check_core::problem::{Code, Finding};

/// How the repair ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Nothing is left to fix.
    Valid,
    /// Errors remain.
    Invalid,
    /// Preen met a problem it may not fix: the file system is marked as
    /// having errors, so that the next check is not skipped.
    PreenHalt,
}

/// Writes the superblock's record of this check. Returns the finding to
/// report when the file system had not been marked clean (e2fsck counts
/// that as a fix: exit 1).
pub(super) fn record_check(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    outcome: Outcome,
    unshared: bool,
) -> Result<Option<Finding>, Error> {
    let opened = open_fs(
        dev.clone(),
        OpenOptions {
            read_only: true,
            superblock: None,
        },
    )?;
    let fs = opened.fs;
    if fs.backup_in_use {
        // The primary is still unusable: writing over it from a backup
        // is a repair of its own, which did not happen.
        return Ok(None);
    }
    let maps = check_core::ctx::Maps::new(&fs);
    let mut stage = Staging::new(&fs, &maps, false);
    let t = u64::from(now());
    let sb = stage.sb_mut();
    let state = f::s_state.get(sb);
    let mut finding = None;
    match outcome {
        Outcome::PreenHalt => f::s_state.set(sb, state | STATE_ERROR),
        Outcome::Valid | Outcome::Invalid => {
            if outcome == Outcome::Valid {
                if state & STATE_VALID == 0 {
                    let mut f = Finding::new(Code::StateNotClean);
                    f.fixed = true;
                    finding = Some(f);
                }
                f::s_state.set(sb, STATE_VALID);
            } else {
                f::s_state.set(sb, state & !STATE_VALID);
            }
            f::s_lastcheck.set(sb, t as u32);
            f::s_lastcheck_hi.set(sb, (t >> 32) as u8);
            f::s_mnt_count.set(sb, 0);
            sb[ext4_layout::superblock::S_ERROR_INFO].fill(0);
        }
    }
    if unshared && outcome == Outcome::Valid {
        // Nothing is shared any more: the feature goes, as e2fsck's
        // unshare_blocks clears it.
        let ro = f::s_feature_ro_compat_raw.get(sb) & !RoCompatFeatures::SHARED_BLOCKS.0;
        f::s_feature_ro_compat_raw.set(sb, ro);
    }
    f::s_wtime.set(sb, t as u32);
    f::s_wtime_hi.set(sb, (t >> 32) as u8);
    let writes = stage.into_writes();
    fx.commit(writes)?;
    Ok(finding)
}
