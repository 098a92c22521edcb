#![no_main]
use ext4_layout::dirent::{DirTail, DirWalk};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let n = data.len();
    for item in DirWalk::new(data, n.saturating_sub(12), true) {
        let _ = (item.entry.name(), item.entry.inode(), item.entry.is_tail());
    }
    let _ = DirTail::find(data);
});
