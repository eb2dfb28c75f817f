//! The notes of one namespace: each unit's raw text (never rewritten), its own
//! note fields, the evolution edits other notes made to it, its links and
//! its embedding.
//!
//! **Provenance and forgetting.** Evolution rewrites a neighbour's context
//! and tags from a prompt that shows the new note and the other neighbours,
//! so an edit may copy their words. Every [`Edit`] therefore records
//! `derived_from`: the ids of every note whose text was in its prompt, closed
//! over the edits those notes carried then. When notes are forgotten, each
//! remaining note drops its first edit whose `derived_from` meets the
//! forgotten set **and every later edit** (a later edit was written from a
//! text that may hold the forgotten words), falling back to the last clean
//! edit or to its own fields; such notes are embedded again. Links to
//! forgotten notes are removed and queued evolutions that name them are
//! dropped or trimmed.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use submem_core::{cosine, TokenCounter};

use crate::note::{NoteFields, Writer};

/// One evolution of a note's context and tags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edit {
    /// The new note whose arrival triggered it.
    pub trigger: u64,
    /// Context after the edit.
    pub context: String,
    /// Tags after the edit.
    pub tags: Vec<String>,
    /// Every note whose text could have reached this edit.
    pub derived_from: BTreeSet<u64>,
}

/// One memory note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// Position in the namespace's history (write order).
    pub id: u64,
    /// Source id of the unit.
    pub source_id: String,
    /// The unit's rendered text, verbatim.
    pub raw: String,
    /// The note fields written for this unit.
    pub own: NoteFields,
    /// Who wrote `own`.
    pub writer: Writer,
    /// Evolution edits, oldest first; the newest is in force.
    pub edits: Vec<Edit>,
    /// Linked notes (both directions).
    pub links: BTreeSet<u64>,
    /// Embedding of the raw text and the current note fields.
    pub embedding: Vec<f32>,
    /// Tokens of `raw`.
    pub raw_tokens: usize,
}

impl Note {
    /// Context in force.
    pub fn context(&self) -> &str {
        self.edits
            .last()
            .map_or(self.own.context.as_str(), |e| e.context.as_str())
    }

    /// Tags in force.
    pub fn tags(&self) -> &[String] {
        self.edits.last().map_or(&self.own.tags, |e| &e.tags)
    }

    /// Notes whose text may have reached this note's current fields (its own
    /// id included).
    pub fn provenance(&self) -> BTreeSet<u64> {
        let mut s: BTreeSet<u64> = self
            .edits
            .iter()
            .flat_map(|e| e.derived_from.iter().copied())
            .collect();
        s.insert(self.id);
        s
    }

    /// The note line shown under the raw text.
    pub fn note_line(&self) -> String {
        let tags = self.tags();
        if tags.is_empty() {
            format!("  note: {}", self.context())
        } else {
            format!("  note: {} [tags: {}]", self.context(), tags.join(", "))
        }
    }

    /// Raw text and note line: what a top-k read shows.
    pub fn rendered(&self) -> String {
        format!("{}\n{}", self.raw, self.note_line())
    }

    /// The text embedded: raw text, context, keywords and tags (no field
    /// labels, which every note would share).
    pub fn embed_text(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}",
            self.raw,
            self.context(),
            self.own.keywords.join(", "),
            self.tags().join(", ")
        )
    }

    /// Approximate heap bytes.
    pub fn bytes(&self) -> u64 {
        let strings = self.source_id.len()
            + self.raw.len()
            + self.own.context.len()
            + self.own.keywords.iter().map(String::len).sum::<usize>()
            + self.own.tags.iter().map(String::len).sum::<usize>();
        let edits: usize = self
            .edits
            .iter()
            .map(|e| {
                e.context.len()
                    + e.tags.iter().map(String::len).sum::<usize>()
                    + e.derived_from.len() * 8
                    + 64
            })
            .sum();
        (std::mem::size_of::<Note>()
            + strings
            + edits
            + self.links.len() * 8
            + self.embedding.len() * 4) as u64
    }
}

/// An evolution waiting for `manage()`: the new note and the neighbours
/// close enough to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingEvolution {
    /// The new note.
    pub new_note: u64,
    /// Its close neighbours, most similar first.
    pub neighbours: Vec<u64>,
}

