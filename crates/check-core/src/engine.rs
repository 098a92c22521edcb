//! Runs the whole check: open, pre-pass checks, passes 1 to 5, and the
//! summary, producing a [`Report`].

use std::sync::Arc;

use ext4_layout::features::RoCompatFeatures;
use pipeline::Device;

use crate::ctx::{AbortAt, CheckOptions, Maps};
use crate::fs::{open_fs, Fs, OpenOptions};
use crate::io::Io;
use crate::problem::{Code, Finding, Pass};
use crate::report::{Report, Summary};
use crate::sink::FixSink;
use crate::{journal, pass1, pass1b, pass2, pass3, pass4, pass5, postpass, super_check};

/// Checks the file system on `dev` without changing anything.
pub fn check(dev: Arc<Device>, opts: &CheckOptions) -> Report {
    check_with_state(dev, opts).report
}

/// What a check leaves behind besides its report, for repairs: the file
/// system as opened and the maps and counts the passes built.
pub struct CheckState {
    /// The file system.
    pub fs: Fs,
    /// Pass 1's maps.
    pub maps: Maps,
    /// Blocks listed in the bad blocks inode.
    pub bad_blocks: Vec<u64>,
    /// Indexed directories.
    pub dx_dirs: Vec<(u32, pass1::DxInfo)>,
    /// Directories with the index flag whose index a repair drops (read
    /// as linear directories, as e2fsck -y's pass 2 reads them).
    pub dx_dropped: Vec<u32>,
    /// Directories pass 3A indexes, in inode order: on a file system
    /// with dir_index, those pass 1 found not indexed, not inline and
    /// three blocks long or more.
    pub linear_dirs: Vec<u32>,
    /// EA inodes referenced by attributes.
    pub ea_inode_refs: Vec<u32>,
    /// Where the check stopped, if it did.
    pub abort: Option<AbortAt>,
    /// Usage charged to each (quota type, id) by pass 1.
    pub quota: std::collections::HashMap<(u8, u32), pass1::QuotaUse>,
    /// Whether the check judged each pass as a repair leaves the passes
    /// before it (e2fsck -y's answers; see [`CheckOptions::repairing`]).
    pub answered_yes: bool,
    /// Pass 1B's owners of blocks claimed twice: each inode with the
    /// clusters it shares.
    pub dup_inodes: std::collections::BTreeMap<u32, Vec<u64>>,
}

/// A report and, when the file system could be opened, the check's state.
pub struct Checked {
    /// The report.
    pub report: Report,
    /// The state (absent when the check stopped before pass 1).
    pub state: Option<CheckState>,
}

/// Checks the file system on `dev` without changing anything, keeping the
/// check's state.
pub fn check_with_state(dev: Arc<Device>, opts: &CheckOptions) -> Checked {
    check_fixing(dev, opts, None)
}

