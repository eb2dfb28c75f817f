#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`, in rule mode
//! (no LLM) and with a scripted LLM writing gists and choosing pages.

mod common;

use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_gist::{GistConfig, GistIndex};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_mode_passes_conformance() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(GistIndex::new(services.clone(), GistConfig::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_mode_passes_conformance() {
    let services = test_services(Some(common::smart_llm()));
    let tokens = services.tokens.clone();
    // Small pages so that the fixture spans several pages and selection matters.
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(
                GistIndex::new(
                    services.clone(),
                    GistConfig::default()
                        .with_page_tokens(60)
                        .with_tiny_session_tokens(20),
                )
                .unwrap(),
            )
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
