//! Pass 4: link counts against the references pass 2 found, and inodes in
//! use that nothing refers to.

use ext4_layout::features::RoCompatFeatures;
use ext4_layout::inode::{flags, Inode};
use ext4_layout::xattr::EA_MAGIC;

use crate::ctx::{AbortAt, Maps};
use crate::fs::Fs;
use crate::io::Io;
use crate::pass2::{process_bad_inode, BadInodeOutcome, P2Ctx};
use crate::problem::{Code, Finding, Pass};

/// What pass 4 produced.
pub(crate) struct P4Out {
    /// Findings.
    pub findings: Vec<Finding>,
    /// A fatal problem.
    pub abort: Option<AbortAt>,
}

/// Runs pass 4. `counted` holds the references pass 2 found (index
/// `ino - 1`); `ea_inode_refs` the attribute references to EA inodes.
pub fn run(
    fs: &Fs,
    maps: &Maps,
    cx: &P2Ctx<'_>,
    counted: &crate::pass2::RefCounts,
    ea_inode_refs: &[u32],
    repairing: bool,
) -> P4Out {
    let mut out = P4Out {
        findings: Vec::new(),
        abort: None,
    };
    let geo = &fs.geo;
    let sb = fs.sb();
    let prj = sb.s_prj_quota_inum();
    let orphan = sb.s_orphan_file_inum();
    let dir_nlink = geo.ro_compat.contains(RoCompatFeatures::DIR_NLINK);
    let mut io = Io::new(fs);
    let mut buf = vec![0u8; geo.inode_size as usize];
    // References to each EA inode from attributes.
    let mut ea_refs: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    for &r in ea_inode_refs {
        *ea_refs.entry(r).or_default() += 1;
    }
    let mut next = maps.inode_used.next_set(0);
    while let Some(idx) = next {
        next = maps.inode_used.next_set(idx + 1);
        let i = idx as u32 + 1;
        if (prj != 0 && i == prj)
            || (orphan != 0 && i == orphan)
            || i == 1
            || (i > 2 && i < geo.first_ino)
        {
            continue;
        }
        if maps.inode_imagic.get(idx) || maps.inode_bb.get(idx) {
            continue;
        }
        let link_count = u32::from(maps.links(i));
        let mut link_counted = counted.get(idx as usize).min(65500);
        let refs = ea_refs.get(&i).copied().unwrap_or(0);
        if refs > 0 {
            // Attributes keep their values in it: it counts as linked
            // once, whatever its flag and whatever entries name it.
            link_counted = 1;
            if io.read_inode(i, &mut buf).is_ok() {
                if let Some(inode) = Inode::new(&buf) {
                    let stored =
                        (u64::from(inode.i_ctime()) << 32) | u64::from(inode.l_i_version());
                    if stored != refs && inode.i_ctime() != inode.i_atime() {
                        out.findings.push(
                            Finding::new(Code::EaInodeRefCount)
                                .ino(i)
                                .mismatch(stored, refs),
                        );
                    }
                }
            }
        } else if link_counted == 0
            && io.read_inode(i, &mut buf).is_ok()
            && Inode::new(&buf).is_some_and(|inode| {
                // A repair has cleared the flag of any other kind of
                // inode in pass 1.
                inode.has_flag(flags::EA_INODE) && (inode.is_reg() || !repairing)
            })
        {
            // Flagged, but no attribute uses it and no entry names it:
            // an ordinary file, which goes to lost+found below.
            out.findings
                .push(Finding::new(Code::EaInodeSpuriousFlag).ino(i));
        }
        if link_counted == 0 {
            match process_bad_inode(cx, &mut io, i) {
                BadInodeOutcome::Fatal(why) => {
                    out.abort = Some(AbortAt::new(Pass::P4, i, why.to_string()));
                    return out;
                }
                BadInodeOutcome::Reported { findings, .. } => {
                    for f in findings {
                        out.findings.push(Finding { code: f.code, ..f });
                    }
                }
                BadInodeOutcome::Clean => {}
            }
            if io.read_inode(i, &mut buf).is_ok() {
                if let Some(inode) = Inode::new(&buf) {
                    let isz = geo.inode_size as usize;
                    let extra = usize::from(inode.i_extra_isize());
                    let eamagic = if isz > 128 && isz > 128 + extra + 4 {
                        ext4_layout::xattr::inode_area(&buf, extra).map_or(0, |x| x.magic())
                    } else {
                        0
                    };
                    if inode.i_blocks_lo() == 0
                        && eamagic != EA_MAGIC
                        && (inode.is_reg() || inode.is_dir())
                    {
                        out.findings.push(Finding::new(Code::ZeroLenInode).ino(i));
                    }
                }
            }
            out.findings
                .push(Finding::new(Code::UnattachedInode).ino(i));
            continue;
        }
        let isdir = maps.is_dir(i);
        if isdir && link_counted > 65000 {
            if !dir_nlink {
                out.findings
                    .push(Finding::new(Code::DirNlinkFeature).ino(i));
            }
            link_counted = 1;
        }
        if link_counted != link_count {
            if let Err(why) = cx.read_inode_checked(&mut io, i, &mut buf) {
                out.abort = Some(AbortAt::new(Pass::P4, i, why.to_string()));
                return out;
            }
            let Some(inode) = Inode::new(&buf) else {
                continue;
            };
            if isdir && link_counted > 1 && inode.has_flag(flags::INDEX) && link_count == 1 {
                // The kernel's "too many links" marker on an indexed
                // directory that no longer has that many: a read-only
                // check does not question it, a repair sets the exact
                // count (not an error either way, as in e2fsck).
                if repairing {
                    out.findings.push(
                        Finding::new(Code::DirOverflowRefCount)
                            .ino(i)
                            .mismatch(1, u64::from(link_counted)),
                    );
                }
                continue;
            }
            // The link count as the repair's earlier fixes leave it (what
            // was compared), which is the inode's own in a read-only check.
            out.findings.push(
                Finding::new(Code::BadRefCount)
                    .ino(i)
                    .mismatch(u64::from(link_count), u64::from(link_counted)),
            );
        }
    }
    out
}
