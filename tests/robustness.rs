//! Damaged images must never crash the checker or hang it: every run ends
//! with one of e2fsck's exit codes; a read-only run leaves the image
//! untouched, and a repair writes nothing to an image shorter than its
//! file system.

mod common;

use std::path::Path;

use common::{code, gunzip, run, Scratch};

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_damage_never_crashes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/images");
    let scratch = Scratch::new("robust");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut runs = 0;
    for name in ["small-ext4", "small-ext2", "small-ext3-4k"] {
        let clean = scratch.path(&format!("{name}.img"));
        gunzip(&dir.join(format!("{name}.img.gz")), &clean);
        let pristine = std::fs::read(&clean).expect("image");
        // Metadata lives in the first part of these images.
        let hot = pristine.len().min(512 * 1024);
        for round in 0..25 {
            let mut img = pristine.clone();
            let flips = 1 + (rng.next() % 40) as usize;
            for _ in 0..flips {
                let off = (rng.next() as usize) % hot;
                img[off] = rng.next() as u8;
            }
            let p = scratch.path(&format!("{name}-{round}.img"));
            std::fs::write(&p, &img).expect("write");
            let out = run(&["-n", p.to_str().expect("path")]);
            let c = code(&out);
            assert!(
                [0, 4, 8, 12].contains(&c),
                "{name} round {round}: exit {c}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                std::fs::read(&p).expect("image") == img,
                "{name} round {round}: image changed"
            );
            let _ = std::fs::remove_file(&p);
            runs += 1;
        }
    }
    assert_eq!(runs, 75);
}

#[test]
fn bad_paths_get_clear_errors() {
    let out = run(&["/nonexistent/device"]);
    assert_eq!(code(&out), 8);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/device"),
        "the message names the device: {err}"
    );
    let scratch = Scratch::new("badpath");
    let empty = scratch.path("empty.img");
    std::fs::write(&empty, b"").expect("write");
    let out = run(&[empty.to_str().expect("path")]);
    assert_eq!(code(&out), 8, "an empty file is not a file system");
    let zeros = scratch.path("zeros.img");
    std::fs::write(&zeros, vec![0u8; 1 << 20]).expect("write");
    let out = run(&[zeros.to_str().expect("path")]);
    assert_eq!(code(&out), 8, "zeros are not a file system");
    assert!(String::from_utf8_lossy(&out.stderr).contains("magic"));
    let out = run(&["--threads", "zero", zeros.to_str().expect("path")]);
    assert_eq!(code(&out), 16, "a bad option is a usage error");
    let out = run(&[scratch.0.to_str().expect("path")]);
    assert_eq!(code(&out), 8, "a directory is not a device");
}

#[test]
fn repairing_a_clean_image_changes_only_the_record_of_the_check() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/images");
    let scratch = Scratch::new("cleanrepair");
    let img = scratch.path("x.img");
    gunzip(&dir.join("small-ext2.img.gz"), &img);
    let before = std::fs::read(&img).expect("image");
    for flag in ["-y", "-p", "--repair"] {
        let out = run(&[flag, img.to_str().expect("path")]);
        assert_eq!(
            code(&out),
            0,
            "{flag}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let after = std::fs::read(&img).expect("image");
    assert_eq!(after.len(), before.len());
    // As e2fsck: the superblock records the check (s_wtime 0x30,
    // s_mnt_count 0x34, s_lastcheck 0x40 and their high bytes 0x274,
    // 0x277); nothing else changes.
    let sb = 1024usize;
    let record = [
        0x30..0x34,
        0x34..0x36,
        0x40..0x44,
        0x274..0x275,
        0x277..0x278,
    ];
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        let in_record = i >= sb && record.iter().any(|r| r.contains(&(i - sb)));
        assert!(a == b || in_record, "byte {i} changed");
    }
    assert_eq!(&after[sb + 0x34..sb + 0x36], &[0, 0], "mount count reset");
    assert_eq!(after[sb + 0x3A] & 3, 1, "marked clean, without errors");
}

#[test]
fn a_truncated_image_is_not_repaired() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.img");
    let scratch = Scratch::new("truncrepair");
    let img = scratch.path("t.img");
    let full = std::fs::read(&demo).expect("demo image");
    std::fs::write(&img, &full[..full.len() / 2]).expect("write");
    let before = std::fs::read(&img).expect("image");
    let p = img.to_str().expect("path");
    // As e2fsck -y: stop before writing anything.
    let out = run(&["-y", p]);
    assert_eq!(code(&out), 8, "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("device holds only"), "{err}");
    // Preen stops too, with e2fsck -p's exit code.
    assert_eq!(code(&run(&["-p", p])), 4);
    assert!(
        std::fs::read(&img).expect("image") == before,
        "the image changed"
    );
    // A repair of a path that does not exist says so.
    let out = run(&["-y", "/nonexistent/device"]);
    assert_eq!(code(&out), 8);
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file"));
}
