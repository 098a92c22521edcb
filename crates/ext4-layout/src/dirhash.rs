//! Directory name hashes used by htree indexes: the legacy hash, half-MD4
//! and TEA, each with signed- or unsigned-char input.

/// `dx_root_info.hash_version` and `s_def_hash_version` values.
pub mod version {
    /// The original ext3 hash.
    pub const LEGACY: u8 = 0;
    /// Half-MD4.
    pub const HALF_MD4: u8 = 1;
    /// TEA.
    pub const TEA: u8 = 2;
    /// Legacy over unsigned chars (never stored; derived from `s_flags`).
    pub const LEGACY_UNSIGNED: u8 = 3;
    /// Half-MD4 over unsigned chars.
    pub const HALF_MD4_UNSIGNED: u8 = 4;
    /// TEA over unsigned chars.
    pub const TEA_UNSIGNED: u8 = 5;
    /// SipHash, for encrypted and case-folded directories.
    pub const SIPHASH: u8 = 6;
}

/// A name's major and minor hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NameHash {
    /// The major hash, with the low bit clear.
    pub major: u32,
    /// The minor hash.
    pub minor: u32,
}

/// The initial state when the superblock's seed is all zero.
const DEFAULT_SEED: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// Reads byte `i` of a name as the C code would see a `char`.
#[inline]
fn char_value(b: u8, unsigned: bool) -> u32 {
    if unsigned {
        u32::from(b)
    } else {
        // Sign-extend, then reinterpret as u32, as C's int promotion does.
        i32::from(b as i8) as u32
    }
}

fn legacy(name: &[u8], unsigned: bool) -> u32 {
    let (mut h0, mut h1) = (0x12a3_fe2du32, 0x37ab_e8f9u32);
    for &b in name {
        let c = char_value(b, unsigned);
        let mut h = h1.wrapping_add(h0 ^ c.wrapping_mul(7_152_373));
        if h & 0x8000_0000 != 0 {
            h = h.wrapping_sub(0x7fff_ffff);
        }
        h1 = h0;
        h0 = h;
    }
    h0 << 1
}

/// Packs up to `words * 4` name bytes into big-endian-ish words, padding
/// with a value built from the full name length.
fn pack(name: &[u8], full_len: usize, out: &mut [u32], unsigned: bool) {
    let len_byte = full_len as u32;
    let mut pad = len_byte | (len_byte << 8);
    pad |= pad << 16;
    let take = name.len().min(out.len() * 4);
    let mut val = pad;
    let mut w = 0usize;
    for (i, &b) in name[..take].iter().enumerate() {
        val = char_value(b, unsigned).wrapping_add(val << 8);
        if i % 4 == 3 {
            if let Some(slot) = out.get_mut(w) {
                *slot = val;
            }
            w += 1;
            val = pad;
        }
    }
    if w < out.len() {
        out[w] = val;
        w += 1;
    }
    for slot in out.iter_mut().skip(w) {
        *slot = pad;
    }
}

fn half_md4(state: &mut [u32; 4], input: &[u32; 8]) {
    let f = |x: u32, y: u32, z: u32| z ^ (x & (y ^ z));
    let g = |x: u32, y: u32, z: u32| (x & y).wrapping_add((x ^ y) & z);
    let h = |x: u32, y: u32, z: u32| x ^ y ^ z;
    const K2: u32 = 0x5A82_7999;
    const K3: u32 = 0x6ED9_EBA1;
    let [mut a, mut b, mut c, mut d] = *state;
    macro_rules! step {
        ($fun:expr, $w:ident, $x:ident, $y:ident, $z:ident, $k:expr, $s:expr) => {
            $w = $w
                .wrapping_add($fun($x, $y, $z))
                .wrapping_add($k)
                .rotate_left($s);
        };
    }
    // Round 1: words in order.
    step!(f, a, b, c, d, input[0], 3);
    step!(f, d, a, b, c, input[1], 7);
    step!(f, c, d, a, b, input[2], 11);
    step!(f, b, c, d, a, input[3], 19);
    step!(f, a, b, c, d, input[4], 3);
    step!(f, d, a, b, c, input[5], 7);
    step!(f, c, d, a, b, input[6], 11);
    step!(f, b, c, d, a, input[7], 19);
    // Round 2: odd words then even words.
    step!(g, a, b, c, d, input[1].wrapping_add(K2), 3);
    step!(g, d, a, b, c, input[3].wrapping_add(K2), 5);
    step!(g, c, d, a, b, input[5].wrapping_add(K2), 9);
    step!(g, b, c, d, a, input[7].wrapping_add(K2), 13);
    step!(g, a, b, c, d, input[0].wrapping_add(K2), 3);
    step!(g, d, a, b, c, input[2].wrapping_add(K2), 5);
    step!(g, c, d, a, b, input[4].wrapping_add(K2), 9);
    step!(g, b, c, d, a, input[6].wrapping_add(K2), 13);
    // Round 3.
    step!(h, a, b, c, d, input[3].wrapping_add(K3), 3);
    step!(h, d, a, b, c, input[7].wrapping_add(K3), 9);
    step!(h, c, d, a, b, input[2].wrapping_add(K3), 11);
    step!(h, b, c, d, a, input[6].wrapping_add(K3), 15);
    step!(h, a, b, c, d, input[1].wrapping_add(K3), 3);
    step!(h, d, a, b, c, input[5].wrapping_add(K3), 9);
    step!(h, c, d, a, b, input[0].wrapping_add(K3), 11);
    step!(h, b, c, d, a, input[4].wrapping_add(K3), 15);
    state[0] = state[0].wrapping_add(a);
    state[1] = state[1].wrapping_add(b);
    state[2] = state[2].wrapping_add(c);
    state[3] = state[3].wrapping_add(d);
}

