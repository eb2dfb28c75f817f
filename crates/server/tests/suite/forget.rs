#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A forget leaves none of the forgotten text in the namespace's storage:
//! the log is rewritten to the live history and the substrate snapshotted
//! over it. A restart afterwards (no graceful stop) restores exactly the live
//! events, and writes continue on the rewritten log. The same scenario runs
//! on the file store and on the PostgreSQL store; on PostgreSQL the deleted
//! rows are dead tuples until `VACUUM FULL` rewrites the tables, after which
//! no relation file holds the text.

use crate::common::pg::{connect, PgCluster};
use crate::common::{call, start, turn};
use serde_json::json;
use std::path::{Path, PathBuf};
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

async fn sources(s: &crate::common::Running, ns: &str, question: &str) -> Vec<String> {
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

/// Where the namespaces' bytes are, and how to look for the secret there.
enum Storage {
    Files(PathBuf),
    Postgres { url: String, data: PathBuf },
}

impl Storage {
    /// After a server is dropped without a graceful stop: on PostgreSQL its
    /// sessions (and namespace locks) end as they would with its process.
    async fn crashed(&self) {
        if let Storage::Postgres { url, .. } = self {
            crate::common::pg::end_sessions(url, "submem").await;
        }
    }

    /// Files holding the secret. On PostgreSQL the pages are flushed first
    /// (`CHECKPOINT`), and with `vacuum` the tables are rewritten (`VACUUM
    /// FULL`) so that dead tuples go.
    async fn holding(&self, vacuum: bool) -> Vec<String> {
        match self {
            Storage::Files(dir) => files_holding(dir, SECRET),
            Storage::Postgres { url, data } => {
                let c = connect(url).await;
                if vacuum {
                    c.batch_execute("VACUUM FULL").await.unwrap();
                }
                c.batch_execute("CHECKPOINT").await.unwrap();
                files_holding(&data.join("base"), SECRET)
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forget_erases_the_text_from_log_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    forget_scenario(
        dir.path(),
        ServerConfig::new(),
        Storage::Files(dir.path().to_path_buf()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forget_erases_the_text_from_postgres_after_vacuum() {
    let cluster = PgCluster::start();
    let url = cluster.database("forget").await;
    let scratch = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new();
    config.store = url.clone();
    let storage = Storage::Postgres {
        url,
        data: cluster.data_dir(),
    };
    forget_scenario(scratch.path(), config, storage).await;
}

async fn forget_scenario(dir: &Path, mut config: ServerConfig, storage: Storage) {
    config.snapshot_every = 2; // snapshots before the forget hold the secret too
    let s = start(dir, config.clone()).await;
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
        let (_, info) = call(&s, "GET", &format!("/v1/namespaces/{ns}"), None, None).await;
        assert!(
            info.get("last_write_unix").is_none(),
            "nothing written yet: {info}"
        );
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
            !storage.holding(false).await.is_empty(),
            "the secret is on disk before the forget"
        );
        // The store tells when the log last changed, without opening it.
        let (_, listed) = call(&s, "GET", "/v1/namespaces", None, None).await;
        let row = listed["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == ns.as_str())
            .cloned()
            .unwrap();
        let last = row["last_write_unix"].as_u64().expect("a write time");
        assert!(
            last >= row["created_unix"].as_u64().unwrap(),
            "{substrate}: {row}"
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
            storage.holding(true).await,
            Vec::<String>::new(),
            "{substrate}: forgotten text left on disk"
        );
    }
    drop(s); // no graceful stop: the restart uses the rewritten log and its snapshot
    storage.crashed().await;

    let s = start(dir, config.clone()).await;
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
    storage.crashed().await;
    let mut config = config;
    config.snapshot_every = ServerConfig::new().snapshot_every;
    let s = start(dir, config).await;
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
    s.stop().await;
    assert_eq!(storage.holding(true).await, Vec::<String>::new());
}
