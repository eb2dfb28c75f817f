use super::*;
use crate::SparseConfig;
use submem_core::test_utils::test_services;
use submem_core::{Resolution, Turn};

fn turn(id: &str, text: &str) -> Event {
    Event::Turn(Turn {
        session_id: "s1".into(),
        session_date: None,
        speaker: "Ana".into(),
        text: text.into(),
        source_id: id.into(),
    })
}

fn ns() -> Namespace {
    Namespace::new("alice").unwrap()
}

/// A question whose allowance is `allowance` tokens (budgets start at 64:
/// the rest goes to the fixed prompt).
fn tight(question: &str, allowance: usize) -> Query {
    let q = Query::question(ns(), question, 4096);
    let fixed = q.filled_budget() - allowance;
    q.with_fixed_prompt_tokens(fixed)
}

fn history() -> Vec<Event> {
    vec![
        turn(
            "D1:1",
            "I parked the blue car on level three of the garage.",
        ),
        turn("D1:2", "Lunch at the noodle bar was great."),
        turn("D1:3", "The garage closes at midnight on weekdays."),
        turn("D1:4", "My sister Mia visits in May with her dog."),
    ]
}

/// Three sentences, the middle one about the dog, in one long turn.
fn long_turn() -> Event {
    turn(
        "D2:1",
        "Yesterday we walked along the river for hours and hours and talked about work. \
         The dog is called Pixel and she loves cheese. \
         Afterwards we went home and cooked pasta with tomatoes and basil for everyone.",
    )
}

fn memory(ranking: PieceRanking, kappa: usize) -> PieceMemory {
    let config = PieceConfig {
        piece_tokens: kappa,
        ..PieceConfig::new(ranking)
    };
    PieceMemory::new(test_services(None), config).unwrap()
}

#[tokio::test]
async fn with_turns_shorter_than_kappa_bm25_pieces_read_like_m2_fill() {
    let pieces = memory(PieceRanking::Bm25, 1_000);
    let fill = SparseMemory::new(
        test_services(None),
        SparseConfig::default().with_depth(ReadDepth::fill()),
    )
    .unwrap();
    pieces.write(&ns(), &history()).await.unwrap();
    fill.write(&ns(), &history()).await.unwrap();
    for (question, budget) in [
        ("Where is the car in the garage?", 3000),
        ("When does the garage close?", 12),
        ("Who visits with a dog?", 9),
    ] {
        let q = tight(question, budget);
        let a = pieces.read(&q).await.unwrap();
        let b = fill.read(&q).await.unwrap();
        assert_eq!((&a.text, a.tokens), (&b.text, b.tokens), "{question}");
        assert_eq!(a.sources, b.sources, "{question}");
    }
}

#[tokio::test]
async fn a_tight_budget_shows_the_matching_piece_of_a_long_turn_as_an_excerpt() {
    let m = memory(PieceRanking::Bm25, 12);
    m.write(&ns(), &[long_turn()]).await.unwrap();
    let q = tight("What is the dog called?", 20);
    let recall = m.read(&q).await.unwrap();
    assert!(recall.tokens <= q.allowance());
    assert!(recall.text.contains("Pixel"), "{}", recall.text);
    assert!(!recall.text.contains("pasta"), "{}", recall.text);
    assert!(recall.text.contains(submem_kit::fit::OMISSION));
    assert_eq!(recall.sources.len(), 1);
    assert_eq!(recall.sources[0].resolution, Resolution::Excerpt);
    // Pieces without a query word are never ranked by BM25: the turn is
    // whole only when every piece matches.
    let most = m
        .read(&Query::question(ns(), "dog river pasta", 4096))
        .await
        .unwrap();
    assert!(most.text.ends_with(submem_kit::fit::OMISSION));
    assert_eq!(most.sources[0].resolution, Resolution::Excerpt);
    let wide = m
        .read(&Query::question(ns(), "dog river pasta everyone", 4096))
        .await
        .unwrap();
    assert_eq!(wide.text, long_turn().render());
    assert_eq!(wide.sources[0].resolution, Resolution::Raw);
}

