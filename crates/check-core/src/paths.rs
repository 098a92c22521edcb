//! The paths of the directories and inodes findings are about, as e2fsck
//! names them in its messages ("entry 'f3' in /a (12)"). A directory's
//! path is built from its parent, which pass 2 found (the first entry
//! naming it), and its name there, read from the parent's blocks; each
//! parent is read once, and every path once.

use std::collections::HashMap;

use ext4_layout::dirent::DirWalk;
use ext4_layout::features::IncompatFeatures;
use ext4_layout::inode::{flags, Inode};

use crate::ctx::Maps;
use crate::fs::Fs;
use crate::io::Io;
use crate::pass2::DirTable;
use crate::problem::{Code, Finding, Pass};

/// Paths are not built past this depth (a loop the check has not
/// resolved, or a tree deeper than any real one).
const MAX_DEPTH: usize = 256;

/// Finds and remembers the paths of directories.
struct Namer<'a, 'f> {
    fs: &'f Fs,
    maps: &'a Maps,
    dirs: &'a DirTable,
    io: Io<'f>,
    /// A directory's path, once built.
    paths: HashMap<u32, Option<String>>,
    /// The names of the subdirectories of each directory read so far.
    names: HashMap<u32, HashMap<u32, String>>,
}

impl Namer<'_, '_> {
    /// The path of directory `ino`, or `None` when it is not reachable
    /// from the root through the parents pass 2 found.
    fn path(&mut self, ino: u32) -> Option<String> {
        if ino == 2 {
            return Some("/".into());
        }
        if let Some(p) = self.paths.get(&ino) {
            return p.clone();
        }
        // Up to the root or a directory already named.
        let mut chain = vec![ino];
        let mut at = ino;
        let mut base = None;
        while chain.len() <= MAX_DEPTH {
            let parent = self.dirs.parent(at);
            if parent == 0 || !self.maps.is_dir(at) {
                break;
            }
            if parent == 2 {
                base = Some(String::new());
                break;
            }
            if let Some(known) = self.paths.get(&parent) {
                base = known.clone();
                break;
            }
            if chain.contains(&parent) {
                break;
            }
            chain.push(parent);
            at = parent;
        }
        // Down again, naming each directory in its parent.
        let mut path = base;
        for &d in chain.iter().rev() {
            path = match path {
                Some(p) => {
                    let parent = self.dirs.parent(d);
                    self.name_in(parent, d).map(|n| format!("{p}/{n}"))
                }
                None => None,
            };
            self.paths.insert(d, path.clone());
        }
        path
    }

    /// The name of directory `child` in directory `parent`.
    fn name_in(&mut self, parent: u32, child: u32) -> Option<String> {
        if !self.names.contains_key(&parent) {
            let found = self.read_names(parent);
            self.names.insert(parent, found);
        }
        self.names.get(&parent)?.get(&child).cloned()
    }

    /// The first name of each inode in `want` found in any directory, as
    /// e2fsck's pass 1C finds the files that share blocks: one walk of
    /// every directory.
    fn find_files(&mut self, want: &std::collections::HashSet<u32>) -> HashMap<u32, String> {
        let mut found: HashMap<u32, (u32, String)> = HashMap::new();
        let mut at = 0;
        while let Some(i) = self.maps.inode_dir.next_set(at) {
            at = i + 1;
            if found.len() == want.len() {
                break;
            }
            let dir = u32::try_from(i + 1).unwrap_or(u32::MAX);
            for (target, name) in self.read_entries(dir, &mut |t| want.contains(&t)) {
                found.entry(target).or_insert((dir, name));
            }
        }
        let mut out = HashMap::new();
        for (ino, (dir, name)) in found {
            if let Some(p) = self.path(dir) {
                let sep = if p == "/" { "" } else { "/" };
                out.insert(ino, format!("{p}{sep}{name}"));
            }
        }
        out
    }

    /// The names of the subdirectories a directory holds.
    fn read_names(&mut self, dir: u32) -> HashMap<u32, String> {
        let maps = self.maps;
        let mut out = HashMap::new();
        for (target, name) in self.read_entries(dir, &mut |t| maps.is_dir(t)) {
            out.entry(target).or_insert(name);
        }
        out
    }