/// The memory of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Space {
    /// Notes by id (time order).
    pub notes: BTreeMap<u64, Note>,
    /// Id of each source id.
    pub by_source: HashMap<String, u64>,
    /// Next id to give.
    pub next_id: u64,
    /// Evolutions queued by writes.
    pub pending: Vec<PendingEvolution>,
}

impl Space {
    /// The `n` notes most similar to `v` (cosine, ties to the older note),
    /// excluding `skip`.
    pub fn nearest(&self, v: &[f32], n: usize, skip: Option<u64>) -> Vec<(u64, f32)> {
        let mut all: Vec<(u64, f32)> = self
            .notes
            .values()
            .filter(|x| Some(x.id) != skip)
            .map(|x| (x.id, cosine(v, &x.embedding)))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    /// Removes the notes of `source_ids` and repairs what derived from them;
    /// returns the number removed and the ids of notes whose fields changed
    /// (to be embedded again).
    pub fn forget(&mut self, source_ids: &[String]) -> (usize, Vec<u64>) {
        let gone: BTreeSet<u64> = source_ids
            .iter()
            .filter_map(|s| self.by_source.remove(s))
            .collect();
        for id in &gone {
            self.notes.remove(id);
        }
        if gone.is_empty() {
            return (0, Vec::new());
        }
        let mut repaired = Vec::new();
        for note in self.notes.values_mut() {
            note.links.retain(|l| !gone.contains(l));
            if let Some(first) = note
                .edits
                .iter()
                .position(|e| e.trigger_or_source_in(&gone))
            {
                note.edits.truncate(first);
                repaired.push(note.id);
            }
        }
        self.pending.retain_mut(|p| {
            p.neighbours.retain(|n| !gone.contains(n));
            !gone.contains(&p.new_note) && !p.neighbours.is_empty()
        });
        (gone.len(), repaired)
    }

    /// Tokens of raw texts and of current note lines.
    pub fn tokens(&self, counter: &dyn TokenCounter) -> (u64, u64) {
        let input: u64 = self.notes.values().map(|n| n.raw_tokens as u64).sum();
        let notes: u64 = self
            .notes
            .values()
            .map(|n| counter.count(&n.note_line()) as u64)
            .sum();
        (input, input + notes)
    }
}

impl Edit {
    fn trigger_or_source_in(&self, gone: &BTreeSet<u64>) -> bool {
        gone.contains(&self.trigger) || self.derived_from.iter().any(|d| gone.contains(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(id: u64) -> Note {
        Note {
            id,
            source_id: format!("s{id}"),
            raw: format!("raw {id}"),
            own: NoteFields {
                context: format!("own {id}"),
                keywords: vec![],
                tags: vec![],
            },
            writer: Writer::Rule,
            edits: vec![],
            links: BTreeSet::new(),
            embedding: vec![1.0],
            raw_tokens: 2,
        }
    }

    fn edit(trigger: u64, derived: &[u64], text: &str) -> Edit {
        Edit {
            trigger,
            context: text.into(),
            tags: vec![],
            derived_from: derived.iter().copied().collect(),
        }
    }

    #[test]
    fn forgetting_drops_derived_edits_and_all_later_ones() {
        let mut s = Space::default();
        for id in 0..4 {
            let mut n = note(id);
            n.links = (0..4).filter(|&x| x != id).collect();
            s.by_source.insert(n.source_id.clone(), id);
            s.notes.insert(id, n);
        }
        let n0 = s.notes.get_mut(&0).unwrap();
        n0.edits.push(edit(1, &[0, 1], "from one"));
        n0.edits.push(edit(2, &[0, 1, 2], "from two after one"));
        let n3 = s.notes.get_mut(&3).unwrap();
        n3.edits.push(edit(2, &[2, 3], "from two"));
        s.pending.push(PendingEvolution {
            new_note: 3,
            neighbours: vec![1],
        });
        let (n, repaired) = s.forget(&["s1".into()]);
        assert_eq!((n, repaired), (1, vec![0]));
        assert_eq!(s.notes[&0].context(), "own 0");
        assert_eq!(s.notes[&3].context(), "from two");
        assert!(s.notes.values().all(|n| !n.links.contains(&1)));
        assert!(s.pending.is_empty());
        assert_eq!(s.forget(&["s1".into()]).0, 0);
    }
}
