//! Load benchmark of `submem serve` on loopback: read and write throughput
//! and p50/p99 latency for `m2` and `m1-fill` at 1 and 8 concurrent clients,
//! and the same reads (and writes) called in-process on an identical
//! substrate, so the server's overhead is a ratio from the same run.
//!
//! ```sh
//! cargo run --release -p submem-server --example load            # 3 s per cell, 2000 preloaded events
//! cargo run --release -p submem-server --example load -- 1 500   # 1 s per cell, 500 events
//! ```
//!
//! The clients (reqwest) run in the server's process and runtime, as a
//! loopback load generator on the same machine would compete for its cores.
//! Writes are batches of 10 turns, each fsynced before its answer. The models
//! are the embedded defaults (MiniLM for m1-fill, o200k token counts); without
//! a model in the cache the run stops with the loading error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use submem::registry::{Registry, SubstrateSpec};
use submem_core::{Event, Namespace, Query, Services, Substrate, Turn};
use submem_server::config::ServerConfig;
use submem_server::log::{EventLog, FileLog, LogRecord};
use submem_server::Server;

const WORDS: &[&str] = &[
    "violin", "teacher", "garden", "Lyon", "cat", "password", "birthday", "train", "coffee",
    "sister", "marathon", "dentist", "holiday", "recipe", "piano", "bicycle", "museum", "novel",
    "river", "office", "soup", "moving", "wedding", "camera", "harbour", "physics", "ticket",
    "balcony", "lemon", "hiking",
];

fn sentence(i: usize) -> String {
    let w = |k: usize| WORDS[(i * 7 + k * 13 + i / 3) % WORDS.len()];
    format!(
        "entry {i}: my {} and the {} near the {} on {} day",
        w(0),
        w(1),
        w(2),
        w(3)
    )
}

fn turn(i: usize) -> Event {
    Event::Turn(Turn {
        session_id: format!("s{}", i / 20),
        session_date: None,
        speaker: "user".into(),
        text: sentence(i),
        source_id: format!("e{i}"),
    })
}

/// Ten new turns, their ids taken from `ids`.
fn ten_turns(ids: &AtomicUsize) -> Vec<Event> {
    let first = ids.fetch_add(10, Ordering::Relaxed);
    (first..first + 10).map(turn).collect()
}

fn question(i: usize) -> String {
    format!(
        "what about the {} and {}?",
        WORDS[i % WORDS.len()],
        WORDS[(i * 11 + 5) % WORDS.len()]
    )
}

struct Cell {
    ops: usize,
    secs: f64,
    lat: Vec<f64>,
}

impl Cell {
    /// Operations per second.
    fn rate(&self) -> f64 {
        self.ops as f64 / self.secs
    }

    /// The in-process cell's row, with its throughput against the server's.
    fn against_server(&self, what: &str, server_rate: f64) -> String {
        format!(
            "{} in-process/server throughput {:.2}x",
            self.line(what),
            self.rate() / server_rate
        )
    }

    fn line(&self, what: &str) -> String {
        let mut l = self.lat.clone();
        l.sort_by(f64::total_cmp);
        let p = |q: f64| submem::meter::percentile(&l, q) * 1e3;
        format!(
            "| {what} | {:.0} | {:.2} | {:.2} |",
            self.rate(),
            p(0.5),
            p(0.99)
        )
    }
}

/// Runs `clients` loops of `op` for `secs`.
async fn drive<F, Fut>(clients: usize, secs: f64, op: F) -> Cell
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let counter = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let op = op.clone();
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let i = counter.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                op(i).await;
                lat.push(t.elapsed().as_secs_f64());
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    Cell {
        ops: lat.len(),
        secs: start.elapsed().as_secs_f64(),
        lat,
    }
}

