#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The out-of-tree example (`examples/out-of-tree-substrate`, a Cargo project
//! outside the workspace) builds against this checkout, passes the
//! conformance suite and shows up in a bench report: the plugin API works
//! for a crate that edits nothing here.
//!
//! It runs `cargo run` on the example with the workspace's target directory,
//! so the dependencies compiled for the workspace are reused; the first run
//! compiles the submem crates once more for the example (minutes), later
//! runs take seconds. Set `SUBMEM_SKIP_OUT_OF_TREE=1` to skip it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The workspace's target directory: `CARGO_TARGET_DIR` when set (relative
/// to the workspace root, as cargo reads it), else `<workspace>/target`.
fn target_dir(workspace: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

/// Whether cargo sets `key` for the package whose test runs (and not for
/// cargo itself).
fn is_package_variable(key: &str) -> bool {
    key == "OUT_DIR"
        || key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_BIN_")
        || [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_MANIFEST_LINKS",
            "CARGO_CRATE_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
        ]
        .contains(&key)
}

#[test]
fn out_of_tree_example_passes_conformance_and_is_benched() {
    if std::env::var_os("SUBMEM_SKIP_OUT_OF_TREE").is_some() {
        eprintln!("skipped: SUBMEM_SKIP_OUT_OF_TREE is set");
        return;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().unwrap();
    let example = workspace.join("examples/out-of-tree-substrate");
    let out = tempfile::tempdir().unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    // Run from the example's folder: cargo reads `.cargo/config.toml` from
    // the directory it runs in, and the workspace's rustflags must apply for
    // its compiled dependencies to be reused.
    let mut command = Command::new(cargo);
    // Cargo gives this test its package's variables (`CARGO_MANIFEST_DIR`,
    // `CARGO_PKG_*`...). Some build scripts watch them (ring reruns when
    // `CARGO_MANIFEST_DIR` changes), so passing them on would rebuild those
    // dependencies here and again in the next ordinary build.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if is_package_variable(&key) {
            command.env_remove(key.as_ref());
        }
    }
    let output = command
        .current_dir(&example)
        .arg("run")
        .arg("--manifest-path")
        .arg(example.join("Cargo.toml"))
        .arg("--")
        .arg(out.path())
        .env("CARGO_TARGET_DIR", target_dir(&workspace))
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown with `--nocapture`: what cargo compiled, and how long it all took.
    eprintln!(
        "{stderr}example built and ran in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // After `cargo test --workspace` has built everything, a third-party crate
    // compiled here means the example resolved other features than the
    // workspace: say which, since each drags a rebuild of what is above it.
    // (Not a failure: `cargo test -p` resolves a narrower feature set.)
    let rebuilt: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Compiling "))
        .filter(|c| !c.contains("(/") && !c.contains("(file:"))
        .collect();
    if !rebuilt.is_empty() {
        eprintln!(
            "note: the example compiled {} dependencies the workspace build did not share \
             ({}); compare their features with the build-sharing block of its Cargo.toml",
            rebuilt.len(),
            rebuilt.join(", ")
        );
    }
    assert!(
        output.status.success(),
        "the example failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("[1/4] conformance suite: passed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| keyword-echo | example |"),
        "no keyword-echo row in the report:\n{stdout}"
    );
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        report.contains("| keyword-echo |") && report.contains("| m2 |"),
        "{report}"
    );
}

/// A manifest's `[profile]` table.
fn profiles(manifest: &str) -> toml::Table {
    let parsed: toml::Table = manifest.parse().unwrap();
    parsed["profile"].as_table().cloned().unwrap()
}

/// Takes the `[profile.dev.package.submem-*]` tables out of `profiles`.
fn take_submem_tables(profiles: &mut toml::Table) -> toml::Table {
    let Some(packages) = profiles
        .get_mut("dev")
        .and_then(|dev| dev.get_mut("package"))
        .and_then(|p| p.as_table_mut())
    else {
        return toml::Table::new();
    };
    let names: Vec<String> = packages
        .keys()
        .filter(|name| name.starts_with("submem-"))
        .cloned()
        .collect();
    names
        .into_iter()
        .filter_map(|name| packages.remove(&name).map(|table| (name, table)))
        .collect()
}

/// The example copies the workspace's profiles so that its build reuses the
/// workspace's compiled dependencies; a profile edited in one place only
/// would make the test above compile every dependency again (minutes). The
/// submem crates are members there (`[profile.dev]` and their own tables)
/// and dependencies here (under `"*"`), so the example gives each one a
/// table with the settings it gets as a member.
#[test]
fn the_example_profiles_match_the_workspace() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |p: &str| std::fs::read_to_string(workspace.join(p)).unwrap();
    let mut ours = profiles(&read("Cargo.toml"));
    let mut example = profiles(&read("examples/out-of-tree-substrate/Cargo.toml"));
    let our_members = take_submem_tables(&mut ours);
    let example_members = take_submem_tables(&mut example);
    assert_eq!(
        example, ours,
        "copy the workspace's [profile.*] tables into the example"
    );

    let dev = ours["dev"].as_table().unwrap();
    for (name, _) in &our_members {
        assert!(
            example_members.contains_key(name),
            "the workspace has a table for {name}; the example needs one too"
        );
    }
    for (name, table) in &example_members {
        for key in ["opt-level", "debug"] {
            let member = our_members
                .get(name)
                .and_then(|t| t.get(key))
                .or_else(|| dev.get(key));
            assert_eq!(
                table.get(key),
                member,
                "[profile.dev.package.{name}] {key}: the example must give the member's setting"
            );
        }
    }
}
