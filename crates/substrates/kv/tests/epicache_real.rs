#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M11 with the real models: MiniLM embeds, tiktoken o200k counts, SmolLM2
//! prefills each episode on manage. The reader attached to a recall must hit
//! its cache and answer exactly as the plain model does on the same request.
//! Skipped (with a message) when the models cannot be resolved.

use std::sync::Arc;
use std::time::Instant;

use submem_core::testing::{fixture_conversation, MARKER_A};
use submem_core::{ChatMessage, ChatRequest, Llm, Namespace, Query, Services, Substrate};
use submem_kv::{EpiCache, EpiCacheConfig, ReaderHead};

const SYSTEM: &str = "You answer questions from a memory of earlier conversations.";

fn models() -> Option<(Arc<dyn Llm>, Services)> {
    let cfg = submem_models::Config::load(None).ok()?;
    let llm: Arc<dyn Llm> = Arc::new(
        cfg.local_llm()
            .map_err(|e| eprintln!("skipping: {e}"))
            .ok()?,
    );
    let embedder = cfg
        .local_embedder()
        .map_err(|e| eprintln!("skipping: {e}"))
        .ok()?;
    let services = Services {
        llm: Some(llm.clone()),
        embedder: Arc::new(embedder),
        tokens: cfg.token_counter().ok()?,
    };
    Some((llm, services))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_episode_answers_like_a_full_prefill() {
    let Some((llm, services)) = models() else {
        eprintln!("real models unavailable; test skipped");
        return;
    };
    let head = ReaderHead {
        system: Some(SYSTEM.into()),
        memory_intro: "Memory:\n".into(),
    };
    let m = EpiCache::new(
        services,
        EpiCacheConfig::default()
            .with_episodes(3)
            .with_reader_head(head),
    )
    .unwrap();
    let a = Namespace::new("real").unwrap();
    m.write(&a, &fixture_conversation("a", MARKER_A, 24))
        .await
        .unwrap();
    let t = Instant::now();
    m.manage().await.unwrap();
    eprintln!(
        "manage (cluster + prefill) {:.2}s, {:?}",
        t.elapsed().as_secs_f64(),
        m.stats()
    );
    assert_eq!(m.stats().prefills as usize, m.episodes(&a).unwrap().len());
    assert!(
        m.footprint().memory_bytes > 1_000_000,
        "KV caches are megabytes"
    );

    let q = Query::question(a, "What does my brother repair?", 4096);
    let r = m.read(&q).await.unwrap();
    let reader = r
        .reader
        .clone()
        .expect("the episode fits, so its cache is served");
    let request = ChatRequest::new(vec![
        ChatMessage::system(SYSTEM),
        ChatMessage::user(format!(
            "Memory:\n{}\n\nQuestion: {}\nAnswer:",
            r.text, q.text
        )),
    ])
    .with_max_tokens(12);
    let cached = reader.complete(&request).await.unwrap();
    let full = llm.complete(&request).await.unwrap();
    assert_eq!(cached.text, full.text, "greedy answers must match");
    assert_eq!(cached.usage, full.usage);
    let reuse = m.cache_reuse().unwrap();
    assert_eq!(
        (reuse.hits, reuse.misses),
        (1, 0),
        "the reader continued the cache"
    );
    eprintln!("answer {:?}", cached.text);
}
