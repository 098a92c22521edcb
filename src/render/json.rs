//! The JSON report: serde types whose shape `docs/report.schema.json`
//! describes (and `tests/report_schema.rs` holds them to). Fields are in
//! alphabetical order, as they appear in the output.

use check_core::problem::{Finding, Severity};
use check_core::{Report, Summary};
use serde::Serialize;

/// The version of the document's shape (`docs/report.schema.json`).
pub const SCHEMA_VERSION: u32 = 4;

/// The whole document.
#[derive(Serialize)]
struct JsonReport<'a> {
    aborted: Option<&'a str>,
    cancelled: bool,
    clean: bool,
    device: &'a str,
    dry_run: bool,
    error: Option<&'a str>,
    exit_code: i32,
    findings: Vec<JsonFinding<'a>>,
    label: &'a str,
    modified: bool,
    notes: &'a [String],
    online: Option<JsonOnline<'a>>,
    preen_halt: Option<&'a str>,
    repair: Option<JsonRepair<'a>>,
    skipped: bool,
    summary: Option<JsonSummary>,
    version: u32,
    would_write_blocks: Option<u64>,
}

/// How a repair went.
#[derive(Serialize)]
struct JsonRepair<'a> {
    check_seconds: Vec<f64>,
    checks: Vec<JsonCheck>,
    journal_blocks_replayed: u64,
    journal_transactions_replayed: u64,
    orphans_released: u64,
    rounds: Vec<JsonRound<'a>>,
}

/// One check of a repair.
#[derive(Serialize)]
struct JsonCheck {
    blocks_read: u64,
    kind: &'static str,
    seconds: f64,
}

/// How an online check went.
#[derive(Serialize)]
struct JsonOnline<'a> {
    confirmed: usize,
    dropped: &'a [String],
    freeze_longest_ms: f64,
    freeze_total_ms: f64,
    freezes: usize,
    from_journal: bool,
    frozen_bytes: u64,
    mount_point: &'a str,
}

/// One round of a repair.
#[derive(Serialize)]
struct JsonRound<'a> {
    blocks_written: u64,
    fixed: u64,
    fixed_during_check: u64,
    plan_seconds: f64,
    stopped_early: Option<&'a str>,
    write_seconds: f64,
}

/// One finding; absent fields are left out. The numbers are named for
/// what they hold, as the finding's shape names them.
#[derive(Serialize)]
struct JsonFinding<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    bad_sectors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block2: Option<u64>,
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dir: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dir_path: Option<&'a str>,
    e2fsck_code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<u64>,
    fixed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    found: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ino: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ino2: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ino_path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    level: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logical: Option<u64>,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    pass: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sectors: Option<u64>,
    severity: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    shared_blocks: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sharing_files: Option<u64>,
}

/// The counts of the summary line and of `-v`.
#[derive(Serialize)]
struct JsonSummary {
    blockdev: u64,
    blocks_count: u64,
    blocks_used: u64,
    chardev: u64,
    directories: u64,
    fast_symlinks: u64,
    fifos: u64,
    inodes_count: u64,
    inodes_used: u64,
    links: u64,
    non_contiguous: u64,
    regular: u64,
    sockets: u64,
    symlinks: u64,
}

impl<'a> JsonFinding<'a> {
    fn new(f: &'a Finding) -> Self {
        let n = f.numbers;
        JsonFinding {
            bad_sectors: n.bad_sectors(),
            block: f.blk,
            block2: f.blk2,
            code: f.code.name(),
            detail: f.detail.as_deref(),
            dir: f.dir,
            dir_path: f.dir_path.as_deref(),
            e2fsck_code: format!("0x{:06x}", f.code.e2fsck_code()),
            expected: n.expected(),
            fixed: f.fixed,
            found: n.found(),
            group: f.group,
            ino: f.ino,
            ino2: f.ino2,
            ino_path: f.ino_path.as_deref(),
            length: n.length(),
            level: n.level(),
            limit: n.limit(),
            logical: n.logical(),
            message: f.message(),
            name: f.name.as_deref().map(String::from_utf8_lossy),
            offset: n.offset(),
            pass: f.code.pass().name(),
            sectors: n.sectors(),
            severity: match f.code.severity() {
                Severity::Error => "error",
                Severity::Notice => "notice",
            },
            shared_blocks: n.shared_blocks(),
            sharing_files: n.sharing_files(),
        }
    }
}

