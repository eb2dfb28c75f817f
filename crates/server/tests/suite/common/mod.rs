//! An in-process server on a free loopback port, on the test doubles of
//! `submem_core::test_utils` (hashing embedder, whitespace token counter), so
//! no model is loaded.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod pg;
pub mod port;
pub mod webdriver;

use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

use submem::registry::Registry;
use submem_core::Llm;
use submem_server::config::ServerConfig;
use submem_server::Server;

pub struct Running {
    pub base: String,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stops the server gracefully (it snapshots every namespace).
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap();
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

pub async fn start(dir: &Path, config: ServerConfig) -> Running {
    start_with_llm(dir, config, None).await
}

pub async fn start_with_llm(
    dir: &Path,
    config: ServerConfig,
    llm: Option<Arc<dyn Llm>>,
) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    start_on(listener, dir, config, llm).await
}

/// Dropping a server without [`Running::stop`] is a crash: its task is
/// aborted and the stop signal never sent, so nothing is snapshotted or
/// closed. (A dropped sender would complete the shutdown future and run the
/// graceful close in the background, racing the next server on the same
/// directory.)
impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        std::mem::forget(self.stop.take());
    }
}

/// A node of a several-node deployment: it advertises its own address.
pub async fn start_node(dir: &Path, mut config: ServerConfig) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    config.advertise = Some(format!("http://{}", listener.local_addr().unwrap()));
    start_on(listener, dir, config, None).await
}

async fn start_on(
    listener: tokio::net::TcpListener,
    dir: &Path,
    config: ServerConfig,
    llm: Option<Arc<dyn Llm>>,
) -> Running {
    let services = submem_core::test_utils::test_services(llm);
    let server = Server::open(dir, Arc::new(Registry::default()), services, config)
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        server
            .serve_listener(listener, async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    Running {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        stop: Some(tx),
        task: Some(task),
    }
}

/// The value of an unlabelled metric in `/metrics`.
pub async fn metric(r: &Running, name: &str) -> f64 {
    let text = r
        .client
        .get(r.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in {text}"))
}

pub fn turn(id: &str, text: &str) -> Value {
    json!({"kind": "turn", "session_id": "s1", "speaker": "user", "text": text, "source_id": id})
}

/// Sends `method path` with an optional key and JSON body; returns the
/// status and the parsed body (`Value::Null` when it is not JSON).
pub async fn call(
    r: &Running,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = r.client.request(method.parse().unwrap(), r.url(path));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub fn enc(ns: &str) -> String {
    let mut out = String::new();
    for b in ns.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A memory LLM that takes `delay` per call and answers with one line: slow
/// enough for a comparison's build to outlast the request, so its job's
/// progress, cancel and kept result can be driven.
#[derive(Debug)]
pub struct SlowLlm(pub std::time::Duration);

#[async_trait::async_trait]
impl Llm for SlowLlm {
    fn name(&self) -> &str {
        "slow-test-llm"
    }

    async fn complete(
        &self,
        _request: &submem_core::ChatRequest,
    ) -> Result<submem_core::Completion, submem_core::ServiceError> {
        tokio::time::sleep(self.0).await;
        Ok(submem_core::Completion {
            text: "Ben noted a fact about the weather.".into(),
            usage: submem_core::Usage::default(),
        })
    }
}
