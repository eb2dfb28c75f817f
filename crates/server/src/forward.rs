//! Forwarding between nodes (PostgreSQL store): a request for a namespace
//! that another node owns is sent to that node, and its answer is returned
//! as is.
//!
//! **Why forward rather than redirect (307).** Clients reach the service
//! through one address (a load balancer, a DNS name) and need not know or
//! reach the nodes; HTTP clients drop the `Authorization` header when a
//! redirect changes host (reqwest, curl and browsers do), so a 307 to
//! another node would arrive unauthenticated; and MCP clients do not follow
//! redirects inside a session. Forwarding costs one extra hop on loopback or
//! a private network.
//!
//! A forwarded request carries [`FORWARDED`]; a node that receives one for a
//! namespace it does not own either takes the namespace (its owner died) or
//! answers `503 namespace_busy` with `Retry-After`, never forwards again, so
//! ownership moving mid-request cannot loop.

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

use crate::error::OwnedBy;
use crate::{Result, ServerError};

/// Header of a request one node sent to another.
pub const FORWARDED: &str = "x-submem-forwarded";

/// Headers sent on to the owner.
const KEPT: [&str; 3] = ["authorization", "content-type", "accept"];

/// The client nodes use to reach each other.
#[derive(Debug, Clone)]
pub struct Forwarder {
    client: reqwest::Client,
    node: String,
}

impl Forwarder {
    /// A forwarder for node `node` (its advertised URL), with `timeout` per
    /// forwarded request.
    pub fn new(node: &str, timeout: Duration) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ServerError::Config(format!("HTTP client: {e}")))?;
        Ok(Forwarder {
            client,
            node: node.to_string(),
        })
    }

    /// Sends `method path` with `body` to `owner`; the owner's answer.
    pub async fn send(
        &self,
        owner: &str,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: axum::body::Bytes,
    ) -> Result<(StatusCode, HeaderMap, axum::body::Bytes)> {
        let url = format!("{owner}{path_and_query}");
        let mut request = self
            .client
            .request(method, &url)
            .header(FORWARDED, self.node.as_str())
            .body(body);
        for name in KEPT {
            if let Some(v) = headers.get(name) {
                request = request.header(name, v.clone());
            }
        }
        let unreachable = |e: reqwest::Error| {
            ServerError::Busy(format!(
                "the namespace's owner ({owner}) did not answer: {e}; retry shortly (a dead \
                 owner's namespaces move to another node once the database sees it gone)"
            ))
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.map_err(unreachable)?;
        Ok((status, headers, bytes))
    }

    /// Sends a JSON call to the owner's `/v1` API (for the MCP tools);
    /// an error answer becomes [`ServerError::Remote`].
    pub async fn json(
        &self,
        owner: &str,
        method: Method,
        path: &str,
        authorization: Option<&HeaderValue>,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value> {
        let mut headers = HeaderMap::new();
        if let Some(a) = authorization {
            headers.insert(axum::http::header::AUTHORIZATION, a.clone());
        }
        headers.insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let bytes = match body {
            Some(b) => axum::body::Bytes::from(serde_json::to_vec(b).unwrap_or_default()),
            None => axum::body::Bytes::new(),
        };
        let (status, _, body) = self.send(owner, method, path, &headers, bytes).await?;
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if status.is_success() {
            Ok(value)
        } else {
            Err(ServerError::Remote {
                status: status.as_u16(),
                body: value,
            })
        }
    }
}

/// The state of [`to_owner`]: the server's forwarder and body limit.
#[derive(Debug, Clone)]
pub struct Forwarding {
    /// How this node reaches the others; `None` (file store): nothing is
    /// forwarded.
    pub forwarder: Option<Forwarder>,
    /// Largest request body held for forwarding (`limits.max_body_bytes`).
    pub max_body_bytes: usize,
}

/// Middleware of the namespace routes: runs the request here and, when the
/// answer says another node owns the namespace, sends the request there.
pub async fn to_owner(State(state): State<Forwarding>, req: Request, next: Next) -> Response {
    let Some(forwarder) = state.forwarder.as_ref() else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let limit = state.max_body_bytes;
    let bytes = match to_bytes(body, limit).await {
        Ok(b) => b,
        Err(_) => {
            return ServerError::TooLarge(format!("request body over {limit} bytes"))
                .into_response()
        }
    };
    let method = parts.method.clone();
    let headers = parts.headers.clone();
    let forwarded = headers.contains_key(FORWARDED);
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| parts.uri.path().to_string());
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    let Some(OwnedBy(owner)) = response.extensions().get::<OwnedBy>().cloned() else {
        return response;
    };
    if forwarded {
        return ServerError::Busy(
            "the namespace is changing owner between nodes; retry shortly".into(),
        )
        .into_response();
    }
    match forwarder.send(&owner, method, &path, &headers, bytes).await {
        Ok((status, headers, body)) => {
            let mut out = Response::new(Body::from(body));
            *out.status_mut() = status;
            for (name, value) in headers.iter() {
                let keep = [
                    HeaderName::from_static("content-type"),
                    HeaderName::from_static("retry-after"),
                ];
                if keep.contains(name) {
                    out.headers_mut().insert(name.clone(), value.clone());
                }
            }
            out
        }
        Err(e) => e.into_response(),
    }
}
