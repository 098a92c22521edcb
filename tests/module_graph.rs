//! No circle of imports among any crate's modules.
//!
//! Each source file is one module (`pass1/inode.rs` is `pass1::inode`). A
//! module depends on another when its code names it: a `use` or a path
//! starting with `crate::`, `super::`, `self::` or one of its own child
//! modules. Names a module only re-exports (`pub use`) are followed to the
//! module that defines them, and `#[cfg(test)]` modules, comments and
//! string literals are not read. The test fails on any strongly connected
//! set of two or more modules and prints each one.
//!
//! `EXT4CHK_MODULE_GRAPH=1 cargo test --test module_graph -- --nocapture`
//! prints every crate's edges.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// One crate's modules: path (`a::b`, root is `""`) to cleaned source.
struct Crate {
    name: String,
    modules: BTreeMap<String, String>,
}

fn crate_roots() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("ext4chk".to_string(), root.join("src"))];
    let mut dirs: Vec<_> = fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, d.join("src")));
    }
    out
}

fn load(name: &str, src: &Path) -> Crate {
    let mut modules = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    let has_lib = src.join("lib.rs").is_file();
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).expect("source dir is readable") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "bin") {
                    stack.push(p);
                }
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap();
            let mut segs: Vec<String> = rel
                .iter()
                .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            let last = segs.last().cloned().unwrap_or_default();
            // A crate with both a library and a binary: the binary's root
            // is a crate of its own that reaches the library by name.
            if segs.len() == 1 && last == "main" && has_lib {
                continue;
            }
            if last == "mod" || (segs.len() == 1 && (last == "lib" || last == "main")) {
                segs.pop();
            }
            let text = fs::read_to_string(&p).expect("source is readable");
            modules.insert(segs.join("::"), clean(&text));
        }
    }
    Crate {
        name: name.to_string(),
        modules,
    }
}

