//! One namespace's append-only buffer.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use submem_kit::batch::stored_ids;

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

impl Buffer {
    /// Rebuilds the id index after deserialisation; `Err` names a repeated id.
    pub fn reindex(&mut self) -> Result<(), String> {
        self.ids.clear();
        for (i, u) in self.units.iter().enumerate() {
            if self.ids.insert(u.source_id.clone(), i).is_some() {
                return Err(format!("source id {:?} appears twice", u.source_id));
            }
            if u.position >= self.next_position {
                return Err(format!(
                    "unit {:?} has position {} beyond next position {}",
                    u.source_id, u.position, self.next_position
                ));
            }
        }
        if self
            .units
            .windows(2)
            .any(|w| w[0].position >= w[1].position)
        {
            return Err("units are not in write order".into());
        }
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
        self.ids = self
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| (u.source_id.clone(), i))
            .collect();
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
