//! Partition tables of whole-disk images and disks: GPT, and MBR with
//! its extended (logical) partitions, numbered as Linux numbers them
//! (primary 1 to 4, logical from 5).

use std::path::Path;

/// One partition: where it starts and how long it is, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Byte offset of its first sector.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// Why a partition could not be found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PartitionError {
    /// The table could not be read.
    #[error("cannot read the partition table: {0}")]
    Read(String),
    /// Neither a GPT nor an MBR.
    #[error("no partition table (neither GPT nor MBR) was found")]
    NoTable,
    /// The table has no such partition.
    #[error("the {table} partition table has no partition {n}")]
    NoSuchPartition {
        /// "GPT" or "MBR".
        table: &'static str,
        /// The number asked for.
        n: u32,
    },
    /// The table is damaged.
    #[error("the {0} partition table is damaged: {1}")]
    Damaged(&'static str, String),
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from(le_u32(b, at)) | (u64::from(le_u32(b, at + 4)) << 32)
}

/// Reads `len` bytes at `offset`, as the table parser needs them.
pub trait ReadAt {
    /// Fills a buffer of `len` bytes from `offset`.
    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, PartitionError>;
}

impl ReadAt for std::fs::File {
    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, PartitionError> {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0u8; len];
        self.read_exact_at(&mut b, offset)
            .map_err(|e| PartitionError::Read(format!("{len} bytes at {offset}: {e}")))?;
        Ok(b)
    }
}

impl ReadAt for [u8] {
    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, PartitionError> {
        let start = usize::try_from(offset)
            .map_err(|_| PartitionError::Read("offset too large".to_string()))?;
        self.get(start..start.saturating_add(len))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| PartitionError::Read(format!("{len} bytes at {offset}: past the end")))
    }
}

/// Partition `n` (from 1) of the disk image or disk at `path`.
pub fn find_in(path: &Path, n: u32) -> Result<Partition, PartitionError> {
    let f = std::fs::File::open(path).map_err(|e| PartitionError::Read(e.to_string()))?;
    find(&f, n)
}

/// Partition `n` (from 1) of a disk read through `disk`.
pub fn find<R: ReadAt + ?Sized>(disk: &R, n: u32) -> Result<Partition, PartitionError> {
    let mbr = disk.read(0, 512)?;
    if mbr[510] != 0x55 || mbr[511] != 0xAA {
        // A GPT disk always has a protective MBR; without a signature
        // there is no table at all.
        return Err(PartitionError::NoTable);
    }
    let protective = (0..4).any(|i| mbr[446 + 16 * i + 4] == 0xEE);
    if protective {
        for sector in [512u64, 4096] {
            if let Ok(h) = disk.read(sector, 92) {
                if &h[0..8] == b"EFI PART" {
                    return gpt(disk, &h, sector, n);
                }
            }
        }
        return Err(PartitionError::Damaged(
            "GPT",
            "no GPT header after the protective MBR".into(),
        ));
    }
    mbr_partition(disk, &mbr, n)
}

/// GPT: entries from the header's table (LBA, count, size).
fn gpt<R: ReadAt + ?Sized>(
    disk: &R,
    h: &[u8],
    sector: u64,
    n: u32,
) -> Result<Partition, PartitionError> {
    let table_lba = le_u64(h, 72);
    let count = le_u32(h, 80);
    let size = le_u32(h, 84);
    if !(128..=4096).contains(&size) || count > 65536 {
        return Err(PartitionError::Damaged(
            "GPT",
            format!("entry size {size}, {count} entries"),
        ));
    }
    if n == 0 || n > count {
        return Err(PartitionError::NoSuchPartition { table: "GPT", n });
    }
    let at = table_lba
        .checked_mul(sector)
        .and_then(|b| b.checked_add(u64::from(n - 1) * u64::from(size)))
        .ok_or_else(|| PartitionError::Damaged("GPT", "table offset overflows".into()))?;
    let e = disk.read(at, 128)?;
    if e[0..16].iter().all(|&b| b == 0) {
        return Err(PartitionError::NoSuchPartition { table: "GPT", n });
    }
    let first = le_u64(&e, 32);
    let last = le_u64(&e, 40);
    if last < first {
        return Err(PartitionError::Damaged(
            "GPT",
            format!("partition {n} ends before it starts"),
        ));
    }
    Ok(Partition {
        offset: first.saturating_mul(sector),
        len: (last - first + 1).saturating_mul(sector),
    })
}

fn is_extended(t: u8) -> bool {
    matches!(t, 0x05 | 0x0F | 0x85)
}

