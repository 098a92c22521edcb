//! `ext4chk`: check (and repair) an ext2/3/4 file system. Installed as
//! `fsck.ext4` (or `e2fsck`), it stands in for e2fsck.

mod cli;
mod doc;
mod error;
mod extended;
mod json;
mod output;
mod progress;
mod run;

use std::io::Write;
use std::process::ExitCode;

use check_core::report::exit;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = match cli::parse(&argv) {
        Ok(inv) => run::run(&inv),
        Err(early) => {
            print!("{}", early.stdout);
            eprint!("{}", early.stderr);
            early.code
        }
    };
    let _ = std::io::stdout().flush();
    ExitCode::from(u8::try_from(code).unwrap_or(exit::OPERATIONAL as u8))
}
