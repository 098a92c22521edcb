//! The values some fixes write, said once: under a repair the check goes
//! on from them as e2fsck -y goes on from its fix, and the repair writes
//! them.

/// The `i_extra_isize` the fix of an invalid one writes, for inodes of
/// `inode_size` bytes: out of range (below 4 or past the inode), the
/// superblock's `s_want_extra_isize` when that is valid (else 32, or
/// what fits); in range but not a multiple of 4, rounded up to one.
pub fn fixed_extra_isize(inode_size: u32, want: u16, cur: u16) -> u16 {
    let max = u16::try_from(inode_size.saturating_sub(128)).unwrap_or(u16::MAX);
    if cur < 4 || cur > max {
        if want >= 4 && want <= max && want % 4 == 0 {
            want
        } else {
            32.min(max)
        }
    } else {
        (cur + 3) & !3
    }
}

#[cfg(test)]
mod tests {
    use super::fixed_extra_isize;

    #[test]
    fn an_invalid_extra_isize_becomes_the_wanted_one_or_is_rounded_up() {
        assert_eq!(fixed_extra_isize(256, 32, 126 * 2), 32);
        assert_eq!(fixed_extra_isize(256, 28, 2), 28);
        assert_eq!(fixed_extra_isize(256, 30, 200), 32);
        assert_eq!(fixed_extra_isize(256, 32, 126), 128);
        assert_eq!(fixed_extra_isize(256, 32, 29), 32);
        assert_eq!(fixed_extra_isize(160, 64, 1), 32);
    }
}
