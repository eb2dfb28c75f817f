#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: M8 with the rule
//! writer (no LLM).

use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_refine::{SkillBundles, SkillConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m8_passes_conformance() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(SkillBundles::new(services.clone(), SkillConfig::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
