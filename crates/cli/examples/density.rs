//! Tenant density of `submem serve` (file store): N `m2` namespaces of T
//! turns each, written through the API by 8 clients; the server's resident
//! memory with every namespace open and with a memory cap; the time from a
//! SIGKILL restart to `/healthz`; and the latency of the first read of a
//! namespace that is not open (a cold open: snapshot restored, log tail
//! replayed) against a read of an open one.
//!
//! ```sh
//! cargo build --release -p submem-cli --bin submem --examples
//! target/release/examples/density              # 10,000 namespaces of 20 turns, cap 256 MiB
//! target/release/examples/density 2000 20 64   # N, T, cap in MiB
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use support::{metric, p50_p99, post, spawn, until_healthy};

const MIB: f64 = 1048576.0;

fn turn(ns: usize, i: usize) -> serde_json::Value {
    json!({"kind": "turn", "session_id": "s1", "speaker": if i % 2 == 0 { "user" } else { "assistant" },
        "text": format!("tenant {ns} said thing {i}: the train to Lyon leaves at {} and my sister likes oboe music", 8 + i % 10),
        "source_id": format!("t{i}")})
}

/// Reads namespace `ns`; the latency in seconds.
async fn read(c: &reqwest::Client, base: &str, ns: usize) -> f64 {
    let t = Instant::now();
    post(
        c,
        &format!("{base}/v1/namespaces/n{ns}/read"),
        &json!({"question": "when does the train to Lyon leave?", "budget": 1024}),
    )
    .await;
    t.elapsed().as_secs_f64()
}

/// Reads every namespace once, 8 at a time.
async fn read_all(c: &reqwest::Client, base: &str, n: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, base, next) = (c.clone(), base.to_string(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    read(&c, &base, i).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

fn config(dir: &std::path::Path, cap_mb: u64) -> std::path::PathBuf {
    let path = dir.join(format!("cap{cap_mb}.toml"));
    std::fs::write(
        &path,
        format!("[server]\nmax_resident_mb = {cap_mb}\nidle_close_s = 0\n\n[server.limits]\nmax_namespaces = 1000000\n"),
    )
    .unwrap();
    path
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let turns: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20);
    let cap: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(256);
    let data = tempfile::tempdir().unwrap();
    let configs = tempfile::tempdir().unwrap();
    let (no_cap, with_cap) = (config(configs.path(), 0), config(configs.path(), cap));
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(16)
        .build()
        .unwrap();
    let port = support::loopback_port();
    println!(
        "{n} m2 namespaces of {turns} turns, file store, {} build\n",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );

    let node = spawn(data.path(), port, &no_cap, &[]);
    let empty = node.rss();
    let t = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, base, next) = (c.clone(), node.base.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    post(
                        &c,
                        &format!("{base}/v1/namespaces"),
                        &json!({"name": format!("n{i}"), "substrate": "m2"}),
                    )
                    .await;
                    let events: Vec<_> = (0..turns).map(|k| turn(i, k)).collect();
                    post(
                        &c,
                        &format!("{base}/v1/namespaces/n{i}/events"),
                        &json!({ "events": events }),
                    )
                    .await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let full = node.rss();
    println!("| what | figure |\n|---|---|");
    println!(
        "| create + write {n} namespaces, 8 clients | {:.1} s |",
        t.elapsed().as_secs_f64()
    );
    println!("| RSS empty server | {:.1} MiB |", empty as f64 / MIB);
    println!(
        "| RSS, all {n} open, no cap | {:.1} MiB ({:.0} KiB per namespace) |",
        full as f64 / MIB,
        (full.saturating_sub(empty)) as f64 / 1024.0 / n as f64
    );
    println!(
        "| substrates' own count (submem_resident_bytes) | {:.1} MiB |",
        metric(&c, &node.base, "submem_resident_bytes").await / MIB
    );
    let disk: u64 = walk(data.path());
    println!("| on disk | {:.1} MiB |", disk as f64 / MIB);

    // Warm reads, then SIGKILL and restart.
    let mut warm = Vec::new();
    for i in 0..200 {
        warm.push(read(&c, &node.base, (i * 7919) % n).await);
    }
    node.kill();
    let t = Instant::now();
    let node = spawn(data.path(), port, &no_cap, &[]);
    let healthy = until_healthy(&c, &node.base, t).await;
    println!(
        "| SIGKILL restart to /healthz | {:.0} ms |",
        healthy.as_secs_f64() * 1e3
    );
    let restarted = node.rss();
    println!(
        "| RSS after restart (nothing open) | {:.1} MiB |",
        restarted as f64 / MIB
    );
    let mut cold = Vec::new();
    for i in 0..200 {
        cold.push(read(&c, &node.base, (i * 7919) % n).await);
    }
    let (w50, w99) = p50_p99(warm);
    let (c50, c99) = p50_p99(cold);
    println!("| read of an open namespace, p50 / p99 | {w50:.2} / {w99:.2} ms |");
    println!(
        "| first read of a closed namespace (cold open), p50 / p99 | {c50:.2} / {c99:.2} ms |"
    );
    node.kill();

    let node = spawn(data.path(), port, &with_cap, &[]);
    read_all(&c, &node.base, n).await;
    println!(
        "| RSS, all {n} read once, cap {cap} MiB | {:.1} MiB ({} open, {} closed by the cap) |",
        node.rss() as f64 / MIB,
        metric(&c, &node.base, "submem_namespaces_open").await,
        metric(&c, &node.base, "submem_namespace_closes_total").await
    );
    node.kill();
}

fn walk(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() { walk(&e.path()) } else { m.len() };
    }
    total
}
