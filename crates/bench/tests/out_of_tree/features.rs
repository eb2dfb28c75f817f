//! Feature sharing with the workspace's test build, from `cargo tree`: which
//! packages another build (the out-of-tree example's copy, the Python
//! extension) would build with other features than `cargo test --workspace`
//! does, and the dependency entries that ask for the workspace's.
//!
//! A crate built with other features is another artifact, so such a build
//! compiles it again, and everything above it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Each package as `cargo tree` names it (`serde v1.0.229`,
/// `submem-core v0.1.0 (/…/crates/core)`, `thiserror-impl v2.0.21
/// (proc-macro)`), with every set of features it is built with (a package
/// built for the host and for the target can have two).
pub type Resolved = BTreeMap<String, BTreeSet<BTreeSet<String>>>;

/// `cargo tree <args>`, run in the workspace, as [`Resolved`].
pub fn resolved(workspace: &Path, args: &[&str]) -> Resolved {
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(workspace)
        .args(["tree", "--prefix", "none", "--format", "{p}|{f}"])
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages = Resolved::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let line = line.trim_end_matches(" (*)");
        if let Some((package, features)) = line.split_once('|') {
            let features = features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(String::from)
                .collect();
            packages
                .entry(package.to_string())
                .or_default()
                .insert(features);
        }
    }
    packages
}

/// Packages of `build` built with a feature set the workspace's test build
/// (`workspace`) does not build them with, each with the widest set the
/// workspace uses: what to ask for so that `build` reuses its artifacts.
/// Packages the workspace does not have are left out.
pub fn unshared(build: &Resolved, workspace: &Resolved) -> BTreeMap<String, BTreeSet<String>> {
    build
        .iter()
        .filter_map(|(package, sets)| {
            let ours = workspace.get(package)?;
            if sets.iter().all(|s| ours.contains(s)) {
                return None;
            }
            let widest = ours.iter().max_by_key(|s| s.len())?;
            Some((package.clone(), widest.clone()))
        })
        .collect()
}

/// Name and version of the package `cargo tree` names `package`.
fn name_and_version(package: &str) -> (&str, &str) {
    let mut words = package.split_whitespace();
    let name = words.next().unwrap();
    (name, words.next().unwrap().trim_start_matches('v'))
}

/// A dependency entry asking for exactly `features` of the package `cargo
/// tree` names `package` (nothing uses it). Its key is the package's name
/// (cargo refuses one package under two names, and the example may name it
/// already), or name and version where two versions of one package are
/// asked for.
fn sharing_entry(package: &str, features: &BTreeSet<String>, versioned_key: bool) -> String {
    let (name, version) = name_and_version(package);
    let source = match package.split_once(" (/") {
        Some((_, path)) => format!(
            "path = {:?}",
            format!("/{}", path.split(')').next().unwrap())
        ),
        None => format!("version = \"={version}\""),
    };
    let key: String = if versioned_key {
        format!("{name}-{version}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    } else {
        name.to_string()
    };
    let features: Vec<String> = features.iter().map(|f| format!("{f:?}")).collect();
    format!(
        "{key} = {{ package = \"{name}\", {source}, default-features = false, features = [{}] }}\n",
        features.join(", ")
    )
}

/// Writes the copy's manifest: the example's, plus dependencies that ask
/// for the workspace's features of every package the copy would build with
/// others. The workspace turns on more features of some shared dependencies
/// (its server, MCP and Python crates and its dev-dependencies do) than the
/// example would, and a crate built with other features is another
/// artifact: without them the example rebuilt serde, tokio and tracing,
/// then candle, tantivy and everything above them (~4.5 minutes on 2
/// cores). Both the copy's test build and its run (which leaves out its
/// dev-dependencies) are held to the workspace's, so they also resolve
/// alike. Asking for a feature can bring in more packages, so this repeats
/// until nothing is left to ask for. The entries go in a target table that
/// always applies (`cfg(all())`), where a package the example names in
/// `[dependencies]` is not a duplicate key. Returns the entries added.
pub fn sharing_dependencies(workspace: &Path, copy: &Path, example_manifest: &str) -> String {
    let ours = resolved(workspace, &["--workspace"]);
    let manifest_path = copy.join("Cargo.toml");
    let manifest_arg = manifest_path.to_str().unwrap();
    let mut asked: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for _ in 0..10 {
        let names: Vec<&str> = asked.keys().map(|p| name_and_version(p).0).collect();
        let entries: String = asked
            .iter()
            .map(|(package, features)| {
                let name = name_and_version(package).0;
                let versions = names.iter().filter(|n| **n == name).count();
                sharing_entry(package, features, versions > 1)
            })
            .collect();
        let section = format!(
            "\n# Added by crates/bench/tests/out_of_tree.rs: the workspace's features.\n\
             [target.'cfg(all())'.dependencies]\n{entries}"
        );
        std::fs::write(&manifest_path, format!("{example_manifest}{section}")).unwrap();
        let mut more = BTreeMap::new();
        for edges in ["normal,build,dev", "normal,build"] {
            let copy_build = resolved(
                workspace,
                &[
                    "--manifest-path",
                    manifest_arg,
                    "--features",
                    "cli",
                    "-e",
                    edges,
                ],
            );
            more.extend(
                unshared(&copy_build, &ours)
                    .into_iter()
                    .filter(|(package, features)| asked.get(package) != Some(features)),
            );
        }
        if more.is_empty() {
            return entries;
        }
        asked.extend(more);
    }
    panic!("the copy's features did not settle after 10 rounds: {asked:?}");
}
