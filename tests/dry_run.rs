//! `--dry-run`: on every corpus image that e2fsck's repair leaves clean,
//! a dry run of the repair reports exactly what the real repair of a copy
//! reports (findings, exit code) and leaves the image byte for byte as it
//! was.

mod common;

use common::{code, corpus_image, gunzip, manifest, par_map, Scratch};

/// The parts of a JSON report a dry run must share with the real repair.
fn essence(json: &[u8]) -> Result<(serde_json::Value, serde_json::Value), String> {
    let v: serde_json::Value = serde_json::from_slice(json).map_err(|e| format!("{e}"))?;
    Ok((v["exit_code"].clone(), v["findings"].clone()))
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn a_dry_run_reports_the_repair_and_writes_nothing() {
    let Some(rows) = manifest() else {
        return;
    };
    let rows: Vec<_> = rows.into_iter().filter(|r| r.fn_after_fy == "0").collect();
    let scratch = Scratch::new("dry-run");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .to_string();
    let results = par_map(&rows, |r| {
        let gz = corpus_image(&r.test);
        let img = scratch.path(&format!("{}.img", r.test));
        let copy = scratch.path(&format!("{}.copy.img", r.test));
        gunzip(&gz, &img);
        gunzip(&gz, &copy);
        let before = std::fs::read(&img).expect("image");
        let path = img.to_str().expect("path");
        // One clock for both: a fix that stamps the time (a deletion
        // time, an inode's change time) must write the same bytes in
        // each, or what a later check reads from them differs (the
        // f_itable_collision image reads an extent from an inode-table
        // block that holds such a time).
        let at_one_time = |args: &[&str]| {
            std::process::Command::new(common::bin())
                .args(args)
                .env("E2FSCK_TIME", &now)
                .output()
                .expect("ext4chk runs")
        };
        let dry = at_one_time(&["-y", "--dry-run", "--format", "json", path]);
        let real = at_one_time(&["-y", "--format", "json", copy.to_str().expect("path")]);
        let mut problems = Vec::new();
        if std::fs::read(&img).expect("image") != before {
            problems.push("the dry run changed the image".to_string());
        }
        if code(&dry) != code(&real) {
            problems.push(format!(
                "the dry run exits {}, the repair {}",
                code(&dry),
                code(&real)
            ));
        }
        match (essence(&dry.stdout), essence(&real.stdout)) {
            (Ok(d), Ok(w)) => {
                if d.1 != w.1 {
                    problems.push(format!(
                        "findings differ:\n  dry run: {}\n  repair:  {}",
                        d.1, w.1
                    ));
                }
            }
            (d, w) => problems.push(format!("unreadable JSON: {:?} / {:?}", d.err(), w.err())),
        }
        let dry_doc: serde_json::Value =
            serde_json::from_slice(&dry.stdout).unwrap_or(serde_json::Value::Null);
        let modified = serde_json::from_slice::<serde_json::Value>(&real.stdout)
            .map(|v| v["modified"] == true)
            .unwrap_or(false);
        if dry_doc["dry_run"] != true {
            problems.push("the report does not say it was a dry run".into());
        }
        let blocks = dry_doc["would_write_blocks"].as_u64();
        if modified && blocks.is_none_or(|b| b == 0) {
            problems.push(format!(
                "the repair changed the file system, the dry run says it would write {blocks:?} blocks"
            ));
        }
        let _ = std::fs::remove_file(&img);
        let _ = std::fs::remove_file(&copy);
        (r.test.clone(), problems)
    });
    let failures: Vec<String> = results
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(t, p)| format!("{t}: {}", p.join("; ")))
        .collect();
    assert!(
        results.len() >= 190,
        "only {} corpus images e2fsck repairs",
        results.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} dry runs differ from the repair:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}
