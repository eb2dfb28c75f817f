//! Pages: what ReadAgent calls the "episode pagination" of the input. The
//! history is grouped into pages of about [`GistConfig::page_tokens`] tokens,
//! cut only between events (turns or steps), and never across a session
//! (conversations) or an episode (agents) unless a session is tiny.
//!
//! **The rule** ([`paginate`]): consecutive events of one session form a
//! *run*. A run is split into `⌈tokens / page_tokens⌉` pages of balanced size
//! (each page is filled up to `tokens / n`, never beyond `page_tokens` unless
//! one event alone is longer). A run shorter than
//! [`GistConfig::tiny_session_tokens`] is appended to the previous page when
//! both fit in `page_tokens`: the only case where a page spans two sessions.
//! When a write continues the session of the namespace's newest page (or
//! brings a tiny session that fits there), that page is *reopened*: its events
//! and the new ones are paginated together and its gist is written again.
//!
//! ReadAgent lets the LLM choose pause points; `docs/METHODS.md` fixes ~600-token
//! pages cut at turn boundaries instead, which costs no LLM calls and is
//! reproducible; preferring session boundaries keeps a page's gist about one
//! conversation.
//!
//! Agent steps have no session id: an episode starts whenever the step
//! number does not increase.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use submem_core::Event;
use submem_kit::chunk;
use submem_kit::text::content_words;

use crate::GistConfig;

/// One stored event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The event's source id.
    pub source_id: String,
    /// `Event::render()`: what an expanded page shows.
    pub text: String,
    /// Budget tokens of `text`.
    pub tokens: u32,
    /// Session id (turns) or episode key (steps).
    pub session: String,
    /// Session date, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// Speaker (turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// Step number (steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// Byte offset in `text` where the utterance or the `> action` begins.
    pub body_offset: u32,
}

impl Entry {
    /// Builds the entry of `event`; `session` is its session or episode key.
    pub fn new(event: &Event, session: String, tokens: u32) -> Self {
        let text = event.render();
        let (date, speaker, step, prefix) = match event {
            Event::Turn(t) => {
                let prefix = match &t.session_date {
                    Some(d) => format!("[{d}] {}: ", t.speaker),
                    None => format!("{}: ", t.speaker),
                };
                (
                    t.session_date.clone(),
                    Some(t.speaker.clone()),
                    None,
                    prefix,
                )
            }
            Event::Step(s) => (None, None, Some(s.step), format!("[step {}] ", s.step)),
        };
        let body_offset = if text.starts_with(&prefix) {
            u32::try_from(prefix.len()).unwrap_or(0)
        } else {
            0
        };
        Entry {
            source_id: event.source_id().to_string(),
            text,
            tokens,
            session,
            date,
            speaker,
            step,
            body_offset,
        }
    }

    /// The utterance (turns) or `> action` and observation (steps).
    pub fn body(&self) -> &str {
        self.text
            .get(self.body_offset as usize..)
            .unwrap_or(&self.text)
    }
}

/// Who wrote a gist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GistWriter {
    /// The LLM (reply cut at its first sentence and the word limit).
    Llm,
    /// The rule writer (`gist::rule_gist`).
    Rule,
}

/// One page and its gist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Page {
    /// Stable id within the namespace (page numbers shown to the LLM are
    /// positions, 1-based, and may shift after forgetting).
    pub id: u64,
    /// The events, oldest first.
    pub entries: Vec<Entry>,
    /// Budget tokens of [`Page::raw_text`].
    pub tokens: u32,
    /// The one-sentence gist.
    pub gist: String,
    /// Who wrote it.
    pub writer: GistWriter,
    /// The page lost events since its gist was written by the LLM: the gist
    /// shown is the rule gist of what is left, and `manage` asks the LLM again.
    #[serde(default)]
    pub stale: bool,
    /// Set by `manage`: the id of an earlier page with the same gist text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dup_of: Option<u64>,
    /// Term frequencies of gist + raw text (BM25 fallback); rebuilt on load.
    #[serde(skip)]
    pub terms: HashMap<String, u32>,
    /// Number of content words behind `terms`.
    #[serde(skip)]
    pub length: u32,
}