/// A check that, given a sink, has pass 1's workers send it the repairs
/// they can make on the spot (see [`pass1::Pass1::sink`]); the findings
/// so repaired come back marked fixed. Without one, nothing is written.
pub fn check_fixing(dev: Arc<Device>, opts: &CheckOptions, sink: Option<&dyn FixSink>) -> Checked {
    let mut report = Report {
        device: dev.path().display().to_string(),
        ..Default::default()
    };
    let Some(fs) = open_checked(dev, opts, &mut report) else {
        return Checked {
            report,
            state: None,
        };
    };
    let mut io = Io::new(&fs);
    let mut tl = Timeline::new();
    let Some(pre) = pre_pass(&fs, &mut io, opts, &mut report) else {
        report.finish();
        return Checked {
            report,
            state: None,
        };
    };
    if opts.interrupted() {
        report.cancelled = true;
        report.notes.push(
            "Interrupted before pass 1: the problems below are those found before the check stopped; the rest of the file system was not checked.".into(),
        );
        report.finish();
        return Checked {
            report,
            state: None,
        };
    }
    let mut maps = Maps::new(&fs);
    report
        .findings
        .extend(pass1::mark_table_blocks(&fs, &mut maps));
    let maps = maps;
    let mut p1cx = pass1::Pass1::new(&fs, &maps, &pre.bad_blocks);
    p1cx.sink = sink;
    p1cx.choices = opts.choices;
    p1cx.repairing = opts.repairing;
    p1cx.answers = opts.answers.clone();
    p1cx.not_dirs = opts.not_dirs.clone();
    if opts.live {
        let mut o = crate::orphans::listed(&fs);
        o.sort_unstable();
        p1cx.live_orphans = std::sync::Arc::from(o);
    }
    let p1cx = p1cx;
    let mut p2cx = pass2::P2Ctx::new(&fs, &maps);
    p2cx.check_encoding = opts.choices.check_encoding;
    p2cx.yes = opts.repairing;
    p2cx.answers = opts.answers.clone();
    let (mut p1, accs) = passes_1_and_2(&mut io, opts, &p1cx, &p2cx, &mut tl, &mut report);
    let mut abort = p1.abort.take();
    // As e2fsck: the resize inode is made again only once its checksum is
    // fixed; declined (-n), that fails and the check stops. (The question
    // is pass 1's, answered already at a terminal: asked only here.)
    let csum_declined = || {
        !crate::ctx::answered_yes(
            opts.repairing,
            opts.answers.as_deref(),
            &Finding::new(Code::InodeOnlyCsumInvalid).ino(7),
        )
    };
    if abort.is_none() && pre.resize_unreadable && csum_declined() {
        report
            .findings
            .push(Finding::new(Code::ResizeInodeCreate).ino(7));
        abort = Some(AbortAt::new(
            Pass::P1,
            u32::MAX,
            "the resize inode would have to be recreated",
        ));
    }
    let mut later = LaterPasses {
        fs: &fs,
        maps: &maps,
        io: &mut io,
        opts,
        p1: &p1,
        tl: &mut tl,
        report: &mut report,
        dup_inodes: Default::default(),
        emitted: std::cell::Cell::new(0),
    };
    let (abort, p2out) = later.run(abort, &mut p2cx, accs);
    let dup_inodes = std::mem::take(&mut later.dup_inodes);
    // Stopped by a signal: what was found so far, and no verdict on the
    // rest (nor a summary of a file system not wholly counted).
    report.cancelled = opts.interrupted();
    drop(p2cx);
    if let Some(p2) = &p2out {
        crate::paths::name_findings(&fs, &maps, &p2.dirs, &mut report.findings);
    }
    if let Some(a) = &abort {
        report.findings.retain(|f| !a.is_after(f));
        report.aborted = Some(a.reason.clone());
    } else if report.cancelled {
        report.notes.push(
            "Interrupted: the problems below are those found before the check stopped; the rest of the file system was not checked.".into(),
        );
    } else {
        let no_counts = pass2::RefCounts::default();
        let counted = p2out.as_ref().map_or(&no_counts, |p| &p.counted);
        report.summary = Some(summary(&fs, &p1.stats, counted, pre.bad_blocks.len()));
    }
    tl.mark("the rest");
    if let Some(p) = opts.progress {
        p.phase(6);
    }
    if let Ok(mut errs) = fs.read_errors.lock() {
        report.notes.extend(
            errs.drain(..)
                .map(|e| format!("{e}; the check went on without it")),
        );
    }
    report.diagnostics.push(tl.summary());
    report.phases = tl.phases.iter().map(|&(w, t)| (w.to_string(), t)).collect();
    report.finish();
    let state = CheckState {
        fs,
        maps,
        bad_blocks: pre.bad_blocks,
        dx_dirs: std::mem::take(&mut p1.dx_dirs),
        dx_dropped: std::mem::take(&mut p1.dx_dropped),
        linear_dirs: {
            let mut d = std::mem::take(&mut p1.linear_dirs);
            d.sort_unstable();
            d
        },
        ea_inode_refs: std::mem::take(&mut p1.ea_inode_refs),
        abort,
        quota: std::mem::take(&mut p1.quota),
        answered_yes: opts.repairing,
        dup_inodes,
    };
    Checked {
        report,
        state: Some(state),
    }
}

