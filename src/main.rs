//! `ext4chk`: check (and repair) an ext2/3/4 file system. Installed as
//! `fsck.ext4` (or `e2fsck`), it stands in for e2fsck.

#[macro_use]
mod out;

mod ask;
mod cli;
mod conf;
mod doc;
mod error;
mod extended;
mod online;
mod plan;
mod progress;
mod render;
mod run;
mod watch;

use std::process::ExitCode;

use check_core::report::exit;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // The thaw watchdog of an online check (a process of its own).
    if argv.get(1).map(String::as_str) == Some("--online-watchdog") {
        let code = online::watchdog(
            argv.get(2).map_or("", String::as_str),
            argv.get(3).map_or("", String::as_str),
        );
        return ExitCode::from(u8::try_from(code).unwrap_or(8));
    }
    conf::load();
    let code = match cli::parse(&argv) {
        Ok(inv) => match conf::loaded(&inv.prog) {
            Ok(()) => match (&inv.watch, inv.online) {
                (Some(w), _) => watch::run(&inv, w),
                (None, Some(max_freeze_ms)) => online::run(&inv, max_freeze_ms),
                (None, None) => run::run(&inv),
            },
            Err(line) => {
                errln!("{line}");
                if let Some(doc) =
                    render::error_document(inv.format, &inv.device, &line, exit::OPERATIONAL)
                {
                    out!("{doc}");
                }
                exit::OPERATIONAL
            }
        },
        Err(early) => {
            out!("{}", early.stdout);
            err!("{}", early.stderr);
            // A pipeline that asked for JSON (or JUnit) gets a document
            // even when the command line is wrong.
            if early.code != 0 {
                let msg = early.stderr.lines().next().unwrap_or("usage error");
                if let Some(doc) =
                    render::error_document(render::format_in(&argv), "", msg, early.code)
                {
                    out!("{doc}");
                }
            }
            early.code
        }
    };
    out::flush();
    ExitCode::from(u8::try_from(code).unwrap_or(exit::OPERATIONAL as u8))
}
