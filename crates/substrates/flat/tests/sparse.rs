#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Behaviour of M2: BM25 against hand-computed scores, per-namespace
//! statistics, robust query building, persistence (mmapped restore, moving
//! back to RAM, a new process), torn stores, forgetting and concurrency.

use std::path::Path;
use std::sync::Arc;
use submem_core::test_utils::test_services;
use submem_core::{Error, Event, Forget, Namespace, Query, Recall, Step, Substrate, Turn};
use submem_flat::{SparseConfig, SparseMemory};

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

fn m2() -> SparseMemory {
    SparseMemory::new(test_services(None), SparseConfig::default()).unwrap()
}

fn score_of(r: &Recall, id: &str) -> f32 {
    r.sources
        .iter()
        .find(|s| s.source_id == id)
        .unwrap_or_else(|| panic!("{id} not in recall {r:?}"))
        .score
}

/// BM25 by hand: k1 = 1.2, b = 0.75, idf = ln(1 + (N − n + 0.5)/(n + 0.5)).
fn bm25(tf: f64, dl: f64, avgdl: f64, n_docs: f64, df: f64) -> f64 {
    let idf = (1.0 + (n_docs - df + 0.5) / (df + 0.5)).ln();
    idf * tf * (1.2 + 1.0) / (tf + 1.2 * (1.0 - 0.75 + 0.75 * dl / avgdl))
}

fn corpus() -> Vec<Event> {
    // Rendered as "x: …"; the speaker "x" is a token of every document, and
    // "the", "and" are stop words.
    vec![
        said("d0", "cat cat dog"),                // x cat cat dog        → 4
        said("d1", "Cat bird"),                   // x cat bird           → 3
        said("d2", "the fish and the bird swim"), // x fish bird swim   → 4
        said("d3", "dog"),                        // x dog                → 2
    ]
}

#[tokio::test]
async fn bm25_matches_hand_computed_scores() {
    let m = m2();
    let a = ns("a");
    m.write(&a, &corpus()).await.unwrap();
    // Another tenant full of "cat" must not change a's statistics.
    let noise: Vec<Event> = (0..50)
        .map(|i| said(&format!("n{i}"), "cat cat cat cat bird"))
        .collect();
    m.write(&ns("noise"), &noise).await.unwrap();

    let (n, avgdl) = (4.0, 13.0 / 4.0);
    let r = m
        .read(&Query::question(a.clone(), "CAT?", 4096))
        .await
        .unwrap();
    assert_eq!(r.sources.len(), 2);
    let want_d0 = bm25(2.0, 4.0, avgdl, n, 2.0);
    let want_d1 = bm25(1.0, 3.0, avgdl, n, 2.0);
    assert!(
        (f64::from(score_of(&r, "d0")) - want_d0).abs() < 1e-4,
        "{r:?} vs {want_d0}"
    );
    assert!(
        (f64::from(score_of(&r, "d1")) - want_d1).abs() < 1e-4,
        "{r:?} vs {want_d1}"
    );
    assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["d0", "d1"]);

    // Two terms add up; a repeated query word counts once.
    let r = m
        .read(&Query::question(a.clone(), "cat bird bird", 4096))
        .await
        .unwrap();
    let want = [
        ("d0", bm25(2.0, 4.0, avgdl, n, 2.0)),
        (
            "d1",
            bm25(1.0, 3.0, avgdl, n, 2.0) + bm25(1.0, 3.0, avgdl, n, 2.0),
        ),
        ("d2", bm25(1.0, 4.0, avgdl, n, 2.0)),
    ];
    for (id, s) in want {
        assert!(
            (f64::from(score_of(&r, id)) - s).abs() < 1e-4,
            "{id}: {r:?} vs {s}"
        );
    }
    assert_eq!(r.source_ids().next(), Some("d1"));
    // Shown in time order whatever the ranking.
    assert!(r.text.starts_with("x: cat cat dog"));

    // Forgetting updates the statistics: d0 gone → N = 3, avgdl = 9/3.
    m.forget(&Forget::Sources {
        namespace: a.clone(),
        source_ids: vec!["d0".into()],
    })
    .await
    .unwrap();
    let r = m.read(&Query::question(a, "cat", 4096)).await.unwrap();
    let want = bm25(1.0, 3.0, 3.0, 3.0, 1.0);
    assert!(
        (f64::from(score_of(&r, "d1")) - want).abs() < 1e-4,
        "{r:?} vs {want}"
    );
}

