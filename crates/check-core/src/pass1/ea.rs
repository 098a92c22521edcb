//! Extended attributes in pass 1: the in-inode area and EA blocks.

use ext4_layout::bytes::{le_u16, le_u32, le_u8};
use ext4_layout::features::{CompatFeatures, IncompatFeatures};
use ext4_layout::inode::{flags, Inode, GOOD_OLD_INODE_SIZE};
use ext4_layout::xattr::{
    ea_round, entry_hash, entry_hash_ea_inode, XattrBlock, EA_ENTRY_HEADER, EA_MAGIC, EA_MAGIC_V1,
};

use super::types::{Cur, EaRef, Worker};
use crate::problem::{Code, Finding};

/// A set of disjoint byte ranges inside `[0, max)`, for catching overlapping
/// attribute entries and values.
pub struct Region {
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
pub struct EaBlockResult {
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
        while remain >= EA_ENTRY_HEADER && le_u32(area, pos) != 0 {
            let name_len = usize::from(le_u8(area, pos));
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
                        .num(name_len as u64),
                );
                break;
            }
            remain -= ea_round(name_len);
            let offs = usize::from(le_u16(area, pos + 2));
            let inum = le_u32(area, pos + 4);
            let vsize = le_u32(area, pos + 8) as usize;
            let hash = le_u32(area, pos + 12);
            let name = area
                .get(pos + EA_ENTRY_HEADER..pos + EA_ENTRY_HEADER + name_len)
                .unwrap_or(&[]);
            if inum == 0 {
                if vsize > remain {
                    problem = Some(Finding::new(Code::AttrValueSize).ino(ino).num(vsize as u64));
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
                    problem = Some(Finding::new(Code::AttrHash).ino(ino).num(u64::from(hash)));
                    break;
                }
                remain -= vsize;
            } else {
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
        let mut pos = 4usize;
        while pos + EA_ENTRY_HEADER <= area.len() && le_u32(area, pos) != 0 {
            let inum = le_u32(area, pos + 4);
            if inum != 0 {
                self.out.ea_inode_refs.push(inum);
            }
            pos += ea_round(EA_ENTRY_HEADER + usize::from(le_u8(area, pos)));
        }
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
            return Err(Finding::new(Code::AttrValueEaInode)
                .ino(ino)
                .num(u64::from(inum)));
        }
        let mut ib = vec![0u8; fs.geo.inode_size as usize];
        if self.io.read_inode(inum, &mut ib).is_err() {
            self.abort(ino, format!("cannot read EA inode {inum}"));
            return Ok(0);
        }
        let Some(ea) = Inode::new(&ib) else {
            return Ok(0);
        };
        let atime = ea.i_atime();
        let mut quota = 0;
        if hash == entry_hash_ea_inode(name, atime, false)
            || hash == entry_hash_ea_inode(name, atime, true)
        {
            let cs = u64::from(fs.geo.block_size) << fs.geo.cluster_bits;
            quota = vsize.div_ceil(cs) << fs.geo.cluster_bits;
        } else if !(ea.i_mtime() == ino && ea.i_generation() == parent_gen) {
            return Err(if ea.has_flag(flags::EA_INODE) {
                Finding::new(Code::AttrHash).ino(ino).num(u64::from(hash))
            } else {
                Finding::new(Code::AttrValueEaInode)
                    .ino(ino)
                    .num(u64::from(inum))
            });
        }
        if !ea.has_flag(flags::EA_INODE) {
            self.report(
                Finding::new(Code::AttrSetEaInodeFlag)
                    .ino(ino)
                    .num(u64::from(inum)),
            );
            return Err(Finding::new(Code::AttrNoEaInodeFlag)
                .ino(ino)
                .num(u64::from(inum)));
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
        region.allocate(0, 32);
        let mut pos = 32usize;
        while pos + 4 <= bs && le_u32(buf, pos) != 0 {
            let name_len = usize::from(le_u8(buf, pos));
            let esize = ea_round(EA_ENTRY_HEADER + name_len);
            if !region.allocate(pos as u64, esize as u64) {
                self.report(
                    Finding::new(Code::EaBlockEntry)
                        .ino(ino)
                        .blk(blk)
                        .str("entries overlap"),
                );
                break;
            }
            let index = le_u8(buf, pos + 1);
            if (index == 0) != v1 || (v1 && name_len == 0) {
                self.report(
                    Finding::new(Code::EaBlockEntry)
                        .ino(ino)
                        .blk(blk)
                        .str("bad name"),
                );
                break;
            }
            let offs = usize::from(le_u16(buf, pos + 2));
            let inum = le_u32(buf, pos + 4);
            let vsize = le_u32(buf, pos + 8) as usize;
            let hash = le_u32(buf, pos + 12);
            let name = buf
                .get(pos + EA_ENTRY_HEADER..pos + EA_ENTRY_HEADER + name_len)
                .unwrap_or(&[])
                .to_vec();
            if inum == 0 {
                if vsize > 1 << 24 || offs + vsize > bs {
                    self.report(
                        Finding::new(Code::EaBlockEntry)
                            .ino(ino)
                            .blk(blk)
                            .str("bad value"),
                    );
                    break;
                }
                if vsize != 0 && !region.allocate(offs as u64, ea_round(vsize) as u64) {
                    self.report(
                        Finding::new(Code::EaBlockEntry)
                            .ino(ino)
                            .blk(blk)
                            .str("values overlap"),
                    );
                }
                let value = if vsize > 0 {
                    buf.get(offs..(offs + ea_round(vsize)).min(bs))
                } else {
                    None
                };
                if hash != entry_hash(&name, value, false) && hash != entry_hash(&name, value, true)
                {
                    self.report(
                        Finding::new(Code::AttrHash)
                            .ino(ino)
                            .blk(blk)
                            .num(u64::from(hash)),
                    );
                }
            } else {
                match self.check_large_ea_inode(gen, ino, &name, inum, vsize as u64, hash) {
                    Ok(q) => *quota += q,
                    Err(f) => self.report(f.blk(blk)),
                }
            }
            pos += esize;
        }
        if !region.allocate(pos as u64, 4) {
            self.report(
                Finding::new(Code::EaBlockEntry)
                    .ino(ino)
                    .blk(blk)
                    .str("entries overlap"),
            );
        }
        if failed_csum {
            self.report(Finding::new(Code::EaBlockCsum).ino(ino).blk(blk));
        }
        let mut pos = 32usize;
        while !self.silent && pos + EA_ENTRY_HEADER <= bs && le_u32(buf, pos) != 0 {
            let inum = le_u32(buf, pos + 4);
            if inum != 0 {
                self.out.ea_inode_refs.push(inum);
            }
            pos += ea_round(EA_ENTRY_HEADER + usize::from(le_u8(buf, pos)));
        }
    }
}
