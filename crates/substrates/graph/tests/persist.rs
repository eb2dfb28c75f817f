#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Persistence (fresh instance and a new process), namespace isolation,
//! lazy indexing, and how many model calls each phase makes.

use std::sync::Arc;
use submem_core::test_utils::{test_services, HashingEmbedder, ScriptedLlm};
use submem_core::testing::fixture_conversation;
use submem_core::{Embedder, Event, Forget, Namespace, Query, Services, Substrate};
use submem_graph::{GraphConfig, GraphMemory};
use submem_kit::{Meter, MeteredSubstrate, Phase};

const CHILD_DIR: &str = "SUBMEM_GRAPH_CHILD_STORE";

fn conversation(tag: &str, marker: &str) -> Vec<Event> {
    fixture_conversation(tag, marker, 24)
}

fn question(ns: &Namespace) -> Query {
    Query::question(ns.clone(), "What is the name of my violin teacher?", 2048).with_top_k(4)
}

async fn filled() -> (GraphMemory, Namespace) {
    let m = GraphMemory::new(
        test_services(None),
        GraphConfig::default().with_chunk_tokens(40),
    )
    .unwrap();
    let ns = Namespace::new("alice").unwrap();
    m.write(&ns, &conversation("a", "zanzibarite"))
        .await
        .unwrap();
    m.write(
        &Namespace::new("bob").unwrap(),
        &conversation("b", "quetzalcoatlus"),
    )
    .await
    .unwrap();
    (m, ns)
}

#[tokio::test]
async fn restores_the_same_recalls_without_reembedding() {
    let (m, ns) = filled().await;
    m.manage().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);
    let r1 = m.read(&question(&ns)).await.unwrap();

    // A fresh instance restores it; nothing is pending, so its first read
    // embeds only the query texts.
    let meter = Meter::new();
    let services = meter.wrap_services(&test_services(None));
    let fresh = GraphMemory::new(services, GraphConfig::default().with_chunk_tokens(40)).unwrap();
    fresh.restore(dir.path()).await.unwrap();
    assert_eq!(fresh.counts(&ns).await, m.counts(&ns).await);
    assert_eq!(fresh.counts(&ns).await.pending, 0);
    let sub = MeteredSubstrate::new(fresh, meter.clone());
    let r2 = sub.read(&question(&ns)).await.unwrap();
    assert_eq!(r1.text, r2.text);
    assert_eq!(
        r1.source_ids().collect::<Vec<_>>(),
        r2.source_ids().collect::<Vec<_>>()
    );
    let read = meter.snapshot().phase(Phase::Read).clone();
    assert_eq!(read.embed_calls, 1, "{read:?}");
    assert!(read.embed_items <= 3, "{read:?}");
    assert_eq!(read.llm_calls, 0);
}

#[tokio::test]
async fn another_embedder_recomputes_saved_vectors() {
    let (m, ns) = filled().await;
    m.manage().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    #[derive(Debug)]
    struct Other(HashingEmbedder);
    #[async_trait::async_trait]
    impl Embedder for Other {
        fn name(&self) -> &str {
            "other"
        }
        fn dimension(&self) -> usize {
            self.0.dimension()
        }
        async fn embed(&self, t: &[String]) -> Result<Vec<Vec<f32>>, submem_core::ServiceError> {
            self.0.embed(t).await
        }
    }
    let base = test_services(None);
    let services = Services {
        embedder: Arc::new(Other(HashingEmbedder::new(64))),
        ..base
    };
    let fresh = GraphMemory::new(services, GraphConfig::default()).unwrap();
    fresh.restore(dir.path()).await.unwrap();
    let c = fresh.counts(&ns).await;
    assert_eq!(c.vectors, 0);
    assert!(c.pending > 0);
    fresh.manage().await.unwrap();
    fresh.check_consistency(&ns).await.unwrap();
}

