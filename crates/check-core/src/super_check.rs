//! Superblock and group descriptor sanity, before pass 1. Only value
//! ranges that make the rest impossible stop the check; everything else
//! is reported as a notice, since e2fsck's verdict comes from the passes.

use ext4_layout::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use ext4_layout::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4_layout::inode::Inode;

use crate::fs::{allowed_range, Fs};
use crate::io::Io;
use crate::problem::{Code, Finding};

/// The multiple-mount protection block, as e2fsck checks it when it
/// opens the file system: its number inside the file system and its
/// magic. e2fsck stops when it may not fix it (and a fix of the block
/// number alone leaves the file system unusable to the library), so
/// both stop the check.
///
/// Then what the sequence number says: a file system marked as being
/// checked (by a checker still running, or one killed) or undergoing an
/// operation nothing names is refused, as e2fsck refuses it (exit 12),
/// unless `held`: this process marked it.
pub(crate) fn check_mmp(fs: &Fs, io: &mut Io<'_>, held: bool) -> Option<(Option<Finding>, Fatal)> {
    if !fs
        .geo
        .incompat
        .contains(ext4_layout::features::IncompatFeatures::MMP)
    {
        return None;
    }
    let blk = fs.sb().s_mmp_block();
    let why = if blk <= fs.geo.first_data_block || blk >= fs.geo.blocks_count {
        Some(format!("block {blk} is outside the file system"))
    } else {
        let mut b = vec![0u8; fs.block_size()];
        match io.read_blocks(blk, &mut b) {
            Err(e) => Some(format!("block {blk} cannot be read: {e}")),
            Ok(()) if !ext4_layout::superblock::is_mmp_block(&b) => {
                Some(format!("block {blk} has a bad magic number"))
            }
            Ok(())
                if fs.metadata_csum()
                    && !ext4_layout::mmp::Mmp::new(&b)
                        .is_some_and(|m| m.checksum_ok(fs.geo.csum_seed)) =>
            {
                Some(format!("block {blk} fails its checksum"))
            }
            Ok(()) => {
                return (!held)
                    .then(|| mmp_refusal(fs.dev.path(), &b))
                    .flatten()
                    .map(|reason| {
                        (
                            None,
                            Fatal {
                                reason,
                                uncorrected: true,
                            },
                        )
                    });
            }
        }
    }?;
    Some((
        Some(Finding::new(Code::MmpInvalid).detail(why.clone())),
        Fatal {
            reason: format!("the multiple-mount protection block is invalid: {why}"),
            uncorrected: true,
        },
    ))
}

/// Why a file system whose MMP block (`block`, read from the device at
/// `path`) says another checker has it, or an operation nothing names, may
/// not be checked; `None` when it says nothing of the kind.
pub fn mmp_refusal(path: &std::path::Path, block: &[u8]) -> Option<String> {
    use ext4_layout::mmp::{Mmp, Seq};
    let m = Mmp::new(block)?;
    let whose = format!(
        "node '{}', device '{}', last written at {} s",
        m.mmp_nodename(),
        m.mmp_bdevname(),
        m.mmp_time()
    );
    let what = match m.seq() {
        Seq::Fsck => "is marked as being checked by another fsck".to_string(),
        Seq::Unknown(s) => format!("says an unknown operation is under way (sequence {s:#010x})"),
        Seq::Clean | Seq::InUse(_) => return None,
    };
    Some(format!(
        "the multiple-mount protection block {what} ({whose}); if no node uses the file system, clear it with 'tune2fs -f -E clear_mmp {}'",
        path.display()
    ))
}

/// Why the check cannot go on.
#[derive(Debug)]
pub(crate) struct Fatal {
    /// The message.
    pub reason: String,
    /// Whether e2fsck would also count errors left (exit 12 rather than 8).
    pub uncorrected: bool,
}

/// What the superblock check found, and which groups have a missing
/// bitmap or inode table.
pub(crate) struct SuperCheck {
    /// Findings (all notices).
    pub findings: Vec<Finding>,
    /// Groups whose block bitmap location is 0.
    pub missing_block_bitmap: Vec<u32>,
    /// Groups whose inode bitmap location is 0.
    pub missing_inode_bitmap: Vec<u32>,
    /// Groups whose inode table location is 0.
    pub missing_inode_table: Vec<u32>,
}

