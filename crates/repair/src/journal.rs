//! Before the passes: the journal is repaired or cleared when it cannot be
//! used, replayed when it holds committed transactions, and the orphans
//! (the orphan list and the orphan file) are released — what e2fsck does
//! when it opens a file system it may write to.

use crate::error::Error;
use ext4_layout::types::{Ino, PhysBlock};
use std::collections::BTreeMap;
use std::sync::Arc;

use ext4_layout::bytes::put_be_u32;
use ext4_layout::csum::crc32c_raw;
use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use ext4_layout::inode::Inode;
use ext4_layout::inode::{field, I_BLOCK};
use ext4_layout::journal::descriptor::{BlockTag, DescriptorBlock, TagFlags};
use ext4_layout::journal::revoke::RevokeBlock;
use ext4_layout::journal::superblock as jsbl;
use ext4_layout::journal::superblock::{JournalFeatures, JournalSuperblock};
use ext4_layout::journal::CommitBlock;
use ext4_layout::journal::{blocktype, BlockHeader, JBD2_MAGIC};
use ext4_layout::superblock as sbl;
use pipeline::Device;

use super::account::account;
pub(crate) use super::prepass::PrePass;
use super::prepass::{clear_valid, commit, open};
use super::raw::{now, sbf};
use super::stage::{Kind, Staging};
use check_core::fs::Fs;
use check_core::io::Io;
use check_core::journal::{check_journal, JournalProblem};
use check_core::problem::{Code, Finding};

fn clear_bits(sb: &mut [u8], word: ext4_layout::field::Field<u32>, bits: u32) {
    let v = word.get(sb) & !bits;
    word.set(sb, v);
}

/// The physical blocks of the journal, by logical index.
fn journal_blocks(fs: &Fs, io: &mut Io<'_>) -> Option<(Vec<u64>, u64)> {
    check_core::journal::journal_map(fs, io).map(|m| (m.blocks, m.size_blocks))
}

/// An external journal: its device, and the fixer that writes to it.
pub struct External<'a> {
    /// The journal device.
    pub dev: &'a Device,
    /// The writer for the journal device.
    pub fx: &'a fixer::Fixer,
}

/// Where the log's blocks are.
enum Space<'a> {
    /// In the journal inode: the file system block of each log block.
    Inode(Vec<u64>),
    /// On a journal device: log block numbers are its block numbers.
    External(&'a External<'a>, u64),
}

impl Space<'_> {
    fn len(&self) -> u64 {
        match self {
            Space::Inode(b) => b.len() as u64,
            Space::External(_, n) => *n,
        }
    }
}

/// Journal problems, recovery and the orphan list, before the passes.
/// When the journal inode is unusable and the journal is found through
/// the superblock's copy of its block map, e2fsck writes an inode made from
/// that copy back over the journal inode (its first 128 bytes, as the
/// library writes them) before going on; when the inode table it belongs
/// in lies outside the file system it cannot, and stops there, changing
/// nothing. Stages that write; says whether there was one, or why the
/// repair must stop.
fn restore_from_backup(fs: &check_core::fs::Fs, st: &mut Staging<'_>) -> Result<bool, Error> {
    let Some((raw, true)) = check_core::journal::journal_inode(fs, &mut st.io) else {
        return Ok(false);
    };
    let geo = &fs.geo;
    let Some(ino) = Ino::new(fs.sb().s_journal_inum()) else {
        return Ok(false);
    };
    let group = ino.index() / geo.inodes_per_group.max(1);
    let table = fs.gd(group).inode_table();
    let end = table.saturating_add(u64::from(geo.inode_blocks_per_group).saturating_sub(1));
    if table == 0 || table < geo.first_data_block || end >= geo.blocks_count {
        return Err(Error::JournalTableOutside {
            group,
            block: table,
        });
    }
    let inode = st.inode(ino)?;
    let n = inode.len().min(128).min(raw.len());
    inode[..n].copy_from_slice(&raw[..n]);
    Ok(true)
}

