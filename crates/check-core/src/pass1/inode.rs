//! The checks made on each inode, in e2fsck's order. Under a read-only
//! check every question is answered "no": a finding is recorded and the
//! inode goes on to the next check, as e2fsck does with `-n`.

use ext4_layout::dirent;
use ext4_layout::extent::ExtentNode;
use ext4_layout::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use ext4_layout::inode::{flags, FileType, Inode, GOOD_OLD_INODE_SIZE, S_IFDIR, S_IFMT, S_IFREG};
use ext4_layout::superblock::OS_HURD;
use ext4_layout::Ino;

use super::types::{
    has_valid_blocks, Cur, CurDir, DirMeta, DirWork, P1Out, Pass1, Policy, ScanStatus, Worker,
};
use crate::ctx::{AbortAt, Maps};
use crate::inode_checks::{device_ok, symlink_ok};
use crate::io::Io;
use crate::problem::{Code, Finding, Pass};
use crate::sink::LocalFix;
use crate::xattr_read::{self, XattrError};

impl<'p, 'f, 'io> Worker<'p, 'f, 'io> {
    /// A worker for one chunk.
    pub fn new(p: &'p Pass1<'f>, io: &'io mut Io<'f>) -> Self {
        let bs = p.fs.block_size();
        Worker {
            p,
            io,
            out: P1Out::default(),
            blockbuf: vec![0u8; bs],
            cur_dir: None,
            silent: false,
            collect: None,
            collected_nodes: Vec::new(),
            no_claims: false,
            claims: 0,
            answered_early: None,
        }
    }

    /// The worker's output.
    pub fn finish(self) -> P1Out {
        self.out
    }

    /// Records a finding.
    pub fn report(&mut self, f: Finding) {
        if !self.silent {
            self.out.findings.push(f);
        }
    }

    /// Stops the pass at this inode.
    pub fn abort(&mut self, ino: u32, why: impl Into<String>) {
        if self.silent {
            return;
        }
        let a = AbortAt::new(Pass::P1, ino, why);
        self.out.abort = AbortAt::earliest(self.out.abort.take(), Some(a));
    }

