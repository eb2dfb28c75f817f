//! The one error type of this crate; it converts into [`submem_core::Error`]
//! at the [`submem_core::Substrate`] boundary.

/// Errors raised by the gist index.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GistError {
    /// A setting is out of range.
    #[error("invalid gist-index setting: {0}")]
    Config(String),
    /// Persisted state breaks an invariant (torn or foreign store).
    #[error("persisted state is inconsistent: {0}")]
    Corrupt(String),
}

impl GistError {
    /// Wraps this error as a failure of `operation` in M3.
    pub fn during(self, operation: &'static str) -> submem_core::Error {
        match self {
            GistError::Config(m) => submem_core::Error::InvalidInput(m),
            other => submem_core::Error::substrate(crate::M3.as_str(), operation, other),
        }
    }
}

impl From<GistError> for submem_core::Error {
    fn from(e: GistError) -> Self {
        e.during("operation")
    }
}
