//! The inodes a file system lists as orphans: deleted while still open,
//! or cut short by a truncate the kernel had not finished. On a mounted
//! file system they are in use, and the kernel releases them itself.

use ext4_layout::features::CompatFeatures;
use ext4_layout::inode::Inode;

use crate::fs::Fs;
use crate::io::Io;

/// The inodes on the classic orphan list (`s_last_orphan`, chained
/// through each inode's `i_dtime`) and in the orphan file, in that order,
/// each once. Bounded by the inode count; unreadable links end the walk.
pub fn listed(fs: &Fs) -> Vec<u32> {
    let mut io = Io::new(fs);
    let sb = fs.sb();
    let count = sb.s_inodes_count();
    let mut out = Vec::new();
    let mut raw = vec![0u8; fs.geo.inode_size as usize];
    let mut next = sb.s_last_orphan();
    while next != 0 && next <= count && out.len() < count as usize && !out.contains(&next) {
        out.push(next);
        if io.read_inode(next, &mut raw).is_err() {
            break;
        }
        next = Inode::new(&raw).map_or(0, |i| i.i_dtime());
    }
    let file = sb.s_orphan_file_inum();
    if file == 0
        || file > count
        || !fs.geo.compat.contains(CompatFeatures::ORPHAN_FILE)
        || io.read_inode(file, &mut raw).is_err()
    {
        return out;
    }
    let Some(inode) = Inode::new(&raw) else {
        return out;
    };
    let mut blocks = Vec::new();
    crate::blockiter::for_each_block(&mut io, &inode, &mut |b, l| {
        if l >= 0 {
            blocks.push(b);
        }
    });
    let bs = fs.block_size();
    let mut buf = vec![0u8; bs];
    for b in blocks.into_iter().take(1 << 16) {
        if !fs.geo.block_in_range(b) || io.read_blocks(b, &mut buf).is_err() {
            continue;
        }
        for e in buf[..bs.saturating_sub(ext4_layout::orphan::TAIL)].chunks_exact(4) {
            let ino = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            if ino != 0 && ino <= count && !out.contains(&ino) {
                out.push(ino);
            }
        }
    }
    out
}
