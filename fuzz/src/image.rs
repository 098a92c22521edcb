//! A compact form of a small file system image for fuzzing: only the
//! blocks that hold something, each with its block number, so that every
//! byte an input mutates is a byte of a superblock, a descriptor, a
//! bitmap, an inode table, a directory, an extent or index block, an
//! attribute block, the journal or a small file.
//!
//! ```text
//! "E4FZ"  log2(block size) - 10 (1 byte)  3 zero bytes  block count (u32 LE)
//! then records: block number (u32 LE)  the block's bytes
//! ```
//!
//! Blocks not listed are zeros; a record past the block count or cut
//! short is ignored.

/// The first four bytes.
pub const MAGIC: &[u8; 4] = b"E4FZ";
/// Header length.
pub const HEADER: usize = 12;
/// The largest image an input may describe.
pub const MAX_IMAGE: u64 = 32 << 20;

/// Block size and block count of an input, if it is one.
pub fn header(data: &[u8]) -> Option<(usize, u64)> {
    if data.len() < HEADER || &data[..4] != MAGIC || data[4] > 6 {
        return None;
    }
    let bs = 1024usize << data[4];
    let count = u64::from(u32::from_le_bytes(data[8..12].try_into().ok()?));
    if count == 0 || count.saturating_mul(bs as u64) > MAX_IMAGE {
        return None;
    }
    Some((bs, count))
}

/// Where each whole record's block bytes start in `data`, with the block
/// number the record names.
pub fn records(data: &[u8]) -> Vec<(usize, u32)> {
    let Some((bs, _)) = header(data) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut at = HEADER;
    while at + 4 + bs <= data.len() {
        let blk = u32::from_le_bytes(data[at..at + 4].try_into().unwrap_or([0; 4]));
        out.push((at + 4, blk));
        at += 4 + bs;
    }
    out
}

/// The image an input describes.
pub fn decode(data: &[u8]) -> Option<Vec<u8>> {
    let (bs, count) = header(data)?;
    let mut img = vec![0u8; (count as usize) * bs];
    for (at, blk) in records(data) {
        if u64::from(blk) < count {
            let off = blk as usize * bs;
            img[off..off + bs].copy_from_slice(&data[at..at + bs]);
        }
    }
    Some(img)
}

/// The input describing `image` (every block that is not all zeros), or
/// `None` when the block size is not one ext4 has or the image is too
/// large.
pub fn encode(image: &[u8], block_size: usize) -> Option<Vec<u8>> {
    let log = (10..=16).find(|&l| 1usize << l == block_size)? - 10;
    if image.len() as u64 > MAX_IMAGE || image.len() % block_size != 0 {
        return None;
    }
    let count = u32::try_from(image.len() / block_size).ok()?;
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[log as u8, 0, 0, 0]);
    out.extend_from_slice(&count.to_le_bytes());
    for (n, block) in image.chunks(block_size).enumerate() {
        if block.iter().any(|&b| b != 0) {
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(block);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_survives_encoding() {
        let mut img = vec![0u8; 8 * 1024];
        img[1024 + 56] = 0x53;
        img[5 * 1024 + 7] = 9;
        let enc = encode(&img, 1024).expect("encodes");
        assert_eq!(records(&enc).len(), 2);
        assert!(decode(&enc).expect("decodes") == img);
    }

    #[test]
    fn records_past_the_end_are_ignored() {
        let mut enc = encode(&[1u8; 2048], 1024).expect("encodes");
        enc[HEADER..HEADER + 4].copy_from_slice(&99u32.to_le_bytes());
        let img = decode(&enc).expect("decodes");
        assert!(img[..1024].iter().all(|&b| b == 0));
        assert!(img[1024..].iter().all(|&b| b == 1));
        assert!(decode(b"E4FZ\x07\0\0\0\x01\0\0\0").is_none());
    }
}
