//! The man page and the shell completions, generated from the command
//! line's definition. The generated files are committed (`ext4chk.8`,
//! `contrib/completions/`); the tests here fail when they no longer match
//! the options, and `EXT4CHK_BLESS=1 cargo test` writes them anew.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use clap::CommandFactory;

    use crate::cli::Args;

    /// Sections the options cannot say: exit codes, extended options,
    /// the fsck.ext4 personality, the device syntax.
    const EXTRA: &str = r#".SH "EXTENDED OPTIONS"
.TP
\fBea_ver=\fR\fI1|2\fR
The version of extended attribute blocks to accept.
.TP
\fBjournal_only\fR
Replay the journal if it needs it, then stop (unless the check is forced).
.TP
\fBdiscard\fR, \fBnodiscard\fR
After a repair that leaves the file system clean, discard its free blocks (trim on a device, punched holes in an image file). Off by default; never with \fB\-n\fR or an undo file.
.TP
\fBreadahead_kb=\fR\fIN\fR
How much of the inode tables is read ahead of the workers; 0 turns read-ahead off.
.TP
\fBfragcheck\fR
List the discontiguous blocks of every file.
.TP
\fBbmap2extent\fR
Convert block-mapped files and directories to extent trees.
.TP
\fBfixes_only\fR
Repair damage only (it cannot be combined with \fB\-D\fR or \fBbmap2extent\fR): extent trees that could be shorter or narrower are neither reported nor rebuilt.
.TP
\fBoptimize_extents\fR, \fBno_optimize_extents\fR
Whether extent trees that could be shorter (a level whose entries would fit in the level above) or narrower (a level with more than a block's worth of room to spare) are reported and, in a repair, rebuilt packed, as e2fsck's pass 1E rebuilds them. On by default; preen leaves such trees, as e2fsck \-p does. The rebuild is an optimisation, not a fix: alone, it leaves the exit code 0.
.TP
\fBinode_count_fullmap\fR, \fBno_inode_count_fullmap\fR
Accepted for e2fsck compatibility; ext4chk's link counts need no choice.
.TP
\fBunshare_blocks\fR
Give every file its own copy of blocks it shares with others, and clear the shared_blocks feature (implies \fB\-f\fR). With \fB\-n\fR, shared blocks are accepted.
.TP
\fBcheck_encoding\fR
Check the names in case-folded directories against the file name encoding.
.SH "DEVICES"
\fIDEVICE\fR is an image file or a block device. \fIIMAGE\fR\fB?offset=\fR\fIBYTES\fR checks the file system that starts \fIBYTES\fR into the image, as e2fsprogs does; \fB\-\-partition\fR \fIN\fR finds partition \fIN\fR in a GPT or MBR partition table.
.SH "AS FSCK.EXT4"
Installed or linked as \fBfsck.ext4\fR, \fBfsck.ext3\fR, \fBfsck.ext2\fR or \fBe2fsck\fR, ext4chk behaves as e2fsck: without \fB\-f\fR it skips a file system that is marked clean and has reached neither its maximum mount count nor its check interval, printing e2fsck's "clean" line. Without \fB\-n\fR, \fB\-p\fR or \fB\-y\fR it repairs interactively, as e2fsck does: a clean file system is skipped first, then, at a terminal, the whole plan is shown grouped by kind of problem (answer \fBa\fR to fix it all, \fBo\fR to be asked about each problem as e2fsck asks, \fBq\fR to quit without changes). Each question takes one keystroke: \fBy\fR, \fBn\fR, \fBa\fR (yes to this and every later question), Enter for the default; Ctrl\-C stops (exit 32). A problem answered no is left as it is, and nothing answered no is written; only the superblock's error state records it. Without a terminal (and without \fBE2FSCK_FORCE_INTERACTIVE\fR) it exits 8, as e2fsck. Run as \fBext4chk\fR it always checks fully, without a mode it checks read\-only, and \fB\-\-interactive\fR asks.
.SH "CONFIGURATION"
ext4chk reads e2fsck's configuration file, \fB$E2FSCK_CONFIG\fR or \fI/etc/e2fsck.conf\fR (a directory: every file in it whose name has only letters, digits, \fB_\fR and \fB\-\fR), with e2fsck's syntax. A syntax error stops the run with one line naming the file and the line (exit 8); a relation it does not understand is named on standard error and ignored. Applied from \fB[options]\fR: \fBbroken_system_clock\fR, \fBaccept_time_fudge\fR (and \fBbuggy_init_scripts\fR), \fBdefer_check_on_battery\fR, \fBreadahead_kb\fR, \fBallow_cancellation\fR, \fBmax_count_problems\fR (in the text report; JSON keeps every finding); \fBno_optimize_extents\fR (as \fB\-E no_optimize_extents\fR); read and without effect: \fBinode_count_fullmap\fR (ext4chk keeps no such map), \fBindexed_dir_slack_percentage\fR (rebuilt indexes keep 20% free), \fBlog_dir\fR and \fBlog_filename\fR. \fB[problems]\fR, per problem code (\fB0x040003 = { ... }\fR): \fBpreen_ok\fR, \fBno_ok\fR, \fBno_default\fR, \fBforce_no\fR, \fBpreen_nomessage\fR, \fBmax_count\fR, \fBno_nomsg\fR. \fB[defaults] undo_dir\fR names where \fB\-z ""\fR puts its undo file (\fBE2FSPROGS_UNDO_DIR\fR wins). ext4chk's own \fB[ext4chk] undo = true\fR keeps an undo file for every repair, named as \fB\-z ""\fR names it. \fBE2FSCK_FIXES_ONLY\fR is \fB\-E fixes_only\fR; \fBE2FSCK_TIME\fR sets the clock.
.SH "SHARED STORAGE"
On a file system with multiple\-mount protection (the \fBmmp\fR feature), a repair follows e2fsck's protocol before it writes: it watches the protection block for twice the update interval and a second (11 s at the default 5 s), refuses with exit 8 if another node writes it meanwhile, claims it and watches again, then marks it as being checked until it ends (on an error too). A block marked by another checker (one that was killed, say) or by an operation nothing names is refused with exit 12 and the \fBtune2fs \-f \-E clear_mmp\fR remedy. A read\-only check reads the block and does not wait.
.SH "ONLINE CHECKS"
\fBext4chk \-\-online\fR \fIMOUNTPOINT\fR checks a mounted ext2/3/4 file system while it stays in use, read\-only. The check reads the device through the page cache, where the kernel's metadata lives. Errors it finds are confirmed before they are reported. The file system is frozen for at most \fB\-\-max\-freeze\fR milliseconds (200 by default), the blocks the check read are copied, the file system is thawed, and the copy is checked again. A watchdog process thaws the file system if ext4chk dies while it is frozen. Orphans and lazily kept free counts are not findings. The exit status is e2scrub's: 0 clean (recorded with \fBtune2fs \-C 0 \-T now\fR), 6 damage confirmed (marked with \fBtune2fs \-E force_fsck\fR for the next boot), 8 could not check. \fIcontrib/systemd/\fR has units that check every mounted ext4 file system weekly.
.SH "WATCHING FOR ERRORS"
\fBext4chk \-\-watch\fR [\fIMOUNTPOINT\fR...] listens for the metadata errors ext4 reports to fanotify (\fBFAN_FS_ERROR\fR, Linux 5.16 and later) on the file systems mounted at \fIMOUNTPOINT\fR, or with none on every mounted ext2/3/4 file system, following mounts and unmounts. For each error it writes an \fBevent\fR record (the error number, the count of errors since the last event, the inode involved and its path) and runs \fBext4chk \-\-online\fR on the file system, in a process of its own that dies with the watch, with the same \fB\-\-max\-freeze\fR; the outcome is a \fBcheck\fR record and each confirmed problem a \fBfinding\fR record with the fields of the JSON report's findings. Records are JSON objects, one per line, on standard output or appended to \fB\-\-log\fR \fIFILE\fR (\fIdocs/watch.md\fR describes them). \fB\-\-on\-error\fR \fICOMMAND\fR runs (with \fBsh \-c\fR) when damage is confirmed, with the check's JSON report on its standard input and \fBEXT4CHK_MOUNT\fR and \fBEXT4CHK_DEVICE\fR set. One check runs per file system at a time, and at most one per \fB\-\-min\-interval\fR (10m by default) for the kernel's events; events met meanwhile are counted and checked once the interval has passed. \fB\-\-every\fR \fIDURATION\fR adds checks on a schedule, at idle I/O priority. Durations are a number with \fBs\fR, \fBm\fR, \fBh\fR or \fBd\fR. Nothing is repaired: with \fB\-y\fR, \fB\-p\fR or \fB\-\-interactive\fR it exits 16. Confirmed damage is marked for the next boot as \fB\-\-online\fR marks it; after a kernel event a clean check leaves the mount count and last check time, and the kernel's error state, as they are. It runs until SIGINT or SIGTERM (exit 0); it exits 20 when not run as root, 21 on a kernel without \fBFAN_FS_ERROR\fR, 22 when a mount point given is not an ext2/3/4 mount, 8 when it cannot go on. \fIcontrib/systemd/ext4chk\-watch.service\fR runs it as a service, its records in the journal under \fBext4chk\fR.
.SH "SIGNALS"
SIGINT (Ctrl\-C) and SIGTERM stop a read\-only check within a second: what it found so far is printed, marked as incomplete (\fBcancelled\fR in the JSON report), and the exit code is 32. A repair stops between two complete sets of changes.
.SH "JSON REPORT"
With \fB\-\-format json\fR, every run prints one JSON document on standard output, a usage error or a refusal included (its \fBerror\fR field then says why). The document has the exit code, whether the file system was clean, modified, skipped or the run a dry run, the label, every finding (its code, e2fsck's problem number, the pass, whether it was fixed, the paths of the directory and inode where known, and its message), the summary counts, and for a repair each check's time and each round's fixes. Its shape is versioned (\fBversion\fR) and described by \fIreport.schema.json\fR (JSON Schema 2020\-12), installed beside this page.
.SH "MOUNTED DEVICES"
A mounted file system is never repaired: \fB\-y\fR and \fB\-p\fR exit 8, except on the root file system mounted read\-only (as at boot), which is repaired in place; when anything changed the exit code asks for a reboot (3). A read\-only check (\fB\-n\fR) of a mounted device warns and goes on, but what it reads may be changing under it, so its verdict on a busy file system is not reliable.
.SH "EXAMPLES"
.TP
\fBext4chk /dev/sdb1\fR
Check read\-only, on every core.
.TP
\fBext4chk \-\-threads auto \-\-repair \-\-undo sdb1.undo /dev/sdb1\fR
Repair, saving what is overwritten; \fBe2undo sdb1.undo /dev/sdb1\fR puts it back.
.TP
\fBext4chk \-\-repair \-\-dry\-run \-\-format json image.img\fR
What would a repair change? Nothing is written.
.TP
\fBfsck.ext4 \-p /dev/sda2\fR
What a boot runs: replay the journal, release orphans, and fix what e2fsck's preen fixes.
.SH "SEE ALSO"
\fBe2fsck\fR(8), \fBfsck\fR(8), \fBe2undo\fR(8), \fBdebugfs\fR(8), \fBtune2fs\fR(8), \fBmke2fs\fR(8), \fBext4\fR(5)
.SH "EXIT STATUS"
The exit status is e2fsck's, a sum of:
.TP
0
No errors.
.TP
1
File system errors were corrected.
.TP
2
The root file system was changed while mounted read-only; reboot.
.TP
4
File system errors were left uncorrected.
.TP
8
Operational error (the device cannot be opened or used, conflicting options).
.TP
16
Usage or syntax error.
.TP
32
The run was interrupted (SIGINT or SIGTERM).
"#;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    fn man_page() -> Vec<u8> {
        let man = clap_mangen::Man::new(Args::command())
            .section("8")
            .manual("System Administration")
            .source(format!("ext4chk {}", env!("CARGO_PKG_VERSION")));
        let mut out = Vec::new();
        man.render_title(&mut out).expect("render");
        man.render_name_section(&mut out).expect("render");
        out.extend_from_slice(synopsis(&Args::command()).as_bytes());
        man.render_description_section(&mut out).expect("render");
        man.render_options_section(&mut out).expect("render");
        out.extend_from_slice(EXTRA.as_bytes());
        man.render_version_section(&mut out).expect("render");
        out
    }

    /// The SYNOPSIS: every visible option with the name of its value
    /// (`-C FD`, `-E OPTIONS`, `-b BLOCK`), then the one device.
    fn synopsis(cmd: &clap::Command) -> String {
        let roff = |s: &str| s.replace('-', "\\-");
        let mut line = String::from(".SH SYNOPSIS\n\\fBext4chk\\fR");
        for a in cmd.get_arguments() {
            if a.is_positional() || a.is_hide_set() || a.get_id() == "help" {
                continue;
            }
            let mut names = Vec::new();
            if let Some(c) = a.get_short() {
                names.push(format!("\\fB{}\\fR", roff(&format!("-{c}"))));
            }
            if let Some(l) = a.get_long() {
                names.push(format!("\\fB{}\\fR", roff(&format!("--{l}"))));
            }
            let value = a
                .get_action()
                .takes_values()
                .then(|| {
                    a.get_value_names()
                        .and_then(|v| v.first())
                        .map_or_else(|| a.get_id().as_str().to_uppercase(), |v| v.to_string())
                })
                .map(|v| format!(" \\fI{}\\fR", roff(&v)))
                .unwrap_or_default();
            line.push_str(&format!(" [{}{value}]", names.join("|")));
        }
        line.push_str(" \\fIDEVICE\\fR\n");
        line
    }

    /// A shell's completions, registered for `fsck.ext4` (and e2fsck's
    /// other names) as well as `ext4chk`.
    fn completion(shell: clap_complete::Shell) -> Vec<u8> {
        use clap_complete::Shell;
        let mut cmd = Args::command();
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd, "ext4chk", &mut out);
        let names = ["fsck.ext4", "fsck.ext3", "fsck.ext2"];
        let more = match shell {
            Shell::Bash => names
                .iter()
                .map(|n| format!("complete -F _ext4chk -o nosort -o bashdefault -o default {n}\n"))
                .collect::<String>(),
            Shell::Fish => names
                .iter()
                .map(|n| format!("complete -c {n} --wraps ext4chk\n"))
                .collect(),
            _ => String::new(),
        };
        if shell == Shell::Zsh {
            let text = String::from_utf8_lossy(&out).replacen(
                "#compdef ext4chk",
                &format!("#compdef ext4chk {}", names.join(" ")),
                1,
            );
            return text.into_bytes();
        }
        out.extend_from_slice(more.as_bytes());
        out
    }

    /// Compares a generated file with the committed one (or writes it
    /// with EXT4CHK_BLESS=1).
    fn golden(path: &Path, now: &[u8]) {
        if std::env::var_os("EXT4CHK_BLESS").is_some() {
            if let Some(d) = path.parent() {
                std::fs::create_dir_all(d).expect("mkdir");
            }
            std::fs::write(path, now).expect("write");
            return;
        }
        let committed = std::fs::read(path).unwrap_or_default();
        assert!(
            committed == now,
            "{} does not match the command line; run EXT4CHK_BLESS=1 cargo test --bin ext4chk and commit it",
            path.display()
        );
    }

    #[test]
    fn the_man_page_matches_the_command_line() {
        let page = man_page();
        let text = String::from_utf8_lossy(&page);
        for flag in [
            "\\-\\-repair",
            "\\-\\-partition",
            "\\-C",
            "\\-b",
            "EXIT STATUS",
        ] {
            assert!(text.contains(flag), "the man page lacks {flag}");
        }
        golden(&root().join("ext4chk.8"), &page);
    }

    #[test]
    fn the_completions_match_the_command_line() {
        use clap_complete::Shell;
        for (shell, file) in [
            (Shell::Bash, "ext4chk.bash"),
            (Shell::Zsh, "_ext4chk"),
            (Shell::Fish, "ext4chk.fish"),
        ] {
            golden(
                &root().join("contrib/completions").join(file),
                &completion(shell),
            );
        }
    }
}