/// The source without comments, string and char literals, and without
/// `#[cfg(test)]` items.
fn clean(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < b.len() {
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    strip_test_items(&out)
}

/// Drops each item under `#[cfg(test)]` up to its closing brace or `;`.
fn strip_test_items(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, ch) in after.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path the module's code names: `use` trees expanded, plus the
/// paths in its code, each as its segments. Re-exports are returned apart.
fn paths(src: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let mut uses = Vec::new();
    let mut reexports = Vec::new();
    let bytes: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident(bytes[i]) || (i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        let word: String = bytes[start..i].iter().collect();
        if word == "use" {
            let end = (i..bytes.len())
                .find(|&k| bytes[k] == ';')
                .unwrap_or(bytes.len());
            let tree: String = bytes[i..end].iter().collect();
            let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
            let public = src[..byte_index(src, start)]
                .trim_end()
                .rsplit(|c: char| c.is_whitespace() || c == ';' || c == '}' || c == '{')
                .next()
                .is_some_and(|w| w.starts_with("pub"));
            let mut found = Vec::new();
            expand_use(&tree, Vec::new(), &mut found);
            if public {
                reexports.extend(found);
            } else {
                uses.extend(found);
            }
            i = end;
            continue;
        }
        // A path: word(::word)*
        let mut segs = vec![word];
        while bytes.get(i) == Some(&':') && bytes.get(i + 1) == Some(&':') {
            let s = i + 2;
            let mut e = s;
            while e < bytes.len() && is_ident(bytes[e]) {
                e += 1;
            }
            if e == s {
                break;
            }
            segs.push(bytes[s..e].iter().collect());
            i = e;
        }
        if segs.len() > 1 {
            uses.push(segs);
        }
    }
    (uses, reexports)
}

fn byte_index(s: &str, char_index: usize) -> usize {
    s.char_indices().nth(char_index).map_or(s.len(), |(b, _)| b)
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e` (without spaces).
fn expand_use(tree: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::").trim();
    if let Some(open) = tree.find('{') {
        let head = &tree[..open];
        let mut base = prefix.clone();
        base.extend(
            head.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut last = 0;
        for (k, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[last..k], base.clone(), out);
                    last = k + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[last..], base, out);
        return;
    }
    let mut p = prefix;
    let item = tree.split(" as ").next().unwrap_or(tree);
    p.extend(
        item.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    );
    if !p.is_empty() {
        out.push(p);
    }
}

fn join(base: &str, seg: &str) -> String {
    if base.is_empty() {
        seg.to_string()
    } else {
        format!("{base}::{seg}")
    }
}

fn parent(m: &str) -> String {
    m.rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string())
}

/// The module a path names, walking down as far as modules exist and
/// then through re-exports.
fn resolve(
    cr: &Crate,
    reexp: &BTreeMap<(String, String), String>,
    here: &str,
    segs: &[String],
) -> Option<String> {
    let mut at;
    let mut k = 0;
    match segs[0].as_str() {
        "crate" => {
            at = String::new();
            k = 1;
        }
        "self" => {
            at = here.to_string();
            k = 1;
        }
        "super" => {
            at = here.to_string();
            while segs.get(k).is_some_and(|s| s == "super") {
                at = parent(&at);
                k += 1;
            }
        }
        first => {
            let child = join(here, first);
            if cr.modules.contains_key(&child) {
                at = here.to_string();
            } else if here.is_empty() {
                return None;
            } else {
                // A sibling reached by a bare name only in 2015 code.
                return None;
            }
        }
    }
    while let Some(s) = segs.get(k) {
        let child = join(&at, s);
        if cr.modules.contains_key(&child) {
            at = child;
            k += 1;
            continue;
        }
        if let Some(def) = reexp.get(&(at.clone(), s.clone())) {
            at = def.clone();
        }
        break;
    }
    Some(at)
}

fn graph(cr: &Crate) -> Graph {
    // Re-exports first: (module, name) → defining module.
    let mut reexp = BTreeMap::new();
    for _ in 0..4 {
        for (m, src) in &cr.modules {
            for segs in paths(src).1 {
                let Some(name) = segs.last().cloned() else {
                    continue;
                };
                if name == "*" {
                    continue;
                }
                if let Some(def) = resolve(cr, &reexp, m, &segs) {
                    if def != *m {
                        reexp.insert((m.clone(), name), def);
                    }
                }
            }
        }
    }
    let mut g = Graph::new();
    for (m, src) in &cr.modules {
        let e = g.entry(m.clone()).or_default();
        for segs in paths(src).0 {
            if let Some(t) = resolve(cr, &reexp, m, &segs) {
                if t != *m {
                    e.insert(t);
                }
            }
        }
    }
    g
}

/// Tarjan's strongly connected components with two or more members.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct St<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        on: BTreeSet<&'a str>,
        stack: Vec<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(st: &mut St<'a>, v: &'a str) {
        st.index.insert(v, st.next);
        st.low.insert(v, st.next);
        st.next += 1;
        st.stack.push(v);
        st.on.insert(v);
        let g = st.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !st.index.contains_key(w) {
                visit(st, w);
                let lw = st.low[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if st.on.contains(w) {
                let iw = st.index[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                st.out.push(comp);
            }
        }
    }
    let mut st = St {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on: BTreeSet::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !st.index.contains_key(v.as_str()) {
            visit(&mut st, v);
        }
    }
    st.out
}

fn name(m: &str) -> &str {
    if m.is_empty() {
        "(root)"
    } else {
        m
    }
}

#[test]
fn no_module_cycles_in_any_crate() {
    let show = std::env::var_os("EXT4CHK_MODULE_GRAPH").is_some();
    let mut bad = Vec::new();
    for (n, src) in crate_roots() {
        let cr = load(&n, &src);
        let g = graph(&cr);
        if show {
            println!("## {}", cr.name);
            for (m, ts) in &g {
                let ts: Vec<_> = ts.iter().map(|t| name(t)).collect();
                println!("{} -> {}", name(m), ts.join(", "));
            }
        }
        for c in cycles(&g) {
            let c: Vec<_> = c.iter().map(|m| name(m)).collect();
            bad.push(format!(
                "{}: {} modules: {}",
                cr.name,
                c.len(),
                c.join(", ")
            ));
        }
    }
    assert!(bad.is_empty(), "module cycles:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle() {
    let cr = Crate {
        name: "t".into(),
        modules: [
            ("", "mod a; mod b;"),
            ("a", "use crate::b::f; // crate::c\n pub fn g() {}"),
            ("b", "pub fn f() { super::a::g(); let s = \"crate::c\"; }"),
            ("c", "#[cfg(test)]\nmod tests { use crate::a; }"),
        ]
        .into_iter()
        .map(|(m, s)| (m.to_string(), clean(s)))
        .collect(),
    };
    let g = graph(&cr);
    assert_eq!(g["a"], BTreeSet::from(["b".to_string()]));
    assert_eq!(g["b"], BTreeSet::from(["a".to_string()]));
    assert!(g["c"].is_empty());
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}

#[test]
fn reexports_lead_to_the_defining_module() {
    let cr = Crate {
        name: "t".into(),
        modules: [
            ("", "pub mod a; pub mod b; pub use a::Thing;"),
            ("a", "pub struct Thing; fn x() { crate::b::y(); }"),
            ("b", "use crate::{Thing, a::{self}};\n pub fn y() {}"),
        ]
        .into_iter()
        .map(|(m, s)| (m.to_string(), clean(s)))
        .collect(),
    };
    let g = graph(&cr);
    assert_eq!(g["b"], BTreeSet::from(["a".to_string()]));
    assert!(g[""].is_empty());
    assert_eq!(cycles(&g).len(), 1);
}
