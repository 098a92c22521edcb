//! Quota files rewritten with the usage the check found, as e2fsck does
//! when it updates quota information: a fresh v2 (revision 1) quota tree
//! holding every id that owns something or had limits, the limits, grace
//! times and flags of the old file kept where it can still be read. The
//! format is ext4-layout's [`ext4_layout::quota`].

use ext4_layout::types::{Ino, PhysBlock};
use std::collections::BTreeMap;
use std::io;

use ext4_layout::inode::Inode;

use super::stage::{Kind, Staging};
use check_core::engine::CheckState;
use check_core::problem::Finding;
use check_core::walk::QuotaUse;

use ext4_layout::quota::{read_tree, write_tree, QuotaTree};

/// Quota files larger than this are not read back (their limits are lost).
const MAX_OLD: u64 = 64 << 20;

/// A quota file as it stands: its mapped (logical, physical) blocks, its
/// size, and the tree it holds (`None` when too large or not a v2 quota
/// file).
type OldFile = (Vec<(u64, PhysBlock)>, u64, Option<QuotaTree>);

/// Reads quota file `ino`.
fn read_old<'f>(stage: &mut Staging<'f>, qtype: usize, ino: Ino) -> io::Result<OldFile> {
    let bs = stage.fs().block_size();
    let raw = stage.inode_copy(ino)?;
    let inode = Inode::new(&raw).ok_or_else(|| io::Error::other("bad quota inode"))?;
    let old_size = inode.size();
    let mapped = super::map::blocks_of(stage, ino)?;
    let old = if old_size <= MAX_OLD {
        let mut data = vec![0u8; old_size as usize];
        let mut buf = vec![0u8; bs];
        for &(l, p) in &mapped {
            let at = l * bs as u64;
            if at >= old_size {
                continue;
            }
            stage.read(p, &mut buf)?;
            let n = (old_size - at).min(bs as u64) as usize;
            data[at as usize..at as usize + n].copy_from_slice(&buf[..n]);
        }
        read_tree(&data, qtype)
    } else {
        None
    };
    Ok((mapped, old_size, old))
}

/// Writes `content` as quota file `ino`: the file keeps its blocks where
/// it can and gets more when it grows; blocks it no longer needs are
/// zeroed and stay in the file.
fn write_content<'f>(
    stage: &mut Staging<'f>,
    ino: Ino,
    mapped: &[(u64, PhysBlock)],
    old_size: u64,
    content: &[u8],
) -> io::Result<()> {
    let bs = stage.fs().block_size();
    let need = content.len().div_ceil(bs) as u64;
    let by_logical: BTreeMap<u64, PhysBlock> = mapped.iter().copied().collect();
    let mut goal = mapped.last().map_or(PhysBlock(0), |&(_, p)| p);
    for l in 0..need {
        let p = match by_logical.get(&l) {
            Some(&p) => p,
            None => {
                let p = stage
                    .alloc_block(goal)
                    .ok_or_else(|| io::Error::other("no free block for the quota file"))?;
                super::map::map_block(stage, ino, l, p)?;
                p
            }
        };
        goal = p;
        let at = l as usize * bs;
        let end = (at + bs).min(content.len());
        stage.fresh_block(p, Kind::Plain)[..end - at].copy_from_slice(&content[at..end]);
    }
    for (&l, &p) in by_logical.range(need..) {
        if l * (bs as u64) < old_size {
            stage.fresh_block(p, Kind::Plain);
        }
    }
    super::map::recount_i_blocks(stage, ino)?;
    let size = (content.len() as u64).max(old_size);
    let r = stage.inode(ino)?;
    super::raw::set_size(r, size);
    Ok(())
}

/// Rewrites quota file `ino` of type `qtype` (0 user, 1 group, 2 project)
/// with the usage the check found.
pub fn rewrite<'f>(
    st: &'f CheckState,
    stage: &mut Staging<'f>,
    qtype: usize,
    ino: Ino,
) -> io::Result<()> {
    let (mapped, old_size, old) = read_old(stage, qtype, ino)?;
    let usage: BTreeMap<u32, QuotaUse> = st
        .quota
        .iter()
        .filter(|(&(t, _), _)| usize::from(t) == qtype)
        .map(|(&(_, id), &u)| (id, u))
        .collect();
    let content = write_tree(qtype, old.as_ref(), &usage);
    write_content(stage, ino, &mapped, old_size, &content)
}

/// Takes space (bytes) and inodes released from the usage quota file
/// `ino` records, per id, as e2fsck does for the orphans it releases.
/// A file that cannot be read as a quota file is an error: its usage
/// cannot be brought up to date.
pub fn release_usage<'f>(
    stage: &mut Staging<'f>,
    qtype: usize,
    ino: Ino,
    released: &BTreeMap<u32, (u64, u64)>,
) -> io::Result<()> {
    let (mapped, old_size, old) = read_old(stage, qtype, ino)?;
    let old = old
        .filter(|t| !t.corrupt)
        .ok_or_else(|| io::Error::other("not a readable quota file"))?;
    let mut usage: BTreeMap<u32, QuotaUse> =
        old.entries.iter().map(|(&id, &(u, _))| (id, u)).collect();
    for (&id, &(space, inodes)) in released {
        let u = usage.entry(id).or_default();
        u.space = u.space.saturating_sub(space);
        u.inodes = u.inodes.saturating_sub(inodes);
    }
    let content = write_tree(qtype, Some(&old), &usage);
    write_content(stage, ino, &mapped, old_size, &content)
}

/// Fixes a quota-mismatch finding: the file named by its inode, of the
/// type its text names, is rewritten.
pub fn fix<'f>(st: &'f CheckState, stage: &mut Staging<'f>, f: &Finding) -> bool {
    let qtype = match f.detail.as_deref() {
        Some("user") => 0,
        Some("group") => 1,
        Some("project") => 2,
        _ => return false,
    };
    f.inode()
        .is_some_and(|ino| rewrite(st, stage, qtype, ino).is_ok())
}
