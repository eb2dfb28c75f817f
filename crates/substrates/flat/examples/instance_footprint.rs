#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! The fixed resident cost of one flat substrate instance, measured the way
//! `submem serve` pays it: one instance per namespace (tenant), built from
//! the registry's factory with metered services, written one batch of 20
//! short turns (about 15 words each) and read once.
//!
//! ```sh
//! cargo run --release -p submem-flat --example instance_footprint            # m2, m1-fill, hybrid-fill, 200 each
//! cargo run --release -p submem-flat --example instance_footprint -- 300 m2  # one substrate, 300 instances
//! ```
//!
//! Each substrate is measured in a child process of its own (allocator state
//! and thread pools of one never colour another's figure). The child builds
//! two warm-up instances first (one-time statics: stop lists, tokio, rayon's
//! global pool), then reads `VmRSS` and `Threads` from `/proc/self/status`,
//! builds N instances and keeps them all alive, and reads them again after
//! the builds (empty instances) and after the writes and reads. The figures
//! are per instance: (after − before) / N. RSS is noisy (allocator pages,
//! purging); run it twice and compare.
//!
//! The children run with `MIMALLOC_PURGE_DELAY=0` (unless the variable is
//! set already): mimalloc then hands freed pages back at once instead of
//! after its 10 ms delay, on the next allocation in the same thread. With
//! the delay, what the warm-up freed (a tantivy writer's 4 MiB term table,
//! for one) stays resident, the instances measured next are allocated
//! into it, and a thousand empty M2 instances read as 0 KiB each.
//!
//! Embeddings come from core's hashing test embedder at 384 dimensions (the
//! width of all-MiniLM-L6-v2): in the server one embedder serves every
//! namespace, so its weights are no part of the per-instance cost, and the
//! vectors stored per unit have the real width. Like the `submem` binary,
//! the process runs on mimalloc.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use submem_core::plugin::{BuildContext, Settings};
use submem_core::test_utils::{HashingEmbedder, WhitespaceCounter};
use submem_core::{Event, Namespace, Query, Services, Substrate, Turn};
use submem_kit::MeteredSubstrate;

// As in the `submem` binary (crates/cli/src/main.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_N: usize = 200;
const DEFAULT_SPECS: [&str; 3] = ["m2", "m1-fill", "hybrid-fill"];
const TURNS: usize = 20;
const WARM_UP: usize = 2;

/// `VmRSS` in KiB and `Threads` of this process.
fn rss_and_threads() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("Threads:"))
}

const WORDS: [&str; 48] = [
    "morning",
    "coffee",
    "parked",
    "level",
    "garage",
    "sister",
    "visited",
    "Oslo",
    "violin",
    "lesson",
    "teacher",
    "dinner",
    "pasta",
    "friday",
    "meeting",
    "project",
    "deadline",
    "moved",
    "apartment",
    "garden",
    "tomatoes",
    "running",
    "marathon",
    "training",
    "knee",
    "doctor",
    "appointment",
    "tuesday",
    "birthday",
    "gift",
    "book",
    "novel",
    "reading",
    "holiday",
    "beach",
    "train",
    "ticket",
    "Lisbon",
    "camera",
    "photos",
    "recipe",
    "bread",
    "flour",
    "oven",
    "dog",
    "walk",
    "park",
    "weekend",
];

/// Twenty turns of about 15 words, different per namespace.
fn turns(seed: u64) -> Vec<Event> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..TURNS)
        .map(|i| {
            let n = 12 + (next() % 7) as usize;
            let mut text: Vec<&str> = (0..n)
                .map(|_| WORDS[(next() % WORDS.len() as u64) as usize])
                .collect();
            if i == 0 {
                // What the read after the write asks for.
                text.extend(["sister", "Oslo"]);
            }
            Event::Turn(Turn {
                session_id: format!("s{}", i / 10),
                session_date: Some("8 May 2023".into()),
                speaker: if i % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text: text.join(" "),
                source_id: format!("D{}:{}", i / 10 + 1, i % 10 + 1),
            })
        })
        .collect()
}

fn services() -> Services {
    Services {
        llm: None,
        embedder: Arc::new(HashingEmbedder::new(384)),
        tokens: Arc::new(WhitespaceCounter),
    }
}

