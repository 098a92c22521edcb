#![no_main]
use ext4_layout::extent::ExtentNode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(n) = ExtentNode::new(data) {
        let _ = n.validate(data.len() == 60);
        for e in n.leaves() {
            let _ = (e.len(), e.logical_end());
        }
        for i in n.indexes() {
            let _ = i.leaf;
        }
        let _ = n.checksum_ok(1);
    }
});
