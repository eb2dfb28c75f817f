//! The one error type of the facade: what building a substrate by name can
//! refuse.

/// Result alias for the registry.
pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// A substrate spec that names nothing known, carries a bad setting, or
/// cannot be built with the services at hand.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A spec or list of specs that cannot be read (`:k=3`, an empty list).
    #[error("invalid option: {0}")]
    InvalidSpec(String),

    /// No factory answers to the name.
    #[error("unknown substrate {name:?}; known substrates: {known}")]
    UnknownSubstrate {
        /// What was asked for.
        name: String,
        /// The names the registry knows, with their aliases.
        known: String,
    },

    /// A setting could not be parsed or is out of range.
    #[error("substrate {substrate}: bad setting {setting:?}: {reason}")]
    BadSetting {
        /// The substrate.
        substrate: String,
        /// The offending `key=value`, or the whole spec.
        setting: String,
        /// Why it was refused.
        reason: String,
    },

    /// The substrate cannot work without a memory-writing LLM and the
    /// services have none (`--memory-llm none`).
    #[error("{substrate} needs a memory LLM and the run has none (--memory-llm none); skipped")]
    NeedsLlm {
        /// The substrate spec.
        substrate: String,
    },

    /// The substrate trains or runs the local model's weights (M9) and they
    /// cannot be found or loaded, whatever memory LLM the services use.
    #[error("{substrate} needs the local SmolLM2 weights even with a remote memory LLM: {reason}; skipped")]
    NeedsLocalModel {
        /// The substrate spec.
        substrate: String,
        /// Why the weights are unavailable, with the fix.
        reason: String,
    },

    /// A factory added from untrusted code that does not describe itself
    /// properly (a bad name, a duplicated alias).
    #[error("substrate {name}: {reason}")]
    BadFactory {
        /// The factory's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The substrate's own constructor failed.
    #[error("{substrate}: {source}")]
    Build {
        /// The substrate spec.
        substrate: String,
        /// The error it raised.
        #[source]
        source: submem_core::Error,
    },
}

impl From<RegistryError> for submem_core::Error {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Build { source, .. } => source,
            other => submem_core::Error::InvalidInput(other.to_string()),
        }
    }
}