#[tokio::test]
async fn dense_and_hybrid_rankings_read_within_the_allowance() {
    for ranking in [PieceRanking::Dense, PieceRanking::Hybrid] {
        let m = memory(ranking, 12);
        let mut events = history();
        events.push(long_turn());
        let report = m.write(&ns(), &events).await.unwrap();
        assert!(report.units > events.len(), "the long turn is cut");
        let q = tight("What is the dog called?", 40);
        let recall = m.read(&q).await.unwrap();
        assert!(!recall.sources.is_empty(), "{ranking:?}");
        assert!(recall.tokens <= q.allowance(), "{ranking:?}");
        assert_eq!(m.info().name, ranking.substrate_name());
    }
}

#[tokio::test]
async fn a_bad_batch_stores_nothing_and_an_empty_namespace_reads_empty() {
    let m = memory(PieceRanking::Hybrid, 8);
    let q = Query::question(ns(), "car", 4096);
    assert!(m.read(&q).await.unwrap().sources.is_empty());
    m.write(&ns(), &history()).await.unwrap();
    let before = m.read(&q).await.unwrap();
    let twice = [turn("D9:1", "a red car"), turn("D9:1", "again")];
    assert!(m.write(&ns(), &twice).await.is_err());
    let stored = [turn("D1:1", "the car again")];
    assert!(m.write(&ns(), &stored).await.is_err());
    assert_eq!(m.read(&q).await.unwrap().text, before.text);
    assert!(PieceMemory::new(
        test_services(None),
        PieceConfig {
            piece_tokens: 0,
            ..PieceConfig::new(PieceRanking::Bm25)
        }
    )
    .is_err());
}

#[tokio::test]
async fn forgotten_events_are_never_shown_and_their_ids_can_be_written_again() {
    let m = memory(PieceRanking::Hybrid, 8);
    m.write(&ns(), &history()).await.unwrap();
    let forget = Forget::Sources {
        namespace: ns(),
        source_ids: vec!["D1:1".into(), "D1:3".into(), "never".into()],
    };
    assert_eq!(m.forget(&forget).await.unwrap(), 2);
    let q = Query::question(ns(), "garage car level", 4096);
    let recall = m.read(&q).await.unwrap();
    assert!(!recall.text.contains("garage"), "{}", recall.text);
    m.write(&ns(), &[turn("D1:1", "The garage has a new gate.")])
        .await
        .unwrap();
    let recall = m.read(&q).await.unwrap();
    assert!(recall.text.contains("new gate"));
    assert_eq!(m.forget(&Forget::Namespace(ns())).await.unwrap(), 3);
    assert!(m.read(&q).await.unwrap().sources.is_empty());
}

#[tokio::test]
async fn persist_and_restore_round_trip_and_refuse_another_ranking_or_a_torn_store() {
    let dir = tempfile::tempdir().unwrap();
    let m = memory(PieceRanking::Hybrid, 12);
    let mut events = history();
    events.push(long_turn());
    m.write(&ns(), &events).await.unwrap();
    let q = tight("What is the dog called?", 30);
    let before = m.read(&q).await.unwrap();
    m.persist(dir.path()).await.unwrap();

    let copy = memory(PieceRanking::Hybrid, 12);
    copy.restore(dir.path()).await.unwrap();
    let after = copy.read(&q).await.unwrap();
    assert_eq!(
        (&after.text, &after.sources),
        (&before.text, &before.sources)
    );
    assert!(copy.footprint().stored_tokens > 0);
    // New writes continue after the restored positions.
    copy.write(&ns(), &[turn("D3:1", "Pixel got a new collar.")])
        .await
        .unwrap();
    let newest = copy
        .read(&Query::question(ns(), "Pixel collar", 4096))
        .await
        .unwrap();
    assert!(newest.text.ends_with("Ana: Pixel got a new collar."));

    let bm25 = memory(PieceRanking::Bm25, 12);
    bm25.write(&ns(), &history()).await.unwrap();
    let err = bm25.restore(dir.path()).await.unwrap_err();
    assert!(err.to_string().contains("pieces hybrid"), "{err}");
    // The refused restore left it as it was.
    let still = bm25.read(&Query::question(ns(), "noodle", 4096)).await;
    assert!(still.unwrap().text.contains("noodle"));

    std::fs::remove_file(dir.path().join(submem_kit::persist::MANIFEST_FILE)).unwrap();
    assert!(memory(PieceRanking::Hybrid, 12)
        .restore(dir.path())
        .await
        .is_err());
}
