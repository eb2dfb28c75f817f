#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Behaviour of M10: oldest-first truncation, namespaces, duplicates,
//! forgetting, torn stores, concurrency and a restore in a new process.

use std::path::Path;
use std::sync::Arc;
use submem_core::test_utils::test_services;
use submem_core::{Error, Event, Forget, Namespace, Query, Substrate, Turn};
use submem_kv::{FullContext, FullContextConfig};

fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

fn turn(id: usize, words: usize) -> Event {
    Event::Turn(Turn {
        session_id: "s1".into(),
        session_date: None,
        speaker: "A".into(),
        text: format!("turn{id} {}", vec!["w"; words.saturating_sub(1)].join(" ")),
        source_id: format!("t{id}"),
    })
}

fn m10() -> FullContext {
    FullContext::new(test_services(None), FullContextConfig::default()).unwrap()
}

#[tokio::test]
async fn drops_oldest_units_first_and_keeps_time_order() {
    let m = m10();
    let a = ns("a");
    // Each turn renders as "A: turnN w w w" = 5 whitespace tokens.
    let events: Vec<Event> = (0..20).map(|i| turn(i, 4)).collect();
    m.write(&a, &events).await.unwrap();
    // Budget 64 → allowance 60 → 12 units of 5 tokens.
    let r = m.read(&Query::question(a.clone(), "q", 64)).await.unwrap();
    assert_eq!(r.tokens, 60);
    let ids: Vec<&str> = r.source_ids().collect();
    assert_eq!(ids.len(), 12);
    assert_eq!(ids[0], "t19", "sources list the newest first");
    assert_eq!(ids[11], "t8");
    assert!(r.text.starts_with("A: turn8 "));
    assert!(r.text.ends_with("turn19 w w w"));
    // With room to spare the whole history is shown.
    let all = m
        .read(&Query::question(a.clone(), "q", 4096))
        .await
        .unwrap();
    assert_eq!(all.sources.len(), 20);
    assert!(all.text.starts_with("A: turn0 "));
}

#[tokio::test]
async fn an_oversized_newest_unit_shows_nothing_rather_than_skipping() {
    let m = m10();
    let a = ns("a");
    m.write(&a, &[turn(0, 3), turn(1, 500)]).await.unwrap();
    let r = m.read(&Query::question(a, "q", 256)).await.unwrap();
    // Skipping the newest to show an older one would break the contiguous run.
    assert!(r.sources.is_empty());
    assert_eq!(r.tokens, 0);
}

#[tokio::test]
async fn duplicates_are_refused_and_nothing_is_stored() {
    let m = m10();
    let a = ns("a");
    let err = m.write(&a, &[turn(0, 3), turn(0, 3)]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)));
    assert_eq!(m.footprint().stored_tokens, 0);
    m.write(&a, &[turn(1, 3)]).await.unwrap();
    let err = m.write(&a, &[turn(2, 3), turn(1, 3)]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)));
    let r = m
        .read(&Query::question(a.clone(), "q", 4096))
        .await
        .unwrap();
    assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["t1"]);
    // The same id in another namespace is fine.
    m.write(&ns("b"), &[turn(1, 3)]).await.unwrap();
}

