#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`, on the tiny
//! random model. M9 answers from weights, so `finds_written` is off.

mod common;

use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_lora::LoraMemory;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lora_passes_conformance() {
    let services = common::services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(
                LoraMemory::new(services.clone(), common::fast_config(), common::tiny()).unwrap(),
            )
        },
        tokens,
        ConformanceOptions {
            finds_written: false,
            ..ConformanceOptions::default()
        },
    )
    .await;
}
