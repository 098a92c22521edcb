#![no_main]
use ext4_layout::group_desc::GroupDesc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let d = GroupDesc::over(data);
    let _ = (d.block_bitmap(), d.inode_table(), d.free_blocks_count(), d.itable_unused());
    let _ = d.computed_checksum(1, true, 2, &[0; 16]);
    let _ = d.computed_checksum(1, false, 2, &[0; 16]);
});
