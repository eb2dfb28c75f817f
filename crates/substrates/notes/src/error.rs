//! The one error type of `submem-notes`; it converts into
//! [`submem_core::Error`] at the [`submem_core::Substrate`] boundary.

use submem_core::{BoxError, Error};

/// Errors raised inside M4 (evolving notes).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotesError {
    /// A setting is out of range.
    #[error("invalid M4 setting: {0}")]
    Config(String),
    /// The embedder returned the wrong number or shape of vectors.
    #[error("embedding failed: {0}")]
    Embedding(String),
    /// Persisted state does not match what this instance can use.
    #[error("persisted state is inconsistent: {0}")]
    Corrupt(String),
}

impl NotesError {
    /// Wraps the error as a failure of `operation` in M4.
    pub fn during(self, operation: &'static str) -> Error {
        match self {
            NotesError::Config(m) => Error::InvalidInput(m),
            other => Error::substrate(crate::METHOD, operation, BoxError::from(other)),
        }
    }
}

impl From<NotesError> for Error {
    fn from(e: NotesError) -> Self {
        e.during("operation")
    }
}
