#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M10 read latency (600 turns, 100k units) at a 4k and a 32k budget, write
//! throughput and bytes per unit. Every measured read is checked: within the
//! allowance, and ending with the newest turn.

use criterion::{criterion_group, criterion_main, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::time::Instant;
use submem_core::test_utils::test_services;
use submem_core::{Event, Namespace, Query, Substrate, Turn};
use submem_kv::{FullContext, FullContextConfig};
use tokio::runtime::Runtime;

/// Seeded turns of 20–30 words over a Zipf-like 5,000-word vocabulary.
fn turns(n: usize, seed: u64) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let len = rng.random_range(20..=30);
            let text = (0..len)
                .map(|_| {
                    let r: f64 = rng.random();
                    format!("w{}", (r * r * 5000.0) as usize)
                })
                .collect::<Vec<_>>()
                .join(" ");
            Event::Turn(Turn {
                session_id: format!("session_{}", i / 20),
                session_date: None,
                speaker: if i % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text,
                source_id: format!("t{i}"),
            })
        })
        .collect()
}

fn bench_reads(c: &mut Criterion) {
    let rt: Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for n in [600usize, 100_000] {
        let m = FullContext::new(test_services(None), FullContextConfig::default()).unwrap();
        let ns = Namespace::new("bench").unwrap();
        let events = turns(n, 1);
        let start = Instant::now();
        for chunk in events.chunks(10_000) {
            rt.block_on(m.write(&ns, chunk)).unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "M10 write {n} units: {:.0} units/s, {:.0} memory bytes/unit",
            n as f64 / secs,
            m.footprint().memory_bytes as f64 / n as f64
        );
        let newest = format!("t{}", n - 1);
        for budget in [4096usize, 32_768] {
            let q = Query::question(ns.clone(), "anything", budget);
            let r = rt.block_on(m.read(&q)).unwrap();
            assert!(r.tokens <= q.allowance());
            // Either everything is shown or the next-older turn (≤ 31 tokens)
            // would not have fit.
            assert!(r.sources.len() == n || r.tokens + 31 > q.allowance());
            assert_eq!(r.source_ids().next(), Some(newest.as_str()));
            c.bench_function(&format!("m10_read_{n}_units_budget_{budget}"), |b| {
                b.iter(|| black_box(rt.block_on(m.read(&q)).unwrap()))
            });
        }
    }
}

criterion_group!(benches, bench_reads);
criterion_main!(benches);
