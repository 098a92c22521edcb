//! Orphan release before the passes, as e2fsck does when it opens a file
//! system it may write to: every inode on the orphan list, then every
//! inode the orphan file lists, is released. One with no links left is
//! deleted (its blocks, its extended-attribute block's reference and the
//! inode itself freed); one still linked is truncated to its size.
//!
//! The release is trusted by a boot-time check that skips the passes, so
//! it must leave the bitmaps, the group and superblock counts, the
//! reference counts of shared attribute blocks, the quota usage and the
//! orphan file exactly consistent. Where e2fsck gives up on an orphan (a
//! block out of range or already free, an attribute block it cannot
//! read, a broken orphan file) the release stops there and the file
//! system is marked not clean, so that the full check runs.

use ext4_layout::types::{Ino, PhysBlock};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ext4_layout::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use ext4_layout::inode::{field, FileType, Inode};
use ext4_layout::orphan::{CsumKey, OrphanBlock};
use ext4_layout::superblock as sbl;
use ext4_layout::xattr;
use pipeline::Device;

use super::account::{account, block_in_use};
use super::prepass::{clear_valid, commit, open, PrePass};
use super::raw::{clear_feature, now, sbf};
use super::stage::{Kind, Staging};
use check_core::fs::Fs;

/// Why the release stopped; the file system then gets a full check.
type Stop = String;

/// Releases the orphans, commits what that changed, and notes how many.
pub(crate) fn orphans(
    dev: &Arc<Device>,
    fx: &fixer::Fixer,
    pre: &mut PrePass,
) -> Result<(), crate::Error> {
    let fs = open(dev)?;
    let head = fs.sb().s_last_orphan();
    if head == 0 && !fs.geo.ro_compat.contains(RoCompatFeatures::ORPHAN_PRESENT) {
        return Ok(());
    }
    let maps = check_core::ctx::Maps::new(&fs);
    let mut r = Release {
        fs: &fs,
        st: Staging::new(&fs, &maps, false),
        quota: BTreeMap::new(),
        released: 0,
    };
    // Win or lose, the list head is not used again.
    sbl::field::s_last_orphan.set(r.st.sb_mut(), 0);
    // With errors recorded neither list can be trusted, and the full
    // check runs anyway; the orphan file is cleaned after it.
    if fs.sb().s_state() & sbl::STATE_ERROR == 0 {
        let outcome = r.release_all(head).and_then(|()| r.write_quota());
        pre.orphans_released += r.released as u64;
        match outcome {
            Ok(()) => pre
                .notes
                .push(format!("{} orphaned inode(s) released.", r.released)),
            Err(why) => {
                pre.notes.push(format!(
                    "{} orphaned inode(s) released, then the release stopped: {why}; the file system gets a full check.",
                    r.released
                ));
                clear_valid(r.st.sb_mut());
            }
        }
    }
    let Release { st, .. } = r;
    commit(fx, st, pre)
}

/// One orphan release: the staged changes, and the quota usage released.
struct Release<'f> {
    fs: &'f Fs,
    st: Staging<'f>,
    /// Space (bytes) and inodes released, per quota type and id.
    quota: BTreeMap<(usize, u32), (u64, u64)>,
    released: usize,
}

impl<'f> Release<'f> {
    /// The orphan list from `head`, then the orphan file.
    fn release_all(&mut self, head: u32) -> Result<(), Stop> {
        let (first, count) = (self.fs.geo.first_ino, self.fs.sb().s_inodes_count());
        if head != 0 && (head < first || head > count) {
            return Err(format!(
                "the orphan list starts at inode {head}, which is out of range"
            ));
        }
        let mut seen = BTreeSet::new();
        let mut next = Ino::new(head);
        while let Some(ino) = next {
            if !seen.insert(ino) {
                return Err(format!("the orphan list comes back to inode {ino}"));
            }
            next = Ino::new(self.release(ino)?);
        }
        let present = self
            .fs
            .geo
            .ro_compat
            .contains(RoCompatFeatures::ORPHAN_PRESENT);
        if !self.fs.geo.compat.contains(CompatFeatures::ORPHAN_FILE) {
            return if present {
                Err("orphans are marked present but there is no orphan file".into())
            } else {
                Ok(())
            };
        }
        self.release_orphan_file()?;
        clear_feature(
            &mut self.st,
            sbf::RO_COMPAT,
            RoCompatFeatures::ORPHAN_PRESENT.0,
        );
        Ok(())
    }

