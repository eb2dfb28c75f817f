#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: M7 with the rule
//! writer (no LLM). Conversational fixtures are read as one episode per
//! session (see `submem_refine::journal`).

use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_refine::{StrategyBank, StrategyConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m7_passes_conformance() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(StrategyBank::new(services.clone(), StrategyConfig::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
