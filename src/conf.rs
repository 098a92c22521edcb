//! e2fsck.conf: the configuration e2fsck reads, in its syntax and with its
//! meanings, so that a machine configured for e2fsck gets the same verdict
//! from ext4chk.
//!
//! The file is a "profile": lines before the first `[section]` header in
//! column 0 are ignored; `tag = value` relations sit in sections;
//! `tag = {` ... `}` opens a subsection (the `[problems]` entries); `#`
//! and `;` start comments; the first of repeated relations wins. A path
//! that is a directory means every file in it whose name is made of
//! letters, digits, `_` and `-`, in sorted order.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use check_core::overrides::Override;

/// What is wrong with a configuration file's syntax (the file is then not
/// used and the run stops, as e2fsck stops).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The file.
    pub path: PathBuf,
    /// The line, from 1.
    pub line: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} line {}: {}",
            self.path.display(),
            self.line,
            self.what
        )
    }
}

/// One node of a profile: a relation (`value` set) or a section or
/// subsection (children).
#[derive(Debug, Clone, Default)]
struct Node {
    name: String,
    value: Option<String>,
    children: Vec<Node>,
    /// Where it was read.
    file: usize,
    line: usize,
}

impl Node {
    fn child_mut_or_add(&mut self, name: &str, file: usize, line: usize) -> &mut Node {
        if let Some(i) = self
            .children
            .iter()
            .position(|c| c.name == name && c.value.is_none())
        {
            return &mut self.children[i];
        }
        self.children.push(Node {
            name: name.to_string(),
            file,
            line,
            ..Node::default()
        });
        self.children.last_mut().expect("just pushed")
    }
}

/// A parsed profile.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    root: Node,
    files: Vec<PathBuf>,
}

/// A relation's value and where it came from.
#[derive(Debug, Clone, Copy)]
pub struct Value<'a> {
    /// The text.
    pub text: &'a str,
    file: &'a Path,
    line: usize,
}

impl Value<'_> {
    /// "FILE line N", for messages.
    pub fn place(&self) -> String {
        format!("{} line {}", self.file.display(), self.line)
    }
}

fn blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

fn end_or_comment(rest: &[u8]) -> bool {
    matches!(rest.first(), None | Some(b'#') | Some(b';'))
}

fn skip_blanks(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&c| blank(c)).count();
    &s[n..]
}

