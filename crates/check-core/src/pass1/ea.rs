//! Extended attributes in pass 1: the in-inode area and EA blocks.

use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use ext4_layout::inode::{flags, Inode, GOOD_OLD_INODE_SIZE};
use ext4_layout::xattr::{
    ea_round, entries_end_at, entry_at, entry_hash, entry_hash_ea_inode, XattrBlock, XattrEntry,
    EA_BLOCK_HEADER, EA_ENTRY_HEADER, EA_MAGIC, EA_MAGIC_V1,
};

use super::types::{Cur, EaRef, Worker};

/// An EA block being judged, and the inode it is judged for.
#[derive(Clone, Copy)]
struct EaSpot {
    ino: u32,
    blk: u64,
    gen: u32,
}
use crate::problem::{Code, Finding};

/// A set of disjoint byte ranges inside `[0, max)`, for catching overlapping
/// attribute entries and values.
pub(crate) struct Region {
    max: u64,
    used: Vec<(u64, u64)>,
}

impl Region {
    /// An empty region of `max` bytes.
    pub fn new(max: u64) -> Self {
        Region {
            max,
            used: Vec::new(),
        }
    }

    /// Claims `[start, start + n)`; false if it is empty, out of range, or
    /// overlaps an earlier claim.
    pub fn allocate(&mut self, start: u64, n: u64) -> bool {
        let Some(end) = start.checked_add(n) else {
            return false;
        };
        if end > self.max || n == 0 {
            return false;
        }
        if self.used.iter().any(|&(s, e)| start < e && s < end) {
            return false;
        }
        self.used.push((start, end));
        true
    }
}

/// What checking the EA block of an inode gave.
pub(crate) struct EaBlockResult {
    /// Whether the block counts towards the inode's blocks.
    pub counted: bool,
    /// Extra blocks charged for values in EA inodes.
    pub quota_blocks: u64,
}

