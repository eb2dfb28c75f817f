//! The text analyzer of M2 (simple tokenizer → long-token removal → lower
//! case → the configured stop words) and the per-namespace BM25 statistics kept
//! beside the index.
//!
//! tantivy computes BM25's IDF and average length over the whole index; one
//! index serves every namespace here, so those statistics would mix tenants
//! and a namespace's ranking would depend on what others wrote. Each
//! namespace therefore keeps its own document count, token count and
//! document frequencies (from the same analyzer, so they count exactly what
//! tantivy indexes), and reads hand them to tantivy through
//! [`Bm25StatisticsProvider`].

use std::collections::HashMap;
use std::sync::OnceLock;
use submem_kit::text::StopWords;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::Field;
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, SimpleTokenizer, StopWordFilter, TextAnalyzer,
};
use tantivy::Term;

use super::config::SparseConfig;

/// Name under which the analyzer is registered in the index.
pub(crate) const ANALYZER_NAME: &str = "submem_en";

/// The stop-word filter of `list`, built once per process and shared (the
/// filter holds its word set behind an `Arc`): every M2 instance and the
/// index it registers its analyzer with would otherwise own a set of its own,
/// about 8 KiB for the English list, and a server holds one instance per
/// namespace.
fn stop_filter(list: StopWords) -> Option<StopWordFilter> {
    static ENGLISH: OnceLock<StopWordFilter> = OnceLock::new();
    static LUCENE: OnceLock<StopWordFilter> = OnceLock::new();
    let cell = match list {
        StopWords::English => &ENGLISH,
        StopWords::Lucene => &LUCENE,
        StopWords::None => return None,
    };
    let filter =
        cell.get_or_init(|| StopWordFilter::remove(list.words().iter().map(|w| (*w).to_string())));
    Some(filter.clone())
}

/// Builds the analyzer for `cfg`.
pub(crate) fn build_analyzer(cfg: &SparseConfig) -> TextAnalyzer {
    let base = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(cfg.max_token_bytes))
        .filter(LowerCaser);
    match stop_filter(cfg.stop_words) {
        None => base.build(),
        Some(filter) => base.filter(filter).build(),
    }
}

/// Every token `analyzer` emits for `text`, repeats included.
pub(crate) fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    stream.process(&mut |t| out.push(t.text.clone()));
    out
}

/// BM25 statistics of one namespace's live documents.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NsStats {
    /// Live documents.
    pub docs: u64,
    /// Tokens over all live documents.
    pub tokens: u64,
    /// Term → live documents containing it.
    pub doc_freq: HashMap<String, u64>,
}

impl NsStats {
    /// Adds a document with these tokens.
    pub fn add(&mut self, doc_tokens: &[String]) {
        self.docs += 1;
        self.tokens += doc_tokens.len() as u64;
        let mut distinct: Vec<&String> = doc_tokens.iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        for t in distinct {
            *self.doc_freq.entry(t.clone()).or_insert(0) += 1;
        }
    }

    /// Removes a document added with these tokens.
    pub fn remove(&mut self, doc_tokens: &[String]) {
        self.docs = self.docs.saturating_sub(1);
        self.tokens = self.tokens.saturating_sub(doc_tokens.len() as u64);
        let mut distinct: Vec<&String> = doc_tokens.iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        for t in distinct {
            if let Some(n) = self.doc_freq.get_mut(t.as_str()) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.doc_freq.remove(t.as_str());
                }
            }
        }
    }

    /// Documents containing `term`.
    pub fn df(&self, term: &str) -> u64 {
        self.doc_freq.get(term).copied().unwrap_or(0)
    }

    /// Approximate heap bytes of the statistics.
    pub fn heap_bytes(&self) -> u64 {
        self.doc_freq
            .keys()
            .map(|k| (k.capacity() + 40) as u64)
            .sum()
    }
}

/// Serves one namespace's statistics to tantivy's BM25 weight.
pub(crate) struct NsStatsProvider<'a> {
    pub stats: &'a NsStats,
    pub text: Field,
}

impl Bm25StatisticsProvider for NsStatsProvider<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        // Only the text field is ever scored; keep the mean length positive.
        Ok(if field == self.text {
            self.stats.tokens.max(1)
        } else {
            self.stats.docs.max(1)
        })
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.stats.docs.max(1))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let df = if term.field() == self.text {
            term.value().as_str().map_or(0, |t| self.stats.df(t))
        } else {
            self.stats.docs
        };
        // tantivy asserts df ≤ N.
        Ok(df.min(self.stats.docs.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyzer_lowercases_and_drops_stop_words() {
        let mut a = build_analyzer(&SparseConfig::default());
        assert_eq!(
            tokens(&mut a, "The Cat AND the hat: \"quoted\" (x) naïve"),
            vec!["cat", "hat", "quoted", "x", "naïve"]
        );
        assert_eq!(
            tokens(&mut a, "When did you say I didn't go?"),
            vec!["say", "go"]
        );
        let mut lucene =
            build_analyzer(&SparseConfig::default().with_stop_words(StopWords::Lucene));
        assert_eq!(
            tokens(&mut lucene, "When did the cat"),
            vec!["when", "did", "cat"]
        );
        let mut keep = build_analyzer(&SparseConfig::default().with_stop_words(StopWords::None));
        assert_eq!(tokens(&mut keep, "The cat"), vec!["the", "cat"]);
        let long = "a".repeat(41);
        assert!(tokens(&mut a, &long).is_empty());
    }

    #[test]
    fn stats_add_and_remove() {
        let mut s = NsStats::default();
        let d1: Vec<String> = ["cat", "cat", "hat"].map(String::from).to_vec();
        let d2: Vec<String> = ["cat"].map(String::from).to_vec();
        s.add(&d1);
        s.add(&d2);
        assert_eq!((s.docs, s.tokens, s.df("cat"), s.df("hat")), (2, 4, 2, 1));
        s.remove(&d1);
        assert_eq!((s.docs, s.tokens, s.df("cat"), s.df("hat")), (1, 1, 1, 0));
        assert!(!s.doc_freq.contains_key("hat"));
    }
}
