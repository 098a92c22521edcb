#![no_main]
use ext4_layout::superblock::Superblock;
use ext4_layout::{Geometry, Group};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(sb) = Superblock::new(data) else { return };
    let _ = (sb.blocks_count(), sb.block_size(), sb.checksum_ok(), sb.csum_seed());
    if let Ok(g) = Geometry::from_superblock(&sb) {
        for grp in [0, 1, g.group_count.saturating_sub(1)] {
            let _ = g.super_and_bgd_loc(Group(grp));
        }
        for i in 0..g.desc_blocks.min(8) {
            let _ = g.descriptor_block(g.first_data_block, i);
        }
    }
});
