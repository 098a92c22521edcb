//! Pass 5: the on-disk bitmaps and free counts against what passes 1–4
//! found in use.

use ext4_layout::csum::crc32c_raw;
use ext4_layout::group_desc::{field as gd_field, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4_layout::Group;

use crate::ctx::Maps;
use crate::error::BitmapReadError;
use crate::fs::{for_each_super_and_bgd, BitSet, Fs};
use crate::io::Io;
use crate::problem::{Code, Finding};

/// The on-disk bitmaps as e2fsck loads them.
pub struct DiskBitmaps {
    /// One bit per cluster, from the first data block's cluster.
    pub blocks: BitSet,
    /// One bit per inode (bit 0 is inode 1).
    pub inodes: BitSet,
    /// A read bitmap block had non-0xFF bytes after the bitmap.
    pub block_tail_problem: bool,
    /// Same for inode bitmaps.
    pub inode_tail_problem: bool,
    /// The first bitmap block that could not be read (taken as all
    /// zeros), and why.
    pub(crate) read_error: Option<BitmapReadError>,
}

/// Loads the bitmaps: groups flagged uninit (with a good descriptor
/// checksum) are not read; BLOCK_UNINIT groups get their own metadata
/// marked in memory.
pub fn read_bitmaps(fs: &Fs, io: &mut Io<'_>) -> DiskBitmaps {
    let geo = &fs.geo;
    let cpg = u64::from(geo.clusters_per_group);
    let ipg = u64::from(geo.inodes_per_group);
    let groups = u64::from(geo.group_count);
    let bits = geo.cluster_bits;
    let first_cluster = geo.first_data_block >> bits;
    let mut d = DiskBitmaps {
        blocks: BitSet::new(cpg * groups),
        inodes: BitSet::new(ipg * groups),
        block_tail_problem: false,
        inode_tail_problem: false,
        read_error: None,
    };
    let csum_flag = fs.has_gdt_csum();
    let bs = fs.block_size();
    let mut buf = vec![0u8; bs];
    let bnbytes = (cpg / 8) as usize;
    let inbytes = (ipg / 8) as usize;
    for g in 0..geo.group_count {
        let gd = fs.gd(g);
        let csum_ok = fs.gd_csum_ok(g);
        let bb = gd.block_bitmap();
        let skip = (csum_flag && gd.has_flag(BG_BLOCK_UNINIT) && csum_ok)
            || bb >= geo.blocks_count
            || bb == 0;
        let read = !skip && note_error(&mut d, io.read_blocks(bb, &mut buf), "block", g);
        if read {
            if buf[bnbytes.min(bs)..].iter().any(|&b| b != 0xFF) {
                d.block_tail_problem = true;
            }
            let base = u64::from(g) * cpg;
            // As the library reads a bitmap: whole bytes only, so the
            // bits of a last partial byte are never loaded.
            for i in 0..(bnbytes.min(bs) as u64 * 8) {
                if buf[(i / 8) as usize] & (1 << (i % 8)) != 0 {
                    d.blocks.test_and_set(base + i);
                }
            }
        }
        let ib = gd.inode_bitmap();
        let skip = (csum_flag && gd.has_flag(BG_INODE_UNINIT) && csum_ok)
            || ib >= geo.blocks_count
            || ib == 0;
        let read = !skip && note_error(&mut d, io.read_blocks(ib, &mut buf), "inode", g);
        if read {
            if buf[inbytes.min(bs)..].iter().any(|&b| b != 0xFF) {
                d.inode_tail_problem = true;
            }
            let base = u64::from(g) * ipg;
            for i in 0..(inbytes.min(bs) as u64 * 8) {
                if buf[(i / 8) as usize] & (1 << (i % 8)) != 0 {
                    d.inodes.test_and_set(base + i);
                }
            }
        }
    }
    // BLOCK_UNINIT groups: the group's own metadata is in use.
    let mark = |d: &mut DiskBitmaps, b: u64| {
        if b >= geo.first_data_block && b < geo.blocks_count {
            d.blocks.test_and_set((b >> bits) - first_cluster);
        }
    };
    for g in 0..geo.group_count {
        let gd = fs.gd(g);
        if !gd.has_flag(BG_BLOCK_UNINIT) {
            continue;
        }
        for_each_super_and_bgd(geo, Group(g), |b, n| {
            for x in b..b + n {
                mark(&mut d, x);
            }
        });
        let it = gd.inode_table();
        if it != 0 {
            for x in it..it.saturating_add(u64::from(geo.inode_blocks_per_group)) {
                mark(&mut d, x);
            }
        }
        for x in [gd.block_bitmap(), gd.inode_bitmap()] {
            if x != 0 {
                mark(&mut d, x);
            }
        }
    }
    d
}

/// Formats a list of (first, last) ranges compactly.
fn ranges_text(plus: &[(u64, u64)], minus: &[(u64, u64)]) -> String {
    let mut parts = Vec::new();
    let mut push = |sign: char, r: &[(u64, u64)]| {
        for &(a, b) in r.iter().take(16) {
            if a == b {
                parts.push(format!("{sign}{a}"));
            } else {
                parts.push(format!("{sign}({a}--{b})"));
            }
        }
        if r.len() > 16 {
            parts.push(format!("{sign}... ({} more ranges)", r.len() - 16));
        }
    };
    push('+', plus);
    push('-', minus);
    parts.join(" ")
}

/// Whether a bitmap read worked; the first failure is kept.
fn note_error(d: &mut DiskBitmaps, r: std::io::Result<()>, which: &'static str, g: u32) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => {
            d.read_error.get_or_insert_with(|| BitmapReadError {
                why: e.to_string(),
                which,
                group: g,
            });
            false
        }
    }
}

