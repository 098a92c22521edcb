//! An undo file in the format e2fsprogs' `e2undo` replays.
//!
//! Before a region of the device is overwritten for the first time, its
//! current content is appended to the undo file, and the file's index is
//! brought up to date, so that `e2undo FILE DEVICE` can put every byte
//! back. The layout, in units of the undo block size `U` (the file
//! system's block size):
//!
//! * block 0: a 512-byte header (magic `E2UNDO02`, key count, block sizes,
//!   the crc32c of the device's superblock, state, header crc32c);
//! * block 1: a copy of the device's superblock with its magic inverted,
//!   so the undo file is never taken for a file system;
//! * block 2: the first key block (magic, crc32c, then 16-byte keys:
//!   device block, crc32c of the saved bytes, their length);
//! * then each key's saved bytes, in key order, and after the data of a
//!   full key block, the next key block.
//!
//! Every saved chunk is written in the order data, key block, header,
//! superblock copy, and only then may the device be written, so that a
//! process killed at any point leaves a file that describes exactly the
//! chunks already saved.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ext4_layout::csum::crc32c_raw;

const MAGIC: &[u8; 8] = b"E2UNDO02";
const KEY_MAGIC: u32 = 0xCADE_CADE;
const HEADER_LEN: usize = 512;
const STATE_FINISHED: u32 = 1;
/// Header `f_compat` bit: `fs_offset` says where the file system starts.
const COMPAT_FS_OFFSET: u32 = 1;
/// Undo block holding the superblock copy.
const SUPER_AT: u64 = 1;
/// Undo block holding the first key block.
const KEYS_AT: u64 = 2;

/// An open undo file.
pub struct UndoLog {
    file: File,
    /// Where the file system starts on the device (a partition inside a
    /// disk image); recorded in the header for e2undo.
    base: u64,
    /// Undo block size (= the file system's block size).
    u: u64,
    /// Chunks (device offset / U) already saved.
    saved: HashSet<u64>,
    /// The key block being filled, and where it goes.
    key_block: Vec<u8>,
    keys_in_block: usize,
    key_block_at: u64,
    /// The next free undo block.
    next_free: u64,
    num_keys: u64,
    state: u32,
    /// Whether chunks were appended since the index was last written.
    dirty: bool,
    /// Key blocks filled since the index was last written, and where they
    /// go: written only after the data they describe is durable.
    filled: Vec<(u64, Vec<u8>)>,
}

