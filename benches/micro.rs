//! Micro-benchmarks of the hot paths: crc32c per block, the pass-1 check
//! of one inode, the pass-2 check of one directory block, and the sharded
//! bitmap's test-and-set alone and under contention.
//!
//! The inode and directory benchmarks run the real passes over an image:
//! `fixtures/demo.img` unless `EXT4CHK_BENCH_IMAGE` names another (the
//! bench images from `benches/make-bench-images.sh` make for steadier
//! figures).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

use check_core::bitmap::AtomicBitmap;
use check_core::fs::{open_fs, Fs, OpenOptions};
use check_core::io::Io;
use check_core::stages::{self as pass2, P2Acc, P2Ctx};
use check_core::stages::{self as pass1, Pass1};
use check_core::Maps;
use pipeline::{open_device, IoMode, Target};

fn image() -> PathBuf {
    std::env::var_os("EXT4CHK_BENCH_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.img"))
}

fn open() -> Fs {
    let dev = open_device(&Target::whole(image()), IoMode::Pread).expect("bench image opens");
    open_fs(
        Arc::new(dev),
        OpenOptions {
            read_only: true,
            superblock: None,
        },
    )
    .unwrap_or_else(|_| panic!("{} is not a usable file system", image().display()))
    .fs
}

fn crc32c_block(c: &mut Criterion) {
    let block: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut g = c.benchmark_group("crc32c");
    g.throughput(Throughput::Bytes(4096));
    g.bench_function("4KiB block", |b| {
        b.iter(|| crc32c::crc32c(black_box(&block)))
    });
    g.finish();
}

fn fresh_maps(fs: &Fs) -> Maps {
    let mut maps = Maps::new(fs);
    let _ = pass1::mark_table_blocks(fs, &mut maps);
    maps
}

fn inode_check(c: &mut Criterion) {
    let fs = open();
    let chunks = pass1::chunks(&fs);
    let inodes: u64 = chunks.iter().map(|c| u64::from(c.count)).sum();
    let mut g = c.benchmark_group("pass1");
    g.throughput(Throughput::Elements(inodes));
    g.bench_function("inode parse and check", |b| {
        b.iter_batched(
            || fresh_maps(&fs),
            |maps| {
                let p1 = Pass1::new(&fs, &maps, &[]);
                let mut io = Io::new(&fs);
                for ch in &chunks {
                    black_box(p1.check_chunk(&mut io, *ch, false));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn dir_block_check(c: &mut Criterion) {
    let fs = open();
    let maps = fresh_maps(&fs);
    let p1 = Pass1::new(&fs, &maps, &[]);
    let mut io = Io::new(&fs);
    let mut work = Vec::new();
    for ch in pass1::chunks(&fs) {
        work.append(&mut p1.check_chunk(&mut io, ch, false).dir_work);
    }
    let mut rd = fs.dev.reader();
    let mut g = c.benchmark_group("pass2");
    g.throughput(Throughput::Elements(work.len() as u64));
    g.bench_function("directory block parse and check", |b| {
        b.iter_batched(
            || (P2Ctx::new(&fs, &maps), work.clone()),
            |(cx, mut batch)| {
                let mut acc = P2Acc::default();
                let mut bufs = Vec::new();
                pass2::check_batch(
                    &cx,
                    &mut io,
                    rd.as_mut(),
                    &mut acc,
                    &mut bufs,
                    &mut batch,
                    true,
                    &mut |_| {},
                );
                black_box(acc);
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn bitmap(c: &mut Criterion) {
    const BITS: u64 = 1 << 22;
    let mut g = c.benchmark_group("bitmap");
    g.throughput(Throughput::Elements(BITS));
    g.bench_function("test_and_set, one thread", |b| {
        b.iter_batched(
            || AtomicBitmap::new(BITS),
            |m| {
                for i in 0..BITS {
                    black_box(m.test_and_set(i.wrapping_mul(0x9E37_79B9) % BITS));
                }
            },
            BatchSize::LargeInput,
        )
    });
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    g.bench_function(format!("test_and_set, {threads} threads contended"), |b| {
        b.iter_batched(
            || AtomicBitmap::new(BITS),
            |m| {
                // The threads set interleaved bits of the same words, so
                // the cache lines bounce between cores.
                std::thread::scope(|s| {
                    for t in 0..threads as u64 {
                        let m = &m;
                        s.spawn(move || {
                            let mut i = t;
                            while i < BITS {
                                black_box(m.test_and_set(i));
                                i += threads as u64;
                            }
                        });
                    }
                });
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, crc32c_block, inode_check, dir_block_check, bitmap);
criterion_main!(benches);
