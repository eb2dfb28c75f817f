//! The one error type of `submem-refine`, converted into [`submem_core::Error`]
//! at the [`submem_core::Substrate`] boundary.

use submem_core::{BoxError, Error};

/// Errors raised inside the refinement substrates (M7 strategies, M8 skills).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefineError {
    /// A setting is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// The embedder returned a vector of the wrong length.
    #[error("embedder returned a {got}-dimensional vector, expected {expected}")]
    Dimension {
        /// The embedder's declared dimension.
        expected: usize,
        /// What it returned.
        got: usize,
    },

    /// The embedder's vectors were the wrong number, length or values.
    #[error(transparent)]
    Embedding(#[from] submem_kit::embed::EmbedError),

    /// k-means failed.
    #[error("k-means clustering failed: {0}")]
    Clustering(String),
}

impl RefineError {
    /// Wraps the error as a failure of `operation` inside substrate `method`.
    pub fn into_core(self, method: &str, operation: &'static str) -> Error {
        Error::substrate(method, operation, BoxError::from(self))
    }
}
