//! The layout rules of the workspace's source, checked on every test run:
//!
//! * the files of each crate form a DAG: no file imports (through `use`
//!   or a path such as `crate::a::b`) from a file that imports, directly
//!   or not, from it. The crate root (`lib.rs`) only declares modules and
//!   re-exports them, so a file that imports `crate::Name` instead of the
//!   module that defines `Name` closes a circle through the root;
//! * no source file of the engine (`evflow-core`, `evflow-workloads`) is
//!   longer than [`MAX_ENGINE_LINES`] lines.
//!
//! The import scan is lexical (comments, strings and character literals
//! removed first), which is all the crates' conventions need: module
//! declarations are plain `mod name;` lines and imports are `use` items or
//! paths starting with `crate`, `super`, `self` or a child module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_ENGINE_LINES: usize = 600;
const ENGINE_CRATES: [&str; 2] = ["evflow-core", "evflow-workloads"];

fn workspace_crates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates folder")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file (`src/a/mod.rs` and `src/a.rs`: `a`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "lib" | "main" | "mod") {
        parts.push(stem.to_string());
    }
    parts
}

/// The text with comments, string literals and character literals blanked
/// (lines kept), so that braces and paths inside them do not count.
fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_newlines = |s: &[char], out: &mut String| {
        for &c in s {
            if c == '\n' {
                out.push('\n');
            }
        }
    };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = i;
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
            keep_newlines(&b[start..i.min(b.len())], &mut out);
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // Raw string: r"..." or r#"..."#.
            let start = i;
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
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
            keep_newlines(&b[start..i.min(b.len())], &mut out);
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            keep_newlines(&b[start..i.min(b.len())], &mut out);
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
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
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Expands a `use` tree (`a::{b, c::{d, e as f}}`) into its paths.
fn expand(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts
    }
    // `a as b` keeps `a`: mark the renaming, then drop the spaces.
    let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree: String = tree.replace(" as ", "@").replace(' ', "");
    let mut out = Vec::new();
    for part in split_top(&tree) {
        if part.is_empty() {
            continue;
        }
        if let Some(open) = part.find('{') {
            let prefix: Vec<String> = part[..open]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            let inner = &part[open + 1..part.rfind('}').expect("closing brace")];
            for rest in expand(inner) {
                let mut p = prefix.clone();
                p.extend(rest);
                out.push(p);
            }
        } else {
            let path = part.split('@').next().unwrap_or(part);
            out.push(
                path.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            );
        }
    }
    out
}

/// Every path the text imports or names (`use` trees, and inline paths
/// starting with `crate::`, `super::` or `self::`), with the module each
/// appears in (inline `mod name { .. }` blocks nest).
fn paths_in(text: &str, module: &[String]) -> Vec<(Vec<String>, Vec<String>)> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    // Module stack: (module path, brace depth at which its block closes,
    // whether it is a `#[cfg(test)]` module, whose imports do not count).
    let mut stack: Vec<(Vec<String>, i32, bool)> = vec![(module.to_vec(), -1, false)];
    let mut depth = 0;
    let mut i = 0;
    let word_at = |i: usize| -> Option<String> {
        if i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':') {
            return None;
        }
        let end = (i..chars.len())
            .find(|&j| !is_ident(chars[j]))
            .unwrap_or(chars.len());
        (end > i).then(|| chars[i..end].iter().collect())
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            depth += 1;
            i += 1;
            continue;
        }
        if c == '}' {
            depth -= 1;
            if stack.last().is_some_and(|(_, d, _)| *d == depth) {
                stack.pop();
            }
            i += 1;
            continue;
        }
        let Some(word) = word_at(i) else {
            i += 1;
            continue;
        };
        let current = stack.last().expect("module stack").0.clone();
        let in_test = stack.iter().any(|(_, _, test)| *test);
        let after = i + word.chars().count();
        if word == "mod" {
            // `mod name {` opens an inline module.
            let rest: String = chars[after..].iter().take(200).collect();
            let rest = rest.trim_start();
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            let tail = rest[name.len()..].trim_start();
            if !name.is_empty() && tail.starts_with('{') {
                let before: String = chars[..i].iter().collect();
                let test = before.trim_end().ends_with("#[cfg(test)]");
                let mut m = current.clone();
                m.push(name);
                stack.push((m, depth, test));
            }
        } else if word == "use" {
            let end = (after..chars.len())
                .find(|&j| chars[j] == ';')
                .unwrap_or(chars.len());
            let tree: String = chars[after..end].iter().collect();
            if !in_test {
                for p in expand(&tree) {
                    found.push((current.clone(), p));
                }
            }
            i = end;
            continue;
        } else if matches!(word.as_str(), "crate" | "super" | "self")
            && chars.get(after) == Some(&':')
            && chars.get(after + 1) == Some(&':')
        {
            let end = (after..chars.len())
                .find(|&j| !(is_ident(chars[j]) || chars[j] == ':'))
                .unwrap_or(chars.len());
            let path: String = chars[i..end].iter().collect();
            if !in_test {
                found.push((
                    current.clone(),
                    path.split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                ));
            }
            i = end;
            continue;
        }
        i = after;
    }
    found
}

