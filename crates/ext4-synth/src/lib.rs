//! Writes large, valid ext4 images quickly, for benchmarks.
//!
//! The image is sparse: data blocks are allocated in the bitmaps and
//! mapped by extents but never written, so only metadata reaches the disk
//! (inode tables, directories, bitmaps, descriptors, superblocks). A
//! 100-million-inode image is mostly its 25 GB of inode tables.
//!
//! The geometry is mke2fs 1.47's default for ext4 with 4 KiB blocks:
//! `metadata_csum`, `64bit`, `flex_bg` (16 groups), `extents`,
//! `huge_file`, `dir_nlink`, `extra_isize`, `dir_index`, `filetype`,
//! `sparse_super`, `large_file` and `ext_attr`; 256-byte inodes. There is
//! no journal and no resize inode.
//!
//! The tree: the root and a breadth-first tree of directories, each with
//! `dir_fanout` subdirectories and `files_per_dir` files; every directory
//! is followed in inode order by its own files, as a copy of a real tree
//! would be. Some files are symbolic links (fast and slow, alternately),
//! some have a second name (a hard link), some carry an extended
//! attribute in the inode. A directory that needs more than one block
//! gets a hash index (one level).
//!
//! ```no_run
//! let spec = ext4_synth::Spec { inodes: 10_000, ..Default::default() };
//! let made = ext4_synth::write_image(&spec, std::path::Path::new("/tmp/synth.img"))?;
//! println!("{} inodes in use", made.inodes_used);
//! # Ok::<(), ext4_synth::SynthError>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ext4_layout::csum::{crc32c_raw, CRC32C_INIT};
use ext4_layout::dirent::{self, rec_len_for, write_tail};
use ext4_layout::dirhash::{dirhash, version};
use ext4_layout::edit::{
    set_bitmap_checksum, set_dx_checksum, set_group_desc_checksum, set_inode_checksum,
    set_superblock_checksum,
};
use ext4_layout::extent;
use ext4_layout::features::{CompatFeatures, IncompatFeatures, RoCompatFeatures};
use ext4_layout::group_desc::{self as gd, BG_INODE_UNINIT, BG_INODE_ZEROED, DESC_SIZE_64};
use ext4_layout::htree::{
    self, DxRootMut, DX_ENTRY_SIZE, DX_ROOT_COUNT_OFFSET, DX_ROOT_INFO_LEN, DX_TAIL_SIZE,
};
use ext4_layout::inode::{
    self, field as ifield, flags, inode_csum_seed, EXTRA_ISIZE_FULL, GOOD_OLD_INODE_SIZE, I_BLOCK,
    S_IFDIR, S_IFLNK, S_IFREG, TIMES_WITH_EXTRA,
};
use ext4_layout::superblock::{
    self, field as sbf, CHECKSUM_TYPE_CRC32C, DEFM_ACL, DEFM_XATTR_USER, DYNAMIC_REV,
    ERRORS_CONTINUE, EXT2_MAGIC, FLAGS_SIGNED_HASH, STATE_VALID, SUPERBLOCK_OFFSET,
    SUPERBLOCK_SIZE,
};
use ext4_layout::xattr;

/// What to write.
#[derive(Clone, Debug)]
pub struct Spec {
    /// At least this many inodes in use (the reserved ones included).
    pub inodes: u64,
    /// Files in each directory.
    pub files_per_dir: u32,
    /// Subdirectories of each directory.
    pub dir_fanout: u32,
    /// Data blocks of each regular file (allocated, never written).
    pub file_blocks: u32,
    /// Every Nth file is a symbolic link (0: none).
    pub symlink_every: u32,
    /// Every Nth regular file has a second name (0: none).
    pub hardlink_every: u32,
    /// Every Nth regular file has an extended attribute (0: none).
    pub xattr_every: u32,
    /// Inodes per block group (a multiple of 16, at most 16384).
    pub inodes_per_group: u32,
    /// Seeds the UUID and the directory hash seed.
    pub seed: u64,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec {
            inodes: 100_000,
            files_per_dir: 100,
            dir_fanout: 10,
            file_blocks: 1,
            symlink_every: 20,
            hardlink_every: 50,
            xattr_every: 10,
            inodes_per_group: 8192,
            seed: 1,
        }
    }
}

/// What was written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Made {
    /// Inodes in use.
    pub inodes_used: u64,
    /// Directories.
    pub directories: u64,
    /// Indexed directories.
    pub indexed_dirs: u64,
    /// Block groups.
    pub groups: u64,
    /// Blocks in the file system.
    pub blocks: u64,
    /// Blocks in use.
    pub blocks_used: u64,
    /// Bytes actually written to the image.
    pub bytes_written: u64,
}

