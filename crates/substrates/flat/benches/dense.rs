#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M1 read latency on the exact and HNSW paths at several sizes (to choose
//! `exact_threshold`), at a large size, index-insert throughput and bytes per
//! unit. Query embedding is excluded: vectors are precomputed and passed to
//! `read_with_vector`. Every read is checked: a query equal to a stored
//! vector must find that unit first.
//!
//! Vectors are clustered (topic-like): `n/50` random unit centres, each point
//! its centre plus a random offset of norm 0.75 (cosine ≈ 0.8 to the centre),
//! which gives the graph the locality real sentence embeddings have.
//! `SUBMEM_BENCH_VECTORS=random` uses uniform random unit vectors instead,
//! the worst case for any graph index. `SUBMEM_BENCH_VECTORS=topics` nests
//! the centres in `n/5,000` subjects (each centre its subject plus an offset
//! of norm 0.75), so that clusters of one subject lie near each other as a
//! corpus's topics do. `SUBMEM_BENCH_DENSE_N` sets the large
//! size (default 100,000, the target size; building its graph takes
//! a few minutes on 2 cores).
//!
//! `SUBMEM_BENCH_M1` sweeps the graph's settings (`DenseConfig` as JSON,
//! `{"m": 16, "ef_construction": 40}`), `SUBMEM_BENCH_DENSE_BATCH` sets the
//! units per write (default 5,000; a bulk load writes them all at once) and
//! `SUBMEM_BENCH_DENSE_ONLY=large` skips the small sizes. The large size's
//! index is the one the settings pick (graph below `partition_threshold`,
//! partitions from it); `m1_insert_large` then times writes of 10,000 more
//! units into it.
//!
//! Measured at a million units (2 cores, release, medians of one build each;
//! issue #45). The HNSW graph alone (`partition_threshold` above the size):
//! the default graph (M 24, ef_construction 100) inserts 1,196 units/s with
//! `topics` vectors in one batch and reaches recall@10 0.54 at ef_search 64;
//! M 16 / ef_construction 40 ~2,500 units/s at 0.60 (ef_search 96); at
//! 200,000 units M 16 / ef_construction 40 gives 3,322 units/s at 0.93:
//! hnsw_rs's insert is bound by pointer-chasing through the graph, and its
//! greedy walk loses the bench's tight 50-unit clusters among 20,000.
//! With the defaults (partitions from 20,000 units): one write of a million
//! builds at 15,503 units/s, recall@10 0.981, read p50 1.34 ms (exact scan
//! 134 ms), 1,869 resident and 1,753 disk bytes per unit, persist 16.1 s,
//! restore 7.6 s; in writes of 5,000 (exact, then graph to 20,000, then
//! partitions trained again at 65k, 200k and 605k) 12,640 units/s, recall
//! 0.972, read p50 1.43 ms, 2,301 resident bytes per unit; `m1_insert_large`
//! adds 10,000 units to the million in 312 ms (32,000 units/s). At 20,000 units
//! the graph and the partitions both reach recall 1.000, reading in 0.76 and
//! 0.29 ms; with `random` vectors at 100,000, the worst case, the graph
//! reaches 0.15 and the partitions 0.36.
//!
//! At the large size the bench also checks recall@10 of the HNSW path
//! against the exact path on 200 fresh queries from the same clusters
//! (asserted ≥ 0.98), that a restored store answers like the saved one, and reports
//! how long persisting and restoring the graph takes.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use submem_core::test_utils::{HashingEmbedder, WhitespaceCounter};
use submem_core::testing::synthetic_turns;
use submem_core::{l2_normalize, Event, Namespace, Query, Services, Substrate};
use submem_flat::{DenseConfig, DenseMemory};

// As in the `submem` binary (see crates/cli/src/main.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DIM: usize = 384;

fn services() -> Services {
    Services {
        llm: None,
        embedder: Arc::new(HashingEmbedder::new(DIM)),
        tokens: Arc::new(WhitespaceCounter),
    }
}

fn random_unit(rng: &mut StdRng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..DIM).map(|_| rng.random::<f32>() - 0.5).collect();
    l2_normalize(&mut v);
    v
}

/// Fresh query vectors drawn after the stored ones, from the same centres.
const FRESH: usize = 200;