/// Opens the file system read-only; on failure the report says why.
fn open_checked(dev: Arc<Device>, opts: &CheckOptions, report: &mut Report) -> Option<Fs> {
    let options = OpenOptions {
        read_only: true,
        superblock: opts.superblock,
    };
    let opened = match open_fs(dev, options) {
        Ok(o) => o,
        Err(fail) => {
            report.notes = fail.notes;
            report.aborted = Some(fail.message);
            report.forced_uncorrected = fail.exit & 4 != 0;
            return None;
        }
    };
    report.notes.extend(opened.notes);
    report.findings.extend(opened.findings);
    let label = opened.fs.sb().s_volume_name();
    let end = label.iter().position(|&b| b == 0).unwrap_or(label.len());
    report.label = String::from_utf8_lossy(&label[..end]).into_owned();
    Some(opened.fs)
}

/// What the checks before pass 1 leave for it.
struct PrePass {
    /// The bad blocks list.
    bad_blocks: Vec<u64>,
    /// The resize inode cannot be read (pass 1 then stops the check).
    resize_unreadable: bool,
}

/// The checks before pass 1: MMP, the journal, the superblock and the
/// descriptors, the resize inode, and the bad blocks list. `None` if one
/// of them stopped the check (the report says why).
fn pre_pass(fs: &Fs, io: &mut Io<'_>, opts: &CheckOptions, report: &mut Report) -> Option<PrePass> {
    if let Some((finding, fatal)) = super_check::check_mmp(fs, io, opts.mmp_held) {
        report.findings.extend(finding);
        report.aborted = Some(fatal.reason);
        report.forced_uncorrected = fatal.uncorrected;
        return None;
    }
    let jc = journal::check_journal(fs, io, opts.external_journal.as_deref(), opts.repairing);
    report.findings.extend(jc.findings);
    if let Some(why) = jc.fatal {
        report.aborted = Some(why);
        report.forced_uncorrected = true;
        return None;
    }
    let sc = match super_check::check_super_block(fs) {
        Ok(sc) => sc,
        Err(fatal) => {
            report.aborted = Some(fatal.reason);
            report.forced_uncorrected = fatal.uncorrected;
            return None;
        }
    };
    report.findings.extend(sc.findings);
    // As e2fsck, asked only when it may write.
    if opts.repairing {
        report.findings.extend(super_check::rev0_with_features(fs));
    }
    if let Some(t) = opts.times {
        report.findings.extend(super_check::future_times(fs, t));
    }
    report
        .findings
        .extend(super_check::check_resize_inode(fs, io));
    let resize_unreadable = super_check::resize_inode_unreadable(fs, io);
    // A bitmap or inode table at block 0 would have to be relocated.
    for (groups, what) in [
        (&sc.missing_block_bitmap, "block bitmap"),
        (&sc.missing_inode_bitmap, "inode bitmap"),
        (&sc.missing_inode_table, "inode table"),
    ] {
        for &g in groups {
            report
                .findings
                .push(Finding::new(Code::RelocateMetadata).group(g).detail(what));
        }
    }
    let (bad_blocks, bb_note) = pass1::read_bad_blocks_list(fs, io);
    if let Some(n) = bb_note {
        report.notes.push(n);
    }
    Some(PrePass {
        bad_blocks,
        resize_unreadable,
    })
}

