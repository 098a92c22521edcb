//! Reading an inode's extended attributes the way libext2fs does when
//! e2fsck asks for them (inline data, encryption contexts): the in-inode
//! area first, then the EA block, stopping at the first inconsistency.

use ext4_layout::features::IncompatFeatures;
use ext4_layout::inline::{is_inline_data_entry, INLINE_IBLOCK_SIZE};
use ext4_layout::inode::{flags, Inode, GOOD_OLD_INODE_SIZE};
use ext4_layout::xattr::{
    ea_round, entries_end_at, entry_at, entry_hash, entry_hash_ea_inode, XattrBlock,
    EA_BLOCK_HEADER, EA_ENTRY_HEADER, EA_MAGIC, EA_MAGIC_V1,
};

use crate::io::Io;

/// One attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Attr {
    /// Name prefix index.
    pub index: u8,
    /// Name without the prefix.
    pub name: Vec<u8>,
    /// Value, when stored in place.
    pub value: Vec<u8>,
    /// Inode holding the value, or 0.
    pub value_inum: u32,
    /// Value size.
    pub value_size: u32,
}

/// Why the attributes could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum XattrError {
    /// `i_extra_isize` is misaligned: the inode itself looks corrupt.
    InodeCorrupted,
    /// An entry's name runs past the area.
    BadNameLen,
    /// An entry's value size is impossible.
    BadValueSize,
    /// An entry's value offset is impossible.
    BadValueOffset,
    /// The EA block number is out of range, or an EA inode is used
    /// without the ea_inode feature.
    BadBlockNum,
    /// An entry's hash does not match.
    BadHash,
    /// The EA block header is wrong.
    BadHeader,
    /// The EA block checksum does not match.
    CsumInvalid,
    /// An EA inode holding a value is not one.
    EaInodeCorrupted,
    /// A read failed.
    Io,
    /// The file system has neither ext_attr nor inline_data.
    MissingFeature,
}

/// Parses entries of one area. `entries` starts at the first entry,
/// `value_base` is where value offsets count from (both as offsets in `area`).
fn parse_area(
    io: &mut Io<'_>,
    inode: &Inode<'_>,
    ino: u32,
    area: &[u8],
    entries: usize,
    value_base: usize,
    out: &mut Vec<Attr>,
) -> Result<(), XattrError> {
    let storage = area.len().saturating_sub(entries);
    let values_size = storage + (entries - value_base);
    // Find the end, validating name lengths.
    let mut end = entries;
    let mut remain = storage;
    while remain >= EA_ENTRY_HEADER && !entries_end_at(area, end) {
        remain -= EA_ENTRY_HEADER;
        let nl = ea_round(usize::from(entry_at(area, end).e_name_len));
        if nl > remain {
            return Err(XattrError::BadNameLen);
        }
        remain -= nl;
        end += EA_ENTRY_HEADER + nl;
    }
    let fs = io.fs;
    let mut pos = entries;
    let mut remain = storage;
    while remain >= EA_ENTRY_HEADER && !entries_end_at(area, pos) {
        let entry = entry_at(area, pos);
        let name_len = usize::from(entry.e_name_len);
        let index = entry.e_name_index;
        let offs = usize::from(entry.e_value_offs);
        let inum = entry.e_value_inum;
        let size = entry.e_value_size;
        let hash = entry.e_hash;
        remain -= EA_ENTRY_HEADER + ea_round(name_len);
        let name = entry.name.to_vec();
        if !fs.geo.incompat.contains(IncompatFeatures::EA_INODE) && inum != 0 {
            return Err(XattrError::BadBlockNum);
        }
        let mut value = Vec::new();
        let mut value_hash_src: Option<&[u8]> = None;
        if inum == 0 {
            if size as usize > remain {
                return Err(XattrError::BadValueSize);
            }
            if offs + size as usize > values_size {
                return Err(XattrError::BadValueOffset);
            }
            let vstart = value_base + offs;
            if size > 0 && vstart < end + 4 {
                return Err(XattrError::BadValueOffset);
            }
            remain -= size as usize;
            value = area
                .get(vstart..vstart + size as usize)
                .unwrap_or(&[])
                .to_vec();
            value_hash_src = area.get(vstart..(vstart + ea_round(size as usize)).min(area.len()));
        } else {
            if offs != 0 {
                return Err(XattrError::BadValueOffset);
            }
            if size > 64 * 1024 {
                return Err(XattrError::BadValueSize);
            }
            let mut ib = vec![0u8; fs.geo.inode_size as usize];
            io.read_inode(inum, &mut ib).map_err(|_| XattrError::Io)?;
            let ea = Inode::new(&ib).ok_or(XattrError::Io)?;
            if ea.has_flag(flags::INLINE_DATA)
                || !ea.has_flag(flags::EA_INODE)
                || ea.i_links_count() == 0
            {
                return Err(XattrError::EaInodeCorrupted);
            }
            if ea.size() != u64::from(size) {
                return Err(XattrError::BadValueSize);
            }
        }
        if hash != 0 {
            let (h, hs) = if inum == 0 {
                (
                    entry_hash(&name, value_hash_src.filter(|_| size > 0), false),
                    entry_hash(&name, value_hash_src.filter(|_| size > 0), true),
                )
            } else {
                let mut ib = vec![0u8; fs.geo.inode_size as usize];
                io.read_inode(inum, &mut ib).map_err(|_| XattrError::Io)?;
                let atime = Inode::new(&ib).map_or(0, |i| i.i_atime());
                (
                    entry_hash_ea_inode(&name, atime, false),
                    entry_hash_ea_inode(&name, atime, true),
                )
            };
            if hash != h && hash != hs {
                // An old Lustre-style reference records the parent in the
                // EA inode's mtime and shares its generation.
                let mut ib = vec![0u8; fs.geo.inode_size as usize];
                if inum == 0 || io.read_inode(inum, &mut ib).is_err() {
                    return Err(XattrError::BadHash);
                }
                let child = Inode::new(&ib).ok_or(XattrError::BadHash)?;
                if child.i_mtime() != ino || child.i_generation() != inode.i_generation() {
                    return Err(XattrError::BadHash);
                }
            }
        }
        out.push(Attr {
            index,
            name,
            value,
            value_inum: inum,
            value_size: size,
        });
        pos += EA_ENTRY_HEADER + ea_round(name_len);
    }
    Ok(())
}

