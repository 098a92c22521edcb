//! Per-inode counts that are small for almost every inode, as e2fsck's
//! icount keeps only its exceptions: [`Counts`] (references found, which
//! many threads add to) takes four bits an inode, [`ByteCounts`] (link
//! counts, set once and read later) a byte; the rare larger counts go to
//! a sharded map.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

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
    words: Vec<AtomicU64>,
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
        Counts {
            words: (0..len.div_ceil(PER_WORD))
                .map(|_| AtomicU64::new(0))
                .collect(),
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
        self.words.iter().enumerate().flat_map(move |(k, w)| {
            let word = w.load(Ordering::Relaxed);
            let first = k as u64 * PER_WORD;
            (0..PER_WORD.min(self.len - first)).map(move |j| {
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

/// The map of large counts, in shards.
fn shards() -> Vec<Mutex<HashMap<u32, u32>>> {
    (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect()
}

/// Counts set once each and read later: a byte an inode, so that setting
/// one is a plain store; 255 and more in a sharded map.
pub(crate) struct ByteCounts {
    bytes: Vec<AtomicU8>,
    large: Vec<Mutex<HashMap<u32, u32>>>,
}

impl ByteCounts {
    /// The inline value that sends a reader to the map.
    const SPILLED: u8 = u8::MAX;

    /// `len` counts of zero.
    pub(crate) fn new(len: u64) -> ByteCounts {
        ByteCounts {
            bytes: (0..len).map(|_| AtomicU8::new(0)).collect(),
            large: shards(),
        }
    }

    fn large(&self, i: u32) -> MutexGuard<'_, HashMap<u32, u32>> {
        let shard = &self.large[i as usize % SHARDS];
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count `i` (0 past the end).
    pub(crate) fn get(&self, i: u32) -> u32 {
        match self
            .bytes
            .get(i as usize)
            .map(|b| b.load(Ordering::Relaxed))
        {
            None => 0,
            Some(Self::SPILLED) => self.large(i).get(&i).copied().unwrap_or(0),
            Some(v) => u32::from(v),
        }
    }

    /// Sets count `i` (one thread at a time per index).
    pub(crate) fn set(&self, i: u32, n: u32) {
        let Some(b) = self.bytes.get(i as usize) else {
            return;
        };
        match u8::try_from(n) {
            Ok(v) if v != Self::SPILLED => {
                if b.load(Ordering::Relaxed) == Self::SPILLED {
                    self.large(i).remove(&i);
                }
                b.store(v, Ordering::Relaxed);
            }
            _ => {
                self.large(i).insert(i, n);
                b.store(Self::SPILLED, Ordering::Relaxed);
            }
        }
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
        fn byte_counts_match_a_map(ops in prop::collection::vec((0u32..100, 0u32..700), 0..300)) {
            let c = ByteCounts::new(100);
            let mut model: HashMap<u32, u32> = HashMap::new();
            for (i, n) in ops {
                c.set(i, n);
                model.insert(i, n);
            }
            for i in 0..100 {
                prop_assert_eq!(c.get(i), model.get(&i).copied().unwrap_or(0));
            }
            prop_assert_eq!(c.get(100), 0);
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
