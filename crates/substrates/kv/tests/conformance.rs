#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`, on a
//! multi-thread runtime, for M10 (full context) and M11 (EpiCache). M11 runs
//! with a prefix-caching LLM double so that its cached read path is
//! exercised too, and twice:
//!
//! - with every default setting, where the "finds what was written" check is
//!   off: M11 keeps only the most central quarter of each episode by design,
//!   and the fixture's planted fact is the least central turn of its episode,
//!   so showing it is not part of M11's contract (budgets, exact counts,
//!   namespaces, persistence, refusals and forgetting are all still checked);
//! - with `keep_ratio = 1.0`, where clustering and episode matching must find
//!   the planted fact.

use std::sync::Arc;

use submem_core::test_utils::{test_services, CachingLlm};
use submem_core::testing::{run_conformance_on, ConformanceOptions};
use submem_core::Llm;
use submem_kv::{EpiCache, EpiCacheConfig, FullContext, FullContextConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_context_passes_conformance() {
    run_conformance_on(
        test_services(None),
        |s| Box::new(FullContext::new(s, FullContextConfig::default()).unwrap()),
        ConformanceOptions::default(),
    )
    .await;
}

async fn epicache(config: EpiCacheConfig, opts: ConformanceOptions) {
    let llm: Arc<dyn Llm> = Arc::new(CachingLlm::from_fn(|_| Ok("ok".into())));
    run_conformance_on(
        test_services(Some(llm)),
        |s| Box::new(EpiCache::new(s, config.clone()).unwrap()),
        opts,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epicache_defaults_pass_conformance() {
    epicache(
        EpiCacheConfig::default(),
        ConformanceOptions {
            finds_written: false,
            ..ConformanceOptions::default()
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epicache_keeping_everything_finds_what_was_written() {
    epicache(
        EpiCacheConfig::default().with_keep_ratio(1.0),
        ConformanceOptions::default(),
    )
    .await;
}
