#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Behaviour of M11 with test doubles: episodes follow topics, a quarter of
//! each is kept (the most central turns), reads match the nearest episode,
//! episode caches are prefilled on manage and served to the reader, cut or
//! uncached episodes fall back to text, forgetting re-derives one episode and
//! drops its cache, persistence keeps recalls (not caches), footprint counts
//! cache bytes.

use std::sync::Arc;

use submem_core::test_utils::{test_services, CachingLlm, HashingEmbedder};
use submem_core::{
    ChatMessage, ChatRequest, Error, Event, Forget, Llm, Namespace, Query, Services, Substrate,
    Turn,
};
use submem_kit::{Meter, MeteredSubstrate};
use submem_kv::{EpiCache, EpiCacheConfig, ReaderHead};

const SAIL: [&str; 6] = ["sailing", "boat", "harbour", "wind", "mast", "ocean"];
const BAKE: [&str; 6] = ["oven", "bread", "flour", "dough", "bake", "kitchen"];

fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

fn turn(session: usize, i: usize, text: String) -> Event {
    Event::Turn(Turn {
        session_id: format!("s{session}"),
        session_date: None,
        speaker: if i % 2 == 0 { "Ana" } else { "Ben" }.into(),
        text,
        source_id: format!("D{session}:{i}"),
    })
}

/// Four sessions of four turns, alternating sailing and baking; each turn is
/// five topic words. Turn D3:2 is the odd one out of its topic.
fn history() -> Vec<Event> {
    let mut out = Vec::new();
    for s in 1..=4 {
        let words = if s % 2 == 1 { SAIL } else { BAKE };
        for i in 0..4 {
            let text = if s == 3 && i == 2 {
                "sailing with a zanzibarite parrot named Pip".to_string()
            } else {
                (0..5)
                    .map(|j| words[(i + j) % 6])
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            out.push(turn(s, i, text));
        }
    }
    out
}

fn head() -> ReaderHead {
    ReaderHead {
        system: Some("Answer from memory.".into()),
        memory_intro: "Memory:\n".into(),
    }
}

fn config() -> EpiCacheConfig {
    EpiCacheConfig::default()
        .with_episodes(2)
        .with_reader_head(head())
}

fn caching_services() -> (CachingLlm, Services) {
    let llm = CachingLlm::from_fn(|_| Ok("a boat".into()));
    let services = test_services(Some(Arc::new(llm.clone()) as Arc<dyn Llm>));
    (llm, services)
}

/// The reader request the harness would send for `memory`.
fn reader_request(memory: &str, question: &str) -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("Answer from memory."),
        ChatMessage::user(format!(
            "Memory:\n{memory}\n\nQuestion: {question}\nAnswer:"
        )),
    ])
}

#[tokio::test]
async fn episodes_follow_topics_and_keep_the_central_quarter() {
    let m = EpiCache::new(test_services(None), config()).unwrap();
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    let episodes = m.episodes(&a).unwrap();
    assert_eq!(episodes.len(), 2, "{episodes:?}");
    // Episode 0 is sailing (sessions 1 and 3), episode 1 baking (2 and 4).
    for (e, sessions) in episodes.iter().zip([["D1:", "D3:"], ["D2:", "D4:"]]) {
        assert!(!e.is_empty());
        assert!(
            e.iter()
                .all(|id| sessions.iter().any(|s| id.starts_with(s))),
            "{e:?}"
        );
        // 8 turns of 6 whitespace tokens: a quarter is 12 tokens, two turns.
        assert_eq!(e.len(), 2, "{e:?}");
    }
    assert!(
        !episodes[0].contains(&"D3:2".to_string()),
        "the off-topic turn is the least central and is not kept"
    );
    assert_eq!(m.stats().reclusters, 1);

    let r = m
        .read(&Query::question(
            a.clone(),
            "boat in the wind on the ocean",
            4096,
        ))
        .await
        .unwrap();
    assert!(
        r.text.contains("sailing") && !r.text.contains("oven"),
        "{}",
        r.text
    );
    assert_eq!(r.sources.len(), 2);
    assert!(r.sources[0].score >= r.sources[1].score);
    assert!(r.reader.is_none(), "no LLM, no cache");
    let r = m
        .read(&Query::question(a, "bake bread dough", 4096))
        .await
        .unwrap();
    assert!(r.text.contains("oven") && !r.text.contains("sailing"));
    assert_eq!(m.stats().text_reads, 2);
}

