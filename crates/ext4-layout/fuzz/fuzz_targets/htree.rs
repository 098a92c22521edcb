#![no_main]
use ext4_layout::htree::{DxNode, DxRoot};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(r) = DxRoot::new(data) {
        let e = r.entries();
        let _: Vec<_> = e.iter().collect();
        let _ = e.checksum_ok(0);
    }
    if let Some(n) = DxNode::new(data) {
        let _: Vec<_> = n.entries().iter().collect();
    }
});
