#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! A substrate that panics (a bug in a plugin) fails the one request with a
//! 500 JSON error; the namespace and the process keep serving, and a write
//! whose substrate panicked is not acknowledged.

use async_trait::async_trait;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

use submem::registry::{Registry, SubstrateSpec};
use submem_core::plugin::SubstrateFactory;
use submem_core::{
    Event, Family, Footprint, Forget, MethodId, Namespace, Query, Recall, Substrate, SubstrateInfo,
    WriteReport,
};
use submem_server::config::ServerConfig;
use submem_server::Server;

/// `recent`, except that it panics on the word "boom".
#[derive(Debug)]
struct Boom(Arc<dyn Substrate>);

#[async_trait]
impl Substrate for Boom {
    fn info(&self) -> SubstrateInfo {
        self.0.info()
    }
    async fn write(&self, ns: &Namespace, events: &[Event]) -> submem_core::Result<WriteReport> {
        if events.iter().any(|e| e.content().contains("boom")) {
            panic!("boom in write");
        }
        self.0.write(ns, events).await
    }
    async fn read(&self, q: &Query) -> submem_core::Result<Recall> {
        if q.text.contains("boom") {
            panic!("boom in read");
        }
        self.0.read(q).await
    }
    fn footprint(&self) -> Footprint {
        self.0.footprint()
    }
    async fn persist(&self, dir: &Path) -> submem_core::Result<()> {
        self.0.persist(dir).await
    }
    async fn restore(&self, dir: &Path) -> submem_core::Result<()> {
        self.0.restore(dir).await
    }
    async fn forget(&self, t: &Forget) -> submem_core::Result<usize> {
        self.0.forget(t).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_substrate_fails_one_request_not_the_server() {
    let base = Arc::new(Registry::default());
    let inner = base.clone();
    let factory =
        SubstrateFactory::builder("boom", MethodId::from_static("Boom"), Family::BASELINE)
            .summary("recent, panicking on `boom`")
            .build_without_settings(move |ctx| {
                let r = inner
                    .build(
                        &SubstrateSpec::parse("recent").unwrap(),
                        ctx.services.clone(),
                    )
                    .map_err(|e| submem_core::Error::InvalidInput(e.to_string()))?;
                Ok(Arc::new(Boom(r)) as Arc<dyn Substrate>)
            });
    let registry = Arc::new(Registry::default().with(factory));
    let dir = tempfile::tempdir().unwrap();
    let server = Server::open(
        dir.path(),
        registry,
        submem_core::test_utils::test_services(None),
        ServerConfig::new(),
    )
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve_listener(listener, std::future::pending()));
    let c = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        let c = c.clone();
        let u = format!("{url}{path}");
        async move {
            let r = c.post(u).json(&body).send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let turn = |id: &str, text: &str| json!({"kind": "turn", "session_id": "s", "speaker": "u", "text": text, "source_id": id});
    assert_eq!(
        post("/v1/namespaces", json!({"name": "b", "substrate": "boom"}))
            .await
            .0,
        201
    );
    let (st, body) = post(
        "/v1/namespaces/b/events",
        json!({"events": [turn("1", "boom goes the write")]}),
    )
    .await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (500, Some("internal")),
        "{body}"
    );
    let (st, body) = post(
        "/v1/namespaces/b/read",
        json!({"question": "boom", "budget": 128}),
    )
    .await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (500, Some("internal")),
        "{body}"
    );
    // Same namespace, still serving; the panicked write is not stored.
    let (st, body) = post(
        "/v1/namespaces/b/events",
        json!({"events": [turn("2", "a quiet fact")]}),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let (st, body) = post(
        "/v1/namespaces/b/read",
        json!({"question": "fact", "budget": 128}),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let ids: Vec<&str> = body["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["2"], "{body}");
}