/// Deals with the journal as e2fsck does before its passes: replays it,
/// or fixes or removes what makes it unusable, then releases orphans and
/// backs up the journal inode's block map. `at_start` is false when a
/// repair looks at the journal again after its passes: a journal inode
/// its fixes left unusable is then removed (and made anew later) rather
/// than rebuilt from the copy of its old block map, which is what the
/// passes found wrong.
pub fn before_passes(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    external: Option<&External<'_>>,
    at_start: bool,
) -> Result<PrePass, Error> {
    let mut pre = PrePass::default();
    // Each step changes one thing and looks again, as e2fsck's restarts
    // do; six are more than any journal needs.
    for _ in 0..6 {
        let step = JournalStep {
            dev,
            fx,
            external,
            at_start,
        };
        if !step.run(&mut pre)? {
            break;
        }
    }
    pre.descriptors_fixed = super::descriptors::fix(dev, fx, &mut pre)?;
    super::release::orphans(dev, fx, &mut pre)?;
    backup_journal_map(dev, fx, &mut pre)?;
    move_visible_journal(dev, fx, &mut pre)?;
    Ok(pre)
}

/// One look at the journal before the passes, fixing the first thing
/// found wrong.
struct JournalStep<'s, 'e> {
    dev: &'s Arc<Device>,
    fx: &'s fixer::Fixer,
    external: Option<&'s External<'e>>,
    at_start: bool,
}