#[tokio::test]
async fn manage_prefills_each_episode_and_reads_serve_the_cache() {
    let (llm, services) = caching_services();
    let meter = Meter::new();
    let m = MeteredSubstrate::new(
        EpiCache::new(meter.wrap_services(&services), config()).unwrap(),
        meter.clone(),
    );
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    let before = m.footprint().memory_bytes;
    let report = m.manage().await.unwrap();
    assert_eq!(llm.prefills(), 2);
    assert_eq!(report.changed, 4, "two episodes derived, two caches built");
    assert_eq!(m.inner().cached(&a).unwrap(), vec![true, true]);
    let manage = meter.snapshot().manage;
    assert_eq!(
        manage.llm_calls, 2,
        "each prefill is a manage-phase LLM call"
    );
    assert!(manage.input_tokens > 0);
    assert!(
        m.footprint().memory_bytes > before,
        "held caches count in E1"
    );

    let r = m
        .read(&Query::question(a.clone(), "boat wind ocean", 4096))
        .await
        .unwrap();
    let reader = r
        .reader
        .clone()
        .expect("a cached episode comes with its reader");
    let answer = reader
        .complete(&reader_request(&r.text, "Where was the boat?"))
        .await
        .unwrap();
    assert_eq!(answer.text, "a boat");
    assert_eq!(
        meter.snapshot().read.llm_calls,
        0,
        "readers are not metered here"
    );
    assert_eq!(m.inner().stats().cached_reads, 1);
    assert_eq!(m.inner().cache_reuse().unwrap().hits, 1);
    // A second manage has nothing left to do.
    assert_eq!(m.manage().await.unwrap().changed, 0);
    assert_eq!(llm.prefills(), 2);
}

#[tokio::test]
async fn cut_or_uncached_episodes_fall_back_to_text() {
    let (llm, services) = caching_services();
    let m = EpiCache::new(services.clone(), config()).unwrap();
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    // Without manage: episodes are derived lazily, no cache is built.
    let q = Query::question(a.clone(), "boat wind ocean", 4096);
    assert!(m.read(&q).await.unwrap().reader.is_none());
    assert_eq!(llm.prefills(), 0);
    m.manage().await.unwrap();
    // Budget 64 with a 50-token prompt leaves 10 tokens: one 6-token turn.
    let tight = Query::question(a.clone(), "boat wind ocean", 64).with_fixed_prompt_tokens(50);
    let r = m.read(&tight).await.unwrap();
    assert!(r.tokens <= tight.allowance());
    assert_eq!(r.sources.len(), 1);
    assert!(r.reader.is_none(), "a cut episode is not the cached text");
    assert_eq!(m.stats().text_reads, 2);
    // kv_cache off: nothing is prefilled.
    let off = EpiCache::new(services, config().with_kv_cache(false)).unwrap();
    off.write(&a, &history()).await.unwrap();
    off.manage().await.unwrap();
    assert_eq!(llm.prefills(), 2);
    assert!(off.read(&q).await.unwrap().reader.is_none());
}

