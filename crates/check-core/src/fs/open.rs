//! Opening the file system the way e2fsck does: validate the primary
//! superblock, fall back to a backup when the primary (or its descriptor
//! table) is unusable, and give up with an operational error otherwise.

use std::sync::Arc;

use ext4_layout::features::{
    IncompatFeatures, RoCompatFeatures, SUPPORTED_COMPAT, SUPPORTED_INCOMPAT, SUPPORTED_RO_COMPAT,
};
use ext4_layout::group_desc as gd;
use ext4_layout::group_desc::{BG_BLOCK_UNINIT, BG_CHECKSUM_OFFSET, BG_INODE_UNINIT};
use ext4_layout::superblock::{Superblock, CHECKSUM_TYPE_CRC32C, EXT2_MAGIC, SUPERBLOCK_SIZE};
use ext4_layout::{Geometry, GeometryError};
use pipeline::Device;

use super::layout::check_desc;
use super::Fs;
use crate::problem::{Code, Finding};

/// How the file system is to be opened.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    /// True for a read-only check (`-n`).
    pub read_only: bool,
    /// A superblock to use instead of the primary (e2fsck's `-b`).
    pub superblock: Option<SbLoc>,
}

/// Where a chosen superblock is: its block number, in blocks of the given
/// size, or of each size from 1 KiB up to 64 KiB until one holds a
/// superblock of that block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SbLoc {
    /// The block number.
    pub block: u64,
    /// The block size it is counted in.
    pub block_size: Option<u32>,
}

/// A successfully opened file system and what was noticed on the way.
pub struct Opened {
    /// The file system.
    pub fs: Fs,
    /// Findings made while opening.
    pub findings: Vec<Finding>,
    /// Lines to show before the report (which superblock is in use...).
    pub notes: Vec<String>,
}

/// Why the file system could not be checked at all.
#[derive(Debug)]
pub struct OpenFailure {
    /// The exit code: 8, or 12 when the failure came after the file
    /// system was recognised (e2fsck counts those as errors left too).
    pub exit: i32,
    /// What went wrong, for the user.
    pub message: String,
    /// Lines printed on the way.
    pub notes: Vec<String>,
}

/// The library-level reasons an open fails.
#[derive(Debug)]
enum OpenErr {
    Io(std::io::Error),
    BadMagic,
    SbCsumInvalid,
    UnknownCsum,
    Corrupt(String),
    RevTooHigh,
    UnsuppFeature(Vec<String>),
    BadDescSize,
    JournalDev,
    BadFirstIno(u32),
    /// A value e2fsprogs' open accepts and e2fsck's own check of the
    /// superblock then refuses (no backup is tried: exit 8).
    Refused(String),
}

impl OpenErr {
    fn describe(&self) -> String {
        match self {
            OpenErr::Io(e) => format!("cannot read the superblock: {e}"),
            OpenErr::BadMagic => {
                "bad magic number in superblock (not an ext2/3/4 file system?)".into()
            }
            OpenErr::SbCsumInvalid => {
                "the superblock checksum does not match the superblock".into()
            }
            OpenErr::UnknownCsum => "the superblock names an unknown checksum algorithm".into(),
            OpenErr::Corrupt(why) => format!("the superblock is corrupt: {why}"),
            OpenErr::RevTooHigh => "the file system revision is too high for this checker".into(),
            OpenErr::UnsuppFeature(f) => format!("unsupported feature(s): {}", f.join(" ")),
            OpenErr::BadDescSize => "the group descriptor size is invalid".into(),
            OpenErr::JournalDev => "this is an external journal device, not a file system".into(),
            OpenErr::BadFirstIno(n) => {
                format!("the superblock is corrupt: its first inode, {n}, is out of range")
            }
            OpenErr::Refused(why) => format!("the superblock is corrupt: {why}"),
        }
    }

    /// Errors that make e2fsck look for a backup superblock.
    fn wants_backup(&self) -> bool {
        matches!(
            self,
            OpenErr::BadMagic | OpenErr::SbCsumInvalid | OpenErr::Corrupt(_)
        )
    }
}

/// What one open attempt produced.
struct Parts {
    sb: Box<[u8; SUPERBLOCK_SIZE]>,
    geo: Geometry,
    gdt: Vec<u8>,
    sb_block: u64,
}