/// Reads every attribute of an inode: the in-inode area, then the EA block.
/// `ignore_csum` skips the EA block checksum.
pub fn read_all(
    io: &mut Io<'_>,
    inode: &Inode<'_>,
    ino: u32,
    ignore_csum: bool,
) -> Result<Vec<Attr>, XattrError> {
    let fs = io.fs;
    if !fs
        .geo
        .compat
        .contains(ext4_layout::features::CompatFeatures::EXT_ATTR)
        && !fs.geo.incompat.contains(IncompatFeatures::INLINE_DATA)
    {
        return Err(XattrError::MissingFeature);
    }
    let isz = fs.geo.inode_size as usize;
    let bytes = inode.bytes();
    let mut out = Vec::new();
    let extra = usize::from(inode.i_extra_isize());
    if isz > GOOD_OLD_INODE_SIZE && extra >= 2 && isz > GOOD_OLD_INODE_SIZE + extra + 4 {
        if extra & 3 != 0 {
            return Err(XattrError::InodeCorrupted);
        }
        let start = GOOD_OLD_INODE_SIZE + extra;
        if ext4_layout::xattr::inode_area(bytes, extra).is_some_and(|x| x.present()) {
            let area = bytes.get(start + 4..isz).unwrap_or(&[]);
            parse_area(io, inode, ino, area, 0, 0, &mut out)?;
        }
    }
    let blk = inode.file_acl(fs.geo.incompat.contains(IncompatFeatures::BIT64));
    if blk != 0 {
        if !fs.geo.block_in_range(blk) {
            return Err(XattrError::BadBlockNum);
        }
        let mut buf = vec![0u8; fs.block_size()];
        io.read_blocks(blk, &mut buf).map_err(|_| XattrError::Io)?;
        let x = XattrBlock::new(&buf).ok_or(XattrError::Io)?;
        if (x.h_magic() != EA_MAGIC && x.h_magic() != EA_MAGIC_V1) || x.h_blocks() != 1 {
            return Err(XattrError::BadHeader);
        }
        if !ignore_csum && fs.metadata_csum() && !x.checksum_ok(fs.geo.csum_seed, blk) {
            return Err(XattrError::CsumInvalid);
        }
        if x.h_magic() != EA_MAGIC {
            return Err(XattrError::BadHeader);
        }
        parse_area(io, inode, ino, &buf, EA_BLOCK_HEADER, 0, &mut out)?;
    }
    Ok(out)
}

/// The "system.data" attribute, `None` if there is no such attribute.
pub(crate) fn system_data(
    io: &mut Io<'_>,
    inode: &Inode<'_>,
    ino: u32,
    ignore_csum: bool,
) -> Result<Option<Attr>, XattrError> {
    let attrs = read_all(io, inode, ino, ignore_csum)?;
    Ok(attrs
        .into_iter()
        .find(|a| is_inline_data_entry(a.index, &a.name)))
}

/// The size of an inline-data inode's data: 60 bytes in `i_block` plus
/// the "system.data" value (none counts as empty). Like the library, this
/// re-reads the inode, so an inode whose checksum fails (`csum_ok` false)
/// cannot be sized.
pub(crate) fn inline_data_size(io: &mut Io<'_>, inode: &Inode<'_>, csum_ok: bool) -> Option<u64> {
    if !csum_ok || !inode.has_flag(flags::INLINE_DATA) {
        return None;
    }
    match system_data(io, inode, 0, false) {
        Ok(Some(a)) => Some(INLINE_IBLOCK_SIZE as u64 + u64::from(a.value_size)),
        Ok(None) => Some(INLINE_IBLOCK_SIZE as u64),
        Err(_) => None,
    }
}

/// The inline data bytes of an inode: `i_block` followed by the
/// "system.data" value.
pub fn inline_data(io: &mut Io<'_>, inode: &Inode<'_>) -> Option<Vec<u8>> {
    let mut v = inode.i_block().to_vec();
    if let Ok(Some(a)) = system_data(io, inode, 0, true) {
        v.extend_from_slice(&a.value);
    }
    Some(v)
}
