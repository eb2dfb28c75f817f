#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Behaviour of the hybrid substrate: fusion favours turns both rankings
//! find, fill reads spend the budget, persistence round-trips, a torn store
//! is refused without touching the live state, and forgetting reaches both
//! halves.

use submem_core::test_utils::test_services;
use submem_core::{Error, Event, Forget, Namespace, Query, Substrate, Turn};
use submem_flat::{HybridConfig, HybridMemory, ReadDepth};

fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

fn said(id: &str, text: &str) -> Event {
    Event::Turn(Turn {
        session_id: "s1".into(),
        session_date: None,
        speaker: "x".into(),
        text: text.into(),
        source_id: id.into(),
    })
}

fn corpus() -> Vec<Event> {
    (0..40)
        .map(|i| {
            said(
                &format!("t{i}"),
                &format!("filler chat number {i} about nothing much"),
            )
        })
        .chain([
            said("key", "my sister Zelda adopted a greyhound in March"),
            said("near", "Zelda called again"),
        ])
        .collect()
}

async fn ids(m: &HybridMemory, q: &str, k: usize, budget: usize) -> Vec<String> {
    m.read(&Query::question(ns("a"), q, budget).with_top_k(k))
        .await
        .unwrap()
        .source_ids()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn fused_top_k_prefers_turns_both_sides_find() {
    let m = HybridMemory::new(test_services(None), HybridConfig::default()).unwrap();
    m.write(&ns("a"), &corpus()).await.unwrap();
    let q = "Which greyhound did Zelda adopt in March?";
    assert_eq!(ids(&m, q, 1, 4096).await, vec!["key"]);
    let two = ids(&m, q, 2, 4096).await;
    // Both turns naming Zelda, in time order.
    assert_eq!(two, vec!["key", "near"]);
    // Another namespace sees nothing of a's turns.
    let other = m
        .read(&Query::question(ns("b"), "Zelda", 4096))
        .await
        .unwrap();
    assert!(other.sources.is_empty());
}

#[tokio::test]
async fn fill_spends_the_budget_and_top_k_does_not() {
    let fill = HybridMemory::new(
        test_services(None),
        HybridConfig::default().with_depth(ReadDepth::fill()),
    )
    .unwrap();
    fill.write(&ns("a"), &corpus()).await.unwrap();
    let q = Query::question(ns("a"), "Zelda greyhound", 200).with_top_k(2);
    let r = fill.read(&q).await.unwrap();
    assert!(r.sources.len() > 2, "{r:?}");
    assert!(r.tokens <= q.allowance());
    assert!(r.source_ids().any(|id| id == "key"));
}

#[tokio::test]
async fn persist_restore_forget_and_torn_stores() {
    let m = HybridMemory::new(test_services(None), HybridConfig::default()).unwrap();
    m.write(&ns("a"), &corpus()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);

    let r = HybridMemory::new(test_services(None), HybridConfig::default()).unwrap();
    r.restore(dir.path()).await.unwrap();
    let q = "When did Zelda adopt the greyhound?";
    assert_eq!(ids(&r, q, 3, 4096).await, ids(&m, q, 3, 4096).await);

    // Forgetting reaches both rankings: the turn is gone whatever matches it.
    let n = r
        .forget(&Forget::Sources {
            namespace: ns("a"),
            source_ids: vec!["key".into(), "nope".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(!ids(&r, "greyhound adopted Zelda sister", 10, 4096)
        .await
        .contains(&"key".to_string()));

    // A torn store (the BM25 half's manifest gone) is refused, and the live
    // instance keeps what it had.
    std::fs::remove_file(
        dir.path()
            .join("sparse")
            .join(submem_kit::persist::MANIFEST_FILE),
    )
    .unwrap();
    let err = r.restore(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::Store { .. }), "{err:?}");
    assert!(!ids(&r, "greyhound adopted Zelda sister", 10, 4096)
        .await
        .contains(&"key".to_string()));
    assert_eq!(ids(&r, "Zelda called", 1, 4096).await, vec!["near"]);
}

#[tokio::test]
async fn a_bad_batch_stores_nothing_on_either_side() {
    let m = HybridMemory::new(test_services(None), HybridConfig::default()).unwrap();
    m.write(&ns("a"), &[said("d1", "alpha")]).await.unwrap();
    let dup = m
        .write(&ns("a"), &[said("d2", "beta"), said("d1", "again")])
        .await;
    assert!(dup.is_err());
    // Dense ranking shows its nearest turns whatever they say: d1 only.
    assert_eq!(ids(&m, "beta", 10, 4096).await, vec!["d1"]);
    m.write(&ns("a"), &[said("d2", "beta")]).await.unwrap();
    assert_eq!(ids(&m, "beta", 1, 4096).await, vec!["d2"]);
}
