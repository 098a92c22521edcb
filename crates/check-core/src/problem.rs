//! Problem codes: every kind of finding the checker can report.
//!
//! Each code has a stable kebab-case name, the number e2fsck uses for the
//! same problem (so reports can be compared with e2fsck's), the pass it
//! belongs to, whether it counts as an error, and a message template.
//! Templates name the finding's fields in braces: `{ino}`, `{ino2}`,
//! `{dir}`, `{blk}`, `{blk2}`, `{group}`, `{name}`, `{detail}`, and the
//! numbers of the finding's shape ([`Numbers`]) by name, such as `{found}`
//! and `{expected}`; `:x` and `:o` print a number in hex or octal.

use std::fmt;

use ext4_layout::types::Ino;

/// How a finding affects the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// A file system error: an unfixed one makes the exit code 4.
    Error,
    /// Worth reporting, but not an error on its own (e2fsck answers "no"
    /// to these without marking the file system invalid).
    Notice,
}

/// Which pass found a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pass {
    /// Superblock, group descriptors and journal, before pass 1.
    Super,
    /// Inodes, blocks and sizes.
    P1,
    /// Blocks claimed by more than one inode.
    P1B,
    /// Directory structure.
    P2,
    /// Directory connectivity.
    P3,
    /// Reference counts.
    P4,
    /// Group summary information.
    P5,
}

impl Pass {
    /// The heading printed before a pass's findings.
    pub fn heading(self) -> &'static str {
        match self {
            Pass::Super => "Checking superblock, group descriptors and journal",
            Pass::P1 => "Pass 1: Checking inodes, blocks, and sizes",
            Pass::P1B => "Pass 1B: Checking blocks claimed by more than one inode",
            Pass::P2 => "Pass 2: Checking directory structure",
            Pass::P3 => "Pass 3: Checking directory connectivity",
            Pass::P4 => "Pass 4: Checking reference counts",
            Pass::P5 => "Pass 5: Checking group summary information",
        }
    }

    /// A short name for JSON.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Super => "super",
            Pass::P1 => "1",
            Pass::P1B => "1B",
            Pass::P2 => "2",
            Pass::P3 => "3",
            Pass::P4 => "4",
            Pass::P5 => "5",
        }
    }
}

/// Where a fix changes nothing but the inode's own fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Local {
    No,
    Yes,
    /// Only for regular files (a directory's size bounds what pass 2
    /// reads, a symlink's what its target is).
    RegularOnly,
}

/// Where fixing a problem keeps the check's later findings valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keeps {
    No,
    Yes,
    /// For every inode but directories.
    NotForDirectories,
}

/// What a repair may do about a problem and what fixing it disturbs, as
/// e2fsck's problem table carries `PR_PREEN_OK` and its other flags. Each
/// code's policy is the bracketed column of the table below:
///
/// - `preen`: preen mode (`-p`) fixes it without asking;
/// - `fix`: a notice that still calls for a change (every error does);
/// - `pass5`: pass 5's rebuild of the bitmaps and counts fixes it;
/// - `local` / `local_regular`: the fix changes nothing but the inode's own
///   fields, for every inode / only for regular files, so pass 1's workers
///   may send it to the writer while they check;
/// - `keeps` / `keeps_nondir`: fixing it leaves the later passes' findings
///   valid (no block or inode changes hands, no entry changes), for every
///   inode / for all but directories;
/// - `yes`: under a repair the check judges the later passes as if it
///   were fixed;
///
/// and what the repair does about it, where the kind of fix decides how
/// the repair plans it:
///
/// - `clear`: the whole inode is cleared; `clear_blocks`: the same, for a
///   problem found in the inode's blocks;
/// - `dealloc`: the inode an entry names is deallocated with its entry;
/// - `blocks`: the inode's block map or extent tree is rebuilt;
/// - `reread`: a flag or feature changes how the inode's blocks are read;
/// - `unindex`: the directory's htree index is dropped;
/// - `quiet`: the fix does not count for the exit code; `restart`: the
///   check starts again after it (quiet too);
/// - `optional`: an optimisation e2fsck offers, not a fix (its
///   `PR_NOT_A_FIX`): preen leaves it, and answering no is no error;
/// - `settles`: a pass 4 fix after which pass 5 may rebuild in the same
///   round;
/// - `order(n)`: its place in e2fsck's checks of one inode in pass 1
///   (20, the default, for the checks of its blocks; a zero-length
///   directory, then the size and block count, come after them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixPolicy {
    /// Preen may fix it.
    pub preen: bool,
    /// A notice that calls for a change.
    pub fix_notice: bool,
    /// Pass 5's rebuild fixes it.
    pub rebuilt_by_pass5: bool,
    /// Under a repair the check already judges the passes after this one
    /// as if this problem were fixed, as e2fsck -y fixes it (an entry the
    /// fix clears is not counted, a directory reconnected is counted in
    /// /lost+found), so the fix keeps those findings valid.
    pub answered: bool,
    /// The fix clears the whole inode (e2fsck's "Clear inode?").
    pub clears_inode: bool,
    /// Among those, a clearing that comes from reading the inode's
    /// blocks: moot when a fix in the same inode changes how they are read.
    pub clears_from_blocks: bool,
    /// The fix deallocates the inode an entry names: its blocks and the
    /// inode freed, the entry cleared (met in pass 2, for an inode pass 1
    /// marked bad).
    pub deallocates: bool,
    /// The fix is to the inode's block map or extent tree, made after
    /// its field fixes.
    pub block_map: bool,
    /// The fix changes how the inode's blocks are read (a flag or a
    /// feature): the inode's block findings are stale after it.
    pub rereads_blocks: bool,
    /// The fix drops a directory's htree index (the directory stays,
    /// unindexed, for pass 3A to index again).
    pub drops_index: bool,
    /// Fixing it does not count for the exit code: e2fsck makes the fix
    /// while it reads the descriptors, or sets a time without counting
    /// a change, or makes it just before it restarts.
    pub quiet: bool,
    /// The fix makes the check start again from the top, as e2fsck
    /// restarts (nothing the check said after it can be trusted).
    pub restarts: bool,
    /// An optimisation, not a fix (e2fsck's `PR_NOT_A_FIX`): preen
    /// leaves it as e2fsck -p answers no, and it never counts for the
    /// exit code.
    pub optional: bool,
    /// A pass 4 fix that leaves block ownership as the check saw it, so
    /// pass 5's rebuild may follow it in the same round.
    pub settles_for_pass5: bool,
    /// Where the problem comes in e2fsck's sequence of checks of one
    /// inode in pass 1 (lower first); 20 when the table says nothing.
    pub inode_order: u8,
    /// A repair has no fix of its own for it (the table's `none`): the
    /// check never raises it under a repair, or a fix of another code
    /// found with it is what mends it, or e2fsck stops on it too.
    pub no_fix: bool,
    local: Local,
    keeps: Keeps,
}

impl FixPolicy {
    /// No column set.
    pub(crate) const NONE: FixPolicy = FixPolicy {
        preen: false,
        fix_notice: false,
        rebuilt_by_pass5: false,
        answered: false,
        clears_inode: false,
        clears_from_blocks: false,
        deallocates: false,
        block_map: false,
        rereads_blocks: false,
        drops_index: false,
        quiet: false,
        restarts: false,
        optional: false,
        settles_for_pass5: false,
        inode_order: 20,
        no_fix: false,
        local: Local::No,
        keeps: Keeps::No,
    };

    const fn preen(self) -> Self {
        FixPolicy {
            preen: true,
            ..self
        }
    }

    const fn none(self) -> Self {
        FixPolicy {
            no_fix: true,
            ..self
        }
    }

    const fn fix(self) -> Self {
        FixPolicy {
            fix_notice: true,
            ..self
        }
    }

    const fn pass5(self) -> Self {
        FixPolicy {
            rebuilt_by_pass5: true,
            ..self
        }
    }

    const fn yes(self) -> Self {
        FixPolicy {
            answered: true,
            ..self
        }
    }

    const fn clear(self) -> Self {
        FixPolicy {
            clears_inode: true,
            ..self
        }
    }

    const fn clear_blocks(self) -> Self {
        FixPolicy {
            clears_inode: true,
            clears_from_blocks: true,
            ..self
        }
    }

    const fn dealloc(self) -> Self {
        FixPolicy {
            deallocates: true,
            ..self
        }
    }

    const fn blocks(self) -> Self {
        FixPolicy {
            block_map: true,
            ..self
        }
    }

    const fn reread(self) -> Self {
        FixPolicy {
            rereads_blocks: true,
            ..self
        }
    }

    const fn unindex(self) -> Self {
        FixPolicy {
            drops_index: true,
            ..self
        }
    }

    const fn optional(self) -> Self {
        FixPolicy {
            optional: true,
            quiet: true,
            ..self
        }
    }

    const fn quiet(self) -> Self {
        FixPolicy {
            quiet: true,
            ..self
        }
    }

    const fn restart(self) -> Self {
        FixPolicy {
            restarts: true,
            quiet: true,
            ..self
        }
    }

    const fn settles(self) -> Self {
        FixPolicy {
            settles_for_pass5: true,
            ..self
        }
    }

    const fn order(self, n: u8) -> Self {
        FixPolicy {
            inode_order: n,
            ..self
        }
    }

    const fn local(self) -> Self {
        FixPolicy {
            local: Local::Yes,
            ..self
        }
    }

    const fn local_regular(self) -> Self {
        FixPolicy {
            local: Local::RegularOnly,
            ..self
        }
    }

    const fn keeps(self) -> Self {
        FixPolicy {
            keeps: Keeps::Yes,
            ..self
        }
    }

    const fn keeps_nondir(self) -> Self {
        FixPolicy {
            keeps: Keeps::NotForDirectories,
            ..self
        }
    }

    /// Whether the fix changes nothing but the inode's own fields, in an
    /// inode that is (or is not) a regular file.
    pub fn inode_local(&self, regular: bool) -> bool {
        match self.local {
            Local::No => false,
            Local::Yes => true,
            Local::RegularOnly => regular,
        }
    }

    /// Whether fixing it keeps the check's later findings valid, for an
    /// inode known to be a directory or not (`None`: no inode, or not
    /// known).
    pub fn keeps_check(&self, directory: Option<bool>) -> bool {
        match self.keeps {
            Keeps::No => false,
            Keeps::Yes => true,
            Keeps::NotForDirectories => directory == Some(false),
        }
    }
}

macro_rules! codes {
    ($( $(#[$m:meta])* $variant:ident = $e2:literal, $name:literal, $pass:ident, $sev:ident [$($flag:ident $(($arg:literal))?)*], $msg:literal; )*) => {
        /// A problem code. The discriminant-free enum keeps codes stable by
        /// name; [`Code::e2fsck_code`] gives e2fsck's number.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $( $(#[$m])* $variant, )*
        }

        impl Code {
            /// Every code, in table order.
            pub const ALL: &'static [Code] = &[ $( Code::$variant, )* ];

            /// The stable kebab-case name.
            pub fn name(self) -> &'static str {
                match self { $( Code::$variant => $name, )* }
            }

            /// The number e2fsck gives the same problem (0 where e2fsck has none).
            pub fn e2fsck_code(self) -> u32 {
                match self { $( Code::$variant => $e2, )* }
            }

            /// The pass that reports it.
            pub fn pass(self) -> Pass {
                match self { $( Code::$variant => Pass::$pass, )* }
            }

            /// Whether it is an error or a notice.
            pub fn severity(self) -> Severity {
                match self { $( Code::$variant => Severity::$sev, )* }
            }

            /// The message template.
            pub(crate) fn template(self) -> &'static str {
                match self { $( Code::$variant => $msg, )* }
            }

            /// Whether its findings name a directory (`{dir}` in the
            /// message): pass 2's are mended by walking that directory.
            pub fn names_directory(self) -> bool {
                self.template().contains("{dir}")
            }

            /// How a repair treats it: the table's bracketed column.
            pub const fn policy(self) -> FixPolicy {
                match self { $( Code::$variant => FixPolicy::NONE $(.$flag($($arg)?))*, )* }
            }
        }
    };
}

