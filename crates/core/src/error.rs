//! The one error type of `submem-core`, shared by every substrate through
//! [`Error::Substrate`] and by every model service through [`ServiceError`].

use std::path::PathBuf;

/// A boxed error from a lower layer (a model runtime, an index library, I/O).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias for `submem-core` operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors raised by substrates and the shared machinery around them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller passed something the operation cannot accept.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A model service (LLM, embedder) failed.
    #[error(transparent)]
    Service(#[from] ServiceError),

    /// A substrate failed inside one of its operations.
    #[error("substrate {substrate} failed during {operation}: {source}")]
    Substrate {
        /// The substrate's method id (`M1`, `FlexA-Mem`, ...).
        substrate: String,
        /// `write`, `read`, `manage`, `persist`, `restore`, `forget`.
        operation: &'static str,
        /// What went wrong underneath.
        #[source]
        source: BoxError,
    },

    /// A persisted directory is missing, torn, or belongs to something else.
    #[error("cannot use store at {path}: {reason}")]
    Store {
        /// The directory or file.
        path: PathBuf,
        /// Human-readable reason, e.g. "manifest names substrate M2, expected M1".
        reason: String,
    },

    /// File-system error with the path it happened on.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path being read or written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// (De)serialisation of persisted state failed.
    #[error("cannot (de)serialise {what}: {source}")]
    Serde {
        /// What was being (de)serialised.
        what: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// Something a substrate needs cannot be had here (the local model's
    /// weights, say); `reason` says how to get it. Harnesses skip such a
    /// substrate with that reason instead of failing the run.
    #[error("{what} is unavailable: {reason}")]
    Unavailable {
        /// What is missing.
        what: String,
        /// Why, with the fix.
        reason: String,
    },

    /// The operation is not supported by this substrate (e.g. M7 on a conversation).
    #[error("{substrate} does not support {what}")]
    Unsupported {
        /// The substrate's method id.
        substrate: String,
        /// What was asked.
        what: String,
    },
}

impl Error {
    /// Wraps a lower-level error as a failure of `operation` inside `substrate`.
    pub fn substrate(
        substrate: impl Into<String>,
        operation: &'static str,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Substrate {
            substrate: substrate.into(),
            operation,
            source: source.into(),
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A store-level error on `path`.
    pub fn store(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Store {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Errors raised by model services: [`crate::Llm`], [`crate::Embedder`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// A model file is missing; `fix` names the command that fetches it.
    #[error("model file {path} not found; fix: {fix}")]
    ModelMissing {
        /// The file that was looked for.
        path: PathBuf,
        /// The command that fixes it.
        fix: String,
    },
    /// The model could not be loaded or run.
    #[error("model {model} failed: {source}")]
    Model {
        /// Model name.
        model: String,
        /// Underlying error.
        #[source]
        source: BoxError,
    },
    /// A remote server answered with an error status.
    #[error("{service} answered HTTP {status}: {body}")]
    Http {
        /// Service name or URL.
        service: String,
        /// HTTP status code.
        status: u16,
        /// Start of the response body.
        body: String,
    },
    /// The remote server could not be reached or timed out.
    #[error("{service} unreachable: {source}")]
    Transport {
        /// Service name or URL.
        service: String,
        /// Underlying error.
        #[source]
        source: BoxError,
    },
    /// The response could not be understood.
    #[error("{service} sent a malformed response: {reason}")]
    Malformed {
        /// Service name or URL.
        service: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The request was rejected before it was sent (e.g. empty messages).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A configuration value is missing or wrong.
    #[error("configuration: {0}")]
    Config(String),
    /// A test double was told to fail.
    #[error("injected failure: {0}")]
    Injected(String),
}

impl ServiceError {
    /// Whether the request itself was refused (a prompt longer than the
    /// model's context, an empty message list, an HTTP 400/413/422): sending
    /// the same request again fails again, so a caller working through many
    /// requests can record this one as failed and go on. Missing models,
    /// unreachable servers and other HTTP statuses are not: they are the
    /// service's state, and the caller should stop and let the user fix it.
    pub fn is_request_rejected(&self) -> bool {
        match self {
            Self::InvalidRequest(_) => true,
            Self::Http { status, .. } => matches!(status, 400 | 413 | 422),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_requests_are_told_apart_from_broken_services() {
        let http = |status| ServiceError::Http {
            service: "vllm".into(),
            status,
            body: String::new(),
        };
        assert!(ServiceError::InvalidRequest("prompt too long".into()).is_request_rejected());
        assert!(http(400).is_request_rejected());
        assert!(http(413).is_request_rejected());
        assert!(!http(401).is_request_rejected());
        assert!(!http(429).is_request_rejected());
        assert!(!http(503).is_request_rejected());
        assert!(!ServiceError::Config("no url".into()).is_request_rejected());
    }
}