/// A quoted string's contents: up to the closing quote, with `\n`, `\t`,
/// `\b` and `\x` (any other character, itself). Anything after the quote
/// is ignored.
fn unquote(s: &[u8]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() && s[i] != b'"' {
        if s[i] == b'\\' && i + 1 < s.len() {
            out.push(match s[i + 1] {
                b'n' => b'\n',
                b't' => b'\t',
                b'b' => 8,
                c => c,
            });
            i += 2;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

enum State {
    /// Before the first section header.
    Prologue,
    Lines,
    /// After `tag =` with nothing after it: the next line must be `{`.
    WantBrace,
}

struct Parser<'p> {
    state: State,
    /// The open nodes: the root, the section, then subsections.
    path: Vec<String>,
    profile: &'p mut Profile,
    file: usize,
}

const RELATION: &str = "syntax error in a relation (expected 'tag = value')";
const HEADER: &str = "syntax error in a section header (expected '[name]')";
const EXTRA_BRACE: &str = "a closing brace with no subsection open";
const NO_BRACE: &str = "a subsection without its opening brace";
const NOT_TOP: &str = "a section header inside a subsection";

impl Parser<'_> {
    fn current(&mut self) -> &mut Node {
        let (file, path) = (self.file, self.path.clone());
        let mut node = &mut self.profile.root;
        for name in &path {
            node = node.child_mut_or_add(name, file, 0);
        }
        node
    }

    fn line(&mut self, raw: &[u8], line: usize) -> Result<(), &'static str> {
        let mut text = raw;
        while let Some((&last, rest)) = text.split_last() {
            if last == b'\n' || last == b'\r' {
                text = rest;
            } else {
                break;
            }
        }
        match self.state {
            State::Prologue => {
                if text.first() != Some(&b'[') {
                    return Ok(());
                }
                self.state = State::Lines;
            }
            State::WantBrace => {
                let rest = skip_blanks(text);
                if rest.first() != Some(&b'{') {
                    return Err(NO_BRACE);
                }
                self.state = State::Lines;
                return Ok(());
            }
            State::Lines => {}
        }
        if matches!(text.first(), Some(b'#') | Some(b';')) {
            return Ok(());
        }
        let cp = skip_blanks(text);
        if end_or_comment(cp) {
            return Ok(());
        }
        match cp[0] {
            b'[' => self.header(&cp[1..], line),
            b'}' => {
                if self.path.len() <= 1 {
                    return Err(EXTRA_BRACE);
                }
                self.path.pop();
                Ok(())
            }
            _ => self.relation(cp, line),
        }
    }

    fn header(&mut self, after: &[u8], line: usize) -> Result<(), &'static str> {
        if self.path.len() > 1 {
            return Err(NOT_TOP);
        }
        let close = after.iter().position(|&c| c == b']').ok_or(HEADER)?;
        let name = &after[..close];
        if name.is_empty() {
            return Err(HEADER);
        }
        let mut rest = &after[close + 1..];
        if rest.first() == Some(&b'*') {
            rest = &rest[1..];
        }
        if !skip_blanks(rest).is_empty() && !end_or_comment(skip_blanks(rest)) {
            return Err(HEADER);
        }
        let name = String::from_utf8_lossy(name).into_owned();
        let file = self.file;
        self.profile.root.child_mut_or_add(&name, file, line);
        self.path = vec![name];
        Ok(())
    }

    fn relation(&mut self, cp: &[u8], line: usize) -> Result<(), &'static str> {
        let eq = cp.iter().position(|&c| c == b'=').ok_or(RELATION)?;
        if eq == 0 {
            return Err(RELATION);
        }
        let lhs = &cp[..eq];
        let tag = if lhs[0] == b'"' {
            unquote(&lhs[1..])
        } else {
            let n = lhs.iter().take_while(|&&c| !blank(c)).count();
            if !skip_blanks(&lhs[n..]).is_empty() {
                return Err(RELATION);
            }
            String::from_utf8_lossy(&lhs[..n]).into_owned()
        };
        let tag = match tag.split_once('*') {
            Some((t, _)) => t.to_string(),
            None => tag,
        };
        let value = skip_blanks(&cp[eq + 1..]);
        let file = self.file;
        if value.first() == Some(&b'"') {
            let v = unquote(&value[1..]);
            self.add(tag, v, line);
            return Ok(());
        }
        let opens = if end_or_comment(value) {
            self.state = State::WantBrace;
            true
        } else if value[0] == b'{' {
            if !end_or_comment(skip_blanks(&value[1..])) {
                return Err(RELATION);
            }
            true
        } else {
            false
        };
        if opens {
            self.current().children.push(Node {
                name: tag.clone(),
                file,
                line,
                ..Node::default()
            });
            self.path.push(tag);
            return Ok(());
        }
        let n = value.iter().take_while(|&&c| !blank(c)).count();
        if !end_or_comment(skip_blanks(&value[n..])) {
            return Err(RELATION);
        }
        let v = String::from_utf8_lossy(&value[..n]).into_owned();
        self.add(tag, v, line);
        Ok(())
    }

    fn add(&mut self, tag: String, value: String, line: usize) {
        let file = self.file;
        self.current().children.push(Node {
            name: tag,
            value: Some(value),
            file,
            line,
            children: Vec::new(),
        });
    }
}

/// Whether a file in a configuration directory is read: e2fsck skips
/// names with anything but letters, digits, `_` and `-` (editor backups,
/// `.conf` files, `.rpmsave`).
fn config_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

impl Profile {
    /// Parses `text` as the file `path` and adds it to the profile.
    pub fn add_text(&mut self, path: &Path, text: &[u8]) -> Result<(), SyntaxError> {
        let file = self.files.len();
        self.files.push(path.to_path_buf());
        if self.root.name.is_empty() {
            self.root.name = "/".into();
        }
        let mut p = Parser {
            state: State::Prologue,
            path: vec![],
            profile: self,
            file,
        };
        for (i, raw) in text.split_inclusive(|&c| c == b'\n').enumerate() {
            // e2fsck reads lines of at most 2047 bytes.
            let raw = &raw[..raw.len().min(2047)];
            if let Err(what) = p.line(raw, i + 1) {
                return Err(SyntaxError {
                    path: path.to_path_buf(),
                    line: i + 1,
                    what,
                });
            }
            if p.path.is_empty() && !matches!(p.state, State::Prologue) {
                p.path = vec![];
            }
        }
        Ok(())
    }

