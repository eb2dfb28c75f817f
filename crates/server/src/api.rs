//! The `/v1` HTTP handlers and the JSON shapes they read and write.
//!
//! Every handler checks the caller's scope before it touches a namespace
//! (see [`crate::auth`]), checks sizes and budgets against the configured
//! [`crate::config::Limits`] before any work, and answers errors as
//! [`ServerError`] JSON.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

use submem_core::query::{MAX_BUDGET, MIN_BUDGET};
use submem_core::{Event, Query, ReadTrace, SourceHit};

use crate::app::AppState;
use crate::auth::Caller;
use crate::extract::{ApiJson, ApiPath};
use crate::namespace::{NamespaceHandle, Submitted};
use crate::store::spec_from_json;
use crate::{Result, ServerError};

/// Largest `k` a read may ask for.
pub const MAX_K: usize = 1000;

/// `POST /v1/namespaces`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateNamespace {
    /// The name (1–256 bytes, no control characters or path separators).
    pub name: String,
    /// `"m2"`, `"flexa:rho=0.2"`, or `{"name": "flexa", "settings": {"rho": 0.2}}`.
    pub substrate: Value,
}

/// A namespace as the API shows it.
#[derive(Debug, Serialize, Deserialize)]
pub struct NamespaceInfo {
    /// The name.
    pub name: String,
    /// The substrate spec.
    pub substrate: String,
    /// Whether writes run as background jobs.
    pub background: bool,
    /// Events stored.
    pub events: usize,
    /// Creation time, Unix seconds.
    pub created_unix: u64,
    /// Bytes of the event log.
    pub log_bytes: u64,
    /// Log offset applied to the substrate.
    pub applied_offset: u64,
    /// Log offset the newest snapshot covers.
    pub snapshot_offset: u64,
}

/// `POST /v1/namespaces/{ns}/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// Events, oldest first, in the core `Event` shapes (`{"kind": "turn", ...}`).
    pub events: Vec<Event>,
}

/// `POST /v1/namespaces/{ns}/read`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// A question (conversational regime).
    #[serde(default)]
    pub question: Option<String>,
    /// The task (agentic regime, with `observation`).
    #[serde(default)]
    pub task: Option<String>,
    /// The newest observation (agentic regime).
    #[serde(default)]
    pub observation: Option<String>,
    /// Token budget of the whole reader context.
    pub budget: usize,
    /// Items to retrieve (default 10).
    #[serde(default)]
    pub k: Option<usize>,
    /// Tokens of the reader's fixed prompt around the memory block.
    #[serde(default)]
    pub fixed_prompt_tokens: Option<usize>,
    /// Source ids to trace (how they ranked and why they were or were not shown).
    #[serde(default)]
    pub trace: Option<Vec<String>>,
}

/// What a read returns.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReadResponse {
    /// The rendered memory block.
    pub text: String,
    /// Its tokens (never above the allowance).
    pub tokens: usize,
    /// The events shown, most relevant first.
    pub sources: Vec<SourceHit>,
    /// The trace, when asked for and the substrate keeps one (FlexA-Mem).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<ReadTrace>,
    /// Time the substrate took, milliseconds.
    pub latency_ms: f64,
}

/// `POST /v1/namespaces/{ns}/forget`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// Source ids to forget.
    pub source_ids: Vec<String>,
}

/// The namespace `name` if the caller may see it; 404 otherwise, whether or
/// not it exists.
pub fn visible(state: &AppState, caller: &Caller, name: &str) -> Result<Arc<NamespaceHandle>> {
    if !caller.covers(name) {
        return Err(ServerError::NamespaceNotFound(name.into()));
    }
    state
        .store
        .get(name)
        .ok_or_else(|| ServerError::NamespaceNotFound(name.into()))
}

/// The API view of a namespace.
pub async fn info(h: &NamespaceHandle) -> NamespaceInfo {
    let (log_bytes, applied_offset, snapshot_offset) = h.offsets();
    NamespaceInfo {
        name: h.meta.name.clone(),
        substrate: h.meta.substrate.clone(),
        background: h.background,
        events: h.event_count().await,
        created_unix: h.meta.created_unix,
        log_bytes,
        applied_offset,
        snapshot_offset,
    }
}

fn job_accepted(job: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        Json(json!({"job": job, "status_url": format!("/v1/jobs/{job}")})),
    )
        .into_response()
}

