#![allow(clippy::unwrap_used, clippy::expect_used)]
//! M1's partitioned index (used from `partition_threshold` live units):
//! recall against an exact scan, the move from graph to partitions as a
//! namespace grows, forgetting and compaction, and persistence (format 3,
//! checked files, answers unchanged after a restore).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use submem_core::test_utils::{HashingEmbedder, WhitespaceCounter};
use submem_core::{
    l2_normalize, Error, Event, Forget, Namespace, Query, Services, Substrate, Turn,
};
use submem_flat::{DenseConfig, DenseMemory};

fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

fn services() -> Services {
    services_of(128)
}

fn services_of(dim: usize) -> Services {
    Services {
        llm: None,
        embedder: Arc::new(HashingEmbedder::new(dim)),
        tokens: Arc::new(WhitespaceCounter),
    }
}

/// Sentences on `topics` topics: each draws most words from its topic's
/// vocabulary and a few from a shared one, as turns of a long history do.
fn topical(n: usize, topics: usize, seed: u64) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let topic = rng.random_range(0..topics);
            let words: Vec<String> = (0..rng.random_range(6..12))
                .map(|_| {
                    if rng.random::<f32>() < 0.75 {
                        format!("t{topic}w{}", rng.random_range(0..12))
                    } else {
                        format!("common{}", rng.random_range(0..200))
                    }
                })
                .collect();
            Event::Turn(Turn {
                session_id: "s".into(),
                session_date: None,
                speaker: "x".into(),
                text: words.join(" "),
                source_id: format!("u{i}"),
            })
        })
        .collect()
}

fn text_of(e: &Event) -> String {
    match e {
        Event::Turn(t) => t.text.clone(),
        _ => unreachable!(),
    }
}

fn format_version(dir: &std::path::Path) -> u64 {
    let manifest = std::fs::read(dir.join(submem_kit::persist::MANIFEST_FILE)).unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    manifest["format_version"].as_u64().unwrap()
}

fn partitioned() -> DenseConfig {
    DenseConfig::default()
        .with_exact_threshold(50)
        .with_partition_threshold(400)
}

fn exact() -> DenseConfig {
    DenseConfig::default().with_exact_threshold(usize::MAX)
}

/// Unit vectors shaped like sentence embeddings: a direction every vector
/// shares (MiniLM's mean cosine between turns is ~0.3), a topic, and the
/// turn's own part.
fn embedding_like(n: usize, topics: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let random_unit = |rng: &mut StdRng| {
        let mut v: Vec<f32> = (0..dim).map(|_| rng.random::<f32>() - 0.5).collect();
        l2_normalize(&mut v);
        v
    };
    let shared = random_unit(&mut rng);
    let centres: Vec<Vec<f32>> = (0..topics).map(|_| random_unit(&mut rng)).collect();
    (0..n)
        .map(|_| {
            let topic = &centres[rng.random_range(0..topics)];
            let own = random_unit(&mut rng);
            let mut v: Vec<f32> = (0..dim)
                .map(|i| 0.6 * shared[i] + 0.8 * topic[i] + 0.7 * own[i])
                .collect();
            l2_normalize(&mut v);
            v
        })
        .collect()
}

#[test]
fn partitions_find_what_an_exact_scan_finds() {
    let (n, dim) = (6_000, 384);
    let mut vectors = embedding_like(n + 100, 300, dim, 1);
    let questions = vectors.split_off(n);
    let events = topical(n, 10, 1);
    let m = DenseMemory::new(services_of(dim), partitioned()).unwrap();
    let truth = DenseMemory::new(services_of(dim), exact()).unwrap();
    // In batches, so the namespace goes exact → graph → partitions and is
    // trained again as it grows.
    for (e, v) in events.chunks(500).zip(vectors.chunks(500)) {
        m.write_with_vectors(&ns("a"), e, v.to_vec()).unwrap();
    }
    truth
        .write_with_vectors(&ns("a"), &events, vectors.clone())
        .unwrap();
    let (mut hits, mut total) = (0usize, 0usize);
    for v in &questions {
        let q = Query::question(ns("a"), "", 1 << 20).with_top_k(10);
        let want = truth.read_with_vector(&q, v).unwrap();
        let kth = want
            .sources
            .iter()
            .map(|s| s.score)
            .fold(f32::MAX, f32::min);
        let got = m.read_with_vector(&q, v).unwrap();
        hits += got.sources.iter().filter(|s| s.score >= kth - 1e-5).count();
        total += want.sources.len();
    }
    let recall = hits as f64 / total as f64;
    assert!(recall >= 0.95, "recall@10 {recall}");
    // A stored vector finds its own unit first.
    let q = Query::question(ns("a"), "", 1 << 20).with_top_k(1);
    let first = m.read_with_vector(&q, &vectors[4321]).unwrap();
    assert_eq!(first.sources[0].source_id, "u4321");
}

