#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: with the
//! default settings and no LLM (extractive summaries), and with small leaves
//! and an echoing LLM so that the suite's fixture is summarised into a tree
//! (its forget check then also covers summaries holding the forgotten fact).

mod common;

use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_raptor::{Raptor, RaptorConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m6_passes_conformance_without_llm() {
    let services = common::services_with(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(Raptor::new(services.clone(), RaptorConfig::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m6_passes_conformance_with_a_summarised_tree() {
    let services = common::services_with(Some(common::echo_llm()));
    let tokens = services.tokens.clone();
    let cfg = RaptorConfig::default()
        .with_leaf_tokens(12)
        .with_min_layer_nodes(3)
        .with_reduce_dims(3);
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(Raptor::new(services.clone(), cfg.clone()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
