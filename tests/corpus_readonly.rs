//! The e2fsprogs regression corpus, read-only: ext4chk must reach the same
//! verdict as `e2fsck -fn` (clean or not), never crash, and never change a
//! byte of the image.

mod common;

use common::{code, corpus_image, gunzip, known_list, manifest, par_map, run, Row, Scratch};

/// Rows whose oracle is not a verdict: e2fsck crashed, hung, or upstream
/// checks the image with other options.
fn excluded(r: &Row) -> Option<&'static str> {
    if r.notes.contains("crashes") {
        Some("e2fsck 1.47.0 crashes on it")
    } else if r.fn_exit == "timeout" || r.notes.contains("never finishes") {
        Some("e2fsck 1.47.0 never finishes")
    } else if r.special_opts != "-" {
        Some("upstream checks it with special options")
    } else {
        None
    }
}

struct Outcome {
    test: String,
    expected: String,
    got: i32,
    unchanged: bool,
    excluded: Option<&'static str>,
}

/// Where the images are put for the check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The target directory (the build machine's disk).
    Disk,
    /// /dev/shm, as CI pipelines and container builds keep images.
    Tmpfs,
    /// A loop device over the image file.
    Loop,
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn corpus_read_only_verdicts_match_e2fsck() {
    check_corpus(Place::Disk, "auto");
}

/// The direct path (O_DIRECT and its own read-ahead) on image files;
/// the loop-device test below takes it by default.
#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn corpus_read_only_with_direct_io() {
    check_corpus_with(Place::Disk, "auto", &["--direct-io", "on"]);
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn corpus_on_tmpfs_through_io_uring() {
    check_corpus(Place::Tmpfs, "uring");
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn corpus_on_tmpfs_through_pread() {
    check_corpus(Place::Tmpfs, "pread");
}

#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn corpus_through_loop_devices() {
    check_corpus(Place::Loop, "auto");
}

/// A scratch directory on tmpfs, removed on drop.
struct ShmDir(std::path::PathBuf);

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Attaches a loop device to `img`; `None` when this machine cannot.
fn losetup(img: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new(common::find_tool("losetup")?)
        .args(["-f", "--show", "-r"])
        .arg(img)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn losetup_detach(dev: &str) {
    if let Some(l) = common::find_tool("losetup") {
        let _ = std::process::Command::new(l).args(["-d", dev]).output();
    }
}

fn check_corpus(place: Place, io: &str) {
    check_corpus_with(place, io, &[]);
}

fn check_corpus_with(place: Place, io: &str, extra: &[&str]) {
    let Some(rows) = manifest() else {
        return;
    };
    if place == Place::Tmpfs && !std::path::Path::new("/dev/shm").is_dir() {
        eprintln!("skipping: no /dev/shm on this machine");
        return;
    }
    if io == "uring" {
        let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.img");
        let probe = run(&["-n", "--io", "uring", demo.to_str().expect("path")]);
        if String::from_utf8_lossy(&probe.stderr).contains("io_uring is not available") {
            eprintln!("skipping: io_uring is not available here");
            return;
        }
    }
    if place == Place::Loop {
        let scratch = Scratch::new("loop-probe");
        let probe = scratch.path("probe.img");
        std::fs::write(&probe, vec![0u8; 1 << 20]).expect("write");
        match losetup(&probe) {
            Some(d) => losetup_detach(&d),
            None => {
                eprintln!("skipping: loop devices cannot be attached here (needs root and /dev/loop-control)");
                return;
            }
        }
    }
    assert!(
        rows.len() > 200,
        "the corpus should have about 209 images, found {}",
        rows.len()
    );
    let scratch = Scratch::new("corpus-ro");
    let shm = (place == Place::Tmpfs).then(|| {
        let d = std::path::Path::new("/dev/shm")
            .join(format!("ext4chk-corpus-{}-{io}", std::process::id()));
        std::fs::create_dir_all(&d).expect("tmpfs directory");
        ShmDir(d)
    });
    let dir = shm.as_ref().map_or(scratch.0.clone(), |d| d.0.clone());
    let outcomes = par_map(&rows, |r| {
        let img = dir.join(format!("{}.img", r.test));
        gunzip(&corpus_image(&r.test), &img);
        let before = std::fs::read(&img).expect("image");
        let loopdev = if place == Place::Loop {
            losetup(&img)
        } else {
            None
        };
        let target = loopdev
            .clone()
            .unwrap_or_else(|| img.to_str().expect("utf-8 path").to_string());
        let mut args = vec!["-n", "--io", io];
        args.extend_from_slice(extra);
        args.push(&target);
        let out = run(&args);
        if let Some(d) = &loopdev {
            losetup_detach(d);
        }
        let after = std::fs::read(&img).expect("image");
        let _ = std::fs::remove_file(&img);
        Outcome {
            test: r.test.clone(),
            expected: r.fn_exit.clone(),
            got: code(&out),
            unchanged: before == after,
            excluded: excluded(r),
        }
    });
    let known = known_list("corpus-readonly.txt");
    let mut agree = 0;
    let mut total = 0;
    let mut problems = Vec::new();
    for o in &outcomes {
        // Every run ends with one of e2fsck's exit codes: no panic, no signal.
        if ![0, 4, 8, 12].contains(&o.got) {
            problems.push(format!("{}: crashed or bad exit code {}", o.test, o.got));
        }
        if !o.unchanged {
            problems.push(format!("{}: the read-only check changed the image", o.test));
        }
        if o.expected == "timeout" && o.got == 0 {
            problems.push(format!(
                "{}: e2fsck never finishes here; ext4chk must report errors",
                o.test
            ));
        }
        if o.excluded.is_some() {
            continue;
        }
        total += 1;
        let same = (o.expected == "0") == (o.got == 0);
        let listed = known.contains(&o.test);
        match (same, listed) {
            (true, false) => agree += 1,
            (true, true) => problems.push(format!(
                "{}: now agrees with e2fsck; remove it from tests/known/corpus-readonly.txt",
                o.test
            )),
            (false, true) => {}
            (false, false) => problems.push(format!(
                "{}: e2fsck -fn exits {}, ext4chk -n exits {}",
                o.test, o.expected, o.got
            )),
        }
    }
    eprintln!(
        "corpus read-only agreement ({place:?}, --io {io} {}): {agree}/{total} (excluded {})",
        extra.join(" "),
        outcomes.len() - total
    );
    assert!(
        problems.is_empty(),
        "corpus problems:\n{}",
        problems.join("\n")
    );
    assert!(
        agree * 100 >= total * 95,
        "agreement {agree}/{total} is below 95%"
    );
}

/// In CI (`EXT4CHK_REQUIRE_ALL`), a missing corpus is a failure, not a
/// list of ignored tests.
#[test]
fn the_corpus_is_there_when_it_is_required() {
    if std::env::var_os("EXT4CHK_REQUIRE_ALL").is_some() {
        assert!(
            cfg!(ext4chk_corpus) && common::manifest().is_some(),
            "EXT4CHK_REQUIRE_ALL is set and the e2fsprogs corpus is not at {}",
            common::corpus_dir().display()
        );
    }
}
