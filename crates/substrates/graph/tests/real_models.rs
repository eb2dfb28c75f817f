#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M5 with the real models: SmolLM2-135M extracts entities and relations
//! (tuple lines, grounded; rules when it yields nothing) and query keywords,
//! MiniLM embeds, tiktoken o200k counts. Skipped (with a message) when the
//! models cannot be resolved.

use std::time::Instant;
use submem_core::testing::{fixture_conversation, MARKER_A};
use submem_core::{Namespace, Query, Services, Substrate};
use submem_graph::{GraphConfig, GraphMemory};

fn services() -> Option<Services> {
    submem_models::Config::load(None)
        .and_then(|cfg| cfg.local_services())
        .map_err(|e| eprintln!("skipping: {e}"))
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_models_extract_and_read_within_budget() {
    let Some(services) = services() else {
        eprintln!("real models unavailable; test skipped");
        return;
    };
    let counter = services.tokens.clone();
    let m = GraphMemory::new(
        services,
        GraphConfig::default()
            .with_chunk_tokens(200)
            .with_extract_max_tokens(160),
    )
    .unwrap();
    let ns = Namespace::new("real").unwrap();
    let t = Instant::now();
    let report = m
        .write(&ns, &fixture_conversation("a", MARKER_A, 12))
        .await
        .unwrap();
    m.manage().await.unwrap();
    let stats = m.stats();
    eprintln!(
        "{} chunks in {:.1}s; {stats:?}; {:?}",
        report.units,
        t.elapsed().as_secs_f64(),
        m.counts(&ns).await
    );
    assert_eq!(
        (stats.llm_extractions + stats.rule_extractions) as usize,
        report.units
    );
    assert!(m.counts(&ns).await.entities > 0);
    m.check_consistency(&ns).await.unwrap();
    for budget in [128, 1024, 4096] {
        let q = Query::question(ns.clone(), "What is my violin teacher called?", budget)
            .with_fixed_prompt_tokens(30);
        let r = m.read(&q).await.unwrap();
        assert!(r.tokens <= q.allowance());
        assert_eq!(counter.count(&r.text), r.tokens);
        if budget == 4096 {
            assert!(r.text.contains(MARKER_A), "{}", r.text);
        }
    }
    eprintln!("{:?}", m.stats());
}
