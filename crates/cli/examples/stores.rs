//! Throughput of `submem serve` on its two stores: acknowledged writes/s
//! (batches of 10 turns, durable before the answer) and `m2` reads/s with
//! p50/p99 latency, with 1 and 8 clients, on the file store, on the
//! PostgreSQL store with one node, and with two nodes behind a round-robin
//! client (each request goes to the next node; the one that does not own
//! the namespace forwards it). Each client writes and reads its own
//! namespace; reads go to namespaces preloaded with 2,000 turns.
//!
//! ```sh
//! cargo build --release -p submem-cli --bin submem --examples
//! target/release/examples/stores          # 5 s per cell
//! target/release/examples/stores 2        # 2 s per cell
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::pg::PgCluster;
use support::{loopback_port, p50_p99, post, spawn, Node};

const PRELOAD: usize = 2000;

/// Source ids of written batches, unique across the whole run.
static NEXT_ID: AtomicUsize = AtomicUsize::new(1_000_000);

fn turn(i: usize) -> serde_json::Value {
    json!({"kind": "turn", "session_id": format!("s{}", i / 20), "speaker": "user",
        "text": format!("entry {i}: my {} and the {} near the harbour on day {}", ["violin", "garden", "train", "coffee", "sister"][i % 5], ["museum", "river", "office", "soup"][i % 4], i % 31),
        "source_id": format!("e{i}")})
}

/// `clients` loops of one operation against `bases` (round-robin) for
/// `secs`; ops/s, p50 and p99 ms.
async fn drive(
    c: &reqwest::Client,
    bases: &[String],
    clients: usize,
    secs: f64,
    write: bool,
    tag: &str,
) -> (f64, f64, f64) {
    let counter = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..clients)
        .map(|k| {
            let (c, bases, counter, tag) =
                (c.clone(), bases.to_vec(), counter.clone(), tag.to_string());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut turn_no = k;
                while Instant::now() < deadline {
                    let i = counter.fetch_add(1, Ordering::Relaxed);
                    let base = &bases[turn_no % bases.len()];
                    turn_no += 1;
                    let t = Instant::now();
                    if write {
                        let first = NEXT_ID.fetch_add(10, Ordering::Relaxed);
                        let events: Vec<_> = (first..first + 10).map(turn).collect();
                        post(
                            &c,
                            &format!("{base}/v1/namespaces/{tag}w{k}/events"),
                            &json!({ "events": events }),
                        )
                        .await;
                    } else {
                        let q = format!("what about the violin and the river on day {}?", i % 31);
                        post(
                            &c,
                            &format!("{base}/v1/namespaces/{tag}r{k}/read"),
                            &json!({"question": q, "budget": 2048, "k": 10}),
                        )
                        .await;
                    }
                    lat.push(t.elapsed().as_secs_f64());
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let rate = lat.len() as f64 / start.elapsed().as_secs_f64();
    let (p50, p99) = p50_p99(lat);
    (rate, p50, p99)
}

async fn setup(c: &reqwest::Client, base: &str, tag: &str) {
    for k in 0..8 {
        for kind in ["w", "r"] {
            post(
                c,
                &format!("{base}/v1/namespaces"),
                &json!({"name": format!("{tag}{kind}{k}"), "substrate": "m2"}),
            )
            .await;
        }
        for chunk in (0..PRELOAD).collect::<Vec<_>>().chunks(200) {
            let events: Vec<_> = chunk.iter().map(|i| turn(*i)).collect();
            post(
                c,
                &format!("{base}/v1/namespaces/{tag}r{k}/events"),
                &json!({ "events": events }),
            )
            .await;
        }
    }
}

#[tokio::main]
async fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5.0);
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let conf_dir = tempfile::tempdir().unwrap();
    let config = conf_dir.path().join("submem.toml");
    std::fs::write(&config, "[server]\n").unwrap();
    let pg = PgCluster::start();
    println!("{secs} s per cell; writes: batches of 10 turns; reads: m2 over {PRELOAD} turns, budget 2048, k 10\n");
    println!("| store | clients | acknowledged writes/s | write p50 / p99 ms | reads/s | read p50 / p99 ms |");
    println!("|---|---|---|---|---|---|");
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let setups: Vec<(&str, Vec<Node>)> = vec![
        (
            "file",
            vec![spawn(dirs[0].path(), loopback_port(), &config, &[])],
        ),
        ("PostgreSQL, 1 node", {
            let p = loopback_port();
            vec![spawn(
                dirs[1].path(),
                p,
                &config,
                &[
                    "--store",
                    &pg.url,
                    "--advertise",
                    &format!("http://127.0.0.1:{p}"),
                ],
            )]
        }),
    ];
    for (tag, (name, nodes)) in setups.into_iter().enumerate() {
        let tag = format!("s{tag}");
        let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
        setup(&c, &bases[0], &tag).await;
        for clients in [1, 8] {
            let w = drive(&c, &bases, clients, secs, true, &tag).await;
            let r = drive(&c, &bases, clients, secs, false, &tag).await;
            println!(
                "| {name} | {clients} | {:.0} | {:.2} / {:.2} | {:.0} | {:.2} / {:.2} |",
                w.0, w.1, w.2, r.0, r.1, r.2
            );
        }
        for n in nodes {
            n.kill();
        }
    }
    // Two nodes on the same database; the namespaces were first used by
    // node A, so node B forwards every other request.
    let (pa, pb) = (loopback_port(), loopback_port());
    let a = spawn(
        dirs[2].path(),
        pa,
        &config,
        &[
            "--store",
            &pg.url,
            "--advertise",
            &format!("http://127.0.0.1:{pa}"),
        ],
    );
    let b = spawn(
        dirs[3].path(),
        pb,
        &config,
        &[
            "--store",
            &pg.url,
            "--advertise",
            &format!("http://127.0.0.1:{pb}"),
        ],
    );
    let tag = "s9";
    setup(&c, &a.base, tag).await;
    let bases = vec![a.base.clone(), b.base.clone()];
    for clients in [1, 8] {
        let w = drive(&c, &bases, clients, secs, true, tag).await;
        let r = drive(&c, &bases, clients, secs, false, tag).await;
        println!("| PostgreSQL, 2 nodes, round-robin | {clients} | {:.0} | {:.2} / {:.2} | {:.0} | {:.2} / {:.2} |", w.0, w.1, w.2, r.0, r.1, r.2);
    }
    a.kill();
    b.kill();
}