codes! {
    /// superblock-primary-bad (no e2fsck equivalent).
    SuperblockUsedBackup = 0x000000, "superblock-primary-bad", Super, Notice [fix keeps],
        "the primary superblock is unusable ({detail}); the backup at block {blk} was used";
    /// superblock-from-backup (no e2fsck equivalent: its -b option).
    SuperblockFromBackup = 0x000000, "superblock-from-backup", Super, Notice [fix keeps],
        "the superblock at block {blk} was used, as asked; a repair writes it and its group descriptors to the primary place";
    /// state-not-clean (no e2fsck problem code: e2fsck marks the file
    /// system valid at the end of every repair).
    StateNotClean = 0x000000, "state-not-clean", Super, Notice [],
        "the file system was not marked clean (not cleanly unmounted, or checked from a backup superblock)";
    /// descriptors-primary-bad (e2fsck PR_0_CHECK_DESC_FAILED).
    DescriptorsUsedBackup = 0x000045, "descriptors-primary-bad", Super, Notice [fix keeps],
        "the primary group descriptors are unusable ({detail}); the backup at block {blk} was used";
    /// descriptors-bad (e2fsck PR_0_CHECK_DESC_FAILED).
    DescriptorsBad = 0x000045, "descriptors-bad", Super, Notice [],
        "the group descriptors look bad: {detail}";
    /// fs-size-wrong (e2fsck PR_0_FS_SIZE_WRONG).
    FsSizeWrong = 0x000005, "fs-size-wrong", Super, Notice [],
        "the file system is {blk} blocks long but the device holds only {blk2}";
    /// superblock-corrupt (e2fsck PR_0_MISC_CORRUPT_SUPER).
    SuperblockCorrupt = 0x00000b, "superblock-corrupt", Super, Notice [],
        "superblock field {detail} has an invalid value {found}";
    /// inode-count-wrong (e2fsck PR_0_INODE_COUNT_WRONG).
    InodeCountWrong = 0x00000d, "inode-count-wrong", Super, Notice [],
        "the inode count is {found}, should be {expected}";
    /// first-data-block-wrong (e2fsck PR_0_FIRST_DATA_BLOCK).
    FirstDataBlockWrong = 0x000008, "first-data-block-wrong", Super, Notice [],
        "the first data block is {found}, should be {expected}";
    /// bad-min-extra-isize (e2fsck PR_0_BAD_MIN_EXTRA_ISIZE).
    BadMinExtraIsize = 0x00004d, "bad-min-extra-isize", Super, Notice [fix],
        "s_min_extra_isize {found} is invalid";
    /// bad-want-extra-isize (e2fsck PR_0_BAD_WANT_EXTRA_ISIZE).
    BadWantExtraIsize = 0x00004e, "bad-want-extra-isize", Super, Notice [fix],
        "s_want_extra_isize {found} is invalid";
    /// meta-and-gdt-csum (e2fsck PR_0_META_AND_GDT_CSUM_SET).
    MetaAndGdtCsum = 0x000046, "meta-and-gdt-csum", Super, Notice [preen],
        "both metadata_csum and uninit_bg are set; uninit_bg should be cleared";
    /// csum-seed-without-metadata-csum (e2fsck PR_0_CSUM_SEED_WITHOUT_META_CSUM).
    CsumSeedWithoutMetaCsum = 0x00004b, "csum-seed-without-metadata-csum", Super, Notice [preen],
        "metadata_csum_seed is set without metadata_csum";
    /// 64bit-without-extents (e2fsck PR_0_64BIT_WITHOUT_EXTENTS).
    Bit64WithoutExtents = 0x000048, "64bit-without-extents", Super, Notice [preen],
        "64bit is set without extents";
    /// rev0-with-features (e2fsck PR_0_FS_REV_LEVEL). Raised only under
    /// a repair, as e2fsck asks only then.
    Rev0WithFeatures = 0x00001a, "rev0-with-features", Super, Notice [preen fix keeps],
        "the file system has feature flags set, but is a revision 0 file system";
    /// first-meta-bg-too-big (e2fsck PR_0_FIRST_META_BG_TOO_BIG).
    FirstMetaBgTooBig = 0x000049, "first-meta-bg-too-big", Super, Notice [fix],
        "s_first_meta_bg {found} is larger than the descriptor table ({limit} blocks)";
    /// block-bitmap-not-in-group (e2fsck PR_0_BB_NOT_GROUP).
    BlockBitmapNotInGroup = 0x000001, "block-bitmap-not-in-group", Super, Notice [fix],
        "the block bitmap of group {group} is not in the group (block {blk})";
    /// inode-bitmap-not-in-group (e2fsck PR_0_IB_NOT_GROUP).
    InodeBitmapNotInGroup = 0x000002, "inode-bitmap-not-in-group", Super, Notice [fix],
        "the inode bitmap of group {group} is not in the group (block {blk})";
    /// inode-table-not-in-group (e2fsck PR_0_ITABLE_NOT_GROUP).
    InodeTableNotInGroup = 0x000003, "inode-table-not-in-group", Super, Notice [fix],
        "the inode table of group {group} is not in the group (block {blk})";
    /// group-desc-checksum (e2fsck PR_0_GDT_CSUM).
    GroupDescChecksum = 0x000035, "group-desc-checksum", Super, Notice [preen fix quiet],
        "the descriptor checksum of group {group} is {found:x}, should be {expected:x}";
    /// group-uninit-without-csum (e2fsck PR_0_GDT_UNINIT).
    GroupUninitWithoutCsum = 0x000036, "group-uninit-without-csum", Super, Notice [preen fix quiet],
        "group {group} has uninit flags or unused inodes but descriptors have no checksums";
    /// last-group-block-uninit (e2fsck PR_0_BB_UNINIT_LAST).
    LastGroupBlockUninit = 0x000039, "last-group-block-uninit", Super, Notice [preen quiet],
        "the last group ({group}) is marked BLOCK_UNINIT";
    /// group-itable-unused-invalid (e2fsck PR_0_GDT_ITABLE_UNUSED).
    GroupItableUnusedInvalid = 0x000038, "group-itable-unused-invalid", Super, Notice [preen quiet],
        "group {group} has {found} unused inodes, more than its free inodes";
    /// future-last-mount (e2fsck PR_0_FUTURE_SB_LAST_MOUNT). A repair sets
    /// it to the time now; leaving it is no error.
    FutureLastMount = 0x000031, "future-last-mount", Super, Notice [preen fix keeps quiet],
        "the last mount time is {found} seconds in the future";
    /// future-last-write (e2fsck PR_0_FUTURE_SB_LAST_WRITE).
    FutureLastWrite = 0x000032, "future-last-write", Super, Notice [preen fix keeps quiet],
        "the last write time is {found} seconds in the future";
    /// future-last-mount-fudged (e2fsck PR_0_FUTURE_SB_LAST_MOUNT_FUDGED):
    /// less than the allowance ahead (a day, e2fsck.conf's
    /// accept_time_fudge), taken as a clock set wrong; set to now without
    /// asking.
    FutureLastMountFudged = 0x00003C, "future-last-mount-fudged", Super, Notice [preen fix keeps quiet],
        "the last mount time is {found} seconds in the future (less than a day: the hardware clock is probably set wrong)";
    /// future-last-write-fudged (e2fsck PR_0_FUTURE_SB_LAST_WRITE_FUDGED).
    FutureLastWriteFudged = 0x00003D, "future-last-write-fudged", Super, Notice [preen fix keeps quiet],
        "the last write time is {found} seconds in the future (less than a day: the hardware clock is probably set wrong)";
    /// journal-backup-updated (e2fsck PR_0_BACKUP_JNL). Repair only: the
    /// superblock's copy of the journal inode's block map is written. As
    /// for e2fsck, a message, not a fix: alone it leaves the exit code 0.
    JournalBackupUpdated = 0x00002D, "journal-backup-updated", Super, Notice [quiet],
        "the superblock's backup of the journal inode's block map was missing or stale";
    /// journal-v2-fields-cleared (e2fsck PR_0_CLEAR_V2_JOURNAL). Repair
    /// only: an internal journal's superblock claims more than one user;
    /// everything past the version 1 fields is cleared. Unlike the
    /// journal messages around it, e2fsck counts it as a fix.
    JournalV2FieldsCleared = 0x00002A, "journal-v2-fields-cleared", Super, Notice [fix],
        "the journal superblock claims {found} users of an internal journal; its fields past version 1's are cleared";
    /// journal-moved-hidden (e2fsck PR_0_MOVE_JOURNAL). Repair only: a
    /// journal that is a visible file moves to the hidden journal inode
    /// (a message for e2fsck, not a fix: it does not count for the exit
    /// code).
    JournalMovedToHidden = 0x000028, "journal-moved-hidden", Super, Notice [quiet],
        "the journal is a visible file (inode {ino}); it moves to the hidden journal inode";
    /// journal-replay-stopped (no e2fsck problem code: its "journal
    /// checksum error found"). Repair only: recovery stopped at a damaged
    /// transaction; what came before it was replayed.
    JournalReplayStopped = 0x000000, "journal-replay-stopped", Super, Notice [],
        "journal recovery stopped early: {detail}";
    /// invalid-quota-inode (e2fsck PR_0_INVALID_QUOTA_INO).
    InvalidQuotaInode = 0x00004f, "invalid-quota-inode", Super, Notice [fix],
        "the {detail} quota inode {ino} is invalid";
    /// resize-inode-with-meta-bg (e2fsck PR_0_DISABLE_RESIZE_INODE).
    DisableResizeInode = 0x000051, "resize-inode-with-meta-bg", Super, Notice [],
        "resize_inode and meta_bg are both set";
    /// reserved-gdt-without-resize-inode (e2fsck PR_0_NONZERO_RESERVED_GDT_BLOCKS).
    NonzeroReservedGdt = 0x00002e, "reserved-gdt-without-resize-inode", Super, Notice [],
        "s_reserved_gdt_blocks is {found} without resize_inode";
    /// resize-inode-not-clear (e2fsck PR_0_CLEAR_RESIZE_INODE).
    ClearResizeInode = 0x00002f, "resize-inode-not-clear", Super, Notice [],
        "the resize inode is not clear although resize_inode is off";
    /// resize-inode-invalid (e2fsck PR_0_RESIZE_INODE_INVALID).
    ResizeInodeInvalid = 0x000030, "resize-inode-invalid", Super, Notice [fix],
        "the resize inode is invalid ({detail})";
    /// hurd-filetype (e2fsck PR_0_HURD_CLEAR_FILETYPE).
    HurdFiletype = 0x00000e, "hurd-filetype", Super, Notice [],
        "a Hurd file system has the filetype feature";
    /// journal-needs-recovery (no e2fsck equivalent).
    JournalNeedsRecovery = 0x000000, "journal-needs-recovery", Super, Notice [preen],
        "the journal needs recovery; a read-only check does not replay it, so what follows describes the file system without it";
    /// journal-inode-bad (e2fsck PR_0_JOURNAL_BAD_INODE).
    JournalBadInode = 0x00000f, "journal-inode-bad", Super, Notice [preen],
        "the journal inode is invalid ({detail})";
    /// journal-superblock-bad (e2fsck PR_0_JOURNAL_BAD_SUPER).
    JournalBadSuper = 0x000015, "journal-superblock-bad", Super, Notice [preen],
        "the journal superblock is corrupt ({detail})";
    /// journal-unsupported (e2fsck PR_0_JOURNAL_UNSUPP_INCOMPAT).
    JournalUnsupported = 0x000026, "journal-unsupported", Super, Notice [],
        "the journal uses unsupported features or version ({detail})";
    /// journal-multi-fs (e2fsck PR_0_JOURNAL_UNSUPP_MULTIFS).
    JournalMultiFs = 0x000010, "journal-multi-fs", Super, Notice [],
        "the journal claims to be shared by {found} file systems";
    /// recover-without-journal (e2fsck PR_0_JOURNAL_RECOVER_SET).
    JournalRecoverWithoutJournal = 0x000017, "recover-without-journal", Super, Notice [preen],
        "needs_recovery is set but the file system has no journal";
    /// journal-flag-missing (e2fsck PR_0_JOURNAL_HAS_JOURNAL).
    JournalFlagMissing = 0x000016, "journal-flag-missing", Super, Notice [preen],
        "a journal is present but has_journal is not set";
    /// journal-recovery-flag-clear (e2fsck PR_0_JOURNAL_RECOVERY_CLEAR).
    JournalRecoveryFlagClear = 0x000018, "journal-recovery-flag-clear", Super, Notice [preen],
        "the journal has data to replay but needs_recovery is not set";
    /// journal-errno (no e2fsck equivalent).
    JournalErrno = 0x000000, "journal-errno", Super, Notice [preen],
        "the journal recorded error {found}; the file system will be marked as having errors";
    /// external-journal (e2fsck PR_0_CANT_FIND_JOURNAL).
    ExternalJournal = 0x000011, "external-journal", Super, Notice [],
        "the file system's external journal cannot be found (name its device with -j)";
    /// external-journal-bad-super (e2fsck PR_0_EXT_JOURNAL_BAD_SUPER).
    ExternalJournalBadSuper = 0x000012, "external-journal-bad-super", Super, Notice [],
        "the external journal has a bad superblock ({detail})";
    /// external-journal-wrong-fs (e2fsck PR_0_JOURNAL_BAD_UUID).
    ExternalJournalWrongFs = 0x000013, "external-journal-wrong-fs", Super, Notice [],
        "the external journal does not belong to this file system";
    /// mmp-invalid (e2fsck PR_0_MMP_INVALID_BLK).
    MmpInvalid = 0x000042, "mmp-invalid", Super, Notice [preen],
        "the multiple-mount protection block is invalid ({detail})";
    /// journal-recreated (e2fsck PR_6_RECREATE_JOURNAL). Repair only: a
    /// journal removed as unusable is replaced by a new, empty one.
    RecreateJournal = 0x060001, "journal-recreated", P5, Notice [preen fix],
        "the journal was removed as unusable; a new one is needed";
    /// orphan-file-without-journal (e2fsck PR_6_ORPHAN_FILE_WITHOUT_JOURNAL).
    OrphanFileWithoutJournal = 0x060007, "orphan-file-without-journal", P5, Error [preen],
        "the file system has an orphan file but no journal";
    /// orphan-file-block-dirty (e2fsck PR_6_ORPHAN_BLOCK_DIRTY).
    OrphanBlockDirty = 0x06000c, "orphan-file-block-dirty", P5, Error [preen],
        "orphan file (inode {ino}) block {blk} is not clean";
    /// orphan-present-clean-file (e2fsck PR_6_ORPHAN_PRESENT_CLEAN_FILE).
    OrphanPresentCleanFile = 0x06000d, "orphan-present-clean-file", P5, Notice [preen fix],
        "orphan_present is set but the orphan file is clean";
    /// orphan-present-no-file (e2fsck PR_6_ORPHAN_PRESENT_NO_FILE).
    OrphanPresentNoFile = 0x06000e, "orphan-present-no-file", P5, Error [preen],
        "orphan_present is set but there is no orphan file";
    /// orphan-file-corrupted (e2fsck PR_6_ORPHAN_FILE_CORRUPTED).
    OrphanFileCorrupted = 0x060009, "orphan-file-corrupted", P5, Error [preen],
        "the orphan file (inode {ino}) is corrupt ({detail})";
    /// quota-mismatch (e2fsck PR_6_UPDATE_QUOTAS).
    QuotaMismatch = 0x060002, "quota-mismatch", P5, Error [preen],
        "the {detail} quota file does not match the usage found";
    /// inode-table-block-unreadable (no e2fsck problem code: its read
    /// error handler's "Ignore error? yes" and "Force rewrite? yes").
    /// Repair only (a read-only check stops there, as e2fsck -n does):
    /// the sectors that can be read are kept, the others become zeros,
    /// and the block is written back so that the disk can remap it.
    InodeTableBlockUnreadable = 0x000000, "inode-table-block-unreadable", P1, Error [yes keeps],
        "block {blk} of the inode table of group {group} cannot be read ({bad_sectors} of its {sectors} sectors fail): the readable sectors are kept, the rest rewritten as zeros";
    /// root-not-dir (e2fsck PR_1_ROOT_NO_DIR).
    RootNotDir = 0x010001, "root-not-dir", P1, Error [clear order(9)],
        "the root inode is not a directory";
    /// root-dtime (e2fsck PR_1_ROOT_DTIME).
    RootDtime = 0x010002, "root-dtime", P1, Error [preen keeps order(9)],
        "the root inode has dtime set";
    /// reserved-inode-bad-mode (e2fsck PR_1_RESERVED_BAD_MODE).
    ReservedBadMode = 0x010003, "reserved-inode-bad-mode", P1, Error [preen order(9)],
        "reserved inode {ino} has a bad mode ({found:o})";
    /// deleted-inode-zero-dtime (e2fsck PR_1_ZERO_DTIME).
    ZeroDtime = 0x010004, "deleted-inode-zero-dtime", P1, Error [preen keeps order(2)],
        "deleted inode {ino} has a zero dtime";
    /// inode-in-use-dtime (e2fsck PR_1_SET_DTIME).
    SetDtime = 0x010005, "inode-in-use-dtime", P1, Error [preen local keeps order(10)],
        "inode {ino} is in use but has dtime set";
    /// block-bitmap-conflict (e2fsck PR_1_BB_CONFLICT).
    BlockBitmapConflict = 0x010007, "block-bitmap-conflict", P1, Error [],
        "the block bitmap of group {group} at block {blk} conflicts with other metadata";
    /// inode-bitmap-conflict (e2fsck PR_1_IB_CONFLICT).
    InodeBitmapConflict = 0x010008, "inode-bitmap-conflict", P1, Error [],
        "the inode bitmap of group {group} at block {blk} conflicts with other metadata";
    /// inode-table-conflict (e2fsck PR_1_ITABLE_CONFLICT).
    InodeTableConflict = 0x010009, "inode-table-conflict", P1, Error [],
        "the inode table of group {group} at block {blk} conflicts with other metadata";
    /// imagic-without-feature (e2fsck PR_1_SET_IMAGIC).
    SetImagic = 0x01002f, "imagic-without-feature", P1, Error [keeps order(11)],
        "inode {ino} has the imagic flag but the file system does not support it";
    /// special-file-immutable (e2fsck PR_1_SET_IMMUTABLE).
    SetImmutable = 0x010030, "special-file-immutable", P1, Notice [preen fix keeps],
        "special inode {ino} has the immutable or append-only flag";
    /// special-file-nonzero-size (e2fsck PR_1_SET_NONZSIZE).
    SetNonzeroSize = 0x010032, "special-file-nonzero-size", P1, Error [preen keeps],
        "special inode {ino} has a non-zero size {found}";
    /// journal-inode-not-clear (e2fsck PR_1_JOURNAL_INODE_NOT_CLEAR).
    JournalInodeNotClear = 0x010034, "journal-inode-not-clear", P1, Error [preen order(9)],
        "the journal inode is in use but the file system has no journal";
    /// journal-inode-bad-mode (e2fsck PR_1_JOURNAL_BAD_MODE).
    JournalBadMode = 0x010035, "journal-inode-bad-mode", P1, Error [preen order(9)],
        "the journal inode is not a regular file";
    /// low-dtime (e2fsck PR_1_LOW_DTIME).
    LowDtime = 0x010036, "low-dtime", P1, Error [keeps order(1)],
        "inode {ino} was part of the orphan list (dtime {found})";
    /// bad-extra-isize (e2fsck PR_1_EXTRA_ISIZE).
    ExtraIsize = 0x01004f, "bad-extra-isize", P1, Error [preen yes order(12)],
        "inode {ino} has i_extra_isize {found}, which is invalid";
    /// xattr-name-len (e2fsck PR_1_ATTR_NAME_LEN).
    AttrNameLen = 0x010050, "xattr-name-len", P1, Error [preen],
        "inode {ino} has an extended attribute with a bad name length {found}";
    /// xattr-value-size (e2fsck PR_1_ATTR_VALUE_SIZE).
    AttrValueSize = 0x010053, "xattr-value-size", P1, Error [preen],
        "inode {ino} has an extended attribute with a bad value size {found}";
    /// xattr-hash (e2fsck PR_1_ATTR_HASH).
    AttrHash = 0x010054, "xattr-hash", P1, Error [preen],
        "inode {ino} has an extended attribute with a bad hash {found}";
    /// xattr-value-inode-bad (e2fsck PR_1_ATTR_VALUE_EA_INODE).
    AttrValueEaInode = 0x010083, "xattr-value-inode-bad", P1, Error [preen],
        "inode {ino} has an extended attribute whose value inode {ino2} is invalid";
    /// xattr-value-inode-flag (e2fsck PR_1_ATTR_NO_EA_INODE_FL).
    AttrNoEaInodeFlag = 0x010085, "xattr-value-inode-flag", P1, Error [preen],
        "inode {ino} has an extended attribute whose value inode {ino2} lacks the EA_INODE flag";
    /// ea-inode-flag-missing (e2fsck PR_1_ATTR_SET_EA_INODE_FL).
    AttrSetEaInodeFlag = 0x010086, "ea-inode-flag-missing", P1, Error [preen],
        "EA inode {ino2} used by inode {ino} lacks the EA_INODE flag";
    /// xattr-collision (e2fsck PR_1_INODE_EA_ALLOC_COLLISION).
    InodeEaAllocCollision = 0x010069, "xattr-collision", P1, Error [],
        "inode {ino} has extended attributes that overlap";
    /// timestamp-out-of-range (e2fsck PR_1_EA_TIME_OUT_OF_RANGE).
    EaTimeOutOfRange = 0x010082, "timestamp-out-of-range", P1, Notice [preen fix keeps order(13)],
        "inode {ino} has timestamps beyond the representable range";
    /// looks-like-directory (e2fsck PR_1_TREAT_AS_DIRECTORY).
    TreatAsDirectory = 0x010055, "looks-like-directory", P1, Error [yes order(14)],
        "inode {ino} has mode {found:o} but looks like a directory";
    /// extents-without-feature (e2fsck PR_1_EXTENTS_SET).
    ExtentsSet = 0x01005a, "extents-without-feature", P1, Error [clear order(7)],
        "inode {ino} has the extents flag but the file system has no extents feature";
    /// extent-feature-missing (e2fsck PR_1_EXTENT_FEATURE).
    ExtentFeature = 0x01005b, "extent-feature-missing", P1, Error [reread order(7)],
        "inode {ino} is in extent format but the file system lacks the extent feature";
    /// extent-flag-missing (e2fsck PR_1_UNSET_EXTENT_FL).
    UnsetExtentFlag = 0x01005c, "extent-flag-missing", P1, Error [preen reread order(8)],
        "inode {ino} has an extent header but not the extents flag";
    /// fast-symlink-extents-flag (e2fsck PR_1_FAST_SYMLINK_EXTENT_FL).
    FastSymlinkExtentFlag = 0x01005d, "fast-symlink-extents-flag", P1, Error [reread order(15)],
        "fast symlink {ino} has the extents flag set";
    /// quota-inode-bad-mode (e2fsck PR_1_QUOTA_BAD_MODE).
    QuotaBadMode = 0x010062, "quota-inode-bad-mode", P1, Error [preen order(9)],
        "quota inode {ino} is not a regular file";
    /// quota-inode-not-clear (e2fsck PR_1_QUOTA_INODE_NOT_CLEAR).
    QuotaInodeNotClear = 0x010063, "quota-inode-not-clear", P1, Error [preen order(9)],
        "quota inode {ino} is in use but quotas are off";
    /// bad-blocks-inode-invalid (e2fsck PR_1_INVALID_BAD_INODE).
    InvalidBadInode = 0x010065, "bad-blocks-inode-invalid", P1, Error [order(9)],
        "the bad blocks inode looks invalid";
    /// inode-garbage (e2fsck PR_1_INODE_IS_GARBAGE).
    InodeIsGarbage = 0x010067, "inode-garbage", P1, Error [clear order(0)],
        "inode {ino} seems to contain garbage";
    /// inode-checksum (e2fsck PR_1_INODE_ONLY_CSUM_INVALID).
    InodeOnlyCsumInvalid = 0x010068, "inode-checksum", P1, Error [preen local keeps],
        "inode {ino} passes checks but its checksum does not match";
    /// inline-data-feature-missing (e2fsck PR_1_INLINE_DATA_FEATURE).
    InlineDataFeature = 0x01006f, "inline-data-feature-missing", P1, Error [preen reread order(5)],
        "inode {ino} has inline data but the file system lacks the inline_data feature";
    /// inline-data-without-feature (e2fsck PR_1_INLINE_DATA_SET).
    InlineDataSet = 0x010070, "inline-data-without-feature", P1, Error [clear order(5)],
        "inode {ino} has the inline data flag but the file system has no inline_data feature";
    /// inline-data-attr-missing (e2fsck PR_1_INLINE_DATA_NO_ATTR).
    InlineDataNoAttr = 0x010075, "inline-data-attr-missing", P1, Error [yes order(6)],
        "inode {ino} has inline data but its system.data attribute is missing or bad";
    /// special-file-extents-inline (e2fsck PR_1_SPECIAL_EXTENTS_IDATA).
    SpecialExtentsIdata = 0x010076, "special-file-extents-inline", P1, Notice [preen fix yes order(4)],
        "special inode {ino} has the extents or inline data flag";
    /// inline-and-extents-extent (e2fsck PR_1_CLEAR_INLINE_DATA_FOR_EXTENT).
    ClearInlineDataForExtent = 0x010077, "inline-and-extents-extent", P1, Error [reread order(4)],
        "inode {ino} has both inline data and extents flags; it looks like an extent file";
    /// inline-and-extents-inline (e2fsck PR_1_CLEAR_EXTENT_FOR_INLINE_DATA).
    ClearExtentForInlineData = 0x010078, "inline-and-extents-inline", P1, Error [reread order(4)],
        "inode {ino} has both inline data and extents flags; it looks like an inline data file";
    /// inline-and-extents-blockmap (e2fsck PR_1_CLEAR_EXTENT_INLINE_DATA_FLAGS).
    ClearExtentInlineDataFlags = 0x010079, "inline-and-extents-blockmap", P1, Error [reread order(4)],
        "inode {ino} has both inline data and extents flags; it looks like a block-mapped file";
    /// inline-and-extents-unknown (e2fsck PR_1_CLEAR_EXTENT_INLINE_DATA_INODE).
    ClearExtentInlineDataInode = 0x01007a, "inline-and-extents-unknown", P1, Error [clear order(4)],
        "inode {ino} has both inline data and extents flags and matches neither format";
    /// casefold-nondir (e2fsck PR_1_CASEFOLD_NONDIR).
    CasefoldNondir = 0x010088, "casefold-nondir", P1, Error [order(3)],
        "inode {ino} has the casefold flag but is not a directory";
    /// casefold-without-feature (e2fsck PR_1_CASEFOLD_FEATURE).
    CasefoldFeature = 0x010089, "casefold-without-feature", P1, Error [order(3)],
        "inode {ino} has the casefold flag but the file system lacks the casefold feature";
    /// ea-inode-flag-nonreg (e2fsck PR_1_EA_INODE_NONREG, 1.47.4).
    EaInodeNonreg = 0x010091, "ea-inode-flag-nonreg", P1, Error [order(3)],
        "inode {ino} has the EA_INODE flag but is not a regular file";
    /// ea-inode-without-feature (e2fsck PR_1_EA_INODE_FEATURE, 1.47.4).
    EaInodeFeature = 0x010092, "ea-inode-without-feature", P1, Error [preen],
        "inode {ino} keeps an attribute value in an EA inode but the file system lacks the ea_inode feature";
    /// encryption-xattr-missing (e2fsck PR_1_MISSING_ENCRYPTION_XATTR).
    MissingEncryptionXattr = 0x01008a, "encryption-xattr-missing", P1, Error [order(16)],
        "encrypted inode {ino} has no encryption context";
    /// encryption-xattr-corrupt (e2fsck PR_1_CORRUPT_ENCRYPTION_XATTR).
    CorruptEncryptionXattr = 0x01008b, "encryption-xattr-corrupt", P1, Error [clear order(16)],
        "encrypted inode {ino} has a corrupt encryption context";
    /// orphan-file-bad-mode (e2fsck PR_1_ORPHAN_FILE_BAD_MODE).
    OrphanFileBadMode = 0x01008f, "orphan-file-bad-mode", P1, Error [preen order(9)],
        "the orphan file inode {ino} is not a regular file";
    /// orphan-file-not-clear (e2fsck PR_1_ORPHAN_FILE_NOT_CLEAR).
    OrphanFileNotClear = 0x010090, "orphan-file-not-clear", P1, Error [preen order(9)],
        "the orphan file inode {ino} is in use but the feature is off";
    /// bad-blocks-in-bad-blocks (e2fsck PR_1_BADBLOCKS_IN_BADBLOCKS).
    BadblocksInBadblocks = 0x01007b, "bad-blocks-in-bad-blocks", P1, Error [],
        "the bad blocks inode lies in a bad block";
    /// bad-block-in-metadata (e2fsck PR_1_BBINODE_BAD_METABLOCK_PROMPT).
    BbinodeBadMetablock = 0x010016, "bad-block-in-metadata", P1, Error [],
        "a bad block lies in file system metadata";
    /// resize-inode-recreate-failed (e2fsck PR_1_RESIZE_INODE_CREATE).
    /// `none`: raised when inode 7 fails its checksum and that is not
    /// fixed (inode-checksum answered no); answered yes, the check goes on.
    ResizeInodeCreate = 0x01004e, "resize-inode-recreate-failed", P1, Error [none],
        "the resize inode cannot be recreated on a read-only check";
    /// metadata-needs-relocation (e2fsck PR_1_RELOC_TO).
    RelocateMetadata = 0x010021, "metadata-needs-relocation", P1, Error [preen],
        "the {detail} of group {group} is missing and would have to be relocated";
    /// illegal-block (e2fsck PR_1_ILLEGAL_BLOCK_NUM).
    IllegalBlock = 0x01000e, "illegal-block", P1, Error [blocks keeps_nondir],
        "inode {ino} has illegal block {blk} at {detail}";
    /// too-many-illegal-blocks (e2fsck PR_1_TOO_MANY_BAD_BLOCKS).
    TooManyBadBlocks = 0x010011, "too-many-illegal-blocks", P1, Error [clear_blocks],
        "inode {ino} has too many illegal blocks";
    /// bad-i-blocks (e2fsck PR_1_BAD_I_BLOCKS).
    BadIBlocks = 0x01000d, "bad-i-blocks", P1, Error [preen local keeps order(22)],
        "inode {ino} has i_blocks {found}, should be {expected}";
    /// bad-i-size (e2fsck PR_1_BAD_I_SIZE).
    BadISize = 0x01000c, "bad-i-size", P1, Error [preen local_regular keeps_nondir order(22)],
        "inode {ino} has size {found}, should be {expected}";
    /// zero-length-dir (e2fsck PR_1_ZERO_LENGTH_DIR).
    ZeroLengthDir = 0x010006, "zero-length-dir", P1, Error [preen clear_blocks order(21)],
        "directory inode {ino} has no blocks";
    /// dir-block-unreadable (no e2fsck equivalent).
    /// `none`: not raised; pass 2's dir-block-read-failed is the one fixed.
    DirBlockCorrupt = 0x000000, "dir-block-unreadable", P1, Error [none],
        "directory inode {ino} block {blk} cannot be read";
    /// too-big (e2fsck PR_1_TOOBIG_DIR).
    TooBig = 0x010044, "too-big", P1, Error [blocks keeps_nondir],
        "inode {ino} is too big at block {blk} (logical {logical})";
    /// extent-bad-start (e2fsck PR_1_EXTENT_BAD_START_BLK).
    ExtentBadStart = 0x010058, "extent-bad-start", P1, Error [blocks keeps_nondir],
        "inode {ino} has an extent with a bad physical start (logical {logical}, physical {blk}, length {length})";
    /// extent-ends-beyond (e2fsck PR_1_EXTENT_ENDS_BEYOND).
    ExtentEndsBeyond = 0x010059, "extent-ends-beyond", P1, Error [blocks],
        "inode {ino} has an extent that runs past the end of the file system (logical {logical}, physical {blk}, length {length})";
    /// extent-length-zero (e2fsck PR_1_EXTENT_LENGTH_ZERO).
    ExtentLengthZero = 0x010066, "extent-length-zero", P1, Error [blocks],
        "inode {ino} has a zero-length extent (logical {logical}, physical {blk})";
    /// extents-out-of-order (e2fsck PR_1_OUT_OF_ORDER_EXTENTS).
    OutOfOrderExtents = 0x01005e, "extents-out-of-order", P1, Error [blocks],
        "inode {ino} has out-of-order extents (logical {logical}, physical {blk}, length {length})";
    /// extent-end-out-of-bounds (e2fsck PR_1_EXTENT_END_OUT_OF_BOUNDS).
    ExtentEndOutOfBounds = 0x01006e, "extent-end-out-of-bounds", P1, Error [blocks],
        "inode {ino}: the extent at logical block {logical} (tree level {level}) ends past the range its index allows";
    /// extent-root-invalid (e2fsck PR_1_MISSING_EXTENT_HEADER).
    ExtentHeaderInvalid = 0x010081, "extent-root-invalid", P1, Error [clear_blocks],
        "inode {ino} has the extents flag but no valid extent header";
    /// extent-walk-failed (e2fsck PR_1_EXTENT_ITERATE_FAILURE).
    ExtentIterateFailure = 0x010057, "extent-walk-failed", P1, Error [blocks],
        "the extent tree of inode {ino} cannot be walked ({detail})";
    /// extent-tree-too-deep (e2fsck PR_1_EXTENT_BAD_MAX_DEPTH).
    ExtentBadMaxDepth = 0x01007f, "extent-tree-too-deep", P1, Notice [preen fix blocks],
        "inode {ino} has an extent tree of depth {found}, more than {limit}";
    /// extent-collision (e2fsck PR_1_EXTENT_COLLISION).
    ExtentCollision = 0x01007d, "extent-collision", P1, Error [blocks],
        "inode {ino} has overlapping extents (logical {logical}, physical {blk}, length {length})";
    /// cluster-misaligned (e2fsck PR_1_MISALIGNED_CLUSTER): on bigalloc, a
    /// block whose place in its logical cluster differs from its place in
    /// the physical one. The block counts as claimed twice, so pass 1B
    /// gives the file a copy.
    MisalignedCluster = 0x010074, "cluster-misaligned", P1, Notice [],
        "inode {ino} logical block {blk} (physical block {blk2}) breaks the cluster allocation rules; pass 1B deals with it";
    /// dir-extent-gap (e2fsck PR_1_COLLAPSE_DBLOCK).
    CollapseDblock = 0x010072, "dir-extent-gap", P1, Error [blocks yes],
        "directory inode {ino} has a gap before logical block {logical}";
    /// htree-not-dir (e2fsck PR_1_HTREE_NODIR).
    HtreeNodir = 0x010048, "htree-not-dir", P1, Error [preen yes unindex],
        "inode {ino} has the htree flag but is not a directory";
    /// htree-without-feature (e2fsck PR_1_HTREE_SET).
    HtreeSet = 0x010047, "htree-without-feature", P1, Error [preen yes unindex],
        "inode {ino} has the htree flag but the file system lacks dir_index";
    /// htree-root-bad (e2fsck PR_1_HTREE_BADROOT).
    HtreeRootBad = 0x010049, "htree-root-bad", P1, Error [preen yes unindex],
        "inode {ino} has a bad htree root node";
    /// htree-hash-version (e2fsck PR_1_HTREE_HASHV).
    HtreeHashv = 0x01004a, "htree-hash-version", P1, Error [preen yes unindex],
        "inode {ino} has an unsupported htree hash version {found}";
    /// htree-needs-siphash (e2fsck PR_1_HTREE_NEEDS_SIPHASH).
    HtreeNeedsSiphash = 0x01008d, "htree-needs-siphash", P1, Error [preen yes unindex],
        "inode {ino} is encrypted and case-folded but its htree does not use SipHash";
    /// htree-cannot-siphash (e2fsck PR_1_HTREE_CANNOT_SIPHASH).
    HtreeCannotSiphash = 0x01008e, "htree-cannot-siphash", P1, Error [preen yes unindex],
        "inode {ino} uses SipHash but is not encrypted and case-folded";
    /// htree-incompat-flag (e2fsck PR_1_HTREE_INCOMPAT).
    HtreeIncompat = 0x01004b, "htree-incompat-flag", P1, Error [preen yes unindex],
        "inode {ino} has an htree with incompatible flags";
    /// htree-too-deep (e2fsck PR_1_HTREE_DEPTH).
    HtreeDepth = 0x01004c, "htree-too-deep", P1, Error [preen yes unindex],
        "inode {ino} has an htree of depth {found}, which is too deep";
    /// map-block-on-metadata (e2fsck PR_1_CRITICAL_METADATA_COLLISION).
    CriticalMetadataCollision = 0x010071, "map-block-on-metadata", P1, Notice [],
        "inode {ino} has a map block {blk} on top of critical metadata";
    /// extent-tree-could-be-shorter (e2fsck PR_1E_CAN_COLLAPSE_EXTENT_TREE).
    ExtentTreeShorter = 0x014006, "extent-tree-could-be-shorter", P1, Notice [fix keeps optional],
        "the extent tree of inode {ino} could be shorter (at level {level})";
    /// extent-tree-could-be-narrower (e2fsck PR_1E_CAN_NARROW_EXTENT_TREE).
    ExtentTreeNarrower = 0x014007, "extent-tree-could-be-narrower", P1, Notice [fix keeps optional],
        "the extent tree of inode {ino} could be narrower (at level {level})";
    /// extent-index-start (e2fsck PR_1_EXTENT_INDEX_START_INVALID).
    ExtentIndexStartInvalid = 0x01006d, "extent-index-start", P1, Error [blocks],
        "inode {ino}: an extent index starts at logical {found}, should be {expected}";
    /// extent-only-checksum (e2fsck PR_1_EXTENT_ONLY_CSUM_INVALID).
    ExtentOnlyCsumInvalid = 0x01006a, "extent-only-checksum", P1, Error [keeps quiet],
        "inode {ino}: extent tree block {blk2} passes checks but fails its checksum (its last extent is at block {blk})";
    /// extent-node-invalid (e2fsck PR_1_EXTENT_HEADER_INVALID).
    ExtentNodeInvalid = 0x01005f, "extent-node-invalid", P1, Error [blocks],
        "inode {ino} has a damaged extent tree node at block {blk} ({detail})";
    /// uninit-dir-extent (e2fsck PR_1_UNINIT_DBLOCK).
    UninitExtentOnDir = 0x010073, "uninit-dir-extent", P1, Error [preen blocks keeps],
        "directory inode {ino} has an uninitialized extent (logical {logical}, physical {blk})";
    /// xattr-block-bad (e2fsck PR_1_BAD_EA_BLOCK).
    EaBlockBad = 0x01003a, "xattr-block-bad", P1, Error [],
        "inode {ino} has a bad extended attribute block {blk}";
    /// xattr-block-refcount (e2fsck PR_1_EXTATTR_REFCOUNT).
    EaBlockRefcount = 0x01003c, "xattr-block-refcount", P1, Error [],
        "extended attribute block {blk} has reference count {found}, should be {expected}";
    /// xattr-block-checksum (e2fsck PR_1_EA_BLOCK_ONLY_CSUM_INVALID).
    EaBlockCsum = 0x01006c, "xattr-block-checksum", P1, Error [],
        "extended attribute block {blk} of inode {ino} fails its checksum";
    /// xattr-block-multi (e2fsck PR_1_EA_MULTI_BLOCK).
    EaBlockMultiple = 0x01003e, "xattr-block-multi", P1, Error [],
        "extended attribute block {blk} of inode {ino} claims more than one block";
    /// xattr-block-header (e2fsck PR_1_BAD_EA_BLOCK).
    EaBlockHeader = 0x01003a, "xattr-block-header", P1, Error [],
        "inode {ino} has an extended attribute block {blk} with a bad header";
    /// xattr-block-entry (e2fsck PR_1_EA_BAD_NAME).
    EaBlockEntry = 0x010041, "xattr-block-entry", P1, Error [],
        "extended attribute block {blk} of inode {ino} has a bad entry ({detail})";
    /// xattr-without-feature (e2fsck PR_2_FILE_ACL_ZERO).
    /// `none`: not raised; pass 2's file-acl-without-feature is fixed.
    EaAclWithoutFeature = 0x02000e, "xattr-without-feature", P1, Error [none],
        "inode {ino} has an extended attribute block but the file system lacks ext_attr";
    /// bad-blocks-inode-illegal (e2fsck PR_1_BB_ILLEGAL_BLOCK_NUM).
    BadBlockInBadBlockInode = 0x010012, "bad-blocks-inode-illegal", P1, Error [],
        "the bad blocks inode has illegal block {blk}";
    /// multiply-claimed-blocks (e2fsck PR_1D_DUP_FILE).
    DupBlocks = 0x013001, "multiply-claimed-blocks", P1B, Error [yes],
        "inode {ino} has {shared_blocks} multiply-claimed block(s), shared with {sharing_files} file(s): {detail}";
    /// multiply-claimed-metadata (e2fsck PR_1D_SHARE_METADATA).
    DupBlocksMetadata = 0x013003, "multiply-claimed-metadata", P1B, Error [yes],
        "inode {ino} has block(s) shared with file system metadata: {detail}";
    /// dot-wrong-inode (e2fsck PR_2_BAD_INODE_DOT).
    BadInodeDot = 0x020001, "dot-wrong-inode", P2, Error [yes],
        "'.' in directory {dir} points to inode {ino}";
    /// entry-bad-inode (e2fsck PR_2_BAD_INO).
    BadIno = 0x020002, "entry-bad-inode", P2, Error [yes],
        "entry '{name}' in directory {dir} has bad inode number {ino}";
    /// entry-unused-inode (e2fsck PR_2_UNUSED_INODE).
    UnusedInode = 0x020003, "entry-unused-inode", P2, Error [preen yes],
        "entry '{name}' in directory {dir} points to unused inode {ino}";
    /// entry-link-to-dot (e2fsck PR_2_LINK_DOT).
    LinkDot = 0x020004, "entry-link-to-dot", P2, Error [yes],
        "entry '{name}' in directory {dir} is a link to '.'";
    /// entry-bad-block-inode (e2fsck PR_2_BB_INODE).
    BbInode = 0x020005, "entry-bad-block-inode", P2, Error [yes],
        "entry '{name}' in directory {dir} points to inode {ino} in a bad block";
    /// entry-link-to-dir (e2fsck PR_2_LINK_DIR).
    LinkDir = 0x020006, "entry-link-to-dir", P2, Error [yes],
        "entry '{name}' in directory {dir} is a second link to directory {ino}";
    /// entry-link-to-root (e2fsck PR_2_LINK_ROOT).
    LinkRoot = 0x020007, "entry-link-to-root", P2, Error [yes],
        "entry '{name}' in directory {dir} is a link to the root directory";
    /// entry-names-ea-inode (e2fsck PR_2_EA_INODE_DIR_LINK, 1.47.4).
    EaInodeDirLink = 0x020055, "entry-names-ea-inode", P2, Error [yes],
        "entry '{name}' in directory {dir} names EA inode {ino}";
    /// entry-bad-name (e2fsck PR_2_BAD_NAME).
    BadName = 0x020008, "entry-bad-name", P2, Error [yes],
        "entry '{name}' in directory {dir} has an illegal character in its name";
    /// missing-dot (e2fsck PR_2_MISSING_DOT).
    MissingDot = 0x020009, "missing-dot", P2, Error [yes],
        "directory {dir} is missing '.'";
    /// missing-dot-dot (e2fsck PR_2_MISSING_DOT_DOT).
    MissingDotDot = 0x02000a, "missing-dot-dot", P2, Error [yes],
        "directory {dir} is missing '..'";
    /// first-entry-not-dot (e2fsck PR_2_1ST_NOT_DOT).
    FirstNotDot = 0x02000b, "first-entry-not-dot", P2, Error [yes],
        "the first entry '{name}' of directory {dir} should be '.'";
    /// second-entry-not-dot-dot (e2fsck PR_2_2ND_NOT_DOT_DOT).
    SecondNotDotDot = 0x02000c, "second-entry-not-dot-dot", P2, Error [yes],
        "the second entry '{name}' of directory {dir} should be '..'";
    /// faddr-nonzero (e2fsck PR_2_FADDR_ZERO).
    FaddrZero = 0x02000d, "faddr-nonzero", P2, Error [yes],
        "inode {ino} has a non-zero i_faddr {found}";
    /// file-acl-without-feature (e2fsck PR_2_FILE_ACL_ZERO).
    FileAclZero = 0x02000e, "file-acl-without-feature", P2, Error [yes],
        "inode {ino} has an extended attribute block {blk} but the file system lacks ext_attr";
    /// dir-size-high (e2fsck PR_2_DIR_SIZE_HIGH_ZERO).
    DirSizeHighZero = 0x02000f, "dir-size-high", P2, Error [yes],
        "directory inode {ino} has a non-zero i_size_high {found}";
    /// frag-nonzero (e2fsck PR_2_FRAG_ZERO).
    FragZero = 0x020010, "frag-nonzero", P2, Error [yes],
        "inode {ino} has a non-zero fragment number {found}";
    /// fsize-nonzero (e2fsck PR_2_FSIZE_ZERO).
    FsizeZero = 0x020011, "fsize-nonzero", P2, Error [yes],
        "inode {ino} has a non-zero fragment size {found}";
    /// bad-mode (e2fsck PR_2_BAD_MODE).
    BadMode = 0x020012, "bad-mode", P2, Error [yes dealloc],
        "inode {ino} has a bad mode {found:o}";
    /// dir-corrupted (e2fsck PR_2_DIR_CORRUPTED).
    DirCorrupted = 0x020013, "dir-corrupted", P2, Error [yes],
        "directory {dir} block {logical} is corrupt at offset {offset}";
    /// dir-hole (e2fsck PR_2_DIRECTORY_HOLE).
    DirectoryHole = 0x020015, "dir-hole", P2, Error [keeps],
        "directory {dir} has a hole at block {logical}";
    /// dot-not-terminated (e2fsck PR_2_DOT_NULL_TERM).
    DotNullTerm = 0x020016, "dot-not-terminated", P2, Error [yes],
        "'.' in directory {dir} is not NUL-terminated";
    /// dot-dot-not-terminated (e2fsck PR_2_DOT_DOT_NULL_TERM).
    DotDotNullTerm = 0x020017, "dot-dot-not-terminated", P2, Error [yes],
        "'..' in directory {dir} is not NUL-terminated";
    /// bad-char-device (e2fsck PR_2_BAD_CHAR_DEV).
    BadCharDev = 0x020018, "bad-char-device", P2, Error [yes dealloc],
        "inode {ino} is an invalid character device";
    /// bad-block-device (e2fsck PR_2_BAD_BLOCK_DEV).
    BadBlockDev = 0x020019, "bad-block-device", P2, Error [yes dealloc],
        "inode {ino} is an invalid block device";
    /// duplicate-dot (e2fsck PR_2_DUP_DOT).
    DupDot = 0x02001a, "duplicate-dot", P2, Error [yes],
        "directory {dir} has a second '.' entry";
    /// duplicate-dot-dot (e2fsck PR_2_DUP_DOT_DOT).
    DupDotDot = 0x02001b, "duplicate-dot-dot", P2, Error [yes],
        "directory {dir} has a second '..' entry";
    /// final-rec-len (e2fsck PR_2_FINAL_RECLEN).
    /// `none`: not raised; the entry walk salvages such a block as corrupt.
    FinalRecLen = 0x02001d, "final-rec-len", P2, Error [none],
        "the last entry of directory {dir} has a bad rec_len {found}";
    /// dir-block-read-failed (no e2fsck problem code: its read error
    /// handler's "Ignore error? yes", "Force rewrite? yes"). Repair only:
    /// the sectors that can be read are kept, the rest become zeros, and
    /// the block is written back; the directory is then judged as that.
    DirBlockUnreadable = 0x000000, "dir-block-read-failed", P2, Error [yes keeps],
        "block {blk} of directory {dir} cannot be read ({bad_sectors} of its {sectors} sectors fail): the readable sectors are kept, the rest rewritten as zeros";
    /// dir-block-read-error (e2fsck PR_2_READ_DIRBLOCK).
    ReadDirBlock = 0x020020, "dir-block-read-error", P2, Error [],
        "directory {dir} block {blk} cannot be read";
    /// dot-rec-len-big (e2fsck PR_2_SPLIT_DOT).
    SplitDot = 0x020024, "dot-rec-len-big", P2, Notice [fix yes],
        "'.' in directory {dir} has rec_len {found}; it could be split";
    /// bad-fifo (e2fsck PR_2_BAD_FIFO).
    BadFifo = 0x020025, "bad-fifo", P2, Error [yes dealloc],
        "inode {ino} is an invalid FIFO";
    /// bad-socket (e2fsck PR_2_BAD_SOCKET).
    BadSocket = 0x020026, "bad-socket", P2, Error [yes dealloc],
        "inode {ino} is an invalid socket";
    /// filetype-unset (e2fsck PR_2_SET_FILETYPE).
    SetFiletype = 0x020027, "filetype-unset", P2, Notice [preen fix yes],
        "entry '{name}' in directory {dir} has file type 0, should be {expected}";
    /// filetype-wrong (e2fsck PR_2_BAD_FILETYPE).
    BadFiletype = 0x020028, "filetype-wrong", P2, Error [yes],
        "entry '{name}' in directory {dir} has file type {found}, should be {expected}";
    /// filetype-without-feature (e2fsck PR_2_CLEAR_FILETYPE).
    ClearFiletype = 0x020029, "filetype-without-feature", P2, Error [preen yes],
        "entry '{name}' in directory {dir} has a file type but the file system lacks the filetype feature";
    /// entry-empty-name (e2fsck PR_2_NULL_NAME).
    NullName = 0x020030, "entry-empty-name", P2, Error [yes],
        "an entry in directory {dir} has an empty name";
    /// bad-symlink (e2fsck PR_2_INVALID_SYMLINK).
    InvalidSymlink = 0x020031, "bad-symlink", P2, Error [yes dealloc],
        "symlink {ino} is invalid";
    /// file-acl-bad (e2fsck PR_2_FILE_ACL_BAD).
    FileAclBad = 0x020032, "file-acl-bad", P2, Error [yes],
        "inode {ino} has an invalid extended attribute block {blk}";
    /// large-file-feature-missing (e2fsck PR_2_FEATURE_LARGE_FILES).
    FeatureLargeFiles = 0x020033, "large-file-feature-missing", P2, Error [preen yes],
        "the file system has large files but lacks the large_file feature";
    /// htree-block-not-referenced (e2fsck PR_2_HTREE_NOTREF).
    HtreeNotRef = 0x020034, "htree-block-not-referenced", P2, Notice [yes],
        "htree directory {dir} block {logical} is not referenced";
    /// htree-block-referenced-twice (e2fsck PR_2_HTREE_DUPREF).
    HtreeDupRef = 0x020035, "htree-block-referenced-twice", P2, Notice [yes],
        "htree directory {dir} block {logical} is referenced twice";
    /// htree-min-hash (e2fsck PR_2_HTREE_MIN_HASH).
    HtreeMinHash = 0x020036, "htree-min-hash", P2, Notice [yes],
        "htree directory {dir} block {logical} has a hash below its range";
    /// htree-max-hash (e2fsck PR_2_HTREE_MAX_HASH).
    HtreeMaxHash = 0x020037, "htree-max-hash", P2, Notice [yes],
        "htree directory {dir} block {logical} has a hash above its range";
    /// htree-invalid (e2fsck PR_2_HTREE_CLEAR).
    HtreeClear = 0x020038, "htree-invalid", P2, Error [yes unindex],
        "htree directory {dir} has an invalid index";
    /// large-dir-feature-missing (e2fsck PR_2_FEATURE_LARGE_DIRS).
    FeatureLargeDirs = 0x020039, "large-dir-feature-missing", P1, Error [preen],
        "the file system has large directories but lacks the large_dir feature";
    /// htree-bad-block (e2fsck PR_2_HTREE_BADBLK).
    HtreeBadBlk = 0x02003a, "htree-bad-block", P2, Error [yes unindex],
        "htree directory {dir} has a bad block number {logical} in its index";
    /// htree-bad-root (e2fsck PR_2_HTREE_BAD_ROOT).
    HtreeBadRoot = 0x02003c, "htree-bad-root", P2, Error [preen yes unindex],
        "htree directory {dir} has a bad root node";
    /// htree-bad-limit (e2fsck PR_2_HTREE_BAD_LIMIT).
    HtreeBadLimit = 0x02003d, "htree-bad-limit", P2, Error [preen yes unindex],
        "htree directory {dir} block {blk} has limit {found}, should be {expected}";
    /// htree-bad-count (e2fsck PR_2_HTREE_BAD_COUNT).
    HtreeBadCount = 0x02003e, "htree-bad-count", P2, Error [preen yes unindex],
        "htree directory {dir} block {blk} has count {found}, limit {limit}";
    /// htree-hash-order (e2fsck PR_2_HTREE_HASH_ORDER).
    HtreeHashOrder = 0x02003f, "htree-hash-order", P2, Error [preen yes unindex],
        "htree directory {dir} block {blk} has out-of-order hashes";
    /// htree-bad-depth (e2fsck PR_2_HTREE_BAD_DEPTH).
    HtreeBadDepth = 0x020040, "htree-bad-depth", P2, Notice [yes],
        "htree directory {dir} leaf block {logical} is at the wrong depth";
    /// duplicate-entry (e2fsck PR_2_REPORT_DUP_DIRENT).
    ReportDupDirent = 0x020043, "duplicate-entry", P2, Notice [],
        "directory {dir} has a duplicate entry '{name}'";
    /// duplicate-entry-same-inode (e2fsck PR_2_DUPLICATE_DIRENT).
    DuplicateDirent = 0x020041, "duplicate-entry-same-inode", P3, Error [],
        "directory {dir} has entry '{name}' twice for the same inode";
    /// duplicate-name (e2fsck PR_2_NON_UNIQUE_FILE).
    NonUniqueFile = 0x020042, "duplicate-name", P3, Error [],
        "directory {dir} has two files named '{name}'";
    /// blocks-hi-nonzero (e2fsck PR_2_BLOCKS_HI_ZERO).
    BlocksHiZero = 0x020044, "blocks-hi-nonzero", P2, Error [yes],
        "inode {ino} has a non-zero i_blocks_hi {found}";
    /// htree-unexpected-block (e2fsck PR_2_UNEXPECTED_HTREE_BLOCK).
    UnexpectedHtreeBlock = 0x020045, "htree-unexpected-block", P2, Error [yes unindex],
        "htree directory {dir} has an unexpected block {logical}";
    /// entry-in-uninit-group (e2fsck PR_2_INOREF_BG_INO_UNINIT).
    InorefBgInoUninit = 0x020046, "entry-in-uninit-group", P2, Error [preen restart],
        "entry '{name}' in directory {dir} points to inode {ino} in a group marked INODE_UNINIT";
    /// entry-in-unused-area (e2fsck PR_2_INOREF_IN_UNUSED).
    InorefInUnused = 0x020047, "entry-in-unused-area", P2, Error [preen restart],
        "entry '{name}' in directory {dir} points to inode {ino} past the group's used inode area";
    /// file-acl-hi-nonzero (e2fsck PR_2_I_FILE_ACL_HI_ZERO).
    IFileAclHiZero = 0x020048, "file-acl-hi-nonzero", P2, Error [preen],
        "inode {ino} has a non-zero i_file_acl_hi {found}";
    /// htree-root-checksum (e2fsck PR_2_HTREE_ROOT_CSUM_INVALID).
    HtreeRootCsum = 0x020049, "htree-root-checksum", P2, Error [preen yes unindex],
        "htree directory {dir} root fails its checksum";
    /// htree-node-checksum (e2fsck PR_2_HTREE_NODE_CSUM_INVALID).
    HtreeNodeCsum = 0x02004a, "htree-node-checksum", P2, Error [preen yes unindex],
        "htree directory {dir} node block {logical} fails its checksum";
    /// dir-block-checksum-missing (e2fsck PR_2_LEAF_NODE_MISSING_CSUM).
    LeafMissingCsum = 0x02004c, "dir-block-checksum-missing", P2, Error [preen keeps],
        "directory {dir} block {logical} has no checksum";
    /// dir-block-checksum (e2fsck PR_2_LEAF_NODE_ONLY_CSUM_INVALID).
    LeafOnlyCsumInvalid = 0x02004d, "dir-block-checksum", P2, Error [preen yes],
        "directory {dir} block {logical} passes checks but fails its checksum";
    /// inline-dir-bad-size (e2fsck PR_2_BAD_INLINE_DIR_SIZE).
    BadInlineDirSize = 0x02004e, "inline-dir-bad-size", P2, Error [],
        "inline directory {dir} has a bad size {found}";
    /// encrypted-name-bad (e2fsck PR_2_BAD_ENCRYPTED_NAME).
    BadEncryptedName = 0x020050, "encrypted-name-bad", P2, Error [yes],
        "entry in encrypted directory {dir} has a too-short name ({found} bytes)";
    /// unencrypted-in-encrypted-dir (e2fsck PR_2_UNENCRYPTED_FILE).
    UnencryptedFile = 0x020051, "unencrypted-in-encrypted-dir", P2, Error [yes],
        "entry '{name}' in encrypted directory {dir} points to unencrypted inode {ino}";
    /// encryption-policy-mismatch (e2fsck PR_2_INCONSISTENT_ENCRYPTION_POLICY).
    InconsistentEncryptionPolicy = 0x020052, "encryption-policy-mismatch", P2, Error [yes],
        "entry in encrypted directory {dir} points to inode {ino} with another policy";
    /// entry-bad-encoding (e2fsck PR_2_BAD_ENCODED_NAME).
    BadEncodedName = 0x020053, "entry-bad-encoding", P2, Error [yes],
        "entry '{name}' in directory {dir} has a name that is not valid UTF-8";
    /// duplicate-encrypted-name (e2fsck PR_2_NON_UNIQUE_FILE_NO_RENAME).
    NonUniqueFileNoRename = 0x020054, "duplicate-encrypted-name", P3, Error [],
        "encrypted directory {dir} has a duplicate entry";
    /// inode-unreadable (no e2fsck equivalent).
    /// `none`: not raised; inode-table-block-unreadable is salvaged.
    InodeReadFailed = 0x000000, "inode-unreadable", P2, Error [none],
        "inode {ino} cannot be read reliably ({detail})";
    /// root-missing (e2fsck PR_3_NO_ROOT_INODE).
    NoRootInode = 0x030001, "root-missing", P3, Error [],
        "the root inode is not allocated";
    /// dir-unconnected (e2fsck PR_3_UNCONNECTED_DIR).
    UnconnectedDir = 0x030003, "dir-unconnected", P3, Error [yes],
        "directory {ino} is not connected to the tree (was in {detail})";
    /// dot-dot-wrong (e2fsck PR_3_BAD_DOT_DOT).
    BadDotDot = 0x030005, "dot-dot-wrong", P3, Error [yes],
        "'..' in directory {ino} is {found}, should be {expected}";
    /// lost-found-missing (e2fsck PR_3_NO_LF_DIR). Looked for by a repair
    /// only, which creates it, as e2fsck does; a read-only check is silent.
    NoLostFound = 0x030004, "lost-found-missing", P3, Error [preen yes],
        "/lost+found is missing";
    /// lost-found-not-dir (e2fsck PR_3_LPF_NOTDIR). Repair only: the entry
    /// is unlinked and a directory created.
    LostFoundNotDir = 0x030017, "lost-found-not-dir", P3, Error [yes],
        "/lost+found (inode {ino}) is not a directory";
    /// lost-found-inline (e2fsck PR_3_LPF_INLINE_DATA). Repair only.
    LostFoundInline = 0x030018, "lost-found-inline", P3, Error [yes],
        "/lost+found (inode {ino}) has inline data";
    /// lost-found-encrypted (e2fsck PR_3_LPF_ENCRYPTED). Repair only.
    LostFoundEncrypted = 0x03001B, "lost-found-encrypted", P3, Error [yes],
        "/lost+found (inode {ino}) is encrypted";
    /// dir-reindexed (e2fsck PR_3A_OPTIMIZE_DIR). Repair only: a directory
    /// whose hash index was dropped gets a new one, as in e2fsck's pass 3A.
    RehashDir = 0x031004, "dir-reindexed", P3, Notice [preen fix],
        "directory {ino} lost its hash index and needs a new one";
    /// root-not-dir-fatal (e2fsck PR_3_ROOT_NOT_DIR_ABORT).
    /// `none`: fatal, as in e2fsck; under a repair pass 1's root-not-dir
    /// clears the root and pass 3 makes a new one.
    RootNotDirAbort = 0x030014, "root-not-dir-fatal", P3, Error [none],
        "the root inode is not a directory; the check cannot continue";
    /// unattached-zero-length (e2fsck PR_4_ZERO_LEN_INODE).
    ZeroLenInode = 0x040001, "unattached-zero-length", P4, Notice [preen],
        "unattached inode {ino} has zero length";
    /// unattached-inode (e2fsck PR_4_UNATTACHED_INODE).
    UnattachedInode = 0x040002, "unattached-inode", P4, Error [settles],
        "inode {ino} is not referenced by any directory";
    /// link-count-wrong (e2fsck PR_4_BAD_REF_COUNT).
    BadRefCount = 0x040003, "link-count-wrong", P4, Error [preen keeps settles],
        "inode {ino} has link count {found}, should be {expected}";
    /// ea-inode-ref-count (e2fsck PR_4_EA_INODE_REF_COUNT).
    EaInodeRefCount = 0x040005, "ea-inode-ref-count", P4, Error [preen keeps settles],
        "EA inode {ino} has reference count {found}, should be {expected}";
    /// ea-inode-flag-spurious (e2fsck PR_4_EA_INODE_SPURIOUS_FLAG, 1.47.4).
    EaInodeSpuriousFlag = 0x040008, "ea-inode-flag-spurious", P4, Error [preen keeps settles],
        "regular file inode {ino} has the EA_INODE flag but no attribute keeps its value there";
    /// dir-link-count-overflow (e2fsck PR_4_DIR_OVERFLOW_REF_COUNT):
    /// reported by a repair only, as e2fsck asks only when it may write.
    DirOverflowRefCount = 0x040007, "dir-link-count-overflow", P4, Notice [fix preen keeps settles],
        "directory {ino} has its link count set to overflow (1) but could have the exact value {expected}";
    /// dir-nlink-feature-missing (e2fsck PR_4_DIR_NLINK_FEATURE).
    DirNlinkFeature = 0x040006, "dir-nlink-feature-missing", P4, Error [settles],
        "directory {ino} has more than 65000 links but the file system lacks dir_nlink";
    /// block-bitmap-differs (e2fsck PR_5_BLOCK_BITMAP_END).
    BlockBitmapDiff = 0x050006, "block-bitmap-differs", P5, Error [preen pass5],
        "block bitmap differences: {detail}";
    /// inode-bitmap-differs (e2fsck PR_5_INODE_BITMAP_END).
    InodeBitmapDiff = 0x05000a, "inode-bitmap-differs", P5, Error [preen pass5],
        "inode bitmap differences: {detail}";
    /// block-in-uninit-group (e2fsck PR_5_BLOCK_UNINIT).
    BlockUninit = 0x050018, "block-in-uninit-group", P5, Error [preen pass5],
        "group {group} is marked BLOCK_UNINIT but block {blk} is in use";
    /// inode-in-uninit-group (e2fsck PR_5_INODE_UNINIT).
    InodeUninit = 0x050019, "inode-in-uninit-group", P5, Error [preen pass5],
        "group {group} is marked INODE_UNINIT but inode {ino} is in use";
    /// group-free-blocks-wrong (e2fsck PR_5_FREE_BLOCK_COUNT_GROUP).
    FreeBlocksGroup = 0x05000e, "group-free-blocks-wrong", P5, Error [preen pass5],
        "group {group} has {found} free blocks, should be {expected}";
    /// group-free-inodes-wrong (e2fsck PR_5_FREE_INODE_COUNT_GROUP).
    FreeInodesGroup = 0x05000b, "group-free-inodes-wrong", P5, Error [preen pass5],
        "group {group} has {found} free inodes, should be {expected}";
    /// group-dirs-wrong (e2fsck PR_5_FREE_DIR_COUNT_GROUP).
    DirsCountGroup = 0x05000c, "group-dirs-wrong", P5, Error [preen pass5],
        "group {group} has {found} directories, should be {expected}";
    /// free-blocks-wrong (e2fsck PR_5_FREE_BLOCK_COUNT).
    FreeBlocksTotal = 0x05000f, "free-blocks-wrong", P5, Notice [preen pass5 fix],
        "the superblock says {found} free blocks, should be {expected}";
    /// free-inodes-wrong (e2fsck PR_5_FREE_INODE_COUNT).
    FreeInodesTotal = 0x05000d, "free-inodes-wrong", P5, Notice [preen pass5 fix],
        "the superblock says {found} free inodes, should be {expected}";
    /// inode-bitmap-padding (e2fsck PR_5_INODE_BMAP_PADDING).
    InodeBmapPadding = 0x050001, "inode-bitmap-padding", P5, Error [preen pass5],
        "the padding at the end of the inode bitmap is not set";
    /// block-bitmap-padding (e2fsck PR_5_BLOCK_BMAP_PADDING).
    BlockBmapPadding = 0x050002, "block-bitmap-padding", P5, Error [preen pass5],
        "the padding at the end of the block bitmap is not set";
    /// inode-bitmap-checksum (e2fsck PR_5_INODE_BITMAP_CSUM_INVALID).
    InodeBitmapCsum = 0x05001a, "inode-bitmap-checksum", P5, Error [preen pass5],
        "the inode bitmap of group {group} fails its checksum";
    /// block-bitmap-checksum (e2fsck PR_5_BLOCK_BITMAP_CSUM_INVALID).
    BlockBitmapCsum = 0x05001b, "block-bitmap-checksum", P5, Error [preen pass5],
        "the block bitmap of group {group} fails its checksum";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Code {
    /// The question e2fsck asks for this problem.
    pub fn prompt(self) -> crate::prompt::Prompt {
        crate::prompt::Prompt::of_e2fsck_code(self.e2fsck_code())
    }

    /// Whether e2fsck -y clears the whole inode for this pass-1 problem
    /// (the table's `clear` and `clear_blocks` columns).
    pub fn clears_inode(self) -> bool {
        self.policy().clears_inode
    }

    /// Whether e2fsck -y deallocates the inode (its blocks and the inode
    /// itself freed, its entry cleared) for this problem, met when an
    /// entry leads pass 2 to an inode pass 1 marked bad (`dealloc`).
    pub fn deallocates_inode(self) -> bool {
        self.policy().deallocates
    }

    /// Whether fixing it counts for the exit code (all but the table's
    /// `quiet` and `restart` codes). e2fsck repairs the descriptor fields
    /// while it reads the descriptors, without marking the file system
    /// changed, so a repair that does nothing else exits 0; ext4chk
    /// reports them fixed and exits as e2fsck does.
    pub(crate) fn counts_as_fix(self) -> bool {
        !self.policy().quiet
    }
}

/// The numbers a finding carries beyond its inode, block and group, named
/// for what they hold. Each kind of problem uses one shape, so a reader
/// asking for a value the finding does not hold gets `None`, never a 0
/// that was never found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Numbers {
    /// No number.
    #[default]
    None,
    /// A value read from disk that is wrong in itself (a mode, a field
    /// that must be zero, a count past what the format allows).
    Found {
        /// The value on disk.
        found: u64,
    },
    /// A value read from disk and the value the file system says it
    /// should have.
    Mismatch {
        /// The value on disk.
        found: u64,
        /// The value it should have.
        expected: u64,
    },
    /// A value read from disk and the bound it passes.
    OverLimit {
        /// The value on disk.
        found: u64,
        /// The most it may be.
        limit: u64,
    },
    /// A logical block within a file or directory.
    At {
        /// The logical block.
        logical: u64,
    },
    /// An extent's logical start and length (its physical start is the
    /// finding's block).
    Extent {
        /// The first logical block.
        logical: u64,
        /// The number of blocks.
        length: u64,
    },
    /// A logical block and the extent tree level it was met at.
    TreeLevel {
        /// The logical block.
        logical: u64,
        /// The level in the tree (0 is the root).
        level: u64,
    },
    /// A level of an extent tree (0 is the root).
    Level {
        /// The level.
        level: u64,
    },
    /// A byte offset in a logical block of a directory.
    Offset {
        /// The directory's logical block.
        logical: u64,
        /// The byte offset within it.
        offset: u64,
    },
    /// How much of a block could not be read.
    Sectors {
        /// The sectors that failed.
        bad: u64,
        /// The block's sectors.
        total: u64,
    },
    /// Blocks an inode shares with other files.
    Shared {
        /// The multiply-claimed blocks.
        blocks: u64,
        /// The other files claiming them.
        files: u64,
    },
}