/// Passes 1 and 2 as one pipeline: inode-table chunks feed directory
/// blocks to pass 2 as they are found. Returns pass 1's output (its end
/// included) and pass 2's per-worker results.
fn passes_1_and_2<'a>(
    io: &mut Io<'a>,
    opts: &CheckOptions,
    p1cx: &pass1::Pass1<'a>,
    p2cx: &pass2::P2Ctx<'a>,
    tl: &mut Timeline,
    report: &mut Report,
) -> (pass1::P1Out, Vec<pass2::P2Acc>) {
    let fs = p1cx.fs;
    let table_abort = p1cx.table_abort();
    let limit = table_abort.as_ref().map_or(u32::MAX, |a| a.ino);
    // The bad blocks inode first: what it lists decides how the inode
    // tables are read.
    let mut p1 = if limit > 1 {
        p1cx.check_bad_blocks_inode(io)
    } else {
        pass1::P1Out::default()
    };
    p2cx.policies.add(std::mem::take(&mut p1.policies));
    let mut pending = std::mem::take(&mut p1.dir_work);
    let ipg = fs.geo.inodes_per_group;
    let chunks: Vec<pass1::Chunk> = pass1::chunks(fs)
        .into_iter()
        .filter(|c| c.group * ipg + c.first + 1 < limit)
        .collect();
    let budget = if opts.auto_threads {
        scheduler::Budget::auto(opts.threads)
    } else {
        scheduler::Budget::fixed(opts.threads)
    };
    let run_opts = pipeline::stages::RunOptions {
        budget: &budget,
        channel_capacity: 4096,
        batch: 256,
        idle_priority: opts.idle_priority,
    };
    if let Some(p) = opts.progress {
        let dirs: u64 = (0..fs.geo.group_count)
            .map(|g| u64::from(fs.gd(g).used_dirs_count()))
            .sum();
        let inodes: u64 = chunks.iter().map(|c| u64::from(c.count)).sum();
        p.start(
            u64::from(fs.geo.group_count),
            fs.geo.blocks_count,
            inodes,
            dirs,
        );
    }
    let prefetch = prefetch_chunks(fs, opts.choices.readahead_kb);
    let job = CheckJob {
        fs,
        p1: p1cx,
        p2: p2cx,
        chunks: &chunks,
        progress: opts.progress,
        prefetch,
        stop: opts.interrupt,
    };
    for c in chunks.iter().take(prefetch) {
        let (off, len) = pass1::chunk_extent(fs, c);
        fs.dev.prefetch(off, len);
    }
    tl.mark("set-up");
    let (ctxs, stats) = pipeline::stages::run(&job, &chunks, &run_opts);
    if let Some(p) = opts.progress {
        p.pass1_over();
    }
    tl.mark("passes 1 and 2");
    report.diagnostics.push(format!(
        "passes 1-2: {} directory blocks deferred until pass 1 ended; measured cost {:.0} ns per inode, {:.0} ns per directory block; {} stage changes; smallest thread budget {}",
        stats.deferred, stats.cost_ns[0], stats.cost_ns[1], stats.migrations, stats.min_budget
    ));
    let mut accs = Vec::with_capacity(ctxs.len() + 1);
    for c in ctxs {
        p1.append(c.p1);
        accs.push(c.p2);
    }
    if !pending.is_empty() {
        // Directory blocks of the inodes checked before the run (none in
        // practice: inode 1 is never a directory).
        let mut acc = pass2::P2Acc::default();
        let mut bufs = Vec::new();
        let mut rd = fs.dev.reader();
        pass2::check_batch(
            p2cx,
            io,
            rd.as_mut(),
            &mut acc,
            &mut bufs,
            &mut pending,
            true,
            &mut |_| {},
        );
        accs.push(acc);
    }
    p1.abort = AbortAt::earliest(p1.abort.take(), table_abort);
    p1cx.finish(io, &mut p1);
    tl.mark("end of pass 1");
    report.findings.append(&mut p1.findings);
    p1.frag_lines.sort_by_key(|l| (l.0, l.1));
    report.pass1_lines = p1.frag_lines.drain(..).map(|l| l.2).collect();
    (p1, accs)
}

/// Passes 1B to 5 and the post-pass checks, each run only while nothing
/// has stopped the check.
struct LaterPasses<'r, 'a> {
    fs: &'a Fs,
    maps: &'a Maps,
    io: &'r mut Io<'a>,
    opts: &'r CheckOptions,
    p1: &'r pass1::P1Out,
    tl: &'r mut Timeline,
    /// Pass 1B's owners of shared blocks.
    dup_inodes: std::collections::BTreeMap<u32, Vec<u64>>,
    report: &'r mut Report,
    /// How many of the report's findings the stream was told of.
    emitted: std::cell::Cell<usize>,
}

