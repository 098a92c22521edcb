//! The deferred checks of an inode pass 1 marked bad, run when a
//! directory entry (pass 2) or pass 4 reaches it.

use ext4_layout::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use ext4_layout::inode::{FileType, Inode};
use ext4_layout::superblock::OS_HURD;

use super::ctx::P2Ctx;
use crate::inode_checks::{device_ok, symlink_ok};
use crate::io::Io;
use crate::problem::{Code, Finding};

/// What re-checking a bad inode gave.
pub(crate) enum BadInodeOutcome {
    /// Problems to report; `still_bad` unless only a problem whose
    /// refusal clears the mark was found.
    Reported {
        /// The problems.
        findings: Vec<Finding>,
        /// Whether the inode stays marked bad.
        still_bad: bool,
    },
    /// Nothing wrong after all: treat the inode as good.
    Clean,
    /// The inode could not be read; the check stops.
    Fatal(String),
}

/// Re-checks an inode pass 1 marked bad.
pub(crate) fn process_bad_inode(cx: &P2Ctx<'_>, io: &mut Io<'_>, ino: u32) -> BadInodeOutcome {
    let fs = cx.fs;
    let geo = &fs.geo;
    let mut buf = vec![0u8; geo.inode_size as usize];
    if let Err(why) = cx.read_inode_checked(io, ino, &mut buf) {
        return BadInodeOutcome::Fatal(why.to_string());
    }
    let Some(inode) = Inode::new(&buf) else {
        return BadInodeOutcome::Clean;
    };
    let mut out = Vec::new();
    let mut not_fixed = 0;
    let is64 = geo.incompat.contains(IncompatFeatures::BIT64);
    let acl = inode.file_acl(is64);
    if acl != 0 && !geo.compat.contains(CompatFeatures::EXT_ATTR) {
        out.push(Finding::new(Code::FileAclZero).ino(ino).blk(acl));
        not_fixed += 1;
    }
    let csum_ok = !cx.maps.inode_csum_bad.get(u64::from(ino - 1));
    let type_problem = match inode.file_type() {
        None => Some(Code::BadMode),
        Some(FileType::CharDevice) if !device_ok(&inode) => Some(Code::BadCharDev),
        Some(FileType::BlockDevice) if !device_ok(&inode) => Some(Code::BadBlockDev),
        Some(FileType::Fifo) if !device_ok(&inode) => Some(Code::BadFifo),
        Some(FileType::Socket) if !device_ok(&inode) => Some(Code::BadSocket),
        Some(FileType::Symlink) if !symlink_ok(io, &inode, csum_ok) => Some(Code::InvalidSymlink),
        _ => None,
    };
    if let Some(c) = type_problem {
        out.push(Finding::new(c).ino(ino).found(u64::from(inode.i_mode())));
        not_fixed += 1;
    }
    if inode.i_faddr() != 0 {
        out.push(
            Finding::new(Code::FaddrZero)
                .ino(ino)
                .found(u64::from(inode.i_faddr())),
        );
        not_fixed += 1;
    }
    let os = fs.sb().s_creator_os();
    if os == OS_HURD {
        if inode.h_i_frag() != 0 {
            out.push(
                Finding::new(Code::FragZero)
                    .ino(ino)
                    .found(u64::from(inode.h_i_frag())),
            );
            not_fixed += 1;
        }
        if inode.h_i_fsize() != 0 {
            out.push(
                Finding::new(Code::FsizeZero)
                    .ino(ino)
                    .found(u64::from(inode.h_i_fsize())),
            );
            not_fixed += 1;
        }
    }
    if os == 0
        && !geo.ro_compat.contains(RoCompatFeatures::HUGE_FILE)
        && inode.l_i_blocks_high() != 0
    {
        // Declining this one does not keep the inode marked bad.
        out.push(
            Finding::new(Code::BlocksHiZero)
                .ino(ino)
                .found(u64::from(inode.l_i_blocks_high())),
        );
    }
    if os == 0 && !is64 && inode.l_i_file_acl_high() != 0 {
        out.push(
            Finding::new(Code::IFileAclHiZero)
                .ino(ino)
                .found(u64::from(inode.l_i_file_acl_high())),
        );
        not_fixed += 1;
    }
    if acl != 0 && !geo.block_in_range(acl) {
        out.push(Finding::new(Code::FileAclBad).ino(ino).blk(acl));
        not_fixed += 1;
    }
    let limit = 1u64 << (29 - geo.block_size_bits);
    if inode.i_size_high() != 0
        && !geo.incompat.contains(IncompatFeatures::LARGEDIR)
        && u64::from(inode.i_blocks_lo()) < limit
        && inode.is_dir()
    {
        out.push(
            Finding::new(Code::DirSizeHighZero)
                .ino(ino)
                .found(u64::from(inode.i_size_high())),
        );
        not_fixed += 1;
    }
    if out.is_empty() {
        BadInodeOutcome::Clean
    } else {
        BadInodeOutcome::Reported {
            findings: out,
            still_bad: not_fixed > 0,
        }
    }
}
