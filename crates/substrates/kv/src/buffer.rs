//! One namespace's append-only buffer.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use submem_kit::batch::{stored_ids, write_order_index};

/// One stored event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Unit {
    /// The event's source id.
    pub source_id: String,
    /// `Event::render()`.
    pub text: String,
    /// Write order within the namespace.
    pub position: u64,
    /// Budget tokens of `text`.
    pub tokens: u32,
}

/// A namespace's history, oldest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Buffer {
    /// Units in write order.
    pub units: Vec<Unit>,
    /// Position the next unit gets.
    pub next_position: u64,
    /// Source ids present.
    #[serde(skip)]
    pub ids: HashMap<String, usize>,
}

/// Each source id to its place among `ids`: the index of a store that has
/// just dropped some of its entries (a restore checks more, with
/// [`write_order_index`]).
pub(crate) fn source_index<'a>(ids: impl Iterator<Item = &'a str>) -> HashMap<String, usize> {
    ids.enumerate().map(|(i, id)| (id.to_string(), i)).collect()
}

impl Buffer {
    /// Rebuilds the id index after deserialisation; `Err` names a repeated id.
    pub fn reindex(&mut self) -> Result<(), String> {
        let units = self
            .units
            .iter()
            .map(|u| (u.source_id.as_str(), u.position));
        self.ids = write_order_index(units, self.next_position)?;
        Ok(())
    }

    /// Appends units (texts and token counts given) and returns how many.
    pub fn append(&mut self, items: Vec<(String, String, u32)>) -> usize {
        let n = items.len();
        for (source_id, text, tokens) in items {
            self.ids.insert(source_id.clone(), self.units.len());
            self.units.push(Unit {
                source_id,
                text,
                position: self.next_position,
                tokens,
            });
            self.next_position += 1;
        }
        n
    }

    /// Removes the listed source ids; returns how many were present.
    pub fn forget(&mut self, source_ids: &[String]) -> usize {
        let drop = stored_ids(source_ids, |id| self.ids.contains_key(id));
        if drop.is_empty() {
            return 0;
        }
        self.units.retain(|u| !drop.contains(u.source_id.as_str()));
        self.ids = source_index(self.units.iter().map(|u| u.source_id.as_str()));
        drop.len()
    }

    /// Tokens of every stored unit.
    pub fn tokens(&self) -> u64 {
        self.units.iter().map(|u| u64::from(u.tokens)).sum()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> u64 {
        let units: u64 = self
            .units
            .iter()
            .map(|u| {
                (u.source_id.capacity() + u.text.capacity() + std::mem::size_of::<Unit>()) as u64
            })
            .sum();
        let ids: u64 = self.ids.keys().map(|k| (k.capacity() + 40) as u64).sum();
        units + ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_forget_and_reindex() {
        let mut b = Buffer::default();
        b.append(vec![
            ("a".into(), "x y".into(), 2),
            ("b".into(), "z".into(), 1),
            ("c".into(), "w".into(), 1),
        ]);
        assert_eq!(b.tokens(), 4);
        assert_eq!(b.forget(&["b".into(), "nope".into(), "b".into()]), 1);
        assert_eq!(b.units.len(), 2);
        assert_eq!(b.ids["c"], 1);
        assert_eq!(b.next_position, 3);
        let mut copy: Buffer = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        copy.reindex().unwrap();
        assert_eq!(copy.ids, b.ids);
        copy.units.push(copy.units[0].clone());
        assert!(copy.reindex().is_err());
    }
}