impl<'a> LaterPasses<'_, 'a> {
    /// Runs them; returns where the check stopped, if it did, and pass
    /// 2's results when pass 2 ran.
    fn run(
        &mut self,
        mut abort: Option<AbortAt>,
        p2cx: &mut pass2::P2Ctx<'a>,
        accs: Vec<pass2::P2Acc>,
    ) -> (Option<AbortAt>, Option<pass2::P2Out>) {
        let (fs, maps) = (self.fs, self.maps);
        self.asked(0);
        if self.opts.interrupted() {
            return (abort, None);
        }
        if abort.is_none() {
            let p1b = pass1b::run(fs, maps);
            self.tl.mark("pass 1B");
            let from = self.report.findings.len();
            self.report.findings.extend(p1b.findings);
            self.asked(from);
            abort = p1b.abort;
            self.dup_inodes = p1b.dup_inodes;
        }
        if abort.is_some() {
            return (abort, None);
        }
        let mut p2 = pass2::merge(
            p2cx,
            self.io,
            accs,
            &self.p1.dx_dirs,
            &self.p1.ea_inode_refs,
        );
        self.tl.mark("pass 2 merge");
        let from = self.report.findings.len();
        self.report.findings.append(&mut p2.findings);
        self.asked(from);
        abort = p2.abort.clone();
        if self.opts.interrupted() {
            return (abort, Some(p2));
        }
        if abort.is_none() {
            // A repair that sets a regular file's size to 2 GiB or more
            // turns large_file on as it writes the size, in pass 1, as
            // e2fsck's library does: pass 2 then finds it on.
            let set_by_a_size = self.report.findings.iter().any(|f| {
                f.code == Code::BadISize
                    && f.expected().is_some_and(|v| v >= 0x8000_0000)
                    && f.ino
                        .is_some_and(|i| i != 0 && maps.inode_reg.get(u64::from(i - 1)))
                    && crate::ctx::answered_yes(
                        self.opts.repairing,
                        self.opts.answers.as_deref(),
                        f,
                    )
            });
            if self.p1.stats.large_files > 0
                && !set_by_a_size
                && !fs.geo.ro_compat.contains(RoCompatFeatures::LARGE_FILE)
            {
                self.report
                    .findings
                    .push(Finding::new(Code::FeatureLargeFiles));
            }
            self.stream(None, &p2.dirs);
            self.phase(3);
            let mut p3 = pass3::run(fs, maps, &p2);
            if self.opts.repairing {
                let answers = self.opts.answers.as_deref();
                pass3::answer_yes(fs, maps, self.io, &p2, &mut p3, answers);
            }
            self.tl.mark("pass 3");
            let from = self.report.findings.len();
            self.report.findings.extend(p3.findings);
            self.asked(from);
            abort = p3.abort;
            if abort.is_none() {
                self.stream(Some(Pass::P3), &p2.dirs);
            }
        }
        if self.opts.interrupted() {
            return (abort, Some(p2));
        }
        if abort.is_none() {
            self.phase(4);
            let p4 = pass4::run(
                fs,
                maps,
                p2cx,
                &p2.counted,
                &self.p1.ea_inode_refs,
                self.opts.repairing,
            );
            self.tl.mark("pass 4");
            let from = self.report.findings.len();
            self.report.findings.extend(p4.findings);
            self.asked(from);
            abort = p4.abort;
            if abort.is_none() {
                self.stream(Some(Pass::P4), &p2.dirs);
            }
        }
        if abort.is_none() && !self.opts.interrupted() {
            abort = self.pass5_and_after();
            if abort.is_none() {
                self.stream(Some(Pass::P5), &p2.dirs);
            }
        }
        (abort, Some(p2))
    }

    /// Pass 5, then the orphan file and the quota checks.
    fn pass5_and_after(&mut self) -> Option<AbortAt> {
        let fs = self.fs;
        self.phase(5);
        let mut abort = None;
        let from = self.report.findings.len();
        let answers = self.opts.answers.as_deref();
        match pass5::run(fs, self.maps, self.opts.repairing, answers) {
            Ok(f) => self.report.findings.extend(f),
            Err(why) => abort = Some(AbortAt::new(Pass::P5, 0, why.to_string())),
        }
        self.tl.mark("pass 5");
        self.report
            .findings
            .extend(postpass::check_orphan_file(fs, self.io));
        self.report
            .findings
            .extend(postpass::check_quota(fs, self.io, &self.p1.quota));
        self.asked(from);
        abort
    }

    /// Lets whoever answers ask about the findings from `from` on (a
    /// pass's), in report order.
    fn asked(&self, from: usize) {
        if let (Some(a), true) = (&self.opts.answers, self.opts.repairing) {
            let mut found = self.report.findings[from..].to_vec();
            found.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
            a.pass_done(&found);
        }
    }

    /// Tells the listener (if any) what the check found since it last
    /// told it, named and sorted as the report names and sorts it: after
    /// pass 2 (`pass` None), by pass (the checks before pass 1, passes 1,
    /// 1B and 2); after a later pass, all of it under that pass (pass 4
    /// also judges the bad inodes no entry reached, with pass 2's
    /// problems). Only a read-only check streams (a repair's report is
    /// its rounds').
    fn stream(&self, pass: Option<Pass>, dirs: &pass2::DirTable) {
        let Some(s) = self.opts.stream.as_ref().filter(|_| !self.opts.repairing) else {
            return;
        };
        if self.opts.interrupted() {
            return;
        }
        let from = self.emitted.replace(self.report.findings.len());
        let mut found: Vec<Finding> = self.report.findings[from..].to_vec();
        crate::paths::name_findings(self.fs, self.maps, dirs, &mut found);
        found.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        found.dedup();
        let notes = &self.report.notes;
        match pass {
            Some(p) => s.pass_done(p, &found, notes, &[]),
            None => {
                for p in [Pass::Super, Pass::P1, Pass::P1B, Pass::P2] {
                    let mine: Vec<Finding> = found
                        .iter()
                        .filter(|f| f.code.pass() == p)
                        .cloned()
                        .collect();
                    let lines: &[String] = if p == Pass::P1 {
                        &self.report.pass1_lines
                    } else {
                        &[]
                    };
                    s.pass_done(p, &mine, notes, lines);
                }
            }
        }
    }

    fn phase(&self, n: u8) {
        if let Some(p) = self.opts.progress {
            p.phase(n);
        }
    }
}

