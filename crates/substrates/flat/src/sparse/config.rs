//! Settings of the sparse substrate (M2).

use serde::{Deserialize, Serialize};
use submem_kit::text::StopWords;

use crate::error::{FlatError, FlatResult};
use crate::fill::ReadDepth;

/// Smallest writer heap tantivy accepts (15 MB per indexing thread).
pub const MIN_WRITER_HEAP_BYTES: usize = 15_000_000;

/// Settings of [`crate::SparseMemory`]; build with
/// `SparseConfig::default().with_*(…)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SparseConfig {
    /// Memory arena of the tantivy writer (one indexing thread), which
    /// exists only while a write, a forget or the merges they start run.
    /// Default 32 MB; at least [`MIN_WRITER_HEAP_BYTES`].
    pub writer_heap_bytes: usize,
    /// Tokens longer than this many bytes are dropped (tantivy's
    /// `RemoveLongFilter`). Default 40.
    pub max_token_bytes: usize,
    /// Stop words removed from documents and queries. Default
    /// [`StopWords::English`], the broad list: with Lucene's 33 words
    /// (tantivy's own list) question words and pronouns stay in, and M2's
    /// Recall@10 on ten LoCoMo conversations drops from 0.59 to 0.54 (see
    /// `scripts/peers/bm25_peer.py`).
    pub stop_words: StopWords,
    /// How many ranked units a read shows: the query's top-k (default, the
    /// paper's M2) or as many as the budget holds ([`ReadDepth::fill`]).
    pub depth: ReadDepth,
}

impl Default for SparseConfig {
    fn default() -> Self {
        SparseConfig {
            writer_heap_bytes: 32_000_000,
            max_token_bytes: 40,
            stop_words: StopWords::English,
            depth: ReadDepth::TopK,
        }
    }
}

impl SparseConfig {
    /// Sets [`SparseConfig::writer_heap_bytes`].
    pub fn with_writer_heap_bytes(mut self, bytes: usize) -> Self {
        self.writer_heap_bytes = bytes;
        self
    }
    /// Sets [`SparseConfig::max_token_bytes`].
    pub fn with_max_token_bytes(mut self, bytes: usize) -> Self {
        self.max_token_bytes = bytes;
        self
    }
    /// Sets [`SparseConfig::stop_words`].
    pub fn with_stop_words(mut self, list: StopWords) -> Self {
        self.stop_words = list;
        self
    }

    /// Sets [`SparseConfig::depth`].
    pub fn with_depth(mut self, depth: ReadDepth) -> Self {
        self.depth = depth;
        self
    }

    pub(crate) fn validate(&self) -> FlatResult<()> {
        self.depth.validate().map_err(FlatError::Config)?;
        if self.writer_heap_bytes < MIN_WRITER_HEAP_BYTES {
            return Err(FlatError::Config(format!(
                "writer_heap_bytes must be at least {MIN_WRITER_HEAP_BYTES}, got {}",
                self.writer_heap_bytes
            )));
        }
        if self.max_token_bytes == 0 {
            return Err(FlatError::Config(
                "max_token_bytes must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert!(SparseConfig::default().validate().is_ok());
        assert!(SparseConfig::default()
            .with_writer_heap_bytes(1000)
            .validate()
            .is_err());
        assert!(SparseConfig::default()
            .with_max_token_bytes(0)
            .validate()
            .is_err());
        let c: SparseConfig = serde_json::from_str(r#"{"stop_words": "none"}"#).unwrap();
        assert_eq!(c.stop_words, StopWords::None);
        assert_eq!(c.max_token_bytes, 40);
    }
}
