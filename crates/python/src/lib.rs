//! `submem._submem`: the native half of the `submem` Python package.
//!
//! The Python half (`python/submem/__init__.py`) turns dataclasses and plain
//! dicts into the core `Event` shapes and wraps the results; everything that
//! touches a substrate happens here, on one process-wide tokio runtime, with
//! the GIL released so that a thread pool of readers runs in parallel.
//!
//! Services are the command line's: `Config::load(None)` (the embedded
//! MiniLM, SmolLM2 and o200k, or what the `SUBMEM_*` variables point to),
//! each model loaded on first use, from the same cache the CLI fills.

mod bench;
mod errors;
mod memory;

use std::sync::{Arc, LazyLock, OnceLock};

use pyo3::prelude::*;
use submem::registry::Registry;

pub use errors::{Error, InputError, ModelError, SettingsError, StoreError};

/// The Rust side allocates through mimalloc, as the `submem` binary does:
/// candle allocates a tensor per operation, and with the system allocator a
/// MiniLM query embedding takes about twice as long (Python's own objects
/// still use Python's allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The registry every `Memory` and `bench` call builds from.
static REGISTRY: LazyLock<Arc<Registry>> = LazyLock::new(|| Arc::new(Registry::default()));

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// The process-wide runtime (built on first use).
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("submem")
        .build()
        .map_err(|e| Error::new_err(format!("cannot start the tokio runtime: {e}")))?;
    // Another thread may have won the race; its runtime is kept and ours dropped.
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Runs `fut` to completion on the runtime with the GIL released.
fn block_on<F>(py: Python<'_>, fut: F) -> PyResult<F::Output>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    Ok(py.detach(|| rt.block_on(fut)))
}

/// Every substrate the registry builds, as JSON-shaped dicts.
#[pyfunction]
fn substrates(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let listed = REGISTRY.describe();
    pythonize::pythonize(py, &listed).map_err(|e| Error::new_err(e.to_string()))
}

/// The native module.
#[pymodule]
fn _submem(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("SettingsError", py.get_type::<SettingsError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(substrates, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench, m)?)?;
    m.add_class::<memory::Memory>()?;
    m.add_class::<memory::Recall>()?;
    Ok(())
}
