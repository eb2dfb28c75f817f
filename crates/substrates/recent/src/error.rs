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
}

impl From<RecentError> for Error {
    /// Settings errors are the caller's ([`Error::InvalidInput`]).
    fn from(e: RecentError) -> Self {
        match e {
            RecentError::ZeroMaxEvents => Error::InvalidInput(e.to_string()),
        }
    }
}
