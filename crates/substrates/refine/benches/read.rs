#![allow(missing_docs)]
//! Read latency of M7 (dense top-1 over distilled strategies) and M8 (rank
//! and prefill every skill bundle), rule-written from seeded synthetic
//! sessions (one episode per session), a 384-d hashing embedder (so the
//! figure is the substrate's own work, without a model's query embedding) and
//! the whitespace token counter. Asserts that every read shows something.

use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use submem_core::test_utils::{HashingEmbedder, WhitespaceCounter};
use submem_core::testing::{synthetic_questions, synthetic_turns};
use submem_core::{Namespace, Query, Services, Substrate};
use submem_refine::{SkillBundles, SkillConfig, StrategyBank, StrategyConfig};

fn services() -> Services {
    Services {
        llm: None,
        embedder: Arc::new(HashingEmbedder::new(384)),
        tokens: Arc::new(WhitespaceCounter),
    }
}

fn bench_reads(c: &mut Criterion) {
    let rt = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let ns = match Namespace::new("bench") {
        Ok(ns) => ns,
        Err(e) => panic!("{e}"),
    };
    let questions = synthetic_questions(64, 3);
    let mut group = c.benchmark_group("refine_read");
    for sessions in [100usize, 1000] {
        let m7 = match StrategyBank::new(services(), StrategyConfig::default()) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        let turns = synthetic_turns(sessions * 20, 7);
        rt.block_on(async {
            for batch in turns.chunks(200) {
                if let Err(e) = m7.write(&ns, batch).await {
                    panic!("{e}");
                }
            }
            if let Err(e) = m7.manage().await {
                panic!("{e}");
            }
        });
        let mut i = 0;
        group.bench_function(format!("m7_top1_{sessions}_strategies"), |b| {
            b.iter(|| {
                i = (i + 1) % questions.len();
                let q = Query::question(ns.clone(), questions[i].clone(), 4096);
                let r = rt.block_on(m7.read(&q));
                assert!(r.is_ok_and(|r| !r.sources.is_empty()));
            })
        });
    }
    for events in [400usize, 2000] {
        let m8 = match SkillBundles::new(services(), SkillConfig::default().with_max_bundles(1024))
        {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        let turns = synthetic_turns(events, 11);
        rt.block_on(async {
            for batch in turns.chunks(20) {
                if let Err(e) = m8.write(&ns, batch).await {
                    panic!("{e}");
                }
            }
        });
        let bundles = m8.skills(&ns).len();
        let mut i = 0;
        group.bench_function(format!("m8_prefill_{bundles}_bundles"), |b| {
            b.iter(|| {
                i = (i + 1) % questions.len();
                let q = Query::question(ns.clone(), questions[i].clone(), 4096);
                let r = rt.block_on(m8.read(&q));
                assert!(r.is_ok_and(|r| !r.sources.is_empty() && r.tokens <= q.allowance()));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_reads);
criterion_main!(benches);
