//! Helpers shared by the integration tests: the binary, the corpus, and
//! temporary images.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

/// The ext4chk binary built for this test run.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ext4chk"))
}

/// Runs ext4chk with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("ext4chk runs")
}

/// Runs ext4chk under another name (through a symlink in a scratch
/// directory), as `fsck.ext4` or `e2fsck`.
pub fn run_as(name: &str, args: &[&str]) -> Output {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("as-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let link = dir.join(name);
    if std::fs::symlink_metadata(&link).is_err() {
        let _ = std::os::unix::fs::symlink(bin(), &link);
    }
    Command::new(&link)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("ext4chk runs")
}

/// The exit code of a finished process (signals count as 128 + n).
pub fn code(o: &Output) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    o.status
        .code()
        .unwrap_or_else(|| 128 + o.status.signal().unwrap_or(0))
}

/// The shared folder beside the repository.
pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

/// A directory for this test process's scratch files, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh directory under the target directory.
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let p = base.join(format!(
            "{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch directory");
        Scratch(p)
    }

    /// A path inside the scratch directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Decompresses a gzip file with the system's gzip.
pub fn gunzip(src: &Path, dst: &Path) {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(src)
        .output()
        .expect("gzip runs");
    assert!(out.status.success(), "gzip -dc {} failed", src.display());
    std::fs::write(dst, out.stdout).expect("write image");
}

/// Whether an external tool is on the PATH (or in /sbin).
pub fn have(tool: &str) -> bool {
    find_tool(tool).is_some()
}

/// The path of an external tool.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/sbin", "/usr/sbin", "/usr/local/sbin"].map(PathBuf::from));
    dirs.into_iter().map(|d| d.join(tool)).find(|p| p.is_file())
}

/// Runs an external tool with a predictable environment.
pub fn tool(name: &str, args: &[&str]) -> Output {
    let path = find_tool(name).unwrap_or_else(|| panic!("{name} is not installed"));
    Command::new(path)
        .args(args)
        .env("LC_ALL", "C")
        .env("TZ", "GMT0")
        .env("E2FSCK_CONFIG", "/dev/null")
        .env("MKE2FS_CONFIG", "/dev/null")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{name} fails to start: {e}"))
}

/// Runs a tool at a given path, with [`tool`]'s environment, killed
/// (SIGKILL, exit 137) if it runs past two minutes: e2fsck 1.47.4 can
/// hang under `-n` (a lock taken twice after a write it cannot make).
pub fn tool_at(path: &Path, args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-s", "KILL", "120"])
        .arg(path)
        .args(args)
        .env("LC_ALL", "C")
        .env("TZ", "GMT0")
        .env("E2FSCK_CONFIG", "/dev/null")
        .env("MKE2FS_CONFIG", "/dev/null")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{} fails to start: {e}", path.display()))
}

/// e2fsck 1.47.4, the newest release, where it is built: `EXT4CHK_E2FSCK_NEW`,
/// else `target/e2fsprogs-1.47.4/build/e2fsck/e2fsck` (what `.ci/run`
/// builds from `../shared/oracle`). It can hang under `-n`: run it
/// through [`tool_at`], which kills it after a timeout.
pub fn e2fsck_1474() -> Option<PathBuf> {
    let p = std::env::var_os("EXT4CHK_E2FSCK_NEW")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/e2fsprogs-1.47.4/build/e2fsck/e2fsck")
        });
    p.is_file().then_some(p)
}

/// One row of the corpus manifest.
#[derive(Clone, Debug)]
pub struct Row {
    /// Test name.
    pub test: String,
    /// `e2fsck -fn` exit, or "timeout".
    pub fn_exit: String,
    /// `e2fsck -fy` exit.
    pub fy_exit: String,
    /// `e2fsck -fn` after `-fy`.
    pub fn_after_fy: String,
    /// Special options upstream uses.
    pub special_opts: String,
    /// Oracle caveats.
    pub notes: String,
    /// The verdicts above are e2fsck 1.47.4's, which ext4chk follows
    /// where it fixes 1.47.0 (`tests/known/corpus-versions.txt`).
    pub follows_1474: bool,
}

/// One line of `tests/known/corpus-versions.txt`: an image where e2fsck
/// 1.47.0 and 1.47.4 disagree, the version ext4chk follows, and the
/// exit codes it must give.
#[derive(Clone, Debug)]
pub struct Followed {
    /// Test name.
    pub test: String,
    /// "1.47.0" or "1.47.4".
    pub version: String,
    /// The `-fn` exit code.
    pub fn_exit: String,
    /// The `-fy` exit code.
    pub fy_exit: String,
}

