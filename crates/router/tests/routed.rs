#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The routed substrate over real members (M1 dense, M2 BM25 and M10 full
//! context) with test-double services: the conformance suite, routing by
//! history depth, a fitted policy with its fallback, composition, signals and
//! explanations.

use std::sync::Arc;

use submem_core::test_utils::test_services;
use submem_core::testing::{fixture_conversation, run_conformance, ConformanceOptions};
use submem_core::Regime;
use submem_core::{Event, Namespace, Query, Substrate, Turn};
use submem_flat::{DenseConfig, DenseMemory, SparseConfig, SparseMemory};
use submem_kv::{FullContext, FullContextConfig};
use submem_router::fitted::{Cell, Choice, Compose, Evidence};
use submem_router::paper;
use submem_router::{
    Depth, FitSettings, Origin, PolicyFile, QualityMetric, RoutedSubstrate, RoutingPolicy,
    SignalSettings,
};

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
    assert_eq!((d.method, d.depth), (paper::M10, Depth::Fits));

    let filler: Vec<Event> = (0..400).map(long_turn).collect();
    r.write(&ns, &filler).await.unwrap();
    let d = r.decide(&q).unwrap();
    assert_eq!(d.depth, Depth::Moderate);
    assert_eq!(
        d.method,
        paper::M2,
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

fn with_dense() -> RoutedSubstrate {
    let services = test_services(None);
    let members: Vec<Arc<dyn Substrate>> = vec![
        Arc::new(DenseMemory::new(services.clone(), DenseConfig::default()).unwrap()),
        Arc::new(SparseMemory::new(services.clone(), SparseConfig::default()).unwrap()),
        Arc::new(FullContext::new(services.clone(), FullContextConfig::default()).unwrap()),
    ];
    RoutedSubstrate::new(members, RoutingPolicy::default(), services.tokens).unwrap()
}

/// A policy whose only cell (conversational, moderate, B ≤ 3072) picks
/// `substrate`, optionally composed with `compose`.
fn policy(substrate: &str, compose: Option<(&str, f64)>) -> PolicyFile {
    let p = PolicyFile {
        format: submem_router::fitted::POLICY_FORMAT.into(),
        version: submem_router::fitted::POLICY_VERSION,
        quality_metric: QualityMetric::Coverage,
        agentic_quality_metric: None,
        settings: FitSettings::default(),
        sources: vec!["hand-made".into()],
        cells: vec![Cell {
            regime: Regime::Conversational,
            depth: Depth::Moderate,
            budget_bucket: 0,
            budgets: vec![2048],
            choice: Some(Choice {
                substrate: substrate.into(),
                top_k: 3,
                compose: compose.map(|(with, share)| Compose {
                    with: with.into(),
                    share,
                }),
            }),
            evidence: vec![Evidence {
                spec: substrate.into(),
                k: 3,
                n: 40,
                quality: 0.625,
                p50_ms: 1.5,
                excluded: None,
            }],
        }],
    };
    p.validate().unwrap();
    p
}

/// A namespace whose history is between 1 and 32 budgets of 2048 tokens.
async fn moderate(r: &RoutedSubstrate) -> Namespace {
    let ns = Namespace::new("fitted").unwrap();
    r.write(&ns, &fixture_conversation("x", "zanzibarite", 6))
        .await
        .unwrap();
    let filler: Vec<Event> = (0..400).map(long_turn).collect();
    r.write(&ns, &filler).await.unwrap();
    let ratio = r.history_tokens(&ns) as f64 / 2048.0;
    assert!(ratio > 1.0 && ratio < 32.0, "{ratio}");
    ns
}

#[tokio::test]
async fn a_fitted_cell_decides_and_other_cells_fall_back_to_the_rules() {
    let r = routed().with_fitted(policy("m10", None));
    let ns = moderate(&r).await;
    let q = Query::question(ns.clone(), "Who is my violin teacher?", 2048);
    let d = r.decide(&q).unwrap();
    assert_eq!(
        (d.method, d.top_k, d.origin),
        (paper::M10, 3, Origin::Fitted)
    );
    assert!(d.reason.contains("coverage 0.625"), "{}", d.reason);
    // 8192 is in another budget bucket, for which the file has no cell.
    let d = r
        .decide(&Query::question(ns.clone(), "Who?", 8192))
        .unwrap();
    assert_eq!(d.origin, Origin::Rule);
    // A cell naming a substrate that is not a member falls back too.
    let r = routed().with_fitted(policy("flexa", None));
    let ns = moderate(&r).await;
    let d = r.decide(&Query::question(ns, "Who?", 2048)).unwrap();
    assert_eq!((d.method, d.origin), (paper::M2, Origin::Rule));
}

#[tokio::test]
async fn composed_reads_share_the_budget_and_show_each_turn_once() {
    let r = routed().with_fitted(policy("m2", Some(("m10", 0.5))));
    let ns = moderate(&r).await;
    let q =
        Query::question(ns.clone(), "Who is my violin teacher?", 2048).with_fixed_prompt_tokens(50);
    let d = r.decide(&q).unwrap();
    assert_eq!(d.secondary, Some((paper::M10, 0.5)));
    let recall = r.read(&q).await.unwrap();
    assert!(
        recall.tokens <= q.allowance(),
        "{} > {}",
        recall.tokens,
        q.allowance()
    );
    assert!(recall.text.contains("zanzibarite"));
    // Full context fills the rest with the newest turns, beyond BM25's half.
    assert!(recall.tokens > q.allowance() / 2, "{}", recall.tokens);
    let mut ids: Vec<&str> = recall.source_ids().collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "a source reported twice");
    let lines: Vec<&str> = recall
        .text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let unique: std::collections::HashSet<&&str> = lines.iter().collect();
    assert_eq!(unique.len(), lines.len(), "a line shown twice");

    // Forced composition via the builder, and its validation.
    let forced = routed()
        .with_composition(paper::M10, paper::M2, 0.3)
        .unwrap();
    let ns = moderate(&forced).await;
    let q = Query::question(ns, "Who is my violin teacher?", 2048);
    assert_eq!(forced.decide(&q).unwrap().origin, Origin::Forced);
    let recall = forced.read(&q).await.unwrap();
    assert!(recall.tokens <= q.allowance());
    assert!(routed()
        .with_composition(paper::M2, paper::FLEXA_MEM, 0.5)
        .is_err());
    assert!(routed()
        .with_composition(paper::M2, paper::M10, 1.0)
        .is_err());
}