    /// Reads the configuration at `path`: a file, or a directory of them.
    /// A missing or unreadable path is an empty profile, as it is to e2fsck.
    pub fn load(path: &Path) -> Result<Profile, SyntaxError> {
        let mut p = Profile::default();
        let files: Vec<PathBuf> = if path.is_dir() {
            let mut names: Vec<String> = std::fs::read_dir(path)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| config_name_ok(n))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names.into_iter().map(|n| path.join(n)).collect()
        } else {
            vec![path.to_path_buf()]
        };
        for f in files {
            if let Ok(text) = std::fs::read(&f) {
                p.add_text(&f, &text)?;
            }
        }
        Ok(p)
    }

    /// The first value of `tag` in `section`.
    pub fn get(&self, section: &str, tag: &str) -> Option<Value<'_>> {
        self.root
            .children
            .iter()
            .filter(|c| c.name == section && c.value.is_none())
            .flat_map(|s| s.children.iter())
            .find(|n| n.name == tag && n.value.is_some())
            .map(|n| self.value_of(n))
    }

    fn value_of<'a>(&'a self, n: &'a Node) -> Value<'a> {
        Value {
            text: n.value.as_deref().unwrap_or(""),
            file: &self.files[n.file],
            line: n.line,
        }
    }

    /// Every relation of `section`, in file order, with its subsections'
    /// relations (`name`, `tag`, value) for the second level.
    fn relations(&self, section: &str) -> Vec<(&Node, Option<&Node>)> {
        let mut out = Vec::new();
        for s in self
            .root
            .children
            .iter()
            .filter(|c| c.name == section && c.value.is_none())
        {
            for n in &s.children {
                if n.value.is_some() {
                    out.push((n, None));
                } else {
                    for r in n.children.iter().filter(|r| r.value.is_some()) {
                        out.push((n, Some(r)));
                    }
                }
            }
        }
        out
    }
}

/// A boolean as profiles spell it, or `None` for anything else.
pub fn parse_bool(s: &str) -> Option<bool> {
    const YES: &[&str] = &["y", "yes", "true", "t", "1", "on"];
    const NO: &[&str] = &["n", "no", "false", "nil", "0", "off"];
    let l = s.to_ascii_lowercase();
    if YES.contains(&l.as_str()) {
        Some(true)
    } else if NO.contains(&l.as_str()) {
        Some(false)
    } else {
        None
    }
}

/// An integer as C's `strtol(s, &end, 0)` reads it, with nothing after it.
pub fn parse_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) =
        if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            (16, h)
        } else if body.len() > 1 && body.starts_with('0') {
            (8, &body[1..])
        } else {
            (10, body)
        };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// The settings ext4chk takes from the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where it was read (`None`: no file).
    pub path: Option<PathBuf>,
    /// `broken_system_clock`: no time checks.
    pub broken_system_clock: bool,
    /// `accept_time_fudge` (or its alias `buggy_init_scripts`): a time up
    /// to a day ahead is the clock's fault, fixed without asking.
    pub accept_time_fudge: bool,
    /// `defer_check_on_battery`: on battery, double the mount-count and
    /// interval limits.
    pub defer_check_on_battery: bool,
    /// `no_optimize_extents`.
    pub no_optimize_extents: Option<bool>,
    /// `inode_count_fullmap` (no effect on ext4chk's counts).
    pub inode_count_fullmap: Option<bool>,
    /// `readahead_kb`.
    pub readahead_kb: Option<u64>,
    /// `max_count_problems`: per-code limit on messages (0: none).
    pub max_count_problems: i64,
    /// `indexed_dir_slack_percentage`: free space left in the leaves of a
    /// rebuilt indexed directory.
    pub indexed_dir_slack_percentage: u32,
    /// `allow_cancellation`: a cancelled run of a valid file system exits 0.
    pub allow_cancellation: bool,
    /// `log_filename`: a copy of the output (percent codes expanded).
    pub log_filename: Option<String>,
    /// `log_dir`: where a relative `log_filename` goes.
    pub log_dir: Option<String>,
    /// `log_dir_fallback`: where it goes when `log_dir` is not writable.
    pub log_dir_fallback: Option<String>,
    /// `[defaults] undo_dir`.
    pub undo_dir: Option<String>,
    /// ext4chk's own `[ext4chk] undo = true`: every repair writes an undo
    /// file, named as `-z` with no name names it.
    pub undo_always: bool,
    /// `[problems]`, by e2fsck code.
    pub problems: BTreeMap<u32, Override>,
    /// Relations that were not understood, one line each ("FILE line N:
    /// ..."); they are otherwise ignored, as e2fsck ignores them.
    pub warnings: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: None,
            broken_system_clock: false,
            accept_time_fudge: true,
            defer_check_on_battery: true,
            no_optimize_extents: None,
            inode_count_fullmap: None,
            readahead_kb: None,
            max_count_problems: 0,
            indexed_dir_slack_percentage: 20,
            allow_cancellation: false,
            log_filename: None,
            log_dir: None,
            log_dir_fallback: None,
            undo_dir: None,
            undo_always: false,
            problems: BTreeMap::new(),
            warnings: Vec::new(),
        }
    }
}

