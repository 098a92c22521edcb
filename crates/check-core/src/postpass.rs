//! Checks e2fsck makes after pass 5: the orphan file and quota usage.

use std::collections::BTreeMap;

use ext4_layout::features::{CompatFeatures, RoCompatFeatures};
use ext4_layout::inode::Inode;
use ext4_layout::orphan::{CsumKey, OrphanBlock};

use crate::blockiter::for_each_block;
use crate::fs::Fs;
use crate::io::Io;
use crate::pass1::QuotaUse;
use crate::problem::{Code, Finding};

/// `ob_magic` at the end of each orphan file block.
/// Largest file read into memory here (quota files are small).
const MAX_FILE: u64 = 64 << 20;

/// Reads a whole regular file (holes read as zero), if it is small enough.
fn read_file(io: &mut Io<'_>, inode: &Inode<'_>) -> Option<Vec<u8>> {
    let size = inode.size();
    if size > MAX_FILE {
        return None;
    }
    let bs = u64::from(io.fs.geo.block_size);
    let mut data = vec![0u8; size as usize];
    let mut blocks = Vec::new();
    let ok = for_each_block(io, inode, &mut |b, l| {
        if l >= 0 {
            blocks.push((b, l as u64));
        }
    });
    if !ok {
        return None;
    }
    let mut buf = vec![0u8; bs as usize];
    for (b, l) in blocks {
        let off = l * bs;
        if off >= size || !io.fs.geo.block_in_range(b) {
            continue;
        }
        io.read_blocks(b, &mut buf).ok()?;
        let n = (size - off).min(bs) as usize;
        data[off as usize..off as usize + n].copy_from_slice(&buf[..n]);
    }
    Some(data)
}

/// The orphan file checks.
pub(crate) fn check_orphan_file(fs: &Fs, io: &mut Io<'_>) -> Vec<Finding> {
    let geo = &fs.geo;
    let sb = fs.sb();
    let mut out = Vec::new();
    let present = geo.ro_compat.contains(RoCompatFeatures::ORPHAN_PRESENT);
    if !geo.compat.contains(CompatFeatures::ORPHAN_FILE) {
        if present {
            out.push(Finding::new(Code::OrphanPresentNoFile));
        }
        return out;
    }
    if !geo.compat.contains(CompatFeatures::HAS_JOURNAL) {
        out.push(Finding::new(Code::OrphanFileWithoutJournal));
    }
    let ino = sb.s_orphan_file_inum();
    let mut ib = vec![0u8; geo.inode_size as usize];
    if ino == 0 || io.read_inode(ino, &mut ib).is_err() {
        out.push(
            Finding::new(Code::OrphanFileCorrupted)
                .ino(ino)
                .detail("its inode cannot be read"),
        );
        return out;
    }
    let Some(inode) = Inode::new(&ib) else {
        return out;
    };
    let bs = u64::from(geo.block_size);
    let mut result = 0;
    let mut why = String::new();
    if inode.size() % bs != 0 {
        result = 1;
        why = "its size is not a whole number of blocks".into();
    } else {
        let nblocks = inode.size() / bs;
        // e2fsck walks the blocks asking to see holes, which only a block
        // map shows: in an extent-mapped file every mapped block is
        // checked and holes go unnoticed.
        let extents = inode.has_flag(ext4_layout::inode::flags::EXTENTS);
        let mut map = Vec::new();
        for_each_block(io, &inode, &mut |b, l| {
            if l >= 0 {
                map.push((l as u64, b));
            }
        });
        map.sort_unstable();
        let mut buf = vec![0u8; bs as usize];
        let mut expect_l = 0u64;
        for &(l, b) in &map {
            if l >= nblocks && !extents {
                break;
            }
            if l != expect_l && !extents {
                result = 1;
                why = "it has holes".into();
                break;
            }
            expect_l += 1;
            if io.read_blocks(b, &mut buf).is_err() {
                result = 1;
                why = "a block cannot be read".into();
                break;
            }
            let key = fs.metadata_csum().then_some(CsumKey {
                seed: geo.csum_seed,
                ino,
                generation: inode.i_generation(),
                block: b,
            });
            let block = OrphanBlock::new(&buf);
            let clean = block.is_empty() && block.is_valid(key);
            if !clean {
                out.push(Finding::new(Code::OrphanBlockDirty).ino(ino).blk(b));
                result = 1;
                why = "a block is not clean".into();
                break;
            }
        }
        if result == 0 && expect_l < nblocks && !extents {
            result = 1;
            why = "it has holes".into();
        }
    }
    if result == 0 && present {
        out.push(Finding::new(Code::OrphanPresentCleanFile));
    } else if result == 1 {
        out.push(Finding::new(Code::OrphanFileCorrupted).ino(ino).detail(why));
    }
    out
}

/// Compares the usage pass 1 computed with each quota file.
pub(crate) fn check_quota(
    fs: &Fs,
    io: &mut Io<'_>,
    usage: &std::collections::HashMap<(u8, u32), QuotaUse>,
) -> Vec<Finding> {
    let geo = &fs.geo;
    let sb = fs.sb();
    let mut out = Vec::new();
    if !geo.ro_compat.contains(RoCompatFeatures::QUOTA) {
        return out;
    }
    let mut computed: [BTreeMap<u32, QuotaUse>; 3] = Default::default();
    for (&(t, id), &u) in usage {
        let e = computed[usize::from(t)].entry(id).or_default();
        e.space += u.space;
        e.inodes += u.inodes;
    }
    let names = ["user", "group", "project"];
    for (t, inum) in [
        sb.s_usr_quota_inum(),
        sb.s_grp_quota_inum(),
        sb.s_prj_quota_inum(),
    ]
    .into_iter()
    .enumerate()
    {
        if inum == 0 {
            continue;
        }
        let mut ib = vec![0u8; geo.inode_size as usize];
        let disk = if inum > geo.inodes_count || io.read_inode(inum, &mut ib).is_err() {
            None
        } else {
            Inode::new(&ib)
                .and_then(|i| read_file(io, &i))
                .and_then(|d| ext4_layout::quota::read_tree(&d, t))
                .filter(|q| !q.corrupt)
                .map(|q| {
                    q.entries
                        .into_iter()
                        .map(|(id, (u, _))| (id, u))
                        .collect::<BTreeMap<u32, QuotaUse>>()
                })
        };
        let consistent = match disk {
            None => false,
            Some(disk) => {
                let mut ok = true;
                for (id, d) in &disk {
                    let m = computed[t].get(id).copied().unwrap_or_default();
                    if m != *d {
                        ok = false;
                    }
                }
                for id in computed[t].keys() {
                    if !disk.contains_key(id) {
                        ok = false;
                    }
                }
                ok
            }
        };
        if !consistent {
            out.push(Finding::new(Code::QuotaMismatch).detail(names[t]).ino(inum));
        }
    }
    out
}
