//! The one error type of `submem-kv`, converted into [`submem_core::Error`] at
//! the [`submem_core::Substrate`] boundary.

use submem_core::{BoxError, Error};

/// Errors raised inside the activation substrates (M10, M11).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvError {
    /// A setting is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// k-means could not cluster the segments.
    #[error("clustering failed: {0}")]
    Cluster(String),

    /// The embedder returned vectors that do not fit (wrong count or length).
    #[error("embedder mismatch: {0}")]
    Embedding(String),
}

impl KvError {
    /// Wraps the error as a failure of `operation` inside substrate `method`.
    pub fn into_core(self, method: &str, operation: &'static str) -> Error {
        Error::substrate(method, operation, BoxError::from(self))
    }
}