#[tokio::test]
async fn top_k_limits_hits_and_ties_prefer_the_newer_unit() {
    let m = m2();
    let a = ns("a");
    let events: Vec<Event> = (0..10)
        .map(|i| said(&format!("t{i}"), "same words"))
        .collect();
    m.write(&a, &events).await.unwrap();
    let r = m
        .read(&Query::question(a.clone(), "words", 4096).with_top_k(3))
        .await
        .unwrap();
    assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["t9", "t8", "t7"]);
    let huge = m
        .read(&Query::question(a, "words", 4096).with_top_k(usize::MAX))
        .await
        .unwrap();
    assert_eq!(huge.sources.len(), 10);
}

#[tokio::test]
async fn user_text_never_breaks_the_query() {
    let m = m2();
    let a = ns("a");
    m.write(
        &a,
        &[
            said("1", "Caroline said: \"the (red) key\" AND the blue one"),
            said("2", "naïve café — 東京 🎉 field:value title:x"),
        ],
    )
    .await
    .unwrap();
    let nasty = [
        "\"unclosed quote",
        "field:value",
        "(((",
        "a AND OR NOT b",
        "title:x^2 ~ * ? -key +key",
        "東京",
        "🎉🎉",
        "",
        "   ",
        "the and of",
        "\\ / [ ] { } < >",
        "key) OR (café",
    ];
    for q in nasty {
        let r = m.read(&Query::question(a.clone(), q, 512)).await;
        assert!(r.is_ok(), "{q:?}: {r:?}");
    }
    let r = m
        .read(&Query::question(a.clone(), "東京", 512))
        .await
        .unwrap();
    assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["2"]);
    let r = m
        .read(&Query::question(a.clone(), "CAFÉ", 512))
        .await
        .unwrap();
    assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["2"]);
    let r = m
        .read(&Query::question(a, "the and of", 512))
        .await
        .unwrap();
    assert!(r.sources.is_empty(), "stop words alone match nothing");
}

#[tokio::test]
async fn agent_steps_are_searchable() {
    let m = m2();
    let a = ns("agent");
    let step = |n: u32, action: &str, obs: &str| {
        Event::Step(Step {
            step: n,
            action: action.into(),
            observation: obs.into(),
            source_id: format!("r:{n}"),
        })
    };
    m.write(
        &a,
        &[
            step(1, "look", "You see a drawer and a fridge."),
            step(2, "open drawer 1", "Inside is a silver key."),
        ],
    )
    .await
    .unwrap();
    let q = Query::agentic(a, "find the silver key", "You are in the kitchen.", 1024);
    let r = m.read(&q).await.unwrap();
    assert_eq!(r.source_ids().next(), Some("r:2"));
}

