//! Per-inode counts that are small for almost every inode, as e2fsck's
//! icount keeps only its exceptions: [`Counts`] (references found, which
//! many threads add to) takes four bits an inode, and [`TypeAndLinks`]
//! keeps the link count (set once and read later) in five bits of a byte
//! it shares with the file type; the rare larger counts go to a sharded
//! map. Tables come from zeroed memory ([`crate::zeroed`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::zeroed;

/// Bits of one inline count.
const BITS: u64 = 4;
/// Inline counts per word.
const PER_WORD: u64 = 64 / BITS;
/// The inline value that sends a reader to the map; smaller values are
/// the count itself.
const SPILLED: u64 = (1 << BITS) - 1;
/// Shards of the map of large counts.
const SHARDS: usize = 64;

/// Counts for indexes `0..len`, all zero to begin with.
pub(crate) struct Counts {
    words: Box<[AtomicU64]>,
    len: u64,
    large: Vec<Mutex<HashMap<u32, u32>>>,
}

impl Default for Counts {
    fn default() -> Counts {
        Counts::new(0)
    }
}

impl Counts {
    /// `len` counts of zero.
    pub(crate) fn new(len: u64) -> Counts {
        let words = usize::try_from(len.div_ceil(PER_WORD)).unwrap_or(usize::MAX);
        Counts {
            words: zeroed::table(words),
            len,
            large: shards(),
        }
    }

    /// The word holding count `i` and the count's shift in it.
    fn slot(&self, i: u32) -> Option<(&AtomicU64, u64)> {
        let i = u64::from(i);
        if i >= self.len {
            return None;
        }
        let w = self.words.get((i / PER_WORD) as usize)?;
        Some((w, (i % PER_WORD) * BITS))
    }

    fn large(&self, i: u32) -> MutexGuard<'_, HashMap<u32, u32>> {
        let shard = &self.large[i as usize % SHARDS];
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count `i` (0 past the end).
    pub(crate) fn get(&self, i: u32) -> u32 {
        let Some((w, shift)) = self.slot(i) else {
            return 0;
        };
        let v = (w.load(Ordering::Relaxed) >> shift) & SPILLED;
        if v == SPILLED {
            self.large(i).get(&i).copied().unwrap_or(0)
        } else {
            v as u32
        }
    }

