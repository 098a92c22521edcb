//! Differential test: on each clean fixture, damage one thing at a time
//! with `debugfs -w` and require `ext4chk -n` to find an error exactly
//! when `e2fsck -fn` does.

mod common;

use common::{code, fixture_images, have, par_map, run, tool, Scratch};

/// One way to damage an image: debugfs requests, where `{blk:PATH}` is
/// replaced by the first block of PATH and `{ino:PATH}` by its inode.
struct Damage {
    name: &'static str,
    requests: &'static [&'static str],
}

const DAMAGE: &[Damage] = &[
    Damage {
        name: "links-count-file",
        requests: &["sif /files/size-4096 links_count 3"],
    },
    Damage {
        name: "links-count-dir",
        requests: &["sif /deep/a links_count 9"],
    },
    Damage {
        name: "links-count-zero",
        requests: &["sif /links/original links_count 0"],
    },
    Damage {
        name: "extra-dirent",
        requests: &["ln /files/size-100 /files/second-name"],
    },
    Damage {
        name: "dirent-to-unused-inode",
        requests: &["ln <3000> /files/ghost"],
    },
    Damage {
        name: "dirent-removed",
        requests: &["unlink /files/size-1024"],
    },
    Damage {
        name: "dirent-removed-empty-file",
        requests: &["unlink /files/size-0"],
    },
    Damage {
        name: "freed-block-in-use",
        requests: &["freeb {blk:/files/size-65536}"],
    },
    Damage {
        name: "used-block-marked",
        requests: &[
            "setb {blk:/files/size-65536} 1",
            "freeb {blk:/files/size-65536}",
            "setb 15000",
        ],
    },
    Damage {
        name: "freed-inode-in-use",
        requests: &["freei {ino:/files/size-1}"],
    },
    Damage {
        name: "unused-inode-marked",
        requests: &["seti <3500>"],
    },
    Damage {
        name: "bad-block-pointer",
        requests: &[
            "sif /files/size-65536 block[5] 3999999999",
            "sif /files/size-65536 block[0] 3999999999",
        ],
    },
    Damage {
        name: "extent-header",
        requests: &["sif /files/large-3m block[0] 0x12345678"],
    },
    Damage {
        name: "wrong-sb-free-blocks",
        requests: &["ssv free_blocks_count 123"],
    },
    Damage {
        name: "wrong-sb-free-inodes",
        requests: &["ssv free_inodes_count 77"],
    },
    Damage {
        name: "wrong-group-free-blocks",
        requests: &["set_bg 0 free_blocks_count 3"],
    },
    Damage {
        name: "wrong-group-dirs",
        requests: &["set_bg 0 used_dirs_count 1"],
    },
    Damage {
        name: "group-checksum",
        requests: &["set_bg 1 checksum 0x1234"],
    },
    Damage {
        name: "cleared-root",
        requests: &["clri <2>"],
    },
    Damage {
        name: "cleared-dir",
        requests: &["clri /deep/a/b"],
    },
    Damage {
        name: "mode-zero",
        requests: &["sif /files/size-100 mode 0"],
    },
    Damage {
        name: "size-too-small",
        requests: &["sif /files/size-12288 size 100"],
    },
    Damage {
        name: "dir-size",
        requests: &["sif /deep size 12345"],
    },
    Damage {
        name: "i-blocks",
        requests: &["sif /files/size-4096 blocks 3"],
    },
    Damage {
        name: "dtime-in-use",
        requests: &["sif /files/size-59 dtime 1600000000"],
    },
    Damage {
        name: "htree-flag-on-small-dir",
        requests: &["sif /deep/a flags 0x1000"],
    },
    Damage {
        name: "htree-flag-cleared",
        requests: &["sif /wide flags 0"],
    },
    Damage {
        name: "fast-symlink-size",
        requests: &["sif /links/fast size 40"],
    },
    Damage {
        name: "slow-symlink-size",
        requests: &["sif /links/slow size 5000"],
    },
    Damage {
        name: "fifo-with-size",
        requests: &["sif /special/fifo size 10"],
    },
    Damage {
        name: "fs-error-state",
        requests: &["ssv state 2"],
    },
    Damage {
        name: "future-mount-time",
        requests: &["ssv mtime 4000000000"],
    },
    Damage {
        name: "lost-found-gone",
        requests: &["rmdir /lost+found"],
    },
    Damage {
        name: "new-file-clean",
        requests: &["write /etc/hostname /new-file"],
    },
    Damage {
        name: "new-dir-clean",
        requests: &["mkdir /new-dir"],
    },
    Damage {
        name: "removed-file-clean",
        requests: &["rm /files/size-70000"],
    },
    Damage {
        name: "flags-immutable-fifo",
        requests: &["sif /special/fifo flags 0x10"],
    },
    Damage {
        name: "faddr",
        requests: &["sif /files/size-100 faddr 5"],
    },
    Damage {
        name: "generation-change",
        requests: &["sif /deep/a generation 42"],
    },
    Damage {
        name: "inode-checksum",
        requests: &["sif /files/size-1 checksum 0x1"],
    },
    Damage {
        name: "dirent-filetype",
        requests: &["set_inode_field /deep/a/b mode 0100644"],
    },
];

/// Images the damage is applied to.
const IMAGES: &[&str] = &[
    "ext2",
    "ext3",
    "ext4",
    "ext4-nocsum",
    "ext4-1k",
    "ext4-inline",
    "ext2-1k",
];

