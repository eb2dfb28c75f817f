//! What the flat substrates store per event, and the checks shared by every
//! write: a batch is validated as a whole (empty or duplicate source ids,
//! within the batch or against what is already stored) before anything is
//! stored.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use submem_core::{Error, Event, Result};

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
}

/// Validates a batch: every event valid, no source id twice in the batch,
/// none already stored (`exists`).
pub(crate) fn validate_batch(events: &[Event], exists: impl Fn(&str) -> bool) -> Result<()> {
    let mut seen: HashSet<&str> = HashSet::with_capacity(events.len());
    for e in events {
        e.validate()?;
        let id = e.source_id();
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
    fn batch_validation() {
        assert!(validate_batch(&[turn("a"), turn("b")], |_| false).is_ok());
        assert!(validate_batch(&[turn("a"), turn("a")], |_| false).is_err());
        assert!(validate_batch(&[turn("a")], |id| id == "a").is_err());
        assert!(validate_batch(&[turn("")], |_| false).is_err());
    }
}
