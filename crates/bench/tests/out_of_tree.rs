#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The out-of-tree example (`examples/out-of-tree-substrate`, a Cargo project
//! outside the workspace) builds against this checkout, passes its
//! conformance test, and its binary (the whole `submem` command line with
//! the plugin registered, `--features cli`) benches it next to `m2`: the
//! plugin API works for a crate that edits nothing here.
//!
//! The example's `Cargo.toml` is what a user's would be: no profiles, only
//! the features it needs. Built as it is, it would compile its dependencies
//! again (a user's project has its own target directory anyway). This test
//! builds a copy under the workspace's target directory that reuses the
//! workspace's compiled artifacts: same versions (the workspace's
//! `Cargo.lock`), same features (derived from `cargo tree`, see
//! [`features::sharing_dependencies`]), same
//! profiles (the workspace's, passed with `--config`), same rustflags (cargo
//! runs in the workspace, so `.cargo/config.toml` applies) and the same
//! target directory. After a `cargo test --workspace` it compiles no
//! third-party crate; the submem crates are compiled once more for the copy
//! (they are path dependencies of another root there, which cargo
//! fingerprints apart: about 1.5 minutes on 2 cores), and stay in the target
//! directory, so later runs compile only what changed. Set
//! `SUBMEM_SKIP_OUT_OF_TREE=1` to skip it.
//!
//! The Python package's test build shares the workspace's artifacts the same
//! way, from a feature list its manifest must spell out; the last test here
//! holds that list to what `cargo tree` says the workspace builds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

#[path = "out_of_tree/features.rs"]
mod features;

use features::{resolved, sharing_dependencies, unshared};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

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

