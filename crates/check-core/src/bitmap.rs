//! An atomic bitmap split into shards, so that many workers can mark bits
//! without a lock. Each shard keeps its own count of set bits, so counting
//! a group (or the whole map) needs no scan. The words come from zeroed
//! memory, so the stretches of a map that stay clear (most of the maps of
//! rare problems, the inodes a file system never used) take no memory.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::zeroed;

/// Bits per shard: 2^15, one block group's worth with 4 KiB blocks.
pub(crate) const SHARD_BITS_LOG2: u32 = 15;
const SHARD_BITS: u64 = 1 << SHARD_BITS_LOG2;

/// A fixed-size bitmap of atomic words with per-shard set-bit counters.
pub struct AtomicBitmap {
    words: Box<[AtomicU64]>,
    counts: Box<[AtomicU32]>,
    len: u64,
}

impl AtomicBitmap {
    /// A bitmap of `len` clear bits.
    pub fn new(len: u64) -> Self {
        let nwords = len.div_ceil(64) as usize;
        let nshards = len.div_ceil(SHARD_BITS) as usize;
        AtomicBitmap {
            words: zeroed::table(nwords),
            counts: zeroed::table(nshards),
            len,
        }
    }

    /// Number of bits.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the bitmap has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets bit `i` and returns its previous value. Out-of-range bits are
    /// ignored and reported as already set, so callers never count them.
    #[inline]
    pub fn test_and_set(&self, i: u64) -> bool {
        if i >= self.len {
            return true;
        }
        let mask = 1u64 << (i % 64);
        let prev = self.words[(i / 64) as usize].fetch_or(mask, Ordering::Relaxed);
        let was = prev & mask != 0;
        if !was {
            self.counts[(i >> SHARD_BITS_LOG2) as usize].fetch_add(1, Ordering::Relaxed);
        }
        was
    }

    /// Sets bit `i` with release ordering: whatever this thread wrote
    /// before is visible to a thread that sees the bit with
    /// [`AtomicBitmap::get_acquire`]. Returns the previous value.
    #[inline]
    pub(crate) fn set_release(&self, i: u64) -> bool {
        if i >= self.len {
            return true;
        }
        let mask = 1u64 << (i % 64);
        let prev = self.words[(i / 64) as usize].fetch_or(mask, Ordering::Release);
        let was = prev & mask != 0;
        if !was {
            self.counts[(i >> SHARD_BITS_LOG2) as usize].fetch_add(1, Ordering::Relaxed);
        }
        was
    }

    /// Reads bit `i` with acquire ordering (see [`AtomicBitmap::set_release`]).
    #[inline]
    pub(crate) fn get_acquire(&self, i: u64) -> bool {
        if i >= self.len {
            return false;
        }
        self.words[(i / 64) as usize].load(Ordering::Acquire) & (1u64 << (i % 64)) != 0
    }

    /// Clears bit `i` and returns its previous value.
    #[inline]
    pub fn test_and_clear(&self, i: u64) -> bool {
        if i >= self.len {
            return false;
        }
        let mask = 1u64 << (i % 64);
        let prev = self.words[(i / 64) as usize].fetch_and(!mask, Ordering::Relaxed);
        let was = prev & mask != 0;
        if was {
            self.counts[(i >> SHARD_BITS_LOG2) as usize].fetch_sub(1, Ordering::Relaxed);
        }
        was
    }

    /// Reads bit `i` (false when out of range).
    #[inline]
    pub fn get(&self, i: u64) -> bool {
        if i >= self.len {
            return false;
        }
        self.words[(i / 64) as usize].load(Ordering::Relaxed) & (1u64 << (i % 64)) != 0
    }

    /// Sets bits `[start, start + count)` a word at a time and calls
    /// `already(i)` for each bit that was set before. Out-of-range bits
    /// count as already set.
    pub(crate) fn test_and_set_range(&self, start: u64, count: u64, mut already: impl FnMut(u64)) {
        let end = start.saturating_add(count);
        let stop = end.min(self.len);
        let mut i = start;
        while i < stop {
            let word = i / 64;
            let lo = i % 64;
            let hi = (stop - word * 64).min(64);
            let mask = if hi - lo == 64 {
                u64::MAX
            } else {
                ((1u64 << (hi - lo)) - 1) << lo
            };
            let prev = self.words[word as usize].fetch_or(mask, Ordering::Relaxed);
            let was = prev & mask;
            let new = (mask & !prev).count_ones();
            if new != 0 {
                self.counts[(i >> SHARD_BITS_LOG2) as usize].fetch_add(new, Ordering::Relaxed);
            }
            let mut w = was;
            while w != 0 {
                let b = u64::from(w.trailing_zeros());
                already(word * 64 + b);
                w &= w - 1;
            }
            i = word * 64 + hi;
        }
        for j in stop.max(start)..end {
            already(j);
        }
    }

    /// Total set bits.
    pub(crate) fn count_ones(&self) -> u64 {
        self.counts
            .iter()
            .map(|c| u64::from(c.load(Ordering::Relaxed)))
            .sum()
    }

