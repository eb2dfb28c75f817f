//! `submem.bench(...)`: the harness of `submem bench`, called from Python.
//!
//! It runs the same loop ([`submem_bench::runner::run`]) on the same
//! services and returns the summary as dicts. With `out=` the usual files
//! (`items.jsonl`, `summary.json`, `report.md`, `scatter.svg`) are written
//! there and an earlier run in that directory is resumed; without it the run
//! lives in a temporary directory that is removed afterwards.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{json, Map, Value};

use submem::registry::SubstrateSpec;
use submem_bench::dataset::synthetic::SyntheticSpec;
use submem_bench::judges::checks::DEFAULT_LENIENCY_LIMIT;
use submem_bench::runner::{run, Judge, Models, RunOptions};
use submem_bench::{report, results, Dataset, DatasetKind};
use submem_models::Config;

use crate::errors::{bench_err, models_err, registry_err, SettingsError, StoreError};
use crate::{block_on, REGISTRY};

/// The synthetic spec: `submem bench`'s default set with `overrides` (a dict of its fields)
/// applied; an unknown field names the valid ones.
fn synthetic_spec(overrides: Option<&Bound<'_, PyDict>>) -> PyResult<SyntheticSpec> {
    let base = serde_json::to_value(SyntheticSpec::DEFAULT_RUN)
        .map_err(|e| crate::Error::new_err(e.to_string()))?;
    let Value::Object(mut fields) = base else {
        return Err(crate::Error::new_err("synthetic spec is not an object"));
    };
    if let Some(o) = overrides {
        let given: Map<String, Value> = pythonize::depythonize(o.as_any())
            .map_err(|e| SettingsError::new_err(format!("synthetic: {e}")))?;
        for (k, v) in given {
            if !fields.contains_key(&k) {
                let mut known: Vec<&String> = fields.keys().collect();
                known.sort();
                return Err(SettingsError::new_err(format!(
                    "synthetic: unknown field {k:?}; valid: {}",
                    known
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            fields.insert(k, v);
        }
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| SettingsError::new_err(format!("synthetic: {e}")))
}

fn dataset(
    name: &str,
    data: Option<PathBuf>,
    synthetic: Option<&Bound<'_, PyDict>>,
) -> PyResult<Dataset> {
    let kind = DatasetKind::parse(name).map_err(bench_err)?;
    if kind == DatasetKind::Synthetic {
        if data.is_some() {
            return Err(SettingsError::new_err(
                "data is not used with the synthetic dataset (it is generated; see synthetic=)",
            ));
        }
        return synthetic_spec(synthetic)?.dataset().map_err(bench_err);
    }
    if synthetic.is_some() {
        return Err(SettingsError::new_err(
            "synthetic= is only for dataset=\"synthetic\"",
        ));
    }
    let path = data.ok_or_else(|| {
        SettingsError::new_err(format!("data= (a file path) is required for {name}"))
    })?;
    if !path.exists() {
        return Err(StoreError::new_err(format!(
            "data file {} not found",
            path.display()
        )));
    }
    Dataset::load(kind, &path).map_err(bench_err)
}

/// Runs the harness; returns `{"runs": [...], "notes": [...], "failures":
/// [...], "skipped": [...], "out": path or None}`.
#[pyfunction]
#[pyo3(signature = (
    dataset="synthetic", data=None, substrates=vec!["m1".to_string(), "m2".to_string(), "flexa".to_string()],
    budgets=vec![1024], k=vec![10], out=None, reader="none", judge=None, memory_llm="none",
    limit=None, conversations=None, baselines=true, synthetic=None, jobs=1, progress=false,
))]
#[allow(clippy::too_many_arguments)]
pub fn bench<'py>(
    py: Python<'py>,
    dataset: &str,
    data: Option<PathBuf>,
    substrates: Vec<String>,
    budgets: Vec<usize>,
    k: Vec<usize>,
    out: Option<PathBuf>,
    reader: &str,
    judge: Option<&str>,
    memory_llm: &str,
    limit: Option<usize>,
    conversations: Option<usize>,
    baselines: bool,
    synthetic: Option<&Bound<'py, PyDict>>,
    jobs: usize,
    progress: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if substrates.is_empty() {
        return Err(SettingsError::new_err("substrates= lists no substrate"));
    }
    let mut specs = Vec::with_capacity(substrates.len());
    for s in &substrates {
        specs.push(SubstrateSpec::parse(s).map_err(registry_err)?);
    }
    if baselines {
        specs = submem::baselines::with_packing_baselines(&specs, &REGISTRY);
    }
    for s in &specs {
        REGISTRY.check(s).map_err(registry_err)?;
    }
    let data_path = data.clone();
    let dataset = self::dataset(dataset, data, synthetic)?;

    let mut config = Config::load(None).map_err(models_err)?;
    config.services.memory_llm = memory_llm.parse().map_err(models_err)?;
    let reader_kind = reader.parse().map_err(models_err)?;
    let judge_kind = match judge {
        Some(j) => j.parse().map_err(models_err)?,
        None if dataset.kind == DatasetKind::Synthetic => submem_models::LlmKind::None,
        None => reader_kind,
    };
    let reader_llm = config.lazy_llm(reader_kind, "reader");
    let judge = reader_llm
        .as_ref()
        .and_then(|_| config.lazy_llm(judge_kind, "judge"))
        .map(|llm| {
            let name = match judge_kind {
                submem_models::LlmKind::Local => "local",
                _ => "openai",
            };
            Judge::new(name, llm)
        });
    let services = config.lazy_services().map_err(models_err)?;
    let models = Arc::new(Models {
        services,
        reader: reader_llm,
        judges: judge.into_iter().collect(),
    });

    let (dir, _temp) = match &out {
        Some(o) => (o.clone(), None),
        None => {
            let t = tempfile::tempdir().map_err(|e| {
                StoreError::new_err(format!("cannot make a temporary run directory: {e}"))
            })?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| StoreError::new_err(format!("cannot create {}: {e}", dir.display())))?;
    let opts = RunOptions {
        budgets,
        ks: k,
        limit,
        conversations,
        jobs,
        out: dir.clone(),
        progress,
        keep_memories: out.is_some(),
        packing_baselines: baselines,
        ..RunOptions::default()
    };
    opts.validate().map_err(bench_err)?;
    let run_info = json!({
        "dataset": dataset.name,
        "data": data_path,
        "substrates": specs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "budgets": opts.budgets,
        "k": opts.ks,
        "memory_llm": memory_llm,
        "reader": reader,
        "from": "python",
    });
    std::fs::write(dir.join("run.json"), run_info.to_string())
        .map_err(|e| StoreError::new_err(format!("cannot write run.json: {e}")))?;
    let notes = vec![format!(
        "dataset {}: {} conversations, {} questions; memory LLM {memory_llm}, reader {reader}",
        dataset.name,
        dataset.conversations.len(),
        dataset.question_count()
    )];

    let registry = REGISTRY.clone();
    let dataset = Arc::new(dataset);
    let outcome = block_on(py, async move {
        run(dataset, specs, registry, models, opts).await
    })?
    .map_err(bench_err)?;
    if outcome.items.is_empty() && !outcome.failures.is_empty() {
        return Err(crate::Error::new_err(format!(
            "every task failed: {}",
            outcome.failures.join("; ")
        )));
    }
    // The judge checks' rates (a run with a judge checks it on known
    // answers) come from the run directory's log.
    let summary = results::summarize_dir(
        &dir,
        &outcome.items,
        &outcome.writes,
        DEFAULT_LENIENCY_LIMIT,
    )
    .map_err(bench_err)?;
    if out.is_some() {
        report::write_all(&dir, &summary, &notes).map_err(bench_err)?;
    }
    let result = json!({
        "runs": summary.runs,
        "judge_checks": summary.judge_checks,
        "notes": notes,
        "failures": outcome.failures,
        "skipped": outcome.skipped,
        "out": out,
    });
    pythonize::pythonize(py, &result).map_err(|e| crate::Error::new_err(e.to_string()))
}
