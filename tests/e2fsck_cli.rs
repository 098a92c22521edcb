//! ext4chk installed as `fsck.ext4` takes e2fsck's command line: every
//! combination here exits as the real e2fsck does on a copy of the same
//! image (a clean one, a damaged one, one whose journal needs recovery).
//! A `-n` run writes nothing, and every repair leaves a file system the
//! real `e2fsck -fn` calls clean (or as unclean as e2fsck's own repair
//! leaves it).

mod common;

use std::path::{Path, PathBuf};

use common::{code, have_all, mke2fs, run, run_as, tool, Scratch};

/// The option sets, as fsck(8), systemd-fsck and admins pass them.
/// `{undo}`, `{list}` and `{empty}` stand for files made per run.
const COMBOS: &[&[&str]] = &[
    &["-n"],
    &["-p"],
    &["-a"],
    &["-y"],
    &["-fn"],
    &["-fp"],
    &["-fy"],
    &["-a", "-C0"],
    &["-p", "-f", "-C", "0"],
    &["-y", "-y"],
    &["-n", "-n", "-f"],
    &["-pf"],
    &["-fy", "-v"],
    &["-fn", "-t"],
    &["-fn", "-tt"],
    &["-fnd"],
    &["-n", "-r"],
    &["-fy", "-k"],
    &["-fn", "-B", "4096"],
    &["-fn", "-b", "8193"],
    &["-fy", "-b", "8193"],
    &["-fp", "-b8193", "-B1024"],
    &["-n", "-b", "100"],
    &["-fy", "-z", "{undo}"],
    &["-fy", "-c"],
    &["-p", "-c", "-k"],
    &["-fy", "-l", "{empty}"],
    &["-fy", "-L", "{list}"],
    &["-fyD"],
    &["-fpD"],
    &["-y", "-D"],
    &["-fn", "-E", "fragcheck"],
    &["-fy", "-E", "journal_only"],
    &["-y", "-E", "journal_only"],
    &["-n", "-E", "journal_only"],
    &["-fn", "-E", "readahead_kb=64,ea_ver=2,inode_count_fullmap"],
    &["-fy", "-E", "nodiscard,no_optimize_extents"],
    &["-fn", "-j", "/nonexistent/journal"],
    &["-n", "-y"],
    &["-p", "-n"],
    &["-y", "-a"],
    &["-nD"],
    &["-nc"],
    &["-n", "-l", "{empty}"],
    &["-y", "-c", "-l", "{empty}"],
    &["-n", "-E", "nosuchoption"],
    &["-n", "-E", "ea_ver=3"],
    &["-fy", "-D", "-E", "fixes_only"],
    &["-n", "-C", "abc"],
    &["-n", "-C", "57"],
    &["-n", "-b", "x"],
    &["-n", "-s"],
    &["-n", "-Q"],
    &["-n"],
    &["-V"],
    &[],
    &["-n", "--"],
];

/// Images for the comparison.
struct Images {
    clean: PathBuf,
    damaged: PathBuf,
    journal: PathBuf,
}