    /// Every count, in index order: the inline ones straight from their
    /// words.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let len = self.len;
        self.words.iter().enumerate().flat_map(move |(k, w)| {
            let word = w.load(Ordering::Relaxed);
            let first = k as u64 * PER_WORD;
            (0..PER_WORD.min(len - first)).map(move |j| {
                let v = (word >> (j * BITS)) & SPILLED;
                if v == SPILLED {
                    self.get((first + j) as u32)
                } else {
                    v as u32
                }
            })
        })
    }

    /// Adds one to count `i` (saturating).
    pub(crate) fn add_one(&self, i: u32) {
        let Some((w, shift)) = self.slot(i) else {
            return;
        };
        let mut cur = w.load(Ordering::Relaxed);
        loop {
            let v = (cur >> shift) & SPILLED;
            if v + 1 < SPILLED {
                match w.compare_exchange_weak(
                    cur,
                    cur + (1 << shift),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            // The count reaches the map: under its shard's lock, so that
            // a reader or counter sent there waits for the entry.
            let mut large = self.large(i);
            let now = w.load(Ordering::Relaxed);
            let v = (now >> shift) & SPILLED;
            if v == SPILLED {
                let c = large.entry(i).or_insert(0);
                *c = c.saturating_add(1);
                return;
            }
            if v + 1 == SPILLED
                && w.compare_exchange(
                    now,
                    now | SPILLED << shift,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                large.insert(i, SPILLED as u32);
                return;
            }
            drop(large);
            cur = w.load(Ordering::Relaxed);
        }
    }
}

impl Counts {
    /// Takes one from count `i` (not below 0). Used where the check
    /// models a repair's changes after the counting (one thread).
    pub(crate) fn sub_one(&self, i: u32) {
        let Some((w, shift)) = self.slot(i) else {
            return;
        };
        let cur = w.load(Ordering::Relaxed);
        let v = (cur >> shift) & SPILLED;
        if v == SPILLED {
            let mut large = self.large(i);
            if let Some(c) = large.get_mut(&i) {
                *c = c.saturating_sub(1);
            }
        } else if v > 0 {
            w.fetch_sub(1 << shift, Ordering::Relaxed);
        }
    }
}

/// The map of large counts, in shards.
fn shards() -> Vec<Mutex<HashMap<u32, u32>>> {
    (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect()
}

/// What pass 1 records of each inode for later passes, in one byte: the
/// directory-entry file type (3 bits) and the link count (5 bits), so
/// that recording either is a plain store. Link counts of 31 and more,
/// rare, go to a sharded map. Each index has one writer at a time.
pub(crate) struct TypeAndLinks {
    bytes: Box<[AtomicU8]>,
    large: Vec<Mutex<HashMap<u32, u32>>>,
}

impl TypeAndLinks {
    /// Bits of the file type, the low ones.
    const TYPE: u8 = 0b111;
    /// Where the link count starts.
    const LINKS_SHIFT: u32 = 3;
    /// The inline link count that sends a reader to the map.
    const SPILLED: u32 = (1 << (8 - Self::LINKS_SHIFT)) - 1;

    /// `len` entries of type 0 and no links.
    pub(crate) fn new(len: u64) -> TypeAndLinks {
        TypeAndLinks {
            bytes: zeroed::table(usize::try_from(len).unwrap_or(usize::MAX)),
            large: shards(),
        }
    }

    fn large(&self, i: u32) -> MutexGuard<'_, HashMap<u32, u32>> {
        let shard = &self.large[i as usize % SHARDS];
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// File type `i` (0 past the end).
    pub(crate) fn file_type(&self, i: u32) -> u8 {
        self.bytes
            .get(i as usize)
            .map_or(0, |b| b.load(Ordering::Relaxed) & Self::TYPE)
    }

    /// Sets file type `i` to the low three bits of `t`.
    pub(crate) fn set_file_type(&self, i: u32, t: u8) {
        if let Some(b) = self.bytes.get(i as usize) {
            let cur = b.load(Ordering::Relaxed);
            b.store(cur & !Self::TYPE | t & Self::TYPE, Ordering::Relaxed);
        }
    }

    /// Link count `i` (0 past the end).
    pub(crate) fn links(&self, i: u32) -> u32 {
        match self
            .bytes
            .get(i as usize)
            .map(|b| u32::from(b.load(Ordering::Relaxed) >> Self::LINKS_SHIFT))
        {
            None => 0,
            Some(Self::SPILLED) => self.large(i).get(&i).copied().unwrap_or(0),
            Some(v) => v,
        }
    }

    /// Sets link count `i`.
    pub(crate) fn set_links(&self, i: u32, n: u32) {
        let Some(b) = self.bytes.get(i as usize) else {
            return;
        };
        let cur = b.load(Ordering::Relaxed);
        let was_spilled = u32::from(cur >> Self::LINKS_SHIFT) == Self::SPILLED;
        let inline = if n >= Self::SPILLED {
            self.large(i).insert(i, n);
            Self::SPILLED
        } else {
            if was_spilled {
                self.large(i).remove(&i);
            }
            n
        };
        // `inline` is at most SPILLED, which fits the byte's high bits.
        let high = (inline as u8) << Self::LINKS_SHIFT;
        b.store(cur & Self::TYPE | high, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #[test]
        fn counts_match_a_map(ops in prop::collection::vec((0u32..200, 1u32..40), 0..100)) {
            let c = Counts::new(200);
            let mut model: HashMap<u32, u32> = HashMap::new();
            for (i, n) in ops {
                for _ in 0..n {
                    c.add_one(i);
                }
                *model.entry(i).or_insert(0) += n;
            }
            for i in 0..200 {
                prop_assert_eq!(c.get(i), model.get(&i).copied().unwrap_or(0));
            }
            prop_assert_eq!(c.get(200), 0);
            let all: Vec<u32> = (0..200).map(|i| c.get(i)).collect();
            prop_assert_eq!(c.iter().collect::<Vec<_>>(), all);
        }
    }

    proptest! {
        #[test]
        fn counts_with_subtractions_match_a_map(ops in prop::collection::vec((0u32..50, 1u32..40, any::<bool>()), 0..100)) {
            let c = Counts::new(50);
            let mut model: HashMap<u32, u32> = HashMap::new();
            for (i, n, sub) in ops {
                let m = model.entry(i).or_insert(0);
                for _ in 0..n {
                    if sub {
                        c.sub_one(i);
                        *m = m.saturating_sub(1);
                    } else {
                        c.add_one(i);
                        *m += 1;
                    }
                }
            }
            for i in 0..50 {
                prop_assert_eq!(c.get(i), model.get(&i).copied().unwrap_or(0));
            }
        }
    }

    proptest! {
        #[test]
        fn types_and_links_match_a_map(ops in prop::collection::vec((0u32..100, 0u32..700, any::<u8>(), any::<bool>()), 0..300)) {
            let c = TypeAndLinks::new(100);
            let mut links: HashMap<u32, u32> = HashMap::new();
            let mut types: HashMap<u32, u8> = HashMap::new();
            for (i, n, t, set_type) in ops {
                if set_type {
                    c.set_file_type(i, t);
                    types.insert(i, t & 7);
                } else {
                    c.set_links(i, n);
                    links.insert(i, n);
                }
            }
            for i in 0..100 {
                prop_assert_eq!(c.links(i), links.get(&i).copied().unwrap_or(0));
                prop_assert_eq!(c.file_type(i), types.get(&i).copied().unwrap_or(0));
            }
            prop_assert_eq!(c.links(100), 0);
            prop_assert_eq!(c.file_type(100), 0);
        }
    }

    #[test]
    fn threads_counting_at_once_lose_nothing() {
        let c = Counts::new(64);
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let c = &c;
                s.spawn(move || {
                    for k in 0..2048u32 {
                        // Every thread counts every index, some past 15.
                        c.add_one((k * 7 + t) % 64);
                    }
                });
            }
        });
        let total: u32 = (0..64).map(|i| c.get(i)).sum();
        assert_eq!(total, 4 * 2048);
        assert!((0..64).all(|i| c.get(i) == 128));
    }
}