fn read_sb(dev: &Device, byte_off: u64) -> Result<Box<[u8; SUPERBLOCK_SIZE]>, OpenErr> {
    let mut sb = Box::new([0u8; SUPERBLOCK_SIZE]);
    dev.read_at(&mut sb[..], byte_off).map_err(OpenErr::Io)?;
    Ok(sb)
}

/// One open attempt: the superblock at `at` (None: the primary at byte
/// 1024; Some((block, block_size)): a backup), validated as the library
/// does, then the descriptor table.
fn try_open(
    dev: &Device,
    at: Option<(u64, u32)>,
    ignore_sb_errors: bool,
) -> Result<Parts, OpenErr> {
    let (byte_off, sb_block) = match at {
        None => (1024, 0),
        Some((blk, bs)) => (blk * u64::from(bs), blk),
    };
    let raw = read_sb(dev, byte_off)?;
    let sb = Superblock::from_array(&raw);
    check_identity(&sb)?;
    check_shape(&sb, ignore_sb_errors)?;
    let geo = Geometry::from_superblock(&sb).map_err(geometry_err)?;
    if sb.incompat().contains(IncompatFeatures::META_BG)
        && geo.first_meta_bg > geo.desc_blocks
        && !ignore_sb_errors
    {
        return Err(OpenErr::Corrupt(
            "first meta block group is past the descriptor table".into(),
        ));
    }
    let gdt = read_gdt(dev, &geo, sb_block)?;
    let mut parts = Parts {
        sb: raw,
        geo,
        gdt,
        sb_block,
    };
    if sb_block > 1 && parts.geo.has_gdt_csum() {
        // A backup's descriptors are stale: forget their UNINIT hints.
        clear_uninit_in_memory(&mut parts);
    }
    Ok(parts)
}

/// What the superblock says it is: its magic, checksum, revision and
/// features, in the order the library judges them.
fn check_identity(sb: &Superblock<'_>) -> Result<(), OpenErr> {
    let metadata_csum = sb.ro_compat().contains(RoCompatFeatures::METADATA_CSUM);
    let mut pending = None;
    if metadata_csum && sb.s_checksum_type() != CHECKSUM_TYPE_CRC32C {
        pending = Some(OpenErr::UnknownCsum);
    }
    if metadata_csum && !sb.checksum_ok() {
        pending = Some(OpenErr::SbCsumInvalid);
    }
    if sb.s_magic() != EXT2_MAGIC {
        return Err(OpenErr::BadMagic);
    }
    if let Some(e) = pending {
        return Err(e);
    }
    if sb.s_rev_level() > ext4_layout::superblock::DYNAMIC_REV {
        return Err(OpenErr::RevTooHigh);
    }
    let unsupported = sb.incompat().difference(SUPPORTED_INCOMPAT);
    if !unsupported.is_empty() {
        return Err(OpenErr::UnsuppFeature(unsupported.names()));
    }
    if sb.incompat().contains(IncompatFeatures::JOURNAL_DEV) {
        return Err(OpenErr::JournalDev);
    }
    Ok(())
}

