#![allow(clippy::unwrap_used, clippy::expect_used)]
//! M3 behaviour with deterministic doubles: pages and gist calls, LLM page
//! selection and its fallback, budget fitting, forgetting (also inside
//! gists), dedup, rule mode, and a restore in a new process.

mod common;

use common::{conversation, is_selection, ns, smart_llm};
use std::path::Path;
use std::sync::Arc;
use submem_core::test_utils::{test_services, FailingLlm, ScriptedLlm};
use submem_core::{Forget, Query, Resolution, Substrate};
use submem_gist::{GistConfig, GistIndex, Selection};

/// Pages of ~60 whitespace tokens: 5 turns of 10 words (+ date/speaker) each.
fn small_pages() -> GistConfig {
    GistConfig::default()
        .with_page_tokens(60)
        .with_tiny_session_tokens(20)
}

#[tokio::test]
async fn one_gist_call_per_page_cut_at_the_first_sentence() {
    let llm = smart_llm();
    let m = GistIndex::new(test_services(Some(llm.clone())), small_pages()).unwrap();
    let a = ns("a");
    // 3 sessions × 8 turns × ~13 tokens ≈ 104 tokens a session: 2 pages each.
    let report = m
        .write(&a, &conversation("c", 3, 8, 10, None))
        .await
        .unwrap();
    assert_eq!(report.events, 24);
    assert_eq!(report.units, 6);
    assert_eq!(llm.requests().len(), 6, "one call per page");
    let pages = m.pages(&a);
    for p in &pages {
        let sessions: std::collections::HashSet<&str> =
            p.iter().map(|id| id.split(':').nth(1).unwrap()).collect();
        assert_eq!(sessions.len(), 1, "a page spans sessions: {p:?}");
    }
    for g in m.gists(&a) {
        assert!(!g.contains("second sentence"), "gist not cut: {g}");
        assert!(!g.starts_with("Gist:"), "label kept: {g}");
    }
    let s = m.stats();
    assert_eq!((s.llm_gists, s.rule_gists), (6, 0));
}

#[tokio::test]
async fn continuing_a_session_reopens_the_newest_page() {
    let llm = smart_llm();
    let m = GistIndex::new(test_services(Some(llm.clone())), small_pages()).unwrap();
    let a = ns("a");
    let conv = conversation("c", 1, 4, 10, None);
    m.write(&a, &conv[..2]).await.unwrap();
    m.write(&a, &conv[2..]).await.unwrap();
    assert_eq!(m.pages(&a).len(), 1, "{:?}", m.pages(&a));
    assert_eq!(llm.requests().len(), 2, "the reopened page is gisted again");
}

#[tokio::test]
async fn the_llm_names_a_page_that_replaces_its_gist_in_place() {
    let llm = smart_llm();
    let m = GistIndex::new(test_services(Some(llm.clone())), small_pages()).unwrap();
    let a = ns("a");
    let conv = conversation("c", 4, 5, 6, Some((10, "zanzibarite")));
    m.write(&a, &conv).await.unwrap();
    let q = Query::question(a.clone(), "What is the zanzibarite secret word?", 4096);
    let r = m.read_detailed(&q).await.unwrap();
    assert_eq!(r.selection, Selection::Llm);
    assert_eq!(r.expanded, vec![2], "page 3 holds turn 10");
    let text = &r.recall.text;
    assert!(text.contains("I must tell you that zanzibarite"), "{text}");
    // Time order: gist of p1, p2, then p3 expanded, then the gist of p4.
    let p2 = text.find("[p2 ").unwrap();
    let p3 = text.find("[p3 · full text]").unwrap();
    let p4 = text.find("[p4 ").unwrap();
    assert!(p2 < p3 && p3 < p4, "{text}");
    assert_eq!(r.gists.len(), 3);
    // Sources: the turns of the expanded page only, raw.
    let ids: Vec<&str> = r.recall.source_ids().collect();
    assert_eq!(ids, (0..5).map(|t| format!("c:2:{t}")).collect::<Vec<_>>());
    assert!(r
        .recall
        .sources
        .iter()
        .all(|s| s.resolution == Resolution::Raw));
    // The selection prompt numbered every gist.
    let sel = llm.requests().into_iter().find(is_selection).unwrap();
    let prompt = &sel.messages.last().unwrap().content;
    assert!(
        (1..=4).all(|n| prompt.contains(&format!("<Page {n} · "))),
        "{prompt}"
    );
}

