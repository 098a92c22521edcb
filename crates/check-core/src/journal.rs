//! The journal as seen before pass 1: is the journal inode usable, is its
//! superblock sound, and does it need recovery. A journal that cannot be
//! used stops the check (e2fsck exits 12 for these, as the file system
//! was already recognised).

use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use ext4_layout::inode::{flags, Inode};
use ext4_layout::journal::{blocktype, JournalFeatures, JournalSuperblock, JBD2_MAGIC};

use crate::blockiter::{bmap, journal_extent_ok};
use crate::error::JournalInodeError;
use crate::fs::Fs;
use crate::io::Io;
use crate::problem::{Code, Finding};
use pipeline::Device;

/// What is wrong with the journal, for a repair to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalProblem {
    /// The journal inode (or its superblock magic) is unusable: the
    /// journal has to go.
    BadInode,
    /// needs_recovery is set but there is no journal.
    RecoverWithoutJournal,
    /// The journal is external.
    External,
    /// Unknown journal features or version (e2fsck stops, even with -y).
    Unsupported,
    /// The journal superblock is corrupt: it is reset.
    Corrupt,
    /// The journal claims several users: its v2 fields are cleared.
    MultiFs,
    /// The journal could not be read.
    ReadError,
}

/// The outcome of the journal check.
pub struct JournalCheck {
    /// Findings (notices).
    pub findings: Vec<Finding>,
    /// Set when the journal makes the check impossible.
    pub fatal: Option<String>,
    /// The problem behind `fatal`, if any.
    pub problem: Option<JournalProblem>,
}

enum LoadErr {
    BadInode(String),
    Corrupt(String),
    Unsupported(String),
    MultiFs(String),
    ReadError(String),
}

/// Where an external journal's superblock is: the block after the one
/// that holds byte 1024 of the journal device.
pub fn external_jsb_block(block_size: u32) -> u64 {
    u64::from(1024 / block_size) + 1
}

/// e2fsck's journal checks, answering "no" to every question. `external`
/// is the journal device, for a file system whose journal is not inside
/// it. `repairing`: the check runs inside a repair, which, as e2fsck -y,
/// takes an inode block that cannot be read for zeros and so falls back
/// on the superblock's copy of the journal's map; a read-only check, as
/// e2fsck -n, finds the journal invalid.
pub fn check_journal(
    fs: &Fs,
    io: &mut Io<'_>,
    external: Option<&Device>,
    repairing: bool,
) -> JournalCheck {
    let sb = fs.sb();
    let geo = &fs.geo;
    let mut out = JournalCheck {
        findings: Vec::new(),
        fatal: None,
        problem: None,
    };
    let has_journal = geo.compat.contains(CompatFeatures::HAS_JOURNAL);
    let recover = geo.incompat.contains(IncompatFeatures::RECOVER);
    let uuid_set = sb.s_journal_uuid().iter().any(|&b| b != 0);
    if !has_journal && !recover && sb.s_journal_inum() == 0 && sb.s_journal_dev() == 0 && !uuid_set
    {
        return out;
    }
    let fix_bad_inode = |out: &mut JournalCheck, why: String| {
        if has_journal || sb.s_journal_inum() != 0 {
            out.findings
                .push(Finding::new(Code::JournalBadInode).detail(why.clone()));
            out.fatal = Some(format!("the journal is unusable: {why}"));
            out.problem = Some(JournalProblem::BadInode);
        } else if recover {
            out.findings
                .push(Finding::new(Code::JournalRecoverWithoutJournal));
            out.fatal = Some("needs_recovery is set but there is no journal".into());
            out.problem = Some(JournalProblem::RecoverWithoutJournal);
        }
    };
    if uuid_set && external.is_none() {
        out.findings.push(Finding::new(Code::ExternalJournal));
        out.fatal = Some(
            "the file system uses an external journal, which cannot be found (name it with -j)"
                .into(),
        );
        out.problem = Some(JournalProblem::External);
        return out;
    }
    let result = match external.filter(|_| uuid_set) {
        Some(dev) => match load_external(fs, dev) {
            Ok(jsb) => Ok(jsb),
            Err((code, why)) => {
                let mut f = Finding::new(code);
                if code == Code::ExternalJournalBadSuper {
                    f = f.detail(why.clone());
                }
                out.findings.push(f);
                out.fatal = Some(why);
                out.problem = Some(JournalProblem::External);
                return out;
            }
        },
        None => load(fs, io, repairing),
    };
    match result {
        Ok(jsb) => {
            let j = JournalSuperblock::new(&jsb);
            if let Some(j) = j {
                if !has_journal {
                    out.findings.push(Finding::new(Code::JournalFlagMissing));
                }
                if has_journal && !recover && j.s_start() != 0 {
                    out.findings
                        .push(Finding::new(Code::JournalRecoveryFlagClear));
                }
                if !recover && j.s_errno() != 0 {
                    out.findings
                        .push(Finding::new(Code::JournalErrno).found(j.s_errno() as u64));
                }
            }
            if recover {
                out.findings.push(Finding::new(Code::JournalNeedsRecovery));
            }
        }
        Err(LoadErr::BadInode(why)) => fix_bad_inode(&mut out, why),
        Err(LoadErr::MultiFs(why)) => {
            out.fatal = Some(why);
            out.problem = Some(JournalProblem::MultiFs);
        }
        Err(LoadErr::ReadError(why)) => {
            out.fatal = Some(why);
            out.problem = Some(JournalProblem::ReadError);
        }
        Err(LoadErr::Unsupported(why)) => {
            out.findings
                .push(Finding::new(Code::JournalUnsupported).detail(why.clone()));
            if has_journal {
                out.findings
                    .push(Finding::new(Code::JournalBadSuper).detail(why.clone()));
                out.fatal = Some(format!("the journal superblock is unusable: {why}"));
                out.problem = Some(JournalProblem::Unsupported);
            } else {
                fix_bad_inode(&mut out, why);
            }
        }
        Err(LoadErr::Corrupt(why)) => {
            if has_journal {
                out.findings
                    .push(Finding::new(Code::JournalBadSuper).detail(why.clone()));
                out.fatal = Some(format!("the journal superblock is corrupt: {why}"));
                out.problem = Some(JournalProblem::Corrupt);
            } else {
                fix_bad_inode(&mut out, why);
            }
        }
    }
    out
}