#[tokio::test]
async fn a_torn_store_is_refused_and_changes_nothing() {
    let (m, ns) = filled().await;
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    std::fs::write(
        dir.path().join(submem_graph::STATE_FILE),
        b"{\"embedder\": 1",
    )
    .unwrap();
    let before = m.counts(&ns).await;
    assert!(matches!(
        m.restore(dir.path()).await,
        Err(submem_core::Error::Store { .. })
    ));
    assert_eq!(m.counts(&ns).await, before);
}

#[tokio::test]
async fn namespaces_are_isolated_in_graph_and_forgetting() {
    let (m, ns) = filled().await;
    let bob = Namespace::new("bob").unwrap();
    let r = m
        .read(&Query::question(
            bob.clone(),
            "violin teacher zanzibarite",
            4096,
        ))
        .await
        .unwrap();
    assert!(!r.text.contains("zanzibarite"));
    assert!(r.text.contains("quetzalcoatlus"));
    assert!(m
        .stored_texts(&bob)
        .await
        .iter()
        .all(|t| !t.contains("zanzibarite")));
    let bob_before = m.counts(&bob).await;
    m.forget(&Forget::Namespace(ns.clone())).await.unwrap();
    assert_eq!(m.counts(&bob).await, bob_before);
    assert_eq!(m.counts(&ns).await.events, 0);
}

#[tokio::test]
async fn one_llm_call_per_chunk_on_write_and_one_per_read() {
    let llm = Arc::new(ScriptedLlm::from_fn(|req| {
        let p = &req.messages.last().unwrap().content;
        Ok(if p.contains("high_level_keywords") {
            "{\"low_level_keywords\": [\"violin\"], \"high_level_keywords\": [\"music\"]}".into()
        } else {
            "entity | Ana | person | Ana speaks.".into()
        })
    }));
    let meter = Meter::new();
    let services = meter.wrap_services(&test_services(Some(llm.clone())));
    let m = GraphMemory::new(services, GraphConfig::default().with_chunk_tokens(40)).unwrap();
    assert!(m.info().needs_llm);
    let sub = MeteredSubstrate::new(m, meter.clone());
    let ns = Namespace::new("a").unwrap();
    let report = sub
        .write(&ns, &conversation("a", "zanzibarite"))
        .await
        .unwrap();
    let snap = meter.snapshot();
    assert_eq!(snap.phase(Phase::Write).llm_calls as usize, report.units);
    // Indexing is lazy: writing embeds nothing.
    assert_eq!(snap.phase(Phase::Write).embed_calls, 0);
    sub.read(&question(&ns)).await.unwrap();
    let read = meter.snapshot().phase(Phase::Read).clone();
    assert_eq!(read.llm_calls, 1);
    assert!(read.embed_calls >= 2, "pending items and the query");
    sub.read(&question(&ns)).await.unwrap();
    let read2 = meter.snapshot().phase(Phase::Read).clone();
    assert_eq!(
        read2.embed_calls - read.embed_calls,
        1,
        "only the query the second time"
    );

    let rules = GraphMemory::new(test_services(None), GraphConfig::default()).unwrap();
    assert!(!rules.info().needs_llm);
}

/// Runs only as the child of `restores_in_a_new_process`.
#[tokio::test]
async fn child_restores_from_env() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let m = GraphMemory::new(
        test_services(None),
        GraphConfig::default().with_chunk_tokens(40),
    )
    .unwrap();
    m.restore(&dir.join("store")).await.unwrap();
    let ns = Namespace::new("alice").unwrap();
    let r = m.read(&question(&ns)).await.unwrap();
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    assert_eq!(r.text, expected);
    m.check_consistency(&ns).await.unwrap();
}

#[tokio::test]
async fn restores_in_a_new_process() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let (m, ns) = filled().await;
    let tmp = tempfile::tempdir().unwrap();
    m.persist(&tmp.path().join("store")).await.unwrap();
    let r = m.read(&question(&ns)).await.unwrap();
    assert!(r.text.contains("zanzibarite"));
    std::fs::write(tmp.path().join("expected.txt"), &r.text).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_restores_from_env", "--test-threads", "1"])
        .env(CHILD_DIR, tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}