/// `POST /v1/namespaces`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<CreateNamespace>,
) -> Result<Response> {
    if !caller.covers(&req.name) {
        return Err(ServerError::Forbidden(format!(
            "this key may only create namespaces starting with {}",
            caller
                .prefixes
                .iter()
                .map(|p| format!("{p:?}"))
                .collect::<Vec<_>>()
                .join(" or ")
        )));
    }
    let spec = match &req.substrate {
        Value::String(s) => spec_from_json(s, None)?,
        Value::Object(m) => {
            let name = m.get("name").and_then(Value::as_str).ok_or_else(|| {
                ServerError::BadSubstrate("substrate object needs a string `name`".into())
            })?;
            if let Some(k) = m.keys().find(|k| *k != "name" && *k != "settings") {
                return Err(ServerError::BadSubstrate(format!(
                    "unknown field {k:?} in substrate (expected name, settings)"
                )));
            }
            spec_from_json(name, m.get("settings"))?
        }
        other => {
            return Err(ServerError::BadSubstrate(format!(
                "substrate must be a string such as \"m2\" or an object {{name, settings}}, got {other}"
            )))
        }
    };
    let h = state.store.create(&req.name, spec).await?;
    Ok((StatusCode::CREATED, Json(info(&h).await)).into_response())
}

/// `GET /v1/namespaces`: the caller's namespaces only.
pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
) -> Json<Value> {
    let mut out = Vec::new();
    for h in state.store.all() {
        if caller.covers(&h.meta.name) {
            out.push(info(&h).await);
        }
    }
    Json(json!({ "namespaces": out }))
}

/// `GET /v1/namespaces/{ns}`.
pub async fn get(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
) -> Result<Json<NamespaceInfo>> {
    let h = visible(&state, &caller, &name)?;
    Ok(Json(info(&h).await))
}

/// `DELETE /v1/namespaces/{ns}`.
pub async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
) -> Result<Json<Value>> {
    visible(&state, &caller, &name)?;
    if !state.store.delete(&name).await? {
        return Err(ServerError::NamespaceNotFound(name));
    }
    Ok(Json(json!({ "deleted": name })))
}

/// Checks a batch against the limits.
pub fn check_events(state: &AppState, events: &[Event]) -> Result<()> {
    let limits = &state.store.config.limits;
    if events.is_empty() {
        return Err(ServerError::BadRequest("`events` is empty".into()));
    }
    if events.len() > limits.max_batch {
        return Err(ServerError::TooLarge(format!(
            "batch of {} events; at most {} per request",
            events.len(),
            limits.max_batch
        )));
    }
    for e in events {
        let len = e.content().len();
        if len > limits.max_text_bytes {
            return Err(ServerError::TooLarge(format!(
                "event {:?} has {len} bytes of text; at most {}",
                e.source_id(),
                limits.max_text_bytes
            )));
        }
        if e.source_id().len() > 256 {
            return Err(ServerError::BadRequest(format!(
                "source id of {} bytes; at most 256",
                e.source_id().len()
            )));
        }
    }
    Ok(())
}

/// `POST /v1/namespaces/{ns}/events`: 200 with the substrate's report, or
/// 202 with a job id for a substrate that calls an LLM.
pub async fn write(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
    ApiJson(req): ApiJson<WriteRequest>,
) -> Result<Response> {
    let h = visible(&state, &caller, &name)?;
    check_events(&state, &req.events)?;
    match h.write(req.events, &state.store.jobs).await? {
        Submitted::Done(r) => {
            Ok(Json(json!({"events": r.events, "units": r.units})).into_response())
        }
        Submitted::Job(job) => Ok(job_accepted(&job)),
    }
}