/// `[options]` relations e2fsck reads that ext4chk accepts and ignores,
/// because they change nothing ext4chk prints or writes.
const IGNORED_OPTIONS: &[&str] = &[
    "readahead_mem_pct",
    "report_time",
    "report_verbose",
    "report_features",
    "old_bitmaps",
    "clear_test_fs_flag",
    "problem_log_filename",
    "log_dir_wait",
];

const BOOL_OPTIONS: &[&str] = &[
    "broken_system_clock",
    "accept_time_fudge",
    "buggy_init_scripts",
    "defer_check_on_battery",
    "no_optimize_extents",
    "inode_count_fullmap",
    "allow_cancellation",
];

const PROBLEM_FLAGS: &[&str] = &[
    "preen_ok",
    "no_ok",
    "no_default",
    "force_no",
    "no_nomsg",
    "preen_nomessage",
    "print_message_only",
    "no_collate",
    "preen_noheader",
    "not_a_fix",
];

impl Config {
    /// The configuration path: `$E2FSCK_CONFIG`, else /etc/e2fsck.conf.
    pub fn default_path() -> PathBuf {
        std::env::var_os("E2FSCK_CONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/etc/e2fsck.conf"))
    }

    /// Reads the configuration at [`Config::default_path`].
    pub fn load() -> Result<Config, SyntaxError> {
        let path = Self::default_path();
        let profile = Profile::load(&path)?;
        let mut c = Config::from_profile(&profile);
        if !profile.files.is_empty() && path.exists() {
            c.path = Some(path);
        }
        Ok(c)
    }

    /// The settings a profile gives.
    pub fn from_profile(p: &Profile) -> Config {
        let mut c = Config::default();
        let mut warnings = Vec::new();
        let boolean = |tag: &str, warnings: &mut Vec<String>| -> Option<bool> {
            let v = p.get("options", tag)?;
            match parse_bool(v.text) {
                Some(b) => Some(b),
                None => {
                    warnings.push(format!(
                        "{}: '{}' is not a boolean for {tag}; ignored",
                        v.place(),
                        v.text
                    ));
                    None
                }
            }
        };
        if let Some(b) = boolean("broken_system_clock", &mut warnings) {
            c.broken_system_clock = b;
        }
        if let Some(b) = boolean("accept_time_fudge", &mut warnings) {
            c.accept_time_fudge = b;
        }
        // The alias is read after, with the first as its default.
        if let Some(b) = boolean("buggy_init_scripts", &mut warnings) {
            c.accept_time_fudge = b;
        }
        if let Some(b) = boolean("defer_check_on_battery", &mut warnings) {
            c.defer_check_on_battery = b;
        }
        c.no_optimize_extents = boolean("no_optimize_extents", &mut warnings);
        c.inode_count_fullmap = boolean("inode_count_fullmap", &mut warnings);
        if let Some(b) = boolean("allow_cancellation", &mut warnings) {
            c.allow_cancellation = b;
        }
        let int = |tag: &str, warnings: &mut Vec<String>| -> Option<i64> {
            let v = p.get("options", tag)?;
            match parse_int(v.text) {
                Some(n) => Some(n),
                None => {
                    warnings.push(format!(
                        "{}: '{}' is not a number for {tag}; ignored",
                        v.place(),
                        v.text
                    ));
                    None
                }
            }
        };
        if let Some(n) = int("readahead_kb", &mut warnings) {
            if n >= 0 {
                c.readahead_kb = Some(n as u64);
            }
        }
        if let Some(n) = int("max_count_problems", &mut warnings) {
            c.max_count_problems = n;
        }
        if let Some(n) = int("indexed_dir_slack_percentage", &mut warnings) {
            // e2fsck reads it unsigned and puts back 20 for more than 100.
            c.indexed_dir_slack_percentage = match u32::try_from(n) {
                Ok(v) if v <= 100 => v,
                _ => 20,
            };
        }
        let string = |section: &str, tag: &str| p.get(section, tag).map(|v| v.text.to_string());
        c.log_filename = string("options", "log_filename");
        c.log_dir = string("options", "log_dir");
        c.log_dir_fallback = string("options", "log_dir_fallback");
        c.undo_dir = string("defaults", "undo_dir");
        if let Some(v) = p.get("ext4chk", "undo") {
            match parse_bool(v.text) {
                Some(b) => c.undo_always = b,
                None => warnings.push(format!(
                    "{}: '{}' is not a boolean for undo; ignored",
                    v.place(),
                    v.text
                )),
            }
        }
        // Relations nobody reads: named once each, so a typo is seen.
        for (n, _) in p.relations("options") {
            if n.value.is_some()
                && !BOOL_OPTIONS.contains(&n.name.as_str())
                && !IGNORED_OPTIONS.contains(&n.name.as_str())
                && ![
                    "readahead_kb",
                    "max_count_problems",
                    "indexed_dir_slack_percentage",
                    "log_filename",
                    "log_dir",
                    "log_dir_fallback",
                ]
                .contains(&n.name.as_str())
            {
                let v = p.value_of(n);
                warnings.push(format!(
                    "{}: unknown option '{}'; ignored",
                    v.place(),
                    n.name
                ));
            }
        }
        for (sub, rel) in p.relations("problems") {
            let Some(rel) = rel else {
                let v = p.value_of(sub);
                warnings.push(format!(
                    "{}: '{}' in [problems] is not a subsection; ignored",
                    v.place(),
                    sub.name
                ));
                continue;
            };
            let code = sub
                .name
                .strip_prefix("0x")
                .filter(|h| h.len() == 6)
                .and_then(|h| u32::from_str_radix(h, 16).ok());
            let Some(code) = code else {
                let v = p.value_of(rel);
                warnings.push(format!(
                    "{}: '{}' is not a problem code (0x followed by six hex digits); ignored",
                    v.place(),
                    sub.name
                ));
                continue;
            };
            let entry = c.problems.entry(code).or_default();
            let v = p.value_of(rel);
            let flag = |slot: &mut Option<bool>, warnings: &mut Vec<String>| {
                if slot.is_some() {
                    return; // the first one wins
                }
                match parse_bool(v.text) {
                    Some(b) => *slot = Some(b),
                    None => warnings.push(format!(
                        "{}: '{}' is not a boolean for {}; ignored",
                        v.place(),
                        v.text,
                        rel.name
                    )),
                }
            };
            match rel.name.as_str() {
                "preen_ok" => flag(&mut entry.preen_ok, &mut warnings),
                "no_ok" => flag(&mut entry.no_ok, &mut warnings),
                "no_default" => flag(&mut entry.no_default, &mut warnings),
                "force_no" => flag(&mut entry.force_no, &mut warnings),
                "no_nomsg" => flag(&mut entry.no_nomsg, &mut warnings),
                "preen_nomessage" => flag(&mut entry.preen_nomessage, &mut warnings),
                "max_count" => {
                    if entry.max_count.is_none() {
                        match parse_int(v.text) {
                            Some(n) => entry.max_count = Some(n),
                            None => warnings.push(format!(
                                "{}: '{}' is not a number for max_count; ignored",
                                v.place(),
                                v.text
                            )),
                        }
                    }
                }
                "description" => warnings.push(format!(
                    "{}: description is not used: ext4chk prints its own message",
                    v.place()
                )),
                other if PROBLEM_FLAGS.contains(&other) => {}
                other => warnings.push(format!(
                    "{}: unknown problem setting '{other}'; ignored",
                    v.place()
                )),
            }
        }
        c.warnings = warnings;
        c
    }
}

