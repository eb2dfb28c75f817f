//! The one error type of `submem-models`. Every public operation returns
//! [`ModelsError`]; at the service-trait boundary it converts into
//! [`submem_core::ServiceError`] (and from there into [`submem_core::Error`]),
//! keeping the variants callers act on (`ModelMissing`, `Http`, `Malformed`,
//! `Transport`, `InvalidRequest`, `Config`) and boxing the rest.

use std::path::PathBuf;

use submem_core::{BoxError, ServiceError};

/// Result alias for this crate.
pub type Result<T, E = ModelsError> = std::result::Result<T, E>;

/// Errors raised while locating, fetching, loading or running models.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelsError {
    /// A model file is missing and could not be fetched.
    #[error("model file {path} not found; fix: {fix}")]
    ModelMissing {
        /// The file that was looked for (or the file the fetch should have produced).
        path: PathBuf,
        /// The command that fixes it, followed by what was tried.
        fix: String,
    },
    /// candle failed while loading or running a model.
    #[error("model {model}: {source}")]
    Candle {
        /// Model name.
        model: String,
        /// Underlying error.
        #[source]
        source: candle_core::Error,
    },
    /// A tokenizer could not be built or failed to encode/decode.
    #[error("tokenizer of {model}: {source}")]
    Tokenizer {
        /// Model name.
        model: String,
        /// Underlying error.
        #[source]
        source: BoxError,
    },
    /// A model file is malformed (bad GGUF metadata, bad config.json, ...).
    #[error("model file {path} is malformed: {reason}")]
    BadModelFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A fetched file does not have the recorded SHA-256.
    #[error("checksum mismatch for {path}: expected {expected}, got {actual}")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// Recorded digest.
        expected: String,
        /// Digest of the file on disk.
        actual: String,
    },
    /// File-system error with the path it happened on.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration is invalid (unknown key, bad value, missing setting).
    #[error("configuration: {0}")]
    Config(String),
    /// A request was rejected before it ran (prompt too long, bad parameters).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A remote service failed; already in the shared service vocabulary.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// A blocking task panicked or was cancelled.
    #[error("background task of {model} failed: {reason}")]
    Task {
        /// Model name.
        model: String,
        /// The join error, as text.
        reason: String,
    },
}

impl ModelsError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ModelsError::Io {
            path: path.into(),
            source,
        }
    }

    /// A candle error inside `model`.
    pub fn candle(model: impl Into<String>, source: candle_core::Error) -> Self {
        ModelsError::Candle {
            model: model.into(),
            source,
        }
    }

    /// A tokenizer error inside `model`.
    pub fn tokenizer(model: impl Into<String>, source: impl Into<BoxError>) -> Self {
        ModelsError::Tokenizer {
            model: model.into(),
            source: source.into(),
        }
    }

    /// The model name this error should be reported under when it is boxed.
    fn model_name(&self) -> String {
        match self {
            ModelsError::Candle { model, .. }
            | ModelsError::Tokenizer { model, .. }
            | ModelsError::Task { model, .. } => model.clone(),
            ModelsError::BadModelFile { path, .. }
            | ModelsError::Checksum { path, .. }
            | ModelsError::Io { path, .. } => path.display().to_string(),
            _ => "submem-models".to_string(),
        }
    }
}

impl From<ModelsError> for ServiceError {
    fn from(e: ModelsError) -> Self {
        match e {
            ModelsError::ModelMissing { path, fix } => ServiceError::ModelMissing { path, fix },
            ModelsError::Config(msg) => ServiceError::Config(msg),
            ModelsError::InvalidRequest(msg) => ServiceError::InvalidRequest(msg),
            ModelsError::Service(s) => s,
            other => ServiceError::Model {
                model: other.model_name(),
                source: Box::new(other),
            },
        }
    }
}

impl From<ModelsError> for submem_core::Error {
    fn from(e: ModelsError) -> Self {
        submem_core::Error::Service(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_model_keeps_its_fix() {
        let e = ModelsError::ModelMissing {
            path: "/x/model.safetensors".into(),
            fix: "submem models fetch".into(),
        };
        let s: ServiceError = e.into();
        assert!(matches!(s, ServiceError::ModelMissing { .. }));
        assert!(s.to_string().contains("submem models fetch"));
    }

    #[test]
    fn other_errors_are_boxed_with_a_name() {
        let e = ModelsError::BadModelFile {
            path: "/x/m.gguf".into(),
            reason: "no tokens".into(),
        };
        let s: ServiceError = e.into();
        assert!(matches!(s, ServiceError::Model { .. }));
        assert!(s.to_string().contains("no tokens"));
    }
}
