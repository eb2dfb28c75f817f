#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: M1 on its default settings (exact scan at this size).
//! (One run per test binary: the suite's scratch directories are named by
//! process id and substrate name.)

use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_flat::{DenseConfig, DenseMemory};

#[tokio::test]
async fn passes_conformance() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(DenseMemory::new(services.clone(), DenseConfig::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
