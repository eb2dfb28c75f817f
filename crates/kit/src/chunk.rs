//! Cutting a history into consecutive chunks at session changes and under a
//! token cap: the grouping that M5's chunks, M6's leaves and M3's session
//! runs share.
//!
//! The rule ([`runs`]): items are taken in order; an item joins the open
//! chunk when it belongs to the same session as the item before it and the
//! chunk's cost stays within the cap; otherwise it opens a new chunk. An item
//! that costs more than the cap on its own is a chunk of its own (never
//! split). [`session_chunks`] applies it to events, whose session is
//! [`session_of`]: a turn's session id, while steps share one.
//!
//! ```
//! use submem_core::{Event, Turn};
//! use submem_kit::chunk::session_chunks;
//!
//! let turn = |session: &str, id: &str| Event::Turn(Turn {
//!     session_id: session.into(), session_date: None, speaker: "A".into(),
//!     text: "four words of text".into(), source_id: id.into(),
//! });
//! let events = [turn("s1", "1"), turn("s1", "2"), turn("s1", "3"), turn("s2", "4")];
//! // Each event costs 4; a chunk holds at most 8: cut by size, then by session.
//! let chunks = session_chunks(&events, 8, |_, _| 4);
//! assert_eq!(chunks, vec![0..2, 2..3, 3..4]);
//! ```

use std::ops::Range;

use submem_core::Event;

/// Splits `items` into consecutive, non-empty index ranges covering them in
/// order: an item opens a new range when `same_session(previous, item)` is
/// false or when adding `cost(index, item)` would take the open range past
/// `cap` (`None`: no cap). `cost` is called once per item, in order.
pub fn runs<T>(
    items: &[T],
    cap: Option<usize>,
    same_session: impl Fn(&T, &T) -> bool,
    mut cost: impl FnMut(usize, &T) -> usize,
) -> Vec<Range<usize>> {
    let cap = cap.unwrap_or(usize::MAX);
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut used = 0usize;
    for (i, item) in items.iter().enumerate() {
        let c = cost(i, item);
        let joins = i > 0 && same_session(&items[i - 1], item) && used.saturating_add(c) <= cap;
        match out.last_mut() {
            Some(open) if joins => {
                open.end = i + 1;
                used = used.saturating_add(c);
            }
            _ => {
                out.push(i..i + 1);
                used = c;
            }
        }
    }
    out
}

/// The session an event is chunked by: a turn's session id; every step
/// shares `None` (an agent trajectory is one run until the cap cuts it).
pub fn session_of(event: &Event) -> Option<&str> {
    match event {
        Event::Turn(t) => Some(t.session_id.as_str()),
        Event::Step(_) => None,
    }
}

/// [`runs`] over events, cut where [`session_of`] changes and where a chunk
/// would cost more than `cap` by `cost(index, event)`.
pub fn session_chunks(
    events: &[Event],
    cap: usize,
    cost: impl FnMut(usize, &Event) -> usize,
) -> Vec<Range<usize>> {
    runs(
        events,
        Some(cap),
        |a, b| session_of(a) == session_of(b),
        cost,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use submem_core::{Step, Turn};

    fn turn(session: &str, id: &str) -> Event {
        Event::Turn(Turn {
            session_id: session.into(),
            session_date: None,
            speaker: "A".into(),
            text: "x".into(),
            source_id: id.into(),
        })
    }

    fn step(episode: &str, n: u32) -> Event {
        Event::Step(Step {
            step: n,
            action: "look".into(),
            observation: "a room".into(),
            source_id: format!("{episode}:{n}"),
        })
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert!(session_chunks(&[], 10, |_, _| 1).is_empty());
        assert!(runs::<u32>(&[], None, |_, _| true, |_, _| 1).is_empty());
    }

    #[test]
    fn a_session_change_always_cuts() {
        let ev = [
            turn("a", "1"),
            turn("b", "2"),
            turn("b", "3"),
            turn("a", "4"),
        ];
        assert_eq!(session_chunks(&ev, 100, |_, _| 1), vec![0..1, 1..3, 3..4]);
    }

    #[test]
    fn the_cap_cuts_and_an_oversized_item_stands_alone() {
        let ev: Vec<Event> = (0..5).map(|i| turn("s", &i.to_string())).collect();
        let costs = [3, 3, 9, 2, 2];
        assert_eq!(
            session_chunks(&ev, 6, |i, _| costs[i]),
            vec![0..2, 2..3, 3..5]
        );
    }

    #[test]
    fn steps_share_one_session_and_turns_after_them_cut() {
        let ev = [step("e1", 0), step("e2", 0), turn("s", "t")];
        assert_eq!(session_chunks(&ev, 100, |_, _| 1), vec![0..2, 2..3]);
    }

    #[test]
    fn without_a_cap_only_sessions_cut_and_cost_runs_once_per_item() {
        let keys = ["a", "a", "b", "b", "b", "a"];
        let mut calls = Vec::new();
        let r = runs(
            &keys,
            None,
            |x, y| x == y,
            |i, _| {
                calls.push(i);
                usize::MAX
            },
        );
        assert_eq!(r, vec![0..2, 2..5, 5..6]);
        assert_eq!(calls, vec![0, 1, 2, 3, 4, 5]);
    }
}