/// A last mount or write time in the future, as e2fsck judges them at
/// the end of its superblock checks: only with `-f` or a check interval;
/// up to `fudge` seconds ahead is the clock's fault.
pub(crate) fn future_times(fs: &Fs, t: crate::ctx::TimeCheck) -> Vec<Finding> {
    let sb = fs.sb();
    if !t.forced && sb.s_checkinterval() == 0 {
        return Vec::new();
    }
    let mount = u64::from(sb.s_mtime()) | (u64::from(sb.s_mtime_hi()) << 32);
    let write = u64::from(sb.s_wtime()) | (u64::from(sb.s_wtime_hi()) << 32);
    let mut out = Vec::new();
    for (at, far, near) in [
        (mount, Code::FutureLastMount, Code::FutureLastMountFudged),
        (write, Code::FutureLastWrite, Code::FutureLastWriteFudged),
    ] {
        if at > t.now {
            let code = if at <= t.now.saturating_add(t.fudge) {
                near
            } else {
                far
            };
            out.push(Finding::new(code).found(at - t.now));
        }
    }
    out
}

/// e2fsck's check_super_block.
/// A revision 0 superblock with feature flags set: the kernel reads no
/// feature of such a file system, so e2fsck makes it a dynamic one.
pub(crate) fn rev0_with_features(fs: &Fs) -> Option<Finding> {
    let sb = fs.sb();
    let any = sb.compat().0 != 0 || sb.ro_compat().0 != 0 || sb.incompat().0 != 0;
    (sb.s_rev_level() == 0 && any).then(|| Finding::new(Code::Rev0WithFeatures))
}

pub(crate) fn check_super_block(fs: &Fs) -> Result<SuperCheck, Fatal> {
    let geo = &fs.geo;
    let mut out = SuperCheck {
        findings: Vec::new(),
        missing_block_bitmap: Vec::new(),
        missing_inode_bitmap: Vec::new(),
        missing_inode_table: Vec::new(),
    };
    check_limits(fs)?;
    if fs.dev_blocks < geo.blocks_count {
        out.findings.push(
            Finding::new(Code::FsSizeWrong)
                .blk(geo.blocks_count)
                .blk2(fs.dev_blocks),
        );
    }
    let sb = fs.sb();
    let ratio = u64::from(geo.cluster_ratio);
    let should_first = u64::from(sb.s_log_block_size() == 0 && ratio == 1);
    if u64::from(sb.s_first_data_block()) != should_first {
        return Err(Fatal {
            reason: format!(
                "the first data block is {}, should be {should_first}",
                sb.s_first_data_block()
            ),
            uncorrected: false,
        });
    }
    feature_findings(fs, &mut out.findings);
    for g in fs.groups() {
        check_descriptor(fs, g, &mut out);
    }
    for (ino, what) in [
        (sb.s_usr_quota_inum(), "user"),
        (sb.s_grp_quota_inum(), "group"),
        (sb.s_prj_quota_inum(), "project"),
    ] {
        if ino != 0 && (matches!(ino, 1 | 2 | 5 | 6 | 7 | 8 | 9 | 10) || ino > sb.s_inodes_count())
        {
            out.findings
                .push(Finding::new(Code::InvalidQuotaInode).ino(ino).detail(what));
        }
    }
    Ok(out)
}

/// The superblock's numbers against their limits; any out of range
/// stops the check.
/// Whether the superblock's values pass e2fsck's range checks, which
/// come before its fix of a wrong inode count (a repair that fixes the
/// count before the check must not fix it when they fail: e2fsck stops
/// first).
pub fn values_in_range(fs: &Fs) -> bool {
    limits(fs, false).is_ok()
}

fn check_limits(fs: &Fs) -> Result<(), Fatal> {
    limits(fs, true)
}