/// `n` stored vectors followed by [`FRESH`] more from the same distribution.
fn unit_vectors(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    if std::env::var("SUBMEM_BENCH_VECTORS").as_deref() == Ok("random") {
        return (0..n + FRESH).map(|_| random_unit(&mut rng)).collect();
    }
    let topics = std::env::var("SUBMEM_BENCH_VECTORS").as_deref() == Ok("topics");
    let subjects: Vec<Vec<f32>> = if topics {
        (0..(n / 5_000).max(16))
            .map(|_| random_unit(&mut rng))
            .collect()
    } else {
        Vec::new()
    };
    let centres: Vec<Vec<f32>> = (0..(n / 50).max(16))
        .map(|_| {
            let c = random_unit(&mut rng);
            if !topics {
                return c;
            }
            let s = &subjects[rng.random_range(0..subjects.len())];
            let mut v: Vec<f32> = s.iter().zip(&c).map(|(x, o)| x + 0.75 * o).collect();
            l2_normalize(&mut v);
            v
        })
        .collect();
    (0..n + FRESH)
        .map(|_| {
            let c = &centres[rng.random_range(0..centres.len())];
            let offset = random_unit(&mut rng);
            let mut v: Vec<f32> = c.iter().zip(&offset).map(|(x, o)| x + 0.75 * o).collect();
            l2_normalize(&mut v);
            v
        })
        .collect()
}

struct Built {
    m: DenseMemory,
    ns: Namespace,
    vectors: Vec<Vec<f32>>,
    fresh: Vec<Vec<f32>>,
}

/// The settings under test: the defaults, or `SUBMEM_BENCH_M1` as JSON
/// (`{"m": 16, "ef_construction": 40}`) to sweep them.
fn config() -> DenseConfig {
    match std::env::var("SUBMEM_BENCH_M1") {
        Ok(json) => serde_json::from_str(&json).expect("SUBMEM_BENCH_M1: DenseConfig JSON"),
        Err(_) => DenseConfig::default(),
    }
}