#[tokio::test]
async fn unusable_or_failing_selection_falls_back_to_bm25() {
    let a = ns("a");
    let conv = conversation("c", 4, 5, 6, Some((10, "zanzibarite")));
    let q = Query::question(a.clone(), "zanzibarite secret", 4096);
    for llm in [
        Arc::new(ScriptedLlm::from_fn(|r| {
            Ok(if is_selection(r) {
                "The page about the secret."
            } else {
                "Ana talks. More."
            }
            .into())
        })) as Arc<dyn submem_core::Llm>,
        Arc::new(FailingLlm),
    ] {
        let m = GistIndex::new(test_services(Some(llm)), small_pages()).unwrap();
        m.write(&a, &conv).await.unwrap();
        let r = m.read_detailed(&q).await.unwrap();
        assert_eq!(r.selection, Selection::RuleFallback);
        assert_eq!(r.expanded.first(), Some(&2));
        assert!(r.recall.text.contains("zanzibarite"));
        assert_eq!(m.stats().selection_fallbacks, 1);
    }
}

#[tokio::test]
async fn a_failing_llm_at_write_gives_rule_gists() {
    let m = GistIndex::new(test_services(Some(Arc::new(FailingLlm))), small_pages()).unwrap();
    let a = ns("a");
    m.write(&a, &conversation("c", 2, 5, 6, None))
        .await
        .unwrap();
    let s = m.stats();
    assert_eq!((s.llm_gists, s.rule_gists, s.gist_fallbacks), (0, 2, 2));
    assert!(m
        .gists(&a)
        .iter()
        .all(|g| g.starts_with("1 May 2023, Ana and Ben:")
            || g.starts_with("2 May 2023, Ana and Ben:")));
}

#[tokio::test]
async fn rule_mode_says_so_and_selects_by_bm25() {
    let m = GistIndex::new(test_services(None), small_pages()).unwrap();
    let info = m.info();
    assert!(!info.needs_llm);
    assert_eq!(info.name, "gist-index-rule");
    let a = ns("a");
    m.write(&a, &conversation("c", 4, 5, 6, Some((10, "zanzibarite"))))
        .await
        .unwrap();
    let r = m
        .read_detailed(&Query::question(a.clone(), "zanzibarite", 4096))
        .await
        .unwrap();
    assert_eq!(r.selection, Selection::Rule);
    assert_eq!(r.expanded.first(), Some(&2));
    assert_eq!(m.stats().rule_selections, 1);
    let with_llm = GistIndex::new(test_services(Some(smart_llm())), small_pages()).unwrap();
    assert!(with_llm.info().needs_llm);
    assert_eq!(with_llm.info().name, "gist-index");
}