    /// The entries of directory `dir` (but '.' and '..') whose inode
    /// `keep` accepts: (inode, name), in block order.
    fn read_entries(&mut self, dir: u32, keep: &mut dyn FnMut(u32) -> bool) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        let fs = self.fs;
        let mut raw = vec![0u8; fs.geo.inode_size as usize];
        if self.io.read_inode(dir, &mut raw).is_err() {
            return out;
        }
        let Some(inode) = Inode::new(&raw) else {
            return out;
        };
        if inode.has_flag(flags::INLINE_DATA) {
            return out;
        }
        let mut blocks = Vec::new();
        crate::blockiter::for_each_block(&mut self.io, &inode, &mut |b, l| {
            if l >= 0 {
                blocks.push(b);
            }
        });
        let bs = fs.block_size();
        let filetype = fs.geo.incompat.contains(IncompatFeatures::FILETYPE);
        let mut buf = vec![0u8; bs];
        for b in blocks {
            if !fs.geo.block_in_range(b) || self.io.read_blocks(b, &mut buf).is_err() {
                continue;
            }
            for w in DirWalk::new(&buf, bs, filetype) {
                let target = w.entry.inode();
                let name = w.entry.name();
                if target == 0 || name == b"." || name == b".." || !keep(target) {
                    continue;
                }
                out.push((target, String::from_utf8_lossy(name).into_owned()));
            }
        }
        out
    }
}

/// Gives the findings the paths of what they are about: the directory
/// an entry is in, a directory pass 3 judges, an inode an entry leads
/// to when it is deallocated.
pub(crate) fn name_findings(fs: &Fs, maps: &Maps, dirs: &DirTable, findings: &mut [Finding]) {
    let mut n = Namer {
        fs,
        maps,
        dirs,
        io: Io::new(fs),
        paths: HashMap::new(),
        names: HashMap::new(),
    };
    name_shared(&mut n, findings);
    name_link_counts(&mut n, findings);
    for f in findings.iter_mut() {
        if let Some(d) = f.dir {
            if maps.is_dir(d) || d == 2 {
                f.dir_path = n.path(d);
            }
        }
        let Some(ino) = f.ino else {
            continue;
        };
        // Where an unconnected directory was: its '..', by path.
        if f.code == Code::UnconnectedDir {
            if let Some(p) = f.ino2 {
                if let Some(path) = (maps.is_dir(p) || p == 2).then(|| n.path(p)).flatten() {
                    f.detail = Some(format!("{path} ({p})"));
                }
            }
        }
        if f.code.pass() == Pass::P3 && maps.is_dir(ino) {
            f.ino_path = n.path(ino);
        } else if let (Some(d), Some(name), None) = (f.entry_dir, &f.name, &f.ino_path) {
            if let Some(dp) = (maps.is_dir(d) || d == 2).then(|| n.path(d)).flatten() {
                let name = crate::problem::printable(name);
                f.ino_path = Some(if dp == "/" {
                    format!("/{name}")
                } else {
                    format!("{dp}/{name}")
                });
            }
        } else if f.code.deallocates_inode() {
            if let (Some(dp), Some(name)) = (&f.dir_path, &f.name) {
                let name = crate::problem::printable(name);
                f.ino_path = Some(if dp == "/" {
                    format!("/{name}")
                } else {
                    format!("{dp}/{name}")
                });
            }
        }
    }
}

/// Wrong link counts name their file by its first name found, as the
/// tree knows it, when there are few of them: each one asks for a walk of
/// every directory (one walk serves them all), which a check of a
/// damaged file system with thousands would pay for in time.
const NAMED_LINK_COUNTS: usize = 256;

fn name_link_counts(n: &mut Namer<'_, '_>, findings: &mut [Finding]) {
    let is_count = |f: &Finding| f.code == Code::BadRefCount && f.ino_path.is_none();
    let want: std::collections::HashSet<u32> = findings
        .iter()
        .filter(|f| is_count(f))
        .filter_map(|f| f.ino)
        .collect();
    if want.is_empty() || want.len() > NAMED_LINK_COUNTS {
        return;
    }
    let names = n.find_files(&want);
    for f in findings.iter_mut().filter(|f| is_count(f)) {
        if let Some(p) = f.ino.and_then(|i| names.get(&i)) {
            f.ino_path = Some(p.clone());
        }
    }
}