    /// Every inode the orphan file lists, block by block; each block is
    /// rewritten empty once its inodes are released.
    fn release_orphan_file(&mut self) -> Result<(), Stop> {
        let fs = self.fs;
        let raw_ino = fs.sb().s_orphan_file_inum();
        let Some(ino) = Ino::new(raw_ino).filter(|i| i.get() <= fs.geo.inodes_count) else {
            return Err(format!("the orphan file's inode {raw_ino} is out of range"));
        };
        let raw = self.st.inode_copy(ino).map_err(|e| e.to_string())?;
        let inode = Inode::new(&raw).ok_or("the orphan file's inode cannot be read")?;
        let bs = fs.block_size() as u64;
        if inode.size() % bs != 0 {
            return Err("the orphan file's size is not a whole number of blocks".into());
        }
        let n = inode.size() / bs;
        let generation = inode.i_generation();
        let mapped = super::map::blocks_of(&mut self.st, ino).map_err(|e| e.to_string())?;
        for l in 0..n {
            let Some(&(_, blk)) = mapped.iter().find(|&&(m, _)| m == l) else {
                return Err(format!("the orphan file has a hole at block {l}"));
            };
            let key = fs.metadata_csum().then_some(CsumKey {
                seed: fs.geo.csum_seed,
                ino: ino.get(),
                generation,
                block: blk.0,
            });
            let mut buf = vec![0u8; bs as usize];
            self.st
                .read(blk, &mut buf)
                .map_err(|e| format!("orphan file block {l}: {e}"))?;
            let ob = OrphanBlock::new(&buf);
            if ob.magic() != ext4_layout::orphan::MAGIC {
                return Err(format!("orphan file block {l} has a bad magic number"));
            }
            if !ob.is_valid(key) {
                return Err(format!("orphan file block {l} has a bad checksum"));
            }
            let listed: Vec<(usize, Ino)> = ob
                .slots()
                .filter_map(|(slot, i)| Some((slot, Ino::new(i)?)))
                .collect();
            if listed.is_empty() {
                continue;
            }
            for &(slot, orphan) in &listed {
                self.release(orphan)?;
                let b = self.st.block(blk, Kind::Plain).map_err(|e| e.to_string())?;
                ext4_layout::orphan::clear_slot(b, slot);
            }
            let b = self.st.block(blk, Kind::Plain).map_err(|e| e.to_string())?;
            ext4_layout::orphan::set_checksum(b, key);
        }
        Ok(())
    }

    /// Releases one orphan. Returns the next inode on the orphan list (0
    /// at its end).
    fn release(&mut self, ino: Ino) -> Result<u32, Stop> {
        let fs = self.fs;
        let raw = self
            .st
            .inode_copy(ino)
            .map_err(|e| format!("inode {ino}: {e}"))?;
        let inode = Inode::new(&raw).ok_or_else(|| format!("inode {ino} cannot be read"))?;
        let next = inode.i_dtime();
        if next != 0 && (next < fs.geo.first_ino || next > fs.sb().s_inodes_count()) {
            return Err(format!(
                "inode {ino} names inode {next} as the next orphan, which is out of range"
            ));
        }
        let deleting = inode.i_links_count() == 0;
        let freed = if !check_core::walk::inode_has_valid_blocks(fs, &inode) {
            Vec::new()
        } else if deleting {
            super::map::all_blocks_of(&mut self.st, ino)
                .map_err(|e| format!("inode {ino}'s blocks: {e}"))?
        } else {
            let keep = inode.size().div_ceil(fs.block_size() as u64);
            super::map::truncate_map(&mut self.st, ino, keep)
                .map_err(|e| format!("inode {ino}'s blocks: {e}"))?
        };
        let clusters = self.check_freeable(ino, &freed)?;
        let space = (clusters.len() as u64 * fs.block_size() as u64) << fs.geo.cluster_bits;
        self.charge(&inode, space, 0);
        account(fs, &mut self.st, &clusters, &[], None);
        if deleting {
            // The extended-attribute block is shared by reference count:
            // this inode's reference goes, and the block with the last one.
            self.drop_xattr_block(ino, &inode)?;
            self.charge(&inode, 0, 1);
            let dir = inode.file_type() == Some(FileType::Directory);
            account(fs, &mut self.st, &[], &[], Some((ino.get(), dir, true)));
            let r = self.st.inode(ino).map_err(|e| e.to_string())?;
            field::i_dtime.set(r, now());
        } else {
            // A file that is still linked keeps its attributes (e2fsck
            // drops a truncated orphan's attribute block, with the ACLs
            // and labels in it; nothing requires that).
            // An inode whose i_block holds no block map (a fast symlink,
            // inline data) keeps its count: reading its bytes as block
            // numbers would count blocks it does not have.
            if check_core::walk::inode_has_valid_blocks(fs, &inode) {
                super::map::recount_i_blocks(&mut self.st, ino).map_err(|e| e.to_string())?;
            }
            let r = self.st.inode(ino).map_err(|e| e.to_string())?;
            field::i_dtime.set(r, 0);
        }
        self.released += 1;
        Ok(next)
    }

