//! Exact Okapi BM25 over pieces with the paper's settings (k1 = 1.2,
//! b = 0.75, query as a set of lower-cased content words, stop words and
//! markup removed on both sides), as a small in-memory inverted index per
//! namespace so that IDF covers the whole store and the tie-break rules stay
//! ours. IDF is Lucene's `ln(1 + (N − n + 0.5)/(n + 0.5))`, which is never
//! negative.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// BM25 term-frequency saturation.
pub const K1: f32 = 1.2;
/// BM25 length normalisation.
pub const B: f32 = 0.75;

/// English stop words removed before BM25 (Lucene's classic English set,
/// the set tantivy users commonly pass to `StopWordFilter`).
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Lower-cased alphanumeric words of `text` without stop words. Markup
/// (punctuation, brackets, `>` prompts) never forms a word.
pub fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

/// The query as a set of content words (sorted, so scoring is deterministic).
pub fn query_terms(text: &str) -> Vec<String> {
    content_words(text)
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// An inverted index over documents keyed by `K` (ordered, so results are
/// deterministic). Each document also keeps its own term frequencies, so a
/// few known documents can be scored without walking posting lists.
#[derive(Debug, Clone, Default)]
pub struct Bm25Index<K: Ord + Copy + std::hash::Hash> {
    postings: HashMap<String, BTreeMap<K, u32>>,
    docs: HashMap<K, Doc>,
    total_length: u64,
}

#[derive(Debug, Clone, Default)]
struct Doc {
    len: u32,
    tf: HashMap<String, u32>,
}

impl<K: Ord + Copy + std::hash::Hash> Bm25Index<K> {
    /// An empty index.
    pub fn new() -> Self {
        Bm25Index {
            postings: HashMap::new(),
            docs: HashMap::new(),
            total_length: 0,
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Adds (or replaces) document `key` with `text`.
    pub fn insert(&mut self, key: K, text: &str) {
        self.remove(key);
        let words = content_words(text);
        let mut tf: HashMap<String, u32> = HashMap::new();
        for w in &words {
            *tf.entry(w.clone()).or_default() += 1;
        }
        for (w, n) in &tf {
            self.postings.entry(w.clone()).or_default().insert(key, *n);
        }
        self.total_length += words.len() as u64;
        self.docs.insert(
            key,
            Doc {
                len: words.len() as u32,
                tf,
            },
        );
    }

    /// Removes document `key` if present.
    pub fn remove(&mut self, key: K) {
        let Some(doc) = self.docs.remove(&key) else {
            return;
        };
        self.total_length -= u64::from(doc.len);
        for t in doc.tf.keys() {
            if let Some(p) = self.postings.get_mut(t) {
                p.remove(&key);
                if p.is_empty() {
                    self.postings.remove(t);
                }
            }
        }
    }

    fn idf(&self, n: usize) -> f32 {
        let big_n = self.docs.len() as f32;
        let n = n as f32;
        (1.0 + (big_n - n + 0.5) / (n + 0.5)).ln()
    }

    fn avgdl(&self) -> f32 {
        (self.total_length as f32 / self.docs.len().max(1) as f32).max(1e-6)
    }

    fn term_score(&self, idf: f32, tf: u32, dl: u32, avgdl: f32) -> f32 {
        let tf = tf as f32;
        idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl as f32 / avgdl))
    }

    /// BM25 scores of every document matching at least one of `terms` (a
    /// deduplicated set).
    pub fn score(&self, terms: &[String]) -> BTreeMap<K, f32> {
        let mut out: BTreeMap<K, f32> = BTreeMap::new();
        if self.docs.is_empty() {
            return out;
        }
        let avgdl = self.avgdl();
        for t in terms {
            let Some(p) = self.postings.get(t) else {
                continue;
            };
            let idf = self.idf(p.len());
            for (k, &tf) in p {
                let dl = self.docs.get(k).map_or(0, |d| d.len);
                *out.entry(*k).or_default() += self.term_score(idf, tf, dl, avgdl);
            }
        }
        out
    }

    /// BM25 score of one document (0 when absent or unmatched).
    pub fn score_doc(&self, terms: &[String], key: K) -> f32 {
        let Some(doc) = self.docs.get(&key) else {
            return 0.0;
        };
        let avgdl = self.avgdl();
        terms
            .iter()
            .filter_map(|t| {
                let tf = *doc.tf.get(t)?;
                let df = self.postings.get(t).map_or(1, BTreeMap::len);
                Some(self.term_score(self.idf(df), tf, doc.len, avgdl))
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_words_drop_stop_words_and_markup() {
        assert_eq!(
            content_words("[step 3] > Open THE drawer_1, it is here!"),
            vec!["step", "3", "open", "drawer", "1", "here"]
        );
        assert_eq!(query_terms("the key the KEY drawer"), vec!["drawer", "key"]);
    }

    #[test]
    fn bm25_matches_a_hand_computation() {
        let mut ix = Bm25Index::new();
        ix.insert(1u32, "red key");
        ix.insert(2, "blue box blue");
        ix.insert(3, "red red red box");
        let s = ix.score(&query_terms("red"));
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
