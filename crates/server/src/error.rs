//! The crate's one error type, and how each error reaches a client: an HTTP
//! status and a stable machine-readable code beside the human message.
//!
//! Every handler returns [`ServerError`]; its `IntoResponse` writes
//! `{"error": {"code": "...", "message": "..."}}`. Client faults are 4xx with
//! a message that says what to change; server faults are 5xx and logged.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::path::PathBuf;

/// Result alias of the crate.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

/// Everything that can go wrong in the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The request is malformed or a value is out of range (400).
    #[error("{0}")]
    BadRequest(String),
    /// The JSON body could not be read as the expected shape (400).
    #[error("invalid JSON body: {0}")]
    BadJson(String),
    /// The substrate spec names no known substrate or a bad setting (400).
    #[error("{0}")]
    BadSubstrate(String),
    /// No or an unknown bearer key (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The key's scope does not cover the namespace it tries to create (403).
    #[error("{0}")]
    Forbidden(String),
    /// No such namespace, or none the key may see (404: the server never says
    /// whether another tenant's namespace exists).
    #[error("namespace {0:?} not found")]
    NamespaceNotFound(String),
    /// No such job (or one of a namespace the key may not see) (404).
    #[error("job {0:?} not found")]
    JobNotFound(String),
    /// No such bench report run or file, or no reports directory (404).
    #[error("report {0:?} not found")]
    ReportNotFound(String),
    /// The namespace already exists (409).
    #[error("namespace {0:?} already exists")]
    NamespaceExists(String),
    /// A source id of the batch is already stored or repeated (409).
    #[error("{0}")]
    DuplicateSource(String),
    /// The body or batch is larger than the server accepts (413).
    #[error("{0}")]
    TooLarge(String),
    /// The substrate failed on a valid request (500) or refused it (400 when
    /// the substrate says the input is invalid).
    #[error("substrate {namespace}: {source}")]
    Substrate {
        /// The namespace whose substrate failed.
        namespace: String,
        /// What it said.
        #[source]
        source: submem_core::Error,
    },
    /// The data directory could not be read or written (500).
    #[error("storage {path}: {message}")]
    Storage {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The event log is damaged beyond its torn tail (500).
    #[error("event log {path}: {message}")]
    CorruptLog {
        /// The log file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The server configuration is invalid (startup only).
    #[error("server configuration: {0}")]
    Config(String),
    /// A substrate panicked; the request failed, the process keeps serving (500).
    #[error("internal error: {0}")]
    Internal(String),
    /// The namespace's writer is gone (it was deleted while the request waited) (503).
    #[error("namespace {0:?} is shutting down")]
    Closed(String),
    /// The namespace is changing owner between nodes, or its owner cannot
    /// be reached; the request can be retried (503).
    #[error("{0}")]
    Busy(String),
    /// The node that owns the namespace answered with an error; it reaches
    /// the client as that node wrote it.
    #[error("owner node answered {status}: {body}")]
    Remote {
        /// Its HTTP status.
        status: u16,
        /// Its error JSON.
        body: serde_json::Value,
    },
    /// Another node owns the namespace (PostgreSQL store). Never reaches a
    /// client: the request is forwarded to `node`, or answered 503 when it
    /// already was.
    #[error("namespace {namespace:?} is served by {node}")]
    Elsewhere {
        /// The namespace.
        namespace: String,
        /// The owner's advertised URL.
        node: String,
    },
}

impl ServerError {
    /// An I/O failure on `path`.
    pub fn io(path: impl Into<PathBuf>, e: std::io::Error) -> Self {
        ServerError::Storage {
            path: path.into(),
            message: e.to_string(),
        }
    }

    /// The HTTP status for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ServerError::BadRequest(_) | ServerError::BadJson(_) | ServerError::BadSubstrate(_) => {
                StatusCode::BAD_REQUEST
            }
            ServerError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ServerError::Forbidden(_) => StatusCode::FORBIDDEN,
            ServerError::NamespaceNotFound(_)
            | ServerError::JobNotFound(_)
            | ServerError::ReportNotFound(_) => StatusCode::NOT_FOUND,
            ServerError::NamespaceExists(_) | ServerError::DuplicateSource(_) => {
                StatusCode::CONFLICT
            }
            ServerError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ServerError::Substrate { source, .. } => match source {
                submem_core::Error::InvalidInput(_) => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            },
            ServerError::Remote { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY)
            }
            ServerError::Closed(_) | ServerError::Busy(_) | ServerError::Elsewhere { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ServerError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ServerError::Storage { .. }
            | ServerError::CorruptLog { .. }
            | ServerError::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            ServerError::BadRequest(_) => "bad_request",
            ServerError::BadJson(_) => "invalid_json",
            ServerError::BadSubstrate(_) => "bad_substrate",
            ServerError::Unauthorized(_) => "unauthorized",
            ServerError::Forbidden(_) => "forbidden",
            ServerError::NamespaceNotFound(_) => "namespace_not_found",
            ServerError::JobNotFound(_) => "job_not_found",
            ServerError::ReportNotFound(_) => "report_not_found",
            ServerError::NamespaceExists(_) => "namespace_exists",
            ServerError::DuplicateSource(_) => "duplicate_source",
            ServerError::TooLarge(_) => "too_large",
            ServerError::Substrate { source, .. } => match source {
                submem_core::Error::InvalidInput(_) => "invalid_input",
                _ => "substrate_failed",
            },
            ServerError::Storage { .. } => "storage_failed",
            ServerError::CorruptLog { .. } => "corrupt_log",
            ServerError::Config(_) => "config",
            ServerError::Closed(_) => "namespace_closed",
            ServerError::Busy(_) | ServerError::Elsewhere { .. } => "namespace_busy",
            ServerError::Remote { .. } => "remote",
            ServerError::Internal(_) => "internal",
        }
    }

    /// The error as the JSON body clients receive.
    pub fn body(&self) -> serde_json::Value {
        if let ServerError::Remote { body, .. } = self {
            return body.clone();
        }
        serde_json::json!({"error": {"code": self.code(), "message": self.to_string()}})
    }
}

/// Marks a response whose namespace another node owns: the forwarding
/// layer ([`crate::forward`]) sends the request there.
#[derive(Debug, Clone)]
pub struct OwnedBy(pub String);

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        let status = self.status();
        let owner = match &self {
            ServerError::Elsewhere { node, .. } => Some(OwnedBy(node.clone())),
            _ => None,
        };
        // 503s (owner changing, namespace closing) are expected while nodes
        // come and go, and the client retries: not an error of the server.
        if status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::info!(code = self.code(), error = %self, "request answered 503");
        } else if status.is_server_error() {
            tracing::error!(code = self.code(), error = %self, "request failed");
        }
        let mut response = (status, axum::Json(self.body())).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        if let Some(owner) = owner {
            response.extensions_mut().insert(owner);
        }
        response
    }
}

impl From<submem::RegistryError> for ServerError {
    fn from(e: submem::RegistryError) -> Self {
        ServerError::BadSubstrate(e.to_string())
    }
}