fn add_range(v: &mut Vec<(u64, u64)>, x: u64, step: u64) {
    if let Some(last) = v.last_mut() {
        if last.1 + step == x {
            last.1 = x;
            return;
        }
    }
    v.push((x, x));
}

/// Runs pass 5. A bitmap block that cannot be read stops a read-only
/// check, as e2fsck -n stops; a repair takes it as zeros and rewrites it
/// (e2fsck -y ignores the error and rewrites the block).
pub(crate) fn run(
    fs: &Fs,
    maps: &Maps,
    repairing: bool,
    answers: Option<&dyn crate::answers::Answers>,
) -> Result<Vec<Finding>, BitmapReadError> {
    let mut out = Vec::new();
    let mut io = Io::new(fs);
    let disk = read_bitmaps(fs, &mut io);
    if let (Some(why), false) = (&disk.read_error, repairing) {
        return Err(why.clone());
    }
    // A repair counts the bitmaps as it rewrites them, once the bitmap's
    // differences are answered yes.
    let fixes = |f: &Finding| crate::ctx::answered_yes(repairing, answers, f);
    compare_blocks(fs, maps, &disk, &mut out, &fixes);
    compare_inodes(fs, maps, &disk, &mut out, &fixes);
    check_padding(fs, &disk, &mut out);
    if fs.metadata_csum() {
        check_bitmap_checksums(fs, &disk, &mut out);
    }
    Ok(out)
}

