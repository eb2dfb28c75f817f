#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `submem` binary on bad input (clear message, non-zero exit, no panic),
//! on a small run, and killed mid-run then resumed.

mod common;
use common::{assert_clean_failure, submem, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/tests/fixtures")
        .join(name)
}

#[test]
fn unknown_substrate_is_a_clear_error() {
    let o = submem()
        .args([
            "bench",
            "--substrates",
            "recent,m99",
            "--reader",
            "none",
            "-q",
        ])
        .output()
        .unwrap();
    assert_clean_failure(&o, "unknown substrate \"m99\"; known substrates:");
}

#[test]
fn missing_data_file_is_a_clear_error() {
    let o = submem()
        .args([
            "bench",
            "--dataset",
            "locomo",
            "--data",
            "/definitely/not/here.json",
            "--substrates",
            "recent",
        ])
        .args(["--reader", "none", "-q"])
        .output()
        .unwrap();
    assert_clean_failure(&o, "not found");
}

#[test]
fn malformed_dataset_json_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"conversation\": [1, 2").unwrap();
    let o = submem()
        .args([
            "bench",
            "--dataset",
            "locomo",
            "--substrates",
            "recent",
            "--reader",
            "none",
            "-q",
            "--data",
        ])
        .arg(&bad)
        .output()
        .unwrap();
    assert_clean_failure(&o, "is not a valid LoCoMo file");
}

#[test]
fn unknown_dataset_and_bad_budget() {
    let o = submem()
        .args([
            "bench",
            "--dataset",
            "squad",
            "--substrates",
            "recent",
            "-q",
        ])
        .output()
        .unwrap();
    assert_clean_failure(&o, "unknown dataset");
    let o = submem()
        .args([
            "bench",
            "--substrates",
            "recent",
            "--reader",
            "none",
            "--budget",
            "10",
            "-q",
        ])
        .output()
        .unwrap();
    assert_clean_failure(&o, "budget 10");
}

#[test]
fn locomo_fixture_runs_and_writes_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let o = submem()
        .args([
            "bench",
            "--dataset",
            "locomo",
            "--substrates",
            "recent,nomem",
            "--reader",
            "none",
        ])
        .args(["--budget", "256,1024", "--k", "5", "-q", "--data"])
        .arg(fixture("locomo-mini.json"))
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("| recent |") && stdout.contains("locomo · budget 1024 · k 5"),
        "{stdout}"
    );
    for f in [
        "items.jsonl",
        "writes.jsonl",
        "summary.json",
        "report.md",
        "scatter.svg",
        "run.json",
    ] {
        assert!(dir.path().join(f).exists(), "{f} missing");
    }
    let items = std::fs::read_to_string(dir.path().join("items.jsonl")).unwrap();
    assert_eq!(items.lines().count(), 2 * 4 * 2);
    // compare works on the run
    let o = submem()
        .args(["compare", "--out"])
        .arg(dir.path())
        .args(["recent", "nomem"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("McNemar exact"));
}

fn count_lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn keys(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{}|{}|{}|{}|{}",
                v["substrate"], v["conversation"], v["question_id"], v["budget"], v["k"]
            )
        })
        .collect()
}

/// A run killed with SIGKILL part-way resumes: nothing duplicated, nothing lost.
#[test]
fn killed_run_resumes_without_duplicates_or_losses() {
    let dir = tempfile::tempdir().unwrap();
    let items = dir.path().join("items.jsonl");
    // Large enough that it cannot finish before we kill it.
    let args = |c: &mut Command| {
        c.args(["bench", "--substrates", "recent", "--reader", "none", "-q"])
            .args([
                "--synth-units",
                "20000",
                "--synth-questions",
                "400",
                "--synth-session",
                "200",
            ])
            .args([
                "--synth-conversations",
                "1",
                "--budget",
                "64,128,256,512",
                "--k",
                "1,2,3,4,5",
            ])
            .arg("--out")
            .arg(dir.path());
    };
    let mut first = submem();
    args(&mut first);
    let mut child = first
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while count_lines(&items) < 50 {
        assert!(start.elapsed() < Duration::from_secs(120), "no progress");
        if child.try_wait().unwrap().is_some() {
            panic!("finished before it could be killed: make the run larger");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = count_lines(&items);
    assert!(before < 8000, "killed too late ({before})");
    let mut second = submem();
    args(&mut second);
    let o = second.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let k = keys(&items);
    assert_eq!(k.len(), 400 * 4 * 5, "every item exactly once");
    let uniq: std::collections::HashSet<_> = k.iter().collect();
    assert_eq!(uniq.len(), k.len(), "duplicates after resume");
    assert!(String::from_utf8_lossy(&o.stdout).contains("resumed:"));
}

/// The abort hook stops after N items with a non-zero exit; a rerun completes.
#[test]
fn abort_hook_then_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let run = |abort: Option<&str>| {
        let mut c = submem();
        c.args([
            "bench",
            "--substrates",
            "recent,nomem",
            "--reader",
            "none",
            "-q",
        ])
        .args(["--synth-units", "200", "--synth-questions", "10", "--out"])
        .arg(dir.path());
        if let Some(n) = abort {
            c.env("SUBMEM_BENCH_ABORT_AFTER", n);
        }
        c.output().unwrap()
    };
    let o = run(Some("7"));
    assert_clean_failure(&o, "aborted after 7 items");
    assert_eq!(count_lines(&dir.path().join("items.jsonl")), 7);
    let o = run(None);
    assert!(o.status.success(), "{}", text(&o));
    let k = keys(&dir.path().join("items.jsonl"));
    assert_eq!(k.len(), 2 * 2 * 10);
    let uniq: std::collections::HashSet<_> = k.iter().collect();
    assert_eq!(uniq.len(), k.len());
}

/// A resume whose items would mean something else (another seed, memory LLM,
/// reader...) is refused before any work, and the old results stay as they were.
#[test]
fn resume_with_other_settings_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str| {
        submem()
            .args(["bench", "--substrates", "recent", "--reader", "none", "-q"])
            .args(["--synth-units", "200", "--synth-questions", "5"])
            .args(["--seed", seed, "--out"])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let o = run("42");
    assert!(o.status.success(), "{}", text(&o));
    let items = dir.path().join("items.jsonl");
    let before = std::fs::read_to_string(&items).unwrap();
    assert_clean_failure(&run("43"), "seed");
    assert_eq!(std::fs::read_to_string(&items).unwrap(), before);
    // The same settings resume (and find everything done).
    let o = run("42");
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn substrates_lists_every_name_with_its_settings() {
    let out = submem().args(["substrates", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    for n in ["m1", "m2-fill", "m10", "flexa", "nomem", "recent", "router"] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let m2 = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "m2")
        .unwrap();
    assert!(m2["aliases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "bm25"));
    assert!(m2["settings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["key"] == "stopwords" && s["default"] == "english"));

    let text = submem().args(["substrates", "bm25"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.starts_with("m2 (bm25)") && text.contains("stopwords"),
        "{text}"
    );

    let bad = submem().args(["substrates", "m99"]).output().unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert!(
        err.contains("unknown substrate \"m99\"") && err.contains("m2 (bm25"),
        "{err}"
    );
}