impl JsonSummary {
    fn new(s: &Summary) -> Self {
        JsonSummary {
            blockdev: s.blockdev,
            blocks_count: s.blocks_count,
            blocks_used: s.blocks_used,
            chardev: s.chardev,
            directories: s.directories,
            fast_symlinks: s.fast_symlinks,
            fifos: s.fifos,
            inodes_count: s.inodes_count,
            inodes_used: s.inodes_used,
            links: s.links,
            non_contiguous: s.non_contiguous,
            regular: s.regular,
            sockets: s.sockets,
            symlinks: s.symlinks,
        }
    }
}

/// The JSON document for `report`, pretty-printed, with a final newline.
pub fn render(report: &Report) -> String {
    let exit_code = report.exit_code();
    let doc = JsonReport {
        aborted: report.aborted.as_deref(),
        cancelled: report.cancelled,
        clean: exit_code == 0,
        device: &report.device,
        dry_run: report.dry_run.is_some(),
        error: None,
        exit_code,
        findings: report.findings.iter().map(JsonFinding::new).collect(),
        label: match &report.skipped {
            Some(s) if report.label.is_empty() => &s.label,
            _ => &report.label,
        },
        // A dry run writes nothing, whatever it would have changed.
        modified: report.modified && report.dry_run.is_none(),
        notes: &report.notes,
        online: report.online.as_ref().map(|o| JsonOnline {
            confirmed: o.confirmed,
            dropped: &o.dropped,
            freeze_longest_ms: o.freezes.iter().copied().fold(0.0, f64::max) * 1000.0,
            // Summed from +0.0: an empty sum of floats is -0.0.
            freeze_total_ms: o.freezes.iter().fold(0.0, |a, b| a + b) * 1000.0,
            freezes: o.freezes.len(),
            from_journal: o.from_journal,
            frozen_bytes: o.frozen_bytes,
            mount_point: &o.mount_point,
        }),
        preen_halt: report.preen_halt.as_deref(),
        repair: report.repair.as_ref().map(|r| JsonRepair {
            check_seconds: r.checks.iter().map(|c| c.seconds).collect(),
            checks: r
                .checks
                .iter()
                .map(|c| JsonCheck {
                    blocks_read: c.blocks_read,
                    kind: c.kind.name(),
                    seconds: c.seconds,
                })
                .collect(),
            journal_blocks_replayed: r.journal_blocks_replayed,
            journal_transactions_replayed: r.journal_transactions_replayed,
            orphans_released: r.orphans_released,
            rounds: r
                .rounds
                .iter()
                .map(|x| JsonRound {
                    blocks_written: x.blocks_written,
                    fixed: x.fixed,
                    fixed_during_check: x.fixed_during_check,
                    plan_seconds: x.plan_seconds,
                    stopped_early: x.stopped_early.as_deref(),
                    write_seconds: x.write_seconds,
                })
                .collect(),
        }),
        skipped: report.skipped.is_some(),
        summary: report.summary.as_ref().map(JsonSummary::new),
        version: SCHEMA_VERSION,
        would_write_blocks: report.dry_run,
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// The document of a run that could not start: the command line was
/// wrong, say. Same shape as every report, with `error` set.
pub fn render_error(device: &str, message: &str, exit_code: i32) -> String {
    let doc = JsonReport {
        aborted: Some(message),
        cancelled: false,
        clean: false,
        device,
        dry_run: false,
        error: Some(message),
        exit_code,
        findings: Vec::new(),
        label: "",
        modified: false,
        notes: &[],
        online: None,
        preen_halt: None,
        repair: None,
        skipped: false,
        summary: None,
        version: SCHEMA_VERSION,
        would_write_blocks: None,
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use check_core::problem::Code;

    #[test]
    fn findings_and_exit_code() {
        let mut r = Report::default();
        r.findings
            .push(Finding::new(Code::BadISize).ino(12).mismatch(1, 2));
        let v: serde_json::Value = serde_json::from_str(&render(&r)).expect("json");
        assert_eq!(v["exit_code"], 4);
        assert_eq!(v["clean"], false);
        assert_eq!(v["findings"][0]["code"], "bad-i-size");
        assert_eq!(v["findings"][0]["ino"], 12);
        assert_eq!(v["findings"][0]["found"], 1);
        assert_eq!(v["findings"][0]["expected"], 2);
        assert!(v["findings"][0].get("limit").is_none());
        assert!(
            v["findings"][0].get("block").is_none(),
            "absent fields are left out"
        );
        assert!(v["summary"].is_null());
        assert!(v["aborted"].is_null());
    }
}