/// The summary of a check that ran to the end.
fn summary(fs: &Fs, st: &pass1::Stats, counted: &pass2::RefCounts, bad_blocks: usize) -> Summary {
    let (links, extra_links) = counted.iter().fold((0u64, 0u64), |(all, extra), c| {
        (all + u64::from(c), extra + u64::from(c.saturating_sub(1)))
    });
    let sb = fs.sb();
    let inodes_used = sb.s_inodes_count().wrapping_sub(sb.s_free_inodes_count());
    let blocks_used = sb.blocks_count().wrapping_sub(sb.free_blocks_count());
    let depths = st
        .extent_depth
        .iter()
        .rposition(|&n| n > 0)
        .map_or(0, |i| i + 1);
    Summary {
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
        links,
        extra_links,
        fragmented_files: st.fragmented,
        fragmented_dirs: st.fragmented_dir,
        ind_dind_tind: [st.ind, st.dind, st.tind],
        extent_depth: st.extent_depth[..depths].to_vec(),
        bad_blocks: bad_blocks as u64,
        large_files: st.large_files,
    }
}

/// Wall time per phase, for `-v`.
struct Timeline {
    last: std::time::Instant,
    phases: Vec<(&'static str, f64)>,
}

impl Timeline {
    fn new() -> Self {
        Timeline {
            last: std::time::Instant::now(),
            phases: Vec::new(),
        }
    }

    fn mark(&mut self, what: &'static str) {
        let now = std::time::Instant::now();
        self.phases
            .push((what, now.duration_since(self.last).as_secs_f64()));
        self.last = now;
    }

    fn summary(&self) -> String {
        let parts: Vec<String> = self
            .phases
            .iter()
            .map(|(w, t)| format!("{w} {t:.3} s"))
            .collect();
        format!("time: {}", parts.join(", "))
    }
}

/// How many inode-table chunks are fetched ahead of the workers.
const PREFETCH_CHUNKS: usize = 8;

/// Chunks to read ahead: the default, or as many as `readahead_kb` holds
/// (e2fsck's `-E readahead_kb`; 0 turns read-ahead off).
fn prefetch_chunks(fs: &Fs, readahead_kb: Option<u64>) -> usize {
    match readahead_kb {
        // Without the kernel's read-ahead, the device's queue is kept
        // full by asking further ahead.
        None if fs.dev.is_direct() => PREFETCH_CHUNKS * 4,
        None => PREFETCH_CHUNKS,
        Some(kb) => {
            let chunk_bytes = u64::from(pass1::CHUNK_INODES) * u64::from(fs.geo.inode_size);
            usize::try_from(kb.saturating_mul(1024) / chunk_bytes.max(1)).unwrap_or(usize::MAX)
        }
    }
}

/// Passes 1 and 2 as a two-stage pipeline job.
struct CheckJob<'a> {
    fs: &'a crate::fs::Fs,
    p1: &'a pass1::Pass1<'a>,
    p2: &'a pass2::P2Ctx<'a>,
    chunks: &'a [pass1::Chunk],
    progress: Option<&'a crate::progress::Progress>,
    /// Inode-table chunks read ahead of the workers (0: none).
    prefetch: usize,
    /// Set when the check is to stop: the stages then skip their work.
    stop: Option<&'a std::sync::atomic::AtomicBool>,
}

