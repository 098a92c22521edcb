//! ext4chk installed as `fsck.ext4` takes e2fsck's command line: every
//! combination here exits as the real e2fsck does on a copy of the same
//! image (a clean one, a damaged one, one whose journal needs recovery).
//! A `-n` run writes nothing, and every repair leaves a file system the
//! real `e2fsck -fn` calls clean (or as unclean as e2fsck's own repair
//! leaves it).

mod common;

use std::path::{Path, PathBuf};

use common::{code, have_all, mke2fs, run_as, tool, Scratch};

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
