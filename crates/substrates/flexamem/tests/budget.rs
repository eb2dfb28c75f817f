#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Budget, relevance order, Figure-6 trend, determinism and byte-identical raw text.
mod common;

use proptest::prelude::*;
use submem_core::test_utils::{test_services, WhitespaceCounter};
use submem_core::{Event, Namespace, Query, Resolution, Substrate, TokenCounter};
use submem_flexamem::{FlexaConfig, FlexaMem, Ranking, RecoveryMode};
use submem_kit::fit::{fit_or_degrade, Costs};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn ns(s: &str) -> Namespace {
    Namespace::new(s).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    /// The recall never exceeds the allowance and its token count is exact,
    /// for random histories, budgets from 512 to 32k, both regimes and modes.
    #[test]
    fn recall_never_exceeds_the_allowance(
        seed in 0u64..10_000,
        n in 1usize..160,
        words in 5usize..150,
        budget in 512usize..32_768,
        prompt in 0usize..600,
        agentic in any::<bool>(),
        mode in 0u8..3,
        ranking in 0u8..3,
        batch in 1usize..40,
    ) {
        let mode = [RecoveryMode::Auto, RecoveryMode::Unit, RecoveryMode::Piece][mode as usize];
        let ranking = [Ranking::Bm25, Ranking::Dense, Ranking::Hybrid][ranking as usize];
        let cfg = FlexaConfig::default().with_mode(mode).with_ranking(ranking);
        let m = FlexaMem::new(test_services(None), cfg).unwrap();
        let a = ns("p");
        let events: Vec<Event> = if agentic {
            common::trajectory("t", n, words, seed)
        } else {
            common::conversation("c", 1 + n / 20, 20.min(n), words / 2 + 1, seed)
        };
        let (r, allowance, text) = rt().block_on(async {
            for chunk in events.chunks(batch) {
                m.write(&a, chunk).await.unwrap();
            }
            let q = if agentic {
                Query::agentic(a.clone(), "open the violin drawer", "You see a violin", budget)
            } else {
                Query::question(a.clone(), "when did Ben see the violin at the museum", budget)
            }
            .with_fixed_prompt_tokens(prompt);
            let r = m.read(&q).await.unwrap();
            (r.tokens, q.allowance(), r.text)
        });
        prop_assert!(r <= allowance, "{r} > {allowance}");
        prop_assert_eq!(WhitespaceCounter.count(&text), r);
    }

    /// Fit-or-degrade never degrades a candidate because of a less relevant
    /// one: whenever a candidate is below raw, its next higher resolution did
    /// not fit the room left by the more relevant candidates alone.
    #[test]
    fn degradation_is_never_caused_by_a_later_candidate(
        costs in prop::collection::vec((0i64..400, prop::option::of(0i64..200)), 1..30),
        room in 0i64..3000,
    ) {
        let costs: Vec<Costs> = costs.into_iter().map(|(raw, exc)| Costs {
            raw, excerpt: exc.map(|e| e.min(raw)),
        }).collect();
        let (res, _) = fit_or_degrade(&costs, room);
        let mut r = room;
        for (c, v) in costs.iter().zip(&res) {
            match v {
                Resolution::Raw => { prop_assert!(c.raw <= r); r -= c.raw; }
                Resolution::Excerpt => {
                    prop_assert!(c.raw > r);
                    let e = c.excerpt.unwrap();
                    prop_assert!(e <= r);
                    r -= e;
                }
                Resolution::Record => {
                    prop_assert!(c.raw > r);
                    prop_assert!(c.excerpt.is_none_or(|e| e > r));
                }
            }
        }
    }

    /// With candidates of equal size, a more relevant candidate is never shown
    /// at a lower resolution than a less relevant one after it.
    #[test]
    fn equal_candidates_keep_relevance_order(
        raw in 1i64..400, exc in 1i64..400, n in 1usize..30, room in 0i64..5000,
    ) {
        let c = Costs { raw, excerpt: Some(exc.min(raw)) };
        let (res, _) = fit_or_degrade(&vec![c; n], room);
        for w in res.windows(2) {
            prop_assert!(w[0] >= w[1], "{:?}", res);
        }
    }
}

async fn big_conversation(mode: RecoveryMode) -> (FlexaMem, Namespace) {
    let m = FlexaMem::new(test_services(None), FlexaConfig::default().with_mode(mode)).unwrap();
    let a = ns("big");
    m.write(&a, &common::conversation("c", 40, 30, 30, 11))
        .await
        .unwrap();
    m.manage().await.unwrap();
    (m, a)
}

