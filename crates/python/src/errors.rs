//! The Python exceptions: one `submem.Error` and a subclass per kind of
//! failure, each carrying the Rust error's whole message chain.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::PyErr;

use submem::RegistryError;
use submem_bench::BenchError;
use submem_core::Error as CoreError;
use submem_models::ModelsError;

create_exception!(
    submem,
    Error,
    PyException,
    "Every error submem raises: the message is the Rust error's chain."
);
create_exception!(
    submem,
    SettingsError,
    Error,
    "An unknown substrate, an unknown or invalid setting, or a bad option."
);
create_exception!(
    submem,
    InputError,
    Error,
    "Events, a namespace, a question or a budget the substrate cannot accept."
);
create_exception!(
    submem,
    StoreError,
    Error,
    "A saved memory or data file that is missing, torn or foreign, or an I/O failure."
);
create_exception!(
    submem,
    ModelError,
    Error,
    "A model (embedder, LLM, token counter) could not be loaded or failed."
);

/// The error and its sources, joined (`outer: inner: innermost`).
fn chain(e: &dyn std::error::Error) -> String {
    submem_bench::runner::error_chain(e)
}

/// A core error as the matching exception.
pub fn core_err(e: CoreError) -> PyErr {
    let msg = chain(&e);
    match e {
        CoreError::InvalidInput(_) => InputError::new_err(msg),
        CoreError::Service(_) => ModelError::new_err(msg),
        CoreError::Store { .. } | CoreError::Io { .. } => StoreError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// A registry error (a substrate spec refused or not buildable) as the
/// matching exception.
pub fn registry_err(e: RegistryError) -> PyErr {
    let msg = chain(&e);
    match e {
        RegistryError::UnknownSubstrate { .. }
        | RegistryError::BadSetting { .. }
        | RegistryError::BadFactory { .. }
        | RegistryError::InvalidSpec(_) => SettingsError::new_err(msg),
        RegistryError::NeedsLlm { .. } | RegistryError::NeedsLocalModel { .. } => {
            ModelError::new_err(msg)
        }
        RegistryError::Build { source, .. } => core_err(source),
        _ => Error::new_err(msg),
    }
}

/// A bench (dataset, run) error as the matching exception.
pub fn bench_err(e: BenchError) -> PyErr {
    let msg = chain(&e);
    match e {
        BenchError::Registry(inner) => registry_err(inner),
        BenchError::InvalidOption(_) => SettingsError::new_err(msg),
        BenchError::Io { .. } | BenchError::Format { .. } => StoreError::new_err(msg),
        BenchError::Core(inner) => core_err(inner),
        _ => Error::new_err(msg),
    }
}

/// A models (configuration, loading) error.
pub fn models_err(e: ModelsError) -> PyErr {
    match e {
        ModelsError::Config(_) => SettingsError::new_err(chain(&e)),
        other => ModelError::new_err(chain(&other)),
    }
}