impl Numbers {
    /// The value on disk.
    pub fn found(self) -> Option<u64> {
        match self {
            Numbers::Found { found }
            | Numbers::Mismatch { found, .. }
            | Numbers::OverLimit { found, .. } => Some(found),
            _ => None,
        }
    }

    /// The value the file system says it should have.
    pub fn expected(self) -> Option<u64> {
        match self {
            Numbers::Mismatch { expected, .. } => Some(expected),
            _ => None,
        }
    }

    /// The bound the value passes.
    pub fn limit(self) -> Option<u64> {
        match self {
            Numbers::OverLimit { limit, .. } => Some(limit),
            _ => None,
        }
    }

    /// A logical block within a file or directory.
    pub fn logical(self) -> Option<u64> {
        match self {
            Numbers::At { logical }
            | Numbers::Extent { logical, .. }
            | Numbers::TreeLevel { logical, .. }
            | Numbers::Offset { logical, .. } => Some(logical),
            _ => None,
        }
    }

    /// An extent's length in blocks.
    pub fn length(self) -> Option<u64> {
        match self {
            Numbers::Extent { length, .. } => Some(length),
            _ => None,
        }
    }

    /// The extent tree level.
    pub fn level(self) -> Option<u64> {
        match self {
            Numbers::TreeLevel { level, .. } | Numbers::Level { level } => Some(level),
            _ => None,
        }
    }