#[tokio::test]
async fn budgets_hold_and_tight_ones_keep_the_most_relevant_gists() {
    let m = GistIndex::new(test_services(Some(smart_llm())), small_pages()).unwrap();
    let a = ns("a");
    m.write(&a, &conversation("c", 10, 5, 6, Some((27, "zanzibarite"))))
        .await
        .unwrap();
    let counter = submem_core::test_utils::WhitespaceCounter;
    for budget in [64, 80, 100, 150, 256, 512, 4096] {
        let q = Query::question(a.clone(), "zanzibarite secret word", budget)
            .with_fixed_prompt_tokens(10);
        let r = m.read_detailed(&q).await.unwrap();
        assert!(
            r.recall.tokens <= q.allowance(),
            "{budget}: {} > {}",
            r.recall.tokens,
            q.allowance()
        );
        assert_eq!(
            submem_core::TokenCounter::count(&counter, &r.recall.text),
            r.recall.tokens
        );
        if budget == 100 {
            // Not every gist fits the allowance of 85: the page holding the
            // secret is shown (expanded or as a gist) and others are left out.
            let n = 1 + m
                .pages(&a)
                .iter()
                .position(|p| p.contains(&"c:5:2".to_string()))
                .unwrap();
            assert!(
                r.recall.text.contains(&format!("[p{n} ")),
                "{}",
                r.recall.text
            );
            assert!(r.expanded.len() + r.gists.len() < 10, "{r:?}");
        }
    }
}