/// Reads `tests/known/corpus-versions.txt`.
pub fn corpus_versions() -> Vec<Followed> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/known/corpus-versions.txt");
    let text = std::fs::read_to_string(&p).expect("tests/known/corpus-versions.txt");
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 5, "corpus-versions.txt: short line {l:?}");
            Followed {
                test: f[0].to_string(),
                version: f[1].to_string(),
                fn_exit: f[2].to_string(),
                fy_exit: f[3].to_string(),
            }
        })
        .collect()
}

/// The manifest as e2fsck 1.47.0 recorded it, without the verdicts of
/// 1.47.4 that ext4chk follows instead.
pub fn manifest_1470() -> Option<Vec<Row>> {
    read_manifest()
}

/// The e2fsprogs corpus folder: `$EXT4CHK_CORPUS`, else
/// `../shared/corpus` beside the repository.
pub fn corpus_dir() -> PathBuf {
    std::env::var_os("EXT4CHK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared().join("corpus"))
}

/// The gzipped image of a corpus test.
pub fn corpus_image(test: &str) -> PathBuf {
    corpus_dir().join("e2fsprogs").join(test).join("image.gz")
}

/// Reads the corpus manifest; `None` (after saying so in one line) when
/// the corpus is not there, so that the test skips.
pub fn manifest() -> Option<Vec<Row>> {
    let mut rows = read_manifest()?;
    let followed = corpus_versions();
    for r in &mut rows {
        let Some(v) = followed
            .iter()
            .find(|v| v.test == r.test && v.version == "1.47.4")
        else {
            continue;
        };
        r.fn_exit = v.fn_exit.clone();
        r.fy_exit = v.fy_exit.clone();
        // 1.47.4's repair of each of them is clean.
        r.fn_after_fy = "0".into();
        r.notes = "follows e2fsck 1.47.4".into();
        r.follows_1474 = true;
    }
    Some(rows)
}

fn read_manifest() -> Option<Vec<Row>> {
    let p = corpus_dir().join("e2fsprogs/MANIFEST.tsv");
    let Ok(text) = std::fs::read_to_string(&p) else {
        eprintln!(
            "skipping: the e2fsprogs corpus is not at {} (set EXT4CHK_CORPUS to the folder that holds e2fsprogs/MANIFEST.tsv)",
            corpus_dir().display()
        );
        return None;
    };
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let (ct, cfn, cfy, cff, cso, cno) = (
        col("test"),
        col("fn_exit"),
        col("fy_exit"),
        col("fn_after_fy_exit"),
        col("special_opts"),
        col("notes"),
    );
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Row {
                test: f[ct].to_string(),
                fn_exit: f[cfn].to_string(),
                fy_exit: f[cfy].to_string(),
                fn_after_fy: f[cff].to_string(),
                special_opts: f[cso].to_string(),
                notes: f[cno].to_string(),
                follows_1474: false,
            }
        })
        .collect::<Vec<_>>()
        .into()
}

/// Reads a known-failures list: one test name per line, then a reason
/// after whitespace; '#' starts a comment.
pub fn known_list(name: &str) -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/known")
        .join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_default();
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// Runs `f` over `items` on a few threads, keeping the input order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let n = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let next = AtomicU64::new(0);
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let slots_ptr = std::sync::Mutex::new(&mut slots);
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                slots_ptr.lock().expect("no poisoned lock")[i] = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|r| r.expect("every item done"))
        .collect()
}

/// Builds the clean fixture images once per script version and returns
/// their directory, or `None` when mke2fs is not installed.
pub fn fixture_images() -> Option<PathBuf> {
    fixture_images_wide(3000)
}