/// The journal inode as e2fsck uses it: the inode itself, or, when that
/// is unusable and the superblock keeps a copy of its block map, an inode
/// made from that copy. Also says whether the copy was used.
pub fn journal_inode(fs: &Fs, io: &mut Io<'_>) -> Option<(Vec<u8>, bool)> {
    load_inode(fs, io, true)
        .ok()
        .map(|(raw, backup, _)| (raw, backup))
}

/// The journal's map: the file system block of each log block, in log
/// order, read from the journal inode as [`journal_inode`] finds it.
#[derive(Debug, Clone)]
pub struct JournalMap {
    /// The file system block of log block `i`, for each mapped `i` in
    /// order (a hole in the map leaves no gap here).
    pub blocks: Vec<u64>,
    /// Whether the walk read every map block (else the blocks before the
    /// first unreadable or invalid one are listed).
    pub complete: bool,
    /// Whether the map has a hole before its last block: log block `i`
    /// is then not `blocks[i]`.
    pub holes: bool,
    /// The journal inode's size in file system blocks.
    pub size_blocks: u64,
}

/// Walks the journal inode's block map (see [`JournalMap`]); `None` when
/// there is no usable journal inode.
pub fn journal_map(fs: &Fs, io: &mut Io<'_>) -> Option<JournalMap> {
    let (raw, _) = journal_inode(fs, io)?;
    let inode = Inode::new(&raw)?;
    let mut v: Vec<(i64, u64)> = Vec::new();
    let complete = crate::blockiter::for_each_block(io, &inode, &mut |b, l| {
        if l >= 0 {
            v.push((l, b));
        }
    });
    v.sort_unstable();
    let holes = v.iter().enumerate().any(|(i, &(l, _))| l != i as i64);
    Some(JournalMap {
        blocks: v.into_iter().map(|(_, b)| b).collect(),
        complete,
        holes,
        size_blocks: inode.size() / u64::from(fs.geo.block_size),
    })
}

