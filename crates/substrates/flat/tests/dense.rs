#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Behaviour of M1: HNSW recall against brute force, persistence (also in a
//! new process), torn stores, compaction, embedder failures and footprint.

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use submem_core::test_utils::{HashingEmbedder, WhitespaceCounter};
use submem_core::{
    cosine, l2_normalize, Embedder, Error, Event, Forget, Namespace, Query, ServiceError, Services,
    Substrate, Turn,
};
use submem_flat::{DenseConfig, DenseMemory};

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

/// One turn per text, with source ids `u0`, `u1`, ….
fn numbered(texts: &[String]) -> Vec<Event> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| said(&format!("u{i}"), t))
        .collect()
}

fn services(dim: usize) -> Services {
    Services {
        llm: None,
        embedder: Arc::new(HashingEmbedder::new(dim)),
        tokens: Arc::new(WhitespaceCounter),
    }
}

/// Deterministic synthetic sentences over a Zipf-like vocabulary.
fn sentences(n: usize, words: std::ops::Range<usize>, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let len = rng.random_range(words.clone());
            (0..len)
                .map(|_| {
                    let r: f64 = rng.random();
                    format!("w{}", (r * r * 3000.0) as usize)
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Share of the returned top-k whose cosine reaches the exact k-th best
/// (tie-aware recall@k).
fn recall_at_k(returned: &[f32], exact_kth: f32) -> f64 {
    returned.iter().filter(|s| **s >= exact_kth - 1e-5).count() as f64
}

#[tokio::test]
async fn hnsw_recall_at_10_is_at_least_098_on_hashing_vectors() {
    let dim = 384;
    let svc = services(dim);
    // Default graph settings; the graph is built at 1,000 units and the rest
    // are inserted into it incrementally.
    let m = DenseMemory::new(
        svc.clone(),
        DenseConfig::default().with_exact_threshold(1000),
    )
    .unwrap();
    let a = ns("a");
    let texts = sentences(3000, 20..31, 7);
    let events = numbered(&texts);
    for chunk in events.chunks(500) {
        m.write(&a, chunk).await.unwrap();
    }
    assert!(
        3000 >= m.config().exact_threshold,
        "the graph path must be in use"
    );

    let embedder = HashingEmbedder::new(dim);
    let stored: Vec<Vec<f32>> = events
        .iter()
        .map(|e| embedder.embed_one(&e.render()))
        .collect();
    let queries = sentences(200, 4..9, 8);
    let (mut hits, mut total) = (0.0, 0.0);
    for q in &queries {
        let qv = embedder.embed_one(q);
        let mut exact: Vec<f32> = stored.iter().map(|v| cosine(&qv, v)).collect();
        exact.sort_by(|x, y| y.total_cmp(x));
        let r = m
            .read(&Query::question(a.clone(), q.clone(), 1 << 20).with_top_k(10))
            .await
            .unwrap();
        assert_eq!(r.sources.len(), 10);
        let scores: Vec<f32> = r.sources.iter().map(|s| s.score).collect();
        hits += recall_at_k(&scores, exact[9]);
        total += 10.0;
    }
    let recall = hits / total;
    eprintln!("hashing-vector recall@10 = {recall:.4}");
    assert!(recall >= 0.98, "recall@10 = {recall}");
}

#[tokio::test]
async fn hnsw_recall_at_10_on_random_unit_vectors() {
    // Uniform random 384-d unit vectors are the hardest case for a graph
    // index (no structure); queries are stored vectors plus noise. The
    // default `ef_search` (64, chosen for latency) reaches 0.96 here; the
    // documented high-recall setting, 96, is what this case needs.
    let dim = 384;
    let m = DenseMemory::new(
        services(dim),
        DenseConfig::default()
            .with_exact_threshold(1)
            .with_ef_search(96),
    )
    .unwrap();
    let a = ns("a");
    let mut rng = StdRng::seed_from_u64(11);
    let unit = |rng: &mut StdRng| {
        let mut v: Vec<f32> = (0..dim).map(|_| rng.random::<f32>() - 0.5).collect();
        l2_normalize(&mut v);
        v
    };
    let n = 3000;
    let vectors: Vec<Vec<f32>> = (0..n).map(|_| unit(&mut rng)).collect();
    let events: Vec<Event> = (0..n).map(|i| said(&format!("u{i}"), "t")).collect();
    m.write_with_vectors(&a, &events, vectors.clone()).unwrap();
    let (mut hits, mut total) = (0.0, 0.0);
    for i in 0..200 {
        let noise = unit(&mut rng);
        let mut q: Vec<f32> = vectors[(i * 13) % n]
            .iter()
            .zip(&noise)
            .map(|(x, e)| x + 0.8 * e)
            .collect();
        l2_normalize(&mut q);
        let mut exact: Vec<f32> = vectors.iter().map(|v| cosine(&q, v)).collect();
        exact.sort_by(|x, y| y.total_cmp(x));
        let r = m
            .read_with_vector(&Query::question(a.clone(), "", 1 << 20).with_top_k(10), &q)
            .unwrap();
        let scores: Vec<f32> = r.sources.iter().map(|s| s.score).collect();
        hits += recall_at_k(&scores, exact[9]);
        total += 10.0;
    }
    let recall = hits / total;
    eprintln!("random-vector recall@10 = {recall:.4}");
    assert!(recall >= 0.98, "recall@10 = {recall}");
}

#[tokio::test]
async fn exact_and_graph_paths_agree_on_small_data() {
    let texts = sentences(300, 10..20, 3);
    let events = numbered(&texts);
    let exact = DenseMemory::new(services(64), DenseConfig::default()).unwrap();
    let graph =
        DenseMemory::new(services(64), DenseConfig::default().with_exact_threshold(1)).unwrap();
    exact.write(&ns("a"), &events).await.unwrap();
    graph.write(&ns("a"), &events).await.unwrap();
    // Tie-aware: both must return the same top-5 scores (hashing vectors of
    // short texts tie often, and either of two tied units is a right answer).
    for q in sentences(50, 3..6, 4) {
        let query = Query::question(ns("a"), q, 1 << 20).with_top_k(5);
        let e = exact.read(&query).await.unwrap();
        let g = graph.read(&query).await.unwrap();
        let scores = |r: &submem_core::Recall| {
            let mut s: Vec<f32> = r.sources.iter().map(|h| h.score).collect();
            s.sort_by(|x, y| y.total_cmp(x));
            s
        };
        let (es, gs) = (scores(&e), scores(&g));
        assert_eq!(es.len(), gs.len());
        for (x, y) in es.iter().zip(&gs) {
            assert!((x - y).abs() < 1e-5, "exact {es:?} vs graph {gs:?}");
        }
    }
}

#[tokio::test]
async fn compaction_drops_tombstones_and_keeps_answers() {
    let cfg = DenseConfig::default()
        .with_exact_threshold(50)
        .with_compact_share(0.2);
    let m = DenseMemory::new(services(64), cfg).unwrap();
    let a = ns("a");
    let texts = sentences(200, 10..20, 5);
    let events = numbered(&texts);
    m.write(&a, &events).await.unwrap();
    let gone: Vec<String> = (0..30).map(|i| format!("u{}", i * 2)).collect();
    let n = m
        .forget(&Forget::Sources {
            namespace: a.clone(),
            source_ids: gone.clone(),
        })
        .await
        .unwrap();
    assert_eq!(n, 30);
    // 30 of 200 slots (15 %) is under the share: nothing to compact yet.
    assert_eq!(m.manage().await.unwrap().changed, 0);
    let query = Query::question(a.clone(), texts[0].clone(), 1 << 20).with_top_k(20);
    let before = m.read(&query).await.unwrap();
    assert!(before
        .source_ids()
        .all(|id| !gone.contains(&id.to_string())));
    let more: Vec<String> = (30..45).map(|i| format!("u{}", i * 2)).collect();
    m.forget(&Forget::Sources {
        namespace: a.clone(),
        source_ids: more.clone(),
    })
    .await
    .unwrap();
    assert_eq!(m.manage().await.unwrap().changed, 45);
    assert_eq!(m.manage().await.unwrap().changed, 0);
    let after = m.read(&query).await.unwrap();
    assert!(after
        .source_ids()
        .all(|id| !gone.contains(&id.to_string()) && !more.contains(&id.to_string())));
    assert_eq!(after.sources.len(), 20);
    // Positions survive compaction: the recall is still in write order.
    let order: Vec<usize> = after
        .text
        .lines()
        .map(|l| texts.iter().position(|t| l == format!("x: {t}")).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
}

#[derive(Debug)]
struct BrokenEmbedder {
    dim: usize,
    give: usize,
    fail: bool,
}

#[async_trait]
impl Embedder for BrokenEmbedder {
    fn name(&self) -> &str {
        "broken"
    }
    fn dimension(&self) -> usize {
        self.dim
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ServiceError> {
        if self.fail {
            return Err(ServiceError::Injected("down".into()));
        }
        Ok(texts.iter().map(|_| vec![0.5; self.give]).collect())
    }
}

#[tokio::test]
async fn embedder_failures_are_errors_and_store_nothing() {
    for (give, fail) in [(8, true), (7, false)] {
        let svc = Services {
            llm: None,
            embedder: Arc::new(BrokenEmbedder { dim: 8, give, fail }),
            tokens: Arc::new(WhitespaceCounter),
        };
        let m = DenseMemory::new(svc, DenseConfig::default()).unwrap();
        let err = m.write(&ns("a"), &[said("1", "hello")]).await.unwrap_err();
        if fail {
            assert!(matches!(err, Error::Service(_)), "{err}");
        } else {
            assert!(err.to_string().contains("7-dimensional"), "{err}");
        }
        assert_eq!(m.footprint().stored_tokens, 0);
    }
    let m = DenseMemory::new(services(8), DenseConfig::default()).unwrap();
    assert!(m
        .write_with_vectors(&ns("a"), &[said("1", "x")], vec![vec![f32::NAN; 8]])
        .is_err());
    assert!(m
        .write_with_vectors(&ns("a"), &[said("1", "x")], vec![])
        .is_err());
    assert!(m
        .read_with_vector(&Query::question(ns("a"), "q", 512), &[1.0; 3])
        .is_err());
    assert!(DenseMemory::new(
        services(8),
        DenseConfig::default().with_max_connections(999)
    )
    .is_err());
}

#[tokio::test]
async fn torn_and_mismatched_stores_are_refused_and_state_is_kept() {
    let m = DenseMemory::new(services(32), DenseConfig::default()).unwrap();
    m.write(&ns("a"), &[said("1", "apple pie"), said("2", "pear tart")])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);

    let live = DenseMemory::new(services(32), DenseConfig::default()).unwrap();
    live.write(&ns("a"), &[said("z", "zebra")]).await.unwrap();
    let q = Query::question(ns("a"), "zebra", 4096);
    let kept = live.read(&q).await.unwrap().text;

    // Another embedder dimension.
    let other = DenseMemory::new(services(16), DenseConfig::default()).unwrap();
    let err = other.restore(dir.path()).await.unwrap_err();
    assert!(
        matches!(err, Error::Store { .. }) && err.to_string().contains("32"),
        "{err}"
    );

    // A truncated vector file.
    let vf = dir.path().join("vectors-0.f32");
    let bytes = std::fs::read(&vf).unwrap();
    std::fs::write(&vf, &bytes[..bytes.len() - 4]).unwrap();
    assert!(matches!(
        live.restore(dir.path()).await,
        Err(Error::Store { .. })
    ));
    // A missing one.
    std::fs::remove_file(&vf).unwrap();
    assert!(matches!(
        live.restore(dir.path()).await,
        Err(Error::Store { .. })
    ));
    // No manifest (an interrupted persist).
    std::fs::write(&vf, &bytes).unwrap();
    std::fs::remove_file(dir.path().join(submem_kit::persist::MANIFEST_FILE)).unwrap();
    assert!(matches!(
        live.restore(dir.path()).await,
        Err(Error::Store { .. })
    ));
    assert_eq!(live.read(&q).await.unwrap().text, kept);

    // Repaired: restores.
    submem_kit::persist::write_manifest(dir.path(), "M1 dense-hnsw", 2).unwrap();
    live.restore(dir.path()).await.unwrap();
    assert!(live
        .read(&q)
        .await
        .unwrap()
        .sources
        .iter()
        .all(|s| s.source_id != "z"));
}

#[tokio::test]
async fn torn_or_foreign_graph_files_are_refused() {
    let cfg = DenseConfig::default().with_exact_threshold(10);
    let m = DenseMemory::new(services(32), cfg.clone()).unwrap();
    let texts = sentences(120, 5..10, 21);
    let events = numbered(&texts);
    m.write(&ns("a"), &events).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let graph = dir.path().join("graph-0.hnsw.graph");
    let data = dir.path().join("graph-0.hnsw.data");
    let (graph_bytes, data_bytes) = (
        std::fs::read(&graph).unwrap(),
        std::fs::read(&data).unwrap(),
    );
    let fresh = || DenseMemory::new(services(32), cfg.clone()).unwrap();
    fresh().restore(dir.path()).await.unwrap();

    let refused = |what: &str, err: Error| {
        assert!(matches!(err, Error::Store { .. }), "{what}: {err}");
    };
    std::fs::write(&graph, &graph_bytes[..graph_bytes.len() / 2]).unwrap();
    refused("torn graph", fresh().restore(dir.path()).await.unwrap_err());
    std::fs::write(&graph, b"not a graph at all").unwrap();
    refused(
        "foreign graph",
        fresh().restore(dir.path()).await.unwrap_err(),
    );
    std::fs::write(&graph, &graph_bytes).unwrap();
    let mut flipped = data_bytes.clone();
    flipped[data_bytes.len() / 2] ^= 0xff;
    std::fs::write(&data, &flipped).unwrap();
    refused(
        "altered data",
        fresh().restore(dir.path()).await.unwrap_err(),
    );
    std::fs::remove_file(&data).unwrap();
    refused(
        "missing data",
        fresh().restore(dir.path()).await.unwrap_err(),
    );
    std::fs::write(&data, &data_bytes).unwrap();
    let back = fresh();
    back.restore(dir.path()).await.unwrap();
    let q = Query::question(ns("a"), texts[7].clone(), 4096).with_top_k(3);
    assert_eq!(
        back.read(&q).await.unwrap().text,
        m.read(&q).await.unwrap().text
    );
}

#[tokio::test]
async fn footprint_grows_with_the_graph() {
    let cfg = DenseConfig::default().with_exact_threshold(100);
    let m = DenseMemory::new(services(64), cfg).unwrap();
    let texts = sentences(99, 5..6, 9);
    let events = numbered(&texts);
    m.write(&ns("a"), &events).await.unwrap();
    let flat = m.footprint();
    assert_eq!(flat.stored_tokens, 99 * 6);
    assert!(flat.memory_bytes >= 99 * 64 * 4);
    m.write(&ns("a"), &[said("last", "one more")])
        .await
        .unwrap();
    let graph = m.footprint();
    // The graph adds at least a second copy of every vector.
    assert!(graph.memory_bytes >= flat.memory_bytes + 100 * 64 * 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_readers_share_one_instance() {
    let m: Arc<dyn Substrate> = Arc::new(
        DenseMemory::new(
            services(64),
            DenseConfig::default().with_exact_threshold(40),
        )
        .unwrap(),
    );
    let mut tasks = Vec::new();
    for w in 0..4 {
        let m = m.clone();
        tasks.push(tokio::spawn(async move {
            let name = ns(&format!("w{}", w % 2));
            for i in 0..30 {
                m.write(
                    &name,
                    &[said(&format!("{w}-{i}"), &format!("apple {w} pear {i}"))],
                )
                .await
                .unwrap();
                let r = m
                    .read(&Query::question(name.clone(), "apple", 512))
                    .await
                    .unwrap();
                assert!(!r.sources.is_empty());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let r = m
        .read(&Query::question(ns("w1"), "apple", 1 << 20).with_top_k(1000))
        .await
        .unwrap();
    assert_eq!(r.sources.len(), 60);
    assert!(r
        .source_ids()
        .all(|id| id.starts_with("1-") || id.starts_with("3-")));
}

// ---- restore in a new process -------------------------------------------

const CHILD_ENV: &str = "SUBMEM_M1_RESTORE_CHILD_DIR";
const CHILD_MARK: &str = "SUBMEM-CHILD-RECALL:";

fn process_memory() -> DenseMemory {
    DenseMemory::new(
        services(64),
        DenseConfig::default().with_exact_threshold(100),
    )
    .unwrap()
}

fn process_queries() -> Vec<Query> {
    sentences(20, 3..6, 21)
        .into_iter()
        .map(|q| Query::question(ns("proc"), q, 256).with_top_k(8))
        .collect()
}

/// Runs only as the child of `restore_in_a_new_process_gives_the_same_recall`.
#[tokio::test]
async fn child_process_restores_and_reads() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let m = process_memory();
    m.restore(Path::new(&dir)).await.unwrap();
    let mut all = Vec::new();
    for q in process_queries() {
        all.push(m.read(&q).await.unwrap());
    }
    println!("{CHILD_MARK}{}", serde_json::to_string(&all).unwrap());
}

#[tokio::test]
async fn restore_in_a_new_process_gives_the_same_recall() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let m = process_memory();
    let texts = sentences(400, 8..16, 20);
    let events = numbered(&texts);
    m.write(&ns("proc"), &events[..150]).await.unwrap();
    m.write(&ns("proc"), &events[150..]).await.unwrap();
    // Tombstones are part of the persisted graph state.
    m.forget(&Forget::Sources {
        namespace: ns("proc"),
        source_ids: vec!["u3".into(), "u200".into()],
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let mut expected = Vec::new();
    for q in process_queries() {
        expected.push(m.read(&q).await.unwrap());
    }
    let expected = serde_json::to_string(&expected).unwrap();

    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_restores_and_reads",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = stdout
        .lines()
        .find_map(|l| l.split_once(CHILD_MARK).map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("child printed no recall: {stdout}"));
    assert_eq!(got, expected);
}

#[tokio::test]
async fn persisting_again_leaves_no_stale_files() {
    let m = DenseMemory::new(services(16), DenseConfig::default()).unwrap();
    m.write(&ns("a"), &[said("1", "apple")]).await.unwrap();
    m.write(&ns("b"), &[said("1", "pear")]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(dir.path().join("vectors-1.f32").exists());
    m.forget(&Forget::Namespace(ns("b"))).await.unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(!dir.path().join("vectors-1.f32").exists());
    let r = DenseMemory::new(services(16), DenseConfig::default()).unwrap();
    r.restore(dir.path()).await.unwrap();
    let q = |n: &str| Query::question(ns(n), "apple pear", 512);
    assert_eq!(r.read(&q("a")).await.unwrap().sources.len(), 1);
    assert!(r.read(&q("b")).await.unwrap().sources.is_empty());
}
