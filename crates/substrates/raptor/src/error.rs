//! The one error type of this crate; it converts into [`submem_core::Error`]
//! at the [`submem_core::Substrate`] boundary.

/// Errors raised by the RAPTOR tree.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RaptorError {
    /// A setting is out of range.
    #[error("invalid RAPTOR setting: {0}")]
    Config(String),
    /// The embedder failed or returned vectors of the wrong shape.
    #[error("embedding failed: {0}")]
    Embedding(String),
    /// An internal invariant broke (a bug, reported instead of a panic).
    #[error("internal error: {0}")]
    Internal(String),
}

impl RaptorError {
    /// Wraps this error as a failure of `operation` in M6.
    pub fn during(self, operation: &'static str) -> submem_core::Error {
        match self {
            RaptorError::Config(m) => submem_core::Error::InvalidInput(m),
            other => submem_core::Error::substrate(crate::M6.as_str(), operation, other),
        }
    }
}

impl From<RaptorError> for submem_core::Error {
    fn from(e: RaptorError) -> Self {
        e.during("operation")
    }
}