/// Finds a usable journal inode: its bytes, whether it is the backup, and
/// the block of the journal superblock. Without `backup_on_read_error`,
/// an inode that cannot be read is final: e2fsck reads the inode again
/// when it walks the copy's map, and fails again.
fn load_inode(
    fs: &Fs,
    io: &mut Io<'_>,
    backup_on_read_error: bool,
) -> Result<(Vec<u8>, bool, u64), LoadErr> {
    let geo = &fs.geo;
    let sb = fs.sb();
    let inum = sb.s_journal_inum();
    if inum == 0 || inum > geo.inodes_count {
        return Err(LoadErr::BadInode(format!(
            "journal inode number {inum} is invalid"
        )));
    }
    // The library reads no inode past the superblock's own count (which
    // is checked only later, with the rest of the superblock).
    if inum > sb.s_inodes_count() {
        return Err(LoadErr::BadInode(format!(
            "the journal inode cannot be read: inode {inum} is past the superblock's inode count, {}",
            sb.s_inodes_count()
        )));
    }
    let mut ib = vec![0u8; geo.inode_size as usize];
    let read = io.read_inode(inum, &mut ib);
    if let (Err(e), false) = (&read, backup_on_read_error) {
        return Err(LoadErr::BadInode(format!(
            "the journal inode cannot be read: {e}"
        )));
    }
    let primary = read.ok().and_then(|_| {
        let ok = Inode::new(&ib)
            .is_some_and(|i| !fs.metadata_csum() || i.checksum_ok(geo.csum_seed, inum));
        ok.then(|| ib.clone())
    });
    let mut tried_backup = false;
    let mut candidate = primary;
    let first_block = loop {
        let err = match candidate.as_deref().and_then(Inode::new) {
            Some(inode) => match validate_inode(fs, io, &inode) {
                Ok(b) => break b,
                Err(e) => e.to_string(),
            },
            None => "the journal inode cannot be read".to_string(),
        };
        if tried_backup || sb.s_jnl_backup_type() != 1 {
            return Err(LoadErr::BadInode(err));
        }
        tried_backup = true;
        // Rebuild the inode from the superblock's copy of its block map.
        let mut fake = vec![0u8; geo.inode_size as usize];
        let jb = sb.s_jnl_blocks();
        for (i, &w) in jb.iter().take(15).enumerate() {
            ext4_layout::inode::i_block_word(i).set(&mut fake, w);
        }
        let size = u64::from(jb[15]) << 32 | u64::from(jb[16]);
        let mut w = ext4_layout::inode::InodeMut::new(&mut fake);
        w.set_size(size);
        w.set(ext4_layout::inode::field::i_links_count, 1);
        w.set(ext4_layout::inode::field::i_mode, 0o100600);
        candidate = Some(fake);
    };
    Ok((candidate.unwrap_or_default(), tried_backup, first_block))
}

/// Reads an external journal's superblock after checking that the device
/// is a journal device of this file system; returns the journal superblock
/// and its length in blocks.
pub fn external_superblock(fs: &Fs, dev: &Device) -> Result<(Vec<u8>, u64), (Code, String)> {
    let bad = |why: &str| (Code::ExternalJournalBadSuper, why.to_string());
    let mut sb = vec![0u8; 1024];
    dev.read_at(&mut sb, 1024)
        .map_err(|e| bad(&format!("it cannot be read: {e}")))?;
    let Some(jdev) = ext4_layout::superblock::Superblock::new(&sb) else {
        return Err(bad("it is too short"));
    };
    if jdev.s_magic() != ext4_layout::superblock::EXT2_MAGIC
        || !jdev.incompat().contains(IncompatFeatures::JOURNAL_DEV)
    {
        return Err(bad("it is not an external journal device"));
    }
    if jdev.s_uuid() != fs.sb().s_journal_uuid() {
        return Err((
            Code::ExternalJournalWrongFs,
            "the external journal does not belong to this file system".into(),
        ));
    }
    if jdev.block_size() != Some(fs.geo.block_size) {
        return Err(bad("its block size differs from the file system's"));
    }
    let bs = fs.block_size();
    let mut jsb = vec![0u8; bs.max(1024)];
    let at = external_jsb_block(fs.geo.block_size) * bs as u64;
    dev.read_at(&mut jsb[..bs], at)
        .map_err(|e| bad(&format!("its journal superblock cannot be read: {e}")))?;
    Ok((jsb, jdev.blocks_count().min(u64::from(u32::MAX))))
}

fn load_external(fs: &Fs, dev: &Device) -> Result<Vec<u8>, (Code, String)> {
    let (jsb, total) = external_superblock(fs, dev)?;
    validate_jsb(fs, jsb, total).map_err(|e| {
        let why = match e {
            LoadErr::BadInode(w)
            | LoadErr::Corrupt(w)
            | LoadErr::Unsupported(w)
            | LoadErr::MultiFs(w)
            | LoadErr::ReadError(w) => w,
        };
        (Code::ExternalJournalBadSuper, why)
    })
}

/// Validates the journal inode (or its superblock backup) and returns the
/// journal superblock block.
fn load(fs: &Fs, io: &mut Io<'_>, repairing: bool) -> Result<Vec<u8>, LoadErr> {
    let (inode_raw, _, first_block) = load_inode(fs, io, repairing)?;
    let bs = fs.block_size();
    let mut jsb = vec![0u8; bs.max(1024)];
    io.read_blocks(first_block, &mut jsb[..bs]).map_err(|e| {
        // A journal past the end of a device shorter than the file
        // system: the cause is the size, and the message says so.
        if first_block >= fs.dev_blocks && fs.dev_blocks < fs.geo.blocks_count {
            LoadErr::ReadError(format!(
                "the journal superblock (block {first_block}) lies past the end of the device,                  which holds {} of the file system's {} blocks: the superblock or the                  partition table is likely corrupt",
                fs.dev_blocks, fs.geo.blocks_count
            ))
        } else {
            LoadErr::ReadError(format!("cannot read the journal superblock: {e}"))
        }
    })?;
    let total = Inode::new(&inode_raw).map_or(0, |i| i.size() / bs as u64);
    validate_jsb(fs, jsb, total)
}

