//! The one error type of `submem-lora`, converted into [`submem_core::Error`]
//! at the [`submem_core::Substrate`] boundary.

use submem_core::{BoxError, Error};

/// Errors raised by the M9 model, trainer and substrate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoraError {
    /// A tensor operation failed (shapes, dtypes, safetensors I/O).
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),

    /// Loading the base model or its tokenizer failed.
    #[error(transparent)]
    Models(#[from] submem_models::ModelsError),

    /// The GGUF file lacks something the llama definition needs.
    #[error("GGUF file {path}: {reason}")]
    BadModel {
        /// The file.
        path: std::path::PathBuf,
        /// What is missing or wrong.
        reason: String,
    },

    /// A setting is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// A generation request cannot be served (too long, empty).
    #[error("invalid request: {0}")]
    Request(String),

    /// A blocking task was cancelled or panicked.
    #[error("background task failed: {0}")]
    Task(String),
}

/// Result alias of this crate.
pub type Result<T, E = LoraError> = std::result::Result<T, E>;

impl LoraError {
    /// Wraps the error as a failure of `operation` inside M9.
    pub fn into_core(self, operation: &'static str) -> Error {
        Error::substrate(crate::M9.as_str(), operation, BoxError::from(self))
    }
}