/// Whether the superblock's sizes and counts describe a file system the
/// library can open.
fn check_shape(sb: &Superblock<'_>, ignore_sb_errors: bool) -> Result<(), OpenErr> {
    let log_block = sb.s_log_block_size();
    let log_cluster = sb.s_log_cluster_size();
    let bigalloc = sb.ro_compat().contains(RoCompatFeatures::BIGALLOC);
    if log_block > 6 {
        return Err(OpenErr::Corrupt(format!(
            "block size exponent {log_block} is too large"
        )));
    }
    if log_cluster > 19 || (bigalloc && log_block > log_cluster) {
        return Err(OpenErr::Corrupt(format!(
            "cluster size exponent {log_cluster} is invalid"
        )));
    }
    if sb.s_log_groups_per_flex() > 31 {
        return Err(OpenErr::Corrupt("flex group size is too large".into()));
    }
    if !bigalloc && log_block != log_cluster {
        return Err(OpenErr::Corrupt(
            "cluster size differs from block size without bigalloc".into(),
        ));
    }
    let bs = 1024u32 << log_block;
    let isz = sb.inode_size();
    if isz < 128 || u32::from(isz) > bs || !isz.is_power_of_two() {
        return Err(OpenErr::Corrupt(format!("inode size {isz} is invalid")));
    }
    if sb.is_64bit() {
        let ds = sb.s_desc_size_raw();
        if ds == 0 || (!ignore_sb_errors && (!(64..=1024).contains(&ds) || !ds.is_power_of_two())) {
            return Err(OpenErr::BadDescSize);
        }
        // Loaded despite errors, any size up to a block opens; the
        // descriptor check then sends a bad one to a backup.
        if u32::from(ds) > bs {
            return Err(OpenErr::Corrupt(format!(
                "group descriptor size {ds} is larger than a block"
            )));
        }
    }
    // As the library compares them, with or without bigalloc (without it
    // the two sizes are equal, so the counts must be too), in 32 bits.
    let ratio_bits = log_cluster.saturating_sub(log_block);
    if sb.s_blocks_per_group() != sb.s_clusters_per_group() << ratio_bits {
        return Err(OpenErr::Corrupt(format!(
            "blocks per group ({}) disagrees with clusters per group ({})",
            sb.s_blocks_per_group(),
            sb.s_clusters_per_group()
        )));
    }
    if sb.s_inodes_per_group() == 0 {
        return Err(OpenErr::Corrupt("inodes per group is zero".into()));
    }
    let bpg = sb.s_blocks_per_group();
    let max_bpg = 65528u64 << ratio_bits;
    let ipb = bs / u32::from(isz);
    let itb = (u64::from(sb.s_inodes_per_group()) * u64::from(isz)).div_ceil(u64::from(bs));
    if bpg < 8 || u64::from(bpg) > max_bpg || itb > u64::from(65536 - ipb) {
        return Err(OpenErr::Corrupt(format!(
            "blocks per group {bpg} is out of range"
        )));
    }
    if u64::from(sb.s_first_data_block()) >= sb.blocks_count() {
        return Err(OpenErr::Corrupt(
            "first data block is past the end of the file system".into(),
        ));
    }
    let groups = (sb.blocks_count() - u64::from(sb.s_first_data_block())).div_ceil(u64::from(bpg));
    if groups >= 1 << 32 {
        return Err(OpenErr::Corrupt("too many block groups".into()));
    }
    if !ignore_sb_errors
        && groups * u64::from(sb.s_inodes_per_group()) != u64::from(sb.s_inodes_count())
    {
        return Err(OpenErr::Corrupt(format!(
            "inode count {} disagrees with {groups} groups of {} inodes",
            sb.s_inodes_count(),
            sb.s_inodes_per_group()
        )));
    }
    Ok(())
}

fn geometry_err(e: GeometryError) -> OpenErr {
    match e {
        // e2fsck opens such a superblock and then stops in its own check
        // (no backup is tried).
        GeometryError::BadFirstIno(n) => OpenErr::BadFirstIno(n),
        GeometryError::BadMagic(_) => OpenErr::BadMagic,
        GeometryError::BadRevision(_) => OpenErr::RevTooHigh,
        GeometryError::BadDescSize(_) => OpenErr::BadDescSize,
        // Past the library's open (`check_shape` has passed), these are
        // e2fsck's check of the superblock's values, which stops the run
        // where it is.
        e @ (GeometryError::BadClusterSize(_)
        | GeometryError::BadPerGroup { .. }
        | GeometryError::BadInodesCount { .. }) => OpenErr::Refused(e.to_string()),
        other => OpenErr::Corrupt(other.to_string()),
    }
}

/// Reads the descriptor table that belongs to the superblock at `sb_block`.
fn read_gdt(dev: &Device, geo: &Geometry, sb_block: u64) -> Result<Vec<u8>, OpenErr> {
    let bs = geo.block_size as usize;
    let group_block = if sb_block == 0 {
        geo.first_data_block
    } else {
        sb_block
    };
    let zero_adjust = u64::from(group_block == 0 && bs == 1024);
    let desc_blocks = geo.desc_blocks as usize;
    // Cap the allocation: a sane table never exceeds the file system.
    let bytes = desc_blocks
        .checked_mul(bs)
        .filter(|&n| (n as u64) <= dev.size())
        .ok_or_else(|| OpenErr::Corrupt("the descriptor table is larger than the device".into()))?;
    let mut gdt = vec![0u8; bytes];
    let first_meta = if geo.incompat.contains(IncompatFeatures::META_BG) {
        (geo.first_meta_bg as usize).min(desc_blocks)
    } else {
        desc_blocks
    };
    if first_meta > 0 {
        let start = (group_block + zero_adjust + 1) * bs as u64;
        dev.read_at(&mut gdt[..first_meta * bs], start)
            .map_err(OpenErr::Io)?;
    }
    for i in first_meta..desc_blocks {
        let mut blk = geo.descriptor_block(group_block, i as u32).0;
        if i == 0 {
            blk += zero_adjust;
        }
        dev.read_at(&mut gdt[i * bs..(i + 1) * bs], blk * bs as u64)
            .map_err(OpenErr::Io)?;
    }
    gdt.truncate(geo.group_count as usize * geo.desc_size as usize);
    Ok(gdt)
}

