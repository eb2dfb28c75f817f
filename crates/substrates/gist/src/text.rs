//! Text helpers: Okapi BM25 over pages (the read fallback; words and
//! constants are the kit's, as in every lexical match), gist normalisation and token-set Jaccard (the manage dedup), and cutting a
//! model reply at its first sentence.

use std::collections::{BTreeSet, HashSet};

use crate::page::Page;

pub use submem_kit::bm25::{B, K1};
pub use submem_kit::text::content_words;

/// BM25 score of every page against `query` (0 for pages sharing no word),
/// in page order. Documents are gist + raw text: the gist adds the LLM's
/// paraphrase, the raw text the exact words a question repeats. IDF is
/// Lucene's `ln(1 + (N − n + 0.5)/(n + 0.5))`, never negative.
pub fn bm25_scores(pages: &[&Page], query: &str) -> Vec<f32> {
    let terms: BTreeSet<String> = content_words(query).into_iter().collect();
    let mut scores = vec![0f32; pages.len()];
    if pages.is_empty() || terms.is_empty() {
        return scores;
    }
    let n = pages.len() as f32;
    let avgdl = (pages.iter().map(|p| p.length as f32).sum::<f32>() / n).max(1e-6);
    for t in &terms {
        let df = pages.iter().filter(|p| p.terms.contains_key(t)).count();
        if df == 0 {
            continue;
        }
        let idf = (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
        for (score, page) in scores.iter_mut().zip(pages) {
            if let Some(&tf) = page.terms.get(t) {
                let tf = tf as f32;
                let norm = K1 * (1.0 - B + B * page.length as f32 / avgdl);
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
    }
    scores
}

/// A gist normalised for equality: lower-cased words joined by one space.
pub fn normalise(text: &str) -> String {
    submem_kit::text::normalised(text)
}

/// The set of content words of `text`.
pub fn word_set(text: &str) -> HashSet<String> {
    content_words(text).into_iter().collect()
}

/// Jaccard similarity of two word sets (0 when both are empty).
pub fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f32 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f32 / union as f32
}

/// The first sentence of `text` (up to and including the first `.`, `!` or
/// `?` followed by white space or the end, or up to the first line break),
/// cut at `max_words` words, white space normalised.
pub fn first_sentence(text: &str, max_words: usize) -> String {
    let text = text.trim();
    let mut end = text.len();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' {
            end = i;
            break;
        }
        if matches!(c, '.' | '!' | '?') {
            let next_is_break = chars
                .peek()
                .is_none_or(|(_, n)| n.is_whitespace() || matches!(n, '"' | '\'' | '”' | ')'));
            if next_is_break {
                end = i + c.len_utf8();
                break;
            }
        }
    }
    text[..end]
        .split_whitespace()
        .take(max_words)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentence_cuts_at_punctuation_line_break_and_words() {
        assert_eq!(
            first_sentence("Ana met Ben. Then more.", 40),
            "Ana met Ben."
        );
        assert_eq!(
            first_sentence("It cost 3.5 dollars! ok", 40),
            "It cost 3.5 dollars!"
        );
        assert_eq!(first_sentence("line one\nline two", 40), "line one");
        assert_eq!(first_sentence("a b c d e", 3), "a b c");
        assert_eq!(first_sentence("  ", 3), "");
    }

    #[test]
    fn normalisation_and_jaccard() {
        assert_eq!(normalise("Ana, met BEN!"), "ana met ben");
        let a = word_set("Ana met Ben at the river");
        let b = word_set("ana met ben at river");
        assert!((jaccard(&a, &b) - 1.0).abs() < 1e-6);
        let c = word_set("stock markets fell");
        assert_eq!(jaccard(&a, &c), 0.0);
        assert_eq!(jaccard(&HashSet::new(), &HashSet::new()), 0.0);
    }
}
