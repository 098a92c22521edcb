//! e2fsck.conf and the environment e2fsck reads: each option is given to
//! the real e2fsck and to ext4chk (as `fsck.ext4`) with the same file, on
//! copies of the same image, and the two must agree on the exit code and
//! on what they leave on disk.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{code, find_tool, have_all, mke2fs, Scratch};

/// A fixed "now" (2026-01-01 00:00 UTC) for both tools.
const NOW: u64 = 1_767_225_600;

/// Runs `prog args` with `conf` as E2FSCK_CONFIG and the fixed clock.
fn with_conf(prog: &Path, conf: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(prog);
    c.args(args)
        .env("LC_ALL", "C")
        .env("TZ", "GMT0")
        .env("E2FSCK_CONFIG", conf)
        .env("E2FSCK_TIME", NOW.to_string())
        .env_remove("E2FSCK_FIXES_ONLY")
        .env_remove("E2FSPROGS_UNDO_DIR")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs")
}

struct Tools {
    ours: PathBuf,
    theirs: PathBuf,
    scratch: Scratch,
}

impl Tools {
    fn new(tag: &str) -> Option<Tools> {
        if !have_all(&["mke2fs", "debugfs", "e2fsck", "dumpe2fs"]) {
            return None;
        }
        let scratch = Scratch::new(tag);
        let ours = scratch.path("fsck.ext4");
        std::os::unix::fs::symlink(common::bin(), &ours).expect("symlink");
        Some(Tools {
            ours,
            theirs: find_tool("e2fsck").expect("e2fsck"),
            scratch,
        })
    }

    fn conf(&self, name: &str, text: &str) -> PathBuf {
        let p = self.scratch.path(name);
        std::fs::write(&p, text).expect("conf");
        p
    }

    /// Runs both tools on copies of `img`; returns (ours, theirs, our
    /// copy, their copy).
    fn both(
        &self,
        img: &Path,
        conf: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, Output, PathBuf, PathBuf) {
        let stem = img.file_stem().and_then(|s| s.to_str()).unwrap_or("img");
        let a = self.scratch.path(&format!("{stem}-ours.img"));
        let b = self.scratch.path(&format!("{stem}-theirs.img"));
        std::fs::copy(img, &a).expect("copy");
        std::fs::copy(img, &b).expect("copy");
        let mut aa: Vec<&str> = args.to_vec();
        aa.push(a.to_str().expect("path"));
        let mut bb: Vec<&str> = args.to_vec();
        bb.push(b.to_str().expect("path"));
        let o = with_conf(&self.ours, conf, &aa, env);
        let t = with_conf(&self.theirs, conf, &bb, env);
        (o, t, a, b)
    }

