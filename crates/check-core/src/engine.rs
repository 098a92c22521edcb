//! Runs the whole check: open, pre-pass checks, passes 1 to 5, and the
//! summary, producing a [`Report`].

use std::sync::Arc;

use ext4_layout::features::RoCompatFeatures;
use pipeline::Device;

use crate::ctx::{AbortAt, CheckOptions, Maps};
use crate::fs::{open_fs, OpenOptions};
use crate::io::Io;
use crate::problem::{Code, Finding, Pass};
use crate::report::{Report, Summary};
use crate::{journal, pass1, pass1b, pass2, pass3, pass4, pass5, postpass, super_check};

/// Checks the file system on `dev` without changing anything.
pub fn check(dev: Arc<Device>, opts: CheckOptions) -> Report {
    let mut report = Report {
        device: dev.path().display().to_string(),
        ..Default::default()
    };
    let opened = match open_fs(dev, OpenOptions { read_only: true }) {
        Ok(o) => o,
        Err(fail) => {
            report.notes = fail.notes;
            report.aborted = Some(fail.message);
            report.forced_uncorrected = fail.exit & 4 != 0;
            return report;
        }
    };
    let fs = opened.fs;
    report.notes.extend(opened.notes);
    report.findings.extend(opened.findings);
    let label = fs.sb().s_volume_name();
    let end = label.iter().position(|&b| b == 0).unwrap_or(label.len());
    report.label = String::from_utf8_lossy(&label[..end]).into_owned();
    let mut io = Io::new(&fs);
    let jc = journal::check_journal(&fs, &mut io);
    report.findings.extend(jc.findings);
    if let Some(why) = jc.fatal {
        report.aborted = Some(why);
        report.forced_uncorrected = true;
        report.finish();
        return report;
    }
    let sc = match super_check::check_super_block(&fs) {
        Ok(sc) => sc,
        Err(fatal) => {
            report.aborted = Some(fatal.reason);
            report.forced_uncorrected = fatal.uncorrected;
            report.finish();
            return report;
        }
    };
    report.findings.extend(sc.findings);
    report
        .findings
        .extend(super_check::check_resize_inode(&fs, &mut io));
    let resize_unreadable = super_check::resize_inode_unreadable(&fs, &mut io);
    // A bitmap or inode table at block 0 would have to be relocated.
    for (groups, what) in [
        (&sc.missing_block_bitmap, "block bitmap"),
        (&sc.missing_inode_bitmap, "inode bitmap"),
        (&sc.missing_inode_table, "inode table"),
    ] {
        for &g in groups {
            report
                .findings
                .push(Finding::new(Code::RelocateMetadata).group(g).str(what));
        }
    }
    let (bad_blocks, bb_note) = pass1::read_bad_blocks_list(&fs, &mut io);
    if let Some(n) = bb_note {
        report.notes.push(n);
    }
    let threads = opts.threads.max(1);
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            report.aborted = Some(format!("cannot start worker threads: {e}"));
            return report;
        }
    };
    let mut maps = Maps::new(&fs);
    report
        .findings
        .extend(pass1::mark_table_blocks(&fs, &mut maps));
    let maps = maps;
    let mut p1 = pass1::run(&fs, &maps, &bad_blocks, &pool);
    report.findings.append(&mut p1.findings);
    let mut abort = p1.abort.take();
    if abort.is_none() && resize_unreadable {
        report
            .findings
            .push(Finding::new(Code::ResizeInodeCreate).ino(7));
        abort = Some(AbortAt::new(
            Pass::P1,
            u32::MAX,
            "the resize inode would have to be recreated",
        ));
    }
    if abort.is_none() {
        let p1b = pass1b::run(&fs, &maps);
        report.findings.extend(p1b.findings);
        abort = p1b.abort;
    }
    let mut counted = Vec::new();
    if abort.is_none() {
        let p2 = pass2::run(&fs, &maps, &mut p1, &pool);
        report.findings.extend(p2.findings.iter().cloned());
        abort = p2.abort.clone();
        if abort.is_none() {
            if p1.stats.large_files > 0 && !fs.geo.ro_compat.contains(RoCompatFeatures::LARGE_FILE)
            {
                report.findings.push(Finding::new(Code::FeatureLargeFiles));
            }
            let p3 = pass3::run(&fs, &maps, &p1.dirs, &p2);
            report.findings.extend(p3.findings);
            abort = p3.abort;
        }
        counted = p2.counted;
    }
    if abort.is_none() {
        let cx = pass2::P2Ctx {
            fs: &fs,
            maps: &maps,
            dirs: &p1.dirs,
            policies: &p1.policies,
        };
        let p4 = pass4::run(&fs, &maps, &cx, &counted, &p1.ea_inode_refs);
        report.findings.extend(p4.findings);
        abort = p4.abort;
    }
    if abort.is_none() {
        report.findings.extend(pass5::run(&fs, &maps));
        report
            .findings
            .extend(postpass::check_orphan_file(&fs, &mut io));
        report
            .findings
            .extend(postpass::check_quota(&fs, &mut io, &p1.quota));
    }
    if let Some(a) = abort {
        report.findings.retain(|f| !a.is_after(f));
        report.aborted = Some(a.reason);
    } else {
        let sb = fs.sb();
        let inodes_used = sb.s_inodes_count().wrapping_sub(sb.s_free_inodes_count());
        let blocks_used = sb.blocks_count().wrapping_sub(sb.free_blocks_count());
        let st = &p1.stats;
        report.summary = Some(Summary {
            inodes_used: u64::from(inodes_used),
            inodes_count: u64::from(sb.s_inodes_count()),
            blocks_used,
            blocks_count: sb.blocks_count(),
            non_contiguous: st.fragmented + st.fragmented_dir,
            regular: st.regular,
            directories: st.directories,
            chardev: st.chardev,
            blockdev: st.blockdev,
            fifos: st.fifos,
            sockets: st.sockets,
            symlinks: st.symlinks,
            fast_symlinks: st.fast_symlinks,
            links: counted.iter().map(|&c| u64::from(c)).sum(),
        });
    }
    report.finish();
    report
}