impl Page {
    /// The page's raw text: its events' rendered texts, one per line.
    pub fn raw_text(&self) -> String {
        self.entries
            .iter()
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Session date of the page's first dated event.
    pub fn date(&self) -> Option<&str> {
        self.entries.iter().find_map(|e| e.date.as_deref())
    }

    /// Rebuilds the BM25 term frequencies from the gist and the raw text.
    pub fn reindex(&mut self) {
        self.terms.clear();
        let mut n = 0u32;
        for text in std::iter::once(self.gist.as_str()).chain(self.entries.iter().map(|e| e.body()))
        {
            for w in content_words(text) {
                *self.terms.entry(w).or_default() += 1;
                n += 1;
            }
        }
        self.length = n;
    }
}

/// Splits `entries` (one session or a mix of tiny ones) into pages of
/// balanced size: `n = ⌈total / page_tokens⌉` pages filled up to `total / n`.
fn split_balanced(entries: Vec<Entry>, page_tokens: usize) -> Vec<Vec<Entry>> {
    let total: usize = entries.iter().map(|e| e.tokens as usize).sum();
    let n = total.div_ceil(page_tokens.max(1)).max(1);
    let target = total.div_ceil(n);
    let mut pages = Vec::new();
    let mut current: Vec<Entry> = Vec::new();
    let mut used = 0usize;
    for e in entries {
        let t = e.tokens as usize;
        if !current.is_empty() && (used >= target || used + t > page_tokens) {
            pages.push(std::mem::take(&mut current));
            used = 0;
        }
        used += t;
        current.push(e);
    }
    if !current.is_empty() {
        pages.push(current);
    }
    pages
}

fn tokens_of(entries: &[Entry]) -> usize {
    entries.iter().map(|e| e.tokens as usize).sum()
}

/// The result of [`paginate`].
#[derive(Debug, Default)]
pub(crate) struct Pagination {
    /// Whether the namespace's newest page was reopened: then `pages[0]`
    /// starts with its events and replaces it.
    pub reopened: bool,
    /// New pages (event groups), oldest first.
    pub pages: Vec<Vec<Entry>>,
}

/// Groups `new` events after `newest` (the namespace's newest page, if any)
/// following the module's rule.
pub(crate) fn paginate(newest: Option<&[Entry]>, new: Vec<Entry>, cfg: &GistConfig) -> Pagination {
    let cuts = chunk::runs(&new, None, |a, b| a.session == b.session, |_, _| 0);
    let mut entries = new.into_iter();
    let runs: Vec<Vec<Entry>> = cuts
        .iter()
        .map(|r| entries.by_ref().take(r.len()).collect())
        .collect();
    // groups[0] is the newest stored page while `touched` says whether it changed.
    let mut groups: Vec<Vec<Entry>> = Vec::new();
    let mut has_old = false;
    let mut touched = false;
    if let Some(old) = newest.filter(|p| !p.is_empty()) {
        groups.push(old.to_vec());
        has_old = true;
    }
    for run in runs {
        let last_is_old = has_old && groups.len() == 1;
        let same_session = groups
            .last()
            .and_then(|g| g.last())
            .is_some_and(|l| run.first().is_some_and(|f| f.session == l.session));
        let run_tokens = tokens_of(&run);
        if same_session {
            let mut combined = groups.pop().unwrap_or_default();
            combined.extend(run);
            if last_is_old {
                touched = true;
            }
            groups.extend(split_balanced(combined, cfg.page_tokens));
        } else if run_tokens < cfg.tiny_session_tokens
            && groups
                .last()
                .is_some_and(|g| tokens_of(g) + run_tokens <= cfg.page_tokens)
        {
            if last_is_old {
                touched = true;
            }
            if let Some(g) = groups.last_mut() {
                g.extend(run);
            }
        } else {
            groups.extend(split_balanced(run, cfg.page_tokens));
        }
    }
    if has_old && !touched {
        groups.remove(0);
    }
    Pagination {
        reopened: has_old && touched,
        pages: groups,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, session: &str, tokens: u32) -> Entry {
        Entry {
            source_id: id.into(),
            text: format!("A: {id}"),
            tokens,
            session: session.into(),
            date: None,
            speaker: Some("A".into()),
            step: None,
            body_offset: 3,
        }
    }

    fn ids(p: &Pagination) -> Vec<Vec<&str>> {
        p.pages
            .iter()
            .map(|g| g.iter().map(|e| e.source_id.as_str()).collect())
            .collect()
    }

    #[test]
    fn sessions_are_split_into_balanced_pages() {
        let cfg = GistConfig::default();
        // 700 tokens in one session: two pages of ~350, not 600 + 100.
        let new: Vec<Entry> = (0..7).map(|i| entry(&format!("a{i}"), "s1", 100)).collect();
        let p = paginate(None, new, &cfg);
        assert!(!p.reopened);
        assert_eq!(p.pages.len(), 2);
        assert_eq!(tokens_of(&p.pages[0]), 400);
        assert_eq!(tokens_of(&p.pages[1]), 300);
    }

    #[test]
    fn pages_never_span_sessions_unless_tiny() {
        let cfg = GistConfig::default();
        let mut new: Vec<Entry> = (0..3).map(|i| entry(&format!("a{i}"), "s1", 100)).collect();
        new.extend((0..3).map(|i| entry(&format!("b{i}"), "s2", 100)));
        new.push(entry("c0", "s3", 50)); // tiny: joins s2's page
        let p = paginate(None, new, &cfg);
        assert_eq!(
            ids(&p),
            vec![vec!["a0", "a1", "a2"], vec!["b0", "b1", "b2", "c0"]]
        );
    }

    #[test]
    fn a_write_continuing_the_session_reopens_the_newest_page() {
        let cfg = GistConfig::default();
        let old = vec![entry("a0", "s1", 100), entry("a1", "s1", 100)];
        let p = paginate(Some(&old), vec![entry("a2", "s1", 100)], &cfg);
        assert!(p.reopened);
        assert_eq!(ids(&p), vec![vec!["a0", "a1", "a2"]]);
        // A new session leaves the old page alone.
        let p = paginate(Some(&old), vec![entry("b0", "s2", 300)], &cfg);
        assert!(!p.reopened);
        assert_eq!(ids(&p), vec![vec!["b0"]]);
    }

    #[test]
    fn a_single_long_event_makes_its_own_page() {
        let cfg = GistConfig::default();
        let new = vec![
            entry("a0", "s1", 100),
            entry("a1", "s1", 2000),
            entry("a2", "s1", 100),
        ];
        let p = paginate(None, new, &cfg);
        assert_eq!(ids(&p), vec![vec!["a0"], vec!["a1"], vec!["a2"]]);
    }
}
