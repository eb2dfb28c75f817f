#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`, for M7 and M8
//! with the rule writer (no LLM). M7 reads conversational fixtures as one
//! episode per session (see `submem_refine::journal`).

use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance_on, ConformanceOptions};
use submem_core::{Services, Substrate};
use submem_refine::{SkillBundles, SkillConfig, StrategyBank, StrategyConfig};

async fn passes(make: impl Fn(Services) -> Box<dyn Substrate>) {
    run_conformance_on(test_services(None), make, ConformanceOptions::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m7_passes_conformance() {
    passes(|s| Box::new(StrategyBank::new(s, StrategyConfig::default()).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m8_passes_conformance() {
    passes(|s| Box::new(SkillBundles::new(s, SkillConfig::default()).unwrap())).await;
}
