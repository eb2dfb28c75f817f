#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The HTTP API end to end on an in-process server: a write/read/forget
//! round trip, a restart from snapshot + log, every documented route served,
//! background jobs for an LLM substrate, and MCP over streamable HTTP.

use crate::common::{call, start, start_with_llm, turn};
use serde_json::{json, Value};
use std::sync::Arc;
use submem_server::app::ROUTES;
use submem_server::config::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_forget_and_restart_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new();
    config.snapshot_every = 2;
    let s = start(dir.path(), config.clone()).await;
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": "alice", "substrate": "m2"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    assert_eq!(body["substrate"], "m2");
    for (i, text) in [
        "my violin teacher is Ingrid",
        "the cat is called Miso",
        "we moved to Lyon in May",
    ]
    .iter()
    .enumerate()
    {
        let (st, body) = call(
            &s,
            "POST",
            "/v1/namespaces/alice/events",
            None,
            Some(json!({"events": [turn(&format!("D1:{i}"), text)]})),
        )
        .await;
        assert_eq!(st, 200, "{body}");
        assert_eq!(body["events"], 1);
    }
    let read =
        json!({"question": "who teaches the violin?", "budget": 256, "k": 2, "trace": ["D1:0"]});
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/alice/read",
        None,
        Some(read.clone()),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["sources"][0]["source_id"], "D1:0", "{body}");
    assert!(body["text"].as_str().unwrap().contains("Ingrid"));
    assert!(body["tokens"].as_u64().unwrap() > 0);
    // M2 traces its own ranking now: a top-k read says its k and where the asked-about turn ranked.
    assert_eq!(body["trace"]["top_k"], 2, "{body}");
    assert_eq!(body["evidence"][0]["source_id"], "D1:0", "{body}");
    assert_eq!(body["evidence"][0]["fate"], "shown", "{body}");
    assert_eq!(body["evidence"][0]["ranked"]["rank"], 0, "{body}");
    // FlexA-Mem traces: the read says how the asked-about event fared.
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": "f", "substrate": "flexa"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    // More history than the budget holds, so the read ranks.
    let mut events = vec![turn("D1:0", "my violin teacher is Ingrid")];
    events.extend((1..80).map(|i| {
        turn(
            &format!("D1:{i}"),
            &format!("filler number {i} about gardening and trains and weather"),
        )
    }));
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/f/events",
        None,
        Some(json!({"events": events})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let (_, body) = call(
        &s,
        "POST",
        "/v1/namespaces/f/read",
        None,
        Some(read.clone()),
    )
    .await;
    assert_eq!(
        body["trace"]["events"].as_array().map(Vec::len),
        Some(1),
        "{body}"
    );

    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/alice/forget",
        None,
        Some(json!({"source_ids": ["D1:0", "nope"]})),
    )
    .await;
    assert_eq!((st, body["forgotten"].as_u64()), (200, Some(1)), "{body}");
    let (_, body) = call(
        &s,
        "POST",
        "/v1/namespaces/alice/read",
        None,
        Some(read.clone()),
    )
    .await;
    assert!(
        !body["text"].as_str().unwrap().contains("Ingrid"),
        "forgotten: {body}"
    );

    let (st, m) = call(&s, "GET", "/v1/namespaces/alice/meter", None, None).await;
    assert_eq!(st, 200);
    assert_eq!(m["write"]["operation_latency"]["count"], 3, "{m}");
    assert_eq!(m["read"]["operation_latency"]["count"], 2, "{m}");
    let (_, f) = call(&s, "GET", "/v1/namespaces/alice/footprint", None, None).await;
    assert_eq!(f["events"], 2, "{f}");
    let (st, _) = call(&s, "POST", "/v1/namespaces/alice/manage", None, None).await;
    assert_eq!(st, 200);
    // Two more writes after the manage snapshot: the restart restores the
    // snapshot and replays them from the log.
    for id in ["D2:0", "D2:1"] {
        let (st, _) = call(
            &s,
            "POST",
            "/v1/namespaces/alice/events",
            None,
            Some(json!({"events": [turn(id, &format!("fact {id} about Kyoto"))]})),
        )
        .await;
        assert_eq!(st, 200);
    }
    let (_, before) = call(&s, "GET", "/v1/namespaces/alice", None, None).await;
    assert!(before["snapshot_offset"].as_u64().unwrap() > 0, "{before}");
    let metrics = s
        .client
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("submem_http_requests_total{method=\"POST\",route=\"/v1/namespaces/{ns}/events\",status=\"200\"} 6"), "{metrics}");
    assert!(!metrics.contains("alice"), "no namespace names in metrics");
    drop(s); // no graceful stop: the restart must rely on the log

    let s = start(dir.path(), config).await;
    // Metadata never opens a namespace: after a restart it is not resident
    // and has no live counters until a request needs its substrate.
    let (_, after) = call(&s, "GET", "/v1/namespaces/alice", None, None).await;
    assert_eq!(after["resident"], false, "{after}");
    assert!(after.get("events").is_none(), "{after}");
    let (st, foot) = call(&s, "GET", "/v1/namespaces/alice/footprint", None, None).await;
    assert_eq!((st, &foot["events"]), (200, &json!(4)), "{foot}");
    let (_, after) = call(&s, "GET", "/v1/namespaces/alice", None, None).await;
    assert_eq!(
        (&after["resident"], &after["events"]),
        (&json!(true), &json!(4)),
        "{after}"
    );
    let (_, body) = call(
        &s,
        "POST",
        "/v1/namespaces/alice/read",
        None,
        Some(json!({"question": "Kyoto", "budget": 256})),
    )
    .await;
    let ids: Vec<&str> = body["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["source_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"D2:0") && ids.contains(&"D2:1"), "{body}");
    let (_, body) = call(&s, "POST", "/v1/namespaces/alice/read", None, Some(read)).await;
    assert!(
        !body["text"].as_str().unwrap().contains("Ingrid"),
        "a forget survives a restart: {body}"
    );
    let (st, _) = call(&s, "DELETE", "/v1/namespaces/alice", None, None).await;
    assert_eq!(st, 200);
    let (st, _) = call(&s, "GET", "/v1/namespaces/alice", None, None).await;
    assert_eq!(st, 404);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_route_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), ServerConfig::new()).await;
    let (st, doc) = call(&s, "GET", "/v1/openapi.json", None, None).await;
    assert_eq!(st, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    for (method, path) in ROUTES {
        let path = path.replace("{ns}", "no-such-ns").replace("{id}", "job-0");
        let (st, body) = call(&s, &method.to_uppercase(), &path, None, Some(json!({}))).await;
        // A served route answers from its handler: never the router's
        // not_found / method_not_allowed fallbacks.
        assert!(st != 405, "{method} {path}: {body}");
        assert_ne!(body["error"]["code"], "not_found", "{method} {path}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_substrate_writes_run_as_background_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let llm: Arc<dyn submem_core::Llm> =
        Arc::new(submem_core::test_utils::ScriptedLlm::from_fn(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            Ok("{}".to_string())
        }));
    let s = start_with_llm(dir.path(), ServerConfig::new(), Some(llm)).await;
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": "n", "substrate": "m4"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    assert_eq!(body["background"], true);
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/n/events",
        None,
        Some(
            json!({"events": [turn("a", "Ingrid teaches the violin"), turn("b", "Miso is a cat")]}),
        ),
    )
    .await;
    assert_eq!(st, 202, "{body}");
    let job = body["job"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    for _ in 0..200 {
        let (st, j) = call(&s, "GET", &format!("/v1/jobs/{job}"), None, None).await;
        assert_eq!(st, 200);
        last = j;
        if last["state"] == "done" || last["state"] == "failed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(last["state"], "done", "{last}");
    assert_eq!(last["events_done"], 2);
    // The duplicate check happens before logging, job or not.
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/n/events",
        None,
        Some(json!({"events": [turn("a", "again")]})),
    )
    .await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (409, Some("duplicate_source")),
        "{body}"
    );
    s.stop().await;
}