    /// A byte offset within a directory block.
    pub fn offset(self) -> Option<u64> {
        match self {
            Numbers::Offset { offset, .. } => Some(offset),
            _ => None,
        }
    }

    /// The sectors that could not be read.
    pub fn bad_sectors(self) -> Option<u64> {
        match self {
            Numbers::Sectors { bad, .. } => Some(bad),
            _ => None,
        }
    }

    /// The sectors of the block.
    pub fn sectors(self) -> Option<u64> {
        match self {
            Numbers::Sectors { total, .. } => Some(total),
            _ => None,
        }
    }

    /// The multiply-claimed blocks.
    pub fn shared_blocks(self) -> Option<u64> {
        match self {
            Numbers::Shared { blocks, .. } => Some(blocks),
            _ => None,
        }
    }

    /// The other files sharing them.
    pub fn sharing_files(self) -> Option<u64> {
        match self {
            Numbers::Shared { files, .. } => Some(files),
            _ => None,
        }
    }

    /// The numbers that say what was found, without what was expected (a
    /// count that a fix of something else changes is still the same
    /// problem).
    pub fn without_expected(self) -> Numbers {
        match self {
            Numbers::Mismatch { found, .. } => Numbers::Found { found },
            other => other,
        }
    }

    /// The value a template names by `key`, if this shape holds it.
    fn by_key(self, key: &str) -> Option<u64> {
        match key {
            "found" => self.found(),
            "expected" => self.expected(),
            "limit" => self.limit(),
            "logical" => self.logical(),
            "length" => self.length(),
            "level" => self.level(),
            "offset" => self.offset(),
            "bad_sectors" => self.bad_sectors(),
            "sectors" => self.sectors(),
            "shared_blocks" => self.shared_blocks(),
            "sharing_files" => self.sharing_files(),
            _ => None,
        }
    }
}

