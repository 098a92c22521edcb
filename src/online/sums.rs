//! What the online check keeps of a copy of the device: a 64-bit sum of
//! each block instead of its bytes. A block read again later is the block
//! of the copy when its sum matches; one that does not match changed in
//! between and is taken again under a freeze. This holds 8 bytes per
//! block where a copy holds the block, so the copy of a large file
//! system's metadata costs megabytes, not gigabytes.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Sums of whole units (file system blocks) of the device.
#[derive(Debug, Default)]
pub(super) struct Sums {
    unit: u64,
    /// Start offset (a multiple of the unit) -> the sum of each unit from
    /// there on.
    runs: BTreeMap<u64, Vec<u64>>,
}

impl Sums {
    /// No sums yet, of units of `unit` bytes.
    pub(super) fn new(unit: u64) -> Sums {
        Sums {
            unit: unit.max(1),
            runs: BTreeMap::new(),
        }
    }

    /// The unit, in bytes.
    pub(super) fn unit(&self) -> u64 {
        self.unit
    }

    /// The sum kept for the unit that starts at `at` (a multiple of the
    /// unit).
    pub(super) fn get(&self, at: u64) -> Option<u64> {
        let (&start, run) = self.runs.range(..=at).next_back()?;
        run.get(((at - start) / self.unit) as usize).copied()
    }

    /// Keeps the sums of the units from `start` on.
    fn put(&mut self, start: u64, run: Vec<u64>) {
        if !run.is_empty() {
            self.runs.insert(start, run);
        }
    }

    /// How many units have a sum.
    pub(super) fn len(&self) -> usize {
        self.runs.values().map(Vec::len).sum()
    }
}

/// The sum of one block: CRC32C in the low half and a multiply-xor hash
/// of its 8-byte words in the high half, so that a changed block passes
/// for the old one only by a 64-bit chance.
pub(super) fn sum(b: &[u8]) -> u64 {
    let crc = u64::from(crc32c::crc32c(b));
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ b.len() as u64;
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        let mut v = [0u8; 8];
        v.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(v))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    for &byte in words.remainder() {
        h = (h ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    (h & 0xffff_ffff_0000_0000) | crc
}

/// `ranges` widened to whole units, sorted and joined, as (start, end).
fn widened(ranges: &[(u64, u64)], unit: u64) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = ranges
        .iter()
        .filter(|r| r.1 > 0)
        .map(|&(o, l)| {
            let a = o / unit * unit;
            (a, (o + l).div_ceil(unit) * unit - a)
        })
        .collect();
    join(&mut v);
    v.into_iter().map(|(a, l)| (a, a + l)).collect()
}

/// Reads `ranges` (as (offset, length), widened to whole units) in pieces
/// of at most 1 MiB and keeps the sum of each unit. With a deadline
/// (`(start, limit)`), stops when it passes: false then. A piece that
/// cannot be read (past the end of the device) gets no sum.
pub(super) fn sum_ranges(
    dev: &File,
    ranges: &[(u64, u64)],
    unit: u64,
    deadline: Option<(Instant, Duration)>,
) -> (Sums, bool) {
    let mut sums = Sums::new(unit);
    let unit = sums.unit;
    let piece = (1u64 << 20).max(unit) / unit * unit;
    let mut buf = vec![0u8; piece as usize];
    for (a, b) in widened(ranges, unit) {
        let mut start = a;
        let mut run = Vec::new();
        let mut at = a;
        while at < b {
            if deadline.is_some_and(|(t, limit)| t.elapsed() >= limit) {
                sums.put(start, run);
                return (sums, false);
            }
            let n = piece.min(b - at);
            let chunk = &mut buf[..n as usize];
            if dev.read_exact_at(chunk, at).is_ok() {
                run.extend(chunk.chunks(unit as usize).map(sum));
            } else {
                // Unit by unit: those that can be read get sums.
                for (i, one) in chunk.chunks_mut(unit as usize).enumerate() {
                    let u = at + i as u64 * unit;
                    if dev.read_exact_at(one, u).is_ok() {
                        run.push(sum(one));
                    } else {
                        sums.put(start, std::mem::take(&mut run));
                        start = u + unit;
                    }
                }
            }
            at += n;
        }
        sums.put(start, run);
    }
    (sums, true)
}

/// Sorts and joins ranges in place.
pub(super) fn join(v: &mut Vec<(u64, u64)>) {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for &(o, l) in v.iter() {
        match out.last_mut() {
            Some(last) if o <= last.0 + last.1 => {
                last.1 = last.1.max(o + l - last.0);
            }
            _ => out.push((o, l)),
        }
    }
    *v = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_changed_byte_or_word_changes_the_sum() {
        let a = vec![0u8; 4096];
        let base = sum(&a);
        for i in [0usize, 1, 7, 8, 2047, 4095] {
            let mut b = a.clone();
            b[i] = 1;
            assert_ne!(sum(&b), base, "byte {i}");
        }
        // Two blocks that differ by swapped words.
        let mut c = a.clone();
        c[..8].copy_from_slice(&1u64.to_le_bytes());
        let mut d = a.clone();
        d[8..16].copy_from_slice(&1u64.to_le_bytes());
        assert_ne!(sum(&c), sum(&d));
        assert_eq!(sum(&a), base);
    }

    #[test]
    fn ranges_are_widened_to_units_and_joined() {
        assert_eq!(
            widened(&[(1024, 1024), (4096, 100), (16384, 4096), (0, 0)], 4096),
            vec![(0, 8192), (16384, 20480)]
        );
    }

    #[test]
    fn the_sums_of_a_file_are_found_by_unit() {
        let mut f = tempfile_in_target();
        let data: Vec<u8> = (0..40_960u32).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all(&data).unwrap();
        // Reads past the end of the file give no sums.
        let (s, done) = sum_ranges(&f, &[(4096, 8192), (36_864, 8192)], 4096, None);
        assert!(done);
        assert_eq!(s.get(0), None);
        assert_eq!(s.get(4096), Some(sum(&data[4096..8192])));
        assert_eq!(s.get(8192), Some(sum(&data[8192..12288])));
        assert_eq!(s.get(12288), None);
        assert_eq!(s.get(36_864), Some(sum(&data[36_864..])));
        assert_eq!(s.get(40_960), None);
        assert_eq!(s.len(), 3);
        let (s, done) = sum_ranges(
            &f,
            &[(0, 40_960)],
            4096,
            Some((Instant::now(), Duration::ZERO)),
        );
        assert!(!done);
        assert_eq!(s.len(), 0);
    }

    fn tempfile_in_target() -> File {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("ext4chk-sums-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        f
    }
}
