//! Mutations of an [`image`](crate::image) input that keep its framing, so
//! that every change lands in a block of the file system: bit flips, a
//! window of garbage, a field set to a boundary value, a block zeroed or
//! filled with random bytes, one block's contents copied over another,
//! and a block moved to another place.

use crate::image::{header, records};

/// A small deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// Values that sit on the edges of what a field may hold.
const EDGES: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    11,
    12,
    0x10,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x3ff,
    0x400,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    u64::MAX,
];

/// What a mutation did, for a reproducible description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A few bits flipped.
    BitFlips,
    /// A run of random bytes.
    Window,
    /// An aligned 1-, 2-, 4- or 8-byte field set to an edge value, or
    /// moved by a little.
    Field,
    /// The whole block zeroed.
    Zero,
    /// The whole block random.
    Random,
    /// Another block's contents copied over it.
    Copy,
    /// The block moved to another block number.
    Move,
    /// Left to a byte-level mutator (libFuzzer's).
    Bytes,
}

/// A byte-level mutator of one block.
pub type ByteMutator<'a> = &'a mut dyn FnMut(&mut [u8]);

/// Mutates one block of the input `data` in place (its length does not
/// change). `bytes`, when given, is a byte-level mutator used for some of
/// the mutations. Returns what was done, or `None` when `data` is not an
/// image input.
pub fn mutate(data: &mut [u8], rng: &mut Rng, bytes: Option<ByteMutator<'_>>) -> Option<Op> {
    let (bs, count) = header(data)?;
    let recs = records(data);
    if recs.is_empty() {
        return None;
    }
    let (at, _) = recs[rng.below(recs.len() as u64) as usize];
    let ops: &[Op] = if bytes.is_some() {
        &[
            Op::Bytes,
            Op::Bytes,
            Op::Bytes,
            Op::BitFlips,
            Op::Window,
            Op::Field,
            Op::Field,
            Op::Zero,
            Op::Random,
            Op::Copy,
            Op::Move,
        ]
    } else {
        &[
            Op::BitFlips,
            Op::BitFlips,
            Op::Window,
            Op::Field,
            Op::Field,
            Op::Field,
            Op::Zero,
            Op::Random,
            Op::Copy,
            Op::Move,
        ]
    };
    let op = ops[rng.below(ops.len() as u64) as usize];
    let block = &mut data[at..at + bs];
    match op {
        Op::BitFlips => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(bs as u64) as usize;
                block[i] ^= 1 << rng.below(8);
            }
        }
        Op::Window => {
            let n = 1 + rng.below(256.min(bs as u64)) as usize;
            let i = rng.below((bs - n + 1) as u64) as usize;
            block[i..i + n]
                .iter_mut()
                .for_each(|b| *b = rng.next_u64() as u8);
        }
        Op::Field => {
            let width = 1usize << rng.below(4);
            let i = rng.below((bs / width) as u64) as usize * width;
            let field = &mut block[i..i + width];
            let mut cur = [0u8; 8];
            cur[..width].copy_from_slice(field);
            let old = u64::from_le_bytes(cur);
            let new = match rng.below(3) {
                0 => EDGES[rng.below(EDGES.len() as u64) as usize],
                1 => old.wrapping_add(1 + rng.below(16)),
                _ => old.wrapping_sub(1 + rng.below(16)),
            };
            field.copy_from_slice(&new.to_le_bytes()[..width]);
        }
        Op::Zero => block.fill(0),
        Op::Random => block.iter_mut().for_each(|b| *b = rng.next_u64() as u8),
        Op::Copy => {
            let (from, _) = recs[rng.below(recs.len() as u64) as usize];
            data.copy_within(from..from + bs, at);
        }
        Op::Move => {
            let to = rng.below(count) as u32;
            data[at - 4..at].copy_from_slice(&to.to_le_bytes());
        }
        Op::Bytes => {
            if let Some(f) = bytes {
                f(block);
            }
        }
    }
    Some(op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{decode, encode};

    #[test]
    fn mutations_keep_the_framing() {
        let mut img = vec![0u8; 16 * 1024];
        for b in 1..6 {
            img[b * 1024] = b as u8;
        }
        let base = encode(&img, 1024).expect("encodes");
        let mut rng = Rng::new(7);
        let mut changed = 0;
        for _ in 0..500 {
            let mut d = base.clone();
            mutate(&mut d, &mut rng, None).expect("an image input");
            assert_eq!(d.len(), base.len());
            assert_eq!(records(&d).len(), records(&base).len());
            let out = decode(&d).expect("decodes");
            changed += usize::from(out != img);
        }
        assert!(
            changed > 400,
            "only {changed} of 500 mutations changed the image"
        );
    }
}
