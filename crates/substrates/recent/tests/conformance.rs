#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: the recency
//! window built directly on its defaults, and built by its factory from
//! `key=value` settings as a registry builds it.

use submem_core::test_utils::test_services;
use submem_core::testing::{factory_conformance, run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_recent::{recent_factory, recent_window, RecentSettings};

#[tokio::test]
async fn passes_conformance() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(recent_window(services.tokens.clone(), RecentSettings::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

/// Through the factory, from `key=value` settings as a registry builds it,
/// with a cap that still shows the whole 24-turn fixture (the planted fact
/// is its fourth turn): a plugin's conformance test is this one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_conformance_built_by_its_factory() {
    factory_conformance(&recent_factory(), &[("max_events", "32")]).await;
}
