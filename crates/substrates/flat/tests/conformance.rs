#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`, once per
//! substrate of the family: M1 on its defaults (exact scan at this size) and
//! with the HNSW path forced (threshold 1, so the graph, its tombstone filter
//! and its rebuild on restore are exercised), M2, and the hybrid (RRF of M1
//! and M2). Each run has scratch directories of its own, so the four share
//! this binary and run side by side.

use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance_on, ConformanceOptions};
use submem_core::{Services, Substrate};
use submem_flat::{
    DenseConfig, DenseMemory, HybridConfig, HybridMemory, SparseConfig, SparseMemory,
};

async fn passes(make: impl Fn(Services) -> Box<dyn Substrate>) {
    run_conformance_on(test_services(None), make, ConformanceOptions::default()).await;
}

#[tokio::test]
async fn dense_passes_conformance() {
    passes(|s| Box::new(DenseMemory::new(s, DenseConfig::default()).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_graph_passes_conformance() {
    passes(|s| {
        let config = DenseConfig::default().with_exact_threshold(1);
        Box::new(DenseMemory::new(s, config).unwrap())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparse_passes_conformance() {
    passes(|s| Box::new(SparseMemory::new(s, SparseConfig::default()).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_passes_conformance() {
    passes(|s| Box::new(HybridMemory::new(s, HybridConfig::default()).unwrap())).await;
}
