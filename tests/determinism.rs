//! The report depends on the file system only: text and JSON output are
//! byte-identical with 1, 2 and 8 threads, through either I/O path, on
//! every corpus image and every fixture.

mod common;

use std::path::{Path, PathBuf};

use common::{
    code, corpus_image, fixture_images, gunzip, manifest, par_map, run, Scratch, FIXTURES,
};

/// The I/O paths to try: both when io_uring works here, else pread alone
/// (said on stderr, so a CI log shows it).
fn io_paths() -> Vec<&'static str> {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.img");
    let out = run(&["--io", "uring", demo.to_str().expect("path")]);
    if code(&out) == 0 {
        vec!["pread", "uring"]
    } else {
        eprintln!(
            "io_uring is not available here ({}); checking the pread path only",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        vec!["pread"]
    }
}

/// Runs every configuration on one image; returns the differences found.
fn compare(name: &str, img: &Path, ios: &[&str]) -> Vec<String> {
    let path = img.to_str().expect("utf-8 path");
    let mut problems = Vec::new();
    for format in ["text", "json"] {
        let mut first: Option<(String, Vec<u8>, i32)> = None;
        for (i, threads) in ["1", "2", "8"].iter().enumerate() {
            for (j, io) in ios.iter().enumerate() {
                // Every thread count with every path would be 12 runs per
                // image; rotating the path over the thread counts covers
                // each pairing across the corpus at half the cost.
                if ios.len() > 1 && (i + j) % 2 == 1 && *threads != "8" {
                    continue;
                }
                let out = run(&[
                    "-n",
                    "--threads",
                    threads,
                    "--io",
                    io,
                    "--format",
                    format,
                    path,
                ]);
                let c = code(&out);
                let label = format!("--threads {threads} --io {io} --format {format}");
                match &first {
                    None => first = Some((label, out.stdout, c)),
                    Some((l0, s0, c0)) => {
                        if *s0 != out.stdout || *c0 != c {
                            problems.push(format!(
                                "{name}: `{label}` differs from `{l0}` (exit {c} vs {c0})"
                            ));
                        }
                    }
                }
            }
        }
    }
    problems
}

#[test]
fn reports_do_not_depend_on_threads_or_io_path() {
    let ios = io_paths();
    let scratch = Scratch::new("determinism");
    let mut images: Vec<(String, PathBuf, Option<PathBuf>)> = Vec::new();
    // Without the corpus, the fixtures are still compared.
    let mut corpus = 0;
    for r in manifest().unwrap_or_default() {
        let gz = corpus_image(&r.test);
        if gz.exists() {
            let img = scratch.path(&format!("{}.img", r.test));
            images.push((r.test.clone(), img, Some(gz)));
            corpus += 1;
        }
    }
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/images");
    for entry in std::fs::read_dir(&committed).expect("fixtures/images") {
        let p = entry.expect("entry").path();
        if let Some(n) = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".img.gz"))
        {
            let img = scratch.path(&format!("committed-{n}.img"));
            images.push((format!("committed {n}"), img, Some(p.clone())));
        }
    }
    images.push((
        "demo".into(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.img"),
        None,
    ));
    if let Some(dir) = fixture_images() {
        for f in FIXTURES {
            images.push((format!("fixture {f}"), dir.join(format!("{f}.img")), None));
        }
    } else {
        eprintln!("mke2fs is not installed: the generated fixtures are not covered");
    }
    assert!(
        corpus == 0 || corpus > 180,
        "found only {corpus} corpus images"
    );
    assert!(images.len() >= 10, "found only {} images", images.len());
    let results = par_map(&images, |(name, img, gz)| {
        if let Some(gz) = gz {
            gunzip(gz, img);
        }
        let p = compare(name, img, &ios);
        if gz.is_some() {
            let _ = std::fs::remove_file(img);
        }
        p
    });
    let problems: Vec<String> = results.into_iter().flatten().collect();
    assert!(
        problems.is_empty(),
        "{} reports changed with the thread count or I/O path:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
