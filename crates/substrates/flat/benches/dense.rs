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
//! the worst case for any graph index. `SUBMEM_BENCH_DENSE_N` sets the large
//! size (default 50,000).

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use submem_core::test_utils::{HashingEmbedder, WhitespaceCounter};
use submem_core::{l2_normalize, Event, Namespace, Query, Services, Substrate};
use submem_flat::{DenseConfig, DenseMemory};

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

fn unit_vectors(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    if std::env::var("SUBMEM_BENCH_VECTORS").as_deref() == Ok("random") {
        return (0..n).map(|_| random_unit(&mut rng)).collect();
    }
    let centres: Vec<Vec<f32>> = (0..(n / 50).max(16))
        .map(|_| random_unit(&mut rng))
        .collect();
    (0..n)
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
}

fn build(n: usize, threshold: usize, label: &str) -> Built {
    let m = DenseMemory::new(
        services(),
        DenseConfig::default().with_exact_threshold(threshold),
    )
    .unwrap();
    let ns = Namespace::new("bench").unwrap();
    let events: Vec<Event> = common::turns(n, 5);
    let vectors = unit_vectors(n, 6);
    let start = Instant::now();
    for (e, v) in events.chunks(5_000).zip(vectors.chunks(5_000)) {
        m.write_with_vectors(&ns, e, v.to_vec()).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let fp = m.footprint();
    eprintln!(
        "M1 {label} build {n} units: {secs:.1} s, {:.0} index-insert units/s, {:.0} memory bytes/unit",
        n as f64 / secs,
        fp.memory_bytes as f64 / n as f64
    );
    Built { m, ns, vectors }
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
    let mut group = c.benchmark_group("m1_read_path");
    group.sample_size(30);
    for n in [1024usize, 4096, 16_384] {
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

fn bench_large(c: &mut Criterion) {
    let n: usize = std::env::var("SUBMEM_BENCH_DENSE_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50_000);
    let mut group = c.benchmark_group("m1_read_large");
    group.sample_size(50);
    for (label, threshold) in [("exact", usize::MAX), ("hnsw", 1)] {
        let b = build(n, threshold, label);
        let qs = queries(&b, 64);
        check(&b, &qs);
        let mut i = 0;
        group.bench_function(BenchmarkId::new(label, n), |bench| {
            bench.iter(|| {
                i = (i + 1) % qs.len();
                let (q, v, _) = &qs[i];
                black_box(b.m.read_with_vector(q, v).unwrap())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_paths, bench_large);
criterion_main!(benches);
