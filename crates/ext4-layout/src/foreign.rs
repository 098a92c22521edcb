//! What a device holds when it is not an ext2/3/4 file system: the
//! signatures of the common other formats, each at its own place, so that
//! a check can say "xfs.img contains an XFS file system" instead of
//! blaming a superblock that was never there.

/// How many bytes from the start of the device [`identify`] looks at.
pub const PROBE_LEN: usize = 0x10040 + 8;

/// One known signature: the format's name, where its magic sits, and the
/// magic.
struct Signature {
    name: &'static str,
    at: usize,
    magic: &'static [u8],
}

/// Checked in order; the first whose magic is in place names the format.
/// Partition tables come last: a file system may start with a boot
/// sector that looks like one.
const SIGNATURES: &[Signature] = &[
    Signature {
        name: "XFS file system",
        at: 0,
        magic: b"XFSB",
    },
    Signature {
        name: "Btrfs file system",
        at: 0x10040,
        magic: b"_BHRfS_M",
    },
    Signature {
        name: "LUKS encrypted volume",
        at: 0,
        magic: b"LUKS\xba\xbe",
    },
    Signature {
        name: "LUKS2 encrypted volume",
        at: 0,
        magic: b"SKUL\xba\xbe",
    },
    Signature {
        name: "LVM physical volume",
        at: 0x218,
        magic: b"LVM2 001",
    },
    Signature {
        name: "NTFS file system",
        at: 3,
        magic: b"NTFS    ",
    },
    Signature {
        name: "exFAT file system",
        at: 3,
        magic: b"EXFAT   ",
    },
    Signature {
        name: "FAT32 file system",
        at: 0x52,
        magic: b"FAT32   ",
    },
    Signature {
        name: "FAT file system",
        at: 0x36,
        magic: b"FAT1",
    },
    Signature {
        name: "swap area",
        at: 4096 - 10,
        magic: b"SWAPSPACE2",
    },
    Signature {
        name: "swap area",
        at: 4096 - 10,
        magic: b"SWAP-SPACE",
    },
    Signature {
        name: "ISO 9660 file system",
        at: 0x8001,
        magic: b"CD001",
    },
    Signature {
        name: "squashfs file system",
        at: 0,
        magic: b"hsqs",
    },
    Signature {
        name: "GPT partition table",
        at: 512,
        magic: b"EFI PART",
    },
];

/// The format `head` (the first bytes of a device, up to [`PROBE_LEN`])
/// holds, when it is one of the known others; `None` when none matches
/// (including an ext2/3/4 file system).
pub fn identify(head: &[u8]) -> Option<&'static str> {
    for s in SIGNATURES {
        if head.get(s.at..s.at + s.magic.len()) == Some(s.magic) {
            return Some(s.name);
        }
    }
    // An MBR: the boot signature and at least one partition entry with a
    // type, and no FAT or NTFS boot sector (matched above).
    if head.get(510..512) == Some(&[0x55, 0xAA]) {
        let typed = (0..4).any(|i| head.get(0x1BE + i * 16 + 4).is_some_and(|&t| t != 0));
        if typed {
            return Some("partition table (MBR)");
        }
    }
    None
}

/// "a"/"an" for a format's name, as it is said ("an XFS", "a FAT").
pub fn article(name: &str) -> &'static str {
    const AN: &[&str] = &["XFS", "LVM", "NTFS", "exFAT", "ISO"];
    if AN.iter().any(|p| name.starts_with(p)) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(at: usize, magic: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; PROBE_LEN];
        v[at..at + magic.len()].copy_from_slice(magic);
        v
    }

    #[test]
    fn each_format_is_named_from_its_magic() {
        assert_eq!(identify(&with(0, b"XFSB")), Some("XFS file system"));
        assert_eq!(
            identify(&with(0x10040, b"_BHRfS_M")),
            Some("Btrfs file system")
        );
        assert_eq!(identify(&with(0x36, b"FAT16   ")), Some("FAT file system"));
        assert_eq!(
            identify(&with(0x52, b"FAT32   ")),
            Some("FAT32 file system")
        );
        assert_eq!(identify(&with(3, b"NTFS    ")), Some("NTFS file system"));
        assert_eq!(identify(&with(4086, b"SWAPSPACE2")), Some("swap area"));
        assert_eq!(
            identify(&with(0, b"LUKS\xba\xbe")),
            Some("LUKS encrypted volume")
        );
        assert_eq!(
            identify(&with(0x218, b"LVM2 001")),
            Some("LVM physical volume")
        );
        assert_eq!(
            identify(&with(512, b"EFI PART")),
            Some("GPT partition table")
        );
        let mut mbr = vec![0u8; PROBE_LEN];
        mbr[510] = 0x55;
        mbr[511] = 0xAA;
        mbr[0x1BE + 4] = 0x83;
        assert_eq!(identify(&mbr), Some("partition table (MBR)"));
        assert_eq!(identify(&vec![0u8; PROBE_LEN]), None);
        assert_eq!(identify(&[]), None, "a short device holds nothing known");
    }

    #[test]
    fn articles_follow_how_the_name_is_said() {
        assert_eq!(article("XFS file system"), "an");
        assert_eq!(article("Btrfs file system"), "a");
        assert_eq!(article("swap area"), "a");
        assert_eq!(article("exFAT file system"), "an");
        assert_eq!(article("GPT partition table"), "a");
        assert_eq!(article("LVM physical volume"), "an");
        assert_eq!(article("LUKS encrypted volume"), "a");
    }
}
