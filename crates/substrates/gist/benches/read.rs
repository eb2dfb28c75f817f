#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M3 read latency on seeded synthetic histories (600 and 6,000 turns, 20
//! turns a session: 30 and 300 pages) at a 4k budget: with a scripted LLM
//! that names two pages (the cost of building the gist prompt, parsing the
//! reply and fitting; the model's own time is not included), and in rule
//! mode (BM25 selection). Every measured read is checked: within the
//! allowance, chosen the expected way, with pages expanded.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::sync::Arc;
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::testing::{synthetic_questions, synthetic_turns};
use submem_core::{Namespace, Query, Substrate};
use submem_gist::{GistConfig, GistIndex, Selection};
use tokio::runtime::Runtime;

fn scripted() -> Arc<ScriptedLlm> {
    Arc::new(ScriptedLlm::from_fn(|r| {
        let user = &r.messages.last().unwrap().content;
        Ok(if user.contains("Which pages") {
            "Pages 3 and 17.".into()
        } else {
            let body = user.lines().nth(2).unwrap_or("");
            body.split_whitespace()
                .take(14)
                .collect::<Vec<_>>()
                .join(" ")
                + "."
        })
    }))
}

fn bench_reads(c: &mut Criterion) {
    let rt: Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let questions = synthetic_questions(32, 9);
    for n in [600usize, 6000] {
        let events = synthetic_turns(n, 1);
        for (mode, llm) in [("llm", Some(scripted())), ("rule", None)] {
            let services = test_services(llm.map(|l| l as Arc<dyn submem_core::Llm>));
            let m = GistIndex::new(services, GistConfig::default()).unwrap();
            let ns = Namespace::new("bench").unwrap();
            for session in events.chunks(20) {
                rt.block_on(m.write(&ns, session)).unwrap();
            }
            rt.block_on(m.manage()).unwrap();
            let queries: Vec<Query> = questions
                .iter()
                .map(|q| Query::question(ns.clone(), q.clone(), 4096).with_fixed_prompt_tokens(100))
                .collect();
            for q in &queries {
                let r = rt.block_on(m.read_detailed(q)).unwrap();
                assert!(r.recall.tokens <= q.allowance());
                assert!(!r.expanded.is_empty(), "{mode}: nothing expanded");
                match mode {
                    "llm" => assert_eq!(
                        (r.selection, r.expanded.as_slice()),
                        (Selection::Llm, &[2, 16][..])
                    ),
                    _ => assert_eq!(r.selection, Selection::Rule),
                }
            }
            let mut i = 0;
            c.bench_function(&format!("m3_read_{mode}_{n}_turns_budget_4096"), |b| {
                b.iter(|| {
                    i = (i + 1) % queries.len();
                    black_box(rt.block_on(m.read(&queries[i])).unwrap())
                })
            });
        }
    }
}

criterion_group!(benches, bench_reads);
criterion_main!(benches);
