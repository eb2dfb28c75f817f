//! `Memory`: one substrate instance with its meter, and `Recall`, what a read
//! returns.
//!
//! A memory is saved as a directory: `submem-memory.json` (the substrate spec
//! it was built from and a format number) beside `state/`, which is the
//! substrate's own `persist` output. `Memory.load` rebuilds the substrate from
//! the spec and restores the state, so a saved memory needs no settings.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde::{Deserialize, Serialize};

use submem::registry::SubstrateSpec;
use submem::MeteredSubstrate;
use submem_core::{Event, Forget, Namespace, Query, Recall as CoreRecall, Substrate};
use submem_models::Config;

use crate::errors::{core_err, models_err, registry_err, InputError, SettingsError, StoreError};
use crate::{block_on, REGISTRY};

type Metered = MeteredSubstrate<Arc<dyn Substrate>>;

/// The manifest file of a saved memory.
const MANIFEST: &str = "submem-memory.json";
/// The manifest's format number; a newer one is refused with a clear error.
const FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    substrate: String,
}

fn to_py<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, value).map_err(|e| crate::Error::new_err(e.to_string()))
}

fn namespace(name: &str) -> PyResult<Namespace> {
    Namespace::new(name).map_err(core_err)
}

/// The events of a Python list of dicts (each with `kind`), with the index of
/// the first bad one in the error.
fn events_of(list: &Bound<'_, PyAny>) -> PyResult<Vec<Event>> {
    let list = list
        .cast::<PyList>()
        .map_err(|_| InputError::new_err("events must be a list"))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let event: Event = pythonize::depythonize(&item)
            .map_err(|e| InputError::new_err(format!("event {i}: {e}")))?;
        out.push(event);
    }
    Ok(out)
}

/// What a read returns: the rendered memory block and what it shows.
#[pyclass(frozen, get_all, module = "submem._submem")]
pub struct Recall {
    /// The rendered memory block, ready for the reader's context.
    text: String,
    /// `text`'s length in o200k tokens (never above the budget).
    tokens: usize,
    /// Source ids of the events shown, most relevant first.
    sources: Vec<String>,
    /// `(source_id, score, resolution)` for each event shown.
    hits: Vec<(String, f32, String)>,
    /// The read's trace (dict) when asked for and the substrate keeps one.
    trace: Py<PyAny>,
}

#[pymethods]
impl Recall {
    fn __repr__(&self) -> String {
        format!(
            "Recall(tokens={}, sources={}, text={:?})",
            self.tokens,
            self.sources.len(),
            self.text.chars().take(60).collect::<String>()
        )
    }

    fn __str__(&self) -> String {
        self.text.clone()
    }
}

fn recall_of(py: Python<'_>, r: CoreRecall, trace: Option<Bound<'_, PyAny>>) -> Recall {
    let resolution = |h: &submem_core::SourceHit| {
        serde_json::to_value(h.resolution)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{:?}", h.resolution).to_lowercase())
    };
    Recall {
        sources: r.sources.iter().map(|h| h.source_id.clone()).collect(),
        hits: r
            .sources
            .iter()
            .map(|h| (h.source_id.clone(), h.score, resolution(h)))
            .collect(),
        text: r.text,
        tokens: r.tokens,
        trace: trace.map_or_else(|| py.None(), Bound::unbind),
    }
}

/// One substrate instance: write events, read under a budget, manage, forget.
#[pyclass(frozen, module = "submem._submem")]
pub struct Memory {
    spec: SubstrateSpec,
    substrate: Arc<Metered>,
}

