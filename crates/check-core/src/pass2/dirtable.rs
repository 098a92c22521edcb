//! Pass 2's per-directory results — each directory's '..' and its parent
//! (the first entry that links to it) — kept in one dense slot per
//! directory. A directory's slot is its rank among the directories pass 1
//! found: the number of directory inodes numbered below it, counted in a
//! copy of the directory bitmap. Lookups are a few popcounts, with no
//! hashing and no per-inode array.

use crate::bitmap::AtomicBitmap;

/// Words of the bitmap per stored running count.
const WORDS_PER_COUNT: usize = 8;

/// The rank of every set bit of a bitmap, frozen when it was built.
#[derive(Default)]
pub(crate) struct Rank {
    words: Vec<u64>,
    /// Set bits before each run of `WORDS_PER_COUNT` words.
    before: Vec<u32>,
    ones: usize,
}

impl Rank {
    /// Freezes `map` (bit `i` for inode `i + 1`).
    pub(crate) fn new(map: &AtomicBitmap) -> Rank {
        let words = map.words();
        let mut before = Vec::with_capacity(words.len().div_ceil(WORDS_PER_COUNT));
        let mut ones = 0usize;
        for chunk in words.chunks(WORDS_PER_COUNT) {
            before.push(ones as u32);
            ones += chunk.iter().map(|w| w.count_ones() as usize).sum::<usize>();
        }
        Rank {
            words,
            before,
            ones,
        }
    }

    /// The number of set bits.
    pub(crate) fn ones(&self) -> usize {
        self.ones
    }

    /// The rank of bit `bit` if it is set.
    #[inline]
    pub(crate) fn of(&self, bit: u64) -> Option<usize> {
        let w = usize::try_from(bit / 64).ok()?;
        let word = *self.words.get(w)?;
        let mask = 1u64 << (bit % 64);
        if word & mask == 0 {
            return None;
        }
        let first = w - w % WORDS_PER_COUNT;
        let mut r = self.before[first / WORDS_PER_COUNT] as usize;
        for x in &self.words[first..w] {
            r += x.count_ones() as usize;
        }
        Some(r + (word & (mask - 1)).count_ones() as usize)
    }
}

/// Each directory's '..' and parent, 0 where there is none.
#[derive(Default)]
pub(crate) struct DirTable {
    rank: Rank,
    dotdot: Vec<u32>,
    parent: Vec<u32>,
}

impl DirTable {
    /// An empty table over the directories of `dirs`.
    pub(crate) fn new(dirs: &AtomicBitmap) -> DirTable {
        let rank = Rank::new(dirs);
        let n = rank.ones();
        DirTable {
            rank,
            dotdot: vec![0; n],
            parent: vec![0; n],
        }
    }

    fn slot(&self, ino: u32) -> Option<usize> {
        self.rank.of(u64::from(ino.checked_sub(1)?))
    }

    /// The '..' entry of directory `ino` (0: none was found).
    pub fn dotdot(&self, ino: u32) -> u32 {
        self.slot(ino).map_or(0, |k| self.dotdot[k])
    }

    /// The directory that links to `ino` first (0: none).
    pub fn parent(&self, ino: u32) -> u32 {
        self.slot(ino).map_or(0, |k| self.parent[k])
    }

    /// Records the '..' of `ino`, if it is a directory and has none yet.
    pub(crate) fn set_dotdot(&mut self, ino: u32, to: u32) {
        if let Some(k) = self.slot(ino) {
            if self.dotdot[k] == 0 {
                self.dotdot[k] = to;
            }
        }
    }

    /// Records `from` as the parent of `ino` unless it already has one;
    /// false if it had one (or `ino` is not a directory).
    pub(crate) fn claim_parent(&mut self, ino: u32, from: u32) -> Claim {
        match self.slot(ino) {
            None => Claim::NotDir,
            Some(k) if self.parent[k] != 0 => Claim::Taken,
            Some(k) => {
                self.parent[k] = from;
                Claim::First
            }
        }
    }
}

/// What recording a parent found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The first link: now the parent.
    First,
    /// The directory already has a parent.
    Taken,
    /// Not a directory pass 1 knows.
    NotDir,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn rank_counts_the_set_bits_below(bits in proptest::collection::btree_set(0u64..5000, 0..400)) {
            let map = AtomicBitmap::new(5000);
            for &b in &bits {
                map.test_and_set(b);
            }
            let rank = Rank::new(&map);
            prop_assert_eq!(rank.ones(), bits.len());
            for (k, &b) in bits.iter().enumerate() {
                prop_assert_eq!(rank.of(b), Some(k));
            }
            for b in (0..5000u64).filter(|b| !bits.contains(b)) {
                prop_assert_eq!(rank.of(b), None);
            }
            prop_assert_eq!(rank.of(1 << 40), None);
        }
    }

    #[test]
    fn table_keeps_the_first_parent_and_dotdot() {
        let dirs = AtomicBitmap::new(100);
        for ino in [2u32, 11, 70] {
            dirs.test_and_set(u64::from(ino - 1));
        }
        let mut t = DirTable::new(&dirs);
        assert_eq!(t.claim_parent(11, 2), Claim::First);
        assert_eq!(t.claim_parent(11, 70), Claim::Taken);
        assert_eq!(t.claim_parent(12, 2), Claim::NotDir);
        t.set_dotdot(70, 11);
        t.set_dotdot(70, 2);
        t.set_dotdot(0, 2);
        assert_eq!((t.parent(11), t.dotdot(70)), (2, 11));
        assert_eq!(
            (t.parent(70), t.dotdot(11), t.parent(12), t.parent(0)),
            (0, 0, 0, 0)
        );
    }
}
