#![no_main]
use ext4_layout::dirhash::dirhash;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 17 {
        return;
    }
    let v = data[0] % 8;
    let mut seed = [0u32; 4];
    for (i, s) in seed.iter_mut().enumerate() {
        *s = u32::from_le_bytes([data[1 + 4 * i], data[2 + 4 * i], data[3 + 4 * i], data[4 + 4 * i]]);
    }
    let _ = dirhash(&data[17..], v, &seed);
});