/// e2fsck's range checks of the superblock; with `past_values`, also
/// what follows them (the inode count, the first inode, the inode size,
/// blocks against clusters per group).
fn limits(fs: &Fs, past_values: bool) -> Result<(), Fatal> {
    let geo = &fs.geo;
    let sb = fs.sb();
    let bs = u64::from(geo.block_size);
    let ratio = u64::from(geo.cluster_ratio);
    let ipb = u64::from(geo.inodes_per_block);
    let bad = |field: &str, v: u64| Fatal {
        reason: format!("superblock field {field} has an invalid value {v}"),
        uncorrected: false,
    };
    let cpg_max = (8 * bs).min(65528);
    let bpg_max = (8 * bs * ratio).min(65528 * ratio);
    let ipg_max = (ipb * u64::from(sb.s_blocks_per_group()).saturating_sub(4)).min(65536 - ipb);
    let blks_max = if sb.is_64bit() {
        ((1u64 << 32) * 65528 * ratio).min((1 << 48) - 1)
    } else {
        ((1u64 << 32) * 65528 * ratio).min((1 << 32) - 1)
    };
    if sb.s_inodes_count() < 1 {
        return Err(bad("s_inodes_count", u64::from(sb.s_inodes_count())));
    }
    if sb.blocks_count() < 1 || sb.blocks_count() > blks_max {
        return Err(bad("s_blocks_count", sb.blocks_count()));
    }
    if u64::from(sb.s_first_data_block()) > sb.blocks_count() {
        return Err(bad(
            "s_first_data_block",
            u64::from(sb.s_first_data_block()),
        ));
    }
    if sb.s_log_block_size() > 6 {
        return Err(bad("s_log_block_size", u64::from(sb.s_log_block_size())));
    }
    if sb.s_log_cluster_size() < sb.s_log_block_size() || sb.s_log_cluster_size() > 19 {
        return Err(bad(
            "s_log_cluster_size",
            u64::from(sb.s_log_cluster_size()),
        ));
    }
    let cpg = u64::from(sb.s_clusters_per_group());
    if !(8..=cpg_max).contains(&cpg) {
        return Err(bad("s_clusters_per_group", cpg));
    }
    let bpg = u64::from(sb.s_blocks_per_group());
    if !(8..=bpg_max).contains(&bpg) {
        return Err(bad("s_blocks_per_group", bpg));
    }
    let ipg = u64::from(sb.s_inodes_per_group());
    if ipg < ipb || ipg > ipg_max {
        return Err(bad("s_inodes_per_group", ipg));
    }
    if sb.r_blocks_count() > sb.blocks_count() / 2 {
        return Err(bad("s_r_blocks_count", sb.r_blocks_count()));
    }
    if u64::from(sb.s_reserved_gdt_blocks()) > bs / 4 {
        return Err(bad(
            "s_reserved_gdt_blocks",
            u64::from(sb.s_reserved_gdt_blocks()),
        ));
    }
    let ds = sb.s_desc_size_raw();
    if ds > 1024 || (ds != 0 && !ds.is_power_of_two()) {
        return Err(bad("s_desc_size", u64::from(ds)));
    }
    let groups = u64::from(geo.group_count);
    if ipg * groups > u64::from(u32::MAX) {
        return Err(bad("s_inodes_count", ipg * groups));
    }
    if u64::from(sb.s_inodes_count()) != ipg * groups {
        if !past_values {
            return Ok(());
        }
        return Err(Fatal {
            reason: "the inode count in the superblock is wrong".into(),
            uncorrected: true,
        });
    }
    if sb.s_rev_level() > 0
        && (sb.s_first_ino_raw() < 11 || sb.s_first_ino_raw() > sb.s_inodes_count())
    {
        return Err(bad("s_first_ino", u64::from(sb.s_first_ino_raw())));
    }
    let isz = u64::from(sb.inode_size());
    if isz < 128 || isz > bs || !isz.is_power_of_two() {
        return Err(bad("s_inode_size", isz));
    }
    if bpg != cpg * ratio {
        return Err(bad("s_blocks_per_group", bpg));
    }
    Ok(())
}

