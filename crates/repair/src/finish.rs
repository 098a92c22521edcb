//! The last write of a repair, as e2fsck makes it: the superblock records
//! that the file system was checked (clean or not, when, and with the
//! mount count reset), so that the next boot's `fsck -a` skips a file
//! system that was repaired and checks one that still has errors.

use crate::error::Error;
use std::sync::Arc;

use ext4_layout::bytes::{le_u16, put_le_u16, put_le_u32};
use ext4_layout::features::RoCompatFeatures;
use ext4_layout::superblock::{STATE_ERROR, STATE_VALID};
use pipeline::Device;

use super::raw::now;
use super::stage::Staging;
use check_core::fs::{open_fs, OpenOptions};
use check_core::io::Io;
use check_core::problem::{Code, Finding};

/// `s_feature_ro_compat`.
const S_RO_COMPAT: usize = 0x64;
/// `s_state`.
const S_STATE: usize = 0x3A;
/// `s_mnt_count`.
const S_MNT_COUNT: usize = 0x34;
/// `s_wtime`, and its high byte.
const S_WTIME: usize = 0x30;
const S_WTIME_HI: usize = 0x274;
/// `s_lastcheck`, and its high byte.
const S_LASTCHECK: usize = 0x40;
const S_LASTCHECK_HI: usize = 0x277;
/// The error record the kernel keeps (`s_error_count` up to
/// `s_mount_opts`), cleared by a check.
const S_ERRORS: std::ops::Range<usize> = 0x194..0x200;

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
    let mut io = Io::new(&fs);
    let t = u64::from(now());
    let sb = stage.sb_mut();
    let state = le_u16(sb, S_STATE);
    let mut finding = None;
    match outcome {
        Outcome::PreenHalt => put_le_u16(sb, S_STATE, state | STATE_ERROR),
        Outcome::Valid | Outcome::Invalid => {
            if outcome == Outcome::Valid {
                if state & STATE_VALID == 0 {
                    let mut f = Finding::new(Code::StateNotClean);
                    f.fixed = true;
                    finding = Some(f);
                }
                put_le_u16(sb, S_STATE, STATE_VALID);
            } else {
                put_le_u16(sb, S_STATE, state & !STATE_VALID);
            }
            put_le_u32(sb, S_LASTCHECK, t as u32);
            sb[S_LASTCHECK_HI] = (t >> 32) as u8;
            put_le_u16(sb, S_MNT_COUNT, 0);
            sb[S_ERRORS].fill(0);
        }
    }
    if unshared && outcome == Outcome::Valid {
        // Nothing is shared any more: the feature goes, as e2fsck's
        // unshare_blocks clears it.
        let ro = ext4_layout::bytes::le_u32(sb, S_RO_COMPAT) & !RoCompatFeatures::SHARED_BLOCKS.0;
        put_le_u32(sb, S_RO_COMPAT, ro);
    }
    put_le_u32(sb, S_WTIME, t as u32);
    sb[S_WTIME_HI] = (t >> 32) as u8;
    let writes = stage.into_writes(&mut io);
    fx.commit(writes)?;
    Ok(finding)
}
