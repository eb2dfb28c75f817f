//! The workspace's layering, read from its sources: inside a crate, no two
//! top-level modules name each other (`crate::a::…` in `b` and
//! `crate::b::…` in `a`, or the same through a name the crate root
//! re-exports). A pair like that is one module split in two files; the fix
//! is to move what they share to where it belongs, so that dependencies
//! between modules go one way.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// `crates/<name>` and `crates/substrates/<name>`: every crate with a `src`.
fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for parent in [root.join("crates"), root.join("crates/substrates")] {
        let Ok(entries) = fs::read_dir(&parent) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().join("src").is_dir() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its test module and comment lines.
fn code(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Identifiers following `prefix` in `text` (`crate::` → `runner`, `Foo`).
fn idents_after<'a>(text: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.match_indices(prefix).filter_map(move |(i, _)| {
        let rest = &text[i + prefix.len()..];
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (n > 0).then(|| &rest[..n])
    })
}

/// Names the crate root re-exports, with the module each comes from
/// (`pub use runner::{run, RunOptions};`).
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !name.is_empty() && name != "self" {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The modules each top-level module of the crate at `dir` names.
fn module_edges(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let src = dir.join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let reexports = root_reexports(&code(&lib));
    let is_module = |m: &str| src.join(format!("{m}.rs")).is_file() || src.join(m).is_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap_or(&file);
        let Some(top) = rel.components().next() else {
            continue;
        };
        let top = top.as_os_str().to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if matches!(top.as_str(), "lib" | "main") || !is_module(&top) {
            continue;
        }
        let text = code(&fs::read_to_string(&file).unwrap_or_default());
        let mut named = BTreeSet::new();
        for id in idents_after(&text, "crate::") {
            if is_module(id) {
                named.insert(id.to_string());
            } else if let Some(m) = reexports.get(id) {
                named.insert(m.clone());
            }
        }
        for group in text.split("use crate::{").skip(1) {
            let group = group.split(';').next().unwrap_or("");
            for id in group.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if let Some(m) = reexports.get(id) {
                    named.insert(m.clone());
                }
            }
        }
        named.remove(&top);
        edges.entry(top).or_default().extend(named);
    }
    edges
}

#[test]
fn no_two_modules_of_a_crate_name_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let crates = crate_dirs(&root);
    assert!(crates.len() >= 15, "found only {} crates", crates.len());
    let mut cycles = Vec::new();
    for dir in &crates {
        let edges = module_edges(dir);
        for (a, outs) in &edges {
            for b in outs {
                if a < b && edges.get(b).is_some_and(|o| o.contains(a)) {
                    let name = dir.file_name().unwrap_or_default().to_string_lossy();
                    cycles.push(format!("{name}: {a} <-> {b}"));
                }
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that name each other: {cycles:#?}"
    );
}

#[test]
fn the_scan_sees_a_pair_that_names_each_other() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src");
    fs::create_dir_all(&src).expect("src");
    fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use b::Thing;\n").expect("lib");
    fs::write(src.join("a.rs"), "use crate::Thing;\n").expect("a");
    fs::write(
        src.join("b.rs"),
        "// crate::c in a comment\nuse crate::a::f;\n",
    )
    .expect("b");
    let edges = module_edges(dir.path());
    assert!(
        edges["a"].contains("b") && edges["b"].contains("a"),
        "{edges:?}"
    );
}
