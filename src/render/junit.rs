//! The report as JUnit XML, the format CI systems show as test results:
//! one test suite for the file system, one test case per pass (failed
//! when it left an error unfixed, with each finding in the failure), and
//! an error when the check could not run to its end.

use std::fmt::Write;

use check_core::problem::Finding;
use check_core::Report;

/// Escapes text for an XML attribute or element.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => o.push(c),
        }
    }
    o
}

/// One finding on one line: what happened to it, the message, the code.
fn line(f: &Finding, dry_run: bool) -> String {
    format!(
        "{}: {} [{}]",
        super::mark::mark(f, dry_run),
        f.message(),
        f.code.name()
    )
}

/// The JUnit document for `report`.
pub fn render(r: &Report) -> String {
    let exit = r.exit_code();
    let mut cases = String::new();
    let (mut tests, mut failures, mut errors, mut skipped) = (0, 0, 0, 0);
    let suite_name = esc(&r.device);
    if r.skipped.is_some() {
        tests += 1;
        skipped += 1;
        let _ = writeln!(
            cases,
            "    <testcase classname=\"ext4chk\" name=\"check\">\n      <skipped message=\"clean, and no check is due\"/>\n    </testcase>"
        );
    } else {
        for p in super::mark::PASSES {
            let mine: Vec<&Finding> = r.findings.iter().filter(|f| f.code.pass() == p).collect();
            tests += 1;
            let left: Vec<&&Finding> = mine
                .iter()
                .filter(|f| !f.fixed && f.code.counts_as_error())
                .collect();
            let _ = write!(
                cases,
                "    <testcase classname=\"ext4chk.{}\" name=\"{}\"",
                p.name(),
                esc(p.heading())
            );
            if mine.is_empty() {
                cases.push_str("/>\n");
                continue;
            }
            cases.push_str(">\n");
            if !left.is_empty() {
                failures += 1;
                let _ = writeln!(
                    cases,
                    "      <failure message=\"{} error{} left\" type=\"{}\">{}</failure>",
                    left.len(),
                    if left.len() == 1 { "" } else { "s" },
                    esc(left[0].code.name()),
                    esc(&left
                        .iter()
                        .map(|f| line(f, r.dry_run.is_some()))
                        .collect::<Vec<_>>()
                        .join("\n"))
                );
            }
            let _ = writeln!(
                cases,
                "      <system-out>{}</system-out>\n    </testcase>",
                esc(&mine
                    .iter()
                    .map(|f| line(f, r.dry_run.is_some()))
                    .collect::<Vec<_>>()
                    .join("\n"))
            );
        }
        if let Some(why) = &r.aborted {
            tests += 1;
            errors += 1;
            let _ = writeln!(
                cases,
                "    <testcase classname=\"ext4chk\" name=\"check\">\n      <error message=\"{}\" type=\"stopped\"/>\n    </testcase>",
                esc(why)
            );
        }
        if r.cancelled {
            tests += 1;
            errors += 1;
            let _ = writeln!(
                cases,
                "    <testcase classname=\"ext4chk\" name=\"check\">\n      <error message=\"interrupted: the rest of the file system was not checked\" type=\"cancelled\"/>\n    </testcase>"
            );
        }
    }
    let mut props = format!(
        "      <property name=\"exit_code\" value=\"{exit}\"/>\n      <property name=\"modified\" value=\"{}\"/>\n      <property name=\"dry_run\" value=\"{}\"/>\n",
        r.modified && r.dry_run.is_none(),
        r.dry_run.is_some()
    );
    if !r.label.is_empty() {
        let _ = writeln!(
            props,
            "      <property name=\"label\" value=\"{}\"/>",
            esc(&r.label)
        );
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ext4chk\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n  <testsuite name=\"{suite_name}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n    <properties>\n{props}    </properties>\n{cases}  </testsuite>\n</testsuites>\n"
    )
}

/// The document of a run that could not start.
pub fn render_error(device: &str, message: &str, exit_code: i32) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ext4chk\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">\n  <testsuite name=\"{}\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">\n    <properties>\n      <property name=\"exit_code\" value=\"{exit_code}\"/>\n    </properties>\n    <testcase classname=\"ext4chk\" name=\"check\">\n      <error message=\"{}\" type=\"not started\"/>\n    </testcase>\n  </testsuite>\n</testsuites>\n",
        esc(device),
        esc(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use check_core::problem::Code;

    #[test]
    fn a_finding_left_fails_its_pass_and_text_is_escaped() {
        let r = Report {
            device: "a<b>&.img".into(),
            findings: vec![Finding::new(Code::BadISize).ino(12).mismatch(10, 5), {
                let mut f = Finding::new(Code::BadISize).ino(13).mismatch(1, 2);
                f.fixed = true;
                f
            }],
            ..Default::default()
        };
        let x = render(&r);
        assert!(x.contains("name=\"a&lt;b&gt;&amp;.img\""), "{x}");
        assert!(x.contains("tests=\"7\" failures=\"1\" errors=\"0\""), "{x}");
        assert!(x.contains("<failure message=\"1 error left\""), "{x}");
        assert_eq!(x.matches("<testcase").count(), 7);
        assert!(!x.contains("<error"), "{x}");
    }

    #[test]
    fn a_stopped_check_is_an_error_and_a_skipped_one_is_skipped() {
        let r = Report {
            device: "x".into(),
            aborted: Some("cannot read \"it\"".into()),
            ..Default::default()
        };
        let x = render(&r);
        assert!(x.contains("errors=\"1\""), "{x}");
        assert!(x.contains("&quot;it&quot;"), "{x}");
        let s = Report {
            device: "x".into(),
            skipped: Some(Default::default()),
            ..Default::default()
        };
        assert!(render(&s).contains("<skipped"), "{}", render(&s));
        assert!(render_error("x", "bad option", 16).contains("value=\"16\""));
    }
}
