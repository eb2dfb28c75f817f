//! Counting a text that changes in parts: [`SegmentCounts`] counts a text
//! between the counter's exact cuts ([`TokenCounter::is_exact_cut`]) and
//! remembers each segment's count, so counting a text again after a few of
//! its parts changed costs only the changed parts.
//!
//! A renderer that builds a block, finds it over its allowance and drops a
//! few items recounts one segment per changed item instead of the whole
//! block (FlexA-Mem's piece recovery: ~8k tokens a render at an 8k budget).

use rustc_hash::FxHashMap;
use submem_core::TokenCounter;

/// Remembered segment counts for one counter.
///
/// ```
/// use submem_core::test_utils::WhitespaceCounter;
/// use submem_kit::count::SegmentCounts;
///
/// let counter = WhitespaceCounter;
/// let mut counts = SegmentCounts::new(&counter);
/// let text = "header line\nfirst block\nsecond block";
/// assert_eq!(counts.count(text, &[12, 24]), 6);
/// // The header and the first block are remembered: only the new last
/// // segment is counted.
/// assert_eq!(counts.count("header line\nfirst block\nthird one here", &[12, 24]), 7);
/// assert_eq!(counts.segments_counted(), 4);
/// ```
pub struct SegmentCounts<'c> {
    counter: &'c dyn TokenCounter,
    known: FxHashMap<Box<str>, usize>,
    counted: usize,
}

impl<'c> SegmentCounts<'c> {
    /// No segment known yet.
    pub fn new(counter: &'c dyn TokenCounter) -> Self {
        SegmentCounts {
            counter,
            known: FxHashMap::default(),
            counted: 0,
        }
    }

    /// The count of `text`, cut at those of `cuts` (byte offsets, ascending)
    /// that the counter calls exact; the others are ignored, so any offsets
    /// may be offered. Segments seen before are not counted again.
    pub fn count(&mut self, text: &str, cuts: &[usize]) -> usize {
        let mut total = 0;
        let mut start = 0;
        for &at in cuts {
            if at <= start || at >= text.len() || !self.counter.is_exact_cut(text, at) {
                continue;
            }
            total += self.segment(&text[start..at]);
            start = at;
        }
        total += self.segment(&text[start..]);
        debug_assert_eq!(
            total,
            self.counter.count(text),
            "{:?} promised a cut that is not exact",
            self.counter
        );
        total
    }

    /// How many segments were counted (not remembered) so far.
    pub fn segments_counted(&self) -> usize {
        self.counted
    }

    fn segment(&mut self, segment: &str) -> usize {
        if let Some(n) = self.known.get(segment) {
            return *n;
        }
        let n = self.counter.count(segment);
        self.counted += 1;
        self.known.insert(segment.into(), n);
        n
    }
}

impl std::fmt::Debug for SegmentCounts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentCounts")
            .field("counter", &self.counter)
            .field("known", &self.known.len())
            .field("counted", &self.counted)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;

    /// Counts characters and promises no cut: every text is one segment.
    #[derive(Debug)]
    struct Chars;
    impl TokenCounter for Chars {
        fn count(&self, text: &str) -> usize {
            text.chars().count()
        }
        fn truncate(&self, text: &str, max_tokens: usize) -> String {
            text.chars().take(max_tokens).collect()
        }
    }

    #[test]
    fn a_counter_without_exact_cuts_counts_whole_texts() {
        let mut counts = SegmentCounts::new(&Chars);
        assert_eq!(counts.count("ab\ncd", &[3]), 5);
        assert_eq!(counts.count("ab\nce", &[3]), 5);
        assert_eq!(counts.segments_counted(), 2);
        // The same text again is remembered.
        assert_eq!(counts.count("ab\ncd", &[3]), 5);
        assert_eq!(counts.segments_counted(), 2);
    }

    #[test]
    fn cuts_that_split_a_word_are_ignored() {
        let counter = WhitespaceCounter;
        let mut counts = SegmentCounts::new(&counter);
        // 1, 5 and 11 fall inside words; 0 and 99 are no cuts of the text.
        assert_eq!(counts.count("one two three", &[0, 1, 5, 8, 11, 99]), 3);
        // Only the cut at 8 (after "one two ") was used: two segments.
        assert_eq!(counts.segments_counted(), 2);
    }

    #[test]
    fn only_changed_segments_are_counted_again() {
        let counter = WhitespaceCounter;
        let mut counts = SegmentCounts::new(&counter);
        let blocks = ["alpha beta", "gamma", "delta epsilon zeta", "eta"];
        let join = |b: &[&str]| {
            let mut text = String::new();
            let mut cuts = Vec::new();
            for (i, s) in b.iter().enumerate() {
                if i > 0 {
                    text.push('\n');
                }
                cuts.push(text.len());
                text.push_str(s);
            }
            (text, cuts)
        };
        let (text, cuts) = join(&blocks);
        assert_eq!(counts.count(&text, &cuts), 7);
        assert_eq!(counts.segments_counted(), 4);
        let (text, cuts) = join(&[blocks[0], blocks[1], blocks[3]]);
        assert_eq!(counts.count(&text, &cuts), 4);
        // Dropping a block leaves segments that were all counted before.
        assert_eq!(counts.segments_counted(), 4);
    }
}
