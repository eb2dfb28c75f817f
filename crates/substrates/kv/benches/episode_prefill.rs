#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Prefill time M11's episode KV caches save: answering one reader request
//! from the episode's cache (only the question runs, then 8 decoded tokens)
//! against the same request re-prefilled in full by the same SmolLM2, on an
//! episode M11 built from a 320-turn seeded history (4 episodes, 25 % kept).
//! Both must give the same greedy answer, and the cached path must hit.
//! Needs the real models (`submem models fetch`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use submem_core::testing::{synthetic_questions, synthetic_turns};
use submem_core::{ChatMessage, ChatRequest, Llm, Namespace, Query, Services, Substrate};
use submem_kv::{EpiCache, EpiCacheConfig, ReaderHead};

const SYSTEM: &str = "You answer questions from a memory of earlier conversations. \
Reply with a short answer of a few words.";

fn answer(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cfg = submem_models::Config::load(None).unwrap();
    let local = cfg.local_llm().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(local.clone());
    let services = Services {
        llm: Some(llm.clone()),
        embedder: Arc::new(cfg.local_embedder().unwrap()),
        tokens: cfg.token_counter().unwrap(),
    };
    let head = ReaderHead {
        system: Some(SYSTEM.into()),
        memory_intro: "Memory:\n".into(),
    };
    let m = EpiCache::new(services, EpiCacheConfig::default().with_reader_head(head)).unwrap();
    let ns = Namespace::new("bench").unwrap();
    rt.block_on(m.write(&ns, &synthetic_turns(320, 7))).unwrap();
    let t = Instant::now();
    rt.block_on(m.manage()).unwrap();
    eprintln!(
        "M11 manage (cluster + prefill 4 episodes): {:.1}s, {:?}",
        t.elapsed().as_secs_f64(),
        m.stats()
    );
    let question = synthetic_questions(1, 3).remove(0);
    let r = rt
        .block_on(m.read(&Query::question(ns, question.clone(), 4096)))
        .unwrap();
    let reader = r
        .reader
        .clone()
        .expect("episode fits the budget: cached reader");
    let request = ChatRequest::new(vec![
        ChatMessage::system(SYSTEM),
        ChatMessage::user(format!(
            "Memory:\n{}\n\nQuestion: {question}\nAnswer:",
            r.text
        )),
    ])
    .with_max_tokens(8);
    let prompt_tokens = local
        .tokenizer()
        .encode(&submem_models::LocalLlm::chat_prompt(&request.messages))
        .unwrap()
        .len();
    eprintln!(
        "episode: {} o200k tokens, {} turns; reader prompt {prompt_tokens} SmolLM2 tokens",
        r.tokens,
        r.sources.len()
    );
    let cached = rt.block_on(reader.complete(&request)).unwrap();
    let full = rt.block_on(llm.complete(&request)).unwrap();
    assert_eq!(
        cached.text, full.text,
        "cache reuse must not change the answer"
    );
    assert_eq!(m.cache_reuse().unwrap().hits, 1);

    let mut g = c.benchmark_group("m11_answer");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("cached_episode_prefix", |b| {
        b.iter(|| {
            let out = rt.block_on(reader.complete(&request)).unwrap();
            assert_eq!(out.text, full.text);
            out
        })
    });
    g.bench_function("re_prefill_episode_text", |b| {
        b.iter(|| {
            let out = rt.block_on(llm.complete(&request)).unwrap();
            assert_eq!(out.text, full.text);
            out
        })
    });
    g.finish();
    assert_eq!(m.cache_reuse().unwrap().misses, 0);
}

criterion_group!(benches, answer);
criterion_main!(benches);