/// The block bitmap against the blocks pass 1 found in use, and the free
/// block counts: of the bitmap as it is (a read-only check, as e2fsck -n
/// counts after declining the bitmap's fix) or as a repair rewrites it
/// (e2fsck -y counts after fixing it, so a count the bitmap's fix makes
/// right is not reported).
fn compare_blocks(
    fs: &Fs,
    maps: &Maps,
    disk: &DiskBitmaps,
    out: &mut Vec<Finding>,
    fixes: &dyn Fn(&Finding) -> bool,
) {
    let geo = &fs.geo;
    let sb = fs.sb();
    let bits = geo.cluster_bits;
    let ratio = u64::from(geo.cluster_ratio);
    let cpg = u64::from(geo.clusters_per_group);
    let first_cluster = geo.first_data_block >> bits;
    let last_cluster = (geo.blocks_count - 1) >> bits;
    // Blocks.
    let mut plus = Vec::new();
    let mut minus = Vec::new();
    let mut group_free = vec![0u64; geo.group_count as usize];
    let mut group_free_disk = vec![0u64; geo.group_count as usize];
    let mut uninit_reported = vec![false; geo.group_count as usize];
    for c in first_cluster..=last_cluster {
        let rel = c - first_cluster;
        let g = (rel / cpg) as usize;
        let actual = maps.block_found.get(c);
        let on_disk = disk.blocks.get(rel);
        if actual != on_disk {
            let blk = c << bits;
            if actual {
                add_range(&mut plus, blk, ratio);
                if fs.gd(g as u32).has_flag(BG_BLOCK_UNINIT) && !uninit_reported[g] {
                    uninit_reported[g] = true;
                    out.push(Finding::new(Code::BlockUninit).group(g as u32).blk(blk));
                }
            } else {
                add_range(&mut minus, blk, ratio);
            }
        }
        if !actual {
            group_free[g] += 1;
        }
        if !on_disk {
            group_free_disk[g] += 1;
        }
    }
    // Without differences the two counts agree.
    let mut rewritten = true;
    if !plus.is_empty() || !minus.is_empty() {
        let f = Finding::new(Code::BlockBitmapDiff).detail(ranges_text(&plus, &minus));
        rewritten = fixes(&f);
        out.push(f);
    }
    if !rewritten {
        group_free = group_free_disk;
    }
    let mut total_free = 0u64;
    for (g, &free) in group_free.iter().enumerate() {
        let gd = fs.gd(g as u32);
        if u64::from(gd.free_blocks_count()) != free {
            out.push(
                Finding::new(Code::FreeBlocksGroup)
                    .group(g as u32)
                    .mismatch(u64::from(gd.free_blocks_count()), free),
            );
        }
        total_free += free;
    }
    let total_free_blocks = total_free << bits;
    if total_free_blocks != sb.free_blocks_count() {
        out.push(
            Finding::new(Code::FreeBlocksTotal).mismatch(sb.free_blocks_count(), total_free_blocks),
        );
    }
}

/// The inode bitmap against the inodes in use, and the free inode and
/// directory counts (of the bitmap as it is, or as a repair rewrites it:
/// see [`compare_blocks`]).
fn compare_inodes(
    fs: &Fs,
    maps: &Maps,
    disk: &DiskBitmaps,
    out: &mut Vec<Finding>,
    fixes: &dyn Fn(&Finding) -> bool,
) {
    let geo = &fs.geo;
    let sb = fs.sb();
    let ipg = u64::from(geo.inodes_per_group);
    // Inodes.
    let csum_flag = fs.has_gdt_csum();
    let mut plus = Vec::new();
    let mut minus = Vec::new();
    let mut total_free = 0u64;
    let mut total_free_disk = 0u64;
    let mut counts = Vec::with_capacity(geo.group_count as usize);
    let mut counts_disk = Vec::with_capacity(geo.group_count as usize);
    for g in 0..u64::from(geo.group_count) {
        let gd = fs.gd(g as u32);
        let skip_group = csum_flag && gd.has_flag(BG_INODE_UNINIT);
        let base = g * ipg;
        if skip_group && maps.inode_used.count_range(base, ipg) == 0 {
            counts.push((ipg, 0u64));
            counts_disk.push((ipg, 0u64));
            total_free += ipg;
            total_free_disk += ipg;
            continue;
        }
        let mut free = 0u64;
        let mut dirs = 0u64;
        let (mut free_disk, mut dirs_disk) = (0u64, 0u64);
        let mut uninit_reported = false;
        for i in 0..ipg {
            let idx = base + i;
            let actual = maps.inode_used.get(idx);
            let on_disk = if skip_group {
                false
            } else {
                disk.inodes.get(idx)
            };
            if actual != on_disk {
                if actual {
                    add_range(&mut plus, idx + 1, 1);
                    if skip_group && !uninit_reported {
                        uninit_reported = true;
                        out.push(
                            Finding::new(Code::InodeUninit)
                                .group(g as u32)
                                .ino(idx as u32 + 1),
                        );
                    }
                } else {
                    add_range(&mut minus, idx + 1, 1);
                }
            }
            let dir = maps.inode_dir.get(idx);
            if actual {
                dirs += u64::from(dir);
            } else {
                free += 1;
            }
            if on_disk {
                dirs_disk += u64::from(dir);
            } else {
                free_disk += 1;
            }
        }
        counts.push((free, dirs));
        counts_disk.push((free_disk, dirs_disk));
        total_free += free;
        total_free_disk += free_disk;
    }
    let mut rewritten = true;
    if !plus.is_empty() || !minus.is_empty() {
        let f = Finding::new(Code::InodeBitmapDiff).detail(ranges_text(&plus, &minus));
        rewritten = fixes(&f);
        out.push(f);
    }
    if !rewritten {
        counts = counts_disk;
        total_free = total_free_disk;
    }
    for (g, &(free, dirs)) in counts.iter().enumerate() {
        let gd = fs.gd(g as u32);
        if u64::from(gd.free_inodes_count()) != free {
            out.push(
                Finding::new(Code::FreeInodesGroup)
                    .group(g as u32)
                    .mismatch(u64::from(gd.free_inodes_count()), free),
            );
        }
        if u64::from(gd.used_dirs_count()) != dirs {
            out.push(
                Finding::new(Code::DirsCountGroup)
                    .group(g as u32)
                    .mismatch(u64::from(gd.used_dirs_count()), dirs),
            );
        }
    }
    if total_free != u64::from(sb.s_free_inodes_count()) {
        out.push(
            Finding::new(Code::FreeInodesTotal)
                .mismatch(u64::from(sb.s_free_inodes_count()), total_free),
        );
    }
}

