//! The one error type of `submem-recent`, turned into [`submem_core::Error`]
//! at the [`submem_core::Substrate`] boundary.

use submem_core::Error;

/// What can go wrong inside the recency window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecentError {
    /// `max_events` is 0: a window that may show nothing.
    #[error("max_events must be at least 1 (leave it unset for no limit)")]
    ZeroMaxEvents,

    /// A persisted namespace stores one source id twice.
    #[error("source id {0:?} is stored twice")]
    DuplicateSource(String),

    /// A persisted event is empty (no source id or no text).
    #[error("an event with source id {0:?} has no text or no source id")]
    EmptyEvent(String),
}

impl From<RecentError> for Error {
    /// Settings errors are the caller's ([`Error::InvalidInput`]); state
    /// errors say that the recency window failed.
    fn from(e: RecentError) -> Self {
        match e {
            RecentError::ZeroMaxEvents => Error::InvalidInput(e.to_string()),
            other => Error::substrate(crate::METHOD.as_str(), "restore", other),
        }
    }
}
