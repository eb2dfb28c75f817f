//! The one error type of `submem-graph`, converted into [`submem_core::Error`]
//! at the [`submem_core::Substrate`] boundary.

use submem_core::{BoxError, Error};

/// Errors raised inside the dual-level graph (M5).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A setting is out of range.
    #[error("invalid M5 setting: {0}")]
    Config(String),
    /// The embedder returned vectors of the wrong number or shape.
    #[error("embedding failed: {0}")]
    Embedding(String),
    /// Persisted state is inconsistent (duplicate or dangling ids).
    #[error("persisted graph is inconsistent: {0}")]
    Corrupt(String),
}

impl GraphError {
    /// Wraps the error as a failure of `operation` inside M5.
    pub fn during(self, operation: &'static str) -> Error {
        match self {
            GraphError::Config(m) => Error::InvalidInput(m),
            other => Error::substrate(crate::METHOD, operation, BoxError::from(other)),
        }
    }
}

impl From<GraphError> for Error {
    fn from(e: GraphError) -> Self {
        e.during("operation")
    }
}