impl Worker<'_, '_, '_> {
    /// Checks the in-inode attribute area (which starts with the magic).
    pub(super) fn check_ea_in_inode(&mut self, cur: &mut Cur<'_>, extra: usize) {
        let fs = self.p.fs;
        let isz = fs.geo.inode_size as usize;
        let bytes = cur.inode.bytes();
        let start = GOOD_OLD_INODE_SIZE + extra;
        let storage = isz - start;
        let area = &bytes[start..isz];
        let mut region = Region::new(storage as u64);
        region.allocate(0, 4);
        let mut remain = storage.saturating_sub(4);
        let mut pos = 4usize;
        let mut problem: Option<Finding> = None;
        let mut quota = 0u64;
        let ino = cur.ino;
        while remain >= EA_ENTRY_HEADER && !entries_end_at(area, pos) {
            let entry = entry_at(area, pos);
            let name_len = usize::from(entry.e_name_len);
            let esize = ea_round(EA_ENTRY_HEADER + name_len);
            if !region.allocate(pos as u64, esize as u64) {
                problem = Some(Finding::new(Code::InodeEaAllocCollision).ino(ino));
                break;
            }
            remain -= EA_ENTRY_HEADER;
            if ea_round(name_len) > remain {
                problem = Some(
                    Finding::new(Code::AttrNameLen)
                        .ino(ino)
                        .found(name_len as u64),
                );
                break;
            }
            remain -= ea_round(name_len);
            let offs = usize::from(entry.e_value_offs);
            let inum = entry.e_value_inum;
            let vsize = entry.e_value_size as usize;
            let hash = entry.e_hash;
            let name = entry.name;
            if inum == 0 {
                if vsize > remain {
                    problem = Some(
                        Finding::new(Code::AttrValueSize)
                            .ino(ino)
                            .found(vsize as u64),
                    );
                    break;
                }
                // Values count from the first entry, which follows the magic.
                if vsize != 0 && !region.allocate((4 + offs) as u64, ea_round(vsize) as u64) {
                    problem = Some(Finding::new(Code::InodeEaAllocCollision).ino(ino));
                    break;
                }
                let vstart = 4 + offs;
                let value = area.get(vstart..(vstart + ea_round(vsize)).min(area.len()));
                let value = if vsize > 0 { value } else { None };
                if hash != 0
                    && hash != entry_hash(name, value, false)
                    && hash != entry_hash(name, value, true)
                {
                    problem = Some(Finding::new(Code::AttrHash).ino(ino).found(u64::from(hash)));
                    break;
                }
                remain -= vsize;
            } else {
                self.ea_inode_feature(ino);
                match self.check_large_ea_inode(
                    cur.inode.i_generation(),
                    ino,
                    name,
                    inum,
                    vsize as u64,
                    hash,
                ) {
                    Ok(q) => quota += q,
                    Err(f) => {
                        problem = Some(f);
                        break;
                    }
                }
            }
            pos += esize;
        }
        if problem.is_none() && !region.allocate(pos as u64, 4) {
            problem = Some(Finding::new(Code::InodeEaAllocCollision).ino(ino));
        }
        match problem {
            Some(f) => self.report(f),
            None => {
                cur.ea_ibody_quota_blocks = quota;
            }
        }
        // References to EA inodes are counted whether or not the area had
        // a problem (the problem was declined).
        self.note_ea_inode_refs(area, 4);
    }

    /// Checks an attribute value stored in an EA inode. Returns the blocks
    /// it charges, or the problem.
    #[allow(clippy::result_large_err)]
    fn check_large_ea_inode(
        &mut self,
        parent_gen: u32,
        ino: u32,
        name: &[u8],
        inum: u32,
        vsize: u64,
        hash: u32,
    ) -> Result<u64, Finding> {
        let fs = self.p.fs;
        if inum < fs.geo.first_ino || inum > fs.sb().s_inodes_count() {
            return Err(Finding::new(Code::AttrValueEaInode).ino(ino).ino2(inum));
        }
        let mut ib = vec![0u8; fs.geo.inode_size as usize];
        if self.io.read_inode(inum, &mut ib).is_err() {
            self.abort(ino, format!("cannot read EA inode {inum}"));
            return Ok(0);
        }
        let Some(ea) = Inode::new(&ib) else {
            return Ok(0);
        };
        // The value fills the EA inode exactly, and is never empty.
        if vsize == 0 || vsize != ea.size() {
            return Err(Finding::new(Code::AttrValueSize).ino(ino).found(vsize));
        }
        let atime = ea.i_atime();
        let mut quota = 0;
        if hash == entry_hash_ea_inode(name, atime, false)
            || hash == entry_hash_ea_inode(name, atime, true)
        {
            let cs = u64::from(fs.geo.block_size) << fs.geo.cluster_bits;
            quota = vsize.div_ceil(cs) << fs.geo.cluster_bits;
        } else if !(ea.i_mtime() == ino && ea.i_generation() == parent_gen) {
            return Err(if ea.has_flag(flags::EA_INODE) {
                Finding::new(Code::AttrHash).ino(ino).found(u64::from(hash))
            } else {
                Finding::new(Code::AttrValueEaInode).ino(ino).ino2(inum)
            });
        }
        if !ea.has_flag(flags::EA_INODE) {
            self.report(Finding::new(Code::AttrSetEaInodeFlag).ino(ino).ino2(inum));
            return Err(Finding::new(Code::AttrNoEaInodeFlag).ino(ino).ino2(inum));
        }
        Ok(quota)
    }

    /// Claims the EA block of an inode and works out what it charges.
    /// The block is judged once, after the scan, for the lowest inode
    /// that uses it ([`Worker::validate_ea`]); every user is charged what
    /// that judgement finds, so the result does not depend on which worker
    /// reached the block first.
    pub(super) fn check_ext_attr(&mut self, cur: &Cur<'_>) -> EaBlockResult {
        let fs = self.p.fs;
        let geo = &fs.geo;
        let inode = cur.inode;
        let ino = cur.ino;
        let none = EaBlockResult {
            counted: false,
            quota_blocks: 0,
        };
        let blk = inode.file_acl(geo.incompat.contains(IncompatFeatures::BIT64));
        if blk == 0 {
            return none;
        }
        if !geo.compat.contains(CompatFeatures::EXT_ATTR) || !geo.block_in_range(blk) {
            crate::ctx::Maps::mark(&self.p.maps.inode_bad, ino);
            return none;
        }
        let gen = inode.i_generation();
        self.out.ea_refs.push(EaRef { blk, ino, gen });
        if !self.p.maps.ea_claimed.test_and_set(blk) {
            self.mark_block_used(blk);
        }
        let mut buf = std::mem::take(&mut self.blockbuf);
        let read_ok = self.io.read_blocks(blk, &mut buf).is_ok();
        let mut quota = 0u64;
        let was = std::mem::replace(&mut self.silent, true);
        self.validate_ea_block(ino, blk, &buf, read_ok, gen, &mut quota);
        self.silent = was;
        self.blockbuf = buf;
        EaBlockResult {
            counted: true,
            quota_blocks: quota,
        }
    }

    /// Judges an EA block for the inode `ino` (generation `gen`), the
    /// lowest inode that uses it.
    pub(super) fn validate_ea(&mut self, ino: u32, gen: u32, blk: u64) {
        let mut buf = std::mem::take(&mut self.blockbuf);
        let read_ok = self.io.read_blocks(blk, &mut buf).is_ok();
        let mut quota = 0;
        self.validate_ea_block(ino, blk, &buf, read_ok, gen, &mut quota);
        self.blockbuf = buf;
    }

    fn validate_ea_block(
        &mut self,
        ino: u32,
        blk: u64,
        buf: &[u8],
        read_ok: bool,
        gen: u32,
        quota: &mut u64,
    ) {
        let fs = self.p.fs;
        let bs = buf.len();
        if !read_ok {
            self.report(Finding::new(Code::EaBlockBad).ino(ino).blk(blk));
            return;
        }
        let Some(x) = XattrBlock::new(buf) else {
            return;
        };
        let header_ok =
            (x.h_magic() == EA_MAGIC || x.h_magic() == EA_MAGIC_V1) && x.h_blocks() == 1;
        let failed_csum = header_ok && fs.metadata_csum() && !x.checksum_ok(fs.geo.csum_seed, blk);
        // `-E ea_ver=1` accepts only the first version's blocks, whose
        // entries have no name index.
        let v1 = self.p.choices.ea_ver == 1;
        let wanted = if v1 { EA_MAGIC_V1 } else { EA_MAGIC };
        if x.h_magic() != wanted {
            self.report(Finding::new(Code::EaBlockHeader).ino(ino).blk(blk));
        }
        if x.h_blocks() != 1 {
            self.report(Finding::new(Code::EaBlockMultiple).ino(ino).blk(blk));
        }
        let mut region = Region::new(bs as u64);
        region.allocate(0, EA_BLOCK_HEADER as u64);
        let mut pos = EA_BLOCK_HEADER;
        while pos + 4 <= bs && !entries_end_at(buf, pos) {
            let entry = entry_at(buf, pos);
            let name_len = usize::from(entry.e_name_len);
            let esize = ea_round(EA_ENTRY_HEADER + name_len);
            if !region.allocate(pos as u64, esize as u64) {
                self.report(
                    Finding::new(Code::EaBlockEntry)
                        .ino(ino)
                        .blk(blk)
                        .detail("entries overlap"),
                );
                break;
            }
            let index = entry.e_name_index;
            if (index == 0) != v1 || (v1 && name_len == 0) {
                self.report(
                    Finding::new(Code::EaBlockEntry)
                        .ino(ino)
                        .blk(blk)
                        .detail("bad name"),
                );
                break;
            }
            let at = EaSpot { ino, blk, gen };
            if !self.check_block_value(&at, buf, &entry, &mut region, quota) {
                break;
            }
            pos += esize;
        }
        if !region.allocate(pos as u64, 4) {
            self.report(
                Finding::new(Code::EaBlockEntry)
                    .ino(ino)
                    .blk(blk)
                    .detail("entries overlap"),
            );
        }
        if failed_csum {
            self.report(Finding::new(Code::EaBlockCsum).ino(ino).blk(blk));
        }
        if !self.silent {
            self.note_ea_inode_refs(buf, EA_BLOCK_HEADER);
        }
    }

    /// The value of one entry of an EA block: its place and hash, or the
    /// EA inode holding it. Returns false when the block's walk stops.
    fn check_block_value(
        &mut self,
        at: &EaSpot,
        buf: &[u8],
        entry: &XattrEntry<'_>,
        region: &mut Region,
        quota: &mut u64,
    ) -> bool {
        let EaSpot { ino, blk, gen } = *at;
        let bs = buf.len();
        let offs = usize::from(entry.e_value_offs);
        let vsize = entry.e_value_size as usize;
        let hash = entry.e_hash;
        let name = entry.name;
        if entry.e_value_inum != 0 {
            if !self.silent {
                self.ea_inode_feature(ino);
            }
            match self.check_large_ea_inode(gen, ino, name, entry.e_value_inum, vsize as u64, hash)
            {
                Ok(q) => *quota += q,
                Err(f) => self.report(f.blk(blk)),
            }
            return true;
        }
        let entry_problem = |what: &str| {
            Finding::new(Code::EaBlockEntry)
                .ino(ino)
                .blk(blk)
                .detail(what)
        };
        if vsize > 1 << 24 || offs + vsize > bs {
            self.report(entry_problem("bad value"));
            return false;
        }
        if vsize != 0 && !region.allocate(offs as u64, ea_round(vsize) as u64) {
            self.report(entry_problem("values overlap"));
        }
        let value = if vsize > 0 {
            buf.get(offs..(offs + ea_round(vsize)).min(bs))
        } else {
            None
        };
        if hash != entry_hash(name, value, false) && hash != entry_hash(name, value, true) {
            self.report(
                Finding::new(Code::AttrHash)
                    .ino(ino)
                    .blk(blk)
                    .found(u64::from(hash)),
            );
        }
        true
    }

    /// An attribute of inode `ino` keeps its value in an EA inode: the
    /// file system must have the feature (asked for each such entry, as
    /// e2fsck asks).
    fn ea_inode_feature(&mut self, ino: u32) {
        if !self.p.fs.geo.incompat.contains(IncompatFeatures::EA_INODE) {
            self.report(Finding::new(Code::EaInodeFeature).ino(ino));
        }
    }

    /// Notes the EA inodes that the entries of an area (from byte `from`)
    /// refer to.
    fn note_ea_inode_refs(&mut self, area: &[u8], from: usize) {
        let mut pos = from;
        while pos + EA_ENTRY_HEADER <= area.len() && !entries_end_at(area, pos) {
            let entry = entry_at(area, pos);
            if entry.e_value_inum != 0 {
                self.out.ea_inode_refs.push(entry.e_value_inum);
            }
            pos += entry.size();
        }
    }
}
