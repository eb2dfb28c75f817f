//! The server's configuration: API keys with their namespace scopes, and the
//! limits every request is checked against.
//!
//! It is the `[server]` table of the same TOML file as the models'
//! configuration (`submem serve --config FILE`), so one file configures a
//! deployment; [`split_config`] separates the two. [`redact_url`] hides the
//! password of a `store` URL in messages and logs.
//!
//! ```toml
//! [server]
//! max_batch = 1000
//!
//! [[server.keys]]
//! name = "alice"
//! # sha256 of the bearer token, hex (`submem serve --hash-key TOKEN` prints it)
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! prefixes = ["alice."]
//! ```

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

use crate::{Result, ServerError};

/// One API key: its hash and the namespace prefixes it may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKey {
    /// A name for logs (never the key itself).
    pub name: String,
    /// SHA-256 of the bearer token, lower-case hex.
    pub sha256: String,
    /// Namespace prefixes the key may create, see, read, write and delete.
    /// `""` covers every namespace.
    pub prefixes: Vec<String>,
}

/// Limits on requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Most events in one write.
    pub max_batch: usize,
    /// Most source ids in one forget.
    pub max_forget: usize,
    /// Largest text of one event or query, in bytes.
    pub max_text_bytes: usize,
    /// Most namespaces the server holds.
    pub max_namespaces: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 << 20,
            max_batch: 1000,
            max_forget: 10_000,
            max_text_bytes: 64 << 10,
            max_namespaces: 10_000,
        }
    }
}

/// The `[server]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// API keys; none means no authentication (and a loopback address only).
    pub keys: Vec<ApiKey>,
    /// Request limits.
    pub limits: Limits,
    /// Log records (writes and forgets) applied between two snapshots of a namespace.
    pub snapshot_every: u64,
    /// Milliseconds of applying records after which a namespace is
    /// snapshotted even before `snapshot_every` records: a cold open replays
    /// the unsnapshotted tail and pays that time again (embedding substrates
    /// recompute their vectors).
    pub snapshot_after_apply_ms: u64,
    /// Memory (MiB, as the open substrates report it) above which idle
    /// namespaces are closed, least recently used first; 0: no cap.
    pub max_resident_mb: u64,
    /// Memory (KiB) counted per open namespace on top of what its substrate
    /// reports: the fixed cost a substrate cannot see (allocator pages, spare
    /// map capacity, its writer task).
    pub namespace_overhead_kb: u64,
    /// Seconds without a request after which a namespace is snapshotted and
    /// closed; 0: never.
    pub idle_close_s: u64,
    /// Where namespaces are stored: `file` (the data directory, the default)
    /// or a `postgres://` URL shared by several nodes.
    pub store: String,
    /// This node's URL as other nodes reach it (PostgreSQL store only): a
    /// request for a namespace another node owns is forwarded there.
    pub advertise: Option<String>,
    /// Database sessions that hold this node's namespace locks and carry
    /// their appends (PostgreSQL store only).
    pub owner_sessions: usize,
    /// Seconds a request may take before it is answered 503 (background
    /// jobs are not bounded by it).
    pub request_timeout_s: u64,
    /// Bench output served to the inspector (`GET /v1/reports`): a run
    /// directory (`summary.json`, `items.jsonl`) or a directory of them.
    pub reports_dir: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            keys: Vec::new(),
            limits: Limits::default(),
            snapshot_every: 256,
            snapshot_after_apply_ms: 500,
            max_resident_mb: 2048,
            namespace_overhead_kb: 40,
            idle_close_s: 900,
            store: "file".into(),
            advertise: None,
            owner_sessions: 8,
            request_timeout_s: 120,
            reports_dir: None,
        }
    }
}

impl ServerConfig {
    /// A configuration with the default limits, no keys, the file store and
    /// a snapshot every 256 records.
    pub fn new() -> Self {
        ServerConfig::default()
    }