/// Reads the JSON-RPC message of a streamable HTTP answer (JSON or SSE).
fn rpc_body(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str(text) {
        return v;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_streamable_http_is_scoped_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig::new()
        .with_key("a", "key-a", &["a."])
        .with_key("b", "key-b", &["b."]);
    let s = start(dir.path(), config).await;
    let url = s.url("/mcp");
    let (st, _) = call(&s, "POST", "/mcp", None, Some(json!({}))).await;
    assert_eq!(st, 401, "MCP needs a key too");

    async fn session(s: &crate::common::Running, url: &str, key: &str) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let r = s
            .client
            .post(url)
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let sid = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let _ = r.text().await.unwrap();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = s
            .client
            .post(url)
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &sid)
            .json(&note)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
        sid
    }
    async fn tool(
        s: &crate::common::Running,
        url: &str,
        key: &str,
        sid: &str,
        id: u64,
        name: &str,
        args: Value,
    ) -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}});
        let r = s
            .client
            .post(url)
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", sid)
            .json(&req)
            .send()
            .await
            .unwrap();
        let v = rpc_body(&r.text().await.unwrap());
        let text = v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("null")
            .to_string();
        json!({"is_error": v["result"]["isError"], "body": serde_json::from_str::<Value>(&text).unwrap_or(Value::Null)})
    }

    let sa = session(&s, &url, "key-a").await;
    let r = tool(
        &s,
        &url,
        "key-a",
        &sa,
        2,
        "remember",
        json!({"namespace": "a.notes", "text": "the wifi password is tulip"}),
    )
    .await;
    assert_ne!(r["is_error"], true, "{r}");
    let r = tool(
        &s,
        &url,
        "key-a",
        &sa,
        3,
        "recall",
        json!({"namespace": "a.notes", "question": "wifi password", "budget": 256}),
    )
    .await;
    assert!(r["body"]["text"].as_str().unwrap().contains("tulip"), "{r}");

    let sb = session(&s, &url, "key-b").await;
    let r = tool(
        &s,
        &url,
        "key-b",
        &sb,
        2,
        "recall",
        json!({"namespace": "a.notes", "question": "wifi password"}),
    )
    .await;
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(r["body"]["error"]["code"], "namespace_not_found", "{r}");
    let r = tool(
        &s,
        &url,
        "key-b",
        &sb,
        3,
        "remember",
        json!({"namespace": "a.notes", "text": "overwrite"}),
    )
    .await;
    assert_eq!(r["body"]["error"]["code"], "namespace_not_found", "{r}");
    let r = tool(&s, &url, "key-b", &sb, 4, "list_namespaces", json!({})).await;
    assert_eq!(r["body"]["namespaces"], json!([]), "{r}");

    // Ending a session answers 200: the official Python SDK reports any
    // other status than 200 and 204 as a failed termination.
    let r = s
        .client
        .delete(&url)
        .bearer_auth("key-b")
        .header("mcp-session-id", &sb)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    s.stop().await;
}