/// Why an image could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The spec asks for something this generator does not make.
    #[error("{0}")]
    Spec(String),
    /// Writing the image failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The image.
        path: String,
        /// What the system said.
        source: io::Error,
    },
}

const BS: u64 = 4096;
const BPG: u64 = 32768;
const INODE_SIZE: usize = 256;
const GROUPS_PER_FLEX: u64 = 16;
const ROOT_INO: u32 = 2;
const LPF_INO: u32 = 11;
const FIRST_INO: u32 = 11;
/// Inode numbers from here on are the tree's (after lost+found).
const FIRST_TREE_INO: u32 = 12;
const LPF_BLOCKS: u64 = 4;
/// A fixed time, so that two runs write the same image.
const TIME: u32 = 1_700_000_000;
const DIR_TAIL: usize = 12;
const FT_REG: u8 = 1;
const FT_DIR: u8 = 2;
const FT_SYMLINK: u8 = 7;
/// The in-inode extended attribute: `user.synth`.
const XATTR_NAME: &[u8] = b"synth";
const XATTR_USER: u8 = 1;
const XATTR_VALUE: &[u8] = b"ext4-syn";

/// The shape of the file system, worked out before anything is written.
struct Geometry {
    groups: u64,
    ipg: u32,
    /// Inode table blocks per group.
    itb: u64,
    gdt_blocks: u64,
    dirs: u64,
    fs_seed: u32,
    hash_seed: [u32; 4],
    uuid: [u8; 16],
}

impl Geometry {
    fn has_backup(g: u64) -> bool {
        if g <= 1 {
            return true;
        }
        [3u64, 5, 7].iter().any(|&p| {
            let mut x = p;
            while x < g {
                x *= p;
            }
            x == g
        })
    }

    /// Blocks at the start of group `g` taken by a superblock copy and
    /// the descriptor table.
    fn backup_len(&self, g: u64) -> u64 {
        if Self::has_backup(g) {
            1 + self.gdt_blocks
        } else {
            0
        }
    }

    /// Where the flex group of `g` keeps its bitmaps and inode tables:
    /// (block bitmap, inode bitmap, inode table) of group `g`.
    fn meta_of(&self, g: u64) -> (u64, u64, u64) {
        let leader = g - g % GROUPS_PER_FLEX;
        let n = self.in_flex(leader);
        let start = leader * BPG + self.backup_len(leader);
        let i = g - leader;
        (start + i, start + n + i, start + 2 * n + i * self.itb)
    }

    /// How many groups the flex group led by `leader` has (the last one
    /// may have fewer than 16).
    fn in_flex(&self, leader: u64) -> u64 {
        GROUPS_PER_FLEX.min(self.groups.saturating_sub(leader))
    }

    /// The first block of group `g` free for data.
    fn data_start(&self, g: u64) -> u64 {
        if g % GROUPS_PER_FLEX == 0 {
            g * BPG + self.backup_len(g) + self.in_flex(g) * (2 + self.itb)
        } else {
            g * BPG + self.backup_len(g)
        }
    }
}

/// Places blocks one after another, group by group.
struct Alloc {
    group: u64,
    next: u64,
    /// Per group: blocks in use are `[group start, frontier)`.
    frontier: Vec<u64>,
}

impl Alloc {
    fn take(&mut self, geo: &Geometry, n: u64) -> Result<u64, SynthError> {
        if n == 0 {
            return Ok(0);
        }
        loop {
            if self.group >= geo.groups {
                return Err(SynthError::Spec(
                    "the image ran out of blocks (this is a bug in the size estimate)".into(),
                ));
            }
            let end = (self.group + 1) * BPG;
            if self.next + n <= end {
                let at = self.next;
                self.next += n;
                self.frontier[self.group as usize] = self.next;
                return Ok(at);
            }
            if n > BPG
                - geo
                    .data_start(self.group + 1)
                    .saturating_sub((self.group + 1) * BPG)
            {
                return Err(SynthError::Spec(format!(
                    "a run of {n} blocks does not fit in one block group"
                )));
            }
            self.group += 1;
            self.next = geo.data_start(self.group);
        }
    }
}

/// One directory entry to write.
struct Entry {
    name: Vec<u8>,
    ino: u32,
    ft: u8,
}

/// The image being written.
struct Writer<'a> {
    file: File,
    path: &'a Path,
    geo: Geometry,
    spec: &'a Spec,
    alloc: Alloc,
    /// The inode table of the group being filled, and its group.
    table: Vec<u8>,
    table_group: u64,
    /// Per group: inodes in use (always a prefix) and directories.
    used: Vec<u32>,
    dirs: Vec<u32>,
    made: Made,
}

