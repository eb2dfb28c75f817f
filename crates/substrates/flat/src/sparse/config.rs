//! Settings of the sparse substrate (M2).

use serde::{Deserialize, Serialize};
use submem_kit::text::StopWords;

use crate::error::{FlatError, FlatResult};
use crate::fill::ReadDepth;

/// Smallest writer heap tantivy accepts (15 MB per indexing thread).
pub const MIN_WRITER_HEAP_BYTES: usize = 15_000_000;

/// Settings of [`crate::SparseMemory`], and of the `m2` and `m2-fill`
/// plugins: every field is a setting under its serde name
/// (`m2:stopwords=lucene`), listed by `submem substrates` with the first
/// sentence of its doc. Build with `SparseConfig::default().with_*(…)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SparseConfig {
    /// Memory arena of the tantivy writer (one indexing thread), which
    /// exists only while a write, a forget or the merges they start run.
    /// Default 32 MB; at least [`MIN_WRITER_HEAP_BYTES`].
    pub writer_heap_bytes: usize,
    /// Tokens longer than this many bytes are dropped (tantivy's
    /// `RemoveLongFilter`). Default 40.
    pub max_token_bytes: usize,
    /// Stop words removed from documents and queries: `english` (a broad
    /// 179-word list), `lucene` (tantivy's 33 words) or `none`. Default
    /// [`StopWords::English`], the broad list: with Lucene's 33 words
    /// (tantivy's own list) question words and pronouns stay in, and M2's
    /// Recall@10 on ten LoCoMo conversations drops from 0.59 to 0.54 (see
    /// `scripts/peers/bm25_peer.py`). Its setting is `stopwords`
    /// (`stop_words` is read too).
    #[serde(rename = "stopwords", alias = "stop_words")]
    pub stop_words: StopWords,
    /// Show ranked turns until the budget is spent instead of the top-k.
    /// Off by default (the paper's M2; the `m2-fill` plugin turns it on).
    /// With [`SparseConfig::candidates`] it makes [`SparseConfig::depth`].
    pub fill: bool,
    /// Most turns a fill read ranks (fill reads only; unset: 2,048). A bound
    /// on read cost ([`crate::fill::DEFAULT_FILL_CANDIDATES`] when unset);
    /// set without [`SparseConfig::fill`] it is refused.
    pub candidates: Option<usize>,
}

impl Default for SparseConfig {
    fn default() -> Self {
        SparseConfig {
            writer_heap_bytes: 32_000_000,
            max_token_bytes: 40,
            stop_words: StopWords::English,
            fill: false,
            candidates: None,
        }
    }
}

submem_kit::setters!(SparseConfig {
    with_writer_heap_bytes => writer_heap_bytes: usize,
    with_max_token_bytes => max_token_bytes: usize,
    with_stop_words => stop_words: StopWords,
    with_fill => fill: bool,
    with_candidates => candidates: Option<usize>,
});

crate::fill::depth_settings!(SparseConfig);

impl SparseConfig {
    pub(crate) fn validate(&self) -> FlatResult<()> {
        ReadDepth::check_settings(self.fill, self.candidates).map_err(FlatError::Config)?;
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
