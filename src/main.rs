//! `ext4chk`: check (and repair) an ext2/3/4 file system.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, ValueEnum};

use check_core::report::exit;
use check_core::CheckOptions;
use pipeline::{open_device, IoMode};

/// Output formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// Findings grouped by pass, then a summary line.
    Text,
    /// One JSON document.
    Json,
}

/// I/O paths.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Io {
    /// io_uring when the kernel allows it, else pread.
    Auto,
    /// io_uring only.
    Uring,
    /// pread only.
    Pread,
}

/// Check an ext2/ext3/ext4 file system, using every core.
#[derive(Parser, Debug)]
#[command(name = "ext4chk", version, about)]
#[command(group = clap::ArgGroup::new("writes").args(["repair", "preen"]).multiple(false))]
struct Cli {
    /// The image file or block device to check.
    device: PathBuf,
    /// Check without changing anything (the default).
    #[arg(short = 'n', long = "read-only")]
    read_only: bool,
    /// Repair every problem found.
    #[arg(short = 'y', long = "repair", conflicts_with_all = ["read_only", "preen"])]
    repair: bool,
    /// Repair only what is safe to repair without asking.
    #[arg(short = 'p', long = "preen", conflicts_with = "read_only")]
    preen: bool,
    /// Check even if the file system seems clean (always done).
    #[arg(short = 'f', long)]
    force: bool,
    /// Worker threads: a number, or "auto" for every core.
    #[arg(long, default_value = "auto")]
    threads: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// I/O path.
    #[arg(long = "io", value_enum, default_value = "auto")]
    io: Io,
    /// Say more about what is being done (on stderr).
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Run the workers at idle priority (SCHED_IDLE), so that anything
    /// else on the machine comes first.
    #[arg(long)]
    nice: bool,
    /// With --repair or --preen: save everything overwritten in FILE, in
    /// the format of e2fsprogs' e2undo.
    #[arg(long, value_name = "FILE", requires = "writes")]
    undo: Option<PathBuf>,
}

/// Parses `--threads`: the count, and whether it is automatic.
fn parse_threads(s: &str) -> Result<(usize, bool), String> {
    if s == "auto" {
        return Ok((
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            true,
        ));
    }
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok((n, false)),
        _ => Err(format!(
            "invalid --threads value '{s}': expected a positive number or 'auto'"
        )),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) {
                0
            } else {
                exit::USAGE
            };
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    let _ = cli.force;
    let (threads, auto_threads) = match parse_threads(&cli.threads) {
        Ok(n) => n,
        Err(msg) => {
            eprintln!("ext4chk: {msg}");
            return ExitCode::from(exit::USAGE as u8);
        }
    };
    let mode = match cli.io {
        Io::Auto => IoMode::Auto,
        Io::Uring => IoMode::Uring,
        Io::Pread => IoMode::Pread,
    };
    let check_opts = CheckOptions {
        threads,
        auto_threads,
        idle_priority: cli.nice,
    };
    if cli.repair || cli.preen {
        let opts = check_core::repair::RepairOptions {
            check: check_opts,
            io: mode,
            mode: if cli.repair {
                check_core::repair::Mode::All
            } else {
                check_core::repair::Mode::Preen
            },
            undo: cli.undo.clone(),
            max_rounds: 16,
        };
        let r = check_core::repair::repair(&cli.device, &opts);
        if cli.verbose {
            eprintln!("ext4chk: {} check-and-fix round(s)", r.rounds);
        }
        return finish(&cli, &r.report);
    }
    if let Some(m) = fixer::safety::mounted(&cli.device)
        .ok()
        .and_then(|m| m.into_iter().next())
    {
        eprintln!(
            "ext4chk: warning: {} is mounted on {}; a check of a mounted file system can report problems that are not there",
            cli.device.display(),
            m.mount_point
        );
    }
    let dev = match open_device(&cli.device, mode) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprintln!("ext4chk: {e}");
            return ExitCode::from(exit::OPERATIONAL as u8);
        }
    };
    if cli.verbose {
        eprintln!(
            "ext4chk: {}: using {} I/O, {threads} thread(s){}{}",
            cli.device.display(),
            dev.io_path(),
            if auto_threads {
                " at most, fewer while the machine is busy"
            } else {
                ""
            },
            if cli.nice { ", idle priority" } else { "" }
        );
    }
    let report = check_core::check(dev, check_opts);
    finish(&cli, &report)
}

/// Prints the report and turns its exit code into the process's.
fn finish(cli: &Cli, report: &check_core::Report) -> ExitCode {
    if cli.verbose {
        for d in &report.diagnostics {
            eprintln!("ext4chk: {d}");
        }
    }
    match cli.format {
        Format::Text => print!("{}", report.to_text()),
        Format::Json => print!("{}", report.to_json()),
    }
    if let Some(why) = report.aborted.as_ref().or(report.preen_halt.as_ref()) {
        eprintln!("ext4chk: {}: {why}", cli.device.display());
    }
    ExitCode::from(report.exit_code() as u8)
}