#[tokio::test]
async fn forgetting_removes_the_text_from_pages_and_gists() {
    let llm = smart_llm();
    let m = GistIndex::new(test_services(Some(llm.clone())), small_pages()).unwrap();
    let a = ns("a");
    // Turn 5 opens session 1's first page: the scripted gist quotes it.
    let conv = conversation("c", 3, 5, 6, Some((5, "zanzibarite")));
    m.write(&a, &conv).await.unwrap();
    assert!(m.gists(&a)[1].contains("zanzibarite"), "{:?}", m.gists(&a));
    let n = m
        .forget(&Forget::Sources {
            namespace: a.clone(),
            source_ids: vec!["c:1:0".into(), "nope".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(
        m.gists(&a).iter().all(|g| !g.contains("zanzibarite")),
        "{:?}",
        m.gists(&a)
    );
    let q = Query::question(a.clone(), "zanzibarite secret word", 4096);
    let r = m.read(&q).await.unwrap();
    assert!(!r.text.contains("zanzibarite"), "{}", r.text);
    assert!(r.source_ids().all(|id| id != "c:1:0"));
    // The next manage asks the LLM for the stale gist again (one call).
    let before = llm.requests().len();
    let report = m.manage().await.unwrap();
    assert!(report.changed >= 1);
    assert_eq!(llm.requests().len(), before + 1);
    let after = m.gists(&a);
    assert!(
        after.iter().all(|g| !g.contains("zanzibarite")),
        "{after:?}"
    );
    assert_eq!(
        m.manage().await.unwrap().changed,
        0,
        "nothing stale any more"
    );
    // Forgetting every event of a page removes the page.
    let rest: Vec<String> = (1..5).map(|t| format!("c:1:{t}")).collect();
    m.forget(&Forget::Sources {
        namespace: a.clone(),
        source_ids: rest,
    })
    .await
    .unwrap();
    assert_eq!(m.pages(&a).len(), 2);
    assert_eq!(m.forget(&Forget::Namespace(a.clone())).await.unwrap(), 10);
    assert!(m.pages(&a).is_empty());
}

#[tokio::test]
async fn manage_marks_duplicate_gists_and_renders_them_compactly() {
    // Every gist is the same sentence.
    let llm = Arc::new(ScriptedLlm::from_fn(|r| {
        Ok(if is_selection(r) {
            "1".into()
        } else {
            "Ana and Ben chat about the garden.".into()
        })
    }));
    let m = GistIndex::new(test_services(Some(llm)), small_pages()).unwrap();
    let a = ns("a");
    m.write(&a, &conversation("c", 3, 5, 6, None))
        .await
        .unwrap();
    assert_eq!(m.manage().await.unwrap().changed, 2);
    assert_eq!(m.manage().await.unwrap().changed, 0);
    let r = m
        .read(&Query::question(a.clone(), "garden", 4096))
        .await
        .unwrap();
    assert!(
        r.text.contains("[p2 · 2 May 2023] (same as p1)"),
        "{}",
        r.text
    );
    assert!(
        r.text.contains("[p3 · 3 May 2023] (same as p1)"),
        "{}",
        r.text
    );
    assert_eq!(
        r.text.matches("chat about the garden").count(),
        0,
        "p1 is expanded"
    );
}

#[tokio::test]
async fn footprint_counts_raw_text_and_gists() {
    let m = GistIndex::new(test_services(Some(smart_llm())), small_pages()).unwrap();
    m.write(&ns("a"), &conversation("c", 2, 5, 6, None))
        .await
        .unwrap();
    let fp = m.footprint();
    assert_eq!(fp.input_tokens, 100, "10 turns of 10 whitespace tokens");
    assert!(
        fp.stored_tokens > fp.input_tokens,
        "gists are stored on top of the raw text"
    );
    assert!(fp.memory_bytes > 1000);
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);
}

#[tokio::test]
async fn a_torn_store_is_refused_and_changes_nothing() {
    let m = GistIndex::new(test_services(None), small_pages()).unwrap();
    let a = ns("a");
    m.write(&a, &conversation("c", 2, 5, 6, None))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let state = dir.path().join("gist-index.json");
    let json = std::fs::read_to_string(&state).unwrap();
    // A repeated source id is caught by the restore checks.
    std::fs::write(&state, json.replace("c:0:1", "c:0:0")).unwrap();
    let fresh = GistIndex::new(test_services(None), small_pages()).unwrap();
    let err = fresh.restore(dir.path()).await.unwrap_err();
    assert!(matches!(err, submem_core::Error::Store { .. }), "{err}");
    assert!(fresh.pages(&a).is_empty());
}

// ---- restore in a new process -------------------------------------------

const CHILD_ENV: &str = "SUBMEM_M3_RESTORE_CHILD_DIR";
const CHILD_MARK: &str = "SUBMEM-CHILD-RECALL:";

fn process_query() -> Query {
    Query::question(ns("proc"), "zanzibarite secret word", 512).with_fixed_prompt_tokens(20)
}

/// Runs only as the child of `restore_in_a_new_process_gives_the_same_recall`.
#[tokio::test]
async fn child_process_restores_and_reads() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let m = GistIndex::new(test_services(Some(smart_llm())), small_pages()).unwrap();
    m.restore(Path::new(&dir)).await.unwrap();
    let r = m.read(&process_query()).await.unwrap();
    println!("{CHILD_MARK}{}", serde_json::to_string(&r).unwrap());
}

#[tokio::test]
async fn restore_in_a_new_process_gives_the_same_recall() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let m = GistIndex::new(test_services(Some(smart_llm())), small_pages()).unwrap();
    m.write(
        &ns("proc"),
        &conversation("c", 6, 5, 6, Some((17, "zanzibarite"))),
    )
    .await
    .unwrap();
    m.write(&ns("other"), &conversation("o", 2, 5, 6, None))
        .await
        .unwrap();
    m.manage().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let expected = serde_json::to_string(&m.read(&process_query()).await.unwrap()).unwrap();
    assert!(expected.contains("zanzibarite"));

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
async fn namespaces_are_isolated() {
    let m = GistIndex::new(test_services(Some(smart_llm())), small_pages()).unwrap();
    m.write(
        &ns("a"),
        &conversation("a", 2, 5, 6, Some((3, "zanzibarite"))),
    )
    .await
    .unwrap();
    m.write(
        &ns("b"),
        &conversation("b", 2, 5, 6, Some((3, "quetzalcoatlus"))),
    )
    .await
    .unwrap();
    let r = m
        .read(&Query::question(ns("b"), "zanzibarite secret word", 4096))
        .await
        .unwrap();
    assert!(!r.text.contains("zanzibarite"));
    assert!(r.source_ids().all(|id| id.starts_with("b:")));
    // Writing a's ids into b is fine; into a again is refused.
    assert!(m
        .write(&ns("a"), &conversation("a", 1, 1, 10, None))
        .await
        .is_err());
}
