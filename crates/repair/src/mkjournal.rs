//! A new, empty journal in inode 8, for a file system whose journal had
//! to be removed because it was unusable: what e2fsck does when it
//! answers "Recreate journal".

use crate::error::Error;
use ext4_layout::bytes::put_be_u32;
use ext4_layout::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use ext4_layout::inode::flags;
use ext4_layout::inode::{field, I_BLOCK};
use ext4_layout::journal::superblock as jsbl;
use ext4_layout::journal::{blocktype, JBD2_MAGIC};
use ext4_layout::superblock as sbl;
use ext4_layout::types::{Ino, PhysBlock};

use super::raw::{now, sbf, set_feature, set_size};
use super::stage::{Kind, Staging};
use check_core::engine::CheckState;

/// The largest journal whose blocks are zeroed (128 MiB of 4 KiB blocks).
const ZERO_MAX: u64 = 32768;

/// How many blocks a new journal gets for a file system of `blocks`
/// blocks (e2fsck's defaults: 4 MiB of 4 KiB blocks up to 128 MiB, and so
/// on); `None` below 2,048 blocks, where there is no room for one.
pub fn default_blocks(blocks: u64) -> Option<u64> {
    Some(match blocks {
        0..2048 => return None,
        2048..32768 => 1024,
        32768..262_144 => 4096,
        262_144..524_288 => 8192,
        524_288..4_194_304 => 16384,
        4_194_304..8_388_608 => 32768,
        8_388_608..16_777_216 => 65536,
        16_777_216..33_554_432 => 131_072,
        _ => 262_144,
    })
}

/// Writes the journal: blocks taken near the middle of the file system
/// (one run when possible), zeroed, a journal superblock in the first,
/// inode 8 mapping them, the superblock naming it with a backup of its
/// map. The blocks and the inode are marked in use in the check's maps.
pub fn create<'f>(st: &'f CheckState, stage: &mut Staging<'f>) -> Result<u64, Error> {
    let fs = &st.fs;
    let geo = &fs.geo;
    let n = default_blocks(geo.blocks_count).ok_or(Error::TooSmallForJournal)?;
    let bs = fs.block_size();
    let extents = geo.incompat.contains(IncompatFeatures::EXTENTS);
    if !extents && geo.ro_compat.contains(RoCompatFeatures::BIGALLOC) {
        return Err(Error::BigallocWithoutExtents);
    }
    let goal = geo.blocks_count / 2;
    let runs = stage
        .alloc_extents(PhysBlock(goal), n)
        .ok_or(Error::NoRoomForJournal)?;
    // The inode.
    let isz = geo.inode_size as usize;
    let size = n * bs as u64;
    {
        let r = stage.inode(Ino::JOURNAL).map_err(Error::JournalInode)?;
        r.fill(0);
        field::i_mode.set(r, 0o100_600);
        field::i_links_count.set(r, 1);
        set_size(r, size);
        let t = now();
        for time in ext4_layout::inode::TIMES {
            time.set(r, t);
        }
        if isz > 128 {
            field::i_extra_isize_raw.set(r, 32.min((isz - 128) as u16));
        }
        if extents {
            field::i_flags.set(r, flags::EXTENTS);
        }
    }
    let mapped = if extents {
        super::tree::write_extent_tree(stage, Ino::JOURNAL, &runs)
    } else {
        runs.iter().try_for_each(|r| {
            (0..r.len).try_for_each(|k| {
                super::map::map_block(stage, Ino::JOURNAL, r.lblk + k, PhysBlock(r.pblk + k))
            })
        })
    };
    mapped.map_err(Error::JournalMap)?;
    super::map::recount_i_blocks(stage, Ino::JOURNAL)?;
    // Its blocks: zeroed, so that nothing left in them can pass for a
    // transaction, the first a journal superblock. A journal larger than
    // ZERO_MAX blocks is not zeroed (a repair holds its writes in memory);
    // its transactions start from a sequence number taken from the clock
    // instead, which stale blocks do not carry.
    let zero = n <= ZERO_MAX;
    let uuid = fs.sb[sbl::S_UUID].to_vec();
    for r in &runs {
        for k in 0..r.len {
            if !zero && r.lblk + k != 0 {
                continue;
            }
            let b = stage.fresh_block(PhysBlock(r.pblk + k), Kind::Plain);
            if r.lblk + k == 0 {
                put_be_u32(b, 0, JBD2_MAGIC);
                put_be_u32(b, 4, blocktype::SUPERBLOCK_V2);
                jsbl::field::s_blocksize.set(b, bs as u32);
                jsbl::field::s_maxlen.set(b, n as u32);
                jsbl::field::s_first.set(b, 1);
                jsbl::field::s_sequence.set(b, if zero { 1 } else { now() });
                b[jsbl::S_UUID].copy_from_slice(&uuid);
                jsbl::field::s_nr_users.set(b, 1);
            }
        }
    }
    // The superblock: the feature, the inode, a backup of its map.
    let iblock = stage.inode_copy(Ino::JOURNAL)?[I_BLOCK].to_vec();
    {
        set_feature(stage, sbf::COMPAT, CompatFeatures::HAS_JOURNAL.0);
        let sb = stage.sb_mut();
        sbl::field::s_journal_inum.set(sb, Ino::JOURNAL.get());
        sb[sbl::S_JNL_IBLOCK].copy_from_slice(&iblock);
        sbl::S_JNL_SIZE_HIGH.set(sb, (size >> 32) as u32);
        sbl::S_JNL_SIZE.set(sb, size as u32);
        sbl::field::s_jnl_backup_type.set(sb, sbl::JNL_BACKUP_BLOCKS);
    }
    // The journal inode is in use from now on (its blocks come from the
    // allocator, which the rebuild of the group summaries counts).
    stage.mark_inode(Ino::JOURNAL, true, false);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::default_blocks;

    #[test]
    fn sizes_follow_the_file_system() {
        assert_eq!(default_blocks(1000), None);
        assert_eq!(default_blocks(2048), Some(1024));
        assert_eq!(default_blocks(100_000), Some(4096));
        assert_eq!(default_blocks(1 << 20), Some(16384));
        assert_eq!(default_blocks(1 << 40), Some(262_144));
    }
}
