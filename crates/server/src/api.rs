//! The `/v1` HTTP handlers: each reads its request, calls the operation of
//! [`crate::service`] and writes the answer. Errors are [`ServerError`]
//! JSON.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

use submem_core::Event;

use crate::auth::Caller;
use crate::extract::{ApiJson, ApiPath};
use crate::namespace::Submitted;
use crate::service::AppState;
use crate::service::{self, NamespaceInfo, ReadRequest, ReadResponse};
use crate::{Result, ServerError};

pub use crate::service::MAX_K;

/// `POST /v1/namespaces`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateNamespace {
    /// The name (1–256 bytes, no control characters or path separators).
    pub name: String,
    /// `"m2"`, `"flexa:rho=0.2"`, or `{"name": "flexa", "settings": {"rho": 0.2}}`.
    pub substrate: Value,
}

/// `POST /v1/namespaces/{ns}/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// Events, oldest first, in the core `Event` shapes (`{"kind": "turn", ...}`).
    pub events: Vec<Event>,
}

/// `POST /v1/namespaces/{ns}/forget`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// Source ids to forget.
    pub source_ids: Vec<String>,
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
    caller: Caller,
    ApiJson(req): ApiJson<CreateNamespace>,
) -> Result<Response> {
    let info = service::create(&state, &caller, &req.name, &req.substrate).await?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

/// `GET /v1/namespaces`: the caller's namespaces only.
pub async fn list(State(state): State<Arc<AppState>>, caller: Caller) -> Result<Json<Value>> {
    let namespaces = service::list(&state, &caller).await?;
    Ok(Json(json!({ "namespaces": namespaces })))
}

/// `GET /v1/namespaces/{ns}`.
pub async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
) -> Result<Json<NamespaceInfo>> {
    Ok(Json(service::info(&state, &caller, &name).await?))
}

/// `DELETE /v1/namespaces/{ns}`.
pub async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
) -> Result<Json<Value>> {
    service::delete(&state, &caller, &name).await?;
    Ok(Json(json!({ "deleted": name })))
}

/// `POST /v1/namespaces/{ns}/events`: 200 with the substrate's report, or
/// 202 with a job id for a substrate that calls an LLM.
pub async fn write(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
    ApiJson(req): ApiJson<WriteRequest>,
) -> Result<Response> {
    match service::write(&state, &caller, &name, req.events).await? {
        Submitted::Done(r) => {
            Ok(Json(json!({"events": r.events, "units": r.units})).into_response())
        }
        Submitted::Job(job) => Ok(job_accepted(&job)),
    }
}

/// The query of `GET /v1/namespaces/{ns}/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Text to search for in source ids and contents (case-insensitive).
    #[serde(default)]
    pub q: String,
    /// Matching events to skip.
    #[serde(default)]
    pub offset: usize,
    /// Most events to answer (1–1000, default 100).
    pub limit: Option<usize>,
}

/// `GET /v1/namespaces/{ns}/events?q=&offset=&limit=`: the live logged
/// events, with a text search.
pub async fn events(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
    query: std::result::Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Json<Value>> {
    let Query(q) = query.map_err(|e| ServerError::BadRequest(e.body_text()))?;
    let limit = q.limit.unwrap_or(100);
    let (total, events) = service::events(&state, &caller, &name, &q.q, q.offset, limit).await?;
    Ok(Json(
        json!({"total": total, "offset": q.offset, "events": events}),
    ))
}

/// `POST /v1/namespaces/{ns}/read`.
pub async fn read(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
    ApiJson(req): ApiJson<ReadRequest>,
) -> Result<Json<ReadResponse>> {
    Ok(Json(service::read(&state, &caller, &name, &req).await?))
}

/// `POST /v1/namespaces/{ns}/forget`.
pub async fn forget(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
    ApiJson(req): ApiJson<ForgetRequest>,
) -> Result<Json<Value>> {
    let n = service::forget(&state, &caller, &name, req.source_ids).await?;
    Ok(Json(json!({ "forgotten": n })))
}

/// `POST /v1/namespaces/{ns}/manage`.
pub async fn manage(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
) -> Result<Response> {
    match service::manage(&state, &caller, &name).await? {
        Submitted::Done(r) => Ok(Json(json!({ "changed": r.changed })).into_response()),
        Submitted::Job(job) => Ok(job_accepted(&job)),
    }
}

/// `GET /v1/namespaces/{ns}/footprint`.
pub async fn footprint(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
) -> Result<Json<Value>> {
    Ok(Json(service::footprint(&state, &caller, &name).await?))
}

/// `GET /v1/namespaces/{ns}/meter`: per-phase calls, tokens and latency.
pub async fn meter(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
) -> Result<Json<Value>> {
    Ok(Json(service::meter(&state, &caller, &name).await?))
}

/// `GET /v1/jobs/{id}`.
pub async fn job(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath,
) -> Result<Json<crate::jobs::Job>> {
    Ok(Json(service::job(&state, &caller, &id)?))
}

/// `DELETE /v1/jobs/{id}`: cancels a comparison's build.
pub async fn cancel_job(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath,
) -> Result<Json<crate::jobs::Job>> {
    Ok(Json(service::cancel_job(&state, &caller, &id)?))
}

/// `POST /v1/namespaces/{ns}/compare`: the namespace rendered by several
/// substrates for one question and budget.
pub async fn compare(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath,
    ApiJson(req): ApiJson<crate::compare::CompareRequest>,
) -> Result<Response> {
    Ok(
        match crate::compare::compare(&state, &caller, &name, &req).await? {
            crate::compare::Compared::Done(v) => Json(v).into_response(),
            crate::compare::Compared::Building(v) => {
                (StatusCode::ACCEPTED, Json(v)).into_response()
            }
        },
    )
}
