//! The whole checker on a mutated small image: read-only check, repair,
//! check again (see `ext4chk_fuzz::harness`). Inputs are images in the
//! compact form of `ext4chk_fuzz::image`; the custom mutator changes
//! one block at a time, so mutations land in the file system's blocks.
#![no_main]

use ext4chk_fuzz::{harness, image, mutate};
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

fuzz_target!(|data: &[u8]| {
    let Some(img) = image::decode(data) else {
        return;
    };
    let threads = std::env::var("EXT4CHK_FUZZ_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    if let Err(e) = harness::exercise(&img, threads) {
        panic!("{e}");
    }
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut rng = mutate::Rng::new(u64::from(seed));
    let mut bytes = |block: &mut [u8]| {
        let n = block.len();
        fuzzer_mutate(block, n, n);
    };
    // One to three block mutations; anything that is not an image input
    // is left to libFuzzer.
    let times = 1 + rng.below(3);
    let mut done = false;
    for _ in 0..times {
        done |= mutate::mutate(&mut data[..size], &mut rng, Some(&mut bytes)).is_some();
    }
    if done {
        size
    } else {
        fuzzer_mutate(data, size, max_size)
    }
});