fn clear_uninit_in_memory(p: &mut Parts) {
    let ds = p.geo.desc_size as usize;
    let sb = Superblock::from_array(&p.sb);
    let uuid = sb.s_uuid();
    for g in 0..p.geo.group_count {
        let off = g as usize * ds;
        let Some(d) = p.gdt.get_mut(off..off + ds) else {
            break;
        };
        let flags = gd::field::bg_flags.get(d) & !(BG_BLOCK_UNINIT | BG_INODE_UNINIT);
        gd::field::bg_flags.set(d, flags);
        gd::ITABLE_UNUSED.set(d, 0);
        let c = ext4_layout::group_desc::GroupDesc::over(d).computed_checksum(
            g,
            p.geo.metadata_csum(),
            p.geo.csum_seed,
            &uuid,
        );
        d[BG_CHECKSUM_OFFSET..BG_CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_le_bytes());
    }
}

/// Groups that may hold superblock backups, in the order e2fsck probes
/// them when it does not yet know the layout: 1, then powers of 3, 5 and 7.
fn backup_candidates(limit: u64) -> Vec<u64> {
    let mut v = vec![1u64];
    for base in [3u64, 5, 7] {
        let mut p = base;
        while p <= limit {
            v.push(p);
            p = match p.checked_mul(base) {
                Some(n) => n,
                None => break,
            };
        }
    }
    v.sort_unstable();
    v.dedup();
    v.retain(|&g| g <= limit);
    v
}

/// Finds a backup superblock: block size and blocks per group are known
/// when the primary opened, else every block size is tried with the
/// default of 8 × block size blocks per group.
fn find_backup(dev: &Device, known: Option<&Parts>) -> Option<(u64, u32)> {
    let sizes: Vec<(u32, u64)> = match known {
        Some(p) => vec![(p.geo.block_size, u64::from(p.geo.blocks_per_group))],
        None => (0..=6)
            .map(|l| (1024u32 << l, u64::from(1024u32 << l) * 8))
            .collect(),
    };
    for (bs, bpg) in sizes {
        let blocks = match known {
            Some(p) => p.geo.blocks_count,
            None => dev.size() / u64::from(bs),
        };
        let limit = blocks / bpg;
        for g in backup_candidates(limit) {
            let blk = g * bpg + u64::from(bs == 1024);
            let Ok(raw) = read_sb(dev, blk * u64::from(bs)) else {
                continue;
            };
            let sb = Superblock::from_array(&raw);
            if sb.s_magic() == EXT2_MAGIC && sb.block_size() == Some(bs) {
                return Some((blk, bs));
            }
        }
    }
    None
}

/// Opens the superblock the user chose, and nothing else: no fallback.
fn open_chosen(dev: &Device, at: SbLoc) -> Result<Parts, OpenFailure> {
    let sizes: Vec<u32> = match at.block_size {
        Some(bs) => vec![bs],
        None => (0..=6).map(|l| 1024u32 << l).collect(),
    };
    let mut last = None;
    for bs in sizes {
        let Some(byte_off) = at.block.checked_mul(u64::from(bs)) else {
            last = Some(OpenErr::Corrupt("the block number is too large".into()));
            continue;
        };
        if !(1024..=65536).contains(&bs) || !bs.is_power_of_two() {
            last = Some(OpenErr::Corrupt(format!("{bs} is not a block size")));
            continue;
        }
        match read_sb(dev, byte_off) {
            Ok(raw) => {
                let sb = Superblock::from_array(&raw);
                if sb.s_magic() != EXT2_MAGIC {
                    last = Some(OpenErr::BadMagic);
                    continue;
                }
                if sb.block_size() != Some(bs) {
                    last = Some(OpenErr::Corrupt(format!(
                        "it is not counted in {bs}-byte blocks"
                    )));
                    continue;
                }
            }
            Err(e) => {
                last = Some(e);
                continue;
            }
        }
        match try_open(dev, Some((at.block, bs)), false) {
            Ok(p) => return Ok(p),
            Err(e) => last = Some(e),
        }
    }
    let why = last.map_or_else(|| "no block size fits".to_string(), |e| e.describe());
    Err(OpenFailure {
        exit: 8,
        message: format!(
            "{}: block {} does not hold a usable superblock: {why}",
            dev.path().display(),
            at.block
        ),
        notes: Vec::new(),
    })
}

