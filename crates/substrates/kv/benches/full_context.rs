#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M10 read latency (600 turns, 100k units) at a 4k and a 32k budget, write
//! throughput and bytes per unit. Every measured read is checked: within the
//! allowance, and ending with the newest turn.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Instant;
use submem_core::test_utils::test_services;
use submem_core::testing::synthetic_turns;
use submem_core::{Namespace, Query, Substrate};
use submem_kv::{FullContext, FullContextConfig};
use tokio::runtime::Runtime;

fn bench_reads(c: &mut Criterion) {
    let rt: Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for n in [600usize, 100_000] {
        let m = FullContext::new(test_services(None), FullContextConfig::default()).unwrap();
        let ns = Namespace::new("bench").unwrap();
        let events = synthetic_turns(n, 1);
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