/// The paper's Figure 6: as the budget grows, the raw share grows and the
/// excerpt share shrinks.
#[tokio::test]
async fn raw_share_grows_and_excerpt_share_shrinks_with_budget() {
    let (m, a) = big_conversation(RecoveryMode::Unit).await;
    let mut shares = Vec::new();
    for b in [4096, 8192, 16384, 32768] {
        let q = Query::question(
            a.clone(),
            "when did Ben visit the museum with the violin",
            b,
        );
        let r = m.render_detailed(&q).await.unwrap();
        assert!(r.recall.tokens <= q.allowance());
        shares.push((b, r.shares.raw, r.shares.excerpt));
    }
    eprintln!("budget, raw share, excerpt share: {shares:?}");
    // Raw share grows over the whole range (within 2 points of noise);
    // excerpts shrink over the paper's range, 8k to 32k.
    for w in shares.windows(2) {
        assert!(w[1].1 >= w[0].1 - 0.02, "raw share fell: {shares:?}");
    }
    for w in shares[1..].windows(2) {
        assert!(w[1].2 <= w[0].2, "excerpt share rose: {shares:?}");
    }
    assert!(shares[3].1 > shares[1].1, "{shares:?}");
    assert!(shares[3].2 < shares[1].2, "{shares:?}");
}

#[tokio::test]
async fn rendering_is_deterministic() {
    for mode in [RecoveryMode::Piece, RecoveryMode::Unit] {
        let (m, a) = big_conversation(mode).await;
        let (m2, _) = big_conversation(mode).await;
        for b in [1024, 4096, 16384] {
            let q = Query::question(a.clone(), "what did Ana say about the silver candle", b);
            let r1 = m.read(&q).await.unwrap();
            let r2 = m.read(&q).await.unwrap();
            let r3 = m2.read(&q).await.unwrap();
            assert_eq!(r1.text, r2.text);
            assert_eq!(r1.text, r3.text);
            assert_eq!(r1.sources, r3.sources);
        }
    }
}

#[tokio::test]
async fn raw_text_is_byte_identical_after_writes_renders_and_merges() {
    let m = FlexaMem::new(test_services(None), FlexaConfig::default()).unwrap();
    let a = ns("raw");
    let events = common::trajectory("t", 150, 90, 5);
    for chunk in events.chunks(7) {
        m.write(&a, chunk).await.unwrap();
        let q = Query::agentic(a.clone(), "task", "newest", 1024);
        m.read(&q).await.unwrap();
    }
    let before = m.raw_units(&a);
    for b in [600, 1024, 2048, 8192] {
        for mode in ["piece", "unit"] {
            let q = if mode == "piece" {
                Query::question(a.clone(), "open drawer", b)
            } else {
                Query::agentic(a.clone(), "open drawer", "violin", b)
            };
            m.read(&q).await.unwrap();
        }
    }
    m.manage().await.unwrap();
    assert!(m.stats().rule_merges > 0, "the test must exercise merges");
    let after = m.raw_units(&a);
    assert_eq!(before, after);
    let joined = after.join("\n");
    let expected: Vec<String> = events.iter().map(Event::render).collect();
    assert_eq!(joined, expected.join("\n"));
}

#[tokio::test]
async fn agent_window_is_raw_and_last() {
    let m = FlexaMem::new(test_services(None), FlexaConfig::default()).unwrap();
    let a = ns("w");
    let events = common::trajectory("t", 80, 120, 9);
    m.write(&a, &events).await.unwrap();
    let q = Query::agentic(a.clone(), "task", "newest", 4096).with_fixed_prompt_tokens(200);
    let r = m.render_detailed(&q).await.unwrap();
    let newest = events.last().unwrap().render();
    assert!(r.recall.text.ends_with(&newest));
    assert!(r.tokens_by.window > 0 && r.tokens_by.window <= 4096 / 4);
    assert!(r.recall.tokens <= q.allowance());
    assert_eq!(r.mode, Some(RecoveryMode::Unit));
    // The newest event is listed raw.
    let hit = r
        .recall
        .sources
        .iter()
        .find(|s| s.source_id == "t:80")
        .unwrap();
    assert_eq!(hit.resolution, Resolution::Raw);
}

#[tokio::test]
async fn the_whole_history_passes_unchanged_until_it_overflows() {
    let m = FlexaMem::new(test_services(None), FlexaConfig::default()).unwrap();
    let a = ns("small");
    let events = common::conversation("c", 1, 6, 10, 1);
    m.write(&a, &events).await.unwrap();
    let r = m
        .render_detailed(&Query::question(a.clone(), "q", 4096))
        .await
        .unwrap();
    let all: Vec<String> = events.iter().map(Event::render).collect();
    assert_eq!(r.recall.text, all.join("\n"));
    assert_eq!(r.mode, None);
    assert!(r
        .recall
        .sources
        .iter()
        .all(|s| s.resolution == Resolution::Raw));
}