/// Opens the file system, choosing the superblock as e2fsck does.
pub fn open_fs(dev: Arc<Device>, opts: OpenOptions) -> Result<Opened, OpenFailure> {
    open_with(dev, opts, true)
}

/// Opens the file system from its primary superblock and descriptors
/// only, as e2fsck's preen does (it never goes looking for backups): a
/// superblock whose only fault is one e2fsck loads it despite (an inode
/// count that disagrees with its groups, say) still opens.
pub fn open_primary(dev: Arc<Device>) -> Result<Opened, OpenFailure> {
    open_with(dev, OpenOptions::default(), false)
}

fn open_with(dev: Arc<Device>, opts: OpenOptions, backups: bool) -> Result<Opened, OpenFailure> {
    let mut notes = Vec::new();
    let mut findings = Vec::new();
    let mut ignore_sb_errors = false;
    let chosen = opts.superblock.filter(|at| {
        at.block
            .checked_mul(u64::from(at.block_size.unwrap_or(1024)))
            != Some(1024)
    });
    if let Some(at) = chosen {
        let parts = open_chosen(&dev, at)?;
        findings.push(Finding::new(Code::SuperblockFromBackup).blk(parts.sb_block));
        let fs = parts_to_fs(&dev, parts, true);
        return finish_open(dev, fs, opts, findings, notes);
    }
    let parts = loop {
        let attempt = match try_open(&dev, None, ignore_sb_errors) {
            Ok(primary) => {
                let probe = parts_to_fs(&dev, primary, false);
                match check_desc(&probe) {
                    Ok(()) => Ok((fs_to_parts(probe), false)),
                    Err(e) => {
                        notes.push(format!("group descriptors look bad: {}", e.describe()));
                        let primary = fs_to_parts(probe);
                        if !backups {
                            Ok((primary, false))
                        } else if primary.geo.group_count > 1 {
                            notes.push("trying the backup superblock and descriptors".into());
                            match find_backup(&dev, Some(&primary))
                                .map(|at| try_open(&dev, Some(at), ignore_sb_errors))
                            {
                                Some(Ok(b)) => {
                                    findings.push(
                                        Finding::new(Code::DescriptorsUsedBackup)
                                            .detail(e.describe())
                                            .blk(b.sb_block),
                                    );
                                    Ok((b, true))
                                }
                                Some(Err(e2)) => {
                                    notes.push(format!(
                                        "the backup cannot be used ({}); going back to the primary",
                                        e2.describe()
                                    ));
                                    Ok((primary, false))
                                }
                                None => Ok((primary, false)),
                            }
                        } else {
                            findings.push(Finding::new(Code::DescriptorsBad).detail(e.describe()));
                            Ok((primary, false))
                        }
                    }
                }
            }
            Err(e) if backups && e.wants_backup() => {
                notes.push(format!(
                    "superblock invalid ({}); trying backup blocks",
                    e.describe()
                ));
                match find_backup(&dev, None).map(|at| try_open(&dev, Some(at), ignore_sb_errors)) {
                    Some(Ok(b)) => {
                        findings.push(
                            Finding::new(Code::SuperblockUsedBackup)
                                .detail(e.describe())
                                .blk(b.sb_block),
                        );
                        Ok((b, true))
                    }
                    _ => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        match attempt {
            Ok(p) => break p,
            Err(e) => {
                if matches!(e, OpenErr::Corrupt(_) | OpenErr::BadDescSize) && !ignore_sb_errors {
                    notes.push("trying to load the superblock despite errors".into());
                    ignore_sb_errors = true;
                    continue;
                }
                return Err(OpenFailure {
                    exit: 8,
                    message: failure_message(&dev, &e),
                    notes,
                });
            }
        }
    };
    let (parts, backup) = parts;
    let fs = parts_to_fs(&dev, parts, backup);
    if backup {
        notes.push(format!(
            "using the backup superblock at block {}",
            fs.sb_block
        ));
    }
    finish_open(dev, fs, opts, findings, notes)
}

/// The one line a failed open ends with: what the device holds when it
/// is another format; why the superblock is unusable, with the hint of a
/// backup, only when a backup could help.
fn failure_message(dev: &Device, e: &OpenErr) -> String {
    let path = dev.path().display();
    if matches!(e, OpenErr::BadMagic) {
        let mut head = vec![0u8; ext4_layout::foreign::PROBE_LEN];
        let n = read_prefix(dev, &mut head);
        if let Some(name) = ext4_layout::foreign::identify(&head[..n]) {
            return format!(
                "{path} contains {} {name}, not an ext2/3/4 file system",
                ext4_layout::foreign::article(name)
            );
        }
        return format!(
            "{path}: no ext2/3/4 superblock (bad magic number), and no backup either; \
             if it is an ext2/3/4 file system, try a backup superblock with -b"
        );
    }
    match e {
        OpenErr::Io(_) | OpenErr::SbCsumInvalid | OpenErr::Corrupt(_) | OpenErr::BadFirstIno(_) => {
            format!(
                "{path}: {}; no backup superblock could be used either",
                e.describe()
            )
        }
        _ => format!("{path}: {}", e.describe()),
    }
}

/// Reads as much of the device's start as it holds into `buf`; returns
/// how many bytes were read.
fn read_prefix(dev: &Device, buf: &mut [u8]) -> usize {
    let n = usize::try_from(dev.size())
        .unwrap_or(usize::MAX)
        .min(buf.len());
    let n = n - n % 512;
    if n > 0 && dev.read_at(&mut buf[..n], 0).is_ok() {
        n
    } else {
        0
    }
}

/// The checks made once a superblock is chosen.
fn finish_open(
    dev: Arc<Device>,
    fs: Fs,
    opts: OpenOptions,
    findings: Vec<Finding>,
    notes: Vec<String>,
) -> Result<Opened, OpenFailure> {
    // Feature sets the checker cannot handle stop it here, after the file
    // system was recognised (e2fsck exits 12 for these).
    let compat = fs.sb().compat().difference(SUPPORTED_COMPAT);
    let ro = fs.sb().ro_compat().difference(SUPPORTED_RO_COMPAT);
    let mut bad = compat.names();
    bad.extend(ro.names());
    if !bad.is_empty() {
        return Err(OpenFailure {
            // Read-only, the open succeeds and the check stops after it (12);
            // a read-write open already refuses unknown ro_compat bits (8).
            exit: if !opts.read_only && !ro.is_empty() {
                8
            } else {
                12
            },
            message: format!(
                "{} has unsupported feature(s): {}; a newer checker is needed",
                dev.path().display(),
                bad.join(" ")
            ),
            notes,
        });
    }
    if fs.sb().incompat().contains(IncompatFeatures::CASEFOLD) && fs.sb().s_encoding() != 1 {
        return Err(OpenFailure {
            exit: 12,
            message: format!(
                "{}: the file system uses an unknown file name encoding ({})",
                dev.path().display(),
                fs.sb().s_encoding()
            ),
            notes,
        });
    }
    Ok(Opened {
        fs,
        findings,
        notes,
    })
}

fn parts_to_fs(dev: &Arc<Device>, p: Parts, backup: bool) -> Fs {
    let dev_blocks = dev.size() / u64::from(p.geo.block_size);
    Fs {
        dev: dev.clone(),
        sb: p.sb,
        geo: p.geo,
        gdt: p.gdt,
        sb_block: p.sb_block,
        backup_in_use: backup,
        dev_blocks,
        read_errors: Default::default(),
    }
}

fn fs_to_parts(fs: Fs) -> Parts {
    Parts {
        sb: fs.sb,
        geo: fs.geo,
        gdt: fs.gdt,
        sb_block: fs.sb_block,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_order() {
        assert_eq!(backup_candidates(30), vec![1, 3, 5, 7, 9, 25, 27]);
        assert_eq!(backup_candidates(0), Vec::<u64>::new());
        assert_eq!(backup_candidates(1), vec![1]);
    }
}
