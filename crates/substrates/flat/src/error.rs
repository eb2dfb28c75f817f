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

    /// The embedder's vectors were the wrong number, length or values.
    #[error(transparent)]
    Embedding(#[from] submem_kit::embed::EmbedError),

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
