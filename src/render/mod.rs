//! Every report ext4chk prints goes through here, one file per format:
//! [`text`] (e2fsck's lines, the findings by pass, `-v` and `-t`),
//! [`json`] (one document, described by docs/report.schema.json) and
//! [`junit`] (JUnit XML, for CI systems that show test results).

pub mod json;
pub mod junit;
pub mod mark;
pub mod text;

use check_core::Report;

use crate::cli::{Format, Invocation};

/// The document a machine-read format makes of `report`; `None` for
/// text, which is printed as the run goes (see [`text`]).
pub fn document(format: Format, report: &Report) -> Option<String> {
    match format {
        Format::Text => None,
        Format::Json => Some(json::render(report)),
        Format::Junit => Some(junit::render(report)),
    }
}

/// The document of a run that could not start (a wrong command line, a
/// refused device): the same shape as every report, saying why.
pub fn error_document(
    format: Format,
    device: &str,
    message: &str,
    exit_code: i32,
) -> Option<String> {
    match format {
        Format::Text => None,
        Format::Json => Some(json::render_error(device, message, exit_code)),
        Format::Junit => Some(junit::render_error(device, message, exit_code)),
    }
}

/// Prints the report as the invocation asks.
pub fn print(inv: &Invocation, report: &Report) {
    match document(inv.format, report) {
        Some(doc) => out!("{doc}"),
        None => text::print(inv, report),
    }
}

/// The format a command line asks for, read without the parser (for
/// when the parser refused it): the last `--format` given.
pub fn format_in(argv: &[String]) -> Format {
    let mut f = Format::Text;
    for (i, a) in argv.iter().enumerate() {
        let v = a.strip_prefix("--format=").or_else(|| {
            (a == "--format")
                .then(|| argv.get(i + 1).map(String::as_str))
                .flatten()
        });
        match v {
            Some("json") => f = Format::Json,
            Some("junit") => f = Format::Junit,
            Some("text") => f = Format::Text,
            _ => {}
        }
    }
    f
}