/// The names of the workspace's member packages (the `members` entries of
/// its manifest, a trailing `/*` read as every folder below).
fn member_names(workspace: &Path) -> Vec<String> {
    let manifest: toml::Table = read(&workspace.join("Cargo.toml")).parse().unwrap();
    let mut dirs = Vec::new();
    for entry in manifest["workspace"]["members"].as_array().unwrap() {
        let entry = entry.as_str().unwrap();
        match entry.strip_suffix("/*") {
            Some(parent) => {
                for d in std::fs::read_dir(workspace.join(parent)).unwrap() {
                    dirs.push(d.unwrap().path());
                }
            }
            None => dirs.push(workspace.join(entry)),
        }
    }
    let mut names: Vec<String> = dirs
        .iter()
        .filter(|d| d.join("Cargo.toml").is_file())
        .map(|d| {
            let m: toml::Table = read(&d.join("Cargo.toml")).parse().unwrap();
            m["package"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    names.sort();
    names
}

/// The profiles the copy is built with: the workspace's `[profile.*]`
/// tables, plus a `[profile.dev.package.<member>]` table for every member
/// package. The members are members there (`[profile.dev]` and their own
/// tables apply) and dependencies here (`"*"` would apply), so each gets the
/// settings it has as a member, for every key the `"*"` table sets.
fn sharing_profiles(workspace: &Path) -> toml::Table {
    let manifest: toml::Table = read(&workspace.join("Cargo.toml")).parse().unwrap();
    let mut profiles = manifest["profile"].as_table().unwrap().clone();
    let dev = profiles["dev"].as_table().unwrap().clone();
    let packages = dev
        .get("package")
        .and_then(|p| p.as_table())
        .cloned()
        .unwrap_or_default();
    let any = packages
        .get("*")
        .and_then(|t| t.as_table())
        .cloned()
        .unwrap_or_default();
    let mut tables = packages.clone();
    for name in member_names(workspace) {
        let own = packages
            .get(&name)
            .and_then(|t| t.as_table())
            .cloned()
            .unwrap_or_default();
        let mut table = own.clone();
        for key in any.keys() {
            if !table.contains_key(key) {
                let value = dev.get(key).unwrap_or_else(|| {
                    panic!(
                        "[profile.dev.package.\"*\"] sets {key} but [profile.dev] does not: \
                         set it there too, so that members as dependencies get their value"
                    )
                });
                table.insert(key.clone(), value.clone());
            }
        }
        tables.insert(name, toml::Value::Table(table));
    }
    profiles
        .get_mut("dev")
        .unwrap()
        .as_table_mut()
        .unwrap()
        .insert("package".into(), toml::Value::Table(tables));
    profiles
}

/// Copies `from` (files and folders) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The example's manifest with its `../../crates/..` paths made absolute.
fn absolute_manifest(example_manifest: &str, workspace: &Path) -> String {
    let crates = workspace.join("crates");
    let absolute = format!("path = {:?}", format!("{}/", crates.display()));
    let absolute = absolute.trim_end_matches('"');
    let manifest = example_manifest.replace("path = \"../../crates/", absolute);
    assert!(
        !manifest.contains("path = \"../"),
        "a relative path the copy cannot follow:\n{manifest}"
    );
    manifest
}

/// A copy of the example in `copy` (its sources, and its manifest, lock
/// file and profiles for build sharing).
fn prepare_copy(workspace: &Path, copy: &Path) {
    let example = workspace.join("examples/out-of-tree-substrate");
    std::fs::create_dir_all(copy).unwrap();
    for folder in ["src", "tests"] {
        let _ = std::fs::remove_dir_all(copy.join(folder));
        if example.join(folder).is_dir() {
            copy_dir(&example.join(folder), &copy.join(folder));
        }
    }
    std::fs::copy(workspace.join("Cargo.lock"), copy.join("Cargo.lock")).unwrap();
    let profiles = toml::Table::from_iter([(
        "profile".to_string(),
        toml::Value::Table(sharing_profiles(workspace)),
    )]);
    std::fs::write(copy.join("profiles.toml"), profiles.to_string()).unwrap();
    let manifest = absolute_manifest(&read(&example.join("Cargo.toml")), workspace);
    let entries = sharing_dependencies(workspace, copy, &manifest);
    eprintln!("dependencies added for the workspace's features:\n{entries}");
}

/// Runs `cargo <args>` on the copy, from the workspace (cargo reads
/// `.cargo/config.toml` from the directory it runs in, and the workspace's
/// rustflags must apply for its artifacts to be reused), with the
/// workspace's target directory and the copy's profiles.
fn cargo(workspace: &Path, copy: &Path, args: &[&str], after: &[&str]) -> Output {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
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
    let started = Instant::now();
    let output = command
        .current_dir(workspace)
        .args(args)
        .arg("--manifest-path")
        .arg(copy.join("Cargo.toml"))
        .arg("--config")
        .arg(copy.join("profiles.toml"))
        .arg("--features")
        .arg("cli")
        .arg("--")
        .args(after)
        .env("CARGO_TARGET_DIR", target_dir(workspace))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown with `--nocapture`: what cargo compiled, and how long it took.
    eprintln!(
        "{stderr}cargo {} took {:.1} s",
        args.join(" "),
        started.elapsed().as_secs_f64()
    );
    // After `cargo test --workspace` has built everything, a third-party crate
    // compiled here means the copy resolved other features than the
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
             ({}); compare their features with the workspace's (`cargo tree --format '{{p}}|{{f}}'`)",
            rebuilt.len(),
            rebuilt.join(", ")
        );
    }
    output
}

#[test]
fn out_of_tree_example_passes_conformance_and_is_benched() {
    if std::env::var_os("SUBMEM_SKIP_OUT_OF_TREE").is_some() {
        eprintln!("skipped: SUBMEM_SKIP_OUT_OF_TREE is set");
        return;
    }
    let workspace = workspace();
    let target = target_dir(&workspace);
    let copy = target.join("out-of-tree-example");
    prepare_copy(&workspace, &copy);
    let started = Instant::now();

    // Its own tests: the one-line conformance test and the ranking's.
    let test = cargo(&workspace, &copy, &["test"], &[]);
    let stdout = String::from_utf8_lossy(&test.stdout);
    assert!(
        test.status.success(),
        "the example's tests failed ({}):\n{stdout}\n{}",
        test.status,
        String::from_utf8_lossy(&test.stderr)
    );
    assert!(
        stdout.contains("test keyword_echo_passes_the_conformance_suite ... ok"),
        "{stdout}"
    );

    // Its binary: `submem bench` with keyword-echo registered, which adds
    // the packing baselines as `submem bench` does...
    let check = ["bench", "--check", "--substrates", "keyword-echo,m2"];
    let run = cargo(&workspace, &copy, &["run"], &check);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("(keyword-echo, m2, m2-fill, m1-fill"),
        "bench --check ({}):\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    // ...and runs it next to m2 (without the baselines: they embed every
    // event with MiniLM, 35 s more on 2 cores).
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    let bench = [
        "bench",
        "--substrates",
        "keyword-echo,m2",
        "--memory-llm",
        "none",
        "--reader",
        "none",
        "--synth-conversations",
        "1",
        "--synth-units",
        "200",
        "--synth-questions",
        "8",
        "--synth-session",
        "20",
        "--budget",
        "1024",
        "--k",
        "5",
        "--no-baselines",
        "--quiet",
        "--out",
        out_dir,
    ];
    let run = cargo(&workspace, &copy, &["run"], &bench);
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!(
        "example tested and benched in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        run.status.success(),
        "the example's bench failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("| keyword-echo | example |"),
        "no keyword-echo row in the report:\n{stdout}"
    );
    let report = read(&out.path().join("report.md"));
    assert!(
        report.contains("| keyword-echo |") && report.contains("| m2 |"),
        "{report}"
    );
}

/// The copy is built with exactly the workspace's profiles: a profile that
/// differed would make the test above compile every dependency again
/// (minutes). Every `[profile.*]` table of the workspace is passed as it
/// is; every submem crate the example can depend on gets, as a dependency,
/// the settings it has as a member; the example sets no profile of its own
/// (a manifest's profile keys the `--config` file does not set would still
/// apply).
#[test]
fn the_example_is_built_with_the_workspace_profiles() {
    let workspace = workspace();
    let manifest: toml::Table = read(&workspace.join("Cargo.toml")).parse().unwrap();
    let ours = manifest["profile"].as_table().unwrap();
    let passed = sharing_profiles(&workspace);

    let example: toml::Table = read(&workspace.join("examples/out-of-tree-substrate/Cargo.toml"))
        .parse()
        .unwrap();
    assert!(
        !example.contains_key("profile"),
        "the example's Cargo.toml sets profiles: the workspace's are passed to its build"
    );

    for (name, table) in ours {
        if name != "dev" {
            assert_eq!(passed.get(name), Some(table), "[profile.{name}]");
        }
    }
    let dev = ours["dev"].as_table().unwrap();
    let passed_dev = passed["dev"].as_table().unwrap();
    for (key, value) in dev {
        if key != "package" {
            assert_eq!(passed_dev.get(key), Some(value), "[profile.dev] {key}");
        }
    }
    let our_packages = dev["package"].as_table().unwrap();
    let passed_packages = passed_dev["package"].as_table().unwrap();
    for (name, table) in our_packages {
        if !name.starts_with("submem") {
            assert_eq!(
                passed_packages.get(name),
                Some(table),
                "[profile.dev.package.{name}]"
            );
        }
    }

    // Every submem crate the example's lock file holds (the `cli` feature
    // pulls in all of them) is a member and gets its member settings.
    let members = member_names(&workspace);
    let lock: toml::Table = read(&workspace.join("examples/out-of-tree-substrate/Cargo.lock"))
        .parse()
        .unwrap();
    let locked: Vec<&str> = lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .filter(|n| n.starts_with("submem") && *n != "submem-example-plugin")
        .collect();
    assert!(locked.contains(&"submem-cli"), "{locked:?}");
    for name in locked {
        assert!(members.iter().any(|m| m == name), "{name} is not a member");
        let table = passed_packages
            .get(name)
            .and_then(|t| t.as_table())
            .unwrap_or_else(|| panic!("no [profile.dev.package.{name}] passed"));
        let own = our_packages.get(name).and_then(|t| t.as_table());
        for key in ["opt-level", "debug"] {
            let member = own.and_then(|t| t.get(key)).or_else(|| dev.get(key));
            assert_eq!(
                table.get(key),
                member,
                "[profile.dev.package.{name}] {key}: a dependency must get the member's setting"
            );
        }
    }
}

/// The copy names this checkout's crates by absolute paths, and both its
/// builds (its tests, and its run without dev-dependencies) build every
/// package the workspace's tests build with the workspace's features.
#[test]
fn the_copy_points_at_this_checkout_and_asks_for_the_workspace_features() {
    let workspace = workspace();
    let dir = tempfile::tempdir().unwrap();
    prepare_copy(&workspace, dir.path());
    let manifest_path = dir.path().join("Cargo.toml");
    let manifest = read(&manifest_path);
    let parsed: toml::Table = manifest.parse().unwrap();
    let deps = parsed["dependencies"].as_table().unwrap();
    for (name, dep) in deps {
        if let Some(path) = dep.get("path").and_then(|p| p.as_str()) {
            let path = Path::new(path);
            assert!(path.is_absolute(), "{name}: {}", path.display());
            assert!(
                path.join("Cargo.toml").is_file(),
                "{name}: {}",
                path.display()
            );
        }
    }
    assert!(deps.contains_key("submem-cli"), "{manifest}");
    let added = parsed["target"]["cfg(all())"]["dependencies"]
        .as_table()
        .unwrap();
    let asks_for = |package: &str| {
        added
            .values()
            .any(|d| d["package"].as_str() == Some(package))
    };
    // The example's run leaves out its dev-dependencies, which turn on
    // submem-core's `testing`: asked for, so its test and its run (and the
    // workspace's tests) share one submem-core and everything above it.
    assert!(asks_for("submem-core"), "{manifest}");

    let ours = resolved(&workspace, &["--workspace"]);
    for edges in ["normal,build,dev", "normal,build"] {
        let copy = resolved(
            &workspace,
            &[
                "--manifest-path",
                manifest_path.to_str().unwrap(),
                "--features",
                "cli",
                "-e",
                edges,
            ],
        );
        assert!(copy.keys().any(|p| p.starts_with("submem-cli ")));
        let unshared = unshared(&copy, &ours);
        assert!(unshared.is_empty(), "{edges}: {unshared:?}");
    }
}

/// `scripts/test-python.sh` builds the extension with `crates/python`'s
/// `workspace-test-build` feature, whose optional dependencies ask for the
/// features the workspace's test build turns on, so that the step reuses
/// that build's artifacts (8 s instead of 163 s on 2 cores). A manifest
/// cannot derive the list, so it is written out there; this holds it to
/// what `cargo tree` says the workspace builds, and names what to add.
#[test]
fn the_python_test_build_asks_for_the_workspace_features() {
    let workspace = workspace();
    let ours = resolved(&workspace, &["--workspace"]);
    let python = resolved(
        &workspace,
        &[
            "-p",
            "submem-python",
            "--features",
            "workspace-test-build",
            "-e",
            "normal,build",
        ],
    );
    let missing: Vec<String> = unshared(&python, &ours)
        .into_iter()
        .filter(|(package, _)| !package.starts_with("submem-python "))
        .map(|(package, features)| format!("{package}: {features:?}"))
        .collect();
    assert!(
        missing.is_empty(),
        "crates/python's workspace-test-build builds these with other features than the \
         workspace's tests do, so scripts/test-python.sh compiles them and everything above \
         them again; ask for these features in its optional dependencies:\n{}",
        missing.join("\n")
    );
}