/// Writes the image `spec` asks for to `path` (created or truncated).
pub fn write_image(spec: &Spec, path: &Path) -> Result<Made, SynthError> {
    let geo = plan(spec)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|source| SynthError::Io {
            path: path.display().to_string(),
            source,
        })?;
    let blocks = geo.groups * BPG;
    let mut w = Writer {
        file,
        path,
        alloc: Alloc {
            group: 0,
            next: geo.data_start(0),
            frontier: (0..geo.groups).map(|g| geo.data_start(g)).collect(),
        },
        table: vec![0u8; geo.ipg as usize * INODE_SIZE],
        table_group: 0,
        used: vec![0; geo.groups as usize],
        dirs: vec![0; geo.groups as usize],
        made: Made {
            groups: geo.groups,
            blocks,
            ..Made::default()
        },
        geo,
        spec,
    };
    w.io(w.file.set_len(blocks * BS))?;
    w.tree()?;
    w.flush_table()?;
    w.metadata()?;
    w.io(w.file.sync_all())?;
    Ok(w.made)
}

fn plan(spec: &Spec) -> Result<Geometry, SynthError> {
    let ipg = spec.inodes_per_group;
    if ipg == 0 || ipg % 16 != 0 || ipg > 16384 {
        return Err(SynthError::Spec(format!(
            "--inodes-per-group {ipg}: give a multiple of 16 up to 16384"
        )));
    }
    if spec.dir_fanout == 0 {
        return Err(SynthError::Spec("--dir-fanout must be at least 1".into()));
    }
    if spec.files_per_dir > 60_000 {
        return Err(SynthError::Spec(format!(
            "--files-per-dir {}: at most 60000 (one index level)",
            spec.files_per_dir
        )));
    }
    if u64::from(spec.file_blocks) > 4 * 32768 / 2 {
        return Err(SynthError::Spec(format!(
            "--file-blocks {}: at most {} (one extent per group, four in the inode)",
            spec.file_blocks,
            4 * 32768 / 2
        )));
    }
    let per_dir = 1 + u64::from(spec.files_per_dir);
    let want = spec.inodes.max(u64::from(FIRST_TREE_INO));
    // The root holds lost+found besides its own files.
    let rest = want.saturating_sub(u64::from(FIRST_TREE_INO) - 1 + per_dir - 1);
    let dirs = 1 + rest.div_ceil(per_dir);
    let inodes = u64::from(FIRST_TREE_INO) - 1 + dirs * per_dir - 1;
    if inodes > u64::from(u32::MAX) / 2 {
        return Err(SynthError::Spec(format!("{inodes} inodes is too many")));
    }
    let itb = u64::from(ipg) * INODE_SIZE as u64 / BS;
    // Blocks the tree needs, estimated from above.
    let files = dirs * u64::from(spec.files_per_dir);
    let entry_bytes = 8 + 16;
    let dir_blocks =
        dirs * 2 + (files * 2 + dirs * u64::from(spec.dir_fanout)) * entry_bytes / (BS - 64) + 8;
    let data = files * (u64::from(spec.file_blocks) + 1) + dir_blocks + LPF_BLOCKS;
    let mut groups = (inodes + 1).div_ceil(u64::from(ipg)).max(1);
    loop {
        let gdt_blocks = (groups * DESC_SIZE_64 as u64).div_ceil(BS);
        let geo = Geometry {
            groups,
            ipg,
            itb,
            gdt_blocks,
            dirs,
            fs_seed: 0,
            hash_seed: [0; 4],
            uuid: [0; 16],
        };
        let flex_meta = GROUPS_PER_FLEX * (2 + itb) + 1 + gdt_blocks;
        if GROUPS_PER_FLEX * (2 + itb) + 1 + 64 <= BPG && flex_meta + 64 > BPG {
            return Err(SynthError::Spec(format!(
                "the image would need {groups} block groups ({} TiB), more than one \
                 descriptor table without meta_bg holds; ask for fewer or smaller files",
                (groups * BPG * BS) >> 40
            )));
        }
        if flex_meta + 64 > BPG {
            return Err(SynthError::Spec(format!(
                "--inodes-per-group {ipg} leaves no room in a flex group's first group"
            )));
        }
        let room: u64 = (0..groups).map(|g| (g + 1) * BPG - geo.data_start(g)).sum();
        // Runs do not split across groups: each group may end with a gap
        // as long as the longest run (a file, or one directory's blocks).
        let one_dir = (u64::from(spec.files_per_dir) * 2 + u64::from(spec.dir_fanout))
            * entry_bytes
            / (BS - 64)
            + 2;
        let margin = groups * (u64::from(spec.file_blocks).max(one_dir) + 64);
        if room >= data + margin + data / 16 {
            break;
        }
        groups += ((data + margin + data / 16 - room).div_ceil(BPG)).max(1);
    }
    let mut s = spec.seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut uuid = [0u8; 16];
    for c in uuid.chunks_mut(8) {
        c.copy_from_slice(&next().to_le_bytes());
    }
    uuid[6] = (uuid[6] & 0x0F) | 0x40;
    uuid[8] = (uuid[8] & 0x3F) | 0x80;
    let hash_seed = [next() as u32, next() as u32, next() as u32, next() as u32];
    Ok(Geometry {
        groups,
        ipg,
        itb,
        gdt_blocks: (groups * DESC_SIZE_64 as u64).div_ceil(BS),
        dirs,
        fs_seed: crc32c_raw(CRC32C_INIT, &uuid),
        hash_seed,
        uuid,
    })
}

