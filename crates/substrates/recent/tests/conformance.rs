#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: the recency
//! window built directly on its defaults, and built by its factory from
//! `key=value` settings as a registry builds it.

use submem_core::plugin::BuildContext;
use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_recent::{recent_factory, RecentSettings, RecentWindow};

#[tokio::test]
async fn passes_conformance() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(RecentWindow::new(services.tokens.clone(), RecentSettings::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

/// Through the factory, with a cap that still shows the whole 24-turn
/// fixture (the planted fact is its fourth turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_conformance_built_by_its_factory() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    let factory = recent_factory();
    let settings = factory
        .settings_from_pairs(&[("max_events".into(), "32".into())])
        .unwrap();
    factory.check(&settings).unwrap();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(
                factory
                    .build(&BuildContext::new(services.clone()), &settings)
                    .unwrap(),
            )
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
