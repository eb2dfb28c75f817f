//! The one error type of `submem-bench`.

use std::path::PathBuf;

/// Result alias for the harness.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Everything that can go wrong while loading data, running substrates or
/// writing reports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A text environment (or the bridge to it) failed: it is not
    /// installed, a game does not parse, the bridge died or did not answer.
    #[error("{context}: {reason}")]
    Environment {
        /// Which environment, game and step.
        context: String,
        /// What went wrong.
        reason: String,
    },

    /// A data file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A dataset file is not in the expected format.
    #[error("{path} is not a valid {format} file: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The format that was expected (`LoCoMo`, `LongMemEval`, ...).
        format: &'static str,
        /// What is wrong, with a location where known.
        reason: String,
    },

    /// A substrate spec the registry refuses: an unknown name, a bad
    /// setting, a memory LLM or local weights the run lacks.
    #[error(transparent)]
    Registry(#[from] submem::RegistryError),

    /// A run option is invalid (empty budget list, zero k, ...).
    #[error("invalid option: {0}")]
    InvalidOption(String),

    /// A substrate failed.
    #[error("{substrate} on {conversation}: {source}")]
    Substrate {
        /// The substrate spec.
        substrate: String,
        /// The conversation being processed.
        conversation: String,
        /// The error it raised.
        #[source]
        source: submem_core::Error,
    },

    /// A model service (reader, judge) failed.
    #[error("{what}: {source}")]
    Service {
        /// What was being done.
        what: String,
        /// The service error.
        #[source]
        source: submem_core::ServiceError,
    },

    /// A results file could not be (de)serialised.
    #[error("cannot (de)serialise {what}: {source}")]
    Json {
        /// What.
        what: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// The report or plot could not be drawn.
    #[error("cannot draw {path}: {reason}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// A `--shard I/N` that names no shard.
    #[error("bad shard {shard:?}: {reason}")]
    BadShard {
        /// What was given.
        shard: String,
        /// Why it was refused, with the expected form.
        reason: String,
    },

    /// Shard directories that cannot be merged into one run: one missing or
    /// given twice, unfinished, or from another run.
    #[error("cannot merge the shards: {0}")]
    Merge(String),

    /// The run was stopped on purpose (the `SUBMEM_BENCH_ABORT_AFTER` hook).
    #[error("run aborted after {0} items (SUBMEM_BENCH_ABORT_AFTER)")]
    Aborted(usize),

    /// An error of the shared core (building a namespace, a query...).
    #[error(transparent)]
    Core(#[from] submem_core::Error),
}

impl BenchError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }

    /// A format error in `path`.
    pub fn format(
        path: impl Into<PathBuf>,
        format: &'static str,
        reason: impl Into<String>,
    ) -> Self {
        BenchError::Format {
            path: path.into(),
            format,
            reason: reason.into(),
        }
    }
}

impl From<BenchError> for submem_core::Error {
    fn from(e: BenchError) -> Self {
        match e {
            BenchError::Core(inner) => inner,
            other => submem_core::Error::InvalidInput(other.to_string()),
        }
    }
}
