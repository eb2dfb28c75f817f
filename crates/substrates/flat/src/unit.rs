//! What the flat substrates store per event, and the helpers their writes
//! share: a batch is validated as a whole (empty or duplicate source ids,
//! within the batch or against what is already stored) with
//! [`submem_kit::batch::check_new_sources`] before anything is stored;
//! [`exists_in`] says what "already stored" means for a map of ids.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use submem_core::{Error, Event, Result};
use submem_kit::RankedUnit;

/// One stored event: its rendered text and where it sits in its namespace's
/// history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredUnit {
    /// The event's source id.
    pub source_id: String,
    /// `Event::render()`: what is shown to the reader.
    pub text: String,
    /// Write order within the namespace (0-based, never reused).
    pub position: u64,
    /// Budget tokens of `text`, counted once at write time.
    pub tokens: u32,
}

impl StoredUnit {
    /// Approximate heap bytes held by this unit.
    pub fn heap_bytes(&self) -> u64 {
        (self.source_id.capacity() + self.text.capacity() + std::mem::size_of::<Self>()) as u64
    }

    /// This unit as a read hit at `position` with `score`, paired with its
    /// cached token count (what [`crate::fill::ReadDepth::pick`] takes).
    pub fn ranked(&self, position: u64, score: f32) -> (RankedUnit, u32) {
        let unit = RankedUnit {
            position,
            source_id: self.source_id.clone(),
            text: self.text.clone(),
            score,
        };
        (unit, self.tokens)
    }
}

/// A unit to store: the id it is found by and the text a read shows. A
/// write of events stores one per event (`Event::render()` under its
/// source id); the piece baselines store one per piece.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewUnit {
    /// The id the unit is stored, ranked and forgotten under.
    pub source_id: String,
    /// What a read shows.
    pub text: String,
}

impl NewUnit {
    /// One unit per event: its rendered text under its source id.
    pub fn from_events(events: &[Event]) -> Vec<NewUnit> {
        events
            .iter()
            .map(|e| NewUnit {
                source_id: e.source_id().to_string(),
                text: e.render(),
            })
            .collect()
    }
}

/// Checks unit ids as [`check_new_sources`](submem_kit::batch::check_new_sources)
/// checks events: none empty, none twice, none already stored.
pub(crate) fn check_new_ids(units: &[NewUnit], exists: impl Fn(&str) -> bool) -> Result<()> {
    if units.iter().any(|u| u.source_id.is_empty()) {
        return Err(Error::InvalidInput("a unit has an empty source id".into()));
    }
    submem_kit::batch::check_new_ids(units.iter().map(|u| u.source_id.as_str()), exists)
}

/// Checks source ids against a map of stored ids.
pub(crate) fn exists_in<V>(ids: Option<&HashMap<String, V>>) -> impl Fn(&str) -> bool + '_ {
    move |id| ids.is_some_and(|m| m.contains_key(id))
}

/// Saturating conversion of a token count.
pub(crate) fn tokens_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Bytes of every regular file under `dir` (recursively); 0 when unreadable.
pub(crate) fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::Turn;
    use submem_kit::batch::check_new_sources;

    fn turn(id: &str) -> Event {
        Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "A".into(),
            text: "hello".into(),
            source_id: id.into(),
        })
    }

    #[test]
    fn batch_validation_against_stored_ids() {
        let stored: HashMap<String, u64> = [("a".to_string(), 0)].into();
        assert!(check_new_sources(&[turn("b")], exists_in(Some(&stored))).is_ok());
        assert!(check_new_sources(&[turn("a")], exists_in(Some(&stored))).is_err());
        assert!(check_new_sources(&[turn("a")], exists_in::<u64>(None)).is_ok());
        assert!(check_new_sources(&[turn("b"), turn("b")], exists_in(Some(&stored))).is_err());
    }

    #[test]
    fn unit_ids_are_checked_like_source_ids() {
        let stored: HashMap<String, u64> = [("a".to_string(), 0)].into();
        let units = |ids: &[&str]| -> Vec<NewUnit> {
            ids.iter()
                .map(|id| NewUnit {
                    source_id: id.to_string(),
                    text: "t".into(),
                })
                .collect()
        };
        assert!(check_new_ids(&units(&["b", "c"]), exists_in(Some(&stored))).is_ok());
        assert!(check_new_ids(&units(&["a"]), exists_in(Some(&stored))).is_err());
        assert!(check_new_ids(&units(&["b", "b"]), exists_in::<u64>(None)).is_err());
        assert!(check_new_ids(&units(&[""]), exists_in::<u64>(None)).is_err());
        let from = NewUnit::from_events(&[turn("x")]);
        assert_eq!(from[0].source_id, "x");
        assert_eq!(from[0].text, "A: hello");
    }
}
