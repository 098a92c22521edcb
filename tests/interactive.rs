//! The interactive repair, driven through a pseudo-terminal as a person at
//! a console drives it: `fsck.ext4 IMAGE` with no `-n`, `-p` or `-y`, each
//! question answered with one keystroke. Every case runs on several
//! feature sets and is held against `-y` on a copy, against a check
//! afterwards, and (for the exit codes) against the real e2fsck driven
//! with the same keys.

mod common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{code, file_tree, find_tool, have_all, mke2fs, run, tool, Scratch};

/// What a session at the terminal printed, and how it ended.
struct Session {
    out: String,
    code: i32,
    keys_left: usize,
}

/// Runs `prog args` on a new pseudo-terminal (its controlling terminal,
/// so Ctrl-C is a signal as at a console) and answers each question (the
/// output, once quiet, ends in `?`) with the next byte of `keys`.
fn at_terminal(prog: &Path, args: &[&str], keys: &[u8]) -> Session {
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let slave: OwnedFd = pty.slave;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .env("LC_ALL", "C")
        .env("TZ", "GMT0")
        .env("E2FSCK_CONFIG", "/dev/null")
        .env_remove("E2FSCK_FORCE_INTERACTIVE")
        .stdin(Stdio::from(slave.try_clone().expect("dup")))
        .stdout(Stdio::from(slave.try_clone().expect("dup")))
        .stderr(Stdio::from(slave));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("the program starts");
    drop(cmd);
    let mut master = std::fs::File::from(pty.master);
    let fd = master.as_raw_fd();
    let mut out = Vec::new();
    let mut keys = keys.iter();
    let mut quiet_since = Instant::now();
    let started = Instant::now();
    loop {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, 50) };
        if n > 0 {
            let mut buf = [0u8; 4096];
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    out.extend_from_slice(&buf[..k]);
                    quiet_since = Instant::now();
                    continue;
                }
            }
        }
        let text = String::from_utf8_lossy(&out);
        if text.trim_end_matches(' ').ends_with('?')
            && quiet_since.elapsed() > Duration::from_millis(150)
        {
            if let Some(k) = keys.next() {
                master.write_all(&[*k]).expect("a key");
                quiet_since = Instant::now();
            }
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!(
                "{} {} did not finish; it printed:\n{}",
                prog.display(),
                args.join(" "),
                String::from_utf8_lossy(&out)
            );
        }
    }
    let status = child.wait().expect("wait");
    let code = {
        use std::os::unix::process::ExitStatusExt;
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    };
    Session {
        out: String::from_utf8_lossy(&out).replace('\r', ""),
        code,
        keys_left: keys.count(),
    }
}

/// ext4chk under the name `fsck.ext4`.
fn fsck_ext4(scratch: &Scratch) -> PathBuf {
    let link = scratch.path("fsck.ext4");
    if !link.exists() {
        std::os::unix::fs::symlink(common::bin(), &link).expect("symlink");
    }
    link
}

/// The feature sets every case runs on.
const FEATURES: [(&str, &[&str]); 3] = [
    (
        "ext4-1k",
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "1024",
        ],
    ),
    (
        "uninit_bg-4k",
        &[
            "-O",
            "has_journal,extent,huge_file,flex_bg,uninit_bg,dir_nlink,extra_isize",
            "-I",
            "256",
            "-b",
            "4096",
        ],
    ),
    ("ext2-4k", &["-t", "ext2", "-b", "4096"]),
];

/// A small file system with files, then four problems in three passes:
/// two wrong link counts (pass 4), a block and an inode marked in use
/// that nothing uses (pass 5), and an entry naming a cleared inode
/// (pass 2).
fn damaged(scratch: &Scratch, name: &str, mkfs: &[&str]) -> Option<PathBuf> {
    let tree = scratch.path(&format!("{name}-tree"));
    std::fs::create_dir_all(tree.join("d")).ok()?;
    for i in 0..6 {
        std::fs::write(
            tree.join(format!("f{i}")),
            format!("file {i}\n").repeat(200 * i + 1),
        )
        .ok()?;
        std::fs::write(tree.join("d").join(format!("g{i}")), vec![i as u8; 3000]).ok()?;
    }
    let img = scratch.path(&format!("{name}.img"));
    let mut args: Vec<&str> = mkfs.to_vec();
    let tree_s = tree.to_str()?;
    let img_s = img.to_str()?;
    args.extend_from_slice(&["-d", tree_s, img_s, "8M"]);
    mke2fs(&args);
    let script = scratch.path(&format!("{name}.debugfs"));
    std::fs::write(
        &script,
        "sif /f1 links_count 5\nsif /d/g2 links_count 3\nsetb 1900\nseti 40\nclri /d/g4\n",
    )
    .ok()?;
    tool("debugfs", &["-w", "-f", script.to_str()?, img_s]);
    Some(img)
}