fn resolve(img: &str, req: &str) -> String {
    let mut out = req.to_string();
    while let Some(start) = out.find('{') {
        let end = out[start..]
            .find('}')
            .map(|e| start + e)
            .expect("closing brace");
        let key = &out[start + 1..end];
        let (kind, path) = key.split_once(':').expect("kind:path");
        let value = match kind {
            "blk" => {
                let o = tool("debugfs", &["-R", &format!("bmap {path} 0"), img]);
                String::from_utf8_lossy(&o.stdout).trim().to_string()
            }
            "ino" => {
                let o = tool("debugfs", &["-R", &format!("stat {path}"), img]);
                let s = String::from_utf8_lossy(&o.stdout);
                let n = s.split_whitespace().nth(1).unwrap_or("0").to_string();
                format!("<{n}>")
            }
            _ => panic!("unknown placeholder {kind}"),
        };
        out.replace_range(start..=end, &value);
    }
    out
}

#[test]
fn ext4chk_finds_errors_exactly_when_e2fsck_does() {
    let Some(dir) = fixture_images() else {
        eprintln!("e2fsprogs is not installed: skipping the differential test");
        return;
    };
    assert!(have("debugfs"), "debugfs is needed with mke2fs");
    let scratch = Scratch::new("diff");
    let mut cases = Vec::new();
    for img in IMAGES {
        for d in DAMAGE {
            cases.push((*img, d));
        }
    }
    let results = par_map(&cases, |(img, d)| {
        let src = dir.join(format!("{img}.img"));
        let dst = scratch.path(&format!("{img}-{}.img", d.name));
        std::fs::copy(&src, &dst).expect("copy image");
        let p = dst.to_str().expect("path").to_string();
        for r in d.requests {
            let req = resolve(&p, r);
            tool("debugfs", &["-w", "-R", &req, &p]);
        }
        let theirs = tool("e2fsck", &["-fn", &p]);
        let ours = run(&["-n", &p]);
        let e = theirs.status.code().unwrap_or(-1);
        let o = code(&ours);
        let _ = std::fs::remove_file(&dst);
        (
            img.to_string(),
            d.name,
            e,
            o,
            String::from_utf8_lossy(&ours.stdout).into_owned(),
        )
    });
    let mut bad = Vec::new();
    let mut damaged = 0;
    for (img, name, e, o, text) in &results {
        if *e != 0 {
            damaged += 1;
        }
        if (*e == 0) != (*o == 0) || ![0, 4, 8, 12].contains(o) {
            bad.push(format!(
                "{img}/{name}: e2fsck -fn {e}, ext4chk -n {o}\n{text}"
            ));
        }
    }
    eprintln!(
        "differential: {} cases, {damaged} damaged per e2fsck",
        results.len()
    );
    assert!(
        damaged > results.len() / 2,
        "most of the damage should be detected by e2fsck"
    );
    assert!(bad.is_empty(), "verdicts differ:\n{}", bad.join("\n"));
}

/// The same damage, repaired: ext4chk's repair must leave a file system
/// the real `e2fsck -fn` calls clean, a second repair must find nothing,
/// and every regular file e2fsck's own repair keeps (path and content)
/// must be kept.
#[test]
fn repairs_keep_what_e2fsck_keeps() {
    let Some(dir) = fixture_images() else {
        eprintln!("e2fsprogs is not installed: skipping the repair comparison");
        return;
    };
    let scratch = Scratch::new("diff-repair");
    let mut cases = Vec::new();
    for img in IMAGES {
        for d in DAMAGE {
            cases.push((*img, d));
        }
    }
    let known = common::known_list("fixture-repair.txt");
    let results = par_map(&cases, |(img, d)| {
        let src = dir.join(format!("{img}.img"));
        let ours = scratch.path(&format!("{img}-{}.ours.img", d.name));
        std::fs::copy(&src, &ours).expect("copy image");
        let p = ours.to_str().expect("path").to_string();
        for r in d.requests {
            let req = resolve(&p, r);
            tool("debugfs", &["-w", "-R", &req, &p]);
        }
        let damaged = code(&tool("e2fsck", &["-fn", &p])) != 0;
        if !damaged {
            let _ = std::fs::remove_file(&ours);
            return None;
        }
        let theirs = scratch.path(&format!("{img}-{}.e2fsck.img", d.name));
        std::fs::copy(&ours, &theirs).expect("copy image");
        tool("e2fsck", &["-fy", theirs.to_str().expect("path")]);
        let first = code(&run(&["-y", &p]));
        let after = code(&tool("e2fsck", &["-fn", &p]));
        let second = code(&run(&["-y", &p]));
        let trees = scratch.path(&format!("{img}-{}.trees", d.name));
        let lost = common::files_lost(&theirs, &ours, &trees)
            .map(|(lost, _)| lost)
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&trees);
        let _ = std::fs::remove_file(&ours);
        let _ = std::fs::remove_file(&theirs);
        Some((format!("{img}/{}", d.name), first, after, second, lost))
    });
    let mut problems = Vec::new();
    let mut repaired = 0;
    let mut total = 0;
    for (case, first, after, second, lost) in results.into_iter().flatten() {
        total += 1;
        let ok = after == 0 && second == 0 && lost.is_empty() && first & !7 == 0;
        match (ok, known.contains(&case)) {
            (true, false) => repaired += 1,
            (true, true) => problems.push(format!(
                "{case}: now repaired; remove it from tests/known/fixture-repair.txt"
            )),
            (false, true) => {}
            (false, false) => problems.push(format!(
                "{case}: repair exited {first}, then e2fsck -fn {after}, a second repair {second}; lost {} file(s): {}",
                lost.len(),
                lost.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }
    eprintln!("fixture repairs: {repaired}/{total} clean with nothing lost");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
