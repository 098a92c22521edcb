//! The JSON report matches `docs/report.schema.json`: every read-only
//! check, repair and dry run of the corpus, a skipped file system and a
//! device that cannot be opened. The schema is checked by a small
//! validator of the JSON Schema keywords it uses (and the test fails if
//! the schema uses any other).

mod common;

use common::{code, corpus_image, gunzip, manifest, par_map, run, Scratch};
use serde_json::Value;

/// Keywords the validator knows: checks, and annotations it skips.
const KNOWN: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "$ref",
    "title",
    "description",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "oneOf",
];

fn schema() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report.schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("schema")).expect("schema is JSON")
}

/// Every keyword of `s` (a schema or subschema) is one the validator knows.
fn keywords_known(s: &Value, at: &str, bad: &mut Vec<String>) {
    let Some(obj) = s.as_object() else { return };
    for (k, v) in obj {
        if !KNOWN.contains(&k.as_str()) {
            bad.push(format!("{at}/{k}"));
        }
        match k.as_str() {
            "properties" | "$defs" => {
                for (name, sub) in v.as_object().into_iter().flatten() {
                    keywords_known(sub, &format!("{at}/{k}/{name}"), bad);
                }
            }
            "items" => keywords_known(v, &format!("{at}/items"), bad),
            "oneOf" => {
                for (i, sub) in v.as_array().into_iter().flatten().enumerate() {
                    keywords_known(sub, &format!("{at}/oneOf/{i}"), bad);
                }
            }
            _ => {}
        }
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

/// The first way `v` breaks schema `s` (`root` resolves `$ref`), if any.
fn validate(root: &Value, s: &Value, v: &Value, at: &str) -> Option<String> {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r
            .strip_prefix("#/$defs/")
            .expect("only local $defs references");
        return validate(root, &root["$defs"][name], v, at);
    }
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)),
            _ => false,
        };
        if !ok {
            return Some(format!("{at}: {v} is not of type {t}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Some(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let Some(n) = v.as_f64() {
        if s.get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            return Some(format!("{at}: {n} is below the minimum"));
        }
        if s.get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            return Some(format!("{at}: {n} is above the maximum"));
        }
    }
    if let Some(t) = v.as_str() {
        let n = t.chars().count() as u64;
        if s.get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
        {
            return Some(format!("{at}: {t:?} is too short"));
        }
        if s.get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n > m)
        {
            return Some(format!("{at}: {t:?} is too long"));
        }
    }
    if let Some(alts) = s.get("oneOf").and_then(Value::as_array) {
        let matching = alts
            .iter()
            .filter(|a| validate(root, a, v, at).is_none())
            .count();
        if matching != 1 {
            return Some(format!("{at}: {matching} of oneOf's schemas match"));
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            if let Some(e) = validate(root, items, x, &format!("{at}/{i}")) {
                return Some(e);
            }
        }
    }
    if let Some(obj) = v.as_object() {
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().expect("required names");
            if !obj.contains_key(r) {
                return Some(format!("{at}: {r} is missing"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => {
                    if let Some(e) = validate(root, sub, x, &format!("{at}/{k}")) {
                        return Some(e);
                    }
                }
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Some(format!("{at}: {k} is not allowed"));
                }
                None => {}
            }
        }
    }
    None
}

fn check(root: &Value, what: &str, out: &std::process::Output) -> Option<String> {
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: Value = match serde_json::from_str(&text) {
        Ok(d) => d,
        Err(e) => return Some(format!("{what}: not JSON ({e}): {text}")),
    };
    if doc["exit_code"] != code(out) {
        return Some(format!(
            "{what}: exit_code {} but the process exited {}",
            doc["exit_code"],
            code(out)
        ));
    }
    validate(root, root, &doc, "").map(|e| format!("{what}: {e}"))
}

#[test]
fn the_schema_uses_only_keywords_the_validator_checks() {
    let s = schema();
    let mut bad = Vec::new();
    keywords_known(&s, "", &mut bad);
    assert!(bad.is_empty(), "unknown keywords: {bad:?}");
}

#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let s = schema();
    let good = serde_json::json!({
        "aborted": null, "cancelled": false, "clean": true, "device": "x", "dry_run": false, "error": null,
        "exit_code": 0, "findings": [], "label": "", "modified": false, "notes": [],
        "online": null, "preen_halt": null, "repair": null, "skipped": false, "summary": null, "version": 4,
        "would_write_blocks": null
    });
    assert_eq!(validate(&s, &s, &good, ""), None);
    let finding = serde_json::json!({
        "code": "bad-i-size", "e2fsck_code": "0x010022", "fixed": false,
        "message": "m", "pass": "1", "severity": "error", "ino": 12
    });
    let mut ok = good.clone();
    ok["findings"] = serde_json::json!([finding]);
    assert_eq!(validate(&s, &s, &ok, ""), None);
    let breaks: Vec<(&str, Value)> = vec![
        ("extra field", {
            let mut d = good.clone();
            d["surprise"] = Value::Bool(true);
            d
        }),
        ("missing field", {
            let mut d = good.clone();
            d.as_object_mut().expect("object").remove("device");
            d
        }),
        ("wrong type", {
            let mut d = good.clone();
            d["exit_code"] = Value::String("0".into());
            d
        }),
        ("bad pass", {
            let mut d = ok.clone();
            d["findings"][0]["pass"] = Value::String("6".into());
            d
        }),
        ("negative inode", {
            let mut d = ok.clone();
            d["findings"][0]["ino"] = serde_json::json!(-1);
            d
        }),
        ("summary of the wrong shape", {
            let mut d = good.clone();
            d["summary"] = serde_json::json!({"inodes_used": 1});
            d
        }),
    ];
    for (what, d) in breaks {
        assert!(validate(&s, &s, &d, "").is_some(), "{what} passed");
    }
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn every_json_report_of_the_corpus_matches_the_schema() {
    let Some(rows) = manifest() else {
        return;
    };
    let root = schema();
    let scratch = Scratch::new("report-schema");
    let problems: Vec<String> = par_map(&rows, |r| {
        let img = scratch.path(&format!("{}.img", r.test));
        let img_s = img.to_str().expect("utf-8 path");
        gunzip(&corpus_image(&r.test), &img);
        let mut p = Vec::new();
        let ro = run(&["-fn", "--format", "json", img_s]);
        p.extend(check(&root, &format!("{} -n", r.test), &ro));
        let dry = run(&["-fy", "--dry-run", "--format", "json", img_s]);
        p.extend(check(&root, &format!("{} --dry-run", r.test), &dry));
        let fix = run(&["-fy", "--format", "json", img_s]);
        p.extend(check(&root, &format!("{} -y", r.test), &fix));
        // Without -f a clean file system is skipped: its report too.
        let skip = run(&["-p", "--format", "json", img_s]);
        p.extend(check(&root, &format!("{} -p", r.test), &skip));
        let _ = std::fs::remove_file(&img);
        p
    })
    .into_iter()
    .flatten()
    .collect();
    let missing = run(&["-n", "--format", "json", "/nonexistent/ext4chk-image"]);
    let problems: Vec<String> = problems
        .into_iter()
        .chain(check(&root, "a missing image", &missing))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
