//! How long a cold open takes: a namespace of 1,000 turns (written in
//! batches of 10, as a chat client would) is opened by its first request
//! after a SIGKILL restart: the newest snapshot is restored and the log
//! after it replayed. Snapshots are taken every `snapshot_every` records or
//! once applying the unsnapshotted records took `snapshot_after_apply_ms`,
//! so the replay part is bounded for the embedding substrates too (they
//! recompute every replayed vector). Uses the embedded models (MiniLM for
//! m1-fill and hybrid-fill).
//!
//! ```sh
//! cargo build --release -p submem-cli --bin submem --examples
//! target/release/examples/cold_open          # m2, m1-fill, hybrid-fill; 5 cold opens each
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use std::time::Instant;
use support::{loopback_port, metric, p50_p99, post, spawn};

fn turn(i: usize) -> serde_json::Value {
    json!({"kind": "turn", "session_id": format!("s{}", i / 40), "speaker": if i % 2 == 0 { "user" } else { "assistant" },
        "text": format!("turn {i}: we talked about the {} and the {} near the harbour, and I said it costs {} euros", ["violin", "garden", "train", "coffee", "sister", "museum"][i % 6], ["river", "office", "soup", "ticket"][i % 4], i % 97),
        "source_id": format!("t{i}")})
}

#[tokio::main]
async fn main() {
    let turns: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let c = reqwest::Client::new();
    let conf = tempfile::tempdir().unwrap();
    let config = conf.path().join("submem.toml");
    std::fs::write(&config, "[server]\n").unwrap();
    println!("namespaces of {turns} turns written in batches of 10; first read after a SIGKILL restart\n");
    println!("| substrate | write all | cold open (server's own time) p50 / max | first read incl. open p50 / p99 | warm read p50 |");
    println!("|---|---|---|---|---|");
    for spec in ["m2", "m1-fill", "hybrid-fill"] {
        let data = tempfile::tempdir().unwrap();
        let port = loopback_port();
        let node = spawn(data.path(), port, &config, &[]);
        post(
            &c,
            &format!("{}/v1/namespaces", node.base),
            &json!({"name": "n", "substrate": spec}),
        )
        .await;
        let t = Instant::now();
        for b in 0..turns / 10 {
            let events: Vec<_> = (b * 10..b * 10 + 10).map(turn).collect();
            post(
                &c,
                &format!("{}/v1/namespaces/n/events", node.base),
                &json!({ "events": events }),
            )
            .await;
        }
        let wrote = t.elapsed();
        let q = json!({"question": "what did I say about the violin near the harbour?", "budget": 2048});
        let mut warm = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            post(&c, &format!("{}/v1/namespaces/n/read", node.base), &q).await;
            warm.push(t.elapsed().as_secs_f64());
        }
        let mut node = node;
        let (mut first, mut opens) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            node.kill();
            node = spawn(data.path(), port, &config, &[]);
            let t = Instant::now();
            post(&c, &format!("{}/v1/namespaces/n/read", node.base), &q).await;
            first.push(t.elapsed().as_secs_f64());
            opens.push(metric(&c, &node.base, "submem_namespace_open_seconds_total").await);
        }
        node.kill();
        let max_open = opens.iter().cloned().fold(0.0, f64::max) * 1e3;
        let (o50, _) = p50_p99(opens);
        let (f50, f99) = p50_p99(first);
        let (w50, _) = p50_p99(warm);
        println!(
            "| {spec} | {:.1} s | {o50:.0} / {max_open:.0} ms | {f50:.0} / {f99:.0} ms | {w50:.1} ms |",
            wrote.as_secs_f64()
        );
    }
}
