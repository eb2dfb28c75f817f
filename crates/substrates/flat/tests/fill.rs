#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Fill reads of M1 and M2: ranked units until the budget is spent, shown in
//! time order, never over the allowance; top-k stays the paper's setting.

use std::sync::Arc;
use submem_core::test_utils::{test_services, HashingEmbedder};
use submem_core::{Event, Namespace, Query, Recall, Services, Substrate, TokenCounter, Turn};
use submem_flat::{DenseConfig, DenseMemory, ReadDepth, SparseConfig, SparseMemory};

fn turns(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            // Every turn mentions the garden, so every turn is a BM25 match;
            // the number of extra words varies the turns' lengths.
            let filler = ["we", "planted", "tomatoes", "beside", "old", "fence"];
            let extra: Vec<&str> = filler.iter().copied().cycle().take(i % 7).collect();
            Event::Turn(Turn {
                session_id: format!("s{}", i / 20),
                session_date: None,
                speaker: "Ana".into(),
                text: format!("the garden note {i} {}", extra.join(" ")),
                source_id: format!("t{i}"),
            })
        })
        .collect()
}

fn services() -> Services {
    let mut s = test_services(None);
    s.embedder = Arc::new(HashingEmbedder::new(64));
    s
}

fn positions(r: &Recall) -> Vec<usize> {
    let mut p: Vec<usize> = r
        .source_ids()
        .map(|id| id.trim_start_matches('t').parse().unwrap())
        .collect();
    p.sort_unstable();
    p
}

async fn check_fill(top_k: &dyn Substrate, fill: &dyn Substrate, counter: &dyn TokenCounter) {
    let ns = Namespace::new("fill").unwrap();
    let history = turns(300);
    top_k.write(&ns, &history).await.unwrap();
    fill.write(&ns, &history).await.unwrap();
    for budget in [256, 1024, 4096] {
        let q = Query::question(ns.clone(), "what about the garden?", budget).with_top_k(10);
        let k = top_k.read(&q).await.unwrap();
        let f = fill.read(&q).await.unwrap();
        assert!(k.sources.len() <= 10);
        assert!(
            f.tokens <= q.allowance(),
            "{} > {}",
            f.tokens,
            q.allowance()
        );
        assert_eq!(f.tokens, counter.count(&f.text));
        // Fill shows at least what top-k shows and, with every turn a match,
        // no turn left out would have fit the room that is left.
        assert!(f.sources.len() >= k.sources.len());
        let shown: std::collections::HashSet<&str> = f.source_ids().collect();
        let left = q.allowance() - f.tokens;
        let separator = counter.count("\n");
        for e in history.iter().filter(|e| !shown.contains(e.source_id())) {
            let cost = counter.count(&e.render()) + separator;
            assert!(
                cost > left,
                "budget {budget}: {} ({cost} tokens) fits the {left} left",
                e.source_id()
            );
        }
        // Rendered in time order: the text lists the turns oldest first.
        let shown = positions(&f);
        let mut last = 0;
        for p in &shown {
            // Every turn's text is "the garden note {i} …", with a space after i.
            let at = f
                .text
                .find(&format!("note {p} "))
                .unwrap_or_else(|| panic!("turn {p} missing from the text"));
            assert!(at >= last, "turn {p} out of time order");
            last = at;
        }
    }
    // A budget larger than the whole history shows every turn once.
    let q = Query::question(ns.clone(), "garden", 1 << 16);
    let f = fill.read(&q).await.unwrap();
    assert_eq!(positions(&f), (0..300).collect::<Vec<_>>());
}

#[tokio::test]
async fn sparse_fill_spends_the_budget_in_time_order() {
    let s = services();
    let counter = s.tokens.clone();
    let k = SparseMemory::new(s.clone(), SparseConfig::default()).unwrap();
    let f = SparseMemory::new(s, SparseConfig::default().with_depth(ReadDepth::fill())).unwrap();
    check_fill(&k, &f, &*counter).await;
}

#[tokio::test]
async fn dense_fill_spends_the_budget_in_time_order() {
    let s = services();
    let counter = s.tokens.clone();
    let k = DenseMemory::new(s.clone(), DenseConfig::default()).unwrap();
    let f = DenseMemory::new(s, DenseConfig::default().with_depth(ReadDepth::fill())).unwrap();
    check_fill(&k, &f, &*counter).await;
}

#[tokio::test]
async fn fill_candidates_bound_the_read() {
    let s = services();
    let f = SparseMemory::new(
        s,
        SparseConfig::default().with_depth(ReadDepth::Fill { max_candidates: 25 }),
    )
    .unwrap();
    let ns = Namespace::new("bound").unwrap();
    f.write(&ns, &turns(300)).await.unwrap();
    let r = f
        .read(&Query::question(ns, "garden", 1 << 16).with_top_k(5))
        .await
        .unwrap();
    assert_eq!(r.sources.len(), 25);
}

#[test]
fn zero_candidates_are_refused() {
    let bad = SparseConfig::default().with_depth(ReadDepth::Fill { max_candidates: 0 });
    assert!(SparseMemory::new(test_services(None), bad).is_err());
    let bad = DenseConfig::default().with_depth(ReadDepth::Fill { max_candidates: 0 });
    assert!(DenseMemory::new(services(), bad).is_err());
}