impl Memory {
    fn build(py: Python<'_>, spec: SubstrateSpec, memory_llm: Option<&str>) -> PyResult<Self> {
        let mut config = Config::load(None).map_err(models_err)?;
        if let Some(kind) = memory_llm {
            config.services.memory_llm = kind.parse().map_err(models_err)?;
        }
        REGISTRY.check(&spec).map_err(registry_err)?;
        let services = config.lazy_services().map_err(models_err)?;
        let registry = REGISTRY.clone();
        let spec_for_build = spec.clone();
        // Building may load a model (M9, M10 build their reader at once).
        let substrate = py
            .detach(move || {
                MeteredSubstrate::build(&services, |s| registry.build(&spec_for_build, s))
            })
            .map_err(registry_err)?;
        Ok(Memory {
            spec,
            substrate: Arc::new(substrate),
        })
    }
}

#[pymethods]
impl Memory {
    /// Builds `name` with `settings` (`[(key, value), ...]`, values as
    /// strings). `memory_llm` (`local`, `openai`, `none`) overrides the
    /// configuration's memory LLM.
    #[new]
    #[pyo3(signature = (name, settings=Vec::new(), memory_llm=None))]
    fn new(
        py: Python<'_>,
        name: &str,
        settings: Vec<(String, String)>,
        memory_llm: Option<&str>,
    ) -> PyResult<Self> {
        let mut spec = SubstrateSpec::parse(name).map_err(registry_err)?;
        if spec.name.contains(['+', ',']) {
            return Err(SettingsError::new_err(format!(
                "{name:?} is not one substrate name"
            )));
        }
        for (k, v) in settings {
            spec.push_setting(&format!("{k}={v}"))
                .map_err(registry_err)?;
        }
        Memory::build(py, spec, memory_llm)
    }