    /// Parses the `[server]` table's contents.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let c: ServerConfig =
            toml::from_str(text).map_err(|e| ServerError::Config(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// Adds a key given as the bearer token itself (tests and tools).
    pub fn with_key(mut self, name: &str, token: &str, prefixes: &[&str]) -> Self {
        self.keys.push(ApiKey {
            name: name.into(),
            sha256: hash_key(token),
            prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
        });
        self
    }

    /// Checks hashes and limits.
    pub fn validate(&self) -> Result<()> {
        for k in &self.keys {
            let ok = k.sha256.len() == 64 && k.sha256.bytes().all(|b| b.is_ascii_hexdigit());
            if !ok {
                return Err(ServerError::Config(format!(
                    "key {:?}: sha256 must be 64 hex digits (the hash of the token, not the token)",
                    k.name
                )));
            }
            if k.prefixes.is_empty() {
                return Err(ServerError::Config(format!(
                    "key {:?} has no prefixes: it could use no namespace",
                    k.name
                )));
            }
        }
        if let Some(dir) = &self.reports_dir {
            if !dir.is_dir() {
                return Err(ServerError::Config(format!(
                    "reports_dir {} is not a directory (point it at a `submem bench` output \
                     directory, or a directory of them)",
                    dir.display()
                )));
            }
        }
        if self.snapshot_every == 0 {
            return Err(ServerError::Config(
                "snapshot_every must be at least 1".into(),
            ));
        }
        if self.snapshot_after_apply_ms == 0 {
            return Err(ServerError::Config(
                "snapshot_after_apply_ms must be at least 1".into(),
            ));
        }
        if self.owner_sessions == 0 || self.owner_sessions > 256 {
            return Err(ServerError::Config(
                "owner_sessions must be in 1..=256".into(),
            ));
        }
        if self.request_timeout_s == 0 {
            return Err(ServerError::Config(
                "request_timeout_s must be at least 1".into(),
            ));
        }
        let store = self.store.as_str();
        let postgres = store.starts_with("postgres://") || store.starts_with("postgresql://");
        if store != "file" && !postgres {
            return Err(ServerError::Config(format!(
                "store must be `file` or a postgres:// URL, got {:?}",
                redact_url(store)
            )));
        }
        if let Some(url) = &self.advertise {
            let ok =
                (url.starts_with("http://") || url.starts_with("https://")) && !url.ends_with('/');
            if !ok {
                return Err(ServerError::Config(format!(
                    "advertise must be this node's base URL such as http://10.0.0.5:8080 \
                     (http or https, no trailing slash), got {url:?}"
                )));
            }
        }
        let l = &self.limits;
        if l.max_body_bytes < 1024 || l.max_batch == 0 || l.max_text_bytes == 0 {
            return Err(ServerError::Config(
                "limits: max_body_bytes must be at least 1024, max_batch and max_text_bytes at least 1"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// SHA-256 of a bearer token, as configured keys store it.
pub fn hash_key(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A URL with its password (if any) replaced, for messages and logs.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &userinfo[..colon],
                    &url[at..]
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Splits a combined TOML file into the server's table and the rest (the
/// models' configuration, returned as TOML text for
/// `submem_models::Config::from_toml_str`).
pub fn split_config(text: &str) -> Result<(ServerConfig, String)> {
    let mut table: toml::Table =
        toml::from_str(text).map_err(|e| ServerError::Config(e.to_string()))?;
    let server = match table.remove("server") {
        None => ServerConfig::new(),
        Some(toml::Value::Table(t)) => {
            let s = toml::to_string(&t).map_err(|e| ServerError::Config(e.to_string()))?;
            ServerConfig::from_toml_str(&s)?
        }
        Some(_) => return Err(ServerError::Config("[server] must be a table".into())),
    };
    let rest = toml::to_string(&table).map_err(|e| ServerError::Config(e.to_string()))?;
    Ok((server, rest))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn splits_server_table_from_models() {
        let text = format!(
            "[services]\nembedder = \"local\"\n\n[server]\nsnapshot_every = 8\n[[server.keys]]\nname = \"a\"\nsha256 = \"{}\"\nprefixes = [\"a.\"]\n",
            hash_key("t")
        );
        let (s, rest) = split_config(&text).unwrap();
        assert_eq!(s.snapshot_every, 8);
        assert_eq!(s.keys[0].prefixes, vec!["a.".to_string()]);
        assert!(rest.contains("embedder"), "{rest}");
        assert!(!rest.contains("server"), "{rest}");
    }

    #[test]
    fn store_and_advertise_are_checked_and_passwords_never_shown() {
        let e = ServerConfig::from_toml_str("store = \"mysql://u:hunter2@db/x\"\n").unwrap_err();
        assert!(e.to_string().contains("postgres://"), "{e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        let c = ServerConfig::from_toml_str(
            "store = \"postgres://u:pw@db:5432/x\"\nadvertise = \"http://10.0.0.5:8080\"\n",
        )
        .unwrap();
        assert_eq!(c.advertise.as_deref(), Some("http://10.0.0.5:8080"));
        for bad in ["10.0.0.5:8080", "http://10.0.0.5:8080/"] {
            let e = ServerConfig::from_toml_str(&format!("advertise = {bad:?}\n")).unwrap_err();
            assert!(e.to_string().contains("advertise"), "{e}");
        }
        assert_eq!(redact_url("postgres://u:pw@db/x"), "postgres://u:***@db/x");
    }

    #[test]
    fn refuses_a_token_in_place_of_its_hash() {
        let text = "[[keys]]\nname = \"a\"\nsha256 = \"secret\"\nprefixes = [\"a\"]\n";
        let e = ServerConfig::from_toml_str(text).unwrap_err();
        assert!(e.to_string().contains("64 hex digits"), "{e}");
    }
}
