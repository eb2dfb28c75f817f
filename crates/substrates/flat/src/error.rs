//! The one error type of `submem-flat`, converted into [`submem_core::Error`] at
//! the [`submem_core::Substrate`] boundary.

use submem_core::{BoxError, Error};

/// Errors raised inside the flat substrates (M1 dense, M2 sparse).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlatError {
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

    /// The embedder returned a different number of vectors than texts.
    #[error("embedder returned {got} vectors for {expected} texts")]
    VectorCount {
        /// Texts sent.
        expected: usize,
        /// Vectors received.
        got: usize,
    },

    /// An embedding contains NaN or infinity.
    #[error("embedder returned a non-finite value")]
    NonFinite,

    /// The tantivy index failed.
    #[error("tantivy: {0}")]
    Tantivy(#[from] tantivy::TantivyError),

    /// Opening a tantivy directory failed.
    #[error("cannot open index directory: {0}")]
    OpenDirectory(#[from] tantivy::directory::error::OpenDirectoryError),

    /// A persisted file does not match what the manifest promised.
    #[error("persisted state is inconsistent: {0}")]
    Corrupt(String),
}

impl FlatError {
    /// Wraps the error as a failure of `operation` inside substrate `method`.
    pub fn into_core(self, method: &str, operation: &'static str) -> Error {
        Error::substrate(method, operation, BoxError::from(self))
    }
}

/// Shorthand used inside the crate.
pub(crate) type FlatResult<T> = std::result::Result<T, FlatError>;
