//! The multiple-mount protection record (incompat `mmp`): the first 1024
//! bytes of block `s_mmp_block`. Whoever uses the file system (the
//! kernel, a checker) keeps writing a new sequence number into it; a
//! second node that sees the number change knows the file system is in
//! use. A checker marks it with [`SEQ_FSCK`] while it runs and with
//! [`SEQ_CLEAN`] when it ends.

use crate::csum::crc32c_raw;

/// `mmp_magic`.
pub const MMP_MAGIC: u32 = crate::superblock::MMP_MAGIC;
/// `mmp_seq` of a file system nobody uses.
pub const SEQ_CLEAN: u32 = 0xFF4D_4D50;
/// `mmp_seq` while a checker runs.
pub const SEQ_FSCK: u32 = 0xE24D_4D50;
/// The largest sequence number a user writes.
pub const SEQ_MAX: u32 = 0xE24D_4D4F;
/// Bytes of the record (the rest of the block is not part of it).
pub const RECORD_SIZE: usize = 1024;
/// The shortest update interval, in seconds (and the default).
pub const MIN_INTERVAL: u32 = 5;
/// The longest update interval, in seconds.
pub const MAX_INTERVAL: u32 = 300;
/// Bytes of `mmp_nodename`.
pub const NODENAME_LEN: usize = 64;
/// Bytes of `mmp_bdevname`.
pub const BDEVNAME_LEN: usize = 32;

/// A read-only view of the record.
#[derive(Clone, Copy, Debug)]
pub struct Mmp<'a>(&'a [u8]);

crate::on_disk! {
    read Mmp, write MmpMut, le;
    /// 0x00: [`MMP_MAGIC`].
    mmp_magic: u32 @ 0x00;
    /// 0x04: sequence number: [`SEQ_CLEAN`], [`SEQ_FSCK`], or a user's
    /// number up to [`SEQ_MAX`].
    mmp_seq: u32 @ 0x04;
    /// 0x08: when it was last written, seconds since the epoch.
    mmp_time: u64 @ 0x08;
    /// 0x70: the update interval its writer uses, seconds.
    mmp_check_interval: u16 @ 0x70;
    /// 0x3FC: crc32c of the bytes before it (metadata_csum).
    mmp_checksum: u32 @ 0x3FC;
}

/// What the sequence number says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seq {
    /// Nobody uses the file system.
    Clean,
    /// A checker has it.
    Fsck,
    /// A node uses it (or did, and stopped without cleaning up).
    InUse(u32),
    /// A value nothing writes.
    Unknown(u32),
}

/// Reads a NUL-padded name field.
fn name(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl<'a> Mmp<'a> {
    /// A view of `b`, which must hold the whole record.
    pub fn new(b: &'a [u8]) -> Option<Self> {
        (b.len() >= RECORD_SIZE).then_some(Mmp(&b[..RECORD_SIZE]))
    }

    /// What the sequence number says.
    pub fn seq(&self) -> Seq {
        match self.mmp_seq() {
            SEQ_CLEAN => Seq::Clean,
            SEQ_FSCK => Seq::Fsck,
            s if s <= SEQ_MAX => Seq::InUse(s),
            s => Seq::Unknown(s),
        }
    }

    /// 0x10: the writer's host name.
    pub fn mmp_nodename(&self) -> String {
        name(&self.0[0x10..0x10 + NODENAME_LEN])
    }

    /// 0x50: the device its writer named.
    pub fn mmp_bdevname(&self) -> String {
        name(&self.0[0x50..0x50 + BDEVNAME_LEN])
    }

    /// Whether the checksum matches, for file system checksum seed `seed`.
    pub fn checksum_ok(&self, seed: u32) -> bool {
        crc32c_raw(seed, &self.0[..0x3FC]) == self.mmp_checksum()
    }

    /// The record's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }
}

/// Copies `s` into a NUL-padded field, truncated to fit.
fn put_name(field: &mut [u8], s: &str) {
    field.fill(0);
    let n = s.len().min(field.len());
    field[..n].copy_from_slice(&s.as_bytes()[..n]);
}

impl MmpMut<'_> {
    /// Sets the writer's host name (0x10) and device name (0x50).
    pub fn set_names(&mut self, node: &str, bdev: &str) {
        let b = self.bytes();
        put_name(&mut b[0x10..0x10 + NODENAME_LEN], node);
        put_name(&mut b[0x50..0x50 + BDEVNAME_LEN], bdev);
    }

    /// Recomputes the checksum with seed `seed` (metadata_csum).
    pub fn update_checksum(&mut self, seed: u32) {
        let c = crc32c_raw(seed, &self.bytes()[..0x3FC]);
        self.set(field::mmp_checksum, c);
    }
}

/// A fresh record, as a checker writes one: magic, sequence `seq`, time
/// `now`, names, interval; checksummed when `seed` is given.
pub fn fresh(
    seq: u32,
    now: u64,
    node: &str,
    bdev: &str,
    interval: u16,
    seed: Option<u32>,
) -> Vec<u8> {
    let mut b = vec![0u8; RECORD_SIZE];
    let mut m = MmpMut::new(&mut b);
    m.set(field::mmp_magic, MMP_MAGIC);
    m.set(field::mmp_seq, seq);
    m.set(field::mmp_time, now);
    m.set(field::mmp_check_interval, interval);
    m.set_names(node, bdev);
    if let Some(s) = seed {
        m.update_checksum(s);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_record_reads_back() {
        let b = fresh(
            SEQ_FSCK,
            1_700_000_000,
            "node-a",
            "/dev/sdb1",
            5,
            Some(0x1234_5678),
        );
        let m = Mmp::new(&b).unwrap();
        assert_eq!(m.mmp_magic(), MMP_MAGIC);
        assert_eq!(m.seq(), Seq::Fsck);
        assert_eq!(m.mmp_time(), 1_700_000_000);
        assert_eq!(m.mmp_nodename(), "node-a");
        assert_eq!(m.mmp_bdevname(), "/dev/sdb1");
        assert_eq!(m.mmp_check_interval(), 5);
        assert!(m.checksum_ok(0x1234_5678));
        assert!(!m.checksum_ok(0));
    }

    #[test]
    fn sequence_numbers_mean_what_the_kernel_means() {
        let mut b = fresh(SEQ_CLEAN, 0, "", "", 5, None);
        assert_eq!(Mmp::new(&b).unwrap().seq(), Seq::Clean);
        // mmp_seq, 0x04..0x08
        b[4..8].copy_from_slice(&SEQ_MAX.to_le_bytes());
        assert_eq!(Mmp::new(&b).unwrap().seq(), Seq::InUse(SEQ_MAX));
        b[4..8].copy_from_slice(&(SEQ_FSCK + 1).to_le_bytes());
        assert_eq!(Mmp::new(&b).unwrap().seq(), Seq::Unknown(SEQ_FSCK + 1));
    }

    #[test]
    fn long_names_are_cut_to_their_fields() {
        let long = "x".repeat(100);
        let b = fresh(SEQ_CLEAN, 0, &long, &long, 5, None);
        let m = Mmp::new(&b).unwrap();
        assert_eq!(m.mmp_nodename().len(), NODENAME_LEN);
        assert_eq!(m.mmp_bdevname().len(), BDEVNAME_LEN);
        assert_eq!(
            m.mmp_check_interval(),
            5,
            "names do not spill into the interval"
        );
    }
}
