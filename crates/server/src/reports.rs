//! Bench reports served to the inspector: with `reports_dir` set (`submem
//! serve --reports DIR`), `GET /v1/reports` lists the runs under it and the
//! page opens one without choosing files.
//!
//! A run is a directory holding a `summary.json` written by `submem bench`
//! (and usually its `items.jsonl`), or an agentic run's `agentic.json` and
//! `episodes.jsonl` (`submem bench --dataset textworld|alfworld|…`, whose
//! episodes the page replays step by step): `DIR` itself (listed as `.`)
//! and each directory directly under it. Only those files are served, by
//! run name; a name is a single directory name under `DIR`, so no request
//! reaches outside it. Reports are the output of benchmark runs, not tenant
//! data: any valid key may read them.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use crate::auth::Caller;
use crate::extract::ApiPath;
use crate::service::AppState;
use crate::{Result, ServerError};

/// The name `DIR` itself is listed under when it is a run.
pub const ROOT: &str = ".";

/// What a run holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// A question-answering run: `summary.json` (+ `items.jsonl`).
    Qa,
    /// A live-environment run: `agentic.json` (+ `episodes.jsonl`).
    Agentic,
}

impl RunKind {
    /// The run's report file and its per-record file.
    fn files(self) -> (&'static str, &'static str) {
        match self {
            RunKind::Qa => ("summary.json", "items.jsonl"),
            RunKind::Agentic => ("agentic.json", "episodes.jsonl"),
        }
    }
}

/// One run found under the reports directory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportRun {
    /// `.` for the directory itself, else the run directory's name.
    pub name: String,
    /// QA (`summary.json`) or agentic (`agentic.json`).
    pub kind: RunKind,
    /// Whether the run has its per-record file (`items.jsonl` or
    /// `episodes.jsonl`).
    pub items: bool,
    /// Bytes of the report and the per-record file together.
    pub bytes: u64,
    /// When the report was last written (seconds since the epoch).
    pub modified_unix: Option<u64>,
}

fn run_of_kind(dir: &Path, name: &str, kind: RunKind) -> Option<ReportRun> {
    let (report, records) = kind.files();
    let report = std::fs::metadata(dir.join(report)).ok()?;
    if !report.is_file() {
        return None;
    }
    let records = std::fs::metadata(dir.join(records)).ok();
    Some(ReportRun {
        name: name.to_string(),
        kind,
        items: records.as_ref().is_some_and(|m| m.is_file()),
        bytes: report.len() + records.map_or(0, |m| m.len()),
        modified_unix: report
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs()),
    })
}

// A directory is listed once per kind it holds (a directory could hold
// both, and the page opens each with its own view).
fn runs_at(dir: &Path, name: &str) -> Vec<ReportRun> {
    [RunKind::Qa, RunKind::Agentic]
        .into_iter()
        .filter_map(|kind| run_of_kind(dir, name, kind))
        .collect()
}

/// The runs under `dir`, newest first (then by name).
pub fn list(dir: &Path) -> Result<Vec<ReportRun>> {
    let entries = std::fs::read_dir(dir).map_err(|e| ServerError::io(dir, e))?;
    let mut runs: Vec<ReportRun> = runs_at(dir, ROOT);
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || !e.path().is_dir() {
            continue;
        }
        runs.extend(runs_at(&e.path(), &name));
    }
    runs.sort_by(|a, b| {
        b.modified_unix
            .cmp(&a.modified_unix)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(runs)
}

/// The path of `file` of run `name` under `dir`, refusing any name that is
/// not `.` or one plain directory name.
pub fn file_of(dir: &Path, name: &str, file: &str) -> Result<PathBuf> {
    let plain =
        !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\']) && name != "..";
    let run = if name == ROOT {
        dir.to_path_buf()
    } else if plain {
        dir.join(name)
    } else {
        return Err(ServerError::ReportNotFound(name.into()));
    };
    let path = run.join(file);
    if !path.is_file() {
        return Err(ServerError::ReportNotFound(format!("{name}/{file}")));
    }
    Ok(path)
}

fn reports_dir(state: &AppState) -> Result<&Path> {
    state.store.config.reports_dir.as_deref().ok_or_else(|| {
        ServerError::ReportNotFound(
            "no reports directory: start the server with --reports DIR (or reports_dir in [server])"
                .into(),
        )
    })
}

/// `GET /v1/reports`: the runs the inspector may open.
pub async fn list_route(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
) -> Result<Json<Value>> {
    let Some(dir) = state.store.config.reports_dir.clone() else {
        return Ok(Json(json!({ "runs": [], "configured": false })));
    };
    let runs = tokio::task::spawn_blocking(move || list(&dir))
        .await
        .map_err(|e| ServerError::Internal(format!("listing reports: {e}")))??;
    Ok(Json(json!({ "runs": runs, "configured": true })))
}

async fn serve_file(
    state: &AppState,
    name: &str,
    file: &'static str,
    content_type: &'static str,
) -> Result<Response> {
    let path = file_of(reports_dir(state)?, name, file)?;
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| ServerError::io(&path, e))?;
    Ok(([(header::CONTENT_TYPE, content_type)], bytes).into_response())
}