    /// An image made with `mkfs` and changed by the debugfs `commands`.
    fn image(&self, name: &str, mkfs: &[&str], commands: &str) -> PathBuf {
        let img = self.scratch.path(&format!("{name}.img"));
        let tree = self.scratch.path(&format!("{name}-tree"));
        std::fs::create_dir_all(tree.join("d")).expect("tree");
        for i in 0..4 {
            std::fs::write(tree.join(format!("f{i}")), vec![b'x'; 1500 * (i + 1)]).expect("file");
        }
        let mut args = mkfs.to_vec();
        args.extend_from_slice(&[
            "-d",
            tree.to_str().expect("path"),
            img.to_str().expect("path"),
            "8M",
        ]);
        mke2fs(&args);
        let script = self.scratch.path(&format!("{name}.debugfs"));
        std::fs::write(&script, commands).expect("script");
        let out = common::tool(
            "debugfs",
            &[
                "-w",
                "-f",
                script.to_str().expect("path"),
                img.to_str().expect("path"),
            ],
        );
        assert!(out.status.success(), "debugfs: {out:?}");
        img
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The feature sets each case runs on.
const FEATURES: [&[&str]; 3] = [
    &[
        "-O",
        "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
        "-I",
        "256",
        "-b",
        "1024",
    ],
    &[
        "-O",
        "has_journal,extent,huge_file,flex_bg,uninit_bg,dir_nlink,extra_isize",
        "-I",
        "256",
        "-b",
        "4096",
    ],
    &["-t", "ext2", "-b", "4096"],
];

#[test]
fn the_clock_options_decide_the_time_checks() {
    let Some(t) = Tools::new("conf-clock") else {
        return;
    };
    let none = t.conf("empty", "");
    let broken = t.conf("broken", "[options]\n\tbroken_system_clock = true\n");
    let strict = t.conf("strict", "[options]\n\taccept_time_fudge = false\n");
    let alias = t.conf(
        "alias",
        "[options]\n\taccept_time_fudge = false\n\tbuggy_init_scripts = true\n",
    );
    let mut failures = Vec::new();
    for (i, mkfs) in FEATURES.iter().enumerate() {
        // Mounted a year ahead of the clock; and an hour ahead.
        let far = t.image(&format!("far{i}"), mkfs, "ssv mtime 20270101000000\n");
        let near = t.image(&format!("near{i}"), mkfs, "ssv mtime 20260101010000\n");
        for (img, conf, what) in [
            (&far, &none, "a year ahead"),
            (&far, &broken, "a year ahead, broken_system_clock"),
            (&near, &none, "an hour ahead"),
            (&near, &strict, "an hour ahead, accept_time_fudge off"),
            (&near, &alias, "an hour ahead, buggy_init_scripts on"),
            (&near, &broken, "an hour ahead, broken_system_clock"),
        ] {
            for args in [&["-fn"][..], &["-fy"], &["-fp"]] {
                let (o, th, a, b) = t.both(img, conf, args, &[]);
                let ctx = format!("{what} {args:?} on {mkfs:?}");
                if code(&o) != code(&th) {
                    failures.push(format!(
                        "{ctx}: exit {} vs e2fsck's {}\n{}\n{}",
                        code(&o),
                        code(&th),
                        text(&o),
                        text(&th)
                    ));
                }
                let (ma, mb) = (
                    common::sb_field(&a, "Last mount time"),
                    common::sb_field(&b, "Last mount time"),
                );
                if ma != mb {
                    failures.push(format!("{ctx}: last mount time {ma} vs e2fsck's {mb}"));
                }
                // Which form e2fsck used (the day's allowance or not), and
                // ours.
                let theirs_fudged = text(&th).contains("less than a day");
                let ours_fudged = text(&o).contains("less than a day");
                let theirs_any = text(&th).contains("is in the future");
                let ours_any = text(&o).contains("in the future");
                if theirs_fudged != ours_fudged || theirs_any != ours_any {
                    failures.push(format!(
                        "{ctx}: reported (any {ours_any}, fudged {ours_fudged}) vs e2fsck's (any {theirs_any}, fudged {theirs_fudged})\n{}",
                        text(&o)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn problem_overrides_change_the_answers_as_e2fsck_changes_them() {
    let Some(t) = Tools::new("conf-problems") else {
        return;
    };
    let mut failures = Vec::new();
    for (i, mkfs) in FEATURES.iter().enumerate() {
        let links = t.image(&format!("links{i}"), mkfs, "sif /f1 links_count 4\n");
        let mode = t.image(&format!("mode{i}"), mkfs, "sif /f2 mode 0170644\n");
        let cases: [(&Path, &str, &[&str]); 9] = [
            (&links, "", &["-fy"]),
            (&links, "[problems]\n\t0x040003 = {\n\t\tforce_no = true\n\t}\n", &["-fy"]),
            (&links, "[problems]\n\t0x040003 = {\n\t\tno_ok = true\n\t}\n", &["-fn"]),
            (&links, "[problems]\n\t0x040003 = {\n\t\tno_default = true\n\t}\n", &["-fp"]),
            (&links, "[problems]\n\t0x040003 =\n\t{\n\t\tpreen_nomessage = true\n\t}\n", &["-fp"]),
            (&mode, "", &["-fp"]),
            (&mode, "[problems]\n\t0x020012 = {\n\t\tpreen_ok = true\n\t}\n", &["-fp"]),
            (&mode, "[problems]\n\t0x020012 = {\n\t\tpreen_ok = maybe\n\t}\n", &["-fp"]),
            (&mode, "# a bad boolean leaves the built-in rule\n[options]\n\tbroken_system_clock = sometimes\n", &["-fy"]),
        ];
        for (n, (img, conf_text, args)) in cases.iter().enumerate() {
            let conf = t.conf(&format!("p{i}-{n}"), conf_text);
            let (o, th, a, b) = t.both(img, &conf, args, &[]);
            let ctx = format!("{conf_text:?} {args:?} on {mkfs:?}");
            if code(&o) != code(&th) {
                failures.push(format!(
                    "{ctx}: exit {} vs e2fsck's {}\n{}\n{}",
                    code(&o),
                    code(&th),
                    text(&o),
                    text(&th)
                ));
            }
            // What each left: the real e2fsck -fn judges both copies.
            let ja = code(&common::tool("e2fsck", &["-fn", a.to_str().expect("path")]));
            let jb = code(&common::tool("e2fsck", &["-fn", b.to_str().expect("path")]));
            if ja != jb {
                failures.push(format!(
                    "{ctx}: e2fsck -fn afterwards exits {ja} on ours, {jb} on e2fsck's"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// How many text lines of `out` name the link-count problem.
fn link_lines(o: &Output) -> usize {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains("link count") || l.contains("ref count"))
        .count()
}

#[test]
fn what_is_printed_is_limited_as_e2fsck_limits_it() {
    let Some(t) = Tools::new("conf-printed") else {
        return;
    };
    let img = t.image(
        "links",
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
        ],
        "sif /f1 links_count 4\nsif /f2 links_count 5\nsif /f3 links_count 6\n",
    );
    let none = t.conf("none", "");
    let (o, th, _, _) = t.both(&img, &none, &["-fn"], &[]);
    assert_eq!((link_lines(&o), link_lines(&th)), (3, 3), "{}", text(&o));
    // Two printed, then one line saying the rest is suppressed; the
    // verdict is the same.
    for conf_text in [
        "[options]\n\tmax_count_problems = 2\n",
        "[problems]\n\t0x040003 = {\n\t\tmax_count = 2\n\t}\n",
    ] {
        let conf = t.conf("max", conf_text);
        let (o, th, _, _) = t.both(&img, &conf, &["-fn"], &[]);
        assert_eq!(code(&o), code(&th), "{conf_text}");
        assert_eq!(link_lines(&o), 2, "{conf_text}: {}", text(&o));
        assert!(
            text(&o).contains("0x040003") && text(&o).contains("suppressed"),
            "{}",
            text(&o)
        );
        assert!(text(&th).contains("suppressed"), "{}", text(&th));
    }
    // no_nomsg: under -n the problem is not printed; the verdict stands.
    let conf = t.conf(
        "nomsg",
        "[problems]\n\t0x040003 = {\n\t\tno_nomsg = true\n\t}\n",
    );
    let (o, th, _, _) = t.both(&img, &conf, &["-fn"], &[]);
    assert_eq!(code(&o), code(&th));
    assert_eq!(link_lines(&o), 0, "{}", text(&o));
    assert_eq!(link_lines(&th), 0, "{}", text(&th));
}

#[test]
fn a_syntax_error_stops_the_run_and_names_the_line() {
    let Some(t) = Tools::new("conf-syntax") else {
        return;
    };
    let img = t.image(
        "clean",
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
        ],
        "",
    );
    for text_ in [
        "[options]\nbroken system clock = 1\n",
        "[options\n",
        "[options]\nx = a b\n",
        "[options]\n}\n",
        "[problems]\n0x040003 =\nnot a brace\n",
    ] {
        let conf = t.conf("bad", text_);
        let (o, th, _, _) = t.both(&img, &conf, &["-fn"], &[]);
        assert_eq!(code(&o), 8, "{text_:?}: {}", text(&o));
        assert_eq!(code(&o), code(&th), "{text_:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.contains(conf.to_str().expect("path")) && err.contains("line "),
            "{err}"
        );
    }
    // Unknown options are named, one line each, and ignored.
    let conf = t.conf("unknown", "[options]\n\tbroken_sytem_clock = 1\n");
    let (o, th, _, _) = t.both(&img, &conf, &["-fn"], &[]);
    assert_eq!(code(&o), code(&th));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("line 2") && err.contains("broken_sytem_clock"),
        "{err}"
    );
}

#[test]
fn a_directory_of_files_and_the_environment() {
    let Some(t) = Tools::new("conf-dir") else {
        return;
    };
    // A directory: files named with letters, digits, '_' and '-' are read
    // in order; "b.conf" is not.
    let dir = t.scratch.path("conf.d");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("10-clock"),
        "[options]\n\tbroken_system_clock = 1\n",
    )
    .expect("w");
    std::fs::write(dir.join("b.conf"), "[options\n").expect("w");
    let far = t.image(
        "far",
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
        ],
        "ssv mtime 20270101000000\n",
    );
    let (o, th, a, b) = t.both(&far, &dir, &["-fy"], &[]);
    assert_eq!(code(&o), code(&th), "{}\n{}", text(&o), text(&th));
    assert_eq!(
        common::sb_field(&a, "Last mount time"),
        common::sb_field(&b, "Last mount time")
    );
    assert!(!text(&o).contains("future"), "{}", text(&o));

    // broken_system_clock on a clean file system with a check interval.
    let clean = t.image(
        "interval",
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
        ],
        "ssv checkinterval 86400\n",
    );
    let conf = t.conf("broken", "[options]\n\tbroken_system_clock = 1\n");
    let (o, th, _, _) = t.both(&clean, &conf, &["-p"], &[]);
    assert_eq!(code(&o), code(&th));
    assert_eq!(
        text(&o).contains("ignoring check interval"),
        text(&th).contains("ignoring check interval"),
        "{}\n{}",
        text(&o),
        text(&th)
    );

    // E2FSCK_FIXES_ONLY is -E fixes_only: refused beside -D.
    let none = t.conf("none", "");
    let (o, th, _, _) = t.both(&clean, &none, &["-fyD"], &[("E2FSCK_FIXES_ONLY", "1")]);
    assert_eq!(code(&o), 8, "{}", text(&o));
    assert_eq!(code(&o), code(&th));
}

#[test]
fn an_undo_file_on_every_repair_when_the_configuration_asks() {
    let Some(t) = Tools::new("conf-undo") else {
        return;
    };
    if !have_all(&["e2undo"]) {
        return;
    }
    let undo_dir = t.scratch.path("undo");
    std::fs::create_dir_all(&undo_dir).expect("dir");
    let conf = t.conf(
        "undo.conf",
        &format!(
            "[defaults]\n\tundo_dir = {}\n[ext4chk]\n\tundo = true\n",
            undo_dir.display()
        ),
    );
    let img = t.image(
        "links",
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
        ],
        "sif /f1 links_count 4\n",
    );
    let before = std::fs::read(&img).expect("image");
    let out = with_conf(&t.ours, &conf, &["-fy", img.to_str().expect("path")], &[]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    let undo = undo_dir.join("e2fsck-links.img.e2undo");
    assert!(undo.exists(), "no undo file: {}", text(&out));
    assert!(text(&out).contains("e2undo"), "{}", text(&out));
    let back = common::tool(
        "e2undo",
        &[undo.to_str().expect("path"), img.to_str().expect("path")],
    );
    assert!(back.status.success(), "{back:?}");
    assert_eq!(
        std::fs::read(&img).expect("image"),
        before,
        "e2undo puts it back"
    );
}