    /// Set bits in `[start, start + count)`.
    pub(crate) fn count_range(&self, start: u64, count: u64) -> u64 {
        let end = start.saturating_add(count).min(self.len);
        if start >= end {
            return 0;
        }
        // Whole shards use their counters; the ragged ends are scanned.
        let mut n = 0u64;
        let mut i = start;
        while i < end {
            let shard = i >> SHARD_BITS_LOG2;
            let shard_start = shard << SHARD_BITS_LOG2;
            let shard_end = shard_start + SHARD_BITS;
            if i == shard_start && shard_end <= end {
                n += u64::from(self.counts[shard as usize].load(Ordering::Relaxed));
                i = shard_end;
                continue;
            }
            let stop = end.min(shard_end);
            while i < stop {
                if i % 64 == 0 && i + 64 <= stop {
                    n += u64::from(
                        self.words[(i / 64) as usize]
                            .load(Ordering::Relaxed)
                            .count_ones(),
                    );
                    i += 64;
                } else {
                    n += u64::from(self.get(i));
                    i += 1;
                }
            }
        }
        n
    }

    /// Finds the first set bit at or after `from`.
    pub fn next_set(&self, from: u64) -> Option<u64> {
        let mut i = from;
        while i < self.len {
            let w = self.words[(i / 64) as usize].load(Ordering::Relaxed) >> (i % 64);
            if w != 0 {
                let bit = i + u64::from(w.trailing_zeros());
                return (bit < self.len).then_some(bit);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// A copy of the words (bit `i` is bit `i % 64` of word `i / 64`).
    pub(crate) fn words(&self) -> Vec<u64> {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn test_and_set_reports_previous() {
        let b = AtomicBitmap::new(100);
        assert!(!b.test_and_set(5));
        assert!(b.test_and_set(5));
        assert!(b.get(5));
        assert_eq!(b.count_ones(), 1);
        assert!(b.test_and_set(1000), "out of range counts as set");
        assert!(b.test_and_clear(5));
        assert_eq!(b.count_ones(), 0);
    }

    #[test]
    fn concurrent_setters_agree_on_one_winner() {
        let b = AtomicBitmap::new(1 << 16);
        let winners = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..(1u64 << 16) {
                        if !b.test_and_set(i) {
                            winners.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(winners.load(Ordering::Relaxed), 1 << 16);
        assert_eq!(b.count_ones(), 1 << 16);
    }

    proptest! {
        #[test]
        fn matches_a_plain_model(len in 1u64..200_000, ops in proptest::collection::vec((any::<u64>(), any::<bool>()), 0..300)) {
            let b = AtomicBitmap::new(len);
            let mut model = vec![false; len as usize];
            for (raw, set) in ops {
                let i = raw % len;
                if set {
                    prop_assert_eq!(b.test_and_set(i), model[i as usize]);
                    model[i as usize] = true;
                } else {
                    prop_assert_eq!(b.test_and_clear(i), model[i as usize]);
                    model[i as usize] = false;
                }
            }
            let ones = model.iter().filter(|&&x| x).count() as u64;
            prop_assert_eq!(b.count_ones(), ones);
            let start = len / 3;
            let count = len / 2;
            let expect = model[start as usize..(start + count).min(len) as usize].iter().filter(|&&x| x).count() as u64;
            prop_assert_eq!(b.count_range(start, count), expect);
            let first = model.iter().position(|&x| x).map(|p| p as u64);
            prop_assert_eq!(b.next_set(0), first);
        }

        #[test]
        fn range_set_matches_a_plain_model(len in 1u64..5_000, ranges in proptest::collection::vec((any::<u64>(), 0u64..300), 0..60)) {
            let b = AtomicBitmap::new(len);
            let mut model = vec![false; len as usize];
            for (raw, n) in ranges {
                let start = raw % (len + 100);
                let mut got = Vec::new();
                b.test_and_set_range(start, n, |i| got.push(i));
                let mut want = Vec::new();
                for i in start..start + n {
                    match model.get_mut(i as usize) {
                        Some(m) if *m => want.push(i),
                        Some(m) => *m = true,
                        None => want.push(i),
                    }
                }
                got.sort_unstable();
                prop_assert_eq!(got, want);
            }
            let ones = model.iter().filter(|&&x| x).count() as u64;
            prop_assert_eq!(b.count_ones(), ones);
        }
    }

    #[test]
    fn concurrent_range_setters_see_each_bit_once() {
        let b = AtomicBitmap::new(1 << 16);
        let dups = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (b, dups) = (&b, &dups);
                s.spawn(move || {
                    let mut i = t * 7;
                    while i < 1 << 16 {
                        b.test_and_set_range(i, 13, |_| {
                            dups.fetch_add(1, Ordering::Relaxed);
                        });
                        i += 13;
                    }
                });
            }
        });
        // Each bit in range is new to exactly one setter; every other
        // report (later setters, bits past the end) is "already set".
        assert_eq!(b.count_ones(), 1 << 16);
        let requested: u64 = (0..4u64)
            .map(|t| ((1u64 << 16) - t * 7).div_ceil(13) * 13)
            .sum();
        assert_eq!(dups.load(Ordering::Relaxed), requested - (1 << 16));
    }
}