/// Extra-isize settings and feature combinations that cannot be.
fn feature_findings(fs: &Fs, findings: &mut Vec<Finding>) {
    let geo = &fs.geo;
    let sb = fs.sb();
    let isz = u64::from(sb.inode_size());
    if isz > 128 {
        let max = isz - 128;
        for (v, code) in [
            (sb.s_min_extra_isize(), Code::BadMinExtraIsize),
            (sb.s_want_extra_isize(), Code::BadWantExtraIsize),
        ] {
            let v = u64::from(v);
            if v != 0 && (v < 4 || v > max || v % 4 != 0) {
                findings.push(Finding::new(code).found(v));
            }
        }
    }
    let ro = geo.ro_compat;
    if ro.contains(RoCompatFeatures::METADATA_CSUM) && ro.contains(RoCompatFeatures::GDT_CSUM) {
        findings.push(Finding::new(Code::MetaAndGdtCsum));
    }
    if geo.incompat.contains(IncompatFeatures::CSUM_SEED)
        && !ro.contains(RoCompatFeatures::METADATA_CSUM)
    {
        findings.push(Finding::new(Code::CsumSeedWithoutMetaCsum));
    }
    if geo.incompat.contains(IncompatFeatures::BIT64)
        && !geo.incompat.contains(IncompatFeatures::EXTENTS)
    {
        findings.push(Finding::new(Code::Bit64WithoutExtents));
    }
    if geo.incompat.contains(IncompatFeatures::META_BG) && geo.first_meta_bg > geo.desc_blocks {
        findings.push(
            Finding::new(Code::FirstMetaBgTooBig)
                .over_limit(u64::from(geo.first_meta_bg), u64::from(geo.desc_blocks)),
        );
    }
}

/// One group descriptor: where its bitmaps and table are, its checksum,
/// and its flags and unused-inode count.
fn check_descriptor(fs: &Fs, g: ext4_layout::Group, out: &mut SuperCheck) {
    let geo = &fs.geo;
    let sb = fs.sb();
    let csum_flag = fs.has_gdt_csum();
    let gd = fs.gd(g.0);
    let (first, last) = allowed_range(geo, g);
    let bb = gd.block_bitmap();
    if bb < first || bb > last {
        out.findings
            .push(Finding::new(Code::BlockBitmapNotInGroup).group(g.0).blk(bb));
    }
    if bb == 0 {
        out.missing_block_bitmap.push(g.0);
    }
    let ib = gd.inode_bitmap();
    if ib < first || ib > last {
        out.findings
            .push(Finding::new(Code::InodeBitmapNotInGroup).group(g.0).blk(ib));
    }
    if ib == 0 {
        out.missing_inode_bitmap.push(g.0);
    }
    let it = gd.inode_table();
    if it < first
        || it
            .saturating_add(u64::from(geo.inode_blocks_per_group))
            .saturating_sub(1)
            > last
    {
        out.findings
            .push(Finding::new(Code::InodeTableNotInGroup).group(g.0).blk(it));
    }
    if it == 0 {
        out.missing_inode_table.push(g.0);
    }
    if csum_flag && !fs.gd_csum_ok(g.0) {
        let want = gd.computed_checksum(g.0, fs.metadata_csum(), geo.csum_seed, &sb.s_uuid());
        out.findings.push(
            Finding::new(Code::GroupDescChecksum)
                .group(g.0)
                .mismatch(u64::from(gd.bg_checksum()), u64::from(want)),
        );
    }
    if !csum_flag
        && (gd.has_flag(BG_BLOCK_UNINIT) || gd.has_flag(BG_INODE_UNINIT) || gd.itable_unused() != 0)
    {
        out.findings
            .push(Finding::new(Code::GroupUninitWithoutCsum).group(g.0));
    }
    if g.0 == geo.group_count - 1 && gd.has_flag(BG_BLOCK_UNINIT) {
        out.findings
            .push(Finding::new(Code::LastGroupBlockUninit).group(g.0));
    }
    if csum_flag
        && (gd.itable_unused() > gd.free_inodes_count()
            || gd.itable_unused() > geo.inodes_per_group)
    {
        out.findings.push(
            Finding::new(Code::GroupItableUnusedInvalid)
                .group(g.0)
                .found(u64::from(gd.itable_unused())),
        );
    }
}

