#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `submem route fit | eval | explain` on shipped hand-made bench outputs
//! (`tests/fixtures/route`: 12 questions × budgets 2048/8192 for m2, m10 and
//! a router run) and the bench crate's LoCoMo fixture.

mod common;
use common::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn submem() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_submem"));
    c.env("SUBMEM_FETCH", "false");
    c
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn ok(o: Output) -> String {
    let t = text(&o);
    assert!(o.status.success(), "failed: {t}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fails(o: Output, needle: &str) {
    let t = text(&o);
    assert!(!o.status.success(), "should fail: {t}");
    assert!(t.contains(needle), "expected {needle:?} in: {t}");
    assert!(!t.contains("panicked"), "{t}");
}

fn fit(dir: &Path, extra: &[&str]) -> (PathBuf, String) {
    let policy = dir.join("policy.json");
    let mut args = vec!["route", "fit", "--from"];
    let from = fixture("route");
    args.push(from.to_str().unwrap());
    args.extend(["--out", policy.to_str().unwrap()]);
    args.extend(extra);
    let out = ok(submem().args(&args).output().unwrap());
    (policy, out)
}

#[test]
fn fit_writes_a_policy_with_evidence_from_bench_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, out) = fit(dir.path(), &[]);
    assert!(
        out.contains("| conversational | Moderate | ≤3072 | m2 | 10 | 0.750 | 12 |"),
        "{out}"
    );
    assert!(
        out.contains("| conversational | Moderate | >6144 | m10 | 10 | 0.917 | 12 |"),
        "{out}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    assert_eq!(json["format"], "submem-route-policy");
    assert_eq!(json["version"], 1);
    assert_eq!(json["quality_metric"], "coverage");
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0]["choice"]["substrate"], "m2");
    let ev = cells[0]["evidence"].as_array().unwrap();
    assert_eq!(
        ev.len(),
        2,
        "the router's own rows are not candidates: {ev:?}"
    );
    assert_eq!(ev[0]["n"], 12);
    assert!(
        (ev[0]["p50_ms"].as_f64().unwrap() - 1.05).abs() < 0.006,
        "{ev:?}"
    );

    // A latency cap below m2's median hands the tight cell to m10.
    let (_, out) = fit(dir.path(), &["--latency-cap-ms", "0.8"]);
    assert!(
        out.contains("| conversational | Moderate | ≤3072 | m10 |"),
        "{out}"
    );

    // Fitting for named members leaves the others out and is recorded.
    let (policy, out) = fit(dir.path(), &["--members", "m10,flexa"]);
    assert!(
        out.contains("| conversational | Moderate | ≤3072 | m10 |"),
        "{out}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    assert_eq!(
        json["settings"]["members"],
        serde_json::json!(["m10", "flexa"])
    );
    fails(
        submem()
            .args(["route", "fit", "--from", fixture("route").to_str().unwrap()])
            .args(["--out", "x.json", "--members", "m2,nonsense"])
            .output()
            .unwrap(),
        "not a routable substrate",
    );
}

#[test]
fn eval_compares_the_router_on_held_out_questions_only() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, _) = fit(
        dir.path(),
        &["--holdout-seed", "5", "--holdout-share", "0.5"],
    );
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    let n_fit = p["cells"][0]["evidence"][0]["n"].as_u64().unwrap();
    assert!(n_fit > 0 && n_fit < 12, "{n_fit}");
    let out = ok(submem()
        .args([
            "route",
            "eval",
            "--out",
            fixture("route").to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ])
        .output()
        .unwrap());
    assert!(out.contains("split seed 5"), "{out}");
    assert!(out.contains("| 2048 | router | m2 ★ |"), "{out}");
    assert!(out.contains("| all | router | m10 |"), "{out}");
    let json = ok(submem()
        .args([
            "route",
            "eval",
            "--json",
            "--out",
            fixture("route").to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ])
        .output()
        .unwrap());
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 6, "2 budgets + pooled, × 2 substrates");
    let held = rows[0]["comparison"]["pairs"].as_u64().unwrap();
    assert_eq!(
        held + n_fit,
        12,
        "held-out and fitted questions partition the set"
    );
    assert!(rows[0]["comparison"]["mcnemar"]["p_value"]
        .as_f64()
        .is_some());
    // A policy without a split needs --all-items.
    let (plain, _) = fit(dir.path(), &[]);
    fails(
        submem()
            .args([
                "route",
                "eval",
                "--out",
                fixture("route").to_str().unwrap(),
                "--policy",
                plain.to_str().unwrap(),
            ])
            .output()
            .unwrap(),
        "without a held-out split",
    );
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    fails(
        submem()
            .args([
                "route",
                "fit",
                "--from",
                dir.path().to_str().unwrap(),
                "--out",
                "x.json",
            ])
            .output()
            .unwrap(),
        "items.jsonl not found",
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        "{\"format\": \"submem-route-policy\", \"version\": 1, ",
    )
    .unwrap();
    fails(
        submem()
            .args([
                "route",
                "eval",
                "--out",
                fixture("route").to_str().unwrap(),
                "--policy",
                bad.to_str().unwrap(),
            ])
            .output()
            .unwrap(),
        "malformed routing policy JSON",
    );
    let (policy, _) = fit(dir.path(), &[]);
    let text = std::fs::read_to_string(&policy)
        .unwrap()
        .replace("\"substrate\": \"m2\"", "\"substrate\": \"m42\"");
    std::fs::write(&policy, text).unwrap();
    fails(
        submem()
            .args([
                "route",
                "explain",
                "--data",
                locomo().to_str().unwrap(),
                "--members",
                "m2+m10",
                "--policy",
                policy.to_str().unwrap(),
            ])
            .output()
            .unwrap(),
        "unknown substrate \"m42\"",
    );
}

