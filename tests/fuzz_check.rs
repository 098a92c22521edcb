//! The whole-check fuzz target's properties (see
//! `fuzz/src/harness.rs`) on the stable toolchain:
//! every input the fuzzer once failed on, kept under
//! `fuzz/regressions/check/`, and a fixed-seed mutation
//! run over the seed images in `fuzz/corpus/check/`
//! (small images of every fixture configuration, some with journals to
//! replay), mutated as the fuzzer mutates them: a few blocks at a time.

mod common;
#[path = "../fuzz/src/lib.rs"]
mod fuzz;

use std::path::{Path, PathBuf};

use fuzz::{harness, image, mutate};

fn inputs(dir: &str) -> Vec<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn inputs_the_fuzzer_failed_on_now_pass() {
    let all = inputs("fuzz/regressions/check");
    assert!(!all.is_empty());
    let mut failed = Vec::new();
    for p in &all {
        let data = std::fs::read(p).expect("read");
        let img = image::decode(&data).expect("an image input");
        for threads in [1, 2] {
            if let Err(e) = harness::exercise(&img, threads) {
                failed.push(format!("{} ({threads} threads): {e}", p.display()));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Mutants per seed image.
const PER_SEED: u64 = 300;
/// One mutant in this many is also judged by e2fsck: its `-n` verdict on
/// the mutant, and `-fn` on ext4chk's repair of it.
const ORACLE_EVERY: u64 = 3;

/// e2fsck's verdict on an image: whether `-fn` finds it clean.
fn e2fsck_clean(img: &[u8], scratch: &Path) -> bool {
    std::fs::write(scratch, img).expect("write");
    common::code(&common::tool(
        "e2fsck",
        &["-fn", scratch.to_str().expect("path")],
    )) == 0
}

/// What one mutant came to.
#[derive(Default)]
struct Outcome {
    damaged: bool,
    repaired: bool,
    judged: bool,
    kept_checked: bool,
    failed: Vec<String>,
}

/// Mutant `k` of seed `name`: checked and repaired by the harness and,
/// one in [`ORACLE_EVERY`], judged by e2fsck beside `scratch`.
fn one_mutant(name: &str, base: &[u8], k: u64, oracle: bool, scratch: &Path) -> Outcome {
    let mut rng = mutate::Rng::new(k ^ (name.len() as u64) << 32 ^ fnv(name));
    let mut data = base.to_vec();
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(3) {
        ops.extend(mutate::mutate(&mut data, &mut rng, None));
    }
    let img = image::decode(&data).expect("an image input");
    let judge = oracle && k % ORACLE_EVERY == 0;
    let mut out = Outcome::default();
    match harness::exercise_keeping(&img, 1 + (k as usize % 2), judge) {
        Ok(o) => {
            out.damaged = o.damaged;
            out.repaired = o.repaired;
            if judge {
                out.judged = true;
                let theirs = e2fsck_clean(&img, scratch);
                if theirs == o.damaged {
                    out.failed.push(format!(
                        "{name} mutant {k} ({ops:?}): e2fsck -fn calls it {}, ext4chk {}",
                        if theirs { "clean" } else { "damaged" },
                        if o.damaged { "damaged" } else { "clean" }
                    ));
                }
                if let Some(after) = &o.after {
                    if !e2fsck_clean(after, scratch) {
                        out.failed.push(format!(
                            "{name} mutant {k} ({ops:?}): after ext4chk's repair e2fsck -fn finds errors"
                        ));
                    }
                    if let Some(lost) = lost_to_e2fsck(&img, after, scratch) {
                        out.kept_checked = true;
                        if !lost.is_empty() {
                            out.failed.push(format!(
                                "{name} mutant {k} ({ops:?}): e2fsck -fy keeps files ext4chk's repair does not: {}",
                                lost.join(", ")
                            ));
                        }
                    }
                }
            }
        }
        // EXT4CHK_FUZZ_KEEP=DIR keeps each failing mutant there, as an
        // input the fuzz target can run.
        Err(e) => out.failed.push(format!("{name} mutant {k} ({ops:?}): {e}")),
    }
    if !out.failed.is_empty() {
        keep(&format!("{name}-{k}"), &data);
    }
    out
}

#[test]
fn mutated_seed_images_are_checked_and_repaired_consistently() {
    let seeds = inputs("fuzz/corpus/check");
    assert!(seeds.len() >= 10, "{} seeds", seeds.len());
    let oracle = common::have_all(&["e2fsck", "debugfs"]);
    let work = std::env::temp_dir().join(format!("ext4chk-mutation-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("work dir");
    let mut failed = Vec::new();
    let mut bases = Vec::new();
    for p in &seeds {
        let base = std::fs::read(p).expect("read");
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        // The seed itself must be clean.
        let img = image::decode(&base).expect("an image input");
        match harness::exercise(&img, 2) {
            Ok(o) if !o.damaged => {}
            Ok(_) => failed.push(format!("{name}: the seed is not clean")),
            Err(e) => failed.push(format!("{name}: {e}")),
        }
        bases.push((name, base));
    }
    // Mutants are independent: they run on every core, each with its own
    // scratch files, and are counted in a fixed order.
    let jobs: Vec<(usize, u64)> = (0..bases.len())
        .flat_map(|s| (0..PER_SEED).map(move |k| (s, k)))
        .collect();
    let outcomes = common::par_map(&jobs, |&(s, k)| {
        let (name, base) = &bases[s];
        one_mutant(name, base, k, oracle, &work.join(format!("{s}-{k}.img")))
    });
    let _ = std::fs::remove_dir_all(&work);
    let runs = outcomes.len();
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let damaged = count(|o| o.damaged);
    let repaired = count(|o| o.repaired);
    let judged = count(|o| o.judged);
    let kept_checked = count(|o| o.kept_checked);
    failed.extend(outcomes.into_iter().flat_map(|o| o.failed));
    eprintln!(
        "mutation: {runs} mutants of {} seeds, {damaged} found damaged, {repaired} repaired clean, \
         {judged} also judged by e2fsck, {kept_checked} of them with the files kept compared",
        seeds.len()
    );
    // Mutations that change nothing the checker looks at are possible but
    // must be the exception.
    assert!(
        damaged * 4 > runs,
        "only {damaged} of {runs} mutants are damaged"
    );
    assert!(
        failed.is_empty(),
        "{} failures:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The files `e2fsck -fy` keeps from `damaged` that ext4chk's repair
/// (`after`) does not, compared on images written beside `scratch`;
/// `None` when e2fsck's repair does not end clean (it keeps nothing
/// worth comparing) or debugfs cannot list the files.
fn lost_to_e2fsck(damaged: &[u8], after: &[u8], scratch: &Path) -> Option<Vec<String>> {
    let theirs = scratch.with_extension("e2fsck.img");
    let ours = scratch.with_extension("ours.img");
    let dir = scratch.with_extension("trees");
    std::fs::write(&theirs, damaged).expect("write");
    std::fs::write(&ours, after).expect("write");
    let t = theirs.to_str().expect("path");
    // e2fsck loops forever on a few mutants: bounded.
    let e2fsck = common::find_tool("e2fsck").expect("e2fsck");
    let fy = std::process::Command::new("timeout")
        .arg("20")
        .arg(e2fsck)
        .args(["-fy", t])
        .env("E2FSCK_CONFIG", "/dev/null")
        .output()
        .expect("e2fsck runs");
    let lost = if common::code(&fy) < 4 && common::code(&common::tool("e2fsck", &["-fn", t])) == 0 {
        common::files_lost(&theirs, &ours, &dir).map(|(lost, _)| lost)
    } else {
        None
    };
    let _ = std::fs::remove_file(&theirs);
    let _ = std::fs::remove_file(&ours);
    let _ = std::fs::remove_dir_all(&dir);
    lost
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// With EXT4CHK_FUZZ_KEEP=DIR, keeps a failing input there.
fn keep(name: &str, data: &[u8]) {
    if let Some(dir) = std::env::var_os("EXT4CHK_FUZZ_KEEP") {
        let _ = std::fs::write(Path::new(&dir).join(name), data);
    }
}
