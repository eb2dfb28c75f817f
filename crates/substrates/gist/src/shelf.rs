//! One namespace's pages ([`Shelf`]) and the persisted form of the whole
//! index, with the checks a restore runs before it replaces anything.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use submem_core::TokenCounter;

use crate::gist::rule_gist;
use crate::page::{GistWriter, Page};
use crate::text::{jaccard, normalise, word_set};

/// The pages of one namespace, in time order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Shelf {
    /// Pages, oldest first.
    pub pages: Vec<Page>,
    /// Id the next page gets.
    pub next_page_id: u64,
    /// Episodes of agent steps seen so far (for episode keys).
    pub episodes: u64,
    /// Source ids stored (rebuilt on load).
    #[serde(skip)]
    pub ids: HashSet<String>,
}

impl Shelf {
    /// Rebuilds the id set and the BM25 terms after loading; `Err` says
    /// which invariant the saved state breaks.
    pub fn rebuild(&mut self) -> Result<(), String> {
        self.ids.clear();
        let mut page_ids = HashSet::new();
        for p in &mut self.pages {
            if p.entries.is_empty() {
                return Err(format!("page {} has no events", p.id));
            }
            if p.id >= self.next_page_id || !page_ids.insert(p.id) {
                return Err(format!("page id {} is repeated or out of range", p.id));
            }
            for e in &p.entries {
                if !self.ids.insert(e.source_id.clone()) {
                    return Err(format!("source id {:?} appears twice", e.source_id));
                }
                if e.body_offset as usize > e.text.len()
                    || !e.text.is_char_boundary(e.body_offset as usize)
                {
                    return Err(format!("event {:?} has a bad body offset", e.source_id));
                }
            }
            p.reindex();
        }
        Ok(())
    }

    /// Removes the events in `drop` from every page. Pages left empty go;
    /// the others get the rule gist of what is left (so forgotten text never
    /// shows, not even inside an LLM gist) and are marked `stale` when an LLM
    /// can rewrite them at the next `manage`. Returns how many events went.
    pub fn forget(
        &mut self,
        drop: &HashSet<&str>,
        counter: &dyn TokenCounter,
        gist_words: usize,
        llm_available: bool,
    ) -> usize {
        let mut removed = 0;
        let mut changed: HashSet<u64> = HashSet::new();
        for p in &mut self.pages {
            let before = p.entries.len();
            p.entries.retain(|e| !drop.contains(e.source_id.as_str()));
            if p.entries.len() != before {
                removed += before - p.entries.len();
                changed.insert(p.id);
                if !p.entries.is_empty() {
                    p.tokens = u32::try_from(counter.count(&p.raw_text())).unwrap_or(u32::MAX);
                    p.gist = rule_gist(&p.entries, gist_words);
                    p.writer = GistWriter::Rule;
                    p.stale = llm_available;
                    p.dup_of = None;
                    p.reindex();
                }
            }
        }
        if removed == 0 {
            return 0;
        }
        self.pages.retain(|p| !p.entries.is_empty());
        for p in &mut self.pages {
            if p.dup_of.is_some_and(|d| changed.contains(&d)) {
                p.dup_of = None;
            }
        }
        for id in drop {
            self.ids.remove(*id);
        }
        removed
    }

    /// Text-level dedup of gists: a page whose gist equals an earlier one
    /// after normalisation, or shares at least `threshold` of its content
    /// words with it (token-set Jaccard), points to the earliest such page.
    /// Returns how many pages changed their mark.
    pub fn dedup(&mut self, threshold: f32) -> usize {
        let mut originals: Vec<(u64, String, HashSet<String>)> = Vec::new();
        let mut changed = 0;
        for p in &mut self.pages {
            let norm = normalise(&p.gist);
            let words = word_set(&p.gist);
            let found = originals
                .iter()
                .find(|(_, n, w)| *n == norm || jaccard(w, &words) >= threshold)
                .map(|(id, _, _)| *id);
            if found != p.dup_of {
                changed += 1;
                p.dup_of = found;
            }
            if found.is_none() {
                originals.push((p.id, norm, words));
            }
        }
        changed
    }

    /// Budget tokens of every stored event.
    pub fn input_tokens(&self) -> u64 {
        self.pages
            .iter()
            .flat_map(|p| &p.entries)
            .map(|e| u64::from(e.tokens))
            .sum()
    }

    /// Number of stored events.
    pub fn events(&self) -> usize {
        self.pages.iter().map(|p| p.entries.len()).sum()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> u64 {
        let pages: usize = self
            .pages
            .iter()
            .map(|p| {
                let entries: usize = p
                    .entries
                    .iter()
                    .map(|e| {
                        e.source_id.capacity()
                            + e.text.capacity()
                            + e.session.capacity()
                            + e.date.as_ref().map_or(0, String::capacity)
                            + e.speaker.as_ref().map_or(0, String::capacity)
                            + std::mem::size_of_val(e)
                    })
                    .sum();
                let terms: usize = p.terms.keys().map(|k| k.capacity() + 40).sum();
                entries + terms + p.gist.capacity() + std::mem::size_of::<Page>()
            })
            .sum();
        let ids: usize = self.ids.iter().map(|k| k.capacity() + 32).sum();
        (pages + ids) as u64
    }
}