#[tokio::test]
async fn forgetting_a_turn_rederives_its_episode_and_drops_only_its_cache() {
    let (llm, services) = caching_services();
    let m = EpiCache::new(services, config()).unwrap();
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    m.manage().await.unwrap();
    let kept = m.episodes(&a).unwrap();
    let victim = kept[1][0].clone(); // a kept baking turn
    let n = m
        .forget(&Forget::Sources {
            namespace: a.clone(),
            source_ids: vec![victim.clone(), "unknown".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(m.cached(&a).unwrap(), vec![true, false]);
    let after = m.episodes(&a).unwrap();
    assert_eq!(after[0], kept[0], "the other episode is untouched");
    assert!(!after[1].contains(&victim) && !after[1].is_empty());
    let r = m
        .read(&Query::question(a.clone(), "bake bread dough oven", 4096))
        .await
        .unwrap();
    assert!(r.source_ids().all(|id| id != victim));
    assert!(r.reader.is_none());
    m.manage().await.unwrap();
    assert_eq!(
        llm.prefills(),
        3,
        "only the re-derived episode is prefilled again"
    );
    assert_eq!(m.cached(&a).unwrap(), vec![true, true]);
    // Forgetting the namespace removes everything it held.
    assert_eq!(m.forget(&Forget::Namespace(a.clone())).await.unwrap(), 15);
    assert!(m.episodes(&a).unwrap().is_empty());
}

#[tokio::test]
async fn restore_keeps_recalls_and_rebuilds_caches_on_manage() {
    let (llm, services) = caching_services();
    let m = EpiCache::new(services.clone(), config()).unwrap();
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    m.manage().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);
    let fresh = EpiCache::new(services.clone(), config()).unwrap();
    fresh.restore(dir.path()).await.unwrap();
    let q = Query::question(a.clone(), "boat wind ocean", 4096);
    let (r1, r2) = (m.read(&q).await.unwrap(), fresh.read(&q).await.unwrap());
    assert_eq!(r1.text, r2.text);
    assert_eq!(
        r1.source_ids().collect::<Vec<_>>(),
        r2.source_ids().collect::<Vec<_>>()
    );
    assert!(r2.reader.is_none(), "KV caches are not persisted");
    assert_eq!(
        fresh.stats().reclusters,
        0,
        "episodes are restored, not recomputed"
    );
    fresh.manage().await.unwrap();
    assert_eq!(llm.prefills(), 4);
    assert!(fresh.read(&q).await.unwrap().reader.is_some());

    // Vectors of another embedder are refused and change nothing.
    let other = Services {
        embedder: Arc::new(HashingEmbedder::new(32)),
        ..services
    };
    let wrong = EpiCache::new(other, config()).unwrap();
    let b = ns("b");
    wrong.write(&b, &history()).await.unwrap();
    let err = wrong.restore(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::Store { .. }), "{err}");
    assert_eq!(wrong.episodes(&b).unwrap().len(), 2);
}

#[tokio::test]
async fn namespaces_and_later_writes() {
    let m = EpiCache::new(test_services(None), config()).unwrap();
    let (a, b) = (ns("a"), ns("b"));
    m.write(&a, &history()).await.unwrap();
    m.write(&b, &history()[..4]).await.unwrap();
    m.manage().await.unwrap();
    let rb = m
        .read(&Query::question(b.clone(), "bake bread dough", 4096))
        .await
        .unwrap();
    assert!(rb.source_ids().all(|id| id.starts_with("D1:")), "{rb:?}");
    // A later write is clustered on the next read, without manage.
    m.write(&b, &history()[4..8]).await.unwrap();
    let rb = m
        .read(&Query::question(b.clone(), "bake bread dough", 4096))
        .await
        .unwrap();
    assert!(rb.source_ids().all(|id| id.starts_with("D2:")), "{rb:?}");
    assert_eq!(m.stats().reclusters, 3);
    assert!(m.write(&b, &history()[..1]).await.is_err(), "duplicate id");
    assert!(EpiCache::new(test_services(None), config().with_keep_ratio(0.0)).is_err());
    assert!(EpiCache::new(test_services(None), config().with_episodes(0)).is_err());
}
