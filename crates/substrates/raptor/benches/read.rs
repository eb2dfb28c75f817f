#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M6 read latency: collapsed-tree reads over a tree built from 2,000
//! synthetic turns (hashing embedder, whitespace counter, extractive
//! summaries: no model in the loop, so this measures the tree itself) at a
//! 4k and a 32k budget. Every measured read is checked: within the
//! allowance, showing leaves verbatim and at least one summary.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use submem_core::test_utils::test_services;
use submem_core::testing::{synthetic_questions, synthetic_turns};
use submem_core::{Namespace, Query, Resolution, Substrate};
use submem_raptor::{Raptor, RaptorConfig, SummarizerKind};

fn bench_reads(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let m = Raptor::new(
        test_services(None),
        RaptorConfig::default().with_summarizer(SummarizerKind::Extractive),
    )
    .unwrap();
    let ns = Namespace::new("bench").unwrap();
    let events = synthetic_turns(2000, 1);
    for session in events.chunks(20) {
        rt.block_on(m.write(&ns, session)).unwrap();
    }
    rt.block_on(m.manage()).unwrap();
    let levels = rt.block_on(m.levels(&ns));
    eprintln!("M6 tree of 2000 turns: nodes per level {levels:?}");
    assert!(levels.len() >= 3, "{levels:?}");
    let questions = synthetic_questions(16, 2);
    for budget in [4096usize, 32_768] {
        let queries: Vec<Query> = questions
            .iter()
            .map(|q| Query::question(ns.clone(), q.clone(), budget).with_fixed_prompt_tokens(100))
            .collect();
        for q in &queries {
            let r = rt.block_on(m.read(q)).unwrap();
            assert!(r.tokens <= q.allowance() && r.tokens + 200 > q.allowance());
            assert!(r.sources.iter().any(|s| s.resolution == Resolution::Raw));
            assert!(r.text.contains("Summary: "));
        }
        let mut i = 0;
        c.bench_function(&format!("m6_read_2000_turns_budget_{budget}"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(rt.block_on(m.read(&queries[i])).unwrap())
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_reads
}
criterion_main!(benches);
