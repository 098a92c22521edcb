//! The single writer through which every repair will go. Repairs are not
//! implemented yet: ext4chk refuses `--repair` and `--preen` and never
//! opens a device for writing.