    /// Loads a memory saved with `save`.
    #[staticmethod]
    #[pyo3(signature = (path, memory_llm=None))]
    fn load(py: Python<'_>, path: PathBuf, memory_llm: Option<&str>) -> PyResult<Self> {
        let manifest_path = path.join(MANIFEST);
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| {
            // A crash between save's two renames leaves the previous save aside.
            let aside = submem::kit::dir::aside_path(&path);
            let hint = if aside.join(MANIFEST).exists() {
                format!("; the previous save is at {}", aside.display())
            } else {
                String::new()
            };
            StoreError::new_err(format!(
                "{} is not a saved memory: cannot read {}: {e}{hint}",
                path.display(),
                manifest_path.display()
            ))
        })?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            StoreError::new_err(format!(
                "{} is torn or foreign: {e}",
                manifest_path.display()
            ))
        })?;
        if manifest.format > FORMAT {
            return Err(StoreError::new_err(format!(
                "{} was saved in format {} by a newer submem (this one reads {FORMAT})",
                path.display(),
                manifest.format
            )));
        }
        let spec = SubstrateSpec::parse(&manifest.substrate).map_err(registry_err)?;
        let memory = Memory::build(py, spec, memory_llm)?;
        let substrate = memory.substrate.clone();
        let state = path.join("state");
        block_on(py, async move { substrate.restore(&state).await })?.map_err(core_err)?;
        Ok(memory)
    }

    /// The substrate spec (`name:key=value,...`) this memory was built from.
    #[getter]
    fn spec(&self) -> String {
        self.spec.to_string()
    }

    /// The substrate's static facts (method, family, ...).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.substrate.info())
    }

    /// Appends events (dicts with `kind` `turn` or `step`) to `namespace`.
    #[pyo3(signature = (events, namespace="default"))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        events: &Bound<'py, PyAny>,
        namespace: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let events = events_of(events)?;
        if events.is_empty() {
            return Err(InputError::new_err("no events to write"));
        }
        let ns = self::namespace(namespace)?;
        let substrate = self.substrate.clone();
        let report =
            block_on(py, async move { substrate.write(&ns, &events).await })?.map_err(core_err)?;
        to_py(py, &report)
    }

    /// Renders memory for `question` within `budget` tokens.
    #[pyo3(signature = (question, budget=4096, namespace="default", top_k=10, observation=None, trace=None))]
    // One argument per Python keyword argument.
    #[allow(clippy::too_many_arguments)]
    fn read<'py>(
        &self,
        py: Python<'py>,
        question: &str,
        budget: usize,
        namespace: &str,
        top_k: usize,
        observation: Option<&str>,
        trace: Option<Vec<String>>,
    ) -> PyResult<Recall> {
        if top_k == 0 {
            return Err(InputError::new_err("top_k must be at least 1"));
        }
        let ns = self::namespace(namespace)?;
        let mut query = match observation {
            Some(obs) => Query::agentic(ns, question, obs, budget),
            None => Query::question(ns, question, budget),
        };
        query.top_k = top_k;
        let substrate = self.substrate.clone();
        let (recall, traced) = block_on(py, async move {
            let recall = substrate.read(&query).await?;
            let traced = match trace {
                Some(ids) if !ids.is_empty() => substrate.trace(&query, &ids).await?,
                _ => None,
            };
            Ok::<_, submem_core::Error>((recall, traced))
        })?
        .map_err(core_err)?;
        let trace = traced.map(|t| to_py(py, &t)).transpose()?;
        Ok(recall_of(py, recall, trace))
    }

    /// Runs the substrate's maintenance pass.
    fn manage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let substrate = self.substrate.clone();
        let report = block_on(py, async move { substrate.manage().await })?.map_err(core_err)?;
        to_py(py, &report)
    }

    /// Deletes the listed events, or every event of `namespace` when
    /// `source_ids` is `None`; returns how many were removed.
    #[pyo3(signature = (source_ids=None, namespace="default"))]
    fn forget(
        &self,
        py: Python<'_>,
        source_ids: Option<Vec<String>>,
        namespace: &str,
    ) -> PyResult<usize> {
        let ns = self::namespace(namespace)?;
        let target = match source_ids {
            Some(ids) => Forget::Sources {
                namespace: ns,
                source_ids: ids,
            },
            None => Forget::Namespace(ns),
        };
        let substrate = self.substrate.clone();
        block_on(py, async move { substrate.forget(&target).await })?.map_err(core_err)
    }

    /// Current size: memory and disk bytes, stored and input tokens.
    fn footprint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.substrate.footprint())
    }

    /// Per-phase (write, read, manage) calls, tokens and time so far.
    fn cost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.substrate.meter().snapshot())
    }

    /// The substrate's behaviour counters (LLM replies used, fallbacks...).
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.substrate.diagnostics() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Saves the memory under `path` (created if missing; an earlier save
    /// there is replaced only once the new one is complete).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let substrate = self.substrate.clone();
        let manifest = Manifest {
            format: FORMAT,
            substrate: self.spec.to_string(),
        };
        block_on(
            py,
            async move { save_to(&substrate, &manifest, &path).await },
        )?
    }

    fn __repr__(&self) -> String {
        format!("Memory({:?})", self.spec.to_string())
    }
}

/// Persists into a fresh sibling directory, then swaps it in, so a crash
/// mid-save leaves the previous save whole (at worst moved aside, which
/// `load` then names).
async fn save_to(substrate: &Metered, manifest: &Manifest, path: &Path) -> PyResult<()> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        StoreError::new_err(format!("cannot {what} {}: {e}", p.display()))
    };
    if path.exists() && !path.join(MANIFEST).exists() {
        return Err(StoreError::new_err(format!(
            "{} exists and is not a saved memory; not overwriting it",
            path.display()
        )));
    }
    let staged = submem::kit::dir::Staged::new(path).map_err(core_err)?;
    substrate
        .persist(&staged.path().join("state"))
        .await
        .map_err(core_err)?;
    let text =
        serde_json::to_string_pretty(manifest).map_err(|e| crate::Error::new_err(e.to_string()))?;
    let manifest_path = staged.path().join(MANIFEST);
    std::fs::write(&manifest_path, text).map_err(|e| io("write", &manifest_path, e))?;
    staged.commit_durably().map_err(core_err)?;
    Ok(())
}