/// `GET /v1/reports/{run}/summary`: the run's `summary.json`.
pub async fn summary_route(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
    ApiPath(run): ApiPath,
) -> Result<Response> {
    serve_file(&state, &run, "summary.json", "application/json").await
}

/// `GET /v1/reports/{run}/items`: the run's `items.jsonl`.
pub async fn items_route(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
    ApiPath(run): ApiPath,
) -> Result<Response> {
    serve_file(&state, &run, "items.jsonl", "application/x-ndjson").await
}

/// `GET /v1/reports/{run}/agentic`: an agentic run's `agentic.json`.
pub async fn agentic_route(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
    ApiPath(run): ApiPath,
) -> Result<Response> {
    serve_file(&state, &run, "agentic.json", "application/json").await
}

/// `GET /v1/reports/{run}/episodes`: an agentic run's `episodes.jsonl`
/// (every step of every episode; the memory text too with `--trace`).
pub async fn episodes_route(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
    ApiPath(run): ApiPath,
) -> Result<Response> {
    serve_file(&state, &run, "episodes.jsonl", "application/x-ndjson").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, items: bool) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("summary.json"), "{\"runs\": []}").unwrap();
        if items {
            std::fs::write(dir.join("items.jsonl"), "{}\n").unwrap();
        }
    }

    fn agentic_run(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("agentic.json"), "{\"cells\": []}").unwrap();
        std::fs::write(dir.join("episodes.jsonl"), "{}\n").unwrap();
    }

    #[test]
    fn lists_the_directory_and_its_runs() {
        let d = tempfile::tempdir().unwrap();
        run(d.path(), true);
        run(&d.path().join("sweep-a"), false);
        agentic_run(&d.path().join("games"));
        std::fs::create_dir_all(d.path().join("not-a-run")).unwrap();
        run(&d.path().join(".hidden"), true);
        let mut names: Vec<(String, RunKind, bool)> = list(d.path())
            .unwrap()
            .into_iter()
            .map(|r| (r.name, r.kind, r.items))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            names,
            vec![
                (".".to_string(), RunKind::Qa, true),
                ("games".to_string(), RunKind::Agentic, true),
                ("sweep-a".to_string(), RunKind::Qa, false)
            ]
        );
    }

    #[test]
    fn a_directory_with_both_kinds_is_listed_once_per_kind() {
        let d = tempfile::tempdir().unwrap();
        run(&d.path().join("both"), false);
        agentic_run(&d.path().join("both"));
        let kinds: Vec<RunKind> = list(d.path())
            .unwrap()
            .into_iter()
            .map(|r| r.kind)
            .collect();
        assert_eq!(kinds.len(), 2);
        assert!(kinds.contains(&RunKind::Qa) && kinds.contains(&RunKind::Agentic));
    }

    #[test]
    fn names_cannot_leave_the_directory() {
        let d = tempfile::tempdir().unwrap();
        run(&d.path().join("a"), true);
        assert!(file_of(d.path(), "a", "items.jsonl").is_ok());
        for bad in ["..", "../a", "a/../a", "", ".hidden", "/etc", "a\\b"] {
            assert!(
                matches!(
                    file_of(d.path(), bad, "summary.json"),
                    Err(ServerError::ReportNotFound(_))
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            file_of(d.path(), ".", "summary.json"),
            Err(ServerError::ReportNotFound(_))
        ));
    }
}
