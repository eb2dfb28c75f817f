//! The check every substrate runs on a write batch before storing anything,
//! so that a write lands whole or not at all: every event valid
//! ([`Event::validate`]), no source id twice in the batch, none already
//! stored in the namespace. Each substrate says what "already stored" means
//! for its own store through a closure. Beside it, the two other places a
//! store meets its source ids: what a forget drops ([`stored_ids`]) and the
//! id index a restore rebuilds ([`write_order_index`]).

use std::collections::{HashMap, HashSet};
use submem_core::{Error, Event, Result};

/// Checks a write batch, in order: every event valid, no source id twice in
/// the batch, none already stored (`exists`, asked once per event). The
/// first problem found is the error, [`Error::InvalidInput`] naming the
/// source id.
///
/// ```
/// use std::collections::HashSet;
/// use submem_core::{Event, Turn};
/// use submem_kit::batch::check_new_sources;
///
/// let turn = |id: &str| Event::Turn(Turn {
///     session_id: "s1".into(),
///     session_date: None,
///     speaker: "Ana".into(),
///     text: "hello".into(),
///     source_id: id.into(),
/// });
/// let stored: HashSet<&str> = ["D1:1"].into();
/// assert!(check_new_sources(&[turn("D1:2")], |id| stored.contains(id)).is_ok());
/// assert!(check_new_sources(&[turn("D1:1")], |id| stored.contains(id)).is_err());
/// ```
pub fn check_new_sources(events: &[Event], exists: impl Fn(&str) -> bool) -> Result<()> {
    for e in events {
        e.validate()?;
    }
    check_new_ids(events.iter().map(Event::source_id), exists)
}

/// The id half of [`check_new_sources`], for writes of units that are not
/// events: no id twice in `ids`, none that `exists` already.
pub fn check_new_ids<'a>(
    ids: impl IntoIterator<Item = &'a str>,
    exists: impl Fn(&str) -> bool,
) -> Result<()> {
    let ids = ids.into_iter();
    let mut seen: HashSet<&str> = HashSet::with_capacity(ids.size_hint().0);
    for id in ids {
        if !seen.insert(id) {
            return Err(Error::InvalidInput(format!(
                "source id {id:?} appears twice in one write"
            )));
        }
        if exists(id) {
            return Err(Error::InvalidInput(format!(
                "source id {id:?} is already stored in this namespace"
            )));
        }
    }
    Ok(())
}

/// The ids of `source_ids` that `stored` holds, each once: what a forget of
/// those sources will drop (the ids it was given but never stored are no
/// error, and count for nothing).
pub fn stored_ids(source_ids: &[String], stored: impl Fn(&str) -> bool) -> HashSet<&str> {
    source_ids
        .iter()
        .map(String::as_str)
        .filter(|id| stored(id))
        .collect()
}

/// The index a restore rebuilds for a store kept in write order: each
/// source id to its place in `items` (`(source id, position)` pairs, oldest
/// first), checked as it is built: no source id twice, every position below
/// `next_position`, positions strictly increasing. `Err` says what does not
/// hold, for a restore to refuse the state with.
pub fn write_order_index<'a>(
    items: impl IntoIterator<Item = (&'a str, u64)>,
    next_position: u64,
) -> std::result::Result<HashMap<String, usize>, String> {
    let mut index = HashMap::new();
    let mut last: Option<u64> = None;
    for (i, (id, position)) in items.into_iter().enumerate() {
        if index.insert(id.to_string(), i).is_some() {
            return Err(format!("source id {id:?} appears twice"));
        }
        if position >= next_position {
            return Err(format!(
                "source id {id:?} has position {position} beyond next position {next_position}"
            ));
        }
        if last.is_some_and(|p| p >= position) {
            return Err(format!("source id {id:?} is out of write order"));
        }
        last = Some(position);
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::{Step, Turn};

    fn turn(id: &str) -> Event {
        Event::Turn(Turn {
            session_id: "s1".into(),
            session_date: None,
            speaker: "Ana".into(),
            text: "hello".into(),
            source_id: id.into(),
        })
    }

    #[test]
    fn refuses_repeats_stored_ids_and_invalid_events() {
        assert!(check_new_sources(&[], |_| true).is_ok());
        assert!(check_new_sources(&[turn("a"), turn("b")], |_| false).is_ok());
        let twice = check_new_sources(&[turn("a"), turn("a")], |_| false);
        assert!(matches!(&twice, Err(Error::InvalidInput(m)) if m.contains("appears twice")));
        let stored = check_new_sources(&[turn("b"), turn("a")], |id| id == "a");
        assert!(
            matches!(&stored, Err(Error::InvalidInput(m)) if m.contains("\"a\" is already stored"))
        );
        assert!(check_new_sources(&[turn("")], |_| false).is_err());
    }

    #[test]
    fn steps_are_checked_by_their_source_ids_too() {
        let step = Event::Step(Step {
            step: 1,
            action: "look".into(),
            observation: "a room".into(),
            source_id: "e1:1".into(),
        });
        assert!(check_new_sources(std::slice::from_ref(&step), |_| false).is_ok());
        assert!(check_new_sources(&[step.clone(), step], |_| false).is_err());
    }

    #[test]
    fn write_order_index_checks_ids_bounds_and_order() {
        let index = write_order_index([("a", 0), ("b", 2)], 3).unwrap();
        assert_eq!((index["a"], index["b"]), (0, 1));
        let twice = write_order_index([("a", 0), ("a", 1)], 3).unwrap_err();
        assert!(twice.contains("appears twice"), "{twice}");
        let beyond = write_order_index([("a", 3)], 3).unwrap_err();
        assert!(beyond.contains("beyond next position 3"), "{beyond}");
        let order = write_order_index([("a", 1), ("b", 1)], 3).unwrap_err();
        assert!(order.contains("out of write order"), "{order}");
    }
}
