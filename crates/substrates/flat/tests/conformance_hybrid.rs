#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: the hybrid (RRF of M1 and M2) on a multi-thread runtime.
//! (One run per test binary: the suite's scratch directories are named by
//! process id and substrate name.)

use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_flat::{HybridConfig, HybridMemory};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_conformance() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(HybridMemory::new(services.clone(), HybridConfig::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