/// A directory entry's name as a message shows it: UTF-8 as it is;
/// control characters as `^X` and bytes that are not UTF-8 as `M-x`, as
/// e2fsck writes them (an encrypted or damaged name is full of both), so
/// a report never sends raw bytes to a terminal.
pub fn printable(name: &[u8]) -> String {
    fn control(out: &mut String, b: u8) {
        if b < 0x20 || b == 0x7f {
            out.push('^');
            out.push(char::from(b ^ 0x40));
        } else {
            out.push(char::from(b));
        }
    }
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            match u8::try_from(c) {
                Ok(b) if b.is_ascii() => control(&mut out, b),
                _ => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            out.push_str("M-");
            control(&mut out, b & 0x7f);
        }
    }
    out
}

/// One problem found: the code and the numbers that locate it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What is wrong.
    pub code: Code,
    /// The inode concerned.
    pub ino: Option<u32>,
    /// A second inode (e.g. the one an entry points to).
    pub ino2: Option<u32>,
    /// The directory concerned.
    pub dir: Option<u32>,
    /// The block concerned.
    pub blk: Option<u64>,
    /// A second block.
    pub blk2: Option<u64>,
    /// The group concerned.
    pub group: Option<u32>,
    /// The other numbers, in the shape this kind of problem uses.
    pub numbers: Numbers,
    /// The name of the directory entry concerned, its bytes as they are
    /// on disk (a name need not be UTF-8).
    pub name: Option<Vec<u8>>,
    /// The words that complete the message: a reason, a field's name, a
    /// quota type, a list of blocks.
    pub detail: Option<String>,
    /// Whether a repair fixed it.
    pub fixed: bool,
    /// Whether its fix left the file system unchanged in e2fsck's sense (a
    /// pointer cleared in an indirect block is written without marking
    /// the file system changed): alone, it does not make the exit code 1.
    pub quiet: bool,
    /// The path of `dir`, when the check could name it.
    pub dir_path: Option<String>,
    /// The path of `ino`, where e2fsck names it.
    pub ino_path: Option<String>,
    /// When the finding is about the inode an entry leads to (not the
    /// entry): the directory holding that entry, `name` being its name,
    /// so the inode can be named by path.
    pub entry_dir: Option<u32>,
}