type Instance = MeteredSubstrate<Arc<dyn Substrate>>;

fn build(spec: &str, services: &Services) -> Instance {
    let factory = submem_flat::factories()
        .into_iter()
        .find(|f| f.answers_to(spec))
        .unwrap_or_else(|| panic!("no flat substrate answers to {spec:?}"));
    MeteredSubstrate::build(services, |s| {
        factory.build(&BuildContext::new(s), &Settings::new())
    })
    .expect("build")
}

async fn fill(m: &Instance, i: usize) {
    let ns = Namespace::new(format!("tenant-{i}")).unwrap();
    m.write(&ns, &turns(i as u64 + 1)).await.expect("write");
    let q = Query::question(ns, "when did my sister visit Oslo?", 4096);
    let r = m.read(&q).await.expect("read");
    assert!(
        !r.sources.is_empty(),
        "namespace {i}: the read finds nothing"
    );
}

/// One substrate, `n` instances; prints one tab-separated line.
fn child(spec: &str, n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let services = services();
    let mut warm = Vec::new();
    for i in 0..WARM_UP {
        let m = build(spec, &services);
        rt.block_on(fill(&m, usize::MAX - i));
        warm.push(m);
    }
    std::thread::sleep(Duration::from_millis(200));
    let (rss0, threads0) = rss_and_threads();
    let instances: Vec<Instance> = (0..n).map(|_| build(spec, &services)).collect();
    let (rss1, threads1) = rss_and_threads();
    for (i, m) in instances.iter().enumerate() {
        rt.block_on(fill(m, i));
    }
    // Let allocator purges and exiting threads settle.
    std::thread::sleep(Duration::from_millis(500));
    let (rss2, threads2) = rss_and_threads();
    let footprint: u64 = instances
        .iter()
        .map(|m| m.footprint().memory_bytes)
        .sum::<u64>()
        / n as u64;
    let per = |a: u64, b: u64| (b as f64 - a as f64) / n as f64;
    println!(
        "{spec}\t{n}\t{:.1}\t{:.2}\t{:.1}\t{:.2}\t{:.1}\t{}\t{}",
        per(rss0, rss1),
        per(threads0, threads1),
        per(rss0, rss2),
        per(threads0, threads2),
        footprint as f64 / 1024.0,
        rss0 / 1024,
        rss2 / 1024,
    );
    drop(instances);
    drop(warm);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, spec, n] = args.as_slice() {
        if flag == "--child" {
            child(spec, n.parse().expect("instance count"));
            return;
        }
    }
    let n: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(DEFAULT_N);
    let specs: Vec<String> = match args.iter().skip(1).cloned().collect::<Vec<_>>() {
        v if v.is_empty() => DEFAULT_SPECS.iter().map(|s| s.to_string()).collect(),
        v => v,
    };
    let exe = std::env::current_exe().expect("own path");
    println!(
        "{n} instances per substrate, {TURNS} turns of ~15 words each, one read; \
         per instance: RSS in KiB, threads (mimalloc, hashing embedder 384-d)"
    );
    println!(
        "{:<12} {:>5} {:>14} {:>13} {:>16} {:>15} {:>15} {:>14}",
        "substrate",
        "n",
        "built KiB/inst",
        "built thr/inst",
        "written KiB/inst",
        "written thr/inst",
        "footprint KiB",
        "RSS MiB before→after",
    );
    for spec in specs {
        let mut child = Command::new(&exe);
        child.args(["--child", &spec, &n.to_string()]);
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            child.env("MIMALLOC_PURGE_DELAY", "0");
        }
        let out = child.output().expect("run the child");
        if !out.status.success() {
            eprintln!("{spec}: {}", String::from_utf8_lossy(&out.stderr));
            std::process::exit(1);
        }
        let line = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = line.trim().split('\t').collect();
        if f.len() != 9 {
            eprintln!("{spec}: unexpected child output {line:?}");
            std::process::exit(1);
        }
        println!(
            "{:<12} {:>5} {:>14} {:>13} {:>16} {:>15} {:>15} {:>8}→{}",
            f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]
        );
    }
}