fn build(n: usize, threshold: usize, label: &str) -> Built {
    let m = DenseMemory::new(services(), config().with_exact_threshold(threshold)).unwrap();
    let ns = Namespace::new("bench").unwrap();
    let events: Vec<Event> = synthetic_turns(n, 5);
    let mut vectors = unit_vectors(n, 6);
    let fresh = vectors.split_off(n);
    let start = Instant::now();
    let batch: usize = std::env::var("SUBMEM_BENCH_DENSE_BATCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    for (e, v) in events.chunks(batch).zip(vectors.chunks(batch)) {
        m.write_with_vectors(&ns, e, v.to_vec()).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let fp = m.footprint();
    eprintln!(
        "M1 {label} build {n} units: {secs:.1} s, {:.0} index-insert units/s, {:.0} memory bytes/unit",
        n as f64 / secs,
        fp.memory_bytes as f64 / n as f64
    );
    Built {
        m,
        ns,
        vectors,
        fresh,
    }
}

fn queries(b: &Built, count: usize) -> Vec<(Query, Vec<f32>, String)> {
    let mut rng = StdRng::seed_from_u64(9);
    (0..count)
        .map(|_| {
            let i = rng.random_range(0..b.vectors.len());
            let q = Query::question(b.ns.clone(), "", 4096).with_top_k(10);
            (q, b.vectors[i].clone(), format!("t{i}"))
        })
        .collect()
}

fn check(b: &Built, qs: &[(Query, Vec<f32>, String)]) {
    for (q, v, id) in qs {
        let r = b.m.read_with_vector(q, v).unwrap();
        assert!(r.tokens <= q.allowance());
        assert_eq!(
            r.source_ids().next(),
            Some(id.as_str()),
            "stored vector not found first"
        );
    }
}

fn bench_paths(c: &mut Criterion) {
    if std::env::var("SUBMEM_BENCH_DENSE_ONLY").as_deref() == Ok("large") {
        return;
    }
    let mut group = c.benchmark_group("m1_read_path");
    group.sample_size(30);
    for n in [1024usize, 2048, 4096, 16_384] {
        for (label, threshold) in [("exact", usize::MAX), ("hnsw", 1)] {
            let b = build(n, threshold, label);
            let qs = queries(&b, 32);
            check(&b, &qs);
            let mut i = 0;
            group.bench_with_input(BenchmarkId::new(label, n), &n, |bench, _| {
                bench.iter(|| {
                    i = (i + 1) % qs.len();
                    let (q, v, _) = &qs[i];
                    black_box(b.m.read_with_vector(q, v).unwrap())
                })
            });
        }
    }
    group.finish();
}

/// Recall@10 of `graph` against `exact` on fresh vectors from the same
/// distribution (tie-aware: a hit is any score reaching the exact 10th).
fn recall_vs_exact(graph: &Built, exact: &Built) -> f64 {
    let q = Query::question(graph.ns.clone(), "", 1 << 20).with_top_k(10);
    let (mut hits, mut total) = (0usize, 0usize);
    for v in &graph.fresh {
        let truth = exact.m.read_with_vector(&q, v).unwrap();
        let kth = truth
            .sources
            .iter()
            .map(|s| s.score)
            .fold(f32::MAX, f32::min);
        let got = graph.m.read_with_vector(&q, v).unwrap();
        hits += got.sources.iter().filter(|s| s.score >= kth - 1e-5).count();
        total += 10;
    }
    hits as f64 / total as f64
}

fn bench_large(c: &mut Criterion) {
    let n: usize = std::env::var("SUBMEM_BENCH_DENSE_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let mut group = c.benchmark_group("m1_read_large");
    group.sample_size(50);
    let exact = build(n, usize::MAX, "exact");
    // The index the settings pick at this size: a graph below
    // `partition_threshold`, partitions from there.
    let label = if n >= config().partition_threshold {
        "partitions"
    } else {
        "hnsw"
    };
    let graph = build(n, 1, label);
    let recall = recall_vs_exact(&graph, &exact);
    eprintln!("M1 {label} recall@10 vs exact at {n} units: {recall:.4}");
    // Fresh uniform random queries have no meaningful neighbours, so the
    // floor holds for the clustered vectors only. The graph reaches 1.000
    // up to 100k units; partitions are asked for the 0.95 of issue #45.
    let floor = if label == "hnsw" { 0.98 } else { 0.95 };
    if std::env::var("SUBMEM_BENCH_VECTORS").as_deref() != Ok("random") {
        assert!(recall >= floor, "recall@10 {recall}");
    }

    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let start = Instant::now();
    rt.block_on(graph.m.persist(dir.path())).unwrap();
    let persist_s = start.elapsed().as_secs_f64();
    let restored = DenseMemory::new(services(), graph.m.config().clone()).unwrap();
    let start = Instant::now();
    rt.block_on(restored.restore(dir.path())).unwrap();
    eprintln!(
        "M1 {label} at {n} units: persist {persist_s:.1} s, restore {:.1} s, {:.0} disk bytes/unit",
        start.elapsed().as_secs_f64(),
        restored.footprint().disk_bytes as f64 / n as f64
    );
    let restored = Built {
        m: restored,
        ns: graph.ns.clone(),
        vectors: Vec::new(),
        fresh: Vec::new(),
    };
    for (arm, b) in [("exact", &exact), (label, &graph)] {
        let qs = queries(b, 64);
        check(b, &qs);
        if arm != "exact" {
            for (q, v, _) in &qs {
                let (before, after) = (
                    b.m.read_with_vector(q, v).unwrap(),
                    restored.m.read_with_vector(q, v).unwrap(),
                );
                assert_eq!(
                    before.text, after.text,
                    "restored index answers differently"
                );
                assert_eq!(
                    before.source_ids().collect::<Vec<_>>(),
                    after.source_ids().collect::<Vec<_>>()
                );
            }
        }
        let mut i = 0;
        group.bench_function(BenchmarkId::new(arm, n), |bench| {
            bench.iter(|| {
                i = (i + 1) % qs.len();
                let (q, v, _) = &qs[i];
                black_box(b.m.read_with_vector(q, v).unwrap())
            })
        });
    }
    group.finish();
    bench_inserts(c, &graph, label, n);
}

/// Units per write in the insert bench.
const INSERT_BATCH: usize = 10_000;

/// Index-insert throughput into the built namespace: each iteration writes
/// [`INSERT_BATCH`] more units (copies of stored vectors under new ids, so
/// they come from the same clusters). Runs last: the namespace grows.
fn bench_inserts(c: &mut Criterion, b: &Built, label: &str, n: usize) {
    let mut group = c.benchmark_group("m1_insert_large");
    group.sample_size(10);
    group.throughput(criterion::Throughput::Elements(INSERT_BATCH as u64));
    let mut round = 0usize;
    group.bench_function(BenchmarkId::new(label, n), |bench| {
        bench.iter_batched(
            || {
                round += 1;
                let start = (round * INSERT_BATCH) % (n - INSERT_BATCH).max(1);
                let events: Vec<Event> = synthetic_turns(INSERT_BATCH, 5)
                    .into_iter()
                    .enumerate()
                    .map(|(i, e)| match e {
                        Event::Turn(mut t) => {
                            t.source_id = format!("r{round}-{i}");
                            Event::Turn(t)
                        }
                        other => other,
                    })
                    .collect();
                (events, b.vectors[start..start + INSERT_BATCH].to_vec())
            },
            |(events, vectors)| b.m.write_with_vectors(&b.ns, &events, vectors).unwrap(),
            criterion::BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_paths, bench_large);
criterion_main!(benches);
