//! Little-endian field readers that never panic.
//!
//! Every on-disk integer is little-endian. A read past the end of the
//! slice yields zero: views check their length when they are built, so
//! these fallbacks only matter for hand-made slices in tests and fuzzing.

/// Reads a `u8` at `off`, or 0 past the end.
#[inline]
pub fn le_u8(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}

/// Reads a little-endian `u16` at `off`, or 0 past the end.
#[inline]
pub fn le_u16(b: &[u8], off: usize) -> u16 {
    match b.get(off..off.wrapping_add(2)) {
        Some(&[a, c]) => u16::from_le_bytes([a, c]),
        _ => 0,
    }
}

/// Reads a little-endian `u32` at `off`, or 0 past the end.
#[inline]
pub fn le_u32(b: &[u8], off: usize) -> u32 {
    match b.get(off..off.wrapping_add(4)) {
        Some(&[a, c, d, e]) => u32::from_le_bytes([a, c, d, e]),
        _ => 0,
    }
}

/// Reads a little-endian `u64` at `off`, or 0 past the end.
#[inline]
pub fn le_u64(b: &[u8], off: usize) -> u64 {
    let lo = u64::from(le_u32(b, off));
    let hi = u64::from(le_u32(b, off.wrapping_add(4)));
    lo | (hi << 32)
}

/// Reads a big-endian `u32` at `off`, or 0 past the end (jbd2 is big-endian).
#[inline]
pub fn be_u32(b: &[u8], off: usize) -> u32 {
    match b.get(off..off.wrapping_add(4)) {
        Some(&[a, c, d, e]) => u32::from_be_bytes([a, c, d, e]),
        _ => 0,
    }
}

/// Reads a big-endian `u16` at `off`, or 0 past the end.
#[inline]
pub fn be_u16(b: &[u8], off: usize) -> u16 {
    match b.get(off..off.wrapping_add(2)) {
        Some(&[a, c]) => u16::from_be_bytes([a, c]),
        _ => 0,
    }
}

/// Reads a big-endian `u64` at `off`, or 0 past the end.
#[inline]
pub fn be_u64(b: &[u8], off: usize) -> u64 {
    (u64::from(be_u32(b, off)) << 32) | u64::from(be_u32(b, off.wrapping_add(4)))
}

/// Returns `len` bytes at `off`, or an empty slice when they are not all there.
#[inline]
pub fn sub(b: &[u8], off: usize, len: usize) -> &[u8] {
    off.checked_add(len)
        .and_then(|end| b.get(off..end))
        .unwrap_or(&[])
}

/// Joins a split on-disk number: `lo` holds the low 32 bits, `hi` the high.
#[inline]
pub fn u64_from_hi_lo(hi: u32, lo: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Joins two 16-bit halves into a 32-bit number.
#[inline]
pub fn u32_from_hi_lo(hi: u16, lo: u16) -> u32 {
    (u32::from(hi) << 16) | u32::from(lo)
}

/// Writes a little-endian `u16` at `off`; does nothing past the end.
#[inline]
pub fn put_le_u16(b: &mut [u8], off: usize, v: u16) {
    if let Some(s) = b.get_mut(off..off.wrapping_add(2)) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes a little-endian `u32` at `off`; does nothing past the end.
#[inline]
pub fn put_le_u32(b: &mut [u8], off: usize, v: u32) {
    if let Some(s) = b.get_mut(off..off.wrapping_add(4)) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes a little-endian `u64` at `off`; does nothing past the end.
#[inline]
pub fn put_le_u64(b: &mut [u8], off: usize, v: u64) {
    if let Some(s) = b.get_mut(off..off.wrapping_add(8)) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes a big-endian `u32` at `off`; does nothing past the end.
#[inline]
pub fn put_be_u32(b: &mut [u8], off: usize, v: u32) {
    if let Some(s) = b.get_mut(off..off.wrapping_add(4)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// Writes a big-endian `u64` at `off`; does nothing past the end.
#[inline]
pub fn put_be_u64(b: &mut [u8], off: usize, v: u64) {
    if let Some(s) = b.get_mut(off..off.wrapping_add(8)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_end_are_zero() {
        let b = [1u8, 2, 3];
        assert_eq!(le_u16(&b, 0), 0x0201);
        assert_eq!(le_u16(&b, 2), 0);
        assert_eq!(le_u32(&b, 0), 0);
        assert_eq!(le_u32(&b, usize::MAX), 0);
        assert_eq!(sub(&b, 1, 5), &[] as &[u8]);
        assert_eq!(sub(&b, usize::MAX, 2), &[] as &[u8]);
    }

    #[test]
    fn hi_lo_join() {
        assert_eq!(u64_from_hi_lo(1, 2), (1 << 32) | 2);
        assert_eq!(u32_from_hi_lo(0xABCD, 0x1234), 0xABCD_1234);
    }

    #[test]
    fn big_endian() {
        let b = [0xC0, 0x3B, 0x39, 0x98];
        assert_eq!(be_u32(&b, 0), 0xC03B_3998);
    }
}