#[tokio::test]
async fn namespaces_are_isolated_and_forgetting_is_scoped() {
    let m = m10();
    m.write(&ns("a"), &[turn(0, 3), turn(1, 3)]).await.unwrap();
    m.write(&ns("b"), &[turn(2, 3)]).await.unwrap();
    let rb = m.read(&Query::question(ns("b"), "q", 4096)).await.unwrap();
    assert_eq!(rb.source_ids().collect::<Vec<_>>(), vec!["t2"]);
    let n = m
        .forget(&Forget::Sources {
            namespace: ns("b"),
            source_ids: vec!["t0".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 0, "forgetting in b must not touch a");
    assert_eq!(m.forget(&Forget::Namespace(ns("a"))).await.unwrap(), 2);
    assert!(m
        .read(&Query::question(ns("a"), "q", 4096))
        .await
        .unwrap()
        .sources
        .is_empty());
    assert_eq!(m.footprint().stored_tokens, 4);
}

#[tokio::test]
async fn footprint_counts_tokens_memory_and_disk() {
    let m = m10();
    m.write(&ns("a"), &(0..10).map(|i| turn(i, 4)).collect::<Vec<_>>())
        .await
        .unwrap();
    let fp = m.footprint();
    assert_eq!(fp.stored_tokens, 50);
    assert_eq!(fp.input_tokens, 50);
    assert!(fp.memory_bytes > 0);
    assert_eq!(fp.disk_bytes, 0);
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);
}

#[tokio::test]
async fn torn_or_corrupt_stores_are_refused_and_state_is_kept() {
    let m = m10();
    let a = ns("a");
    m.write(&a, &[turn(0, 3)]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();

    let other = m10();
    other.write(&a, &[turn(9, 3)]).await.unwrap();
    // Corrupt the state file: refused with a store error, memory unchanged.
    let state = dir.path().join("full-context.json");
    std::fs::write(&state, b"{ torn").unwrap();
    let err = other.restore(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::Store { .. }), "{err}");
    // A manifest with a missing state file.
    std::fs::remove_file(&state).unwrap();
    let err = other.restore(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::Store { .. }), "{err}");
    let r = other.read(&Query::question(a, "q", 4096)).await.unwrap();
    assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["t9"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_readers_share_one_instance() {
    let m: Arc<dyn Substrate> = Arc::new(m10());
    let mut tasks = Vec::new();
    for w in 0..4 {
        let m = m.clone();
        tasks.push(tokio::spawn(async move {
            let a = ns("shared");
            for i in 0..50 {
                m.write(&a, &[turn(w * 1000 + i, 3)]).await.unwrap();
                let r = m.read(&Query::question(a.clone(), "q", 512)).await.unwrap();
                assert!(r.tokens <= Query::question(a.clone(), "q", 512).allowance());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let r = m
        .read(&Query::question(ns("shared"), "q", 1 << 20))
        .await
        .unwrap();
    assert_eq!(r.sources.len(), 200);
}

#[tokio::test]
async fn recall_tokens_are_exact_for_the_counter() {
    let services = test_services(None);
    let m = FullContext::new(services.clone(), FullContextConfig::default()).unwrap();
    let a = ns("a");
    m.write(&a, &(0..30).map(|i| turn(i, 1 + i % 7)).collect::<Vec<_>>())
        .await
        .unwrap();
    for budget in [64, 65, 77, 100, 128, 300] {
        let q = Query::question(a.clone(), "q", budget).with_fixed_prompt_tokens(7);
        let r = m.read(&q).await.unwrap();
        assert!(r.tokens <= q.allowance());
        assert_eq!(services.tokens.count(&r.text), r.tokens);
    }
}

// ---- restore in a new process -------------------------------------------

const CHILD_ENV: &str = "SUBMEM_KV_RESTORE_CHILD_DIR";
const CHILD_MARK: &str = "SUBMEM-CHILD-RECALL:";

fn process_query() -> Query {
    Query::question(ns("proc"), "what happened", 200).with_fixed_prompt_tokens(10)
}

/// Runs only as the child of `restore_in_a_new_process_gives_the_same_recall`.
#[tokio::test]
async fn child_process_restores_and_reads() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let m = m10();
    m.restore(Path::new(&dir)).await.unwrap();
    let r = m.read(&process_query()).await.unwrap();
    println!("{CHILD_MARK}{}", serde_json::to_string(&r).unwrap());
}

#[tokio::test]
async fn restore_in_a_new_process_gives_the_same_recall() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let m = m10();
    m.write(
        &ns("proc"),
        &(0..80).map(|i| turn(i, 5)).collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    m.write(&ns("other"), &[turn(1000, 5)]).await.unwrap();
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
