//! Words for lexical matching: lower-cased alphanumeric words without
//! Lucene's classic English stop words ([`content_words`]), and a query as a
//! sorted set of them ([`query_terms`]). [`crate::bm25`] indexes with these,
//! and substrates use them wherever they match text by words (keywords,
//! entity hits, excerpt pieces), so every lexical match in the workspace cuts
//! words the same way; the stop list is the one thing a ranker chooses.
//!
//! [`StopWords`] names the lists a ranker can choose from. BM25 over
//! conversations wants the broad [`StopWords::English`] list: question words
//! (`what`, `when`, `did`) and pronouns (`i`, `you`, `my`) occur in most turns,
//! and Lucene's 33-word list keeps them, so every turn matches the question on
//! them. Measured on ten LoCoMo conversations with a plain `rank_bm25` peer
//! (`scripts/peers/bm25_peer.py`), the broad list raises Recall@10 by 0.05.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// English stop words removed before BM25 (Lucene's classic English set,
/// the set tantivy users commonly pass to `StopWordFilter`).
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// The English month names, lower case, January first (for telling dates
/// from other numbers and names).
pub const MONTH_NAMES: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The English weekday names, lower case, Monday first (ISO 8601 order; for
/// telling dates and times from names: "Sunday" starts a sentence about
/// when, not about someone).
pub const WEEKDAY_NAMES: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A broad English function-word list (the 179 words of NLTK's English list):
/// pronouns, auxiliaries, question words, determiners, prepositions and the
/// pieces a simple tokenizer cuts contractions into (`didn` + `t`).
pub const ENGLISH_STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "ain",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "couldn",
    "couldn't",
    "d",
    "did",
    "didn",
    "didn't",
    "do",
    "does",
    "doesn",
    "doesn't",
    "doing",
    "don",
    "don't",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "hadn't",
    "has",
    "hasn",
    "hasn't",
    "have",
    "haven",
    "haven't",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "isn't",
    "it",
    "it's",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "ma",
    "me",
    "mightn",
    "mightn't",
    "more",
    "most",
    "mustn",
    "mustn't",
    "my",
    "myself",
    "needn",
    "needn't",
    "no",
    "nor",
    "not",
    "now",
    "o",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shan",
    "shan't",
    "she",
    "she's",
    "should",
    "should've",
    "shouldn",
    "shouldn't",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "that'll",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasn",
    "wasn't",
    "we",
    "were",
    "weren",
    "weren't",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "won",
    "won't",
    "wouldn",
    "wouldn't",
    "y",
    "you",
    "you'd",
    "you'll",
    "you're",
    "you've",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Which stop words a lexical ranker removes from documents and queries.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum StopWords {
    /// [`ENGLISH_STOP_WORDS`] (179 words), the default.
    #[default]
    English,
    /// Lucene's classic 33 words ([`STOP_WORDS`]).
    Lucene,
    /// Keep every word.
    None,
}

impl StopWords {
    /// The words of the list (sorted as declared; empty for [`StopWords::None`]).
    pub fn words(self) -> &'static [&'static str] {
        match self {
            StopWords::English => ENGLISH_STOP_WORDS,
            StopWords::Lucene => STOP_WORDS,
            StopWords::None => &[],
        }
    }

    /// Whether `word` (already lower-cased) is on the list.
    pub fn contains(self, word: &str) -> bool {
        self.words().binary_search(&word).is_ok()
    }
}

/// Lower-cased alphanumeric words of `text` without stop words. Markup
/// (punctuation, brackets, `>` prompts) never forms a word.
pub fn content_words(text: &str) -> Vec<String> {
    content_words_with(text, StopWords::Lucene)
}

/// [`content_words`] with another stop list.
pub fn content_words_with(text: &str, stop_words: StopWords) -> Vec<String> {
    words(text).filter(|w| !stop_words.contains(w)).collect()
}

/// Lower-cased alphanumeric words of `text`, stop words kept.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// `text` normalised for equality: its [`words`] joined by single spaces
/// (`"Dr. Smith"` and `"dr smith"` meet).
pub fn normalised(text: &str) -> String {
    words(text).collect::<Vec<_>>().join(" ")
}

/// The query as a set of content words (sorted, so scoring is deterministic).
pub fn query_terms(text: &str) -> Vec<String> {
    content_words(text)
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
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
    fn stop_word_lists_are_sorted_and_searchable() {
        for list in [StopWords::English, StopWords::Lucene] {
            assert!(list.words().windows(2).all(|w| w[0] < w[1]), "{list:?}");
            assert!(list.words().iter().all(|w| list.contains(w)));
        }
        assert!(STOP_WORDS.iter().all(|w| StopWords::English.contains(w)));
        assert!(StopWords::English.contains("when") && !StopWords::Lucene.contains("when"));
        assert!(!StopWords::English.contains("caroline"));
        assert!(!StopWords::None.contains("the"));
        let parsed: StopWords = serde_json::from_str("\"lucene\"").unwrap();
        assert_eq!(parsed, StopWords::Lucene);
    }
}