/// Pass 1B's findings name each file that shares blocks, and the files it
/// shares them with, by path (`12 (/termcap)`), as e2fsck does.
fn name_shared(n: &mut Namer<'_, '_>, findings: &mut [Finding]) {
    let shares = |f: &Finding| matches!(f.code, Code::DupBlocks | Code::DupBlocksMetadata);
    let listed = |s: &str| -> Vec<u32> { s.split(", ").filter_map(|x| x.parse().ok()).collect() };
    let mut want = std::collections::HashSet::new();
    for f in findings.iter().filter(|f| shares(f)) {
        want.extend(f.ino);
        if f.code == Code::DupBlocks {
            want.extend(f.detail.as_deref().map(listed).unwrap_or_default());
        }
    }
    if want.is_empty() {
        return;
    }
    let named = n.find_files(&want);
    for f in findings.iter_mut().filter(|f| shares(f)) {
        if let Some(p) = f.ino.and_then(|i| named.get(&i)) {
            f.ino_path = Some(p.clone());
        }
        if f.code != Code::DupBlocks {
            continue;
        }
        if let Some(s) = &f.detail {
            let parts: Vec<String> = s
                .split(", ")
                .map(
                    |x| match x.parse::<u32>().ok().and_then(|i| named.get(&i)) {
                        Some(p) => format!("{x} ({p})"),
                        None => x.to_string(),
                    },
                )
                .collect();
            f.detail = Some(parts.join(", "));
        }
    }
}

/// The entries, other than '.' and '..', that name one of the inodes
/// `want`, read from the device: (directory, name, inode), in directory
/// order. Inline directories are not read.
pub(crate) fn entries_naming(
    fs: &Fs,
    maps: &Maps,
    want: &std::collections::HashSet<u32>,
) -> Vec<(u32, Vec<u8>, u32)> {
    let mut io = Io::new(fs);
    let mut out = Vec::new();
    let mut next = maps.inode_dir.next_set(0);
    while let Some(idx) = next {
        next = maps.inode_dir.next_set(idx + 1);
        let dir = idx as u32 + 1;
        for (target, name) in entries_on_disk(fs, &mut io, dir) {
            if want.contains(&target) && name != b".." {
                out.push((dir, name, target));
            }
        }
    }
    out
}

/// The entries of directory `dir` as the device holds it, '..' included
/// ('.' left out): (inode, name), in block order.
fn entries_on_disk(fs: &Fs, io: &mut Io<'_>, dir: u32) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut raw = vec![0u8; fs.geo.inode_size as usize];
    if io.read_inode(dir, &mut raw).is_err() {
        return out;
    }
    let Some(inode) = Inode::new(&raw) else {
        return out;
    };
    if !inode.is_dir() || inode.has_flag(flags::INLINE_DATA) {
        return out;
    }
    let mut blocks = Vec::new();
    crate::blockiter::for_each_block(io, &inode, &mut |b, l| {
        if l >= 0 {
            blocks.push(b);
        }
    });
    let bs = fs.block_size();
    let filetype = fs.geo.incompat.contains(IncompatFeatures::FILETYPE);
    let mut buf = vec![0u8; bs];
    for b in blocks.into_iter().take(1 << 16) {
        if !fs.geo.block_in_range(b) || io.read_blocks(b, &mut buf).is_err() {
            continue;
        }
        for w in DirWalk::new(&buf, bs, filetype) {
            let target = w.entry.inode();
            if target != 0 && w.entry.name() != b"." {
                out.push((target, w.entry.name().to_vec()));
            }
        }
    }
    out
}

/// The path of directory `dir` read from the device as it is, as e2fsck
/// names a directory when it asks a question in the middle of a pass: up
/// its '..' entries to the root, each name found in the parent. `None`
/// when the chain breaks (a '..' that leads nowhere, a name not found, a
/// loop).
pub fn pathname(fs: &Fs, dir: u32) -> Option<String> {
    let mut io = Io::new(fs);
    let mut names: Vec<String> = Vec::new();
    let mut at = dir;
    while at != 2 {
        if names.len() > MAX_DEPTH {
            return None;
        }
        let entries = entries_on_disk(fs, &mut io, at);
        let parent = entries
            .iter()
            .find(|(_, n)| n.as_slice() == b"..")
            .map(|&(p, _)| p)?;
        if parent == at {
            return None;
        }
        let name = entries_on_disk(fs, &mut io, parent)
            .into_iter()
            .find(|(t, n)| *t == at && n.as_slice() != b"..")
            .map(|(_, n)| crate::problem::printable(&n))?;
        names.push(name);
        at = parent;
    }
    names.reverse();
    Some(format!("/{}", names.join("/")))
}

/// The inode the root directory's entry `name` names, as the device
/// holds it.
pub(crate) fn entry_of_root(fs: &Fs, name: &[u8]) -> Option<u32> {
    let mut io = Io::new(fs);
    entries_on_disk(fs, &mut io, 2)
        .into_iter()
        .find(|(_, n)| n.as_slice() == name)
        .map(|(t, _)| t)
}