    /// The clusters of `blocks`, each once, after checking that each is
    /// inside the file system and marked in use, as e2fsck does before it
    /// frees an orphan's block.
    fn check_freeable(&mut self, ino: Ino, blocks: &[PhysBlock]) -> Result<Vec<u64>, Stop> {
        let geo = &self.fs.geo;
        let mut clusters = Vec::with_capacity(blocks.len());
        let mut seen = BTreeSet::new();
        for &b in blocks {
            if !geo.block_in_range(b.0) {
                return Err(format!(
                    "inode {ino} holds block {b}, outside the file system"
                ));
            }
            let c = b.0 >> geo.cluster_bits;
            if !seen.insert(c) {
                continue;
            }
            if !block_in_use(self.fs, &mut self.st, c) {
                return Err(format!(
                    "inode {ino} holds block {b}, which is already free"
                ));
            }
            clusters.push(c);
        }
        Ok(clusters)
    }

    /// Drops a deleted orphan's reference to its extended-attribute
    /// block, freeing the block with its last reference.
    fn drop_xattr_block(&mut self, ino: Ino, inode: &Inode<'_>) -> Result<(), Stop> {
        let fs = self.fs;
        let is64 = fs.geo.incompat.contains(IncompatFeatures::BIT64);
        let blk = inode.file_acl(is64);
        if blk == 0 {
            return Ok(());
        }
        if fs.geo.block_in_range(blk) {
            let blk = PhysBlock(blk);
            let mut buf = vec![0u8; fs.block_size()];
            self.st
                .read(blk, &mut buf)
                .map_err(|e| format!("attribute block {blk}: {e}"))?;
            let magic = xattr::field::h_magic.get(&buf);
            if (magic != xattr::EA_MAGIC && magic != xattr::EA_MAGIC_V1)
                || xattr::field::h_blocks.get(&buf) != 1
            {
                return Err(format!(
                    "inode {ino}'s attribute block {blk} has a bad header"
                ));
            }
            // A block this release already changed gets its checksum at
            // the commit.
            if fs.metadata_csum()
                && !self.st.has(blk)
                && !xattr::XattrBlock::new(&buf)
                    .is_some_and(|x| x.checksum_ok(fs.geo.csum_seed, blk.0))
            {
                return Err(format!(
                    "inode {ino}'s attribute block {blk} has a bad checksum"
                ));
            }
            let count = xattr::field::h_refcount.get(&buf).wrapping_sub(1);
            let b = self.st.block(blk, Kind::Xattr).map_err(|e| e.to_string())?;
            xattr::field::h_refcount.set(b, count);
            if count == 0 {
                let c = blk.0 >> fs.geo.cluster_bits;
                self.charge(inode, (fs.block_size() as u64) << fs.geo.cluster_bits, 0);
                account(fs, &mut self.st, &[c], &[], None);
            }
        }
        // A block number out of range is only forgotten.
        let r = self.st.inode(ino).map_err(|e| e.to_string())?;
        ext4_layout::inode::FILE_ACL.set(r, 0);
        Ok(())
    }

    /// Counts space and inodes released against the inode's owners.
    fn charge(&mut self, inode: &Inode<'_>, space: u64, inodes: u64) {
        let fs = self.fs;
        if !fs.geo.ro_compat.contains(RoCompatFeatures::QUOTA) || (space == 0 && inodes == 0) {
            return;
        }
        let mut ids = vec![(0, inode.uid()), (1, inode.gid())];
        if fs.geo.inode_size > 128 {
            ids.push((2, inode.i_projid().unwrap_or(0)));
        }
        for key in ids {
            let e = self.quota.entry(key).or_default();
            e.0 += space;
            e.1 += inodes;
        }
    }

    /// Takes what was released out of the quota files' usage.
    fn write_quota(&mut self) -> Result<(), Stop> {
        if self.quota.is_empty() {
            return Ok(());
        }
        let sb = self.fs.sb();
        for (qtype, qino) in [
            (0, sb.s_usr_quota_inum()),
            (1, sb.s_grp_quota_inum()),
            (2, sb.s_prj_quota_inum()),
        ] {
            let Some(qino) = Ino::new(qino) else {
                continue;
            };
            let released: BTreeMap<u32, (u64, u64)> = self
                .quota
                .iter()
                .filter(|(&(t, _), _)| t == qtype)
                .map(|(&(_, id), &d)| (id, d))
                .collect();
            super::quota::release_usage(&mut self.st, qtype, qino, &released)
                .map_err(|e| format!("the quota file (inode {qino}): {e}"))?;
        }
        Ok(())
    }
}
