//! Before an interactive repair asks anything: the whole repair, as a
//! dry run found it, grouped by kind of problem, and a choice of how to go
//! on. e2fsck can only ask in order, without showing what is coming.

use std::collections::BTreeMap;
use std::io::Write;

use check_core::Finding;

use crate::ask::read_byte;

/// How many places each kind of problem names before "and N more".
const EXAMPLES: usize = 3;

/// Where a finding is, in a few words: a path when the check could name
/// one, else the inode, block or group.
fn place(f: &Finding) -> Option<String> {
    if let Some(p) = &f.ino_path {
        return Some(p.clone());
    }
    if let (Some(d), Some(name)) = (&f.dir_path, &f.name) {
        let name = check_core::problem::printable(name);
        return Some(format!("{}/{}", d.trim_end_matches('/'), name));
    }
    if let Some(p) = &f.dir_path {
        return Some(p.clone());
    }
    if let Some(i) = f.ino {
        return Some(format!("inode {i}"));
    }
    if let Some(g) = f.group {
        return Some(format!("group {g}"));
    }
    f.blk.map(|b| format!("block {b}"))
}

/// The summary of the fixes a repair would make.
pub fn summary(fixes: &[&Finding]) -> String {
    let mut kinds: BTreeMap<(check_core::Pass, &'static str), Vec<&Finding>> = BTreeMap::new();
    for f in fixes {
        kinds
            .entry((f.code.pass(), f.code.name()))
            .or_default()
            .push(f);
    }
    let mut out = format!(
        "The repair would fix {} problem{} of {} kind{}:\n",
        fixes.len(),
        if fixes.len() == 1 { "" } else { "s" },
        kinds.len(),
        if kinds.len() == 1 { "" } else { "s" }
    );
    for ((_, name), fs) in &kinds {
        let places: Vec<String> = fs.iter().filter_map(|f| place(f)).collect();
        let mut shown: Vec<String> = places.iter().take(EXAMPLES).cloned().collect();
        if places.len() > EXAMPLES {
            shown.push(format!("and {} more", places.len() - EXAMPLES));
        }
        let answer = fs[0].code.prompt().would();
        out.push_str(&format!(
            "  {:>6}  {name} ({})",
            fs.len(),
            answer.to_lowercase()
        ));
        if !shown.is_empty() {
            out.push_str(&format!(": {}", shown.join(", ")));
        }
        out.push('\n');
    }
    out
}

/// What the person chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Fix everything, asking nothing more.
    All,
    /// Ask about each problem.
    OneByOne,
    /// Change nothing.
    Quit,
}

/// Asks how to go on: `a` all, `o` (or Enter, or `y`) one by one, `q` or
/// `n` quit. The end of the input or Ctrl-C quits.
pub fn choose() -> Choice {
    let mut out = std::io::stdout();
    let _ = write!(
        out,
        "Fix [a]ll of them, go [o]ne by one (as e2fsck asks), or [q]uit without changes <o>? "
    );
    let _ = out.flush();
    loop {
        let (choice, word) = match read_byte() {
            Some(b'a' | b'A') => (Choice::All, "all"),
            Some(b'o' | b'O' | b'y' | b'Y' | b'\n' | b'\r' | b' ') => {
                (Choice::OneByOne, "one by one")
            }
            Some(b'q' | b'Q' | b'n' | b'N' | 3) | None => (Choice::Quit, "quit"),
            Some(_) => continue,
        };
        let _ = writeln!(out, "{word}");
        return choice;
    }
}