fn debugfs_w(img: &Path, cmds: &[&str], scratch: &Scratch) {
    let script = scratch.path("cmds");
    std::fs::write(&script, cmds.join("\n") + "\n").expect("write");
    let out = tool(
        "debugfs",
        &[
            "-w",
            "-f",
            script.to_str().expect("path"),
            img.to_str().expect("path"),
        ],
    );
    assert!(
        out.status.success(),
        "debugfs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_images(scratch: &Scratch) -> Images {
    let tree = scratch.path("tree");
    std::fs::create_dir_all(tree.join("sub/deeper")).expect("mkdir");
    for i in 0..40u32 {
        let d = if i % 2 == 0 {
            tree.join("sub")
        } else {
            tree.clone()
        };
        std::fs::write(
            d.join(format!("f{i}")),
            vec![i as u8; (i as usize + 1) * 700],
        )
        .expect("write");
    }
    std::fs::write(tree.join("sub/deeper/big"), vec![7u8; 300_000]).expect("write");
    let clean = scratch.path("clean.img");
    mke2fs(&[
        "-b",
        "1024",
        "-I",
        "256",
        "-O",
        "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
        "-d",
        tree.to_str().expect("path"),
        clean.to_str().expect("path"),
        "32M",
    ]);
    // Damage a clean-looking file system: a wrong link count (preen
    // fixes it) and a directory entry whose inode was cleared (preen
    // stops); the superblock still says clean, so without -f it is
    // skipped.
    let damaged = scratch.path("damaged.img");
    std::fs::copy(&clean, &damaged).expect("copy");
    debugfs_w(
        &damaged,
        &["sif /f1 links_count 3", "clri /sub/f2"],
        scratch,
    );
    // A transaction in the journal, not yet replayed.
    let journal = scratch.path("journal.img");
    std::fs::copy(&clean, &journal).expect("copy");
    let data = scratch.path("block.dat");
    std::fs::write(&data, vec![0x5Au8; 1024]).expect("write");
    debugfs_w(
        &journal,
        &["jo", &format!("jw -b 20000 {}", data.display()), "jc"],
        scratch,
    );
    Images {
        clean,
        damaged,
        journal,
    }
}

/// The arguments of one run, with its files made in `dir`.
fn args_for(combo: &[&str], dir: &Path, tag: &str) -> Vec<String> {
    combo
        .iter()
        .map(|a| match *a {
            "{undo}" => dir.join(format!("{tag}.undo")).display().to_string(),
            "{empty}" => {
                let p = dir.join("empty.list");
                std::fs::write(&p, "").expect("write");
                p.display().to_string()
            }
            "{list}" => {
                let p = dir.join("bad.list");
                std::fs::write(&p, "30000\n30001\n").expect("write");
                p.display().to_string()
            }
            s => s.to_string(),
        })
        .collect()
}

fn is_repair(combo: &[&str]) -> bool {
    combo.iter().any(|a| {
        a.starts_with('-')
            && !a.starts_with("--")
            && (a.contains('y') || a.contains('p') || *a == "-a")
    })
}

#[test]
fn fsck_ext4_exits_as_e2fsck_does() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let scratch = Scratch::new("e2fsck-cli");
    let images = make_images(&scratch);
    let mut runs = 0;
    let mut problems = Vec::new();
    let mut table = String::new();
    for (name, img) in [
        ("clean", &images.clean),
        ("damaged", &images.damaged),
        ("journal", &images.journal),
    ] {
        for (k, combo) in COMBOS.iter().enumerate() {
            let theirs = scratch.path(&format!("{name}-{k}-e2fsck.img"));
            let ours = scratch.path(&format!("{name}-{k}-ours.img"));
            std::fs::copy(img, &theirs).expect("copy");
            std::fs::copy(img, &ours).expect("copy");
            let dir_t = scratch.path(&format!("t-{name}-{k}"));
            let dir_o = scratch.path(&format!("o-{name}-{k}"));
            std::fs::create_dir_all(&dir_t).expect("mkdir");
            std::fs::create_dir_all(&dir_o).expect("mkdir");
            let mut a_t = args_for(combo, &dir_t, "t");
            let mut a_o = args_for(combo, &dir_o, "o");
            if !combo.contains(&"-V") {
                a_t.push(theirs.display().to_string());
                a_o.push(ours.display().to_string());
            }
            let a_t: Vec<&str> = a_t.iter().map(String::as_str).collect();
            let a_o: Vec<&str> = a_o.iter().map(String::as_str).collect();
            let before = std::fs::read(&ours).expect("image");
            let e = code(&tool("e2fsck", &a_t));
            let out = run_as("fsck.ext4", &a_o);
            let o = code(&out);
            runs += 1;
            table.push_str(&format!(
                "{name:8} {:40} e2fsck {e:2}  ext4chk {o:2}\n",
                combo.join(" ")
            ));
            if e != o {
                problems.push(format!(
                    "{name}: fsck.ext4 {}: e2fsck exits {e}, ext4chk {o}\n  stdout: {}\n  stderr: {}",
                    combo.join(" "),
                    String::from_utf8_lossy(&out.stdout).lines().take(6).collect::<Vec<_>>().join(" | "),
                    String::from_utf8_lossy(&out.stderr).lines().take(3).collect::<Vec<_>>().join(" | ")
                ));
            }
            let after = std::fs::read(&ours).expect("image");
            if !is_repair(combo) && before != after {
                problems.push(format!(
                    "{name}: fsck.ext4 {}: a run without -y/-p changed the image",
                    combo.join(" ")
                ));
            }
            if is_repair(combo) && before != after {
                // What e2fsck thinks of each result.
                let ours_fn = code(&tool("e2fsck", &["-fn", ours.to_str().expect("path")]));
                let theirs_fn = code(&tool("e2fsck", &["-fn", theirs.to_str().expect("path")]));
                if ours_fn != 0 && theirs_fn == 0 {
                    problems.push(format!(
                        "{name}: fsck.ext4 {}: e2fsck -fn exits {ours_fn} after ext4chk's repair, 0 after its own",
                        combo.join(" ")
                    ));
                }
            }
            let _ = std::fs::remove_file(&theirs);
            let _ = std::fs::remove_file(&ours);
        }
    }
    eprintln!("{table}");
    assert!(runs >= 90, "{runs} runs");
    assert!(
        problems.is_empty(),
        "{} of {runs} runs differ:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The symlink directory `run_as` uses, with `fsck.ext4` in it.
fn symlink_dir() -> PathBuf {
    let _ = run_as("fsck.ext4", &["-V"]);
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("as-{}", std::process::id()))
}

/// Runs a shell command with the `fsck.ext4` symlink first in PATH.
fn sh(cmd: &str) -> std::process::Output {
    let path = format!(
        "{}:{}:/sbin:/usr/sbin",
        symlink_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("sh")
        .args(["-c", cmd])
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("sh runs")
}

/// `-C 3` writes e2fsck's protocol: lines of "PASS CURRENT MAX DEVICE",
/// passes 1 to 5 in order, each ending at its maximum; the same numbers
/// of lines' fields as e2fsck's, which systemd-fsck parses with
/// "%i %lu %lu %ms".
#[test]
fn progress_lines_follow_e2fsck_s_protocol() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let scratch = Scratch::new("progress");
    let images = make_images(&scratch);
    let img = images.clean.display().to_string();
    let ours = scratch.path("ours.txt");
    let theirs = scratch.path("theirs.txt");
    let o = sh(&format!("fsck.ext4 -fn -C 3 {img} 3>{}", ours.display()));
    assert_eq!(code(&o), 0);
    let t = sh(&format!("e2fsck -fn -C 3 {img} 3>{}", theirs.display()));
    assert_eq!(code(&t), 0);
    let parse = |p: &Path| -> Vec<(u32, u64, u64, String)> {
        std::fs::read_to_string(p)
            .expect("progress file")
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f.len(), 4, "line {l:?}");
                (
                    f[0].parse().expect("pass"),
                    f[1].parse().expect("current"),
                    f[2].parse().expect("max"),
                    f[3].to_string(),
                )
            })
            .collect()
    };
    let ours = parse(&ours);
    let theirs = parse(&theirs);
    assert!(!ours.is_empty());
    let passes: Vec<u32> = ours.iter().map(|l| l.0).collect();
    let mut sorted = passes.clone();
    sorted.sort_unstable();
    assert_eq!(passes, sorted, "passes come in order");
    for p in 1..=5u32 {
        let mine: Vec<_> = ours.iter().filter(|l| l.0 == p).collect();
        assert!(!mine.is_empty(), "pass {p} is reported");
        assert!(mine.iter().all(|l| l.1 <= l.2), "current never passes max");
        let last = mine.last().expect("a line");
        assert_eq!(last.1, last.2, "pass {p} ends at its maximum");
        // The maximum is e2fsck's, in e2fsck's units.
        let their_max = theirs.iter().find(|l| l.0 == p).map(|l| l.2);
        assert_eq!(Some(last.2), their_max, "pass {p}'s maximum");
    }
    assert!(
        ours.iter().all(|l| l.3 == theirs[0].3),
        "the device name is e2fsck's"
    );
    // Under -C 0 the bar goes to standard output, as e2fsck's.
    let bar = sh(&format!("fsck.ext4 -fn -C 0 {img}"));
    assert!(String::from_utf8_lossy(&bar.stdout).contains("100.0%"));
    // Without -C and without a terminal, no progress output at all.
    let quiet = sh(&format!("fsck.ext4 -fn {img}"));
    let text = String::from_utf8_lossy(&quiet.stdout).to_string()
        + &String::from_utf8_lossy(&quiet.stderr);
    assert!(!text.contains('\r') && !text.contains("%  "), "{text}");
}