impl CheckJob<'_> {
    fn stopped(&self) -> bool {
        self.stop
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// One worker's reader, outputs and scratch space.
struct WorkerCtx<'a> {
    io: Io<'a>,
    /// The reader for batches of directory blocks (the checks make their
    /// own small reads through `io` meanwhile).
    batch_rd: Box<dyn pipeline::Reader>,
    p1: pass1::P1Out,
    p2: pass2::P2Acc,
    bufs: Vec<u8>,
    ranges: Vec<u64>,
}

impl<'a> pipeline::stages::Job for CheckJob<'a> {
    type Ctx = WorkerCtx<'a>;
    type Chunk = pass1::Chunk;
    type Work = pass1::DirWork;

    fn make_ctx(&self) -> WorkerCtx<'a> {
        WorkerCtx {
            io: Io::new(self.fs),
            batch_rd: self.fs.dev.reader(),
            p1: pass1::P1Out::default(),
            p2: pass2::P2Acc::default(),
            bufs: Vec::new(),
            ranges: Vec::new(),
        }
    }

    fn chunk_elements(&self, chunk: &pass1::Chunk) -> u64 {
        u64::from(chunk.count)
    }

    fn stage1(
        &self,
        ctx: &mut WorkerCtx<'a>,
        index: usize,
        chunk: &pass1::Chunk,
        emit: &mut dyn FnMut(pass1::DirWork),
    ) {
        if self.stopped() {
            return;
        }
        if let Some(ahead) = self
            .chunks
            .get(index + self.prefetch)
            .filter(|_| self.prefetch > 0)
        {
            let (off, len) = pass1::chunk_extent(self.fs, ahead);
            self.fs.dev.prefetch(off, len);
        }
        let read_ahead = self.prefetch > 0 && self.p2.wants_prefetch();
        let mut out = self.p1.check_chunk(&mut ctx.io, *chunk, read_ahead);
        if read_ahead {
            prefetch_dir_blocks(self.fs, &out.dir_work, &mut ctx.ranges);
        }
        if let Some(p) = self.progress {
            p.inodes(u64::from(chunk.count), out.dir_work.len() as u64);
        }
        for w in out.dir_work.drain(..) {
            emit(w);
        }
        self.p2.policies.add(std::mem::take(&mut out.policies));
        ctx.p1.append(out);
    }

    fn stage2(
        &self,
        ctx: &mut WorkerCtx<'a>,
        batch: &mut Vec<pass1::DirWork>,
        last: bool,
        defer: &mut dyn FnMut(pass1::DirWork),
    ) {
        if self.stopped() {
            batch.clear();
            return;
        }
        let n = batch.len() as u64;
        let mut deferred = 0u64;
        pass2::check_batch(
            self.p2,
            &mut ctx.io,
            ctx.batch_rd.as_mut(),
            &mut ctx.p2,
            &mut ctx.bufs,
            batch,
            last,
            &mut |w| {
                deferred += 1;
                defer(w);
            },
        );
        if let Some(p) = self.progress {
            p.dir_blocks(n - deferred);
        }
    }
}

/// Asks the kernel to start reading the directory blocks pass 1 has just
/// found, so they are on their way while they wait in the channel. Runs
/// of adjacent blocks become one request.
fn prefetch_dir_blocks(fs: &crate::fs::Fs, work: &[pass1::DirWork], blks: &mut Vec<u64>) {
    blks.clear();
    blks.extend(
        work.iter()
            .filter(|w| w.pblk != 0 && w.inline.is_none())
            .map(|w| w.pblk),
    );
    fs.prefetch_blocks(blks);
}
