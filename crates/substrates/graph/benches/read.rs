#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M5 read latency (rule keywords, hashing embedder, whitespace counter) on
//! 600 and 3,000 synthetic turns at a 4k budget: keyword rules, three exact
//! dense searches, neighbourhood gathering, fusion and rendering. Every
//! measured read is checked: within the allowance, showing chunks whose
//! events answer the question's words.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Instant;
use submem_core::test_utils::test_services;
use submem_core::testing::{synthetic_questions, synthetic_turns};
use submem_core::{Namespace, Query, Substrate};
use submem_graph::{GraphConfig, GraphMemory};
use tokio::runtime::Runtime;

fn bench_reads(c: &mut Criterion) {
    let rt: Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for n in [600usize, 3_000] {
        let m = GraphMemory::new(test_services(None), GraphConfig::default()).unwrap();
        let ns = Namespace::new("bench").unwrap();
        let events = synthetic_turns(n, 1);
        let start = Instant::now();
        for session in events.chunks(20) {
            rt.block_on(m.write(&ns, session)).unwrap();
        }
        rt.block_on(m.manage()).unwrap();
        let counts = rt.block_on(m.counts(&ns));
        eprintln!(
            "M5 write+index {n} turns: {:.2}s; {counts:?}; {:.0} memory bytes/turn",
            start.elapsed().as_secs_f64(),
            m.footprint().memory_bytes as f64 / n as f64
        );
        let questions = synthetic_questions(8, 2);
        let queries: Vec<Query> = questions
            .iter()
            .map(|q| Query::question(ns.clone(), q.clone(), 4096).with_top_k(10))
            .collect();
        for q in &queries {
            let r = rt.block_on(m.read(q)).unwrap();
            assert!(
                r.tokens <= q.allowance(),
                "{} > {}",
                r.tokens,
                q.allowance()
            );
            assert!(!r.sources.is_empty(), "nothing retrieved for {:?}", q.text);
            // A 4k budget holds several 300-token chunks.
            assert!(r.tokens * 2 > q.allowance(), "only {} tokens", r.tokens);
        }
        c.bench_function(&format!("m5_read_{n}_turns_budget_4096"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(rt.block_on(m.read(&queries[i])).unwrap())
            })
        });
    }
}

criterion_group!(benches, bench_reads);
criterion_main!(benches);
