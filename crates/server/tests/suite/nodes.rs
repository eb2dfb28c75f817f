#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Several nodes on one PostgreSQL database: one owner per namespace, the
//! others forward to it; when the owner's sessions end (its process died),
//! the next request anywhere takes the namespace over from the database;
//! a stale writer's append collides with the log's key and fails instead of
//! forking the log.

use crate::common::pg::{connect, end_sessions, PgCluster};
use crate::common::{call, start_node, turn, Running};
use serde_json::json;
use submem_server::config::ServerConfig;

fn config(url: &str) -> ServerConfig {
    let mut c = ServerConfig::new();
    c.store = url.to_string();
    c.owner_sessions = 2;
    c
}

async fn write(s: &Running, ns: &str, ids: &[&str]) -> (u16, serde_json::Value) {
    let events: Vec<_> = ids
        .iter()
        .map(|id| {
            turn(
                id,
                &format!("note {id}: the lighthouse keeper rows to the island"),
            )
        })
        .collect();
    call(
        s,
        "POST",
        &format!("/v1/namespaces/{ns}/events"),
        None,
        Some(json!({ "events": events })),
    )
    .await
}

async fn shown(s: &Running, ns: &str) -> Vec<String> {
    let (st, body) = call(
        s,
        "POST",
        &format!("/v1/namespaces/{ns}/read"),
        None,
        Some(json!({"question": "lighthouse keeper island", "budget": 4096, "k": 100})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let mut ids: Vec<String> = body["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["source_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

async fn resident(s: &Running, ns: &str) -> bool {
    let (_, body) = call(s, "GET", &format!("/v1/namespaces/{ns}"), None, None).await;
    body["resident"].as_bool().unwrap()
}

/// The namespace's log as (seq) in order, straight from the table.
async fn log_seqs(url: &str, ns: &str) -> Vec<i64> {
    let c = connect(url).await;
    c.query(
        "SELECT e.seq FROM submem_events e JOIN submem_namespaces n ON n.id = e.namespace_id
         WHERE n.name = $1 ORDER BY e.seq",
        &[&ns],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn gapless(seqs: &[i64]) -> bool {
    seqs.windows(2).all(|w| w[1] == w[0] + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_forward_to_the_owner_and_take_over_when_it_dies() {
    let cluster = PgCluster::start();
    let url = cluster.database("nodes").await;
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_node(da.path(), config(&url)).await;
    let b = start_node(db.path(), config(&url)).await;

    // Created on B (catalog only), first used on A: A owns it.
    let (st, body) = call(
        &b,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": "shared", "substrate": "m2"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    let (st, body) = write(&a, "shared", &["a1", "a2"]).await;
    assert_eq!(st, 200, "{body}");
    // B forwards both writes and reads to A.
    let (st, body) = write(&b, "shared", &["b1"]).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(shown(&b, "shared").await, ["a1", "a2", "b1"]);
    assert!(resident(&a, "shared").await && !resident(&b, "shared").await);
    // Both nodes list it from the catalog.
    let (_, list) = call(&b, "GET", "/v1/namespaces", None, None).await;
    assert_eq!(list["namespaces"][0]["name"], "shared");
    // A duplicate write through B is refused by A, as on one node.
    let (st, body) = write(&b, "shared", &["a1"]).await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (409, Some("duplicate_source"))
    );

    // A's process "dies": its sessions end, the database drops its locks.
    let node_a = format!("submem {}", a.base);
    assert!(end_sessions(&url, &node_a).await > 0);
    let (st, body) = write(&b, "shared", &["b2"]).await;
    assert_eq!(st, 200, "B takes the namespace over: {body}");
    assert_eq!(shown(&b, "shared").await, ["a1", "a2", "b1", "b2"]);
    assert!(resident(&b, "shared").await);
    // A, still running with its lease lost, closes its copy without writing
    // and forwards to the new owner.
    let (st, body) = write(&a, "shared", &["a3"]).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(shown(&a, "shared").await, ["a1", "a2", "a3", "b1", "b2"]);
    // Four batches, four records, one after another.
    let seqs = log_seqs(&url, "shared").await;
    assert_eq!(seqs.len(), 4);
    assert!(gapless(&seqs), "{seqs:?}");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_writer_fails_instead_of_forking_the_log() {
    let cluster = PgCluster::start();
    let url = cluster.database("fence").await;
    let dir = tempfile::tempdir().unwrap();
    let a = start_node(dir.path(), config(&url)).await;
    call(
        &a,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": "f", "substrate": "m2"})),
    )
    .await;
    let (st, _) = write(&a, "f", &["x1"]).await;
    assert_eq!(st, 200);
    // Another writer appends the next record behind A's back (what a node
    // that wrongly believed it owned the namespace would do).
    let c = connect(&url).await;
    let record = serde_json::to_vec(&json!({"op": "write", "events": [
        {"kind": "turn", "session_id": "s1", "speaker": "user", "text": "the lighthouse keeper wrote elsewhere", "source_id": "other"}]}))
    .unwrap();
    c.execute(
        "INSERT INTO submem_events (namespace_id, seq, record)
         SELECT id, 2, $1 FROM submem_namespaces WHERE name = 'f'",
        &[&record],
    )
    .await
    .unwrap();
    // A's next append collides with seq 2: refused, retryable, not forked.
    let (st, body) = write(&a, "f", &["x2"]).await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (503, Some("namespace_busy")),
        "{body}"
    );
    assert_eq!(log_seqs(&url, "f").await, [1, 2]);
    // A gives the namespace up and reopens it from the log: the other
    // writer's record is there, and the retried write lands after it.
    let (st, body) = write(&a, "f", &["x2"]).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(shown(&a, "f").await, ["other", "x1", "x2"]);
    assert_eq!(log_seqs(&url, "f").await, [1, 2, 3]);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_a_clear_error_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let e = submem_server::Server::open(
        dir.path(),
        std::sync::Arc::new(submem::registry::Registry::default()),
        submem_core::test_utils::test_services(None),
        config(&format!("postgres://submem:s3cret@127.0.0.1:{port}/x")),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("cannot reach PostgreSQL"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
}