/// The module a path leads to, from the module it is written in (`None`:
/// outside the crate).
fn resolve(
    from: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut segs = path.iter().peekable();
    let mut at: Vec<String> = match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        Some("self") => {
            segs.next();
            from.to_vec()
        }
        Some("super") => {
            let mut m = from.to_vec();
            while segs.peek().map(|s| s.as_str()) == Some("super") {
                segs.next();
                m.pop();
            }
            m
        }
        Some(first) => {
            let mut child = from.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None; // an external crate or `std`
            }
            from.to_vec()
        }
        None => return None,
    };
    for s in segs {
        let mut next = at.clone();
        next.push(s.clone());
        if !modules.contains(&next) {
            break;
        }
        at = next;
    }
    Some(at)
}

struct CrateGraph {
    /// File (relative to the crate) → files it imports from.
    edges: BTreeMap<String, BTreeSet<String>>,
}

fn crate_graph(src: &Path) -> CrateGraph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    // Every module (file or inline block) → the file that holds it.
    let mut owner: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut texts = Vec::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "main.rs") && file.parent() != Some(src) {
            continue;
        }
        let module = module_of(src, file);
        let name = file
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        let text = strip(&std::fs::read_to_string(file).expect("readable source"));
        owner.insert(module.clone(), name.clone());
        texts.push((name, module, text));
    }
    // Inline modules belong to their file.
    for (name, module, text) in &texts {
        for (m, _) in paths_in(text, module) {
            owner.entry(m).or_insert_with(|| name.clone());
        }
    }
    let modules: BTreeSet<Vec<String>> = owner.keys().cloned().collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, module, text) in &texts {
        let out = edges.entry(name.clone()).or_default();
        for (from, path) in paths_in(text, module) {
            if let Some(target) = resolve(&from, &path, &modules) {
                let file = &owner[&target];
                if file != name {
                    out.insert(file.clone());
                }
            }
        }
    }
    CrateGraph { edges }
}

/// A circle of the graph, if any (as the list of files around it).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        mark: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        mark.insert(n.to_string(), Mark::Open);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match mark.get(m).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let at = stack.iter().position(|s| s == m).expect("on the stack");
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(m, edges, mark, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark.insert(n.to_string(), Mark::Done);
        None
    }
    let mut mark = BTreeMap::new();
    for n in edges.keys() {
        if mark.get(n).copied().unwrap_or(Mark::New) == Mark::New {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, edges, &mut mark, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

fn crates() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(workspace_crates())
        .expect("crates folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn files_of_every_crate_form_a_dag() {
    let mut circles = Vec::new();
    for dir in crates() {
        let graph = crate_graph(&dir.join("src"));
        if let Some(cycle) = find_cycle(&graph.edges) {
            circles.push(format!(
                "{}: {}",
                dir.file_name().expect("name").to_string_lossy(),
                cycle.join(" -> ")
            ));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles between files:\n  {}",
        circles.join("\n  ")
    );
}

#[test]
fn engine_files_are_short() {
    let mut long = Vec::new();
    for dir in crates() {
        let name = dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !ENGINE_CRATES.contains(&name.as_str()) {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let lines = std::fs::read_to_string(&file)
                .expect("readable")
                .lines()
                .count();
            if lines > MAX_ENGINE_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "engine source files over {MAX_ENGINE_LINES} lines:\n  {}",
        long.join("\n  ")
    );
}

/// The checker itself: it must see circles through the crate root, `super`,
/// grouped imports and inline paths, and ignore imports in comments and
/// strings, imports of other crates and a test module's `use super::*`.
#[test]
fn checker_sees_circles() {
    let dir = std::env::temp_dir().join(format!("evflow-layout-{}", std::process::id()));
    let src = dir.join("src");
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let cycle_of = |src: &Path| find_cycle(&crate_graph(src).edges);

    write("lib.rs", "mod a;\nmod b;\npub use a::A;\npub use b::B;\n");
    write(
        "a.rs",
        "use std::fmt;\n// use crate::b::B;\nconst S: &str = \"crate::b::B {\";\npub struct A;\n#[cfg(test)]\nmod tests { use super::*; use crate::b::B; }\n",
    );
    write("b/mod.rs", "mod c;\nuse crate::a::A;\npub struct B(A);\n");
    write("b/c.rs", "use super::B;\nfn f(_: B) {}\n");
    assert_eq!(cycle_of(&src), None);

    // Through the root's re-export: a -> lib.rs -> b -> a.
    write("a.rs", "use crate::{B as Bee};\npub struct A;\n");
    let c = cycle_of(&src).expect("circle through lib.rs");
    assert!(c.contains(&"lib.rs".to_string()), "{c:?}");
    write("a.rs", "pub struct A;\n");
    assert_eq!(cycle_of(&src), None);

    // Parent and child.
    write("b/c.rs", "use super::B;\npub struct C;\n");
    write(
        "b/mod.rs",
        "mod c;\nuse crate::a::A;\nuse c::C;\npub struct B(A, C);\n",
    );
    let c = cycle_of(&src).expect("circle b <-> b/c");
    assert!(c.contains(&"b/c.rs".to_string()), "{c:?}");

    // An inline path.
    write("b/mod.rs", "mod c;\npub struct B;\n");
    write("b/c.rs", "pub struct C(super::B);\n");
    write("a.rs", "pub struct A(crate::b::c::C);\n");
    assert_eq!(cycle_of(&src), None);
    write("b/mod.rs", "mod c;\npub struct B(crate::a::A);\n");
    assert!(cycle_of(&src).is_some());
    std::fs::remove_dir_all(&dir).ok();
}