/// Builds and checks the query of a read request.
pub fn query_of(state: &AppState, h: &NamespaceHandle, req: &ReadRequest) -> Result<Query> {
    let max = state.store.config.limits.max_text_bytes;
    for t in [&req.question, &req.task, &req.observation]
        .into_iter()
        .flatten()
    {
        if t.len() > max {
            return Err(ServerError::TooLarge(format!(
                "query text of {} bytes; at most {max}",
                t.len()
            )));
        }
    }
    if !(MIN_BUDGET..=MAX_BUDGET).contains(&req.budget) {
        return Err(ServerError::BadRequest(format!(
            "budget must be in {MIN_BUDGET}..={MAX_BUDGET} tokens, got {}",
            req.budget
        )));
    }
    let k = req.k.unwrap_or(10);
    if !(1..=MAX_K).contains(&k) {
        return Err(ServerError::BadRequest(format!(
            "k must be in 1..={MAX_K}, got {k}"
        )));
    }
    let q = match (&req.question, &req.task, &req.observation) {
        (Some(q), None, None) => Query::question(h.ns.clone(), q.clone(), req.budget),
        (None, Some(t), o) => Query::agentic(
            h.ns.clone(),
            t.clone(),
            o.clone().unwrap_or_default(),
            req.budget,
        ),
        (None, None, Some(o)) => Query::agentic(h.ns.clone(), String::new(), o.clone(), req.budget),
        (None, None, None) => {
            return Err(ServerError::BadRequest(
                "give `question`, or `task` and/or `observation`".into(),
            ))
        }
        _ => {
            return Err(ServerError::BadRequest(
                "`question` cannot be combined with `task` or `observation`".into(),
            ))
        }
    };
    let fixed = req.fixed_prompt_tokens.unwrap_or(0);
    if fixed >= q.filled_budget() {
        return Err(ServerError::BadRequest(format!(
            "fixed_prompt_tokens {fixed} leaves no room in a budget of {}",
            req.budget
        )));
    }
    Ok(q.with_top_k(k).with_fixed_prompt_tokens(fixed))
}

/// `POST /v1/namespaces/{ns}/read`.
pub async fn read(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
    ApiJson(req): ApiJson<ReadRequest>,
) -> Result<Json<ReadResponse>> {
    let h = visible(&state, &caller, &name)?;
    let query = query_of(&state, &h, &req)?;
    if req.trace.as_ref().is_some_and(|t| t.len() > MAX_K) {
        return Err(ServerError::TooLarge(format!(
            "at most {MAX_K} source ids to trace"
        )));
    }
    let start = Instant::now();
    let recall = h.read(&query).await?;
    let latency_ms = start.elapsed().as_secs_f64() * 1e3;
    let trace = match &req.trace {
        Some(ids) if !ids.is_empty() => h.trace(&query, ids).await?,
        _ => None,
    };
    Ok(Json(ReadResponse {
        text: recall.text,
        tokens: recall.tokens,
        sources: recall.sources,
        trace,
        latency_ms,
    }))
}

/// `POST /v1/namespaces/{ns}/forget`.
pub async fn forget(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
    ApiJson(req): ApiJson<ForgetRequest>,
) -> Result<Json<Value>> {
    let h = visible(&state, &caller, &name)?;
    let max = state.store.config.limits.max_forget;
    if req.source_ids.len() > max {
        return Err(ServerError::TooLarge(format!(
            "{} source ids; at most {max} per request",
            req.source_ids.len()
        )));
    }
    let n = h.forget(req.source_ids).await?;
    Ok(Json(json!({ "forgotten": n })))
}

/// `POST /v1/namespaces/{ns}/manage`.
pub async fn manage(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
) -> Result<Response> {
    let h = visible(&state, &caller, &name)?;
    match h.manage(&state.store.jobs).await? {
        Submitted::Done(r) => Ok(Json(json!({ "changed": r.changed })).into_response()),
        Submitted::Job(job) => Ok(job_accepted(&job)),
    }
}

/// `GET /v1/namespaces/{ns}/footprint`.
pub async fn footprint(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
) -> Result<Json<Value>> {
    let h = visible(&state, &caller, &name)?;
    let f = h.footprint();
    let (log_bytes, _, _) = h.offsets();
    Ok(Json(json!({
        "events": h.event_count().await,
        "log_bytes": log_bytes,
        "memory_bytes": f.memory_bytes,
        "disk_bytes": f.disk_bytes,
        "stored_tokens": f.stored_tokens,
        "input_tokens": f.input_tokens,
    })))
}

/// `GET /v1/namespaces/{ns}/meter`: per-phase calls, tokens and latency.
pub async fn meter(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath,
) -> Result<Json<Value>> {
    let h = visible(&state, &caller, &name)?;
    let m = h.meter();
    Ok(Json(json!({
        "write": m.write, "read": m.read, "manage": m.manage,
        "total_calls": m.total_calls(), "total_tokens": m.total_tokens(),
    })))
}

/// `GET /v1/jobs/{id}`.
pub async fn job(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath,
) -> Result<Json<crate::jobs::Job>> {
    match state.store.jobs.get(&id) {
        Some(j) if caller.covers(&j.namespace) => Ok(Json(j)),
        _ => Err(ServerError::JobNotFound(id)),
    }
}