/// MBR: 1 to 4 are the primary entries; 5 on are the logical
/// partitions, in the order of the extended partition's chain.
fn mbr_partition<R: ReadAt + ?Sized>(
    disk: &R,
    mbr: &[u8],
    n: u32,
) -> Result<Partition, PartitionError> {
    let entry = |b: &[u8], i: usize| {
        let e = 446 + 16 * i;
        (
            b[e + 4],
            u64::from(le_u32(b, e + 8)),
            u64::from(le_u32(b, e + 12)),
        )
    };
    if (1..=4).contains(&n) {
        let (t, start, sectors) = entry(mbr, n as usize - 1);
        if t == 0 || sectors == 0 {
            return Err(PartitionError::NoSuchPartition { table: "MBR", n });
        }
        return Ok(Partition {
            offset: start * 512,
            len: sectors * 512,
        });
    }
    let Some(ext_start) = (0..4)
        .map(|i| entry(mbr, i))
        .find(|e| is_extended(e.0))
        .map(|e| e.1)
    else {
        return Err(PartitionError::NoSuchPartition { table: "MBR", n });
    };
    let mut ebr_at = ext_start;
    // Each EBR holds one logical partition (relative to itself) and a
    // link to the next EBR (relative to the extended partition); the
    // chain is followed at most 4096 links.
    for number in 5..5 + 4096 {
        let ebr = disk.read(ebr_at * 512, 512)?;
        if ebr[510] != 0x55 || ebr[511] != 0xAA {
            return Err(PartitionError::Damaged(
                "MBR",
                format!("no boot signature in the EBR at sector {ebr_at}"),
            ));
        }
        let (t, rel, sectors) = entry(&ebr, 0);
        if number == n {
            if t == 0 || sectors == 0 {
                break;
            }
            return Ok(Partition {
                offset: (ebr_at + rel) * 512,
                len: sectors * 512,
            });
        }
        let (t2, next, _) = entry(&ebr, 1);
        if !is_extended(t2) || next == 0 {
            break;
        }
        ebr_at = ext_start + next;
    }
    Err(PartitionError::NoSuchPartition { table: "MBR", n })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn put64(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn mbr_primary_and_logical() {
        let mut d = vec![0u8; 64 * 1024];
        d[510] = 0x55;
        d[511] = 0xAA;
        // 1: type 0x83 at sector 2048, 100 sectors; 2: extended at 4096.
        d[446 + 4] = 0x83;
        put32(&mut d, 446 + 8, 2048);
        put32(&mut d, 446 + 12, 100);
        d[462 + 4] = 0x05;
        put32(&mut d, 462 + 8, 100);
        put32(&mut d, 462 + 12, 20);
        // EBR at sector 100: logical at +2 for 5 sectors, next EBR at +10.
        let e = 100 * 512;
        d[e + 510] = 0x55;
        d[e + 511] = 0xAA;
        d[e + 446 + 4] = 0x83;
        put32(&mut d, e + 446 + 8, 2);
        put32(&mut d, e + 446 + 12, 5);
        d[e + 462 + 4] = 0x05;
        put32(&mut d, e + 462 + 8, 10);
        let e2 = 110 * 512;
        d[e2 + 510] = 0x55;
        d[e2 + 511] = 0xAA;
        d[e2 + 446 + 4] = 0x83;
        put32(&mut d, e2 + 446 + 8, 1);
        put32(&mut d, e2 + 446 + 12, 3);
        assert_eq!(
            find(&d[..], 1),
            Ok(Partition {
                offset: 2048 * 512,
                len: 100 * 512
            })
        );
        assert_eq!(
            find(&d[..], 5),
            Ok(Partition {
                offset: 102 * 512,
                len: 5 * 512
            })
        );
        assert_eq!(
            find(&d[..], 6),
            Ok(Partition {
                offset: 111 * 512,
                len: 3 * 512
            })
        );
        assert!(matches!(
            find(&d[..], 3),
            Err(PartitionError::NoSuchPartition { .. })
        ));
        assert!(matches!(
            find(&d[..], 7),
            Err(PartitionError::NoSuchPartition { .. })
        ));
    }

    #[test]
    fn gpt_entries() {
        let mut d = vec![0u8; 64 * 1024];
        d[510] = 0x55;
        d[511] = 0xAA;
        d[446 + 4] = 0xEE;
        d[512..520].copy_from_slice(b"EFI PART");
        put64(&mut d, 512 + 72, 2);
        put32(&mut d, 512 + 80, 128);
        put32(&mut d, 512 + 84, 128);
        // Entry 2 (the second): first LBA 2048, last 4095.
        let e = 1024 + 128;
        d[e] = 1;
        put64(&mut d, e + 32, 2048);
        put64(&mut d, e + 40, 4095);
        assert_eq!(
            find(&d[..], 2),
            Ok(Partition {
                offset: 2048 * 512,
                len: 2048 * 512
            })
        );
        assert!(matches!(
            find(&d[..], 1),
            Err(PartitionError::NoSuchPartition { .. })
        ));
        assert!(matches!(
            find(&d[..], 200),
            Err(PartitionError::NoSuchPartition { .. })
        ));
        assert_eq!(find(&vec![0u8; 1024][..], 1), Err(PartitionError::NoTable));
    }
}