/// e2fsck's check_resize_inode, as notices.
pub(crate) fn check_resize_inode(fs: &Fs, io: &mut Io<'_>) -> Vec<Finding> {
    let geo = &fs.geo;
    let sb = fs.sb();
    let mut out = Vec::new();
    let resize = geo.compat.contains(CompatFeatures::RESIZE_INODE);
    if resize && geo.incompat.contains(IncompatFeatures::META_BG) {
        out.push(Finding::new(Code::DisableResizeInode));
    }
    if !resize && sb.s_reserved_gdt_blocks() != 0 {
        out.push(
            Finding::new(Code::NonzeroReservedGdt).found(u64::from(sb.s_reserved_gdt_blocks())),
        );
    }
    let mut buf = vec![0u8; geo.inode_size as usize];
    if io.read_inode(7, &mut buf).is_err() {
        return out;
    }
    let Some(inode) = Inode::new(&buf) else {
        return out;
    };
    if !resize {
        if (0..15).any(|i| inode.i_block_word(i) != 0) {
            out.push(Finding::new(Code::ClearResizeInode));
        }
        return out;
    }
    let dind = u64::from(inode.i_block_word(13));
    let mut why = None;
    if (0..15).any(|i| i != 13 && inode.i_block_word(i) != 0)
        || dind == 0
        || inode.i_links_count() == 0
        || inode.i_mode() & 0x8000 == 0
        || !geo.block_in_range(dind)
    {
        why = Some("its block map is not a single double indirect block");
    }
    if why.is_none() {
        let bs = fs.block_size();
        let mut db = vec![0u8; bs];
        let mut ib = vec![0u8; bs];
        if io.read_blocks(dind, &mut db).is_err() {
            why = Some("its double indirect block cannot be read");
        } else {
            let per = bs / 4;
            let gdt_off = u64::from(geo.first_data_block == 0 && bs == 1024);
            let first = geo.first_data_block + 1 + u64::from(geo.desc_blocks) + gdt_off;
            let count = u64::from(sb.s_reserved_gdt_blocks()) / 4;
            // The reserved blocks lie together: one read for all of them
            // (block by block only if that read fails).
            let mut all = vec![0u8; bs * count as usize];
            let together = geo.block_in_range(first + count.saturating_sub(1))
                && io.read_blocks(first, &mut all).is_ok();
            for i in 0..count {
                let pblk = first + i;
                let slot = ((u64::from(geo.desc_blocks) + i) as usize) % per;
                if u64::from(ext4_layout::blockmap::pointer(&db, slot)) != pblk {
                    why = Some("a reserved descriptor block is not mapped");
                    break;
                }
                if together {
                    let at = i as usize * bs;
                    ib.copy_from_slice(&all[at..at + bs]);
                } else if io.read_blocks(pblk, &mut ib).is_err() {
                    why = Some("a reserved descriptor block cannot be read");
                    break;
                }
                let mut k = 0usize;
                for grp in geo.backup_groups() {
                    let want = pblk + u64::from(grp.0) * u64::from(geo.blocks_per_group);
                    if u64::from(ext4_layout::blockmap::pointer(&ib, k)) != want {
                        why = Some("a reserved descriptor block's backups are not mapped");
                        break;
                    }
                    k += 1;
                    if k >= per {
                        break;
                    }
                }
                if why.is_some() {
                    break;
                }
            }
        }
    }
    if let Some(w) = why {
        out.push(Finding::new(Code::ResizeInodeInvalid).detail(w));
    }
    out
}

/// Whether the resize inode cannot be read at all (its checksum fails) on
/// a file system with resize_inode: e2fsck then tries to recreate it at
/// the end of pass 1, which a read-only check cannot do.
pub(crate) fn resize_inode_unreadable(fs: &Fs, io: &mut Io<'_>) -> bool {
    if !fs.geo.compat.contains(CompatFeatures::RESIZE_INODE) || !fs.metadata_csum() {
        return false;
    }
    let mut buf = vec![0u8; fs.geo.inode_size as usize];
    if io.read_inode(7, &mut buf).is_err() {
        return true;
    }
    Inode::new(&buf).is_some_and(|i| !i.checksum_ok(fs.geo.csum_seed, 7))
}
