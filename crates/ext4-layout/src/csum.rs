//! The two checksum families of ext4: crc32c (metadata_csum, jbd2) and the
//! older crc16 of `gdt_csum` group descriptors.
//!
//! ext4 uses crc32c "raw": the caller's seed goes in as the register value
//! and the result comes out without the final inversion. The `crc32c` crate
//! works on finalised values, so we invert on the way in and out. The crate
//! uses SSE4.2 where the CPU has it.

/// crc32c as ext4 and jbd2 compute it: seeded register, no final inversion.
#[inline]
pub fn crc32c_raw(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

/// The register value that starts every ext4 checksum chain.
pub const CRC32C_INIT: u32 = !0;

/// The CRC-16 table for the reflected polynomial 0xA001 (x^16+x^15+x^2+1).
const CRC16_TABLE: [u16; 256] = build_crc16_table();

const fn build_crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u16;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xA001
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// CRC-16 (the "ARC" polynomial, reflected) continuing from `crc`, as used
/// by the `gdt_csum` group descriptor checksum.
pub fn crc16(mut crc: u16, data: &[u8]) -> u16 {
    for &b in data {
        let idx = usize::from((crc ^ u16::from(b)) & 0xFF);
        crc = (crc >> 8) ^ CRC16_TABLE[idx];
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        // The standard crc32c check value of "123456789" is 0xE3069283;
        // the raw form with seed !0 is its inverse.
        assert_eq!(crc32c_raw(CRC32C_INIT, b"123456789"), !0xE306_9283);
    }

    #[test]
    fn crc32c_chains() {
        let whole = crc32c_raw(7, b"hello world");
        let part = crc32c_raw(crc32c_raw(7, b"hello "), b"world");
        assert_eq!(whole, part);
    }

    #[test]
    fn crc16_check_value() {
        // CRC-16/ARC of "123456789" with a zero start is 0xBB3D.
        assert_eq!(crc16(0, b"123456789"), 0xBB3D);
    }
}