/// util-linux fsck(8) finds the symlink first in PATH and runs it as a
/// boot does (`fsck -a -C0`).
#[test]
fn util_linux_fsck_runs_it_as_fsck_ext4() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "fsck"]) {
        return;
    }
    let scratch = Scratch::new("fsck8");
    let images = make_images(&scratch);
    let img = images.clean.display().to_string();
    let dry = sh(&format!("fsck -N -a -C0 {img}"));
    let said = String::from_utf8_lossy(&dry.stdout).to_string();
    assert!(
        said.contains(&symlink_dir().join("fsck.ext4").display().to_string()),
        "{said}"
    );
    let out = sh(&format!("fsck -a -C0 {img}"));
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("clean"));
    // A damaged file system that is marked clean is skipped at boot, as
    // e2fsck skips it; with -f, preen repairs it as e2fsck -fp does.
    let dmg = images.damaged.display().to_string();
    assert_eq!(code(&sh(&format!("fsck -a -C0 {dmg}"))), 0);
    let copy = scratch.path("copy.img");
    std::fs::copy(&images.damaged, &copy).expect("copy");
    let theirs = code(&tool("e2fsck", &["-fp", copy.to_str().expect("path")]));
    assert_eq!(code(&sh(&format!("fsck -a -f {dmg}"))), theirs);
}