#[tokio::test]
async fn duplicates_and_invalid_events_store_nothing() {
    let m = m2();
    let a = ns("a");
    assert!(matches!(
        m.write(&a, &[said("1", "alpha"), said("1", "beta")]).await,
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        m.write(&a, &[said("2", "alpha"), said("", "beta")]).await,
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(m.footprint().stored_tokens, 0);
    m.write(&a, &[said("1", "alpha")]).await.unwrap();
    assert!(matches!(
        m.write(&a, &[said("3", "gamma"), said("1", "alpha")]).await,
        Err(Error::InvalidInput(_))
    ));
    let r = m.read(&Query::question(a, "gamma", 512)).await.unwrap();
    assert!(r.sources.is_empty());
}

async fn ids(m: &SparseMemory, ns_name: &str, q: &str) -> Vec<String> {
    m.read(&Query::question(ns(ns_name), q, 4096))
        .await
        .unwrap()
        .source_ids()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn restored_index_is_mmapped_then_moves_to_ram_on_change() {
    let m = m2();
    m.write(&ns("a"), &corpus()).await.unwrap();
    m.write(&ns("b"), &[said("b1", "cat in b")]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(dir.path().join("index").join("meta.json").exists());
    let fp = m.footprint();
    assert!(fp.disk_bytes > 0);

    let r = m2();
    r.restore(dir.path()).await.unwrap();
    assert_eq!(
        ids(&r, "a", "cat bird").await,
        ids(&m, "a", "cat bird").await
    );
    assert_eq!(ids(&r, "b", "cat").await, vec!["b1"]);
    let before = std::fs::read_dir(dir.path().join("index")).unwrap().count();

    // Changing the restored instance leaves the persisted store as it was.
    r.write(&ns("a"), &[said("d4", "cat cat cat cat")])
        .await
        .unwrap();
    r.forget(&Forget::Sources {
        namespace: ns("a"),
        source_ids: vec!["d1".into()],
    })
    .await
    .unwrap();
    assert_eq!(ids(&r, "a", "cat").await, vec!["d4", "d0"]);
    assert_eq!(
        std::fs::read_dir(dir.path().join("index")).unwrap().count(),
        before
    );
    let again = m2();
    again.restore(dir.path()).await.unwrap();
    assert_eq!(ids(&again, "a", "cat").await, vec!["d0", "d1"]);

    // Persisting a restored, unchanged instance into its own directory works.
    again.persist(dir.path()).await.unwrap();
    let third = m2();
    third.restore(dir.path()).await.unwrap();
    assert_eq!(ids(&third, "a", "cat").await, vec!["d0", "d1"]);
    // And a changed one can be persisted over it.
    r.persist(dir.path()).await.unwrap();
    let fourth = m2();
    fourth.restore(dir.path()).await.unwrap();
    assert_eq!(ids(&fourth, "a", "cat").await, vec!["d4", "d0"]);
}

#[tokio::test]
async fn a_store_built_with_other_stop_words_is_reindexed_on_restore() {
    use submem_kit::text::StopWords;
    let with = |list| {
        SparseMemory::new(
            test_services(None),
            SparseConfig::default().with_stop_words(list),
        )
        .unwrap()
    };
    let lucene = with(StopWords::Lucene);
    lucene
        .write(
            &ns("a"),
            &[said("q1", "when did you go"), said("q2", "hiking trip")],
        )
        .await
        .unwrap();
    // Lucene's list keeps "when", "did", "you": they match q1.
    assert_eq!(ids(&lucene, "a", "when did you hike").await, vec!["q1"]);
    let dir = tempfile::tempdir().unwrap();
    lucene.persist(dir.path()).await.unwrap();

    let english = with(StopWords::English);
    english.restore(dir.path()).await.unwrap();
    assert!(ids(&english, "a", "when did you go").await == vec!["q1"]);
    assert!(ids(&english, "a", "when did you").await.is_empty());
    assert_eq!(ids(&english, "a", "hiking").await, vec!["q2"]);
    // Written back, the store records its list and restores as it was.
    english.persist(dir.path()).await.unwrap();
    let again = with(StopWords::English);
    again.restore(dir.path()).await.unwrap();
    assert!(ids(&again, "a", "when did you").await.is_empty());
}

#[tokio::test]
async fn torn_and_foreign_stores_are_refused_and_state_is_kept() {
    let m = m2();
    m.write(&ns("a"), &corpus()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let live = m2();
    live.write(&ns("a"), &[said("z", "zebra cat")])
        .await
        .unwrap();
    let check_kept = || async { assert_eq!(ids(&live, "a", "cat").await, vec!["z"]) };

    // Side map lists a unit the index lacks.
    let state = dir.path().join("sparse.json");
    let original = std::fs::read_to_string(&state).unwrap();
    let extra = original.replacen(
        "\"units\":[",
        "\"units\":[{\"source_id\":\"ghost\",\"text\":\"x: ghost\",\"position\":99,\"tokens\":2},",
        1,
    );
    std::fs::write(&state, extra).unwrap();
    let err = live.restore(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::Store { .. }), "{err}");
    check_kept().await;

    std::fs::write(&state, "not json").unwrap();
    assert!(matches!(
        live.restore(dir.path()).await,
        Err(Error::Store { .. })
    ));
    std::fs::write(&state, &original).unwrap();

    // Index directory gone, or emptied.
    let index = dir.path().join("index");
    let moved = dir.path().join("moved");
    std::fs::rename(&index, &moved).unwrap();
    assert!(matches!(
        live.restore(dir.path()).await,
        Err(Error::Store { .. })
    ));
    std::fs::create_dir(&index).unwrap();
    assert!(matches!(
        live.restore(dir.path()).await,
        Err(Error::Store { .. })
    ));
    check_kept().await;
    std::fs::remove_dir(&index).unwrap();
    std::fs::rename(&moved, &index).unwrap();

    // A store written by another substrate.
    let kv_like = tempfile::tempdir().unwrap();
    submem_kit::persist::write_manifest(kv_like.path(), "M10 full-context", 1).unwrap();
    let err = live.restore(kv_like.path()).await.unwrap_err();
    assert!(err.to_string().contains("M10"), "{err}");
    check_kept().await;

    // The repaired store restores.
    live.restore(dir.path()).await.unwrap();
    assert_eq!(ids(&live, "a", "cat").await, vec!["d0", "d1"]);
}

#[tokio::test]
async fn forgetting_a_namespace_keeps_the_others() {
    let m = m2();
    m.write(&ns("a"), &corpus()).await.unwrap();
    m.write(&ns("b"), &corpus()).await.unwrap();
    assert_eq!(m.forget(&Forget::Namespace(ns("a"))).await.unwrap(), 4);
    assert!(ids(&m, "a", "cat").await.is_empty());
    assert_eq!(ids(&m, "b", "cat").await, vec!["d0", "d1"]);
    // Source ids can be written again once forgotten.
    m.write(&ns("a"), &[said("d0", "cat")]).await.unwrap();
    assert_eq!(ids(&m, "a", "cat").await, vec!["d0"]);
    assert_eq!(m.forget(&Forget::Namespace(ns("zzz"))).await.unwrap(), 0);
}

#[tokio::test]
async fn footprint_counts_index_text_and_tokens() {
    let m = m2();
    m.write(&ns("a"), &corpus()).await.unwrap();
    let fp = m.footprint();
    // Whitespace tokens of the rendered turns: 4 + 3 + 7 + 2.
    assert_eq!(fp.stored_tokens, 16);
    assert_eq!(fp.input_tokens, 16);
    assert!(fp.memory_bytes > 0);
    assert_eq!(fp.disk_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_readers_share_one_instance() {
    let m: Arc<dyn Substrate> = Arc::new(m2());
    let mut tasks = Vec::new();
    for w in 0..4 {
        let m = m.clone();
        tasks.push(tokio::spawn(async move {
            let name = ns(&format!("w{}", w % 2));
            for i in 0..25 {
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
        .read(&Query::question(ns("w0"), "apple", 1 << 20).with_top_k(1000))
        .await
        .unwrap();
    assert_eq!(r.sources.len(), 50);
    assert!(r
        .source_ids()
        .all(|id| id.starts_with("0-") || id.starts_with("2-")));
}

// ---- restore in a new process -------------------------------------------

const CHILD_ENV: &str = "SUBMEM_M2_RESTORE_CHILD_DIR";
const CHILD_MARK: &str = "SUBMEM-CHILD-RECALL:";

fn process_query() -> Query {
    Query::question(ns("proc"), "bird cat swim", 64).with_top_k(3)
}

/// Runs only as the child of `restore_in_a_new_process_gives_the_same_recall`.
#[tokio::test]
async fn child_process_restores_and_reads() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let m = m2();
    m.restore(Path::new(&dir)).await.unwrap();
    let r = m.read(&process_query()).await.unwrap();
    println!("{CHILD_MARK}{}", serde_json::to_string(&r).unwrap());
}

#[tokio::test]
async fn restore_in_a_new_process_gives_the_same_recall() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let m = m2();
    let mut events = corpus();
    events.extend((0..40).map(|i| said(&format!("e{i}"), &format!("filler {i} cat"))));
    m.write(&ns("proc"), &events).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let expected = serde_json::to_string(&m.read(&process_query()).await.unwrap()).unwrap();

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