/// The fixture images built from a tree whose wide directory has `wide`
/// entries (the damage tests use a small one: faster to read back).
pub fn fixture_images_wide(wide: u32) -> Option<PathBuf> {
    if !have("mke2fs") {
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in ["make-images.sh", "make-tree.sh", "mke2fs.conf"] {
        for b in std::fs::read(root.join(f)).expect("fixture script") {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h = (h ^ u64::from(wide)).wrapping_mul(0x0100_0000_01b3);
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = base.join(format!("fixtures-{h:016x}"));
    // Tests of one binary run on several threads: one of them builds, the
    // others wait for it here.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_builder = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if dir.join(".complete").exists() {
        return Some(dir);
    }
    // Build in a private directory, then move it into place; a racing
    // test process that loses the rename uses the winner's images.
    let tmp = base.join(format!("fixtures-{h:016x}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let out = Command::new(root.join("make-images.sh"))
        .arg(&tmp)
        .env("WIDE", wide.to_string())
        .output()
        .expect("make-images.sh runs");
    assert!(
        out.status.success(),
        "make-images.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(tmp.join(".complete"), b"").expect("stamp");
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Some(dir)
}

/// The names of the fixture configurations (the images are `NAME.img`).
pub const FIXTURES: &[&str] = &[
    "ext2",
    "ext3",
    "ext4",
    "ext4-nocsum",
    "ext4-no64-noflex",
    "ext4-inline",
    "ext4-1k",
    "ext2-1k",
    "ext4-bigalloc",
    "ext4-quota",
];

/// Parses the counts of a summary line:
/// `... U/T files (P% non-contiguous), B/N blocks`.
pub fn summary_counts(line: &str) -> Option<(u64, u64, String, u64, u64)> {
    let files = line.find(" files (")?;
    let head = &line[..files];
    let ut = head.rsplit(' ').next()?;
    let (u, t) = ut.split_once('/')?;
    let rest = &line[files + " files (".len()..];
    let pct_end = rest.find("% non-contiguous), ")?;
    let pct = rest[..pct_end].to_string();
    let after = &rest[pct_end + "% non-contiguous), ".len()..];
    let bn = after.split(' ').next()?;
    let (b, n) = bn.split_once('/')?;
    Some((
        u.parse().ok()?,
        t.parse().ok()?,
        pct,
        b.parse().ok()?,
        n.parse().ok()?,
    ))
}

/// Runs debugfs on an image with a list of commands; returns the output
/// of each command (debugfs echoes "debugfs: CMD" before each).
pub fn debugfs_batch(img: &Path, cmds: &[String], scratch: &Path) -> Option<Vec<String>> {
    debugfs_commands(img, cmds, scratch, false)
}

/// [`debugfs_batch`] with the image opened for writing (`-w`).
pub fn debugfs_batch_w(img: &Path, cmds: &[String], scratch: &Path) -> Option<Vec<String>> {
    debugfs_commands(img, cmds, scratch, true)
}

fn debugfs_commands(
    img: &Path,
    cmds: &[String],
    scratch: &Path,
    write: bool,
) -> Option<Vec<String>> {
    let debugfs = find_tool("debugfs")?;
    static N: AtomicU64 = AtomicU64::new(0);
    let f = scratch.join(format!("cmds-{}", N.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&f, cmds.join("\n") + "\n").ok()?;
    let out = Command::new(debugfs)
        .args(write.then_some("-w"))
        .arg("-f")
        .arg(&f)
        .arg(img)
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&f);
    // debugfs fails as a whole only when it cannot open the image.
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("debugfs: ") {
            parts.push(String::new());
        } else if let Some(p) = parts.last_mut() {
            p.push_str(line);
            p.push('\n');
        }
    }
    Some(parts)
}

/// Files larger than this are compared by size, not content (sparse test
/// files run to terabytes).
const HASH_LIMIT: u64 = 16 << 20;

/// Every regular file of an image, path -> (inode, content fingerprint),
/// read with debugfs (independent of ext4chk). Directories are walked by
/// inode number; small files are dumped and hashed, large ones
/// fingerprinted by size.
pub fn file_tree_inodes(
    img: &Path,
    scratch: &Path,
) -> Option<std::collections::BTreeMap<String, (u32, String)>> {
    use std::collections::{BTreeMap, BTreeSet};
    std::fs::create_dir_all(scratch).ok()?;
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut level: Vec<(u32, String)> = vec![(2, String::new())];
    seen.insert(2u32);
    let mut files: Vec<(u32, String, u64)> = Vec::new();
    while !level.is_empty() {
        let cmds: Vec<String> = level.iter().map(|(i, _)| format!("ls -p <{i}>")).collect();
        let parts = debugfs_batch(img, &cmds, scratch)?;
        let mut next = Vec::new();
        for ((_, path), listing) in level.iter().zip(parts.iter()) {
            for line in listing.lines() {
                // /ino/mode/uid/gid/name/size/
                let f: Vec<&str> = line.split('/').collect();
                if f.len() < 7 {
                    continue;
                }
                let (Ok(ino), Ok(mode)) = (f[1].parse::<u32>(), u32::from_str_radix(f[2], 8))
                else {
                    continue;
                };
                let name = f[5];
                if name == "." || name == ".." || ino == 0 {
                    continue;
                }
                let p = format!("{path}/{name}");
                match mode & 0o170000 {
                    0o040000 if seen.insert(ino) => next.push((ino, p)),
                    0o100000 => {
                        let size = f[6].parse::<u64>().unwrap_or(0);
                        files.push((ino, p, size));
                    }
                    _ => {}
                }
            }
        }
        level = next;
    }
    let small: Vec<&(u32, String, u64)> = files.iter().filter(|f| f.2 <= HASH_LIMIT).collect();
    // Dumps go to memory when /dev/shm is there (thousands of small files).
    static M: AtomicU64 = AtomicU64::new(0);
    let shm = Path::new("/dev/shm").join(format!(
        "ext4chk-tree-{}-{}",
        std::process::id(),
        M.fetch_add(1, Ordering::Relaxed)
    ));
    let scratch = if std::fs::create_dir_all(&shm).is_ok() {
        shm.as_path()
    } else {
        scratch
    };
    for chunk in small.chunks(256) {
        let cmds: Vec<String> = chunk
            .iter()
            .enumerate()
            .map(|(k, (ino, _, _))| {
                format!("dump <{ino}> {}", scratch.join(format!("f{k}")).display())
            })
            .collect();
        debugfs_batch(img, &cmds, scratch)?;
        for (k, (ino, p, size)) in chunk.iter().enumerate() {
            let fp = scratch.join(format!("f{k}"));
            let data = std::fs::read(&fp).unwrap_or_default();
            let _ = std::fs::remove_file(&fp);
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in &data {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
            out.insert(p.clone(), (*ino, format!("{size}:{h:016x}")));
        }
    }
    for (ino, p, size) in files.iter().filter(|f| f.2 > HASH_LIMIT) {
        out.insert(p.clone(), (*ino, format!("{size}:large")));
    }
    let _ = std::fs::remove_dir_all(&shm);
    Some(out)
}

/// Every regular file of an image, path -> content fingerprint (see
/// [`file_tree_inodes`]).
pub fn file_tree(img: &Path, scratch: &Path) -> Option<std::collections::BTreeMap<String, String>> {
    Some(
        file_tree_inodes(img, scratch)?
            .into_iter()
            .map(|(p, (_, h))| (p, h))
            .collect(),
    )
}

/// Whether every named tool is installed; when one is missing the test
/// says it is skipping.
pub fn have_all(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        eprintln!("{} missing: skipping", missing.join(", "));
    }
    missing.is_empty()
}

/// Runs `mke2fs -q -F` with `args` and fails the test if it does not
/// succeed.
pub fn mke2fs(args: &[&str]) {
    let mut all = vec!["-q", "-F"];
    all.extend_from_slice(args);
    let out = tool("mke2fs", &all);
    assert!(
        out.status.success(),
        "mke2fs {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A superblock field as dumpe2fs -h prints it ("" when it has none).
pub fn sb_field(img: &Path, name: &str) -> String {
    let out = tool("dumpe2fs", &["-h", img.to_str().expect("path")]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{name}:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// [`mke2fs`] of `size` at `img`, with `bs`-byte blocks, 256-byte inodes,
/// exactly the `features` given, and the files of `tree`.
pub fn mke2fs_tree(img: &Path, tree: &Path, bs: &str, features: &str, size: &str) {
    mke2fs(&[
        "-b",
        bs,
        "-I",
        "256",
        "-O",
        features,
        "-d",
        tree.to_str().expect("path"),
        img.to_str().expect("path"),
        size,
    ]);
}

/// A small deterministic generator (xorshift64*) seeded from a name, so a
/// failing generated case names a seed that reproduces it.
pub struct Rng(pub u64);

impl Rng {
    /// A generator seeded from `seed`'s bytes (FNV-1a).
    pub fn new(seed: &str) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng(h | 1)
    }

    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The regular files `theirs` (an image e2fsck repaired) holds that
/// `ours` (the same image repaired by ext4chk) lacks, and how many files
/// ours holds besides; `None` when debugfs cannot list either. A file is
/// kept when ours has the same content at the same path, or the same
/// inode with the same content under another name (e2fsck moved it to
/// /lost+found where ours left it in place, or the reverse).
pub fn files_lost(theirs: &Path, ours: &Path, scratch: &Path) -> Option<(Vec<String>, usize)> {
    let t = file_tree_inodes(theirs, scratch)?;
    let o = file_tree_inodes(ours, scratch)?;
    let by_inode: std::collections::BTreeSet<(u32, &str)> =
        o.values().map(|(i, h)| (*i, h.as_str())).collect();
    let lost = t
        .iter()
        .filter(|(p, (i, h))| {
            o.get(*p).is_none_or(|(_, oh)| oh != h) && !by_inode.contains(&(*i, h.as_str()))
        })
        .map(|(p, (_, h))| format!("{p} ({h})"))
        .collect();
    let kept: std::collections::BTreeSet<(u32, &str)> =
        t.values().map(|(i, h)| (*i, h.as_str())).collect();
    let extra = o
        .iter()
        .filter(|(p, (i, h))| !t.contains_key(*p) && !kept.contains(&(*i, h.as_str())))
        .count();
    Some((lost, extra))
}

/// [`files_lost`], where a file also counts as kept when ours holds it as
/// the damaged image `before` held it (e2fsck's repair can change a file
/// it keeps: it writes through a map block that is another file's data,
/// or copies a block its pointer names after changing it).
pub fn files_lost_either(
    theirs: &Path,
    before: &Path,
    ours: &Path,
    scratch: &Path,
) -> Option<Vec<String>> {
    let (lost, _) = files_lost(theirs, ours, scratch)?;
    if lost.is_empty() {
        return Some(lost);
    }
    let b = file_tree_inodes(before, scratch)?;
    let o = file_tree_inodes(ours, scratch)?;
    Some(
        lost.into_iter()
            .filter(|entry| {
                let path = entry.rsplit_once(" (").map_or(entry.as_str(), |(p, _)| p);
                !matches!((b.get(path), o.get(path)), (Some((_, hb)), Some((_, ho))) if hb == ho)
                    && !kept_block_by_block(theirs, before, ours, path, scratch)
            })
            .collect(),
    )
}

/// Whether ours holds the file at `path` with e2fsck's size and, block by
/// block, each block as e2fsck's repair leaves it or as the damaged image
/// maps it (read at the block number the damaged map gives, zeros where
/// that number is out of range and the repair cleared it). A damaged file
/// cannot be read whole from the damaged image (debugfs stops at its
/// first bad pointer), and when its map block is another inode table
/// block, e2fsck copies that block after its own inode updates changed
/// it, so a pointer in it can name another block than before: keeping
/// the map as it was is then no loss.
pub fn kept_block_by_block(
    theirs: &Path,
    before: &Path,
    ours: &Path,
    path: &str,
    scratch: &Path,
) -> bool {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dump = |img: &Path, tag: &str| -> Option<Vec<u8>> {
        let out = scratch.join(format!("blockwise-{n}-{tag}"));
        debugfs_batch(
            img,
            &[format!("dump \"{path}\" {}", out.display())],
            scratch,
        )?;
        let data = std::fs::read(&out).ok();
        let _ = std::fs::remove_file(&out);
        data
    };
    let (Some(t), Some(o)) = (dump(theirs, "theirs"), dump(ours, "ours")) else {
        return false;
    };
    if t.len() != o.len() {
        return false;
    }
    let number = |name: &str| sb_field(before, name).parse::<u64>().ok();
    let (Some(bs), Some(count)) = (number("Block size"), number("Block count")) else {
        return false;
    };
    let bs = bs as usize;
    let differing: Vec<usize> = (0..o.len().div_ceil(bs))
        .filter(|&l| {
            let r = l * bs..((l + 1) * bs).min(o.len());
            t[r.clone()] != o[r]
        })
        .collect();
    let cmds: Vec<String> = differing
        .iter()
        .map(|l| format!("bmap \"{path}\" {l}"))
        .collect();
    let Some(maps) = debugfs_batch(before, &cmds, scratch) else {
        return false;
    };
    if maps.len() != differing.len() {
        return false;
    }
    let Ok(img) = std::fs::File::open(before) else {
        return false;
    };
    differing.iter().zip(maps.iter()).all(|(&l, m)| {
        let ours = &o[l * bs..((l + 1) * bs).min(o.len())];
        match m.trim().parse::<u64>() {
            Ok(p) if p > 0 && p < count => {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; ours.len()];
                img.read_exact_at(&mut buf, p * bs as u64).is_ok() && buf == ours
            }
            _ => ours.iter().all(|&b| b == 0),
        }
    })
}
pub mod mounted;
