#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A forget leaves none of the forgotten text in the namespace's files: the
//! log is rewritten to the live history and the substrate snapshotted over
//! it. A restart afterwards (no graceful stop) restores exactly the live
//! events, and writes continue on the rewritten log.

mod common;

use common::{call, start, turn};
use serde_json::json;
use std::path::Path;
use submem_server::config::ServerConfig;

const SECRET: &str = "zebraquartz4471";

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    hits.push(p.strip_prefix(dir).unwrap().display().to_string());
                }
            }
        }
    }
    hits
}

async fn sources(s: &common::Running, ns: &str, question: &str) -> Vec<String> {
    let (st, body) = call(
        s,
        "POST",
        &format!("/v1/namespaces/{ns}/read"),
        None,
        Some(json!({"question": question, "budget": 4096, "k": 20})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    body["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["source_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forget_erases_the_text_from_log_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new();
    config.snapshot_every = 2; // snapshots before the forget hold the secret too
    let s = start(dir.path(), config.clone()).await;
    let substrates = ["m2", "m1-fill", "hybrid-fill", "flexa", "m10"];
    for (i, substrate) in substrates.iter().enumerate() {
        let ns = format!("ns{i}");
        let (st, body) = call(
            &s,
            "POST",
            "/v1/namespaces",
            None,
            Some(json!({"name": ns, "substrate": substrate})),
        )
        .await;
        assert_eq!(st, 201, "{substrate}: {body}");
        for batch in 0..3 {
            let mut events = vec![
                turn(
                    &format!("B{batch}:0"),
                    "the ferry to the island leaves at noon",
                ),
                turn(&format!("B{batch}:1"), "my sister plays the oboe in Ghent"),
            ];
            if batch == 1 {
                events.push(turn("S:1", &format!("my bank password is {SECRET}")));
            }
            let (st, body) = call(
                &s,
                "POST",
                &format!("/v1/namespaces/{ns}/events"),
                None,
                Some(json!({"events": events})),
            )
            .await;
            assert_eq!(st, 200, "{substrate}: {body}");
        }
        assert!(
            !files_holding(dir.path(), SECRET).is_empty(),
            "the secret is on disk before the forget"
        );
        let (st, body) = call(
            &s,
            "POST",
            &format!("/v1/namespaces/{ns}/forget"),
            None,
            Some(json!({"source_ids": ["S:1"]})),
        )
        .await;
        assert_eq!((st, body["forgotten"].as_u64()), (200, Some(1)), "{body}");
        // The next write is applied after the compaction that follows the forget.
        let (st, _) = call(
            &s,
            "POST",
            &format!("/v1/namespaces/{ns}/events"),
            None,
            Some(json!({"events": [turn("A:1", "the oboe recital is on Friday")]})),
        )
        .await;
        assert_eq!(st, 200);
        assert_eq!(
            files_holding(dir.path(), SECRET),
            Vec::<String>::new(),
            "{substrate}: forgotten text left on disk"
        );
    }
    drop(s); // no graceful stop: the restart uses the rewritten log and its snapshot

    let s = start(dir.path(), config).await;
    for (i, substrate) in substrates.iter().enumerate() {
        let ns = format!("ns{i}");
        let (_, info) = call(
            &s,
            "GET",
            &format!("/v1/namespaces/{ns}/footprint"),
            None,
            None,
        )
        .await;
        assert_eq!(info["events"], 7, "{substrate}: {info}");
        let shown = sources(&s, &ns, "password oboe ferry recital").await;
        assert!(
            !shown.contains(&"S:1".to_string()),
            "{substrate}: {shown:?}"
        );
        assert!(shown.contains(&"A:1".to_string()), "{substrate}: {shown:?}");
        // Writes go on after the rewrite, and survive another restart.
        let (st, body) = call(
            &s,
            "POST",
            &format!("/v1/namespaces/{ns}/events"),
            None,
            Some(json!({"events": [turn("A:2", "the island has a lighthouse")]})),
        )
        .await;
        assert_eq!(st, 200, "{substrate}: {body}");
    }
    drop(s);
    let s = start(dir.path(), ServerConfig::new()).await;
    for i in 0..substrates.len() {
        let (_, info) = call(
            &s,
            "GET",
            &format!("/v1/namespaces/ns{i}/footprint"),
            None,
            None,
        )
        .await;
        assert_eq!(info["events"], 8, "{info}");
    }
    assert_eq!(files_holding(dir.path(), SECRET), Vec::<String>::new());
    s.stop().await;
}
