//! Property tests: no view panics on arbitrary bytes, and split numbers
//! round-trip.

use ext4_layout::bytes::{u32_from_hi_lo, u64_from_hi_lo};
use ext4_layout::dirent::{decode_rec_len, encode_rec_len, DirEntry, DirTail, DirWalk};
use ext4_layout::dirhash::dirhash;
use ext4_layout::extent::ExtentNode;
use ext4_layout::group_desc::GroupDesc;
use ext4_layout::htree::{DxNode, DxRoot};
use ext4_layout::inode::Inode;
use ext4_layout::journal::{DescriptorBlock, JournalFeatures, JournalSuperblock, RevokeBlock};
use ext4_layout::superblock::Superblock;
use ext4_layout::xattr::{InodeXattrs, XattrBlock};
use ext4_layout::{Geometry, Group};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn superblock_and_geometry_never_panic(mut b in proptest::collection::vec(any::<u8>(), 1024), magic in any::<bool>()) {
        if magic {
            b[0x38] = 0x53;
            b[0x39] = 0xEF;
        }
        let sb = Superblock::new(&b).unwrap();
        let _ = (sb.blocks_count(), sb.free_blocks_count(), sb.inode_size(), sb.first_ino());
        let _ = (sb.block_size(), sb.cluster_size(), sb.csum_seed(), sb.checksum_ok(), sb.desc_size());
        let _ = (sb.compat().names(), sb.incompat().names(), sb.ro_compat().names(), sb.s_jnl_blocks());
        if let Ok(g) = Geometry::from_superblock(&sb) {
            for grp in [0, 1, 3, g.group_count / 2, g.group_count.saturating_sub(1)] {
                let l = g.super_and_bgd_loc(Group(grp));
                let _ = (l.used_blocks, g.group_first_block(Group(grp)), g.group_last_block(Group(grp)));
                let _ = g.blocks_in_group(Group(grp));
            }
            for i in 0..g.desc_blocks.min(4) {
                let _ = g.descriptor_block(g.first_data_block, i);
            }
            let _ = g.backup_groups().take(8).count();
        }
    }

    #[test]
    fn group_descriptors_never_panic(b in proptest::collection::vec(any::<u8>(), 0..96), group in any::<u32>(), csum in any::<bool>()) {
        let d = GroupDesc::over(&b);
        let _ = (d.block_bitmap(), d.inode_bitmap(), d.inode_table(), d.free_blocks_count());
        let _ = (d.free_inodes_count(), d.used_dirs_count(), d.itable_unused(), d.block_bitmap_csum());
        let _ = d.computed_checksum(group, csum, 7, &[3u8; 16]);
    }

    #[test]
    fn inodes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..600), ino in any::<u32>()) {
        if let Some(i) = Inode::new(&b) {
            let _ = (i.size(), i.blocks_512(true, 4096), i.file_acl(true), i.uid(), i.gid());
            let _ = (i.i_checksum_hi(), i.i_crtime(), i.i_projid(), i.file_type(), i.inline_xattr_area());
            let _ = (i.checksum_ok(1, ino), i.computed_checksum(2, ino), i.stored_checksum());
            for w in 0..16 {
                let _ = i.i_block_word(w);
            }
        }
    }

    #[test]
    fn extent_nodes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..4200)) {
        if let Some(n) = ExtentNode::new(&b) {
            let _ = n.validate(false);
            let _ = n.validate(true);
            let _: Vec<_> = n.leaves().map(|e| (e.len(), e.logical_end(), e.is_uninit())).collect();
            let _: Vec<_> = n.indexes().collect();
            let _ = (n.stored_checksum(), n.checksum_ok(5));
        }
    }

    #[test]
    fn directory_blocks_never_panic(b in proptest::collection::vec(any::<u8>(), 0..4200), filetype in any::<bool>()) {
        let len = b.len();
        for item in DirWalk::new(&b, len.saturating_sub(12), filetype) {
            let e = item.entry;
            let _ = (e.inode(), e.rec_len(), e.name(), e.file_type(), e.is_tail());
        }
        if let Some(e) = DirEntry::new(&b, len.max(1), filetype) {
            let _ = (e.name(), e.rec_len());
        }
        let _ = DirTail::find(&b).map(|t| t.det_checksum());
        if let Some(r) = DxRoot::new(&b) {
            let e = r.entries();
            let _: Vec<_> = e.iter().collect();
            let _ = (e.room(true), e.computed_checksum(3), e.checksum_ok(3), r.hash_version());
        }
        if let Some(n) = DxNode::new(&b) {
            let e = n.entries();
            let _: Vec<_> = e.iter().collect();
            let _ = e.checksum_ok(9);
        }
    }

    #[test]
    fn xattrs_never_panic(b in proptest::collection::vec(any::<u8>(), 0..4200)) {
        if let Some(x) = XattrBlock::new(&b) {
            let _: Vec<_> = x.entries().take(1000).collect();
            let _ = x.checksum_ok(1, 2);
        }
        if let Some(x) = InodeXattrs::new(&b) {
            let _: Vec<_> = x.entries().take(1000).collect();
        }
    }

    #[test]
    fn journal_blocks_never_panic(b in proptest::collection::vec(any::<u8>(), 0..4200), incompat in any::<u32>()) {
        if let Some(j) = JournalSuperblock::new(&b) {
            let _ = (j.features().tag_size(), j.checksum_ok(), j.s_errno(), j.s_uuid(), j.csum_seed());
        }
        let f = JournalFeatures { compat: 0, incompat, ro_compat: 0 };
        let _: Vec<_> = DescriptorBlock::new(&b, f).tags().take(10_000).collect();
        let r = RevokeBlock::new(&b, f);
        let _: Vec<_> = r.records().collect();
    }

    #[test]
    fn dirhash_never_panics(name in proptest::collection::vec(any::<u8>(), 0..300), v in 0u8..8, seed in any::<[u32; 4]>()) {
        if let Some(h) = dirhash(&name, v, &seed) {
            prop_assert_eq!(h.major & 1, 0);
        }
    }

    #[test]
    fn hi_lo_round_trip(x in any::<u64>(), y in any::<u32>()) {
        prop_assert_eq!(u64_from_hi_lo((x >> 32) as u32, x as u32), x);
        prop_assert_eq!(u32_from_hi_lo((y >> 16) as u16, y as u16), y);
    }

    #[test]
    fn rec_len_round_trip(len in (3usize..65536).prop_map(|l| l * 4), shift in 0u32..3) {
        let bs = 65536usize << shift;
        prop_assume!(len <= bs);
        // The kernel's encoding gives 262,140 the raw value 65535, which
        // it reads back as a whole block: the one length no entry can
        // have.
        prop_assume!(len != 262_140);
        prop_assert_eq!(decode_rec_len(encode_rec_len(len, bs), bs), len);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn written_entries_read_back(
        names in proptest::collection::vec(proptest::collection::vec(1u8..=255, 1..40), 1..20),
        big in any::<bool>(),
    ) {
        use ext4_layout::dirent::{put_dots, put_entry, rec_len_for};
        let bs = if big { 65536 } else { 4096 };
        let mut b = vec![0u8; bs];
        let mut at = put_dots(&mut b, bs, 12, 2, 24, 2);
        prop_assert_eq!(at, 24);
        for (i, n) in names.iter().enumerate() {
            let rl = if i + 1 == names.len() { bs - at } else { rec_len_for(n.len()) };
            at = put_entry(&mut b, at, bs, 100 + i as u32, rl, n, 1);
        }
        prop_assert_eq!(at, bs);
        let got: Vec<(u32, Vec<u8>, u8)> = DirWalk::new(&b, bs, true)
            .map(|w| (w.entry.inode(), w.entry.name().to_vec(), w.entry.file_type()))
            .collect();
        prop_assert_eq!(got.len(), names.len() + 2);
        prop_assert_eq!(&got[0], &(12, b".".to_vec(), 2));
        prop_assert_eq!(&got[1], &(2, b"..".to_vec(), 2));
        for (i, n) in names.iter().enumerate() {
            prop_assert_eq!(&got[i + 2], &(100 + i as u32, n.clone(), 1));
        }
    }

    #[test]
    fn written_extent_nodes_read_back(
        leaves in proptest::collection::vec((any::<u32>(), 1u16..=32767, any::<bool>(), 0u64..(1 << 48)), 1..4),
    ) {
        use ext4_layout::extent::{encode_extent, encode_index, put_entry, put_header};
        let mut root = [0u8; 60];
        put_header(&mut root, leaves.len() as u16, 4, 0);
        for (k, &(l, len, uninit, p)) in leaves.iter().enumerate() {
            put_entry(&mut root, k, &encode_extent(l, len, uninit, p));
        }
        let node = ExtentNode::new(&root).unwrap();
        prop_assert!(node.validate(true).is_ok());
        prop_assert_eq!(node.entry_count(), leaves.len());
        for (k, &(l, len, uninit, p)) in leaves.iter().enumerate() {
            let e = node.leaf(k);
            prop_assert_eq!((e.ee_block, e.len(), e.is_uninit(), e.start), (l, u32::from(len), uninit, p));
        }
        let mut ix = [0u8; 60];
        put_header(&mut ix, 1, 4, 1);
        put_entry(&mut ix, 0, &encode_index(leaves[0].0, leaves[0].3));
        let node = ExtentNode::new(&ix).unwrap();
        prop_assert_eq!(node.index(0).ei_block, leaves[0].0);
        prop_assert_eq!(node.index(0).leaf, leaves[0].3);
    }

    #[test]
    fn written_index_entries_read_back(
        children in proptest::collection::vec((any::<u32>(), any::<u32>()), 1..100),
        csum in any::<bool>(),
    ) {
        use ext4_layout::htree::{node_limit, put_index_entry, put_limit_count, DX_NODE_COUNT_OFFSET};
        let bs = 4096;
        let limit = node_limit(bs, csum);
        prop_assert_eq!(limit, if csum { 510 } else { 511 });
        let mut b = vec![0u8; bs];
        ext4_layout::dirent::put_header(&mut b, 0, bs, 0, bs);
        put_limit_count(&mut b, DX_NODE_COUNT_OFFSET, limit as u16, children.len() as u16);
        for (k, &(h, c)) in children.iter().enumerate() {
            put_index_entry(&mut b, DX_NODE_COUNT_OFFSET, k, h, c);
        }
        let e = DxNode::new(&b).unwrap().entries();
        prop_assert_eq!((usize::from(e.limit()), usize::from(e.count())), (limit, children.len()));
        for (k, &(h, c)) in children.iter().enumerate() {
            prop_assert_eq!(e.get(k), (if k == 0 { 0 } else { h }, c));
        }
    }
}
