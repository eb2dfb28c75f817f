//! The one error type of this crate; it converts into [`submem_core::Error`]
//! at the [`submem_core::Substrate`] boundary.

use std::path::PathBuf;

/// Errors raised by FlexA-Mem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlexaError {
    /// A setting is out of range.
    #[error("invalid FlexA-Mem setting: {0}")]
    Config(String),
    /// The append-only log could not be read or written.
    #[error("store I/O on {path}: {source}")]
    Io {
        /// The log or directory.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A log record could not be (de)serialised.
    #[error("store record: {0}")]
    Record(#[from] serde_json::Error),
    /// The store holds something this version cannot use.
    #[error("store at {path} is unusable: {reason}")]
    Corrupt {
        /// The log.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The embedder failed or returned vectors of the wrong shape.
    #[error("embedding failed: {0}")]
    Embedding(String),
    /// An internal invariant broke (a bug, reported instead of a panic).
    #[error("internal error: {0}")]
    Internal(String),
}

impl FlexaError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FlexaError::Io {
            path: path.into(),
            source,
        }
    }

    /// Wraps this error as a failure of `operation` in FlexA-Mem.
    pub fn during(self, operation: &'static str) -> submem_core::Error {
        match self {
            FlexaError::Config(m) => submem_core::Error::InvalidInput(m),
            FlexaError::Corrupt { path, reason } => submem_core::Error::store(path, reason),
            other => submem_core::Error::substrate(crate::FLEXA_MEM.to_string(), operation, other),
        }
    }
}

impl From<FlexaError> for submem_core::Error {
    fn from(e: FlexaError) -> Self {
        e.during("operation")
    }
}
