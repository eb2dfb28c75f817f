#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The routed substrate over real members (M2 BM25 and M10 full context) with
//! test-double services: the conformance suite, and routing by history depth.

use std::sync::Arc;

use submem_core::test_utils::test_services;
use submem_core::testing::{fixture_conversation, run_conformance, ConformanceOptions};
use submem_core::{Event, MethodId, Namespace, Query, Substrate, Turn};
use submem_flat::{SparseConfig, SparseMemory};
use submem_kv::{FullContext, FullContextConfig};
use submem_router::{Depth, RoutedSubstrate, RoutingPolicy};

fn routed() -> RoutedSubstrate {
    let services = test_services(None);
    let members: Vec<Arc<dyn Substrate>> = vec![
        Arc::new(SparseMemory::new(services.clone(), SparseConfig::default()).unwrap()),
        Arc::new(FullContext::new(services.clone(), FullContextConfig::default()).unwrap()),
    ];
    RoutedSubstrate::new(members, RoutingPolicy::default(), services.tokens).unwrap()
}

#[tokio::test]
async fn routed_substrate_passes_the_conformance_suite() {
    let tokens = test_services(None).tokens;
    run_conformance(|| Box::new(routed()), tokens, ConformanceOptions::default()).await;
}

fn long_turn(i: usize) -> Event {
    Event::Turn(Turn {
        session_id: "s1".into(),
        session_date: None,
        speaker: "Ana".into(),
        text: format!(
            "filler sentence number {i} about gardens and rivers and small boats on the lake"
        ),
        source_id: format!("D1:{i}"),
    })
}

#[tokio::test]
async fn reads_move_from_full_context_to_retrieval_as_history_grows() {
    let r = routed();
    let ns = Namespace::new("depth").unwrap();
    r.write(&ns, &fixture_conversation("x", "zanzibarite", 6))
        .await
        .unwrap();
    let q = Query::question(ns.clone(), "Who is my violin teacher?", 4096);
    let d = r.decide(&q).unwrap();
    assert_eq!((d.method, d.depth), (MethodId::M10, Depth::Fits));

    let filler: Vec<Event> = (0..400).map(long_turn).collect();
    r.write(&ns, &filler).await.unwrap();
    let d = r.decide(&q).unwrap();
    assert_eq!(d.depth, Depth::Moderate);
    assert_eq!(
        d.method,
        MethodId::M2,
        "tight budget, no FlexA-Mem member: BM25"
    );

    // The routed read answers from BM25, which finds the planted fact that full
    // context (dropping oldest first) would have cut.
    let recall = r
        .read(&q.clone().with_fixed_prompt_tokens(0))
        .await
        .unwrap();
    assert!(recall.text.contains("zanzibarite"), "{}", recall.text);
    let tight = Query::question(ns, "Who is my violin teacher?", 256);
    let recall = r.read(&tight).await.unwrap();
    assert!(recall.tokens <= tight.allowance());
}

#[test]
fn refuses_duplicate_and_empty_members() {
    let services = test_services(None);
    assert!(
        RoutedSubstrate::new(vec![], RoutingPolicy::default(), services.tokens.clone()).is_err()
    );
    let a: Arc<dyn Substrate> =
        Arc::new(FullContext::new(services.clone(), FullContextConfig::default()).unwrap());
    let b: Arc<dyn Substrate> =
        Arc::new(FullContext::new(services.clone(), FullContextConfig::default()).unwrap());
    let err =
        RoutedSubstrate::new(vec![a, b], RoutingPolicy::default(), services.tokens).unwrap_err();
    assert!(err.to_string().contains("M10"), "{err}");
}