impl Finding {
    /// A finding with just a code.
    pub fn new(code: Code) -> Self {
        Finding {
            code,
            ino: None,
            ino2: None,
            dir: None,
            blk: None,
            blk2: None,
            group: None,
            numbers: Numbers::None,
            name: None,
            detail: None,
            fixed: false,
            quiet: false,
            dir_path: None,
            ino_path: None,
            entry_dir: None,
        }
    }

    /// Sets the entry that leads to the inode: its directory and name.
    pub fn via_entry(mut self, dir: u32, name: &[u8]) -> Self {
        self.entry_dir = Some(dir);
        self.name = Some(name.to_vec());
        self
    }

    /// Sets the inode.
    pub fn ino(mut self, v: u32) -> Self {
        self.ino = Some(v);
        self
    }

    /// Sets the second inode.
    pub fn ino2(mut self, v: u32) -> Self {
        self.ino2 = Some(v);
        self
    }

    /// Sets the directory.
    pub fn dir(mut self, v: u32) -> Self {
        self.dir = Some(v);
        self
    }

    /// Sets the block.
    pub fn blk(mut self, v: u64) -> Self {
        self.blk = Some(v);
        self
    }

    /// Sets the second block.
    pub fn blk2(mut self, v: u64) -> Self {
        self.blk2 = Some(v);
        self
    }

