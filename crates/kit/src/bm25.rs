//! Exact Okapi BM25 with FlexA-Mem's settings (k1 = 1.2, b = 0.75, query as
//! a set of lower-cased content words, stop words and markup removed on both
//! sides, see [`crate::text`]), as a small in-memory inverted index over
//! documents of any key type, so that a substrate can keep one per namespace,
//! IDF covers its whole store and the tie-break rules stay its own. IDF is
//! Lucene's `ln(1 + (N − n + 0.5)/(n + 0.5))`, which is never negative.

use std::collections::{BTreeMap, HashMap};

use crate::text::{content_words_with, StopWords};

/// BM25 term-frequency saturation.
pub const K1: f32 = 1.2;
/// BM25 length normalisation.
pub const B: f32 = 0.75;

/// An inverted index over documents keyed by `K`. Documents get dense
/// ordinals so that scoring accumulates into a flat array; each document also
/// keeps its own term frequencies, so a few known documents can be scored
/// without walking posting lists. Scores are summed in sorted term order, so
/// they are bit-for-bit deterministic.
#[derive(Debug, Clone)]
pub struct Bm25Index<K: Ord + Copy + std::hash::Hash> {
    postings: HashMap<String, Vec<(u32, u32)>>,
    docs: Vec<Option<Doc<K>>>,
    ordinal: HashMap<K, u32>,
    free: Vec<u32>,
    total_length: u64,
    stop_words: StopWords,
}

#[derive(Debug, Clone)]
struct Doc<K> {
    key: K,
    len: u32,
    /// Term frequencies, sorted by term.
    tf: Vec<(String, u32)>,
}

impl<K: Ord + Copy + std::hash::Hash> Default for Bm25Index<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Copy + std::hash::Hash> Bm25Index<K> {
    /// An empty index that drops Lucene's stop words ([`StopWords::Lucene`]).
    pub fn new() -> Self {
        Self::with_stop_words(StopWords::Lucene)
    }

    /// An empty index that drops `stop_words` from the documents (a query
    /// term on the list then simply matches nothing).
    pub fn with_stop_words(stop_words: StopWords) -> Self {
        Bm25Index {
            postings: HashMap::new(),
            docs: Vec::new(),
            ordinal: HashMap::new(),
            free: Vec::new(),
            total_length: 0,
            stop_words,
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.ordinal.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.ordinal.is_empty()
    }

    /// Adds (or replaces) document `key` with `text`.
    pub fn insert(&mut self, key: K, text: &str) {
        self.remove(key);
        let words = content_words_with(text, self.stop_words);
        let mut tf: BTreeMap<String, u32> = BTreeMap::new();
        for w in &words {
            *tf.entry(w.clone()).or_default() += 1;
        }
        let ord = match self.free.pop() {
            Some(o) => o,
            None => {
                self.docs.push(None);
                (self.docs.len() - 1) as u32
            }
        };
        for (w, n) in &tf {
            self.postings.entry(w.clone()).or_default().push((ord, *n));
        }
        self.total_length += words.len() as u64;
        if let Some(slot) = self.docs.get_mut(ord as usize) {
            *slot = Some(Doc {
                key,
                len: words.len() as u32,
                tf: tf.into_iter().collect(),
            });
        }
        self.ordinal.insert(key, ord);
    }

    /// Removes document `key` if present.
    pub fn remove(&mut self, key: K) {
        let Some(ord) = self.ordinal.remove(&key) else {
            return;
        };
        let Some(doc) = self.docs.get_mut(ord as usize).and_then(Option::take) else {
            return;
        };
        self.total_length -= u64::from(doc.len);
        for (t, _) in &doc.tf {
            if let Some(p) = self.postings.get_mut(t) {
                p.retain(|(o, _)| *o != ord);
                if p.is_empty() {
                    self.postings.remove(t);
                }
            }
        }
        self.free.push(ord);
    }

    fn idf(&self, n: usize) -> f32 {
        let big_n = self.len() as f32;
        let n = n as f32;
        (1.0 + (big_n - n + 0.5) / (n + 0.5)).ln()
    }

    fn avgdl(&self) -> f32 {
        (self.total_length as f32 / self.len().max(1) as f32).max(1e-6)
    }

    fn term_score(&self, idf: f32, tf: u32, dl: u32, avgdl: f32) -> f32 {
        let tf = tf as f32;
        idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl as f32 / avgdl))
    }

    /// BM25 scores of every document matching at least one of `terms` (a
    /// deduplicated, sorted set), in no particular order.
    pub fn score(&self, terms: &[String]) -> Vec<(K, f32)> {
        if self.is_empty() {
            return Vec::new();
        }
        let avgdl = self.avgdl();
        let mut acc = vec![0f32; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        for t in terms {
            let Some(p) = self.postings.get(t) else {
                continue;
            };
            let idf = self.idf(p.len());
            for &(ord, tf) in p {
                let Some(Some(doc)) = self.docs.get(ord as usize) else {
                    continue;
                };
                let a = &mut acc[ord as usize];
                if *a == 0.0 {
                    touched.push(ord);
                }
                *a += self.term_score(idf, tf, doc.len, avgdl);
            }
        }
        touched
            .into_iter()
            .filter_map(|o| {
                let doc = self.docs.get(o as usize)?.as_ref()?;
                Some((doc.key, acc[o as usize]))
            })
            .collect()
    }

    /// BM25 score of one document (0 when absent or unmatched).
    pub fn score_doc(&self, terms: &[String], key: K) -> f32 {
        let Some(doc) = self
            .ordinal
            .get(&key)
            .and_then(|o| self.docs.get(*o as usize))
            .and_then(Option::as_ref)
        else {
            return 0.0;
        };
        let avgdl = self.avgdl();
        terms
            .iter()
            .filter_map(|t| {
                let i = doc.tf.binary_search_by(|(w, _)| w.as_str().cmp(t)).ok()?;
                let tf = doc.tf[i].1;
                let df = self.postings.get(t).map_or(1, Vec::len);
                Some(self.term_score(self.idf(df), tf, doc.len, avgdl))
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::query_terms;

    #[test]
    fn bm25_matches_a_hand_computation() {
        let mut ix = Bm25Index::new();
        ix.insert(1u32, "red key");
        ix.insert(2, "blue box blue");
        ix.insert(3, "red red red box");
        let s: BTreeMap<u32, f32> = ix.score(&query_terms("red")).into_iter().collect();
        assert!((ix.score_doc(&query_terms("red"), 3) - s[&3]).abs() < 1e-6);
        // N = 3, n(red) = 2, avgdl = (2 + 3 + 4) / 3 = 3.
        let idf = (1.0f32 + (3.0 - 2.0 + 0.5) / (2.0 + 0.5)).ln();
        let d1 = idf * 1.0 * 2.2 / (1.0 + 1.2 * (0.25 + 0.75 * 2.0 / 3.0));
        let d3 = idf * 3.0 * 2.2 / (3.0 + 1.2 * (0.25 + 0.75 * 4.0 / 3.0));
        assert!((s[&1] - d1).abs() < 1e-6);
        assert!((s[&3] - d3).abs() < 1e-6);
        assert!(!s.contains_key(&2));
    }

    #[test]
    fn removal_updates_statistics() {
        let mut ix = Bm25Index::new();
        ix.insert(1u32, "alpha beta");
        ix.insert(2, "alpha");
        ix.remove(1);
        assert_eq!(ix.len(), 1);
        assert!(ix.score(&query_terms("beta")).is_empty());
        ix.remove(2);
        assert!(ix.is_empty());
        assert!(ix.score(&query_terms("alpha")).is_empty());
    }
}
