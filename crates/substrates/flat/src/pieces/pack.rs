//! Packing ranked pieces into the allowance: pieces enter in rank order
//! while the memory they make still fits, each event's chosen pieces are
//! shown together as one block (runs of consecutive pieces verbatim, with
//! [`OMISSION`](submem_kit::fit::OMISSION) marks where text is left out), and the blocks follow the
//! history in time order.
//!
//! Costs are exact rather than estimated: adding a piece recounts the block
//! of its event (a block is at most one event long), so a piece that joins
//! its neighbours, which costs less than the piece alone, is not refused for
//! an overestimate. The joined memory is counted once more by
//! [`render_in_time_order`], which keeps the recall exact.

use std::collections::{BTreeSet, HashMap};

use submem_core::{Recall, Resolution, TokenCounter};
use submem_kit::fit::excerpt_runs;
use submem_kit::pieces::run_text;
use submem_kit::render::UNIT_SEPARATOR;
use submem_kit::{render_in_time_order, PackPolicy, RankedUnit};

use super::store::CutEvent;

/// The separator between an event's source id and a piece's index in the
/// ids the inner index stores (`D1:3#0`). Indices are digits, so the last
/// `#` of a piece id always ends the source id, whatever it holds.
pub(crate) const PIECE_ID_SEPARATOR: char = '#';

/// The id a piece is stored under.
pub(crate) fn piece_id(source_id: &str, index: usize) -> String {
    format!("{source_id}{PIECE_ID_SEPARATOR}{index}")
}

/// The event source id and piece index of a stored piece id.
pub(crate) fn parse_piece_id(id: &str) -> Option<(&str, usize)> {
    let (source, index) = id.rsplit_once(PIECE_ID_SEPARATOR)?;
    Some((source, index.parse().ok()?))
}

/// What one event shows: the whole event when every piece is chosen,
/// otherwise its runs of consecutive chosen pieces with omission marks
/// where pieces are skipped.
pub(crate) fn block_text(event: &CutEvent, chosen: &BTreeSet<usize>) -> String {
    if chosen.len() == event.pieces.len() {
        return event.text.clone();
    }
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &i in chosen {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == i => *last = i,
            _ => runs.push((i, i)),
        }
    }
    let texts: Vec<(usize, usize, String)> = runs
        .into_iter()
        .map(|(first, last)| {
            (
                first,
                last,
                run_text(&event.text, &event.pieces, first, last),
            )
        })
        .collect();
    let borrowed: Vec<(usize, usize, &str)> = texts
        .iter()
        .map(|(first, last, text)| (*first, *last, text.as_str()))
        .collect();
    excerpt_runs("", event.pieces.len(), &borrowed)
}

/// One event's share of the memory while pieces are packed.
struct Block<'e> {
    event: &'e CutEvent,
    source_id: &'e str,
    chosen: BTreeSet<usize>,
    tokens: usize,
    /// The rank of its best piece (blocks are listed best first).
    best_rank: usize,
    best_score: f32,
}

