//! Tells the tests whether the e2fsprogs regression corpus is there
//! (`EXT4CHK_CORPUS`, else `../shared/corpus`), so that the tests that
//! need it show as ignored, not passed, when it is missing.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ext4chk_corpus)");
    println!("cargo:rerun-if-env-changed=EXT4CHK_CORPUS");
    let dir = std::env::var_os("EXT4CHK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let root = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default();
            PathBuf::from(root).join("../shared/corpus")
        });
    let manifest = dir.join("e2fsprogs/MANIFEST.tsv");
    println!("cargo:rerun-if-changed={}", manifest.display());
    if manifest.is_file() {
        println!("cargo:rustc-cfg=ext4chk_corpus");
    }
}