/// An admin whose primary superblock is gone types `-b 8193 -B 1024`:
/// every mode exits as e2fsck does, and the repair leaves a file system
/// that needs no backup any more.
#[test]
fn a_zeroed_primary_superblock_is_checked_from_a_backup() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let scratch = Scratch::new("backup-sb");
    let images = make_images(&scratch);
    let zeroed = scratch.path("z.img");
    let mut data = std::fs::read(&images.clean).expect("image");
    data[1024..2048].fill(0);
    std::fs::write(&zeroed, &data).expect("write");
    for combo in [
        &["-n"][..],
        &["-fn"],
        &["-p"],
        &["-fy"],
        &["-fn", "-b", "8193"],
        &["-fn", "-b", "8193", "-B", "1024"],
        &["-fp", "-b", "8193"],
        &["-fy", "-b", "8193", "-B", "1024"],
        &["-n", "-b", "8193", "-B", "4096"],
    ] {
        let theirs = scratch.path("t.img");
        let ours = scratch.path("o.img");
        std::fs::copy(&zeroed, &theirs).expect("copy");
        std::fs::copy(&zeroed, &ours).expect("copy");
        let mut a = combo.to_vec();
        let tp = theirs.display().to_string();
        let op = ours.display().to_string();
        a.push(&tp);
        let e = code(&tool("e2fsck", &a));
        a.pop();
        a.push(&op);
        let o = run_as("fsck.ext4", &a);
        assert_eq!(
            code(&o),
            e,
            "{combo:?}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        if combo.contains(&"-fy") {
            assert_eq!(
                code(&tool("e2fsck", &["-fn", &op])),
                0,
                "{combo:?} left errors"
            );
            // The primary is back: a plain check needs no -b.
            assert_eq!(code(&run_as("fsck.ext4", &["-fn", &op])), 0);
        }
    }
}

/// `-z FILE`: the stock e2undo puts the image back byte for byte.
#[test]
fn an_undo_file_from_fsck_ext4_is_replayed_by_e2undo() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "e2undo"]) {
        return;
    }
    let scratch = Scratch::new("undo-z");
    let images = make_images(&scratch);
    let img = scratch.path("u.img");
    std::fs::copy(&images.damaged, &img).expect("copy");
    let before = std::fs::read(&img).expect("image");
    let undo = scratch.path("u.undo");
    let p = img.display().to_string();
    let u = undo.display().to_string();
    let out = run_as("fsck.ext4", &["-fy", "-z", &u, &p]);
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("e2undo {u} {p}")));
    assert!(
        std::fs::read(&img).expect("image") != before,
        "the repair changed nothing"
    );
    let back = tool("e2undo", &[&u, &p]);
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    assert!(
        std::fs::read(&img).expect("image") == before,
        "e2undo did not restore it"
    );
}