#[tokio::test]
async fn confident_signals_send_the_read_to_bm25() {
    let lenient = SignalSettings::default()
        .with_min_agreement(0.0)
        .with_min_margin(0.0);
    let r = with_dense()
        .with_fitted(policy("m10", None))
        .with_signals(lenient);
    let ns = moderate(&r).await;
    // Rare terms (one turn) and common ones (every filler turn): BM25 has a
    // clear best hit and many runners-up.
    let q = Query::question(
        ns.clone(),
        "violin teacher zanzibarite gardens rivers",
        2048,
    );
    let e = r.explain(&q).await.unwrap();
    let s = e.signals.unwrap();
    assert!(s.agreement.is_some() && s.bm25_margin.is_some(), "{s:?}");
    assert_eq!(
        (e.decision.method, e.decision.origin),
        (paper::M2, Origin::Signal)
    );
    assert!(r.read(&q).await.unwrap().text.contains("zanzibarite"));
    // Impossible thresholds never act.
    let strict = SignalSettings::default().with_min_agreement(1.1);
    let r = with_dense()
        .with_fitted(policy("m10", None))
        .with_signals(strict);
    let ns = moderate(&r).await;
    let e = r
        .explain(&Query::question(ns, "Who is my violin teacher?", 2048))
        .await
        .unwrap();
    assert_eq!(e.decision.origin, Origin::Fitted);
}

#[tokio::test]
async fn explanations_name_the_cell_its_evidence_and_the_signals() {
    let r = routed().with_fitted(policy("m10", None));
    let ns = moderate(&r).await;
    let e = r
        .explain(&Query::question(
            ns.clone(),
            "Who is my violin teacher?",
            2048,
        ))
        .await
        .unwrap();
    let text = e.to_string();
    for needle in [
        "route: m10 (top-k 3)",
        "fitted policy cell",
        "conversational",
        "depth Moderate",
        "budget ≤3072",
        "k=3",
        "n=40",
        "quality 0.625",
        "signals:   BM25 margin",
        "shown only",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["decision"]["origin"], "fitted");
    assert_eq!(json["cell"]["key"]["budget_bucket"], 0);
    assert_eq!(json["cell"]["cell"]["evidence"][0]["n"], 40);
    // Without a fitted policy the rules are named.
    let plain = routed();
    let ns = moderate(&plain).await;
    let e = plain
        .explain(&Query::question(ns, "Who?", 2048))
        .await
        .unwrap();
    assert!(e.to_string().contains("paper-derived rule"), "{e}");
}

/// M2 read to fill the budget, named `m2-fill`, beside full context.
fn with_fill_member() -> RoutedSubstrate {
    let services = test_services(None);
    let fill = SparseConfig {
        fill: true,
        ..SparseConfig::default()
    };
    let members: Vec<(String, Arc<dyn Substrate>)> = vec![
        (
            "m2-fill".into(),
            Arc::new(SparseMemory::new(services.clone(), fill).unwrap()),
        ),
        (
            "full-context".into(),
            Arc::new(FullContext::new(services.clone(), FullContextConfig::default()).unwrap()),
        ),
    ];
    RoutedSubstrate::new_named(members, RoutingPolicy::default(), services.tokens).unwrap()
}

#[tokio::test]
async fn a_fitted_choice_is_followed_only_by_the_member_of_that_name() {
    let r = with_fill_member().with_fitted(policy("m2-fill", None));
    assert_eq!(r.member_names(), vec!["m2-fill", "m10"]);
    let ns = moderate(&r).await;
    let q = Query::question(ns.clone(), "Who is my violin teacher?", 2048);
    let d = r.decide(&q).unwrap();
    assert_eq!((d.method, d.origin), (paper::M2, Origin::Fitted));
    let e = r.explain(&q).await.unwrap();
    assert_eq!(e.route, "m2-fill");
    assert!(e.to_string().contains("route: m2-fill"), "{e}");

    // A policy that chose top-k `m2` says nothing about the fill member.
    let r = with_fill_member().with_fitted(policy("m2", None));
    let ns = moderate(&r).await;
    let d = r.decide(&Query::question(ns, "Who?", 2048)).unwrap();
    assert_eq!(d.origin, Origin::Rule);

    // A name that does not match the member's method is refused.
    let services = test_services(None);
    let m: Arc<dyn Substrate> =
        Arc::new(SparseMemory::new(services.clone(), SparseConfig::default()).unwrap());
    let err = RoutedSubstrate::new_named(
        vec![("m1-fill".into(), m)],
        RoutingPolicy::default(),
        services.tokens,
    )
    .unwrap_err();
    assert!(err.to_string().contains("m1-fill"), "{err}");
}
