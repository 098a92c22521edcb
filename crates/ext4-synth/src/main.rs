//! `ext4-synth --inodes N [OPTIONS] OUT`: writes a valid, sparse ext4
//! image with at least N inodes in use (see the library's docs).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Writes a valid, sparse ext4 image with at least N inodes in use, for
/// benchmarks: data blocks are allocated but never written.
#[derive(Parser)]
#[command(name = "ext4-synth", version)]
struct Args {
    /// Inodes in use, at least.
    #[arg(long)]
    inodes: u64,
    /// Files in each directory (up to 60000).
    #[arg(long, default_value_t = 100)]
    files_per_dir: u32,
    /// Subdirectories of each directory.
    #[arg(long, default_value_t = 10)]
    dir_fanout: u32,
    /// Data blocks (4 KiB) of each regular file; 0 makes empty files.
    #[arg(long, default_value_t = 1)]
    file_blocks: u32,
    /// Every Nth file is a symbolic link, fast and slow in turn (0: none).
    #[arg(long, default_value_t = 20)]
    symlink_every: u32,
    /// Every Nth regular file also has a second name (0: none).
    #[arg(long, default_value_t = 50)]
    hardlink_every: u32,
    /// Every Nth regular file has an extended attribute (0: none).
    #[arg(long, default_value_t = 10)]
    xattr_every: u32,
    /// Inodes per block group (a multiple of 16, at most 16384).
    #[arg(long, default_value_t = 8192)]
    inodes_per_group: u32,
    /// Seed for the UUID and the directory hash seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The image to write (created or truncated).
    out: PathBuf,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let spec = ext4_synth::Spec {
        inodes: a.inodes,
        files_per_dir: a.files_per_dir,
        dir_fanout: a.dir_fanout,
        file_blocks: a.file_blocks,
        symlink_every: a.symlink_every,
        hardlink_every: a.hardlink_every,
        xattr_every: a.xattr_every,
        inodes_per_group: a.inodes_per_group,
        seed: a.seed,
    };
    let t = std::time::Instant::now();
    match ext4_synth::write_image(&spec, &a.out) {
        Ok(m) => {
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{}: {} inodes in use ({} directories, {} indexed), {} of {} blocks in {} groups; {:.1} MiB written in {:.2} s ({:.0} MiB/s)",
                a.out.display(),
                m.inodes_used,
                m.directories,
                m.indexed_dirs,
                m.blocks_used,
                m.blocks,
                m.groups,
                m.bytes_written as f64 / 1048576.0,
                secs,
                m.bytes_written as f64 / 1048576.0 / secs.max(1e-9)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ext4-synth: {e}");
            ExitCode::from(1)
        }
    }
}
