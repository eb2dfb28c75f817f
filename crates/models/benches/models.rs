#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(missing_docs)]
//! Throughput of the model services: embedder sentences/s at batch 32 and the
//! latency of embedding one short query (what an M1 read adds), local
//! LLM prefill and decode tok/s for the shipped Q4_1 weights and the Q8_0
//! re-quantisation, and the token counter. Each bench checks its output.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

// The allocator of the `submem` binary and the Python extension: candle
// allocates per tensor op, so the system allocator would measure another
// program than the one users run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use submem_core::TokenCounter;
use submem_models::check::sample_sentences;
use submem_models::{Config, LlmWeights, LocalLlm, LocalLlmOptions, O200kCounter};

fn embedder(c: &mut Criterion) {
    let cfg = Config::load(None).unwrap();
    let e = cfg.local_embedder().unwrap();
    let texts = sample_sentences(32);
    let mut g = c.benchmark_group("embedder");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(texts.len() as u64));
    g.bench_function("minilm_batch32_sentences", |b| {
        b.iter(|| {
            let v = e.embed_blocking(&texts).unwrap();
            assert_eq!(v.len(), 32);
            assert!(v.iter().all(|x| x.len() == 384));
            v
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("minilm_one_query", |b| {
        let query = vec!["What did Caroline research last week?".to_string()];
        b.iter(|| {
            let v = e.embed_blocking(&query).unwrap();
            assert_eq!(v[0].len(), 384);
            v
        })
    });
    // The read-latency target is stated for a 20-word question.
    g.bench_function("minilm_one_query_20_words", |b| {
        let query = vec![
            "When did Melanie say she would take her kids camping near the lake \
             after the pottery class ended last summer?"
                .to_string(),
        ];
        assert_eq!(query[0].split_whitespace().count(), 20);
        b.iter(|| {
            let v = e.embed_blocking(&query).unwrap();
            assert_eq!(v[0].len(), 384);
            v
        })
    });
    g.finish();
}

fn llm(c: &mut Criterion) {
    let cfg = Config::load(None).unwrap();
    let path = submem_models::resolve_llm_gguf(&cfg.models).unwrap();
    let prompt = LocalLlm::chat_prompt(&[submem_core::ChatMessage::user(
        sample_sentences(10).join(" "),
    )]);
    for (label, weights) in [("q8_0", LlmWeights::Q8_0), ("q4_1", LlmWeights::AsShipped)] {
        let llm = submem_models::shared_local_llm(
            &path,
            LocalLlmOptions {
                weights,
                truncate_prompt_left: false,
                context_limit: None,
            },
        )
        .unwrap();
        let n_prompt = llm.tokenizer().encode(&prompt).unwrap().len();
        let mut g = c.benchmark_group(format!("llm_{label}"));
        g.sample_size(10).measurement_time(Duration::from_secs(8));
        g.throughput(Throughput::Elements(n_prompt as u64));
        g.bench_function("prefill_tokens", |b| {
            b.iter(|| {
                let s = llm.speed_blocking(&prompt, 0).unwrap();
                assert_eq!(s.prompt_tokens, n_prompt);
                s
            })
        });
        // Decoding 16 tokens after a 1-token prompt.
        g.throughput(Throughput::Elements(16));
        g.bench_function("decode_tokens", |b| {
            b.iter(|| {
                let s = llm.speed_blocking("<|im_start|>", 16).unwrap();
                assert_eq!(s.decode_tokens, 16);
                s
            })
        });
        g.finish();
        let s = llm.speed_blocking(&prompt, 32).unwrap();
        eprintln!(
            "{label}: load {:.2}s, prefill {:.0} tok/s ({} tokens), decode {:.0} tok/s",
            llm.load_secs(),
            s.prefill_tok_s(),
            s.prompt_tokens,
            s.decode_tok_s()
        );
    }
}

fn tokens(c: &mut Criterion) {
    let tc = O200kCounter::new().unwrap();
    let text = sample_sentences(200).join(" ");
    let n = tc.count(&text);
    assert!(n > 2000);
    let mut g = c.benchmark_group("o200k");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("count", |b| {
        b.iter(|| {
            let k = tc.count(&text);
            assert_eq!(k, n);
            k
        })
    });
    g.bench_function("truncate_half", |b| {
        b.iter(|| {
            let t = tc.truncate(&text, n / 2);
            assert!(tc.count(&t) <= n / 2);
            t
        })
    });
    g.finish();
}

criterion_group!(benches, embedder, llm, tokens);
criterion_main!(benches);
