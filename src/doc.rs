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
Repair damage only (it cannot be combined with \fB\-D\fR or \fBbmap2extent\fR). ext4chk rebuilds an extent tree only when it is deeper than allowed, which is a fix, so this is its behaviour anyway.
.TP
\fBoptimize_extents\fR, \fBno_optimize_extents\fR
Accepted for e2fsck compatibility. e2fsck rebuilds extent trees that could be narrower or shorter unless told not to; ext4chk does not rebuild them yet, so both leave such trees as they are.
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
Installed or linked as \fBfsck.ext4\fR, \fBfsck.ext3\fR, \fBfsck.ext2\fR or \fBe2fsck\fR, ext4chk behaves as e2fsck: without \fB\-f\fR it skips a file system that is marked clean and has reached neither its maximum mount count nor its check interval, printing e2fsck's "clean" line; a mode (\fB\-n\fR, \fB\-p\fR or \fB\-y\fR) must be given, as ext4chk does not ask questions. Run as \fBext4chk\fR it always checks fully, and without a mode it checks read-only.
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
The repair was interrupted.
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
        man.render_synopsis_section(&mut out).expect("render");
        man.render_description_section(&mut out).expect("render");
        man.render_options_section(&mut out).expect("render");
        out.extend_from_slice(EXTRA.as_bytes());
        man.render_version_section(&mut out).expect("render");
        out
    }

    fn completion(shell: clap_complete::Shell) -> Vec<u8> {
        let mut cmd = Args::command();
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd, "ext4chk", &mut out);
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
