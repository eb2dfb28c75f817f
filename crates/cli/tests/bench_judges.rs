#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `submem bench --judge yes,no` with two judges on real HTTP servers named
//! in the configuration (`[servers.yes]`, `[servers.no]`): one accepts every
//! answer (and is flagged at the top of the report), the other rejects every
//! answer; the report gives P4 per judge and their agreement, the checks
//! are logged, a resume asks nothing again and refuses other judges, and a
//! sharded run merges its checks.

mod common;
use common::text;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};

fn submem() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_submem"));
    c.env_remove("SUBMEM_BENCH_ABORT_AFTER")
        .env("SUBMEM_FETCH", "false");
    for v in [
        "SUBMEM_OPENAI_BASE_URL",
        "SUBMEM_OPENAI_MODEL",
        "OPENAI_BASE_URL",
    ] {
        c.env_remove(v);
    }
    c
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/tests/fixtures")
        .join(name)
}

/// Chat requests per server (`yes`, `no`, `reader`).
type Hits = Arc<Mutex<HashMap<String, usize>>>;

/// Every chat completion under `/yes/v1` is CORRECT, under `/no/v1` WRONG,
/// under `/reader/v1` a non-answer; each counts 10 + 2 tokens.
async fn chat(State(hits): State<Hits>, uri: Uri) -> Response {
    let who = uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    let reply = match who.as_str() {
        "yes" => "The generated answer is about the same thing. CORRECT",
        "no" => "It does not match. WRONG",
        _ => "I don't know",
    };
    *hits.lock().unwrap().entry(who).or_default() += 1;
    Json(json!({
        "id": "x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    }))
    .into_response()
}

/// The servers on one loopback port, and a configuration naming them.
fn servers(rt: &tokio::runtime::Runtime, dir: &Path) -> (PathBuf, Hits) {
    let hits: Hits = Arc::default();
    let app = Router::new().fallback(chat).with_state(hits.clone());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(SocketAddr::from((
            [127, 0, 0, 1],
            0,
        ))))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    let config = dir.join("submem.toml");
    std::fs::write(
        &config,
        format!(
            "[openai]\nbase_url = \"http://{addr}/reader/v1\"\nchat_model = \"reader-model\"\n\
             [servers.yes]\nbase_url = \"http://{addr}/yes/v1\"\nchat_model = \"yes-model\"\n\
             [servers.no]\nbase_url = \"http://{addr}/no/v1\"\nchat_model = \"no-model\"\n"
        ),
    )
    .unwrap();
    (config, hits)
}

/// A bench run on the fixture, read by the `[openai]` test server unless
/// `extra` names another `--reader`.
fn bench(config: &Path, out: &Path, substrates: &str, extra: &[&str]) -> Output {
    let reader: &[&str] = if extra.contains(&"--reader") {
        &[]
    } else {
        &["--reader", "openai"]
    };
    submem()
        .arg("--config")
        .arg(config)
        .args(["bench", "--dataset", "locomo", "--data"])
        .arg(fixture("locomo-mini.json"))
        .args(["--substrates", substrates, "--no-baselines", "-q"])
        .args(reader)
        .args(["--memory-llm", "none", "--budget", "512"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hits(h: &Hits, who: &str) -> usize {
    h.lock().unwrap().get(who).copied().unwrap_or(0)
}

#[test]
fn a_judge_that_accepts_everything_is_flagged_beside_a_second_judge() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, h) = servers(&rt, dir.path());
    let out = dir.path().join("run");
    let o = bench(&config, &out, "m2", &["--judge", "yes,no"]);
    assert!(o.status.success(), "{}", text(&o));

    // The fixture's 3 answerable questions, each judged by both; the 3
    // sampled questions' 8 probes, each judged by both.
    assert_eq!(
        (hits(&h, "reader"), hits(&h, "yes"), hits(&h, "no")),
        (3, 11, 11)
    );
    let items = jsonl(&out.join("items.jsonl"));
    let answered: Vec<&Value> = items.iter().filter(|i| i["answered"] == true).collect();
    assert_eq!(answered.len(), 3);
    for i in &answered {
        assert_eq!(i["judge"], true, "the first judge's verdict is P4's");
        assert_eq!(i["judges"]["yes"]["correct"], true);
        assert_eq!(i["judges"]["no"]["correct"], false);
        assert_eq!(i["judge_tokens"], 24, "both judges' calls metered");
    }
    let checks = jsonl(&out.join("judge_checks.jsonl"));
    assert_eq!(checks.len(), 16);
    assert!(checks.iter().all(|c| c["tokens"] == 12));
    assert!(checks
        .iter()
        .all(|c| c["accepted"] == (c["judge"] == "yes")));

    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let head: Vec<&str> = report.lines().take(4).collect();
    assert_eq!(head[0], "# submem bench report");
    assert!(
        head[2].starts_with("> **Warning: the judge `yes` is lenient.**")
            && head[2].contains(
                "2 of 2 specific wrong answers (100 %) and 3 of 3 vague wrong answers (100 %)"
            ),
        "{report}"
    );
    assert!(!report.contains("judge `no` is lenient"), "{report}");
    assert!(
        report.contains("> **Warning: the judge `no` is strict.** In its checks it rejected 3 of 3 gold answers (100 %)"),
        "{report}"
    );
    assert!(!report.contains("is mostly unreadable"), "{report}");
    assert!(
        report.contains("| yes | 3 | 0/3 = 0.00 [0.00, 0.56] |"),
        "{report}"
    );
    assert!(
        report.contains("| no | 3 | 3/3 = 1.00 [0.44, 1.00] |"),
        "{report}"
    );
    assert!(
        report.contains("| locomo | 512 | 10 | m2 | 0.000 | 1.000 |"),
        "{report}"
    );
    assert!(
        report.contains("| no · yes | 3 | 0 | 0.000 | 3 |"),
        "{report}"
    );
    assert!(
        report.contains(
            "judges: yes (yes: openai yes-model (judge)), no (no: openai no-model (judge))"
        ),
        "{report}"
    );
    let summary = json_file(&out.join("summary.json"));
    assert_eq!(summary["judge_checks"]["leniency_limit"], 0.2);
    assert_eq!(summary["judge_checks"]["judges"][0]["lenient"], true);
    assert_eq!(summary["judge_checks"]["judges"][1]["lenient"], false);
    assert_eq!(
        summary["judge_agreement"][0]["disagreements"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let info = json_file(&out.join("run.json"));
    assert_eq!(
        info["judge"],
        json!([
            "yes: openai yes-model (judge)",
            "no: openai no-model (judge)"
        ])
    );
    assert_eq!(info["judge_checks"], 20);
    assert!(text(&o).contains("judge_checks.jsonl"), "{}", text(&o));

    // The same command again asks nothing; other judges are refused.
    let o = bench(&config, &out, "m2", &["--judge", "yes,no"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((hits(&h, "yes"), hits(&h, "no")), (11, 11));
    let o = bench(&config, &out, "m2", &["--judge", "yes"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("holds a run with judge = ["),
        "{}",
        text(&o)
    );

    // A limit of 1 flags no one (a share must pass it).
    let o = bench(
        &config,
        &dir.path().join("limit"),
        "m2",
        &[
            "--judge",
            "yes",
            "--judge-leniency-limit",
            "1",
            "--judge-checks",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report = std::fs::read_to_string(dir.path().join("limit/report.md")).unwrap();
    assert!(
        !report.contains("Warning") && report.contains("## Judge checks"),
        "{report}"
    );
    assert!(!report.contains("## Several judges"), "{report}");
}

#[test]
fn a_named_judge_is_checked_in_a_run_without_a_reader() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, h) = servers(&rt, dir.path());
    let out = dir.path().join("run");
    let o = bench(&config, &out, "m2", &["--reader", "none", "--judge", "yes"]);
    assert!(o.status.success(), "{}", text(&o));
    // No answer to judge, but the 8 probes are graded.
    assert_eq!((hits(&h, "reader"), hits(&h, "yes")), (0, 8));
    assert_eq!(jsonl(&out.join("judge_checks.jsonl")).len(), 8);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("> **Warning: the judge `yes` is lenient.**"),
        "{report}"
    );
    // Without --judge, a run without a reader has no judge at all.
    let o = bench(
        &config,
        &dir.path().join("plain"),
        "m2",
        &["--reader", "none"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(!dir.path().join("plain/judge_checks.jsonl").exists());
    assert_eq!(hits(&h, "yes"), 8);
}

#[test]
fn sharded_runs_merge_their_judge_checks() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, h) = servers(&rt, dir.path());
    let shards: Vec<PathBuf> = (1..=2).map(|i| dir.path().join(format!("s{i}"))).collect();
    for (i, s) in shards.iter().enumerate() {
        let shard = format!("{}/2", i + 1);
        let o = bench(
            &config,
            s,
            "m2,recent",
            &["--judge", "yes", "--shard", &shard],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    assert!(shards[0].join("judge_checks.jsonl").is_file());
    assert!(
        !shards[1].join("judge_checks.jsonl").exists(),
        "shard 1 runs the checks"
    );
    assert_eq!(hits(&h, "yes"), 6 + 8);
    let merged = dir.path().join("merged");
    let o = submem()
        .args(["bench", "merge"])
        .args(&shards)
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(jsonl(&merged.join("judge_checks.jsonl")).len(), 8);
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(report.contains("judge `yes` is lenient"), "{report}");
}

#[test]
fn unknown_judges_are_clear_errors_before_the_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, h) = servers(&rt, dir.path());
    let out = dir.path().join("x");
    for (args, needle) in [
        (vec!["--judge", "yes,nope"], "no server \"nope\""),
        (vec!["--judge", "none,yes"], "give it alone"),
        (
            vec!["--judge", "yes", "--judge-leniency-limit", "2"],
            "--judge-leniency-limit 2",
        ),
        (vec!["--judge", "nope", "--check"], "no server \"nope\""),
    ] {
        let o = bench(&config, &out, "m2", &args);
        let t = text(&o);
        assert!(!o.status.success() && t.contains(needle), "{needle}: {t}");
        assert!(!t.contains("panicked"), "{t}");
    }
    assert_eq!(hits(&h, "reader"), 0);
}
