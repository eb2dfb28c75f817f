#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `submem bench --answer-key FILE` on the LoCoMo fixture, retrieval only
//! (no model): run.json records the key by hash, the report and summary give
//! answer recall under both keys with the ceilings and list the changes; a
//! resume with another key or none, and a merge of shards run with two keys,
//! are refused; a key naming an unknown question or with a malformed entry
//! is a clear error naming the entry, before anything is written.

mod common;
use common::{assert_clean_failure, submem, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/tests/fixtures")
        .join(name)
}

/// A retrieval-only run of the recency window (and BM25) on the fixture.
fn bench(out: &Path, extra: &[&str]) -> Output {
    submem()
        .args(["bench", "--dataset", "locomo", "--data"])
        .arg(fixture("locomo-mini.json"))
        .args(["--substrates", "recent,m2", "--no-baselines", "-q"])
        .args(["--reader", "none", "--budget", "256"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The file's SHA-256 as `sha256sum` prints it.
fn sha256(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    let line = String::from_utf8(o.stdout).unwrap();
    line.split_whitespace().next().unwrap().to_string()
}

#[test]
fn a_run_reports_both_keys_and_keeps_to_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = fixture("locomo-mini-answer-key.json");
    let audit = fixture("locomo-mini-audit.json");
    let (key_s, audit_s) = (key.to_str().unwrap(), audit.to_str().unwrap());
    let out = dir.path().join("run");
    let o = bench(&out, &["--answer-key", key_s]);
    assert!(o.status.success(), "{}", text(&o));
    let info = json(&out.join("run.json"));
    assert_eq!(
        info["answer_key"],
        serde_json::json!({"name": key_s, "sha256": sha256(&key)})
    );
    let summary = json(&out.join("summary.json"));
    let run = &summary["runs"][0];
    assert_eq!(run["metrics"]["answer_key"]["ceiling"], 1.0 / 3.0);
    assert!(
        run["metrics"]["answer_key"]["answer_recall"].is_number(),
        "{run}"
    );
    assert_eq!(
        run["per_category"]["2:temporal"]["answer_key"]["ceiling"],
        0.5
    );
    assert_eq!(summary["answer_key"]["overall"]["questions"], 3);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for needle in [
        &format!("answer key: sha256 {}…", &sha256(&key)[..12]),
        "## Answer key",
        "| all | 3 | 1 | 1 | 0.333 |",
        "| Dataset | Budget | k | Substrate | ans |",
        "| locomo | 256 | 10 | recent | ",
        "Answer recall per category under the original / the corrected key:",
        "| 1 | conv-26/q1: When did Melanie paint a sunrise? | 2:temporal | 2022 | the year before 2023 |",
        "*excluded* | too open to grade |",
    ] {
        assert!(report.contains(needle), "{needle}\n{report}");
    }
    assert!(out.join("answer_key.json").is_file());

    // The same key resumes; another key, or none, does not.
    let o = bench(&out, &["--answer-key", key_s]);
    assert!(o.status.success(), "{}", text(&o));
    let o = bench(&out, &["--answer-key", audit_s]);
    assert_clean_failure(&o, "answer_key");
    assert_clean_failure(&o, &sha256(&audit));
    assert_clean_failure(&o, "use a new --out (or the same answer_key)");
    let o = bench(&out, &[]);
    assert_clean_failure(&o, "this one has null");

    // The audit's format: its citation-only entry is set aside.
    let out = dir.path().join("audit");
    let o = bench(&out, &["--answer-key", audit_s]);
    assert!(o.status.success(), "{}", text(&o));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("the LoCoMo audit's error list): 2 entries; 1 gold answer replaced, 0 questions excluded; 1 entry set aside (WRONG_CITATION: the gold answer stands)"),
        "{report}"
    );
    assert!(
        report.contains("| 2 | conv-26/q1 (locomo_0_qa1): When did"),
        "{report}"
    );

    // Shards run with two keys do not merge; with one key they do.
    let shard = |name: &str, i: &str, key: &str| {
        let out = dir.path().join(name);
        let o = bench(&out, &["--shard", i, "--answer-key", key]);
        assert!(o.status.success(), "{}", text(&o));
        out
    };
    let (a, b, other) = (
        shard("a", "1/2", key_s),
        shard("b", "2/2", key_s),
        shard("c", "2/2", audit_s),
    );
    let merge = |dirs: &[&Path]| {
        submem()
            .args(["bench", "merge"])
            .args(dirs)
            .arg("--out")
            .arg(dir.path().join("merged"))
            .output()
            .unwrap()
    };
    let o = merge(&[&a, &other]);
    assert_clean_failure(&o, "not shards of one run: run with answer_key");
    assert_clean_failure(&o, "another answer key");
    let o = merge(&[&a, &b]);
    assert!(o.status.success(), "{}", text(&o));
    let merged = dir.path().join("merged");
    assert_eq!(
        json(&merged.join("run.json"))["answer_key"]["sha256"],
        sha256(&key)
    );
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(report.contains("| all | 3 | 1 | 1 | 0.333 |"), "{report}");
}

#[test]
fn a_bad_key_is_a_clear_error_naming_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let write = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path
    };
    let unknown = write(
        "unknown.json",
        r#"{"corrections": [
            {"conversation": "conv-26", "question_id": "q1", "answer": "2021"},
            {"conversation": "conv-26", "question_id": "q42", "answer": "x"}]}"#,
    );
    let o = bench(&out, &["--answer-key", unknown.to_str().unwrap()]);
    assert_clean_failure(&o, "unknown.json is not a valid answer key file");
    assert_clean_failure(
        &o,
        "entry 2 (conv-26/q42): unknown question id \"q42\" in conv-26",
    );
    let audit = write(
        "audit.json",
        r#"[{"question_id": "locomo_0_qa7", "question": "Who?", "error_type": "HALLUCINATION", "correct_answer": "x"}]"#,
    );
    let o = bench(&out, &["--answer-key", audit.to_str().unwrap()]);
    assert_clean_failure(&o, "entry 1 (locomo_0_qa7): no conversation of the dataset");
    assert!(!out.join("items.jsonl").exists() && !out.join("run.json").exists());
    // Malformed entries: found by --check too, without the dataset.
    let malformed = write(
        "malformed.json",
        r#"{"corrections": [{"conversation": "conv-26", "question_id": "q1", "answer": "x", "exclude": true}]}"#,
    );
    for check in [true, false] {
        let mut extra = vec!["--answer-key", malformed.to_str().unwrap()];
        if check {
            extra.push("--check");
        }
        let o = bench(&out, &extra);
        assert_clean_failure(&o, "malformed.json is not a valid answer key file");
        assert_clean_failure(
            &o,
            "entry 1 (conv-26/q1): give either \"answer\" or \"exclude\": true, not both",
        );
    }
    let o = bench(&out, &["--answer-key", "/nonexistent/key.json", "--check"]);
    assert_clean_failure(&o, "cannot read /nonexistent/key.json");
    // A live environment has no gold answers.
    let o = submem()
        .args(["bench", "--dataset", "textworld", "--check", "--answer-key"])
        .arg(&malformed)
        .output()
        .unwrap();
    assert_clean_failure(&o, "--answer-key is for question datasets");
}