impl UndoLog {
    /// Creates a new undo file for the file system that starts `base`
    /// bytes into `dev` and has blocks of `block_size` bytes, and writes
    /// its (empty) index at once. An existing non-empty file is refused,
    /// so an earlier undo file is never lost.
    pub fn create(path: &Path, block_size: u32, dev: &File, base: u64) -> io::Result<Self> {
        if !(1024..=1 << 20).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("block size {block_size} cannot be used for an undo file"),
            ));
        }
        if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} already exists; remove it or choose another undo file",
                    path.display()
                ),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let u = u64::from(block_size);
        file.write_all_at(&vec![0u8; 3 * block_size as usize], 0)?;
        let mut log = UndoLog {
            file,
            base,
            u,
            saved: HashSet::new(),
            key_block: vec![0u8; block_size as usize],
            keys_in_block: 0,
            key_block_at: KEYS_AT,
            next_free: KEYS_AT + 1,
            num_keys: 0,
            // Every region is saved, indexed and made durable before the
            // device is written, so at any moment the file covers every
            // write made so far: it is always complete. (e2undo marks a
            // file system "not clean" after replaying an unfinished file.)
            state: STATE_FINISHED,
            dirty: false,
            filled: Vec::new(),
        };
        log.update_indexes(dev, true)?;
        Ok(log)
    }

    fn keys_per_block(&self) -> usize {
        (self.u / 16 - 1) as usize
    }

    /// Saves the current content of every chunk of `[offset, offset +
    /// len)` of the file system (`dev_size` bytes long) not saved before.
    /// Call before writing that range.
    pub fn save(&mut self, dev: &File, dev_size: u64, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let first = offset / self.u;
        let last = (offset + len - 1) / self.u;
        for c in first..=last {
            if !self.saved.insert(c) {
                continue;
            }
            let at = c * self.u;
            if at >= dev_size {
                continue;
            }
            let n = (dev_size - at).min(self.u) as usize;
            let mut data = vec![0u8; n];
            dev.read_exact_at(&mut data, self.base + at)?;
            self.append(c, &data)?;
        }
        Ok(())
    }

    /// Appends one saved chunk and brings the index up to date.
    fn append(&mut self, chunk: u64, data: &[u8]) -> io::Result<()> {
        let fsblk = chunk; // U == F: device blocks are undo blocks.
        let len = data.len() as u64;
        let merged = self.keys_in_block > 0 && {
            let k = (self.keys_in_block - 1) * 16 + 16;
            let kfs = u64::from_le_bytes(self.key_block[k..k + 8].try_into().unwrap_or([0; 8]));
            let ksize = u64::from(u32::from_le_bytes(
                self.key_block[k + 12..k + 16].try_into().unwrap_or([0; 4]),
            ));
            fsblk == kfs + ksize.div_ceil(self.u) && ksize + len < 512 * self.u
        };
        if merged {
            let k = (self.keys_in_block - 1) * 16 + 16;
            let crc =
                u32::from_le_bytes(self.key_block[k + 8..k + 12].try_into().unwrap_or([0; 4]));
            let size =
                u32::from_le_bytes(self.key_block[k + 12..k + 16].try_into().unwrap_or([0; 4]));
            self.key_block[k + 8..k + 12].copy_from_slice(&crc32c_raw(crc, data).to_le_bytes());
            self.key_block[k + 12..k + 16].copy_from_slice(&(size + len as u32).to_le_bytes());
        } else {
            let k = self.keys_in_block * 16 + 16;
            self.key_block[k..k + 8].copy_from_slice(&fsblk.to_le_bytes());
            self.key_block[k + 8..k + 12].copy_from_slice(&crc32c_raw(!0, data).to_le_bytes());
            self.key_block[k + 12..k + 16].copy_from_slice(&(len as u32).to_le_bytes());
            self.keys_in_block += 1;
            self.num_keys += 1;
        }
        self.file.write_all_at(data, self.next_free * self.u)?;
        self.next_free += 1;
        self.dirty = true;
        if self.keys_in_block == self.keys_per_block() {
            // A full key block is set aside and a new one begun: it is
            // written at the next sync, once its data is durable.
            self.seal_key_block();
            self.filled
                .push((self.key_block_at, std::mem::take(&mut self.key_block)));
            self.key_block = vec![0u8; self.u as usize];
            self.keys_in_block = 0;
            self.key_block_at = self.next_free;
            self.next_free += 1;
        }
        Ok(())
    }

    /// Puts the magic and checksum on the key block being filled.
    fn seal_key_block(&mut self) {
        self.key_block[0..4].copy_from_slice(&KEY_MAGIC.to_le_bytes());
        self.key_block[4..8].fill(0);
        let crc = crc32c_raw(!0, &self.key_block);
        self.key_block[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    /// Writes the key blocks filled since the last sync and the one being
    /// filled.
    fn write_key_blocks(&mut self) -> io::Result<()> {
        for (at, block) in std::mem::take(&mut self.filled) {
            self.file.write_all_at(&block, at * self.u)?;
        }
        if self.keys_in_block > 0 {
            self.seal_key_block();
            self.file
                .write_all_at(&self.key_block, self.key_block_at * self.u)?;
        }
        Ok(())
    }

    /// Brings the file's index up to date, in an order that keeps it
    /// usable whatever a crash loses: the saved data is made durable,
    /// then the key block that points at it, then the header (which says
    /// how many keys there are) together with the superblock copy, in one
    /// write. Until the header is durable, e2undo sees the file as it was
    /// at the last sync.
    fn update_indexes(&mut self, dev: &File, flush: bool) -> io::Result<()> {
        if self.dirty {
            if flush {
                self.file.sync_data()?;
            }
            self.write_key_blocks()?;
            if flush {
                self.file.sync_data()?;
            }
        }
        self.dirty = false;
        let mut sb = vec![0u8; 1024];
        // A device too small for a superblock leaves the copy zeroed.
        let _ = dev.read_exact_at(&mut sb, self.base + 1024);
        let sb_crc = crc32c_raw(!0, &sb);
        // Invert s_magic so the copy is never taken for a file system.
        sb[0x38] = !sb[0x38];
        sb[0x39] = !sb[0x39];
        let mut h = vec![0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..16].copy_from_slice(&self.num_keys.to_le_bytes());
        h[16..24].copy_from_slice(&SUPER_AT.to_le_bytes());
        h[24..32].copy_from_slice(&KEYS_AT.to_le_bytes());
        h[32..36].copy_from_slice(&(self.u as u32).to_le_bytes());
        h[36..40].copy_from_slice(&(self.u as u32).to_le_bytes());
        h[40..44].copy_from_slice(&sb_crc.to_le_bytes());
        h[44..48].copy_from_slice(&self.state.to_le_bytes());
        if self.base != 0 {
            // f_compat's FS_OFFSET bit: e2undo then writes at fs_offset.
            h[48..52].copy_from_slice(&COMPAT_FS_OFFSET.to_le_bytes());
            h[56..64].copy_from_slice(&self.base.to_le_bytes());
        }
        let crc = crc32c_raw(!0, &h[..508]);
        h[508..512].copy_from_slice(&crc.to_le_bytes());
        // The header (undo block 0) and the superblock copy (block 1) go
        // in one write, so that the header's checksum of the copy always
        // matches the copy.
        let mut both = vec![0u8; (SUPER_AT * self.u) as usize + sb.len()];
        both[..HEADER_LEN].copy_from_slice(&h);
        both[(SUPER_AT * self.u) as usize..].copy_from_slice(&sb);
        self.file.write_all_at(&both, 0)?;
        if flush {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Makes everything saved so far durable (before the device writes it
    /// protects), and refreshes the superblock copy from the device.
    pub fn sync(&mut self, dev: &File) -> io::Result<()> {
        self.update_indexes(dev, true)
    }

    /// Marks the undo file complete; it then describes the device as it
    /// is now.
    pub fn finish(&mut self, dev: &File) -> io::Result<()> {
        self.state |= STATE_FINISHED;
        self.update_indexes(dev, true)
    }

    /// How many keys (saved regions) the file holds.
    pub fn keys(&self) -> u64 {
        self.num_keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le32(b: &[u8], o: usize) -> u32 {
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
    }

    #[test]
    fn layout_follows_the_format() {
        let dir = std::env::temp_dir().join(format!("undo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let devp = dir.join("dev");
        let undop = dir.join("undo");
        let _ = std::fs::remove_file(&undop);
        let dev_bytes: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&devp, &dev_bytes).unwrap();
        let dev = File::open(&devp).unwrap();
        let mut u = UndoLog::create(&undop, 1024, &dev, 0).unwrap();
        // Blocks 5 and 6 merge into one key; block 9 is a second key;
        // saving block 5 again adds nothing.
        u.save(&dev, 65536, 5 * 1024, 2048).unwrap();
        u.save(&dev, 65536, 9 * 1024 + 10, 4).unwrap();
        u.save(&dev, 65536, 5 * 1024, 10).unwrap();
        u.finish(&dev).unwrap();
        let f = std::fs::read(&undop).unwrap();
        assert_eq!(&f[0..8], MAGIC);
        assert_eq!(u64::from_le_bytes(f[8..16].try_into().unwrap()), 2);
        assert_eq!(le32(&f, 32), 1024);
        assert_eq!(le32(&f, 44), STATE_FINISHED);
        assert_eq!(le32(&f, 508), crc32c_raw(!0, &f[..508]));
        // The superblock copy has its magic inverted.
        assert_eq!(f[1024 + 0x38], !dev_bytes[1024 + 0x38]);
        // Key block at 2: magic, crc, two keys.
        let kb = &f[2048..3072];
        assert_eq!(le32(kb, 0), KEY_MAGIC);
        let mut z = kb.to_vec();
        z[4..8].fill(0);
        assert_eq!(le32(kb, 4), crc32c_raw(!0, &z));
        assert_eq!(u64::from_le_bytes(kb[16..24].try_into().unwrap()), 5);
        assert_eq!(le32(kb, 28), 2048);
        assert_eq!(le32(kb, 24), crc32c_raw(!0, &dev_bytes[5 * 1024..7 * 1024]));
        assert_eq!(u64::from_le_bytes(kb[32..40].try_into().unwrap()), 9);
        // Data follows the key block in key order.
        assert_eq!(&f[3072..5120], &dev_bytes[5 * 1024..7 * 1024]);
        assert_eq!(&f[5120..6144], &dev_bytes[9 * 1024..10 * 1024]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_existing_undo_file_is_not_overwritten() {
        let p = std::env::temp_dir().join(format!("undo-exists-{}", std::process::id()));
        std::fs::write(&p, b"keep me").unwrap();
        let dev = File::open("/dev/null").unwrap();
        assert!(UndoLog::create(&p, 4096, &dev, 0).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"keep me");
        let _ = std::fs::remove_file(&p);
    }
}
