//! `-E` extended options: a comma-separated list of names, some with
//! `=value`, with e2fsck 1.47's names and meanings.

use crate::error::{BadExtended, ExtendedError};

/// The option names ext4chk accepts, as its help lists them.
pub const VALID: &[&str] = &[
    "ea_ver=1|2",
    "fragcheck",
    "journal_only",
    "discard",
    "nodiscard",
    "optimize_extents",
    "no_optimize_extents",
    "inode_count_fullmap",
    "no_inode_count_fullmap",
    "readahead_kb=N",
    "bmap2extent",
    "unshare_blocks",
    "fixes_only",
    "check_encoding",
];

/// The extended options of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extended {
    /// `ea_ver=`: the extended attribute block version (1 or 2).
    pub ea_ver: u8,
    /// `journal_only`: replay the journal and stop (unless the check is forced).
    pub journal_only: bool,
    /// `discard`: discard free blocks once a check finds the file system clean.
    pub discard: bool,
    /// `readahead_kb=`: how far ahead of the workers inode tables are read.
    pub readahead_kb: Option<u64>,
    /// `fragcheck`: list the discontiguous blocks of every file.
    pub fragcheck: bool,
    /// `bmap2extent`: convert block-mapped files to extents.
    pub bmap2extent: bool,
    /// `fixes_only`: fix damage only, no optimization of directories or
    /// extent trees.
    pub fixes_only: bool,
    /// `check_encoding`: check names in case-folded directories against
    /// the encoding.
    pub check_encoding: bool,
    /// `optimize_extents` / `no_optimize_extents`.
    pub optimize_extents: Option<bool>,
    /// `inode_count_fullmap` / `no_inode_count_fullmap`: a memory
    /// trade-off in e2fsck; ext4chk's link counts need no choice.
    pub inode_count_fullmap: Option<bool>,
    /// `unshare_blocks`: give every file its own copy of shared blocks
    /// (implies -f).
    pub unshare_blocks: bool,
    /// `log_filename=` / `problem_log=`: accepted as e2fsck does; ext4chk
    /// has its JSON report for that.
    pub log_file: Option<String>,
}

impl Default for Extended {
    fn default() -> Self {
        Extended {
            ea_ver: 2,
            journal_only: false,
            discard: false,
            readahead_kb: None,
            fragcheck: false,
            bmap2extent: false,
            fixes_only: false,
            check_encoding: false,
            optimize_extents: None,
            inode_count_fullmap: None,
            unshare_blocks: false,
            log_file: None,
        }
    }
}

/// Parses one `-E` list. Every item is looked at; the error names each
/// bad one.
pub fn parse(list: &str) -> Result<Extended, BadExtended> {
    let mut e = Extended::default();
    let mut bad: Vec<ExtendedError> = Vec::new();
    if list.is_empty() {
        return Ok(e);
    }
    for item in list.split(',') {
        let (name, arg) = match item.split_once('=') {
            Some((n, a)) => (n, Some(a)),
            None => (item, None),
        };
        let flag = |v: &mut bool| {
            if arg.is_some() {
                false
            } else {
                *v = true;
                true
            }
        };
        let ok = match name {
            "ea_ver" => match arg.and_then(parse_c_number) {
                Some(v @ (1 | 2)) => {
                    e.ea_ver = v as u8;
                    true
                }
                _ => {
                    bad.push(ExtendedError::EaVersion(item.to_string()));
                    continue;
                }
            },
            "readahead_kb" => match arg.and_then(parse_c_number) {
                Some(v) => {
                    e.readahead_kb = Some(v);
                    true
                }
                None => {
                    bad.push(ExtendedError::Readahead(item.to_string()));
                    continue;
                }
            },
            "fragcheck" => flag(&mut e.fragcheck),
            "journal_only" => flag(&mut e.journal_only),
            "discard" => {
                let mut on = false;
                let ok = flag(&mut on);
                if ok {
                    e.discard = true;
                }
                ok
            }
            "nodiscard" => {
                let mut on = false;
                let ok = flag(&mut on);
                if ok {
                    e.discard = false;
                }
                ok
            }
            "optimize_extents" | "no_optimize_extents" => {
                let mut on = false;
                let ok = flag(&mut on);
                if ok {
                    e.optimize_extents = Some(name == "optimize_extents");
                }
                ok
            }
            "inode_count_fullmap" | "no_inode_count_fullmap" => {
                let mut on = false;
                let ok = flag(&mut on);
                if ok {
                    e.inode_count_fullmap = Some(name == "inode_count_fullmap");
                }
                ok
            }
            "bmap2extent" => flag(&mut e.bmap2extent),
            "fixes_only" => flag(&mut e.fixes_only),
            "check_encoding" => flag(&mut e.check_encoding),
            "unshare_blocks" => flag(&mut e.unshare_blocks),
            "log_filename" | "problem_log" => match arg {
                Some(a) => {
                    e.log_file = Some(a.to_string());
                    true
                }
                None => false,
            },
            _ => false,
        };
        if !ok {
            bad.push(ExtendedError::Unknown(item.to_string()));
        }
    }
    if bad.is_empty() {
        Ok(e)
    } else {
        Err(BadExtended(bad))
    }
}

/// `strtoul(s, &end, 0)` with nothing left over: decimal, 0x hex or 0
/// octal.
fn parse_c_number(s: &str) -> Option<u64> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values() {
        let e = parse("ea_ver=1,fragcheck,readahead_kb=0x10,discard,nodiscard,no_optimize_extents")
            .unwrap();
        assert_eq!(e.ea_ver, 1);
        assert!(e.fragcheck);
        assert_eq!(e.readahead_kb, Some(16));
        assert!(!e.discard);
        assert_eq!(e.optimize_extents, Some(false));
        assert_eq!(parse("").unwrap(), Extended::default());
    }

    #[test]
    fn bad_items_are_all_named() {
        let err = parse("fragcheck,bogus,alsobogus").unwrap_err().to_string();
        assert!(
            err.contains("'bogus'") && err.contains("'alsobogus'"),
            "{err}"
        );
        assert!(parse("ea_ver=3").is_err());
        assert!(parse("ea_ver").is_err());
        assert!(parse("journal_only=1").is_err());
        assert!(parse(",,").is_err());
        assert!(parse("readahead_kb=abc").is_err());
        assert!(parse("log_filename").is_err());
        assert!(parse("log_filename=x").is_ok());
    }
}
