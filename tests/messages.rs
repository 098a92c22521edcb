//! Messages name the files they are about, as e2fsck's do.

mod common;

use common::{corpus_image, gunzip, have_all, run, tool, Scratch};

/// Pass 1B names each file that shares blocks and the files it shares
/// them with, by path: e2fsck's f_dup image, where /termcap and /motd
/// share two blocks.
#[test]
#[cfg_attr(
    not(ext4chk_corpus),
    ignore = "needs the e2fsprogs corpus: set EXT4CHK_CORPUS to the folder holding e2fsprogs/MANIFEST.tsv"
)]
fn files_sharing_blocks_are_named_by_path() {
    if !have_all(&["e2fsck"]) {
        return;
    }
    let scratch = Scratch::new("messages");
    let img = scratch.path("f_dup.img");
    gunzip(&corpus_image("f_dup"), &img);
    let p = img.to_str().expect("path");
    let ours = String::from_utf8_lossy(&run(&["-n", p]).stdout).into_owned();
    let theirs = String::from_utf8_lossy(&tool("e2fsck", &["-fn", p]).stdout).into_owned();
    for (ino, path) in [(12, "/termcap"), (13, "/motd")] {
        assert!(theirs.contains(path), "e2fsck names {path}:\n{theirs}");
        assert!(
            ours.contains(&format!(
                "inode {ino} ({path}) has 2 multiply-claimed block(s)"
            )),
            "{ours}"
        );
        assert!(ours.contains(&format!(": {ino} ({path}) [")), "{ours}");
    }
}