/// What kind of file the `j`th of a directory is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Regular,
    FastLink,
    SlowLink,
}

impl Spec {
    fn kind(&self, j: u32) -> Kind {
        let n = self.symlink_every;
        if n > 0 && j % n == n - 1 {
            if (j / n) % 2 == 0 {
                Kind::FastLink
            } else {
                Kind::SlowLink
            }
        } else {
            Kind::Regular
        }
    }

    fn linked(&self, j: u32) -> bool {
        self.hardlink_every > 0 && j % self.hardlink_every == 0 && self.kind(j) == Kind::Regular
    }

    fn has_xattr(&self, j: u32) -> bool {
        self.xattr_every > 0 && j % self.xattr_every == 0 && self.kind(j) == Kind::Regular
    }
}

/// A slow symbolic link's target: longer than the 60 bytes of `i_block`.
fn slow_target(ino: u32) -> Vec<u8> {
    format!("../../a/target/path/long/enough/not/to/fit/in/the/inode/itself/{ino}").into_bytes()
}

impl Writer<'_> {
    fn io<T>(&self, r: io::Result<T>) -> Result<T, SynthError> {
        r.map_err(|source| SynthError::Io {
            path: self.path.display().to_string(),
            source,
        })
    }

    fn write_at(&mut self, data: &[u8], block: u64) -> Result<(), SynthError> {
        self.made.bytes_written += data.len() as u64;
        let r = self.file.write_all_at(data, block * BS);
        self.io(r)
    }

    /// Inode number of directory `i` (breadth-first order; 0 is the root).
    fn dir_ino(&self, i: u64) -> u32 {
        if i == 0 {
            return ROOT_INO;
        }
        let per_dir = 1 + u64::from(self.spec.files_per_dir);
        (u64::from(FIRST_TREE_INO) + u64::from(self.spec.files_per_dir) + (i - 1) * per_dir) as u32
    }

    /// Inode number of the first file of directory `i`.
    fn first_file(&self, i: u64) -> u32 {
        if i == 0 {
            FIRST_TREE_INO
        } else {
            self.dir_ino(i) + 1
        }
    }

    fn children(&self, i: u64) -> std::ops::Range<u64> {
        let k = u64::from(self.spec.dir_fanout);
        let lo = (i * k + 1).min(self.geo.dirs);
        let hi = (i * k + k + 1).min(self.geo.dirs);
        lo..hi
    }

    fn tree(&mut self) -> Result<(), SynthError> {
        self.lost_found()?;
        for i in 0..self.geo.dirs {
            self.directory(i)?;
        }
        Ok(())
    }

    fn lost_found(&mut self) -> Result<(), SynthError> {
        let at = self.alloc.take(&self.geo, LPF_BLOCKS)?;
        let mut blocks = vec![0u8; (LPF_BLOCKS * BS) as usize];
        let seed = inode_csum_seed(self.geo.fs_seed, LPF_INO, 0);
        for (k, b) in blocks.chunks_mut(BS as usize).enumerate() {
            let entries = if k == 0 {
                vec![
                    Entry {
                        name: b".".to_vec(),
                        ino: LPF_INO,
                        ft: FT_DIR,
                    },
                    Entry {
                        name: b"..".to_vec(),
                        ino: ROOT_INO,
                        ft: FT_DIR,
                    },
                ]
            } else {
                Vec::new()
            };
            fill_leaf(b, &entries, seed);
        }
        self.write_at(&blocks, at)?;
        let mut raw = new_inode(S_IFDIR | 0o700, 2);
        set_size(&mut raw, LPF_BLOCKS * BS, LPF_BLOCKS);
        set_extents(&mut raw, &[(at, LPF_BLOCKS)]);
        self.put_inode(LPF_INO, raw, true)
    }

    fn directory(&mut self, i: u64) -> Result<(), SynthError> {
        let ino = self.dir_ino(i);
        let parent = if i == 0 {
            ROOT_INO
        } else {
            self.dir_ino((i - 1) / u64::from(self.spec.dir_fanout))
        };
        let mut entries = Vec::new();
        if i == 0 {
            entries.push(Entry {
                name: b"lost+found".to_vec(),
                ino: LPF_INO,
                ft: FT_DIR,
            });
        }
        let children = self.children(i);
        for c in children.clone() {
            entries.push(Entry {
                name: format!("dir{c}").into_bytes(),
                ino: self.dir_ino(c),
                ft: FT_DIR,
            });
        }
        let first = self.first_file(i);
        for j in 0..self.spec.files_per_dir {
            let f = first + j;
            let kind = self.spec.kind(j);
            entries.push(Entry {
                name: format!("file{f}").into_bytes(),
                ino: f,
                ft: if kind == Kind::Regular {
                    FT_REG
                } else {
                    FT_SYMLINK
                },
            });
            if self.spec.linked(j) {
                entries.push(Entry {
                    name: format!("link{f}").into_bytes(),
                    ino: f,
                    ft: FT_REG,
                });
            }
        }
        let seed = inode_csum_seed(self.geo.fs_seed, ino, 0);
        let (blocks, indexed) = self.dir_blocks(ino, parent, &mut entries, seed);
        let n = (blocks.len() / BS as usize) as u64;
        let at = self.alloc.take(&self.geo, n)?;
        self.write_at(&blocks, at)?;
        let subdirs = children.end - children.start + u64::from(i == 0);
        let links = if subdirs + 2 > 64_999 {
            1
        } else {
            (subdirs + 2) as u16
        };
        let mut raw = new_inode(S_IFDIR | 0o755, links);
        set_size(&mut raw, n * BS, n);
        set_extents(&mut raw, &[(at, n)]);
        if indexed {
            let f = ifield::i_flags.get(&raw);
            ifield::i_flags.set(&mut raw, f | flags::INDEX);
            self.made.indexed_dirs += 1;
        }
        self.put_inode(ino, raw, true)?;
        for j in 0..self.spec.files_per_dir {
            self.file(first + j, j)?;
        }
        Ok(())
    }

    /// The blocks of a directory: one leaf block, or an index root and
    /// leaves in hash order. Returns them and whether they are indexed.
    fn dir_blocks(
        &self,
        ino: u32,
        parent: u32,
        entries: &mut [Entry],
        seed: u32,
    ) -> (Vec<u8>, bool) {
        let bs = BS as usize;
        let dots = 12 + 12;
        let need: usize = entries.iter().map(|e| rec_len_for(e.name.len())).sum();
        if need + dots <= bs - DIR_TAIL {
            let mut b = vec![0u8; bs];
            let mut all = vec![
                Entry {
                    name: b".".to_vec(),
                    ino,
                    ft: FT_DIR,
                },
                Entry {
                    name: b"..".to_vec(),
                    ino: parent,
                    ft: FT_DIR,
                },
            ];
            all.extend(entries.iter().map(|e| Entry {
                name: e.name.clone(),
                ino: e.ino,
                ft: e.ft,
            }));
            fill_leaf(&mut b, &all, seed);
            return (b, false);
        }
        // Sorted by hash; leaves filled in that order.
        let hash = |e: &Entry| {
            dirhash(&e.name, version::HALF_MD4, &self.geo.hash_seed)
                .map_or((0, 0), |h| (h.major, h.minor))
        };
        entries.sort_by_cached_key(hash);
        let mut leaves: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut cur: Vec<Entry> = Vec::new();
        let mut used = 0;
        let mut last_major = None;
        let mut first_major = 0;
        for e in entries.iter() {
            let len = rec_len_for(e.name.len());
            let (major, _) = hash(e);
            if used + len > bs - DIR_TAIL {
                let mut b = vec![0u8; bs];
                fill_leaf(&mut b, &cur, seed);
                leaves.push((first_major, b));
                cur.clear();
                used = 0;
            }
            if cur.is_empty() {
                // A leaf starting inside a run of equal hashes says so.
                first_major = if last_major == Some(major) {
                    major | 1
                } else {
                    major
                };
            }
            used += len;
            last_major = Some(major);
            cur.push(Entry {
                name: e.name.clone(),
                ino: e.ino,
                ft: e.ft,
            });
        }
        let mut b = vec![0u8; bs];
        fill_leaf(&mut b, &cur, seed);
        leaves.push((first_major, b));
        // At most 60,000 files (and their links) in a directory: fewer
        // leaves than the root's limit of 507.
        let limit = (bs - DX_ROOT_COUNT_OFFSET - DX_TAIL_SIZE) / DX_ENTRY_SIZE;
        let mut root = vec![0u8; bs];
        put_dirent(&mut root, 0, ino, b".", FT_DIR, 12);
        put_dirent(&mut root, 12, parent, b"..", FT_DIR, bs - 12);
        // dx_root_info: the hash version and the info's length.
        let mut info = DxRootMut::new(&mut root);
        info.set(htree::field::hash_version, version::HALF_MD4);
        info.set(htree::field::info_length, DX_ROOT_INFO_LEN);
        let c = DX_ROOT_COUNT_OFFSET;
        htree::put_limit_count(&mut root, c, limit as u16, leaves.len() as u16);
        for (k, (h, _)) in leaves.iter().enumerate() {
            htree::put_index_entry(&mut root, c, k, *h, (k + 1) as u32);
        }
        set_dx_checksum(&mut root, seed, true);
        let mut out = root;
        for (_, b) in leaves {
            out.extend_from_slice(&b);
        }
        (out, true)
    }

    fn file(&mut self, f: u32, j: u32) -> Result<(), SynthError> {
        let spec = self.spec;
        let links = if spec.linked(j) { 2 } else { 1 };
        let raw = match spec.kind(j) {
            Kind::FastLink => {
                let target = format!("file{}", f.saturating_sub(1).max(FIRST_TREE_INO));
                let mut raw = new_inode(S_IFLNK | 0o777, 1);
                raw[I_BLOCK][..target.len()].copy_from_slice(target.as_bytes());
                set_size(&mut raw, target.len() as u64, 0);
                raw
            }
            Kind::SlowLink => {
                let target = slow_target(f);
                let at = self.alloc.take(&self.geo, 1)?;
                let mut b = vec![0u8; BS as usize];
                b[..target.len()].copy_from_slice(&target);
                self.write_at(&b, at)?;
                let mut raw = new_inode(S_IFLNK | 0o777, 1);
                set_size(&mut raw, target.len() as u64, 1);
                set_extents(&mut raw, &[(at, 1)]);
                raw
            }
            Kind::Regular => {
                let n = u64::from(spec.file_blocks);
                let mut runs = Vec::new();
                let mut left = n;
                while left > 0 {
                    let take = left.min(BPG / 2);
                    runs.push((self.alloc.take(&self.geo, take)?, take));
                    left -= take;
                }
                let mut raw = new_inode(S_IFREG | 0o644, links);
                set_size(&mut raw, n * BS, n);
                set_extents(&mut raw, &runs);
                if spec.has_xattr(j) {
                    put_xattr(&mut raw);
                }
                raw
            }
        };
        self.put_inode(f, raw, false)
    }

    /// Puts an inode into its group's table (written when the group is
    /// left), with its checksum.
    fn put_inode(&mut self, ino: u32, mut raw: Vec<u8>, dir: bool) -> Result<(), SynthError> {
        let g = u64::from(ino - 1) / u64::from(self.geo.ipg);
        if g != self.table_group {
            self.flush_table()?;
            self.table_group = g;
        }
        set_inode_checksum(&mut raw, self.geo.fs_seed, ino);
        let idx = (ino - 1) % self.geo.ipg;
        let at = idx as usize * INODE_SIZE;
        self.table[at..at + INODE_SIZE].copy_from_slice(&raw);
        let used = &mut self.used[g as usize];
        *used = (*used).max(idx + 1);
        if dir {
            self.dirs[g as usize] += 1;
            self.made.directories += 1;
        }
        self.made.inodes_used += 1;
        Ok(())
    }

    /// Writes the used part of the current group's inode table.
    fn flush_table(&mut self) -> Result<(), SynthError> {
        let g = self.table_group;
        let used = self.used[g as usize] as usize * INODE_SIZE;
        if used > 0 {
            let len = used.div_ceil(BS as usize) * BS as usize;
            let table = std::mem::take(&mut self.table);
            let r = self.write_at(&table[..len], self.geo.meta_of(g).2);
            self.table = table;
            r?;
            self.table.fill(0);
        }
        Ok(())
    }

    /// Bitmaps, descriptors and superblocks, once the tree is written.
    fn metadata(&mut self) -> Result<(), SynthError> {
        let geo = &self.geo;
        let groups = geo.groups;
        // Group 0's reserved inodes (1 to 10) are in use, as mke2fs marks them.
        self.used[0] = self.used[0].max(FIRST_INO);
        self.made.inodes_used += u64::from(FIRST_INO) - 2;
        let mut gdt = vec![0u8; (geo.gdt_blocks * BS) as usize];
        let mut free_blocks = 0u64;
        let mut free_inodes = 0u64;
        let ipg = geo.ipg;
        for g in 0..groups {
            let (bb, ib, it) = geo.meta_of(g);
            let used_blocks = self.alloc.frontier[g as usize] - g * BPG;
            let mut bbm = vec![0u8; BS as usize];
            set_bits(&mut bbm, used_blocks as usize);
            let used_inodes = self.used[g as usize];
            let mut ibm = vec![0u8; BS as usize];
            set_bits(&mut ibm, used_inodes as usize);
            // Bits past the group's inodes are set, as the kernel expects.
            ibm[ipg as usize / 8..].fill(0xFF);
            let fb = BPG - used_blocks;
            let fi = ipg - used_inodes;
            free_blocks += fb;
            free_inodes += u64::from(fi);
            self.made.blocks_used += used_blocks;
            let d = &mut gdt[(g as usize) * DESC_SIZE_64..(g as usize + 1) * DESC_SIZE_64];
            gd::BLOCK_BITMAP.set(d, bb);
            gd::INODE_BITMAP.set(d, ib);
            gd::INODE_TABLE.set(d, it);
            gd::FREE_BLOCKS.set(d, fb);
            gd::FREE_INODES.set(d, u64::from(fi));
            gd::USED_DIRS.set(d, u64::from(self.dirs[g as usize]));
            gd::ITABLE_UNUSED.set(d, u64::from(ipg - used_inodes));
            let mut fl = BG_INODE_ZEROED;
            if used_inodes == 0 {
                fl |= BG_INODE_UNINIT;
            }
            gd::field::bg_flags.set(d, fl);
            set_bitmap_checksum(d, false, geo.fs_seed, &bbm);
            set_bitmap_checksum(d, true, geo.fs_seed, &ibm[..ipg as usize / 8]);
            set_group_desc_checksum(d, g as u32, true, geo.fs_seed, &geo.uuid);
            let block = self.file.write_all_at(&bbm, bb * BS);
            self.io(block)?;
            if used_inodes > 0 {
                let inode = self.file.write_all_at(&ibm, ib * BS);
                self.io(inode)?;
                self.made.bytes_written += BS;
            }
            self.made.bytes_written += BS;
        }
        let mut sb = vec![0u8; SUPERBLOCK_SIZE];
        self.superblock(&mut sb, free_blocks, free_inodes);
        for g in (0..groups).filter(|&g| Geometry::has_backup(g)) {
            let mut copy = sb.clone();
            sbf::s_block_group_nr.set(&mut copy, g as u16);
            set_superblock_checksum(&mut copy);
            let sb_at = if g == 0 {
                SUPERBLOCK_OFFSET
            } else {
                g * BPG * BS
            };
            let r = self.file.write_all_at(&copy, sb_at);
            self.io(r)?;
            self.write_at(&gdt, g * BPG + 1)?;
            self.made.bytes_written += SUPERBLOCK_SIZE as u64;
        }
        Ok(())
    }

    fn superblock(&self, sb: &mut [u8], free_blocks: u64, free_inodes: u64) {
        let geo = &self.geo;
        let blocks = geo.groups * BPG;
        sbf::s_inodes_count.set(sb, (geo.groups * u64::from(geo.ipg)) as u32);
        superblock::BLOCKS_COUNT.set(sb, blocks);
        superblock::FREE_BLOCKS_COUNT.set(sb, free_blocks);
        sbf::s_free_inodes_count.set(sb, free_inodes as u32);
        // 4 KiB blocks and clusters: 1024 << 2.
        sbf::s_log_block_size.set(sb, 2);
        sbf::s_log_cluster_size.set(sb, 2);
        sbf::s_blocks_per_group.set(sb, BPG as u32);
        sbf::s_clusters_per_group.set(sb, BPG as u32);
        sbf::s_inodes_per_group.set(sb, geo.ipg);
        sbf::s_wtime.set(sb, TIME);
        // No mount-count check (-1).
        sbf::s_max_mnt_count.set(sb, u16::MAX);
        sbf::s_magic.set(sb, EXT2_MAGIC);
        sbf::s_state.set(sb, STATE_VALID);
        sbf::s_errors.set(sb, ERRORS_CONTINUE);
        sbf::s_lastcheck.set(sb, TIME);
        sbf::s_rev_level.set(sb, DYNAMIC_REV);
        sbf::s_first_ino_raw.set(sb, FIRST_INO);
        sbf::s_inode_size_raw.set(sb, INODE_SIZE as u16);
        let compat = CompatFeatures::EXT_ATTR.union(CompatFeatures::DIR_INDEX);
        let incompat = IncompatFeatures::FILETYPE
            .union(IncompatFeatures::EXTENTS)
            .union(IncompatFeatures::BIT64)
            .union(IncompatFeatures::FLEX_BG);
        let ro = RoCompatFeatures::SPARSE_SUPER
            .union(RoCompatFeatures::LARGE_FILE)
            .union(RoCompatFeatures::HUGE_FILE)
            .union(RoCompatFeatures::DIR_NLINK)
            .union(RoCompatFeatures::EXTRA_ISIZE)
            .union(RoCompatFeatures::METADATA_CSUM);
        sbf::s_feature_compat_raw.set(sb, compat.0);
        sbf::s_feature_incompat_raw.set(sb, incompat.0);
        sbf::s_feature_ro_compat_raw.set(sb, ro.0);
        sb[superblock::S_UUID].copy_from_slice(&geo.uuid);
        sb[superblock::S_VOLUME_NAME][..5].copy_from_slice(b"synth");
        for (k, w) in geo.hash_seed.iter().enumerate() {
            sb[superblock::S_HASH_SEED][4 * k..4 * k + 4].copy_from_slice(&w.to_le_bytes());
        }
        sbf::s_def_hash_version.set(sb, version::HALF_MD4);
        sbf::s_desc_size_raw.set(sb, DESC_SIZE_64 as u16);
        // user_xattr and acl, as mke2fs sets them.
        sbf::s_default_mount_opts.set(sb, DEFM_XATTR_USER | DEFM_ACL);
        sbf::s_mkfs_time.set(sb, TIME);
        sbf::s_min_extra_isize.set(sb, EXTRA_ISIZE_FULL);
        sbf::s_want_extra_isize.set(sb, EXTRA_ISIZE_FULL);
        // Names hash as signed chars (mke2fs on x86); all names here are ASCII.
        sbf::s_flags.set(sb, FLAGS_SIGNED_HASH);
        sbf::s_log_groups_per_flex.set(sb, GROUPS_PER_FLEX.trailing_zeros() as u8);
        sbf::s_checksum_type.set(sb, CHECKSUM_TYPE_CRC32C);
        set_superblock_checksum(sb);
    }
}

