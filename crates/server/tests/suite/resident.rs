#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The resident set: namespaces open on their first request, once however
//! many requests arrive together; they close when idle or, least recently
//! used first, when the open substrates' memory passes `max_resident_mb`;
//! a closed namespace reopens with everything it held.

use crate::common::{call, metric, start, turn};
use serde_json::json;
use submem_server::config::ServerConfig;

async fn create(s: &crate::common::Running, ns: &str, substrate: &str) {
    let (st, body) = call(
        s,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": ns, "substrate": substrate})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
}

async fn write(s: &crate::common::Running, ns: &str, from: usize, n: usize) {
    let events: Vec<_> = (from..from + n)
        .map(|i| {
            turn(
                &format!("t{i}"),
                &format!("turn {i} about the harbour lighthouse and ferry number {i} to the island of word{i}"),
            )
        })
        .collect();
    let (st, body) = call(
        s,
        "POST",
        &format!("/v1/namespaces/{ns}/events"),
        None,
        Some(json!({ "events": events })),
    )
    .await;
    assert_eq!(st, 200, "{body}");
}

async fn events(s: &crate::common::Running, ns: &str) -> u64 {
    let (st, body) = call(
        s,
        "GET",
        &format!("/v1/namespaces/{ns}/footprint"),
        None,
        None,
    )
    .await;
    assert_eq!(st, 200, "{body}");
    body["events"].as_u64().unwrap()
}

async fn resident(s: &crate::common::Running, ns: &str) -> bool {
    let (_, body) = call(s, "GET", &format!("/v1/namespaces/{ns}"), None, None).await;
    body["resident"].as_bool().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_open_a_namespace_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), ServerConfig::new()).await;
    create(&s, "a", "m2").await;
    write(&s, "a", 0, 50).await;
    s.stop().await;

    let s = start(dir.path(), ServerConfig::new()).await;
    let (st, body) = call(&s, "GET", "/v1/namespaces", None, None).await;
    assert_eq!(st, 200);
    assert_eq!(
        body["namespaces"][0]["resident"], false,
        "listing opens nothing: {body}"
    );
    assert_eq!(metric(&s, "submem_namespace_opens_total").await, 0.0);
    let reads = (0..16).map(|i| {
        let s = &s;
        async move {
            let (st, body) = call(
                s,
                "POST",
                "/v1/namespaces/a/read",
                None,
                Some(json!({"question": format!("ferry number {i}"), "budget": 512})),
            )
            .await;
            assert_eq!(st, 200, "{body}");
        }
    });
    futures::future::join_all(reads).await;
    assert_eq!(metric(&s, "submem_namespace_opens_total").await, 1.0);
    assert_eq!(events(&s, "a").await, 50);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_namespace_closes_and_reopens_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new();
    config.idle_close_s = 1;
    let s = start(dir.path(), config).await;
    create(&s, "idle", "m2").await;
    write(&s, "idle", 0, 10).await;
    assert!(resident(&s, "idle").await);
    let mut closed = false;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if !resident(&s, "idle").await {
            closed = true;
            break;
        }
    }
    assert!(closed, "an idle namespace closes after idle_close_s");
    // Closing snapshotted it: the reopen replays nothing and holds all.
    write(&s, "idle", 10, 5).await;
    assert_eq!(events(&s, "idle").await, 15);
    let (_, info) = call(&s, "GET", "/v1/namespaces/idle", None, None).await;
    assert_eq!(info["resident"], true);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_cap_closes_least_recently_used_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new();
    config.max_resident_mb = 1;
    let s = start(dir.path(), config).await;
    let n = 12;
    for i in 0..n {
        let ns = format!("ns{i}");
        create(&s, &ns, "m2").await;
        write(&s, &ns, 0, 400).await;
    }
    // Open namespaces grow with their writes; the cap is checked after each
    // cold open and every second.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let open = metric(&s, "submem_namespaces_open").await;
    let bytes = metric(&s, "submem_resident_bytes").await;
    let closes = metric(&s, "submem_namespace_closes_total").await;
    assert!(closes > 0.0, "12 namespaces of 400 turns pass a 1 MiB cap");
    assert!(open < n as f64, "{open} open");
    // The newest namespace stays open (it was just used) even if it alone
    // passes the cap; the others were closed oldest first.
    assert!(resident(&s, &format!("ns{}", n - 1)).await);
    assert!(!resident(&s, "ns0").await);
    let per_namespace = bytes / open;
    assert!(
        bytes <= (1 << 20) as f64 + per_namespace,
        "{bytes} bytes open in {open} namespaces"
    );
    // Every namespace still answers with everything it held.
    for i in 0..n {
        assert_eq!(events(&s, &format!("ns{i}")).await, 400);
    }
    s.stop().await;
}