/// Packs `ranked` pieces (best first, with their cached token counts) of the
/// events in `events` into `allowance` tokens. Pieces whose event is gone
/// (forgotten between ranking and packing) or whose id is not a piece id are
/// skipped.
pub(crate) fn pack(
    ranked: &[(RankedUnit, u32)],
    events: &HashMap<String, CutEvent>,
    counter: &dyn TokenCounter,
    allowance: usize,
) -> Recall {
    let separator = counter.count(UNIT_SEPARATOR);
    let mut blocks: Vec<Block<'_>> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut used = 0usize;
    for (rank, (unit, tokens)) in ranked.iter().enumerate() {
        let room = allowance.saturating_sub(used);
        // A piece never costs less than itself minus the label it may lose
        // by joining a run; pieces well over the room need no recount.
        if *tokens as usize > room + 8 {
            continue;
        }
        let Some((source, index)) = parse_piece_id(&unit.source_id) else {
            continue;
        };
        let Some((source_id, event)) = events.get_key_value(source) else {
            continue;
        };
        if index >= event.pieces.len() {
            continue;
        }
        match at.get(source_id.as_str()) {
            Some(&b) => {
                let block = &mut blocks[b];
                if block.chosen.contains(&index) {
                    continue;
                }
                let mut chosen = block.chosen.clone();
                chosen.insert(index);
                let tokens = counter.count(&block_text(event, &chosen));
                let grown = used - block.tokens + tokens;
                if grown <= allowance {
                    used = grown;
                    block.chosen = chosen;
                    block.tokens = tokens;
                }
            }
            None => {
                let chosen = BTreeSet::from([index]);
                let tokens = counter.count(&block_text(event, &chosen));
                let cost = tokens + if blocks.is_empty() { 0 } else { separator };
                if used + cost <= allowance {
                    used += cost;
                    at.insert(source_id.as_str(), blocks.len());
                    blocks.push(Block {
                        event,
                        source_id,
                        chosen,
                        tokens,
                        best_rank: rank,
                        best_score: unit.score,
                    });
                }
            }
        }
    }
    blocks.sort_by_key(|b| b.best_rank);
    let whole: HashMap<&str, bool> = blocks
        .iter()
        .map(|b| (b.source_id, b.chosen.len() == b.event.pieces.len()))
        .collect();
    let units: Vec<RankedUnit> = blocks
        .iter()
        .map(|b| RankedUnit {
            position: b.event.position,
            source_id: b.source_id.to_string(),
            text: block_text(b.event, &b.chosen),
            score: b.best_score,
        })
        .collect();
    let mut recall = render_in_time_order(&units, counter, allowance, PackPolicy::SkipUnfit);
    for hit in &mut recall.sources {
        if !whole.get(hit.source_id.as_str()).copied().unwrap_or(true) {
            hit.resolution = Resolution::Excerpt;
        }
    }
    recall
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::{Event, Turn};
    use submem_kit::fit::OMISSION;

    fn event(id: &str, position: u64, text: &str, kappa: usize) -> (String, CutEvent) {
        let e = Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "Ana".into(),
            text: text.into(),
            source_id: id.into(),
        });
        (
            id.to_string(),
            CutEvent::cut(&e, position, kappa, &WhitespaceCounter),
        )
    }

    fn hit(id: &str, score: f32, tokens: u32) -> (RankedUnit, u32) {
        (
            RankedUnit {
                position: 0,
                source_id: id.into(),
                text: String::new(),
                score,
            },
            tokens,
        )
    }

    #[test]
    fn piece_ids_round_trip_whatever_the_source_id_holds() {
        for source in ["D1:3", "a#1", "#", "x#y#2"] {
            let id = piece_id(source, 12);
            assert_eq!(parse_piece_id(&id), Some((source, 12)));
        }
        assert_eq!(parse_piece_id("no-separator"), None);
        assert_eq!(parse_piece_id("a#b"), None);
    }

    #[test]
    fn a_block_shows_runs_verbatim_with_marks_for_what_is_left_out() {
        let (_, e) = event("x", 0, "one two three four five six seven eight", 3);
        // Pieces: "Ana: one two" | "three four five" | "six seven eight".
        assert_eq!(e.pieces.len(), 3);
        assert_eq!(block_text(&e, &BTreeSet::from([0, 1, 2])), e.text);
        assert_eq!(
            block_text(&e, &BTreeSet::from([1])),
            format!("{OMISSION}\nAna: three four five\n{OMISSION}")
        );
        assert_eq!(
            block_text(&e, &BTreeSet::from([0, 2])),
            format!("Ana: one two\n{OMISSION}\nAna: six seven eight")
        );
        assert_eq!(
            block_text(&e, &BTreeSet::from([1, 2])),
            format!("{OMISSION}\nAna: three four five six seven eight")
        );
    }

    #[test]
    fn packing_takes_ranked_pieces_while_they_fit_and_marks_excerpts() {
        let events: HashMap<String, CutEvent> = [
            event("a", 0, "alpha beta", 3),
            event("b", 1, "one two three four five six seven eight", 3),
        ]
        .into_iter()
        .collect();
        let ranked = vec![hit("b#1", 3.0, 3), hit("a#0", 2.0, 3), hit("b#2", 1.0, 3)];
        // Room for b's middle piece with its marks (6) and a (3); b#2 would
        // grow b's block to 8.
        let recall = pack(&ranked, &events, &WhitespaceCounter, 9);
        assert_eq!(recall.tokens, 9);
        assert_eq!(
            recall.text,
            format!("Ana: alpha beta{UNIT_SEPARATOR}{OMISSION}\nAna: three four five\n{OMISSION}")
        );
        let got: Vec<(&str, Resolution)> = recall
            .sources
            .iter()
            .map(|s| (s.source_id.as_str(), s.resolution))
            .collect();
        assert_eq!(
            got,
            vec![("b", Resolution::Excerpt), ("a", Resolution::Raw)]
        );
        // One token less: a no longer fits, and b's last piece joins its run.
        let recall = pack(&ranked, &events, &WhitespaceCounter, 8);
        assert_eq!(
            recall.text,
            format!("{OMISSION}\nAna: three four five six seven eight")
        );
        // With room for all of b, its pieces join into the whole turn.
        let recall = pack(&ranked, &events, &WhitespaceCounter, 100);
        assert!(recall.text.contains("Ana: three four five six seven eight"));
        assert!(!recall.text.ends_with(OMISSION));
        assert!(recall.text.lines().any(|l| l == OMISSION));
    }

    #[test]
    fn pieces_of_forgotten_events_and_foreign_ids_are_skipped() {
        let events: HashMap<String, CutEvent> = [event("a", 0, "alpha", 8)].into_iter().collect();
        let ranked = vec![
            hit("gone#0", 9.0, 1),
            hit("junk", 8.0, 1),
            hit("a#7", 7.0, 1),
        ];
        let recall = pack(&ranked, &events, &WhitespaceCounter, 100);
        assert!(recall.sources.is_empty() && recall.text.is_empty());
    }
}
