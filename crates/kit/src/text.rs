//! Words for lexical matching: lower-cased alphanumeric words without
//! Lucene's classic English stop words ([`content_words`]), and a query as a
//! sorted set of them ([`query_terms`]). [`crate::bm25`] indexes with these,
//! and substrates use them wherever they match text by words (keywords,
//! entity hits, excerpt pieces), so every lexical match in the workspace cuts
//! words the same way.

use std::collections::BTreeSet;

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
}
