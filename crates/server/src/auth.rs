//! Bearer keys and tenant scopes.
//!
//! A request names its key in `Authorization: Bearer TOKEN`; the server keeps
//! only SHA-256 hashes, so the configuration file holds no secret. A key's
//! scope is a list of namespace prefixes. Outside its scope a namespace does
//! not exist for the key: listing leaves it out, and reading, writing or
//! deleting it is `404 namespace_not_found`, the same answer as for a name
//! nobody uses, so a key cannot probe for other tenants' names. Creating a
//! namespace outside the scope is `403 forbidden` (that says nothing about
//! whether it exists).
//!
//! With no keys configured every caller has the whole scope, and the server
//! refuses to bind to anything but a loopback address.

use axum::http::HeaderMap;
use std::collections::HashMap;

use crate::config::{hash_key, ServerConfig};
use crate::{Result, ServerError};

/// Who is calling, and which namespaces they may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The key's configured name (`None` when the server has no keys).
    pub key: Option<String>,
    /// Namespace prefixes; `""` covers every namespace.
    pub prefixes: Vec<String>,
}

impl Caller {
    /// A caller that may use every namespace (no keys configured; stdio MCP).
    pub fn unrestricted() -> Self {
        Caller {
            key: None,
            prefixes: vec![String::new()],
        }
    }

    /// Whether `namespace` is inside the caller's scope.
    pub fn covers(&self, namespace: &str) -> bool {
        self.prefixes.iter().any(|p| namespace.starts_with(p))
    }
}

/// The caller, as the authentication layer ([`crate::app::authenticate`])
/// resolved it; a handler that takes a `Caller` cannot be reached without
/// one.
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ServerError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ServerError::Unauthorized("no authenticated caller".into()))
    }
}

/// The configured keys, by hash.
#[derive(Debug, Clone, Default)]
pub struct KeyTable {
    by_hash: HashMap<String, Caller>,
}

impl KeyTable {
    /// The keys of `config`.
    pub fn new(config: &ServerConfig) -> Self {
        let by_hash = config
            .keys
            .iter()
            .map(|k| {
                (
                    k.sha256.to_ascii_lowercase(),
                    Caller {
                        key: Some(k.name.clone()),
                        prefixes: k.prefixes.clone(),
                    },
                )
            })
            .collect();
        KeyTable { by_hash }
    }

    /// Whether any key is configured (authentication on).
    pub fn enabled(&self) -> bool {
        !self.by_hash.is_empty()
    }

    /// The caller a request's headers identify.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Caller> {
        if !self.enabled() {
            return Ok(Caller::unrestricted());
        }
        let header = headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| {
                ServerError::Unauthorized(
                    "missing `Authorization: Bearer <key>` header".to_string(),
                )
            })?;
        let value = header.to_str().map_err(|_| {
            ServerError::Unauthorized("the Authorization header is not ASCII".into())
        })?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ServerError::Unauthorized("expected `Authorization: Bearer <key>`".into())
            })?;
        self.by_hash
            .get(&hash_key(token))
            .cloned()
            .ok_or_else(|| ServerError::Unauthorized("unknown API key".into()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_resolve_to_their_scope_and_others_are_refused() {
        let table = KeyTable::new(&ServerConfig::new().with_key("a", "tok-a", &["a."]));
        let mut h = HeaderMap::new();
        assert_eq!(table.authenticate(&h).unwrap_err().code(), "unauthorized");
        h.insert("authorization", "Bearer tok-a".parse().unwrap());
        let c = table.authenticate(&h).unwrap();
        assert!(c.covers("a.x") && !c.covers("b.x") && !c.covers("a"));
        h.insert("authorization", "Bearer tok-b".parse().unwrap());
        assert_eq!(table.authenticate(&h).unwrap_err().code(), "unauthorized");
        assert!(Caller::unrestricted().covers("anything"));
    }
}
