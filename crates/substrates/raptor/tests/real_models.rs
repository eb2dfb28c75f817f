#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M6 with the real models on a tiny input: SmolLM2-135M writes the
//! summaries (unusable replies fall back to the extractive rule), MiniLM
//! embeds, tiktoken o200k counts. Skipped (with a message) when the models
//! cannot be resolved.

use std::time::Instant;
use submem_core::testing::{fixture_conversation, MARKER_A};
use submem_core::{Namespace, Query, Services, Substrate};
use submem_raptor::{Raptor, RaptorConfig};

fn services() -> Option<Services> {
    submem_models::Config::load(None)
        .and_then(|cfg| cfg.local_services())
        .map_err(|e| eprintln!("skipping: {e}"))
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_models_build_a_tree_and_read_within_budget() {
    let Some(services) = services() else {
        eprintln!("real models unavailable; test skipped");
        return;
    };
    let counter = services.tokens.clone();
    let m = Raptor::new(
        services,
        RaptorConfig::default()
            .with_leaf_tokens(30)
            .with_min_layer_nodes(4)
            .with_reduce_dims(3)
            .with_summary_tokens(60),
    )
    .unwrap();
    let ns = Namespace::new("real").unwrap();
    let t = Instant::now();
    m.write(&ns, &fixture_conversation("a", MARKER_A, 24))
        .await
        .unwrap();
    m.manage().await.unwrap();
    let s = m.stats();
    eprintln!(
        "levels {:?}, {s:?}, {:.1} s",
        m.levels(&ns).await,
        t.elapsed().as_secs_f64()
    );
    assert!(s.llm_summaries + s.rule_summaries >= 1, "{s:?}");
    for b in [128, 512, 4096] {
        let q = Query::question(ns.clone(), "What is the name of my violin teacher?", b)
            .with_fixed_prompt_tokens(30);
        let r = m.read(&q).await.unwrap();
        assert!(r.tokens <= q.allowance());
        assert_eq!(counter.count(&r.text), r.tokens);
        if b == 4096 {
            assert!(r.text.contains(MARKER_A), "{}", r.text);
        }
    }
}
