//! The check every substrate runs on a write batch before storing anything,
//! so that a write lands whole or not at all: every event valid
//! ([`Event::validate`]), no source id twice in the batch, none already
//! stored in the namespace. Each substrate says what "already stored" means
//! for its own store through a closure.

use std::collections::HashSet;
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
}