/// The checks of a journal superblock, wherever the journal is; `total`
/// is the journal's length in blocks.
fn validate_jsb(fs: &Fs, jsb: Vec<u8>, total: u64) -> Result<Vec<u8>, LoadErr> {
    let bs = fs.block_size();
    let Some(j) = JournalSuperblock::new(&jsb) else {
        return Err(LoadErr::Corrupt("short journal superblock".into()));
    };
    let h = j.header();
    if h.h_magic != JBD2_MAGIC {
        return Err(LoadErr::BadInode(
            "the journal superblock has a bad magic number".into(),
        ));
    }
    match h.h_blocktype {
        blocktype::SUPERBLOCK_V1 => {}
        blocktype::SUPERBLOCK_V2 => {
            if j.s_nr_users() > 1 {
                return Err(LoadErr::MultiFs(format!(
                    "the journal claims to be shared by {} file systems",
                    j.s_nr_users()
                )));
            }
        }
        blocktype::DESCRIPTOR | blocktype::COMMIT | blocktype::REVOKE => {
            return Err(LoadErr::Corrupt(
                "the journal superblock has the type of another block".into(),
            ));
        }
        t => {
            return Err(LoadErr::Unsupported(format!(
                "unknown journal superblock version {t}"
            )))
        }
    }
    let f = j.features();
    if j.is_v2() {
        if f.incompat & !JournalFeatures::KNOWN_INCOMPAT != 0 {
            return Err(LoadErr::Unsupported(format!(
                "unknown journal features 0x{:x}",
                f.incompat
            )));
        }
        if f.ro_compat != 0 {
            return Err(LoadErr::Unsupported(format!(
                "unknown read-only journal features 0x{:x}",
                f.ro_compat
            )));
        }
    }
    let v2 = f.incompat & JournalFeatures::INCOMPAT_CSUM_V2 != 0;
    let v3 = f.incompat & JournalFeatures::INCOMPAT_CSUM_V3 != 0;
    if (v2 && v3) || ((v2 || v3) && f.compat & JournalFeatures::COMPAT_CHECKSUM != 0) {
        return Err(LoadErr::Corrupt(
            "conflicting journal checksum features".into(),
        ));
    }
    if (v2 || v3) && (j.s_checksum_type() != 4 || !j.checksum_ok()) {
        return Err(LoadErr::Corrupt(
            "the journal superblock checksum does not match".into(),
        ));
    }
    if j.s_blocksize() as usize != bs {
        return Err(LoadErr::Corrupt(format!(
            "journal block size {} differs from the file system's",
            j.s_blocksize()
        )));
    }
    if u64::from(j.s_maxlen()) > total {
        return Err(LoadErr::Corrupt(format!(
            "the journal claims {} blocks but has {total}",
            j.s_maxlen()
        )));
    }
    if f.incompat & JournalFeatures::INCOMPAT_FAST_COMMIT != 0 {
        let fc = if j.s_num_fc_blks() == 0 {
            256
        } else {
            j.s_num_fc_blks()
        };
        if j.s_maxlen().saturating_sub(fc) < 1024 {
            return Err(LoadErr::Corrupt(
                "the journal is too small for its fast commit area".into(),
            ));
        }
    }
    Ok(jsb)
}

/// Checks a journal inode and returns the block of its superblock.
fn validate_inode(fs: &Fs, io: &mut Io<'_>, inode: &Inode<'_>) -> Result<u64, JournalInodeError> {
    let geo = &fs.geo;
    if inode.i_links_count() == 0 || !inode.is_reg() || inode.has_flag(flags::ENCRYPT) {
        return Err(JournalInodeError::NotInUse);
    }
    let bs = u64::from(geo.block_size);
    if inode.size() / bs < 1024 {
        return Err(JournalInodeError::TooSmall);
    }
    if inode.has_flag(flags::EXTENTS) && !journal_extent_ok(inode) {
        return Err(JournalInodeError::BadExtentTree);
    }
    // Every block up to i_size must be mapped inside the file system: the
    // walk stops at the first hole or out-of-range block.
    let mut expected = 0i64;
    let mut stopped = false;
    crate::blockiter::for_each_block(io, inode, &mut |b, l| {
        if stopped || l < 0 {
            return;
        }
        if l != expected || !geo.block_in_range(b) {
            stopped = true;
            return;
        }
        expected += 1;
    });
    if (expected as u64) * bs < inode.size() {
        return Err(JournalInodeError::Holes);
    }
    bmap(io, inode, 0).ok_or(JournalInodeError::FirstBlockUnmapped)
}
