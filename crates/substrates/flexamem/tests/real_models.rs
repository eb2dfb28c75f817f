#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! FlexA-Mem with the real models: SmolLM2-135M writes the records (its JSON
//! is repaired or replaced by the rule writer), MiniLM embeds, tiktoken
//! o200k counts. Skipped (with a message) when the models cannot be resolved.

use std::time::Instant;
use submem_core::testing::{fixture_conversation, fixture_trajectory, MARKER_A};
use submem_core::{Namespace, Query, Services, Substrate};
use submem_flexamem::{FlexaConfig, FlexaMem};

fn services() -> Option<Services> {
    submem_models::Config::load(None)
        .and_then(|cfg| cfg.local_services())
        .map_err(|e| eprintln!("skipping: {e}"))
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_models_write_and_render_within_budget() {
    let Some(services) = services() else {
        eprintln!("real models unavailable; test skipped");
        return;
    };
    let counter = services.tokens.clone();
    let m = FlexaMem::new(
        services,
        FlexaConfig::default().with_conversation_unit_tokens(250),
    )
    .unwrap();
    let conv = Namespace::new("real-conv").unwrap();
    let agent = Namespace::new("real-agent").unwrap();
    let t = Instant::now();
    m.write(&conv, &fixture_conversation("a", MARKER_A, 24))
        .await
        .unwrap();
    m.write(&agent, &fixture_trajectory("t", MARKER_A))
        .await
        .unwrap();
    m.manage().await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    let s = m.stats();
    let units = (m.raw_units(&conv).len() + m.raw_units(&agent).len()) as u64;
    eprintln!(
        "units {units}, write+manage {secs:.1}s ({:.1}s/unit), stats {s:?}",
        secs / units as f64
    );
    assert_eq!(s.llm_records + s.rule_fallbacks, units);
    for b in [128, 256, 512, 1024, 4096] {
        for q in [
            Query::question(conv.clone(), "What is the name of my violin teacher?", b)
                .with_fixed_prompt_tokens(30),
            Query::agentic(
                agent.clone(),
                "Put the key in the fridge.",
                "The fridge 1 is closed.",
                b,
            ),
        ] {
            let r = m.render_detailed(&q).await.unwrap();
            assert!(
                r.recall.tokens <= q.allowance(),
                "{} > {}",
                r.recall.tokens,
                q.allowance()
            );
            assert_eq!(counter.count(&r.recall.text), r.recall.tokens);
        }
    }
    let r = m
        .read(&Query::question(
            conv.clone(),
            "What is the name of my violin teacher?",
            256,
        ))
        .await
        .unwrap();
    eprintln!("256-token recall:\n{}", r.text);
    assert!(
        r.text.contains(MARKER_A),
        "piece recovery finds the named fact at 256 tokens"
    );
}
