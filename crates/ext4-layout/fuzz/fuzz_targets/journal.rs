#![no_main]
use ext4_layout::journal::{DescriptorBlock, JournalSuperblock, RevokeBlock};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(j) = JournalSuperblock::new(data) {
        let f = j.features();
        let _ = (j.checksum_ok(), f.tag_size());
        let _ = DescriptorBlock::new(data, f).tags().take(10_000).count();
        let _ = RevokeBlock::new(data, f).records().count();
    }
});