/// A fresh in-use inode of `mode` with its times set.
fn new_inode(mode: u16, links: u16) -> Vec<u8> {
    let mut raw = vec![0u8; INODE_SIZE];
    ifield::i_mode.set(&mut raw, mode);
    for (t, _) in TIMES_WITH_EXTRA {
        t.set(&mut raw, TIME);
    }
    ifield::i_links_count.set(&mut raw, links);
    ifield::i_extra_isize_raw.set(&mut raw, EXTRA_ISIZE_FULL);
    raw
}

fn set_size(raw: &mut [u8], size: u64, blocks: u64) {
    inode::SIZE.set(raw, size);
    ifield::i_blocks_lo.set(raw, (blocks * BS / 512) as u32);
}

/// Maps the inode's blocks with in-inode extents (at most four runs).
fn set_extents(raw: &mut [u8], runs: &[(u64, u64)]) {
    let f = ifield::i_flags.get(raw);
    ifield::i_flags.set(raw, f | flags::EXTENTS);
    let root = &mut raw[I_BLOCK];
    extent::put_header(root, runs.len() as u16, 4, 0);
    let mut logical = 0u32;
    for (k, &(start, len)) in runs.iter().enumerate() {
        extent::put_entry(
            root,
            k,
            &extent::encode_extent(logical, len as u16, false, start),
        );
        logical += len as u32;
    }
}

