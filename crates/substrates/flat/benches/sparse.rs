#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M2 read latency (600 turns, 100k units), write throughput, the latency of
//! a small write into a live namespace (what a server pays per request) and
//! bytes per unit. Every measured read is checked: within the allowance, and
//! the planted fact is the top hit for its question.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Instant;
use submem_core::test_utils::test_services;
use submem_core::testing::{synthetic_questions, synthetic_turns};
use submem_core::{Event, Namespace, Query, Substrate, Turn};
use submem_flat::{SparseConfig, SparseMemory};
use tokio::runtime::Runtime;

/// A turn no synthetic word can match, to check a planted fact is found.
fn planted(id: &str) -> Event {
    Event::Turn(Turn {
        session_id: "planted".into(),
        session_date: None,
        speaker: "Ana".into(),
        text: "My violin teacher zanzibarite lives in Oslo".into(),
        source_id: id.into(),
    })
}

fn rt() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn build(rt: &Runtime, n: usize) -> (SparseMemory, Namespace) {
    let m = SparseMemory::new(test_services(None), SparseConfig::default()).unwrap();
    let ns = Namespace::new("bench").unwrap();
    let mut events = synthetic_turns(n, 1);
    events.insert(n / 2, planted("planted"));
    let start = Instant::now();
    for chunk in events.chunks(10_000) {
        rt.block_on(m.write(&ns, chunk)).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let fp = m.footprint();
    eprintln!(
        "M2 build {n} units: {:.0} units/s, {:.0} memory bytes/unit",
        (n + 1) as f64 / secs,
        fp.memory_bytes as f64 / (n + 1) as f64
    );
    let planted = rt
        .block_on(m.read(&Query::question(
            ns.clone(),
            "who is the violin teacher?",
            4096,
        )))
        .unwrap();
    assert_eq!(planted.source_ids().next(), Some("planted"));
    (m, ns)
}

fn bench_reads(c: &mut Criterion) {
    let rt = rt();
    let questions = synthetic_questions(64, 2);
    for n in [600usize, 100_000] {
        let (m, ns) = build(&rt, n);
        let queries: Vec<Query> = questions
            .iter()
            .map(|q| Query::question(ns.clone(), q.clone(), 4096).with_top_k(10))
            .collect();
        for q in &queries {
            let r = rt.block_on(m.read(q)).unwrap();
            assert!(r.tokens <= q.allowance());
            assert!(
                !r.sources.is_empty(),
                "synthetic questions share words with the turns"
            );
        }
        let mut i = 0;
        c.bench_function(&format!("m2_read_{n}_units"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(rt.block_on(m.read(&queries[i])).unwrap())
            })
        });
    }
}

fn bench_write(c: &mut Criterion) {
    let rt = rt();
    let events = synthetic_turns(2_000, 3);
    let ns = Namespace::new("bench").unwrap();
    let mut group = c.benchmark_group("m2_write");
    group.sample_size(20);
    group.throughput(criterion::Throughput::Elements(events.len() as u64));
    group.bench_function("2000_units_one_batch", |b| {
        b.iter_batched(
            || SparseMemory::new(test_services(None), SparseConfig::default()).unwrap(),
            |m| {
                let report = rt.block_on(m.write(&ns, &events)).unwrap();
                assert_eq!(report.units, events.len());
                m
            },
            criterion::BatchSize::PerIteration,
        )
    });
    // A server's write: 20 turns into a namespace that already holds some.
    // The namespace grows by 20 units per iteration (fresh source ids), so
    // commits now and then start a merge; the median is the plain write.
    let (m, ns) = build(&rt, 600);
    let turns = synthetic_turns(20, 4);
    let mut next = 0usize;
    group.throughput(criterion::Throughput::Elements(turns.len() as u64));
    group.sample_size(50);
    group.bench_function("20_units_into_600", |b| {
        b.iter_batched(
            || {
                next += 1;
                turns
                    .iter()
                    .enumerate()
                    .map(|(i, e)| match e {
                        Event::Turn(t) => Event::Turn(Turn {
                            source_id: format!("w{next}:{i}"),
                            ..t.clone()
                        }),
                        other => other.clone(),
                    })
                    .collect::<Vec<_>>()
            },
            |batch| {
                let report = rt.block_on(m.write(&ns, &batch)).unwrap();
                assert_eq!(report.units, batch.len());
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_reads, bench_write);
criterion_main!(benches);
