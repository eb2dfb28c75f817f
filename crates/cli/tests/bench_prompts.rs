#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `submem bench --reader-prompt FILE --judge-prompt FILE`: a retrieval-only
//! run on a small synthetic set records the templates with their hashes in
//! run.json; a resume with another template and a merge of shards run with
//! two templates are refused, naming the key and both hashes; an older
//! run.json without the keys resumes with the built-in templates; bad
//! template files are clear errors before anything is written.

mod common;
use common::{assert_clean_failure, submem, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A reader template (no system message: shorter than the built-in one)
/// and its SHA-256 (`printf '…' | sha256sum`).
const READER: &str = "\n---\nNotes:\n{memory}\n\nQ: {question}\nA:\n";
const READER_SHA256: &str = "53dab5318c8acaeac9eb5eccdb04a594b1a91b45fc4621a00aa39efd562fff52";

/// A small retrieval-only run (the recency window needs no model) into
/// `out`, with `extra` arguments.
fn bench(out: &Path, extra: &[&str]) -> Output {
    submem()
        .args(["bench", "--substrates", "recent", "--no-baselines", "-q"])
        .args(["--synth-units", "120", "--synth-questions", "3"])
        .args(["--reader", "none", "--budget", "256"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn run_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

fn template(dir: &Path, name: &str, body: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn templates_are_recorded_and_a_run_keeps_to_one() {
    let dir = tempfile::tempdir().unwrap();
    let reader = template(dir.path(), "reader.txt", READER.as_bytes());
    let reader = reader.to_str().unwrap();

    // The built-in templates are recorded too.
    let plain = dir.path().join("plain");
    let o = bench(&plain, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let info = run_json(&plain);
    for key in ["reader_prompt", "judge_prompt"] {
        assert_eq!(info[key]["name"], "builtin", "{info}");
        assert_eq!(info[key]["sha256"].as_str().unwrap().len(), 64, "{info}");
    }
    assert_ne!(info["reader_prompt"]["sha256"], READER_SHA256);

    // A custom template, with no reader: it still sets the fixed part of
    // the budget, so it is recorded and named in the notes.
    let custom = dir.path().join("custom");
    let o = bench(&custom, &["--reader-prompt", reader]);
    assert!(o.status.success(), "{}", text(&o));
    let info = run_json(&custom);
    assert_eq!(
        info["reader_prompt"],
        serde_json::json!({"name": reader, "sha256": READER_SHA256})
    );
    assert_eq!(info["judge_prompt"]["name"], "builtin");
    let report = std::fs::read_to_string(custom.join("report.md")).unwrap();
    assert!(report.contains("reader prompt: a custom template (sha256 53dab5318c8a…"));
    // The memory shown gets the room the shorter template leaves it.
    let room = |dir: &Path| -> u64 {
        std::fs::read_to_string(dir.join("items.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["retrieved_tokens"]
                    .as_u64()
                    .unwrap()
            })
            .sum()
    };
    assert!(
        room(&custom) > room(&plain),
        "{} {}",
        room(&custom),
        room(&plain)
    );

    // A resume with another template (the built-in one) is refused, naming
    // the key and both hashes; with the same one it goes on.
    let o = bench(&custom, &[]);
    assert_clean_failure(&o, "reader_prompt");
    assert_clean_failure(&o, READER_SHA256);
    assert_clean_failure(&o, "use a new --out (or the same reader_prompt)");
    let o = bench(&custom, &["--reader-prompt", reader]);
    assert!(o.status.success(), "{}", text(&o));

    // A directory written before templates were recorded resumes with the
    // built-in ones, and refuses a custom one.
    let mut old = run_json(&plain);
    let o = old.as_object_mut().unwrap();
    o.remove("reader_prompt");
    o.remove("judge_prompt");
    std::fs::write(plain.join("run.json"), old.to_string()).unwrap();
    let o = bench(&plain, &["--reader-prompt", reader]);
    assert_clean_failure(&o, "reader_prompt = {\"name\":\"builtin\"");
    let o = bench(&plain, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(run_json(&plain)["reader_prompt"]["name"], "builtin");
}

#[test]
fn shards_with_two_templates_do_not_merge() {
    let dir = tempfile::tempdir().unwrap();
    let reader = template(dir.path(), "reader.txt", READER.as_bytes());
    let judge = template(
        dir.path(),
        "judge.txt",
        b"Q: {question}\nGold: {gold}\nAnswer: {answer}\nyes or no?\n",
    );
    let shard = |name: &str, shard: &str, reader: Option<&Path>| {
        let out = dir.path().join(name);
        let mut extra = vec!["--shard", shard, "--judge-prompt", judge.to_str().unwrap()];
        if let Some(r) = reader {
            extra.extend(["--reader-prompt", r.to_str().unwrap()]);
        }
        let o = bench(&out, &extra);
        assert!(o.status.success(), "{}", text(&o));
        out
    };
    let a = shard("a", "1/2", Some(&reader));
    let b = shard("b", "2/2", Some(&reader));
    let builtin = shard("builtin", "2/2", None);
    let merge = |dirs: &[&Path]| {
        submem()
            .args(["bench", "merge"])
            .args(dirs)
            .arg("--out")
            .arg(dir.path().join("merged"))
            .output()
            .unwrap()
    };
    let o = merge(&[&a, &builtin]);
    assert_clean_failure(&o, "not shards of one run");
    assert_clean_failure(&o, "reader_prompt");
    assert_clean_failure(&o, READER_SHA256);
    let builtin_sha256 = run_json(&builtin)["reader_prompt"]["sha256"].clone();
    assert_clean_failure(&o, builtin_sha256.as_str().unwrap());
    assert_clean_failure(&o, "another reader prompt template");
    let o = merge(&[&a, &b]);
    assert!(o.status.success(), "{}", text(&o));
    let merged = run_json(&dir.path().join("merged"));
    assert_eq!(merged["reader_prompt"]["sha256"], READER_SHA256);
    assert_eq!(merged["judge_prompt"]["name"], judge.to_str().unwrap());
}

#[test]
fn bad_templates_are_clear_errors_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (name, body, flag, why) in [
        (
            "no-memory.txt",
            &b"Q: {question}\n"[..],
            "--reader-prompt",
            "{memory} is missing",
        ),
        (
            "typo.txt",
            b"{memory}\n{questoin}\n",
            "--reader-prompt",
            "line 2: unknown placeholder {questoin}",
        ),
        ("empty.txt", b"", "--reader-prompt", "the file is empty"),
        (
            "latin1.txt",
            b"{memory} {question} caf\xe9",
            "--reader-prompt",
            "not UTF-8",
        ),
        (
            "judge.txt",
            b"{question} {answer}",
            "--judge-prompt",
            "{gold} is missing",
        ),
    ] {
        let path = template(dir.path(), name, body);
        let path = path.to_str().unwrap();
        for check in [true, false] {
            let mut extra = vec![flag, path];
            if check {
                extra.push("--check");
            }
            let o = bench(&out, &extra);
            assert_clean_failure(&o, why);
            assert_clean_failure(&o, name);
        }
    }
    let o = bench(&out, &["--reader-prompt", "/nonexistent/reader.txt"]);
    assert_clean_failure(&o, "cannot read /nonexistent/reader.txt");
    assert!(!out.join("items.jsonl").exists());
    // A live environment's policy has its own prompt.
    let reader = template(dir.path(), "reader.txt", READER.as_bytes());
    let o = submem()
        .args([
            "bench",
            "--dataset",
            "textworld",
            "--check",
            "--reader-prompt",
        ])
        .arg(&reader)
        .output()
        .unwrap();
    assert_clean_failure(&o, "--reader-prompt is for question datasets");
}
