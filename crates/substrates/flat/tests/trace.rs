#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Ranking traces of the flat substrates: each asked id's rank and the room
//! showing it needed, the top-k a paper read shows, and ids never ranked,
//! for M1, M2 and the hybrid, in top-k and fill reads.

use submem_core::test_utils::test_services;
use submem_core::{Event, EvidenceFate, Namespace, Query, ReadTrace, Substrate, Turn};
use submem_flat::{
    DenseConfig, DenseMemory, HybridConfig, HybridMemory, SparseConfig, SparseMemory,
};

fn said(id: &str, text: &str) -> Event {
    Event::Turn(Turn {
        session_id: "s1".into(),
        session_date: None,
        speaker: "x".into(),
        text: text.into(),
        source_id: id.into(),
    })
}

/// Three turns about violins (the first the best match), ten about other things.
fn history() -> Vec<Event> {
    let mut events = vec![
        said("v0", "violin violin violin teacher Ingrid"),
        said("v1", "violin lessons on tuesday"),
        said("v2", "a violin case"),
    ];
    for i in 0..10 {
        events.push(said(
            &format!("o{i}"),
            &format!("the weather on day {i} was mild"),
        ));
    }
    events
}

fn ids() -> Vec<String> {
    ["v0", "v2", "nope"].map(String::from).to_vec()
}

async fn trace_of(s: &dyn Substrate, top_k: usize, budget: usize) -> (ReadTrace, Vec<String>) {
    let ns = Namespace::new("t").unwrap();
    s.write(&ns, &history()).await.unwrap();
    let q = Query::question(ns, "violin violin teacher", budget).with_top_k(top_k);
    let shown: Vec<String> = s
        .read(&q)
        .await
        .unwrap()
        .source_ids()
        .map(String::from)
        .collect();
    let t = s
        .trace(&q, &ids())
        .await
        .unwrap()
        .expect("flat substrates trace");
    assert_eq!(t.events.len(), 3);
    assert_eq!(t.room, q.allowance());
    assert_eq!(t.events[0].rank, Some(0), "{t:?}");
    assert_eq!(
        t.events[2].rank, None,
        "an unknown id is never ranked: {t:?}"
    );
    (t, shown)
}

#[tokio::test]
async fn a_top_k_read_says_its_k_and_what_ranked_below_it() {
    for s in [
        Box::new(SparseMemory::new(test_services(None), SparseConfig::default()).unwrap())
            as Box<dyn Substrate>,
        Box::new(DenseMemory::new(test_services(None), DenseConfig::default()).unwrap()),
        Box::new(HybridMemory::new(test_services(None), HybridConfig::default()).unwrap()),
    ] {
        let name = s.info().name;
        let (t, shown) = trace_of(&*s, 1, 4096).await;
        assert_eq!(t.top_k, Some(1), "{name}");
        assert_eq!(shown, ["v0"], "{name}");
        let v2 = &t.events[1];
        let rank = v2.rank.expect("v2 matches the query");
        assert!(rank >= 1, "{name}: {t:?}");
        assert_eq!(t.fate_of(v2, false), EvidenceFate::BeyondTopK, "{name}");
        assert_eq!(t.fate_of(&t.events[0], true), EvidenceFate::Shown, "{name}");
    }
}

#[tokio::test]
async fn a_fill_read_counts_the_room_each_id_needed() {
    let services = test_services(None);
    let counter = services.tokens.clone();
    let m2 = SparseMemory::new(services, SparseConfig::default().with_fill(true)).unwrap();
    // A budget too small for the second violin turn after the first.
    let (t, shown) = trace_of(&m2, 10, 64).await;
    assert_eq!(t.top_k, None);
    let v0 = &t.events[0];
    let first = counter.count(&history()[0].render());
    assert_eq!(
        v0.room_needed,
        Some(first),
        "the best match needs only itself"
    );
    let v2 = &t.events[1];
    let need = v2.room_needed.unwrap();
    assert!(need > first, "{t:?}");
    let fate = t.fate_of(v2, shown.contains(&"v2".to_string()));
    if need > t.allowance {
        assert_eq!(fate, EvidenceFate::RankedTooLow);
    } else {
        assert!(
            matches!(fate, EvidenceFate::Shown | EvidenceFate::FitNotWhole),
            "{fate:?}"
        );
    }
}

#[tokio::test]
async fn a_read_with_its_trace_equals_the_read_and_the_trace() {
    for fill in [false, true] {
        for s in [
            Box::new(
                SparseMemory::new(test_services(None), SparseConfig::default().with_fill(fill))
                    .unwrap(),
            ) as Box<dyn Substrate>,
            Box::new(
                DenseMemory::new(test_services(None), DenseConfig::default().with_fill(fill))
                    .unwrap(),
            ),
            Box::new(
                HybridMemory::new(test_services(None), HybridConfig::default().with_fill(fill))
                    .unwrap(),
            ),
        ] {
            let ns = Namespace::new("t").unwrap();
            s.write(&ns, &history()).await.unwrap();
            let q = Query::question(ns, "violin violin teacher", 64).with_top_k(2);
            let (recall, trace) = s.read_traced(&q, &ids()).await.unwrap();
            let plain = s.read(&q).await.unwrap();
            let name = s.info().name;
            assert_eq!(recall.text, plain.text, "{name} fill {fill}");
            assert_eq!(recall.sources, plain.sources, "{name} fill {fill}");
            assert_eq!(
                trace,
                s.trace(&q, &ids()).await.unwrap(),
                "{name} fill {fill}"
            );
            let (_, none) = s.read_traced(&q, &[]).await.unwrap();
            assert_eq!(none, None, "{name}: nothing asked, nothing traced");
        }
    }
}
