//! The axum application: routes, the authentication, forwarding, metrics,
//! timeout and trace layers, the body limit, and the fallbacks that keep
//! every answer JSON.
//!
//! [`ROUTES`] lists every route once; the router is built from the same
//! handlers, and a test checks that the OpenAPI document
//! ([`crate::openapi`]) describes exactly these.

use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api;
use crate::forward::Forwarding;
use crate::service::AppState;

/// Every HTTP route as `(method, path)`, in OpenAPI's path syntax.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/v1/openapi.json"),
    ("get", "/v1/namespaces"),
    ("post", "/v1/namespaces"),
    ("get", "/v1/namespaces/{ns}"),
    ("delete", "/v1/namespaces/{ns}"),
    ("get", "/v1/namespaces/{ns}/events"),
    ("post", "/v1/namespaces/{ns}/events"),
    ("post", "/v1/namespaces/{ns}/read"),
    ("post", "/v1/namespaces/{ns}/compare"),
    ("post", "/v1/namespaces/{ns}/forget"),
    ("post", "/v1/namespaces/{ns}/manage"),
    ("get", "/v1/namespaces/{ns}/footprint"),
    ("get", "/v1/namespaces/{ns}/meter"),
    ("get", "/v1/jobs/{id}"),
    ("delete", "/v1/jobs/{id}"),
    ("get", "/v1/reports"),
    ("get", "/v1/reports/{run}/summary"),
    ("get", "/v1/reports/{run}/items"),
    ("get", "/v1/reports/{run}/agentic"),
    ("get", "/v1/reports/{run}/episodes"),
];

/// The HTTP application (without `/mcp`, which [`crate::Server::serve`] nests in).
pub fn router(state: Arc<AppState>) -> Router {
    let limit = state.store.config.limits.max_body_bytes;
    let v1 = Router::new()
        .route("/v1/namespaces", get(api::list).post(api::create))
        .route("/v1/namespaces/{ns}", get(api::get).delete(api::delete))
        .route(
            "/v1/namespaces/{ns}/events",
            get(api::events).post(api::write),
        )
        .route("/v1/namespaces/{ns}/read", post(api::read))
        .route("/v1/namespaces/{ns}/compare", post(api::compare))
        .route("/v1/namespaces/{ns}/forget", post(api::forget))
        .route("/v1/namespaces/{ns}/manage", post(api::manage))
        .route("/v1/namespaces/{ns}/footprint", get(api::footprint))
        .route("/v1/namespaces/{ns}/meter", get(api::meter))
        .route("/v1/jobs/{id}", get(api::job).delete(api::cancel_job))
        .route_layer(middleware::from_fn_with_state(
            Forwarding {
                forwarder: state.forwarder.clone(),
                max_body_bytes: limit,
            },
            crate::forward::to_owner,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    // Reports belong to no namespace: authenticated, never forwarded.
    let reports = Router::new()
        .route("/v1/reports", get(crate::reports::list_route))
        .route(
            "/v1/reports/{run}/summary",
            get(crate::reports::summary_route),
        )
        .route("/v1/reports/{run}/items", get(crate::reports::items_route))
        .route(
            "/v1/reports/{run}/agentic",
            get(crate::reports::agentic_route),
        )
        .route(
            "/v1/reports/{run}/episodes",
            get(crate::reports::episodes_route),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let timeout = Duration::from_secs(state.store.config.request_timeout_s);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(openapi))
        .merge(v1)
        .merge(reports)
        .merge(crate::ui::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), count))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .layer(axum::extract::DefaultBodyLimit::max(limit))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .with_state(state)
}

/// The official MCP Python SDK treats any answer to its session `DELETE`
/// but 200 and 204 as a failure; rmcp answers 202. A terminated session
/// has nothing more to accept, so 202 becomes 200.
pub async fn mcp_delete_ok(req: Request, next: Next) -> Response {
    let delete = req.method() == axum::http::Method::DELETE;
    let mut resp = next.run(req).await;
    if delete && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::OK;
    }
    resp
}

/// Resolves the bearer key into a [`crate::auth::Caller`] extension.
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    match state.keys.authenticate(req.headers()) {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

async fn count(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().as_str().to_string();
    let start = Instant::now();
    let resp = next.run(req).await;
    let elapsed = start.elapsed();
    let status = resp.status().as_u16();
    tracing::debug!(%method, %route, status, ms = elapsed.as_secs_f64() * 1e3, "request");
    state.metrics.record(&method, &route, status, elapsed);
    resp
}

/// Alive: answers as soon as the listener is up, whatever the number of
/// namespaces (none is opened before its first request).
async fn healthz(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": state.started.elapsed().as_secs(),
    }))
}

/// Ready: the store answers (the data directory is there, or the database
/// replies); 503 otherwise.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    match state.store.backend().ready().await {
        Ok(()) => Json(serde_json::json!({
            "status": "ready",
            "store": state.store.backend().kind(),
            "open_namespaces": state.store.all_resident().len(),
        }))
        .into_response(),
        Err(e) => {
            let body = serde_json::json!({"status": "unavailable",
                "store": state.store.backend().kind(), "error": e.to_string()});
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        state.metrics.render(&state.store),
    )
        .into_response()
}

async fn openapi() -> Json<serde_json::Value> {
    Json(crate::openapi::document())
}

/// A handler that panicked (a substrate bug) answers 500 JSON; the process
/// keeps serving.
fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    crate::ServerError::Internal("the request panicked; see the server log".into()).into_response()
}

async fn not_found(req: Request) -> Response {
    let body = serde_json::json!({"error": {"code": "not_found",
        "message": format!("no route {} {}; see /v1/openapi.json", req.method(), req.uri().path())}});
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

async fn method_not_allowed(req: Request) -> Response {
    let body = serde_json::json!({"error": {"code": "method_not_allowed",
        "message": format!("{} is not allowed on {}; see /v1/openapi.json", req.method(), req.uri().path())}});
    (StatusCode::METHOD_NOT_ALLOWED, Json(body)).into_response()
}