static CONFIG: OnceLock<Result<Config, SyntaxError>> = OnceLock::new();

/// Reads the configuration (once) and installs its `[problems]` changes.
/// What it says is used from then on; a syntax error is kept for
/// [`loaded`] to report once the command line has been read (e2fsck reads
/// its configuration after its options).
pub fn load() -> &'static Result<Config, SyntaxError> {
    CONFIG.get_or_init(|| {
        let c = Config::load();
        if let Ok(c) = &c {
            check_core::overrides::install(c.problems.clone());
        }
        c
    })
}

/// The configuration's verdict for a run: a syntax error as one line
/// (the run stops with exit code 8, as e2fsck's does), else a line on
/// standard error for each relation it does not understand.
pub fn loaded(prog: &str) -> Result<(), String> {
    match load() {
        Ok(c) => {
            for w in &c.warnings {
                errln!("{prog}: {w}");
            }
            Ok(())
        }
        Err(e) => Err(format!("{prog}: syntax error in the configuration, {e}")),
    }
}

/// The configuration in force (the defaults when it has a syntax error).
pub fn get() -> &'static Config {
    static DEFAULT: OnceLock<Config> = OnceLock::new();
    match load() {
        Ok(c) => c,
        Err(_) => DEFAULT.get_or_init(Config::default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, SyntaxError> {
        let mut p = Profile::default();
        p.add_text(Path::new("e2fsck.conf"), text.as_bytes())?;
        Ok(Config::from_profile(&p))
    }

    #[test]
    fn options_are_read_as_e2fsck_reads_them() {
        let c = parse(
            "# comment before the first section\n\
             not even a relation\n\
             [options]\n\
             \tbroken_system_clock = yes\n\
             accept_time_fudge = off ; trailing comment\n\
             max_count_problems = 0x10\n\
             indexed_dir_slack_percentage = 150\n\
             readahead_kb = 012\n\
             [problems]\n\
             \t0x040003 = {\n\
             \t\tpreen_ok = true\n\
             \t\tmax_count = 2\n\
             \t}\n\
             \t0x000031 =\n\
             \t{\n\
             \t\tforce_no = 1\n\
             \t}\n",
        )
        .expect("parses");
        assert!(c.broken_system_clock);
        assert!(!c.accept_time_fudge);
        assert_eq!(c.max_count_problems, 16);
        assert_eq!(
            c.indexed_dir_slack_percentage, 20,
            "over 100 is put back to 20"
        );
        assert_eq!(c.readahead_kb, Some(10), "octal, as strtol reads it");
        assert_eq!(c.problems[&0x040003].preen_ok, Some(true));
        assert_eq!(c.problems[&0x040003].max_count, Some(2));
        assert_eq!(c.problems[&0x000031].force_no, Some(true));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn the_first_of_repeated_relations_wins_and_the_alias_comes_after() {
        let c = parse("[options]\naccept_time_fudge = false\naccept_time_fudge = true\n")
            .expect("parses");
        assert!(!c.accept_time_fudge);
        let c = parse("[options]\naccept_time_fudge = false\nbuggy_init_scripts = true\n")
            .expect("parses");
        assert!(c.accept_time_fudge, "buggy_init_scripts is read last");
    }

    #[test]
    fn a_leading_blank_before_the_first_header_hides_the_whole_file() {
        let c = parse(" [options]\nbroken_system_clock = 1\n").expect("parses");
        assert!(!c.broken_system_clock);
    }

    #[test]
    fn syntax_errors_name_the_line() {
        for (text, line) in [
            ("[options]\nfoo bar = 1\n", 2),
            ("[options\n", 1),
            ("[options]\nx = a b\n", 2),
            ("[options]\n}\n", 2),
            ("[problems]\n0x040003 =\nno brace\n", 3),
            ("[options]\njust words\n", 2),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
        }
    }

    #[test]
    fn what_is_not_understood_is_named_and_ignored() {
        let c = parse(
            "[options]\nbroken_sytem_clock = 1\nbroken_system_clock = maybe\n\
             [problems]\n0x40003 = {\npreen_ok = 1\n}\n",
        )
        .expect("parses");
        assert!(!c.broken_system_clock, "a bad boolean leaves the default");
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(c
            .warnings
            .iter()
            .all(|w| w.starts_with("e2fsck.conf line ")));
        assert!(c.problems.is_empty());
    }
}