    /// Sets the group.
    pub fn group(mut self, v: u32) -> Self {
        self.group = Some(v);
        self
    }

    /// Sets the value found on disk, wrong in itself.
    pub fn found(mut self, found: u64) -> Self {
        self.numbers = Numbers::Found { found };
        self
    }

    /// Sets the value found on disk and the value it should have.
    pub fn mismatch(mut self, found: u64, expected: u64) -> Self {
        self.numbers = Numbers::Mismatch { found, expected };
        self
    }

    /// Sets the value found on disk and the bound it passes.
    pub fn over_limit(mut self, found: u64, limit: u64) -> Self {
        self.numbers = Numbers::OverLimit { found, limit };
        self
    }

    /// Sets the logical block concerned.
    pub fn logical(mut self, logical: u64) -> Self {
        self.numbers = Numbers::At { logical };
        self
    }

    /// Sets the extent concerned: its logical start and length.
    pub fn extent(mut self, logical: u64, length: u64) -> Self {
        self.numbers = Numbers::Extent { logical, length };
        self
    }

    /// Sets an extent tree level (0 is the root).
    pub fn level(mut self, level: u64) -> Self {
        self.numbers = Numbers::Level { level };
        self
    }

    /// Sets the logical block and the extent tree level it was met at.
    pub fn tree_level(mut self, logical: u64, level: u64) -> Self {
        self.numbers = Numbers::TreeLevel { logical, level };
        self
    }

