#![no_main]
use ext4_layout::inode::Inode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(i) = Inode::new(data) {
        let _ = (i.size(), i.blocks_512(true, 1024), i.file_acl(true), i.file_type());
        let _ = (i.checksum_ok(0, 12), i.i_projid(), i.inline_xattr_area());
    }
});