impl JournalStep<'_, '_> {
    /// Checks the journal and fixes one thing; true if it changed
    /// something (the journal is then looked at again).
    fn run(&self, pre: &mut PrePass) -> Result<bool, Error> {
        let fs = open(self.dev)?;
        let mut io = Io::new(&fs);
        let mut jc = check_journal(&fs, &mut io, self.external.map(|e| e.dev), true);
        let maps_dummy = check_core::ctx::Maps::new(&fs);
        let mut st = Staging::new(&fs, &maps_dummy, false);
        if jc.problem.is_none() || jc.problem == Some(JournalProblem::Corrupt) {
            if self.at_start {
                if restore_from_backup(&fs, &mut st)? {
                    commit(self.fx, st, pre)?;
                    pre.journal_restored = true;
                    return Ok(true);
                }
            } else if matches!(
                check_core::journal::journal_inode(&fs, &mut io),
                Some((_, true))
            ) {
                jc.problem = Some(JournalProblem::BadInode);
                jc.findings.push(
                    Finding::new(Code::JournalBadInode)
                        .detail("its block map no longer describes a usable journal".to_string()),
                );
            }
        }
        if jc.problem.is_some() {
            fix_journal_problem(&fs, &mut st, &jc, pre)?;
            commit(self.fx, st, pre)?;
            return Ok(true);
        }
        let has = |c: Code| jc.findings.iter().any(|f| f.code == c);
        if has(Code::JournalFlagMissing) {
            let sb = st.sb_mut();
            sbl::field::s_journal_inum.set(sb, 0);
            sbl::field::s_journal_dev.set(sb, 0);
            sb[sbl::S_JOURNAL_UUID].fill(0);
            clear_bits(sb, sbf::INCOMPAT, IncompatFeatures::RECOVER.0);
            mark(pre, &jc.findings, Code::JournalFlagMissing);
            commit(self.fx, st, pre)?;
            return Ok(true);
        }
        // A journal found through the superblock's copy of its block map
        // gets its inode back first.
        if let Some((raw, true)) = check_core::journal::journal_inode(&fs, &mut io) {
            let inum = Ino::new(fs.sb().s_journal_inum());
            if let Some(Ok(r)) = inum.map(|i| st.inode(i)) {
                r.fill(0);
                r[..128].copy_from_slice(&raw[..128]);
                commit(self.fx, st, pre)?;
                return Ok(true);
            }
        }
        if has(Code::JournalNeedsRecovery) || has(Code::JournalRecoveryFlagClear) {
            self.recover(&fs, &mut io, pre)?;
            return Ok(true);
        }
        if has(Code::JournalErrno) {
            if let Some((blocks, _)) = journal_blocks(&fs, &mut io) {
                if let Some(&b0) = blocks.first() {
                    let mut jsb = vec![0u8; fs.block_size()];
                    io.read_blocks(b0, &mut jsb)?;
                    jsbl::field::s_errno_raw.set(&mut jsb, 0);
                    set_jsb_checksum(&mut jsb);
                    st.fresh_block(PhysBlock(b0), Kind::Plain)
                        .copy_from_slice(&jsb);
                    commit(self.fx, st, pre)?;
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Replays the journal (and the fast commit log after it), then
    /// clears needs_recovery.
    fn recover(&self, fs: &Fs, io: &mut Io<'_>, pre: &mut PrePass) -> Result<(), Error> {
        let space = match self
            .external
            .filter(|_| fs.sb().s_journal_uuid() != [0; 16])
        {
            Some(e) => {
                let (_, n) = check_core::journal::external_superblock(fs, e.dev)
                    .map_err(|(_, why)| Error::JournalUnusable(why))?;
                Space::External(e, n)
            }
            None => Space::Inode(journal_blocks(fs, io).ok_or(Error::JournalUnreadable)?.0),
        };
        let (outcome, fc_log, error) = replay(fs, io, self.fx, &space)?;
        pre.modified = true;
        pre.notes.push(outcome.said);
        pre.journal_blocks_replayed += outcome.blocks;
        pre.journal_transactions_replayed += outcome.transactions;
        if let Some(e) = error {
            // As e2fsck, which counts a journal it could not fully replay
            // as a problem dealt with.
            let mut f = Finding::new(Code::JournalReplayStopped).detail(e.to_string());
            f.fixed = true;
            pre.fixed.push(f);
        }
        if !fc_log.is_empty() {
            let fs3 = open(self.dev)?;
            let maps3 = check_core::ctx::Maps::new(&fs3);
            let mut st3 = Staging::new(&fs3, &maps3, false);
            let n = super::fastcommit::apply(&fs3, &mut st3, &fc_log).map_err(Error::FastCommit)?;
            pre.notes.push(format!(
                "Fast commits replayed: {n} of {} changes.",
                fc_log.len()
            ));
            pre.fast_commits_replayed = true;
            commit(self.fx, st3, pre)?;
        }
        // The replay may have rewritten the superblock: clear
        // needs_recovery on what is on disk now.
        let fs2 = open(self.dev)?;
        let maps2 = check_core::ctx::Maps::new(&fs2);
        let mut st2 = Staging::new(&fs2, &maps2, false);
        clear_bits(st2.sb_mut(), sbf::INCOMPAT, IncompatFeatures::RECOVER.0);
        commit(self.fx, st2, pre)
    }
}

/// Stages the fix of a journal problem the check reported: a journal
/// that cannot be used stops the repair; a bad journal inode goes; a
/// needs_recovery flag without a journal is cleared; a corrupt journal
/// superblock is reset, and one shared with another file system loses
/// its v2 fields.
fn fix_journal_problem(
    fs: &Fs,
    st: &mut Staging<'_>,
    jc: &check_core::journal::JournalCheck,
    pre: &mut PrePass,
) -> Result<(), Error> {
    match jc.problem {
        None => {}
        Some(
            JournalProblem::External | JournalProblem::Unsupported | JournalProblem::ReadError,
        ) => {
            return Err(Error::JournalUnusable(
                jc.fatal
                    .clone()
                    .unwrap_or_else(|| "the journal cannot be used".into()),
            ));
        }
        Some(JournalProblem::BadInode) => {
            let sb = st.sb_mut();
            clear_bits(sb, sbf::COMPAT, CompatFeatures::HAS_JOURNAL.0);
            sbl::field::s_journal_inum.set(sb, 0);
            sb[sbl::S_JNL_BLOCKS].fill(0);
            clear_bits(sb, sbf::INCOMPAT, IncompatFeatures::RECOVER.0);
            clear_valid(sb);
            pre.notes
                .push("The journal was unusable and has been removed.".into());
            pre.journal_removed = true;
            mark(pre, &jc.findings, Code::JournalBadInode);
        }
        Some(JournalProblem::RecoverWithoutJournal) => {
            let sb = st.sb_mut();
            clear_bits(sb, sbf::INCOMPAT, IncompatFeatures::RECOVER.0);
            clear_valid(sb);
            mark(pre, &jc.findings, Code::JournalRecoverWithoutJournal);
        }
        Some(JournalProblem::Corrupt | JournalProblem::MultiFs) => {
            let Some((blocks, total)) = journal_blocks(fs, &mut st.io) else {
                return Err(Error::JournalUnreadable);
            };
            let Some(&b0) = blocks.first() else {
                return Err(Error::JournalEmpty);
            };
            let mut jsb = vec![0u8; fs.block_size()];
            st.io.read_blocks(b0, &mut jsb)?;
            if jc.problem == Some(JournalProblem::MultiFs) {
                let users = jsbl::field::s_nr_users.get(&jsb);
                jsb[jsbl::V2_FIELDS..].fill(0);
                let mut f = Finding::new(Code::JournalV2FieldsCleared).found(u64::from(users));
                f.fixed = true;
                pre.fixed.push(f);
            } else {
                reset_journal_superblock(&mut jsb, total);
                let sb = st.sb_mut();
                let had_recover = sbf::INCOMPAT.get(sb) & IncompatFeatures::RECOVER.0 != 0;
                clear_bits(sb, sbf::INCOMPAT, IncompatFeatures::RECOVER.0);
                if had_recover {
                    clear_valid(sb);
                }
                mark(pre, &jc.findings, Code::JournalBadSuper);
                pre.notes
                    .push("The journal superblock was corrupt and has been reset.".into());
            }
            st.fresh_block(PhysBlock(b0), Kind::Plain)
                .copy_from_slice(&jsb);
        }
    }
    Ok(())
}

/// Makes `jsb` a fresh, empty journal superblock of the same version
/// over `total` blocks.
fn reset_journal_superblock(jsb: &mut [u8], total: u64) {
    let Some(old) = BlockHeader::parse(jsb) else {
        return;
    };
    let v1 = old.h_magic == JBD2_MAGIC && old.h_blocktype == blocktype::SUPERBLOCK_V1;
    // Everything after the header goes; the header's sequence stays.
    jsb.fill(0);
    BlockHeader {
        h_magic: JBD2_MAGIC,
        h_blocktype: if v1 {
            blocktype::SUPERBLOCK_V1
        } else {
            blocktype::SUPERBLOCK_V2
        },
        h_sequence: old.h_sequence,
    }
    .write(jsb);
    jsbl::field::s_blocksize.set(jsb, jsb.len() as u32);
    jsbl::field::s_maxlen.set(jsb, total as u32);
    jsbl::field::s_first.set(jsb, 1);
    jsbl::field::s_sequence.set(jsb, now() ^ 0x5A5A_1234);
}

/// A journal that is a visible file in the root directory (as old ext3
/// tools made it) moves to the hidden journal inode, as e2fsck does: its
/// entry goes, inode 8 takes its fields, the old inode is freed.
fn move_visible_journal(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    pre: &mut PrePass,
) -> Result<(), Error> {
    let fs = open(dev)?;
    let Some(inum) = Ino::new(fs.sb().s_journal_inum()) else {
        return Ok(());
    };
    if !fs.geo.compat.contains(CompatFeatures::HAS_JOURNAL) || inum == Ino::JOURNAL {
        return Ok(());
    }
    let maps = check_core::ctx::Maps::new(&fs);
    let mut st = Staging::new(&fs, &maps, false);
    let Ok(raw) = st.inode_copy(inum) else {
        return Ok(());
    };
    let Some(inode) = Inode::new(&raw) else {
        return Ok(());
    };
    // Extent blocks carry checksums seeded by the inode number: a moved
    // tree would need them all rewritten, so such a journal stays.
    let tree = super::map::tree_blocks_of(&mut st, inum).unwrap_or_default();
    if inode.i_links_count() != 1 || (fs.metadata_csum() && !tree.is_empty()) {
        return Ok(());
    }
    let mut found = None;
    for name in [
        &b".journal"[..],
        b"journal",
        b".journal.dat",
        b"journal.dat",
    ] {
        if let Ok(Some(i)) = super::connect::lookup(&mut st, Ino::ROOT, name) {
            if i == inum {
                found = Some(name);
                break;
            }
        }
    }
    let Some(name) = found else {
        return Ok(());
    };
    super::connect::remove_entry(&mut st, Ino::ROOT, name)?;
    {
        let r = st.inode(Ino::JOURNAL)?;
        r.copy_from_slice(&raw);
    }
    {
        let r = st.inode(inum)?;
        field::i_links_count.set(r, 0);
        field::i_dtime.set(r, now());
    }
    sbl::field::s_journal_inum.set(st.sb_mut(), Ino::JOURNAL.get());
    account(&fs, &mut st, &[], &[], Some((inum.get(), false, true)));
    pre.notes.push(format!(
        "The journal moved from /{} to the hidden journal inode.",
        String::from_utf8_lossy(name)
    ));
    let mut f = Finding::new(Code::JournalMovedToHidden).ino(inum.get());
    f.fixed = true;
    pre.fixed.push(f);
    commit(fx, st, pre)
}

/// Writes the superblock's backup of the journal inode's block map when
/// there is none or it differs from the inode, as e2fsck does before its
/// passes.
pub fn backup_journal_map(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    pre: &mut PrePass,
) -> Result<(), Error> {
    let fs = open(dev)?;
    let Some(inum) = Ino::new(fs.sb().s_journal_inum()) else {
        return Ok(());
    };
    if !fs.geo.compat.contains(CompatFeatures::HAS_JOURNAL) {
        return Ok(());
    }
    let maps = check_core::ctx::Maps::new(&fs);
    let mut st = Staging::new(&fs, &maps, false);
    let Ok(raw) = st.inode_copy(inum) else {
        return Ok(());
    };
    let kind = fs.sb().s_jnl_backup_type();
    let iblock = &raw[I_BLOCK];
    let stale =
        kind == 0 || (kind == sbl::JNL_BACKUP_BLOCKS && fs.sb[sbl::S_JNL_IBLOCK] != *iblock);
    if !stale {
        return Ok(());
    }
    {
        let sb = st.sb_mut();
        sb[sbl::S_JNL_IBLOCK].copy_from_slice(iblock);
        sbl::S_JNL_SIZE_HIGH.set(sb, field::i_size_high.get(&raw));
        sbl::S_JNL_SIZE.set(sb, field::i_size_lo.get(&raw));
        sbl::field::s_jnl_backup_type.set(sb, sbl::JNL_BACKUP_BLOCKS);
    }
    let mut f = Finding::new(Code::JournalBackupUpdated);
    f.fixed = true;
    pre.fixed.push(f);
    commit(fx, st, pre)
}

fn mark(pre: &mut PrePass, findings: &[Finding], code: Code) {
    for f in findings.iter().filter(|f| f.code == code) {
        let mut f = f.clone();
        f.fixed = true;
        pre.fixed.push(f);
    }
}

fn set_jsb_checksum(jsb: &mut [u8]) {
    let Some(j) = JournalSuperblock::new(jsb) else {
        return;
    };
    if j.is_v2() && j.features().csum_v2v3() {
        jsbl::field::s_checksum.set(jsb, 0);
        let c = crc32c_raw(!0, &jsb[..1024]);
        jsbl::field::s_checksum.set(jsb, c);
    }
}

/// Wrap-aware "a comes after b" for transaction ids.
fn tid_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

fn tid_ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// The log as replay reads it: where its blocks are, and what its
/// superblock says.
struct Log<'s, 'e> {
    fs: &'s Fs,
    space: &'s Space<'e>,
    bs: usize,
    /// Where the journal superblock is: the journal's first block, or on
    /// a journal device the block after the device's own superblock.
    b0: u64,
    feat: JournalFeatures,
    /// Blocks carry checksums (v2 or v3).
    csum: bool,
    v3: bool,
    async_commit: bool,
    seed: u32,
    /// The first log block after the journal superblock.
    first: u64,
    /// Log blocks in all, the fast commit area included.
    total: u64,
    /// Where the log wraps (the fast commit area starts).
    maxlen: u64,
    /// Where the log starts (0: empty).
    start: u64,
    /// The first transaction's id.
    sequence: u32,
    fast_commit: bool,
}

impl<'s, 'e> Log<'s, 'e> {
    /// Reads the journal superblock; returns the log and the superblock's
    /// bytes.
    fn open(fs: &'s Fs, io: &mut Io<'_>, space: &'s Space<'e>) -> Result<(Self, Vec<u8>), Error> {
        let bs = fs.block_size();
        let b0 = match space {
            Space::Inode(blocks) => *blocks.first().ok_or(Error::JournalEmpty)?,
            Space::External(..) => check_core::journal::external_jsb_block(fs.geo.block_size),
        };
        let mut jsb = vec![0u8; bs];
        match space {
            Space::Inode(_) => io.read_blocks(b0, &mut jsb)?,
            Space::External(e, _) => e.dev.read_at(&mut jsb, b0 * bs as u64)?,
        }
        let j = JournalSuperblock::new(&jsb).ok_or(Error::ShortJournalSuperblock)?;
        let feat = if j.is_v2() {
            j.features()
        } else {
            JournalFeatures::default()
        };
        let fast_commit = feat.incompat & JournalFeatures::INCOMPAT_FAST_COMMIT != 0;
        // With fast commits the log ends where the fast commit area starts.
        let num_fc = match (fast_commit, u64::from(jsbl::field::s_num_fc_blks.get(&jsb))) {
            (false, _) => 0,
            (true, 0) => 256,
            (true, n) => n,
        };
        let total = u64::from(jsbl::field::s_maxlen.get(&jsb)).min(space.len());
        let log = Log {
            fs,
            space,
            bs,
            b0,
            feat,
            csum: feat.csum_v2v3(),
            v3: feat.incompat & JournalFeatures::INCOMPAT_CSUM_V3 != 0,
            async_commit: feat.incompat & JournalFeatures::INCOMPAT_ASYNC_COMMIT != 0,
            seed: crc32c_raw(!0, &j.s_uuid()),
            first: u64::from(jsbl::field::s_first.get(&jsb)),
            total,
            maxlen: total.saturating_sub(num_fc),
            start: u64::from(jsbl::field::s_start.get(&jsb)),
            sequence: jsbl::field::s_sequence.get(&jsb),
            fast_commit,
        };
        Ok((log, jsb))
    }

    /// Reads log block `lb`.
    fn read(&self, io: &mut Io<'_>, lb: u64, buf: &mut [u8]) -> Result<(), Error> {
        match self.space {
            Space::Inode(blocks) => {
                let p = *blocks.get(lb as usize).ok_or(Error::JournalPastEnd(lb))?;
                if p == 0 {
                    return Err(Error::JournalUnmapped(lb));
                }
                io.read_blocks(p, buf).map_err(Error::from)
            }
            Space::External(e, n) => {
                if lb >= *n {
                    return Err(Error::JournalPastEnd(lb));
                }
                e.dev.read_at(buf, lb * self.bs as u64).map_err(Error::from)
            }
        }
    }

    /// The log block after `b - 1`, wrapping at the end of the log.
    fn wrap(&self, b: u64) -> u64 {
        if b >= self.maxlen {
            b - (self.maxlen - self.first)
        } else {
            b
        }
    }

    /// Writes the replayed blocks and the journal superblock.
    fn write(
        &self,
        fx: &fixer::Fixer,
        fs_writes: Vec<fixer::Write>,
        jsb: Vec<u8>,
    ) -> Result<(), Error> {
        let at = self.b0 * self.bs as u64;
        match self.space {
            Space::Inode(_) => {
                let mut all = fs_writes;
                all.push(fixer::Write {
                    offset: at,
                    data: jsb,
                });
                fx.commit(all).map_err(Error::from)
            }
            Space::External(e, _) => {
                // The replayed blocks are on the file system for good
                // before the journal lets go of them.
                fx.commit(fs_writes)?;
                e.fx.commit(vec![fixer::Write {
                    offset: at,
                    data: jsb,
                }])
                .map_err(Error::from)
            }
        }
    }

    /// Finds the transaction the log ends before: the first whose blocks
    /// are not all there, or whose commit block fails its checksum (an
    /// async-commit log goes on past that to see whether later commits
    /// are older). A read that fails is returned as the error.
    fn scan_end(&self, io: &mut Io<'_>) -> (u32, Option<Error>) {
        let mut buf = vec![0u8; self.bs];
        let mut id = self.sequence;
        let mut blk = self.start;
        let mut end: Option<u32> = None;
        let mut prev_commit_time = 0u64;
        let mut need_check_commit_time = false;
        let mut error: Option<Error> = None;
        loop {
            if let Err(e) = self.read(io, blk, &mut buf) {
                error = Some(e);
                break;
            }
            blk = self.wrap(blk + 1);
            let Some(h) = BlockHeader::parse(&buf) else {
                break;
            };
            if h.h_magic != JBD2_MAGIC || h.h_sequence != id {
                break;
            }
            let tail_bad = self.csum && !ext4_layout::journal::block_tail_ok(&buf, self.seed);
            match h.h_blocktype {
                blocktype::DESCRIPTOR => {
                    need_check_commit_time |= tail_bad;
                    let n = DescriptorBlock::new(&buf, self.feat).tags().count() as u64;
                    for _ in 0..n {
                        blk = self.wrap(blk + 1);
                    }
                }
                blocktype::COMMIT => {
                    let t = CommitBlock::new(&buf).h_commit_sec();
                    if need_check_commit_time {
                        if t >= prev_commit_time {
                            error = Some(Error::TransactionChecksum(id));
                        }
                        break;
                    }
                    if self.csum {
                        let c = ext4_layout::journal::commit::CommitBlock::new(&buf);
                        if c.computed_checksum(self.seed) != c.h_chksum0() {
                            if t < prev_commit_time {
                                break;
                            }
                            end.get_or_insert(id);
                            if !self.async_commit {
                                break;
                            }
                        }
                    }
                    prev_commit_time = t;
                    id = id.wrapping_add(1);
                }
                blocktype::REVOKE => need_check_commit_time |= tail_bad,
                _ => break,
            }
        }
        (end.unwrap_or(id), error)
    }

    /// The newest transaction (before `end`) that revoked each block.
    fn revoked(&self, io: &mut Io<'_>, end: u32) -> Result<BTreeMap<u64, u32>, Error> {
        let tail = if self.csum { 4 } else { 0 };
        let mut revoked: BTreeMap<u64, u32> = BTreeMap::new();
        self.walk(io, end, |_, b| {
            if let LogBlock::Revoke { id, block } = b {
                let r = RevokeBlock::new(block, self.feat);
                if r.r_count() as usize > self.bs - tail {
                    return Err(Error::RevokeCount);
                }
                for b in r.records() {
                    let e = revoked.entry(b).or_insert(id);
                    if tid_gt(id, *e) {
                        *e = id;
                    }
                }
            }
            Ok(())
        })?;
        Ok(revoked)
    }

    /// Every tagged block of the transactions before `end` that no later
    /// transaction revoked, by file system block, with the first error
    /// met (a block that cannot be read or fails its checksum is left
    /// out).
    fn blocks_to_replay(
        &self,
        io: &mut Io<'_>,
        end: u32,
        revoked: &BTreeMap<u64, u32>,
    ) -> (BTreeMap<u64, Vec<u8>>, Option<Error>) {
        let mut writes: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        let mut data = vec![0u8; self.bs];
        let mut tag_error = None;
        let walked = self.walk(io, end, |io, b| {
            let LogBlock::Descriptor { id, tags } = b else {
                return Ok(());
            };
            for (tag, lb) in tags {
                if self.read(io, lb, &mut data).is_err() {
                    tag_error = Some(Error::JournalBlockUnreadable(lb));
                    continue;
                }
                if revoked.get(&tag.blocknr).is_some_and(|&r| !tid_gt(id, r)) {
                    continue;
                }
                if self.csum && !self.tag_checksum_ok(id, &tag, &data) {
                    tag_error = Some(Error::JournalBlockChecksum(lb));
                    continue;
                }
                let mut out = data.clone();
                if tag.flags.has(TagFlags::ESCAPE) {
                    put_be_u32(&mut out, 0, JBD2_MAGIC);
                }
                if tag.blocknr < self.fs.geo.blocks_count {
                    writes.insert(tag.blocknr, out);
                }
            }
            Ok(())
        });
        (writes, walked.err().or(tag_error))
    }

    /// Whether a data block matches its tag's checksum (all 32 bits with
    /// v3, the low 16 with v2).
    fn tag_checksum_ok(&self, id: u32, tag: &BlockTag, data: &[u8]) -> bool {
        let c = crc32c_raw(crc32c_raw(self.seed, &id.to_be_bytes()), data);
        if self.v3 {
            c == tag.checksum
        } else {
            c & 0xFFFF == tag.checksum & 0xFFFF
        }
    }

    /// The fast commit log, which continues transaction `end`. jbd2
    /// counts its area from one past the end of the log.
    fn fast_commit_log(&self, io: &mut Io<'_>, end: u32) -> Vec<super::fastcommit::Change> {
        let mut fc_blocks = Vec::new();
        for lb in self.maxlen + 1..=self.total {
            let mut b = vec![0u8; self.bs];
            if self.read(io, lb, &mut b).is_err() {
                break;
            }
            fc_blocks.push(b);
        }
        super::fastcommit::scan(&fc_blocks, end)
    }

    /// Walks the log's transactions from its start up to transaction
    /// `end`, handing `each` every descriptor and revoke block. It stops
    /// at the first block that is not of the expected transaction; a read
    /// that fails or an error from `each` stops it with that error.
    fn walk<'f>(
        &self,
        io: &mut Io<'f>,
        end: u32,
        mut each: impl FnMut(&mut Io<'f>, LogBlock<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut buf = vec![0u8; self.bs];
        let mut id = self.sequence;
        let mut blk = self.start;
        while !tid_ge(id, end) {
            self.read(io, blk, &mut buf)?;
            blk = self.wrap(blk + 1);
            let Some(h) = BlockHeader::parse(&buf) else {
                break;
            };
            if h.h_magic != JBD2_MAGIC || h.h_sequence != id {
                break;
            }
            match h.h_blocktype {
                blocktype::DESCRIPTOR => {
                    let mut tags = Vec::new();
                    for tag in DescriptorBlock::new(&buf, self.feat).tags() {
                        tags.push((tag, blk));
                        blk = self.wrap(blk + 1);
                    }
                    each(io, LogBlock::Descriptor { id, tags })?;
                }
                blocktype::COMMIT => id = id.wrapping_add(1),
                blocktype::REVOKE => each(io, LogBlock::Revoke { id, block: &buf })?,
                _ => break,
            }
        }
        Ok(())
    }
}

/// Replays the journal: finds where the log ends, collects what the
/// revoke blocks revoke, writes every block to replay and empties the
/// journal. Returns what to say, the fast commit log to replay after it,
/// and the error that cut the replay short, if any.
fn replay(
    fs: &Fs,
    io: &mut Io<'_>,
    fx: &fixer::Fixer,
    space: &Space<'_>,
) -> Result<(Replayed, Vec<super::fastcommit::Change>, Option<Error>), Error> {
    let (log, mut jsb) = Log::open(fs, io, space)?;
    if log.start == 0 {
        jsbl::field::s_sequence.set(&mut jsb, log.sequence.wrapping_add(1));
        set_jsb_checksum(&mut jsb);
        log.write(fx, Vec::new(), jsb)?;
        let said = "The journal was empty.".into();
        return Ok((
            Replayed {
                said,
                blocks: 0,
                transactions: 0,
            },
            Vec::new(),
            None,
        ));
    }
    let (end, mut error) = log.scan_end(io);
    let mut writes = BTreeMap::new();
    if error.is_none() {
        match log.revoked(io, end) {
            Ok(revoked) => (writes, error) = log.blocks_to_replay(io, end, &revoked),
            Err(e) => error = Some(e),
        }
    }
    let fc_log = if log.fast_commit && error.is_none() {
        log.fast_commit_log(io, end)
    } else {
        Vec::new()
    };
    let n = writes.len();
    let list: Vec<fixer::Write> = writes
        .into_iter()
        .map(|(b, d)| fixer::Write {
            offset: b * log.bs as u64,
            data: d,
        })
        .collect();
    // The journal is emptied whatever happened.
    jsbl::field::s_start.set(&mut jsb, 0);
    if error.is_none() {
        jsbl::field::s_sequence.set(&mut jsb, end.wrapping_add(1));
    }
    set_jsb_checksum(&mut jsb);
    log.write(fx, list, jsb)?;
    let transactions = end.wrapping_sub(log.sequence);
    let said = match &error {
        None => format!(
            "The journal was recovered: {transactions} transaction(s), {n} blocks replayed."
        ),
        Some(e) => format!(
            "The journal was recovered only in part ({e}); {transactions} transaction(s), {n} blocks replayed."
        ),
    };
    let replayed = Replayed {
        said,
        blocks: n as u64,
        transactions: u64::from(transactions),
    };
    Ok((replayed, fc_log, error))
}

/// What a replay did.
struct Replayed {
    /// The line for the report.
    said: String,
    /// Blocks written from the log.
    blocks: u64,
    /// Committed transactions replayed.
    transactions: u64,
}

/// One block of the log, as the revoke and replay passes see it.
enum LogBlock<'b> {
    /// A descriptor block of transaction `id`: its tags, each with the
    /// log block that holds its data.
    Descriptor { id: u32, tags: Vec<(BlockTag, u64)> },
    /// A revoke block of transaction `id`.
    Revoke { id: u32, block: &'b [u8] },
}
