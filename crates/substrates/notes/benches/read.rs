#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M4 read latency on 600 synthetic turns (rule notes, no LLM; hashing
//! embedder of 384 buckets, so the query embedding is cheap and the bench
//! measures ranking, link expansion and rendering), for `render=topk` and
//! `render=fit`. Every measured read is checked: within the allowance, token
//! count exact, and a planted fact found first for its question.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::sync::Arc;
use submem_core::test_utils::{HashingEmbedder, WhitespaceCounter};
use submem_core::testing::{synthetic_questions, synthetic_turns};
use submem_core::{Event, Namespace, Query, Services, Substrate, TokenCounter, Turn};
use submem_notes::{EvolvingNotes, NotesConfig, RenderMode};
use tokio::runtime::Runtime;

fn planted() -> Event {
    Event::Turn(Turn {
        session_id: "planted".into(),
        session_date: None,
        speaker: "Ana".into(),
        text: "My violin teacher zanzibarite lives in Oslo".into(),
        source_id: "planted".into(),
    })
}

fn services() -> Services {
    Services {
        llm: None,
        embedder: Arc::new(HashingEmbedder::new(384)),
        tokens: Arc::new(WhitespaceCounter),
    }
}

fn bench_reads(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ns = Namespace::new("bench").unwrap();
    let mut events = synthetic_turns(600, 1);
    events.insert(300, planted());
    let questions = synthetic_questions(64, 2);
    for render in [RenderMode::TopK, RenderMode::Fit] {
        let m = build(&rt, &ns, &events, render);
        let queries: Vec<Query> = questions
            .iter()
            .map(|q| Query::question(ns.clone(), q.clone(), 4096).with_top_k(10))
            .collect();
        for q in &queries {
            let r = rt.block_on(m.read(q)).unwrap();
            assert!(r.tokens <= q.allowance());
            assert_eq!(WhitespaceCounter.count(&r.text), r.tokens);
            assert!(r.sources.len() >= 10, "{} sources", r.sources.len());
        }
        let p = rt
            .block_on(m.read(&Query::question(
                ns.clone(),
                "violin teacher zanzibarite Oslo",
                4096,
            )))
            .unwrap();
        assert!(p.text.contains("zanzibarite"));
        let mut i = 0;
        c.bench_function(
            &format!("m4_read_600_turns_{render:?}").to_lowercase(),
            |b| {
                b.iter(|| {
                    i = (i + 1) % queries.len();
                    black_box(rt.block_on(m.read(&queries[i])).unwrap())
                })
            },
        );
    }
}

fn build(rt: &Runtime, ns: &Namespace, events: &[Event], render: RenderMode) -> EvolvingNotes {
    let m = EvolvingNotes::new(services(), NotesConfig::default().with_render(render)).unwrap();
    rt.block_on(m.write(ns, events)).unwrap();
    m
}

criterion_group!(benches, bench_reads);
criterion_main!(benches);
