#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M3 with the real models: SmolLM2-135M writes the gists and chooses the
//! pages, tiktoken o200k counts. Skipped (with a message) when the models
//! cannot be resolved. Tiny input: two pages, three LLM calls.

use std::time::Instant;
use submem_core::testing::{fixture_conversation, MARKER_A};
use submem_core::{Namespace, Query, Services, Substrate};
use submem_gist::{GistConfig, GistIndex};

fn services() -> Option<Services> {
    submem_models::Config::load(None)
        .and_then(|cfg| cfg.local_services())
        .map_err(|e| eprintln!("skipping: {e}"))
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_models_gist_select_and_fit() {
    let Some(services) = services() else {
        eprintln!("real models unavailable; test skipped");
        return;
    };
    let counter = services.tokens.clone();
    let m = GistIndex::new(services, GistConfig::default()).unwrap();
    let ns = Namespace::new("real").unwrap();
    let t = Instant::now();
    let report = m
        .write(&ns, &fixture_conversation("a", MARKER_A, 24))
        .await
        .unwrap();
    let write_s = t.elapsed().as_secs_f64();
    assert_eq!(report.units, 2, "one page per session");
    for g in m.gists(&ns) {
        assert!(!g.is_empty() && g.split_whitespace().count() <= 40, "{g}");
    }
    let q = Query::question(ns.clone(), "What is the name of my violin teacher?", 4096)
        .with_fixed_prompt_tokens(30);
    let t = Instant::now();
    let r = m.read_detailed(&q).await.unwrap();
    let read_s = t.elapsed().as_secs_f64();
    eprintln!(
        "write {write_s:.1}s, read {read_s:.1}s, {:?}, gists {:?}, stats {:?}",
        r.selection,
        m.gists(&ns),
        m.stats()
    );
    assert!(r.recall.tokens <= q.allowance());
    assert_eq!(counter.count(&r.recall.text), r.recall.tokens);
    // Whatever the model names, the 4k budget holds both pages: the marker
    // is shown, expanded (LLM or BM25 choice).
    assert!(!r.expanded.is_empty());
    let s = m.stats();
    assert_eq!(s.llm_gists + s.gist_fallbacks, 2);
    assert_eq!(s.llm_selections + s.selection_fallbacks, 1);
}