/// Padding: bits past the end of the file system must be set, and so
/// must the bytes after each bitmap in its block.
fn check_padding(fs: &Fs, disk: &DiskBitmaps, out: &mut Vec<Finding>) {
    let geo = &fs.geo;
    let bits = geo.cluster_bits;
    let cpg = u64::from(geo.clusters_per_group);
    let first_cluster = geo.first_data_block >> bits;
    let last_cluster = (geo.blocks_count - 1) >> bits;
    if disk.inode_tail_problem {
        out.push(Finding::new(Code::InodeBmapPadding));
    }
    let end_rel = cpg * u64::from(geo.group_count);
    let real_end = last_cluster - first_cluster + 1;
    let padding_clear = (real_end..end_rel).any(|rel| !disk.blocks.get(rel));
    if padding_clear || disk.block_tail_problem {
        out.push(Finding::new(Code::BlockBmapPadding));
    }
}

/// Each bitmap block's checksum (groups not initialized are skipped).
fn check_bitmap_checksums(fs: &Fs, disk: &DiskBitmaps, out: &mut Vec<Finding>) {
    let geo = &fs.geo;
    let ipg = u64::from(geo.inodes_per_group);
    let cpg = u64::from(geo.clusters_per_group);
    let seed = geo.csum_seed;
    let wide_ib = geo.desc_size as usize >= gd_field::bg_inode_bitmap_csum_hi.end();
    let wide_bb = geo.desc_size as usize >= gd_field::bg_block_bitmap_csum_hi.end();
    // A descriptor too small for the high half keeps the low 16 bits.
    let matches = |bits: &BitSet, start: u64, n: u64, stored: u32, wide: bool| {
        let c = crc32c_raw(seed, &bitset_bytes(bits, start, n));
        if wide {
            c == stored
        } else {
            c & 0xFFFF == stored & 0xFFFF
        }
    };
    for g in 0..geo.group_count {
        let gd = fs.gd(g);
        let start = u64::from(g) * ipg;
        if !gd.has_flag(BG_INODE_UNINIT)
            && !matches(&disk.inodes, start, ipg, gd.inode_bitmap_csum(), wide_ib)
        {
            out.push(Finding::new(Code::InodeBitmapCsum).group(g));
        }
    }
    for g in 0..geo.group_count {
        let gd = fs.gd(g);
        let start = u64::from(g) * cpg;
        if !gd.has_flag(BG_BLOCK_UNINIT)
            && !matches(&disk.blocks, start, cpg, gd.block_bitmap_csum(), wide_bb)
        {
            out.push(Finding::new(Code::BlockBitmapCsum).group(g));
        }
    }
}

fn bitset_bytes(b: &BitSet, start: u64, nbits: u64) -> Vec<u8> {
    let mut v = vec![0u8; (nbits / 8) as usize];
    for i in 0..nbits - nbits % 8 {
        if b.get(start + i) {
            v[(i / 8) as usize] |= 1 << (i % 8);
        }
    }
    v
}