async fn post(c: &reqwest::Client, url: &str, body: &Value) {
    let r = c.post(url).json(body).send().await.unwrap();
    assert!(
        r.status().is_success(),
        "{}: {}",
        r.status(),
        r.text().await.unwrap_or_default()
    );
    let _ = r.bytes().await.unwrap();
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let preload: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let models = submem_models::Config::load(None).unwrap();
    let services = Services {
        llm: None,
        embedder: models.embedder().unwrap(),
        tokens: models.token_counter().unwrap(),
    };
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::default());
    let server = Server::open(
        dir.path(),
        registry.clone(),
        services.clone(),
        ServerConfig::new(),
    )
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve_listener(listener, std::future::pending()));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    println!("{secs} s per cell, {preload} preloaded events, batches of 10 turns\n");
    println!("| cell | ops/s | p50 ms | p99 ms |\n|---|---|---|---|");
    // The floor of a durable write: one framed record appended and fsynced.
    let log = Arc::new(FileLog::open(&dir.path().join("bare.log")).unwrap());
    for tasks in [1, 8] {
        let l = log.clone();
        let cell = drive(tasks, secs, move |i| {
            let l = l.clone();
            async move {
                let events = (i * 10..i * 10 + 10).map(turn).collect();
                l.append(&LogRecord::Write { events }).await.unwrap();
            }
        })
        .await;
        println!(
            "{}",
            cell.line(&format!(
                "event log append alone (10 events, fsync), {tasks} task(s)"
            ))
        );
    }
    for spec in ["m2", "m1-fill"] {
        let ns = spec.replace(':', "_");
        post(
            &client,
            &format!("{base}/v1/namespaces"),
            &json!({"name": ns, "substrate": spec}),
        )
        .await;
        let events_url = format!("{base}/v1/namespaces/{ns}/events");
        // Preload through the API (batches of 100).
        for chunk in (0..preload).collect::<Vec<_>>().chunks(100) {
            let events: Vec<Event> = chunk.iter().map(|i| turn(*i)).collect();
            post(&client, &events_url, &json!({ "events": events })).await;
        }
        // The in-process twin holds the same events.
        let local: Arc<dyn Substrate> = registry
            .build(&SubstrateSpec::parse(spec).unwrap(), services.clone())
            .unwrap();
        let lns = Namespace::new("local").unwrap();
        for chunk in (0..preload).collect::<Vec<_>>().chunks(100) {
            let events: Vec<Event> = chunk.iter().map(|i| turn(*i)).collect();
            local.write(&lns, &events).await.unwrap();
        }
        let read_url = format!("{base}/v1/namespaces/{ns}/read");
        for clients in [1, 8] {
            let (c, u) = (client.clone(), read_url.clone());
            let cell = drive(clients, secs, move |i| {
                let (c, u) = (c.clone(), u.clone());
                async move {
                    post(
                        &c,
                        &u,
                        &json!({"question": question(i), "budget": 2048, "k": 10}),
                    )
                    .await
                }
            })
            .await;
            let server_rate = cell.rate();
            println!(
                "{}",
                cell.line(&format!("{spec} read, server, {clients} client(s)"))
            );
            let (l, n) = (local.clone(), lns.clone());
            let cell = drive(clients, secs, move |i| {
                let (l, n) = (l.clone(), n.clone());
                async move {
                    l.read(&Query::question(n, question(i), 2048).with_top_k(10))
                        .await
                        .unwrap();
                }
            })
            .await;
            let what = format!("{spec} read, in-process, {clients} task(s)");
            println!("{}", cell.against_server(&what, server_rate));
        }
        let base_id = Arc::new(AtomicUsize::new(1_000_000));
        for clients in [1, 8] {
            let (c, u, b) = (client.clone(), events_url.clone(), base_id.clone());
            let cell = drive(clients, secs, move |_| {
                let (c, u, b) = (c.clone(), u.clone(), b.clone());
                async move { post(&c, &u, &json!({ "events": ten_turns(&b) })).await }
            })
            .await;
            let server_rate = cell.rate();
            println!(
                "{}",
                cell.line(&format!(
                    "{spec} write (10 events, fsync), server, {clients} client(s)"
                ))
            );
            let (l, n, b) = (local.clone(), lns.clone(), base_id.clone());
            let cell = drive(clients, secs, move |_| {
                let (l, n, b) = (l.clone(), n.clone(), b.clone());
                async move {
                    l.write(&n, &ten_turns(&b)).await.unwrap();
                }
            })
            .await;
            let what = format!("{spec} write (10 events, no log), in-process, {clients} task(s)");
            println!("{}", cell.against_server(&what, server_rate));
        }
    }
}
