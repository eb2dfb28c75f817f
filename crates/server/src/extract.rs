//! Request extractors whose rejections are the API's JSON errors: a body that
//! is not JSON, has the wrong shape or is too large, and a path segment that
//! is not UTF-8, each get a 4xx that says where the problem is.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::ServerError;

/// A JSON body, read with the path of any field that does not fit
/// (`events[3].kind: unknown variant ...`).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ServerError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ServerError::TooLarge(format!("request body too large: {}", e.body_text()))
            } else {
                ServerError::BadRequest(e.body_text())
            }
        })?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Parses `bytes` as `T`, naming the offending field on failure.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ServerError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ServerError::BadJson(
            "the body is empty; expected a JSON object".into(),
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            ServerError::BadJson(inner.to_string())
        } else {
            ServerError::BadJson(format!("at `{path}`: {inner}"))
        }
    })?;
    de.end().map_err(|e| {
        ServerError::BadJson(format!("trailing characters after the JSON value: {e}"))
    })?;
    Ok(value)
}

/// One path parameter, percent-decoded.
#[derive(Debug)]
pub struct ApiPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ApiPath {
    type Rejection = ServerError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(v) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| {
                ServerError::BadRequest(format!("bad path parameter: {}", e.body_text()))
            })?;
        Ok(ApiPath(v))
    }
}