    /// Sets the directory block and the byte offset within it.
    pub fn offset(mut self, logical: u64, offset: u64) -> Self {
        self.numbers = Numbers::Offset { logical, offset };
        self
    }

    /// Sets how many of a block's sectors could not be read.
    pub fn sectors(mut self, bad: u64, total: u64) -> Self {
        self.numbers = Numbers::Sectors { bad, total };
        self
    }

    /// Sets how many blocks are shared and with how many files.
    pub fn shared(mut self, blocks: u64, files: u64) -> Self {
        self.numbers = Numbers::Shared { blocks, files };
        self
    }

    /// Sets the directory entry's name.
    pub fn name(mut self, v: impl Into<Vec<u8>>) -> Self {
        self.name = Some(v.into());
        self
    }

    /// Sets the words that complete the message.
    pub fn detail(mut self, v: impl Into<String>) -> Self {
        self.detail = Some(v.into());
        self
    }

    /// The inode concerned, as an inode number (never 0).
    pub fn inode(&self) -> Option<Ino> {
        self.ino.and_then(Ino::new)
    }

    /// The second inode, as an inode number (never 0).
    pub fn inode2(&self) -> Option<Ino> {
        self.ino2.and_then(Ino::new)
    }

    /// The directory concerned, as an inode number (never 0).
    pub fn directory(&self) -> Option<Ino> {
        self.dir.and_then(Ino::new)
    }

    /// The value it should have, where this kind of problem carries one.
    pub fn expected(&self) -> Option<u64> {
        self.numbers.expected()
    }

    /// The message with the template's fields filled in.
    pub fn message(&self) -> String {
        let t = self.code.template();
        let mut out = String::with_capacity(t.len() + 16);
        let mut rest = t;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                out.push_str(&rest[open..]);
                rest = "";
                break;
            };
            let (key, form) = after[..close]
                .split_once(':')
                .unwrap_or((&after[..close], ""));
            let val = match key {
                "ino" => self.ino.map(|v| match &self.ino_path {
                    Some(p) => format!("{v} ({p})"),
                    None => v.to_string(),
                }),
                "ino2" => self.ino2.map(|v| v.to_string()),
                "dir" => self.dir.map(|v| match &self.dir_path {
                    Some(p) => format!("{p} ({v})"),
                    None => v.to_string(),
                }),
                "blk" => self.blk.map(|v| v.to_string()),
                "blk2" => self.blk2.map(|v| v.to_string()),
                "group" => self.group.map(|v| v.to_string()),
                "name" => self.name.as_deref().map(printable),
                "detail" => self.detail.clone(),
                _ => self.numbers.by_key(key).map(|v| match form {
                    "x" => format!("{v:#x}"),
                    "o" => format!("0{v:o}"),
                    _ => v.to_string(),
                }),
            };
            out.push_str(val.as_deref().unwrap_or("?"));
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The key findings are sorted by, so reports are the same however
    /// many threads made them.
    pub(crate) fn sort_key(&self) -> impl Ord + '_ {
        (
            self.code.pass(),
            self.group.unwrap_or(0),
            self.dir.unwrap_or(0),
            self.ino.unwrap_or(0),
            self.blk.unwrap_or(0),
            self.code,
            self.ino2.unwrap_or(0),
            self.blk2.unwrap_or(0),
            self.numbers,
            self.name.as_deref().unwrap_or(&[]),
            self.detail.as_deref().unwrap_or(""),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique() {
        let mut seen = HashSet::new();
        for c in Code::ALL {
            assert!(seen.insert(c.name()), "duplicate name {}", c.name());
        }
    }

    /// Every template names only fields a finding has, and the numbers it
    /// names all fit one shape, so no message can ask for a value its
    /// finding cannot carry.
    #[test]
    fn templates_name_fields_a_finding_can_hold() {
        let shapes = [
            Numbers::Found { found: 1 },
            Numbers::Mismatch {
                found: 1,
                expected: 2,
            },
            Numbers::OverLimit { found: 1, limit: 2 },
            Numbers::At { logical: 1 },
            Numbers::Extent {
                logical: 1,
                length: 2,
            },
            Numbers::TreeLevel {
                logical: 1,
                level: 2,
            },
            Numbers::Level { level: 1 },
            Numbers::Offset {
                logical: 1,
                offset: 2,
            },
            Numbers::Sectors { bad: 1, total: 2 },
            Numbers::Shared {
                blocks: 1,
                files: 2,
            },
        ];
        let fields = [
            "ino", "ino2", "dir", "blk", "blk2", "group", "name", "detail",
        ];
        for &c in Code::ALL {
            let mut numbers = Vec::new();
            let mut rest = c.template();
            while let Some(open) = rest.find('{') {
                let close = rest[open..].find('}').map(|i| open + i);
                let Some(close) = close else {
                    panic!("{}: an unclosed brace", c.name());
                };
                let key = rest[open + 1..close].split(':').next().unwrap_or("");
                if !fields.contains(&key) {
                    numbers.push(key);
                }
                rest = &rest[close + 1..];
            }
            if numbers.is_empty() {
                continue;
            }
            assert!(
                shapes
                    .iter()
                    .any(|s| numbers.iter().all(|k| s.by_key(k).is_some())),
                "{}: {numbers:?} fit no one shape of numbers",
                c.name()
            );
        }
    }

    #[test]
    fn message_fills_fields() {
        let f = Finding::new(Code::BadISize).ino(12).mismatch(10, 5);
        assert_eq!(f.message(), "inode 12 has size 10, should be 5");
        assert_eq!(f.expected(), Some(5));
        let f = Finding::new(Code::GroupDescChecksum)
            .group(0)
            .mismatch(0x1234, 0x16da);
        assert_eq!(
            f.message(),
            "the descriptor checksum of group 0 is 0x1234, should be 0x16da"
        );
        let f = Finding::new(Code::ReservedBadMode).ino(7).found(0o100644);
        assert_eq!(f.message(), "reserved inode 7 has a bad mode (0100644)");
        let f = Finding::new(Code::ExtentEndOutOfBounds)
            .ino(12)
            .blk(900)
            .tree_level(40, 1);
        assert_eq!(
            f.message(),
            "inode 12: the extent at logical block 40 (tree level 1) ends past the range its index allows"
        );
    }

    /// A value the finding's shape does not hold reads as absent, never
    /// as a number: a size finding without its expected size cannot set a
    /// size of 0, and a message shows "?" for it.
    #[test]
    fn a_value_a_finding_does_not_hold_is_absent() {
        let f = Finding::new(Code::BadISize).ino(12).found(10);
        assert_eq!(f.expected(), None);
        assert_eq!(f.message(), "inode 12 has size 10, should be ?");
        let f = Finding::new(Code::NonUniqueFile).dir(2).name("a\0b\x7f");
        assert_eq!(f.message(), "directory 2 has two files named 'a^@b^?'");
        let f = Finding::new(Code::NonUniqueFile)
            .dir(2)
            .name(&b"x\xffy \xc3\xa9"[..]);
        assert_eq!(
            f.message(),
            "directory 2 has two files named 'xM-^?y \u{e9}'"
        );
        let f = Finding::new(Code::DirCorrupted).dir(2).offset(3, 24);
        assert_eq!(f.numbers.found(), None);
        assert_eq!(f.numbers.logical(), Some(3));
        assert_eq!(f.numbers.offset(), Some(24));
    }

    /// The repair columns hold together for every code: each kind of fix
    /// belongs to the pass whose planner makes it, a code has at most one
    /// kind, and only codes a repair acts on carry one.
    #[test]
    fn repair_columns_agree_for_every_code() {
        for &c in Code::ALL {
            let p = c.policy();
            let name = c.name();
            let acts = c.severity() == Severity::Error || p.fix_notice || p.preen || p.quiet;
            let kinds = [
                p.clears_inode,
                p.deallocates,
                p.block_map,
                p.rereads_blocks,
                p.drops_index,
            ];
            assert!(
                kinds.iter().filter(|&&k| k).count() <= 1,
                "{name}: more than one kind of fix"
            );
            if kinds.iter().any(|&k| k) || p.restarts || p.settles_for_pass5 {
                assert!(acts, "{name}: a kind of fix on a code no repair acts on");
            }
            if p.clears_from_blocks {
                assert!(p.clears_inode, "{name}: clear_blocks without clear");
            }
            if p.no_fix {
                assert!(acts, "{name}: none on a code no repair acts on");
                assert!(
                    !kinds.iter().any(|&k| k) && !p.restarts && !p.rebuilt_by_pass5,
                    "{name}: none and a kind of fix"
                );
            }
            if p.clears_inode || p.block_map || p.rereads_blocks || p.inode_order != 20 {
                assert_eq!(c.pass(), Pass::P1, "{name}: an inode fix outside pass 1");
            }
            if p.deallocates {
                assert_eq!(c.pass(), Pass::P2, "{name}: dealloc outside pass 2");
            }
            if p.drops_index {
                assert!(
                    matches!(c.pass(), Pass::P1 | Pass::P2),
                    "{name}: unindex outside passes 1 and 2"
                );
            }
            if p.restarts {
                assert!(p.quiet, "{name}: a restart that counts as a fix");
                assert_eq!(c.pass(), Pass::P2, "{name}: restart outside pass 2");
            }
            if p.settles_for_pass5 {
                assert_eq!(c.pass(), Pass::P4, "{name}: settles outside pass 4");
            }
            if p.rebuilt_by_pass5 {
                assert!(
                    !(p.clears_inode || p.block_map || p.deallocates),
                    "{name}: rebuilt by pass 5 and fixed in an inode too"
                );
            }
        }
        // The counts the columns had as match lists.
        let count = |f: fn(&FixPolicy) -> bool| Code::ALL.iter().filter(|c| f(&c.policy())).count();
        assert_eq!(count(|p| p.clears_inode), 9);
        assert_eq!(count(|p| p.clears_from_blocks), 3);
        assert_eq!(count(|p| p.deallocates), 6);
        // extent-only-checksum left `blocks` for `quiet`: its block is
        // rewritten in place, as e2fsck rewrites it.
        assert_eq!(count(|p| p.block_map), 14);
        // 10, then inline-data-attr-missing, looks-like-directory and
        // special-file-extents-inline became answered: the check reads
        // on as their fixes leave it.
        assert_eq!(count(|p| p.rereads_blocks), 7);
        assert_eq!(count(|p| p.drops_index), 17);
        // Quiet: 11, then the journal's moving and backup (e2fsck's
        // messages without a prompt) and the two optimisations.
        assert_eq!(count(|p| p.quiet), 15);
        assert_eq!(count(|p| p.optional), 2);
        assert_eq!(count(|p| p.restarts), 2);
        // 5, then the EA_INODE flag cleared from an ordinary file.
        assert_eq!(count(|p| p.settles_for_pass5), 6);
    }
}