/// Whole-disk images: `IMAGE?offset=BYTES` and `--partition N` (GPT and
/// MBR, a logical partition too) check and repair the file system inside,
/// and leave the rest of the disk alone.
#[test]
fn file_systems_inside_disk_images() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs", "sfdisk"]) {
        return;
    }
    let scratch = Scratch::new("disk");
    for (label, table, part, start) in [
        ("gpt", "label: gpt\nstart=2048, size=20480\nstart=22528, size=40960\n", 2u32, 22528u64),
        (
            "mbr",
            "label: dos\nstart=2048, size=20480, type=83\nstart=22528, size=40960, type=5\nstart=24576, size=36000, type=83\n",
            5,
            24576,
        ),
    ] {
        let disk = scratch.path(&format!("{label}.img"));
        std::fs::File::create(&disk)
            .and_then(|f| f.set_len(64 << 20))
            .expect("disk");
        let mut sf = std::process::Command::new(common::find_tool("sfdisk").expect("sfdisk"))
            .args(["-q", disk.to_str().expect("path")])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sfdisk");
        use std::io::Write;
        sf.stdin.take().expect("stdin").write_all(table.as_bytes()).expect("table");
        assert!(sf.wait().expect("sfdisk").success());
        let offset = start * 512;
        let fs_spec = format!("{}?offset={offset}", disk.display());
        mke2fs(&[
            "-b",
            "1024",
            "-E",
            &format!("offset={offset}"),
            disk.to_str().expect("path"),
            "16M",
        ]);
        let d = disk.display().to_string();
        let pn = part.to_string();
        assert_eq!(code(&run(&["-n", "--partition", &pn, &d])), 0, "{label}: clean");
        assert_eq!(code(&run(&["-n", &fs_spec])), 0, "{label}: clean through ?offset=");
        // Damage the file system inside: a wrong link count on the root.
        let out = tool("debugfs", &["-w", "-R", "sif <2> links_count 9", &fs_spec]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let outside: Vec<u8> = std::fs::read(&disk).expect("disk")[..offset as usize].to_vec();
        assert_eq!(code(&tool("e2fsck", &["-fn", &fs_spec])), 4);
        assert_eq!(code(&run(&["-n", "--partition", &pn, &d])), 4, "{label}: damage found");
        assert_eq!(code(&run(&["-y", "--partition", &pn, &d])), 1, "{label}: repaired");
        assert_eq!(code(&tool("e2fsck", &["-fn", &fs_spec])), 0, "{label}: clean after");
        assert!(
            std::fs::read(&disk).expect("disk")[..offset as usize] == outside[..],
            "{label}: the partition table and the space before the file system are untouched"
        );
        assert_eq!(code(&run(&["-n", "--partition", "9", &d])), 8, "no partition 9");
    }
}

/// Bad input gets one line naming the device or option, e2fsck's exit
/// code, and nothing written.
#[test]
fn bad_input_gets_one_line_and_e2fsck_s_exit_code() {
    if !have_all(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let scratch = Scratch::new("bad-input");
    let images = make_images(&scratch);
    let img = images.clean.display().to_string();
    let short = scratch.path("short.img");
    std::fs::write(&short, vec![0u8; 600]).expect("write");
    let short = short.display().to_string();
    let dir = scratch.0.display().to_string();
    let before = std::fs::read(&images.clean).expect("image");
    for (args, want_in_msg) in [
        (vec!["-n", "-C", "x", &img], "-C"),
        (vec!["-n", "--threads", "many", &img], "threads"),
        (vec!["-n", "-b", "100", &img], "100"),
        (vec!["-fn", "-j", &short, &img], ""),
        (vec!["-n", &dir], "directory"),
        (vec!["-n", &short], "short"),
        (vec!["-n", "-E", "nosuch", &img], "nosuch"),
        (vec!["-n", "/nonexistent/disk"], "/nonexistent/disk"),
    ] {
        let o = run_as("fsck.ext4", &args);
        let e = code(&tool("e2fsck", &args));
        // -j on a file system without an external journal is ignored by
        // both; the rest are refused with e2fsck's code.
        assert_eq!(code(&o), e, "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        if e != 0 {
            assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
            assert!(err.contains(want_in_msg), "{args:?}: {err}");
        }
    }
    assert!(
        std::fs::read(&images.clean).expect("image") == before,
        "bad input changed the image"
    );
}