#[tokio::test]
async fn forgotten_units_are_never_shown_and_compaction_rebuilds() {
    let events = topical(1_000, 40, 3);
    let m = DenseMemory::new(services(), partitioned().with_compact_share(0.1)).unwrap();
    m.write(&ns("a"), &events).await.unwrap();
    let gone: Vec<String> = (0..300).map(|i| format!("u{i}")).collect();
    m.forget(&Forget::Sources {
        namespace: ns("a"),
        source_ids: gone.clone(),
    })
    .await
    .unwrap();
    for e in events.iter().take(40) {
        let q = Query::question(ns("a"), text_of(e), 1 << 20).with_top_k(20);
        let r = m.read(&q).await.unwrap();
        assert_eq!(r.sources.len(), 20);
        assert!(r.sources.iter().all(|s| !gone.contains(&s.source_id)));
    }
    let report = m.manage().await.unwrap();
    assert!(report.changed >= 300, "{report:?}");
    // Survivors are still found, by the rebuilt index (700 ≥ the threshold).
    let q = Query::question(ns("a"), text_of(&events[777]), 1 << 20).with_top_k(1);
    assert_eq!(m.read(&q).await.unwrap().sources[0].source_id, "u777");
}

#[tokio::test]
async fn a_restored_index_answers_the_same_and_torn_files_are_refused() {
    let events = topical(1_200, 60, 4);
    let m = DenseMemory::new(services(), partitioned()).unwrap();
    m.write(&ns("a"), &events).await.unwrap();
    m.write(&ns("small"), &events[..20]).await.unwrap();
    m.forget(&Forget::Sources {
        namespace: ns("a"),
        source_ids: vec!["u5".into()],
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert_eq!(format_version(dir.path()), 3);

    let fresh = || DenseMemory::new(services(), partitioned()).unwrap();
    let back = fresh();
    back.restore(dir.path()).await.unwrap();
    for e in events.iter().step_by(97) {
        let q = Query::question(ns("a"), text_of(e), 1 << 20).with_top_k(8);
        let (before, after) = (m.read(&q).await.unwrap(), back.read(&q).await.unwrap());
        assert_eq!(before.text, after.text);
        assert_eq!(
            before.source_ids().collect::<Vec<_>>(),
            after.source_ids().collect::<Vec<_>>()
        );
    }

    // Only namespace "a" has partitions ("small" is scanned exactly).
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ivf"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].clone();
    let bytes = std::fs::read(&file).unwrap();
    let refused = |what: &str, err: Error| {
        assert!(matches!(err, Error::Store { .. }), "{what}: {err}");
    };
    std::fs::write(&file, &bytes[..bytes.len() - 3]).unwrap();
    refused("torn", fresh().restore(dir.path()).await.unwrap_err());
    let mut flipped = bytes.clone();
    let at = bytes.len() - 2;
    flipped[at] ^= 0x01;
    std::fs::write(&file, &flipped).unwrap();
    refused("altered", fresh().restore(dir.path()).await.unwrap_err());
    std::fs::remove_file(&file).unwrap();
    refused("missing", fresh().restore(dir.path()).await.unwrap_err());
    // A refused restore leaves the instance as it was.
    let kept = fresh();
    kept.write(&ns("mine"), &events[..3]).await.unwrap();
    assert!(kept.restore(dir.path()).await.is_err());
    let q = Query::question(ns("mine"), text_of(&events[1]), 1 << 20).with_top_k(1);
    assert_eq!(kept.read(&q).await.unwrap().sources[0].source_id, "u1");
    std::fs::write(&file, &bytes).unwrap();
    fresh().restore(dir.path()).await.unwrap();
}

#[tokio::test]
async fn a_store_without_partitions_keeps_format_2() {
    let m = DenseMemory::new(services(), partitioned()).unwrap();
    m.write(&ns("a"), &topical(100, 5, 5)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert_eq!(format_version(dir.path()), 2);
}

#[test]
fn settings_are_checked() {
    assert!(DenseMemory::new(services(), DenseConfig::default().with_partition_probe(0)).is_err());
}