fn locomo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/tests/fixtures/locomo-mini.json")
}

#[test]
fn explain_prints_the_cell_evidence_and_signals() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, _) = fit(dir.path(), &[]);
    let args = |json: bool| {
        let mut v = vec![
            "route".to_string(),
            "explain".into(),
            "--data".into(),
            locomo().display().to_string(),
            "--members".into(),
            "m2+m10".into(),
            "--policy".into(),
            policy.display().to_string(),
            "--budget".into(),
            "2048".into(),
        ];
        if json {
            v.push("--json".into());
        }
        v
    };
    let out = ok(submem().args(args(false)).output().unwrap());
    // The mini conversation fits a 2048 budget: no fitted cell; the rules pick full context.
    for needle in [
        "question q0 of conv-26",
        "route: m10",
        "paper-derived rule",
        "depth Fits",
        "evidence:  none in this cell",
        "signals:   BM25 margin",
    ] {
        assert!(out.contains(needle), "{needle:?} not in:\n{out}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&ok(submem().args(args(true)).output().unwrap())).unwrap();
    assert_eq!(json["decision"]["method"], "M10");
    assert_eq!(json["cell"]["key"]["depth"], "fits");
    assert!(json["history_tokens"].as_u64().unwrap() > 0);
}

/// An agentic run (`scripts/agent-envs.sh install` provides the environments):
/// ALFWorld-format games played with seeded random commands.
fn agentic_run(out: &Path, substrates: &str) {
    ok(submem()
        .args([
            "-q",
            "bench",
            "--dataset",
            "alfworld",
            "--games",
            "pick:seeds=1-4",
        ])
        .args(["--policy", "random", "--substrates", substrates])
        .args(["--k", "1,3", "--steps", "12"])
        .arg("--out")
        .arg(out)
        .env_remove("SUBMEM_BENCH_ABORT_AFTER")
        .output()
        .unwrap());
}

#[test]
fn agentic_runs_fit_on_task_success_beside_qa_runs_and_routers_are_evaluated_on_games() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("alfworld");
    agentic_run(&run, "m2,flexa");
    // QA runs and the agentic run fit one policy: conversational cells on
    // the QA metric, agentic cells on task success.
    let policy = dir.path().join("policy.json");
    let out = ok(submem()
        .args(["route", "fit", "--from"])
        .arg(fixture("route"))
        .arg("--from")
        .arg(&run)
        .arg("--out")
        .arg(&policy)
        .output()
        .unwrap());
    assert!(out.contains("| agentic |"), "{out}");
    assert!(out.contains("| conversational |"), "{out}");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    assert_eq!(file["agentic_quality_metric"], "task_success", "{file}");
    assert_ne!(file["quality_metric"], "task_success");

    // A router fitted on the agentic run alone plays the same games; eval
    // compares it with the single substrates on task success.
    let agentic_policy = dir.path().join("agentic.json");
    ok(submem()
        .args(["route", "fit", "--from"])
        .arg(&run)
        .args(["--members", "m2,flexa", "--out"])
        .arg(&agentic_policy)
        .output()
        .unwrap());
    let router = format!(
        "router:policy={},members=m2+flexa",
        agentic_policy.display()
    );
    agentic_run(&run, &router);
    let eval = ok(submem()
        .args(["route", "eval", "--all-items", "--out"])
        .arg(&run)
        .arg("--policy")
        .arg(&agentic_policy)
        .output()
        .unwrap());
    assert!(eval.contains("metric task_success"), "{eval}");
    assert!(eval.contains("m2") && eval.contains("flexa"), "{eval}");
}
