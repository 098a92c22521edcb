//! Both I/O paths return the same bytes: single reads, batches (cached,
//! uncached, past the end), whichever path the kernel allows.

use std::io::Write;
use std::path::PathBuf;

use pipeline::{open_device, IoMode, ReadReq, Target};

const SIZE: usize = 4 << 20;

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 12)) as u8
}

fn image(dir: &std::path::Path, tag: &str) -> PathBuf {
    let p = dir.join(format!("pipeline-readers-{tag}-{}", std::process::id()));
    let mut f = std::fs::File::create(&p).expect("create");
    let data: Vec<u8> = (0..SIZE).map(pattern).collect();
    f.write_all(&data).expect("write");
    f.sync_all().expect("sync");
    p
}

/// Drops the file's pages from the page cache, so reads must wait for
/// the device (the uncached path of each reader).
fn evict(path: &PathBuf) {
    let f = std::fs::File::open(path).expect("open");
    let _ = nix::fcntl::posix_fadvise(
        &f,
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    );
}

fn check_mode(mode: IoMode, tag: &str) {
    check_mode_in(&std::env::temp_dir(), mode, tag);
}

fn check_mode_in(dir: &std::path::Path, mode: IoMode, tag: &str) {
    check_in(dir, mode, tag, false);
}

/// Reads an image through `mode`, on the direct path if `direct` (and
/// the file system takes O_DIRECT; else the buffered path, which must
/// then read the same bytes).
fn check_in(dir: &std::path::Path, mode: IoMode, tag: &str, direct: bool) {
    let path = image(dir, tag);
    let dev = match open_device(&Target::whole(&path), mode) {
        Ok(mut d) => {
            if direct {
                match d.go_direct() {
                    Ok(()) => assert!(d.is_direct()),
                    Err(e) => {
                        eprintln!("O_DIRECT refused in {}: {e}", dir.display());
                        assert!(!d.is_direct());
                    }
                }
            }
            d
        }
        Err(e) => {
            // io_uring may be disabled where the tests run; pread must not be.
            assert_eq!(mode, IoMode::Uring, "{e}");
            eprintln!("skipping io_uring: {e}");
            let _ = std::fs::remove_file(&path);
            return;
        }
    };
    let mut rd = dev.reader();
    for round in 0..2 {
        if round == 0 {
            evict(&path);
        }
        read_and_compare(rd.as_mut());
    }
    // Read ahead (a whole range, a range past the end, overlapping
    // ranges), then read parts of it, whole blocks and odd pieces.
    dev.prefetch(64 << 10, 1 << 20);
    dev.prefetch(SIZE as u64 - 8192, 1 << 20);
    dev.prefetch(100 << 10, 8192);
    for (off, len) in [
        (64usize << 10, 4096usize),
        (68 << 10, 100),
        (70 << 10, 8192),
        ((64 << 10) + (1 << 20) - 4096, 4096),
        (SIZE - 8192, 8192),
        (SIZE - 4096, 4096),
    ] {
        let mut b = vec![0u8; len];
        rd.read_at(&mut b, off as u64).expect("read ahead");
        assert!(
            b.iter().enumerate().all(|(i, &x)| x == pattern(off + i)),
            "bytes at {off}+{len}"
        );
    }
    let mut b = vec![0u8; 4096];
    assert!(rd.read_at(&mut b, SIZE as u64 - 2048).is_err());
    let mut b = vec![0u8; 100];
    dev.read_at(&mut b, 5000).expect("one-off read");
    assert!(b.iter().enumerate().all(|(i, &x)| x == pattern(5000 + i)));
    drop(rd);
    drop(dev);
    let _ = std::fs::remove_file(&path);
}

fn read_and_compare(rd: &mut dyn pipeline::Reader) {
    // One read.
    let mut b = vec![0u8; 4096];
    rd.read_at(&mut b, 8192).expect("read");
    assert!(b.iter().enumerate().all(|(i, &x)| x == pattern(8192 + i)));
    // A batch in scattered order, with one request past the end and one
    // straddling it; 600 requests is more than one ring's worth.
    let offsets: Vec<u64> = (0..600u64)
        .map(|i| (i * 7919 % 1000) * 4096)
        .chain([SIZE as u64 + 4096, SIZE as u64 - 2048])
        .collect();
    let mut bufs = vec![0u8; offsets.len() * 4096];
    let mut reqs: Vec<ReadReq<'_>> = bufs
        .chunks_mut(4096)
        .zip(&offsets)
        .map(|(c, &o)| ReadReq::new(o, c))
        .collect();
    let mut seen = vec![0u32; offsets.len()];
    rd.read_batch_with(&mut reqs, &mut |i, r| {
        seen[i] += 1;
        let o = offsets[i] as usize;
        if o + 4096 <= SIZE {
            assert!(r.result.is_ok(), "read at {o}: {:?}", r.result);
            assert!(r.buf.iter().enumerate().all(|(k, &x)| x == pattern(o + k)));
        } else {
            assert!(r.result.is_err(), "read at {o} past the end succeeded");
        }
    });
    assert!(
        seen.iter().all(|&n| n == 1),
        "each request is reported once"
    );
}

#[test]
fn pread_path_reads_the_right_bytes() {
    check_mode(IoMode::Pread, "pread");
}

#[test]
fn direct_path_reads_the_right_bytes() {
    let dir = std::env::temp_dir();
    check_in(&dir, IoMode::Pread, "direct-pread", true);
    check_in(&dir, IoMode::Uring, "direct-uring", true);
}

#[test]
fn uring_path_reads_the_right_bytes() {
    check_mode(IoMode::Uring, "uring");
}

/// tmpfs refuses RWF_NOWAIT on some kernels (EOPNOTSUPP): the io_uring
/// path must fall back per request instead of failing the reads.
#[test]
fn both_paths_read_images_on_tmpfs() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipping: no /dev/shm on this machine");
        return;
    }
    check_mode_in(shm, IoMode::Pread, "shm-pread");
    check_mode_in(shm, IoMode::Uring, "shm-uring");
    check_mode_in(shm, IoMode::Auto, "shm-auto");
    // tmpfs takes O_DIRECT from Linux 6.6 on; before, it is refused at
    // open and the reads stay buffered.
    check_in(shm, IoMode::Auto, "shm-direct", true);
}
