#![no_main]
use ext4_layout::xattr::{InodeXattrs, XattrBlock};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(x) = XattrBlock::new(data) {
        for e in x.entries().take(4096) {
            let _ = e.map(|e| e.size());
        }
        let _ = x.checksum_ok(0, 0);
    }
    if let Some(x) = InodeXattrs::new(data) {
        let _ = x.entries().take(4096).count();
    }
});