    fn maps(&self) -> &'f Maps {
        self.p.maps
    }

    /// Checks one inode; a directory's blocks are then queued for pass 2.
    pub(crate) fn check_inode(&mut self, ino: u32, raw: &[u8], status: ScanStatus, csum_bad: bool) {
        let mark = self.out.findings.len();
        let claims = self.claims;
        let early = self.answered_early(ino, raw, status, csum_bad);
        self.answered_early = early.as_ref().map(|(code, _)| (ino, *code));
        match &early {
            // e2fsck rewrites the inode with its truncation, so its
            // checksum no longer fails.
            Some((Code::InlineDataNoAttr, t)) => self.check_inode_inner(ino, t, status, false),
            Some((_, t)) => self.check_inode_inner(ino, t, status, csum_bad),
            None => self.check_inode_inner(ino, raw, status, csum_bad),
        }
        self.answered_early = None;
        if self.p.sink.is_some() && self.out.findings.len() > mark {
            self.send_local_fixes(ino, raw, mark);
        }
        let p = self.p;
        if p.repairing
            && self.claims == claims
            && self.out.findings[mark..]
                .iter()
                .any(|f| f.ino == Some(ino) && f.code.clears_inode() && p.says_yes(f))
        {
            self.answer_clear(ino);
            return;
        }
        if let Some(mut d) = self.cur_dir.take() {
            if let Some(dx) = d.meta.dx {
                self.out.dx_dirs.push((d.meta.ino, dx));
            }
            if self.queues_for_index(raw) {
                self.out.linear_dirs.push(d.meta.ino);
                d.meta.to_index = true;
            }
            for &(pblk, lblk) in &d.blocks {
                self.out.dir_work.push(DirWork {
                    meta: d.meta,
                    pblk,
                    lblk,
                    inline: d.inline.clone(),
                });
            }
        }
    }

    /// Under a repair that answers yes, an inode with inline data whose
    /// `system.data` attribute is missing or unreadable, as e2fsck -y's
    /// pass 1 leaves it before its next check of the inode: size 0, the
    /// inline data flag off, `i_block` zeroed. The rest of the check
    /// judges that inode (a directory so left is a zero-length directory
    /// the repair clears), so the round that truncates it goes on to the
    /// later passes. Not with the extents flag also set: that conflict
    /// is settled first, and may take the inline data flag away.
    /// Under a repair that answers yes, the inode as a fix e2fsck -y
    /// makes before the rest of its checks leaves it, with that fix's
    /// code: a special file's extents and inline data flags cleared
    /// (both set), or inline data truncated ([`Self::truncated_inline`]).
    fn answered_early(
        &mut self,
        ino: u32,
        raw: &[u8],
        status: ScanStatus,
        csum_bad: bool,
    ) -> Option<(Code, Vec<u8>)> {
        let p = self.p;
        let geo = &p.fs.geo;
        let inode = Inode::new(raw)?;
        let special = matches!(
            inode.file_type(),
            Some(FileType::CharDevice | FileType::BlockDevice | FileType::Fifo | FileType::Socket)
        );
        if p.repairing
            && status != ScanStatus::BadBlock
            && ino >= geo.first_ino
            && inode.i_links_count() != 0
            && special
            && inode.has_flag(flags::INLINE_DATA)
            && inode.has_flag(flags::EXTENTS)
            && (geo.incompat.contains(IncompatFeatures::EXTENTS)
                || geo.incompat.contains(IncompatFeatures::INLINE_DATA))
            && p.says_yes(&Finding::new(Code::SpecialExtentsIdata).ino(ino))
        {
            let mut copy = raw.to_vec();
            ext4_layout::inode::InodeMut::new(&mut copy)
                .change_flags(0, flags::EXTENTS | flags::INLINE_DATA);
            return Some((Code::SpecialExtentsIdata, copy));
        }
        self.truncated_inline(ino, raw, status, csum_bad)
            .map(|t| (Code::InlineDataNoAttr, t))
    }

    fn truncated_inline(
        &mut self,
        ino: u32,
        raw: &[u8],
        status: ScanStatus,
        csum_bad: bool,
    ) -> Option<Vec<u8>> {
        let p = self.p;
        let geo = &p.fs.geo;
        if !p.repairing
            || status == ScanStatus::BadBlock
            || ino < geo.first_ino
            || !geo.incompat.contains(IncompatFeatures::INLINE_DATA)
        {
            return None;
        }
        let inode = Inode::new(raw)?;
        if !inode.has_flag(flags::INLINE_DATA)
            || inode.has_flag(flags::EXTENTS)
            || inode.i_links_count() == 0
        {
            return None;
        }
        match xattr_read::system_data(self.io, &inode, ino, csum_bad) {
            Ok(Some(_)) | Err(XattrError::InodeCorrupted) | Err(XattrError::Io) => return None,
            Ok(None) | Err(_) => {}
        }
        if !p.says_yes(&Finding::new(Code::InlineDataNoAttr).ino(ino)) {
            return None;
        }
        let mut copy = raw.to_vec();
        let mut w = ext4_layout::inode::InodeMut::new(&mut copy);
        w.set_size(0);
        w.change_flags(0, flags::INLINE_DATA);
        w.i_block().fill(0);
        Some(copy)
    }

    /// Whether pass 3A would index this directory (see
    /// [`super::types::P1Out::linear_dirs`]).
    fn queues_for_index(&self, raw: &[u8]) -> bool {
        let geo = &self.p.fs.geo;
        geo.compat.contains(CompatFeatures::DIR_INDEX)
            && Inode::new(raw).is_some_and(|i| {
                !i.has_flag(flags::INDEX)
                    && !i.has_flag(flags::INLINE_DATA)
                    && i.size() / u64::from(geo.block_size) >= 3
            })
    }

    fn check_inode_inner(&mut self, ino: u32, raw: &[u8], status: ScanStatus, csum_bad: bool) {
        let Some(inode) = Inode::new(raw) else {
            return;
        };
        let maps = self.maps();
        Maps::mark(&maps.inode_scanned, ino);
        if csum_bad {
            Maps::mark(&maps.inode_csum_bad, ino);
        }
        let fs = self.p.fs;
        let geo = &fs.geo;
        let sb = fs.sb();
        if status == ScanStatus::BadBlock {
            if ino == 1 {
                self.report(Finding::new(Code::BadblocksInBadblocks).ino(ino));
            }
            Maps::mark(&maps.inode_bb, ino);
            Maps::mark(&maps.inode_used, ino);
            return;
        }
        let links = inode.i_links_count();
        if status == ScanStatus::Garbage && links > 0 {
            self.report(Finding::new(Code::InodeIsGarbage).ino(ino));
        }
        // The inode as a repair's "treat as a directory" leaves it.
        let as_dir: Vec<u8>;
        let mut cur = Cur {
            ino,
            inode,
            csum_bad,
            ea_ibody_quota_blocks: 0,
            findings_from: self.out.findings.len(),
        };
        let first_ino = geo.first_ino;
        let mut dtime = inode.i_dtime();
        // An orphan of a mounted file system in use is in use: its dtime
        // links the orphan list, and a zero link count is a file deleted
        // while open.
        let live_orphan = self.p.live_orphans.binary_search(&ino).is_ok();
        if dtime != 0 && self.p.low_dtime_check && dtime < sb.s_inodes_count() && !live_orphan {
            let f = Finding::new(Code::LowDtime)
                .ino(ino)
                .found(u64::from(dtime));
            // Fixed, the dtime is cleared on an inode with links and set
            // to now on one without: what follows judges that, as e2fsck
            // -y does (no "in use but has dtime set" after it).
            if self.p.says_yes(&f) {
                dtime = if links != 0 { 0 } else { u32::MAX };
            }
            self.report(f);
        }
        if links != 0 {
            maps.set_links(ino, links);
        } else if ino >= first_ino && !self.is_quota_reserved(ino) && !live_orphan {
            if dtime == 0 && inode.i_mode() != 0 {
                self.report(Finding::new(Code::ZeroDtime).ino(ino));
            }
            self.finish_inode(&cur);
            return;
        }
        let extent_fs = geo.incompat.contains(IncompatFeatures::EXTENTS);
        if !self.check_feature_flags(&cur) {
            return;
        }
        if self.special_inode(&mut cur) {
            return;
        }
        if inode.i_links_count() == 0 && !live_orphan {
            self.finish_inode(&cur);
            return;
        }
        if dtime != 0 && !live_orphan {
            self.report(Finding::new(Code::SetDtime).ino(ino));
        }
        Maps::mark(&maps.inode_used, ino);
        self.mark_bad_fields(&cur);
        if inode.has_flag(flags::IMAGIC) {
            if geo.compat.contains(CompatFeatures::IMAGIC_INODES) {
                Maps::mark(&maps.inode_imagic, ino);
            } else {
                self.report(Finding::new(Code::SetImagic).ino(ino));
            }
        }
        self.check_extra_space(&mut cur);
        // Taken for a directory, the inode is checked on as one, as e2fsck
        // -y goes on with the mode it set.
        let inode = match self.check_is_really_dir(&cur) {
            Some(f) if self.p.says_yes(&f) => {
                self.report(f);
                let mut copy = raw.to_vec();
                let mode = (inode.i_mode() & 0o7777) | S_IFDIR;
                ext4_layout::inode::InodeMut::new(&mut copy)
                    .set(ext4_layout::inode::field::i_mode, mode);
                as_dir = copy;
                let v = Inode::new(&as_dir).unwrap_or(inode);
                cur.inode = v;
                v
            }
            Some(f) => {
                self.report(f);
                inode
            }
            None => inode,
        };
        if extent_fs
            && inode.has_flag(flags::EXTENTS)
            && inode.is_symlink()
            && !has_valid_blocks(fs, &inode)
        {
            self.report(Finding::new(Code::FastSymlinkExtentFlag).ino(ino));
        }
        let mut policy = None;
        if inode.has_flag(flags::ENCRYPT) {
            policy = self.check_encryption(&cur);
        }
        if geo.incompat.contains(IncompatFeatures::CASEFOLD) && inode.has_flag(flags::CASEFOLD) {
            Maps::mark(&maps.inode_casefold, ino);
        }
        if let Some(p) = &policy {
            self.out.policies.push((ino, p.clone()));
        }
        if !self.dispatch_type(&mut cur, policy) {
            return;
        }
        self.check_blocks(&mut cur);
        self.finish_inode(&cur);
    }

    /// The flags that need a feature, and the features flags imply:
    /// case-folding, inline data, extents. False if an inode's extended
    /// attributes cannot be read (the check stops).
    fn check_feature_flags(&mut self, cur: &Cur<'_>) -> bool {
        let (ino, inode) = (cur.ino, cur.inode);
        let geo = &self.p.fs.geo;
        let first_ino = geo.first_ino;
        let links = inode.i_links_count();
        let csum_bad = cur.csum_bad;
        // Case-folding only makes sense on directories of a casefold file system.
        if inode.has_flag(flags::CASEFOLD) {
            if !inode.is_dir() {
                self.report(Finding::new(Code::CasefoldNondir).ino(ino));
            }
            if !geo.incompat.contains(IncompatFeatures::CASEFOLD) {
                self.report(Finding::new(Code::CasefoldFeature).ino(ino));
            }
        }
        // Only a regular file can hold an attribute's value.
        if inode.has_flag(flags::EA_INODE) && !inode.is_reg() {
            self.report(Finding::new(Code::EaInodeNonreg).ino(ino));
        }
        let extent_fs = geo.incompat.contains(IncompatFeatures::EXTENTS);
        let inline_fs = geo.incompat.contains(IncompatFeatures::INLINE_DATA);
        if self.answered_early == Some((ino, Code::SpecialExtentsIdata)) {
            self.report(Finding::new(Code::SpecialExtentsIdata).ino(ino));
        }
        if inode.has_flag(flags::INLINE_DATA) && inode.has_flag(flags::EXTENTS) {
            self.inline_and_extents(cur, extent_fs, inline_fs);
        }
        if inode.has_flag(flags::INLINE_DATA) && !inline_fs && ino >= first_ino {
            let found = matches!(
                xattr_read::system_data(self.io, &inode, ino, false),
                Ok(Some(_))
            );
            if found {
                self.report(Finding::new(Code::InlineDataFeature).ino(ino));
            }
            self.report(Finding::new(Code::InlineDataSet).ino(ino));
        }
        if self.answered_early == Some((ino, Code::InlineDataNoAttr)) {
            self.report(Finding::new(Code::InlineDataNoAttr).ino(ino));
        }
        if inode.has_flag(flags::INLINE_DATA) && inline_fs && ino >= first_ino {
            match xattr_read::system_data(self.io, &inode, ino, csum_bad) {
                Ok(Some(_)) => {}
                Ok(None) => self.report(Finding::new(Code::InlineDataNoAttr).ino(ino)),
                Err(XattrError::InodeCorrupted) | Err(XattrError::Io) => {
                    self.abort(
                        ino,
                        format!("inode {ino} has unreadable extended attributes"),
                    );
                    return false;
                }
                Err(_) => self.report(Finding::new(Code::InlineDataNoAttr).ino(ino)),
            }
        }
        let root_ok = ExtentNode::new(inode.i_block()).is_some_and(|n| n.validate(true).is_ok());
        if inode.has_flag(flags::EXTENTS)
            && !extent_fs
            && (links != 0 || ino == 1 || ino == 2 || ino == 8)
        {
            if root_ok {
                self.report(Finding::new(Code::ExtentFeature).ino(ino));
            }
            self.report(Finding::new(Code::ExtentsSet).ino(ino));
        }
        if extent_fs
            && !inode.has_flag(flags::EXTENTS)
            && (links != 0 || ino == 1 || ino == 2 || ino == 8)
            && matches!(inode.i_mode() & S_IFMT, S_IFREG | S_IFDIR)
            && root_ok
        {
            self.report(Finding::new(Code::UnsetExtentFlag).ino(ino));
        }
        true
    }

    /// Under a repair, an inode the repair clears (as e2fsck -y clears it
    /// in pass 1) is gone for the passes that follow: entries naming it
    /// name an unused inode. Only for an inode that claimed no block yet:
    /// one cleared after claiming blocks makes e2fsck restart, and the
    /// repair checks again after clearing it.
    fn answer_clear(&mut self, ino: u32) {
        let maps = self.maps();
        let i = u64::from(ino - 1);
        maps.inode_used.test_and_clear(i);
        maps.inode_dir.test_and_clear(i);
        maps.inode_reg.test_and_clear(i);
        maps.set_links(ino, 0);
        self.cur_dir = None;
    }

    /// Under a repair: when every problem just found in inode `ino` (the
    /// findings from `mark` on) concerns only its own fields, the fixed
    /// inode goes to the fixer now and the findings are marked fixed.
    fn send_local_fixes(&mut self, ino: u32, raw: &[u8], mark: usize) {
        let fs = self.p.fs;
        let Some(sink) = self.p.sink else { return };
        if self.silent || !(ino == 2 || ino >= fs.geo.first_ino) {
            return;
        }
        let isz = fs.geo.inode_size as usize;
        let Some(offset) = Io::inode_offset(fs, ino) else {
            return;
        };
        if raw.len() < isz {
            return;
        }
        let regular = Inode::new(raw).is_some_and(|i| i.file_type() == Some(FileType::Regular));
        let found = &self.out.findings[mark..];
        if !found
            .iter()
            .all(|f| f.ino == Some(ino) && f.code.policy().inode_local(regular) && !f.fixed)
        {
            return;
        }
        // A size of 2 GiB or more on a file system without large_file
        // turns the feature on too: a change to the superblock, which the
        // round's plan makes.
        let large_file = fs.geo.ro_compat.contains(RoCompatFeatures::LARGE_FILE);
        if !large_file
            && found
                .iter()
                .any(|f| f.code == Code::BadISize && f.expected().is_some_and(|v| v >= 0x8000_0000))
        {
            return;
        }
        let fix = LocalFix {
            ino,
            offset,
            raw: &raw[..isz],
            findings: found,
            csum_seed: fs.metadata_csum().then_some(fs.geo.csum_seed),
        };
        if sink.fix_inode(fix) {
            for f in &mut self.out.findings[mark..] {
                f.fixed = true;
            }
        }
    }

    /// The checksum recheck every inode ends with: under a read-only check
    /// nothing was rewritten, so a bad checksum is still bad.
    pub(crate) fn finish_inode(&mut self, cur: &Cur<'_>) {
        if cur.csum_bad {
            self.report(Finding::new(Code::InodeOnlyCsumInvalid).ino(cur.ino));
        }
    }

    /// Inodes 3 and 4 and the project quota inode are checked even when
    /// they have no links.
    fn is_quota_reserved(&self, ino: u32) -> bool {
        let prj = self.p.fs.sb().s_prj_quota_inum();
        ino == 3 || ino == 4 || (prj != 0 && ino == prj)
    }

    fn inline_and_extents(&mut self, cur: &Cur<'_>, extent_fs: bool, inline_fs: bool) {
        let (ino, inode) = (cur.ino, cur.inode);
        if !extent_fs && !inline_fs {
            return;
        }
        if matches!(
            inode.file_type(),
            Some(FileType::CharDevice | FileType::BlockDevice | FileType::Fifo | FileType::Socket)
        ) {
            self.report(Finding::new(Code::SpecialExtentsIdata).ino(ino));
            return;
        }
        if ExtentNode::new(inode.i_block()).is_some_and(|n| n.validate(true).is_ok()) {
            self.report(Finding::new(Code::ClearInlineDataForExtent).ino(ino));
        }
        let isz = u64::from(self.p.fs.geo.inode_size);
        let max_inline_ea = if isz > 128 {
            isz.wrapping_sub(128 + u64::from(inode.i_extra_isize()))
        } else {
            0
        };
        if inode.size() < 60u64.wrapping_add(max_inline_ea) {
            self.report(Finding::new(Code::ClearExtentForInlineData).ino(ino));
        }
        let bc = self.p.fs.geo.blocks_count;
        if (0..15).all(|i| u64::from(inode.i_block_word(i)) < bc) {
            self.report(Finding::new(Code::ClearExtentInlineDataFlags).ino(ino));
        }
        self.report(Finding::new(Code::ClearExtentInlineDataInode).ino(ino));
    }

    /// The reserved and feature-owned inodes. Returns true when the inode
    /// has been fully handled.
    fn special_inode(&mut self, cur: &mut Cur<'_>) -> bool {
        let fs = self.p.fs;
        let sb = fs.sb();
        let maps = self.maps();
        let (ino, inode) = (cur.ino, cur.inode);
        let geo = &fs.geo;
        if ino == Ino::BAD.get() {
            if cur.csum_bad
                || inode.i_mode() != 0
                || inode.i_uid() != 0
                || inode.i_gid() != 0
                || inode.i_links_count() != 0
                || inode.has_flag(flags::INLINE_DATA)
                || inode.i_file_acl_lo() != 0
            {
                let f = Finding::new(Code::InvalidBadInode).ino(ino);
                let cleared = self.p.says_yes(&f);
                self.report(f);
                if cur.csum_bad && !cleared {
                    // As e2fsck: kept, it cannot be read to walk its
                    // blocks (its checksum fails), and the check stops.
                    Maps::mark(&maps.inode_used, ino);
                    self.abort(
                        ino,
                        "the bad blocks inode fails its checksum, so its blocks cannot be read",
                    );
                    return true;
                }
            }
            self.check_bad_blocks_inode(cur);
            Maps::mark(&maps.inode_used, ino);
            self.finish_inode(cur);
            return true;
        }
        if ino == Ino::ROOT.get() {
            if !inode.is_dir() {
                self.report(Finding::new(Code::RootNotDir).ino(ino));
            }
            if inode.i_dtime() != 0 && inode.i_links_count() != 0 {
                self.report(Finding::new(Code::RootDtime).ino(ino));
            }
            return false;
        }
        let not_clear =
            inode.i_links_count() != 0 || inode.i_blocks_lo() != 0 || inode.i_block_word(0) != 0;
        if ino == Ino::JOURNAL.get() {
            Maps::mark(&maps.inode_used, ino);
            if sb.s_journal_inum() == Ino::JOURNAL.get() {
                if !inode.is_reg() {
                    self.report(Finding::new(Code::JournalBadMode).ino(ino));
                }
                self.check_blocks(cur);
                self.finish_inode(cur);
                return true;
            }
            if not_clear {
                self.report(Finding::new(Code::JournalInodeNotClear).ino(ino));
            }
            return false;
        }
        if self.is_quota_reserved(ino) {
            Maps::mark(&maps.inode_used, ino);
            let named = ino == sb.s_usr_quota_inum()
                || ino == sb.s_grp_quota_inum()
                || ino == sb.s_prj_quota_inum();
            if geo.ro_compat.contains(RoCompatFeatures::QUOTA) && named {
                if !inode.is_reg() {
                    self.report(Finding::new(Code::QuotaBadMode).ino(ino));
                }
                self.check_blocks(cur);
                self.finish_inode(cur);
                return true;
            }
            if not_clear {
                self.report(Finding::new(Code::QuotaInodeNotClear).ino(ino));
            }
            return false;
        }
        let orphan = sb.s_orphan_file_inum();
        if orphan != 0 && ino == orphan {
            Maps::mark(&maps.inode_used, ino);
            if geo.compat.contains(CompatFeatures::ORPHAN_FILE) {
                if !inode.is_reg() {
                    self.report(Finding::new(Code::OrphanFileBadMode).ino(ino));
                }
                self.check_blocks(cur);
                self.finish_inode(cur);
                return true;
            }
            if not_clear {
                self.report(Finding::new(Code::OrphanFileNotClear).ino(ino));
            }
            return false;
        }
        if ino < geo.first_ino {
            Maps::mark(&maps.inode_used, ino);
            let mode = inode.i_mode();
            let bad = match ino {
                5 => mode & S_IFMT == S_IFDIR,
                7 => mode != 0 && mode & S_IFMT != S_IFREG,
                _ => mode != 0,
            };
            if bad {
                self.report(
                    Finding::new(Code::ReservedBadMode)
                        .ino(ino)
                        .found(u64::from(mode)),
                );
            }
            self.check_blocks(cur);
            self.finish_inode(cur);
            return true;
        }
        false
    }

    /// Fields that must be zero; a problem is only reported when a
    /// directory entry (pass 2) or pass 4 reaches the inode.
    fn mark_bad_fields(&mut self, cur: &Cur<'_>) {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let inode = cur.inode;
        let hurd = fs.sb().s_creator_os() == OS_HURD;
        let (frag, fsize) = if hurd {
            (inode.h_i_frag(), inode.h_i_fsize())
        } else {
            (0, 0)
        };
        let bad = inode.i_faddr() != 0
            || frag != 0
            || fsize != 0
            || (!geo.incompat.contains(IncompatFeatures::LARGEDIR)
                && inode.is_dir()
                && inode.i_size_high() != 0)
            || (!hurd
                && !geo.incompat.contains(IncompatFeatures::BIT64)
                && inode.l_i_file_acl_high() != 0)
            || (!hurd
                && !geo.ro_compat.contains(RoCompatFeatures::HUGE_FILE)
                && inode.l_i_blocks_high() != 0);
        if bad {
            Maps::mark(&self.maps().inode_bad, cur.ino);
        }
    }

    /// `i_extra_isize`, the in-inode extended attributes and the extra
    /// timestamp bits.
    fn check_extra_space(&mut self, cur: &mut Cur<'_>) {
        let isz = self.p.fs.geo.inode_size as usize;
        if isz == GOOD_OLD_INODE_SIZE {
            return;
        }
        let inode = cur.inode;
        let mut extra = usize::from(inode.i_extra_isize());
        let max = isz - GOOD_OLD_INODE_SIZE;
        if extra != 0 && (extra < 4 || extra > max || extra % 4 != 0) {
            let f = Finding::new(Code::ExtraIsize)
                .ino(cur.ino)
                .found(extra as u64);
            // Fixed, e2fsck goes on to the attributes in the inode at the
            // new size; so does a repair's check, except for inline data,
            // which pass 2 reads from the inode as it is on disk.
            let yes = self.p.says_yes(&f) && !inode.has_flag(flags::INLINE_DATA);
            self.report(f);
            if !yes {
                return;
            }
            extra = usize::from(crate::fixes::fixed_extra_isize(
                self.p.fs.geo.inode_size,
                self.p.fs.sb().s_want_extra_isize(),
                inode.i_extra_isize(),
            ));
        }
        if extra >= max.saturating_sub(4) {
            return;
        }
        let bytes = inode.bytes();
        if ext4_layout::xattr::inode_area(bytes, extra).is_some_and(|x| x.present()) {
            self.check_ea_in_inode(cur, extra);
        }
        // A time with bit 31 set and both epoch bits set cannot be
        // represented; the fields are read whatever i_extra_isize says.
        let bad = ext4_layout::inode::TIMES_WITH_EXTRA
            .iter()
            .any(|&(t, x)| t.get(bytes) & 0x8000_0000 != 0 && x.get(bytes) & 3 == 3);
        if bad {
            self.report(Finding::new(Code::EaTimeOutOfRange).ino(cur.ino));
        }
    }

    /// Whether a non-directory inode is really a directory: its first block
    /// starts with '.' and '..'.
    /// Whether a special file looks like a directory: the finding, for
    /// the caller to report.
    fn check_is_really_dir(&mut self, cur: &Cur<'_>) -> Option<Finding> {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let inode = cur.inode;
        let t = inode.i_mode() & S_IFMT;
        if matches!(t, S_IFDIR | S_IFREG | 0o120000) || inode.i_block_word(0) == 0 {
            return None;
        }
        let inline_fs = geo.incompat.contains(IncompatFeatures::INLINE_DATA);
        let extent_fs = geo.incompat.contains(IncompatFeatures::EXTENTS);
        if inline_fs && inode.has_flag(flags::INLINE_DATA) {
            let size = xattr_read::inline_data_size(self.io, &inode, !cur.csum_bad)?;
            if size % 4 != 0 {
                return None;
            }
            let ib = inode.i_block();
            // The parent's number, then the first entry.
            let parent = inode.i_block_word(0);
            let dino = dirent::inode_at(ib, 4);
            let rec_len = dirent::rec_len_at(ib, 4, fs.block_size());
            let icount = fs.sb().s_inodes_count();
            if parent >= icount
                || (parent < geo.first_ino && parent != 2)
                || dino >= icount
                || (dino < geo.first_ino && dino != 0)
                || rec_len > 56
            {
                return None;
            }
            return Some(
                Finding::new(Code::TreatAsDirectory)
                    .ino(cur.ino)
                    .found(u64::from(inode.i_mode())),
            );
        }
        let mut not_device = false;
        let blk;
        if extent_fs && inode.has_flag(flags::EXTENTS) {
            match super::blocks::map_logical(self, &inode, cur.ino, 0) {
                Some(b) => blk = b,
                None => return None,
            }
            not_device = true;
        } else {
            for i in 0..15 {
                let b = u64::from(inode.i_block_word(i));
                if b == 0 {
                    continue;
                }
                if i >= 4 {
                    not_device = true;
                }
                // e2fsck also skips blocks claimed by inodes before this
                // one; that depends on scan order, so only the fixed
                // metadata (claimed before any inode) is consulted.
                if !geo.block_in_range(b) || self.maps().metadata.get(b) {
                    return None;
                }
            }
            blk = u64::from(inode.i_block_word(0));
        }
        if matches!(t, 0o020000 | 0o060000) && inode.i_links_count() == 1 && !not_device {
            return None;
        }
        // The block's checksum is seeded from the inode as read from disk;
        // an inode failing its own checksum cannot vouch for it, so on
        // metadata_csum such an inode is not taken for a directory, unless
        // a repair has already rewritten it (with a good checksum) for a
        // problem found before this point. e2fsck decides this once, so a
        // repair's later rounds keep the first round's refusal.
        if fs.metadata_csum() {
            if self.p.not_dirs.binary_search(&cur.ino).is_ok() {
                return None;
            }
            let p = self.p;
            let rewritten = p.repairing
                && self.out.findings[cur.findings_from..]
                    .iter()
                    .any(|f| f.ino == Some(cur.ino) && p.says_yes(f));
            if cur.csum_bad && !rewritten {
                Maps::mark(&self.maps().inode_not_dir, cur.ino);
                return None;
            }
        }
        let bs = fs.block_size();
        let mut buf = std::mem::take(&mut self.blockbuf);
        let ok = self.io.read_blocks(blk, &mut buf).is_ok()
            && looks_like_dir_block(fs, &buf, cur.ino, inode.i_generation());
        self.blockbuf = buf;
        debug_assert_eq!(self.blockbuf.len(), bs);
        ok.then(|| {
            Finding::new(Code::TreatAsDirectory)
                .ino(cur.ino)
                .found(u64::from(inode.i_mode()))
        })
    }

    /// The encryption context of an encrypted inode.
    fn check_encryption(&mut self, cur: &Cur<'_>) -> Option<Policy> {
        let ino = cur.ino;
        let attrs = if cur.csum_bad && self.p.fs.geo.inode_size > 128 {
            None
        } else {
            xattr_read::read_all(self.io, &cur.inode, ino, false).ok()
        };
        let ctx = attrs.and_then(|v| v.into_iter().find(|a| a.index == 9 && a.name == b"c"));
        let Some(c) = ctx else {
            self.report(Finding::new(Code::MissingEncryptionXattr).ino(ino));
            return None;
        };
        let v = &c.value;
        let corrupt = v.is_empty()
            || v[0] == 0
            || (v[0] == 1 && v.len() != 28)
            || (v[0] == 2 && v.len() != 40);
        if corrupt {
            self.report(Finding::new(Code::CorruptEncryptionXattr).ino(ino));
            return None;
        }
        match v[0] {
            1 | 2 => {
                // The policy is the context without its 16-byte nonce.
                let keep = v.len() - 16;
                Some(Policy::Known(v[..keep].to_vec()))
            }
            _ => Some(Policy::Unrecognized),
        }
    }

    /// Records the inode's type and checks special files. Returns false
    /// when the inode needs no block check.
    fn dispatch_type(&mut self, cur: &mut Cur<'_>, policy: Option<Policy>) -> bool {
        let maps = self.maps();
        let (ino, inode) = (cur.ino, cur.inode);
        let ft = inode.file_type();
        let mut counted = None;
        match ft {
            Some(FileType::Directory) => {
                Maps::mark(&maps.inode_dir, ino);
                maps.set_ftype(ino, 2);
                self.cur_dir = Some(CurDir {
                    meta: DirMeta {
                        ino,
                        generation: inode.i_generation(),
                        iflags: inode.i_flags(),
                        csum_ok: !cur.csum_bad,
                        encrypted: policy.is_some(),
                        dx: None,
                        to_index: false,
                    },
                    blocks: Vec::new(),
                    inline: None,
                });
                counted = Some(FileType::Directory);
            }
            Some(FileType::Regular) => {
                Maps::mark(&maps.inode_reg, ino);
                maps.set_ftype(ino, 1);
                counted = Some(FileType::Regular);
            }
            Some(
                t @ (FileType::CharDevice
                | FileType::BlockDevice
                | FileType::Fifo
                | FileType::Socket),
            ) if device_ok(&inode) => {
                maps.set_ftype(ino, t.dirent_code());
                if inode.has_flag(flags::EXTENTS) || inode.has_flag(flags::INLINE_DATA) {
                    self.report(Finding::new(Code::SpecialExtentsIdata).ino(ino));
                }
                if inode.has_flag(flags::IMMUTABLE) || inode.has_flag(flags::APPEND) {
                    self.report(Finding::new(Code::SetImmutable).ino(ino));
                }
                if inode.size() != 0 {
                    self.report(
                        Finding::new(Code::SetNonzeroSize)
                            .ino(ino)
                            .found(inode.size()),
                    );
                }
                counted = Some(t);
            }
            Some(FileType::Symlink) if symlink_ok(self.io, &inode, !cur.csum_bad) => {
                maps.set_ftype(ino, 7);
                if inode.has_flag(flags::IMMUTABLE) || inode.has_flag(flags::APPEND) {
                    self.report(Finding::new(Code::SetImmutable).ino(ino));
                }
                self.out.stats.count_type(FileType::Symlink);
                if inode.has_flag(flags::INLINE_DATA) {
                    self.finish_inode(cur);
                    return false;
                }
                if inode.size() < 60 {
                    self.out.stats.fast_symlinks += 1;
                }
            }
            other => {
                // A bad mode, or a special file or symlink that fails its
                // test: reported when something refers to the inode.
                Maps::mark(&maps.inode_bad, ino);
                if let Some(t) = other {
                    maps.set_ftype(ino, t.dirent_code());
                }
            }
        }
        if let Some(t) = counted {
            self.out.stats.count_type(t);
        }
        if !inode.has_flag(flags::EXTENTS) && !inode.has_flag(flags::INLINE_DATA) {
            let st = &mut self.out.stats;
            st.ind += u64::from(inode.i_block_word(12) != 0);
            st.dind += u64::from(inode.i_block_word(13) != 0);
            st.tind += u64::from(inode.i_block_word(14) != 0);
        }
        true
    }
}

/// Whether a block starts with a '.' entry for `ino` and a '..' entry.
fn looks_like_dir_block(fs: &crate::fs::Fs, buf: &[u8], ino: u32, generation: u32) -> bool {
    let bs = buf.len();
    if fs.metadata_csum() {
        let seed = ext4_layout::inode::inode_csum_seed(fs.geo.csum_seed, ino, generation);
        let ok = match ext4_layout::dirent::DirTail::find(buf) {
            Some(t) => t.det_checksum() == ext4_layout::dirent::leaf_checksum(buf, seed),
            None => false,
        };
        if !ok {
            return false;
        }
    }
    let rl = dirent::raw_rec_len_at(buf, 0);
    if dirent::name_at(buf, 0) != b"."
        || dirent::inode_at(buf, 0) != ino
        || rl < 12
        || rl % 4 != 0
        || rl >= bs - 12
    {
        return false;
    }
    let rl2 = dirent::raw_rec_len_at(buf, rl);
    dirent::name_at(buf, rl) == b".." && rl2 >= 12 && rl2 % 4 == 0
}