fn tea(state: &mut [u32; 4], input: &[u32; 4]) {
    const DELTA: u32 = 0x9E37_79B9;
    let (mut b0, mut b1) = (state[0], state[1]);
    let [a, b, c, d] = *input;
    let mut sum = 0u32;
    for _ in 0..16 {
        sum = sum.wrapping_add(DELTA);
        b0 = b0.wrapping_add(
            (b1 << 4).wrapping_add(a) ^ b1.wrapping_add(sum) ^ (b1 >> 5).wrapping_add(b),
        );
        b1 = b1.wrapping_add(
            (b0 << 4).wrapping_add(c) ^ b0.wrapping_add(sum) ^ (b0 >> 5).wrapping_add(d),
        );
    }
    state[0] = state[0].wrapping_add(b0);
    state[1] = state[1].wrapping_add(b1);
}

/// Hashes a name. `hash_version` is one of [`version`]'s values with the
/// unsigned variants already folded in; `seed` is `s_hash_seed`. Returns
/// `None` for versions this function does not compute (SipHash or unknown).
pub fn dirhash(name: &[u8], hash_version: u8, seed: &[u32; 4]) -> Option<NameHash> {
    let mut state = if seed.iter().any(|&w| w != 0) {
        *seed
    } else {
        DEFAULT_SEED
    };
    let (major, minor) = match hash_version {
        version::LEGACY | version::LEGACY_UNSIGNED => {
            (legacy(name, hash_version == version::LEGACY_UNSIGNED), 0)
        }
        version::HALF_MD4 | version::HALF_MD4_UNSIGNED => {
            let unsigned = hash_version == version::HALF_MD4_UNSIGNED;
            let mut input = [0u32; 8];
            let mut rest = name;
            let mut remaining = name.len();
            while remaining > 0 {
                pack(rest, remaining, &mut input, unsigned);
                half_md4(&mut state, &input);
                let step = rest.len().min(32);
                rest = &rest[step..];
                remaining = remaining.saturating_sub(32);
            }
            (state[1], state[2])
        }
        version::TEA | version::TEA_UNSIGNED => {
            let unsigned = hash_version == version::TEA_UNSIGNED;
            let mut input = [0u32; 4];
            let mut rest = name;
            let mut remaining = name.len();
            while remaining > 0 {
                pack(rest, remaining, &mut input, unsigned);
                tea(&mut state, &input);
                let step = rest.len().min(16);
                rest = &rest[step..];
                remaining = remaining.saturating_sub(16);
            }
            (state[0], state[1])
        }
        _ => return None,
    };
    Some(NameHash {
        major: major & !1,
        minor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signedness_matters_only_for_high_bytes() {
        let seed = [0u32; 4];
        for v in [version::LEGACY, version::HALF_MD4, version::TEA] {
            let s = dirhash(b"hello", v, &seed).unwrap();
            let u = dirhash(b"hello", v + 3, &seed).unwrap();
            assert_eq!(s, u, "version {v}");
            let s = dirhash("h\u{e9}llo".as_bytes(), v, &seed).unwrap();
            let u = dirhash("h\u{e9}llo".as_bytes(), v + 3, &seed).unwrap();
            assert_ne!(s, u, "version {v}");
        }
    }

    #[test]
    fn major_hash_low_bit_is_clear() {
        let seed = [1, 2, 3, 4];
        for v in 0..6u8 {
            let h = dirhash(b"some-file-name.txt", v, &seed).unwrap();
            assert_eq!(h.major & 1, 0);
        }
        assert!(dirhash(b"x", version::SIPHASH, &seed).is_none());
    }

    #[test]
    fn pack_pads_with_length() {
        let mut out = [0u32; 4];
        pack(b"ab", 2, &mut out, true);
        let pad = 0x0202_0202u32;
        assert_eq!(
            out[0],
            (((pad << 8) + u32::from(b'a')) << 8) + u32::from(b'b')
        );
        assert_eq!(&out[1..], &[pad, pad, pad]);
    }
}