/// An in-inode extended attribute, `user.synth`.
fn put_xattr(raw: &mut [u8]) {
    let extra = usize::from(EXTRA_ISIZE_FULL);
    xattr::start_inode_area(raw, extra);
    // Entries, and the offsets of values, count from right after the magic.
    let first = GOOD_OLD_INODE_SIZE + extra + 4;
    let value_at = INODE_SIZE - XATTR_VALUE.len();
    let area = &mut raw[first..];
    let value_offs = (value_at - first) as u16;
    xattr::put_entry(
        area,
        0,
        XATTR_USER,
        XATTR_NAME,
        value_offs,
        XATTR_VALUE.len() as u32,
    );
    raw[value_at..].copy_from_slice(XATTR_VALUE);
}

fn put_dirent(b: &mut [u8], at: usize, ino: u32, name: &[u8], ft: u8, rec_len: usize) {
    let bs = b.len();
    dirent::put_entry(b, at, bs, ino, rec_len, name, ft);
}

/// Fills a leaf block with `entries` (the last one's record reaching the
/// checksum tail) and writes the tail.
fn fill_leaf(b: &mut [u8], entries: &[Entry], seed: u32) {
    let end = b.len() - DIR_TAIL;
    if entries.is_empty() {
        let bs = b.len();
        dirent::set_rec_len(b, 0, bs, end);
    }
    let mut at = 0;
    for (k, e) in entries.iter().enumerate() {
        let len = if k + 1 == entries.len() {
            end - at
        } else {
            rec_len_for(e.name.len())
        };
        put_dirent(b, at, e.ino, &e.name, e.ft, len);
        at += len;
    }
    write_tail(b, seed);
}

fn set_bits(map: &mut [u8], n: usize) {
    let full = n / 8;
    map[..full].fill(0xFF);
    if n % 8 != 0 {
        map[full] = (1u8 << (n % 8)) - 1;
    }
}