/// The exit code and the findings (by name) of `ext4chk -n` on `img`.
fn check(img: &Path) -> (i32, Vec<String>) {
    let out = run(&["-fn", "--format", "json", img.to_str().expect("path")]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let names = v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| {
                    format!(
                        "{} {}",
                        f["code"].as_str().unwrap_or("?"),
                        f["ino"].as_u64().map(|i| i.to_string()).unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (code(&out), names)
}

/// Whether the real e2fsck finds `img` clean.
fn e2fsck_clean(img: &Path) -> bool {
    code(&tool("e2fsck", &["-fn", img.to_str().expect("path")])) == 0
}

/// The bytes of `a` and `b` that differ, as ranges of the file.
fn differing_blocks(a: &Path, b: &Path, unit: usize) -> Vec<usize> {
    let a = std::fs::read(a).expect("image");
    let b = std::fs::read(b).expect("image");
    assert_eq!(a.len(), b.len());
    (0..a.len() / unit)
        .filter(|&i| a[i * unit..(i + 1) * unit] != b[i * unit..(i + 1) * unit])
        .collect()
}

fn copy(from: &Path, to: &Path) -> PathBuf {
    std::fs::copy(from, to).expect("copy");
    to.to_path_buf()
}

#[test]
fn the_answers_decide_the_repair() {
    if !have_all(&["mke2fs", "debugfs", "e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("interactive");
    let prog = fsck_ext4(&scratch);
    let e2fsck = find_tool("e2fsck").expect("e2fsck");
    let mut failures = Vec::new();
    for (name, mkfs) in FEATURES {
        let base = damaged(&scratch, name, mkfs).expect("a damaged image");
        let p = |s: &Path| s.to_str().expect("path").to_string();
        let (_, found) = check(&base);
        assert!(
            found.len() >= 5,
            "{name}: the damage is not found: {found:?}"
        );

        // -y on a copy: what every yes must match.
        let yes = copy(&base, &scratch.path(&format!("{name}-y.img")));
        let y = run(&["-fy", &p(&yes)]);
        let yes_files = file_tree(&yes, &scratch.0).expect("files");
        let mut expect = |what: &str, cond: bool, detail: String| {
            if !cond {
                failures.push(format!("{name}: {what}: {detail}"));
            }
        };

        // The plan first, then one by one, every answer yes.
        let img = copy(&base, &scratch.path(&format!("{name}-ally.img")));
        let keys: Vec<u8> = std::iter::once(b'o').chain([b'y'; 40]).collect();
        let s = at_terminal(&prog, &["-f", &p(&img)], &keys);
        expect(
            "the plan is shown",
            s.out.contains("The repair would fix"),
            s.out.clone(),
        );
        expect(
            "all y exits as -y",
            s.code == code(&y),
            format!("{} vs {}\n{}", s.code, code(&y), s.out),
        );
        expect("all y leaves it clean", e2fsck_clean(&img), s.out.clone());
        expect(
            "all y keeps the files -y keeps",
            file_tree(&img, &scratch.0).as_ref() == Some(&yes_files),
            s.out.clone(),
        );
        expect(
            "questions are e2fsck's",
            s.out.contains("Fix<y>? yes"),
            s.out.clone(),
        );
        expect(
            "questions name the directory by its path, as the plan does",
            s.out.contains("in directory /d ("),
            s.out.clone(),
        );

        // All no: only the superblock changes (its error state), exit 4,
        // as e2fsck answered no all the way.
        let img = copy(&base, &scratch.path(&format!("{name}-alln.img")));
        let keys: Vec<u8> = std::iter::once(b'o').chain([b'n'; 40]).collect();
        let s = at_terminal(&prog, &["-f", &p(&img)], &keys);
        let e = copy(&base, &scratch.path(&format!("{name}-alln-e2fsck.img")));
        let se = at_terminal(&e2fsck, &["-f", &p(&e)], &[b'n'; 40]);
        expect(
            "all n exits 4",
            s.code == 4,
            format!("{}\n{}", s.code, s.out),
        );
        expect(
            "all n exits as e2fsck's",
            s.code == se.code,
            format!("{} vs {}", s.code, se.code),
        );
        let changed = differing_blocks(&base, &img, 1024);
        expect(
            "all n changes only the superblock",
            changed == [1],
            format!("1 KiB units changed: {changed:?}"),
        );
        let (c, left) = check(&img);
        expect(
            "all n leaves every problem",
            c == 4 && left == found,
            format!("{left:?} vs {found:?}"),
        );

        // Two yes, then a: the same as yes to the rest.
        let img = copy(&base, &scratch.path(&format!("{name}-a.img")));
        let s = at_terminal(&prog, &["-f", &p(&img)], b"oyya");
        expect(
            "a answers the rest",
            s.keys_left == 0 && s.out.contains("yes to all"),
            s.out.clone(),
        );
        expect(
            "a exits as -y",
            s.code == code(&y),
            format!("{}\n{}", s.code, s.out),
        );
        expect("a leaves it clean", e2fsck_clean(&img), s.out.clone());
        expect(
            "a keeps the files -y keeps",
            file_tree(&img, &scratch.0).as_ref() == Some(&yes_files),
            String::new(),
        );

        // Mixed: no to the first link-count question, yes to the rest; a
        // check afterwards finds exactly that problem.
        let keys = mixed_keys(&first_questions(&prog, &base, &scratch, name));
        let img = copy(&base, &scratch.path(&format!("{name}-mixed.img")));
        let s = at_terminal(&prog, &["-f", &p(&img)], &keys);
        let (c, left) = check(&img);
        expect(
            "mixed leaves exactly the problem answered n",
            c == 4 && left.len() == 1 && left[0].starts_with("link-count-wrong"),
            format!("exit {c}, left {left:?}\n{}", s.out),
        );

        // No to the first question (pass 2's clearing of the entry whose
        // inode was cleared), yes to the rest: the entry stays, what else
        // was asked of it is fixed, and e2fsck driven the same way exits
        // the same.
        let img = copy(&base, &scratch.path(&format!("{name}-first-n.img")));
        let keys: Vec<u8> = [b'o', b'n'].into_iter().chain([b'y'; 40]).collect();
        let s = at_terminal(&prog, &["-f", &p(&img)], &keys);
        let e = copy(&base, &scratch.path(&format!("{name}-first-n-e2fsck.img")));
        let se = at_terminal(&e2fsck, &["-f", &p(&e)], &keys[1..]);
        let (c, left) = check(&img);
        expect(
            "no to the entry leaves only the entry",
            c == 4 && left.len() == 1 && left[0].starts_with("entry-unused-inode"),
            format!("exit {c}, left {left:?}\n{}", s.out),
        );
        expect(
            "no to the entry exits as e2fsck's",
            s.code == se.code,
            format!("{} vs {}\n{}\n{}", s.code, se.code, s.out, se.out),
        );
        let (ce, left_e) = check(&e);
        expect(
            "e2fsck leaves the same",
            ce == c && left_e == left,
            format!("{left_e:?} vs {left:?}"),
        );

        // The plan's q: nothing at all is written.
        let img = copy(&base, &scratch.path(&format!("{name}-q.img")));
        let s = at_terminal(&prog, &["-f", &p(&img)], b"q");
        expect("q exits 4", s.code == 4, s.out.clone());
        // Its summary is the disk's (as e2fsck -fn counts it), not the
        // plan's, which counted what the repair would have left.
        let counts = |t: &str| {
            t.lines()
                .rev()
                .find_map(common::summary_counts)
                .map(|(u, n, _, b, m)| (u, n, b, m))
        };
        let disk = tool("e2fsck", &["-fn", &p(&base)]);
        expect(
            "q's summary is the disk's",
            counts(&s.out) == counts(&String::from_utf8_lossy(&disk.stdout)),
            format!(
                "{:?} vs e2fsck -fn's {:?}\n{}",
                counts(&s.out),
                counts(&String::from_utf8_lossy(&disk.stdout)),
                s.out
            ),
        );
        expect(
            "q writes nothing",
            differing_blocks(&base, &img, 1024).is_empty(),
            String::new(),
        );

        // The plan's a: as -y.
        let img = copy(&base, &scratch.path(&format!("{name}-plan-a.img")));
        let s = at_terminal(&prog, &["-f", &p(&img)], b"a");
        expect("plan a exits as -y", s.code == code(&y), s.out.clone());
        expect("plan a leaves it clean", e2fsck_clean(&img), s.out.clone());

        // Ctrl-C at the second question: exit 32, as e2fsck's, and
        // nothing written (the answers so far were not yet applied).
        let img = copy(&base, &scratch.path(&format!("{name}-c.img")));
        let s = at_terminal(&prog, &["-f", &p(&img)], b"oy\x03");
        expect(
            "Ctrl-C exits 32",
            s.code == 32,
            format!("{}\n{}", s.code, s.out),
        );
        expect(
            "Ctrl-C says canceled",
            s.out.contains("e2fsck canceled."),
            s.out.clone(),
        );
        expect(
            "Ctrl-C writes nothing",
            differing_blocks(&base, &img, 1024).is_empty(),
            String::new(),
        );
        let e = copy(&base, &scratch.path(&format!("{name}-c-e2fsck.img")));
        let se = at_terminal(&e2fsck, &["-f", &p(&e)], b"y\x03");
        expect(
            "e2fsck's Ctrl-C exits 32 too",
            se.code == 32,
            se.out.clone(),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The transcript of a session answering every question yes.
fn first_questions(prog: &Path, base: &Path, scratch: &Scratch, name: &str) -> String {
    let img = copy(base, &scratch.path(&format!("{name}-probe.img")));
    let s = at_terminal(
        prog,
        &["-f", img.to_str().expect("path")],
        &std::iter::once(b'o').chain([b'y'; 60]).collect::<Vec<_>>(),
    );
    s.out
}

/// Keys for a mixed session: `o` for the plan, then `n` for the first
/// link-count question and `y` for every other, from the questions a
/// session of all yes asked (the order is the check's, so the same).
fn mixed_keys(transcript: &str) -> Vec<u8> {
    let mut keys = vec![b'o'];
    let mut declined = false;
    for line in transcript
        .lines()
        .filter(|l| l.contains("<y>?") || l.contains("<n>?"))
    {
        if !declined && line.contains("link count") {
            keys.push(b'n');
            declined = true;
        } else {
            keys.push(b'y');
        }
    }
    keys
}

#[test]
fn without_a_terminal_or_with_a_clean_file_system() {
    if !have_all(&["mke2fs", "e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("interactive-edges");
    let prog = fsck_ext4(&scratch);
    let e2fsck = find_tool("e2fsck").expect("e2fsck");
    let img = scratch.path("clean.img");
    mke2fs(&["-t", "ext4", img.to_str().expect("path"), "8M"]);
    let p = img.to_str().expect("path");

    // No terminal: one line, exit 8, as e2fsck.
    let ours = Command::new(&prog)
        .args(["-f", p])
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    let theirs = tool("e2fsck", &["-f", p]);
    assert_eq!(code(&ours), 8, "{}", String::from_utf8_lossy(&ours.stderr));
    assert_eq!(code(&ours), code(&theirs));
    let err = String::from_utf8_lossy(&ours.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("terminal"), "{err}");

    // A clean file system at a terminal: nothing asked, exit 0, as e2fsck.
    let s = at_terminal(&prog, &[p], b"");
    let se = at_terminal(&e2fsck, &[p], b"");
    assert_eq!(s.code, 0, "{}", s.out);
    assert_eq!(se.code, 0, "{}", se.out);
    assert!(s.out.contains("clean, "), "{}", s.out);
    assert!(!s.out.contains('?'), "nothing is asked: {}", s.out);

    // As ext4chk, --interactive asks the same way.
    let s = at_terminal(&common::bin(), &["--interactive", "-f", p], b"");
    assert_eq!(s.code, 0, "{}", s.out);
}
